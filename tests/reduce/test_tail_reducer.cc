// SPEC R6: the hard limit and the tiered tail reducer.
#include <string>

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include "recap/measure.h"
#include "recap/tail_reducer.h"

using namespace recap;

namespace {

std::size_t Count(const std::string& haystack, std::string_view needle) {
  std::size_t n = 0;
  for (auto p = haystack.find(needle); p != std::string::npos; p = haystack.find(needle, p + 1))
    ++n;
  return n;
}
bool EndsWithMarker(const std::string& s) {
  return s.size() >= kTruncationMarker.size() &&
         s.compare(s.size() - kTruncationMarker.size(), kTruncationMarker.size(),
                   kTruncationMarker) == 0;
}
const std::string& ResultText(const Message& m) {
  return std::get<Text>(std::get<ToolResult>(m.parts.at(0)).content.at(0)).text;
}
const std::string& FirstText(const Message& m) { return std::get<Text>(m.parts.at(0)).text; }

}  // namespace

TEST_CASE("R6.1 the target is the limit less the instructions, at least 4000") {
  CHECK(ReductionTarget(800000, 10000) == 790000);
  CHECK(ReductionTarget(10000, 9000) == 4000);
  CHECK(ReductionTarget(10000, 20000) == 4000);  // instructions alone exceed the limit
  CHECK(ReductionTarget(4000, 0) == 4000);
}

TEST_CASE("R6.3 the marker is the documented text and 31 characters") {
  CHECK(kTruncationMarker == "\xE2\x80\xA6 [truncated by context budget]");
  CHECK(CountCodePoints(kTruncationMarker) == 31);
}

TEST_CASE("R6.3 ClipText keeps the beginning, ends with the marker, stays within the cap") {
  const std::string text(100, 'a');
  CHECK(ClipText(text, 100) == text);
  const std::string clipped = ClipText(text, 50);
  CHECK(CountCodePoints(clipped) == 50);
  CHECK(EndsWithMarker(clipped));
  CHECK(clipped.substr(0, 19) == std::string(19, 'a'));
  // Caps smaller than the marker give the marker cut down, never broken UTF-8.
  CHECK(CountCodePoints(ClipText(text, 3)) == 3);
  CHECK(IsValidUtf8(ClipText(text, 1)));
}

TEST_CASE("R6.3 clipping never splits a UTF-8 sequence") {
  std::string emoji;
  for (int i = 0; i < 100; ++i) emoji += "\xF0\x9F\x98\x80";  // 100 x 4-byte
  for (std::size_t cap = 0; cap < 110; ++cap) {
    const std::string c = ClipText(emoji, cap);
    INFO("cap " << cap);
    CHECK(IsValidUtf8(c));
    CHECK(CountCodePoints(c) <= std::max<std::size_t>(cap, 0));
  }
}

TEST_CASE("R6.4 clipping is idempotent and the marker never appears twice") {
  const std::string text(10000, 'z');
  const std::string once = ClipText(text, 8000);
  CHECK(ClipText(once, 8000) == once);
  const std::string twice = ClipText(once, 4096);
  CHECK(Count(twice, kTruncationMarker) == 1);
  CHECK(CountCodePoints(twice) == 4096);
}

TEST_CASE("R6.3 tool-call arguments stay valid JSON: string values are clipped, not the text") {
  nlohmann::json args = {{"path", "/src/main.cc"},
                         {"content", std::string(20000, 'c')},
                         {"options", {{"mode", "w"}, {"lines", {1, 2, 3}}}},
                         {"note", std::string(3000, 'n')}};
  const std::string text = args.dump();
  const std::string clipped = ClipArguments(text, 4096);
  CHECK(CountCodePoints(clipped) <= 4096);
  auto parsed = nlohmann::json::parse(clipped);
  CHECK(parsed["path"] == "/src/main.cc");
  CHECK(parsed["options"] == args["options"]);
  const std::string content = parsed["content"];
  CHECK(EndsWithMarker(content));
  CHECK(content.substr(0, 100) == std::string(100, 'c'));
  CHECK(ClipArguments(clipped, 4096) == clipped);  // idempotent
  // Within the cap: untouched, byte for byte, whatever its formatting.
  CHECK(ClipArguments(R"({ "a" :  1 })", 100) == R"({ "a" :  1 })");
  // Not JSON: clipped as plain text.
  const std::string broken = "{\"unterminated\": \"" + std::string(5000, 'x');
  const std::string b = ClipArguments(broken, 1024);
  CHECK(CountCodePoints(b) == 1024);
  CHECK(EndsWithMarker(b));
}

TEST_CASE("R6.2 a transcript within the target is returned unchanged") {
  Transcript t;
  t.Append(Message::UserText("small"));
  auto r = ReduceTail(t, 4000);
  CHECK(r.fits);
  CHECK(r.rounds == 0);
  CHECK(r.clipped.empty());
  CHECK(r.transcript.shared(0).get() == t.shared(0).get());
}

