// SPEC §13 (R11), every budget but R11.5 (bench_sqlite.cc): recap's core on workload W1
// (w1_workload.h, 20,000 messages, about 50 MB) and W2 (the real transcripts of tests/data),
// each figure against its baseline measured in the same run:
//
//   R11.1  prepare     Compactor::Prepare with nothing to do, right after one message was
//                      appended, on a session holding W1's first 2,000 messages and on one
//                      holding all 20,000 (in-memory store; limits.maxContextChars = 10^9, so
//                      no trigger of R2 fires and nothing is over the hard limit; compaction
//                      stays on). Budget: median(20k) ≤ 1.5 × median(2k), and median(20k) <
//                      20 µs. The appended messages alternate a user text and an assistant
//                      reply of 500 characters; the store's append is not timed, destroying
//                      what Prepare returned is.
//   R11.2  measure     Building a Transcript from W1's messages (shared, as a store hands them
//                      over: Transcript::Append(shared_ptr) counts every message's characters
//                      and builds the prefix sums)  vs  one plain pass over the same texts: a
//                      loop reading every byte of every string MessageChars counts and counting
//                      those that start a character. Budget: time ≤ 2 × the plain pass (speed
//                      ≥ 50%). MessageChars alone, and Transcript(vector<Message>) (which also
//                      checks UTF-8), are printed for reference. The two sides are measured in
//                      pairs, back to back, each pair in turn starting with the other side, and
//                      the budget is held to the median of the pairs' ratios (Paired): measured
//                      apart, the plain pass moved by 30% between runs with the machine's load.
//   R11.3  reduce      ReduceTail(W1, ReductionTarget(800000, 0))  vs  one copy of W1's bytes:
//                      every string of every message copied into one buffer, mapped in advance.
//                      Budget: ≤ 3×. Freeing either result is not timed. Both sides run with a
//                      warm heap (see --recap_cold_heap): the reducer's allocations reuse
//                      mapped pages as the copy's buffer does. A copy into a fresh buffer,
//                      which pays the page faults, is printed for reference. Paired as R11.2.
//   R11.4  cut         FindCut(W1, keep_turns 2). Budget: median < 1 ms.
//   R11.6  memory      Peak resident memory while Prepare handles W1 with the default limits,
//                      in a fresh process (this executable re-run with --recap_memory_child):
//                      W1 is generated and moved into an in-memory store, freed heap returned
//                      to the kernel (malloc_trim), the peak reset (/proc/self/clear_refs);
//                      then Prepare — compacting with the offline summarizer (compaction on),
//                      or reducing (compaction off) — and VmHWM read. Budget: the growth of the
//                      peak over the resident size before Prepare < 3 × W1's bytes.
//   W2                 every real transcript as a session: Prepare with nothing to do and the
//                      cut, reported (no budget of their own).
//
// Each timed figure is the median of every call timed (Google Benchmark's manual timing,
// --recap_repetitions runs interleaved at random so drift hits both sides alike); R11.2's and
// R11.3's ratios are the medians of their pairs' ratios. bench/quick_budgets.py runs this
// program (without W2) as scripts/test.sh's quick budgets. After Google
// Benchmark's own output, one table: figure, measured, baseline, ratio, budget, PASS/FAIL.
//
// Flags (besides Google Benchmark's --benchmark_*):
//   --recap_smoke            tiny sizes, few runs, budgets reported but not enforced (the
//                            `bench` ctest); also RECAP_BENCH_SMOKE=1
//   --recap_messages=N       messages in W1 (default 20000; the small session is N/10)
//   --recap_repetitions=N    runs of each figure (default 5)
//   --recap_json=FILE        also write the budgets as JSON: {"budgets": [ {...}, ... ]}, one
//                            budget object a line (scripts/bench.sh merges files line-wise)
//   --recap_no_w2            skip W2
//   --recap_cold_heap        diagnostic: leave glibc's defaults (large blocks mmapped and
//                            returned at free), so that allocations fault fresh pages in
//   --recap_no_memory        skip R11.6 (e.g. with --benchmark_filter, to profile one figure)
//   --recap_memory_child=compact|reduce   internal: the R11.6 child process
// Exit status: 0 all budgets met (or smoke), 1 a budget missed, 2 an operation failed.
#include <malloc.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include <benchmark/benchmark.h>

#include "recap/compactor.h"
#include "recap/config.h"
#include "recap/measure.h"
#include "recap/message.h"
#include "recap/safe_boundary.h"
#include "recap/session_store.h"
#include "recap/tail_reducer.h"
#include "recap/transcript.h"

#include "bench_support.h"
#include "support/test_data.h"
#include "w1_workload.h"

using recap_bench::JsonString;
using recap_bench::TakeFlag;

