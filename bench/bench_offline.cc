// The offline summarizer is linear (issue 16, item 10): a manual compaction of a session of N
// small generated messages, through the Compactor with the offline summarizer, against the
// time to import the same N messages into the same kind of store, measured in the same run:
//
//   import/<store>/<N>   openai_chat::DecodeMessages of the session as one JSON array text,
//                        then SessionStore::AppendMessages of all of it into a fresh store
//                        (one transaction): what `recap import` does.
//   compact/<store>/<N>  Compactor::Create (offline summarizer, default configuration), then
//                        Compactor::Compact on that session: the session loaded from the
//                        store, the cut (keepTurns 2), the checkpoint written offline, the
//                        compaction committed. Checked: it compacted all but the last turns.
//
// Each run imports into a fresh store, then compacts what it imported; <store> is `memory`
// (the in-memory store) and `sqlite` (a file in --recap_dir, default synchronous=FULL).
// Budgets, in-memory store: compaction of the largest N at most 3x its import, and time per
// message roughly constant — from the smallest N to the largest, the compaction's time per
// message grows at most 2x as much as the import's does (both grow a little in a larger heap).
// SQLite's figures are printed beside them (no budget: its commit marks every row). Destroying the
// store and the Compactor is not timed, on either side.
//
// The session (--recap_shape):
//   tiny       (default) turns of four messages, about 60 bytes each: a user request, an
//              assistant tool call (bash, read_file, edit_file or grep on one of 4,096 files),
//              its result (one in five an error naming a file and line), an assistant reply.
//              Every request is distinct, so the summarizer's deduplication meets N/4 entries.
//   same_args  one user request, then tool-call rounds whose calls all carry the same 10 KB
//              JSON arguments (the deduplication path with one entry met N/2 times).
//
// Flags (besides Google Benchmark's --benchmark_*):
//   --recap_smoke           sizes 1,000 and 4,000, one run, budgets not enforced (the ctest
//                           `bench.offline_smoke`); also RECAP_BENCH_SMOKE=1
//   --recap_sizes=A,B,...   session sizes in messages (default 62500,250000,1000000)
//   --recap_repetitions=N   runs of each size (default 1; the figure is the median)
//   --recap_shape=tiny|same_args
//   --recap_no_sqlite       the in-memory store only
//   --recap_dir=DIR         where the SQLite files go (default: the current directory)
//   --recap_json=FILE       also write the budgets as JSON, one budget object a line
// Exit status: 0 budgets met (or smoke), 1 a budget missed, 2 an operation failed.
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include <benchmark/benchmark.h>

#include "recap/codec.h"
#include "recap/compactor.h"
#include "recap/config.h"
#include "recap/message.h"
#include "recap/session_store.h"
#include "recap/sqlite/sqlite_store.h"

#include "bench_support.h"

using recap_bench::Grouped;
using recap_bench::JsonString;
using recap_bench::TakeFlag;

