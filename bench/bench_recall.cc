// Issue 38: recall (SPEC R18.1) on workload W1 (w1_workload.h, 20,000 messages by default), all
// but the last two retired by one compaction, through SessionStore::SearchHistory — against a
// scan of the same rows, in one run, per store:
//
//   recall/<store>/index_build   the first search after the whole history was stored: the SQLite
//                                store writes its recall index then (all N messages, once);
//                                PostgreSQL wrote it with each message (0 here).
//   recall/<store>/index_turn    a search right after 10 more messages: SQLite indexes those 10.
//   recall/<store>/search/word   SearchHistory of one word (limit 20, best first), the words
//                                drawn from the retired messages' text: W1's vocabulary is
//                                small, so each matches about a third of the history (the
//                                worst case: thousands of matches ranked); p50 and p99 per query.
//   recall/<store>/search/path   the same for the paths W1's tool calls name (src/<8 chars>.cc):
//                                rare terms, as an identifier a model recalls usually is.
//   recall/<store>/scan/<kind>   the same terms found by a scan of the same rows: SQLite
//                                `instr(body, word) > 0` over each retired body (a LIKE '%word%'
//                                stops at the first zero byte of recap's binary bodies),
//                                PostgreSQL `position(word in body) > 0` — every match, unranked.
//   append/postgres/indexed      PostgreSQL only, the index's cost on append: store->Append of
//   append/postgres/unindexed    one W1 message, each its own durable transaction, with the GIN
//                                index on `search` and with it dropped (to_tsvector still runs);
//                                SQLite appends write no index (R11.5's figures:
//                                recap_bench_sqlite).
//
// Counters: p50_us and p99_us per query; matches (mean per query) for search and scan.
// Comparisons, no budget. Flags (besides Google Benchmark's --benchmark_*): --recap_smoke (W1 of
// 500 messages, 20 queries; the ctest `bench.recall_smoke`), --recap_messages=N,
// --recap_queries=N (default 200), --recap_dir=DIR (where the SQLite file goes),
// --recap_no_postgres. PostgreSQL is measured when the postgres component is built: a private
// server started by this program (tests/support/pg_server.h), fsync on.
#include <sqlite3.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <memory>
#include <random>
#include <stdexcept>
#include <string>
#include <variant>
#include <vector>

#include <benchmark/benchmark.h>

#include "recap/session_store.h"
#include "recap/sqlite/sqlite_store.h"

#include "w1_workload.h"

#ifdef RECAP_BENCH_POSTGRES
#include <libpq-fe.h>

#include "recap/postgres/postgres_store.h"

#include "support/pg_server.h"
#endif