namespace {

using recap::Message;
using recap::Transcript;
using Clock = std::chrono::steady_clock;

constexpr std::size_t kNoLimit = 1000000000;  // maxContextChars for "nothing to do"
constexpr std::size_t kInstructionsChars = 2000;

struct Options {
  bool smoke = false;
  std::size_t messages = 20000;
  int repetitions = 5;
  int prepare_calls = 200;  // per run: the small session grows by at most 10% in a run
  int reduce_iterations = 2;
  int measure_iterations = 3;
  int cut_iterations = 200;
  bool w2 = true;
  bool memory = true;
  std::string json;
};

struct Setup {
  Options options;
  std::vector<Message> w1;
  std::size_t w1_bytes = 0;
  std::vector<std::shared_ptr<const Message>> shared;  // W1 as a store holds it
  Transcript transcript;                               // W1 measured
  std::vector<Message> appended;                       // what R11.1 appends, in turn
  std::unique_ptr<char[]> copy_buffer;  // R11.3's baseline writes here: w1_bytes, mapped
};
Setup g;

std::mutex g_mu;
std::map<std::string, std::vector<double>> g_samples;  // seconds per timed call
std::vector<std::string> g_errors;

void RecordError(const std::string& what) {
  std::lock_guard<std::mutex> lock(g_mu);
  g_errors.push_back(what);
}

void Record(const std::string& name, double seconds) {
  std::lock_guard<std::mutex> lock(g_mu);
  g_samples[name].push_back(seconds);
}

double Median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const std::size_t n = v.size();
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

std::optional<double> MedianOf(const std::string& name) {
  auto it = g_samples.find(name);
  if (it == g_samples.end() || it->second.empty()) return std::nullopt;
  return Median(it->second);
}

double Seconds(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double>(b - a).count();
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

template <typename T>
T Value(recap::Result<T> r, const char* what) {
  if (!r.ok()) throw std::runtime_error(std::string(what) + ": " + r.status().ToString());
  return std::move(r).value();
}

// Every string MessageChars counts, in its order (SPEC §1): what "the same bytes" are.
template <typename Fn>
void ForEachCountedText(const Message& m, Fn&& fn) {
  for (const recap::Part& part : m.parts) {
    if (const auto* t = std::get_if<recap::Text>(&part)) {
      fn(t->text);
    } else if (const auto* c = std::get_if<recap::ToolCall>(&part)) {
      fn(c->name);
      fn(c->arguments);
    } else if (const auto* r = std::get_if<recap::ToolResult>(&part)) {
      for (const recap::ResultItem& item : r->content) {
        if (const auto* rt = std::get_if<recap::Text>(&item)) fn(rt->text);
        if (const auto* ro = std::get_if<recap::Opaque>(&item)) fn(ro->payload);
      }
    } else if (const auto* o = std::get_if<recap::Opaque>(&part)) {
      fn(o->payload);
    }
  }
}

// Every string a message carries (what MessageBytes counts): what one copy of it copies.
template <typename Fn>
void ForEachString(const Message& m, Fn&& fn) {
  fn(m.id);
  fn(m.extra);
  for (const recap::Part& part : m.parts) {
    if (const auto* t = std::get_if<recap::Text>(&part)) {
      fn(t->text);
    } else if (const auto* c = std::get_if<recap::ToolCall>(&part)) {
      fn(c->id);
      fn(c->name);
      fn(c->arguments);
    } else if (const auto* r = std::get_if<recap::ToolResult>(&part)) {
      fn(r->call_id);
      for (const recap::ResultItem& item : r->content) {
        if (const auto* rt = std::get_if<recap::Text>(&item)) fn(rt->text);
        if (const auto* ro = std::get_if<recap::Opaque>(&item)) fn(ro->payload);
      }
    } else if (const auto* o = std::get_if<recap::Opaque>(&part)) {
      fn(o->kind);
      fn(o->payload);
    }
  }
}

// The plain pass: reads every byte, counts those that start a character. The simplest loop
// over the bytes that yields a character count (it neither validates nor special-cases
// anything; the compiler vectorizes it).
std::size_t PlainCount(const std::string& s) {
  std::size_t n = 0;
  for (unsigned char c : s) n += (c & 0xC0) != 0x80 ? 1 : 0;
  return n;
}

// ---- R11.1: Prepare with nothing to do ------------------------------------------------------

std::shared_ptr<recap::SessionStore> StoreWith(std::size_t messages, const std::string& session) {
  auto store = recap::NewInMemorySessionStore();
  constexpr std::size_t kBatch = 500;
  for (std::size_t i = 0; i < messages; i += kBatch) {
    std::vector<Message> batch(
        g.w1.begin() + static_cast<std::ptrdiff_t>(i),
        g.w1.begin() + static_cast<std::ptrdiff_t>(std::min(i + kBatch, messages)));
    Value(store->AppendMessages(session, std::move(batch)), "AppendMessages");
  }
  return store;
}

recap::Config NothingToDoConfig() {
  recap::Config cfg;  // compaction.auto stays on; no trigger can fire at this limit
  cfg.limits.max_context_chars = kNoLimit;
  return cfg;
}

// Prepare once per iteration, each right after one appended message; checks that it did
// nothing (no compaction, no reduction).
void PrepareLoop(benchmark::State& state, recap::SessionStore& store, recap::Compactor& compactor,
                 const std::string& session, const recap::RequestSizes& sizes,
                 const std::string& name) {
  std::size_t k = 0;
  for (auto _ : state) {
    Message m = g.appended[k++ % g.appended.size()];
    Value(store.Append(session, std::move(m)), "Append");
    const auto t0 = Clock::now();
    {
      recap::Result<recap::Prepared> r = compactor.Prepare(session, sizes);
      if (!r.ok()) throw std::runtime_error("Prepare: " + r.status().ToString());
      if (!r->compactions.empty() || r->reduced_messages != 0) {
        throw std::runtime_error("Prepare did something (compaction or reduction)");
      }
      benchmark::DoNotOptimize(r->messages.size());
    }
    const double dt = Seconds(t0, Clock::now());
    state.SetIterationTime(dt);
    if (!name.empty()) Record(name, dt);
  }
}

void PrepareNothing(benchmark::State& state, std::size_t messages, const std::string& name) {
  Guarded(state, name, [&] {
    const std::string session = "w1";
    auto store = StoreWith(messages, session);
    auto compactor =
        Value(recap::Compactor::Create(NothingToDoConfig(), nullptr, store), "Compactor::Create");
    recap::RequestSizes sizes;
    sizes.instructions_chars = kInstructionsChars;
    Value(compactor->Prepare(session, sizes), "Prepare (first, loads the session)");
    PrepareLoop(state, *store, *compactor, session, sizes, name);
    state.counters["messages"] = static_cast<double>(messages);
  });
}

// ---- R11.2: measuring ---------------------------------------------------------------------

// One Transcript built from W1's shared messages: the measured side of R11.2.
double TimeTranscript() {
  const auto t0 = Clock::now();
  {
    Transcript t;
    for (const auto& m : g.shared) t.Append(m);
    benchmark::DoNotOptimize(t.chars());
  }
  return Seconds(t0, Clock::now());
}

// The plain pass over the same texts: R11.2's baseline.
double TimePlain() {
  const auto t0 = Clock::now();
  std::size_t chars = 0;
  for (const Message& m : g.w1) {
    ForEachCountedText(m, [&](const std::string& s) { chars += PlainCount(s); });
  }
  benchmark::DoNotOptimize(chars);
  return Seconds(t0, Clock::now());
}

// R11.2 and R11.3 in pairs (recap_bench::TimePairs): each side's time under its name, their
// ratio under `pair`. One untimed round first: the heap and the caches as every timed round
// finds them.
template <typename Measured, typename Baseline>
void Paired(benchmark::State& state, const std::string& pair, const std::string& measured_name,
            const std::string& baseline_name, Measured&& measured, Baseline&& baseline) {
  Guarded(state, pair, [&] {
    measured();
    baseline();
    recap_bench::TimePairs(state, measured, baseline, [&](double m, double b) {
      Record(measured_name, m);
      Record(baseline_name, b);
      if (b > 0) Record(pair, m / b);
    });
    state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations() * 2 * g.w1_bytes));
  });
}

