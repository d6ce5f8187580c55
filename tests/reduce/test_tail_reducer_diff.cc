// SPEC R6 / R11.3: the tail reducer against its earlier, straightforward implementation.
//
// ClipArguments and ReduceTail were rewritten for speed (R11.3): arguments are read in place
// and the clip limit is bisected on computed sizes instead of re-rendering the JSON document at
// every step; messages are clipped part by part and texts read only as far as the caps need.
// Their results must not change by a single byte. `old_impl` below is the implementation as it
// was before (parse with nlohmann::ordered_json, dump at every bisection step, copy a message
// whole and clip it, count every text), kept verbatim as the reference; the tests compare both
// over many generated inputs.
//
// Every failure prints its seed; RECAP_SEED=<seed> replays that one case.
#include <algorithm>
#include <cstdlib>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include "recap/measure.h"
#include "recap/tail_reducer.h"

#include "model/utf8.h"  // the core's private ScanWellFormed
#include "support/build_speed.h"
#include "support/generator.h"
#include "support/invariants.h"

namespace old_impl {

using namespace recap;

const std::size_t kMarkerChars = CountCodePoints(kTruncationMarker);

using OrderedJson = nlohmann::ordered_json;

void CollectStrings(OrderedJson& j, std::vector<std::string*>& out) {
  if (j.is_string()) {
    out.push_back(j.get_ptr<std::string*>());
  } else if (j.is_object() || j.is_array()) {
    for (auto& v : j) CollectStrings(v, out);  // values only; keys are structure
  }
}

struct Sizes {
  std::size_t chars = 0;
  std::size_t max_content = 0;
  std::size_t max_result = 0;
};

Sizes Measure(const Message& m, std::size_t chars) {
  Sizes s;
  s.chars = chars;
  for (const auto& part : m.parts) {
    if (const auto* t = std::get_if<Text>(&part)) {
      s.max_content = std::max(s.max_content, CountCodePoints(t->text));
    } else if (const auto* c = std::get_if<ToolCall>(&part)) {
      s.max_content = std::max(s.max_content, CountCodePoints(c->arguments));
    } else if (const auto* r = std::get_if<ToolResult>(&part)) {
      for (const auto& item : r->content) {
        if (const auto* it = std::get_if<Text>(&item)) {
          s.max_result = std::max(s.max_result, CountCodePoints(it->text));
        }
      }
    }
  }
  return s;
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
  if (CountCodePoints(arguments) <= cap) return std::string(arguments);
  OrderedJson doc = OrderedJson::parse(arguments.begin(), arguments.end(), nullptr,
                                       /*allow_exceptions=*/false);
  if (doc.is_discarded()) return ClipText(arguments, cap);  // not JSON: plain text rules

  std::vector<std::string*> strings;
  CollectStrings(doc, strings);
  std::vector<std::string> originals;
  std::size_t longest = 0;
  originals.reserve(strings.size());
  for (auto* s : strings) {
    originals.push_back(*s);
    longest = std::max(longest, CountCodePoints(*s));
  }
  if (longest <= kMarkerChars) return std::string(arguments);  // nothing can get shorter

  auto render = [&](std::size_t limit) {
    for (std::size_t k = 0; k < strings.size(); ++k) {
      *strings[k] =
          CountCodePoints(originals[k]) > limit ? ClipText(originals[k], limit) : originals[k];
    }
    return doc.dump(-1, ' ', /*ensure_ascii=*/false, OrderedJson::error_handler_t::replace);
  };
  std::size_t lo = kMarkerChars + 1;
  std::size_t hi = longest - 1;
  if (lo > hi) return std::string(arguments);
  std::string best = render(lo);
  if (CountCodePoints(best) > cap) return best;
  while (lo < hi) {
    const std::size_t mid = lo + (hi - lo + 1) / 2;
    std::string candidate = render(mid);
    if (CountCodePoints(candidate) <= cap) {
      lo = mid;
      best = std::move(candidate);
    } else {
      hi = mid - 1;
    }
  }
  return best;
}

void ClipMessage(Message& m, std::size_t content_cap, std::size_t result_cap) {
  for (auto& part : m.parts) {
    if (auto* t = std::get_if<Text>(&part)) {
      if (CountCodePoints(t->text) > content_cap) t->text = ClipText(t->text, content_cap);
    } else if (auto* c = std::get_if<ToolCall>(&part)) {
      if (CountCodePoints(c->arguments) > content_cap) {
        c->arguments = ClipArguments(c->arguments, content_cap);
      }
    } else if (auto* r = std::get_if<ToolResult>(&part)) {
      for (auto& item : r->content) {
        if (auto* it = std::get_if<Text>(&item)) {
          if (CountCodePoints(it->text) > result_cap) it->text = ClipText(it->text, result_cap);
        }
      }
    }
  }
}

ReduceResult ReduceTail(const Transcript& t, std::size_t target_chars) {
  ReduceResult result;
  result.transcript = t;
  result.before_chars = t.chars();
  result.after_chars = result.before_chars;
  result.fits = result.before_chars <= target_chars;
  if (result.fits) return result;

  const std::size_t n = t.size();
  std::vector<Sizes> sizes(n);
  std::vector<std::uint8_t> measured(n, 0);
  std::vector<std::pair<std::size_t, Message>> edits;
  std::vector<std::size_t> edit_of(n, SIZE_MAX);
  std::size_t total = result.before_chars;

  for (std::size_t round = 0; round < kToolResultCaps.size() && total > target_chars; ++round) {
    const std::size_t result_cap = kToolResultCaps[round];
    const std::size_t content_cap = kContentCaps[round];
    const std::size_t smallest_cap = std::min(result_cap, content_cap);
    result.rounds = static_cast<int>(round) + 1;

    std::vector<std::size_t> over;
    for (std::size_t i = 0; i < n; ++i) {
      if (t[i].summary) continue;
      const std::size_t chars = edit_of[i] != SIZE_MAX ? sizes[i].chars : t.chars(i);
      if (chars <= smallest_cap) continue;
      if (!measured[i]) {
        sizes[i] = Measure(t[i], chars);
        measured[i] = 1;
      }
      if (sizes[i].max_content > content_cap || sizes[i].max_result > result_cap) {
        over.push_back(i);
      }
    }
    std::stable_sort(over.begin(), over.end(),
                     [&](std::size_t a, std::size_t b) { return sizes[a].chars > sizes[b].chars; });

    for (std::size_t i : over) {
      if (total <= target_chars) break;
      Message m = edit_of[i] == SIZE_MAX ? t[i] : edits[edit_of[i]].second;
      ClipMessage(m, content_cap, result_cap);
      const std::size_t new_chars = MessageChars(m);
      if (new_chars >= sizes[i].chars) continue;
      total = total - sizes[i].chars + new_chars;
      sizes[i] = Measure(m, new_chars);
      if (edit_of[i] == SIZE_MAX) {
        edit_of[i] = edits.size();
        edits.emplace_back(i, std::move(m));
      } else {
        edits[edit_of[i]].second = std::move(m);
      }
      ++result.clips;
    }
  }

  for (const auto& e : edits) result.clipped.push_back(e.first);
  std::sort(result.clipped.begin(), result.clipped.end());
  result.transcript.Set(std::move(edits));
  result.after_chars = result.transcript.chars();
  result.fits = result.after_chars <= target_chars;
  return result;
}

}  // namespace old_impl

