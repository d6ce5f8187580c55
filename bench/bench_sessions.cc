// SPEC R12.6: a host serving many sessions in turn keeps its memory bounded.
//
// One Compactor over a SQLite file of N sessions (default 10,000, each about 30 KB of
// messages), serving every session in turn — append one message, then Prepare — for
// --recap_rounds rounds (default 2), the way a host with thousands of users does. It runs twice,
// each time in a child process of its own so that their memory is apart:
//
//   bounded    cache.maxBytes = --recap_max_mb (default 64 MiB)
//   unbounded  cache.maxBytes = 1 TiB (every session stays cached, as before R12.6)
//
// Each child samples its resident memory (VmRSS) and the cache's own figures
// (Compactor::cache_stats) ten times a round, after it first served 10% of the sessions. After
// Google Benchmark's own output, one table of the samples, then the budget: the bounded run's
// resident memory may grow at most 1.5x cache.maxBytes above where it stood after its first
// 10% of sessions (the cache's estimate, allocator slack), and the cache's own bytes never
// exceed the budget by more than one session.
//
// Flags (besides Google Benchmark's --benchmark_*):
//   --recap_smoke          300 sessions, a 1 MiB budget, one round; the budget reported, not
//                          enforced (the ctest `bench.sessions_smoke`)
//   --recap_sessions=N     sessions in the file
//   --recap_rounds=N       times every session is served
//   --recap_max_mb=M       the bounded run's cache.maxBytes, in MiB
//   --recap_dir=PATH       folder for the database file (default $TMPDIR or /tmp)
//   --recap_json=FILE      also write the two budgets as JSON, as the other benchmarks do
//                          ({"budgets": [{"id": "R12.6/rss_growth", …}, …]}; scripts/bench.sh)
// Exit status: 0 the budget met (or smoke), 1 it was missed, 2 an operation failed.
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <sys/wait.h>

#include "recap/recap.h"
#include "recap/sqlite/sqlite_store.h"

#include "bench_support.h"

namespace {

using recap_bench::CollectingReporter;
using recap_bench::Grouped;
using recap_bench::TakeFlag;

struct Options {
  bool smoke = false;
  std::size_t sessions = 10000;
  int rounds = 2;
  std::size_t max_mb = 64;
  std::string dir;
  std::string json;
};
Options g_options;
std::string g_db;

struct Sample {
  std::size_t served = 0;
  double rss_mb = 0;
  double cache_mb = 0;
  std::size_t cached_sessions = 0;
};

double RssMb() {
  std::FILE* f = std::fopen("/proc/self/status", "r");
  if (f == nullptr) return -1;
  char line[256];
  long kb = -1;
  while (std::fgets(line, sizeof line, f) != nullptr) {
    if (std::strncmp(line, "VmRSS:", 6) == 0) kb = std::atol(line + 6);
  }
  std::fclose(f);
  return static_cast<double>(kb) / 1024.0;
}

std::string SessionName(std::size_t k) { return "user-" + std::to_string(k); }

// A session of 40 messages, about 30 KB: ten turns of a request, a tool call, its output and
// an answer.
std::vector<recap::Message> SessionMessages(std::size_t k) {
  std::vector<recap::Message> out;
  for (int t = 0; t < 10; ++t) {
    const std::string id = "c" + std::to_string(t);
    out.push_back(recap::Message::UserText("Session " + std::to_string(k) + ", request " +
                                           std::to_string(t) + ": " + std::string(120, 'r')));
    out.push_back(recap::Message::AssistantCalls({recap::ToolCall{
        id, "read_file", R"({"path":"src/file_)" + std::to_string(t) + R"(.cc"})", {}}}));
    out.push_back(recap::Message::ToolOutput(id, std::string(2400, static_cast<char>('a' + t))));
    out.push_back(recap::Message::AssistantText("Done with step " + std::to_string(t) + ". " +
                                                std::string(200, 'd')));
  }
  return out;
}

bool MakeDatabase() {
  recap_bench::RemoveDb(g_db);
  recap::SqliteStoreOptions o;
  o.synchronous = recap::SqliteSynchronous::kOff;
  auto store = recap::OpenSqliteSessionStore(g_db, o);
  if (!store.ok()) {
    std::fprintf(stderr, "cannot create %s: %s\n", g_db.c_str(), store.status().message().c_str());
    return false;
  }
  std::vector<recap::NewSession> batch;
  for (std::size_t k = 0; k < g_options.sessions; ++k) {
    recap::NewSession n;
    n.session = SessionName(k);
    n.messages = SessionMessages(k);
    batch.push_back(std::move(n));
    if (batch.size() == 200 || k + 1 == g_options.sessions) {
      auto made = (*store)->CreateSessions(std::move(batch));
      if (!made.ok()) {
        std::fprintf(stderr, "cannot create sessions: %s\n", made.status().message().c_str());
        return false;
      }
      batch.clear();
    }
  }
  return true;
}

// The serving loop, in this process; writes its samples to `fd`. Returns false on a failure.
bool Serve(std::size_t max_bytes, int fd) {
  auto store = recap::OpenSqliteSessionStore(g_db, {});
  if (!store.ok()) {
    std::fprintf(stderr, "open: %s\n", store.status().message().c_str());
    return false;
  }
  recap::Config config;
  config.cache.max_bytes = max_bytes;
  auto compactor = recap::Compactor::Create(config, nullptr, *store);
  if (!compactor.ok()) {
    std::fprintf(stderr, "Compactor::Create: %s\n", compactor.status().message().c_str());
    return false;
  }
  const std::size_t every = std::max<std::size_t>(1, g_options.sessions / 10);
  std::size_t served = 0;
  for (int round = 0; round < g_options.rounds; ++round) {
    for (std::size_t k = 0; k < g_options.sessions; ++k) {
      const std::string session = SessionName(k);
      auto appended = (*store)->Append(
          session, recap::Message::UserText("next, round " + std::to_string(round)));
      if (!appended.ok()) {
        std::fprintf(stderr, "Append(%s): %s\n", session.c_str(),
                     appended.status().message().c_str());
        return false;
      }
      auto p = (*compactor)->Prepare(session, {});
      if (!p.ok()) {
        std::fprintf(stderr, "Prepare(%s): %s\n", session.c_str(), p.status().message().c_str());
        return false;
      }
      if (++served % every == 0) {
        const recap::Compactor::CacheStats stats = (*compactor)->cache_stats();
        Sample s{served, RssMb(), static_cast<double>(stats.bytes) / (1 << 20), stats.sessions};
        if (::write(fd, &s, sizeof s) != static_cast<ssize_t>(sizeof s)) return false;
      }
    }
  }
  return true;
}

// Runs Serve in a child; its samples, or none when it failed.
std::vector<Sample> ServeInChild(std::size_t max_bytes, double* seconds) {
  int fds[2];
  if (::pipe(fds) != 0) return {};
  const auto start = std::chrono::steady_clock::now();
  const pid_t child = ::fork();
  if (child == 0) {
    ::close(fds[0]);
    const bool ok = Serve(max_bytes, fds[1]);
    ::close(fds[1]);
    ::_exit(ok ? 0 : 1);
  }
  ::close(fds[1]);
  std::vector<Sample> samples;
  Sample s;
  while (::read(fds[0], &s, sizeof s) == static_cast<ssize_t>(sizeof s)) samples.push_back(s);
  ::close(fds[0]);
  int status = 0;
  ::waitpid(child, &status, 0);
  *seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) return {};
  return samples;
}

