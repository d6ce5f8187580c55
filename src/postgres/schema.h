// The PostgreSQL store's tables (docs/postgres.md). Private to recap::postgres.
//
// Versioned by the one row of `recap_schema`. kMigrations[i] moves a schema from version i to
// version i + 1; opening a store runs the ones it lacks in one transaction, under an advisory
// lock. "{S}" stands for the quoted schema name.
#ifndef RECAP_SRC_POSTGRES_SCHEMA_H_
#define RECAP_SRC_POSTGRES_SCHEMA_H_

namespace recap {
namespace postgres_internal {

// The tables recap creates in its schema. One of these names in a schema without
// `recap_schema` means the schema is somebody else's: recap refuses it and changes nothing.
inline constexpr const char* kTables[] = {"recap_schema", "sessions", "messages", "commits",
                                          "memories"};

// Version 1.
//
// recap_schema  one row: the schema's version and the recap that last migrated it.
// sessions      one row per session: its name, version (moves by one on every write),
//               rewrite_version (the last version that did more than append), and how many
//               compactions / reductions / recoveries it has had, and the next free position
//               (kept here, not computed, so that a writer that waited for the row's lock
//               reads it as the previous writer left it). Writers lock this row.
// messages      one row per stored message, in store order (seq). `position` orders the
//               active transcript and is NULL once a message is retired; `replaced_by` then
//               says what retired it ("compaction:3", "reduction:1"). `stored_version` is the
//               session version that stored it (what LoadChanges reads). `body` is the message
//               in recap's binary form (src/core/internal/recap_internal/body_codec.h), the same
//               bytes the SQLite store writes; role, summary and chars are there for people reading
//               the table.
// commits       every compaction, reduction and recovery: what it did, when, at which version.
// memories      the memory plugin's memories by scope (unique by the text's md5, so that long
//               texts fit the index).
inline constexpr const char* kMigrations[] = {
    R"sql(
CREATE TABLE {S}.sessions (
  session_id      bigserial   PRIMARY KEY,
  name            text        NOT NULL UNIQUE,
  version         bigint      NOT NULL DEFAULT 0,
  rewrite_version bigint      NOT NULL DEFAULT 0,
  compactions     bigint      NOT NULL DEFAULT 0,
  reductions      bigint      NOT NULL DEFAULT 0,
  recoveries      bigint      NOT NULL DEFAULT 0,
  next_position   bigint      NOT NULL DEFAULT 0,
  created_at      timestamptz NOT NULL DEFAULT now()
);
CREATE TABLE {S}.messages (
  seq            bigserial   PRIMARY KEY,
  session_id     bigint      NOT NULL REFERENCES {S}.sessions (session_id),
  message_id     text        NOT NULL,
  position       bigint,
  stored_version bigint      NOT NULL,
  replaced_by    text,
  role           text        NOT NULL,
  summary        boolean     NOT NULL,
  chars          bigint      NOT NULL,
  stored_at      timestamptz NOT NULL DEFAULT now(),
  body           bytea       NOT NULL
);
CREATE UNIQUE INDEX messages_active_position ON {S}.messages (session_id, position)
  WHERE position IS NOT NULL;
CREATE UNIQUE INDEX messages_active_id ON {S}.messages (session_id, message_id)
  WHERE position IS NOT NULL;
CREATE INDEX messages_active_stored ON {S}.messages (session_id, stored_version)
  WHERE position IS NOT NULL;
CREATE INDEX messages_history ON {S}.messages (session_id, seq);
CREATE TABLE {S}.commits (
  commit_id  bigserial   PRIMARY KEY,
  session_id bigint      NOT NULL REFERENCES {S}.sessions (session_id),
  version    bigint      NOT NULL,
  kind       text        NOT NULL,
  number     bigint      NOT NULL,
  reason     text,
  retired    bigint      NOT NULL,
  added      bigint      NOT NULL,
  at         timestamptz NOT NULL DEFAULT now()
);
CREATE TABLE {S}.memories (
  memory_id bigserial   PRIMARY KEY,
  scope     text        NOT NULL,
  text      text        NOT NULL,
  added_at  timestamptz NOT NULL DEFAULT now()
);
CREATE UNIQUE INDEX memories_scope_text ON {S}.memories (scope, md5(text));
)sql",
    // Version 2: what the Compactor learned about a session (R12.5), one row per session that
    // has any; advice, not content (written with synchronous_commit off).
    R"sql(
CREATE TABLE {S}.learned (
  session_id bigint      PRIMARY KEY REFERENCES {S}.sessions (session_id),
  state      text        NOT NULL,
  updated_at timestamptz NOT NULL DEFAULT now()
);
)sql",
    // Version 3: getting it back (R18). `turn` on each message (HistoryEntry::turn) and the
    // session's count of turn starts; the places each compaction or reduction changed, so that
    // it can be undone (`span_seqs`: the seqs it retired or kept, in their places' order;
    // `added_seqs`: the seqs it added, both comma-separated; `undone_by`: the number of the undo
    // that took it back), and the session's count of undos; `search`, each message's searchable
    // text as a tsvector ('simple' configuration, pg_search.h), written by the INSERT that
    // stores the message, with a GIN index. The migration fills `turn`, `sessions.turns` and
    // `search` for the messages already stored (pg_schema.cc, BackfillRecall). Commits made
    // before it record no places and cannot be undone.
    R"sql(
ALTER TABLE {S}.sessions ADD COLUMN turns bigint NOT NULL DEFAULT 0;
ALTER TABLE {S}.sessions ADD COLUMN undos bigint NOT NULL DEFAULT 0;
ALTER TABLE {S}.messages ADD COLUMN turn bigint NOT NULL DEFAULT 0;
ALTER TABLE {S}.messages ADD COLUMN search tsvector;
ALTER TABLE {S}.commits ADD COLUMN span_seqs text;
ALTER TABLE {S}.commits ADD COLUMN added_seqs text;
ALTER TABLE {S}.commits ADD COLUMN undone_by bigint;
CREATE INDEX messages_search ON {S}.messages USING gin (search);
)sql",
};

// The version that added `turn` and `search`: the migration to it fills them for the messages
// already stored.
inline constexpr int kRecallSchemaVersion = 3;

inline constexpr int kSchemaVersion =
    static_cast<int>(sizeof(kMigrations) / sizeof(kMigrations[0]));

}  // namespace postgres_internal
}  // namespace recap

#endif  // RECAP_SRC_POSTGRES_SCHEMA_H_
