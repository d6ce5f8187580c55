// Property tests of the cutter (SPEC R3), the tail reducer (R6) and measurement (§1) over
// generated transcripts.
//
// Seeds: every property runs over a fixed list of run seeds plus one random run seed per
// process; case i of run seed s uses the case seed MixSeed(s, i). A failure prints its case
// seed; `RECAP_SEED=<case seed> ./property_tests` replays exactly that case (and only it) in
// every property. The random run seed is printed at start.
#include <chrono>
#include <cstdlib>
#include <functional>
#include <iostream>
#include <map>
#include <optional>
#include <random>

#include <catch2/catch.hpp>

#include "support/build_speed.h"
#include "support/generator.h"
#include "support/invariants.h"

namespace {

using namespace recap_test;
using recap::CutMode;
using recap::CutOptions;
using recap::Message;
using recap::Transcript;

constexpr std::uint64_t kFixedRunSeeds[] = {1, 2, 3, 42, 0x5EED, 0xC0FFEE, 20240601};
// x 8 run seeds = 10,400 cases per property; half in the sanitizer builds (support/build_speed.h).
constexpr std::size_t kCasesPerRunSeed = recap_test::kSlowBuild ? 650 : 1300;
constexpr std::size_t kMinCases = 8 * kCasesPerRunSeed;

std::optional<std::uint64_t> ReplaySeed() {
  const char* s = std::getenv("RECAP_SEED");
  if (s == nullptr || *s == '\0') return std::nullopt;
  return std::strtoull(s, nullptr, 0);
}

std::uint64_t RandomRunSeed() {
  static const std::uint64_t seed = [] {
    std::random_device rd;
    const std::uint64_t s = (static_cast<std::uint64_t>(rd()) << 32) ^ rd();
    std::cerr << "[property] random run seed " << s
              << " (each failure prints its case seed; replay one with RECAP_SEED=<case seed>)\n";
    return s;
  }();
  return seed;
}

// Runs `body(case_seed, failures)` over all cases and reports each failing case with its seed.
class CaseRunner {
 public:
  explicit CaseRunner(std::string property) : property_(std::move(property)) {}

  template <class Body>
  void Run(std::size_t cases_per_seed, Body&& body) {
    const auto start = std::chrono::steady_clock::now();
    if (auto seed = ReplaySeed()) {
      One(*seed, 0, 0, body);
    } else {
      std::vector<std::uint64_t> run_seeds(std::begin(kFixedRunSeeds), std::end(kFixedRunSeeds));
      run_seeds.push_back(RandomRunSeed());
      for (std::uint64_t rs : run_seeds) {
        for (std::size_t i = 0; i < cases_per_seed; ++i) {
          One(MixSeed(rs, i), rs, i, body);
        }
      }
    }
    const double secs =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    std::cerr << "[property] " << property_ << ": " << cases_ << " cases, " << failing_
              << " failing, " << secs << " s\n";
    for (const auto& [kind, stat] : kinds_) {
      std::cerr << "[property]   " << stat.first << " x " << kind
                << " (first: RECAP_SEED=" << stat.second << ")\n";
    }
  }
  std::size_t cases() const { return cases_; }

 private:
  static constexpr std::size_t kMaxFailingCases = 10;

  template <class Body>
  void One(std::uint64_t case_seed, std::uint64_t run_seed, std::size_t index, Body& body) {
    Failures f;
    try {
      body(case_seed, f);
    } catch (const std::exception& e) {
      f.Add(Str("exception: ", e.what()));
    }
    ++cases_;
    if (f.empty()) return;
    ++failing_;
    for (const auto& k : f.kinds()) {
      auto& stat = kinds_[k];
      if (stat.first++ == 0) stat.second = case_seed;
    }
    if (failing_ > kMaxFailingCases) return;  // counted in the summary only
    const std::string msg =
        Str(property_, " failed: RECAP_SEED=", case_seed, " (run seed ", run_seed, ", case index ",
            index, "), ", f.count(), " finding(s):\n", f.str());
    std::cerr << msg;
    CAPTURE(case_seed, run_seed, index);
    FAIL_CHECK(msg);
  }

