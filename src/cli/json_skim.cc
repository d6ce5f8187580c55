#include "json_skim.h"

#include <cstddef>
#include <cstring>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

namespace recap_cli {
namespace {

using Json = nlohmann::json;

constexpr std::size_t kNone = std::string_view::npos;

std::size_t SkipSpace(std::string_view t, std::size_t i) {
  while (i < t.size() && (t[i] == ' ' || t[i] == '\t' || t[i] == '\n' || t[i] == '\r')) ++i;
  return i;
}

// The end of the string whose opening quote is at `i` (one past its closing quote). Most of a
// request's bytes are inside strings: memchr finds each quote, and a quote after an odd run of
// backslashes is escaped.
std::size_t StringEnd(std::string_view t, std::size_t i) {
  const char* const data = t.data();
  const std::size_t n = t.size();
  for (++i; i < n;) {
    const void* hit = std::memchr(data + i, '"', n - i);
    if (hit == nullptr) return kNone;
    const std::size_t q = static_cast<std::size_t>(static_cast<const char*>(hit) - data);
    std::size_t backslashes = 0;
    while (q - backslashes > i && data[q - backslashes - 1] == '\\') ++backslashes;
    if (backslashes % 2 == 0) return q + 1;
    i = q + 1;
  }
  return kNone;
}

// The end of the value starting at `i` (one past it).
std::size_t ValueEnd(std::string_view t, std::size_t i) {
  if (i >= t.size()) return kNone;
  if (t[i] == '"') return StringEnd(t, i);
  if (t[i] == '[' || t[i] == '{') {
    int depth = 0;
    while (i < t.size()) {
      const char c = t[i];
      if (c == '"') {
        i = StringEnd(t, i);
        if (i == kNone) return kNone;
        continue;
      }
      if (c == '[' || c == '{') ++depth;
      if ((c == ']' || c == '}') && --depth == 0) return i + 1;
      ++i;
    }
    return kNone;
  }
  while (i < t.size() && std::strchr(",]} \t\r\n", t[i]) == nullptr) ++i;
  return i;
}

// The members of the object at `i`, as (key, the value's text), in order; false when there is
// no object there or it cannot be followed.
bool Members(std::string_view t, std::size_t i,
             std::vector<std::pair<std::string, std::string_view>>* out) {
  i = SkipSpace(t, i);
  if (i >= t.size() || t[i] != '{') return false;
  i = SkipSpace(t, i + 1);
  if (i < t.size() && t[i] == '}') return true;
  while (i < t.size()) {
    if (t[i] != '"') return false;
    const std::size_t key_end = StringEnd(t, i);
    if (key_end == kNone) return false;
    Json key = Json::parse(t.substr(i, key_end - i), nullptr, false);
    if (!key.is_string()) return false;
    i = SkipSpace(t, key_end);
    if (i >= t.size() || t[i] != ':') return false;
    const std::size_t value = SkipSpace(t, i + 1);
    const std::size_t value_end = ValueEnd(t, value);
    if (value_end == kNone || value_end == value) return false;
    out->emplace_back(key.get<std::string>(), t.substr(value, value_end - value));
    i = SkipSpace(t, value_end);
    if (i < t.size() && t[i] == '}') return true;
    if (i >= t.size() || t[i] != ',') return false;
    i = SkipSpace(t, i + 1);
  }
  return false;
}

}  // namespace

// The text of member `key` of the object `t` holds (the last one, as a parser keeps), or null.
std::optional<std::string_view> MemberText(std::string_view t, const std::string& key) {
  std::vector<std::pair<std::string, std::string_view>> members;
  if (!Members(t, 0, &members)) return std::nullopt;
  std::optional<std::string_view> found;
  for (const auto& [k, v] : members) {
    if (k == key) found = v;
  }
  return found;
}

std::optional<std::vector<std::pair<std::string, std::string_view>>> ObjectMembers(
    std::string_view t) {
  std::vector<std::pair<std::string, std::string_view>> members;
  if (!Members(t, 0, &members)) return std::nullopt;
  return members;
}

// The texts of the elements of the array `t` holds, in order, or null.
std::optional<std::vector<std::string_view>> ArrayElements(std::string_view t) {
  std::size_t i = SkipSpace(t, 0);
  if (i >= t.size() || t[i] != '[') return std::nullopt;
  std::vector<std::string_view> out;
  i = SkipSpace(t, i + 1);
  if (i < t.size() && t[i] == ']') return out;
  while (i < t.size()) {
    const std::size_t end = ValueEnd(t, i);
    if (end == kNone || end == i) return std::nullopt;
    out.push_back(t.substr(i, end - i));
    i = SkipSpace(t, end);
    if (i < t.size() && t[i] == ']') return out;
    if (i >= t.size() || t[i] != ',') return std::nullopt;
    i = SkipSpace(t, i + 1);
  }
  return std::nullopt;
}

// Whether the text is an array (after whitespace).
bool IsArrayText(std::string_view t) {
  const std::size_t i = SkipSpace(t, 0);
  return i < t.size() && t[i] == '[';
}
bool IsObjectText(std::string_view t) {
  const std::size_t i = SkipSpace(t, 0);
  return i < t.size() && t[i] == '{';
}

// Whether the array `t` holds starts with an object that has member `key` (tau-bench's runs
// have "traj").
bool FirstElementHas(std::string_view t, const std::string& key) {
  const std::size_t open = SkipSpace(t, 0);
  if (open >= t.size() || t[open] != '[') return false;
  std::vector<std::pair<std::string, std::string_view>> members;
  if (!Members(t, SkipSpace(t, open + 1), &members)) return false;
  for (const auto& member : members) {
    if (member.first == key) return true;
  }
  return false;
}

}  // namespace recap_cli
