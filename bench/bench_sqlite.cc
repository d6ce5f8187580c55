// SPEC R11.5: the SQLite store against the bare sqlite3 C API doing the same work, with the
// same pragmas (journal_mode = WAL, the same synchronous setting, busy timeout 5000 ms), on
// files in one temporary folder, in the same run:
//
//   append      single-message appends, each its own durable transaction:
//               store->Append(session, message)  vs  BEGIN IMMEDIATE; UPDATE sessions
//               (version + 1); INSERT the messages row; INSERT the bodies row (the very bytes
//               the store wrote for that message); COMMIT. Budget: store rate ≥ 70% of bare.
//               Measured with synchronous = FULL (durable, the default) and NORMAL.
//   compaction  store->CommitCompaction replacing the first 20,000 − 2 messages of W1  vs  one
//               transaction UPDATE messages SET position = NULL, replaced_by = ? over the same
//               rows. Each iteration on a fresh, fsynced copy of a template file; only the
//               commit is timed. Budget: store ≤ 3× bare. Measured in pairs, as the load.
//   load        store->Load on a fresh store object  vs  the SELECT of every active body in
//               order, each blob copied into a std::string of its own — reading the rows into
//               memory, the least a program that loads them does (a blob's pointer dies at the
//               next step). Budget: store ≤ 2× bare. The two are measured in pairs, back to
//               back (each pair in turn starting with the other), and the budget is held to
//               the median of the pairs' ratios: measured apart, the copy moved by 40% between
//               runs with the machine's memory bandwidth. The read that only touches each blob
//               in place is printed for reference.
//
// The template file is W1 (w1_workload.h) written by the store itself; the bare figures read
// and change that same file (or copies of it), so both sides see the same rows and pages.
//
// Each figure is the median of --recap_repetitions runs (default 5; twice as many for the
// appends), interleaved at random so that drift on a shared machine hits both sides alike. After
// Google Benchmark's own output, one table: figure, store, bare, ratio, budget, PASS/FAIL.
//
// Flags (besides Google Benchmark's --benchmark_*):
//   --recap_smoke            tiny sizes, one repetition, budgets reported but not enforced
//                            (the `bench` ctest); also RECAP_BENCH_SMOKE=1
//   --recap_messages=N       messages in W1 (default 20000)
//   --recap_repetitions=N    repetitions of each figure (default 5)
//   --recap_iterations=N     iterations of each compaction and load run (default 3 and 5)
//   --recap_dir=PATH         folder for the temporary files (default $TMPDIR or /tmp); must
//                            be a real disk for the durable figures to mean anything
//   --recap_json=FILE        also write the budgets as JSON: {"budgets": [ {...}, ... ]}, one
//                            budget object a line (scripts/bench.sh merges files line-wise)
//   --recap_keep             keep the temporary folder
//   --recap_warm_heap        diagnostic: keep freed memory in the process (glibc mallopt), so
//                            that a load reuses pages instead of faulting fresh ones in; shows
//                            how much of a figure is the kernel's page-fault cost
// Exit status: 0 all budgets met (or smoke), 1 a budget missed, 2 an operation failed.
#include <fcntl.h>
#include <malloc.h>
#include <sqlite3.h>
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
#include <utility>
#include <vector>

#include <benchmark/benchmark.h>
#include <sys/vfs.h>

#include "recap/message.h"
#include "recap/session_store.h"
#include "recap/sqlite/sqlite_store.h"

#include "bench_support.h"
#include "w1_workload.h"

using recap_bench::CollectingReporter;
using recap_bench::Grouped;
using recap_bench::JsonString;
using recap_bench::OnTmpfs;
using recap_bench::RemoveDb;
using recap_bench::TakeFlag;

