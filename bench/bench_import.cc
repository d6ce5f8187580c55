// Issue 16 (SPEC R13.1): big imports and exports through the `recap` command, fast and lean.
// Each figure runs the built `recap` program as a child process on a generated file and
// measures its wall time and its peak resident memory (wait4's ru_maxrss), in one run:
//
//   import/messages     `recap import --format openai-chat` of N messages (default 1,000,000:
//                       user requests, tool calls, their results and answers; about 86 MB).
//                       Budgets: at most 5 s; peak memory at most 3x the file.
//   export/history      `recap export --history --format openai-chat` of that session.
//                       Budget: at most 5 s.
//   export/transcript   `recap export --format openai-chat --json` (no budget: for reference).
//   import/big_output   a file whose one tool output is M MB (default 200). Budget: peak
//                       memory at most 3x the file.
//   read/baseline       reading the N-message file from disk into memory and writing it to
//                       /dev/null with `cat` (no budget): what no import can beat.
//
// Each figure is the median of --recap_repetitions runs (default 1: a run of the full sizes
// takes about a minute). After Google Benchmark's own output, one table: figure, measured,
// budget, PASS/FAIL.
//
// Flags (besides Google Benchmark's --benchmark_*):
//   --recap_smoke            tiny sizes (10,000 messages, a 2 MB output), budgets reported but
//                            not enforced (the `bench.import_smoke` ctest)
//   --recap_messages=N       messages of the import/export figures
//   --recap_output_mb=M      size of the one big tool output
//   --recap_repetitions=N    runs of each figure
//   --recap_dir=PATH         folder for the temporary files (default $TMPDIR or /tmp)
//   --recap_json=FILE        also write the budgets as JSON, one budget object a line
//   --recap_keep             keep the temporary folder
//   --recap_cli=PATH         the `recap` program to run (default: the one built with this
//                            bench), e.g. a copy of an older build, to alternate the two
// Exit status: 0 all budgets met (or smoke), 1 a budget missed, 2 an operation failed.
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <map>
#include <stdexcept>
#include <string>
#include <vector>

#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <sys/wait.h>

#include "bench_support.h"

#ifndef RECAP_CLI_PATH
#error "RECAP_CLI_PATH must name the built recap program"
#endif

namespace {

using recap_bench::CollectingReporter;
using recap_bench::Grouped;
using recap_bench::JsonString;
using recap_bench::TakeFlag;

struct Config {
  bool smoke = false;
  bool keep = false;
  std::size_t messages = 1000000;
  std::size_t output_mb = 200;
  int repetitions = 1;
  std::string dir;
  std::string json;
  std::string cli = RECAP_CLI_PATH;
};

struct Globals {
  Config config;
  std::string tmp;
  std::string messages_file, big_file;
  std::size_t messages_bytes = 0, big_bytes = 0;
  // Peak resident memory of each figure's runs (the largest), in bytes.
  std::map<std::string, double> peak;
  // CPU time (user + system) of each figure's runs, in seconds: the median is shown.
  std::map<std::string, std::vector<double>> cpu;
} g;

// What one child run took.
struct ChildRun {
  double seconds = 0;
  double cpu_seconds = 0;  // user + system, all its threads (wait4's rusage)
  double peak_bytes = 0;
};

// Runs `argv` with stdout to `out` (a path) and stderr kept for a failure's message; throws
// when it exits non-zero.
ChildRun RunChild(const std::vector<std::string>& argv, const std::string& out) {
  const std::string err = g.tmp + "/child.err";
  const auto start = std::chrono::steady_clock::now();
  const pid_t pid = ::fork();
  if (pid < 0) throw std::runtime_error("fork failed");
  if (pid == 0) {
    const int o = ::open(out.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    const int e = ::open(err.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (o < 0 || e < 0) ::_exit(126);
    ::dup2(o, STDOUT_FILENO);
    ::dup2(e, STDERR_FILENO);
    std::vector<char*> args;
    for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
    args.push_back(nullptr);
    ::execv(args[0], args.data());
    ::_exit(127);
  }
  int status = 0;
  struct rusage usage {};
  if (::wait4(pid, &status, 0, &usage) != pid) throw std::runtime_error("wait4 failed");
  ChildRun run;
  run.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  run.peak_bytes = static_cast<double>(usage.ru_maxrss) * 1024.0;
  const auto tv = [](const timeval& t) {
    return static_cast<double>(t.tv_sec) + static_cast<double>(t.tv_usec) * 1e-6;
  };
  run.cpu_seconds = tv(usage.ru_utime) + tv(usage.ru_stime);
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    std::string message = "`";
    for (const std::string& a : argv) message += a + " ";
    message.back() = '`';
    FILE* f = std::fopen(err.c_str(), "r");
    char buf[2048] = {};
    if (f != nullptr) {
      const std::size_t n = std::fread(buf, 1, sizeof buf - 1, f);
      buf[n] = '\0';
      std::fclose(f);
    }
    throw std::runtime_error(message + " failed: " + buf);
  }
  return run;
}

// The N-message openai-chat file: turns of a request, a tool call, its result and an answer.
std::size_t WriteMessages(const std::string& path, std::size_t n) {
  FILE* f = std::fopen(path.c_str(), "w");
  if (f == nullptr) throw std::runtime_error("cannot write " + path);
  std::fputc('[', f);
  for (std::size_t i = 0; i < n; ++i) {
    if (i > 0) std::fputc(',', f);
    switch (i % 4) {
      case 0:
        std::fprintf(f, R"({"role": "user", "content": "please look at file %zu"})", i);
        break;
      case 1:
        std::fprintf(f,
                     R"({"role": "assistant", "content": null, "tool_calls": [{"id": "c%zu", )"
                     R"("type": "function", "function": {"name": "read", "arguments": )"
                     R"("{\"path\": \"f%zu\"}"}}]})",
                     i, i);
        break;
      case 2:
        std::fprintf(f,
                     R"({"role": "tool", "tool_call_id": "c%zu", "content": "contents of f%zu"})",
                     i - 1, i - 1);
        break;
      default: std::fprintf(f, R"({"role": "assistant", "content": "ok %zu"})", i);
    }
  }
  std::fputc(']', f);
  const long size = std::ftell(f);
  if (std::fclose(f) != 0 || size < 0) throw std::runtime_error("cannot write " + path);
  return static_cast<std::size_t>(size);
}

