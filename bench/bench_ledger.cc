// Issue 37: what the ledger (SPEC R17) costs a compaction, on workload W1 (w1_workload.h) at
// 2,000 and 20,000 messages, against the compaction itself, in one run:
//
//   ledger/build/<N>        BuildLedger over the span a compaction of W1 summarizes (all but the
//                           last two messages), bounded as the Compactor bounds it (8 x 8,000).
//   ledger/guard/<N>        GuardCheckpoint of the offline summarizer's checkpoint of that span
//                           against that ledger (the default section budget, 8,000).
//   compact/ledger_off/<N>  Compactor::Compact of W1 in a fresh in-memory store, the offline
//   compact/ledger_on/<N>   summarizer, keepTurns 1, compaction.ledger off and on: the whole
//                           compaction (load, cut, summarizer, guard, commit). Filling the
//                           store is not timed.
//
// Comparisons, no budget: the ledger's share of a compaction is ledger_on / ledger_off - 1.
// Flags (besides Google Benchmark's --benchmark_*): --recap_smoke (W1 of 200 messages only;
// the ctest `bench.ledger_smoke`); --recap_dir is accepted and ignored (scripts/bench.sh).
#include <cstdlib>
#include <cstring>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include <benchmark/benchmark.h>

#include "recap/compactor.h"
#include "recap/ledger.h"
#include "recap/offline_summarizer.h"
#include "recap/session_store.h"

#include "w1_workload.h"

namespace {

std::vector<recap::Message> W1(std::size_t n) {
  recap_bench::W1Options options;
  options.messages = n;
  return recap_bench::GenerateW1(options);
}

constexpr std::size_t kMaxChars = 8000;

void Build(benchmark::State& state, std::size_t n) {
  const recap::Transcript t(W1(n));
  std::size_t entries = 0;
  for (auto _ : state) {
    const recap::Ledger ledger = recap::BuildLedger(t, 0, t.size() - 2, {}, 8 * kMaxChars);
    entries = ledger.entries.size();
    benchmark::DoNotOptimize(entries);
  }
  state.counters["entries"] = static_cast<double>(entries);
}

void Guard(benchmark::State& state, std::size_t n) {
  // The checkpoint the offline summarizer writes of that span, as the Compactor renders it.
  auto store = recap::NewInMemorySessionStore();
  recap::Config config;
  config.compaction.keep_turns = 1;
  config.compaction.ledger.enabled = false;
  config.limits.max_context_chars = 400'000'000;
  auto compactor = recap::Compactor::Create(config, nullptr, store);
  if (!compactor.ok() || !store->AppendMessages("s", W1(n)).ok()) {
    state.SkipWithError("setup failed");
    return;
  }
  const auto outcome = (*compactor)->Compact("s");
  if (!outcome.ok() || !outcome->compacted) {
    state.SkipWithError("the compaction did not commit");
    return;
  }
  const std::string checkpoint = recap::RenderCheckpoint(outcome->checkpoint);
  const recap::Transcript t(W1(n));
  const recap::Ledger ledger = recap::BuildLedger(t, 0, t.size() - 2, {}, 8 * kMaxChars);
  for (auto _ : state) {
    const recap::LedgerGuard guard = recap::GuardCheckpoint(checkpoint, ledger, kMaxChars);
    benchmark::DoNotOptimize(guard.section.data());
  }
}

void Compact(benchmark::State& state, std::size_t n, bool ledger) {
  const std::vector<recap::Message> messages = W1(n);
  recap::Config config;
  config.compaction.keep_turns = 1;
  config.compaction.ledger.enabled = ledger;
  config.limits.max_context_chars = 400'000'000;  // nothing automatic
  for (auto _ : state) {
    state.PauseTiming();
    auto store = recap::NewInMemorySessionStore();
    if (!store->AppendMessages("s", messages).ok()) throw std::runtime_error("append failed");
    auto compactor = recap::Compactor::Create(config, nullptr, store);
    if (!compactor.ok()) throw std::runtime_error("Compactor::Create failed");
    state.ResumeTiming();
    const auto outcome = (*compactor)->Compact("s");
    if (!outcome.ok() || !outcome->compacted) throw std::runtime_error("no compaction");
    state.PauseTiming();
    compactor->reset();
    store.reset();
    state.ResumeTiming();
  }
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<std::size_t> sizes = {2000, 20000};
  std::vector<char*> rest;
  for (int i = 0; i < argc; ++i) {
    if (std::strcmp(argv[i], "--recap_smoke") == 0) {
      sizes = {200};
    } else if (std::strncmp(argv[i], "--recap_dir", 11) == 0) {
      // scripts/bench.sh passes it to every benchmark; nothing here writes files
    } else {
      rest.push_back(argv[i]);
    }
  }
  if (const char* smoke = std::getenv("RECAP_BENCH_SMOKE"); smoke != nullptr && *smoke == '1') {
    sizes = {200};
  }
  for (std::size_t n : sizes) {
    const std::string at = "/" + std::to_string(n);
    benchmark::RegisterBenchmark(("ledger/build" + at).c_str(), Build, n)
        ->Unit(benchmark::kMillisecond);
    benchmark::RegisterBenchmark(("ledger/guard" + at).c_str(), Guard, n)
        ->Unit(benchmark::kMillisecond);
    benchmark::RegisterBenchmark(("compact/ledger_off" + at).c_str(), Compact, n, false)
        ->Unit(benchmark::kMillisecond);
    benchmark::RegisterBenchmark(("compact/ledger_on" + at).c_str(), Compact, n, true)
        ->Unit(benchmark::kMillisecond);
  }
  int count = static_cast<int>(rest.size());
  benchmark::Initialize(&count, rest.data());
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
