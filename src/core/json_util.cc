#include "json_util.h"

#include <algorithm>
#include <cstdio>
#include <utility>
#include <vector>

namespace recap {
inline namespace v0 {
namespace jsonutil {

namespace {

// Offset of the first byte that opens a container deeper than kMaxDepth, or npos. Strings are
// skipped so brackets inside them do not count; malformed input is left to the parser.
std::size_t FindTooDeep(std::string_view text) noexcept {
  int depth = 0;
  bool in_string = false;
  for (std::size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (in_string) {
      if (c == '\\') {
        ++i;
      } else if (c == '"') {
        in_string = false;
      }
      continue;
    }
    switch (c) {
      case '"': in_string = true; break;
      case '[':
      case '{':
        if (++depth > kMaxDepth) return i;
        break;
      case ']':
      case '}': --depth; break;
      default: break;
    }
  }
  return std::string_view::npos;
}

// nlohmann's what() starts with an id such as "[json.exception.type_error.316] ", which
// means nothing to the person reading recap's message.
std::size_t AfterExceptionId(std::string_view what) {
  if (what.empty() || what[0] != '[') return 0;
  const auto close = what.find("] ");
  return close == std::string_view::npos ? 0 : close + 2;
}

// A parse error's what() goes on "parse error at line 1, column 5: "; the position is
// reported separately, so keep only the reason.
std::string ParseReason(const std::string& what) {
  std::size_t start = AfterExceptionId(what);
  if (const auto colon = what.find(": ", start);
      colon != std::string::npos && what.compare(start, 14, "parse error at") == 0) {
    start = colon + 2;
  }
  return Printable(std::string_view(what).substr(start), 300);
}

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

// Offset of the first byte that does not start a valid UTF-8 sequence, or npos.
std::size_t FirstInvalidUtf8(std::string_view text) {
  for (std::size_t i = 0; i < text.size();) {
    const std::size_t n = ValidSequence(text, i);
    if (n == 0) return i;
    i += n;
  }
  return std::string_view::npos;
}

}  // namespace

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

Status Parse(std::string_view text, std::string_view what, Json* out) {
  if (const std::size_t deep = FindTooDeep(text); deep != std::string_view::npos) {
    return Status::InvalidArgument(std::string(what) + " is nested deeper than " +
                                   std::to_string(kMaxDepth) + " levels at byte offset " +
                                   std::to_string(deep) + " (" + LineAndColumn(text, deep) +
                                   "); recap refuses such documents to keep its stack bounded.");
  }
  try {
    *out = Json::parse(text.data(), text.data() + text.size());
    return Status::OK();
  } catch (const Json::parse_error& e) {
    std::size_t offset = e.byte > 0 ? e.byte - 1 : 0;
    const bool bad_utf8 = std::string_view(e.what()).find("UTF-8") != std::string_view::npos;
    // nlohmann stops at the byte that failed to continue a sequence; a person wants the
    // byte that started the bad sequence.
    if (bad_utf8) offset = std::min(offset, FirstInvalidUtf8(text));
    std::string msg = std::string(what) + " is not valid JSON: error at byte offset " +
                      std::to_string(offset) + " (" + LineAndColumn(text, offset) +
                      "): " + ParseReason(e.what()) + ". ";
    if (bad_utf8) {
      msg +=
          "JSON text must be UTF-8; recap rejects invalid bytes rather than guessing an "
          "encoding.";
    } else if (offset >= text.size()) {
      msg += "The text ends early: was it cut off?";
    } else {
      msg += "recap accepts one complete JSON document and does not repair malformed JSON.";
    }
    return Status::InvalidArgument(std::move(msg));
  } catch (const Json::exception& e) {
    const std::string_view reason(e.what());
    return Status::InvalidArgument(std::string(what) + " could not be parsed: " +
                                   Printable(reason.substr(AfterExceptionId(reason)), 300));
  }
}

Status Dump(const Json& value, std::string_view what, std::string* out) {
  try {
    *out = value.dump();
    return Status::OK();
  } catch (const Json::type_error& e) {
    // 316 is nlohmann's "invalid UTF-8 byte at index N" during serialization.
    const std::string_view reason(e.what());
    return Status::InvalidArgument(
        std::string(what) + " holds text that is not valid UTF-8 (" +
        Printable(reason.substr(AfterExceptionId(reason)), 200) +
        "); JSON must be UTF-8. Repair the text first, e.g. with recap::ToValidUtf8.");
  }
}

std::string DumpValid(const Json& value) { return value.dump(); }

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
    case Json::value_t::binary: return "binary data";
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

Json TakeUnknown(Json& object, std::initializer_list<std::string_view> known) {
  Json unknown = Json::object();
  for (auto it = object.begin(); it != object.end();) {
    bool is_known = false;
    for (std::string_view k : known) {
      if (it.key() == k) {
        is_known = true;
        break;
      }
    }
    if (is_known) {
      ++it;
    } else {
      unknown[it.key()] = std::move(it.value());
      it = object.erase(it);
    }
  }
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
  Status s = Parse(extra, "the `extra` of `" + std::string(where) + "`", out);
  if (!s.ok()) return s;
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
  if (!s.ok()) return s;
  MergeExtra(*target, std::move(parsed), protect);
  return Status::OK();
}

Status ParsePayload(std::string_view payload, std::string_view where, Json* out) {
  return Parse(payload, "the payload of the opaque item at `" + std::string(where) + "`", out);
}

void MergeExtra(Json& target, Json extra, std::initializer_list<std::string_view> protect) {
  for (auto it = extra.begin(); it != extra.end(); ++it) {
    bool is_protected = false;
    for (std::string_view p : protect) is_protected = is_protected || it.key() == p;
    if (is_protected) continue;
    auto existing = target.find(it.key());
    if (existing != target.end() && existing->is_object() && it->is_object()) {
      MergeExtra(*existing, std::move(it.value()));
    } else {
      target[it.key()] = std::move(it.value());
    }
  }
}

}  // namespace jsonutil
}  // namespace v0
}  // namespace recap
