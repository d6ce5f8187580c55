// The PostgreSQL store (recap::postgres) against the SQLite store (recap::sqlite) on workload
// W1 (w1_workload.h), in one run, through the same SessionStore calls. Comparisons, not budgets:
// R11 sets none for PostgreSQL, so nothing here passes or fails on its figure.
//
// The server is a private PostgreSQL started by this program (tests/support/pg_server.h, the
// tests' harness: a cluster in /tmp/recap-pg-XXXXXX on a Unix socket, stopped and removed at
// the end). The harness tunes its servers for test speed (fsync, synchronous_commit and
// full_page_writes off, wal_level minimal, shared_buffers 16 MB); before measuring, this program
// undoes that with ALTER SYSTEM and a restart, so the server runs PostgreSQL 15's defaults for
// everything that decides these figures:
//
//   fsync = on, full_page_writes = on, synchronous_commit = on, wal_level = replica,
//   max_wal_senders = 10, shared_buffers = 128MB          (jit stays off; no query here uses it)
//
// and checks them with SHOW before it measures. synchronous_commit is then chosen per store by
// its connection string (options='-c synchronous_commit=off'), so both durability levels are
// measured against the same server, interleaved:
//
//   append_durable    single-message store->Append, each its own transaction:
//                     PostgreSQL synchronous_commit = on (COMMIT waits for the WAL flush)
//                     vs SQLite synchronous = FULL (COMMIT fsyncs the WAL file).
//   append_relaxed    the same with PostgreSQL synchronous_commit = off (COMMIT returns before
//                     the WAL flush; a crash of the server or the machine may lose the last few
//                     hundred milliseconds of commits, never half of one) vs SQLite synchronous
//                     = NORMAL (WAL not fsynced at COMMIT; a power loss may lose the last
//                     commits, a crash of the process loses nothing).
//   batch             one store->AppendMessages of all of W1 (20,000 messages, 54 MB) into a
//                     new session: PostgreSQL synchronous_commit = on vs SQLite FULL.
//   load              store->Load of W1's session on a fresh store object (opened outside the
//                     timing: for PostgreSQL, connected with the schema checked; the Load still
//                     prepares its statement), all 20,000 messages decoded.
//   changes           store->LoadChanges(session, v) right after one message was appended at
//                     version v + 1 (not timed), on a session holding W1: the per-turn read of
//                     Compactor::Prepare. Must return that one message, appended_only. One
//                     store object for the run, warmed by one untimed turn (a host's store is
//                     long-lived: its connection and prepared statements are there).
//   roundtrip         reference, PostgreSQL only: PQexec("SELECT 1") on a libpq connection over
//                     the same socket, the cost of one round trip; printed under the table.
//   load/postgres_bare  reference: the store's load statement sent by bare libpq on a fresh
//                     connection, binary result buffered whole, bodies touched, not decoded:
//                     what the server and libpq cost before recap decodes anything.
//
// Every PostgreSQL write figure works in a schema of its own, made for the run and dropped after
// it (the SQLite side: a fresh file, removed after); the loads read templates written once at
// set-up (PostgreSQL: a schema holding W1, then VACUUM ANALYZE; SQLite: a file holding W1).
// The server's data and the SQLite files are where the table's header says; a warning is printed
// for a tmpfs, where fsync costs nothing. Ctrl-C (SIGINT, SIGTERM, SIGHUP) stops the server and
// removes its directory before the program goes (exit status 128 + the signal).
//
// Each figure is the median of --recap_repetitions runs (default 5; twice as many for the
// appends), interleaved at random. After Google Benchmark's own output, one table: figure,
// postgres, sqlite, ratio — where ratio is PostgreSQL's time per operation over SQLite's
// (above 1: PostgreSQL is slower), for the append rates too.
//
// Flags (besides Google Benchmark's --benchmark_*):
//   --recap_smoke            tiny sizes, one repetition (the `bench` ctest); also
//                            RECAP_BENCH_SMOKE=1
//   --recap_messages=N       messages in W1 (default 20000)
//   --recap_repetitions=N    repetitions of each figure (default 5)
//   --recap_iterations=N     iterations of each batch and load run (default 1 and 5)
//   --recap_dir=PATH         folder for the SQLite files (default $TMPDIR or /tmp)
//   --recap_json=FILE        also write the comparisons as JSON: {"comparisons": [ {...}, ... ]},
//                            one object a line (scripts/bench.sh merges files line-wise)
//   --recap_keep             keep the SQLite files' folder (the server's is always removed)
// Exit status: 0 every figure ran, 2 an operation failed or the server could not be set up.
#include <pthread.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <stdexcept>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include <benchmark/benchmark.h>
#include <libpq-fe.h>
#include <sys/vfs.h>