void MeasurePair(benchmark::State& state) {
  Paired(state, "measure/pair", "measure/transcript", "measure/plain", TimeTranscript, TimePlain);
}

void MeasureMessageChars(benchmark::State& state) {
  for (auto _ : state) {
    const auto t0 = Clock::now();
    std::size_t chars = 0;
    for (const Message& m : g.w1) chars += recap::MessageChars(m);
    benchmark::DoNotOptimize(chars);
    const double dt = Seconds(t0, Clock::now());
    state.SetIterationTime(dt);
    Record("measure/message_chars", dt);
  }
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations() * g.w1_bytes));
}

// Transcript(vector<Message>): what a host building one from its own messages pays — UTF-8
// checked and repaired, ids kept, measured. The vector is copied outside the timing.
void MeasureFromVector(benchmark::State& state) {
  Guarded(state, "measure/from_vector", [&] {
    for (auto _ : state) {
      std::vector<Message> copy = g.w1;
      const auto t0 = Clock::now();
      std::optional<Transcript> t(std::in_place, std::move(copy));
      benchmark::DoNotOptimize(t->chars());
      const double dt = Seconds(t0, Clock::now());
      t.reset();
      state.SetIterationTime(dt);
      Record("measure/from_vector", dt);
    }
  });
}

// ---- R11.3: reducing ----------------------------------------------------------------------

// ReduceTail of W1 to the default limit's target: the measured side of R11.3. Freeing the
// result is not timed.
double TimeReduce() {
  static const std::size_t target =
      recap::ReductionTarget(recap::LimitsConfig{}.max_context_chars, 0);
  const auto t0 = Clock::now();
  std::optional<recap::ReduceResult> r(recap::ReduceTail(g.transcript, target));
  const double dt = Seconds(t0, Clock::now());
  if (r->clipped.empty()) throw std::runtime_error("ReduceTail clipped nothing");
  return dt;
}

// Copies every string of every message into one buffer. `fresh`: a new buffer, whose pages
// the copy faults in (reference); otherwise the buffer of the set-up, already mapped (the
// budget's baseline: the copy itself, with no page faults, as the reducer sees a warm heap).
double TimeCopy(bool fresh) {
  const auto t0 = Clock::now();
  std::unique_ptr<char[]> buffer(fresh ? new char[g.w1_bytes + 1] : nullptr);
  char* out = fresh ? buffer.get() : g.copy_buffer.get();
  char* const start = out;
  for (const Message& m : g.w1) {
    ForEachString(m, [&](const std::string& s) {
      std::memcpy(out, s.data(), s.size());
      out += s.size();
    });
  }
  benchmark::DoNotOptimize(start);
  benchmark::ClobberMemory();
  const double dt = Seconds(t0, Clock::now());
  buffer.reset();  // not timed
  return dt;
}

// R11.3: the reducer against the copy into the mapped buffer, paired as R11.2 is.
void ReducePair(benchmark::State& state) {
  Paired(state, "reduce/pair", "reduce/reduce_tail", "reduce/copy", TimeReduce,
         [] { return TimeCopy(false); });
}

// For reference: the copy into a fresh buffer, whose pages it faults in.
void CopyFresh(benchmark::State& state) {
  for (auto _ : state) {
    const double dt = TimeCopy(true);
    state.SetIterationTime(dt);
    Record("reduce/copy_fresh", dt);
  }
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations() * g.w1_bytes));
}

// For reference: the share of the reducer's time spent in ClipArguments — every tool-call
// argument text over round 5's cap (1,024) clipped to it, as the reducer's last round does.
void ClipAllArguments(benchmark::State& state) {
  std::vector<const std::string*> over;
  for (const Message& m : g.w1) {
    for (const recap::Part& p : m.parts) {
      if (const auto* c = std::get_if<recap::ToolCall>(&p)) {
        if (recap::CountCodePoints(c->arguments) > recap::kContentCaps.back()) {
          over.push_back(&c->arguments);
        }
      }
    }
  }
  for (auto _ : state) {
    const auto t0 = Clock::now();
    for (const std::string* a : over) {
      std::string clipped = recap::ClipArguments(*a, recap::kContentCaps.back());
      benchmark::DoNotOptimize(clipped.data());
    }
    const double dt = Seconds(t0, Clock::now());
    state.SetIterationTime(dt);
    Record("reduce/clip_arguments", dt);
  }
  state.counters["arguments"] = static_cast<double>(over.size());
}

// A deep copy of the messages (one allocation per string), for reference.
void CopyMessages(benchmark::State& state) {
  for (auto _ : state) {
    const auto t0 = Clock::now();
    std::optional<std::vector<Message>> copy(g.w1);
    benchmark::DoNotOptimize(copy->data());
    const double dt = Seconds(t0, Clock::now());
    copy.reset();
    state.SetIterationTime(dt);
    Record("reduce/copy_messages", dt);
  }
}

// ---- R11.4: the cut -----------------------------------------------------------------------

