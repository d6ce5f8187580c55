// SPEC R3: where a compaction cuts. Each case builds a small transcript by hand; the property
// tests (test_properties.cc) cover the invariants over generated ones.
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include "recap/safe_boundary.h"

using namespace recap;

namespace {

// A compact notation for building transcripts in these tests.
Message U(const std::string& text) { return Message::UserText(text); }
Message A(const std::string& text) { return Message::AssistantText(text); }
Message Calls(std::vector<std::string> ids) {
  std::vector<ToolCall> calls;
  for (auto& id : ids) calls.push_back(ToolCall{id, "tool_" + id, R"({"arg":1})", {}});
  return Message::AssistantCalls(std::move(calls));
}
Message T(const std::string& id, const std::string& out = "result") {
  return Message::ToolOutput(id, out);
}
// An Anthropic-style user message answering several calls at once.
Message Results(std::vector<std::string> ids, const std::string& text = {}) {
  Message m;
  m.role = Role::kUser;
  for (auto& id : ids) {
    ToolResult r;
    r.call_id = id;
    r.content.emplace_back(Text{"out " + id, {}});
    m.parts.emplace_back(std::move(r));
  }
  if (!text.empty()) m.parts.emplace_back(Text{text, {}});
  return m;
}
Message Checkpoint() {
  Message m = Message::UserText("## Goal\nearlier work");
  m.summary = true;
  return m;
}
Transcript Make(std::vector<Message> ms) { return Transcript(std::move(ms)); }
CutOptions Keep(int k, CutMode mode = CutMode::kNormal, std::size_t limit = 0) {
  CutOptions o;
  o.keep_turns = k;
  o.mode = mode;
  o.kept_chars_limit = limit;
  return o;
}

}  // namespace

TEST_CASE("§1 turn starts: a person's text or image, not tool results, not checkpoints") {
  CHECK(IsTurnStart(U("hi")));
  CHECK_FALSE(IsTurnStart(A("hi")));
  CHECK_FALSE(IsTurnStart(T("c1")));
  CHECK_FALSE(IsTurnStart(Results({"c1", "c2"})));
  CHECK(IsTurnStart(Results({"c1"}, "also, please hurry")));  // text a person wrote
  CHECK_FALSE(IsTurnStart(Checkpoint()));
  Message image;
  image.role = Role::kUser;
  image.parts.emplace_back(Opaque{"image", R"({"type":"image"})", OpaqueLink::kNone, {}});
  CHECK(IsTurnStart(image));
  auto t = Make({U("a"), A("b"), Calls({"c"}), T("c"), U("d"), Results({"x"})});
  CHECK(FindTurnStarts(t) == std::vector<std::size_t>{0, 4});
}

TEST_CASE("§1 safe boundaries: a call and its result are never on different sides") {
  //            0       1               2        3        4
  auto t = Make({U("q"), Calls({"a", "b"}), T("b"), T("a"), A("done")});
  auto safe = FindSafeBoundaries(t);
  CHECK(safe == std::vector<std::uint8_t>{1, 1, 0, 0, 1, 1});
  auto report = AnalyzePairing(t);
  CHECK(report.pairs == 2);
  CHECK(report.uncertain.empty());
  CHECK(report.orphans.empty());
}

TEST_CASE("R3.1 the last keepTurns turns are kept verbatim") {
  //             0        1       2        3       4        5       6        7
  auto t = Make({U("1"), A("1"), U("2"), A("2"), U("3"), A("3"), U("4"), A("4")});
  auto d = FindCut(t, Keep(2));
  REQUIRE(d.ok());
  CHECK(d.position == 4);
  CHECK(d.kept_turns == 2);
  CHECK(d.summarized_chars == t.chars(0, 4));
  CHECK(d.kept_chars == t.chars(4, 8));
  CHECK_FALSE(d.inside_turn);
  CHECK(FindCut(t, Keep(3)).position == 2);
  CHECK(FindCut(t, Keep(1)).position == 6);
}

