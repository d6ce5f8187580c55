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

namespace json_depth {

// Which bytes end a run the scan skips: outside a string a quote or a bracket, inside one a
// quote, a backslash or a line break.
struct Stops {
  bool outside[256];
  bool inside[256];
};

inline constexpr Stops kStops = [] {
  Stops s{};
  for (unsigned char c : {'"', '[', '{', ']', '}'}) s.outside[c] = true;
  for (unsigned char c : {'"', '\\', '\n'}) s.inside[c] = true;
  return s;
}();

// The offset of the first byte from `i` that `stop` marks, or `n`. Four bytes a step: most
// bytes of a document are neither quotes nor brackets.
inline std::size_t SkipTo(const unsigned char* p, std::size_t i, std::size_t n,
                          const bool* stop) noexcept {
  while (i + 4 <= n && !(stop[p[i]] | stop[p[i + 1]] | stop[p[i + 2]] | stop[p[i + 3]])) i += 4;
  while (i < n && !stop[p[i]]) ++i;
  return i;
}

}  // namespace json_depth

// The offset of the bracket that opens level `max_depth + 1` of `text`, or npos. One pass, no
// recursion; brackets inside strings do not count, a closing bracket never takes the depth
// below zero, and malformed text is left to a parser to judge. A string ends at a line break
// as well as at its quote (JSON strings hold no raw line break), so in JSON Lines a record
// with an unclosed string cannot hide the brackets of the records after it. It runs over
// every file `recap import` reads before anything parses it, so it skips the bytes between
// quotes and brackets four at a time (about four times the speed of a byte-by-byte scan).
inline std::size_t FindTooDeep(std::string_view text, int max_depth = kMaxJsonDepth) noexcept {
  if (max_depth < 0) return text.empty() ? std::string_view::npos : 0;
  const auto limit = static_cast<std::size_t>(max_depth);
  if (text.size() <= limit) return std::string_view::npos;  // a level takes a byte at least
  const auto* p = reinterpret_cast<const unsigned char*>(text.data());
  const std::size_t n = text.size();
  std::size_t depth = 0;
  std::size_t i = 0;
  for (;;) {
    i = json_depth::SkipTo(p, i, n, json_depth::kStops.outside);
    if (i >= n) return std::string_view::npos;
    const unsigned char c = p[i++];
    if (c == '"') {
      for (;;) {  // to the end of the string: its quote or a line break
        i = json_depth::SkipTo(p, i, n, json_depth::kStops.inside);
        if (i >= n) return std::string_view::npos;
        if (p[i] != '\\') break;
        i += 2;  // an escape: the byte after the backslash is never the end
      }
      ++i;
    } else if (c == '[' || c == '{') {
      if (++depth > limit) return i - 1;
    } else if (depth > 0) {
      --depth;
    }
  }
}

}  // namespace internal
}  // namespace v0
}  // namespace recap

#endif  // RECAP_SRC_CORE_RECAP_INTERNAL_JSON_DEPTH_H_
