#include "recap/tail_reducer.h"

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <deque>
#include <memory>

#include <nlohmann/json.hpp>

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

#include "recap/measure.h"

#include "json/json_escape.h"
#include "json/json_util.h"
#include "model/transcript_access.h"
#include "model/utf8.h"
#include "recap_internal/json_depth.h"
#include "recap_internal/log_internal.h"

namespace recap {
inline namespace v0 {

namespace {

// CountCodePoints(kTruncationMarker), which tests/reduce/test_tail_reducer.cc checks.
constexpr std::size_t kMarkerChars = 31;

using jsonutil::Json;

// ---- Reading texts only as far as needed --------------------------------------------------
//
// The reducer never counts a whole text when it only needs to know whether the text is over a
// cap and where to cut it: it reads at most cap + 1 code points, with ScanCodePoints, whose
// figures are those of CountCodePoints and PrefixBytesForCodePoints.

inline void Prefetch(const void* p) noexcept {
#if defined(__GNUC__)
  __builtin_prefetch(p);
#else
  (void)p;
#endif
}

// Bytes of the longest prefix of `text` holding at most `k` code points
// (PrefixBytesForCodePoints).
inline std::size_t PrefixBytes(std::string_view text, std::size_t k) noexcept {
  return k >= text.size() ? text.size() : ScanCodePoints(text, 0, k).end;
}

// How many code points of a text clipped to `cap` come before the marker (ClipText).
constexpr std::size_t KeptChars(std::size_t cap) noexcept {
  return cap > kMarkerChars ? cap - kMarkerChars : 0;
}

// Appends ClipText(text, cap) for a text over `cap`, whose first KeptChars(cap) code points
// take `keep` bytes.
void AppendClipped(std::string& out, std::string_view text, std::size_t cap, std::size_t keep) {
  if (cap <= kMarkerChars) {
    out.append(kTruncationMarker.substr(0, PrefixBytesForCodePoints(kTruncationMarker, cap)));
    return;
  }
  out.append(text.data(), keep);
  out.append(kTruncationMarker);
}

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
void AppendEscaped(std::string& out, std::uint32_t cp) {
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
std::size_t PrefixRendered(const Special* b, const Special* e, std::size_t k) noexcept {
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

struct ClippedArgs {
  std::string text;
  std::size_t chars = 0;  // CountCodePoints(text)
  bool valid = true;      // text is well-formed UTF-8
};

ClippedArgs Unchanged(std::string_view arguments) {
  return {std::string(arguments), CountCodePoints(arguments), true};
}

// ClipText(text, cap) for a text over `cap`, with its size and validity.
ClippedArgs ClipOverText(std::string_view text, std::size_t cap) {
  const Utf8Scan s = ScanCodePoints(text, 0, KeptChars(cap));
  ClippedArgs out;
  out.text.reserve(s.end + kTruncationMarker.size());
  AppendClipped(out.text, text, cap, s.end);
  out.chars = cap;
  out.valid = s.valid;
  return out;
}

// The bisection of the contract over the limits [lo, hi] given the rendered size at a limit
// (non-decreasing in the limit). Returns the chosen limit and its size, or the limit lo with a
// size over `cap` when even that does not fit.
template <class Size>
std::pair<std::size_t, std::size_t> Bisect(std::size_t lo, std::size_t hi, std::size_t cap,
                                           Size size) {
  std::size_t best = size(lo);
  if (best > cap) return {lo, best};  // as small as the structure allows
  while (lo < hi) {
    const std::size_t mid = lo + (hi - lo + 1) / 2;
    const std::size_t candidate = size(mid);
    if (candidate <= cap) {
      lo = mid;
      best = candidate;
    } else {
      hi = mid - 1;
    }
  }
  return {lo, best};
}

ClippedArgs ClipScanned(const ArgScanner& scan, std::string_view arguments, std::size_t cap) {
  const std::size_t longest = scan.Longest();
  // Every string is already as short as clipping makes it: leave the text alone, so that
  // clipping stays idempotent even when the JSON structure alone is over the cap.
  if (longest <= kMarkerChars + 1) return Unchanged(arguments);
  const auto [limit, chars] = Bisect(kMarkerChars + 1, longest - 1, cap,
                                     [&](std::size_t l) { return scan.RenderedChars(l); });
  return {scan.Render(limit), chars, true};
}

void CollectStrings(Json& j, std::vector<std::string*>& out) {
  if (j.is_string()) {
    out.push_back(j.get_ptr<std::string*>());
  } else if (j.is_object() || j.is_array()) {
    for (auto& v : j) CollectStrings(v, out);  // values only; keys are structure
  }
}

std::string Dump(const Json& doc) {
  return doc.dump(-1, ' ', /*ensure_ascii=*/false, Json::error_handler_t::replace);
}

// The DOM path: what ArgScanner does not vouch for. Parsed with nlohmann and rendered once
// with dump at the limit the bisection finds on numbers.
ClippedArgs ClipParsed(std::string_view arguments, std::size_t cap) {
  // CollectStrings and dump recurse once per level: arguments nested deeper than the codecs'
  // limit are not parsed at all but clipped like any text that is not JSON (R13.1).
  if (internal::FindTooDeep(arguments) != std::string_view::npos) {
    return ClipOverText(arguments, cap);
  }
  Json doc = Json::parse(arguments.begin(), arguments.end(), nullptr,
                         /*allow_exceptions=*/false);
  if (doc.is_discarded()) return ClipOverText(arguments, cap);  // not JSON: plain text rules

  std::vector<std::string*> strings;
  CollectStrings(doc, strings);
  struct Info {
    std::size_t chars = 0;
    std::size_t rendered = 0;
    std::size_t special_begin = 0;
    std::size_t special_end = 0;
  };
  std::vector<Info> info(strings.size());
  std::vector<Special> specials;
  std::size_t longest = 0;
  bool all_valid = true;
  for (std::size_t k = 0; k < strings.size(); ++k) {
    const std::string& s = *strings[k];
    const auto* p = reinterpret_cast<const unsigned char*>(s.data());
    Info& in = info[k];
    in.special_begin = specials.size();
    std::size_t extra = 0;
    for (std::size_t i = 0; i < s.size(); ++in.chars) {
      const int len = utf8::SequenceLength(p + i, s.size() - i);
      if (len == 0) {
        all_valid = false;
        break;
      }
      if (len == 1) {
        const std::size_t e = EscapeExtra(p[i]);
        if (e > 0) {
          extra += e;
          specials.push_back({in.chars, extra});
        }
      }
      i += static_cast<std::size_t>(len);
    }
    in.special_end = specials.size();
    in.rendered = in.chars + extra;
    longest = std::max(longest, in.chars);
  }
  if (!all_valid) {
    // nlohmann's parser only yields well-formed strings; should one not be, render at every
    // step as the contract says rather than predict what dump's replacement would write.
    longest = 0;
    for (auto* s : strings) longest = std::max(longest, CountCodePoints(*s));
    if (longest <= kMarkerChars + 1) return Unchanged(arguments);
    std::vector<std::string> originals;
    originals.reserve(strings.size());
    for (auto* s : strings) originals.push_back(*s);
    std::string best;
    auto render = [&](std::size_t limit) {
      for (std::size_t k = 0; k < strings.size(); ++k) {
        *strings[k] =
            CountCodePoints(originals[k]) > limit ? ClipText(originals[k], limit) : originals[k];
      }
      best = Dump(doc);
      return CountCodePoints(best);
    };
    const auto [limit, chars] = Bisect(kMarkerChars + 1, longest - 1, cap, render);
    render(limit);
    return {std::move(best), chars, IsValidUtf8(best)};
  }
  if (longest <= kMarkerChars + 1) return Unchanged(arguments);

  // Everything but the string values' contents: the document with every string emptied.
  std::vector<std::string> originals;
  originals.reserve(strings.size());
  for (auto* s : strings) {
    originals.push_back(std::move(*s));
    s->clear();
  }
  const std::size_t structure = CountCodePoints(Dump(doc));
  const auto [limit, chars] = Bisect(kMarkerChars + 1, longest - 1, cap, [&](std::size_t l) {
    std::size_t total = structure;
    for (const Info& in : info) {
      total += in.chars > l ? PrefixRendered(specials.data() + in.special_begin,
                                             specials.data() + in.special_end, l - kMarkerChars) +
                                  kMarkerChars
                            : in.rendered;
    }
    return total;
  });
  for (std::size_t k = 0; k < strings.size(); ++k) {
    *strings[k] = info[k].chars > limit ? ClipText(originals[k], limit) : std::move(originals[k]);
  }
  return {Dump(doc), chars, true};
}

// ClipArguments for arguments known to be over `cap`, with the result's size.
ClippedArgs ClipOverArguments(std::string_view arguments, std::size_t cap, ArgScanner& scan,
                              bool well_formed) {
  if (scan.Run(arguments, well_formed)) return ClipScanned(scan, arguments, cap);
  return ClipParsed(arguments, cap);
}

// ---- The reducer ----------------------------------------------------------------------------

constexpr std::size_t kRounds = kToolResultCaps.size();
constexpr std::size_t kUnknown = SIZE_MAX;
constexpr std::uint8_t kNotClipped = 0xFF;

static_assert(kContentCaps.size() == kRounds, "one content cap per round");
static_assert(kToolResultCaps.back() > kMarkerChars && kContentCaps.back() > kMarkerChars,
              "the reducer's caps leave room for the marker");

// One text the reducer may clip: a text part, a tool call's arguments or a text item of a tool
// result, of one message. The rounds decide from these records alone, reading a text only when
// its size in bytes does not settle a question: a text of b bytes has between ceil(b / 4) and
// b code points, so it is within a cap when b <= cap and over it when ceil(b / 4) > cap; in
// between it is read up to cap + 1 code points. Caps only shrink, so what is learnt holds for
// the later rounds. A clipped text is "its first cap_q - marker code points, then the marker"
// for the round q it was last clipped in; it is built once, at the end.
struct Slot {
  enum Kind : std::uint8_t { kContent, kArguments, kResult };
  const std::string* text = nullptr;  // the original text; for arguments, the current one
  std::size_t lo = 0;                 // bounds of the current text's code points
  std::size_t hi = 0;
  Kind kind = kContent;
  std::uint8_t clipped = kNotClipped;  // texts: the round it was last clipped in
  bool valid = true;                   // arguments, and texts counted whole: well-formed UTF-8
  bool counted = true;       // exact bounds came from reading the whole text (so `valid` holds)
  bool replaced = false;     // arguments: `text` is a clipped version, in the reducer's store
  bool well_formed = false;  // its message is Transcript::kWellFormedFact: nothing to check

  std::size_t Cap(std::size_t round) const noexcept {
    return kind == kResult ? kToolResultCaps[round] : kContentCaps[round];
  }
  void Reset(std::size_t bytes) noexcept {
    lo = (bytes + 3) / 4;
    hi = bytes;
    counted = bytes == 0;  // one byte is one code point, but not necessarily a valid one
  }
  // Whether the current text is over `cap`, reading it only if its bounds do not tell.
  bool Over(std::size_t cap) noexcept {
    if (hi <= cap) return false;
    if (lo > cap) return true;
    const Utf8Scan s = Scan(cap + 1);
    if (s.code_points <= cap) {  // read whole
      lo = hi = s.code_points;
      valid = s.valid;
      counted = true;
      return false;
    }
    lo = cap + 1;
    return true;
  }
  // The current text read from its start up to `max` code points.
  Utf8Scan Scan(std::size_t max) const noexcept {
    return well_formed ? utf8::ScanWellFormed(*text, max) : ScanCodePoints(*text, 0, max);
  }
  // The current text's code points, known to be within a cap.
  std::size_t Exact() noexcept {
    if (lo != hi) {
      const Utf8Scan s = Scan(SIZE_MAX);
      lo = hi = s.code_points;
      valid = s.valid;
      counted = true;
    }
    return lo;
  }
};

// What the reducer knows about one message.
struct Item {
  std::size_t chars = 0;              // MessageChars of its current version, exact
  std::size_t fixed = kUnknown;       // characters of what is never clipped: names, opaques
  std::size_t slot_begin = kUnknown;  // its texts: slots [slot_begin, slot_end)
  std::size_t slot_end = 0;
  bool summary = false;
  bool well_formed = false;  // Transcript::kWellFormedFact
  bool fixed_valid = true;
  bool edited = false;
};

template <class M, class F>
void ForEachClippable(M& m, F&& f) {
  for (auto& part : m.parts) {
    if (auto* t = std::get_if<Text>(&part)) {
      f(t->text, Slot::kContent);
    } else if (auto* c = std::get_if<ToolCall>(&part)) {
      f(c->arguments, Slot::kArguments);
    } else if (auto* r = std::get_if<ToolResult>(&part)) {
      for (auto& item : r->content) {
        if (auto* it = std::get_if<Text>(&item)) f(it->text, Slot::kResult);
      }
    }
  }
}

// Counts what is never clipped (tool names, opaque payloads), unless it is more than
// `max_bytes` long: most messages are never clipped, and then it is left for when one is.
void CountFixed(const Message& m, Item& item, std::size_t max_bytes) {
  std::size_t bytes = 0;
  std::size_t chars = 0;
  bool valid = true;
  auto count = [&](const std::string& s) {
    bytes += s.size();
    if (bytes > max_bytes) return false;
    const Utf8Scan scan =
        item.well_formed ? utf8::ScanWellFormed(s, SIZE_MAX) : ScanCodePoints(s, 0, SIZE_MAX);
    chars += scan.code_points;
    valid = valid && scan.valid;
    return true;
  };
  for (const auto& part : m.parts) {
    if (const auto* c = std::get_if<ToolCall>(&part)) {
      if (!count(c->name)) return;
    } else if (const auto* r = std::get_if<ToolResult>(&part)) {
      for (const auto& it : r->content) {
        if (const auto* o = std::get_if<Opaque>(&it)) {
          if (!count(o->payload)) return;
        }
      }
    } else if (const auto* o = std::get_if<Opaque>(&part)) {
      if (!count(o->payload)) return;
    }
  }
  item.fixed = chars;
  item.fixed_valid = valid;
}

// The message's size is known exactly (the transcript's, then the reducer's own figure), and
// so is what is never clipped: when all its texts but one are counted, that one is the rest.
void Resolve(const Item& item, Slot* begin, Slot* end) {
  if (item.fixed == kUnknown) return;
  Slot* unknown = nullptr;
  std::size_t known = item.fixed;
  for (Slot* s = begin; s != end; ++s) {
    if (s->lo == s->hi) {
      known += s->lo;
    } else if (unknown == nullptr) {
      unknown = s;
    } else {
      return;  // two or more
    }
  }
  if (unknown != nullptr) {
    unknown->lo = unknown->hi = item.chars - known;
    unknown->counted = false;
  }
}

// Bytes of what is never clipped (tool names, opaque payloads): with the texts' bytes, every
// byte MessageChars reads.
std::size_t FixedBytes(const Message& m) noexcept {
  std::size_t bytes = 0;
  for (const auto& part : m.parts) {
    if (const auto* c = std::get_if<ToolCall>(&part)) {
      bytes += c->name.size();
    } else if (const auto* r = std::get_if<ToolResult>(&part)) {
      for (const auto& it : r->content) {
        if (const auto* o = std::get_if<Opaque>(&it)) bytes += o->payload.size();
      }
    } else if (const auto* o = std::get_if<Opaque>(&part)) {
      bytes += o->payload.size();
    }
  }
  return bytes;
}

void InitSlots(const Message& m, Item& item, std::vector<Slot>& slots) {
  // Never clipped: checkpoints (bounded by design, R4.4) and pinned messages (R12.1).
  item.summary = m.summary || m.pinned;
  item.slot_begin = slots.size();
  std::size_t bytes = 0;
  ForEachClippable(m, [&](const std::string& s, Slot::Kind kind) {
    Slot slot;
    slot.text = &s;
    slot.kind = kind;
    slot.well_formed = item.well_formed;
    slot.Reset(s.size());
    slots.push_back(slot);
    bytes += s.size();
  });
  item.slot_end = slots.size();
  // A string has at most as many code points as bytes, so a message with as many characters
  // as bytes has that many in every string: each text's size is known without reading it (as
  // most messages are, in ASCII). Whether it is well-formed is not (counted stays false).
  if (item.chars == bytes + FixedBytes(m)) {
    for (std::size_t j = item.slot_begin; j < item.slot_end; ++j) {
      Slot& slot = slots[j];
      slot.lo = slot.hi = slot.text->size();
    }
  }
  CountFixed(m, item, 1024);
  Resolve(item, slots.data() + item.slot_begin, slots.data() + item.slot_end);
}

// Whether a text of the message is over its cap in round `round`, and if so, at most how many
// characters clipping it in that round can save (`saving`): a text over its cap comes down to
// the cap; arguments, at most to nothing.
bool OverCaps(Slot* begin, Slot* end, std::size_t round, std::size_t& saving) {
  bool over = false;
  saving = 0;
  for (Slot* s = begin; s != end; ++s) {
    const std::size_t cap = s->Cap(round);
    if (s->Over(cap)) {
      over = true;
      saving += s->kind == Slot::kArguments ? s->hi : s->hi - cap;
    }
  }
  return over;
}

// How one text of a message changes in a round.
struct Step {
  enum Kind : std::uint8_t { kKeep, kClip, kReplace } kind = kKeep;
  std::size_t chars = 0;  // its code points afterwards
  bool valid = true;      // kReplace: the new arguments are well-formed UTF-8
  std::string replacement;
};

// Decides how each text of the message is clipped in round `round` (ClipText, ClipArguments)
// and returns the message's size afterwards, from the slots: a text within the cap is counted
// (it is at most cap bytes, or was read whole), a text over it will have exactly the cap, and
// only arguments over the cap are read whole, to be clipped.
std::size_t MakePlan(const Item& item, Slot* begin, Slot* end, std::size_t round,
                     ArgScanner& scanner, std::vector<Step>& steps) {
  steps.resize(static_cast<std::size_t>(end - begin));
  std::size_t chars = item.fixed;
  Resolve(item, begin, end);
  for (Slot* s = begin; s != end; ++s) {
    const std::size_t cap = s->Cap(round);
    Step& step = steps[static_cast<std::size_t>(s - begin)];
    if (!s->Over(cap)) {
      step.kind = Step::kKeep;
      step.chars = s->Exact();
    } else if (s->kind != Slot::kArguments) {
      step.kind = Step::kClip;
      step.chars = cap;
    } else {
      ClippedArgs clipped = ClipOverArguments(*s->text, cap, scanner, s->well_formed);
      step.kind = Step::kReplace;
      step.chars = clipped.chars;
      step.valid = clipped.valid;
      step.replacement = std::move(clipped.text);
    }
    chars += step.chars;
  }
  return chars;
}

// Records the steps of round `round` in the slots.
void CommitSlots(Slot* begin, std::vector<Step>& steps, std::size_t round,
                 std::deque<std::string>& store) {
  for (std::size_t k = 0; k < steps.size(); ++k) {
    Step& step = steps[k];
    Slot& s = begin[k];
    if (step.kind == Step::kKeep) continue;
    s.lo = s.hi = step.chars;  // exact: this round's cap (or the clipped arguments' size)
    if (step.kind == Step::kClip) {
      s.clipped = static_cast<std::uint8_t>(round);
    } else {
      store.push_back(std::move(step.replacement));
      s.text = &store.back();
      s.replaced = true;
      s.valid = step.valid;
    }
  }
}

// Walks over messages spread over memory are a few dependent loads each (the message, its
// parts, a result's items); fetching them ahead, in stages, overlaps those of the next
// messages with the work on this one. `positions[k]` is being worked on.
void PrefetchAhead(const Transcript& t, const std::vector<std::size_t>& positions, std::size_t k) {
  const std::size_t n = positions.size();
  if (k + 24 < n) {  // the message, and its parts vector (often on the next cache line)
    const Message* m = t.shared(positions[k + 24]).get();
    Prefetch(m);
    Prefetch(&m->parts);
  }
  if (k + 12 < n) {
    const Message& m = t[positions[k + 12]];
    const char* parts = reinterpret_cast<const char*>(m.parts.data());
    const std::size_t bytes = std::min<std::size_t>(m.parts.size() * sizeof(Part), 1024);
    for (std::size_t b = 0; b < bytes; b += 64) Prefetch(parts + b);
  }
  if (k + 5 < n) {
    for (const Part& part : t[positions[k + 5]].parts) {
      if (const auto* r = std::get_if<ToolResult>(&part)) {
        const char* items = reinterpret_cast<const char*>(r->content.data());
        const std::size_t bytes =
            std::min<std::size_t>(r->content.size() * sizeof(ResultItem), 512);
        for (std::size_t b = 0; b < bytes; b += 64) Prefetch(items + b);
      }
    }
  }
}

// True when no byte of `s` is above 0x7F.
inline bool AllAscii(std::string_view s) noexcept {
  const auto* p = reinterpret_cast<const unsigned char*>(s.data());
  std::size_t i = 0;
  std::uint64_t any = 0;
  for (; i + 8 <= s.size(); i += 8) {
    std::uint64_t w;
    std::memcpy(&w, p + i, sizeof w);
    any |= w;
  }
  for (; i < s.size(); ++i) any |= p[i];
  return (any & 0x8080808080808080ULL) == 0;
}

// IsValidUtf8, answered inline for the short ASCII strings (ids, extras) that most are.
inline bool ValidUtf8(const std::string& s) noexcept {
  if (s.size() <= 32) {
    unsigned char any = 0;
    for (char c : s) any = static_cast<unsigned char>(any | static_cast<unsigned char>(c));
    if (any < 0x80) return true;
  }
  return IsValidUtf8(s);
}

// Builds the clipped copy of `src` its slots describe, copying only what is kept. `valid`
// is cleared unless every string in it is known to be well-formed UTF-8.
std::shared_ptr<Message> BuildClipped(const Message& src, Slot* slots, bool well_formed,
                                      bool& valid) {
  auto out = std::make_shared<Message>();
  Message& m = *out;
  // A message the transcript checked needs no check; the copy of any other is checked as it
  // is made (the copies of what was read before take what that read found).
  auto copy = [&](std::string& to, const std::string& from) {
    valid = valid && (well_formed || ValidUtf8(from));
    to = from;
  };
  copy(m.id, src.id);
  m.role = src.role;
  m.summary = src.summary;
  m.pinned = src.pinned;
  m.form = src.form;
  copy(m.extra, src.extra);
  m.parts.reserve(src.parts.size());
  Slot* s = slots;
  auto text_of = [&](const Text& t) {
    Text out_text;
    const Slot& slot = *s++;
    if (slot.clipped == kNotClipped) {
      out_text.text = t.text;
      valid = valid && (well_formed || (slot.counted ? slot.valid : ValidUtf8(out_text.text)));
    } else {
      // The first cap - marker code points. Mostly ASCII: then they are as many bytes, which
      // a check of the copy (in cache) confirms; otherwise the text is read for the cut.
      const std::size_t kept = slot.Cap(slot.clipped) - kMarkerChars;  // < the text's size
      std::string& out_str = out_text.text;
      out_str.reserve(kept + kTruncationMarker.size());
      out_str.append(t.text.data(), kept);
      if (!AllAscii(out_str)) {
        if (well_formed || (slot.counted && slot.valid)) {  // well-formed
          out_str.assign(t.text.data(), utf8::ScanWellFormed(t.text, kept).end);
        } else {
          const Utf8Scan keep = ScanCodePoints(t.text, 0, kept);
          valid = valid && keep.valid;
          out_str.assign(t.text.data(), keep.end);
        }
      }
      out_str.append(kTruncationMarker);
    }
    copy(out_text.extra, t.extra);
    return out_text;
  };
  auto opaque_valid = [&](const Opaque& o) {
    valid = valid && (well_formed || (ValidUtf8(o.kind) && ValidUtf8(o.link_id)));
  };
  for (const auto& part : src.parts) {
    if (const auto* t = std::get_if<Text>(&part)) {
      m.parts.emplace_back(text_of(*t));
    } else if (const auto* c = std::get_if<ToolCall>(&part)) {
      const Slot& slot = *s++;
      valid = valid && (well_formed ||
                        (slot.counted || slot.replaced ? slot.valid : ValidUtf8(c->arguments)));
      ToolCall call;
      copy(call.id, c->id);
      call.name = c->name;  // counted and checked with the fixed characters
      // A clipped version is the reducer's own (its store), moved from here on.
      call.arguments =
          slot.replaced ? std::move(*const_cast<std::string*>(slot.text)) : c->arguments;
      copy(call.extra, c->extra);
      m.parts.emplace_back(std::move(call));
    } else if (const auto* r = std::get_if<ToolResult>(&part)) {
      ToolResult res;
      copy(res.call_id, r->call_id);
      res.is_error = r->is_error;
      res.form = r->form;
      copy(res.extra, r->extra);
      res.content.reserve(r->content.size());
      for (const auto& item : r->content) {
        if (const auto* it = std::get_if<Text>(&item)) {
          res.content.emplace_back(text_of(*it));
        } else {
          opaque_valid(std::get<Opaque>(item));
          res.content.push_back(item);
        }
      }
      m.parts.emplace_back(std::move(res));
    } else {
      opaque_valid(std::get<Opaque>(part));
      m.parts.push_back(part);
    }
  }
  return out;
}

// Builds the clipped messages and the result's transcript.
void CommitClipped(const Transcript& t, const std::vector<Item>& items, std::vector<Slot>& slots,
                   ReduceResult& result) {
  const std::vector<std::size_t>& clipped = result.clipped;  // ascending
  std::vector<std::shared_ptr<Message>> built(clipped.size());
  // Whether every clipped copy is known to be well-formed UTF-8 with an id, so that it can
  // join the result as measured here (else Transcript::Set checks, repairs and measures it,
  // as it would for any message: a transcript's messages are well-formed, so this is for
  // messages handed over with Append(shared_ptr) that were not).
  bool checked = true;
  for (std::size_t k = 0; k < built.size(); ++k) {
    PrefetchAhead(t, clipped, k);
    const Item& item = items[clipped[k]];
    built[k] =
        BuildClipped(t[clipped[k]], slots.data() + item.slot_begin, item.well_formed, checked);
    checked = checked && item.fixed_valid && !built[k]->id.empty();
  }
  if (checked) {
    // Clipping changes content only (R6.4): the transcript keeps what the cutter noted of
    // every message, and takes the clipped copies at the sizes computed here.
    std::vector<internal::TranscriptAccess::ContentReplacement> replacements(built.size());
    for (std::size_t k = 0; k < built.size(); ++k) {
      replacements[k].position = clipped[k];
      replacements[k].message = std::move(built[k]);
      replacements[k].chars = items[clipped[k]].chars;
    }
    internal::TranscriptAccess::ReplaceContent(result.transcript, replacements);
  } else {
    std::vector<std::pair<std::size_t, Message>> replacements;
    replacements.reserve(built.size());
    for (std::size_t k = 0; k < built.size(); ++k) {
      replacements.emplace_back(clipped[k], std::move(*built[k]));
    }
    result.transcript.Set(std::move(replacements));
  }
}

}  // namespace

std::size_t ReductionTarget(std::size_t max_context_chars, std::size_t instruction_chars) noexcept {
  const std::size_t room =
      max_context_chars > instruction_chars ? max_context_chars - instruction_chars : 0;
  return std::max(kMinReductionTarget, room);
}

std::string ClipText(std::string_view text, std::size_t cap) {
  if (CountCodePoints(text) <= cap) return std::string(text);
  if (cap <= kMarkerChars) {
    return std::string(
        kTruncationMarker.substr(0, PrefixBytesForCodePoints(kTruncationMarker, cap)));
  }
  const std::size_t keep = PrefixBytesForCodePoints(text, cap - kMarkerChars);
  std::string out;
  out.reserve(keep + kTruncationMarker.size());
  out.append(text.data(), keep);
  out.append(kTruncationMarker);
  return out;
}

std::string ClipArguments(std::string_view arguments, std::size_t cap) {
  // Within the cap (a prefix of `cap` code points is the whole text): unchanged.
  if (arguments.size() <= cap || PrefixBytes(arguments, cap) == arguments.size()) {
    return std::string(arguments);
  }
  ArgScanner scanner;
  return ClipOverArguments(arguments, cap, scanner, false).text;
}

// The reducer works as SPEC R6.2 says, but reads as little as it can: the rounds decide from
// records of the messages' texts (Slot), which read a text only when its size in bytes does
// not settle whether it is over a cap, and then only to cap + 1 code points; sizes are
// computed from the parts; and a clipped message is built once, at the end, copying only what
// it keeps. The results are exactly those of clipping a whole copy of the message with
// ClipText and ClipArguments in each round and measuring it with MessageChars
// (tests/reduce/test_tail_reducer_diff.cc compares the two).
ReduceResult ReduceTail(const Transcript& t, std::size_t target_chars) {
  ReduceResult result;
  result.transcript = t;
  result.before_chars = t.chars();
  result.after_chars = result.before_chars;
  result.fits = result.before_chars <= target_chars;
  if (result.fits) return result;

  const std::size_t n = t.size();
  std::vector<Item> items(n);
  for (std::size_t i = 0; i < n; ++i) {
    items[i].chars = t.chars(i);
    items[i].well_formed = (t.cut_facts(i).flags & Transcript::kWellFormedFact) != 0;
  }
  std::vector<Slot> slots;
  std::deque<std::string> store;  // clipped arguments (stable addresses)
  std::size_t total = result.before_chars;
  std::vector<Step> steps;
  ArgScanner scanner;
  std::vector<std::size_t> over;
  std::vector<std::size_t> first;
  std::vector<std::pair<std::size_t, std::size_t>> order;  // (size, position)

  for (std::size_t round = 0; round < kRounds && total > target_chars; ++round) {
    const std::size_t smallest_cap = std::min(kToolResultCaps[round], kContentCaps[round]);
    result.rounds = static_cast<int>(round) + 1;

    // The messages looked at for the first time: those now larger than the round's smallest
    // cap (smaller ones cannot have a text over a cap). Their parts are listed into slots.
    first.clear();
    for (std::size_t i = 0; i < n; ++i) {
      if (items[i].slot_begin == kUnknown && items[i].chars > smallest_cap) first.push_back(i);
    }
    for (std::size_t k = 0; k < first.size(); ++k) {
      PrefetchAhead(t, first, k);
      InitSlots(t[first[k]], items[first[k]], slots);
      // The session's instructions, when they come first, are never clipped either (R12.1).
      if (first[k] == 0 && IsInstructions(t[0])) items[0].summary = true;
    }
    // Which messages have a text over this round's cap.
    over.clear();
    std::size_t most_saved = 0;  // at most this many characters fewer after the round
    for (std::size_t i = 0; i < n; ++i) {
      const Item& item = items[i];
      if (item.chars <= smallest_cap) continue;  // no part of it can be over a cap
      if (item.summary) continue;                // checkpoints, pinned messages, the instructions
      std::size_t saving = 0;
      if (OverCaps(slots.data() + item.slot_begin, slots.data() + item.slot_end, round, saving)) {
        over.push_back(i);
        most_saved += std::min(saving, item.chars);
      }
    }
    // Largest first; ties keep the earlier position first. The order matters only when the
    // transcript may come to fit during the round: otherwise every message listed is clipped,
    // each as it would be in any order, and they are taken as they come.
    if (total - std::min(total, most_saved) <= target_chars) {
      order.clear();
      for (std::size_t i : over) order.emplace_back(items[i].chars, i);
      std::sort(order.begin(), order.end(), [](const auto& a, const auto& b) {
        return a.first != b.first ? a.first > b.first : a.second < b.second;
      });
      for (std::size_t k = 0; k < order.size(); ++k) over[k] = order[k].second;
    }

    for (std::size_t k = 0; k < over.size(); ++k) {
      if (total <= target_chars) break;
      // Arguments to clip are read whole, from anywhere in memory: fetch them ahead.
      auto ahead = [&](std::size_t d, bool data) {
        if (k + d >= over.size()) return;
        const Item& a = items[over[k + d]];
        for (std::size_t j = a.slot_begin; j < a.slot_end; ++j) {
          const Slot& s = slots[j];
          if (s.kind != Slot::kArguments || s.hi <= s.Cap(round)) continue;
          if (!data) {
            Prefetch(s.text);
          } else {
            const char* p = s.text->data();
            for (std::size_t b = 0; b < s.hi && b < 1024; b += 64) Prefetch(p + b);
          }
        }
      };
      ahead(8, false);
      ahead(4, true);
      const std::size_t i = over[k];
      Item& item = items[i];
      if (item.fixed == kUnknown) CountFixed(t[i], item, SIZE_MAX);
      Slot* const begin = slots.data() + item.slot_begin;
      const std::size_t new_chars =
          MakePlan(item, begin, slots.data() + item.slot_end, round, scanner, steps);
      // Arguments whose JSON structure alone is over the cap cannot shrink; such a message
      // is left as it is rather than reported as cut.
      if (new_chars >= item.chars) continue;
      CommitSlots(begin, steps, round, store);
      item.edited = true;
      total = total - item.chars + new_chars;
      item.chars = new_chars;
      ++result.clips;
    }
  }

  for (std::size_t i = 0; i < n; ++i) {
    if (items[i].edited) result.clipped.push_back(i);
  }
  if (!result.clipped.empty()) CommitClipped(t, items, slots, result);  // else `t`, shared
  result.after_chars = result.transcript.chars();
  result.fits = result.after_chars <= target_chars;
  RECAP_LOG_DEBUG("reduced {} messages in {} rounds: {} -> {} chars (target {}){}",
                  result.clipped.size(), result.rounds, result.before_chars, result.after_chars,
                  target_chars, result.fits ? "" : ", still over");
  return result;
}

}  // namespace v0
}  // namespace recap
