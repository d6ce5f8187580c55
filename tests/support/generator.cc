#include "support/generator.h"

#include <algorithm>
#include <cstdio>
#include <string_view>

namespace recap_test {
namespace {

using recap::Message;
using recap::Opaque;
using recap::OpaqueLink;
using recap::Part;
using recap::ResultItem;
using recap::Role;
using recap::Text;
using recap::ToolCall;
using recap::ToolResult;

// ---------------------------------------------------------------------------------------------
// Character pools (each entry one code point, UTF-8).

const std::vector<std::string_view> kWords = {
    "the",    "file",   "error",  "build",   "path",    "src",     "main",    "config", "value",
    "test",   "return", "index",  "result",  "data",    "user",    "request", "tool",   "json",
    "line",   "module", "import", "class",   "struct",  "vector",  "string",  "ok",     "failed",
    "cannot", "open",   "read",   "write",   "commit",  "branch",  "merge",   "patch",  "diff",
    "flight", "seat",   "refund", "booking", "airport", "payment", "a",       "I",      "we",
    "is",     "was",    "will",   "not",     "with",    "from",    "into",    "then",   "when"};
const std::vector<std::string_view> kTwoByte = {
    "é", "ü", "ñ", "ß", "ø", "å", "ç", "Ω", "π", "д", "ж", "λ", "ł", "ő", "\xC2\x80", "\xDF\xBF"};
const std::vector<std::string_view> kThreeByte = {"€",
                                                  "✓",
                                                  "→",
                                                  "中",
                                                  "文",
                                                  "字",
                                                  "日",
                                                  "本",
                                                  "한",
                                                  "글",
                                                  "ー",
                                                  "…",
                                                  "∑",
                                                  "√",
                                                  "★",
                                                  "\xE0\xA0\x80" /* U+0800 */,
                                                  "\xED\x9F\xBF" /* U+D7FF */,
                                                  "\xEE\x80\x80" /* U+E000 */,
                                                  "\xEF\xBB\xBF" /* BOM */,
                                                  "\xEF\xBF\xBD" /* U+FFFD */,
                                                  "\xEF\xBF\xBF" /* U+FFFF */};
const std::vector<std::string_view> kFourByte = {"😀",
                                                 "𝄞",
                                                 "🎉",
                                                 "🚀",
                                                 "𐍈",
                                                 "🤖",
                                                 "👍",
                                                 "🧪",
                                                 "𠜎",
                                                 "𝕏",
                                                 "\xF0\x90\x80\x80" /* U+10000 */,
                                                 "\xF4\x8F\xBF\xBF" /* U+10FFFF */};
const std::vector<std::string_view> kCodePunct = {"{",  "}", "(", ")", ";", "\"", "'", "\\", "\t",
                                                  "\n", "=", "<", ">", "/", "*",  "#", ":",  ",",
                                                  "[",  "]", "&", "|", "$", "%",  "`", "~"};
const std::vector<std::string_view> kPunct = {
    " ", " ", " ", " ", ",", ".", "\n", "!", "?", "-", "\r\n" /* 2 code points, handled */};
const std::string_view kCombiningAcute = "\xCC\x81";  // U+0301
const std::string_view kZwj = "\xE2\x80\x8D";         // U+200D

const std::vector<std::string_view> kToolNames = {"bash",
                                                  "read_file",
                                                  "write_file",
                                                  "edit",
                                                  "grep",
                                                  "glob",
                                                  "list_dir",
                                                  "web_fetch",
                                                  "python",
                                                  "str_replace_editor",
                                                  "think",
                                                  "TodoWrite",
                                                  "get_reservation_details",
                                                  "search_direct_flight",
                                                  "update_reservation_flights",
                                                  "mcp__github__create_issue",
                                                  "outil_données",
                                                  "检索"};

const char kBase62[] = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz";
const char kBase64[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

// Decodes one code point of valid UTF-8 at s[i]; returns its byte length.
std::size_t DecodeValid(std::string_view s, std::size_t i, std::uint32_t* cp) {
  const auto b0 = static_cast<unsigned char>(s[i]);
  if (b0 < 0x80) {
    *cp = b0;
    return 1;
  }
  std::size_t len = b0 >= 0xF0 ? 4 : b0 >= 0xE0 ? 3 : 2;
  std::uint32_t v = b0 & (len == 2 ? 0x1F : len == 3 ? 0x0F : 0x07);
  for (std::size_t k = 1; k < len && i + k < s.size(); ++k) {
    v = (v << 6) | (static_cast<unsigned char>(s[i + k]) & 0x3F);
  }
  *cp = v;
  return len;
}

void AppendHex4(std::string& out, std::uint32_t v, bool upper) {
  char buf[8];
  std::snprintf(buf, sizeof buf, upper ? "%04X" : "%04x", static_cast<unsigned>(v));
  out += buf;
}

}  // namespace

// ---------------------------------------------------------------------------------------------
// Rng

std::uint64_t MixSeed(std::uint64_t a, std::uint64_t b) noexcept {
  std::uint64_t z = a + 0x9E3779B97F4A7C15ULL * (b + 1);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
  return z ^ (z >> 31);
}

std::uint64_t Rng::Below(std::uint64_t n) {
  if (n == 0) return 0;
  // Rejection sampling: accept values below the largest multiple of n.
  const std::uint64_t limit = ~std::uint64_t{0} - (~std::uint64_t{0} % n) - 1;
  std::uint64_t x;
  do {
    x = engine_();
  } while (x > limit);
  return x % n;
}

std::int64_t Rng::Between(std::int64_t lo, std::int64_t hi) {
  if (hi <= lo) return lo;
  const auto span = static_cast<std::uint64_t>(hi - lo) + 1;  // hi-lo < 2^63 in our uses
  return lo + static_cast<std::int64_t>(Below(span));
}

double Rng::Unit() { return static_cast<double>(engine_() >> 11) * (1.0 / 9007199254740992.0); }

bool Rng::Chance(double p) {
  if (p <= 0) return false;
  if (p >= 1) return true;
  return Unit() < p;
}

std::size_t Rng::LogSize(std::size_t lo, std::size_t median, std::size_t hi, double octaves) {
  if (hi <= lo) return lo;
  // Sum of three uniforms: bell-shaped on [0, 3), mean 1.5, sd 0.5 -> z in [-3, 3).
  // Drawn one per statement: the operands of + are evaluated in an unspecified order, and
  // floating-point addition is not associative.
  const double u1 = Unit();
  const double u2 = Unit();
  const double u3 = Unit();
  const double z = (u1 + u2 + u3 - 1.5) * 2.0;
  double e = z * octaves;  // exponent in octaves
  // 2^e by repeated doubling plus linear interpolation inside the octave: only exactly rounded
  // operations, so the value is the same everywhere.
  double scale = 1.0;
  while (e >= 1.0) {
    scale *= 2.0;
    e -= 1.0;
  }
  while (e < 0.0) {
    scale *= 0.5;
    e += 1.0;
  }
  scale *= 1.0 + e;
  double v = static_cast<double>(median == 0 ? 1 : median) * scale;
  if (v < static_cast<double>(lo)) return lo;
  if (v > static_cast<double>(hi)) return hi;
  return static_cast<std::size_t>(v);
}

// ---------------------------------------------------------------------------------------------
// Text

TextStyle RandomStyle(Rng& rng, double multibyte, double dense_4byte) {
  if (rng.Chance(dense_4byte)) return TextStyle::kDense4Byte;
  if (rng.Chance(multibyte)) {
    switch (rng.Below(4)) {
      case 0: return TextStyle::kMixed;
      case 1: return TextStyle::kCjk;
      case 2: return TextStyle::kAnyMix;
      default: return TextStyle::kMixed;
    }
  }
  return rng.OneIn(4) ? TextStyle::kCode : TextStyle::kAscii;
}

std::string RandomText(Rng& rng, std::size_t code_points, TextStyle style) {
  std::string out;
  out.reserve(code_points + code_points / 2);
  std::size_t n = 0;  // code points written
  auto put = [&](std::string_view cp) {
    out += cp;
    ++n;
  };
  auto word = [&] {
    std::string_view w = rng.Pick(kWords);
    for (char c : w) {
      if (n >= code_points) return;
      out += c;
      ++n;
    }
  };
  auto punct = [&] {
    std::string_view p = rng.Pick(kPunct);
    if (p == "\r\n") {
      if (n + 2 > code_points)
        p = " ";
      else {
        out += p;
        n += 2;
        return;
      }
    }
    put(p);
  };
  while (n < code_points) {
    switch (style) {
      case TextStyle::kAscii:
        word();
        if (n < code_points) punct();
        break;
      case TextStyle::kMixed: {
        const auto r = rng.Below(10);
        if (r < 6) {
          word();
          if (n < code_points) punct();
        } else if (r < 8) {
          put(rng.Pick(kTwoByte));
        } else if (r < 9) {
          put(rng.Pick(kThreeByte));
        } else {
          put(rng.Pick(kFourByte));
        }
        break;
      }
      case TextStyle::kDense4Byte: {
        // Long runs of 4-byte characters, now and then broken by one other character.
        std::size_t run = rng.Size(8, 200);
        for (std::size_t k = 0; k < run && n < code_points; ++k) put(rng.Pick(kFourByte));
        if (n < code_points) {
          switch (rng.Below(4)) {
            case 0: put(" "); break;
            case 1: put(rng.Pick(kTwoByte)); break;
            case 2: put(rng.Pick(kThreeByte)); break;
            default: put(rng.Pick(kFourByte)); break;
          }
        }
        break;
      }
      case TextStyle::kCjk: {
        const auto r = rng.Below(10);
        if (r < 7)
          put(rng.Pick(kThreeByte));
        else if (r < 8)
          put(rng.Pick(kFourByte));
        else if (r < 9)
          word();
        else
          punct();
        break;
      }
      case TextStyle::kCode: {
        const auto r = rng.Below(12);
        if (r < 6)
          word();
        else if (r < 10)
          put(rng.Pick(kCodePunct));
        else if (r < 11)
          put(rng.Pick(kTwoByte));
        else
          put(rng.Pick(kFourByte));
        break;
      }
      case TextStyle::kAnyMix: {
        switch (rng.Below(9)) {
          case 0: word(); break;
          case 1: punct(); break;
          case 2: put(rng.Pick(kTwoByte)); break;
          case 3: put(rng.Pick(kThreeByte)); break;
          case 4: put(rng.Pick(kFourByte)); break;
          case 5: put(rng.Pick(kCodePunct)); break;
          case 6:  // letter + combining mark
            put("e");
            if (n < code_points) put(kCombiningAcute);
            break;
          case 7:  // ZWJ sequence
            put("👍");
            if (n < code_points) put(kZwj);
            if (n < code_points) put("🚀");
            break;
          default:
            if (rng.OneIn(4))
              put(std::string_view("\0", 1));
            else
              put(rng.Pick(kFourByte));
            break;
        }
        break;
      }
    }
  }
  return out;
}

// ---------------------------------------------------------------------------------------------
// JSON

namespace {

// Appends `text` (valid UTF-8) as a JSON string literal, escaping what JSON requires and, at
// random, some optional escapes (\/, \uXXXX for non-ASCII, surrogate pairs).
void AppendJsonString(Rng& rng, std::string& out, std::string_view text, double optional_escapes) {
  out += '"';
  std::size_t i = 0;
  while (i < text.size()) {
    std::uint32_t cp;
    const std::size_t len = DecodeValid(text, i, &cp);
    switch (cp) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\t': out += "\\t"; break;
      case '\r': out += "\\r"; break;
      case '\b': out += "\\b"; break;
      case '\f': out += "\\f"; break;
      case '/': out += rng.Chance(optional_escapes) ? "\\/" : "/"; break;
      default:
        if (cp < 0x20) {
          out += "\\u";
          AppendHex4(out, cp, false);
        } else if (cp >= 0x80 && rng.Chance(optional_escapes)) {
          const bool upper = rng.OneIn(2);
          if (cp >= 0x10000) {
            const std::uint32_t v = cp - 0x10000;
            out += "\\u";
            AppendHex4(out, 0xD800 + (v >> 10), upper);
            out += "\\u";
            AppendHex4(out, 0xDC00 + (v & 0x3FF), upper);
          } else {
            out += "\\u";
            AppendHex4(out, cp, upper);
          }
        } else {
          out.append(text.substr(i, len));
        }
        break;
    }
    i += len;
  }
  out += '"';
}

const std::vector<std::string_view> kKeys = {
    "command",        "path",        "content", "pattern",   "query", "options",
    "recursive",      "lines",       "timeout", "env",       "args",  "old_string",
    "new_string",     "description", "limit",   "offset",    "flags", "meta",
    "reservation_id", "user_id",     "items",   "naïve_key", "ключ",  "😀"};

struct JsonWriter {
  Rng& rng;
  bool pretty;
  std::vector<std::size_t> long_strings;  // sizes of long string values still to place
  double escapes;

