// Private: the message formats of the C API, shared by recap_append and recap_prepare
// (capi_compactor.cc): a format's name, the messages recap_append is given, and what
// recap_prepare writes around and for the messages.
#ifndef RECAP_SRC_C_CAPI_FORMATS_H_
#define RECAP_SRC_C_CAPI_FORMATS_H_

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

#include "recap/recap.h"

namespace recap {
namespace capi {

enum class Format { kOpenAiChat, kAnthropic, kOpenAiResponses, kNative };

recap::Result<Format> ParseFormat(const char* function, const char* format);

// The messages of `json` (an array, or one message object) in `format`, every one kept as a
// message: a leading system message is appended like the others (it is the session's
// instructions in the store, SPEC R12.1).
recap::Result<std::vector<recap::Message>> DecodeAppended(Format format, std::string_view json);

// What recap_prepare writes around the messages: for Anthropic, which carries the system
// prompt outside the messages, the leading system messages' text as "system" (and the
// messages start after them).
struct Around {
  std::size_t begin = 0;
  std::string system_member;  // ,"system":"…" or empty
};

recap::Result<Around> LeadingSystem(Format format, const recap::Transcript& transcript);

// The pieces of the messages array (each message's kept encoded form: the codecs'
// EncodeTranscriptParts), so that the result is assembled with one copy of their bytes.
recap::Status MessageParts(Format format, const recap::Transcript& transcript, std::size_t begin,
                           std::vector<std::string_view>* parts);

}  // namespace capi
}  // namespace recap

#endif  // RECAP_SRC_C_CAPI_FORMATS_H_