#include "recap/message.h"
#include "recap/postgres/postgres_store.h"
#include "recap/session_store.h"
#include "recap/sqlite/sqlite_store.h"

#include "bench_support.h"
#include "support/pg_server.h"
#include "w1_workload.h"

using recap_bench::CollectingReporter;
using recap_bench::Grouped;
using recap_bench::JsonString;
using recap_bench::OnTmpfs;
using recap_bench::RemoveDb;
using recap_bench::TakeFlag;

namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;
using recap::Message;
using recap::SqliteSynchronous;

constexpr const char* kW1Session = "w1";
constexpr const char* kAppendSession = "bench";
constexpr const char* kDatabase = "recap_bench";
constexpr const char* kLoadSchema = "w1_load";        // W1, read by the load figure
constexpr const char* kChangesSchema = "w1_changes";  // W1, appended to by the changes figure

// What the harness's server is changed to before measuring (PostgreSQL 15's defaults).
constexpr const char* kServerSettings[][2] = {
    {"fsync", "on"},          {"full_page_writes", "on"}, {"synchronous_commit", "on"},
    {"wal_level", "replica"}, {"max_wal_senders", "10"},  {"shared_buffers", "128MB"},
};

// A plain libpq connection, for the settings check and the round-trip reference.
class PgConn {
 public:
  explicit PgConn(const std::string& conninfo) : conn_(PQconnectdb(conninfo.c_str())) {
    if (conn_ == nullptr || PQstatus(conn_) != CONNECTION_OK) {
      const std::string why = conn_ ? PQerrorMessage(conn_) : "out of memory";
      PQfinish(conn_);
      throw std::runtime_error("connecting to the benchmark's server: " + why);
    }
  }
  ~PgConn() { PQfinish(conn_); }
  PgConn(const PgConn&) = delete;
  PgConn& operator=(const PgConn&) = delete;
  PGconn* raw() { return conn_; }

  // The first column of the first row of `sql`'s result ("" for a command).
  std::string Value(const std::string& sql) {
    PGresult* r = PQexec(conn_, sql.c_str());
    const ExecStatusType st = PQresultStatus(r);
    if (st != PGRES_TUPLES_OK && st != PGRES_COMMAND_OK) {
      const std::string why = PQerrorMessage(conn_);
      PQclear(r);
      throw std::runtime_error(sql + ": " + why);
    }
    std::string v = (st == PGRES_TUPLES_OK && PQntuples(r) > 0) ? PQgetvalue(r, 0, 0) : "";
    PQclear(r);
    return v;
  }

 private:
  PGconn* conn_;
};

struct Config {
  bool smoke = false;
  std::size_t messages = 20000;
  int repetitions = 5;
  std::string dir;
  bool keep = false;
  std::string json;
  double append_min_time = 0.3;  // seconds of each append run
  int batch_iterations = 1;
  int load_iterations = 5;
  int changes_iterations = 200;
};

// Set up once in main, read by the benchmarks.
struct Setup {
  Config config;
  std::unique_ptr<recap::testing::PostgresTestServer> pg;
  std::unique_ptr<PgConn> admin;  // DROP SCHEMA, VACUUM: quiet about cascades
  std::string conn_durable;       // synchronous_commit = on (the server's setting)
  std::string conn_relaxed;       // the same with synchronous_commit = off for the connection
  std::string server_line;        // what SHOW said, for the table's header
  std::string tmp;                // the SQLite files' folder
  std::string sqlite_load;        // W1, written by the SQLite store
  std::string sqlite_changes;
  std::vector<Message> w1;
  std::size_t w1_bytes = 0;
};
Setup g;

std::atomic<int> g_counter{0};
std::mutex g_errors_mu;
std::vector<std::string> g_errors;

void RecordError(const std::string& what) {
  std::lock_guard<std::mutex> lock(g_errors_mu);
  g_errors.push_back(what);
}

template <typename T>
void Check(const recap::Result<T>& r, const std::string& what) {
  if (!r.ok()) throw std::runtime_error(what + ": " + r.status().ToString());
}

// Runs a benchmark body; an exception ends the run as an error (reported, exit status 2).
template <typename Fn>
void Guarded(benchmark::State& state, const std::string& name, Fn&& fn) {
  try {
    fn();
  } catch (const std::exception& e) {
    RecordError(name + ": " + e.what());
    state.SkipWithError(e.what());
  }
}

// ---- PostgreSQL -----------------------------------------------------------------------------