void Cut(benchmark::State& state) {
  Guarded(state, "cut/find_cut", [&] {
    recap::CutOptions options;
    options.keep_turns = 2;
    std::size_t position = 0;
    for (auto _ : state) {
      const auto t0 = Clock::now();
      recap::CutDecision d = recap::FindCut(g.transcript, options);
      benchmark::DoNotOptimize(d.position);
      const double dt = Seconds(t0, Clock::now());
      if (!d.ok()) throw std::runtime_error("FindCut skipped W1");
      position = d.position;
      state.SetIterationTime(dt);
      Record("cut/find_cut", dt);
    }
    state.counters["position"] = static_cast<double>(position);
  });
}

// Where the cut's time goes, for reference: its two passes over the transcript, and the least
// any pass that looks at every message's parts costs (the walk reads each message's role and
// each part's kind, nothing else).
template <typename Fn>
void CutPart(benchmark::State& state, const std::string& name, Fn&& fn) {
  for (auto _ : state) {
    const auto t0 = Clock::now();
    fn();
    const double dt = Seconds(t0, Clock::now());
    state.SetIterationTime(dt);
    Record(name, dt);
  }
}

void CutTurnStarts(benchmark::State& state) {
  CutPart(state, "cut/turn_starts", [] {
    auto v = recap::FindTurnStarts(g.transcript);
    benchmark::DoNotOptimize(v.data());
  });
}

void CutSafeBoundaries(benchmark::State& state) {
  CutPart(state, "cut/safe_boundaries", [] {
    auto v = recap::FindSafeBoundaries(g.transcript);
    benchmark::DoNotOptimize(v.data());
  });
}

void CutWalk(benchmark::State& state) {
  CutPart(state, "cut/walk", [] {
    std::size_t n = 0;
    for (const Message& m : g.transcript) {
      n += static_cast<std::size_t>(m.role);
      for (const recap::Part& p : m.parts) n += p.index();
    }
    benchmark::DoNotOptimize(n);
  });
}

// ---- R11.6: peak memory (child process) ---------------------------------------------------

// A "VmRSS:"-style field of /proc/self/status, in bytes; 0 when absent.
std::size_t StatusBytes(const char* field) {
  std::ifstream in("/proc/self/status");
  std::string line;
  const std::size_t len = std::strlen(field);
  while (std::getline(in, line)) {
    if (line.compare(0, len, field) == 0) {
      return static_cast<std::size_t>(std::strtoull(line.c_str() + len, nullptr, 10)) * 1024;
    }
  }
  return 0;
}

// Runs in a fresh process: prints one line "RECAP_MEMORY key=value ...".
int MemoryChild(const std::string& mode, std::size_t messages) {
  try {
    const std::size_t rss_start = StatusBytes("VmRSS:");
    std::vector<Message> w1 = recap_bench::GenerateW1({messages, 20240611});
    std::size_t bytes = 0;
    for (const Message& m : w1) bytes += recap_bench::MessageBytes(m);
    auto store = recap::NewInMemorySessionStore();
    constexpr std::size_t kBatch = 500;
    for (std::size_t i = 0; i < w1.size(); i += kBatch) {
      const auto end = std::min(i + kBatch, w1.size());
      std::vector<Message> batch(
          std::make_move_iterator(w1.begin() + static_cast<std::ptrdiff_t>(i)),
          std::make_move_iterator(w1.begin() + static_cast<std::ptrdiff_t>(end)));
      Value(store->AppendMessages("w1", std::move(batch)), "AppendMessages");
    }
    w1 = {};
    ::malloc_trim(0);
    const std::size_t base = StatusBytes("VmRSS:");
    bool reset = false;
    {
      std::ofstream clear("/proc/self/clear_refs");
      clear << "5";
      clear.flush();
      reset = static_cast<bool>(clear);
    }
    recap::Config cfg;  // the default limits: maxContextChars 800,000
    cfg.compaction.auto_compact = mode != "reduce";
    auto compactor = Value(recap::Compactor::Create(cfg, nullptr, store), "Compactor::Create");
    recap::RequestSizes sizes;
    sizes.instructions_chars = kInstructionsChars;
    const auto t0 = Clock::now();
    std::string outcome;
    std::size_t after = 0;
    {
      recap::Result<recap::Prepared> r = compactor->Prepare("w1", sizes);
      if (r.ok()) {
        outcome = std::to_string(r->compactions.size()) + "_compactions_" +
                  std::to_string(r->reduced_messages) + "_reduced";
        after = r->after_chars;
      } else if (r.status().code() == recap::StatusCode::kContextBudgetExceeded) {
        outcome = "budget_exceeded_after_reduction";  // expected with compaction off
      } else {
        throw std::runtime_error("Prepare: " + r.status().ToString());
      }
    }
    const double seconds = Seconds(t0, Clock::now());
    const std::size_t peak = StatusBytes("VmHWM:");
    std::printf(
        "RECAP_MEMORY bytes=%zu start=%zu base=%zu peak=%zu reset=%d seconds=%.3f after=%zu "
        "outcome=%s\n",
        bytes, rss_start, base, peak, reset ? 1 : 0, seconds, after, outcome.c_str());
    return 0;
  } catch (const std::exception& e) {
    std::printf("RECAP_MEMORY error=%s\n", e.what());
    return 2;
  }
}

struct MemoryFigure {
  bool ok = false;
  std::string error;
  std::size_t bytes = 0, start = 0, base = 0, peak = 0;
  bool reset = false;
  double seconds = 0;
  std::string outcome;
};

