#include "pg_connection.h"

#include <algorithm>
#include <cctype>
#include <condition_variable>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <mutex>
#include <unordered_set>

#include "recap/transcript.h"
#include "recap/version.h"

#include "recap_internal/store_rules.h"
#include "schema.h"

namespace recap {
inline namespace v0 {
namespace postgres_internal {

std::int64_t GetInt(const PGresult* r, int row, int col) {
  const auto* p = reinterpret_cast<const unsigned char*>(PQgetvalue(r, row, col));
  const int len = PQgetlength(r, row, col);
  std::uint64_t v = 0;
  for (int i = 0; i < len; ++i) v = (v << 8) | p[i];
  switch (len) {
    case 8: return static_cast<std::int64_t>(v);
    case 4: return static_cast<std::int32_t>(static_cast<std::uint32_t>(v));
    case 2: return static_cast<std::int16_t>(static_cast<std::uint16_t>(v));
    case 1: return static_cast<std::int64_t>(v);  // bool
    default:
      throw Abort{Status::Internal("recap postgres store: an integer column came back with " +
                                   std::to_string(len) + " bytes")};
  }
}

std::string_view GetView(const PGresult* r, int row, int col) {
  return std::string_view(PQgetvalue(r, row, col),
                          static_cast<std::size_t>(PQgetlength(r, row, col)));
}

bool IsNull(const PGresult* r, int row, int col) { return PQgetisnull(r, row, col) != 0; }

double GetDouble(const PGresult* r, int row, int col) {
  const auto* p = reinterpret_cast<const unsigned char*>(PQgetvalue(r, row, col));
  if (PQgetlength(r, row, col) != 8) {
    throw Abort{Status::Internal("recap postgres store: a float8 column came back with " +
                                 std::to_string(PQgetlength(r, row, col)) + " bytes")};
  }
  std::uint64_t v = 0;
  for (int i = 0; i < 8; ++i) v = (v << 8) | p[i];
  double d = 0;
  std::memcpy(&d, &v, sizeof d);
  return d;
}

const char* const kStatementText[kStatementCount] = {
    // kLoad: $1 name, $2 since (-1: everything). One statement: one snapshot. Since a rewrite
    // after `since`, the whole active transcript comes back (appended_only false). The rows
    // come in any order, with their positions: the store sorts them itself, which costs
    // microseconds, where a server-side sort of a long session spills to disk under the
    // default work_mem.
    // The learned state (R12.5) rides on every row; it is NULL for most sessions, and small.
    "SELECT s.version, s.rewrite_version, m.seq, m.chars, m.body, m.position, l.state FROM "
    "{S}.sessions s LEFT JOIN {S}.learned l ON l.session_id = s.session_id "
    "LEFT JOIN {S}.messages m ON m.session_id = s.session_id AND m.position IS NOT NULL AND "
    "m.stored_version > (CASE WHEN $2::bigint >= s.rewrite_version THEN $2::bigint ELSE -1 END) "
    "WHERE s.name = $1",
    // kFindForUpdate: the session's row, locked. A writer that waited for the lock reads the
    // row as the previous writer left it (only the row: a subquery here would see the
    // statement's older snapshot, hence next_position lives in the row).
    "SELECT session_id, version, rewrite_version, compactions, reductions, recoveries, "
    "next_position, turns, undos FROM {S}.sessions WHERE name = $1 FOR UPDATE",
    "INSERT INTO {S}.sessions (name) VALUES ($1) ON CONFLICT (name) DO NOTHING",
    // kInsertMessage: $9 turn, $10 the searchable text (pg_search.h, IndexedText; NULL: none).
    "INSERT INTO {S}.messages (session_id, message_id, position, stored_version, role, summary, "
    "chars, body, turn, search) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, "
    "to_tsvector('simple'::regconfig, $10::text)) RETURNING seq",
    // kSetVersion: $4 the session's turns.
    "UPDATE {S}.sessions SET version = $2, next_position = $3, turns = $4 WHERE session_id = $1",
    "UPDATE {S}.sessions SET version = $2, rewrite_version = $2, compactions = $3 WHERE "
    "session_id = $1",
    "UPDATE {S}.sessions SET version = $2, rewrite_version = $2, reductions = $3 WHERE "
    "session_id = $1",
    "UPDATE {S}.sessions SET version = $2, rewrite_version = $2, recoveries = $3, "
    "next_position = $4 WHERE session_id = $1",
    // kLogCommit: $8 span_seqs, $9 added_seqs (NULL but for compactions and reductions).
    "INSERT INTO {S}.commits (session_id, version, kind, number, reason, retired, added, "
    "span_seqs, added_seqs) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)",
    "SELECT message_id, position, seq FROM {S}.messages WHERE session_id = $1 AND position IS "
    "NOT NULL ORDER BY position LIMIT $2",
    "SELECT true FROM {S}.messages WHERE session_id = $1 AND message_id = $2 AND position IS NOT "
    "NULL",
    "UPDATE {S}.messages SET position = NULL, replaced_by = $2 WHERE session_id = $1 AND "
    "position IS NOT NULL AND position <= $3",
    "SELECT seq, position, turn FROM {S}.messages WHERE session_id = $1 AND message_id = $2 AND "
    "position IS NOT NULL",
    "UPDATE {S}.messages SET position = NULL, replaced_by = $2 WHERE seq = $1",
    "SELECT seq, message_id FROM {S}.messages WHERE session_id = $1 AND position IS NOT NULL "
    "ORDER BY position",
    // kMovePositions: $1 seqs, $2 positions, as array literals.
    "UPDATE {S}.messages m SET position = v.position FROM unnest($1::bigint[], $2::bigint[]) AS "
    "v(seq, position) WHERE m.seq = v.seq",
    "SELECT m.seq, m.replaced_by, m.body, m.turn FROM {S}.messages m JOIN {S}.sessions s ON "
    "s.session_id = m.session_id WHERE s.name = $1 ORDER BY m.seq",
    // Byte order, whatever the database's collation: the same order as every other store.
    "SELECT name FROM {S}.sessions ORDER BY name COLLATE \"C\"",
    "INSERT INTO {S}.memories (scope, text) VALUES ($1, $2) ON CONFLICT (scope, md5(text)) DO "
    "NOTHING",
    "SELECT text FROM {S}.memories WHERE scope = $1 ORDER BY memory_id",
    "SELECT version FROM {S}.sessions WHERE name = $1",
    // kRestoreKept: $1 seq, $2 position: a message a compaction keeps (R12.1) is active again.
    "UPDATE {S}.messages SET position = $2, replaced_by = NULL WHERE seq = $1",
    // kSaveLearned: $1 name, $2 state; nothing for a session never written.
    "INSERT INTO {S}.learned (session_id, state) SELECT session_id, $2 FROM {S}.sessions WHERE "
    "name = $1 ON CONFLICT (session_id) DO UPDATE SET state = excluded.state, updated_at = now()",
    // kClearLearned: $1 name.
    "DELETE FROM {S}.learned l USING {S}.sessions s WHERE l.session_id = s.session_id AND "
    "s.name = $1",
    // kMarkUndo: $3 the session's undos.
    "UPDATE {S}.sessions SET version = $2, rewrite_version = $2, undos = $3 WHERE "
    "session_id = $1",
    // kLastRewrite: $1 session_id: the newest compaction or reduction not undone.
    "SELECT commit_id, kind, number, reason, span_seqs, added_seqs FROM {S}.commits WHERE "
    "session_id = $1 AND kind IN ('compaction', 'reduction') AND undone_by IS NULL ORDER BY "
    "commit_id DESC LIMIT 1",
    // kSeqPlaces: $1 session_id, $2 seqs (array literal): where each stands now.
    "SELECT seq, position, message_id FROM {S}.messages WHERE session_id = $1 AND seq = "
    "ANY($2::bigint[])",
    // kFirstOther: $1 session_id, $2 seqs: the first active position held by none of them.
    "SELECT position FROM {S}.messages WHERE session_id = $1 AND position IS NOT NULL AND seq "
    "<> ALL($2::bigint[]) ORDER BY position LIMIT 1",
    // kRetireSeqs: $1 seqs, $2 replaced_by.
    "UPDATE {S}.messages SET position = NULL, replaced_by = $2 WHERE seq = ANY($1::bigint[])",
    // kUnplaceSeqs: $1 seqs: out of the transcript for a moment (their places are reused).
    "UPDATE {S}.messages SET position = NULL WHERE seq = ANY($1::bigint[])",
    // kPlaceSeqs: $1 seqs, $2 positions, as array literals: active again there.
    "UPDATE {S}.messages m SET position = v.position, replaced_by = NULL FROM "
    "unnest($1::bigint[], $2::bigint[]) AS v(seq, position) WHERE m.seq = v.seq",
    // kMarkUndone: $1 commit_id, $2 the undo's number.
    "UPDATE {S}.commits SET undone_by = $2 WHERE commit_id = $1",
    "SELECT session_id FROM {S}.sessions WHERE name = $1",
    // kSearchIds: $1 session_id, $2 message_id, $3 active ones too.
    "SELECT seq, replaced_by, body, turn FROM {S}.messages WHERE session_id = $1 AND message_id "
    "= $2 AND ($3::boolean OR position IS NULL) ORDER BY seq",
    // kSearchText: $1 session_id, $2 websearch_to_tsquery text (pg_search.h, QueryText),
    // $3 active ones too, $4 .. $5 the turns, $6 the limit. Best first (ties: newer first).
    "SELECT m.seq, m.replaced_by, m.body, m.turn, ts_rank_cd(m.search, q)::float8 AS rank FROM "
    "websearch_to_tsquery('simple'::regconfig, $2::text) AS q, {S}.messages m WHERE "
    "m.session_id = $1 AND m.search @@ q AND ($3::boolean OR m.position IS NULL) AND m.turn "
    "BETWEEN $4 AND $5 ORDER BY rank DESC, m.seq DESC LIMIT $6",
    // kSearchTurns: $1 session_id, $2 active ones too, $3 .. $4 the turns, $5 the limit.
    "SELECT seq, replaced_by, body, turn FROM {S}.messages WHERE session_id = $1 AND "
    "($2::boolean OR position IS NULL) AND turn BETWEEN $3 AND $4 ORDER BY seq LIMIT $5",
    // kBackfillRead: $1 session_id, $2 seq: the next $3 messages after them (the migration to
    // version 3).
    "SELECT seq, session_id, body FROM {S}.messages WHERE (session_id, seq) > ($1, $2) ORDER "
    "BY session_id, seq LIMIT $3",
    // kBackfillWrite: $1 seq, $2 turn, $3 the searchable text (NULL: none).
    "UPDATE {S}.messages SET turn = $2, search = to_tsvector('simple'::regconfig, $3::text) "
    "WHERE seq = $1",
    // kBackfillTurns: $1 session_id, $2 turns.
    "UPDATE {S}.sessions SET turns = $2 WHERE session_id = $1",
};

std::string WithSchema(std::string sql, const std::string& quoted_schema) {
  for (std::size_t at = sql.find("{S}"); at != std::string::npos; at = sql.find("{S}", at)) {
    sql.replace(at, 3, quoted_schema);
    at += quoted_schema.size();
  }
  return sql;
}

}  // namespace postgres_internal
}  // namespace v0
}  // namespace recap