std::shared_ptr<recap::SessionStore> OpenPg(const std::string& schema, bool durable) {
  recap::PostgresStoreOptions options;
  options.connection = durable ? g.conn_durable : g.conn_relaxed;
  options.schema = schema;
  options.statement_timeout_ms = 0;  // a 20,000-message batch on a slow disk may take a while
  auto store = recap::OpenPostgresSessionStore(options);
  Check(store, "OpenPostgresSessionStore (schema " + schema + ")");
  return std::move(store).value();
}

std::string NewSchema(const char* what) {
  return std::string(what) + "_" + std::to_string(g_counter++);
}

void DropSchema(const std::string& schema) {
  g.admin->Value("DROP SCHEMA IF EXISTS " + schema + " CASCADE");
}

// Starts the private server, gives it PostgreSQL's defaults back, checks them, and writes the
// templates.
void SetUpServer() {
  g.pg = std::make_unique<recap::testing::PostgresTestServer>();
  for (const auto& s : kServerSettings) {
    g.pg->Exec("postgres", std::string("ALTER SYSTEM SET ") + s[0] + " = '" + s[1] + "'");
  }
  g.pg->Restart();  // shared_buffers and wal_level take a restart
  g.pg->CreateDatabase(kDatabase);
  g.conn_durable = g.pg->ConnInfo(kDatabase);
  g.conn_relaxed = g.conn_durable + " options='-c synchronous_commit=off'";

  PgConn durable(g.conn_durable);
  for (const auto& s : kServerSettings) {
    std::string v = durable.Value(std::string("SHOW ") + s[0]);
    if (v != s[1]) {
      throw std::runtime_error(std::string("the server's ") + s[0] + " is " + v + ", not " + s[1] +
                               " after ALTER SYSTEM and a restart");
    }
  }
  g.admin = std::make_unique<PgConn>(g.conn_durable + " options='-c client_min_messages=warning'");
  PgConn relaxed(g.conn_relaxed);
  if (std::string v = relaxed.Value("SHOW synchronous_commit"); v != "off") {
    throw std::runtime_error(
        "a connection with options='-c synchronous_commit=off' has "
        "synchronous_commit = " +
        v);
  }
  g.server_line = "PostgreSQL " + durable.Value("SHOW server_version") +
                  " on a Unix socket, data in " + g.pg->data_dir() +
                  ": fsync=" + durable.Value("SHOW fsync") +
                  ", full_page_writes=" + durable.Value("SHOW full_page_writes") +
                  ", wal_level=" + durable.Value("SHOW wal_level") +
                  ", shared_buffers=" + durable.Value("SHOW shared_buffers") +
                  ", synchronous_commit on/off per store";
}

void WriteW1(recap::SessionStore& store, const std::string& what) {
  constexpr std::size_t kBatch = 500;
  for (std::size_t i = 0; i < g.w1.size(); i += kBatch) {
    std::vector<Message> batch(
        g.w1.begin() + static_cast<std::ptrdiff_t>(i),
        g.w1.begin() + static_cast<std::ptrdiff_t>(std::min(i + kBatch, g.w1.size())));
    Check(store.AppendMessages(kW1Session, std::move(batch)), "AppendMessages (" + what + ")");
  }
}

// ---- SQLite ---------------------------------------------------------------------------------

std::string NewPath(const char* what) {
  return g.tmp + "/" + what + "-" + std::to_string(g_counter++) + ".db";
}

std::shared_ptr<recap::SessionStore> OpenSqlite(const std::string& path, SqliteSynchronous sync) {
  recap::SqliteStoreOptions options;
  options.synchronous = sync;
  auto store = recap::OpenSqliteSessionStore(path, options);
  Check(store, "OpenSqliteSessionStore");
  return std::move(store).value();
}

// ---- the two stores behind one interface ---------------------------------------------------

enum class Side { kPostgres, kSqlite };

// A store for one benchmark run that writes: a fresh schema or file, removed afterwards.
class Scratch {
 public:
  Scratch(Side side, bool durable, const char* what) : side_(side) {
    if (side == Side::kPostgres) {
      schema_ = NewSchema(what);
      store_ = OpenPg(schema_, durable);
    } else {
      path_ = NewPath(what);
      store_ = OpenSqlite(path_, durable ? SqliteSynchronous::kFull : SqliteSynchronous::kNormal);
    }
  }
  ~Scratch() {
    store_.reset();
    try {
      if (side_ == Side::kPostgres) {
        DropSchema(schema_);
      } else {
        RemoveDb(path_);
      }
    } catch (const std::exception& e) {
      RecordError(std::string("cleaning up: ") + e.what());
    }
  }
  Scratch(const Scratch&) = delete;
  Scratch& operator=(const Scratch&) = delete;
  recap::SessionStore& store() { return *store_; }