namespace {

namespace fs = std::filesystem;
using recap::Message;
using recap::SqliteSynchronous;

constexpr std::uint32_t kBusyTimeoutMs = 5000;  // the store's default, given to both sides
constexpr const char* kW1Session = "w1";
constexpr const char* kAppendSession = "bench";

// "FULL", "NORMAL", "OFF": the value of PRAGMA synchronous.
const char* SyncName(SqliteSynchronous sync) {
  return sync == SqliteSynchronous::kFull     ? "FULL"
         : sync == SqliteSynchronous::kNormal ? "NORMAL"
                                              : "OFF";
}

struct Config {
  bool smoke = false;
  std::size_t messages = 20000;
  int repetitions = 5;
  std::string dir;
  bool keep = false;
  bool warm_heap = false;
  std::string json;  // --recap_json
  // Per figure: minimum time of an append run, iterations of a compaction or load run.
  double append_min_time = 0.3;
  int compaction_iterations = 3;
  int load_iterations = 5;
};

// A message row as the store wrote it: what the bare appends insert.
struct StoredRow {
  std::string role;
  std::int64_t summary = 0;
  std::int64_t chars = 0;
  std::string body;
};

// Set up once in main, read by the benchmarks.
struct Setup {
  Config config;
  std::string tmp;  // the temporary folder
  std::vector<Message> w1;
  std::size_t w1_bytes = 0;
  std::string template_path;  // W1 as the store wrote it, checkpointed and fsynced
  std::uint64_t template_version = 0;
  std::int64_t w1_session_id = 0;
  std::int64_t first_seq = 0;         // seq of W1's first message in the template
  std::vector<std::string> replaced;  // ids of all W1 messages but the last two
  std::vector<StoredRow> rows;        // W1's rows, in order
  Message checkpoint;
};
Setup g;

std::atomic<int> g_file_counter{0};
std::mutex g_errors_mu;
std::vector<std::string> g_errors;

void RecordError(const std::string& what) {
  std::lock_guard<std::mutex> lock(g_errors_mu);
  g_errors.push_back(what);
}

// ---- files --------------------------------------------------------------------------------

std::string NewPath(const char* what) {
  return g.tmp + "/" + what + "-" + std::to_string(g_file_counter++) + ".db";
}

void FsyncFile(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDONLY);
  if (fd < 0) throw std::runtime_error("cannot open " + path + " to fsync it");
  int rc = ::fsync(fd);
  ::close(fd);
  if (rc != 0) throw std::runtime_error("fsync of " + path + " failed");
}

// A copy of the template, on disk: a commit's checkpoint must not pay for flushing the copy.
std::string FreshCopy(const char* what) {
  std::string path = NewPath(what);
  fs::copy_file(g.template_path, path, fs::copy_options::overwrite_existing);
  FsyncFile(path);
  return path;
}

// ---- the bare sqlite3 side ------------------------------------------------------------------

[[noreturn]] void Fail(sqlite3* db, const std::string& what) {
  throw std::runtime_error(what + ": " + (db ? sqlite3_errmsg(db) : "no connection"));
}

class Stmt {
 public:
  Stmt(sqlite3* db, const char* sql) : db_(db) {
    if (sqlite3_prepare_v3(db, sql, -1, SQLITE_PREPARE_PERSISTENT, &st_, nullptr) != SQLITE_OK) {
      Fail(db, std::string("prepare ") + sql);
    }
  }
  ~Stmt() { sqlite3_finalize(st_); }
  Stmt(const Stmt&) = delete;
  Stmt& operator=(const Stmt&) = delete;
  sqlite3_stmt* get() const { return st_; }
  // Steps to completion (a statement without rows) and resets.
  void Run() {
    int rc = sqlite3_step(st_);
    sqlite3_reset(st_);
    if (rc != SQLITE_DONE && rc != SQLITE_ROW) Fail(db_, sqlite3_sql(st_));
  }

 private:
  sqlite3* db_;
  sqlite3_stmt* st_ = nullptr;
};

// A raw connection with the store's pragmas (src/sqlite/sqlite_store.cc, Connection::Open):
// busy timeout, journal_mode = WAL, synchronous.
class BareDb {
 public:
  BareDb(const std::string& path, SqliteSynchronous sync) {
    if (sqlite3_open_v2(path.c_str(), &db_, SQLITE_OPEN_READWRITE, nullptr) != SQLITE_OK) {
      std::string msg = db_ ? sqlite3_errmsg(db_) : "out of memory";
      sqlite3_close(db_);
      throw std::runtime_error("open " + path + ": " + msg);
    }
    sqlite3_busy_timeout(db_, static_cast<int>(kBusyTimeoutMs));
    Exec("PRAGMA journal_mode = WAL");
    Exec((std::string("PRAGMA synchronous = ") + SyncName(sync)).c_str());
  }
  ~BareDb() { sqlite3_close_v2(db_); }
  BareDb(const BareDb&) = delete;
  BareDb& operator=(const BareDb&) = delete;

  sqlite3* get() const { return db_; }
  void Exec(const char* sql) {
    if (sqlite3_exec(db_, sql, nullptr, nullptr, nullptr) != SQLITE_OK) Fail(db_, sql);
  }
  std::int64_t Int(const std::string& sql) {
    Stmt st(db_, sql.c_str());
    if (sqlite3_step(st.get()) != SQLITE_ROW) Fail(db_, sql);
    return sqlite3_column_int64(st.get(), 0);
  }

