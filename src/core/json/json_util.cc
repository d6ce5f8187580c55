#include "json/json_util.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>
#include <numeric>
#include <system_error>
#include <unordered_map>
#include <utility>
#include <vector>

#include "json/json_escape.h"

namespace recap {
inline namespace v0 {
namespace jsonutil {

namespace {

// An object's members as the vector they are: appending to it directly is how an object is
// built in linear time (ordered_map's own insertion searches every member first).
using Members = Json::object_t::Container;

Members& MembersOf(Json& object) {
  return static_cast<Members&>(object.get_ref<Json::object_t&>());
}
const Members& MembersOf(const Json& object) {
  return static_cast<const Members&>(object.get_ref<const Json::object_t&>());
}

// Objects up to this many members are checked for a duplicate key at each insertion; larger
// ones once, when they close (sorted, so a million members cost n log n, not n^2).
constexpr std::size_t kLinearKeys = 16;

std::string LineAndColumn(std::string_view text, std::size_t offset) {
  std::size_t line = 1;
  std::size_t column = 1;
  for (std::size_t i = 0; i < offset && i < text.size(); ++i) {
    if (text[i] == '\n') {
      ++line;
      column = 1;
    } else {
      ++column;
    }
  }
  return "line " + std::to_string(line) + ", column " + std::to_string(column);
}

bool IsContinuation(unsigned char b) { return (b & 0xC0) == 0x80; }

// Length of the valid UTF-8 sequence at text[i], or 0.
std::size_t ValidSequence(std::string_view text, std::size_t i) {
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

// The code point of the valid sequence of `len` bytes at p.
std::uint32_t CodePoint(const unsigned char* p, std::size_t len) {
  switch (len) {
    case 1: return p[0];
    case 2: return (std::uint32_t{p[0] & 0x1Fu} << 6) | (p[1] & 0x3Fu);
    case 3: return (std::uint32_t{p[0] & 0x0Fu} << 12) | ((p[1] & 0x3Fu) << 6) | (p[2] & 0x3Fu);
    default:
      return (std::uint32_t{p[0] & 0x07u} << 18) | ((p[1] & 0x3Fu) << 12) | ((p[2] & 0x3Fu) << 6) |
             (p[3] & 0x3Fu);
  }
}

// "'x'" for a printable ASCII byte, "byte 0xNN" for anything else.
std::string Describe(unsigned char c) {
  if (c >= 0x20 && c < 0x7F) return std::string("'") + static_cast<char>(c) + "'";
  char buf[16];
  std::snprintf(buf, sizeof buf, "byte 0x%02X", c);
  return buf;
}

std::string Hex2(unsigned char c) {
  char buf[8];
  std::snprintf(buf, sizeof buf, "0x%02X", c);
  return buf;
}

bool IsDigit(char c) { return c >= '0' && c <= '9'; }

// For a number out of a double's range: whether it is too large (else too small). The
// decimal exponent of its first significant digit, from the digits and the exponent.
bool Overflows(std::string_view text) {
  std::size_t i = text[0] == '-' ? 1 : 0;
  long long magnitude = 0;  // the number is about 10^magnitude
  bool significant = false;
  for (; i < text.size() && IsDigit(text[i]); ++i) {
    if (text[i] != '0') significant = true;
    if (significant) ++magnitude;
  }
  if (i < text.size() && text[i] == '.') {
    for (++i; i < text.size() && IsDigit(text[i]); ++i) {
      if (significant) break;
      if (text[i] != '0') {
        significant = true;
      } else {
        --magnitude;
      }
    }
    while (i < text.size() && IsDigit(text[i])) ++i;
  }
  long long exponent = 0;
  if (i < text.size() && (text[i] == 'e' || text[i] == 'E')) {
    ++i;
    const bool negative = i < text.size() && text[i] == '-';
    if (i < text.size() && (text[i] == '+' || text[i] == '-')) ++i;
    for (; i < text.size() && IsDigit(text[i]); ++i) {
      exponent = std::min<long long>(exponent * 10 + (text[i] - '0'), 1LL << 40);
    }
    if (negative) exponent = -exponent;
  }
  return magnitude + exponent > 0;
}

// An integer or decimal number text as a double; `ok` false beyond a double's range (too
// large). Below the range it is 0 with the number's sign.
double ToDouble(std::string_view text, bool* ok) {
  double d = 0;
  const auto r = std::from_chars(text.data(), text.data() + text.size(), d);
  *ok = true;
  if (r.ec == std::errc::result_out_of_range) {
    if (Overflows(text)) {
      *ok = false;
      return text[0] == '-' ? -std::numeric_limits<double>::infinity()
                            : std::numeric_limits<double>::infinity();
    }
    return text[0] == '-' ? -0.0 : 0.0;
  }
  return d;
}

// ---- The writer -----------------------------------------------------------------------------

enum class Utf8Mode : std::uint8_t {
  kStrict,   // invalid UTF-8 fails the write
  kReplace,  // invalid bytes become U+FFFD
  kAscii,    // every non-ASCII character as a \u escape; invalid bytes as \ufffd
};

class Writer {
 public:
  Writer(std::string* out, Utf8Mode mode) : out_(out), mode_(mode) {}

  // False on invalid UTF-8 (strict) or too deep; problem() says which.
  bool Write(const Json& root, int depth);
  const std::string& problem() const { return problem_; }
  bool too_deep() const { return too_deep_; }

 private:
  struct Frame {
    const Json* container;
    std::size_t next;
    bool object;
  };

  bool Scalar(const Json& v);
  bool String(std::string_view s);
  void AppendEscape(std::uint32_t unit) {
    char buf[8];
    std::snprintf(buf, sizeof buf, "\\u%04x", static_cast<unsigned>(unit));
    out_->append(buf, 6);
  }

  std::string* out_;
  Utf8Mode mode_;
  std::string problem_;
  bool too_deep_ = false;
};

bool Writer::String(std::string_view s) {
  const auto* p = reinterpret_cast<const unsigned char*>(s.data());
  const std::size_t n = s.size();
  out_->push_back('"');
  std::size_t run = 0;  // start of the bytes not yet appended
  std::size_t i = 0;
  while (i < n) {
    while (i + 8 <= n && jsonutil::EightPlain<true>(p + i)) i += 8;
    if (i >= n) break;
    const unsigned char c = p[i];
    if (c >= 0x20 && c != '"' && c != '\\' && c < 0x7F) {
      ++i;
      continue;
    }
    if (c == 0x7F) {
      if (mode_ == Utf8Mode::kAscii) {
        out_->append(s.data() + run, i - run);
        AppendEscape(c);
        run = ++i;
      } else {
        ++i;
      }
      continue;
    }
    if (c >= 0x80) {
      const std::size_t len = ValidSequence(s, i);
      if (len == 0) {
        if (mode_ == Utf8Mode::kStrict) {
          problem_ = "invalid UTF-8 byte at index " + std::to_string(i) + ": " + Hex2(c);
          return false;
        }
        out_->append(s.data() + run, i - run);
        if (mode_ == Utf8Mode::kAscii) {
          out_->append("\\ufffd");
        } else {
          out_->append("\xEF\xBF\xBD");
        }
        run = ++i;
        continue;
      }
      if (mode_ == Utf8Mode::kAscii) {
        out_->append(s.data() + run, i - run);
        const std::uint32_t cp = CodePoint(p + i, len);
        if (cp >= 0x10000) {
          AppendEscape(0xD800 + ((cp - 0x10000) >> 10));
          AppendEscape(0xDC00 + ((cp - 0x10000) & 0x3FF));
        } else {
          AppendEscape(cp);
        }
        i += len;
        run = i;
      } else {
        i += len;
      }
      continue;
    }
    // '"', '\\' or a control character: escaped as nlohmann's dump() escapes them.
    out_->append(s.data() + run, i - run);
    switch (c) {
      case '"': out_->append("\\\""); break;
      case '\\': out_->append("\\\\"); break;
      case '\b': out_->append("\\b"); break;
      case '\f': out_->append("\\f"); break;
      case '\n': out_->append("\\n"); break;
      case '\r': out_->append("\\r"); break;
      case '\t': out_->append("\\t"); break;
      default: AppendEscape(c); break;
    }
    run = ++i;
  }
  out_->append(s.data() + run, n - run);
  out_->push_back('"');
  return true;
}

bool Writer::Scalar(const Json& v) {
  switch (v.type()) {
    case Json::value_t::null: out_->append("null"); return true;
    case Json::value_t::boolean: out_->append(v.get<bool>() ? "true" : "false"); return true;
    case Json::value_t::number_integer:
    case Json::value_t::number_unsigned: {
      char buf[24];
      const auto r = v.is_number_unsigned()
                         ? std::to_chars(buf, buf + sizeof buf, v.get<std::uint64_t>())
                         : std::to_chars(buf, buf + sizeof buf, v.get<std::int64_t>());
      out_->append(buf, r.ptr);
      return true;
    }
    case Json::value_t::number_float:
      // nlohmann's shortest round-trip form ("0.85", "1e+30", "16000.0"); a scalar's dump()
      // does not recurse.
      out_->append(v.dump());
      return true;
    case Json::value_t::string: return String(v.get_ref<const std::string&>());
    case Json::value_t::binary:
      if (IsNumberText(v)) {
        out_->append(NumberText(v));
        return true;
      }
      problem_ = "binary data, which JSON cannot hold";
      return false;
    case Json::value_t::discarded:
    case Json::value_t::object:
    case Json::value_t::array: break;
  }
  problem_ = "a value JSON cannot hold";
  return false;
}

bool Writer::Write(const Json& root, int depth) {
  std::vector<Frame> stack;
  const Json* next = &root;
  while (true) {
    if (next != nullptr) {
      const Json& v = *next;
      next = nullptr;
      if (v.is_object() || v.is_array()) {
        const bool object = v.is_object();
        const bool empty = object ? v.get_ref<const Json::object_t&>().empty()
                                  : v.get_ref<const Json::array_t&>().empty();
        if (depth + static_cast<int>(stack.size()) + 1 > internal::kMaxJsonDepth) {
          too_deep_ = true;
          problem_ = "nested deeper than " + std::to_string(internal::kMaxJsonDepth) + " levels";
          return false;
        }
        if (empty) {
          out_->append(object ? "{}" : "[]");
        } else {
          out_->push_back(object ? '{' : '[');
          stack.push_back({&v, 0, object});
        }
      } else if (!Scalar(v)) {
        return false;
      }
    }
    while (!stack.empty()) {
      Frame& f = stack.back();
      if (f.object) {
        const Members& members = MembersOf(*f.container);
        if (f.next < members.size()) {
          if (f.next > 0) out_->push_back(',');
          const auto& member = members[f.next++];
          if (!String(member.first)) return false;
          out_->push_back(':');
          next = &member.second;
          break;
        }
        out_->push_back('}');
      } else {
        const Json::array_t& elements = f.container->get_ref<const Json::array_t&>();
        if (f.next < elements.size()) {
          if (f.next > 0) out_->push_back(',');
          next = &elements[f.next++];
          break;
        }
        out_->push_back(']');
      }
      stack.pop_back();
    }
    if (next == nullptr) return true;
  }
}

}  // namespace

// ---- Numbers kept as text -------------------------------------------------------------------

bool IsNumberText(const Json& value) noexcept {
  return value.is_binary() && value.get_binary().has_subtype() &&
         value.get_binary().subtype() == kNumberTextSubtype;
}

std::string_view NumberText(const Json& value) {
  const auto& bytes = value.get_binary();
  return {reinterpret_cast<const char*>(bytes.data()), bytes.size()};
}

Json MakeNumberText(std::string_view text) {
  const auto* p = reinterpret_cast<const std::uint8_t*>(text.data());
  return Json::binary(std::vector<std::uint8_t>(p, p + text.size()), kNumberTextSubtype);
}

bool IsNumber(const Json& value) noexcept { return value.is_number() || IsNumberText(value); }

std::optional<double> NumberValue(const Json& value) {
  if (value.is_number()) return value.get<double>();
  if (!IsNumberText(value)) return std::nullopt;
  bool ok = true;
  return ToDouble(NumberText(value), &ok);
}

std::optional<std::int64_t> IntegerValue(const Json& value) {
  if (value.is_number_integer()) {
    if (value.is_number_unsigned() &&
        value.get<std::uint64_t>() > static_cast<std::uint64_t>(INT64_MAX)) {
      return std::nullopt;
    }
    return value.get<std::int64_t>();
  }
  if (!IsNumberText(value)) return std::nullopt;
  const std::string_view text = NumberText(value);
  std::int64_t v = 0;
  const auto r = std::from_chars(text.data(), text.data() + text.size(), v);
  if (r.ec != std::errc() || r.ptr != text.data() + text.size()) return std::nullopt;
  return v;
}

// ---- Paths ----------------------------------------------------------------------------------

std::string JsonPath::ToString() const {
  std::vector<const JsonPath*> chain;
  for (const JsonPath* p = this; p != nullptr; p = p->parent_) chain.push_back(p);
  std::string out;
  for (auto it = chain.rbegin(); it != chain.rend(); ++it) {
    const JsonPath* p = *it;
    if (p->index_ != kNoIndex) {
      out += '[';
      out += std::to_string(p->index_);
      out += ']';
    } else {
      if (!out.empty()) out += '.';
      out += p->name_;
    }
  }
  return out;
}

// ---- The reader -----------------------------------------------------------------------------

Reader::Reader(std::string_view text, std::string what, const ParseOptions& options)
    : text_(text), what_(std::move(what)), options_(options) {
  // A byte order mark before the document is ignored (RFC 8259 allows it; editors write it).
  if (text_.substr(0, 3) == "\xEF\xBB\xBF") pos_ = 3;
}

Status Reader::Error(std::size_t at, const std::string& reason, bool utf8) const {
  std::string msg = what_ + " is not valid JSON: error at byte offset " + std::to_string(at) +
                    " (" + LineAndColumn(text_, at) + "): " + reason + ". ";
  if (utf8) {
    msg +=
        "JSON text must be UTF-8; recap rejects invalid bytes rather than guessing an "
        "encoding.";
  } else if (at >= text_.size()) {
    msg += "The text ends early: was it cut off?";
  } else {
    msg += "recap accepts one complete JSON document and does not repair malformed JSON.";
  }
  return Status::InvalidArgument(std::move(msg));
}

Status Reader::TooDeep(std::size_t at) const {
  return Status::InvalidArgument(
      what_ + " is nested deeper than " + std::to_string(internal::kMaxJsonDepth) +
      " levels at byte offset " + std::to_string(at) + " (" + LineAndColumn(text_, at) +
      "); recap refuses such documents to keep its stack bounded.");
}

void Reader::SkipWhitespace() noexcept {
  while (pos_ < text_.size()) {
    const char c = text_[pos_];
    if (c != ' ' && c != '\n' && c != '\r' && c != '\t') return;
    ++pos_;
  }
}

char Reader::Peek() {
  SkipWhitespace();
  return pos_ < text_.size() ? text_[pos_] : '\0';
}

std::size_t Reader::Offset() {
  SkipWhitespace();
  return pos_;
}

void Reader::Seek(std::size_t offset, int depth) {
  pos_ = offset;
  depth_ = depth;
  streamed_first_.clear();
  frames_.clear();
}

std::size_t Reader::EscapedLength(std::size_t from) const {
  // The closing quote is the first '"' after `from` not escaped by an odd run of backslashes.
  const char* data = text_.data();
  std::size_t at = from;
  while (at < text_.size()) {
    const void* q = std::memchr(data + at, '"', text_.size() - at);
    if (q == nullptr) return text_.size() - from;
    const std::size_t quote = static_cast<std::size_t>(static_cast<const char*>(q) - data);
    std::size_t backslashes = 0;
    while (quote - backslashes > from && data[quote - backslashes - 1] == '\\') ++backslashes;
    if (backslashes % 2 == 0) return quote - from;
    at = quote + 1;
  }
  return text_.size() - from;
}

Status Reader::ReadString(std::string* out) {
  const auto* p = reinterpret_cast<const unsigned char*>(text_.data());
  const std::size_t n = text_.size();
  ++pos_;  // the opening quote
  if (out != nullptr) out->clear();
  std::size_t run = pos_;
  bool reserved = false;
  while (true) {
    while (pos_ + 8 <= n && jsonutil::EightPlain<true>(p + pos_)) pos_ += 8;
    while (pos_ < n) {
      const unsigned char c = p[pos_];
      if (c == '"' || c == '\\' || c < 0x20 || c >= 0x80) break;
      ++pos_;
    }
    if (pos_ >= n) return Error(n, "unexpected end of input inside a string (no closing '\"')");
    const unsigned char c = p[pos_];
    if (c == '"') {
      if (out != nullptr) out->append(text_.data() + run, pos_ - run);
      ++pos_;
      return Status::OK();
    }
    if (c >= 0x80) {
      const std::size_t len = ValidSequence(text_, pos_);
      if (len == 0) return Error(pos_, "invalid UTF-8 byte " + Hex2(c) + " in a string", true);
      pos_ += len;
      continue;
    }
    if (c < 0x20) {
      return Error(pos_, "unescaped control character (" + Hex2(c) +
                             ") in a string; write it as an escape such as \\n or \\u0000");
    }
    // A backslash.
    if (out != nullptr && !reserved) {
      // The first escape: from here on the string is copied piece by piece, so its room is
      // made once, at most what is left of it in the text. A string that grew by doubling
      // would hold its old and new buffers at once (a 200 MB tool output: 384 MB).
      reserved = true;
      out->reserve(pos_ - run + EscapedLength(pos_));
    }
    if (out != nullptr) out->append(text_.data() + run, pos_ - run);
    const Escape e = DecodeEscape(text_.data() + pos_, n - pos_);
    switch (e.status) {
      case EscapeStatus::kOk: break;
      case EscapeStatus::kEndsInEscape:
        return Error(n, "unexpected end of input in an escape sequence");
      case EscapeStatus::kEndsInHex: return Error(n, "unexpected end of input in a \\u escape");
      case EscapeStatus::kEndsAfterHigh:
        return Error(n, "unexpected end of input after a high surrogate");
      case EscapeStatus::kUnknown: {
        const char bad = text_[pos_ + 1];
        return Error(pos_, "invalid escape '\\" + Printable(std::string_view(&bad, 1), 4) +
                               "' in a string; JSON allows \\\" \\\\ \\/ \\b \\f \\n \\r \\t and "
                               "\\u followed by four hex digits");
      }
      case EscapeStatus::kBadHex:
        return Error(pos_ + e.at, "'\\u' must be followed by four hex digits");
      case EscapeStatus::kLoneLow:
        return Error(pos_, "\\u" + std::string(text_.substr(pos_ + 2, 4)) +
                               " is a lone low surrogate; it is only valid after a high surrogate "
                               "(\\ud800 to \\udbff)");
      case EscapeStatus::kMissingLow: {
        std::string missing = "\\u" + std::string(text_.substr(pos_ + 2, 4)) +
                              " is a high surrogate without the low surrogate (\\udc00 to "
                              "\\udfff) that must follow it";
        if (text_[pos_ + 6] == '\\' && text_[pos_ + 7] == 'u') {
          missing += ", not \\u" + std::string(text_.substr(pos_ + 8, 4));
        }
        return Error(pos_, missing);
      }
    }
    if (out != nullptr) AppendUtf8(out, e.code_point);
    pos_ += e.length;
    run = pos_;
  }
}

Status Reader::ReadNumber(Json* out) {
  const std::size_t n = text_.size();
  const std::size_t start = pos_;
  auto digit_at = [&](std::size_t i) { return i < n && IsDigit(text_[i]); };
  auto expected = [&](const char* what) {
    return Error(pos_, pos_ >= n
                           ? std::string("unexpected end of input in a number; expected ") + what
                           : "invalid number: unexpected " +
                                 Describe(static_cast<unsigned char>(text_[pos_])) + "; expected " +
                                 what);
  };
  if (text_[pos_] == '-') ++pos_;
  if (!digit_at(pos_)) return expected("a digit after '-'");
  bool integer = true;
  if (text_[pos_] == '0') {
    ++pos_;
    if (digit_at(pos_)) {
      return Error(pos_,
                   "invalid number: a leading zero is followed by more digits (JSON "
                   "writes 7, not 07)");
    }
  } else {
    while (digit_at(pos_)) ++pos_;
  }
  if (pos_ < n && text_[pos_] == '.') {
    integer = false;
    ++pos_;
    if (!digit_at(pos_)) return expected("a digit after the decimal point");
    while (digit_at(pos_)) ++pos_;
  }
  if (pos_ < n && (text_[pos_] == 'e' || text_[pos_] == 'E')) {
    integer = false;
    ++pos_;
    if (pos_ < n && (text_[pos_] == '+' || text_[pos_] == '-')) ++pos_;
    if (!digit_at(pos_)) return expected("a digit in the exponent");
    while (digit_at(pos_)) ++pos_;
  }
  if (out == nullptr) return Status::OK();
  const std::string_view text = text_.substr(start, pos_ - start);
  if (options_.numbers == Numbers::kText) {
    *out = MakeNumberText(text);
    return Status::OK();
  }
  // As nlohmann reads numbers: a non-negative integer is unsigned, a negative one signed, and
  // one that does not fit 64 bits a double.
  const char* first = text.data();
  const char* last = text.data() + text.size();
  if (integer) {
    if (text[0] == '-') {
      std::int64_t v = 0;
      if (std::from_chars(first, last, v).ec == std::errc()) {
        *out = v;
        return Status::OK();
      }
    } else {
      std::uint64_t v = 0;
      if (std::from_chars(first, last, v).ec == std::errc()) {
        *out = v;
        return Status::OK();
      }
    }
  }
  bool ok = true;
  const double d = ToDouble(text, &ok);
  if (!ok) {
    return Status::InvalidArgument(
        what_ + " holds a number too large to read as a value at byte offset " +
        std::to_string(start) + " (" + LineAndColumn(text_, start) + "): " + Printable(text, 40) +
        " (a double holds at most about 1.8e308).");
  }
  *out = d;
  return Status::OK();
}

Status Reader::ReadLiteral(Json* out) {
  const char c = text_[pos_];
  const std::string_view word = c == 't' ? "true" : c == 'f' ? "false" : "null";
  for (std::size_t k = 0; k < word.size(); ++k) {
    if (pos_ + k >= text_.size()) {
      return Error(text_.size(), "unexpected end of input in the literal " + std::string(word));
    }
    if (text_[pos_ + k] != word[k]) {
      return Error(pos_ + k, "invalid literal; expected true, false or null");
    }
  }
  pos_ += word.size();
  if (out != nullptr) {
    if (c == 'n') {
      *out = nullptr;
    } else {
      *out = c == 't';
    }
  }
  return Status::OK();
}

std::string Reader::KeyPath(const std::string& key) const {
  std::string path;
  for (std::size_t i = 0; i + 1 < frames_.size(); ++i) {
    path += frames_[i].object ? frames_[i].key + "." : "[].";
  }
  return path + key;
}

Status Reader::DuplicateKey(const std::string& key) const {
  return Status::InvalidArgument(what_ + " has the key " + Quote(KeyPath(key), 200) +
                                 " twice; write each key once.");
}

Status Reader::ReadKey(Frame& frame, Json** slot) {
  SkipWhitespace();
  if (pos_ >= text_.size()) {
    return Error(pos_, "unexpected end of input; expected a string in double quotes (a key)");
  }
  if (text_[pos_] != '"') {
    return Error(pos_, "unexpected " + Describe(static_cast<unsigned char>(text_[pos_])) +
                           "; expected a string in double quotes (a key)");
  }
  std::string* key = frame.container != nullptr ? &scratch_ : nullptr;
  Status s = ReadString(key);
  RECAP_RETURN_IF_ERROR(s);
  SkipWhitespace();
  if (pos_ >= text_.size()) return Error(pos_, "unexpected end of input; expected ':' after a key");
  if (text_[pos_] != ':') {
    return Error(pos_, "unexpected " + Describe(static_cast<unsigned char>(text_[pos_])) +
                           "; expected ':' after a key");
  }
  ++pos_;
  if (frame.container == nullptr) {
    *slot = nullptr;
    return Status::OK();
  }
  Members& members = MembersOf(*frame.container);
  if (options_.reject_duplicate_keys) frame.key = scratch_;
  if (!frame.big) {
    for (auto& member : members) {
      if (member.first == scratch_) {
        if (options_.reject_duplicate_keys) return DuplicateKey(scratch_);
        member.second = Json();  // the last value wins, in the first one's place
        *slot = &member.second;
        return Status::OK();
      }
    }
    if (members.size() >= kLinearKeys) frame.big = true;
  }
  members.emplace_back(std::move(scratch_), Json());
  scratch_.clear();
  *slot = &members.back().second;
  return Status::OK();
}

Status Reader::FinishObject(Frame& frame) {
  Members& members = MembersOf(*frame.container);
  const std::size_t n = members.size();
  std::vector<std::size_t> order(n);
  std::iota(order.begin(), order.end(), std::size_t{0});
  std::stable_sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) {
    return members[a].first < members[b].first;
  });
  std::vector<bool> dropped(n, false);
  bool any = false;
  for (std::size_t i = 0; i < n;) {
    std::size_t j = i + 1;
    while (j < n && members[order[j]].first == members[order[i]].first) ++j;
    if (j - i > 1) {
      if (options_.reject_duplicate_keys) return DuplicateKey(members[order[i]].first);
      // The first occurrence keeps its place and takes the last one's value.
      members[order[i]].second = std::move(members[order[j - 1]].second);
      for (std::size_t k = i + 1; k < j; ++k) dropped[order[k]] = true;
      any = true;
    }
    i = j;
  }
  if (!any) return Status::OK();
  Members kept;
  kept.reserve(n);
  for (std::size_t i = 0; i < n; ++i) {
    if (!dropped[i]) kept.emplace_back(members[i].first, std::move(members[i].second));
  }
  members.swap(kept);
  return Status::OK();
}

Status Reader::ReadValue(Json* out) {
  frames_.clear();
  const std::size_t n = text_.size();
  Json* target = out;  // where the value being read goes (null when skipping)
  while (true) {
    SkipWhitespace();
    if (pos_ >= n) return Error(pos_, "unexpected end of input; expected a value");
    const char c = text_[pos_];
    bool complete = true;  // false when a container was opened and its first child is next
    Status s;
    if (c == '{' || c == '[') {
      if (depth_ >= internal::kMaxJsonDepth) return TooDeep(pos_);
      const bool object = c == '{';
      ++depth_;
      ++pos_;
      if (target != nullptr) *target = object ? Json::object() : Json::array();
      SkipWhitespace();
      if (pos_ < n && text_[pos_] == (object ? '}' : ']')) {
        ++pos_;
        --depth_;
      } else {
        frames_.push_back(Frame{target, object, false, {}});
        Frame& f = frames_.back();
        if (object) {
          s = ReadKey(f, &target);
        } else if (target != nullptr) {
          auto& elements = target->get_ref<Json::array_t&>();
          elements.emplace_back();
          target = &elements.back();
        }
        complete = false;
      }
    } else if (c == '"') {
      if (target != nullptr) {
        std::string value;
        s = ReadString(&value);
        *target = std::move(value);
      } else {
        s = ReadString(nullptr);
      }
    } else if (c == 't' || c == 'f' || c == 'n') {
      s = ReadLiteral(target);
    } else if (c == '-' || IsDigit(c)) {
      s = ReadNumber(target);
    } else {
      const auto b = static_cast<unsigned char>(c);
      const bool utf8 = b >= 0x80 && ValidSequence(text_, pos_) == 0;
      s = Error(pos_, "unexpected " + Describe(b) + "; expected a value", utf8);
    }
    RECAP_RETURN_IF_ERROR(s);
    if (!complete) continue;

    // A value is complete: close the containers it completes, up to the next value to read.
    bool more = false;
    while (!frames_.empty()) {
      Frame& f = frames_.back();
      SkipWhitespace();
      if (pos_ >= n) {
        return Error(pos_, f.object ? "unexpected end of input; expected ',' or '}'"
                                    : "unexpected end of input; expected ',' or ']'");
      }
      const char d = text_[pos_];
      if (d == ',') {
        ++pos_;
        if (f.object) {
          s = ReadKey(f, &target);
          RECAP_RETURN_IF_ERROR(s);
        } else if (f.container != nullptr) {
          auto& elements = f.container->get_ref<Json::array_t&>();
          elements.emplace_back();
          target = &elements.back();
        } else {
          target = nullptr;
        }
        more = true;
        break;
      }
      if (d == (f.object ? '}' : ']')) {
        ++pos_;
        --depth_;
        if (f.object && f.big) {
          s = FinishObject(f);
          RECAP_RETURN_IF_ERROR(s);
        }
        frames_.pop_back();
        continue;
      }
      const auto b = static_cast<unsigned char>(d);
      return Error(pos_,
                   "unexpected " + Describe(b) +
                       (f.object ? "; expected ',' or '}' after a member"
                                 : "; expected ',' or ']' after an element"),
                   b >= 0x80 && ValidSequence(text_, pos_) == 0);
    }
    if (!more) return Status::OK();
  }
}

Status Reader::BeginArray() {
  SkipWhitespace();
  if (depth_ >= internal::kMaxJsonDepth) return TooDeep(pos_);
  ++depth_;
  ++pos_;
  streamed_first_.push_back(true);
  return Status::OK();
}

Status Reader::BeginObject() { return BeginArray(); }

Status Reader::NextItem(char close, const char* first_expected, const char* item, bool* more) {
  SkipWhitespace();
  const bool first = streamed_first_.back();
  // Built only for an error: this runs once per element of a million-message file.
  const auto closing = [close] { return std::string("'") + close + "'"; };
  if (pos_ >= text_.size()) {
    return Error(pos_, first ? "unexpected end of input; expected " + std::string(first_expected) +
                                   " or " + closing()
                             : "unexpected end of input; expected ',' or " + closing());
  }
  const char c = text_[pos_];
  if (c == close) {
    ++pos_;
    --depth_;
    streamed_first_.pop_back();
    *more = false;
    return Status::OK();
  }
  if (!first) {
    if (c != ',') {
      return Error(pos_, "unexpected " + Describe(static_cast<unsigned char>(c)) +
                             "; expected ',' or " + closing() + " after " + item);
    }
    ++pos_;
  }
  streamed_first_.back() = false;
  *more = true;
  return Status::OK();
}

Status Reader::NextElement(bool* more) { return NextItem(']', "a value", "an element", more); }

Status Reader::NextMember(bool* more, std::string* key) {
  RECAP_RETURN_IF_ERROR(NextItem('}', "a key", "a member", more));
  if (!*more) return Status::OK();
  SkipWhitespace();
  if (pos_ >= text_.size()) {
    return Error(pos_, "unexpected end of input; expected a string in double quotes (a key)");
  }
  if (text_[pos_] != '"') {
    return Error(pos_, "unexpected " + Describe(static_cast<unsigned char>(text_[pos_])) +
                           "; expected a string in double quotes (a key)");
  }
  Status s = ReadString(key);
  RECAP_RETURN_IF_ERROR(s);
  SkipWhitespace();
  if (pos_ >= text_.size()) return Error(pos_, "unexpected end of input; expected ':' after a key");
  if (text_[pos_] != ':') {
    return Error(pos_, "unexpected " + Describe(static_cast<unsigned char>(text_[pos_])) +
                           "; expected ':' after a key");
  }
  ++pos_;
  *more = true;
  return Status::OK();
}

Status Reader::Finish() {
  SkipWhitespace();
  if (pos_ < text_.size()) {
    const auto b = static_cast<unsigned char>(text_[pos_]);
    return Error(pos_, "unexpected " + Describe(b) + " after the end of the JSON document",
                 b >= 0x80 && ValidSequence(text_, pos_) == 0);
  }
  return Status::OK();
}

Status ForEachElement(Reader& reader, const std::function<Status(Json& element, std::size_t)>& each,
                      const std::function<Status(const Json& document)>& not_array) {
  if (reader.Peek() != '[') {
    Json document;
    Status s = reader.ReadValue(&document);
    if (s.ok()) s = reader.Finish();
    RECAP_RETURN_IF_ERROR(s);
    return not_array(document);
  }
  Status s = reader.BeginArray();
  for (std::size_t i = 0; s.ok(); ++i) {
    bool more = false;
    s = reader.NextElement(&more);
    if (!s.ok() || !more) break;
    Json element;
    s = reader.ReadValue(&element);
    if (s.ok()) s = each(element, i);
  }
  if (s.ok()) s = reader.Finish();
  return s;
}

Status Parse(std::string_view text, std::string_view what, Json* out, const ParseOptions& options) {
  Reader reader(text, std::string(what), options);
  Status s = reader.ReadValue(out);
  if (s.ok()) s = reader.Finish();
  return s;
}

// ---- Writing --------------------------------------------------------------------------------

Status Dump(const Json& value, std::string_view what, std::string* out, int depth) {
  out->clear();
  return AppendDump(value, what, out, depth);
}

Status AppendDump(const Json& value, std::string_view what, std::string* out, int depth) {
  const std::size_t old_size = out->size();
  Writer writer(out, Utf8Mode::kStrict);
  if (writer.Write(value, depth)) return Status::OK();
  out->resize(old_size);
  if (writer.too_deep()) {
    return Status::InvalidArgument(
        std::string(what) + " would be nested deeper than " +
        std::to_string(internal::kMaxJsonDepth) +
        " levels once written; recap refuses to write a document it could not read back.");
  }
  if (writer.problem().rfind("invalid UTF-8", 0) == 0) {
    return Status::InvalidArgument(std::string(what) + " holds text that is not valid UTF-8 (" +
                                   writer.problem() +
                                   "); JSON must be UTF-8. Repair the text first, e.g. with "
                                   "recap::ToValidUtf8.");
  }
  return Status::InvalidArgument(std::string(what) + " holds " + writer.problem() + ".");
}

std::string DumpValid(const Json& value) {
  std::string text;
  Writer writer(&text, Utf8Mode::kReplace);
  writer.Write(value, 0);  // a tree recap read is within internal::kMaxJsonDepth
  return text;
}

std::string DumpAscii(const Json& value) {
  std::string text;
  Writer writer(&text, Utf8Mode::kAscii);
  writer.Write(value, 0);
  return text;
}

// ---- Types and messages ---------------------------------------------------------------------

const char* TypeName(const Json& value) noexcept {
  switch (value.type()) {
    case Json::value_t::null: return "null";
    case Json::value_t::object: return "an object";
    case Json::value_t::array: return "an array";
    case Json::value_t::string: return "a string";
    case Json::value_t::boolean: return "a boolean";
    case Json::value_t::number_integer:
    case Json::value_t::number_unsigned:
    case Json::value_t::number_float: return "a number";
    case Json::value_t::binary: return IsNumberText(value) ? "a number" : "binary data";
    case Json::value_t::discarded: break;
  }
  return "an unusable value";
}

Status WrongType(const JsonPath& path, const Json& value, std::string_view expected) {
  return Status::InvalidArgument("`" + path.ToString() + "` is " + TypeName(value) + "; expected " +
                                 std::string(expected) + ".");
}

Status MissingMember(const JsonPath& path, std::string_view member, std::string_view why) {
  return Status::InvalidArgument("`" + path.ToString() + "` has no `" + std::string(member) +
                                 "`; " + std::string(why) + ".");
}

std::string Quote(std::string_view text, std::size_t max_bytes) {
  return "\"" + Printable(text, max_bytes) + "\"";
}

std::string Printable(std::string_view text, std::size_t max_bytes) {
  std::string out;
  std::size_t i = 0;
  while (i < text.size()) {
    if (i >= max_bytes) {
      out += "\xE2\x80\xA6";  // an ellipsis: the rest was left out
      break;
    }
    const auto b = static_cast<unsigned char>(text[i]);
    const std::size_t n = ValidSequence(text, i);
    if (n == 0 || b < 0x20 || b == 0x7F) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\x%02X", b);
      out += buf;
      ++i;
    } else {
      out.append(text, i, n);
      i += n;
    }
  }
  return out;
}

// ---- Unknown members ------------------------------------------------------------------------

Json TakeUnknown(Json& object, std::initializer_list<std::string_view> known) {
  auto is_known = [&](const std::string& key) {
    for (std::string_view k : known) {
      if (key == k) return true;
    }
    return false;
  };
  Json unknown = Json::object();
  Members& members = MembersOf(object);
  if (std::all_of(members.begin(), members.end(),
                  [&](const auto& member) { return is_known(member.first); })) {
    return unknown;
  }
  // Keys are unique already, so both halves are built by appending.
  Members kept;
  Members& taken = MembersOf(unknown);
  for (auto& member : members) {
    (is_known(member.first) ? kept : taken).emplace_back(member.first, std::move(member.second));
  }
  members.swap(kept);
  return unknown;
}

std::string TakeString(Json& value) { return std::move(value.get_ref<std::string&>()); }

std::string ExtraText(const Json& extra) {
  if (!extra.is_object() || extra.empty()) return {};
  return DumpValid(extra);
}

Status ParseExtra(std::string_view extra, std::string_view where, Json* out) {
  if (extra.empty()) {
    *out = Json::object();
    return Status::OK();
  }
  ParseOptions options;
  options.numbers = Numbers::kText;
  Status s = Parse(extra, "the `extra` of `" + std::string(where) + "`", out, options);
  RECAP_RETURN_IF_ERROR(s);
  if (!out->is_object()) {
    return Status::InvalidArgument("the `extra` of `" + std::string(where) + "` is " +
                                   TypeName(*out) +
                                   "; expected a JSON object text (or an empty string).");
  }
  return Status::OK();
}

Status MergeExtraText(std::string_view extra, std::string_view where, Json* target,
                      std::initializer_list<std::string_view> protect) {
  if (extra.empty()) return Status::OK();
  Json parsed;
  Status s = ParseExtra(extra, where, &parsed);
  RECAP_RETURN_IF_ERROR(s);
  MergeExtra(*target, std::move(parsed), protect);
  return Status::OK();
}

Status ParsePayload(std::string_view payload, std::string_view where, Json* out) {
  ParseOptions options;
  options.numbers = Numbers::kText;
  return Parse(payload, "the payload of the opaque item at `" + std::string(where) + "`", out,
               options);
}

void MergeExtra(Json& target, Json extra, std::initializer_list<std::string_view> protect) {
  if (!extra.is_object()) return;
  if (target.is_null()) target = Json::object();
  Members& into = MembersOf(target);
  Members& from = MembersOf(extra);
  const std::size_t original = into.size();
  // Only the target's own members can meet a key of extra (whose keys are unique), so new
  // members are appended without a search; the reserve keeps the index's keys in place.
  into.reserve(original + from.size());
  std::unordered_map<std::string_view, std::size_t> index;
  const bool indexed = original > kLinearKeys;
  if (indexed) {
    index.reserve(original);
    for (std::size_t i = 0; i < original; ++i) index.emplace(into[i].first, i);
  }
  auto find = [&](const std::string& key) -> Json* {
    if (indexed) {
      const auto it = index.find(key);
      return it == index.end() ? nullptr : &into[it->second].second;
    }
    for (std::size_t i = 0; i < original; ++i) {
      if (into[i].first == key) return &into[i].second;
    }
    return nullptr;
  };
  for (auto& member : from) {
    bool is_protected = false;
    for (std::string_view p : protect) is_protected = is_protected || member.first == p;
    if (is_protected) continue;
    Json* existing = find(member.first);
    if (existing == nullptr) {
      into.emplace_back(member.first, std::move(member.second));
    } else if (existing->is_object() && member.second.is_object()) {
      MergeExtra(*existing, std::move(member.second));
    } else {
      *existing = std::move(member.second);
    }
  }
}

}  // namespace jsonutil
}  // namespace v0
}  // namespace recap