  void Newline(std::string& out, int depth) {
    if (!pretty) return;
    out += '\n';
    out.append(static_cast<std::size_t>(depth) * 2, ' ');
  }

  void String(std::string& out) {
    std::size_t size;
    if (!long_strings.empty() && rng.Chance(0.5)) {
      size = long_strings.back();
      long_strings.pop_back();
    } else {
      size = rng.LogSize(0, 8, 80);
    }
    TextStyle style = RandomStyle(rng, 0.4, 0.1);
    AppendJsonString(rng, out, RandomText(rng, size, style), escapes);
  }

  void Number(std::string& out) {
    char buf[64];
    switch (rng.Below(6)) {
      case 0:
        std::snprintf(buf, sizeof buf, "%lld", static_cast<long long>(rng.Between(-5, 5)));
        break;
      case 1:
        std::snprintf(buf, sizeof buf, "%lld",
                      static_cast<long long>(rng.Between(-1000000000, 1000000000)));
        break;
      // Arguments of one call are evaluated in an unspecified order: draw them first.
      case 2: {
        const auto whole = static_cast<long long>(rng.Between(-999, 999));
        const auto frac = static_cast<int>(rng.Below(1000));
        std::snprintf(buf, sizeof buf, "%lld.%03d", whole, frac);
        break;
      }
      case 3: {
        const auto mantissa = static_cast<int>(rng.Between(1, 9));
        const auto exponent = static_cast<int>(rng.Between(-5, 12));
        std::snprintf(buf, sizeof buf, "%de%d", mantissa, exponent);
        break;
      }
      case 4:
        std::snprintf(buf, sizeof buf, "%lld", static_cast<long long>(rng.Next() >> 12));
        break;
      default: std::snprintf(buf, sizeof buf, "0"); break;
    }
    out += buf;
  }

