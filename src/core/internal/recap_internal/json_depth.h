// recap's one bound on how deeply JSON may nest (SPEC R13.1), and the scan that finds where a
// text passes it. Every reader of JSON in recap refuses, clips or salvages at this depth: the
// core's reader (json_util.h), the tail reducer's argument lexer, the checkpoint salvager, the
// summarizer's transcript, and the HTTP provider's replies. nlohmann/json copies, compares,
// dumps and destroys a document recursively, so a deeper one could exhaust the stack; real
// messages and replies nest a few dozen levels at most. Header-only, so adapters need no
// exported symbol for it.
#ifndef RECAP_SRC_CORE_RECAP_INTERNAL_JSON_DEPTH_H_
#define RECAP_SRC_CORE_RECAP_INTERNAL_JSON_DEPTH_H_

#include <cstddef>
#include <string_view>

namespace recap {
inline namespace v0 {
namespace internal {

inline constexpr int kMaxJsonDepth = 1000;

// The offset of the bracket that opens level `max_depth + 1` of `text`, or npos. One pass, no
// recursion; brackets inside strings do not count, a closing bracket never takes the depth
// below zero, and malformed text is left to a parser to judge. A string ends at a line break
// as well as at its quote (JSON strings hold no raw line break), so in JSON Lines a record
// with an unclosed string cannot hide the brackets of the records after it.
inline std::size_t FindTooDeep(std::string_view text, int max_depth = kMaxJsonDepth) noexcept {
  if (max_depth < 0) return text.empty() ? std::string_view::npos : 0;
  const auto limit = static_cast<std::size_t>(max_depth);
  if (text.size() <= limit) return std::string_view::npos;  // a level takes a byte at least
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
      if (++depth > limit) return i;
    } else if ((c == ']' || c == '}') && depth > 0) {
      --depth;
    }
  }
  return std::string_view::npos;
}

}  // namespace internal
}  // namespace v0
}  // namespace recap

#endif  // RECAP_SRC_CORE_RECAP_INTERNAL_JSON_DEPTH_H_