TEST_CASE("R3.2 with keepTurns turns or fewer, the last turn alone is kept") {
  auto t = Make({U("1"), A("1"), U("2"), Calls({"c"}), T("c"), A("2")});
  auto d = FindCut(t, Keep(2));
  REQUIRE(d.ok());
  CHECK(d.position == 2);
  CHECK(d.kept_turns == 1);
  CHECK(FindCut(t, Keep(20)).position == 2);
}

TEST_CASE("R3.3 one long turn: the cut falls before the newest tool-call round") {
  //             0        1             2        3             4        5             6
  auto t = Make({U("go"), Calls({"a"}), T("a"), Calls({"b"}), T("b"), Calls({"c"}), T("c")});
  auto d = FindCut(t, Keep(2));
  REQUIRE(d.ok());
  CHECK(d.position == 5);
  CHECK(d.inside_turn);
  CHECK(d.kept_turns == 0);

  SECTION("keepTurns 0 cuts inside the last turn even when there are several turns") {
    auto t2 = Make({U("1"), A("1"), U("2"), Calls({"a"}), T("a"), Calls({"b"}), T("b")});
    auto d2 = FindCut(t2, Keep(0));
    REQUIRE(d2.ok());
    CHECK(d2.position == 5);
  }
  SECTION("budget mode cuts inside the last turn whatever keepTurns says") {
    auto t2 = Make({U("1"), A("1"), U("2"), Calls({"a"}), T("a"), A("answer")});
    auto d2 = FindCut(t2, Keep(5, CutMode::kBudget));
    REQUIRE(d2.ok());
    CHECK(d2.position == 3);  // the newest round and the answer after it are kept
  }
  SECTION("a last turn without a tool-call round is kept whole") {
    auto t2 = Make({U("1"), A("1"), U("2"), A("2")});
    auto d2 = FindCut(t2, Keep(0));
    REQUIRE(d2.ok());
    CHECK(d2.position == 2);
  }
  SECTION("a last turn with no inner boundary is kept whole") {
    auto t2 = Make({U("1"), A("1"), U("2")});
    auto d2 = FindCut(t2, Keep(0));
    REQUIRE(d2.ok());
    CHECK(d2.position == 2);
    CHECK_FALSE(d2.inside_turn);
  }
  SECTION("Anthropic-style results inside one turn") {
    auto t2 = Make({U("go"), Calls({"a", "b"}), Results({"b", "a"}), Calls({"c"}), Results({"c"})});
    CHECK(FindCut(t2, Keep(1)).position == 3);
  }
}

TEST_CASE("R3.4 a turn start that would split a pair moves the cut to an earlier safe boundary") {
  // The user typed while a tool was running: the result arrives after the new turn starts.
  //             0        1              2        3        4        5
  auto t = Make({U("1"), Calls({"slow"}), U("2"), T("slow"), A("2"), U("3")});
  auto d = FindCut(t, Keep(2));  // the 2nd-last turn starts at 2, which is inside the pair
  REQUIRE(d.ok());
  CHECK(d.position == 1);
  auto safe = FindSafeBoundaries(t);
  CHECK(safe[d.position]);
}

TEST_CASE("R3.4 the kept part is an exact suffix and the input is untouched") {
  auto t = Make({U("1"), Calls({"a"}), T("a"), U("2"), A("2"), U("3"), A("3")});
  const std::string id3 = t[3].id;
  auto d = FindCut(t, Keep(2));
  REQUIRE(d.ok());
  CHECK(d.position == 3);
  CHECK(t[3].id == id3);
  CHECK(d.kept_chars + d.summarized_chars == t.chars());
}

