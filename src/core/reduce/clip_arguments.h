// Clipping a tool call's JSON arguments to a cap as ClipArguments (tail_reducer.h) defines it:
// in place through ArgScanner when it can vouch for the text, else through nlohmann's DOM,
// with a bisection on the string values' limit either way. The reducer calls
// ClipOverArguments with its own scanner; ClipText and ClipArguments are defined here too.
#ifndef RECAP_SRC_CORE_REDUCE_CLIP_ARGUMENTS_H_
#define RECAP_SRC_CORE_REDUCE_CLIP_ARGUMENTS_H_

#include <cstddef>
#include <string>
#include <string_view>

#include "reduce/argument_lexer.h"

namespace recap {
inline namespace v0 {
namespace reduce_detail {

struct ClippedArgs {
  std::string text;
  std::size_t chars = 0;  // CountCodePoints(text)
  bool valid = true;      // text is well-formed UTF-8
};

// ClipArguments for arguments known to be over `cap`, with the result's size.
ClippedArgs ClipOverArguments(std::string_view arguments, std::size_t cap, ArgScanner& scan,
                              bool well_formed);

}  // namespace reduce_detail
}  // namespace v0
}  // namespace recap

#endif  // RECAP_SRC_CORE_REDUCE_CLIP_ARGUMENTS_H_