MemoryFigure RunMemoryChild(const std::string& mode) {
  MemoryFigure f;
  char exe[4096];
  const ssize_t n = ::readlink("/proc/self/exe", exe, sizeof exe - 1);
  if (n <= 0) {
    f.error = "cannot read /proc/self/exe";
    return f;
  }
  exe[n] = '\0';
  const std::string cmd = std::string("'") + exe + "' --recap_memory_child=" + mode +
                          " --recap_messages=" + std::to_string(g.options.messages);
  FILE* p = ::popen(cmd.c_str(), "r");
  if (p == nullptr) {
    f.error = "popen failed";
    return f;
  }
  std::string out;
  char buf[512];
  while (std::fgets(buf, sizeof buf, p) != nullptr) out += buf;
  const int rc = ::pclose(p);
  const auto pos = out.find("RECAP_MEMORY ");
  if (rc != 0 || pos == std::string::npos || out.find("error=", pos) != std::string::npos) {
    f.error = "the memory child failed: " + out;
    return f;
  }
  auto field = [&](const char* key) -> std::string {
    const std::string k = std::string(" ") + key + "=";
    auto at = out.find(k, pos);
    if (at == std::string::npos) return "";
    at += k.size();
    return out.substr(at, out.find_first_of(" \n", at) - at);
  };
  f.bytes = std::strtoull(field("bytes").c_str(), nullptr, 10);
  f.start = std::strtoull(field("start").c_str(), nullptr, 10);
  f.base = std::strtoull(field("base").c_str(), nullptr, 10);
  f.peak = std::strtoull(field("peak").c_str(), nullptr, 10);
  f.reset = field("reset") == "1";
  f.seconds = std::strtod(field("seconds").c_str(), nullptr);
  f.outcome = field("outcome");
  f.ok = f.bytes > 0 && f.peak >= f.base;
  if (!f.ok) f.error = "the memory child reported nonsense: " + out;
  return f;
}

// ---- W2: the real transcripts -------------------------------------------------------------

struct W2Row {
  std::string name;
  std::size_t transcripts = 0;
  std::size_t messages = 0;  // largest session's
  std::size_t chars = 0;     // largest session's
  std::vector<double> prepare;
  std::vector<double> cut;
  std::vector<double> measure;
};

template <typename Fn>
double TimeOnce(Fn&& fn) {
  const auto t0 = Clock::now();
  fn();
  return Seconds(t0, Clock::now());
}

void RunW2(std::vector<W2Row>& rows) {
  const std::vector<recap::testing::NamedTranscript> all = recap::testing::AllRealTranscripts();
  const int calls = g.options.smoke ? 3 : 30;
  std::map<std::string, std::size_t> index;  // tau-bench runs share one row
  for (const auto& nt : all) {
    const bool tau = nt.name.rfind("tau-bench/", 0) == 0;
    const std::string key = tau ? "tau-bench (200 runs)" : nt.name;
    auto it = index.find(key);
    if (it == index.end()) {
      it = index.emplace(key, rows.size()).first;
      rows.push_back({});
      rows.back().name = key;
    }
    W2Row& row = rows[it->second];
    ++row.transcripts;
    const std::vector<Message>& messages = nt.conversation.messages;
    if (messages.empty()) continue;

    std::vector<std::shared_ptr<const Message>> shared;
    {
      Transcript t(messages);  // repaired ids and UTF-8, as a store would hold them
      for (std::size_t i = 0; i < t.size(); ++i) shared.push_back(t.shared(i));
    }
    Transcript t;
    for (int k = 0; k < calls; ++k) {
      row.measure.push_back(TimeOnce([&] {
        Transcript fresh;
        for (const auto& m : shared) fresh.Append(m);
        benchmark::DoNotOptimize(fresh.chars());
        if (k == 0) t = fresh;
      }));
    }
    if (t.size() > row.messages) {
      row.messages = t.size();
      row.chars = t.chars();
    }
    recap::CutOptions options;
    options.keep_turns = 2;
    for (int k = 0; k < calls; ++k) {
      row.cut.push_back(TimeOnce([&] {
        recap::CutDecision d = recap::FindCut(t, options);
        benchmark::DoNotOptimize(d.position);
      }));
    }

    auto store = recap::NewInMemorySessionStore();
    Value(store->AppendMessages(nt.name, t.ToVector()), "AppendMessages (W2)");
    auto compactor =
        Value(recap::Compactor::Create(NothingToDoConfig(), nullptr, store), "Compactor::Create");
    recap::RequestSizes sizes;
    if (nt.conversation.instructions) {
      sizes.instructions_chars = recap::MessageChars(*nt.conversation.instructions);
    }
    Value(compactor->Prepare(nt.name, sizes), "Prepare (W2, first)");
    for (int k = 0; k < calls; ++k) {
      Message m = g.appended[static_cast<std::size_t>(k) % g.appended.size()];
      Value(store->Append(nt.name, std::move(m)), "Append (W2)");
      row.prepare.push_back(TimeOnce([&] {
        recap::Result<recap::Prepared> r = compactor->Prepare(nt.name, sizes);
        if (!r.ok() || !r->compactions.empty() || r->reduced_messages != 0) {
          throw std::runtime_error("Prepare on " + nt.name + " failed or did something");
        }
      }));
    }
  }
}

// ---- results ------------------------------------------------------------------------------

// Google Benchmark's console output (without colours into a pipe).
class Reporter : public benchmark::ConsoleReporter {
 public:
  Reporter() : ConsoleReporter(::isatty(STDOUT_FILENO) ? OO_Defaults : OO_Tabular) {}
};

enum class Unit { kSeconds, kBytes };

struct Budget {
  std::string id;
  std::string label;
  Unit unit = Unit::kSeconds;
  std::optional<double> value;
  std::optional<double> baseline;  // none: an absolute budget (limit in the value's unit)
  double limit = 0;
  bool strict = false;  // value (or ratio) < limit; otherwise ≤
  bool ran() const { return value.has_value() && (!baseline_needed || baseline.has_value()); }
  bool baseline_needed = true;
  // The median of the ratios of pairs measured back to back (Paired), when the figure is
  // measured so; otherwise the ratio of the two medians.
  std::optional<double> paired_ratio;
  std::optional<double> ratio() const {
    if (!baseline_needed || !value || !baseline || *baseline <= 0) return std::nullopt;
    if (paired_ratio) return paired_ratio;
    return *value / *baseline;
  }
  bool pass() const {
    const double x = baseline_needed ? ratio().value_or(1e300) : value.value_or(1e300);
    return strict ? x < limit : x <= limit;
  }
};