 private:
  Side side_;
  std::string schema_;
  std::string path_;
  std::shared_ptr<recap::SessionStore> store_;
};

const char* SideName(Side side) { return side == Side::kPostgres ? "postgres" : "sqlite"; }

// ---- 1. single-message appends ------------------------------------------------------------

void Append(benchmark::State& state, Side side, bool durable) {
  Guarded(state, std::string("append ") + SideName(side) + (durable ? " durable" : " relaxed"),
          [&] {
            Scratch scratch(side, durable, "append");
            recap::SessionStore& store = scratch.store();
            Message first = g.w1[0];
            first.id = "a0";
            Check(store.Append(kAppendSession, std::move(first)), "Append");
            // Append takes its message by value: copies are made ahead, outside the timing,
            // and moved in, as a host hands its message over.
            constexpr std::size_t kRing = 1024;
            std::vector<Message> ring;
            std::size_t next = 0;
            std::size_t i = 0;
            for (auto _ : state) {
              if (i % kRing == 0) {
                state.PauseTiming();
                ring.clear();
                for (std::size_t k = 0; k < kRing; ++k) {
                  ring.push_back(g.w1[(next + k) % g.w1.size()]);
                }
                next += kRing;
                state.ResumeTiming();
              }
              Message& m = ring[i % kRing];
              m.id = "a" + std::to_string(++i);
              auto r = store.Append(kAppendSession, std::move(m));
              if (!r.ok()) throw std::runtime_error("Append: " + r.status().ToString());
            }
            state.SetItemsProcessed(state.iterations());
          });
}

// ---- 2. one batch of all of W1 ------------------------------------------------------------

void Batch(benchmark::State& state, Side side) {
  Guarded(state, std::string("batch ") + SideName(side), [&] {
    for (auto _ : state) {
      Scratch scratch(side, /*durable=*/true, "batch");
      std::vector<Message> messages = g.w1;
      const auto start = Clock::now();
      auto r = scratch.store().AppendMessages(kW1Session, std::move(messages));
      const auto end = Clock::now();
      Check(r, "AppendMessages (W1)");
      state.SetIterationTime(std::chrono::duration<double>(end - start).count());
    }
    state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations() * g.w1_bytes));
  });
}

// ---- 3. loading W1 on a fresh store ---------------------------------------------------------

void Load(benchmark::State& state, Side side) {
  Guarded(state, std::string("load ") + SideName(side), [&] {
    for (auto _ : state) {
      auto store = side == Side::kPostgres ? OpenPg(kLoadSchema, true)
                                           : OpenSqlite(g.sqlite_load, SqliteSynchronous::kFull);
      const auto start = Clock::now();
      std::optional<recap::Result<recap::SessionState>> r(store->Load(kW1Session));
      const auto end = Clock::now();
      Check(*r, "Load");
      const std::size_t loaded = r->value().transcript.size();
      if (loaded != g.w1.size()) {
        throw std::runtime_error("Load returned " + std::to_string(loaded) + " messages, not " +
                                 std::to_string(g.w1.size()));
      }
      r.reset();  // freed outside the timing
      store.reset();
      state.SetIterationTime(std::chrono::duration<double>(end - start).count());
    }
    state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations() * g.w1_bytes));
  });
}

// ---- 4. LoadChanges after one append --------------------------------------------------------

void Changes(benchmark::State& state, Side side) {
  Guarded(state, std::string("changes ") + SideName(side), [&] {
    // A host keeps its store open: one store object for the run. The appends are not timed;
    // they are not durable (NORMAL / synchronous_commit off) so that they take little time.
    auto store = side == Side::kPostgres ? OpenPg(kChangesSchema, false)
                                         : OpenSqlite(g.sqlite_changes, SqliteSynchronous::kNormal);
    // One turn untimed first: statements prepared, the new backend's caches filled.
    auto turn = [&](bool timed) {
      Message m = Message::UserText("one more turn: " + std::string(480, 'x'));
      m.id = "c" + std::to_string(g_counter++);
      auto v = store->Append(kW1Session, std::move(m));
      Check(v, "Append");
      const std::uint64_t since = v.value() - 1;
      const auto start = Clock::now();
      auto r = store->LoadChanges(kW1Session, since);
      const auto end = Clock::now();
      Check(r, "LoadChanges");
      if (!r.value().appended_only || r.value().appended.size() != 1 ||
          r.value().version != v.value()) {
        throw std::runtime_error(
            "LoadChanges after one append returned " + std::to_string(r.value().appended.size()) +
            " appended messages at version " + std::to_string(r.value().version) +
            ", appended_only " + (r.value().appended_only ? "true" : "false"));
      }
      if (timed) state.SetIterationTime(std::chrono::duration<double>(end - start).count());
    };
    turn(false);
    for (auto _ : state) turn(true);
  });
}