namespace {

using recap::Message;
using Clock = std::chrono::steady_clock;

struct Options {
  bool smoke = false;
  std::vector<std::size_t> sizes = {62500, 250000, 1000000};
  int repetitions = 1;
  std::string shape = "tiny";
  bool sqlite = true;
  std::string dir = ".";
  std::string json;
};
Options g_options;

std::map<std::string, std::vector<double>> g_samples;  // seconds per run
std::vector<std::string> g_errors;
std::map<std::size_t, std::size_t> g_bytes;  // N -> bytes of the JSON text

double Seconds(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double>(b - a).count();
}

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const std::size_t n = v.size();
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

std::optional<double> MedianOf(const std::string& name) {
  auto it = g_samples.find(name);
  if (it == g_samples.end() || it->second.empty()) return std::nullopt;
  return Median(it->second);
}

template <typename T>
T Value(recap::Result<T> r, const std::string& what) {
  if (!r.ok()) throw std::runtime_error(what + ": " + r.status().ToString());
  return std::move(r).value();
}

// ---- the session ----------------------------------------------------------------------------

std::string Num(std::size_t v) { return std::to_string(v); }

// Turns of four small messages; distinct requests, a few thousand distinct files.
std::vector<Message> TinySession(std::size_t n) {
  static const char* const kTools[] = {"bash", "read_file", "edit_file", "grep"};
  std::vector<Message> out;
  out.reserve(n);
  for (std::size_t k = 0; out.size() < n; ++k) {
    const std::string file = "src/m" + Num(k % 64) + "/f" + Num(k % 4096 / 64) + ".cc";
    const std::string id = "call_" + Num(k);
    out.push_back(Message::UserText("Step " + Num(k) + ": check " + file));
    if (out.size() == n) break;
    const std::size_t tool = k % 4;
    std::string args;
    switch (tool) {
      case 0: args = R"({"command":"make -C src/m)" + Num(k % 64) + R"( test"})"; break;
      case 1: args = R"({"path":")" + file + R"("})"; break;
      case 2: args = R"({"file_path":")" + file + R"(","old":"a","new":"b"})"; break;
      default: args = R"({"pattern":"TODO )" + Num(k % 97) + R"(","path":"src"})"; break;
    }
    out.push_back(Message::AssistantCalls({recap::ToolCall{id, kTools[tool], args, {}}}));
    if (out.size() == n) break;
    const bool error = k % 5 == 3;
    out.push_back(Message::ToolOutput(
        id,
        error ? "error: " + file + ":" + Num(k % 300) + ": expected ';'" : "ok (" + Num(k) + ")",
        error));
    if (out.size() == n) break;
    out.push_back(Message::AssistantText("Step " + Num(k) + " done."));
  }
  // The session ends at a safe boundary: a call without its result would block compaction.
  if (std::get_if<recap::ToolCall>(&out.back().parts.front()) != nullptr) {
    out.back() = Message::AssistantText("Stopped before calling a tool.");
  }
  return out;
}

// One request, then rounds of one call with the same 10 KB arguments and its result.
std::vector<Message> SameArgumentsSession(std::size_t n) {
  std::string args = R"({"command":"run","input":")";
  while (args.size() < 10 * 1024 - 2) args += "0123456789abcdef";
  args += "\"}";
  std::vector<Message> out;
  out.reserve(n);
  out.push_back(Message::UserText("Run the same command again and again"));
  for (std::size_t k = 0; out.size() < n; ++k) {
    const std::string id = "call_" + Num(k);
    out.push_back(Message::AssistantCalls({recap::ToolCall{id, "bash", args, {}}}));
    if (out.size() == n) break;
    out.push_back(Message::ToolOutput(id, "ok"));
  }
  if (std::get_if<recap::ToolCall>(&out.back().parts.front()) != nullptr) {
    out.back() = Message::AssistantText("Stopped before calling a tool.");
  }
  return out;
}

// The session of N messages as one openai_chat JSON array text, made once per N.
const std::string& SessionJson(std::size_t n) {
  static std::map<std::size_t, std::string> texts;
  auto it = texts.find(n);
  if (it != texts.end()) return it->second;
  recap::Conversation conv;
  conv.messages = g_options.shape == "same_args" ? SameArgumentsSession(n) : TinySession(n);
  std::string text = Value(recap::openai_chat::EncodeMessages(conv), "EncodeMessages");
  g_bytes[n] = text.size();
  return texts.emplace(n, std::move(text)).first->second;
}

// ---- one run: import, then compact ----------------------------------------------------------

std::shared_ptr<recap::SessionStore> FreshStore(const std::string& store, std::size_t n) {
  if (store == "memory") return recap::NewInMemorySessionStore();
  const std::string path = g_options.dir + "/bench_offline_" + Num(n) + ".db";
  recap_bench::RemoveDb(path);
  return Value(recap::OpenSqliteSessionStore(path), "OpenSqliteSessionStore " + path);
}