namespace {

using namespace recap;
using recap_test::MixSeed;
using recap_test::Rng;

std::optional<std::uint64_t> ReplaySeed() {
  const char* s = std::getenv("RECAP_SEED");
  if (s == nullptr || *s == '\0') return std::nullopt;
  return std::strtoull(s, nullptr, 0);
}

// Runs body(seed) for `cases` seeds derived from `run_seed`, or only RECAP_SEED when set.
template <class Body>
void ForEachSeed(std::uint64_t run_seed, std::size_t cases, Body&& body) {
  if (auto seed = ReplaySeed()) {
    body(*seed);
    return;
  }
  for (std::size_t i = 0; i < cases; ++i) body(MixSeed(run_seed, i));
}

std::string Hex(std::string_view s) {
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out;
  for (unsigned char c : s.substr(0, 400)) {
    if (c >= 0x20 && c < 0x7F && c != '\\') {
      out.push_back(static_cast<char>(c));
    } else {
      out += "\\x";
      out.push_back(kHex[c >> 4]);
      out.push_back(kHex[c & 0xF]);
    }
  }
  if (s.size() > 400) out += "...(" + std::to_string(s.size()) + " bytes)";
  return out;
}

// ---- A generator of nasty argument texts ---------------------------------------------------

void AppendUtf8(std::string& s, char32_t c) {
  if (c < 0x80) {
    s += static_cast<char>(c);
  } else if (c < 0x800) {
    s += static_cast<char>(0xC0 | (c >> 6));
    s += static_cast<char>(0x80 | (c & 0x3F));
  } else if (c < 0x10000) {
    s += static_cast<char>(0xE0 | (c >> 12));
    s += static_cast<char>(0x80 | ((c >> 6) & 0x3F));
    s += static_cast<char>(0x80 | (c & 0x3F));
  } else {
    s += static_cast<char>(0xF0 | (c >> 18));
    s += static_cast<char>(0x80 | ((c >> 12) & 0x3F));
    s += static_cast<char>(0x80 | ((c >> 6) & 0x3F));
    s += static_cast<char>(0x80 | (c & 0x3F));
  }
}

class JsonFuzz {
 public:
  explicit JsonFuzz(Rng& rng) : rng_(rng) {}

