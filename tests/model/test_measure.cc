// SPEC §1 "Characters" and "Estimated tokens": what recap counts and how.
#include <string>

#include <catch2/catch.hpp>

#include "recap/measure.h"
#include "recap/message.h"

using namespace recap;

TEST_CASE("§1 characters are code points, not bytes") {
  CHECK(CountCodePoints("") == 0);
  CHECK(CountCodePoints("hello") == 5);
  CHECK(CountCodePoints("h\xC3\xA9llo") == 5);             // é: 2 bytes
  CHECK(CountCodePoints("\xE2\x82\xAC") == 1);             // €: 3 bytes
  CHECK(CountCodePoints("\xF0\x9F\x98\x80 ok") == 4);      // 😀: 4 bytes
  CHECK(CountCodePoints(std::string(1000, 'a')) == 1000);  // the 8-byte ASCII fast path
  std::string mixed;
  for (int i = 0; i < 100; ++i) mixed += "abcdefg\xF0\x9D\x84\x9E";  // 𝄞 every 8th char
  CHECK(CountCodePoints(mixed) == 800);
}

TEST_CASE("§1 invalid UTF-8 counts one character per bad byte and never crashes") {
  CHECK_FALSE(IsValidUtf8("\xFF"));
  CHECK(CountCodePoints("\xFF") == 1);
  CHECK(CountCodePoints("a\xC3") == 2);             // truncated 2-byte sequence at the end
  CHECK(CountCodePoints("\xE2\x82") == 2);          // truncated 3-byte sequence
  CHECK(CountCodePoints("\xC0\xAF") == 2);          // overlong '/'
  CHECK(CountCodePoints("\xED\xA0\x80") == 3);      // a UTF-16 surrogate is not UTF-8
  CHECK(CountCodePoints("\xF4\x90\x80\x80") == 4);  // above U+10FFFF
  CHECK(IsValidUtf8("\xF4\x8F\xBF\xBF"));           // U+10FFFF itself is fine
  CHECK(IsValidUtf8("\xEF\xBF\xBD"));
}

TEST_CASE("§1 ToValidUtf8 replaces each bad byte with U+FFFD and keeps the count") {
  const std::string bad = "ok\xFF\xC3(\xE2\x82";
  const std::string fixed = ToValidUtf8(bad);
  CHECK(IsValidUtf8(fixed));
  CHECK(fixed == "ok\xEF\xBF\xBD\xEF\xBF\xBD(\xEF\xBF\xBD\xEF\xBF\xBD");
  CHECK(CountCodePoints(fixed) == CountCodePoints(bad));
  CHECK(ToValidUtf8("already fine \xC3\xA9") == "already fine \xC3\xA9");
}

TEST_CASE("§1 PrefixBytesForCodePoints never ends inside a sequence") {
  const std::string s =
      "a\xF0\x9F\x98\x80"
      "b\xC3\xA9";  // a 😀 b é
  CHECK(PrefixBytesForCodePoints(s, 0) == 0);
  CHECK(PrefixBytesForCodePoints(s, 1) == 1);
  CHECK(PrefixBytesForCodePoints(s, 2) == 5);
  CHECK(PrefixBytesForCodePoints(s, 3) == 6);
  CHECK(PrefixBytesForCodePoints(s, 4) == 8);
  CHECK(PrefixBytesForCodePoints(s, 99) == 8);
}

TEST_CASE("§1 a message counts texts, tool names, arguments, results and opaque payloads") {
  Message m;
  m.role = Role::kAssistant;
  m.id = "not counted";
  m.extra = R"({"model":"not counted either"})";
  m.parts.emplace_back(Text{"four", R"({"citations":[]})"});  // 4
  m.parts.emplace_back(
      ToolCall{"call_1", "grep", R"({"q":"x"})", R"({"type":"function"})"});  // 4 + 9
  ToolResult r;
  r.call_id = "call_1";
  r.content.emplace_back(Text{"r\xC3\xA9sult", {}});                                      // 6
  r.content.emplace_back(Opaque{"image", R"({"type":"image"})", OpaqueLink::kNone, {}});  // 16
  m.parts.emplace_back(r);
  m.parts.emplace_back(Opaque{"thinking", R"({"s":"\u00e9"})", OpaqueLink::kNone, {}});  // 14
  CHECK(MessageChars(m) == 4 + 4 + 9 + 6 + 16 + 14);
}

TEST_CASE("§1 estimated tokens are ceil(characters / 4)") {
  CHECK(EstimateTokens(0) == 0);
  CHECK(EstimateTokens(1) == 1);
  CHECK(EstimateTokens(4) == 1);
  CHECK(EstimateTokens(5) == 2);
  CHECK(EstimateTokens(800000) == 200000);
  static_assert(EstimateTokens(7) == 2, "usable in constant expressions");
}
