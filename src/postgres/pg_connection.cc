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
    "next_position FROM {S}.sessions WHERE name = $1 FOR UPDATE",
    "INSERT INTO {S}.sessions (name) VALUES ($1) ON CONFLICT (name) DO NOTHING",
    "INSERT INTO {S}.messages (session_id, message_id, position, stored_version, role, summary, "
    "chars, body) VALUES ($1, $2, $3, $4, $5, $6, $7, $8)",
    "UPDATE {S}.sessions SET version = $2, next_position = $3 WHERE session_id = $1",
    "UPDATE {S}.sessions SET version = $2, rewrite_version = $2, compactions = $3 WHERE "
    "session_id = $1",
    "UPDATE {S}.sessions SET version = $2, rewrite_version = $2, reductions = $3 WHERE "
    "session_id = $1",
    "UPDATE {S}.sessions SET version = $2, rewrite_version = $2, recoveries = $3, "
    "next_position = $4 WHERE session_id = $1",
    "INSERT INTO {S}.commits (session_id, version, kind, number, reason, retired, added) VALUES "
    "($1, $2, $3, $4, $5, $6, $7)",
    "SELECT message_id, position, seq FROM {S}.messages WHERE session_id = $1 AND position IS "
    "NOT NULL ORDER BY position LIMIT $2",
    "SELECT true FROM {S}.messages WHERE session_id = $1 AND message_id = $2 AND position IS NOT "
    "NULL",
    "UPDATE {S}.messages SET position = NULL, replaced_by = $2 WHERE session_id = $1 AND "
    "position IS NOT NULL AND position <= $3",
    "SELECT seq, position FROM {S}.messages WHERE session_id = $1 AND message_id = $2 AND "
    "position IS NOT NULL",
    "UPDATE {S}.messages SET position = NULL, replaced_by = $2 WHERE seq = $1",
    "SELECT seq, message_id FROM {S}.messages WHERE session_id = $1 AND position IS NOT NULL "
    "ORDER BY position",
    // kMovePositions: $1 seqs, $2 positions, as array literals.
    "UPDATE {S}.messages m SET position = v.position FROM unnest($1::bigint[], $2::bigint[]) AS "
    "v(seq, position) WHERE m.seq = v.seq",
    "SELECT m.seq, m.replaced_by, m.body FROM {S}.messages m JOIN {S}.sessions s ON "
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