void ImportThenCompact(benchmark::State& state, const std::string& store_kind, std::size_t n) {
  const std::string import_name = "import/" + store_kind + "/" + Num(n);
  const std::string compact_name = "compact/" + store_kind + "/" + Num(n);
  const std::string load_name = "load/" + store_kind + "/" + Num(n);
  try {
    const std::string& text = SessionJson(n);
    const std::string session = "bench";
    for (auto _ : state) {
      auto store = FreshStore(store_kind, n);

      auto t0 = Clock::now();
      {
        recap::Conversation conv =
            Value(recap::openai_chat::DecodeMessages(text), "DecodeMessages");
        if (conv.messages.size() != n) throw std::runtime_error("decoded a different count");
        Value(store->AppendMessages(session, std::move(conv.messages)), "AppendMessages");
      }
      const double import_s = Seconds(t0, Clock::now());

      // For reference: what loading the session alone costs (part of the compaction below).
      t0 = Clock::now();
      std::optional<recap::SessionState> loaded(Value(store->Load(session), "Load"));
      const double load_s = Seconds(t0, Clock::now());
      loaded.reset();

      t0 = Clock::now();
      auto compactor =
          Value(recap::Compactor::Create(recap::Config{}, nullptr, store), "Compactor::Create");
      recap::CompactOutcome out = Value(compactor->Compact(session), "Compact");
      const double compact_s = Seconds(t0, Clock::now());
      if (!out.compacted || out.summarized_messages + 16 < n || out.writer != "offline") {
        throw std::runtime_error("Compact summarized " + Num(out.summarized_messages) + " of " +
                                 Num(n) + " messages");
      }
      compactor.reset();
      store.reset();

      state.SetIterationTime(compact_s);
      g_samples[import_name].push_back(import_s);
      g_samples[compact_name].push_back(compact_s);
      g_samples[load_name].push_back(load_s);
      state.counters["import_s"] = import_s;
      state.counters["compact_per_import"] = compact_s / import_s;
      state.counters["after_chars"] = static_cast<double>(out.after_chars);
    }
  } catch (const std::exception& e) {
    g_errors.push_back(compact_name + ": " + e.what());
    state.SkipWithError(e.what());
  }
}

// ---- results --------------------------------------------------------------------------------

struct Budget {
  std::string id;
  std::string label;
  std::optional<double> value;
  std::optional<double> baseline;
  double limit = 0;
  std::optional<double> ratio() const {
    if (!value || !baseline || *baseline <= 0) return std::nullopt;
    return *value / *baseline;
  }
  bool pass() const { return ratio() && *ratio() <= limit; }
};

bool WriteJson(const std::string& path, const std::vector<Budget>& budgets, bool smoke) {
  std::vector<recap_bench::BudgetLine> lines;
  for (const Budget& b : budgets) {
    if (!b.ratio()) continue;
    lines.push_back(
        {b.id, b.label, "seconds", b.value, b.baseline, b.ratio(), b.limit, false, b.pass()});
  }
  return recap_bench::WriteBudgetsJson(path, lines, smoke);
}

std::string Secs(std::optional<double> v) {
  if (!v) return "-";
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.3f s", *v);
  return buf;
}

std::string PerMessage(std::optional<double> v, std::size_t n) {
  if (!v) return "-";
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.2f us", *v / static_cast<double>(n) * 1e6);
  return buf;
}

std::vector<std::size_t> ParseSizes(const std::string& v) {
  std::vector<std::size_t> sizes;
  std::size_t pos = 0;
  while (pos <= v.size()) {
    const std::size_t comma = std::min(v.find(',', pos), v.size());
    const long n = std::strtol(v.substr(pos, comma - pos).c_str(), nullptr, 10);
    if (n >= 16) sizes.push_back(static_cast<std::size_t>(n));
    pos = comma + 1;
  }
  std::sort(sizes.begin(), sizes.end());
  sizes.erase(std::unique(sizes.begin(), sizes.end()), sizes.end());
  return sizes;
}

}  // namespace