  void Value(std::string& out, int depth) {
    const auto r = rng.Below(20);
    if (depth < 4 && r < 3)
      Object(out, depth, rng.Size(0, 4));
    else if (depth < 4 && r < 6)
      Array(out, depth);
    else if (r < 13)
      String(out);
    else if (r < 17)
      Number(out);
    else if (r < 19)
      out += rng.OneIn(2) ? "true" : "false";
    else
      out += "null";
  }

  void Array(std::string& out, int depth) {
    out += '[';
    const std::size_t n = rng.Size(0, 5);
    for (std::size_t i = 0; i < n; ++i) {
      if (i) out += ',';
      Newline(out, depth + 1);
      Value(out, depth + 1);
    }
    if (n) Newline(out, depth);
    out += ']';
  }

  void Object(std::string& out, int depth, std::size_t keys) {
    std::vector<std::string_view> names = kKeys;
    rng.Shuffle(names);
    keys = std::min(keys, names.size());
    out += '{';
    std::size_t written = 0;
    auto key = [&](std::string_view k) {
      if (written++) out += ',';
      Newline(out, depth + 1);
      AppendJsonString(rng, out, k, escapes);
      out += pretty ? ": " : ":";
    };
    for (std::size_t i = 0; i < keys; ++i) {
      key(names[i]);
      Value(out, depth + 1);
    }
    if (depth == 0) {
      // Place the long strings that the random structure did not take.
      std::size_t extra = 0;
      while (!long_strings.empty()) {
        std::string k = "content_" + std::to_string(extra++);
        key(k);
        String(out);
        if (!long_strings.empty() && rng.OneIn(3)) {
          // Sometimes nest one inside an object or an array.
          key("nested_" + std::to_string(extra++));
          out += '{';
          AppendJsonString(rng, out, "text", escapes);
          out += ':';
          const std::size_t size = long_strings.back();
          long_strings.pop_back();
          AppendJsonString(rng, out, RandomText(rng, size, RandomStyle(rng, 0.5, 0.2)), escapes);
          out += '}';
        }
      }
    }
    if (written) Newline(out, depth);
    out += '}';
  }
};

}  // namespace

std::string RandomJsonArguments(Rng& rng, std::size_t approx_code_points, bool pretty,
                                bool top_level_non_object) {
  JsonWriter w{rng, pretty, {}, rng.Chance(0.3) ? 0.2 : 0.0};
  std::string out;
  if (top_level_non_object) {
    switch (rng.Below(3)) {
      case 0:
        AppendJsonString(rng, out, RandomText(rng, approx_code_points, RandomStyle(rng, 0.5, 0.2)),
                         w.escapes);
        return out;
      case 1:
        w.long_strings.push_back(approx_code_points);
        out += '[';
        w.String(out);  // may or may not take the long one
        out += ',';
        w.Value(out, 1);
        if (!w.long_strings.empty()) {
          out += ',';
          AppendJsonString(rng, out, RandomText(rng, w.long_strings.back(), TextStyle::kMixed),
                           w.escapes);
        }
        out += ']';
        return out;
      default: w.Number(out); return out;
    }
  }
  // Split the size over 0..3 long strings; the skeleton adds a little.
  if (approx_code_points > 60) {
    std::size_t parts = rng.Size(1, 3);
    std::size_t left = approx_code_points - 40;
    for (std::size_t i = 0; i < parts && left > 0; ++i) {
      std::size_t s = i + 1 == parts ? left : rng.Size(0, left);
      w.long_strings.push_back(s);
      left -= s;
    }
  }
  w.Object(out, 0, approx_code_points < 20 ? rng.Size(0, 2) : rng.Size(1, 5));
  return out;
}

std::string RandomInvalidJson(Rng& rng, std::size_t approx_code_points) {
  switch (rng.Below(7)) {
    case 0: {  // a truncated object, cut at a code point boundary before its end
      std::string full = RandomJsonArguments(rng, approx_code_points, rng.OneIn(3));
      std::size_t cps = 0;
      std::vector<std::size_t> offsets;  // byte offsets of code point starts
      for (std::size_t i = 0; i < full.size();) {
        std::uint32_t cp;
        offsets.push_back(i);
        i += DecodeValid(full, i, &cp);
        ++cps;
      }
      // keep [0, cut) with cut in [0, cps - 1): the closing brace is always lost
      std::size_t cut = cps > 1 ? rng.Size(0, cps - 2) : 0;
      return full.substr(0, offsets[cut]);
    }
    case 1: return "{'path': '" + RandomText(rng, approx_code_points, TextStyle::kMixed) + "'}";
    case 2:
      return "{\"command\": \"" + RandomText(rng, approx_code_points, TextStyle::kAscii) + "\",}";
    case 3:
      return "Sure! Here are the arguments: path=" +
             RandomText(rng, approx_code_points, RandomStyle(rng, 0.5, 0.2));
    case 4:  // a raw newline inside a string is not allowed
      return "{\"content\": \"line one\nline two " +
             RandomText(rng, approx_code_points, TextStyle::kMixed) + "\"}";
    case 5:
      return "{\"x\": NaN, \"y\": \"" + RandomText(rng, approx_code_points, TextStyle::kAscii) +
             "\"}";
    default: return "";
  }
}

// ---------------------------------------------------------------------------------------------
// Messages

namespace {

class Builder {
 public:
  Builder(Rng& rng, const GeneratorOptions& o) : rng_(rng), o_(o) {}