  // The raw content of a JSON string (between the quotes) of about `len` code points.
  std::string StringContent(std::size_t len, bool allow_invalid) {
    std::string s;
    static const char* const kEscapes[] = {"\\\"", "\\\\", "\\/", "\\b",
                                           "\\f",  "\\n",  "\\r", "\\t"};
    static const char* const kUnicode[] = {
        "\\u0000", "\\u001f",        "\\u0001",        "\\u0008", "\\u000A", "\\u0022", "\\u005c",
        "\\u002F", "\\u0041",        "\\u007f",        "\\u0080", "\\u00e9", "\\u00E9", "\\u4e2d",
        "\\uFFFF", "\\ud83d\\ude00", "\\uD834\\uDD1E", "\\u2026", "\\uffFD", "\\u0020"};
    const int mode = static_cast<int>(rng_.Below(6));  // 0: plain ASCII, others: mixes
    for (std::size_t k = 0; k < len; ++k) {
      const std::uint64_t r = mode == 0 ? 0 : rng_.Below(100);
      if (r < 70) {
        const std::uint64_t a = rng_.Below(40);
        s += a < 26    ? static_cast<char>('a' + a)
             : a < 30  ? ' '
             : a < 32  ? '/'
             : a < 34  ? '.'
             : a == 34 ? '\x7F'
                       : ',';
      } else if (r < 78) {
        s += kEscapes[rng_.Below(8)];
      } else if (r < 86) {
        s += kUnicode[rng_.Below(sizeof kUnicode / sizeof *kUnicode)];
      } else if (r < 90) {
        AppendUtf8(s, static_cast<char32_t>(0xC0 + rng_.Below(0x700)));
      } else if (r < 94) {
        AppendUtf8(s, static_cast<char32_t>(0x4E00 + rng_.Below(0x500)));
      } else if (r < 97) {
        AppendUtf8(s, static_cast<char32_t>(0x1F600 + rng_.Below(0x40)));
      } else if (allow_invalid && rng_.OneIn(20)) {
        static const char* const kBad[] = {
            "\\ud800",  "\\udc00",  "\\ud800x",     "\\x", "\\u12", "\x01",   "\xFF",
            "\xE2\x82", "\xC0\xAF", "\xED\xA0\x80", "\t",  "\n",    "\\U0041"};
        s += kBad[rng_.Below(sizeof kBad / sizeof *kBad)];
      } else {
        s += "\\u00";
        s += "0123456789abcdef"[rng_.Below(2)];
        s += "0123456789abcdefABCDEF"[rng_.Below(22)];
      }
    }
    return s;
  }

  std::size_t StringLength() {
    const std::uint64_t r = rng_.Below(100);
    if (r < 35) return rng_.Size(0, 40);
    if (r < 75) return rng_.Size(20, 300);
    if (r < 98) return rng_.Size(300, 2000);
    return rng_.Size(2000, 12000);
  }

  std::string Ws() {
    if (!pretty_ || rng_.Below(3) != 0) return "";
    static const char* const kWs[] = {" ", "\n  ", "\t", "\r\n", "  "};
    return kWs[rng_.Below(5)];
  }

  std::string Number() {
    static const char* const kNums[] = {"0",
                                        "-0",
                                        "1",
                                        "-1",
                                        "42",
                                        "123456789012345678",
                                        "-123456789012345678",
                                        "1234567890123456789",
                                        "18446744073709551615",
                                        "18446744073709551616",
                                        "-9223372036854775808",
                                        "99999999999999999999999",
                                        "1.5",
                                        "-2.25",
                                        "1e5",
                                        "1E+2",
                                        "-3.0e-3",
                                        "0.0",
                                        "1.0",
                                        "0.1",
                                        "3.141592653589793",
                                        "1e400",
                                        "-0.0",
                                        "2e-400"};
    if (!rng_.OneIn(4)) return std::to_string(rng_.Between(-100000, 100000));
    return kNums[rng_.Below(sizeof kNums / sizeof *kNums)];
  }

  std::string Value(int depth, bool allow_invalid) {
    const std::uint64_t r = rng_.Below(100);
    if (depth < 4 && r < 25) {
      std::string s = "{" + Ws();
      const std::size_t members = rng_.Size(0, depth < 2 && rng_.OneIn(10) ? 30 : 4);
      std::vector<std::string> keys;
      for (std::size_t k = 0; k < members; ++k) {
        if (k > 0) s += Ws() + "," + Ws();
        std::string key;
        if (!keys.empty() && rng_.OneIn(30)) {
          key = rng_.Pick(keys);  // a duplicate
        } else if (rng_.OneIn(15)) {
          key = StringContent(rng_.Size(0, 12), allow_invalid);
        } else {
          key = "k" + std::to_string(rng_.Below(50));
          if (rng_.OneIn(20)) key += "\xC3\xA9";
        }
        keys.push_back(key);
        s += "\"" + key + "\"" + Ws() + ":" + Ws() + Value(depth + 1, allow_invalid);
      }
      return s + Ws() + "}";
    }
    if (depth < 4 && r < 40) {
      std::string s = "[" + Ws();
      const std::size_t n = rng_.Size(0, 6);
      for (std::size_t k = 0; k < n; ++k) {
        if (k > 0) s += Ws() + "," + Ws();
        s += Value(depth + 1, allow_invalid);
      }
      return s + Ws() + "]";
    }
    if (r < 80) return "\"" + StringContent(StringLength(), allow_invalid) + "\"";
    if (r < 90) return Number();
    static const char* const kLits[] = {"true", "false", "null"};
    return kLits[rng_.Below(3)];
  }

