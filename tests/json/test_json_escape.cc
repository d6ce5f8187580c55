// The one JSON escape decoder (src/core/json/json_escape.h) and the one depth scan
// (recap_internal/json_depth.h): what each says about every kind of escape and nesting, and
// that the decoder accepts exactly what nlohmann's lexer accepts, on generated strings.
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include "json/json_escape.h"
#include "recap_internal/json_depth.h"
#include "support/generator.h"

namespace {

using recap::internal::FindTooDeep;
using recap::internal::kMaxJsonDepth;
using recap::jsonutil::AppendUtf8;
using recap::jsonutil::DecodeEscape;
using recap::jsonutil::Escape;
using recap::jsonutil::EscapeStatus;

Escape Decode(std::string_view s) { return DecodeEscape(s.data(), s.size()); }

// Decodes a whole string's content (no quotes) with DecodeEscape; false at a bad escape or
// a quote that would end the string early.
bool DecodeAll(std::string_view s, std::string* out) {
  out->clear();
  for (std::size_t i = 0; i < s.size();) {
    if (s[i] == '"') return false;  // would end the string
    if (s[i] != '\\') {
      out->push_back(s[i++]);
      continue;
    }
    const Escape e = DecodeEscape(s.data() + i, s.size() - i);
    if (e.status != EscapeStatus::kOk) return false;
    AppendUtf8(out, e.code_point);
    i += e.length;
  }
  return true;
}

}  // namespace

TEST_CASE("R13.1 DecodeEscape names every kind of escape") {
  struct Case {
    const char* text;
    EscapeStatus status;
    std::uint8_t length;
    std::uint32_t code_point;
  };
  const Case cases[] = {
      {"\\n", EscapeStatus::kOk, 2, '\n'},
      {"\\\"", EscapeStatus::kOk, 2, '"'},
      {"\\/", EscapeStatus::kOk, 2, '/'},
      {"\\u00e9", EscapeStatus::kOk, 6, 0xE9},
      {"\\u00E9rest", EscapeStatus::kOk, 6, 0xE9},
      {"\\ud83d\\ude00", EscapeStatus::kOk, 12, 0x1F600},
      {"\\", EscapeStatus::kEndsInEscape, 0, 0},
      {"\\u00", EscapeStatus::kEndsInHex, 0, 0},
      {"\\ud83d", EscapeStatus::kEndsAfterHigh, 0, 0},
      {"\\ud83d\\", EscapeStatus::kEndsAfterHigh, 0, 0},
      {"\\ud83d\\ude", EscapeStatus::kEndsInHex, 0, 0},
      {"\\x", EscapeStatus::kUnknown, 0, 0},
      {"\\u00g0", EscapeStatus::kBadHex, 0, 0},
      {"\\ude00", EscapeStatus::kLoneLow, 0, 0},
      {"\\ud83dx", EscapeStatus::kMissingLow, 0, 0},
      {"\\ud83d\\n", EscapeStatus::kMissingLow, 0, 0},
      {"\\ud83d\\u0041", EscapeStatus::kMissingLow, 0, 0},
  };
  for (const Case& c : cases) {
    INFO(c.text);
    const Escape e = Decode(c.text);
    CHECK(e.status == c.status);
    if (c.status == EscapeStatus::kOk) {
      CHECK(e.length == c.length);
      CHECK(e.code_point == c.code_point);
    }
  }
  CHECK(Decode("\\u00g0").at == 4);
  CHECK(Decode("\\ud83d\\udZ00").at == 9);
  CHECK(Decode("\\u00").ended());
  CHECK_FALSE(Decode("\\x").ended());
}

