// The C API's message formats and counting: a format's name, decoding what recap_append is
// given, the system prompt and message pieces recap_prepare writes (capi_formats.h), and
// recap_count_chars, counting as recap counts.
#include "capi_formats.h"

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

#include "recap/c/recap.h"
#include "recap/recap.h"

#include "capi_guard.h"

namespace recap {
namespace capi {

recap::Result<Format> ParseFormat(const char* function, const char* format) {
  if (format == nullptr) return Missing(function, "format");
  const std::string_view f(format);
  if (f == "openai-chat") return Format::kOpenAiChat;
  if (f == "anthropic") return Format::kAnthropic;
  if (f == "openai-responses") return Format::kOpenAiResponses;
  if (f == "recap") return Format::kNative;
  return recap::Status::InvalidArgument(
      std::string(function) + ": unknown format " + JsonString(f.substr(0, 64)) +
      "; use \"openai-chat\", \"anthropic\", \"openai-responses\" or \"recap\"");
}

recap::Result<std::vector<recap::Message>> DecodeAppended(Format format, std::string_view json) {
  recap::DecodeOptions options;
  options.split_instructions = false;
  std::size_t i = 0;
  while (i < json.size() &&
         (json[i] == ' ' || json[i] == '\t' || json[i] == '\n' || json[i] == '\r')) {
    ++i;
  }
  if (i < json.size() && json[i] == '{') {
    // recap's own form has two kinds of object: a message, and the document
    // {"format": "recap", "instructions": …, "messages": [...]} that EncodeMessages writes.
    std::optional<recap::Status> as_document;
    if (format == Format::kNative) {
      recap::Result<recap::Conversation> doc = recap::native::DecodeMessages(json, options);
      if (doc.ok()) {
        std::vector<recap::Message> messages;
        if (doc->instructions) messages.push_back(std::move(*doc->instructions));
        for (recap::Message& m : doc->messages) messages.push_back(std::move(m));
        return messages;
      }
      as_document = doc.status();
    }
    recap::Result<recap::Message> one =
        format == Format::kOpenAiChat  ? recap::openai_chat::DecodeMessage(json, options)
        : format == Format::kAnthropic ? recap::anthropic::DecodeMessage(json, options)
        : format == Format::kNative    ? recap::native::DecodeMessage(json, options)
                                       : recap::openai_responses::DecodeMessage(json, options);
    if (!one.ok()) {
      // A document whose messages were read up to a bad one: that one is the problem.
      if (as_document && as_document->message().find("messages[") != std::string::npos) {
        return *as_document;
      }
      return one.status();
    }
    std::vector<recap::Message> messages;
    messages.push_back(std::move(*one));
    return messages;
  }
  recap::Result<recap::Conversation> all =
      format == Format::kOpenAiChat  ? recap::openai_chat::DecodeMessages(json, options)
      : format == Format::kAnthropic ? recap::anthropic::DecodeMessages(json, options)
      : format == Format::kNative    ? recap::native::DecodeMessages(json, options)
                                     : recap::openai_responses::DecodeMessages(json, options);
  RECAP_RETURN_IF_ERROR(all);
  std::vector<recap::Message> messages;
  if (all->instructions) messages.push_back(std::move(*all->instructions));
  for (recap::Message& m : all->messages) messages.push_back(std::move(m));
  return messages;
}

recap::Result<Around> LeadingSystem(Format format, const recap::Transcript& transcript) {
  Around around;
  if (format != Format::kAnthropic) return around;
  std::string system;
  for (; around.begin < transcript.size(); ++around.begin) {
    const recap::Message& m = transcript[around.begin];
    if (m.role != recap::Role::kSystem) break;
    for (const recap::Part& part : m.parts) {
      if (!std::holds_alternative<recap::Text>(part)) {
        return Status::InvalidArgument(
            "the session's system message " + JsonString(m.id) +
            " holds more than text, and Anthropic carries the system prompt as text; "
            "prepare it in another format");
      }
    }
    if (!system.empty()) system += "\n\n";
    system += recap::JoinedText(m);
  }
  if (around.begin > 0) around.system_member = ",\"system\":" + JsonString(system);
  return around;
}

Status MessageParts(Format format, const recap::Transcript& transcript, std::size_t begin,
                    std::vector<std::string_view>* parts) {
  switch (format) {
    case Format::kOpenAiChat:
      return recap::openai_chat::EncodeTranscriptParts(transcript, begin, parts);
    case Format::kAnthropic:
      return recap::anthropic::EncodeTranscriptParts(transcript, begin, parts);
    case Format::kOpenAiResponses:
      return recap::openai_responses::EncodeTranscriptParts(transcript, begin, parts);
    case Format::kNative: break;
  }
  return recap::native::EncodeTranscriptParts(transcript, begin, parts);
}

}  // namespace capi
}  // namespace recap

extern "C" {

size_t recap_count_chars(const char* text) {
  return text == nullptr ? 0 : recap::CountCodePoints(text);
}

}  // extern "C"
