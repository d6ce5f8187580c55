// Private JSON helpers shared by the codecs (and anything else in src/ that reads JSON).
//
// nlohmann::ordered_json is used throughout so that key order survives a decode/encode round
// trip: providers' prompt caches and people reading a diff both notice when it changes.
//
// These helpers never throw nlohmann exceptions to their callers: parse failures, invalid
// UTF-8 and type mismatches come back as InvalidArgument Statuses whose message names a JSON
// path (`messages[12].content[3].type`) and says what would have been accepted. Only
// std::bad_alloc may escape.
#ifndef RECAP_SRC_CORE_JSON_UTIL_H_
#define RECAP_SRC_CORE_JSON_UTIL_H_

#include <cstddef>
#include <initializer_list>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "recap/status.h"

namespace recap {
inline namespace v0 {
namespace jsonutil {

using Json = nlohmann::ordered_json;

// Deeper documents are rejected before parsing. nlohmann parses iteratively but dumps and
// copies recursively, so an unbounded depth would let one hostile document exhaust the stack.
// Real messages nest a few dozen levels at most.
inline constexpr int kMaxDepth = 1000;

// A position inside a JSON document, built as a chain of stack objects so that walking a
// large document costs nothing until an error needs the path as text.
class JsonPath {
 public:
  // The root, printed as `name` (e.g. "messages" or "message").
  explicit JsonPath(std::string_view name) : name_(name) {}

  JsonPath Member(std::string_view key) const { return JsonPath(this, key, kNoIndex); }
  JsonPath Index(std::size_t i) const { return JsonPath(this, {}, i); }

  // e.g. "messages[12].content[3].type".
  std::string ToString() const;

 private:
  static constexpr std::size_t kNoIndex = static_cast<std::size_t>(-1);
  JsonPath(const JsonPath* parent, std::string_view key, std::size_t index)
      : parent_(parent), name_(key), index_(index) {}

  const JsonPath* parent_ = nullptr;
  std::string_view name_;  // a member name (or the root's name) when index_ == kNoIndex
  std::size_t index_ = kNoIndex;
};

// Parses `text` as exactly one JSON document. `what` names the input in the error message
// ("messages", "the payload of …"). On failure the message gives the byte offset (0-based),
// line and column, nlohmann's reason with unprintable bytes escaped, and a hint.
Status Parse(std::string_view text, std::string_view what, Json* out);

// Compact serialization with non-ASCII kept as UTF-8. Fails (instead of throwing) when a
// string holds invalid UTF-8; `what` names the value in that message.
Status Dump(const Json& value, std::string_view what, std::string* out);

// Serialization for values known to hold valid UTF-8 (e.g. parsed from a validated document).
std::string DumpValid(const Json& value);

// "a string", "a number", "an object", "an array", "null", "a boolean".
const char* TypeName(const Json& value) noexcept;

// "`<path>` is <type>; expected <expected>." — e.g. expected = "a string".
Status WrongType(const JsonPath& path, const Json& value, std::string_view expected);

// "`<path>` has no `<member>`; <why>."
Status MissingMember(const JsonPath& path, std::string_view member, std::string_view why);

// `text` made safe for an error message: at most `max_bytes` bytes (never splitting a UTF-8
// sequence, an ellipsis marking the cut), control and invalid bytes escaped as \xNN.
std::string Printable(std::string_view text, std::size_t max_bytes = 60);

// Printable(text) in double quotes, for naming a value: "robot".
std::string Quote(std::string_view text, std::size_t max_bytes = 60);

// Moves every member of `object` whose key is not in `known` into the returned object, which
// is empty when there were none. `object` keeps the known members.
Json TakeUnknown(Json& object, std::initializer_list<std::string_view> known);

// Moves the string out of `value` (which must hold a string).
std::string TakeString(Json& value);

// Serializes an extra object: "" when it is empty (the model's "no extra").
std::string ExtraText(const Json& extra);

// Parses an `extra` text from the model: "" is an empty object; anything else must be a JSON
// object. `where` names its owner for the error message (e.g. "messages[3].parts[1]").
Status ParseExtra(std::string_view extra, std::string_view where, Json* out);

// ParseExtra followed by MergeExtra into `target`; nothing to do when `extra` is empty.
Status MergeExtraText(std::string_view extra, std::string_view where, Json* target,
                      std::initializer_list<std::string_view> protect = {});

// Parses an opaque item's payload, which must be JSON; `where` names the item.
Status ParsePayload(std::string_view payload, std::string_view where, Json* out);

// Writes `extra`'s members over `target`'s: a member present in both is replaced by extra's,
// except that two objects are merged member by member (how nested unknown fields such as
// `{"function": {"strict": true}}` go back into a modelled object). New members go last.
// Members named in `protect` are never written: an encoder protects the keys that say what
// an object is (a block's `type`), which an extra carried over from another format must not
// change.
void MergeExtra(Json& target, Json extra, std::initializer_list<std::string_view> protect = {});

}  // namespace jsonutil
}  // namespace v0
}  // namespace recap

#endif  // RECAP_SRC_CORE_JSON_UTIL_H_