int main(int argc, char** argv) {
  Options& o = g_options;
  if (const char* e = std::getenv("RECAP_BENCH_SMOKE");
      e != nullptr && std::strcmp(e, "0") != 0 && *e != '\0') {
    o.smoke = true;
  }
  std::vector<char*> args{argv[0]};
  std::optional<std::vector<std::size_t>> sizes;
  long repetitions = -1;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    std::string v;
    if (TakeFlag(arg, "recap_smoke", &v)) {
      o.smoke = true;
    } else if (TakeFlag(arg, "recap_sizes", &v)) {
      sizes = ParseSizes(v);
    } else if (TakeFlag(arg, "recap_repetitions", &v)) {
      repetitions = std::strtol(v.c_str(), nullptr, 10);
    } else if (TakeFlag(arg, "recap_shape", &v)) {
      if (v != "tiny" && v != "same_args") {
        std::fprintf(stderr, "recap_bench_offline: --recap_shape is tiny or same_args, not '%s'\n",
                     v.c_str());
        return 2;
      }
      o.shape = v;
    } else if (TakeFlag(arg, "recap_no_sqlite", &v)) {
      o.sqlite = false;
    } else if (TakeFlag(arg, "recap_dir", &v)) {
      o.dir = v.empty() ? "." : v;
    } else if (TakeFlag(arg, "recap_json", &v)) {
      o.json = v;
    } else {
      args.push_back(argv[i]);
    }
  }
  if (o.smoke) o.sizes = {1000, 4000};
  if (sizes) {
    if (sizes->empty()) {
      std::fprintf(stderr,
                   "recap_bench_offline: --recap_sizes needs sizes of at least 16 "
                   "messages, e.g. --recap_sizes=62500,250000\n");
      return 2;
    }
    o.sizes = *sizes;
  }
  if (repetitions > 0) o.repetitions = static_cast<int>(repetitions);

  int bargc = static_cast<int>(args.size());
  args.push_back(nullptr);
  benchmark::Initialize(&bargc, args.data());
  if (benchmark::ReportUnrecognizedArguments(bargc, args.data())) return 2;

  std::vector<std::string> stores{"memory"};
  if (o.sqlite) stores.push_back("sqlite");
  for (const std::string& store : stores) {
    for (std::size_t n : o.sizes) {
      const std::string name = "compact/" + store + "/" + Num(n);
      auto* b = benchmark::RegisterBenchmark(
          name.c_str(), [store, n](benchmark::State& s) { ImportThenCompact(s, store, n); });
      b->UseManualTime()->Iterations(1)->Repetitions(o.repetitions)->Unit(benchmark::kMillisecond);
      if (o.repetitions > 1) b->DisplayAggregatesOnly(true);
    }
  }
  recap_bench::CollectingReporter reporter;
  benchmark::RunSpecifiedBenchmarks(&reporter);
  benchmark::Shutdown();

  std::printf("\nOffline compaction vs import, same run (shape %s, %d run%s each, medians)\n",
              o.shape.c_str(), o.repetitions, o.repetitions == 1 ? "" : "s");
  if (o.smoke) std::printf("SMOKE RUN: tiny sizes, budgets not enforced\n");
  std::printf("%-7s %10s %9s %11s %11s %7s %11s %11s %10s\n", "store", "messages", "JSON MB",
              "import", "compact", "ratio", "import/msg", "compact/msg", "load");
  for (const std::string& store : stores) {
    for (std::size_t n : o.sizes) {
      const std::string suffix = store + "/" + Num(n);
      const auto imp = MedianOf("import/" + suffix);
      const auto cmp = MedianOf("compact/" + suffix);
      char ratio[16] = "-";
      if (imp && cmp && *imp > 0) std::snprintf(ratio, sizeof ratio, "%.2f", *cmp / *imp);
      std::printf("%-7s %10s %9.1f %11s %11s %7s %11s %11s %10s\n", store.c_str(),
                  Grouped(static_cast<double>(n)).c_str(), static_cast<double>(g_bytes[n]) / 1e6,
                  Secs(imp).c_str(), Secs(cmp).c_str(), ratio, PerMessage(imp, n).c_str(),
                  PerMessage(cmp, n).c_str(), Secs(MedianOf("load/" + suffix)).c_str());
    }
  }

  const std::size_t small = o.sizes.front();
  const std::size_t large = o.sizes.back();
  std::vector<Budget> budgets;
  {
    Budget b;
    b.id = "offline/compact_vs_import";
    b.label = "offline compaction vs import, " + Grouped(static_cast<double>(large)) + " msgs";
    b.value = MedianOf("compact/memory/" + Num(large));
    b.baseline = MedianOf("import/memory/" + Num(large));
    b.limit = 3.0;
    budgets.push_back(b);
  }
  if (large > small) {
    Budget b;
    b.id = "offline/linear";
    b.label = "growth of time/msg, " + Grouped(static_cast<double>(large)) + " vs " +
              Grouped(static_cast<double>(small)) + ": compaction vs import";
    // How much the time per message grows from the smallest session to the largest, for the
    // compaction (value) and for the import (baseline) of the same messages. Both touch more
    // memory per message in a larger heap (cache misses, page faults: the import's time per
    // message nearly doubles from 62,500 to 1,000,000 messages on this machine); a compaction
    // that scans its span once per entry grows with N instead (it was 16x over that range).
    auto growth = [&](const std::string& what) -> std::optional<double> {
      const auto big = MedianOf(what + "/memory/" + Num(large));
      const auto little = MedianOf(what + "/memory/" + Num(small));
      if (!big || !little || *little <= 0) return std::nullopt;
      return (*big / static_cast<double>(large)) / (*little / static_cast<double>(small));
    };
    b.value = growth("compact");
    b.baseline = growth("import");
    b.limit = 2.0;
    budgets.push_back(b);
  }
  std::printf("\n%-52s %12s %12s %7s %8s  %s\n", "figure (in-memory store)", "measured", "baseline",
              "ratio", "budget", "result");
  int missed = 0;
  for (const Budget& b : budgets) {
    char ratio[16] = "-";
    if (auto r = b.ratio()) std::snprintf(ratio, sizeof ratio, "%.2f", *r);
    char limit[16];
    std::snprintf(limit, sizeof limit, "<= %.2f", b.limit);
    const bool ran = b.ratio().has_value();
    if (ran && !b.pass()) ++missed;
    const bool per_message = b.id == "offline/linear";
    auto shown = [per_message](std::optional<double> v) {
      if (!v) return std::string("-");
      char buf[32];
      std::snprintf(buf, sizeof buf, per_message ? "%.2fx" : "%.3f s", *v);
      return std::string(buf);
    };
    std::printf("%-52s %12s %12s %7s %8s  %s\n", b.label.c_str(), shown(b.value).c_str(),
                shown(b.baseline).c_str(), ratio, limit,
                !ran       ? "not run"
                : b.pass() ? "PASS"
                           : "FAIL");
  }

  int status = 0;
  for (const std::string& e : g_errors) std::printf("ERROR %s\n", e.c_str());
  if (!g_errors.empty()) status = 2;
  if (!o.json.empty() && !WriteJson(o.json, budgets, o.smoke)) {
    std::printf("ERROR cannot write %s\n", o.json.c_str());
    status = 2;
  }
  if (status == 0) {
    if (o.smoke) {
      std::printf("offline compaction smoke run: every figure ran (budgets not enforced)\n");
    } else if (missed == 0) {
      std::printf("offline compaction: every budget met\n");
    } else {
      std::printf("offline compaction: %d budget%s missed\n", missed, missed == 1 ? "" : "s");
      status = 1;
    }
  } else {
    std::printf("offline compaction: an operation failed (see ERROR above)\n");
  }
  std::fflush(stdout);
  return status;
}
