// Private JSON helpers shared by the codecs (and anything else in src/ that reads JSON).
//
// recap parses JSON with its own reader (Reader, Parse) and writes it with its own writer
// (Dump), both iterative, into and out of nlohmann::ordered_json trees. Why not nlohmann's:
//
//  * Depth. nlohmann parses iteratively but serializes, copies and compares recursively, so a
//    document nested 100,000 levels deep exhausts the stack. The reader refuses anything
//    deeper than internal::kMaxJsonDepth (1,000 levels) as it goes, so no tree recap holds is
//    deeper than that, and the writer needs no recursion at all.
//  * Numbers (SPEC R13.2). The codecs promise that what they carry comes back byte for byte;
//    nlohmann turns 1E5 into 100000.0, 1.50 into 1.5, -0 into 0, and 30-digit integers into
//    doubles. With Numbers::kText every number stays its source text (NumberText), and the
//    writer writes that text back.
//  * Size. Reader hands over one element of a large array at a time (the codecs' DecodeEach)
//    and moves decoded strings into the tree without a token buffer in between; objects with a
//    million members are read in linear time (nlohmann's ordered objects search every member
//    on every insertion).
//
// ordered_json keeps key order through a round trip: providers' prompt caches and people
// reading a diff both notice when it changes. Duplicate keys keep the last value in the first
// one's place, as nlohmann does.
//
// These helpers never throw nlohmann exceptions to their callers: parse failures, invalid
// UTF-8 and type mismatches come back as InvalidArgument Statuses whose message names a JSON
// path (`messages[12].content[3].type`) and says what would have been accepted. Only
// std::bad_alloc may escape.
#ifndef RECAP_SRC_CORE_JSON_JSON_UTIL_H_
#define RECAP_SRC_CORE_JSON_JSON_UTIL_H_

#include <cstddef>
#include <cstdint>
#include <functional>
#include <initializer_list>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "recap/status.h"

#include "recap_internal/json_depth.h"