TEST_CASE("R6.2 largest first, ties by position, stop the moment it fits") {
  Transcript t;
  t.Append(Message::UserText("go"));
  t.Append(Message::ToolOutput("a", std::string(9000, 'a')));   // 1
  t.Append(Message::ToolOutput("b", std::string(12000, 'b')));  // 2: largest
  t.Append(Message::ToolOutput("c", std::string(9000, 'c')));   // 3: ties with 1
  const std::size_t before = t.chars();
  SECTION("one clip is enough: only the largest is cut") {
    const std::size_t target = before - 3000;  // clipping b to 8000 saves 4000
    auto r = ReduceTail(t, target);
    CHECK(r.fits);
    CHECK(r.rounds == 1);
    CHECK(r.clipped == std::vector<std::size_t>{2});
    CHECK(r.clips == 1);
    CHECK(CountCodePoints(ResultText(r.transcript[2])) == 8000);
    CHECK(ResultText(r.transcript[1]).size() == 9000);
  }
  SECTION("two clips: the earlier of the tied ones goes next") {
    const std::size_t target = before - 4500;
    auto r = ReduceTail(t, target);
    CHECK(r.clipped == std::vector<std::size_t>{1, 2});
    CHECK(ResultText(r.transcript[3]).size() == 9000);
  }
  SECTION("later rounds use smaller caps") {
    // 8000 x3 = 24002, 4096 x3 = 12290, 2048 x3 = 6146: still over; round 4 fits after
    // all three are at 1024.
    auto r = ReduceTail(t, 4002);
    CHECK(r.fits);
    CHECK(r.rounds == 4);
    CHECK(r.after_chars == 2 + 3 * 1024);
  }
}

TEST_CASE("R6.2 user and assistant content use the larger caps, it stops at the smallest") {
  Transcript t;
  t.Append(Message::UserText(std::string(20000, 'u')));
  t.Append(Message::AssistantText(std::string(20000, 'v')));
  t.Append(Message::ToolOutput("x", std::string(20000, 'w')));
  auto r = ReduceTail(t, 100);  // unreachable
  CHECK_FALSE(r.fits);
  CHECK(r.rounds == 5);
  CHECK(CountCodePoints(FirstText(r.transcript[0])) == 1024);
  CHECK(CountCodePoints(FirstText(r.transcript[1])) == 1024);
  CHECK(CountCodePoints(ResultText(r.transcript[2])) == 512);
  CHECK(r.after_chars == 1024 + 1024 + 512);
  CHECK(r.after_chars == r.transcript.chars());
  CHECK(r.before_chars == 60000);
}

TEST_CASE("R6.4 only content changes, checkpoints and opaque items are never touched") {
  Transcript t;
  Message checkpoint = Message::UserText(std::string(30000, 's'));
  checkpoint.summary = true;
  t.Append(checkpoint);
  Message thinking;
  thinking.role = Role::kAssistant;
  const std::string payload =
      R"({"type":"thinking","thinking":")" + std::string(30000, 't') + R"(","signature":"sig"})";
  thinking.parts.emplace_back(Opaque{"thinking", payload, OpaqueLink::kNone, {}});
  thinking.parts.emplace_back(ToolCall{"call_9", "write",
                                       nlohmann::json{{"body", std::string(30000, 'b')}}.dump(),
                                       R"({"type":"function"})"});
  t.Append(thinking);
  t.Append(Message::ToolOutput("call_9", std::string(30000, 'r'), /*is_error=*/true));
  const std::string id1 = t[1].id;

  auto r = ReduceTail(t, 4000);
  REQUIRE(r.transcript.size() == 3);
  CHECK(FirstText(r.transcript[0]).size() == 30000);  // the checkpoint is whole
  CHECK(r.transcript[0].summary);
  const Message& m1 = r.transcript[1];
  CHECK(m1.id == id1);
  CHECK(m1.role == Role::kAssistant);
  REQUIRE(m1.parts.size() == 2);
  CHECK(std::get<Opaque>(m1.parts[0]).payload == payload);
  const auto& call = std::get<ToolCall>(m1.parts[1]);
  CHECK(call.id == "call_9");
  CHECK(call.name == "write");
  CHECK(call.extra == R"({"type":"function"})");
  CHECK(nlohmann::json::parse(call.arguments).contains("body"));
  const auto& res = std::get<ToolResult>(r.transcript[2].parts[0]);
  CHECK(res.call_id == "call_9");
  CHECK(res.is_error);
  CHECK(r.clipped == std::vector<std::size_t>{1, 2});
}

TEST_CASE("R6.6 the reducer reports how many messages it cut") {
  Transcript t;
  for (int i = 0; i < 10; ++i)
    t.Append(Message::ToolOutput("c" + std::to_string(i), std::string(10000, 'x')));
  auto r = ReduceTail(t, 10 * 8000);
  CHECK(r.fits);
  CHECK(r.clipped.size() == 10);
  CHECK(r.after_chars == 80000);
  auto again = ReduceTail(r.transcript, 10 * 8000);
  CHECK(again.clipped.empty());  // idempotent: nothing more to do at the same target
}

TEST_CASE("R6.3 a 100 MB tool output is clipped to the cap") {
  Transcript t;
  t.Append(Message::UserText("read the log"));
  t.Append(Message::ToolOutput("c", std::string(100u * 1024u * 1024u, 'L')));
  auto r = ReduceTail(t, 800000);
  CHECK(r.fits);
  CHECK(CountCodePoints(ResultText(r.transcript[1])) == 8000);
}