  std::string Arguments() {
    pretty_ = rng_.OneIn(4);
    const bool allow_invalid = rng_.OneIn(10);
    std::string s;
    if (rng_.OneIn(8)) {
      s = Value(0, allow_invalid);
    } else {  // an object, as arguments normally are
      s = "{";
      const std::size_t members = rng_.Size(1, 6);
      for (std::size_t k = 0; k < members; ++k) {
        if (k > 0) s += ",";
        s += "\"a" + std::to_string(k) + "\":" + Value(1, allow_invalid);
      }
      s += "}";
    }
    if (pretty_ && rng_.OneIn(3)) s = " \n" + s + "\n ";
    if (rng_.OneIn(12)) Mutate(s);
    return s;
  }

  void Mutate(std::string& s) {
    switch (rng_.Below(8)) {
      case 0:  // truncated
        s.resize(rng_.Size(0, s.size()));
        break;
      case 1: s += rng_.OneIn(2) ? "}" : " x"; break;
      case 2:
        s = "\xEF\xBB\xBF" + s;  // a BOM
        break;
      case 3: s.insert(rng_.Size(0, s.size()), 1, '\0'); break;
      case 4:
        if (!s.empty()) s[rng_.Size(0, s.size() - 1)] = static_cast<char>(rng_.Below(256));
        break;
      case 5: s += std::string(1, '\0') + "garbage"; break;
      case 6: s = "[" + s + "," + s + "]"; break;
      default:
        s += "\x0B";  // vertical tab: not JSON whitespace
        break;
    }
  }

 private:
  Rng& rng_;
  bool pretty_ = false;
};

std::size_t RandomCap(Rng& rng, std::size_t chars) {
  static const std::size_t kCaps[] = {0,   1,   5,   30,   31,   32,   33,   34,   40,   64,
                                      100, 256, 512, 1000, 1024, 2048, 4096, 8000, 8192, 16000};
  if (rng.OneIn(3)) return rng.Size(0, chars + 50);
  if (rng.OneIn(4)) return chars > 0 ? chars - 1 : 0;
  return kCaps[rng.Below(sizeof kCaps / sizeof *kCaps)];
}

void CheckSameClip(const std::string& args, std::size_t cap, std::uint64_t seed) {
  const std::string want = old_impl::ClipArguments(args, cap);
  const std::string got = ClipArguments(args, cap);
  if (got != want) {
    INFO("RECAP_SEED=" << seed << " cap " << cap << "\narguments: " << Hex(args)
                       << "\nwant: " << Hex(want) << "\ngot:  " << Hex(got));
    FAIL("ClipArguments differs from the reference");
  }
}

}  // namespace