std::string Shown(std::optional<double> v, Unit unit) {
  if (!v) return "-";
  char buf[64];
  if (unit == Unit::kBytes) {
    std::snprintf(buf, sizeof buf, "%.1f MB", *v / 1e6);
  } else if (*v < 1e-3) {
    std::snprintf(buf, sizeof buf, "%.2f us", *v * 1e6);
  } else {
    std::snprintf(buf, sizeof buf, "%.2f ms", *v * 1e3);
  }
  return buf;
}

std::string LimitShown(const Budget& b) {
  char buf[64];
  const char* op = b.strict ? "<" : "<=";
  if (b.baseline_needed) {
    std::snprintf(buf, sizeof buf, "%s %.2f", op, b.limit);
  } else {
    std::snprintf(buf, sizeof buf, "%s %s", op, Shown(b.limit, b.unit).c_str());
  }
  return buf;
}

int PrintTable(const std::vector<Budget>& budgets) {
  std::printf("\n%-46s %12s %12s %7s %10s  %s\n", "figure", "measured", "baseline", "ratio",
              "budget", "result");
  int missed = 0;
  for (const Budget& b : budgets) {
    if (!b.ran()) {
      std::printf("%-46s %12s %12s %7s %10s  %s\n", b.label.c_str(), "-", "-", "-",
                  LimitShown(b).c_str(), "not run");
      continue;
    }
    const bool pass = b.pass();
    if (!pass) ++missed;
    char ratio[16] = "-";
    if (auto r = b.ratio()) std::snprintf(ratio, sizeof ratio, "%.2f", *r);
    std::printf("%-46s %12s %12s %7s %10s  %s\n", b.label.c_str(), Shown(b.value, b.unit).c_str(),
                Shown(b.baseline, b.unit).c_str(), ratio, LimitShown(b).c_str(),
                pass ? "PASS" : "FAIL");
  }
  return missed;
}

bool WriteJson(const std::string& path, const std::vector<Budget>& budgets, bool smoke) {
  std::vector<recap_bench::BudgetLine> lines;
  for (const Budget& b : budgets) {
    if (!b.ran()) continue;
    lines.push_back({b.id, b.label, b.unit == Unit::kBytes ? "bytes" : "seconds", b.value,
                     b.baseline, b.ratio(), b.limit, b.strict, b.pass()});
  }
  return recap_bench::WriteBudgetsJson(path, lines, smoke);
}

}  // namespace