  std::vector<Message> Build() {
    const bool no_turns = rng_.Chance(o_.no_turns);
    reuse_ids_ = rng_.Chance(o_.reuse_call_ids);

    if (rng_.Chance(o_.leading_summary)) {
      const int n = rng_.OneIn(5) ? 2 : 1;
      for (int i = 0; i < n; ++i) Summary();
    }
    if (rng_.Chance(o_.leading_orphan)) Orphan(rng_.Chance(o_.anthropic_results));
    if (rng_.Chance(o_.leading_assistant)) {
      if (rng_.OneIn(2))
        AssistantText();
      else
        Round(false, false);
    }

    const int turns =
        static_cast<int>(rng_.Between(o_.min_turns, std::max(o_.min_turns, o_.max_turns)));
    // Uncertain calls: one turn gets one round that lacks results.
    int uncertain_turn = -1;
    bool uncertain_all = false;
    if (turns > 0 && rng_.Chance(o_.uncertain_call)) {
      uncertain_turn = static_cast<int>(rng_.Below(static_cast<std::uint64_t>(turns)));
      // A crash at the end is the common case: the last turn, all results missing.
      if (rng_.OneIn(2)) uncertain_turn = turns - 1;
      uncertain_all = rng_.OneIn(2);
    }

    for (int ti = 0; ti < turns; ++ti) {
      if (ti > 0 && rng_.Chance(o_.mid_system)) {
        Message m;
        m.role = Role::kSystem;
        m.parts.push_back(Text{RandomText(rng_, rng_.LogSize(0, 60, 2000), TextStyle::kAscii), {}});
        out_.push_back(std::move(m));
      }
      if (!no_turns) {
        UserTurnStart();
        if (rng_.Chance(o_.double_user)) UserTurnStart();
      }
      int rounds = static_cast<int>(
          std::min(rng_.Below(static_cast<std::uint64_t>(o_.max_rounds_per_turn) + 1),
                   rng_.Below(static_cast<std::uint64_t>(o_.max_rounds_per_turn) + 1)));
      int uncertain_round = -1;
      if (ti == uncertain_turn) {
        if (rounds == 0) rounds = 1;
        uncertain_round = uncertain_all
                              ? rounds - 1
                              : static_cast<int>(rng_.Below(static_cast<std::uint64_t>(rounds)));
      }
      bool crashed = false;
      for (int ri = 0; ri < rounds; ++ri) {
        const bool u = ri == uncertain_round;
        Round(u && uncertain_all, u && !uncertain_all);
        if (u && uncertain_all) {
          crashed = true;
          break;  // the session died waiting for the results
        }
      }
      if (!crashed && rng_.Chance(o_.assistant_reply)) AssistantText();
    }
    if (out_.empty()) UserTurnStart();
    if (rng_.Chance(o_.huge_item)) Inflate();

    const std::string prefix = o_.id_prefix;
    for (std::size_t i = 0; i < out_.size(); ++i) out_[i].id = prefix + std::to_string(i);
    return std::move(out_);
  }

