// Paths and messages for errors (json_util.h): JsonPath as text, the names of JSON types,
// the messages for a wrong type or a missing member, and text made printable for a message.
#include <cstdio>
#include <string>
#include <string_view>
#include <vector>

#include "json/json_text.h"
#include "json/json_util.h"

namespace recap {
inline namespace v0 {
namespace jsonutil {

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

}  // namespace jsonutil
}  // namespace v0
}  // namespace recap