TEST_CASE("R3.6 nothing to summarize") {
  CHECK(FindCut(Transcript(), Keep(2)).skip == SkipReason::kNothingToSummarize);
  CHECK(FindCut(Make({U("only")}), Keep(2)).skip == SkipReason::kNothingToSummarize);
  // A previous checkpoint alone is not worth summarizing again.
  CHECK(FindCut(Make({Checkpoint(), U("next")}), Keep(2)).skip == SkipReason::kNothingToSummarize);
  CHECK(FindCut(Make({Checkpoint(), U("next")}), Keep(0, CutMode::kBudget)).skip ==
        SkipReason::kNothingToSummarize);
  CHECK(std::string(SkipReasonName(SkipReason::kNothingToSummarize)) == "nothing_to_summarize");
}

TEST_CASE("R3.6 no safe boundary") {
  // The only call spans every position: its result is the last message.
  auto t = Make({Calls({"a"}), U("while waiting"), A("thinking"), T("a")});
  auto d = FindCut(t, Keep(1));
  CHECK(d.skip == SkipReason::kNoSafeBoundary);
  CHECK(std::string(SkipReasonName(d.skip)) == "no_safe_boundary");
}

TEST_CASE("R3.5 a checkpoint at the start is summarized with the rest, never kept beside it") {
  auto t = Make({Checkpoint(), U("1"), A("1"), U("2"), A("2"), U("3"), A("3")});
  auto d = FindCut(t, Keep(2));
  REQUIRE(d.ok());
  CHECK(d.position == 3);
  for (std::size_t i = d.position; i < t.size(); ++i) CHECK_FALSE(t[i].summary);
}

TEST_CASE("R3.7 a tool call without a result blocks compaction and is listed") {
  auto t = Make({U("1"), Calls({"done", "lost"}), T("done"), U("2"), A("2"), U("3")});
  auto d = FindCut(t, Keep(1));
  CHECK(d.skip == SkipReason::kUncertainToolResults);
  REQUIRE(d.uncertain.size() == 1);
  CHECK(d.uncertain[0].call_id == "lost");
  CHECK(d.uncertain[0].name == "tool_lost");
  CHECK(d.uncertain[0].message == 1);
  CHECK(FindUncertainToolCalls(t).size() == 1);
  // No position after the uncertain call is safe.
  auto safe = FindSafeBoundaries(t);
  for (std::size_t p = 2; p <= t.size(); ++p) CHECK_FALSE(safe[p]);
}

TEST_CASE("R3.7 a reused call id answers the newest call, the older unanswered one is uncertain") {
  auto t = Make({U("1"), Calls({"x"}), Calls({"x"}), T("x"), U("2")});
  auto report = AnalyzePairing(t);
  REQUIRE(report.uncertain.size() == 1);
  CHECK(report.uncertain[0].message == 1);
  CHECK(report.pairs == 1);
}

TEST_CASE("R3.8 the cut moves forward until the kept part is below the limit") {
  const std::string big(1000, 'x');
  //             0        1        2        3        4        5       6        7
  auto t = Make({U("1"), A("1"), U("2"), A(big), U("3"), A(big), U("4"), A("4")});
  SECTION("fewer kept turns first") {
    auto d = FindCut(t, Keep(3, CutMode::kNormal, 1500));
    REQUIRE(d.ok());
    CHECK(d.position == 4);  // keeping turns 3-4 is 1000 + 4 chars < 1500
    CHECK(d.moved_for_size);
    CHECK(d.kept_chars < 1500);
  }
  SECTION("then inside the last turn") {
    auto t2 = Make({U("1"), A("1"), U("2"), Calls({"a"}), T("a", big), Calls({"b"}), T("b", big)});
    auto d = FindCut(t2, Keep(2, CutMode::kNormal, 1200));
    REQUIRE(d.ok());
    CHECK(d.position == 5);
    CHECK(d.inside_turn);
  }
  SECTION("as far as possible when nothing gets below it") {
    auto d = FindCut(t, Keep(2, CutMode::kNormal, 1));
    REQUIRE(d.ok());
    CHECK(d.position == 7);  // the last safe boundary before the last message
    CHECK(d.moved_for_size);
  }
  SECTION("a limit already met changes nothing") {
    auto d = FindCut(t, Keep(2, CutMode::kNormal, 100000));
    CHECK(d.position == 4);
    CHECK_FALSE(d.moved_for_size);
  }
}

