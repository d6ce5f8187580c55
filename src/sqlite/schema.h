// The SQLite store's schema (docs/sqlite-store.md). Private to recap::sqlite.
//
// Versioned with PRAGMA user_version. kMigrations[i] moves a database from version i to
// version i + 1; opening a file runs the ones it lacks, all in one transaction.
#ifndef RECAP_SQLITE_SCHEMA_H_
#define RECAP_SQLITE_SCHEMA_H_

namespace recap {
namespace sqlite_internal {

// Version 1.
//
// sessions   one row per session: its name, version (moves by one on every write),
//            rewrite_version (the last version that did more than append), and how many
//            compactions / reductions / recoveries it has had.
// messages   one row per stored message, in store order (seq). `position` orders the active
//            transcript and is NULL once a message is retired; `replaced_by` then says what
//            retired it ("compaction:3", "reduction:1"). `stored_version` is the session
//            version that stored it (what LoadChanges reads). role, summary, chars and
//            message_id are there for people reading the file; the message itself is in
//            bodies.
// bodies     the message, encoded (src/core/internal/recap_internal/body_codec.h), written once and
// never changed. commits    every compaction, reduction and recovery: what it did, when, at which
// version. memories   the memory plugin's memories by scope.
inline constexpr const char* kMigrations[] = {
    R"sql(
CREATE TABLE sessions (
  session_id      INTEGER PRIMARY KEY,
  name            TEXT    NOT NULL UNIQUE,
  version         INTEGER NOT NULL DEFAULT 0,
  rewrite_version INTEGER NOT NULL DEFAULT 0,
  compactions     INTEGER NOT NULL DEFAULT 0,
  reductions      INTEGER NOT NULL DEFAULT 0,
  recoveries      INTEGER NOT NULL DEFAULT 0,
  created_at      TEXT    NOT NULL
);
CREATE TABLE messages (
  seq            INTEGER PRIMARY KEY,
  session_id     INTEGER NOT NULL REFERENCES sessions (session_id),
  message_id     TEXT    NOT NULL,
  position       INTEGER,
  stored_version INTEGER NOT NULL,
  replaced_by    TEXT,
  role           TEXT    NOT NULL,
  summary        INTEGER NOT NULL,
  chars          INTEGER NOT NULL,
  stored_at      TEXT    NOT NULL
);
CREATE UNIQUE INDEX messages_active_position ON messages (session_id, position)
  WHERE position IS NOT NULL;
CREATE UNIQUE INDEX messages_active_id ON messages (session_id, message_id)
  WHERE position IS NOT NULL;
CREATE INDEX messages_active_stored ON messages (session_id, stored_version)
  WHERE position IS NOT NULL;
CREATE INDEX messages_history ON messages (session_id, seq);
CREATE TABLE bodies (
  seq  INTEGER PRIMARY KEY REFERENCES messages (seq),
  body BLOB NOT NULL
);
CREATE TABLE commits (
  commit_id  INTEGER PRIMARY KEY,
  session_id INTEGER NOT NULL REFERENCES sessions (session_id),
  version    INTEGER NOT NULL,
  kind       TEXT    NOT NULL,
  number     INTEGER NOT NULL,
  reason     TEXT,
  retired    INTEGER NOT NULL,
  added      INTEGER NOT NULL,
  at         TEXT    NOT NULL
);
CREATE TABLE memories (
  memory_id INTEGER PRIMARY KEY,
  scope     TEXT NOT NULL,
  text      TEXT NOT NULL,
  added_at  TEXT NOT NULL,
  UNIQUE (scope, text)
);
)sql",
    // Version 2: what the Compactor learned about a session (R12.5), one row per session that
    // has any, written with relaxed durability (it is advice, never content). A recap that
    // knows version 1 only reads a version-1 file; this one reads both (a file opened
    // read-only is not migrated, and has no learned state).
    R"sql(
CREATE TABLE learned (
  session_id INTEGER PRIMARY KEY REFERENCES sessions (session_id),
  state      TEXT    NOT NULL,
  updated_at TEXT    NOT NULL
);
)sql",
    // Version 3: getting it back (R18). `turn` on each message (HistoryEntry::turn) and the
    // session's count of turn starts; the places each compaction or reduction changed, so that
    // it can be undone (`span_seqs`: the seqs it retired or kept, in their places' order;
    // `added_seqs`: the seqs it added; `undone_by`: the undo that took it back), and the
    // session's count of undos; `recall_index`, a contentless FTS5 index of messages'
    // searchable text (rowid = seq), and `sessions.indexed_seq`, the last seq of the session it
    // holds. The index is written when the session is first searched after new messages, not
    // with each append: an FTS5 insert in every small transaction halved the append rate
    // (R11.5). The migration fills `turn` and the index for the messages already stored
    // (recall_index.h, BackfillRecall). Commits made before it record no places and cannot be
    // undone.
    R"sql(
ALTER TABLE sessions ADD COLUMN turns INTEGER NOT NULL DEFAULT 0;
ALTER TABLE sessions ADD COLUMN undos INTEGER NOT NULL DEFAULT 0;
ALTER TABLE sessions ADD COLUMN indexed_seq INTEGER NOT NULL DEFAULT 0;
ALTER TABLE messages ADD COLUMN turn INTEGER NOT NULL DEFAULT 0;
ALTER TABLE commits ADD COLUMN span_seqs TEXT;
ALTER TABLE commits ADD COLUMN added_seqs TEXT;
ALTER TABLE commits ADD COLUMN undone_by INTEGER;
CREATE VIRTUAL TABLE recall_index USING fts5 (
  text, content = '', tokenize = 'unicode61 remove_diacritics 2'
);
)sql",
    // Version 4: what `recap prepare` keeps so that the next one, in a new process, need not
    // decode the session (src/cli/prepare_kept.h). `encodings`: a message's encoded form in a wire
    // format, as the codec wrote it, under the key seq * 4 + the format (0 openai-chat,
    // 1 anthropic, 2 openai-responses, 3 recap): a table keyed by rowid keeps a body of up to
    // about 4 KB on its own page, which a read hands over without a copy. A message's row
    // never changes, so neither does its encoding. `prepare_memos`: per session and format,
    // the command's account of the session as its last prepare left it (opaque here). Both are
    // a cache, written lazily: losing them costs one slower prepare, never a message. Nothing
    // is backfilled.
    R"sql(
CREATE TABLE encodings (
  key  INTEGER PRIMARY KEY,
  body BLOB    NOT NULL
);
CREATE TABLE prepare_memos (
  session_id INTEGER NOT NULL REFERENCES sessions (session_id),
  format     INTEGER NOT NULL,
  memo       TEXT    NOT NULL,
  PRIMARY KEY (session_id, format)
) WITHOUT ROWID;
)sql",
};

// The version that added `turn` and `recall_index`: a file opened read-only below it is
// searched by a scan, its turns counted as it is read.
inline constexpr int kRecallSchemaVersion = 3;

inline constexpr int kSchemaVersion =
    static_cast<int>(sizeof(kMigrations) / sizeof(kMigrations[0]));

}  // namespace sqlite_internal
}  // namespace recap

#endif  // RECAP_SQLITE_SCHEMA_H_