// A four-message file whose tool output is `mb` MB of text.
std::size_t WriteBigOutput(const std::string& path, std::size_t mb) {
  FILE* f = std::fopen(path.c_str(), "w");
  if (f == nullptr) throw std::runtime_error("cannot write " + path);
  std::fputs(R"([{"role": "user", "content": "show me the log"}, {"role": "assistant", )"
             R"("content": null, "tool_calls": [{"id": "c1", "type": "function", "function": )"
             R"({"name": "cat", "arguments": "{}"}}]}, {"role": "tool", "tool_call_id": "c1", )"
             R"("content": ")",
             f);
  std::string line;
  for (int i = 0; i < 1023; ++i) line += static_cast<char>('a' + i % 26);
  line += "\\n";  // an escaped newline: 2 bytes of JSON, one of text
  for (std::size_t i = 0; i < mb * 1024; ++i) std::fwrite(line.data(), 1, line.size(), f);
  std::fputs(R"("}, {"role": "assistant", "content": "done"}])", f);
  const long size = std::ftell(f);
  if (std::fclose(f) != 0 || size < 0) throw std::runtime_error("cannot write " + path);
  return static_cast<std::size_t>(size);
}

void Record(benchmark::State& state, const std::string& name, const ChildRun& run) {
  state.SetIterationTime(run.seconds);
  double& peak = g.peak[name];
  peak = std::max(peak, run.peak_bytes);
  g.cpu[name].push_back(run.cpu_seconds);
  state.counters["peak_MB"] = run.peak_bytes / 1e6;
  state.counters["cpu_s"] = run.cpu_seconds;
}

// A fresh database holding nothing, then the import.
ChildRun Import(const std::string& file, const std::string& db) {
  recap_bench::RemoveDb(db);
  return RunChild(
      {g.config.cli, "import", "--format", "openai-chat", file, "--session", "s", "--db", db},
      "/dev/null");
}

void BM_ImportMessages(benchmark::State& state) {
  for (auto _ : state) {
    try {
      Record(state, "import/messages", Import(g.messages_file, g.tmp + "/m.db"));
    } catch (const std::exception& e) {
      state.SkipWithError(e.what());
      return;
    }
  }
}

void BM_ExportHistory(benchmark::State& state) {
  for (auto _ : state) {
    try {
      Record(state, "export/history",
             RunChild({g.config.cli, "export", "--db", g.tmp + "/m.db", "--session", "s",
                       "--history", "--format", "openai-chat"},
                      g.tmp + "/history.json"));
    } catch (const std::exception& e) {
      state.SkipWithError(e.what());
      return;
    }
  }
}

void BM_ExportTranscript(benchmark::State& state) {
  for (auto _ : state) {
    try {
      Record(state, "export/transcript",
             RunChild({g.config.cli, "export", "--db", g.tmp + "/m.db", "--session", "s",
                       "--format", "openai-chat", "--json"},
                      g.tmp + "/transcript.json"));
    } catch (const std::exception& e) {
      state.SkipWithError(e.what());
      return;
    }
  }
}