// Reference: the store's load statement (src/postgres/postgres_store.cc, kLoad) sent by bare
// libpq on a fresh connection, binary results, the whole result buffered by libpq as the store
// has it, each body touched but not decoded. What PostgreSQL and libpq cost before recap
// decodes a byte; freed outside the timing.
void LoadBare(benchmark::State& state) {
  Guarded(state, "load postgres bare", [&] {
    const std::string sql =
        std::string("SELECT s.version, s.rewrite_version, m.seq, m.chars, m.body FROM ") +
        kLoadSchema + ".sessions s LEFT JOIN " + kLoadSchema +
        ".messages m ON m.session_id = s.session_id AND m.position IS NOT NULL AND "
        "m.stored_version > (CASE WHEN $2::bigint >= s.rewrite_version THEN $2::bigint ELSE -1 "
        "END) WHERE s.name = $1 ORDER BY m.position";
    for (auto _ : state) {
      PgConn conn(g.conn_durable);
      const char* values[2] = {kW1Session, "-1"};
      const auto start = Clock::now();
      PGresult* r = PQexecParams(conn.raw(), sql.c_str(), 2, nullptr, values, nullptr, nullptr,
                                 /*resultFormat=*/1);
      unsigned sum = 0;
      const int rows = PQresultStatus(r) == PGRES_TUPLES_OK ? PQntuples(r) : -1;
      for (int i = 0; i < rows; ++i) {
        const char* p = PQgetvalue(r, i, 4);
        const int n = PQgetlength(r, i, 4);
        if (n > 0) sum += static_cast<unsigned char>(p[0]) + static_cast<unsigned char>(p[n - 1]);
      }
      benchmark::DoNotOptimize(sum);
      const auto end = Clock::now();
      const std::string why = rows < 0 ? PQerrorMessage(conn.raw()) : "";
      PQclear(r);
      if (rows != static_cast<int>(g.w1.size())) {
        throw std::runtime_error("the bare load read " + std::to_string(rows) + " rows, not " +
                                 std::to_string(g.w1.size()) + " " + why);
      }
      state.SetIterationTime(std::chrono::duration<double>(end - start).count());
    }
    state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations() * g.w1_bytes));
  });
}

// ---- reference: one round trip --------------------------------------------------------------

void RoundTrip(benchmark::State& state) {
  Guarded(state, "roundtrip postgres", [&] {
    PgConn conn(g.conn_durable);
    for (auto _ : state) {
      if (conn.Value("SELECT 1") != "1") throw std::runtime_error("SELECT 1 did not return 1");
    }
  });
}

// ---- set-up -------------------------------------------------------------------------------

void BuildTemplates() {
  g.w1 = recap_bench::GenerateW1({g.config.messages, 20240611});
  g.w1_bytes = 0;
  for (const Message& m : g.w1) g.w1_bytes += recap_bench::MessageBytes(m);

  for (const char* schema : {kLoadSchema, kChangesSchema}) {
    auto store = OpenPg(schema, false);
    WriteW1(*store, std::string("PostgreSQL template ") + schema);
  }
  // Statistics for the planner, and the visibility map, as autovacuum would have them on a
  // server that has held the session for a while.
  g.admin->Value("VACUUM (ANALYZE)");
  g.admin->Value("CHECKPOINT");

  g.sqlite_load = g.tmp + "/w1-load.db";
  {
    auto store = OpenSqlite(g.sqlite_load, SqliteSynchronous::kNormal);
    WriteW1(*store, "SQLite template");
  }  // the last connection's close checkpoints the WAL into the file
  g.sqlite_changes = g.tmp + "/w1-changes.db";
  fs::copy_file(g.sqlite_load, g.sqlite_changes, fs::copy_options::overwrite_existing);
  ::sync();
}

// ---- results ------------------------------------------------------------------------------

// Google Benchmark's console output, plus the median time of each benchmark (the single run's
// when there is one repetition), in seconds.

struct Figure {
  std::string id;
  std::string label;
  std::string settings;  // "postgres ... | sqlite ..." for the JSON
  std::string postgres;  // benchmark names
  std::string sqlite;
  bool rate;  // shown as messages per second
};

std::string Shown(double seconds, bool rate) {
  char buf[64];
  if (rate) return Grouped(1.0 / seconds) + " msg/s";
  if (seconds < 1e-3) {
    std::snprintf(buf, sizeof buf, "%.0f us", seconds * 1e6);
  } else if (seconds < 1) {
    std::snprintf(buf, sizeof buf, "%.1f ms", seconds * 1e3);
  } else {
    std::snprintf(buf, sizeof buf, "%.2f s", seconds);
  }
  return buf;
}