namespace {

// Bytes built from pieces that put every kind of sequence at every alignment: ASCII runs of
// all lengths (the scanner takes 64 and 16 bytes at a time), well-formed sequences at the edges
// of their ranges, and ill-formed ones (overlongs, surrogates, beyond U+10FFFF, stray and
// truncated sequences).
std::string RandomBytes(Rng& rng) {
  static const char* const kValid[] = {"\xC2\x80",         "\xDF\xBF",         "\xC3\xA9",
                                       "\xE0\xA0\x80",     "\xE1\x80\x80",     "\xEC\xBF\xBF",
                                       "\xED\x80\x80",     "\xED\x9F\xBF",     "\xEE\x80\x80",
                                       "\xEF\xBF\xBF",     "\xE4\xB8\xAD",     "\xF0\x90\x80\x80",
                                       "\xF0\x9F\x98\x80", "\xF1\x80\x80\x80", "\xF3\xBF\xBF\xBF",
                                       "\xF4\x80\x80\x80", "\xF4\x8F\xBF\xBF", "\xE2\x80\xA6"};
  static const char* const kInvalid[] = {"\x80",
                                         "\xBF",
                                         "\xC0\x80",
                                         "\xC1\xBF",
                                         "\xE0\x80\x80",
                                         "\xE0\x9F\xBF",
                                         "\xED\xA0\x80",
                                         "\xED\xBF\xBF",
                                         "\xF0\x80\x80\x80",
                                         "\xF0\x8F\xBF\xBF",
                                         "\xF4\x90\x80\x80",
                                         "\xF5\x80\x80\x80",
                                         "\xF8",
                                         "\xFF",
                                         "\xE2\x82",
                                         "\xF0\x9F\x98",
                                         "\xC3",
                                         "\xE2"};
  std::string s;
  const std::size_t pieces = rng.Size(0, rng.OneIn(4) ? 400 : 60);
  const bool invalid = rng.OneIn(3);
  const int density = static_cast<int>(rng.Below(4));  // how much is not ASCII
  for (std::size_t k = 0; k < pieces; ++k) {
    const std::uint64_t r = rng.Below(100);
    if (r < 40 + 15 * density) {
      s += kValid[rng.Below(sizeof kValid / sizeof *kValid)];
    } else if (invalid && r < 45 + 15 * density) {
      s += kInvalid[rng.Below(sizeof kInvalid / sizeof *kInvalid)];
    } else {
      const std::size_t run = rng.OneIn(3) ? rng.Size(0, 200) : rng.Size(0, 20);
      for (std::size_t j = 0; j < run; ++j)
        s += static_cast<char>(rng.OneIn(50) ? rng.Below(0x20) : 0x20 + rng.Below(0x5F));
    }
  }
  return s;
}

// SPEC §1's count read byte by byte, from the table of well-formed sequences (Unicode 3.9,
// table 3-7), written here apart from recap's own: a well-formed sequence is one character,
// and so is every byte that starts none; the text is valid when there is no such byte.
// CountCodePoints, IsValidUtf8 and ScanCodePoints share one vectorized pass; this is what they
// are held to.
struct ReferenceScan {
  std::size_t count = 0;
  bool valid = true;
};
ReferenceScan ReadByteByByte(const std::string& s) {
  auto in = [&](std::size_t i, unsigned lo, unsigned hi) {
    if (i >= s.size()) return false;
    const auto b = static_cast<unsigned char>(s[i]);
    return b >= lo && b <= hi;
  };
  ReferenceScan out;
  std::size_t i = 0;
  while (i < s.size()) {
    const auto b = static_cast<unsigned char>(s[i]);
    std::size_t len = 0;
    if (b <= 0x7F) {
      len = 1;
    } else if (b >= 0xC2 && b <= 0xDF) {
      len = in(i + 1, 0x80, 0xBF) ? 2 : 0;
    } else if (b >= 0xE0 && b <= 0xEF) {
      const unsigned lo = b == 0xE0 ? 0xA0 : 0x80;
      const unsigned hi = b == 0xED ? 0x9F : 0xBF;
      len = in(i + 1, lo, hi) && in(i + 2, 0x80, 0xBF) ? 3 : 0;
    } else if (b >= 0xF0 && b <= 0xF4) {
      const unsigned lo = b == 0xF0 ? 0x90 : 0x80;
      const unsigned hi = b == 0xF4 ? 0x8F : 0xBF;
      len = in(i + 1, lo, hi) && in(i + 2, 0x80, 0xBF) && in(i + 3, 0x80, 0xBF) ? 4 : 0;
    }
    if (len == 0) out.valid = false;
    i += len == 0 ? 1 : len;
    ++out.count;
  }
  return out;
}

}  // namespace

TEST_CASE(
    "CountCodePoints and IsValidUtf8 read as SPEC section 1 does byte by byte, at every offset") {
  // The vectorized pass takes 64 ASCII bytes or 16 well-formed ones at a time: each text is
  // also counted from every start within the first 70 bytes, so that every kind of byte
  // falls at every place of a block.
  ForEachSeed(0x5CA8u, 4000, [&](std::uint64_t seed) {
    Rng rng(seed);
    std::string text = RandomBytes(rng);
    if (rng.OneIn(3)) text = std::string(rng.Size(0, 130), 'a') + text + std::string(64, 'z');
    for (std::size_t from = 0; from < std::min<std::size_t>(text.size() + 1, 70); ++from) {
      const std::string part = text.substr(from);
      const std::size_t got = CountCodePoints(part);
      const bool valid = IsValidUtf8(part);
      const ReferenceScan want = ReadByteByByte(part);
      if (got != want.count || valid != want.valid) {
        FAIL("RECAP_SEED=" << seed << " from byte " << from << ": " << got << " code points (want "
                           << want.count << "), valid " << valid << " (want " << want.valid
                           << ")\ntext: " << Hex(part));
      }
    }
  });
}