void BM_ImportBigOutput(benchmark::State& state) {
  for (auto _ : state) {
    try {
      Record(state, "import/big_output", Import(g.big_file, g.tmp + "/big.db"));
    } catch (const std::exception& e) {
      state.SkipWithError(e.what());
      return;
    }
  }
}

void BM_ReadBaseline(benchmark::State& state) {
  for (auto _ : state) {
    try {
      Record(state, "read/baseline", RunChild({"/bin/cat", g.messages_file}, "/dev/null"));
    } catch (const std::exception& e) {
      state.SkipWithError(e.what());
      return;
    }
  }
}

// ---- the table ----------------------------------------------------------------------------

struct Budget {
  std::string id, label, unit;
  double value, limit;
  bool pass;
};
std::vector<Budget> g_budgets;

int PrintTable(const CollectingReporter& reporter) {
  const auto seconds = [&](const char* name) {
    auto it = reporter.seconds.find(name);
    return it == reporter.seconds.end() ? -1.0 : it->second;
  };
  std::printf("\nissue 16 — big imports and exports through the recap command, one run\n");
  std::printf("messages file: %s messages, %.1f MB; big-output file: %.1f MB; files in %s\n",
              Grouped(static_cast<double>(g.config.messages)).c_str(),
              static_cast<double>(g.messages_bytes) / 1e6, static_cast<double>(g.big_bytes) / 1e6,
              g.tmp.c_str());
  std::printf("program: %s\n", g.config.cli.c_str());
  if (g.config.smoke) std::printf("SMOKE RUN: tiny sizes, budgets not enforced\n");
  std::printf("\n%-44s %14s %10s  %s\n", "figure", "measured", "budget", "result");
  int missed = 0;
  const auto row = [&](const std::string& id, const std::string& label, const std::string& unit,
                       double value, double limit) {
    char measured[32], budget[16];
    std::snprintf(measured, sizeof measured, unit == "seconds" ? "%.2f s" : "%.2fx", value);
    if (limit <= 0) {
      std::printf("%-44s %14s %10s  %s\n", label.c_str(), value < 0 ? "-" : measured, "-", "");
      return;
    }
    std::snprintf(budget, sizeof budget, unit == "seconds" ? "<= %.0f s" : "<= %.0fx", limit);
    if (value < 0) {
      std::printf("%-44s %14s %10s  %s\n", label.c_str(), "-", budget, "not run");
      return;
    }
    const bool pass = value <= limit;
    if (!pass) ++missed;
    g_budgets.push_back({id, label, unit, value, limit, pass});
    std::printf("%-44s %14s %10s  %s\n", label.c_str(), measured, budget, pass ? "PASS" : "FAIL");
  };
  const double file = static_cast<double>(g.messages_bytes);
  const double big = static_cast<double>(g.big_bytes);
  const auto peak = [&](const char* name, double size) {
    auto it = g.peak.find(name);
    return it == g.peak.end() || seconds(name) < 0 ? -1.0 : it->second / size;
  };
  const std::string n = Grouped(static_cast<double>(g.config.messages));
  row("R13.1/import_seconds", "import of " + n + " messages", "seconds", seconds("import/messages"),
      5);
  const auto cpu = [&](const char* name) {
    auto it = g.cpu.find(name);
    if (it == g.cpu.end() || it->second.empty() || seconds(name) < 0) return -1.0;
    std::vector<double> v = it->second;
    std::sort(v.begin(), v.end());
    return v[v.size() / 2];
  };
  row("", "  CPU time (user + system, every thread)", "seconds", cpu("import/messages"), 0);
  // How many cores' worth the import kept busy: its decoding thread beside the store's.
  const double cpu_seconds = cpu("import/messages");
  const double wall_seconds = seconds("import/messages");
  row("", "  CPU time / wall time", "ratio",
      cpu_seconds < 0 || wall_seconds <= 0 ? -1.0 : cpu_seconds / wall_seconds, 0);
  row("R13.1/import_peak", "  peak memory / file size", "ratio", peak("import/messages", file), 3);
  row("R13.1/export_history_seconds", "export --history of them", "seconds",
      seconds("export/history"), 5);
  row("", "  peak memory / file size", "ratio", peak("export/history", file), 0);
  row("", "export --json of the transcript", "seconds", seconds("export/transcript"), 0);
  row("", "  peak memory / file size", "ratio", peak("export/transcript", file), 0);
  row("R13.1/big_output_peak",
      "import of one " + std::to_string(g.config.output_mb) + " MB output: peak / file", "ratio",
      peak("import/big_output", big), 3);
  row("", "  seconds", "seconds", seconds("import/big_output"), 0);
  row("", "baseline: cat of the messages file", "seconds", seconds("read/baseline"), 0);
  return missed;
}

