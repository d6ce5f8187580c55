// The one decoder of a JSON string's escape sequences (RFC 8259 §7) in recap: the reader of
// json_util.h, the tail reducer's argument lexer and the checkpoint salvager's scanner all call
// DecodeEscape, and differ only in what they say about a bad one. Header-only: the lexers call
// it once per escape on their hot paths.
#ifndef RECAP_SRC_CORE_JSON_JSON_ESCAPE_H_
#define RECAP_SRC_CORE_JSON_JSON_ESCAPE_H_

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>

namespace recap {
inline namespace v0 {
namespace jsonutil {

enum class EscapeStatus : std::uint8_t {
  kOk,             // `length` bytes decoded to `code_point`
  kEndsInEscape,   // the text ends right after the backslash
  kEndsInHex,      // the text ends inside the four digits of a \u (those present are hex)
  kEndsAfterHigh,  // the text ends after a high surrogate, or after the backslash that follows it
  kUnknown,        // the backslash is followed by a character JSON has no escape for
  kBadHex,         // a \u not followed by four hex digits; `at` is the first that is not one
  kLoneLow,        // a low surrogate (\udc00 to \udfff) with no high surrogate before it
  kMissingLow,     // a high surrogate not followed by \u and a low surrogate
};

struct Escape {
  EscapeStatus status = EscapeStatus::kOk;
  std::uint8_t length = 0;       // kOk: 2, 6 or 12 bytes
  std::uint32_t code_point = 0;  // kOk: the decoded code point
  std::size_t at = 0;            // kBadHex: offset of the offending byte from the backslash
  bool ended() const noexcept {  // the text ended before the escape did: more may follow
    return status == EscapeStatus::kEndsInEscape || status == EscapeStatus::kEndsInHex ||
           status == EscapeStatus::kEndsAfterHigh;
  }
};

inline int HexValue(unsigned char c) noexcept {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

namespace escape_detail {

// The four hex digits at p[at, at + 4) as *unit; kEndsInHex or kBadHex (with e->at) when not.
inline bool Hex4(const unsigned char* p, std::size_t avail, std::size_t at, std::uint32_t* unit,
                 Escape* e) noexcept {
  std::uint32_t v = 0;
  for (std::size_t k = at; k < at + 4; ++k) {
    if (k >= avail) {
      e->status = EscapeStatus::kEndsInHex;
      return false;
    }
    const int d = HexValue(p[k]);
    if (d < 0) {
      e->status = EscapeStatus::kBadHex;
      e->at = k;
      return false;
    }
    v = (v << 4) | static_cast<std::uint32_t>(d);
  }
  *unit = v;
  return true;
}

}  // namespace escape_detail

// Decodes the escape sequence at p[0] == '\\', of which `avail` bytes are in the text, exactly
// as nlohmann's lexer accepts it: \" \\ \/ \b \f \n \r \t, \uXXXX, and a surrogate pair as two
// \u escapes.
inline Escape DecodeEscape(const unsigned char* p, std::size_t avail) noexcept {
  Escape e;
  if (avail < 2) {
    e.status = EscapeStatus::kEndsInEscape;
    return e;
  }
  std::uint32_t simple = 0;
  switch (p[1]) {
    case '"': simple = 0x22; break;
    case '\\': simple = 0x5C; break;
    case '/': simple = 0x2F; break;
    case 'b': simple = 0x08; break;
    case 'f': simple = 0x0C; break;
    case 'n': simple = 0x0A; break;
    case 'r': simple = 0x0D; break;
    case 't': simple = 0x09; break;
    case 'u': break;
    default: e.status = EscapeStatus::kUnknown; return e;
  }
  if (simple != 0) {
    e.length = 2;
    e.code_point = simple;
    return e;
  }
  std::uint32_t high = 0;
  if (!escape_detail::Hex4(p, avail, 2, &high, &e)) return e;
  if (high >= 0xDC00 && high <= 0xDFFF) {
    e.status = EscapeStatus::kLoneLow;
    return e;
  }
  if (high < 0xD800 || high > 0xDBFF) {
    e.length = 6;
    e.code_point = high;
    return e;
  }
  if (avail <= 6 || (p[6] == '\\' && avail <= 7)) {
    e.status = EscapeStatus::kEndsAfterHigh;
    return e;
  }
  if (p[6] != '\\' || p[7] != 'u') {
    e.status = EscapeStatus::kMissingLow;
    return e;
  }
  std::uint32_t low = 0;
  if (!escape_detail::Hex4(p, avail, 8, &low, &e)) return e;
  if (low < 0xDC00 || low > 0xDFFF) {
    e.status = EscapeStatus::kMissingLow;
    return e;
  }
  e.length = 12;
  e.code_point = 0x10000 + ((high - 0xD800) << 10) + (low - 0xDC00);
  return e;
}

inline Escape DecodeEscape(const char* p, std::size_t avail) noexcept {
  return DecodeEscape(reinterpret_cast<const unsigned char*>(p), avail);
}

// True when none of the 8 bytes at p is '"', '\\' or a control byte, and with kAsciiOnly none
// is from 0x80 either: bytes of a string's content that stand for themselves, skipped eight at a
// time by the lexers (the reader checks UTF-8 apart; the tail reducer counts code points).
template <bool kAsciiOnly>
inline bool EightPlain(const unsigned char* p) noexcept {
  std::uint64_t w;
  std::memcpy(&w, p, sizeof w);
  constexpr std::uint64_t kOnes = 0x0101010101010101ULL;
  constexpr std::uint64_t kHighs = 0x8080808080808080ULL;
  // Per byte, exactly: the high bit set where the byte (of x) is zero.
  auto zero_bytes = [](std::uint64_t x) { return ~(((x & ~kHighs) + ~kHighs) | x) & kHighs; };
  // Bytes below 0x20: their top three bits are zero.
  const std::uint64_t below_space = zero_bytes(w & (kOnes * 0xE0));
  const std::uint64_t high = kAsciiOnly ? (w & kHighs) : 0;
  return (high | below_space | zero_bytes(w ^ (kOnes * 0x22)) | zero_bytes(w ^ (kOnes * 0x5C))) ==
         0;
}

// Appends a decoded code point (at most 0x10FFFF, no surrogate) as UTF-8.
inline void AppendUtf8(std::string* out, std::uint32_t cp) {
  if (cp < 0x80) {
    out->push_back(static_cast<char>(cp));
  } else if (cp < 0x800) {
    out->push_back(static_cast<char>(0xC0 | (cp >> 6)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else if (cp < 0x10000) {
    out->push_back(static_cast<char>(0xE0 | (cp >> 12)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else {
    out->push_back(static_cast<char>(0xF0 | (cp >> 18)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  }
}

}  // namespace jsonutil
}  // namespace v0
}  // namespace recap

#endif  // RECAP_SRC_CORE_JSON_JSON_ESCAPE_H_