 private:
  sqlite3* db_ = nullptr;
};

// ---- the store side -----------------------------------------------------------------------

std::shared_ptr<recap::SessionStore> OpenStore(const std::string& path, SqliteSynchronous sync) {
  recap::SqliteStoreOptions options;
  options.synchronous = sync;
  options.busy_timeout_ms = kBusyTimeoutMs;
  auto store = recap::OpenSqliteSessionStore(path, options);
  if (!store.ok()) throw std::runtime_error("OpenSqliteSessionStore: " + store.status().ToString());
  return std::move(store).value();
}

template <typename T>
void Check(const recap::Result<T>& r, const char* what) {
  if (!r.ok()) throw std::runtime_error(std::string(what) + ": " + r.status().ToString());
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

// ---- 1. single-message appends ------------------------------------------------------------

void AppendStore(benchmark::State& state, SqliteSynchronous sync) {
  Guarded(state, std::string("append store ") + SyncName(sync), [&] {
    const std::string path = NewPath("append-store");
    {
      auto store = OpenStore(path, sync);
      Message first = g.w1[0];
      first.id = "a0";
      Check(store->Append(kAppendSession, std::move(first)), "Append");
      // The host hands its message over (Append takes it by value): the messages are copied
      // ahead, outside the timing, and moved in.
      constexpr std::size_t kRing = 1024;
      std::vector<Message> ring;
      std::size_t next = 0;  // index into W1 of the next message
      std::size_t i = 0;
      for (auto _ : state) {
        if (i % kRing == 0) {
          state.PauseTiming();
          ring.clear();
          for (std::size_t k = 0; k < kRing; ++k) ring.push_back(g.w1[(next + k) % g.w1.size()]);
          next += kRing;
          state.ResumeTiming();
        }
        Message& m = ring[i % kRing];
        m.id = "a" + std::to_string(++i);
        auto r = store->Append(kAppendSession, std::move(m));
        if (!r.ok()) throw std::runtime_error("Append: " + r.status().ToString());
      }
      state.SetItemsProcessed(state.iterations());
    }
    RemoveDb(path);
  });
}

void AppendBare(benchmark::State& state, SqliteSynchronous sync) {
  Guarded(state, std::string("append bare ") + SyncName(sync), [&] {
    const std::string path = NewPath("append-bare");
    {
      // The schema, and the session row, as the store makes them.
      auto store = OpenStore(path, sync);
      Message first = g.w1[0];
      first.id = "a0";
      Check(store->Append(kAppendSession, std::move(first)), "Append");
    }
    {
      BareDb db(path, sync);
      const std::int64_t session_id = db.Int(
          std::string("SELECT session_id FROM sessions WHERE name = '") + kAppendSession + "'");
      std::int64_t version =
          db.Int("SELECT version FROM sessions WHERE session_id = " + std::to_string(session_id));
      std::int64_t position =
          db.Int("SELECT coalesce(max(position), 0) FROM messages WHERE session_id = " +
                 std::to_string(session_id));
      Stmt begin(db.get(), "BEGIN IMMEDIATE");
      Stmt commit(db.get(), "COMMIT");
      Stmt bump(db.get(), "UPDATE sessions SET version = version + 1 WHERE session_id = ?1");
      Stmt row(db.get(),
               "INSERT INTO messages (session_id, message_id, position, stored_version, "
               "replaced_by, role, summary, chars, stored_at) VALUES (?1, ?2, ?3, ?4, NULL, ?5, "
               "?6, ?7, strftime('%Y-%m-%dT%H:%M:%fZ', 'now'))");
      Stmt body(db.get(), "INSERT INTO bodies (seq, body) VALUES (?1, ?2)");
      sqlite3_bind_int64(bump.get(), 1, session_id);
      sqlite3_bind_int64(row.get(), 1, session_id);
      std::size_t i = 0;
      for (auto _ : state) {
        const StoredRow& r = g.rows[i % g.rows.size()];
        std::string id = "a" + std::to_string(++i);
        begin.Run();
        bump.Run();
        sqlite3_bind_text(row.get(), 2, id.data(), static_cast<int>(id.size()), SQLITE_STATIC);
        sqlite3_bind_int64(row.get(), 3, ++position);
        sqlite3_bind_int64(row.get(), 4, ++version);
        sqlite3_bind_text(row.get(), 5, r.role.data(), static_cast<int>(r.role.size()),
                          SQLITE_STATIC);
        sqlite3_bind_int64(row.get(), 6, r.summary);
        sqlite3_bind_int64(row.get(), 7, r.chars);
        row.Run();
        sqlite3_bind_int64(body.get(), 1, sqlite3_last_insert_rowid(db.get()));
        sqlite3_bind_blob(body.get(), 2, r.body.data(), static_cast<int>(r.body.size()),
                          SQLITE_STATIC);
        body.Run();
        commit.Run();
      }
      state.SetItemsProcessed(state.iterations());
    }
    RemoveDb(path);
  });
}

// ---- 2. committing a compaction -------------------------------------------------------------

// One CommitCompaction of W1's span on a fresh, fsynced copy of the template; only the commit
// is timed.
double TimeCompactionStore() {
  const std::string path = FreshCopy("compaction-store");
  double dt = 0;
  {
    auto store = OpenStore(path, SqliteSynchronous::kFull);
    recap::CompactionCommit commit;
    commit.expected_version = g.template_version;
    commit.replaced = g.replaced;
    commit.checkpoint = g.checkpoint;
    commit.reason = "manual";
    const auto t0 = std::chrono::steady_clock::now();
    auto r = store->CommitCompaction(kW1Session, commit);
    dt = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    Check(r, "CommitCompaction");
  }
  RemoveDb(path);
  return dt;
}

// The bare UPDATE of the same rows in one transaction, on its own fresh copy.
double TimeCompactionBare() {
  const std::int64_t last = g.first_seq + static_cast<std::int64_t>(g.replaced.size()) - 1;
  const std::string path = FreshCopy("compaction-bare");
  double dt = 0;
  {
    BareDb db(path, SqliteSynchronous::kFull);
    const auto t0 = std::chrono::steady_clock::now();
    db.Exec("BEGIN IMMEDIATE");
    Stmt update(db.get(),
                "UPDATE messages SET position = NULL, replaced_by = ?1 "
                "WHERE session_id = ?2 AND seq BETWEEN ?3 AND ?4");
    sqlite3_bind_text(update.get(), 1, "compaction:1", -1, SQLITE_STATIC);
    sqlite3_bind_int64(update.get(), 2, g.w1_session_id);
    sqlite3_bind_int64(update.get(), 3, g.first_seq);
    sqlite3_bind_int64(update.get(), 4, last);
    update.Run();
    const int changed = sqlite3_changes(db.get());
    db.Exec("COMMIT");
    dt = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (static_cast<std::size_t>(changed) != g.replaced.size()) {
      throw std::runtime_error("the bare UPDATE changed " + std::to_string(changed) +
                               " rows, not " + std::to_string(g.replaced.size()));
    }
  }
  RemoveDb(path);
  return dt;
}

// The samples of a figure measured in pairs (recap_bench::TimePairs): each side's times and
// the pairs' ratios; the budget is the median of the ratios.
struct PairSamples {
  std::vector<double> store, bare, ratio;
  void Add(double s, double b) {
    std::lock_guard<std::mutex> lock(mu);
    store.push_back(s);
    bare.push_back(b);
    if (b > 0) ratio.push_back(s / b);
  }
  mutable std::mutex mu;
};

// The compaction's commit ends in an fsync: the disk's pace moved the two sides, measured
// apart, by a third between runs.
PairSamples g_compaction;

void CompactionPair(benchmark::State& state) {
  Guarded(state, "compaction store vs bare", [&] {
    recap_bench::TimePairs(state, TimeCompactionStore, TimeCompactionBare,
                           [](double s, double b) { g_compaction.Add(s, b); });
    state.counters["rows"] = static_cast<double>(g.replaced.size());
  });
}

// ---- 3. loading W1 ------------------------------------------------------------------------

using LoadClock = std::chrono::steady_clock;

double Since(LoadClock::time_point t0) {
  return std::chrono::duration<double>(LoadClock::now() - t0).count();
}

// One Load of W1 on a fresh store object; opening it and freeing what it returned are not
// timed.
double TimeLoadStore() {
  auto store = OpenStore(g.template_path, SqliteSynchronous::kFull);
  const auto t0 = LoadClock::now();
  std::optional<recap::Result<recap::SessionState>> r(store->Load(kW1Session));
  const double dt = Since(t0);
  Check(*r, "Load");
  const std::size_t loaded = r->value().transcript.size();
  if (loaded != g.w1.size()) {
    throw std::runtime_error("Load returned " + std::to_string(loaded) + " messages, not " +
                             std::to_string(g.w1.size()));
  }
  return dt;
}

// The bare read; with `copy`, every body is also copied into its own std::string, kept until
// the end (and freed outside the timing): what materialising the rows costs at the least, the
// baseline of the budget. Without, each blob is only touched in place (for reference).
double TimeLoadBare(bool copy) {
  std::vector<std::string> kept;
  double dt = 0;
  {
    BareDb db(g.template_path, SqliteSynchronous::kFull);
    const auto t0 = LoadClock::now();
    db.Exec("BEGIN");
    Stmt select(db.get(),
                "SELECT b.body FROM messages m JOIN bodies b ON b.seq = m.seq "
                "WHERE m.session_id = ?1 AND m.position IS NOT NULL ORDER BY m.position");
    sqlite3_bind_int64(select.get(), 1, g.w1_session_id);
    std::size_t rows = 0;
    std::size_t bytes = 0;
    unsigned sum = 0;
    int rc;
    while ((rc = sqlite3_step(select.get())) == SQLITE_ROW) {
      const auto* p = static_cast<const char*>(sqlite3_column_blob(select.get(), 0));
      const int n = sqlite3_column_bytes(select.get(), 0);
      if (n > 0) sum += static_cast<unsigned char>(p[0]) + static_cast<unsigned char>(p[n - 1]);
      if (copy) kept.emplace_back(p, static_cast<std::size_t>(n));
      bytes += static_cast<std::size_t>(n);
      ++rows;
    }
    if (rc != SQLITE_DONE) Fail(db.get(), "SELECT bodies");
    db.Exec("COMMIT");
    benchmark::DoNotOptimize(sum);
    benchmark::DoNotOptimize(bytes);
    dt = Since(t0);
    if (rows != g.w1.size()) {
      throw std::runtime_error("the bare SELECT read " + std::to_string(rows) + " rows, not " +
                               std::to_string(g.w1.size()));
    }
  }
  return dt;
}

// The store's Load against the bare read-and-copy, in pairs: measured apart, the copy moved by
// 40% between runs (a shared machine's memory bandwidth).
PairSamples g_load;

void LoadPair(benchmark::State& state) {
  Guarded(state, "load store vs bare+copy", [&] {
    recap_bench::TimePairs(
        state, TimeLoadStore, [] { return TimeLoadBare(true); },
        [](double s, double b) { g_load.Add(s, b); });
    state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations() * 2 * g.w1_bytes));
  });
}