  std::string property_;
  std::map<std::string, std::pair<std::size_t, std::uint64_t>>
      kinds_;  // kind -> (count, first seed)
  std::size_t cases_ = 0;
  std::size_t failing_ = 0;
};

bool Replaying() { return ReplaySeed().has_value(); }

// The generated messages went into the transcript unchanged (valid UTF-8, ids kept), and are
// still there unchanged after the functions under test ran (they take const&).
void CheckUntouched(const std::vector<Message>& original, const Transcript& t, Failures& f,
                    const char* when) {
  RECAP_EXPECT(f, original.size() == t.size(), when, ": transcript size changed");
  for (std::size_t i = 0; i < original.size() && i < t.size(); ++i) {
    const std::string d = DiffMessages(original[i], t[i]);
    if (!d.empty()) {
      f.Add(Str(when, ": message ", i, " differs from the generated one: ", d));
      return;
    }
  }
}

// What the generated cases exercised, printed after each property so a run shows that the
// interesting paths were taken (not asserted: the shape test below pins the generator).
struct Coverage {
  std::map<std::string, std::size_t> counts;
  void Add(const std::string& what) { ++counts[what]; }
  void Print(const char* property) const {
    std::cerr << "[property] " << property << " coverage:";
    for (const auto& [what, n] : counts) std::cerr << " " << what << "=" << n;
    std::cerr << "\n";
  }
};
Coverage& CutCoverage() {
  static Coverage c;
  return c;
}
Coverage& ReduceCoverage() {
  static Coverage c;
  return c;
}

// ---------------------------------------------------------------------------------------------
// Cutter

GeneratorOptions CutterOptions(Rng& rng) {
  GeneratorOptions base;
  base.text_median = 40;
  base.result_median = 80;
  base.args_median = 40;
  base.max_item_chars = 2000;
  base.max_turns = rng.OneIn(8) ? 30 : 8;
  base.uncertain_call = 0.15;
  base.leading_summary = 0.25;
  base.leading_orphan = 0.06;
  base.leading_assistant = 0.06;
  base.orphan_result = 0.08;
  base.interleaved_text = 0.06;
  base.no_turns = 0.03;
  base.reuse_call_ids = 0.06;
  base.double_user = 0.06;
  base.mid_system = 0.05;
  return JitterOptions(rng, base);
}

CutOptions RandomCutOptions(Rng& rng) {
  CutOptions o;
  const auto r = rng.Below(20);
  o.keep_turns = r < 12   ? static_cast<int>(rng.Between(0, 4))
                 : r < 19 ? static_cast<int>(rng.Between(0, 20))
                          : (rng.OneIn(2) ? -1 : 25);  // out of range: clamped
  o.mode = rng.OneIn(4) ? CutMode::kBudget : CutMode::kNormal;
  return o;
}

// A kept-chars limit, often exactly at an interesting size (< versus <= matters).
std::size_t RandomLimit(Rng& rng, const CutContext& c, const recap::CutDecision& base) {
  const Transcript& t = c.t;
  const std::size_t n = t.size();
  switch (rng.Below(6)) {
    case 0: return 1;
    case 1: return rng.Size(1, t.chars() + 10);
    case 2:
      return base.ok() ? std::max<std::size_t>(1, base.kept_chars + rng.Size(0, 2) - 1)
                       : 1 + rng.Size(0, 50);
    case 3: {  // the kept size at a random safe boundary, +-1
      const std::size_t q = rng.Size(0, n);
      const std::size_t s = t.chars(MaxSafeAtMost(c.safe, q), n);
      return std::max<std::size_t>(1, s + rng.Size(0, 2) - 1);
    }
    case 4: return rng.Size(1, 200);
    default: return std::max<std::size_t>(1, t.chars() / rng.Size(1, 10));
  }
}

void CutterCase(std::uint64_t seed, Failures& f) {
  Rng rng(MixSeed(seed, 1));
  const GeneratorOptions options = CutterOptions(rng);
  const std::vector<Message> messages = GenerateMessages(seed, options);
  const Transcript t(messages);
  CheckUntouched(messages, t, f, "after Append");
  const CutContext c(t);
  CheckBuildingBlocks(c, f);

  for (int k = 0; k < 4; ++k) {
    CutOptions o = RandomCutOptions(rng);
    const recap::CutDecision base = recap::FindCut(t, o);
    CutCoverage().Add(
        Str("unlimited:", SkipStr(base.skip), base.inside_turn ? "/inside_turn" : ""));
    CheckCutGeneral(c, o, base, f);
    CheckCutBase(c, o, base, f);
    CutOptions limited = o;
    limited.kept_chars_limit = RandomLimit(rng, c, base);
    const recap::CutDecision d = recap::FindCut(t, limited);
    CutCoverage().Add(Str("limited:", SkipStr(d.skip), d.moved_for_size ? "/moved" : ""));
    CheckCutGeneral(c, limited, d, f);
    CheckCutLimited(c, limited, d, base, f);
    // Pure function: the same call gives the same answer.
    const recap::CutDecision again = recap::FindCut(t, limited);
    RECAP_EXPECT(
        f, again.skip == d.skip && again.position == d.position && again.kept_chars == d.kept_chars,
        "FindCut is not deterministic");
  }
  CheckUntouched(messages, t, f, "after FindCut");
}

TEST_CASE("R3 cutter invariants over generated transcripts", "[property][R3]") {
  CaseRunner runner("R3 cutter");
  runner.Run(kCasesPerRunSeed, CutterCase);
  CutCoverage().Print("R3 cutter");
  if (!Replaying()) CHECK(runner.cases() >= kMinCases);
}

// Minimal transcripts for the cases the cutter properties check, each written out.
Message Call(const std::string& id, const std::string& msg_id, std::string text = {}) {
  Message m = Message::AssistantCalls({recap::ToolCall{id, "bash", "{\"command\":\"ls\"}", ""}},
                                      std::move(text));
  m.id = msg_id;
  return m;
}
Message AnthropicResult(const std::string& call_id, std::string text, const std::string& msg_id) {
  Message m;
  m.id = msg_id;
  m.role = recap::Role::kUser;
  recap::ToolResult r;
  r.call_id = call_id;
  r.content.push_back(recap::Text{std::string(1000, 'r'), ""});
  m.parts.push_back(std::move(r));
  if (!text.empty()) m.parts.push_back(recap::Text{std::move(text), ""});
  return m;
}
Message Named(Message m, const std::string& id) {
  m.id = id;
  return m;
}

void CheckMinimalCut(const Transcript& t, const CutOptions& o, std::size_t expected) {
  const recap::CutDecision d = recap::FindCut(t, o);
  const CutContext c(t);
  INFO("transcript:\n"
       << DescribeTranscript(t) << "options " << OptionsStr(o) << "\ndecision " << DecisionStr(d));
  CHECK(d.ok());
  CHECK(d.position == expected);
  Failures f;
  CheckCutGeneral(c, o, d, f);
  if (o.kept_chars_limit == 0) CheckCutBase(c, o, d, f);
  CHECK(f.str() == "");
}

TEST_CASE("R3.3 a cut inside the last turn keeps the newest tool-call round", "[property][R3.3]") {
  // One turn: user, a tool round, the final reply. The round is kept: cut before it.
  const Transcript one({Named(Message::UserText("fix the failing test"), "u0"), Call("c1", "a1"),
                        Named(Message::ToolOutput("c1", "ok"), "t2"),
                        Named(Message::AssistantText("done"), "a3")});
  CutOptions o;
  o.keep_turns = 2;
  CheckMinimalCut(one, o, 1);
  o.mode = CutMode::kBudget;
  CheckMinimalCut(one, o, 1);
  // Two turns, budget mode: the newest round of the last turn is kept.
  const Transcript two({Named(Message::UserText("hi"), "u0"),
                        Named(Message::AssistantText("hello"), "a1"),
                        Named(Message::UserText("run ls"), "u2"), Call("c1", "a3"),
                        Named(Message::ToolOutput("c1", "a b c"), "t4"),
                        Named(Message::AssistantText("three files"), "a5")});
  o.mode = CutMode::kBudget;
  CheckMinimalCut(two, o, 3);
}

TEST_CASE("R3.3 a last turn without a tool-call round is kept whole", "[property][R3.3]") {
  const Transcript t({Named(Message::UserText("hi"), "u0"),
                      Named(Message::AssistantText("hello"), "a1"),
                      Named(Message::UserText("and now?"), "u2"),
                      Named(Message::AssistantText("now this"), "a3")});
  CutOptions o;
  o.keep_turns = 0;
  CheckMinimalCut(t, o, 2);
  o.keep_turns = 2;
  o.mode = CutMode::kBudget;
  CheckMinimalCut(t, o, 2);
}

TEST_CASE("R3.1/R3.6 no safe boundary before the keep_turns-th last turn: skip, never cut later",
          "[property][R3.6]") {
  // Parallel calls answered by two user messages that also carry text: both are turn starts,
  // neither is a safe boundary. keep_turns 1: the cut belongs at 2 or before; 1 and 2 are not
  // safe and 0 summarizes nothing, so the cut is skipped (cutting at 3 would keep no turn).
  Message calls = Message::AssistantCalls(
      {recap::ToolCall{"c0", "bash", "{}", ""}, recap::ToolCall{"c1", "grep", "{}", ""}});
  calls.id = "a0";
  const Transcript t({calls, AnthropicResult("c0", "first", "u1"),
                      AnthropicResult("c1", "second", "u2"),
                      Named(Message::AssistantText("done"), "a3")});
  CutOptions o;
  o.keep_turns = 1;
  const recap::CutDecision d = recap::FindCut(t, o);
  INFO("transcript:\n" << DescribeTranscript(t) << "decision " << DecisionStr(d));
  CHECK(d.skip == recap::SkipReason::kNoSafeBoundary);
}

TEST_CASE("R3.6 a single turn kept whole leaves nothing to summarize", "[property][R3.6]") {
  const Transcript t(
      {Named(Message::UserText("hi"), "u0"), Named(Message::AssistantText("hello"), "a1")});
  CutOptions o;
  const recap::CutDecision d = recap::FindCut(t, o);
  INFO("decision " << DecisionStr(d));
  CHECK(d.skip == recap::SkipReason::kNothingToSummarize);
}

TEST_CASE("R3.8 the cut moves to the safe boundary before an unsafe turn start",
          "[property][R3.8]") {
  // Turn starts 0, 2, 4; 2 and 4 are user messages carrying a tool result and a text (turn
  // starts, but not safe boundaries). Safe boundaries: 0, 1, 3, 5.
  const Transcript t({Named(Message::UserText("a"), "u0"), Call("c1", "a1"),
                      AnthropicResult("c1", "b", "u2"), Call("c2", "a3"),
                      AnthropicResult("c2", "c", "u4")});
  CutOptions o;
  o.keep_turns = 2;
  CheckMinimalCut(t, o, 1);  // turn start 2 snapped back to 1
  o.kept_chars_limit = 100;  // kept from 1: ~2,040; from 3: ~1,020, still over; 5 is the end
  const recap::CutDecision d = recap::FindCut(t, o);
  INFO("transcript:\n" << DescribeTranscript(t) << "decision " << DecisionStr(d));
  // "until the kept part is below it or no safe boundary is left": 3 is the last one left.
  CHECK(d.ok());
  CHECK(d.position == 3);
  CHECK(d.moved_for_size);
}

// ---------------------------------------------------------------------------------------------
// Reducer

GeneratorOptions ReducerOptions(Rng& rng) {
  GeneratorOptions base;
  base.text_median = 500;
  base.result_median = 1500;
  base.args_median = 250;
  base.max_item_chars = rng.OneIn(10) ? 60000 : 20000;
  base.max_turns = 5;
  base.max_rounds_per_turn = 3;
  base.leading_summary = 0.25;
  base.exceed_caps = rng.Chance(0.35);
  base.huge_item = rng.OneIn(150) ? 1.0 : 0.0;
  base.result_extra_items = 0.15;
  base.invalid_json_arguments = 0.08;
  base.non_object_arguments = 0.04;
  if (base.exceed_caps) {
    base.max_turns = 3;
    base.max_rounds_per_turn = 2;
  }
  return JitterOptions(rng, base);
}

std::size_t RandomTarget(Rng& rng, const Transcript& t) {
  const std::size_t before = t.chars();
  switch (rng.Below(9)) {
    case 0: return 0;
    case 1: return rng.Size(0, 4000);
    case 2: return before == 0 ? 0 : before - 1;
    case 3: return before;
    case 4: return before + 1;
    case 5: return rng.Size(0, before);
    case 6: return before / rng.Size(2, 20);
    case 7: return recap::kMinReductionTarget;
    default: return before - std::min(before, rng.Size(0, 20000));
  }
}

void ReducerCase(std::uint64_t seed, bool walk, Failures& f) {
  Rng rng(MixSeed(seed, 2));
  const GeneratorOptions options = ReducerOptions(rng);
  const std::vector<Message> messages = GenerateMessages(seed, options);
  const Transcript t(messages);
  CheckUntouched(messages, t, f, "after Append");

  std::vector<std::pair<std::size_t, recap::ReduceResult>> results;
  const int targets = walk || rng.OneIn(4) ? 2 : 1;
  for (int k = 0; k < targets; ++k) {
    const std::size_t target = RandomTarget(rng, t);
    recap::ReduceResult r = recap::ReduceTail(t, target);
    ReduceCoverage().Add(r.rounds == 0 ? "already_fit"
                         : r.fits      ? Str("fit_in_round_", r.rounds)
                                       : "over_after_5_rounds");
    if (t.chars() >= 100000) ReduceCoverage().Add("transcripts_over_100k");
    CheckReduce(t, target, r, f);
    CheckReduceIdempotent(r, target, f);
    results.emplace_back(target, std::move(r));
  }
  if (!walk) CheckFirstClip(t, f);
  if (walk) {
    const WalkResult w = WalkReduction(t, 150, f);
    for (const auto& [target, r] : results) CheckAgainstWalk(w, target, r, f);
  }
  CheckUntouched(messages, t, f, "after ReduceTail");
}

TEST_CASE("R6 reducer invariants over generated transcripts", "[property][R6]") {
  CaseRunner runner("R6 reducer");
  runner.Run(kCasesPerRunSeed,
             [](std::uint64_t seed, Failures& f) { ReducerCase(seed, false, f); });
  ReduceCoverage().Print("R6 reducer");
  if (!Replaying()) CHECK(runner.cases() >= kMinCases);
}

// The clip sequence one step at a time (R6.2: largest first, no clip after the target was
// reached, rounds complete). Costlier per case, so fewer cases.
TEST_CASE("R6.2 reducer clip sequence over generated transcripts", "[property][R6]") {
  CaseRunner runner("R6.2 clip sequence");
  runner.Run(40, [](std::uint64_t seed, Failures& f) { ReducerCase(seed, true, f); });
}

// Replay helper: `RECAP_SEED=<case seed> ./property_tests "[dump]"` prints the transcripts
// that the cutter and the reducer properties generate for that seed.
TEST_CASE("dump the generated transcripts of RECAP_SEED", "[.][dump]") {
  const auto seed = ReplaySeed();
  REQUIRE(seed.has_value());
  {
    Rng rng(MixSeed(*seed, 1));
    const Transcript t = GenerateTranscript(*seed, CutterOptions(rng));
    std::cout << "cutter transcript of seed " << *seed << ":\n" << DescribeTranscript(t);
  }
  {
    Rng rng(MixSeed(*seed, 2));
    const Transcript t = GenerateTranscript(*seed, ReducerOptions(rng));
    std::cout << "reducer transcript of seed " << *seed << ":\n" << DescribeTranscript(t);
  }
}

// ---------------------------------------------------------------------------------------------
// Targeted constructions for largest-first (R6.2)

Message UserText(std::string text, const std::string& id) {
  Message m = Message::UserText(std::move(text));
  m.id = id;
  return m;
}

Message ToolText(std::string text, const std::string& call_id, const std::string& id) {
  Message m = Message::ToolOutput(call_id, std::move(text));
  m.id = id;
  return m;
}

std::string Ascii(std::size_t n, char c = 'a') { return std::string(n, c); }
std::string Emoji(std::size_t n) {
  std::string s;
  for (std::size_t i = 0; i < n; ++i) s += (i % 2) ? "😀" : "𝄞";
  return s;
}

std::vector<std::size_t> ClippedAt(const Transcript& t, std::size_t target, Failures& f) {
  recap::ReduceResult r = recap::ReduceTail(t, target);
  CheckReduce(t, target, r, f);
  return r.clipped;
}

TEST_CASE("R6.2 largest over-cap message first, ties earlier first", "[property][R6.2]") {
  std::vector<Message> ms;
  ms.push_back(UserText(Ascii(20000), "m0"));
  ms.push_back(UserText(Ascii(30000, 'b'), "m1"));
  ms.push_back(Message::AssistantText(Ascii(25000, 'c')));
  ms.back().id = "m2";
  ms.push_back(UserText(Ascii(30000, 'd'), "m3"));  // ties with m1: m1 first
  ms.push_back(ToolText(Ascii(12000, 'e'), "c1", "m4"));
  ms.push_back(ToolText(Ascii(9000, 'f'), "c2", "m5"));
  ms.push_back(UserText(Ascii(15000, 'g'), "m6"));  // larger than m4, m5 but under the content cap
  const Transcript t(ms);
  Failures f;

  // One step at a time: each target just below the previous size forces exactly one more clip.
  const std::vector<std::size_t> order = {1, 3, 2, 0, 4, 5};
  std::vector<std::size_t> expected;
  std::size_t size = t.chars();
  for (std::size_t step = 0; step < order.size(); ++step) {
    expected.push_back(order[step]);
    std::sort(expected.begin(), expected.end());
    recap::ReduceResult r = recap::ReduceTail(t, size - 1);
    CheckReduce(t, size - 1, r, f);
    INFO("step " << step << ", target " << size - 1);
    CHECK(r.rounds == 1);
    CHECK(r.clipped == expected);
    size = r.after_chars;
  }
  // Round 1 is over; the next clip is round 2's largest message at the round's start: m0..m3
  // hold 16,000 or fewer now, m6 15,000; of the largest, the earliest goes first.
  const recap::ReduceResult end1 = recap::ReduceTail(t, size);
  recap::ReduceResult r = recap::ReduceTail(t, size - 1);
  CHECK(r.rounds == 2);
  std::size_t largest = 0;
  for (std::size_t i : {0, 1, 2, 3, 6}) {
    if (end1.transcript.chars(i) > end1.transcript.chars(largest)) largest = i;
  }
  CHECK(ChangedMessages(end1.transcript, r.transcript) == std::vector<std::size_t>{largest});
  CHECK(f.empty());
  if (!f.empty()) FAIL_CHECK(f.str());
}

TEST_CASE("R6.2 size is measured in code points, not bytes", "[property][R6.2]") {
  std::vector<Message> ms;
  ms.push_back(UserText(Emoji(20000), "m0"));      // 20,000 code points, 80,000 bytes
  ms.push_back(UserText(Ascii(25000), "m1"));      // 25,000 code points, 25,000 bytes
  ms.push_back(ToolText(Emoji(9000), "c", "m2"));  // 9,000 code points, 36,000 bytes
  const Transcript t(ms);
  REQUIRE(t.chars() == 54000);
  Failures f;
  CHECK(ClippedAt(t, t.chars() - 1, f) == std::vector<std::size_t>{1});
  // Dense 4-byte text clipped: valid UTF-8, the prefix is whole characters.
  recap::ReduceResult r = recap::ReduceTail(t, 0);
  CheckReduce(t, 0, r, f);
  CHECK(r.clipped == std::vector<std::size_t>{0, 1, 2});
  CHECK(f.empty());
  if (!f.empty()) FAIL_CHECK(f.str());
}

TEST_CASE("R6.2 equal sizes: the earlier message first", "[property][R6.2]") {
  std::vector<Message> ms;
  for (int i = 0; i < 5; ++i)
    ms.push_back(ToolText(Ascii(10000, static_cast<char>('a' + i)), "c" + std::to_string(i),
                          "m" + std::to_string(i)));
  const Transcript t(ms);
  Failures f;
  std::size_t size = t.chars();
  for (std::size_t step = 0; step < 5; ++step) {
    recap::ReduceResult r = recap::ReduceTail(t, size - 1);
    CheckReduce(t, size - 1, r, f);
    std::vector<std::size_t> expected;
    for (std::size_t i = 0; i <= step; ++i) expected.push_back(i);
    INFO("step " << step);
    CHECK(r.clipped == expected);
    size = r.after_chars;
  }
  CHECK(f.empty());
  if (!f.empty()) FAIL_CHECK(f.str());
}

TEST_CASE("R4.4/R6.4 checkpoints and opaque items are never clipped, even at target 0",
          "[property][R6.4]") {
  std::vector<Message> ms;
  Message summary = UserText("## Goal\n" + Emoji(40000), "s0");
  summary.summary = true;
  ms.push_back(summary);
  Message user = UserText(Ascii(30000), "u1");
  user.parts.push_back(recap::Opaque{"image", "{\"data\":\"" + Ascii(50000, 'Q') + "\"}",
                                     recap::OpaqueLink::kNone, ""});
  ms.push_back(user);
  Message call = Message::AssistantCalls(
      {recap::ToolCall{"call_1", "bash", "{\"command\":\"" + Ascii(40000, 'x') + "\"}", ""}});
  call.id = "a2";
  call.parts.insert(
      call.parts.begin(),
      recap::Opaque{"thinking", "{\"thinking\":\"" + Emoji(30000) + "\",\"signature\":\"sig\"}",
                    recap::OpaqueLink::kNone, ""});
  ms.push_back(call);
  Message result;
  result.id = "t3";
  result.role = recap::Role::kTool;
  recap::ToolResult tr;
  tr.call_id = "call_1";
  tr.content.push_back(recap::Text{Emoji(20000), ""});
  tr.content.push_back(recap::Opaque{"image", "{\"data\":\"" + Ascii(20000, 'Z') + "\"}",
                                     recap::OpaqueLink::kNone, ""});
  tr.content.push_back(recap::Text{Ascii(9000), ""});
  result.parts.push_back(tr);
  ms.push_back(result);
  const Transcript t(ms);
  Failures f;
  recap::ReduceResult r = recap::ReduceTail(t, 0);
  CheckReduce(t, 0, r, f);
  CheckReduceIdempotent(r, 0, f);
  CHECK_FALSE(r.fits);
  CHECK(r.rounds == 5);
  CHECK(r.clipped == std::vector<std::size_t>{1, 2, 3});
  CHECK(r.transcript.shared(0).get() == t.shared(0).get());
  CHECK(f.empty());
  if (!f.empty()) FAIL_CHECK(f.str());
}

// ---------------------------------------------------------------------------------------------
// ClipText and ClipArguments (R6.3)

void CheckClipTextCall(const std::string& s, std::size_t c, Failures& f) {
  const std::string r = recap::ClipText(s, c);
  const std::string where = Str("ClipText(", Preview(s), ", ", c, ")");
  const std::size_t n = RefCountCodePoints(s);
  const std::string_view marker = recap::kTruncationMarker;
  const std::size_t marker_cps = RefCountCodePoints(marker);
  RECAP_EXPECT(f, RefIsValidUtf8(r), where, " returned invalid UTF-8: ", Preview(r));
  RECAP_EXPECT(f, RefCountCodePoints(r) <= c || n <= c, where, " has ", RefCountCodePoints(r),
               " code points");
  if (n <= c) {
    RECAP_EXPECT(f, r == s, where, " changed a text within the cap");
  } else if (c < marker_cps) {
    RECAP_EXPECT(f, r == std::string(marker.substr(0, RefPrefixBytes(marker, c))), where,
                 " with a cap below the marker should give the marker cut to the cap, got ",
                 Preview(r));
  } else {
    RECAP_EXPECT(f, EndsWith(r, marker) && CountOccurrences(r, marker) == 1, where,
                 " does not end with the marker once");
    const std::string_view prefix =
        std::string_view(r).substr(0, r.size() >= marker.size() ? r.size() - marker.size() : 0);
    RECAP_EXPECT(f, std::string_view(s).substr(0, prefix.size()) == prefix, where,
                 " kept part is not a prefix");
    // "keeps its beginning": at least half of the room the cap leaves.
    RECAP_EXPECT(f, RefCountCodePoints(prefix) * 2 >= c - marker_cps, where, " kept only ",
                 RefCountCodePoints(prefix), " code points of ", c - marker_cps, " available");
  }
  if (c >= 32) {
    RECAP_EXPECT(f, EndsWith(r, marker) == (n > c), where,
                 " ends with the marker iff the text was over the cap");
  }
  RECAP_EXPECT(f, recap::ClipText(r, c) == r, where, " is not idempotent");
}

TEST_CASE("R6.3 ClipText never splits UTF-8: dense 4-byte text at every clip offset",
          "[property][R6.3]") {
  Failures f;
  const std::vector<std::string> prefixes = {"", "a", "ab", "abc", "é", "€", "é€"};
  for (const auto& lead : prefixes) {
    const std::string s = lead + Emoji(150);
    const std::size_t n = RefCountCodePoints(s);
    for (std::size_t c = 0; c <= n + 2; ++c) CheckClipTextCall(s, c, f);
  }
  // Every mix of 1- to 4-byte characters around the clip point.
  std::string mixed;
  for (int i = 0; i < 40; ++i) mixed += "a\xC3\xA9\xE2\x82\xAC\xF0\x9F\x98\x80";  // a é € 😀
  for (std::size_t c = 0; c <= RefCountCodePoints(mixed) + 1; ++c) CheckClipTextCall(mixed, c, f);
  CHECK(f.empty());
  if (!f.empty()) FAIL_CHECK(f.str());
}

TEST_CASE("R6.3 ClipText over random texts and caps", "[property][R6.3]") {
  CaseRunner runner("R6.3 ClipText");
  runner.Run(400, [](std::uint64_t seed, Failures& f) {
    Rng rng(MixSeed(seed, 3));
    const auto style = static_cast<TextStyle>(rng.Below(6));
    const std::string s = RandomText(rng, rng.LogSize(0, 200, 20000), style);
    const std::size_t n = RefCountCodePoints(s);
    for (int k = 0; k < 3; ++k) {
      std::size_t c;
      switch (rng.Below(4)) {
        case 0: c = rng.Size(0, 40); break;
        case 1: c = n == 0 ? 0 : n - 1; break;
        case 2: c = n; break;
        default: c = rng.Size(32, n + 40); break;
      }
      CheckClipTextCall(s, c, f);
    }
  });
}

std::string RandomArguments(Rng& rng) {
  const std::size_t size = rng.LogSize(2, 1500, 30000);
  switch (rng.Below(5)) {
    case 0: return RandomInvalidJson(rng, size);
    case 1: return RandomJsonArguments(rng, size, false, true);
    case 2: return RandomJsonArguments(rng, size, true);
    default: return RandomJsonArguments(rng, size, false);
  }
}

TEST_CASE("R6.3 ClipArguments keeps JSON valid with its structure", "[property][R6.3]") {
  CaseRunner runner("R6.3 ClipArguments");
  runner.Run(150, [](std::uint64_t seed, Failures& f) {
    Rng rng(MixSeed(seed, 4));
    const std::string args = RandomArguments(rng);
    const std::size_t n = RefCountCodePoints(args);
    for (int k = 0; k < 3; ++k) {
      const std::size_t cap = rng.OneIn(4) ? rng.Size(32, 200) : rng.Size(32, n + 100);
      const std::string r = recap::ClipArguments(args, cap);
      const std::string where = Str("ClipArguments(", Preview(args), ", ", cap, ")");
      if (n <= cap) {
        RECAP_EXPECT(f, r == args, where, " changed arguments within the cap");
      } else {
        CheckClippedArguments(args, r, cap, where, f);
      }
    }
  });
}

// R6.4 "Clipping is idempotent", and ClipArguments clips "until the text fits, or until no
// string can be shortened further": a second call with the same cap finds nothing to do.
TEST_CASE("R6.4 ClipArguments is idempotent", "[property][R6.4]") {
  CaseRunner runner("R6.4 ClipArguments idempotence");
  runner.Run(250, [](std::uint64_t seed, Failures& f) {
    Rng rng(MixSeed(seed, 7));
    const std::string args = RandomArguments(rng);
    const std::size_t n = RefCountCodePoints(args);
    for (int k = 0; k < 3; ++k) {
      const std::size_t cap = rng.OneIn(4) ? rng.Size(32, 200) : rng.Size(32, n + 100);
      const std::string r = recap::ClipArguments(args, cap);
      const std::string r2 = recap::ClipArguments(r, cap);
      RECAP_EXPECT(f, r2 == r, "ClipArguments(", Preview(args), ", ", cap,
                   ") is not idempotent: first ", Preview(r), ", second ", Preview(r2));
    }
  });
}

// ---------------------------------------------------------------------------------------------
// Measurement (SPEC §1)

// Random bytes biased towards the interesting: valid sequences of every length, truncated
// sequences, overlongs, surrogates, values above U+10FFFF, stray continuation bytes.
std::string RandomBytes(Rng& rng, std::size_t n) {
  static const std::vector<std::string> kPieces = {"a",
                                                   " ",
                                                   "\n",
                                                   std::string("\0", 1),
                                                   "\x7F",
                                                   "\xC3\xA9",
                                                   "\xE2\x82\xAC",
                                                   "\xF0\x9F\x98\x80",
                                                   "\xF4\x8F\xBF\xBF",
                                                   "\xC3",
                                                   "\xE2\x82",
                                                   "\xF0\x9F\x98",
                                                   "\xF0\x9F",
                                                   "\x80",
                                                   "\xBF",
                                                   "\xC0\x80",
                                                   "\xC1\xBF",
                                                   "\xE0\x80\x80",
                                                   "\xE0\x9F\xBF",
                                                   "\xF0\x80\x80\x80",
                                                   "\xF0\x8F\xBF\xBF",
                                                   "\xED\xA0\x80",
                                                   "\xED\xBF\xBF",
                                                   "\xF4\x90\x80\x80",
                                                   "\xF5\x80\x80\x80",
                                                   "\xF8\x88\x80\x80\x80",
                                                   "\xFE",
                                                   "\xFF",
                                                   "\xEF\xBB\xBF",
                                                   "\xEF\xBF\xBD",
                                                   "\xE2\x80\xA6",
                                                   "\xED\x9F\xBF",
                                                   "\xEE\x80\x80"};
  std::string s;
  while (s.size() < n) {
    if (rng.OneIn(4))
      s += static_cast<char>(rng.Below(256));
    else
      s += rng.Pick(kPieces);
  }
  return s;
}

TEST_CASE(
    "§1 CountCodePoints, IsValidUtf8, ToValidUtf8, PrefixBytesForCodePoints match a reference "
    "decoder",
    "[property][measure]") {
  CaseRunner runner("§1 UTF-8 measurement");
  runner.Run(2500, [](std::uint64_t seed, Failures& f) {
    Rng rng(MixSeed(seed, 5));
    std::string s;
    if (rng.OneIn(3)) {
      const auto style = static_cast<TextStyle>(rng.Below(6));
      s = RandomText(rng, rng.Size(0, 300), style);
    } else {
      s = RandomBytes(rng, rng.Size(0, 200));
    }
    const std::string where = Str("bytes ", nlohmann::json(RefToValidUtf8(s)).dump().substr(0, 120),
                                  " (", s.size(), " bytes)");
    RECAP_EXPECT(f, recap::CountCodePoints(s) == RefCountCodePoints(s), "CountCodePoints ",
                 recap::CountCodePoints(s), " vs reference ", RefCountCodePoints(s), " for ",
                 where);
    RECAP_EXPECT(f, recap::IsValidUtf8(s) == RefIsValidUtf8(s), "IsValidUtf8 ",
                 recap::IsValidUtf8(s), " for ", where);
    const std::string v = recap::ToValidUtf8(s);
    RECAP_EXPECT(f, RefIsValidUtf8(v), "ToValidUtf8 output invalid for ", where);
    RECAP_EXPECT(f, v == RefToValidUtf8(s),
                 "ToValidUtf8 differs from replacing each invalid byte by U+FFFD for ", where);
    RECAP_EXPECT(f, recap::CountCodePoints(v) == recap::CountCodePoints(s),
                 "CountCodePoints(ToValidUtf8(s)) != CountCodePoints(s) for ", where);
    if (RefIsValidUtf8(s)) RECAP_EXPECT(f, v == s, "ToValidUtf8 changed valid text");
    for (int k = 0; k < 4; ++k) {
      const std::size_t cps = rng.Size(0, RefCountCodePoints(s) + 2);
      RECAP_EXPECT(f, recap::PrefixBytesForCodePoints(s, cps) == RefPrefixBytes(s, cps),
                   "PrefixBytesForCodePoints(", cps,
                   ") = ", recap::PrefixBytesForCodePoints(s, cps), " vs reference ",
                   RefPrefixBytes(s, cps), " for ", where);
    }
  });
}

TEST_CASE("§1 Transcript sizes equal the sum of message sizes", "[property][measure]") {
  CaseRunner runner("§1 transcript sizes");
  runner.Run(250, [](std::uint64_t seed, Failures& f) {
    Rng rng(MixSeed(seed, 6));
    GeneratorOptions o = JitterOptions(rng, GeneratorOptions{});
    o.uncertain_call = 0.2;
    const Transcript t = GenerateTranscript(seed, o);
    std::vector<std::size_t> prefix{0};
    for (const auto& m : t) prefix.push_back(prefix.back() + RefMessageChars(m));
    std::size_t lib_sum = 0;
    for (const auto& m : t) lib_sum += recap::MessageChars(m);
    RECAP_EXPECT(f, t.chars() == prefix.back(), "t.chars() ", t.chars(), " vs reference ",
                 prefix.back());
    RECAP_EXPECT(f, t.chars() == lib_sum, "t.chars() != sum of MessageChars");
    RECAP_EXPECT(f, t.tokens() == (t.chars() + 3) / 4, "tokens != ceil(chars / 4)");
    for (int k = 0; k < 10; ++k) {
      const std::size_t b = rng.Size(0, t.size());
      const std::size_t e = rng.Size(b, t.size());
      RECAP_EXPECT(f, t.chars(b, e) == prefix[e] - prefix[b], "t.chars(", b, ", ", e, ")");
      const Transcript s = t.Slice(b, e);
      RECAP_EXPECT(f, s.size() == e - b && s.chars() == prefix[e] - prefix[b], "Slice(", b, ", ", e,
                   ") sizes");
    }
  });
}

// ---------------------------------------------------------------------------------------------
// The checks themselves can fail: broken results, built by hand, are reported.

TEST_CASE("the invariant checks report broken cuts and reductions", "[property][selftest]") {
  std::vector<Message> ms;
  Message summary = UserText("## Goal\nship it", "s0");
  summary.summary = true;
  ms.push_back(summary);
  ms.push_back(UserText(Emoji(20000), "u1"));
  Message call = Call("c1", "a2");
  call.parts.insert(call.parts.begin(), recap::Opaque{"thinking", "{\"thinking\":\"hm\"}",
                                                      recap::OpaqueLink::kNone, ""});
  ms.push_back(call);
  ms.push_back(ToolText(Ascii(9000), "c1", "t3"));
  ms.push_back(UserText("thanks", "u4"));
  const Transcript t(ms);
  const std::size_t target = t.chars() - 1;
  const recap::ReduceResult good = recap::ReduceTail(t, target);
  {
    Failures f;
    CheckReduce(t, target, good, f);
    REQUIRE(f.str() == "");
  }
  auto expect_reported = [&](const char* what,
                             const std::function<void(recap::ReduceResult&)>& breakit,
                             const std::string& needle) {
    recap::ReduceResult bad = good;
    breakit(bad);
    Failures f;
    CheckReduce(t, target, bad, f);
    INFO(what << ": " << f.str());
    CHECK(f.str().find(needle) != std::string::npos);
  };
  auto with_text = [](std::string text) {
    return [text](recap::ReduceResult& r) {
      Message m = r.transcript[1];
      std::get<recap::Text>(m.parts[0]).text = text;
      r.transcript.Set(1, m);
      r.after_chars = r.transcript.chars();
    };
  };
  const std::string marker(recap::kTruncationMarker);
  // A split character: Transcript::Set repairs it to U+FFFD, which is then no prefix; the text
  // check alone reports the invalid UTF-8.
  expect_reported("a split 4-byte character", with_text(Emoji(100) + "\xF0\x9F" + marker),
                  "not a prefix");
  {
    Failures f;
    CheckClippedText(Emoji(200), Emoji(100) + "\xF0\x9F" + marker, 16000, "text", f);
    CHECK(f.str().find("UTF-8") != std::string::npos);
  }
  expect_reported("the marker twice", with_text(Emoji(100) + marker + marker),
                  "marker exactly once");
  expect_reported("no marker", with_text(Emoji(100)), "marker exactly once");
  expect_reported("not a prefix", with_text("x" + Emoji(100) + marker), "not a prefix");
  expect_reported("over the cap", with_text(Emoji(16001) + marker), "over its cap");
  expect_reported(
      "a changed call id",
      [](recap::ReduceResult& r) {
        Message m = r.transcript[2];
        std::get<recap::ToolCall>(m.parts[1]).id = "c9";
        r.transcript.Set(2, m);
      },
      "R6.4");
  expect_reported(
      "an altered opaque item",
      [](recap::ReduceResult& r) {
        Message m = r.transcript[2];
        std::get<recap::Opaque>(m.parts[0]).payload = "{}";
        r.transcript.Set(2, m);
        r.after_chars = r.transcript.chars();
      },
      "opaque");
  expect_reported(
      "a clipped checkpoint",
      [](recap::ReduceResult& r) {
        Message m = r.transcript[0];
        std::get<recap::Text>(m.parts[0]).text = "## Goal";
        r.transcript.Set(0, m);
        r.after_chars = r.transcript.chars();
      },
      "checkpoint");
  expect_reported(
      "invalid JSON arguments",
      [](recap::ReduceResult& r) {
        Message m = r.transcript[2];
        std::get<recap::ToolCall>(m.parts[1]).arguments = "{\"command\":";
        r.transcript.Set(2, m);
        r.after_chars = r.transcript.chars();
      },
      "not after clipping");
  expect_reported(
      "an incomplete clipped list", [](recap::ReduceResult& r) { r.clipped.clear(); },
      "exactly the changed");
  expect_reported(
      "a wrong size", [](recap::ReduceResult& r) { r.after_chars += 1; }, "after_chars");
  expect_reported(
      "a wrong fits", [](recap::ReduceResult& r) { r.fits = !r.fits; }, "fits");

  // Cuts: a position that separates a call from its result; a cut despite an uncertain call.
  const CutContext c(t);
  recap::CutDecision split;
  split.position = 3;  // the call at 2 is summarized, its result at 3 kept
  split.summarized_chars = t.chars(0, 3);
  split.kept_chars = t.chars(3, t.size());
  split.kept_turns = 1;
  Failures f1;
  CheckCutGeneral(c, CutOptions{}, split, f1);
  CHECK(f1.str().find("R3.4") != std::string::npos);
  const Transcript uncertain({UserText("go", "u0"), Call("c1", "a1"), UserText("well?", "u2")});
  const CutContext cu(uncertain);
  recap::CutDecision cut;
  cut.position = 2;
  Failures f2;
  CheckCutGeneral(cu, CutOptions{}, cut, f2);
  CHECK(f2.str().find("R3.7") != std::string::npos);
}

// ---------------------------------------------------------------------------------------------
// The generator itself: deterministic, and every shape the properties rely on shows up.

TEST_CASE("generator is deterministic and produces every shape", "[property][generator]") {
  GeneratorOptions o;
  o.uncertain_call = 0.2;
  o.huge_item = 0.02;
  o.huge_max = 300000;
  o.reuse_call_ids = 0.1;
  o.no_turns = 0.05;
  {
    const auto a = GenerateMessages(77, o);
    const auto b = GenerateMessages(77, o);
    REQUIRE(a.size() == b.size());
    for (std::size_t i = 0; i < a.size(); ++i) CHECK(DiffMessages(a[i], b[i]).empty());
    Rng r1(5), r2(5);
    for (int i = 0; i < 100; ++i) CHECK(r1.Below(1000) == r2.Below(1000));
  }
  // A seed reproduces everywhere: mt19937_64's 10000th output is fixed by the standard, and
  // the generator derives everything from it portably. The digests below pin the generated
  // transcripts; a deliberate change to the generator updates them.
  {
    std::mt19937_64 e;
    e.discard(9999);
    CHECK(e() == 9981545732273789042ULL);
    std::vector<std::uint64_t> digests;
    for (std::uint64_t seed : {1, 2, 3}) {
      std::uint64_t h = 14695981039346656037ULL;  // FNV-1a over every field
      auto mix = [&h](std::string_view s) {
        for (unsigned char ch : s) h = (h ^ ch) * 1099511628211ULL;
        h = (h ^ 0xFF) * 1099511628211ULL;
      };
      for (const Message& m : GenerateMessages(seed, GeneratorOptions{})) {
        mix(m.id);
        mix(RoleStr(m.role));
        for (const auto& p : m.parts) {
          if (const auto* x = std::get_if<recap::Text>(&p))
            mix(x->text);
          else if (const auto* c = std::get_if<recap::ToolCall>(&p)) {
            mix(c->id);
            mix(c->name);
            mix(c->arguments);
          } else if (const auto* r = std::get_if<recap::ToolResult>(&p)) {
            mix(r->call_id);
            for (const auto& item : r->content) {
              if (const auto* t = std::get_if<recap::Text>(&item))
                mix(t->text);
              else
                mix(std::get<recap::Opaque>(item).payload);
            }
          } else {
            mix(std::get<recap::Opaque>(p).payload);
            mix(std::get<recap::Opaque>(p).link_id);
          }
        }
      }
      digests.push_back(h);
    }
    std::cerr << "[property] generator digests: " << digests[0] << " " << digests[1] << " "
              << digests[2] << "\n";
    CHECK(digests == std::vector<std::uint64_t>{9499220361675839820ULL, 18140695943905029972ULL,
                                                18289843842132201674ULL});
  }
  std::map<std::string, int> seen;
  for (std::uint64_t seed = 0; seed < 600; ++seed) {
    o.exceed_caps = seed % 3 == 0;
    const Transcript t = GenerateTranscript(seed, o);
    const RefPairing p = RefPair(t);
    if (!p.Uncertain().empty()) ++seen["uncertain"];
    if (!p.orphans.empty()) ++seen["orphan"];
    if (!t.empty() && !RefIsTurnStart(t[0]) && t[0].role == recap::Role::kTool)
      ++seen["leading orphan"];
    if (RefTurnStarts(t).empty()) ++seen["no turns"];
    for (const auto& m : t) {
      if (m.summary) ++seen["summary"];
      if (m.role == recap::Role::kSystem) ++seen["system"];
      std::size_t calls = 0, results = 0, texts = 0;
      bool server_call = false, server_result = false;
      for (const auto& part : m.parts) {
        if (const auto* c = std::get_if<recap::ToolCall>(&part)) {
          ++calls;
          if (!nlohmann::json::accept(c->arguments)) ++seen["invalid json"];
          if (RefCountCodePoints(c->arguments) > 16000) ++seen["arguments over cap"];
        } else if (const auto* r = std::get_if<recap::ToolResult>(&part)) {
          ++results;
          if (r->content.size() > 1) ++seen["multi-item result"];
          for (const auto& item : r->content) {
            if (std::holds_alternative<recap::Opaque>(item))
              ++seen["opaque in result"];
            else if (RefCountCodePoints(std::get<recap::Text>(item).text) > 8000)
              ++seen["result over cap"];
          }
        } else if (const auto* x = std::get_if<recap::Text>(&part)) {
          ++texts;
          if (x->text.empty()) ++seen["empty text"];
          if (x->text.find("\xF0") != std::string::npos) ++seen["4-byte"];
          if (x->text.find("😀😀") != std::string::npos || x->text.find("😀𝄞") != std::string::npos ||
              x->text.find("𝄞😀") != std::string::npos)
            ++seen["dense 4-byte"];
          if (RefCountCodePoints(x->text) > 16000) ++seen["text over cap"];
          if (RefCountCodePoints(x->text) >= 100000) ++seen["huge"];
        } else {
          const auto& op = std::get<recap::Opaque>(part);
          if (op.kind == "thinking") ++seen["thinking"];
          if (op.kind == "image") ++seen["image"];
          if (op.link == recap::OpaqueLink::kCall) server_call = true;
          if (op.link == recap::OpaqueLink::kResult) server_result = true;
        }
      }
      if (calls >= 2) ++seen["parallel calls"];
      if (results >= 2 && m.role == recap::Role::kUser) ++seen["anthropic results"];
      if (results >= 1 && texts >= 1 && m.role == recap::Role::kUser) ++seen["results with text"];
      if (server_call && server_result) ++seen["server pair in one message"];
      if (server_call != server_result) ++seen["server pair split"];
    }
  }
  for (const char* shape : {"uncertain",
                            "orphan",
                            "leading orphan",
                            "no turns",
                            "summary",
                            "system",
                            "invalid json",
                            "arguments over cap",
                            "multi-item result",
                            "opaque in result",
                            "result over cap",
                            "empty text",
                            "4-byte",
                            "dense 4-byte",
                            "text over cap",
                            "huge",
                            "thinking",
                            "image",
                            "parallel calls",
                            "anthropic results",
                            "results with text",
                            "server pair in one message",
                            "server pair split"}) {
    INFO(shape);
    CHECK(seen[shape] > 0);
  }
}

}  // namespace

