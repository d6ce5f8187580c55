// ArgScanner: reads a tool call's JSON arguments in place and predicts, character for
// character, what nlohmann's parse followed by dump() would render, so that the arguments
// clipper (clip_arguments.cc) bisects on numbers instead of rendering a document per step.
// Header-only: the reducer keeps one scanner and reuses its buffers.
#ifndef RECAP_SRC_CORE_REDUCE_ARGUMENT_LEXER_H_
#define RECAP_SRC_CORE_REDUCE_ARGUMENT_LEXER_H_

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>
#include <vector>

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

#include "json/json_escape.h"
#include "model/utf8.h"
#include "recap_internal/json_depth.h"
#include "reduce/clip_text.h"

namespace recap {
inline namespace v0 {
namespace reduce_detail {

// ---- Tool-call arguments --------------------------------------------------------------------
//
// The contract (tail_reducer.h) is defined by nlohmann::ordered_json: the arguments are parsed,
// every string value longer than a limit is clipped to that limit with ClipText, the document
// is rendered with dump() (compact, ensure_ascii off), and the limit is the largest one, found
// by bisection, whose rendering fits the cap. Rendering the document at every bisection step
// is what made the reducer slow, so the bisection here runs on numbers: the rendered size at a
// limit is the size of everything but the string values, plus for each string value its two
// quotes and the characters dump writes for its (clipped) content. dump writes one character
// per code point except for escapes: \b \t \n \f \r \" \\ take two, other code points below
// U+0020 take six (\u00XX). The document is rendered once, at the chosen limit.
//
// Arguments are normally a small compact object, so they are read in place (ArgScanner):
// no DOM, and the rendering copies the text with each string value cut. The scanner accepts
// only what it can render exactly as dump would; anything else — fractions and exponents
// (dump rewrites floating-point numbers), -0, integers of 19 digits or more, duplicate keys
// (the DOM keeps one), very deep nesting, any text nlohmann would reject — goes to the DOM path,
// which parses with nlohmann and renders with dump, still computing sizes arithmetically.

// A code point dump writes as more than one character: its index in the string and the extra
// characters of all such code points up to and including it.
struct Special {
  std::size_t index;
  std::size_t extra_through;
};

// Extra characters dump writes for code point `cp` (0 for all but escapes).
constexpr std::size_t EscapeExtra(std::uint32_t cp) noexcept {
  switch (cp) {
    case 0x08:
    case 0x09:
    case 0x0A:
    case 0x0C:
    case 0x0D:
    case 0x22:
    case 0x5C: return 1;
    default: return cp < 0x20 ? 5 : 0;
  }
}

// Appends dump's rendering of code point `cp` (ensure_ascii off).
inline void AppendEscaped(std::string& out, std::uint32_t cp) {
  switch (cp) {
    case 0x08: out.append("\\b"); return;
    case 0x09: out.append("\\t"); return;
    case 0x0A: out.append("\\n"); return;
    case 0x0C: out.append("\\f"); return;
    case 0x0D: out.append("\\r"); return;
    case 0x22: out.append("\\\""); return;
    case 0x5C: out.append("\\\\"); return;
    default: break;
  }
  if (cp < 0x20) {
    static constexpr char kHex[] = "0123456789abcdef";  // dump writes "\\u%04x"
    out.append("\\u00");
    out.push_back(kHex[cp >> 4]);
    out.push_back(kHex[cp & 0xF]);
    return;
  }
  jsonutil::AppendUtf8(&out, cp);
}

// Rendered characters of the first `k` code points of a string whose specials are [b, e).
inline std::size_t PrefixRendered(const Special* b, const Special* e, std::size_t k) noexcept {
  const Special* it =
      std::lower_bound(b, e, k, [](const Special& s, std::size_t x) { return s.index < x; });
  return k + (it == b ? 0 : (it - 1)->extra_through);
}

// A string value of the arguments, as written.
struct ArgString {
  std::size_t begin = 0;  // its content between the quotes: bytes [begin, end) of the input
  std::size_t end = 0;
  std::size_t chars = 0;          // code points once decoded
  std::size_t rendered = 0;       // characters dump writes for the decoded content (no quotes)
  std::size_t special_begin = 0;  // its entries in specials
  std::size_t special_end = 0;
  bool escaped = false;  // holds a backslash (else the content is its own rendering)
  bool ascii = true;     // no byte above 0x7F (so code points are bytes)
};

// Reads JSON arguments in place and renders them, with string values clipped, as
// Json::parse followed by dump() would. Run() returns false for anything it cannot
// vouch for; the caller then takes the DOM path.
class ArgScanner {
 public:
  // Reads `in` (which must outlive the scanner's use of it); the scanner's buffers are reused
  // from one call to the next.
  // `well_formed`: `in` is known to be well-formed UTF-8 (its message was checked), so
  // strings are counted without being checked again.
  bool Run(std::string_view in, bool well_formed) {
    in_ = in;
    well_formed_ = well_formed;
    p_ = reinterpret_cast<const unsigned char*>(in.data());
    n_ = in.size();
    pos_ = 0;
    structure_ = 0;
    pieces_.clear();
    values_.clear();
    specials_.clear();
    keys_.clear();
    keybuf_.clear();
    SkipWs();
    if (!Value(0)) return false;
    SkipWs();
    return pos_ == n_;
  }

  std::size_t Longest() const noexcept {
    std::size_t longest = 0;
    for (const ArgString& s : values_) longest = std::max(longest, s.chars);
    return longest;
  }

  // Characters of the rendering with every string value longer than `limit` (> the marker)
  // clipped to `limit`.
  std::size_t RenderedChars(std::size_t limit) const noexcept {
    std::size_t total = structure_;
    for (const ArgString& s : values_) {
      if (s.chars > limit) {
        total += PrefixRendered(specials_.data() + s.special_begin,
                                specials_.data() + s.special_end, limit - kMarkerChars) +
                 kMarkerChars;
      } else {
        total += s.rendered;
      }
    }
    return total;
  }

  std::string Render(std::size_t limit) const {
    std::string out;
    out.reserve(n_ + values_.size() * (kTruncationMarker.size() + 2));
    for (const Piece& piece : pieces_) {
      switch (piece.kind) {
        case Piece::kRaw: out.append(in_.data() + piece.a, piece.b - piece.a); break;
        case Piece::kKey:
          out.push_back('"');
          AppendCanonical(out, piece.a, piece.b, SIZE_MAX);
          out.push_back('"');
          break;
        case Piece::kValue: {
          const ArgString& s = values_[piece.a];
          out.push_back('"');
          if (s.chars > limit) {
            AppendContent(out, s, limit - kMarkerChars);
            out.append(kTruncationMarker);
          } else {
            AppendContent(out, s, s.chars);
          }
          out.push_back('"');
          break;
        }
      }
    }
    return out;
  }

 private:
  // What the rendering is made of, in order.
  struct Piece {
    enum Kind : std::uint8_t { kRaw, kKey, kValue } kind;
    std::size_t a;  // kRaw: input bytes [a, b) as they are; kKey: a key's escaped content
    std::size_t b;  // [a, b), re-rendered; kValue: values_[a]
  };
  struct Key {
    std::size_t offset;  // decoded, in keybuf_
    std::size_t size;
  };

  static constexpr std::size_t kMaxKeys = 256;  // per object; duplicates are checked pairwise

  void SkipWs() noexcept {
    while (pos_ < n_ &&
           (p_[pos_] == ' ' || p_[pos_] == '\t' || p_[pos_] == '\n' || p_[pos_] == '\r')) {
      ++pos_;
    }
  }

  // Input bytes [a, b), `chars` code points, rendered as they are.
  void Raw(std::size_t a, std::size_t b, std::size_t chars) {
    structure_ += chars;
    if (!pieces_.empty() && pieces_.back().kind == Piece::kRaw && pieces_.back().b == a) {
      pieces_.back().b = b;
    } else {
      pieces_.push_back({Piece::kRaw, a, b});
    }
  }

  bool Punct() {  // one structural character at pos_
    Raw(pos_, pos_ + 1, 1);
    ++pos_;
    return true;
  }

  bool Value(int depth) {
    if (pos_ >= n_) return false;
    switch (p_[pos_]) {
      case '{': return depth < internal::kMaxJsonDepth && Object(depth);
      case '[': return depth < internal::kMaxJsonDepth && Array(depth);
      case '"': {
        ArgString s;
        s.special_begin = specials_.size();
        if (!String(s, &specials_, nullptr)) return false;
        s.special_end = specials_.size();
        pieces_.push_back({Piece::kValue, values_.size(), 0});
        values_.push_back(s);
        structure_ += 2;  // the quotes
        return true;
      }
      case 't': return Literal("true");
      case 'f': return Literal("false");
      case 'n': return Literal("null");
      default: return Number();
    }
  }

  bool Object(int depth) {
    Punct();  // {
    SkipWs();
    if (pos_ < n_ && p_[pos_] == '}') return Punct();
    const std::size_t first_key = keys_.size();
    const std::size_t keybuf_mark = keybuf_.size();
    while (true) {
      if (pos_ >= n_ || p_[pos_] != '"') return false;
      ArgString key;
      const std::size_t decoded = keybuf_.size();
      if (!String(key, nullptr, &keybuf_)) return false;
      const std::string_view name(keybuf_.data() + decoded, keybuf_.size() - decoded);
      if (keys_.size() - first_key >= kMaxKeys) return false;
      for (std::size_t k = first_key; k < keys_.size(); ++k) {
        if (std::string_view(keybuf_.data() + keys_[k].offset, keys_[k].size) == name) {
          return false;  // a duplicate key: the DOM keeps one member
        }
      }
      keys_.push_back({decoded, name.size()});
      if (key.escaped) {
        pieces_.push_back({Piece::kKey, key.begin, key.end});
        structure_ += 2 + key.rendered;
      } else {
        Raw(key.begin - 1, key.end + 1, key.chars + 2);
      }
      SkipWs();
      if (pos_ >= n_ || p_[pos_] != ':') return false;
      Punct();
      SkipWs();
      if (!Value(depth + 1)) return false;
      SkipWs();
      if (pos_ >= n_) return false;
      if (p_[pos_] == ',') {
        Punct();
        SkipWs();
        continue;
      }
      if (p_[pos_] != '}') return false;
      Punct();
      break;
    }
    keys_.resize(first_key);
    keybuf_.resize(keybuf_mark);
    return true;
  }

  bool Array(int depth) {
    Punct();  // [
    SkipWs();
    if (pos_ < n_ && p_[pos_] == ']') return Punct();
    while (true) {
      if (!Value(depth + 1)) return false;
      SkipWs();
      if (pos_ >= n_) return false;
      if (p_[pos_] == ',') {
        Punct();
        SkipWs();
        continue;
      }
      if (p_[pos_] != ']') return false;
      return Punct();
    }
  }

  bool Literal(std::string_view word) {
    if (in_.compare(pos_, word.size(), word) != 0) return false;
    Raw(pos_, pos_ + word.size(), word.size());
    pos_ += word.size();
    return true;
  }

  // An integer dump writes back digit for digit: no fraction, no exponent, not -0, at most 18
  // digits (within both int64 and uint64). Anything else goes to the DOM path.
  bool Number() {
    const std::size_t start = pos_;
    if (p_[pos_] == '-') ++pos_;
    if (pos_ >= n_) return false;
    if (p_[pos_] == '0') {
      ++pos_;
      if (pos_ - start == 2) return false;  // -0 is written back as 0
    } else if (p_[pos_] >= '1' && p_[pos_] <= '9') {
      while (pos_ < n_ && p_[pos_] >= '0' && p_[pos_] <= '9') ++pos_;
    } else {
      return false;
    }
    if (pos_ < n_ && (p_[pos_] == '.' || p_[pos_] == 'e' || p_[pos_] == 'E' ||
                      (p_[pos_] >= '0' && p_[pos_] <= '9'))) {
      return false;  // a fraction or exponent (dump rewrites floats), or 01 (invalid)
    }
    const std::size_t digits = pos_ - start - (p_[start] == '-' ? 1 : 0);
    if (digits > 18) return false;
    Raw(start, pos_, pos_ - start);
    return true;
  }

  // A string at pos_ (the opening quote), as nlohmann's lexer reads it; pos_ ends after the
  // closing quote. Records the specials of a value, or appends the decoded text of a key.
  bool String(ArgString& s, std::vector<Special>* specials, std::string* decoded) {
    ++pos_;
    s.begin = pos_;
    std::size_t chars = 0;
    std::size_t extra = 0;
    while (true) {
      // A run of bytes that stand for themselves, up to a quote, a backslash or a control
      // character: its code points, and whether it is well-formed.
      bool ascii = true;
      const std::size_t run_end = NextSpecial(pos_, ascii);
      if (run_end > pos_) {
        if (ascii) {
          chars += run_end - pos_;
        } else {
          s.ascii = false;
          if (well_formed_) {
            chars += utf8::ScanWellFormed(in_.substr(pos_, run_end - pos_), SIZE_MAX).code_points;
          } else {
            const Utf8Scan run = ScanCodePoints(in_.substr(0, run_end), pos_, SIZE_MAX);
            if (!run.valid) return false;  // invalid UTF-8
            chars += run.code_points;
          }
        }
        if (decoded) decoded->append(in_.data() + pos_, run_end - pos_);
        pos_ = run_end;
      }
      if (pos_ >= n_) return false;  // unterminated
      const unsigned char c = p_[pos_];
      if (c == '"') break;
      if (c != '\\') return false;  // a raw control character
      s.escaped = true;
      const jsonutil::Escape escape = jsonutil::DecodeEscape(p_ + pos_, n_ - pos_);
      if (escape.status != jsonutil::EscapeStatus::kOk) return false;
      const std::uint32_t cp = escape.code_point;
      pos_ += escape.length;
      if (decoded) jsonutil::AppendUtf8(decoded, cp);
      const std::size_t e = EscapeExtra(cp);
      if (e > 0) {
        extra += e;
        if (specials) specials->push_back({chars, extra});
      }
      ++chars;
    }
    s.end = pos_;
    ++pos_;  // the closing quote
    s.chars = chars;
    s.rendered = chars + extra;
    return true;
  }

  // The first position at or after `i` holding '"', '\\' or a byte below 0x20; n_ if none.
  // `ascii` is cleared when a byte before it is not ASCII.
  std::size_t NextSpecial(std::size_t i, bool& ascii) const noexcept {
#if defined(__SSE2__)
    const __m128i quote = _mm_set1_epi8('"');
    const __m128i backslash = _mm_set1_epi8('\\');
    const __m128i top3 = _mm_set1_epi8(static_cast<char>(0xE0));
    const __m128i zero = _mm_setzero_si128();
    for (; i + 16 <= n_; i += 16) {
      const __m128i v = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p_ + i));
      const auto special = static_cast<unsigned>(_mm_movemask_epi8(
          _mm_or_si128(_mm_or_si128(_mm_cmpeq_epi8(v, quote), _mm_cmpeq_epi8(v, backslash)),
                       _mm_cmpeq_epi8(_mm_and_si128(v, top3), zero))));
      const auto high = static_cast<unsigned>(_mm_movemask_epi8(v));
      if (special != 0) {
        const auto at = static_cast<unsigned>(__builtin_ctz(special));
        if ((high & ((1u << at) - 1)) != 0) ascii = false;
        return i + at;
      }
      if (high != 0) ascii = false;
    }
#else
    while (i + 8 <= n_ && jsonutil::EightPlain<false>(p_ + i)) {
      if (!utf8::EightAscii(p_ + i)) ascii = false;
      i += 8;
    }
#endif
    for (; i < n_ && p_[i] != '"' && p_[i] != '\\' && p_[i] >= 0x20; ++i) {
      if (p_[i] >= 0x80) ascii = false;
    }
    return i;
  }

  // Appends dump's rendering of the first `k` code points of the string content [a, b), which
  // String() accepted.
  void AppendCanonical(std::string& out, std::size_t a, std::size_t b, std::size_t k) const {
    std::size_t i = a;
    std::size_t count = 0;
    while (i < b && count < k) {
      if (p_[i] == '\\') {
        const jsonutil::Escape escape = jsonutil::DecodeEscape(p_ + i, b - i);
        i += escape.length;  // String() accepted it
        AppendEscaped(out, escape.code_point);
        ++count;
        continue;
      }
      // Up to the next escape the content is its own rendering.
      const void* bs = std::memchr(p_ + i, '\\', b - i);
      const std::size_t run_end =
          bs ? static_cast<std::size_t>(static_cast<const unsigned char*>(bs) - p_) : b;
      // String() accepted it: well-formed.
      const Utf8Scan run = utf8::ScanWellFormed(in_.substr(i, run_end - i), k - count);
      out.append(in_.data() + i, run.end);
      count += run.code_points;
      i += run.end;
    }
  }

  void AppendContent(std::string& out, const ArgString& s, std::size_t k) const {
    if (!s.escaped) {  // the content is its own rendering
      const std::string_view raw = in_.substr(s.begin, s.end - s.begin);
      out.append(raw.data(),  // String() accepted it: well-formed
                 k >= s.chars ? raw.size()
                 : s.ascii    ? k
                              : utf8::ScanWellFormed(raw, k).end);
      return;
    }
    AppendCanonical(out, s.begin, s.end, k);
  }

  std::string_view in_;
  bool well_formed_ = false;
  const unsigned char* p_ = nullptr;
  std::size_t n_ = 0;
  std::size_t pos_ = 0;
  std::size_t structure_ = 0;  // rendered characters of everything but value contents
  std::vector<Piece> pieces_;
  std::vector<ArgString> values_;
  std::vector<Special> specials_;
  std::vector<Key> keys_;  // of the objects being read, outermost first
  std::string keybuf_;
};

}  // namespace reduce_detail
}  // namespace v0
}  // namespace recap

#endif  // RECAP_SRC_CORE_REDUCE_ARGUMENT_LEXER_H_