TEST_CASE("ScanCodePoints reads as CountCodePoints, PrefixBytesForCodePoints and IsValidUtf8 do") {
  ForEachSeed(0x5CA9u, 4000, [&](std::uint64_t seed) {
    Rng rng(seed);
    const std::string text = RandomBytes(rng);
    const std::size_t total = CountCodePoints(text);
    for (int k = 0; k < 4; ++k) {
      const std::size_t max = k == 0 ? SIZE_MAX : rng.Size(0, total + 3);
      const Utf8Scan s = ScanCodePoints(text, 0, max);
      const std::size_t want_end = PrefixBytesForCodePoints(text, max);
      const bool want_valid = IsValidUtf8(std::string_view(text).substr(0, want_end));
      if (s.end != want_end || s.code_points != std::min(total, max) || s.valid != want_valid) {
        FAIL("RECAP_SEED=" << seed << " max " << max << ": end " << s.end << " (want " << want_end
                           << "), code points " << s.code_points << " (want "
                           << std::min(total, max) << "), valid " << s.valid << " (want "
                           << want_valid << ")\ntext: " << Hex(text));
      }
      // Resumed from where it stopped, it goes on as one scan would.
      const std::size_t more = rng.Size(0, total + 3);
      const Utf8Scan t = ScanCodePoints(text, s.end, more);
      const std::size_t upto = s.code_points + more;
      const std::size_t want_end2 = PrefixBytesForCodePoints(text, upto);
      const bool want_valid2 = IsValidUtf8(std::string_view(text).substr(s.end, want_end2 - s.end));
      if (t.end != want_end2 || s.code_points + t.code_points != std::min(total, upto) ||
          t.valid != want_valid2) {
        FAIL("RECAP_SEED=" << seed << " resumed at " << s.end << " for " << more << ": end "
                           << t.end << " (want " << want_end2 << "), valid " << t.valid
                           << "\ntext: " << Hex(text));
      }
    }
  });
}

TEST_CASE("ScanWellFormed reads well-formed text as ScanCodePoints does") {
  // The reducer counts the texts of messages the transcript checked by their lead bytes only.
  ForEachSeed(0x5CAAu, 4000, [&](std::uint64_t seed) {
    Rng rng(seed);
    std::string text = RandomBytes(rng);
    if (!IsValidUtf8(text)) text = ToValidUtf8(text);
    if (rng.OneIn(4)) text = std::string(rng.Size(0, 300), 'a') + text;  // long ASCII runs
    const std::size_t total = CountCodePoints(text);
    for (int k = 0; k < 4; ++k) {
      const std::size_t max = k == 0 ? SIZE_MAX : rng.Size(0, total + 3);
      const Utf8Scan want = ScanCodePoints(text, 0, max);
      const Utf8Scan got = utf8::ScanWellFormed(text, max);
      if (got.end != want.end || got.code_points != want.code_points || !got.valid) {
        FAIL("RECAP_SEED=" << seed << " max " << max << ": end " << got.end << " (want " << want.end
                           << "), code points " << got.code_points << " (want " << want.code_points
                           << ")\ntext: " << Hex(text));
      }
    }
  });
}

TEST_CASE("R6.3 ClipArguments matches the reference on generated JSON, byte for byte") {
  std::size_t cases = 0;
  ForEachSeed(0xA59u, 3000, [&](std::uint64_t seed) {
    Rng rng(seed);
    JsonFuzz fuzz(rng);
    const std::string args = fuzz.Arguments();
    const std::size_t chars = CountCodePoints(args);
    for (int k = 0; k < 3; ++k) {
      CheckSameClip(args, RandomCap(rng, chars), seed);
      ++cases;
    }
  });
  INFO(cases << " cases");
  SUCCEED();
}

TEST_CASE("R6.3 ClipArguments matches the reference on the property generator's arguments") {
  ForEachSeed(0xB17u, 3000, [&](std::uint64_t seed) {
    Rng rng(seed);
    const std::size_t size = rng.LogSize(10, 600, 30000);
    std::string args;
    switch (rng.Below(4)) {
      case 0: args = recap_test::RandomJsonArguments(rng, size, /*pretty=*/true); break;
      case 1:
        args = recap_test::RandomJsonArguments(rng, size, false, /*top_level_non_object=*/true);
        break;
      case 2: args = recap_test::RandomInvalidJson(rng, size); break;
      default: args = recap_test::RandomJsonArguments(rng, size, false); break;
    }
    const std::size_t chars = CountCodePoints(args);
    for (int k = 0; k < 3; ++k) CheckSameClip(args, RandomCap(rng, chars), seed);
  });
}

