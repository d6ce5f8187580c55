// A consumer of an installed (or add_subdirectory'd) recap: builds a small transcript, asks
// where a compaction would cut, reduces it to a target and round-trips it through a codec.
// Exits non-zero with a line per failed check, so the package tests fail on wrong results,
// not only on link errors.
#include <cstdio>
#include <set>
#include <string>
#include <vector>

#include "recap/recap.h"

namespace {

int failures = 0;

void Check(bool ok, const char* what, int line) {
  if (!ok) {
    std::fprintf(stderr, "consumer: check failed (line %d): %s\n", line, what);
    ++failures;
  }
}
#define CHECK(cond) Check((cond), #cond, __LINE__)

recap::ToolCall Call(std::string id, std::string name, std::string arguments) {
  recap::ToolCall call;
  call.id = std::move(id);
  call.name = std::move(name);
  call.arguments = std::move(arguments);
  return call;
}

// Three turns; the first has a large tool output, the last parallel tool calls.
recap::Transcript MakeTranscript() {
  using recap::Message;
  recap::Transcript t;
  t.Append(Message::UserText("Find the bug in parser.cc"));  // 0 turn 1
  t.Append(Message::AssistantCalls({Call("call_1", "read_file", R"({"path":"parser.cc"})")}));
  t.Append(Message::ToolOutput("call_1", std::string(20000, 'x')));  // 2
  t.Append(Message::AssistantText("The loop in Parse() reads one byte past the end."));
  t.Append(Message::UserText("Fix it"));  // 4 turn 2
  t.Append(Message::AssistantCalls({Call("call_2", "edit", R"({"path":"parser.cc"})")}));
  t.Append(Message::ToolOutput("call_2", "ok"));
  t.Append(Message::AssistantText("Fixed."));
  t.Append(Message::UserText("Now run the tests"));  // 8 turn 3
  t.Append(Message::AssistantCalls(
      {Call("call_3", "run_tests", "{}"), Call("call_4", "lint", "{}")}, "Running both."));
  t.Append(Message::ToolOutput("call_3", "42 passed"));
  t.Append(Message::ToolOutput("call_4", "clean"));
  t.Append(Message::AssistantText("All green."));  // 12
  return t;
}

void CheckTranscript(const recap::Transcript& t) {
  CHECK(t.size() == 13);
  std::size_t sum = 0;
  std::set<std::string> ids;
  for (std::size_t i = 0; i < t.size(); ++i) {
    CHECK(t.chars(i) == recap::MessageChars(t[i]));
    sum += t.chars(i);
    ids.insert(t[i].id);
    CHECK(!t[i].id.empty());
  }
  CHECK(ids.size() == t.size());
  CHECK(t.chars() == sum);
  CHECK(t.chars() > 20000);
  CHECK(t.tokens() == recap::EstimateTokens(t.chars()));
  CHECK(recap::FindTurnStarts(t) == (std::vector<std::size_t>{0, 4, 8}));
  const recap::PairingReport pairing = recap::AnalyzePairing(t);
  CHECK(pairing.pairs == 4);
  CHECK(pairing.uncertain.empty());
  CHECK(pairing.orphans.empty());
}

void CheckCut(const recap::Transcript& t) {
  recap::CutOptions options;
  options.keep_turns = 2;
  const recap::CutDecision cut = recap::FindCut(t, options);
  CHECK(cut.ok());
  CHECK(cut.position == 4);  // the start of the second-last turn (R3.1)
  CHECK(cut.summarized_chars == t.chars(0, 4));
  CHECK(cut.kept_chars == t.chars(4, t.size()));
  CHECK(cut.kept_turns == 2);
  CHECK(!cut.inside_turn);

  // A call without a result blocks compaction (R3.7).
  recap::Transcript pending = t;
  pending.Append(recap::Message::UserText("And deploy"));
  pending.Append(recap::Message::AssistantCalls({Call("call_5", "deploy", "{}")}));
  const recap::CutDecision blocked = recap::FindCut(pending, options);
  CHECK(!blocked.ok());
  CHECK(blocked.skip == recap::SkipReason::kUncertainToolResults);
  CHECK(blocked.uncertain.size() == 1);
  CHECK(!blocked.uncertain.empty() && blocked.uncertain[0].call_id == "call_5");
  CHECK(std::string(recap::SkipReasonName(blocked.skip)) == "uncertain_tool_results");
}

std::string ResultText(const recap::Message& m) {
  for (const recap::Part& part : m.parts) {
    if (const auto* result = std::get_if<recap::ToolResult>(&part)) {
      for (const recap::ResultItem& item : result->content) {
        if (const auto* text = std::get_if<recap::Text>(&item)) return text->text;
      }
    }
  }
  return {};
}

void CheckReduce(const recap::Transcript& t) {
  CHECK(recap::ReductionTarget(800000, 1000) == 799000);
  CHECK(recap::ReductionTarget(5000, 4500) == recap::kMinReductionTarget);

  const std::size_t target = 6000;
  const recap::ReduceResult reduced = recap::ReduceTail(t, target);
  CHECK(reduced.fits);
  CHECK(reduced.before_chars == t.chars());
  CHECK(reduced.after_chars == reduced.transcript.chars());
  CHECK(reduced.after_chars <= target);
  CHECK(reduced.clipped == std::vector<std::size_t>{2});
  CHECK(reduced.rounds >= 1);
  CHECK(reduced.transcript.size() == t.size());
  for (std::size_t i = 0; i < t.size() && i < reduced.transcript.size(); ++i) {
    CHECK(reduced.transcript[i].id == t[i].id);
    CHECK(reduced.transcript[i].role == t[i].role);
  }
  if (reduced.transcript.size() > 2) {
    const std::string clipped = ResultText(reduced.transcript[2]);
    const std::string marker(recap::kTruncationMarker);
    CHECK(clipped.size() > marker.size());
    CHECK(clipped.compare(clipped.size() - marker.size(), marker.size(), marker) == 0);
    CHECK(recap::CountCodePoints(clipped) <= recap::kToolResultCaps[1]);  // round 2 made it fit
    CHECK(recap::IsValidUtf8(clipped));
  }

  // Already within the target: nothing happens.
  const recap::ReduceResult untouched = recap::ReduceTail(t, t.chars());
  CHECK(untouched.fits);
  CHECK(untouched.rounds == 0);
  CHECK(untouched.clipped.empty());
  CHECK(untouched.after_chars == t.chars());
}

void CheckCodec() {
  const char* openai = R"([
    {"role": "system", "content": "You are a careful engineer."},
    {"role": "user", "content": "List the files"},
    {"role": "assistant", "content": null,
     "tool_calls": [{"id": "call_9", "type": "function",
                     "function": {"name": "ls", "arguments": "{\"dir\":\".\"}"}}]},
    {"role": "tool", "tool_call_id": "call_9", "content": "a.cc\nb.cc \u00e9\u4e2d\ud83d\ude00"},
    {"role": "assistant", "content": "Two files."}
  ])";
  const recap::Result<recap::Conversation> decoded = recap::openai_chat::DecodeMessages(openai);
  CHECK(decoded.ok());
  if (!decoded.ok()) {
    std::fprintf(stderr, "consumer: decode failed: %s\n", decoded.status().ToString().c_str());
    return;
  }
  CHECK(decoded->instructions.has_value());
  CHECK(decoded->messages.size() == 4);
  if (decoded->messages.size() != 4) return;
  CHECK(decoded->messages[0].role == recap::Role::kUser);
  CHECK(recap::IsTurnStart(decoded->messages[0]));
  CHECK(recap::HasToolCalls(decoded->messages[1]));
  CHECK(decoded->messages[2].role == recap::Role::kTool);
  CHECK(ResultText(decoded->messages[2]) == "a.cc\nb.cc \xC3\xA9\xE4\xB8\xAD\xF0\x9F\x98\x80");

  // Encoding is deterministic, and decode(encode(x)) encodes to the same text.
  const recap::Result<std::string> encoded = recap::openai_chat::EncodeMessages(*decoded);
  CHECK(encoded.ok());
  if (!encoded.ok()) return;
  const recap::Result<recap::Conversation> again = recap::openai_chat::DecodeMessages(*encoded);
  CHECK(again.ok());
  if (!again.ok()) return;
  const recap::Result<std::string> encoded_again = recap::openai_chat::EncodeMessages(*again);
  CHECK(encoded_again.ok() && *encoded_again == *encoded);

  // The same conversation through recap's own form.
  const recap::Result<std::string> native = recap::native::EncodeMessages(*decoded);
  CHECK(native.ok());
  if (!native.ok()) return;
  const recap::Result<recap::Conversation> from_native = recap::native::DecodeMessages(*native);
  CHECK(from_native.ok());
  if (!from_native.ok()) return;
  const recap::Result<std::string> via_native = recap::openai_chat::EncodeMessages(*from_native);
  CHECK(via_native.ok() && *via_native == *encoded);

  // Bad input is a Status, not a crash.
  const recap::Result<recap::Conversation> bad = recap::openai_chat::DecodeMessages("[{\"role\":");
  CHECK(!bad.ok());
  CHECK(bad.status().code() == recap::StatusCode::kInvalidArgument);
  CHECK(!bad.status().message().empty());
}

}  // namespace

int main() {
  CHECK(std::string(recap::Version()) == RECAP_VERSION_STRING);
  const recap::Transcript t = MakeTranscript();
  CheckTranscript(t);
  CheckCut(t);
  CheckReduce(t);
  CheckCodec();
  if (failures != 0) {
    std::fprintf(stderr, "consumer: %d check(s) failed\n", failures);
    return 1;
  }
  std::printf("consumer: recap %s OK (%zu messages, %zu characters)\n", recap::Version(), t.size(),
              t.chars());
  return 0;
}
