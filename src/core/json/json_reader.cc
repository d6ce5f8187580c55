// recap's JSON reader (json_util.h's Reader, ForEachElement and Parse): one iterative cursor
// over a document, with the depth limit, numbers as values or kept as text, duplicate keys,
// and error messages that say where and why.
#include <algorithm>
#include <charconv>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <numeric>
#include <string>
#include <string_view>
#include <system_error>
#include <utility>
#include <vector>

#include "json/json_escape.h"
#include "json/json_members.h"
#include "json/json_text.h"
#include "json/json_util.h"

namespace recap {
inline namespace v0 {
namespace jsonutil {

namespace {

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

// "'x'" for a printable ASCII byte, "byte 0xNN" for anything else.
std::string Describe(unsigned char c) {
  if (c >= 0x20 && c < 0x7F) return std::string("'") + static_cast<char>(c) + "'";
  char buf[16];
  std::snprintf(buf, sizeof buf, "byte 0x%02X", c);
  return buf;
}

}  // namespace

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
      if (target != nullptr) {
        *target = object ? Json::object() : Json::array();
        // Room for a message's or a block's few members at once: the vector of members cannot
        // move them when it grows (their keys are const), so each growth would copy every
        // member read so far, values and all.
        if (object) MembersOf(*target).reserve(kMembersReserved);
      }
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

}  // namespace jsonutil
}  // namespace v0
}  // namespace recap
