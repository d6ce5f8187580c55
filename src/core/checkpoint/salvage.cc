#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "recap/checkpoint.h"

#include "checkpoint/sections.h"
#include "json/json_escape.h"
#include "model/utf8.h"
#include "recap_internal/json_depth.h"

namespace recap {
inline namespace v0 {

using checkpoint_detail::kWhitespace;
using checkpoint_detail::StartsWith;

// ---------------------------------------------------------------------------------------------
// SalvageTruncatedJson: a validating scanner that remembers the last position where the text
// read so far, with its open containers closed, is valid JSON. Such a "safe point" follows an
// opening bracket or a complete value in array-element or member-value position; it never
// falls inside a string, so the result cannot split a UTF-8 sequence or an escape.
//
// Every push and every pop of a container creates a safe point, so after the last safe point
// the container stack no longer changes: the stack at the end of the scan is the one to close.

namespace {

enum class Scan : std::uint8_t { kComplete, kIncomplete, kInvalid };

// A string starting at text[i] == '"'. On kComplete, *end is one past the closing quote.
Scan ScanString(std::string_view text, std::size_t i, std::size_t* end) {
  const auto* bytes = reinterpret_cast<const unsigned char*>(text.data());
  for (++i; i < text.size();) {
    const unsigned char b = bytes[i];
    if (b == '"') {
      *end = i + 1;
      return Scan::kComplete;
    }
    if (b < 0x20) return Scan::kInvalid;
    if (b == '\\') {
      const jsonutil::Escape e = jsonutil::DecodeEscape(bytes + i, text.size() - i);
      if (e.status != jsonutil::EscapeStatus::kOk) {
        return e.ended() ? Scan::kIncomplete : Scan::kInvalid;
      }
      i += e.length;
      continue;
    }
    if (b < 0x80) {
      ++i;
      continue;
    }
    // A sequence cut by the end of the text and a malformed one end the scan alike.
    const int len = utf8::SequenceLength(bytes + i, text.size() - i);
    if (len == 0) return Scan::kInvalid;
    i += static_cast<std::size_t>(len);
  }
  return Scan::kIncomplete;
}

bool IsDelimiter(char ch) {
  return ch == ',' || ch == '}' || ch == ']' || ch == ' ' || ch == '\t' || ch == '\n' || ch == '\r';
}

// A number at text[i]. It is complete only when a delimiter follows: "12" at the very end may
// have been "123".
Scan ScanNumber(std::string_view text, std::size_t i, std::size_t* end) {
  const std::size_t n = text.size();
  auto digit = [&](std::size_t k) { return k < n && text[k] >= '0' && text[k] <= '9'; };
  if (i < n && text[i] == '-') ++i;
  if (i >= n) return Scan::kIncomplete;
  if (text[i] == '0') {
    ++i;
  } else if (digit(i)) {
    while (digit(i)) ++i;
  } else {
    return Scan::kInvalid;
  }
  if (i < n && text[i] == '.') {
    ++i;
    if (i >= n) return Scan::kIncomplete;
    if (!digit(i)) return Scan::kInvalid;
    while (digit(i)) ++i;
  }
  if (i < n && (text[i] == 'e' || text[i] == 'E')) {
    ++i;
    if (i < n && (text[i] == '+' || text[i] == '-')) ++i;
    if (i >= n) return Scan::kIncomplete;
    if (!digit(i)) return Scan::kInvalid;
    while (digit(i)) ++i;
  }
  if (i >= n) return Scan::kIncomplete;
  if (!IsDelimiter(text[i])) return Scan::kInvalid;
  *end = i;
  return Scan::kComplete;
}

Scan ScanLiteral(std::string_view text, std::size_t i, std::size_t* end) {
  for (std::string_view lit : {"true", "false", "null"}) {
    if (text[i] != lit[0]) continue;
    const std::string_view have = text.substr(i, lit.size());
    if (have == lit) {
      *end = i + lit.size();
      return Scan::kComplete;
    }
    return StartsWith(lit, have) ? Scan::kIncomplete : Scan::kInvalid;
  }
  return Scan::kInvalid;
}

}  // namespace

std::optional<std::string> SalvageTruncatedJson(std::string_view text) {
  const std::size_t start = text.find_first_not_of(kWhitespace);
  if (start == std::string_view::npos || text[start] != '{') return std::nullopt;

  enum class State : std::uint8_t { kFirstKey, kKey, kColon, kValue, kFirstElement, kCommaOrEnd };
  struct Frame {
    bool object;
    State state;
  };
  std::vector<Frame> stack;
  stack.push_back({true, State::kFirstKey});
  std::size_t safe = start + 1;
  std::size_t i = start + 1;

  auto close_container = [&](char ch) -> bool {  // true when the root closed
    const bool object = stack.back().object;
    if (ch != (object ? '}' : ']')) return false;
    stack.pop_back();
    safe = i + 1;
    return true;
  };

  bool stop = false;
  while (!stop && !stack.empty()) {
    while (i < text.size() && kWhitespace.find(text[i]) != std::string_view::npos) ++i;
    if (i >= text.size()) break;
    Frame& top = stack.back();
    const char ch = text[i];
    std::size_t end = 0;
    switch (top.state) {
      case State::kFirstKey:
      case State::kKey:
        if (top.state == State::kFirstKey && ch == '}') {
          close_container(ch);
          ++i;
          break;
        }
        if (ch != '"' || ScanString(text, i, &end) != Scan::kComplete) {
          stop = true;
          break;
        }
        top.state = State::kColon;
        i = end;
        break;
      case State::kColon:
        if (ch != ':') {
          stop = true;
          break;
        }
        top.state = State::kValue;
        ++i;
        break;
      case State::kFirstElement:
      case State::kValue: {
        if (top.state == State::kFirstElement && ch == ']') {
          close_container(ch);
          ++i;
          break;
        }
        if (ch == '{' || ch == '[') {
          if (stack.size() >= static_cast<std::size_t>(internal::kMaxJsonDepth)) {
            stop = true;
            break;
          }
          top.state = State::kCommaOrEnd;  // where the parent stands once the child completes
          stack.push_back({ch == '{', ch == '{' ? State::kFirstKey : State::kFirstElement});
          safe = ++i;
          break;
        }
        Scan s;
        if (ch == '"') {
          s = ScanString(text, i, &end);
        } else if (ch == '-' || (ch >= '0' && ch <= '9')) {
          s = ScanNumber(text, i, &end);
        } else {
          s = ScanLiteral(text, i, &end);
        }
        if (s != Scan::kComplete) {
          stop = true;
          break;
        }
        top.state = State::kCommaOrEnd;
        safe = i = end;
        break;
      }
      case State::kCommaOrEnd:
        if (ch == ',') {
          top.state = top.object ? State::kKey : State::kValue;
          ++i;
        } else if (close_container(ch)) {
          ++i;
        } else {
          stop = true;
        }
        break;
    }
  }

  std::string out(text.substr(start, safe - start));
  for (auto it = stack.rbegin(); it != stack.rend(); ++it) out += it->object ? '}' : ']';
  return out;
}

}  // namespace v0
}  // namespace recap
