// The formats `recap import` and `recap append` read (SPEC R13): the codecs' four, each array
// or object form streamed through its codec, and Claude Code, SWE-agent and OpenHands files
// transformed as a tree first; format guessing for a file named with the wrong --format; the
// depth scan every file meets first. Private to the command (import.cc, append.cc).
#ifndef RECAP_CLI_IMPORT_FORMATS_H_
#define RECAP_CLI_IMPORT_FORMATS_H_

#include <functional>
#include <optional>
#include <string>
#include <utility>

#include "recap/recap.h"

#include "cli.h"

namespace recap_cli {

// The --format names, in the order --help gives them.
inline constexpr const char* kFormats[] = {"openai-chat", "anthropic", "openai-responses",
                                           "claude-code", "swe-agent", "openhands",
                                           "recap"};

// How a file's messages are read: decoded whole already (`conversation`), or, when `stream`
// is set, decoded by a codec from the file's text while the store writes them (then
// `conversation` holds only the instructions found outside the messages, such as Anthropic's
// `system`, and the codec may give a leading system message as the instructions).
struct Decoded {
  recap::Conversation conversation;
  std::function<recap::Status(const recap::MessageSink&)> stream;
  std::string what;  // what a failure of `stream` is prefixed with, as FromCodec does
  std::string note;  // e.g. "run 3 of 200", "346 lines, 100 joined"
};

// A failed decode: a message, and whether it is a usage error (a wrong --run).
struct DecodeError {
  std::string message;
  bool usage = false;
};

using DecodeResult = std::pair<std::optional<Decoded>, DecodeError>;

// Decodes `text` as `format` (a name of kFormats): the depth scan, then the format's decoder.
DecodeResult Decode(const std::string& format, const std::string& text, const Args& args);

// The message for an input that does not decode: what is wrong, and which format it looks like
// when it looks like another. `command` is the one whose --help describes the formats.
std::string NotDecoded(const std::string& path, const std::string& format, const std::string& text,
                       std::string detail, const std::string& command);

}  // namespace recap_cli

#endif  // RECAP_CLI_IMPORT_FORMATS_H_