TEST_CASE("R3.9 an orphan result is a plain message, parallel calls stay with all results") {
  //             0                1        2                   3        4        5       6
  auto t = Make({T("ghost"), U("1"), Calls({"a", "b", "c"}), T("c"), T("a"), T("b"), U("2")});
  auto report = AnalyzePairing(t);
  REQUIRE(report.orphans.size() == 1);
  CHECK(report.orphans[0].call_id == "ghost");
  CHECK(report.pairs == 3);
  auto safe = FindSafeBoundaries(t);
  CHECK(safe == std::vector<std::uint8_t>{1, 1, 1, 0, 0, 0, 1, 1});
  auto d = FindCut(t, Keep(1));
  REQUIRE(d.ok());
  CHECK(d.position == 6);
}

TEST_CASE("R3.9 linked opaque items (server tools) pair like tool calls") {
  Message use;
  use.role = Role::kAssistant;
  use.parts.emplace_back(Opaque{"server_tool_use", R"({"id":"s1"})", OpaqueLink::kCall, "s1"});
  Message res;
  res.role = Role::kAssistant;
  res.parts.emplace_back(Opaque{"web_search_tool_result", R"({})", OpaqueLink::kResult, "s1"});
  auto t = Make({U("1"), use, A("between"), res, U("2")});
  auto safe = FindSafeBoundaries(t);
  CHECK(safe == std::vector<std::uint8_t>{1, 1, 0, 0, 1, 1});
  // Unanswered, it is uncertain like any call.
  auto t2 = Make({U("1"), use, U("2")});
  CHECK(FindCut(t2, Keep(1)).skip == SkipReason::kUncertainToolResults);
}

