// What recap's benchmark programs share: Google Benchmark's console output with the medians
// collected for the tables, number formatting, their flag syntax, JSON strings, and the SQLite
// file helpers. Header-only; each program includes it once.
#ifndef RECAP_BENCH_BENCH_SUPPORT_H_
#define RECAP_BENCH_BENCH_SUPPORT_H_

#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
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

// A number as JSON (9 significant digits), or null.
inline std::string JsonNumber(std::optional<double> v) {
  if (!v) return "null";
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.9g", *v);
  return buf;
}

// One figure held to its budget, as the programs' --recap_json files carry it (scripts/bench.sh
// and bench/quick_budgets.py read them): a ratio to a baseline, or an absolute value when
// there is no baseline.
struct BudgetLine {
  std::string id;
  std::string figure;
  std::string unit;  // "seconds" or "bytes"
  std::optional<double> value;
  std::optional<double> baseline;
  std::optional<double> ratio;
  double limit = 0;
  bool strict = false;  // value (or ratio) < limit; otherwise <=
  bool pass = false;
};

// Writes {"budgets": [...]} to `path`, one budget object a line, so that scripts/bench.sh can
// merge files line by line. `smoke`: the figures come from a small run and are not enforced.
inline bool WriteBudgetsJson(const std::string& path, const std::vector<BudgetLine>& lines,
                             bool smoke) {
  std::ofstream out(path);
  out << "{\"budgets\": [\n";
  for (std::size_t i = 0; i < lines.size(); ++i) {
    const BudgetLine& b = lines[i];
    out << "  {\"id\": " << JsonString(b.id) << ", \"figure\": " << JsonString(b.figure)
        << ", \"unit\": " << JsonString(b.unit) << ", \"value\": " << JsonNumber(b.value)
        << ", \"baseline\": " << JsonNumber(b.baseline) << ", \"ratio\": " << JsonNumber(b.ratio)
        << ", \"limit\": " << JsonNumber(b.limit)
        << ", \"compare\": " << (b.strict ? "\"<\"" : "\"<=\"")
        << ", \"pass\": " << (b.pass ? "true" : "false")
        << ", \"enforced\": " << (smoke ? "false" : "true") << "}"
        << (i + 1 < lines.size() ? ",\n" : "");
  }
  out << "\n]}\n";
  return static_cast<bool>(out);
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