namespace {

using Clock = std::chrono::steady_clock;

struct Settings {
  std::size_t messages = 20000;
  std::size_t queries = 200;
  std::string dir;
  bool postgres = true;
} g_settings;

template <typename T>
T Check(recap::Result<T> r, const std::string& what) {
  if (!r.ok()) throw std::runtime_error(what + ": " + r.status().ToString());
  return std::move(r).value();
}

std::vector<recap::Message> W1(std::size_t n) {
  recap_bench::W1Options options;
  options.messages = n;
  return recap_bench::GenerateW1(options);
}

// Words of at least 6 letters or digits from the text parts of the retired messages, drawn
// evenly: what a model would search for (names, identifiers).
std::vector<std::string> Words(const std::vector<recap::Message>& w1, std::size_t retired,
                               std::size_t count) {
  std::mt19937_64 rng(38);
  std::vector<std::string> words;
  for (std::size_t tries = 0; words.size() < count && tries < count * 100; ++tries) {
    const recap::Message& m = w1[rng() % retired];
    const std::string text = recap::JoinedText(m);
    if (text.size() < 8) continue;
    std::size_t at = rng() % text.size();
    while (at > 0 && std::isalnum(static_cast<unsigned char>(text[at - 1]))) --at;
    std::size_t end = at;
    while (end < text.size() && std::isalnum(static_cast<unsigned char>(text[end]))) ++end;
    if (end - at >= 6) words.push_back(text.substr(at, end - at));
  }
  if (words.empty()) throw std::runtime_error("no words drawn from W1");
  return words;
}

// The paths W1's tool calls name ("src/<8 characters>.cc"): rare terms, as an identifier a
// model recalls usually is.
std::vector<std::string> Paths(const std::vector<recap::Message>& w1, std::size_t retired,
                               std::size_t count) {
  std::mt19937_64 rng(380);
  std::vector<std::string> paths;
  for (std::size_t tries = 0; paths.size() < count && tries < count * 100; ++tries) {
    for (const recap::Part& p : w1[rng() % retired].parts) {
      const auto* call = std::get_if<recap::ToolCall>(&p);
      if (call == nullptr) continue;
      const std::size_t at = call->arguments.find("src/");
      const std::size_t end = call->arguments.find(".cc", at);
      if (at == std::string::npos || end == std::string::npos) continue;
      paths.push_back(call->arguments.substr(at, end + 3 - at));
      break;
    }
  }
  if (paths.empty()) throw std::runtime_error("no paths drawn from W1");
  return paths;
}

// A session holding W1, all but its last two messages retired by one compaction.
void Fill(recap::SessionStore& store, const std::vector<recap::Message>& w1) {
  recap::NewSession n;
  n.session = "w1";
  n.messages = w1;
  Check(store.CreateSessions({n}), "CreateSessions");
  const recap::SessionState state = Check(store.Load("w1"), "Load");
  recap::CompactionCommit c;
  c.expected_version = state.version;
  for (std::size_t i = 0; i + 2 < state.transcript.size(); ++i) {
    c.replaced.push_back(state.transcript[i].id);
  }
  c.checkpoint = recap::Message::UserText("## Goal\nthe work of W1");
  c.checkpoint.summary = true;
  c.reason = "manual";
  Check(store.CommitCompaction("w1", c), "CommitCompaction");
}

void Percentiles(benchmark::State& state, std::vector<double> us) {
  if (us.empty()) return;
  std::sort(us.begin(), us.end());
  state.counters["p50_us"] = us[us.size() / 2];
  state.counters["p99_us"] = us[std::min(us.size() - 1, us.size() * 99 / 100)];
}

// Times `one(word)` for each word once (after one untimed warm-up pass over five of them).
template <typename Fn>
void PerQuery(benchmark::State& state, const std::vector<std::string>& words, Fn&& one) {
  for (std::size_t k = 0; k < 5 && k < words.size(); ++k) one(words[k]);
  std::vector<double> us;
  double matches = 0;
  for (auto _ : state) {
    us.clear();
    matches = 0;
    for (const std::string& w : words) {
      const auto t0 = Clock::now();
      matches += static_cast<double>(one(w));
      us.push_back(std::chrono::duration<double, std::micro>(Clock::now() - t0).count());
    }
  }
  Percentiles(state, us);
  state.counters["matches"] = matches / static_cast<double>(words.size());
}

std::size_t Search(recap::SessionStore& store, const std::string& word) {
  recap::HistorySearch q;
  q.terms = {word};
  q.limit = 20;
  return Check(store.SearchHistory("w1", q), "SearchHistory").size();
}

// ---- SQLite ---------------------------------------------------------------------------------

struct SqliteSide {
  std::string path;
  std::vector<recap::Message> w1;
  std::vector<std::string> words;
  std::vector<std::string> paths;
  std::shared_ptr<recap::SessionStore> store;
  double index_build_ms = 0;
};
SqliteSide* g_sqlite = nullptr;

void SqliteIndexBuild(benchmark::State& state) {
  for (auto _ : state) {
    const auto t0 = Clock::now();
    Search(*g_sqlite->store, g_sqlite->words[0]);
    g_sqlite->index_build_ms = std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
    state.SetIterationTime(g_sqlite->index_build_ms / 1000);
  }
  state.counters["messages"] = static_cast<double>(g_sqlite->w1.size());
}

void SqliteIndexTurn(benchmark::State& state) {
  std::size_t k = 0;
  for (auto _ : state) {
    state.PauseTiming();
    std::vector<recap::Message> more;
    for (int i = 0; i < 10; ++i) {
      recap::Message m = g_sqlite->w1[(k++ * 7) % g_sqlite->w1.size()];
      m.id.clear();
      more.push_back(std::move(m));
    }
    Check(g_sqlite->store->AppendMessages("w1", std::move(more)), "AppendMessages");
    state.ResumeTiming();
    Search(*g_sqlite->store, g_sqlite->words[k % g_sqlite->words.size()]);
  }
}

void SqliteSearch(benchmark::State& state, const std::vector<std::string>* terms) {
  PerQuery(state, *terms, [](const std::string& w) { return Search(*g_sqlite->store, w); });
}

void SqliteScan(benchmark::State& state, const std::vector<std::string>* terms) {
  sqlite3* db = nullptr;
  if (sqlite3_open_v2(g_sqlite->path.c_str(), &db, SQLITE_OPEN_READONLY, nullptr) != SQLITE_OK) {
    state.SkipWithError("sqlite3_open_v2 failed");
    return;
  }
  sqlite3_stmt* st = nullptr;
  sqlite3_prepare_v2(db,
                     "SELECT m.seq FROM messages m JOIN bodies b ON b.seq = m.seq JOIN sessions s "
                     "ON s.session_id = m.session_id WHERE s.name = 'w1' AND m.position IS NULL "
                     "AND instr(b.body, ?1) > 0",
                     -1, &st, nullptr);
  PerQuery(state, *terms, [&](const std::string& w) {
    sqlite3_bind_blob(st, 1, w.data(), static_cast<int>(w.size()), SQLITE_TRANSIENT);
    std::size_t n = 0;
    while (sqlite3_step(st) == SQLITE_ROW) ++n;
    sqlite3_reset(st);
    return n;
  });
  sqlite3_finalize(st);
  sqlite3_close(db);
}

#ifdef RECAP_BENCH_POSTGRES
// ---- PostgreSQL -----------------------------------------------------------------------------

struct PgSide {
  std::unique_ptr<recap::testing::PostgresTestServer> server;
  std::string conninfo;
  std::shared_ptr<recap::SessionStore> store;
  std::vector<std::string> words;
  std::vector<recap::Message> w1;
};
PgSide* g_pg = nullptr;

std::shared_ptr<recap::SessionStore> OpenPg(const std::string& schema) {
  recap::PostgresStoreOptions o;
  o.connection = g_pg->conninfo;
  o.schema = schema;
  o.statement_timeout_ms = 0;
  return Check(recap::OpenPostgresSessionStore(o), "OpenPostgresSessionStore");
}

void PgExec(const std::string& sql) {
  PGconn* c = PQconnectdb(g_pg->conninfo.c_str());
  PGresult* r = PQexec(c, sql.c_str());
  const bool ok = PQresultStatus(r) == PGRES_COMMAND_OK || PQresultStatus(r) == PGRES_TUPLES_OK;
  const std::string error = PQerrorMessage(c);
  PQclear(r);
  PQfinish(c);
  if (!ok) throw std::runtime_error(sql + ": " + error);
}

void PgSearch(benchmark::State& state, const std::vector<std::string>* terms) {
  PerQuery(state, *terms, [](const std::string& w) { return Search(*g_pg->store, w); });
}

void PgScan(benchmark::State& state, const std::vector<std::string>* terms) {
  PGconn* c = PQconnectdb(g_pg->conninfo.c_str());
  PerQuery(state, *terms, [&](const std::string& w) {
    const char* values[] = {w.c_str()};
    PGresult* r = PQexecParams(c,
                               "SELECT m.seq FROM recall_bench.messages m JOIN "
                               "recall_bench.sessions s ON s.session_id = m.session_id WHERE "
                               "s.name = 'w1' AND m.position IS NULL AND position(convert_to($1, "
                               "'UTF8') in m.body) > 0",
                               1, nullptr, values, nullptr, nullptr, 0);
    if (PQresultStatus(r) != PGRES_TUPLES_OK) {
      const std::string e = PQerrorMessage(c);
      PQclear(r);
      throw std::runtime_error("scan: " + e);
    }
    const std::size_t n = static_cast<std::size_t>(PQntuples(r));
    PQclear(r);
    return n;
  });
  PQfinish(c);
}

void PgAppend(benchmark::State& state, bool indexed) {
  const std::string schema = indexed ? "append_indexed" : "append_unindexed";
  auto store = OpenPg(schema);
  if (!indexed) PgExec("DROP INDEX " + schema + ".messages_search");
  std::size_t k = 0;
  std::vector<double> us;
  for (auto _ : state) {
    recap::Message m = g_pg->w1[k++ % g_pg->w1.size()];
    m.id.clear();
    const auto t0 = Clock::now();
    Check(store->Append("a", std::move(m)), "Append");
    us.push_back(std::chrono::duration<double, std::micro>(Clock::now() - t0).count());
  }
  Percentiles(state, us);
}
#endif

}  // namespace

