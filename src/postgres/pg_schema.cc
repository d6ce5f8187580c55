#include "pg_schema.h"

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

#include "pg_search.h"
#include "recap_internal/body_codec.h"
#include "recap_internal/history_search.h"
#include "recap_internal/remedy_text.h"
#include "recap_internal/store_rules.h"
#include "schema.h"

namespace recap {
inline namespace v0 {
namespace postgres_internal {

namespace {

// Fills `messages.turn`, `messages.search` and `sessions.turns` for every message stored before
// version 3, inside the migration's transaction: the messages in store order, session by
// session, a chunk at a time (a chunk's updates pipelined, one round trip). A body that cannot
// be decoded is left as it is (turn 0, no search text; the store reports it when the message is
// read), as the SQLite store's migration does.
void BackfillRecall(Connection& c, const std::vector<std::string>& texts) {
  constexpr std::int64_t kChunk = 256;                        // messages read at once
  constexpr std::size_t kFlushBytes = std::size_t{16} << 20;  // text sent at once, at most
  std::int64_t after_session = -1;
  std::int64_t after_seq = -1;
  std::int64_t session = -1;
  std::uint64_t count = 0;
  auto close = [&] {
    if (session < 0) return;
    Params p;
    p.Int(session).Int(static_cast<std::int64_t>(count));
    c.Run(kBackfillTurns, texts, p);
  };
  for (;;) {
    Params rp;
    rp.Int(after_session).Int(after_seq).Int(kChunk);
    ResultPtr rows = c.Run(kBackfillRead, texts, rp);
    const int n = PQntuples(rows.get());
    if (n == 0) break;
    // Reserved: a Params points into its own strings, which a reallocation would copy away.
    std::vector<Params> sets;
    sets.reserve(static_cast<std::size_t>(n));
    std::size_t pending = 0;  // the bytes of text in `sets`
    auto flush = [&] {
      if (sets.empty()) return;
      std::size_t failed = 0;
      c.RunPipelined(kBackfillWrite, texts, sets, &failed);
      sets.clear();
      pending = 0;
    };
    for (int i = 0; i < n; ++i) {
      const std::int64_t seq = GetInt(rows.get(), i, 0);
      const std::int64_t sid = GetInt(rows.get(), i, 1);
      after_session = sid;
      after_seq = seq;
      if (sid != session) {
        close();
        session = sid;
        count = 0;
      }
      Result<Message> m = internal::DecodeBody(GetView(rows.get(), i, 2));
      if (!m.ok()) continue;
      count = internal::TurnOf(*m, count);
      sets.emplace_back();
      sets.back().Int(seq).Int(static_cast<std::int64_t>(count));
      const std::string text = IndexedText(internal::SearchableText(*m));
      if (text.empty()) {
        sets.back().Null();
      } else {
        sets.back().Text(text);
      }
      pending += text.size();
      if (pending >= kFlushBytes) flush();
    }
    flush();
    if (n < kChunk) break;
  }
  close();
}

}  // namespace

Status EnsureSchema(Pool& pool) {
  const ConnectSpec& spec = pool.spec();
  const std::string q = spec.quoted_schema;
  return Call(pool, "preparing schema " + q, true, [&](Connection& c) {
    Params key;
    key.Text("recap schema " + spec.schema);
    // Hosts starting together wait here for the first to finish.
    ResultPtr locked(PQexecParams(c.raw(), "SELECT pg_advisory_xact_lock(hashtextextended($1, 0))",
                                  1, nullptr, key.values(), key.lengths(), key.formats(), 0),
                     &PQclear);
    c.Check(locked.get());
    // Which of recap's tables the schema already has.
    Params names;
    names.Text(spec.schema);
    ResultPtr tables(
        PQexecParams(c.raw(),
                     "SELECT c.relname::text FROM pg_class c JOIN pg_namespace n ON n.oid = "
                     "c.relnamespace WHERE n.nspname = $1 AND c.relkind IN ('r', 'p', 'v', 'm', "
                     "'f') ORDER BY 1",
                     1, nullptr, names.values(), names.lengths(), names.formats(), 0),
        &PQclear);
    c.Check(tables.get());
    std::unordered_set<std::string> present;
    for (int i = 0; i < PQntuples(tables.get()); ++i)
      present.insert(PQgetvalue(tables.get(), i, 0));
    int version = 0;
    if (present.count("recap_schema")) {
      ResultPtr v(PQexec(c.raw(), ("SELECT version FROM " + q + ".recap_schema").c_str()),
                  &PQclear);
      if (PQresultStatus(v.get()) != PGRES_TUPLES_OK || PQntuples(v.get()) != 1) {
        internal::RemedyText m("recap postgres store (" + spec.display + "): schema " + q +
                               " has a recap_schema table that is not recap's (it does not "
                               "hold one version). recap leaves it as it is; ");
        m.Remedy("postgres.other_schema", "choose another PostgresStoreOptions.schema");
        throw Abort{m.ToStatus(StatusCode::kInvalidArgument)};
      }
      version = std::atoi(PQgetvalue(v.get(), 0, 0));
      if (version > kSchemaVersion) {
        throw Abort{Status::Corruption("recap postgres store (" + spec.display + "): schema " + q +
                                       " has version " + std::to_string(version) +
                                       ", written by a newer recap; this recap reads versions "
                                       "up to " +
                                       std::to_string(kSchemaVersion) +
                                       ". Upgrade recap to use it (it was left as it is)")};
      }
    } else if (spec.read_only) {
      internal::RemedyText m("recap postgres store (" + spec.display + "): schema " + q +
                             " holds no recap sessions yet (it has no recap tables), and the "
                             "store was opened read-only, so they were not created. ");
      m.Remedy("postgres.store_first",
               "Store a session first (open it without PostgresStoreOptions.read_only), or check "
               "PostgresStoreOptions.schema");
      throw Abort{m.ToStatus(StatusCode::kNotFound)};
    } else {
      std::string foreign;
      for (const char* t : kTables) {
        if (present.count(t)) foreign += (foreign.empty() ? "" : ", ") + std::string(t);
      }
      if (!foreign.empty()) {
        internal::RemedyText m("recap postgres store (" + spec.display + "): schema " + q +
                               " already has tables named " + foreign +
                               " that are not recap's (there is no recap_schema table). recap "
                               "leaves them as they are; ");
        m.Remedy("postgres.other_schema",
                 "set PostgresStoreOptions.schema to a schema of recap's own, e.g. \"recap\"");
        throw Abort{m.ToStatus(StatusCode::kInvalidArgument)};
      }
      c.Simple("CREATE SCHEMA IF NOT EXISTS " + q);
      c.Simple("CREATE TABLE " + q +
               ".recap_schema (version integer NOT NULL, migrated_by text "
               "NOT NULL, migrated_at timestamptz NOT NULL DEFAULT now())");
      c.Simple("INSERT INTO " + q + ".recap_schema (version, migrated_by) VALUES (0, '')");
    }
    if (version == kSchemaVersion) return;
    if (spec.read_only) {
      internal::RemedyText m("recap postgres store (" + spec.display + "): schema " + q +
                             " has version " + std::to_string(version) +
                             ", written by an older recap, and the store was opened read-only, "
                             "so it was not migrated to version " +
                             std::to_string(kSchemaVersion) + ". ");
      m.Remedy("postgres.migrate",
               "Open it once without PostgresStoreOptions.read_only to migrate it");
      throw Abort{m.ToStatus(StatusCode::kFailedPrecondition)};
    }
    for (int v = version; v < kSchemaVersion; ++v) {
      c.Simple(WithSchema(kMigrations[v], q));
      // Version 3's turns and search text are filled by reading the messages already stored.
      if (v + 1 == kRecallSchemaVersion) BackfillRecall(c, pool.texts());
    }
    c.Simple("UPDATE " + q + ".recap_schema SET version = " + std::to_string(kSchemaVersion) +
             ", migrated_by = 'recap " + std::string(Version()) + "', migrated_at = now()");
  });
}

}  // namespace postgres_internal
}  // namespace v0
}  // namespace recap