std::vector<Sample> g_bounded, g_unbounded;
bool g_failed = false;

void BM_Serve(benchmark::State& state, bool bounded) {
  for (auto _ : state) {
    double seconds = 0;
    std::vector<Sample> samples =
        ServeInChild(bounded ? g_options.max_mb << 20 : std::size_t{1} << 40, &seconds);
    if (samples.empty()) {
      g_failed = true;
      state.SkipWithError("the serving child failed");
      return;
    }
    state.SetIterationTime(seconds);
    state.counters["peak_rss_MB"] =
        std::max_element(samples.begin(), samples.end(), [](const Sample& a, const Sample& b) {
          return a.rss_mb < b.rss_mb;
        })->rss_mb;
    (bounded ? g_bounded : g_unbounded) = std::move(samples);
  }
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<char*> rest = {argv[0]};
  for (int i = 1; i < argc; ++i) {
    std::string value;
    const std::string arg = argv[i];
    if (arg == "--recap_smoke") {
      g_options.smoke = true;
    } else if (TakeFlag(arg, "recap_sessions", &value)) {
      g_options.sessions = std::stoul(value);
    } else if (TakeFlag(arg, "recap_rounds", &value)) {
      g_options.rounds = std::stoi(value);
    } else if (TakeFlag(arg, "recap_max_mb", &value)) {
      g_options.max_mb = std::stoul(value);
    } else if (TakeFlag(arg, "recap_dir", &value)) {
      g_options.dir = value;
    } else if (TakeFlag(arg, "recap_json", &value)) {
      g_options.json = value;
    } else {
      rest.push_back(argv[i]);
    }
  }
  if (std::getenv("RECAP_BENCH_SMOKE") != nullptr) g_options.smoke = true;
  if (g_options.smoke) {
    g_options.sessions = 300;
    g_options.max_mb = 1;
    g_options.rounds = 1;
  }
  if (g_options.sessions == 0 || g_options.rounds < 1) {
    std::fprintf(stderr,
                 "recap_bench_sessions: --recap_sessions and --recap_rounds must be "
                 "at least 1\n");
    return 2;
  }
  if (g_options.dir.empty()) {
    const char* tmp = std::getenv("TMPDIR");
    g_options.dir = tmp != nullptr && *tmp != '\0' ? tmp : "/tmp";
  }
  g_db = (std::filesystem::path(g_options.dir) /
          ("recap-bench-sessions-" + std::to_string(::getpid()) + ".db"))
             .string();
  std::printf("recap_bench_sessions: writing %s sessions to %s ...\n",
              Grouped(static_cast<double>(g_options.sessions)).c_str(), g_db.c_str());
  std::fflush(stdout);
  if (!MakeDatabase()) return 2;

  int argc2 = static_cast<int>(rest.size());
  benchmark::Initialize(&argc2, rest.data());
  benchmark::RegisterBenchmark("sessions/bounded", BM_Serve, true)
      ->Iterations(1)
      ->UseManualTime()
      ->Unit(benchmark::kMillisecond);
  benchmark::RegisterBenchmark("sessions/unbounded", BM_Serve, false)
      ->Iterations(1)
      ->UseManualTime()
      ->Unit(benchmark::kMillisecond);
  CollectingReporter reporter;
  benchmark::RunSpecifiedBenchmarks(&reporter);
  recap_bench::RemoveDb(g_db);
  if (g_failed || g_bounded.empty() || g_unbounded.empty()) {
    std::printf("ERROR a serving run failed\n");
    return 2;
  }

  std::printf(
      "\nR12.6 — %s sessions of ~30 KB served in turn, %d round(s); cache.maxBytes %zu MiB "
      "(bounded) vs 1 TiB (unbounded)\n\n",
      Grouped(static_cast<double>(g_options.sessions)).c_str(), g_options.rounds, g_options.max_mb);
  std::printf("%10s %16s %16s %18s %16s\n", "served", "bounded RSS MB", "cache MB (sess.)",
              "unbounded RSS MB", "cache MB (sess.)");
  for (std::size_t i = 0; i < g_bounded.size() && i < g_unbounded.size(); ++i) {
    const Sample& b = g_bounded[i];
    const Sample& u = g_unbounded[i];
    char bc[32], uc[32];
    std::snprintf(bc, sizeof bc, "%.1f (%zu)", b.cache_mb, b.cached_sessions);
    std::snprintf(uc, sizeof uc, "%.1f (%zu)", u.cache_mb, u.cached_sessions);
    std::printf("%10s %16.1f %16s %18.1f %16s\n", Grouped(static_cast<double>(b.served)).c_str(),
                b.rss_mb, bc, u.rss_mb, uc);
  }
  const double budget_mb = static_cast<double>(g_options.max_mb);
  double growth = 0, cache_peak = 0;
  for (const Sample& s : g_bounded) {
    growth = std::max(growth, s.rss_mb - g_bounded.front().rss_mb);
    cache_peak = std::max(cache_peak, s.cache_mb);
  }
  const double session_mb = 30.0 * 1.5 / 1024;  // one session's share, generously
  const bool rss_ok = growth <= 1.5 * budget_mb;
  const bool cache_ok = cache_peak <= budget_mb + session_mb;
  std::printf("\n%-58s %10s %12s  %s\n", "figure", "measured", "budget", "result");
  std::printf("%-58s %8.1f MB %9.1f MB  %s\n",
              "bounded: RSS growth after the first 10% of sessions", growth, 1.5 * budget_mb,
              g_options.smoke ? "(smoke)"
              : rss_ok        ? "PASS"
                              : "FAIL");
  std::printf("%-58s %8.1f MB %9.1f MB  %s\n", "bounded: the cache's own peak", cache_peak,
              budget_mb + session_mb,
              g_options.smoke ? "(smoke)"
              : cache_ok      ? "PASS"
                              : "FAIL");
  std::printf("for reference: the unbounded run ended at %.1f MB resident, %.1f MB cached\n",
              g_unbounded.back().rss_mb, g_unbounded.back().cache_mb);
  if (!g_options.json.empty()) {
    std::ofstream out(g_options.json);
    const auto budget = [&](const char* id, const char* figure, double value, double limit,
                            bool pass) {
      char line[512];
      std::snprintf(line, sizeof line,
                    "  {\"id\": \"%s\", \"figure\": \"%s\", \"unit\": \"MB\", \"value\": "
                    "%.3f, \"limit\": %.3f, \"compare\": \"<=\", \"pass\": %s, "
                    "\"enforced\": %s}",
                    id, figure, value, limit, pass ? "true" : "false",
                    g_options.smoke ? "false" : "true");
      return std::string(line);
    };
    out << "{\"budgets\": [\n"
        << budget("R12.6/rss_growth", "RSS growth after the first 10% of sessions", growth,
                  1.5 * budget_mb, rss_ok)
        << ",\n"
        << budget("R12.6/cache_peak", "the cache's own peak", cache_peak, budget_mb + session_mb,
                  cache_ok)
        << "\n]}\n";
    if (!out) {
      std::fprintf(stderr, "recap_bench_sessions: cannot write %s\n", g_options.json.c_str());
      return 2;
    }
  }
  if (g_options.smoke) {
    std::printf("R12.6 smoke run: every figure ran (the budget not enforced)\n");
    return 0;
  }
  std::printf(rss_ok && cache_ok ? "R12.6: the budget met\n" : "R12.6: the budget missed\n");
  return rss_ok && cache_ok ? 0 : 1;
}