struct JsonComparison {
  std::string id, label, settings, unit;
  double postgres, sqlite, ratio;
};
std::vector<JsonComparison> g_json;

void PrintTable(const CollectingReporter& reporter, const std::vector<Figure>& figures) {
  std::printf(
      "\nrecap's PostgreSQL store vs its SQLite store, same run, W1: %s messages, "
      "%.1f MB of message text\n",
      Grouped(static_cast<double>(g.w1.size())).c_str(), static_cast<double>(g.w1_bytes) / 1e6);
  std::printf("server: %s\n", g.server_line.c_str());
  std::printf("SQLite: WAL, files in %s\n", g.tmp.c_str());
  if (g.config.repetitions > 1) {
    std::printf("each figure the median of %d runs (appends %d), interleaved at random\n",
                g.config.repetitions, 2 * g.config.repetitions);
  }
  if (g.config.smoke) std::printf("SMOKE RUN: tiny sizes\n");
  std::printf("\n%-48s %16s %16s %7s\n", "figure", "postgres", "sqlite", "ratio");
  for (const Figure& f : figures) {
    auto p = reporter.seconds.find(f.postgres);
    auto s = reporter.seconds.find(f.sqlite);
    if (p == reporter.seconds.end() || s == reporter.seconds.end() || p->second <= 0 ||
        s->second <= 0) {
      std::printf("%-48s %16s %16s %7s\n", f.label.c_str(), "-", "-", "-");
      continue;
    }
    const double ratio = p->second / s->second;  // time over time, for rates too
    g_json.push_back({f.id, f.label, f.settings, f.rate ? "messages/s" : "seconds",
                      f.rate ? 1.0 / p->second : p->second, f.rate ? 1.0 / s->second : s->second,
                      ratio});
    std::printf("%-48s %16s %16s %7.2f\n", f.label.c_str(), Shown(p->second, f.rate).c_str(),
                Shown(s->second, f.rate).c_str(), ratio);
  }
  std::printf("\nratio: PostgreSQL's time per operation / SQLite's (above 1: PostgreSQL slower)\n");
  auto bare = reporter.seconds.find("load/postgres_bare");
  auto load = reporter.seconds.find("load/postgres");
  if (bare != reporter.seconds.end() && load != reporter.seconds.end() && bare->second > 0) {
    std::printf(
        "for reference: the store's load statement by bare libpq (fresh connection, binary "
        "result buffered,\nnot decoded) takes %s; the store's Load is %.2fx that\n",
        Shown(bare->second, false).c_str(), load->second / bare->second);
  }
  if (auto rt = reporter.seconds.find("roundtrip/postgres"); rt != reporter.seconds.end()) {
    std::printf(
        "for reference: one libpq round trip (SELECT 1) on this socket takes %.0f us; a "
        "single-message\nAppend makes 5 (BEGIN, SELECT ... FOR UPDATE, INSERT, UPDATE, COMMIT), "
        "AppendMessages of n > 1 messages\n5 (its INSERTs pipelined, a thousand per round trip), "
        "Load and LoadChanges 1 (2 on a connection's\nfirst use: the statement is prepared)\n",
        rt->second * 1e6);
  }
}

// One comparison object a line, so that scripts/bench.sh can merge files line by line.
bool WriteJson(const std::string& path, bool smoke) {
  FILE* f = std::fopen(path.c_str(), "w");
  if (f == nullptr) return false;
  std::fprintf(f, "{\"comparisons\": [\n");
  for (std::size_t i = 0; i < g_json.size(); ++i) {
    const JsonComparison& c = g_json[i];
    std::fprintf(f,
                 "  {\"id\": %s, \"figure\": %s, \"settings\": %s, \"unit\": %s, \"postgres\": "
                 "%.9g, \"sqlite\": %.9g, \"ratio\": %.9g, \"ratio_is\": \"postgres time / sqlite "
                 "time\", \"smoke\": %s}%s\n",
                 JsonString(c.id).c_str(), JsonString(c.label).c_str(),
                 JsonString(c.settings).c_str(), JsonString(c.unit).c_str(), c.postgres, c.sqlite,
                 c.ratio, smoke ? "true" : "false", i + 1 < g_json.size() ? "," : "");
  }
  std::fprintf(f, "]}\n");
  return std::fclose(f) == 0;
}