TEST_CASE("R6.3 ClipArguments matches the reference on chosen edge cases") {
  const std::string big(3000, 'x');
  const std::vector<std::string> inputs = {
      "{\"a\":\"" + big + "\"}",
      "  {\"a\" : \"" + big + "\" , \"b\" : [ 1 , 2 , true , null ] }  ",
      "\"" + big + "\"",
      "[\"" + big + "\",\"" + big + "\"]",
      "{\"a\":\"" + big + "\",\"a\":\"short\"}",             // duplicate key
      "{\"a\":\"" + big + "\",\"b\":1.5}",                   // a float
      "{\"a\":\"" + big + "\",\"b\":-0}",                    // -0
      "{\"a\":\"" + big + "\",\"b\":12345678901234567890}",  // 20 digits
      "{\"a\":\"" + big + "\",\"b\":1e3}",
      "\xEF\xBB\xBF{\"a\":\"" + big + "\"}",             // a BOM
      "{\"a\":\"" + big + "\"}" + std::string(1, '\0'),  // a NUL after the document
      "{\"a\":\"" + big + "\\u0000\\n\\\"\\\\\\/\\ud83d\\ude00\"}",
      "{\"\\u00e9\\n\":\"" + big + "\"}",  // an escaped key
      "{\"k\\u0000\":\"" + big + "\",\"k\\u0000\":\"x\"}",
      "{\"a\":\"" + big + "\\ud800\"}",  // a lone surrogate
      "{\"a\":\"" + big + "\xFF\"}",     // invalid UTF-8
      "{\"a\":\"" + big,                 // unterminated
      "{\"a\":[" + std::string(300, '[') + "\"" + big + "\"" + std::string(300, ']') +
          "]}",  // deep
      "{" +
          [] {
            std::string s;
            for (int i = 0; i < 400; ++i)
              s += (i ? ",\"k" : "\"k") + std::to_string(i) + "\":\"vvvvvvvvvv\"";
            return s;
          }() +
          "}",  // many short strings: the structure alone is over small caps
      "{\"a\":\"" + std::string(32, 'y') + "\",\"b\":\"" + std::string(32, 'z') + "\"}",
      "{\"a\":\"" + std::string(33, 'y') + "\",\"b\":\"" + std::string(31, 'z') + "\"}",
      "{\"a\":\"" + std::string(200, '\n') + "\"}",
      "{\"a\":\"" +
          [] {
            std::string s;
            for (int i = 0; i < 500; ++i) s += "\\u0001\\t";
            return s;
          }() +
          "\"}",
  };
  for (std::size_t k = 0; k < inputs.size(); ++k) {
    const std::size_t chars = CountCodePoints(inputs[k]);
    for (std::size_t cap :
         {std::size_t{0}, std::size_t{31}, std::size_t{32}, std::size_t{33}, std::size_t{64},
          std::size_t{100}, std::size_t{500}, std::size_t{1024}, std::size_t{2999},
          std::size_t{3000}, std::size_t{3100}, chars - 1, chars}) {
      CheckSameClip(inputs[k], cap, k);
    }
  }
}

namespace {

// A transcript with much over the reducer's caps, from the property generator with extra
// shapes mixed in: argument texts whose structure alone is over the caps, several texts and
// items per message, opaque payloads, checkpoints, equal sizes (ties).
Transcript DiffTranscript(std::uint64_t seed) {
  Rng rng(seed);
  recap_test::GeneratorOptions base;
  base.exceed_caps = rng.OneIn(2);
  base.max_turns = static_cast<int>(rng.Size(1, 8));
  if (rng.OneIn(3)) base.args_median = 3000;
  if (rng.OneIn(5)) base.huge_item = 0.5;
  base.huge_max = 300000;
  recap_test::GeneratorOptions options = recap_test::JitterOptions(rng, base);
  std::vector<Message> messages = recap_test::GenerateMessages(seed, options);
  JsonFuzz fuzz(rng);
  const std::size_t extra = rng.Size(0, 6);
  for (std::size_t k = 0; k < extra; ++k) {
    Message m;
    m.role = rng.OneIn(2) ? Role::kAssistant : Role::kUser;
    m.id = "x" + std::to_string(k);
    const std::size_t parts = rng.Size(1, 4);
    for (std::size_t p = 0; p < parts; ++p) {
      switch (rng.Below(5)) {
        case 0:
          m.parts.emplace_back(Text{recap_test::RandomText(rng, rng.LogSize(0, 9000, 40000),
                                                           recap_test::TextStyle::kAnyMix),
                                    rng.OneIn(4) ? "{\"e\":1}" : ""});
          break;
        case 1: {
          std::string args = fuzz.Arguments();
          if (!IsValidUtf8(args)) args = ToValidUtf8(args);
          m.parts.emplace_back(
              ToolCall{"c" + std::to_string(p), "tool\xC3\xA9", std::move(args), ""});
          break;
        }
        case 2: {
          ToolResult r;
          r.call_id = "c" + std::to_string(p);
          const std::size_t items = rng.Size(1, 3);
          for (std::size_t j = 0; j < items; ++j) {
            if (rng.OneIn(4)) {
              r.content.emplace_back(
                  Opaque{"image",
                         "{\"data\":\"" + std::string(rng.Size(0, 5000), 'A') + "\"}",
                         OpaqueLink::kNone,
                         {}});
            } else {
              r.content.emplace_back(Text{recap_test::RandomText(rng, rng.LogSize(0, 4000, 30000),
                                                                 recap_test::TextStyle::kMixed),
                                          ""});
            }
          }
          m.parts.emplace_back(std::move(r));
          break;
        }
        case 3:
          m.parts.emplace_back(
              Opaque{"thinking", std::string(rng.Size(0, 20000), 't'), OpaqueLink::kNone, {}});
          break;
        default: {
          std::string many = "{";
          const std::size_t n = rng.Size(50, 400);
          for (std::size_t i = 0; i < n; ++i)
            many += (i ? ",\"k" : "\"k") + std::to_string(i) + "\":\"vvvvvvvvvvvv\"";
          many += "}";
          m.parts.emplace_back(ToolCall{"m" + std::to_string(p), "many", std::move(many), ""});
          break;
        }
      }
    }
    m.summary = rng.OneIn(10);
    messages.insert(messages.begin() + static_cast<std::ptrdiff_t>(rng.Size(0, messages.size())),
                    std::move(m));
  }
  if (rng.OneIn(3) && !messages.empty()) {  // ties: copies of one message
    const Message copy = messages[rng.Size(0, messages.size() - 1)];
    for (int k = 0; k < 3; ++k) {
      Message c = copy;
      c.id.clear();
      messages.insert(messages.begin() + static_cast<std::ptrdiff_t>(rng.Size(0, messages.size())),
                      std::move(c));
    }
  }
  return Transcript(std::move(messages));
}

std::vector<std::size_t> Targets(Rng& rng, std::size_t chars) {
  std::vector<std::size_t> out = {0, chars / 2, chars > 0 ? chars - 1 : 0, chars};
  for (int k = 0; k < 4; ++k) out.push_back(rng.Size(0, chars));
  return out;
}

void CheckSameReduce(const Transcript& t, std::size_t target, std::uint64_t seed) {
  const ReduceResult want = old_impl::ReduceTail(t, target);
  const ReduceResult got = ReduceTail(t, target);
  INFO("RECAP_SEED=" << seed << " target " << target << " chars " << t.chars() << " messages "
                     << t.size());
  CHECK(got.clipped == want.clipped);
  CHECK(got.clips == want.clips);
  CHECK(got.before_chars == want.before_chars);
  CHECK(got.after_chars == want.after_chars);
  CHECK(got.rounds == want.rounds);
  CHECK(got.fits == want.fits);
  CHECK(got.transcript.chars() == want.transcript.chars());
  const std::string diff = recap_test::DiffTranscripts(got.transcript, want.transcript);
  CHECK(diff == "");
  for (std::size_t i = 0; i < got.transcript.size(); ++i) {
    if (got.transcript.chars(i) != MessageChars(got.transcript[i])) {
      FAIL("message " << i << " is recorded with " << got.transcript.chars(i) << " chars, has "
                      << MessageChars(got.transcript[i]));
    }
    if (!std::binary_search(got.clipped.begin(), got.clipped.end(), i)) {
      CHECK(got.transcript.shared(i).get() == t.shared(i).get());  // unchanged: shared
    }
  }
}

}  // namespace