int main(int argc, char** argv) {
  std::vector<char*> rest;
  for (int i = 0; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--recap_smoke") {
      g_settings.messages = 500;
      g_settings.queries = 20;
    } else if (a.rfind("--recap_messages=", 0) == 0) {
      g_settings.messages = std::stoul(a.substr(17));
    } else if (a.rfind("--recap_queries=", 0) == 0) {
      g_settings.queries = std::stoul(a.substr(16));
    } else if (a.rfind("--recap_dir=", 0) == 0) {
      g_settings.dir = a.substr(12);
    } else if (a == "--recap_no_postgres") {
      g_settings.postgres = false;
    } else {
      rest.push_back(argv[i]);
    }
  }
  if (const char* smoke = std::getenv("RECAP_BENCH_SMOKE"); smoke && *smoke == '1') {
    g_settings.messages = 500;
    g_settings.queries = 20;
  }
  if (g_settings.dir.empty()) {
    const char* tmp = std::getenv("TMPDIR");
    g_settings.dir = tmp ? tmp : "/tmp";
  }
  try {
    SqliteSide sqlite;
    sqlite.w1 = W1(g_settings.messages);
    sqlite.words = Words(sqlite.w1, sqlite.w1.size() - 2, g_settings.queries);
    sqlite.paths = Paths(sqlite.w1, sqlite.w1.size() - 2, g_settings.queries);
    sqlite.path = g_settings.dir + "/recap-bench-recall-" + std::to_string(::getpid()) + ".db";
    std::filesystem::remove(sqlite.path);
    sqlite.store = Check(recap::OpenSqliteSessionStore(sqlite.path), "OpenSqliteSessionStore");
    Fill(*sqlite.store, sqlite.w1);
    g_sqlite = &sqlite;
    benchmark::RegisterBenchmark("recall/sqlite/index_build", SqliteIndexBuild)
        ->Iterations(1)
        ->UseManualTime()
        ->Unit(benchmark::kMillisecond);
    benchmark::RegisterBenchmark("recall/sqlite/index_turn", SqliteIndexTurn)
        ->Iterations(20)
        ->Unit(benchmark::kMillisecond);
    const std::vector<std::string>* kinds[] = {&sqlite.words, &sqlite.paths};
    for (const std::vector<std::string>* terms : kinds) {
      const std::string kind = terms == &sqlite.words ? "/word" : "/path";
      benchmark::RegisterBenchmark(("recall/sqlite/search" + kind).c_str(), SqliteSearch, terms)
          ->Iterations(1)
          ->Unit(benchmark::kMillisecond);
      benchmark::RegisterBenchmark(("recall/sqlite/scan" + kind).c_str(), SqliteScan, terms)
          ->Iterations(1)
          ->Unit(benchmark::kMillisecond);
    }
#ifdef RECAP_BENCH_POSTGRES
    PgSide pg;
    if (g_settings.postgres) {
      pg.server = std::make_unique<recap::testing::PostgresTestServer>();
      pg.server->Exec("postgres", "ALTER SYSTEM SET fsync = on");
      pg.server->Exec("postgres", "ALTER SYSTEM SET synchronous_commit = on");
      pg.server->Restart();
      pg.server->CreateDatabase("bench");
      pg.conninfo = pg.server->ConnInfo("bench");
      g_pg = &pg;
      pg.w1 = sqlite.w1;
      pg.words = sqlite.words;
      pg.store = OpenPg("recall_bench");
      Fill(*pg.store, pg.w1);
      PgExec("VACUUM ANALYZE recall_bench.messages");
      for (const std::vector<std::string>* terms : kinds) {
        const std::string kind = terms == &sqlite.words ? "/word" : "/path";
        benchmark::RegisterBenchmark(("recall/postgres/search" + kind).c_str(), PgSearch, terms)
            ->Iterations(1)
            ->Unit(benchmark::kMillisecond);
        benchmark::RegisterBenchmark(("recall/postgres/scan" + kind).c_str(), PgScan, terms)
            ->Iterations(1)
            ->Unit(benchmark::kMillisecond);
      }
      benchmark::RegisterBenchmark("append/postgres/indexed", PgAppend, true)
          ->Iterations(g_settings.queries)
          ->Unit(benchmark::kMicrosecond);
      benchmark::RegisterBenchmark("append/postgres/unindexed", PgAppend, false)
          ->Iterations(g_settings.queries)
          ->Unit(benchmark::kMicrosecond);
    }
#endif
    int count = static_cast<int>(rest.size());
    benchmark::Initialize(&count, rest.data());
    benchmark::RunSpecifiedBenchmarks();
    benchmark::Shutdown();
    sqlite.store.reset();
    for (const char* suffix : {"", "-wal", "-shm"}) std::filesystem::remove(sqlite.path + suffix);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "recap_bench_recall: %s\n", e.what());
    return 2;
  }
  return 0;
}