// Ctrl-C (or SIGTERM, SIGHUP) while the benchmarks run: stop the server and remove its
// directory and the SQLite folder before going, instead of leaving a postgres behind. The
// signals are blocked from here on (after the server started: it resets its own mask anyway)
// and taken by a thread of their own.
void StopServerOnSignal(const std::string& server_dir, const std::string& tmp, bool keep) {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGTERM);
  sigaddset(&set, SIGHUP);
  pthread_sigmask(SIG_BLOCK, &set, nullptr);
  std::thread([set, server_dir, tmp, keep] {
    int sig = 0;
    if (sigwait(&set, &sig) != 0) return;
    std::fprintf(stderr, "\nrecap_bench_postgres: signal %d: stopping the server\n", sig);
    try {
      recap::testing::PostgresTestServer::Destroy(server_dir);
    } catch (const std::exception& e) {
      std::fprintf(stderr, "recap_bench_postgres: %s\n", e.what());
    }
    std::error_code ec;
    if (!keep) fs::remove_all(tmp, ec);
    std::_Exit(128 + sig);
  }).detach();
}

void Register() {
  const Config& c = g.config;
  const int append_reps = c.repetitions > 1 ? 2 * c.repetitions : 1;
  for (bool durable : {true, false}) {
    for (Side side : {Side::kPostgres, Side::kSqlite}) {
      const std::string name =
          std::string(durable ? "append_durable/" : "append_relaxed/") + SideName(side);
      auto* b = benchmark::RegisterBenchmark(
          name.c_str(), [side, durable](benchmark::State& s) { Append(s, side, durable); });
      // Appends are fsync-bound and most exposed to other processes' disk traffic: twice as
      // many, shorter runs interleave the two sides more finely.
      b->UseRealTime()->Repetitions(append_reps)->MinTime(c.append_min_time);
      b->Unit(benchmark::kMicrosecond);
      if (append_reps > 1) b->DisplayAggregatesOnly(true);
    }
  }
  struct Timed {
    const char* what;
    void (*fn)(benchmark::State&, Side);
    int iterations;
    benchmark::TimeUnit unit;
  };
  for (const Timed& t :
       {Timed{"batch", &Batch, c.batch_iterations, benchmark::kMillisecond},
        Timed{"load", &Load, c.load_iterations, benchmark::kMillisecond},
        Timed{"changes", &Changes, c.changes_iterations, benchmark::kMicrosecond}}) {
    for (Side side : {Side::kPostgres, Side::kSqlite}) {
      const std::string name = std::string(t.what) + "/" + SideName(side);
      auto* b = benchmark::RegisterBenchmark(
          name.c_str(), [fn = t.fn, side](benchmark::State& s) { fn(s, side); });
      b->UseManualTime()->Iterations(t.iterations)->Repetitions(c.repetitions)->Unit(t.unit);
      if (c.repetitions > 1) b->DisplayAggregatesOnly(true);
    }
  }
  auto* bare = benchmark::RegisterBenchmark("load/postgres_bare", &LoadBare);
  bare->UseManualTime()->Iterations(c.load_iterations)->Repetitions(c.repetitions);
  bare->Unit(benchmark::kMillisecond);
  if (c.repetitions > 1) bare->DisplayAggregatesOnly(true);
  auto* rt = benchmark::RegisterBenchmark("roundtrip/postgres", &RoundTrip);
  rt->UseRealTime()->Repetitions(c.repetitions)->MinTime(c.smoke ? 0.01 : 0.1);
  rt->Unit(benchmark::kMicrosecond);
  if (c.repetitions > 1) rt->DisplayAggregatesOnly(true);
}

}  // namespace