int main(int argc, char** argv) {
  Options& o = g.options;
  if (const char* e = std::getenv("RECAP_BENCH_SMOKE");
      e != nullptr && std::strcmp(e, "0") != 0 && *e != '\0') {
    o.smoke = true;
  }
  std::vector<char*> args{argv[0]};
  static std::string interleave = "--benchmark_enable_random_interleaving=true";
  bool user_interleave = false;
  long messages = -1;
  long repetitions = -1;
  std::string memory_child;
  bool cold_heap = false;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    std::string v;
    if (TakeFlag(arg, "recap_smoke", &v)) {
      o.smoke = true;
    } else if (TakeFlag(arg, "recap_messages", &v)) {
      messages = std::strtol(v.c_str(), nullptr, 10);
    } else if (TakeFlag(arg, "recap_repetitions", &v)) {
      repetitions = std::strtol(v.c_str(), nullptr, 10);
    } else if (TakeFlag(arg, "recap_json", &v)) {
      o.json = v;
    } else if (TakeFlag(arg, "recap_no_w2", &v)) {
      o.w2 = false;
    } else if (TakeFlag(arg, "recap_cold_heap", &v)) {
      cold_heap = true;
    } else if (TakeFlag(arg, "recap_no_memory", &v)) {
      o.memory = false;
    } else if (TakeFlag(arg, "recap_memory_child", &v)) {
      memory_child = v;
    } else if (TakeFlag(arg, "recap_dir", &v)) {
      // accepted for symmetry with recap_bench_sqlite (scripts/bench.sh passes it); unused
    } else {
      if (arg.rfind("--benchmark_enable_random_interleaving", 0) == 0) user_interleave = true;
      args.push_back(argv[i]);
    }
  }
  if (o.smoke) {
    o.messages = 400;
    o.repetitions = 1;
    o.prepare_calls = 20;
    o.reduce_iterations = o.measure_iterations = 1;
    o.cut_iterations = 20;
  }
  if (messages > 20) o.messages = static_cast<std::size_t>(messages);
  if (repetitions > 0) o.repetitions = static_cast<int>(repetitions);
  if (!memory_child.empty()) return MemoryChild(memory_child, o.messages);
  if (!cold_heap) {
    // Freed memory stays in the process, so that both sides of a ratio reuse mapped pages
    // instead of faulting fresh ones in: on this VM a page fault costs about 20 us per 4 KiB
    // (a fresh 54 MB buffer: ~250 ms of faults for an 8 ms copy), which would otherwise
    // decide the figures. Not in the R11.6 child, which measures real peaks.
    ::mallopt(M_MMAP_THRESHOLD, 32 << 20);  // glibc's maximum
    ::mallopt(M_TRIM_THRESHOLD, 1 << 30);
  }
  if (!user_interleave) args.insert(args.begin() + 1, interleave.data());

  int bargc = static_cast<int>(args.size());
  args.push_back(nullptr);
  benchmark::Initialize(&bargc, args.data());
  if (benchmark::ReportUnrecognizedArguments(bargc, args.data())) return 2;

  int status = 0;
  try {
    std::fprintf(stderr, "recap_bench_core: generating W1 (%zu messages) ...\n", o.messages);
    g.w1 = recap_bench::GenerateW1({o.messages, 20240611});
    for (const Message& m : g.w1) g.w1_bytes += recap_bench::MessageBytes(m);
    g.transcript = Transcript(g.w1);
    for (std::size_t i = 0; i < g.transcript.size(); ++i)
      g.shared.push_back(g.transcript.shared(i));
    // W1 ends with a user text and an assistant reply of 500 characters each.
    for (std::size_t i = g.w1.size() - 2; i < g.w1.size(); ++i) {
      Message m = g.w1[i];
      m.id.clear();  // the store gives each a fresh id
      g.appended.push_back(std::move(m));
    }
    g.copy_buffer.reset(new char[g.w1_bytes + 1]);
    std::memset(g.copy_buffer.get(), 0, g.w1_bytes + 1);  // mapped before any timing
    const std::size_t small = o.messages / 10;
    std::fprintf(stderr, "recap_bench_core: W1 is %.1f MB, %zu characters\n",
                 static_cast<double>(g.w1_bytes) / 1e6, g.transcript.chars());

    auto timed = [&](benchmark::internal::Benchmark* b, int iterations) {
      b->UseManualTime()->Repetitions(o.repetitions)->Iterations(iterations);
      if (o.repetitions > 1) b->DisplayAggregatesOnly(true);
    };
    const std::string small_name = "prepare/" + std::to_string(small);
    const std::string large_name = "prepare/" + std::to_string(o.messages);
    timed(benchmark::RegisterBenchmark(
              small_name.c_str(),
              [small, small_name](benchmark::State& s) { PrepareNothing(s, small, small_name); })
              ->Unit(benchmark::kMicrosecond),
          o.prepare_calls);
    timed(benchmark::RegisterBenchmark(large_name.c_str(),
                                       [large_name](benchmark::State& s) {
                                         PrepareNothing(s, g.options.messages, large_name);
                                       })
              ->Unit(benchmark::kMicrosecond),
          o.prepare_calls);
    timed(benchmark::RegisterBenchmark("measure/pair", MeasurePair)->Unit(benchmark::kMillisecond),
          o.measure_iterations);
    timed(benchmark::RegisterBenchmark("measure/message_chars", MeasureMessageChars)
              ->Unit(benchmark::kMillisecond),
          o.measure_iterations);
    timed(benchmark::RegisterBenchmark("measure/from_vector", MeasureFromVector)
              ->Unit(benchmark::kMillisecond),
          1);
    timed(benchmark::RegisterBenchmark("reduce/pair", ReducePair)->Unit(benchmark::kMillisecond),
          o.reduce_iterations);
    timed(
        benchmark::RegisterBenchmark("reduce/copy_fresh", CopyFresh)->Unit(benchmark::kMillisecond),
        o.reduce_iterations);
    timed(benchmark::RegisterBenchmark("reduce/clip_arguments", ClipAllArguments)
              ->Unit(benchmark::kMillisecond),
          o.reduce_iterations);
    timed(benchmark::RegisterBenchmark("reduce/copy_messages", CopyMessages)
              ->Unit(benchmark::kMillisecond),
          o.reduce_iterations);
    timed(benchmark::RegisterBenchmark("cut/find_cut", Cut)->Unit(benchmark::kMicrosecond),
          o.cut_iterations);
    for (auto [name, fn] :
         {std::pair{"cut/turn_starts", &CutTurnStarts},
          std::pair{"cut/safe_boundaries", &CutSafeBoundaries}, std::pair{"cut/walk", &CutWalk}}) {
      timed(benchmark::RegisterBenchmark(name, fn)->Unit(benchmark::kMicrosecond),
            o.cut_iterations);
    }

    Reporter reporter;
    benchmark::RunSpecifiedBenchmarks(&reporter);
    benchmark::Shutdown();

    // R11.6 in fresh processes, after the timings (nothing else runs meanwhile).
    std::fprintf(stderr,
                 "recap_bench_core: R11.6, peak memory of Prepare in a child process ...\n");
    MemoryFigure compact, reduce;
    if (o.memory) {
      compact = RunMemoryChild("compact");
      reduce = RunMemoryChild("reduce");
    }

    std::vector<W2Row> w2;
    if (o.w2) {
      std::fprintf(stderr, "recap_bench_core: W2, the real transcripts of tests/data ...\n");
      RunW2(w2);
    }

    // ---- the table ----
    auto grouped = [](std::size_t v) {
      std::string digits = std::to_string(v), out;
      for (std::size_t i = 0; i < digits.size(); ++i) {
        if (i > 0 && (digits.size() - i) % 3 == 0) out += ',';
        out += digits[i];
      }
      return out;
    };
    std::printf(
        "\nR11.1-R11.4, R11.6 — recap's core on W1, each figure against its baseline, "
        "same run\n");
    std::printf("W1: %s messages, %.1f MB of message text, %s characters\n",
                grouped(g.w1.size()).c_str(), static_cast<double>(g.w1_bytes) / 1e6,
                grouped(g.transcript.chars()).c_str());
    std::printf(
        "each timed figure the median of every call timed over %d run%s, interleaved "
        "at random;\nR11.2's and R11.3's ratios the medians of the ratios of pairs measured back "
        "to back\n",
        o.repetitions, o.repetitions == 1 ? "" : "s");
    if (o.smoke) std::printf("SMOKE RUN: tiny sizes, budgets not enforced\n");

    std::vector<Budget> budgets;
    {
      Budget b;
      b.id = "R11.1";
      b.label =
          "prepare, nothing to do: " + grouped(o.messages) + " vs " + grouped(small) + " msgs";
      b.value = MedianOf(large_name);
      b.baseline = MedianOf(small_name);
      b.limit = 1.5;
      budgets.push_back(b);
      Budget m;
      m.id = "R11.1/median";
      m.label = "prepare, nothing to do: median, " + grouped(o.messages) + " msgs";
      m.value = MedianOf(large_name);
      m.baseline_needed = false;
      m.limit = 20e-6;
      m.strict = true;
      budgets.push_back(m);
    }
    {
      Budget b;
      b.id = "R11.2";
      b.label = "measure W1 (Transcript) vs plain byte pass";
      b.value = MedianOf("measure/transcript");
      b.baseline = MedianOf("measure/plain");
      b.paired_ratio = MedianOf("measure/pair");
      b.limit = 2.0;
      budgets.push_back(b);
    }
    {
      Budget b;
      b.id = "R11.3";
      b.label = "ReduceTail W1 to 800,000 vs one copy of it";
      b.value = MedianOf("reduce/reduce_tail");
      b.baseline = MedianOf("reduce/copy");
      b.paired_ratio = MedianOf("reduce/pair");
      b.limit = 3.0;
      budgets.push_back(b);
    }
    {
      Budget b;
      b.id = "R11.4";
      b.label = "FindCut W1, keep_turns 2";
      b.value = MedianOf("cut/find_cut");
      b.baseline_needed = false;
      b.limit = 1e-3;
      b.strict = true;
      budgets.push_back(b);
    }
    for (const auto* f : {&compact, &reduce}) {
      Budget b;
      const bool is_compact = f == &compact;
      b.id = is_compact ? "R11.6/compact" : "R11.6/reduce";
      b.label = is_compact ? "peak memory growth, Prepare compacting W1"
                           : "peak memory growth, Prepare reducing W1";
      b.unit = Unit::kBytes;
      if (f->ok) {
        b.value = static_cast<double>(f->peak - f->base);
        b.baseline = static_cast<double>(f->bytes);
      } else if (o.memory) {
        RecordError(std::string("R11.6 ") + (is_compact ? "compact: " : "reduce: ") + f->error);
      }
      b.limit = 3.0;
      b.strict = true;
      budgets.push_back(b);
    }
    const int missed = PrintTable(budgets);

    // ---- for reference ----
    std::printf("\nfor reference (no budget):\n");
    auto ms = [](std::optional<double> v) { return v ? *v * 1e3 : 0.0; };
    if (auto plain = MedianOf("measure/plain")) {
      std::printf(
          "  plain pass %.1f ms (%.2f GB/s); MessageChars alone %.1f ms; "
          "Transcript(vector<Message>) (UTF-8 checked too) %.1f ms\n",
          *plain * 1e3, static_cast<double>(g.w1_bytes) / *plain / 1e9,
          ms(MedianOf("measure/message_chars")), ms(MedianOf("measure/from_vector")));
    }
    if (auto copy = MedianOf("reduce/copy_messages")) {
      std::printf(
          "  a deep copy of W1's messages (a string each) %.1f ms; the copy into a fresh "
          "buffer (page faults included) %.1f ms\n",
          *copy * 1e3, ms(MedianOf("reduce/copy_fresh")));
    }
    if (auto clip = MedianOf("reduce/clip_arguments")) {
      std::printf(
          "  of ReduceTail's %.1f ms, ClipArguments on the tool-call arguments over 1,024 "
          "characters takes %.1f ms\n",
          ms(MedianOf("reduce/reduce_tail")), *clip * 1e3);
    }
    if (auto cut = MedianOf("cut/find_cut")) {
      std::printf(
          "  the cut %.2f ms = FindSafeBoundaries %.2f ms (pairing calls and results) + "
          "FindTurnStarts %.2f ms + the rest;\n  a walk reading each message's role "
          "and parts' kinds, nothing else: %.2f ms\n",
          *cut * 1e3, ms(MedianOf("cut/safe_boundaries")), ms(MedianOf("cut/turn_starts")),
          ms(MedianOf("cut/walk")));
    }
    for (const auto* f : {&compact, &reduce}) {
      if (!f->ok) continue;
      std::printf(
          "  %s: resident before W1 %.1f MB, with W1 in the store %.1f MB, peak %.1f MB "
          "(%.2fx W1 above the start)%s; Prepare %.2f s, %s\n",
          f == &compact ? "compact" : "reduce ", static_cast<double>(f->start) / 1e6,
          static_cast<double>(f->base) / 1e6, static_cast<double>(f->peak) / 1e6,
          static_cast<double>(f->peak - f->start) / static_cast<double>(f->bytes),
          f->reset ? "" : " [peak NOT reset before Prepare]", f->seconds, f->outcome.c_str());
    }

    if (!w2.empty()) {
      std::printf(
          "\nW2 — the real transcripts of tests/data, each as a session (no budget of "
          "its own; R11.1's 20 us and R11.4's 1 ms shown)\n");
      std::printf("%-44s %6s %9s %10s %12s %12s %12s\n", "transcript", "msgs", "chars", "measure",
                  "prepare med", "cut med", "cut max");
      for (const W2Row& r : w2) {
        const double prep = Median(r.prepare);
        const double cut = Median(r.cut);
        const double cut_max = r.cut.empty() ? 0 : *std::max_element(r.cut.begin(), r.cut.end());
        std::string name = r.name.size() > 44 ? r.name.substr(0, 41) + "..." : r.name;
        std::printf("%-44s %6zu %9zu %10s %12s %12s %12s\n", name.c_str(), r.messages, r.chars,
                    Shown(Median(r.measure), Unit::kSeconds).c_str(),
                    Shown(prep, Unit::kSeconds).c_str(), Shown(cut, Unit::kSeconds).c_str(),
                    Shown(cut_max, Unit::kSeconds).c_str());
      }
      std::printf("(tau-bench: the largest run's size; medians over all 200 runs' calls)\n");
    }

    std::printf("\n");
    {
      std::lock_guard<std::mutex> lock(g_mu);
      for (const std::string& e : g_errors) std::printf("ERROR %s\n", e.c_str());
      if (!g_errors.empty()) status = 2;
    }
    if (!o.json.empty() && !WriteJson(o.json, budgets, o.smoke)) {
      std::printf("ERROR cannot write %s\n", o.json.c_str());
      status = 2;
    }
    if (status == 0) {
      if (o.smoke) {
        std::printf("R11.1-R11.4, R11.6 smoke run: every figure ran (budgets not enforced)\n");
      } else if (missed == 0) {
        std::printf("R11.1-R11.4, R11.6: every budget met\n");
      } else {
        std::printf("R11.1-R11.4, R11.6: %d budget%s missed\n", missed, missed == 1 ? "" : "s");
        status = 1;
      }
    } else {
      std::printf("R11.1-R11.4, R11.6: an operation failed (see ERROR above)\n");
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "recap_bench_core: failed: %s\n", e.what());
    status = 2;
  }
  std::fflush(stdout);
  return status;
}