 private:
  // ---- sizes ----
  // Over a reducer cap: from just over it up to max_item_chars (at least cap + 4000).
  std::size_t OverCap(std::size_t cap) {
    return rng_.LogSize(cap + 1, cap + 2000, std::max(cap + 4000, o_.max_item_chars), 2.0);
  }
  std::size_t TextSize() {
    if (rng_.Chance(o_.empty_text)) return 0;
    if (o_.exceed_caps && rng_.Chance(0.3)) return OverCap(16000);
    return rng_.LogSize(1, o_.text_median, o_.max_item_chars);
  }
  std::size_t ResultSize() {
    if (rng_.Chance(o_.empty_text / 2)) return 0;
    if (o_.exceed_caps && rng_.Chance(0.5)) return OverCap(8000);
    return rng_.LogSize(0, o_.result_median, o_.max_item_chars, 2.0);
  }
  std::size_t ArgsSize() {
    if (o_.exceed_caps && rng_.Chance(0.3)) return OverCap(16000);
    return rng_.LogSize(2, o_.args_median, o_.max_item_chars);
  }
  std::string SomeText(std::size_t size) {
    return RandomText(rng_, size, RandomStyle(rng_, o_.multibyte, o_.dense_4byte));
  }
  Text TextPart(std::size_t size) {
    Text t{SomeText(size), {}};
    if (rng_.OneIn(50)) t.extra = R"({"cache_control":{"type":"ephemeral"}})";
    return t;
  }

