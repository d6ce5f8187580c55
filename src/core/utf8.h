// Private UTF-8 primitives shared by measurement, the transcript and the reducer.
#ifndef RECAP_SRC_CORE_UTF8_H_
#define RECAP_SRC_CORE_UTF8_H_

#include <cstddef>
#include <cstdint>
#include <cstring>

namespace recap {
inline namespace v0 {
namespace utf8 {

// Length of the well-formed sequence starting at p (1..4), or 0 if the bytes there do not
// start one. Follows the Unicode well-formedness table: no overlongs, no surrogates, nothing
// above U+10FFFF.
inline int SequenceLength(const unsigned char* p, std::size_t avail) noexcept {
  const unsigned char b0 = p[0];
  if (b0 < 0x80) return 1;
  auto cont = [](unsigned char b) { return (b & 0xC0) == 0x80; };
  if (b0 >= 0xC2 && b0 <= 0xDF) return (avail >= 2 && cont(p[1])) ? 2 : 0;
  if (b0 >= 0xE0 && b0 <= 0xEF) {
    if (avail < 3) return 0;
    const unsigned char b1 = p[1];
    const unsigned char lo = b0 == 0xE0 ? 0xA0 : 0x80;
    const unsigned char hi = b0 == 0xED ? 0x9F : 0xBF;
    return (b1 >= lo && b1 <= hi && cont(p[2])) ? 3 : 0;
  }
  if (b0 >= 0xF0 && b0 <= 0xF4) {
    if (avail < 4) return 0;
    const unsigned char b1 = p[1];
    const unsigned char lo = b0 == 0xF0 ? 0x90 : 0x80;
    const unsigned char hi = b0 == 0xF4 ? 0x8F : 0xBF;
    return (b1 >= lo && b1 <= hi && cont(p[2]) && cont(p[3])) ? 4 : 0;
  }
  return 0;
}

// True when the 8 bytes at p are all ASCII. memcpy keeps it free of alignment and aliasing
// problems; compilers turn it into one load.
inline bool EightAscii(const unsigned char* p) noexcept {
  std::uint64_t w;
  std::memcpy(&w, p, sizeof w);
  return (w & 0x8080808080808080ULL) == 0;
}

}  // namespace utf8
}  // namespace v0
}  // namespace recap

#endif  // RECAP_SRC_CORE_UTF8_H_
