// Finding values in a JSON text without parsing it: `recap import` guesses a file's format and
// hands a codec the text of its messages array, which may be a member of the file's top-level
// object.
//
// The streamed formats hand a codec the text of the messages array, which may be a member of
// the file's top-level object: these find it. They read any text safely (npos when it is not
// what they expect) and follow strings and brackets, but check nothing else a parser would:
// the codec checks the messages, and the members recap does not import (a request's `tools`,
// `model`) are only followed, not read (so a number beyond a double's range there is no
// error, as it is none in the messages).
#ifndef RECAP_CLI_JSON_SKIM_H_
#define RECAP_CLI_JSON_SKIM_H_

#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace recap_cli {

// The text of member `key` of the object `t` holds (the last one, as a parser keeps), or null.
std::optional<std::string_view> MemberText(std::string_view t, const std::string& key);

// The members of the object `t` holds, in order (keys unescaped, values as views into `t`), or
// null: one pass over the text.
std::optional<std::vector<std::pair<std::string, std::string_view>>> ObjectMembers(
    std::string_view t);

// The texts of the elements of the array `t` holds, in order (views into `t`), or null.
std::optional<std::vector<std::string_view>> ArrayElements(std::string_view t);

// Whether the text is an array / an object (after whitespace).
bool IsArrayText(std::string_view t);
bool IsObjectText(std::string_view t);

// Whether the array `t` holds starts with an object that has member `key` (tau-bench's runs
// have "traj").
bool FirstElementHas(std::string_view t, const std::string& key);

}  // namespace recap_cli

#endif  // RECAP_CLI_JSON_SKIM_H_