TEST_CASE("R13.1 DecodeEscape accepts exactly what nlohmann's lexer accepts, generated strings") {
  // Strings made of escape-ish pieces; each is parsed as a JSON string by nlohmann and decoded
  // by DecodeEscape: both accept or both refuse, and when they accept, to the same bytes.
  const std::vector<std::string> pieces = {
      "a",       "\\n",     "\\t",     "\\\\",    "\\\"",  "\\/", "\\u0041", "\\u00e9",
      "\\ud83d", "\\ude00", "\\ud83d", "\\u",     "\\x",   "\\",  "0",       "F",
      "g",       "\\uDBFF", "\\uDFFF", "\\U0041", "\\u12", "é"};
  const std::uint64_t seed = 0xE5CA9E;
  recap_test::Rng rng(seed);
  std::size_t accepted = 0, refused = 0;
  for (int n = 0; n < 20000; ++n) {
    std::string s;
    const auto count = rng.Between(1, 6);
    for (std::int64_t k = 0; k < count; ++k) s += rng.Pick(pieces);
    std::string mine;
    const bool ours = DecodeAll(s, &mine);
    const nlohmann::json theirs = nlohmann::json::parse("\"" + s + "\"", nullptr, false);
    INFO("seed " << seed << ", case " << n << ": " << s);
    REQUIRE(ours == !theirs.is_discarded());
    if (ours) {
      REQUIRE(mine == theirs.get<std::string>());
      ++accepted;
    } else {
      ++refused;
    }
  }
  CHECK(accepted > 1000);
  CHECK(refused > 1000);
}

TEST_CASE("R13.1 FindTooDeep finds the bracket that opens one level too many") {
  CHECK(FindTooDeep("[[[]]]", 3) == std::string_view::npos);
  CHECK(FindTooDeep("[[[]]]", 2) == 2);
  CHECK(FindTooDeep("{\"a\":[{\"b\":[]}]}", 3) == 11);
  // Brackets in strings, escaped quotes included, do not count.
  CHECK(FindTooDeep("[\"[[[[\\\"[[[[\"]", 1) == std::string_view::npos);
  // A line break ends a string (JSON Lines: an unclosed string hides no later record).
  CHECK(FindTooDeep("[\"abc\n[[[", 2) == 7);
  // Closing brackets never take the depth below zero.
  CHECK(FindTooDeep("]]]]]][[[", 2) == 8);
  const std::string deep(kMaxJsonDepth, '[');
  CHECK(FindTooDeep(deep) == std::string_view::npos);
  CHECK(FindTooDeep(deep + "[") == static_cast<std::size_t>(kMaxJsonDepth));
  CHECK(FindTooDeep(std::string(100000, '[')) == static_cast<std::size_t>(kMaxJsonDepth));
}

namespace {

// The scan FindTooDeep makes, written byte by byte: what its skipping must agree with.
std::size_t PlainFindTooDeep(std::string_view text, int max_depth) {
  if (max_depth < 0) return text.empty() ? std::string_view::npos : 0;
  std::size_t depth = 0;
  bool in_string = false;
  for (std::size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (in_string) {
      if (c == '\\') {
        ++i;
      } else if (c == '"' || c == '\n') {
        in_string = false;
      }
      continue;
    }
    if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      if (++depth > static_cast<std::size_t>(max_depth)) return i;
    } else if ((c == ']' || c == '}') && depth > 0) {
      --depth;
    }
  }
  return std::string_view::npos;
}

}  // namespace

TEST_CASE("R13.1 FindTooDeep agrees with a byte-by-byte scan on generated texts") {
  const std::uint64_t seed = 0xDEE9;
  recap_test::Rng rng(seed);
  // Texts dense in what the scan looks at (quotes, escapes, line breaks, brackets), with runs
  // of plain bytes of every length around them, so that every alignment of the four-byte
  // steps meets a stop; and the edge of the text after a backslash.
  const std::vector<std::string> pieces = {"[", "]",  "{",   "}",    "\"",    "\\", "\\\"", "\n",
                                           "a", "ab", "abc", "abcd", "abcde", ":",  ",",    "é"};
  std::size_t deep = 0;
  for (int n = 0; n < 20000; ++n) {
    std::string text;
    const std::size_t parts = rng.Size(0, 60);
    for (std::size_t k = 0; k < parts; ++k) text += rng.Pick(pieces);
    const int max_depth = static_cast<int>(rng.Size(0, 6)) - 1;
    INFO("seed " << seed << ", case " << n << ", max_depth " << max_depth << ": " << text);
    const std::size_t expected = PlainFindTooDeep(text, max_depth);
    REQUIRE(FindTooDeep(text, max_depth) == expected);
    if (expected != std::string_view::npos) ++deep;
  }
  // Both outcomes are common.
  CHECK(deep > 2000);
  CHECK(deep < 18000);
}