// Found by the R6 property run (RECAP_SEED=4431825130427586847): indented arguments whose
// string values are all short (written with \u escapes) are 1,040 code points, over the last
// round's cap of 1,024, yet no string can be clipped, so the reducer leaves them as they are
// (tail_reducer.h). The invariant used to count such arguments as shrinkable by their compact
// rendering and reported "round 5 completed but ... still has 1040 code points".
TEST_CASE(
    "R6.2 R6.3 arguments whose strings are all too short to clip stay as written, over the cap",
    "[property][R6.2]") {
  // Laid out as dump(2) would, but every string written with \u escapes: 6 characters of
  // text for each character of value.
  std::string args = "{\n";
  for (int i = 0; args.size() < 1100; ++i) {
    args += "  \"k" + std::to_string(i) + "\": \"\\u0041\\u0042\\u0043\\u0044\\u0045\",\n";
  }
  args += "  \"n\": 5e3\n}";
  REQUIRE(nlohmann::json::accept(args));
  REQUIRE(recap::CountCodePoints(args) > 1024);
  std::vector<Message> ms;
  ms.push_back(UserText(Ascii(30000), "m0"));
  Message call = Message::AssistantCalls({recap::ToolCall{"c1", "search", args, ""}}, "");
  call.id = "m1";
  ms.push_back(call);
  ms.push_back(ToolText(Ascii(20000, 'r'), "c1", "m2"));
  const Transcript t(ms);
  Failures f;
  recap::ReduceResult r = recap::ReduceTail(t, 0);  // every round, to the smallest caps
  CheckReduce(t, 0, r, f);
  CHECK(r.rounds == 5);
  CHECK(std::get<recap::ToolCall>(r.transcript[1].parts[0]).arguments == args);
  CHECK(f.empty());
  if (!f.empty()) FAIL_CHECK(f.str());
}