void LoadBare(benchmark::State& state) {
  Guarded(state, "load bare", [&] {
    for (auto _ : state) state.SetIterationTime(TimeLoadBare(false));
    state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations() * g.w1_bytes));
  });
}

double MedianOf(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const std::size_t n = v.size();
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

// ---- set-up -------------------------------------------------------------------------------

void BuildTemplate() {
  g.w1 = recap_bench::GenerateW1({g.config.messages, 20240611});
  g.w1_bytes = 0;
  for (const Message& m : g.w1) g.w1_bytes += recap_bench::MessageBytes(m);
  for (std::size_t i = 0; i + 2 < g.w1.size(); ++i) g.replaced.push_back(g.w1[i].id);
  g.checkpoint = Message::UserText(std::string(2000, 's'));
  g.checkpoint.id = "checkpoint-1";
  g.checkpoint.summary = true;

  g.template_path = g.tmp + "/w1-template.db";
  {
    auto store = OpenStore(g.template_path, SqliteSynchronous::kNormal);
    constexpr std::size_t kBatch = 500;
    for (std::size_t i = 0; i < g.w1.size(); i += kBatch) {
      std::vector<Message> batch(
          g.w1.begin() + static_cast<std::ptrdiff_t>(i),
          g.w1.begin() + static_cast<std::ptrdiff_t>(std::min(i + kBatch, g.w1.size())));
      auto v = store->AppendMessages(kW1Session, std::move(batch));
      Check(v, "AppendMessages (template)");
      g.template_version = v.value();
    }
  }
  {
    BareDb db(g.template_path, SqliteSynchronous::kFull);
    db.Exec("PRAGMA wal_checkpoint(TRUNCATE)");
    g.w1_session_id =
        db.Int(std::string("SELECT session_id FROM sessions WHERE name = '") + kW1Session + "'");
    g.first_seq = db.Int("SELECT min(seq) FROM messages WHERE session_id = " +
                         std::to_string(g.w1_session_id));
    Stmt rows(db.get(),
              "SELECT m.role, m.summary, m.chars, b.body FROM messages m JOIN bodies b "
              "ON b.seq = m.seq WHERE m.session_id = ?1 ORDER BY m.seq");
    sqlite3_bind_int64(rows.get(), 1, g.w1_session_id);
    while (sqlite3_step(rows.get()) == SQLITE_ROW) {
      StoredRow r;
      r.role = reinterpret_cast<const char*>(sqlite3_column_text(rows.get(), 0));
      r.summary = sqlite3_column_int64(rows.get(), 1);
      r.chars = sqlite3_column_int64(rows.get(), 2);
      const void* p = sqlite3_column_blob(rows.get(), 3);
      r.body.assign(static_cast<const char*>(p),
                    static_cast<std::size_t>(sqlite3_column_bytes(rows.get(), 3)));
      g.rows.push_back(std::move(r));
    }
    if (g.rows.size() != g.w1.size()) {
      throw std::runtime_error("the template holds " + std::to_string(g.rows.size()) +
                               " messages, not " + std::to_string(g.w1.size()));
    }
  }
  std::error_code ec;
  fs::remove(g.template_path + "-wal", ec);
  fs::remove(g.template_path + "-shm", ec);
  FsyncFile(g.template_path);
}

// ---- results ------------------------------------------------------------------------------

// Google Benchmark's console output, plus the median real time of each benchmark (the single
// run's time when there is one repetition), in seconds.

struct Figure {
  std::string id;  // in the JSON
  std::string label;
  std::string store_name;
  std::string bare_name;
  bool rate;      // shown as messages per second; ratio = store rate / bare rate
  double budget;  // rate: ratio ≥ budget; time: ratio ≤ budget
  // Measured in pairs (CompactionPair, LoadPair): the sides' medians, and the ratio the
  // median of the pairs' ratios.
  const PairSamples* paired = nullptr;
};

std::string Shown(double seconds, bool rate) {
  char buf[64];
  if (rate) return Grouped(1.0 / seconds) + " msg/s";
  std::snprintf(buf, sizeof buf, "%.1f ms", seconds * 1e3);
  return buf;
}

// Prints the table; returns the number of budgets missed. A figure without a result was
// filtered out (--benchmark_filter) or failed; a failure is reported on its own, as an error.
struct JsonBudget {
  std::string id, label, unit;
  double value, baseline, ratio, limit;
  bool at_least, pass;
};
std::vector<JsonBudget> g_json;

int PrintTable(const CollectingReporter& reporter, const std::vector<Figure>& figures) {
  std::printf("\nR11.5 — recap's SQLite store vs the bare sqlite3 C API, same pragmas, same run\n");
  std::printf("W1: %s messages, %.1f MB of message text; files in %s\n",
              Grouped(static_cast<double>(g.w1.size())).c_str(),
              static_cast<double>(g.w1_bytes) / 1e6, g.tmp.c_str());
  if (g.config.repetitions > 1) {
    std::printf("each figure the median of %d runs (appends %d), interleaved at random\n",
                g.config.repetitions, 2 * g.config.repetitions);
  }
  if (g.config.smoke) std::printf("SMOKE RUN: tiny sizes, budgets not enforced\n");
  if (g.config.warm_heap) {
    std::printf("DIAGNOSTIC RUN (--recap_warm_heap): freed memory stays in the process\n");
  }
  std::printf("\n%-36s %16s %16s %7s %8s  %s\n", "figure", "store", "bare", "ratio", "budget",
              "result");
  int missed = 0;
  for (const Figure& f : figures) {
    double store_seconds = 0;
    double bare_seconds = 0;
    double ratio = 0;
    if (f.paired != nullptr) {
      std::lock_guard<std::mutex> lock(f.paired->mu);
      store_seconds = MedianOf(f.paired->store);
      bare_seconds = MedianOf(f.paired->bare);
      ratio = MedianOf(f.paired->ratio);
    } else {
      auto s = reporter.seconds.find(f.store_name);
      auto b = reporter.seconds.find(f.bare_name);
      if (s != reporter.seconds.end() && b != reporter.seconds.end()) {
        store_seconds = s->second;
        bare_seconds = b->second;
        if (store_seconds > 0 && bare_seconds > 0) {
          ratio = f.rate ? bare_seconds / store_seconds : store_seconds / bare_seconds;
        }
      }
    }
    char budget[16];
    std::snprintf(budget, sizeof budget, "%s %.2f", f.rate ? ">=" : "<=", f.budget);
    if (store_seconds <= 0 || bare_seconds <= 0 || ratio <= 0) {
      std::printf("%-36s %16s %16s %7s %8s  %s\n", f.label.c_str(), "-", "-", "-", budget,
                  "not run");
      continue;
    }
    const bool pass = f.rate ? ratio >= f.budget : ratio <= f.budget;
    if (!pass) ++missed;
    // value and baseline as the table shows them: messages per second, or seconds
    g_json.push_back({f.id, f.label, f.rate ? "messages/s" : "seconds",
                      f.rate ? 1.0 / store_seconds : store_seconds,
                      f.rate ? 1.0 / bare_seconds : bare_seconds, ratio, f.budget, f.rate, pass});
    std::printf("%-36s %16s %16s %7.2f %8s  %s\n", f.label.c_str(),
                Shown(store_seconds, f.rate).c_str(), Shown(bare_seconds, f.rate).c_str(), ratio,
                budget, pass ? "PASS" : "FAIL");
  }
  auto bare = reporter.seconds.find("load/bare");
  std::lock_guard<std::mutex> lock(g_load.mu);
  if (bare != reporter.seconds.end() && bare->second > 0 && !g_load.bare.empty()) {
    std::printf(
        "\nfor reference (no budget): the bare read that only touches each blob in place takes "
        "%.1f ms;\ncopying the rows into memory is %.2fx that, the store's load %.2fx.\n",
        bare->second * 1e3, MedianOf(g_load.bare) / bare->second,
        MedianOf(g_load.store) / bare->second);
  }
  return missed;
}

// One budget object a line, so that scripts/bench.sh can merge files line by line.
bool WriteJson(const std::string& path, bool smoke) {
  FILE* f = std::fopen(path.c_str(), "w");
  if (f == nullptr) return false;
  std::fprintf(f, "{\"budgets\": [\n");
  for (std::size_t i = 0; i < g_json.size(); ++i) {
    const JsonBudget& b = g_json[i];
    std::fprintf(f,
                 "  {\"id\": %s, \"figure\": %s, \"unit\": %s, \"value\": %.9g, \"baseline\": "
                 "%.9g, \"ratio\": %.9g, \"limit\": %.9g, \"compare\": %s, \"pass\": %s, "
                 "\"enforced\": %s}%s\n",
                 JsonString(b.id).c_str(), JsonString(b.label).c_str(), JsonString(b.unit).c_str(),
                 b.value, b.baseline, b.ratio, b.limit, b.at_least ? "\">=\"" : "\"<=\"",
                 b.pass ? "true" : "false", smoke ? "false" : "true",
                 i + 1 < g_json.size() ? "," : "");
  }
  std::fprintf(f, "]}\n");
  return std::fclose(f) == 0;
}

// ---- main ---------------------------------------------------------------------------------

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
    } else if (TakeFlag(arg, "recap_warm_heap", &v)) {
      c.warm_heap = true;
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
    c.compaction_iterations = 1;
    c.load_iterations = 1;
  }
  if (messages > 2) c.messages = static_cast<std::size_t>(messages);
  if (repetitions > 0) c.repetitions = static_cast<int>(repetitions);
  if (iterations > 0) c.compaction_iterations = c.load_iterations = static_cast<int>(iterations);
  if (c.dir.empty()) c.dir = "/tmp";

  if (c.warm_heap) {
    ::mallopt(M_MMAP_THRESHOLD, 32 << 20);  // glibc's maximum
    ::mallopt(M_TRIM_THRESHOLD, 1 << 30);
  }

  int bargc = static_cast<int>(args.size());
  args.push_back(nullptr);
  benchmark::Initialize(&bargc, args.data());
  if (benchmark::ReportUnrecognizedArguments(bargc, args.data())) return 2;

  std::string pattern = c.dir + "/recap-bench-XXXXXX";
  if (::mkdtemp(pattern.data()) == nullptr) {
    std::fprintf(stderr, "recap_bench_sqlite: cannot create a temporary folder in %s\n",
                 c.dir.c_str());
    return 2;
  }
  g.tmp = pattern;
  if (OnTmpfs(g.tmp)) {
    std::fprintf(stderr,
                 "recap_bench_sqlite: warning: %s is on tmpfs, where fsync costs nothing; the "
                 "durable figures will not mean much (use --recap_dir on a disk)\n",
                 g.tmp.c_str());
  }

  int status = 0;
  try {
    std::fprintf(stderr, "recap_bench_sqlite: writing W1 (%zu messages) to %s ...\n", c.messages,
                 g.tmp.c_str());
    BuildTemplate();
    std::fprintf(stderr, "recap_bench_sqlite: W1 is %.1f MB of message text, %.1f MB on disk\n",
                 static_cast<double>(g.w1_bytes) / 1e6,
                 static_cast<double>(fs::file_size(g.template_path)) / 1e6);

    for (auto [sync, name] : {std::pair{SqliteSynchronous::kFull, "full"},
                              std::pair{SqliteSynchronous::kNormal, "normal"}}) {
      for (bool store : {true, false}) {
        std::string bench = std::string("append_") + name + (store ? "/store" : "/bare");
        auto* b =
            benchmark::RegisterBenchmark(bench.c_str(), [sync = sync, store](benchmark::State& s) {
              store ? AppendStore(s, sync) : AppendBare(s, sync);
            });
        // Appends are fsync-bound and most exposed to other processes' disk traffic: twice
        // as many, shorter runs interleave the two sides more finely.
        b->UseRealTime()->Repetitions(c.repetitions > 1 ? 2 * c.repetitions : 1);
        if (c.repetitions > 1) b->DisplayAggregatesOnly(true);
        b->Unit(benchmark::kMicrosecond)->MinTime(c.append_min_time);
      }
    }
    for (auto [bench, fn] :
         {std::pair{"compaction/pair", &CompactionPair}, std::pair{"load/pair", &LoadPair},
          std::pair{"load/bare", &LoadBare}}) {
      auto* b = benchmark::RegisterBenchmark(bench, fn);
      const bool compaction = std::strncmp(bench, "compaction", 10) == 0;
      // Timed by hand: the set-up of each side (a fresh copy, opening it) is left out.
      b->UseManualTime()->Repetitions(c.repetitions);
      if (c.repetitions > 1) b->DisplayAggregatesOnly(true);
      b->Unit(benchmark::kMillisecond)
          ->Iterations(compaction ? c.compaction_iterations : c.load_iterations);
    }

    CollectingReporter reporter;
    benchmark::RunSpecifiedBenchmarks(&reporter);
    benchmark::Shutdown();

    char compaction_label[64];
    std::snprintf(compaction_label, sizeof compaction_label, "compaction marking %s msgs",
                  Grouped(static_cast<double>(g.replaced.size())).c_str());
    char load_label[64];
    std::snprintf(load_label, sizeof load_label, "load W1 (%s msgs, %.0f MB)",
                  Grouped(static_cast<double>(g.w1.size())).c_str(),
                  static_cast<double>(g.w1_bytes) / 1e6);
    const std::vector<Figure> figures = {
        {"R11.5/append_full", "append, synchronous=FULL", "append_full/store", "append_full/bare",
         true, 0.70},
        {"R11.5/append_normal", "append, synchronous=NORMAL", "append_normal/store",
         "append_normal/bare", true, 0.70},
        {"R11.5/compaction", compaction_label, "compaction/pair", "compaction/pair", false, 3.0,
         &g_compaction},
        {"R11.5/load", load_label, "load/pair", "load/pair", false, 2.0, &g_load},
    };
    const int missed = PrintTable(reporter, figures);
    std::printf("\n");
    if (!c.json.empty() && !WriteJson(c.json, c.smoke)) {
      RecordError("cannot write " + c.json);
    }
    {
      std::lock_guard<std::mutex> lock(g_errors_mu);
      for (const std::string& e : g_errors) std::printf("ERROR %s\n", e.c_str());
      if (!g_errors.empty()) status = 2;
    }
    if (status == 0) {
      if (c.smoke) {
        std::printf("R11.5 smoke run: every figure ran (budgets not enforced at these sizes)\n");
      } else if (missed == 0) {
        std::printf("R11.5: every budget met\n");
      } else {
        std::printf("R11.5: %d budget%s missed\n", missed, missed == 1 ? "" : "s");
        status = 1;
      }
    } else {
      std::printf("R11.5: an operation failed (see ERROR above)\n");
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "recap_bench_sqlite: set-up failed: %s\n", e.what());
    status = 2;
  }
  std::fflush(stdout);
  if (!c.keep) {
    std::error_code ec;
    fs::remove_all(g.tmp, ec);
  } else {
    std::fprintf(stderr, "recap_bench_sqlite: kept %s\n", g.tmp.c_str());
  }
  return status;
}