namespace recap {
inline namespace v0 {
namespace jsonutil {

using Json = nlohmann::ordered_json;

// How the reader keeps numbers.
enum class Numbers : std::uint8_t {
  // As nlohmann numbers (an unsigned or signed 64-bit integer when the text is an integer
  // that fits, a double otherwise), for code that reads their values. A number beyond a
  // double's range is an error.
  kValues,
  // As their source text (NumberText), for documents recap carries and writes back.
  kText,
};

struct ParseOptions {
  Numbers numbers = Numbers::kValues;
  // Refuse an object with the same key twice, naming the key's path (e.g.
  // "compaction.threshold"); otherwise the last value wins, in the first one's place.
  bool reject_duplicate_keys = false;
};

// ---- Numbers kept as text -------------------------------------------------------------------
//
// A number read with Numbers::kText is a binary value of subtype kNumberTextSubtype holding
// the number's bytes. Dump writes those bytes; nothing else in recap may see such a tree (in
// particular not nlohmann's dump(), which would write the bytes as an array).

inline constexpr std::uint8_t kNumberTextSubtype = 0x6E;  // 'n'

bool IsNumberText(const Json& value) noexcept;
// The text of a number (IsNumberText(value) must hold).
std::string_view NumberText(const Json& value);
// A number value from its text, which must be a JSON number.
Json MakeNumberText(std::string_view text);
// Either kind of number.
bool IsNumber(const Json& value) noexcept;
// The value of a number of either kind as a double: ±infinity beyond a double's range, 0 below
// it; nullopt for anything that is not a number.
std::optional<double> NumberValue(const Json& value);
// The value of an integer of either kind (no fraction, no exponent) that fits an int64.
std::optional<std::int64_t> IntegerValue(const Json& value);

// ---- Paths for error messages ---------------------------------------------------------------

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

// ---- Reading --------------------------------------------------------------------------------

// A cursor over one JSON document. ReadValue reads the value at the cursor into a tree (or
// skips it); BeginArray/NextElement and BeginObject/NextMember walk a container one element at
// a time without a tree of it, which is how the codecs decode a large array of messages one
// message at a time. Depth is counted over the whole document, whichever way it is walked.
//
// A UTF-8 byte order mark before the document is skipped. Every failure is an InvalidArgument
// naming `what`, the byte offset, line and column and the reason; after one, the reader must
// not be used further.
class Reader {
 public:
  Reader(std::string_view text, std::string what, const ParseOptions& options = {});

  // The next byte after whitespace, not consumed; '\0' at the end of the text.
  char Peek();
  // The offset of the next byte after whitespace.
  std::size_t Offset();
  // Moves the cursor to `offset`, inside `depth` open containers (a position this reader or
  // another one over the same text reported, e.g. a member's value found by a first pass).
  void Seek(std::size_t offset, int depth);

  // Reads the value at the cursor into `*out`; with out == nullptr, checks and skips it.
  Status ReadValue(Json* out);
  Status SkipValue() { return ReadValue(nullptr); }

  // Enters the array at the cursor (Peek() must be '['). NextElement then says before each
  // element whether there is one (`*more`), and consumes the closing ']' when not.
  Status BeginArray();
  Status NextElement(bool* more);
  // Enters the object at the cursor (Peek() must be '{'). NextMember reads the next key and
  // its ':' into `*key` (`*more` true), or consumes the closing '}' (`*more` false).
  Status BeginObject();
  Status NextMember(bool* more, std::string* key);

  // After the document's value: nothing but whitespace may follow.
  Status Finish();

 private:
  // A container ReadValue is inside.
  struct Frame {
    Json* container;  // null when skipping
    bool object;
    bool big;         // past the members checked one by one for a duplicate key
    std::string key;  // the member being read, when reject_duplicate_keys (for its path)
  };
  Status Error(std::size_t at, const std::string& reason, bool utf8 = false) const;
  // NextElement and NextMember up to the key: leaves the container at `close`, else steps
  // over the ',' before every element but the first. `first_expected` names what may come
  // first ("a value"), `item` what the ',' follows ("an element").
  Status NextItem(char close, const char* first_expected, const char* item, bool* more);
  Status TooDeep(std::size_t at) const;
  Status DuplicateKey(const std::string& key) const;
  void SkipWhitespace() noexcept;
  Status ReadString(std::string* out);
  // Bytes from `from` (inside a string) to its closing quote, or to the end of the text.
  std::size_t EscapedLength(std::size_t from) const;
  Status ReadNumber(Json* out);
  Status ReadLiteral(Json* out);
  Status ReadKey(Frame& frame, Json** slot);
  Status FinishObject(Frame& frame);
  std::string KeyPath(const std::string& key) const;

  std::string_view text_;
  std::string what_;
  ParseOptions options_;
  std::size_t pos_ = 0;
  int depth_ = 0;
  std::vector<bool> streamed_first_;  // per container entered with Begin*: no element read yet
  std::vector<Frame> frames_;
  std::string scratch_;  // the key being read
};

// Reads the array at the reader's cursor one element at a time: each element is read into a
// tree of its own, handed to `each` with its index and freed before the next one is read. A
// document that is not an array is read whole and `not_array` gives the error to return.
// Checks that nothing follows the document. Stops at the first failure, `each`'s included.
Status ForEachElement(Reader& reader, const std::function<Status(Json& element, std::size_t)>& each,
                      const std::function<Status(const Json& document)>& not_array);

// Parses `text` as exactly one JSON document. `what` names the input in the error message
// ("messages", "the payload of …"). On failure the message gives the byte offset (0-based),
// line and column, the reason with unprintable bytes escaped, and a hint.
Status Parse(std::string_view text, std::string_view what, Json* out,
             const ParseOptions& options = {});

// ---- Writing --------------------------------------------------------------------------------

// Dump, appending to `*out`, which keeps its old content on failure.
Status AppendDump(const Json& value, std::string_view what, std::string* out, int depth = 0);

// Compact serialization, non-ASCII kept as UTF-8, strings escaped exactly as nlohmann's dump()
// escapes them, numbers kept as text written as they were read. Fails (instead of throwing)
// when a string holds invalid UTF-8, or when the result, placed `depth` containers deep, would
// nest deeper than internal::kMaxJsonDepth (1,000 levels) (a document recap could not read back);
// `what` names the value.
Status Dump(const Json& value, std::string_view what, std::string* out, int depth = 0);

// Serialization for values known to hold valid UTF-8 (e.g. parsed from a validated document).
// Should a string not be valid UTF-8 after all, its bad bytes are written as U+FFFD.
std::string DumpValid(const Json& value);

// The same with every character outside ASCII written as a \u escape, and bad UTF-8 as
// \ufffd: for showing a value in a message.
std::string DumpAscii(const Json& value);

// ---- Types and messages ---------------------------------------------------------------------

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

// ---- Unknown members ------------------------------------------------------------------------

// Moves every member of `object` whose key is not in `known` into the returned object, which
// is empty when there were none. `object` keeps the known members. Linear in the members.
Json TakeUnknown(Json& object, std::initializer_list<std::string_view> known);

// Moves the string out of `value` (which must hold a string).
std::string TakeString(Json& value);

// Serializes an extra object: "" when it is empty (the model's "no extra").
std::string ExtraText(const Json& extra);

// How the codecs read what they carry: numbers kept as text.
inline ParseOptions CarriedJson() {
  ParseOptions options;
  options.numbers = Numbers::kText;
  return options;
}

// Parses an `extra` text from the model (numbers kept as text): "" is an empty object;
// anything else must be a JSON object. `where` names its owner for the error message (e.g.
// "messages[3].parts[1]").
Status ParseExtra(std::string_view extra, std::string_view where, Json* out);

// ParseExtra followed by MergeExtra into `target`; nothing to do when `extra` is empty.
Status MergeExtraText(std::string_view extra, std::string_view where, Json* target,
                      std::initializer_list<std::string_view> protect = {});

// Parses an opaque item's payload (numbers kept as text), which must be JSON; `where` names
// the item.
Status ParsePayload(std::string_view payload, std::string_view where, Json* out);

// Writes `extra`'s members over `target`'s: a member present in both is replaced by extra's,
// except that two objects are merged member by member (how nested unknown fields such as
// `{"function": {"strict": true}}` go back into a modelled object). New members go last.
// Members named in `protect` are never written: an encoder protects the keys that say what
// an object is (a block's `type`), which an extra carried over from another format must not
// change. Linear in the members of both.
void MergeExtra(Json& target, Json extra, std::initializer_list<std::string_view> protect = {});

}  // namespace jsonutil
}  // namespace v0
}  // namespace recap

#endif  // RECAP_SRC_CORE_JSON_JSON_UTIL_H_