TEST_CASE("R6.2-R6.4 ReduceTail matches the reference on generated transcripts") {
  // 150 transcripts; 75 in the sanitizer builds (support/build_speed.h).
  ForEachSeed(0x7A11u, recap_test::kSlowBuild ? 75 : 150, [&](std::uint64_t seed) {
    const Transcript t = DiffTranscript(seed);
    // The same messages appended as shared objects: the transcript did not check them itself
    // (no Transcript::kWellFormedFact), so the reducer checks what it copies.
    Transcript vouched;
    for (std::size_t i = 0; i < t.size(); ++i) vouched.Append(t.shared(i));
    Rng rng(MixSeed(seed, 99));
    for (std::size_t target : Targets(rng, t.chars())) {
      CheckSameReduce(t, target, seed);
      CheckSameReduce(vouched, target, seed);
    }
  });
}

TEST_CASE("R6.2 ReduceTail matches the reference when messages break the UTF-8 contract") {
  // Messages handed over as shared objects are not checked by the Transcript (the caller
  // vouches for them). Should one hold invalid UTF-8 anyway, the clipped copy is repaired as
  // Transcript::Set always did.
  Transcript t;
  auto add = [&](Message m) { t.Append(std::make_shared<const Message>(std::move(m))); };
  Message a = Message::UserText(std::string(20000, 'a') + "\xFF" + std::string(100, 'b'));
  a.id = "a";
  add(a);
  Message b = Message::UserText("\xC3" + std::string(20000, 'c'));
  b.id = "b";
  add(b);
  Message c = Message::ToolOutput("call\xFE", std::string(9000, 'r'));
  c.id = "c\xFF";
  add(c);
  Message d = Message::AssistantCalls(
      {ToolCall{"k", "run", "{\"x\":\"" + std::string(17000, 'x') + "\xFF\"}", ""}});
  d.id = "d";
  add(d);
  Message e = Message::UserText(std::string(20000, 'e'));
  e.id = "e";
  add(e);
  Message f = Message::UserText("\xFF");  // one byte: one code point, not a valid one
  f.parts.emplace_back(Text{std::string(20000, 'f'), ""});
  f.parts.emplace_back(Text{"\xC3", "{\"x\":\"\xFF\"}"});
  f.id = "f";
  add(f);
  for (std::size_t target : {std::size_t{0}, t.chars() - 1, t.chars() / 2, std::size_t{30000}}) {
    CheckSameReduce(t, target, 0);
    const ReduceResult r = ReduceTail(t, target);
    for (std::size_t i : r.clipped)
      CHECK(IsValidUtf8(r.transcript[i].parts.empty() ? "" : JoinedText(r.transcript[i])));
  }
}
