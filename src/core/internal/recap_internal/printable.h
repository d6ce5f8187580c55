// Text as a person sees it on a terminal or in a log: recap prints session ids and stored text
// in messages, and a control character in them must not move the cursor, retitle or clear the
// terminal, or start a forged line of a log.
#ifndef RECAP_SRC_CORE_INTERNAL_RECAP_INTERNAL_PRINTABLE_H_
#define RECAP_SRC_CORE_INTERNAL_RECAP_INTERNAL_PRINTABLE_H_

#include <string>
#include <string_view>

#include "recap/measure.h"

namespace recap {
inline namespace v0 {
namespace internal {

// `text` made valid UTF-8, with each control character written as an escape: "\n", "\r",
// "\t", "\x1b" (the other C0 controls and DEL), "\u009b" (the C1 controls, U+0080..U+009F),
// and the characters that reorder or break what a person reads: "\u202e" (the bidirectional
// marks, embeddings, overrides and isolates, U+200E/F, U+202A..U+202E, U+2066..U+2069) and
// "\u2028", "\u2029" (the line and paragraph separators).
// `keep_newlines`: '\n' stays as it is (a message of several lines). A backslash stays as it
// is, so text without controls is unchanged.
// Whether the three bytes at `i` (starting 0xE2) are one of the characters Printable escapes
// besides the controls: U+200E, U+200F, U+2028..U+202E, U+2066..U+2069.
inline bool IsReordering(const std::string& valid, std::size_t i) {
  const auto b1 = static_cast<unsigned char>(valid[i + 1]);
  const auto b2 = static_cast<unsigned char>(valid[i + 2]);
  if (b1 == 0x80) return b2 == 0x8E || b2 == 0x8F || (b2 >= 0xA8 && b2 <= 0xAE);
  if (b1 == 0x81) return b2 >= 0xA6 && b2 <= 0xA9;
  return false;
}

inline std::string Printable(std::string_view text, bool keep_newlines = false) {
  const std::string valid = ToValidUtf8(text);
  std::string out;
  out.reserve(valid.size());
  static constexpr char kHex[] = "0123456789abcdef";
  for (std::size_t i = 0; i < valid.size(); ++i) {
    const auto byte = static_cast<unsigned char>(valid[i]);
    if (byte == '\n' && keep_newlines) {
      out += '\n';
    } else if (byte == '\n') {
      out += "\\n";
    } else if (byte == '\r') {
      out += "\\r";
    } else if (byte == '\t') {
      out += "\\t";
    } else if (byte < 0x20 || byte == 0x7F) {
      out += "\\x";
      out += kHex[byte >> 4];
      out += kHex[byte & 0xF];
    } else if (byte == 0xC2 && i + 1 < valid.size() &&
               static_cast<unsigned char>(valid[i + 1]) >= 0x80 &&
               static_cast<unsigned char>(valid[i + 1]) <= 0x9F) {
      const auto c1 = static_cast<unsigned char>(valid[++i]);
      out += "\\u00";
      out += kHex[c1 >> 4];
      out += kHex[c1 & 0xF];
    } else if (byte == 0xE2 && i + 2 < valid.size() && IsReordering(valid, i)) {
      const unsigned code = ((byte & 0x0Fu) << 12) |
                            ((static_cast<unsigned char>(valid[i + 1]) & 0x3Fu) << 6) |
                            (static_cast<unsigned char>(valid[i + 2]) & 0x3Fu);
      i += 2;
      out += "\\u";
      for (int shift = 12; shift >= 0; shift -= 4) out += kHex[(code >> shift) & 0xF];
    } else {
      out += valid[i];
    }
  }
  return out;
}

}  // namespace internal
}  // namespace v0
}  // namespace recap

#endif  // RECAP_SRC_CORE_INTERNAL_RECAP_INTERNAL_PRINTABLE_H_