  // ---- ids ----
  std::string RandomId(std::string_view prefix, std::size_t len) {
    std::string id(prefix);
    for (std::size_t i = 0; i < len; ++i) id += kBase62[rng_.Below(62)];
    id += kBase62[(counter_ / 62 / 62) % 62];
    id += kBase62[(counter_ / 62) % 62];
    id += kBase62[counter_ % 62];
    ++counter_;
    return id;
  }
  std::string CallId(bool anthropic, std::size_t index_in_round) {
    if (reuse_ids_) return "call_" + std::to_string(index_in_round);
    return anthropic ? RandomId("toolu_01", 19) : RandomId("call_", 21);
  }
  std::string OrphanId() { return RandomId("call_orphan_", 12); }

  // ---- opaque items ----
  std::string Base64(std::size_t n) {
    std::string s;
    s.reserve(n);
    for (std::size_t i = 0; i < n; ++i) s += kBase64[rng_.Below(64)];
    return s;
  }
  Opaque Image() {
    Opaque o;
    o.kind = "image";
    o.payload = R"({"type":"image","source":{"type":"base64","media_type":"image/png","data":")" +
                Base64(rng_.LogSize(8, 400, 20000)) + "\"}}";
    return o;
  }
  Opaque Thinking() {
    Opaque o;
    o.kind = "thinking";
    o.payload = R"({"type":"thinking","thinking":)";
    AppendJsonString(rng_, o.payload, SomeText(rng_.LogSize(0, 300, 8000)), 0.1);
    o.payload += R"(,"signature":")" + Base64(rng_.Size(40, 400)) + "\"}";
    return o;
  }
  Opaque RedactedThinking() {
    Opaque o;
    o.kind = "redacted_thinking";
    o.payload = R"({"type":"redacted_thinking","data":")" + Base64(rng_.Size(20, 2000)) + "\"}";
    return o;
  }
  Opaque ServerCall(const std::string& id) {
    Opaque o;
    o.kind = "server_tool_use";
    o.link = OpaqueLink::kCall;
    o.link_id = id;
    o.payload =
        R"({"type":"server_tool_use","id":")" + id + R"(","name":"web_search","input":{"query":)";
    AppendJsonString(rng_, o.payload, SomeText(rng_.Size(1, 60)), 0.1);
    o.payload += "}}";
    return o;
  }
  Opaque ServerResult(const std::string& id) {
    Opaque o;
    o.kind = "web_search_tool_result";
    o.link = OpaqueLink::kResult;
    o.link_id = id;
    o.payload = R"({"type":"web_search_tool_result","tool_use_id":")" + id + R"(","content":[)";
    const std::size_t n = rng_.Size(0, 4);
    for (std::size_t i = 0; i < n; ++i) {
      if (i) o.payload += ',';
      o.payload += R"({"type":"web_search_result","title":)";
      AppendJsonString(rng_, o.payload, SomeText(rng_.Size(0, 80)), 0.1);
      o.payload += R"(,"encrypted_content":")" + Base64(rng_.LogSize(10, 300, 6000)) + "\"}";
    }
    o.payload += "]}";
    return o;
  }

  // ---- messages ----
  void Summary() {
    Message m;
    m.role = rng_.OneIn(4) ? Role::kAssistant : Role::kUser;
    m.summary = true;
    // One draw per statement: the operands of + are evaluated in an unspecified order.
    std::string text = "## Goal\n";
    text += SomeText(rng_.LogSize(0, 80, 2000));
    text += "\n\n## Instructions\n- ";
    text += SomeText(rng_.LogSize(0, 60, 2000));
    text += "\n\n## Current state\n";
    text += SomeText(rng_.LogSize(0, 200, 30000));
    if (o_.exceed_caps && rng_.OneIn(2)) text += SomeText(OverCap(16000));
    m.parts.push_back(Text{std::move(text), {}});
    out_.push_back(std::move(m));
  }

  void UserTurnStart() {
    Message m;
    m.role = Role::kUser;
    if (rng_.Chance(o_.image_only_user)) {
      m.parts.push_back(Image());
    } else {
      m.parts.push_back(TextPart(TextSize()));
      if (rng_.OneIn(20)) m.parts.push_back(TextPart(TextSize()));  // several texts
      if (rng_.Chance(o_.image)) {
        Opaque img = Image();
        if (rng_.OneIn(2))
          m.parts.insert(m.parts.begin(), std::move(img));
        else
          m.parts.push_back(std::move(img));
      }
    }
    m.form = m.parts.size() == 1 && std::holds_alternative<Text>(m.parts[0]) && rng_.OneIn(2)
                 ? recap::ContentForm::kString
                 : recap::ContentForm::kDefault;
    out_.push_back(std::move(m));
  }

  void AssistantText() {
    Message m;
    m.role = Role::kAssistant;
    if (rng_.Chance(o_.thinking / 2)) m.parts.push_back(Thinking());
    m.parts.push_back(TextPart(TextSize()));
    out_.push_back(std::move(m));
  }

  std::string Arguments() {
    const std::size_t size = ArgsSize();
    if (rng_.Chance(o_.invalid_json_arguments)) return RandomInvalidJson(rng_, size);
    if (rng_.OneIn(40)) return "{}";
    const bool pretty = rng_.Chance(o_.pretty_arguments);
    const bool non_object = rng_.Chance(o_.non_object_arguments);
    return RandomJsonArguments(rng_, size, pretty, non_object);
  }

  ToolResult Result(const std::string& call_id) {
    ToolResult r;
    r.call_id = call_id;
    r.is_error = rng_.Chance(o_.is_error);
    if (rng_.Chance(o_.result_extra_items)) {
      const std::size_t n = rng_.Size(2, 4);
      for (std::size_t i = 0; i < n; ++i) {
        if (rng_.OneIn(3))
          r.content.push_back(Image());
        else
          r.content.push_back(Text{SomeText(ResultSize()), {}});
      }
      r.form = recap::ContentForm::kList;
    } else if (rng_.OneIn(30)) {
      r.form = recap::ContentForm::kList;  // an empty list
    } else {
      r.content.push_back(Text{SomeText(ResultSize()), {}});
      r.form = rng_.OneIn(3) ? recap::ContentForm::kList : recap::ContentForm::kString;
    }
    return r;
  }

  void Orphan(bool anthropic) {
    Message m;
    if (anthropic) {
      m.role = Role::kUser;
      m.parts.push_back(Result(OrphanId()));
    } else {
      m.role = Role::kTool;
      m.parts.push_back(Result(OrphanId()));
    }
    out_.push_back(std::move(m));
  }

  // One tool-call round. `drop_all`: no result is written (and nothing follows in this turn);
  // `drop_one`: one result of the group is missing.
  void Round(bool drop_all, bool drop_one) {
    const bool anthropic = rng_.Chance(o_.anthropic_results);
    Message a;
    a.role = Role::kAssistant;
    if (rng_.Chance(o_.thinking)) a.parts.push_back(Thinking());
    if (rng_.Chance(o_.redacted_thinking)) a.parts.push_back(RedactedThinking());
    if (rng_.Chance(o_.assistant_text_with_calls)) a.parts.push_back(TextPart(TextSize()));

    const bool server = rng_.Chance(o_.server_tool);
    std::size_t calls = 1 + std::min(rng_.Below(static_cast<std::uint64_t>(o_.max_parallel_calls)),
                                     rng_.Below(static_cast<std::uint64_t>(o_.max_parallel_calls)));
    if (server && rng_.OneIn(3)) calls = 0;
    std::vector<std::string> ids;
    for (std::size_t i = 0; i < calls; ++i) {
      ToolCall c;
      c.id = CallId(anthropic, i);
      c.name = std::string(rng_.Pick(kToolNames));
      c.arguments = Arguments();
      ids.push_back(c.id);
      a.parts.push_back(std::move(c));
    }
    bool split_server = false;
    std::string server_id;
    if (server) {
      server_id = RandomId("srvtoolu_01", 16);
      split_server = rng_.Chance(o_.split_server_tool) && !drop_one;
      const std::size_t at = rng_.Size(0, a.parts.size());
      a.parts.insert(a.parts.begin() + static_cast<std::ptrdiff_t>(at), ServerCall(server_id));
      if (!split_server && !drop_all) {
        const std::size_t at2 = rng_.Size(at + 1, a.parts.size());
        a.parts.insert(a.parts.begin() + static_cast<std::ptrdiff_t>(at2), ServerResult(server_id));
      } else if (drop_all) {
        split_server = false;  // the server call stays unanswered too
      }
    }
    out_.push_back(std::move(a));
    if (drop_all) return;

    auto server_result_message = [&] {
      Message m;
      m.role = Role::kAssistant;
      m.parts.push_back(ServerResult(server_id));
      if (rng_.OneIn(2)) m.parts.push_back(TextPart(TextSize()));
      out_.push_back(std::move(m));
    };
    if (split_server && (calls == 0 || rng_.OneIn(2))) {
      server_result_message();
      split_server = false;
    }
    if (rng_.Chance(o_.interleaved_text) && calls > 0) AssistantText();

    std::vector<std::string> order = ids;
    rng_.Shuffle(order);
    if (drop_one && !order.empty())
      order.erase(order.begin() + static_cast<std::ptrdiff_t>(rng_.Below(order.size())));

    // Result messages, built first so that an orphan can be inserted among them.
    std::vector<Message> results;
    if (!order.empty()) {
      if (anthropic) {
        std::vector<std::vector<std::string>> groups(1);
        if (order.size() >= 2 && rng_.Chance(o_.split_results)) {
          const std::size_t cut = rng_.Size(1, order.size() - 1);
          groups.assign({std::vector<std::string>(order.begin(),
                                                  order.begin() + static_cast<std::ptrdiff_t>(cut)),
                         std::vector<std::string>(order.begin() + static_cast<std::ptrdiff_t>(cut),
                                                  order.end())});
        } else {
          groups[0] = order;
        }
        for (const auto& g : groups) {
          Message m;
          m.role = Role::kUser;
          for (const auto& id : g) m.parts.push_back(Result(id));
          if (rng_.Chance(o_.text_with_results)) {
            Text t = TextPart(TextSize());
            if (rng_.OneIn(2))
              m.parts.push_back(std::move(t));
            else
              m.parts.insert(m.parts.begin(), std::move(t));
          }
          m.form = recap::ContentForm::kList;
          results.push_back(std::move(m));
        }
      } else {
        for (const auto& id : order) {
          Message m;
          m.role = Role::kTool;
          m.parts.push_back(Result(id));
          results.push_back(std::move(m));
        }
      }
    }
    if (rng_.Chance(o_.orphan_result)) {
      Message m;
      m.role = anthropic ? Role::kUser : Role::kTool;
      m.parts.push_back(Result(OrphanId()));
      const std::size_t at = rng_.Size(0, results.size());
      results.insert(results.begin() + static_cast<std::ptrdiff_t>(at), std::move(m));
    }
    for (auto& m : results) out_.push_back(std::move(m));
    if (split_server) server_result_message();
  }

  // Replaces one item of a random non-summary message with a huge one.
  void Inflate() {
    std::vector<std::size_t> candidates;
    for (std::size_t i = 0; i < out_.size(); ++i) {
      if (!out_[i].summary && !out_[i].parts.empty()) candidates.push_back(i);
    }
    if (candidates.empty()) return;
    Message& m = out_[rng_.Pick(candidates)];
    const std::size_t size =
        rng_.LogSize(o_.huge_min, (o_.huge_min + o_.huge_max) / 4, o_.huge_max);
    const TextStyle style = rng_.OneIn(3) ? RandomStyle(rng_, 0.6, 0.3) : TextStyle::kAscii;
    for (auto& part : m.parts) {
      if (auto* t = std::get_if<Text>(&part)) {
        t->text = RandomText(rng_, size, style);
        return;
      }
      if (auto* r = std::get_if<ToolResult>(&part)) {
        for (auto& item : r->content) {
          if (auto* t = std::get_if<Text>(&item)) {
            t->text = RandomText(rng_, size, style);
            return;
          }
        }
        r->content.push_back(Text{RandomText(rng_, size, style), {}});
        return;
      }
      if (auto* c = std::get_if<ToolCall>(&part)) {
        c->arguments = RandomJsonArguments(rng_, size, false);
        return;
      }
    }
    m.parts.push_back(Text{RandomText(rng_, size, style), {}});  // only opaque items so far
  }

  Rng& rng_;
  const GeneratorOptions& o_;
  std::vector<Message> out_;
  std::uint64_t counter_ = 0;
  bool reuse_ids_ = false;
};

