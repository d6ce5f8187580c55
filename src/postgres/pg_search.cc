// The PostgreSQL store's recall index (pg_search.h).
#include "pg_search.h"

#include <cstdint>
#include <unordered_map>

namespace recap {
inline namespace v0 {
namespace postgres_internal {

namespace {

// The length of the valid UTF-8 sequence at text[at] (a byte >= 0x80), or 0 when it is not one.
std::size_t Utf8Length(std::string_view text, std::size_t at) {
  const auto b = [&](std::size_t k) { return static_cast<unsigned char>(text[at + k]); };
  const unsigned char lead = b(0);
  std::size_t n = 0;
  unsigned char lo = 0x80;
  unsigned char hi = 0xBF;
  if (lead >= 0xC2 && lead <= 0xDF) {
    n = 2;
  } else if (lead >= 0xE0 && lead <= 0xEF) {
    n = 3;
    if (lead == 0xE0) lo = 0xA0;  // overlong
    if (lead == 0xED) hi = 0x9F;  // surrogates
  } else if (lead >= 0xF0 && lead <= 0xF4) {
    n = 4;
    if (lead == 0xF0) lo = 0x90;  // overlong
    if (lead == 0xF4) hi = 0x8F;  // beyond U+10FFFF
  } else {
    return 0;
  }
  if (at + n > text.size()) return 0;
  if (b(1) < lo || b(1) > hi) return 0;
  for (std::size_t k = 2; k < n; ++k) {
    if (b(k) < 0x80 || b(k) > 0xBF) return 0;
  }
  return n;
}

bool IsAsciiWordByte(unsigned char c) {
  return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
}

// `text` with invalid UTF-8 made spaces, and, when `words_only`, every ASCII byte that is not a
// letter or a digit too. The length stays the same.
std::string Clean(std::string_view text, bool words_only) {
  std::string out(text.size(), ' ');
  std::size_t i = 0;
  while (i < text.size()) {
    const auto c = static_cast<unsigned char>(text[i]);
    if (c < 0x80) {
      if (c != 0 && (!words_only || IsAsciiWordByte(c))) out[i] = static_cast<char>(c);
      ++i;
      continue;
    }
    const std::size_t n = Utf8Length(text, i);
    if (n == 0) {
      ++i;  // stays a space
      continue;
    }
    out.replace(i, n, text.substr(i, n));
    i += n;
  }
  return out;
}

}  // namespace

std::string IndexedText(std::string_view text) {
  if (text.size() > kMaxIndexedBytes) {
    std::size_t n = kMaxIndexedBytes;
    while (n > 0 && (static_cast<unsigned char>(text[n]) & 0xC0) == 0x80) --n;
    text = text.substr(0, n);
  }
  std::string out = Clean(text, true);
  // Each byte adds at most 3 to the estimate (a distinct word of one character costs 6 and
  // takes at least 2 bytes with the space after it; a repeat costs 2): a short text fits.
  if (out.size() * 3 > kMaxVectorBytes) {
    std::unordered_map<std::string_view, std::uint32_t> seen;
    std::size_t cost = 0;
    std::size_t i = 0;
    const std::string_view all(out);
    while (i < all.size()) {
      while (i < all.size() && all[i] == ' ') ++i;
      const std::size_t begin = i;
      while (i < all.size() && all[i] != ' ') ++i;
      if (i == begin) break;
      // Letter case is not folded: two spellings of a word count twice, which only
      // overestimates.
      std::uint32_t& count = seen[all.substr(begin, i - begin)];
      if (count == 0) {
        cost += (i - begin) + 5;  // the lexeme, alignment, the positions' count, one position
      } else if (count < 255) {
        cost += 2;  // one more position
      }
      ++count;
      if (cost > kMaxVectorBytes) {
        out.resize(begin);
        break;
      }
    }
  }
  while (!out.empty() && out.back() == ' ') out.pop_back();
  std::size_t first = 0;
  while (first < out.size() && out[first] == ' ') ++first;
  if (first == out.size()) out.clear();
  return out;
}

std::string QueryText(std::string_view query) { return Clean(query, false); }

}  // namespace postgres_internal
}  // namespace v0
}  // namespace recap
