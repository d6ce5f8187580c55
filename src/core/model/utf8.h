// Private UTF-8 primitives shared by measurement, the transcript and the reducer.
#ifndef RECAP_SRC_CORE_MODEL_UTF8_H_
#define RECAP_SRC_CORE_MODEL_UTF8_H_

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string_view>

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

#include "recap/measure.h"

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

// ScanCodePoints(text, 0, max) for a text known to be well-formed UTF-8 (as a message the
// transcript checked itself, Transcript::kWellFormedFact): every code point starts with the
// one byte of it that is not a continuation byte (10xxxxxx), so counting those, 64 bytes at a
// time, counts code points; nothing is decoded, and `valid` is not looked at (true). On text
// that is not well-formed the figures differ from ScanCodePoints'.
inline Utf8Scan ScanWellFormed(std::string_view text, std::size_t max) noexcept {
  const auto* p = reinterpret_cast<const unsigned char*>(text.data());
  const std::size_t n = text.size();
  std::size_t i = 0;
  std::size_t count = 0;  // code points started before byte i
#if defined(__SSE2__)
  const __m128i after_continuations = _mm_set1_epi8(static_cast<char>(0xBF));  // signed: -65
  const __m128i zero = _mm_setzero_si128();
  for (; i + 64 <= n; i += 64) {
    const auto* q = reinterpret_cast<const __m128i*>(p + i);
    // Per byte lane, 0 - (the starts among the four bytes of that lane): 0..4 after negating.
    __m128i starts = _mm_cmpgt_epi8(_mm_loadu_si128(q), after_continuations);
    starts = _mm_add_epi8(starts, _mm_cmpgt_epi8(_mm_loadu_si128(q + 1), after_continuations));
    starts = _mm_add_epi8(starts, _mm_cmpgt_epi8(_mm_loadu_si128(q + 2), after_continuations));
    starts = _mm_add_epi8(starts, _mm_cmpgt_epi8(_mm_loadu_si128(q + 3), after_continuations));
    const __m128i sums = _mm_sad_epu8(_mm_sub_epi8(zero, starts), zero);
    const std::size_t c = static_cast<std::size_t>(_mm_cvtsi128_si32(sums)) +
                          static_cast<std::size_t>(_mm_cvtsi128_si32(_mm_srli_si128(sums, 8)));
    if (count + c > max) break;  // code point `max` starts in these 64 bytes
    count += c;
  }
#endif
  for (; i < n; ++i) {
    if ((p[i] & 0xC0) != 0x80) {
      if (count == max) return {i, count, true};
      ++count;
    }
  }
  return {n, count, true};
}

}  // namespace utf8
}  // namespace v0
}  // namespace recap

#endif  // RECAP_SRC_CORE_MODEL_UTF8_H_
