// Private to the json room: reading JSON text byte by byte, as the reader, the writer, the
// numbers kept as text and the messages (Printable) all do: UTF-8 sequences, a byte named in
// a message, digits, and a number's text as a double.
#ifndef RECAP_SRC_CORE_JSON_JSON_TEXT_H_
#define RECAP_SRC_CORE_JSON_JSON_TEXT_H_

#include <cstddef>
#include <cstdio>
#include <string>
#include <string_view>

namespace recap {
inline namespace v0 {
namespace jsonutil {

inline bool IsContinuation(unsigned char b) { return (b & 0xC0) == 0x80; }

// Length of the valid UTF-8 sequence at text[i], or 0.
inline std::size_t ValidSequence(std::string_view text, std::size_t i) {
  const auto* p = reinterpret_cast<const unsigned char*>(text.data()) + i;
  const std::size_t avail = text.size() - i;
  const unsigned char b0 = p[0];
  if (b0 < 0x80) return 1;
  if (b0 >= 0xC2 && b0 <= 0xDF) return avail >= 2 && IsContinuation(p[1]) ? 2 : 0;
  if (b0 >= 0xE0 && b0 <= 0xEF) {
    if (avail < 3) return 0;
    const unsigned char lo = b0 == 0xE0 ? 0xA0 : 0x80;
    const unsigned char hi = b0 == 0xED ? 0x9F : 0xBF;
    return p[1] >= lo && p[1] <= hi && IsContinuation(p[2]) ? 3 : 0;
  }
  if (b0 >= 0xF0 && b0 <= 0xF4) {
    if (avail < 4) return 0;
    const unsigned char lo = b0 == 0xF0 ? 0x90 : 0x80;
    const unsigned char hi = b0 == 0xF4 ? 0x8F : 0xBF;
    return p[1] >= lo && p[1] <= hi && IsContinuation(p[2]) && IsContinuation(p[3]) ? 4 : 0;
  }
  return 0;
}

inline std::string Hex2(unsigned char c) {
  char buf[8];
  std::snprintf(buf, sizeof buf, "0x%02X", c);
  return buf;
}

inline bool IsDigit(char c) { return c >= '0' && c <= '9'; }

// An integer or decimal number text as a double; `ok` false beyond a double's range (too
// large). Below the range it is 0 with the number's sign.
double ToDouble(std::string_view text, bool* ok);

}  // namespace jsonutil
}  // namespace v0
}  // namespace recap

#endif  // RECAP_SRC_CORE_JSON_JSON_TEXT_H_