double Jitter(Rng& rng, double p) { return std::min(1.0, p * (0.25 + 1.5 * rng.Unit())); }
std::size_t JitterSize(Rng& rng, std::size_t s) {
  return static_cast<std::size_t>(static_cast<double>(s) * (0.25 + 2.0 * rng.Unit())) + 1;
}

}  // namespace

GeneratorOptions JitterOptions(Rng& rng, const GeneratorOptions& base) {
  GeneratorOptions o = base;
  o.max_turns = static_cast<int>(rng.Between(o.min_turns, std::max(o.min_turns, base.max_turns)));
  o.max_rounds_per_turn = static_cast<int>(rng.Between(0, base.max_rounds_per_turn));
  o.max_parallel_calls = static_cast<int>(rng.Between(1, std::max(1, base.max_parallel_calls)));
  for (double* p : {&o.anthropic_results,
                    &o.text_with_results,
                    &o.split_results,
                    &o.orphan_result,
                    &o.leading_orphan,
                    &o.uncertain_call,
                    &o.thinking,
                    &o.redacted_thinking,
                    &o.assistant_text_with_calls,
                    &o.image,
                    &o.image_only_user,
                    &o.server_tool,
                    &o.split_server_tool,
                    &o.leading_summary,
                    &o.leading_assistant,
                    &o.mid_system,
                    &o.assistant_reply,
                    &o.double_user,
                    &o.interleaved_text,
                    &o.empty_text,
                    &o.multibyte,
                    &o.dense_4byte,
                    &o.invalid_json_arguments,
                    &o.non_object_arguments,
                    &o.pretty_arguments,
                    &o.result_extra_items,
                    &o.is_error,
                    &o.reuse_call_ids,
                    &o.no_turns,
                    &o.huge_item}) {
    *p = Jitter(rng, *p);
  }
  o.text_median = JitterSize(rng, base.text_median);
  o.result_median = JitterSize(rng, base.result_median);
  o.args_median = JitterSize(rng, base.args_median);
  return o;
}

std::vector<recap::Message> GenerateMessages(std::uint64_t seed, const GeneratorOptions& options) {
  Rng rng(MixSeed(seed, 0x6D657373616765ULL));
  GeneratorOptions o = options;
  if (o.id_prefix.empty()) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "g%llx-", static_cast<unsigned long long>(seed));
    o.id_prefix = buf;
  }
  return Builder(rng, o).Build();
}

recap::Transcript GenerateTranscript(std::uint64_t seed, const GeneratorOptions& options) {
  return recap::Transcript(GenerateMessages(seed, options));
}

}  // namespace recap_test
