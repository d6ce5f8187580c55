// What recap's benchmark programs share: Google Benchmark's console output with the medians
// collected for the tables, number formatting, their flag syntax, JSON strings, and the SQLite
// file helpers. Header-only; each program includes it once.
#ifndef RECAP_BENCH_BENCH_SUPPORT_H_
#define RECAP_BENCH_BENCH_SUPPORT_H_

#include <unistd.h>

#include <filesystem>
#include <map>
#include <string>
#include <system_error>
#include <vector>

#include <benchmark/benchmark.h>
#include <sys/vfs.h>

namespace recap_bench {

// Prints what Google Benchmark prints and keeps, per benchmark, the time of its single run or
// the median of its repetitions, in seconds.
class CollectingReporter : public benchmark::ConsoleReporter {
 public:
  // Google Benchmark 1.7 colours by $TERM alone, even into a pipe or a log file.
  CollectingReporter() : ConsoleReporter(::isatty(STDOUT_FILENO) ? OO_Defaults : OO_Tabular) {}
  void ReportRuns(const std::vector<Run>& runs) override {
    ConsoleReporter::ReportRuns(runs);
    for (const Run& r : runs) {
      if (r.error_occurred) continue;
      const bool single = r.run_type == Run::RT_Iteration && r.repetitions <= 1;
      const bool median = r.run_type == Run::RT_Aggregate && r.aggregate_name == "median";
      if (single || median) {
        seconds[r.run_name.function_name] =
            r.GetAdjustedRealTime() / benchmark::GetTimeUnitMultiplier(r.time_unit);
      }
    }
  }
  std::map<std::string, double> seconds;
};

// 12345.6 -> "12,346"
inline std::string Grouped(double v) {
  std::string digits = std::to_string(static_cast<long long>(v + 0.5));
  std::string out;
  for (std::size_t i = 0; i < digits.size(); ++i) {
    if (i > 0 && (digits.size() - i) % 3 == 0) out += ',';
    out += digits[i];
  }
  return out;
}

// A JSON string literal of `s` (the benchmarks' names and labels: no control characters).
inline std::string JsonString(const std::string& s) {
  std::string out = "\"";
  for (char ch : s) {
    if (ch == '"' || ch == '\\') out += '\\';
    out += ch;
  }
  return out + "\"";
}

// `--name` (value cleared) or `--name=value`.
inline bool TakeFlag(const std::string& arg, const char* name, std::string* value) {
  const std::string prefix = std::string("--") + name;
  if (arg == prefix) {
    value->clear();
    return true;
  }
  if (arg.rfind(prefix + "=", 0) == 0) {
    *value = arg.substr(prefix.size() + 1);
    return true;
  }
  return false;
}

// Runs `measured` and `baseline` (each returns the seconds it timed) back to back in every
// iteration, each pair in turn starting with the other, and hands each pair's two times to
// `record`. A budget held to the median of the pairs' ratios compares two figures taken within
// milliseconds of each other: a change in the machine's load or memory bandwidth between runs
// moves both sides alike (measured as benchmarks of their own, a baseline moved by 30-40%).
// The iteration's time is the pair's.
template <typename Measured, typename Baseline, typename Record>
void TimePairs(benchmark::State& state, Measured&& measured, Baseline&& baseline, Record&& record) {
  std::size_t k = 0;
  for (auto _ : state) {
    double m = 0;
    double b = 0;
    if (k++ % 2 == 0) {
      m = measured();
      b = baseline();
    } else {
      b = baseline();
      m = measured();
    }
    state.SetIterationTime(m + b);
    record(m, b);
  }
}

inline bool OnTmpfs(const std::string& path) {
  struct statfs s {};
  return ::statfs(path.c_str(), &s) == 0 && s.f_type == 0x01021994;  // TMPFS_MAGIC
}

// A SQLite database file and the files SQLite keeps beside it.
inline void RemoveDb(const std::string& path) {
  std::error_code ec;
  for (const char* suffix : {"", "-wal", "-shm", "-journal"}) {
    std::filesystem::remove(path + suffix, ec);
  }
}

}  // namespace recap_bench

#endif  // RECAP_BENCH_BENCH_SUPPORT_H_
