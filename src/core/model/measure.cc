#include "recap/measure.h"

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

#include "model/utf8.h"

namespace recap {
inline namespace v0 {

std::string ToValidUtf8(std::string_view text) {
  if (IsValidUtf8(text)) return std::string(text);
  static constexpr char kReplacement[] = "\xEF\xBF\xBD";  // U+FFFD
  const auto* p = reinterpret_cast<const unsigned char*>(text.data());
  const std::size_t n = text.size();
  std::string out;
  out.reserve(n + n / 4);
  std::size_t i = 0;
  while (i < n) {
    const int len = utf8::SequenceLength(p + i, n - i);
    if (len == 0) {
      out.append(kReplacement, 3);
      ++i;
    } else {
      out.append(text.data() + i, static_cast<std::size_t>(len));
      i += static_cast<std::size_t>(len);
    }
  }
  return out;
}

std::size_t PrefixBytesForCodePoints(std::string_view text, std::size_t max_code_points) noexcept {
  const auto* p = reinterpret_cast<const unsigned char*>(text.data());
  const std::size_t n = text.size();
  std::size_t i = 0;
  std::size_t count = 0;
  while (i < n && count < max_code_points) {
    if (i + 8 <= n && count + 8 <= max_code_points && utf8::EightAscii(p + i)) {
      i += 8;
      count += 8;
      continue;
    }
    const int len = utf8::SequenceLength(p + i, n - i);
    i += len > 0 ? static_cast<std::size_t>(len) : 1;
    ++count;
  }
  return i;
}

namespace {

#if defined(__SSE2__)
// A block of 16 bytes at a code point's start, not all ASCII. When its first `len` bytes are
// whole well-formed sequences (len = 16, or the start of a sequence that continues past the
// block), returns true with their code points in `cps`. False sends the caller to the
// byte-by-byte path, which decides.
inline bool ValidBlock(__m128i v, unsigned high, std::size_t& len, std::size_t& cps) noexcept {
  auto mask = [](__m128i x) { return static_cast<unsigned>(_mm_movemask_epi8(x)); };
  auto masked_eq = [&](int m, int value) {
    return mask(_mm_cmpeq_epi8(_mm_and_si128(v, _mm_set1_epi8(static_cast<char>(m))),
                               _mm_set1_epi8(static_cast<char>(value))));
  };
  const unsigned cont = masked_eq(0xC0, 0x80);  // 10xxxxxx
  unsigned l2 = masked_eq(0xE0, 0xC0);          // 110xxxxx
  unsigned l3 = masked_eq(0xF0, 0xE0);          // 1110xxxx
  unsigned l4 = masked_eq(0xF8, 0xF0);          // 11110xxx
  // Never in a well-formed sequence: C0, C1, F5..FF.
  const unsigned bad =
      masked_eq(0xFE, 0xC0) | (high & ~(cont | l2 | l3 | l4)) |
      mask(_mm_cmpeq_epi8(_mm_max_epu8(v, _mm_set1_epi8(static_cast<char>(0xF5))), v));
  auto expected = [&] {  // where continuation bytes must be
    return (l2 << 1) | (l3 << 1) | (l3 << 2) | (l4 << 1) | (l4 << 2) | (l4 << 3);
  };
  unsigned exp = expected();
  len = 16;
  if ((exp >> 16) != 0) {  // the last sequence goes on past the block: stop at its lead
    len = static_cast<std::size_t>(31 - __builtin_clz(l2 | l3 | l4));
    const unsigned keep = (1u << len) - 1;
    l2 &= keep;
    l3 &= keep;
    l4 &= keep;
    exp = expected();
    if ((exp >> len) != 0) return false;
  }
  const unsigned in = len == 16 ? 0xFFFFu : (1u << len) - 1;
  if ((cont & in) != exp || (bad & in) != 0) return false;
  // The second byte's narrower ranges after E0, ED, F0, F4 (no overlongs, no surrogates,
  // nothing above U+10FFFF).
  auto eq = [&](int value) {
    return mask(_mm_cmpeq_epi8(v, _mm_set1_epi8(static_cast<char>(value)))) & in;
  };
  const unsigned e0 = eq(0xE0), ed = eq(0xED), f0 = eq(0xF0), f4 = eq(0xF4);
  if ((e0 | ed | f0 | f4) != 0) {
    const unsigned a0_bf = masked_eq(0xE0, 0xA0);
    const unsigned x80_8f = masked_eq(0xF0, 0x80);
    if (((e0 << 1) & ~a0_bf) != 0 || ((ed << 1) & a0_bf) != 0 || ((f0 << 1) & x80_8f) != 0 ||
        ((f4 << 1) & ~x80_8f) != 0) {
      return false;
    }
  }
  // Code points: the bytes that are not continuation bytes (a popcount the baseline x86-64
  // has no instruction for).
  unsigned x = ~cont & in;
  x = x - ((x >> 1) & 0x5555u);
  x = (x & 0x3333u) + ((x >> 2) & 0x3333u);
  x = (x + (x >> 4)) & 0x0F0Fu;
  cps = static_cast<std::size_t>((x + (x >> 8)) & 0x1Fu);
  return true;
}
#endif

std::size_t ResultItemChars(const ResultItem& item) noexcept {
  if (const auto* t = std::get_if<Text>(&item)) return CountCodePoints(t->text);
  return CountCodePoints(std::get<Opaque>(item).payload);
}

// ScanCodePoints' one pass; kBounded false: no limit on the code points (CountCodePoints),
// and no comparison with one in the loop.
template <bool kBounded>
inline Utf8Scan Scan(std::string_view text, std::size_t begin,
                     std::size_t max_code_points) noexcept {
  const auto* p = reinterpret_cast<const unsigned char*>(text.data());
  const std::size_t n = text.size();
  std::size_t i = begin;
  std::size_t count = 0;
  bool valid = true;
#if defined(__SSE2__)
  std::size_t bytewise_until = 0;  // after a block the fast path did not take
#endif
  while (i < n && (!kBounded || count < max_code_points)) {
#if defined(__SSE2__)
    if (i >= bytewise_until) {
      if (i + 64 <= n && (!kBounded || count + 64 <= max_code_points)) {
        const auto* q = reinterpret_cast<const __m128i*>(p + i);
        const __m128i any =
            _mm_or_si128(_mm_or_si128(_mm_loadu_si128(q), _mm_loadu_si128(q + 1)),
                         _mm_or_si128(_mm_loadu_si128(q + 2), _mm_loadu_si128(q + 3)));
        if (_mm_movemask_epi8(any) == 0) {
          i += 64;
          count += 64;
          continue;
        }
      }
      if (i + 16 <= n) {
        const __m128i v = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p + i));
        const auto high = static_cast<unsigned>(_mm_movemask_epi8(v));
        std::size_t len = 16;
        std::size_t cps = 16;
        if ((high == 0 || ValidBlock(v, high, len, cps)) &&
            (!kBounded || count + cps <= max_code_points)) {
          i += len;
          count += cps;
          continue;
        }
        bytewise_until = i + 16;
      }
    }
#endif
    if (i + 8 <= n && (!kBounded || count + 8 <= max_code_points) && utf8::EightAscii(p + i)) {
      i += 8;
      count += 8;
      continue;
    }
    const int len = utf8::SequenceLength(p + i, n - i);
    if (len > 0) {
      i += static_cast<std::size_t>(len);
    } else {
      ++i;
      valid = false;
    }
    ++count;
  }
  return {i, count, valid};
}

}  // namespace

std::size_t CountCodePoints(std::string_view text) noexcept {
  return Scan<false>(text, 0, 0).code_points;
}

bool IsValidUtf8(std::string_view text) noexcept { return Scan<false>(text, 0, 0).valid; }

Utf8Scan ScanCodePoints(std::string_view text, std::size_t begin,
                        std::size_t max_code_points) noexcept {
  return Scan<true>(text, begin, max_code_points);
}

std::size_t MessageChars(const Message& m) noexcept {
  std::size_t total = 0;
  for (const auto& part : m.parts) {
    if (const auto* t = std::get_if<Text>(&part)) {
      total += CountCodePoints(t->text);
    } else if (const auto* c = std::get_if<ToolCall>(&part)) {
      total += CountCodePoints(c->name) + CountCodePoints(c->arguments);
    } else if (const auto* r = std::get_if<ToolResult>(&part)) {
      for (const auto& item : r->content) total += ResultItemChars(item);
    } else {
      total += CountCodePoints(std::get<Opaque>(part).payload);
    }
  }
  return total;
}

}  // namespace v0
}  // namespace recap