bool WriteJson(const std::string& path, bool smoke) {
  std::vector<recap_bench::BudgetLine> lines;
  for (const Budget& b : g_budgets) {
    lines.push_back(
        {b.id, b.label, b.unit, b.value, std::nullopt, std::nullopt, b.limit, false, b.pass});
  }
  return recap_bench::WriteBudgetsJson(path, lines, smoke);
}

}  // namespace

int main(int argc, char** argv) {
  Config& c = g.config;
  if (const char* t = std::getenv("TMPDIR"); t != nullptr && *t != '\0') c.dir = t;
  std::vector<char*> args{argv[0]};
  long messages = -1, output_mb = -1, repetitions = -1;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    std::string v;
    if (TakeFlag(arg, "recap_smoke", &v)) {
      c.smoke = true;
    } else if (TakeFlag(arg, "recap_messages", &v)) {
      messages = std::strtol(v.c_str(), nullptr, 10);
    } else if (TakeFlag(arg, "recap_output_mb", &v)) {
      output_mb = std::strtol(v.c_str(), nullptr, 10);
    } else if (TakeFlag(arg, "recap_repetitions", &v)) {
      repetitions = std::strtol(v.c_str(), nullptr, 10);
    } else if (TakeFlag(arg, "recap_dir", &v)) {
      c.dir = v;
    } else if (TakeFlag(arg, "recap_json", &v)) {
      c.json = v;
    } else if (TakeFlag(arg, "recap_keep", &v)) {
      c.keep = true;
    } else if (TakeFlag(arg, "recap_cli", &v)) {
      c.cli = v;
    } else {
      args.push_back(argv[i]);
    }
  }
  if (c.smoke) {
    c.messages = 10000;
    c.output_mb = 2;
  }
  if (messages > 0) c.messages = static_cast<std::size_t>(messages);
  if (output_mb > 0) c.output_mb = static_cast<std::size_t>(output_mb);
  if (repetitions > 0) c.repetitions = static_cast<int>(repetitions);
  if (c.dir.empty()) c.dir = "/tmp";

  int bargc = static_cast<int>(args.size());
  args.push_back(nullptr);
  benchmark::Initialize(&bargc, args.data());
  if (benchmark::ReportUnrecognizedArguments(bargc, args.data())) return 2;

  std::string pattern = c.dir + "/recap-bench-import-XXXXXX";
  if (::mkdtemp(pattern.data()) == nullptr) {
    std::fprintf(stderr, "recap_bench_import: cannot create a temporary folder in %s\n",
                 c.dir.c_str());
    return 2;
  }
  g.tmp = pattern;
  int status = 0;
  try {
    std::fprintf(stderr, "recap_bench_import: writing the files to %s ...\n", g.tmp.c_str());
    g.messages_file = g.tmp + "/messages.json";
    g.big_file = g.tmp + "/big.json";
    g.messages_bytes = WriteMessages(g.messages_file, c.messages);
    g.big_bytes = WriteBigOutput(g.big_file, c.output_mb);
    // Registered in this order and run in it: the exports read what the import wrote.
    const auto reg = [&](const char* name, void (*fn)(benchmark::State&)) {
      benchmark::RegisterBenchmark(name, fn)
          ->UseManualTime()
          ->Iterations(1)
          ->Repetitions(c.repetitions)
          ->Unit(benchmark::kMillisecond)
          ->ReportAggregatesOnly(c.repetitions > 1);
    };
    reg("read/baseline", BM_ReadBaseline);
    reg("import/messages", BM_ImportMessages);
    reg("export/history", BM_ExportHistory);
    reg("export/transcript", BM_ExportTranscript);
    reg("import/big_output", BM_ImportBigOutput);
    CollectingReporter reporter;
    benchmark::RunSpecifiedBenchmarks(&reporter);
    const int missed = PrintTable(reporter);
    if (!c.json.empty() && !WriteJson(c.json, c.smoke)) {
      std::fprintf(stderr, "recap_bench_import: cannot write %s\n", c.json.c_str());
      status = 2;
    }
    if (reporter.seconds.size() < 5) {
      bool filtered = false;
      for (int i = 1; i < bargc; ++i) {
        filtered = filtered || std::strncmp(args[i], "--benchmark_filter", 18) == 0;
      }
      if (!filtered) status = 2;  // a figure failed: its error is in the output above
    }
    if (status == 0 && missed > 0 && !c.smoke) status = 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "recap_bench_import: %s\n", e.what());
    status = 2;
  }
  benchmark::Shutdown();
  if (!c.keep) {
    std::error_code ec;
    std::filesystem::remove_all(g.tmp, ec);
  }
  return status;
}