int main(int argc, char** argv) {
  Config& c = g.config;
  if (const char* e = std::getenv("RECAP_BENCH_SMOKE");
      e != nullptr && std::strcmp(e, "0") != 0 && *e != '\0') {
    c.smoke = true;
  }
  if (const char* t = std::getenv("TMPDIR"); t != nullptr && *t != '\0') c.dir = t;
  std::vector<char*> args{argv[0]};
  static std::string interleave = "--benchmark_enable_random_interleaving=true";
  bool user_interleave = false;

  long messages = -1;
  long repetitions = -1;
  long iterations = -1;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    std::string v;
    if (TakeFlag(arg, "recap_smoke", &v)) {
      c.smoke = true;
    } else if (TakeFlag(arg, "recap_messages", &v)) {
      messages = std::strtol(v.c_str(), nullptr, 10);
    } else if (TakeFlag(arg, "recap_repetitions", &v)) {
      repetitions = std::strtol(v.c_str(), nullptr, 10);
    } else if (TakeFlag(arg, "recap_iterations", &v)) {
      iterations = std::strtol(v.c_str(), nullptr, 10);
    } else if (TakeFlag(arg, "recap_dir", &v)) {
      c.dir = v;
    } else if (TakeFlag(arg, "recap_json", &v)) {
      c.json = v;
    } else if (TakeFlag(arg, "recap_keep", &v)) {
      c.keep = true;
    } else {
      if (arg.rfind("--benchmark_enable_random_interleaving", 0) == 0) user_interleave = true;
      args.push_back(argv[i]);
    }
  }
  if (!user_interleave) args.insert(args.begin() + 1, interleave.data());
  if (c.smoke) {
    c.messages = 300;
    c.repetitions = 1;
    c.append_min_time = 0.02;
    c.batch_iterations = 1;
    c.load_iterations = 1;
    c.changes_iterations = 5;
  }
  if (messages > 2) c.messages = static_cast<std::size_t>(messages);
  if (repetitions > 0) c.repetitions = static_cast<int>(repetitions);
  if (iterations > 0) c.batch_iterations = c.load_iterations = static_cast<int>(iterations);
  if (c.dir.empty()) c.dir = "/tmp";

  int bargc = static_cast<int>(args.size());
  args.push_back(nullptr);
  benchmark::Initialize(&bargc, args.data());
  if (benchmark::ReportUnrecognizedArguments(bargc, args.data())) return 2;

  std::string pattern = c.dir + "/recap-bench-pg-XXXXXX";
  if (::mkdtemp(pattern.data()) == nullptr) {
    std::fprintf(stderr, "recap_bench_postgres: cannot create a temporary folder in %s\n",
                 c.dir.c_str());
    return 2;
  }
  g.tmp = pattern;

  int status = 0;
  try {
    std::fprintf(stderr, "recap_bench_postgres: starting a private PostgreSQL server ...\n");
    SetUpServer();
    StopServerOnSignal(g.pg->dir(), g.tmp, c.keep);
    for (const std::string& d : {g.tmp, g.pg->data_dir()}) {
      if (OnTmpfs(d)) {
        std::fprintf(stderr,
                     "recap_bench_postgres: warning: %s is on tmpfs, where fsync costs nothing; "
                     "the durable figures will not mean much\n",
                     d.c_str());
      }
    }
    std::fprintf(stderr, "recap_bench_postgres: %s\n", g.server_line.c_str());
    std::fprintf(stderr, "recap_bench_postgres: writing W1 (%zu messages) to both stores ...\n",
                 c.messages);
    BuildTemplates();

    Register();
    CollectingReporter reporter;
    benchmark::RunSpecifiedBenchmarks(&reporter);
    benchmark::Shutdown();

    const std::string n = Grouped(static_cast<double>(g.w1.size()));
    const std::vector<Figure> figures = {
        {"postgres/append_durable", "append, sync_commit=on | sqlite FULL",
         "postgres synchronous_commit=on, fsync=on | sqlite WAL synchronous=FULL",
         "append_durable/postgres", "append_durable/sqlite", true},
        {"postgres/append_relaxed", "append, sync_commit=off | sqlite NORMAL",
         "postgres synchronous_commit=off, fsync=on | sqlite WAL synchronous=NORMAL",
         "append_relaxed/postgres", "append_relaxed/sqlite", true},
        {"postgres/batch", "AppendMessages of W1 (" + n + " msgs, 1 call)",
         "postgres synchronous_commit=on | sqlite synchronous=FULL", "batch/postgres",
         "batch/sqlite", false},
        {"postgres/load", "Load W1 (" + n + " msgs), fresh store", "", "load/postgres",
         "load/sqlite", false},
        {"postgres/changes", "LoadChanges after 1 append (" + n + "-msg session)", "",
         "changes/postgres", "changes/sqlite", false},
    };
    PrintTable(reporter, figures);
    std::printf("\n");
    if (!c.json.empty() && !WriteJson(c.json, c.smoke)) RecordError("cannot write " + c.json);
    {
      std::lock_guard<std::mutex> lock(g_errors_mu);
      for (const std::string& e : g_errors) std::printf("ERROR %s\n", e.c_str());
      if (!g_errors.empty()) status = 2;
    }
    std::printf(status == 0 ? "PostgreSQL vs SQLite: every figure ran (comparisons, no budget)\n"
                            : "PostgreSQL vs SQLite: an operation failed (see ERROR above)\n");
  } catch (const std::exception& e) {
    std::fprintf(stderr, "recap_bench_postgres: set-up failed: %s\n", e.what());
    status = 2;
  }
  std::fflush(stdout);
  g.admin.reset();
  g.pg.reset();  // stops the server and removes its directory
  if (!c.keep) {
    std::error_code ec;
    fs::remove_all(g.tmp, ec);
  } else {
    std::fprintf(stderr, "recap_bench_postgres: kept %s\n", g.tmp.c_str());
  }
  return status;
}
