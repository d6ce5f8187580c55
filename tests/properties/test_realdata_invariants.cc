// The cutter (SPEC R3) and the tail reducer (R6) keep their invariants on every real transcript
// under tests/data (tau-bench, Claude Code, SWE-agent, OpenHands; see tests/data/SOURCES.md).
// The checks are the same as the property tests' (support/invariants.h).
#include <chrono>
#include <iostream>

#include <catch2/catch.hpp>

#include "support/invariants.h"
#include "support/test_data.h"

namespace {

using namespace recap_test;

void CheckRealTranscript(const recap::testing::NamedTranscript& nt, Failures& f) {
  const recap::Transcript t(nt.conversation.messages);
  const std::vector<recap::Message> before = t.ToVector();
  const CutContext c(t);
  CheckBuildingBlocks(c, f);

  // Cutter: keep_turns 0..4 x both modes x no limit and a few limits.
  for (int k = 0; k <= 4; ++k) {
    for (recap::CutMode mode : {recap::CutMode::kNormal, recap::CutMode::kBudget}) {
      recap::CutOptions o;
      o.keep_turns = k;
      o.mode = mode;
      const recap::CutDecision base = recap::FindCut(t, o);
      CheckCutGeneral(c, o, base, f);
      CheckCutBase(c, o, base, f);
      std::vector<std::size_t> limits = {1, 4000, std::max<std::size_t>(1, t.chars() / 2),
                                         std::max<std::size_t>(1, t.chars() / 10)};
      if (base.ok()) {
        limits.push_back(base.kept_chars);      // exactly at the kept size: must move (< limit)
        limits.push_back(base.kept_chars + 1);  // just above: must not move
      }
      for (std::size_t limit : limits) {
        recap::CutOptions lo = o;
        lo.kept_chars_limit = limit;
        const recap::CutDecision d = recap::FindCut(t, lo);
        CheckCutGeneral(c, lo, d, f);
        CheckCutLimited(c, lo, d, base, f);
      }
    }
  }

  // Reducer at 90%, 50%, 10%, 1% of the transcript's size and at 4000.
  const std::size_t size = t.chars();
  std::vector<std::size_t> targets = {size * 9 / 10, size / 2, size / 10, size / 100,
                                      recap::kMinReductionTarget};
  std::vector<std::pair<std::size_t, recap::ReduceResult>> results;
  for (std::size_t target : targets) {
    recap::ReduceResult r = recap::ReduceTail(t, target);
    CheckReduce(t, target, r, f);
    CheckReduceIdempotent(r, target, f);
    results.emplace_back(target, std::move(r));
  }
  // The clip sequence one clip at a time, on the transcripts where that stays cheap.
  if (size <= 120000) {
    const WalkResult w = WalkReduction(t, 400, f);
    for (const auto& [target, r] : results) CheckAgainstWalk(w, target, r, f);
  }

  // Nothing above touched the input.
  for (std::size_t i = 0; i < before.size() && i < t.size(); ++i) {
    const std::string d = DiffMessages(before[i], t[i]);
    if (!d.empty()) {
      f.Add(Str("input message ", i, " changed: ", d));
      break;
    }
  }
}

TEST_CASE("R3/R6 invariants hold on every real transcript", "[property][realdata]") {
  const auto start = std::chrono::steady_clock::now();
  const std::vector<recap::testing::NamedTranscript> all = recap::testing::AllRealTranscripts();
  REQUIRE(all.size() >= 6);
  std::size_t failing = 0, messages = 0;
  for (const auto& nt : all) {
    Failures f;
    try {
      CheckRealTranscript(nt, f);
    } catch (const std::exception& e) {
      f.Add(Str("exception: ", e.what()));
    }
    messages += nt.conversation.messages.size();
    if (f.empty()) continue;
    ++failing;
    const std::string msg =
        Str("real transcript ", nt.name, " (", nt.format, ", ", nt.conversation.messages.size(),
            " messages): ", f.count(), " finding(s):\n", f.str());
    std::cerr << msg;
    FAIL_CHECK(msg);
  }
  const double secs =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::cerr << "[property] real transcripts: " << all.size() << " transcripts, " << messages
            << " messages, " << failing << " failing, " << secs << " s\n";
}

}  // namespace