TEST_CASE("R11.4 FindCut decides as the full scan whatever the transcript's pairing state") {
  Message use;
  use.role = Role::kAssistant;
  use.parts.emplace_back(Opaque{"server_tool_use", R"({})", OpaqueLink::kCall, "s1"});
  Message res;
  res.role = Role::kAssistant;
  res.parts.emplace_back(Opaque{"web_search_tool_result", R"({})", OpaqueLink::kResult, "s1"});
  const std::string big(1000, 'x');
  // A call answered within its message, then called again as an opaque item: that one is open.
  Message reopened = Calls({"x"});
  reopened.parts.emplace_back(ToolResult{"x", {Text{"out", {}}}, false, {}, {}});
  reopened.parts.emplace_back(Opaque{"server_tool_use", R"({})", OpaqueLink::kCall, "x"});
  const std::vector<std::pair<Transcript, Transcript::Pairing>> cases = {
      {Make({U("1"), A("1"), U("2"), A("2"), U("3"), A("3"), U("4"), A("4")}),
       Transcript::Pairing::kClosed},
      {Make({U("go"), Calls({"a"}), T("a"), Calls({"b"}), T("b"), Calls({"c"}), T("c")}),
       Transcript::Pairing::kClosed},
      {Make({U("1"), Calls({"slow"}), U("2"), T("slow"), A("2"), U("3")}),
       Transcript::Pairing::kClosed},
      {Make({Calls({"a"}), U("while waiting"), A("thinking"), T("a")}),
       Transcript::Pairing::kClosed},
      {Make({Checkpoint(), U("1"), A("1"), U("2"), A("2"), U("3"), A("3")}),
       Transcript::Pairing::kClosed},
      {Make({Checkpoint(), Checkpoint(), U("next")}), Transcript::Pairing::kClosed},
      {Make({U("go"), Calls({"a", "b"}), Results({"b", "a"}), Calls({"c"}), Results({"c"})}),
       Transcript::Pairing::kClosed},
      {Make({U("1"), A("1"), U("2"), Calls({"a"}), T("a", big), Calls({"b"}), T("b", big)}),
       Transcript::Pairing::kClosed},
      {Make({U("1"), use, A("between"), res, U("2")}), Transcript::Pairing::kClosed},
      {Make({A("no turns"), Calls({"a"}), T("a"), A("still none")}), Transcript::Pairing::kClosed},
      {Make({U("1"), Calls({"done", "lost"}), T("done"), U("2"), A("2"), U("3")}),
       Transcript::Pairing::kOpen},
      {Make({U("1"), Calls({"x"}), Calls({"x"}), T("x"), U("2")}), Transcript::Pairing::kUnknown},
      {Make({T("ghost"), U("1"), Calls({"a", "b", "c"}), T("c"), T("a"), T("b"), U("2")}),
       Transcript::Pairing::kUnknown},
      {Make({U("1"), Calls({"a"}), T("a"), U("2"), T("a"), U("3"), A("3")}),
       Transcript::Pairing::kUnknown},
      {Make({U("1"), Calls({"b", "a"}), T("a"), A("2")}), Transcript::Pairing::kOpen},
      {Make({U("1"), reopened, A("2")}), Transcript::Pairing::kOpen},
  };
  for (std::size_t c = 0; c < cases.size(); ++c) {
    const Transcript& t = cases[c].first;
    CHECK(t.pairing() == cases[c].second);
    for (int k = -1; k <= 5; ++k) {
      for (CutMode mode : {CutMode::kNormal, CutMode::kBudget}) {
        for (std::size_t limit : {std::size_t{0}, std::size_t{1}, std::size_t{10},
                                  std::size_t{1200}, t.chars() / 2, t.chars()}) {
          const CutOptions o = Keep(k, mode, limit);
          const CutDecision got = FindCut(t, o);
          const CutDecision want = FindCutReference(t, o);
          CAPTURE(c, k, static_cast<int>(mode), limit);
          CHECK(got.skip == want.skip);
          CHECK(got.position == want.position);
          CHECK(got.summarized_chars == want.summarized_chars);
          CHECK(got.kept_chars == want.kept_chars);
          CHECK(got.kept_turns == want.kept_turns);
          CHECK(got.inside_turn == want.inside_turn);
          CHECK(got.moved_for_size == want.moved_for_size);
          REQUIRE(got.uncertain.size() == want.uncertain.size());
          for (std::size_t u = 0; u < got.uncertain.size(); ++u) {
            CHECK(got.uncertain[u].message == want.uncertain[u].message);
            CHECK(got.uncertain[u].call_id == want.uncertain[u].call_id);
            CHECK(got.uncertain[u].name == want.uncertain[u].name);
          }
        }
      }
    }
  }
}

TEST_CASE("R11.4 a long session: the cut near the end, over many chunks") {
  // 40 chunks of turns with tool rounds; the second-last turn starts where the cut must be.
  Transcript t;
  int call = 0;
  while (t.size() < 40 * Transcript::kChunk) {
    t.Append(U("question"));
    for (int r = 0; r < 3; ++r) {
      const std::string a = "c" + std::to_string(call++), b = "c" + std::to_string(call++);
      t.Append(Calls({a, b}));
      t.Append(Results({b, a}));
    }
    t.Append(A("answer"));
  }
  REQUIRE(t.pairing() == Transcript::Pairing::kClosed);
  const std::size_t n = t.size();
  const CutDecision d = FindCut(t, Keep(2));
  REQUIRE(d.ok());
  CHECK(d.position == n - 16);
  CHECK(d.kept_turns == 2);
  CHECK(d.position == FindCutReference(t, Keep(2)).position);
  const CutDecision far = FindCut(t, Keep(2, CutMode::kNormal, 1));  // R3.8 all the way
  CHECK(far.position == FindCutReference(t, Keep(2, CutMode::kNormal, 1)).position);
  CHECK(far.position == n - 1);
}
