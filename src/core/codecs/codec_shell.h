// Private: the entry shell every codec's public functions share (recap/codec.h), so that each
// codec writes only its mapping.
#ifndef RECAP_SRC_CORE_CODECS_CODEC_SHELL_H_
#define RECAP_SRC_CORE_CODECS_CODEC_SHELL_H_

#include <algorithm>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "recap/codec.h"
#include "recap/status.h"

#include "json/json_util.h"
#include "model/encoded_forms.h"
#include "model/transcript_access.h"

namespace recap {
inline namespace v0 {
namespace codec_shell {

// True for a content part type that is a tool call or a tool result in some provider's shape
// ("tool_use", "function_call_output", "web_search_tool_result", …). Where a format carries its
// calls elsewhere (OpenAI chat's `tool_calls`, Responses' items), such a part is refused even
// with keep_unknown_blocks: kept opaque, it would be sent to another format as a call that no
// result answers, or a result of no call (R14.1).
inline bool IsToolShapedPartType(std::string_view type) {
  const auto ends = [&](std::string_view suffix) {
    return type.size() >= suffix.size() &&
           type.compare(type.size() - suffix.size(), suffix.size(), suffix) == 0;
  };
  return type == "tool_use" || type == "tool_result" || type == "tool_call" || type == "function" ||
         ends("_tool_use") || ends("_tool_result") || ends("_call") || ends("_call_output");
}

// The refusal of such a part at `where` (the JSON path of its `type`); `carried` says where the
// format carries its calls instead.
inline Status ToolShapedPartRefused(const std::string& where, const std::string& type,
                                    const char* carried) {
  return Status::InvalidArgument(where + " is " + jsonutil::Quote(type) +
                                 ", a tool call or result inside a message's content. " + carried +
                                 "; give them in that form (or decode the messages with the "
                                 "format they were written in)");
}

// The name of a format in prose ("Anthropic messages").
inline const char* FormatProse(Origin origin) {
  switch (origin) {
    case Origin::kAnthropic: return "Anthropic messages";
    case Origin::kOpenAIChat: return "OpenAI chat";
    case Origin::kOpenAIResponses: return "OpenAI Responses";
    case Origin::kNone: break;
  }
  return "recap";
}

// Writing a message into a format (`self`) other than the one it was decoded from (R14.1):
// what belongs to its own format alone stays out. Its unmodelled fields (the message's and its
// parts' `extra`: a Responses item's `type` and `status`, Anthropic's `cache_control`, …) are
// left out: *stripped is set to a copy of `m` without them, which the encoder writes instead.
// An opaque part (thinking, reasoning, an image block, a provider's checkpoint) has no
// equivalent and is refused, naming the message. A message of kNone or of `self` is written as
// it is (*stripped stays empty). `where` is the message's JSON path.
inline Status ForeignFields(const Message& m, Origin self, const std::string& where,
                            std::optional<Message>* stripped) {
  if (m.origin == Origin::kNone || m.origin == self) return Status::OK();
  const auto refuse = [&](const Opaque& o, const std::string& at) {
    return Status::InvalidArgument(
        "`" + at + "`" +
        (m.id.empty() ? std::string() : " (message " + jsonutil::Quote(m.id) + ")") +
        " is an opaque " + jsonutil::Quote(o.kind) + " part decoded from " + FormatProse(m.origin) +
        ", with no equivalent in " + FormatProse(self) + ": the message can be written only in " +
        FormatProse(m.origin) + " or recap's own format");
  };
  Message copy;
  copy.id = m.id;
  copy.role = m.role;
  copy.summary = m.summary;
  copy.pinned = m.pinned;
  // How the content was written (a string, a list) carries over, but for a list of nothing:
  // a turn of tool calls alone (Anthropic's tool_use blocks) is no chat message with an empty
  // content list, so the encoder chooses its own format's natural form for it.
  copy.form = m.form;
  if (m.form == ContentForm::kList &&
      std::none_of(m.parts.begin(), m.parts.end(),
                   [](const Part& p) { return std::holds_alternative<Text>(p); })) {
    copy.form = ContentForm::kDefault;
  }
  copy.parts.reserve(m.parts.size());
  for (std::size_t i = 0; i < m.parts.size(); ++i) {
    const std::string at = where + ".parts[" + std::to_string(i) + "]";
    if (const auto* o = std::get_if<Opaque>(&m.parts[i])) return refuse(*o, at);
    Part part = m.parts[i];
    if (auto* t = std::get_if<Text>(&part)) {
      t->extra.clear();
    } else if (auto* c = std::get_if<ToolCall>(&part)) {
      c->extra.clear();
    } else if (auto* r = std::get_if<ToolResult>(&part)) {
      r->extra.clear();
      for (std::size_t k = 0; k < r->content.size(); ++k) {
        if (const auto* item = std::get_if<Opaque>(&r->content[k])) {
          return refuse(*item, at + ".content[" + std::to_string(k) + "]");
        }
        std::get<Text>(r->content[k]).extra.clear();
      }
    }
    copy.parts.push_back(std::move(part));
  }
  *stripped = std::move(copy);
  return Status::OK();
}

// Runs `body` (returning a Status or a Result<T>). An nlohmann exception escaping it is a bug —
// the readers check the input before any tree is touched — and becomes kInternal naming what
// was being done (`doing`: "decoding Anthropic messages").
template <typename Body>
auto Guarded(std::string_view doing, Body&& body) -> decltype(body()) {
  try {
    return body();
  } catch (const jsonutil::Json::exception& e) {
    return Status::Internal(std::string(doing) +
                            " failed unexpectedly: " + jsonutil::Printable(e.what(), 300));
  }
}

// DecodeMessages on a codec's DecodeEach (`each(sink)`): the instructions apart, the other
// messages in order.
template <typename Each>
Result<Conversation> Collect(Each&& each) {
  Conversation conv;
  RECAP_RETURN_IF_ERROR(each([&conv](Message&& m, bool instructions) {
    if (instructions) {
      conv.instructions = std::move(m);
    } else {
      conv.messages.push_back(std::move(m));
    }
    return Status::OK();
  }));
  return conv;
}

// DecodeMessage: `json` parsed as one message (`what` names it in errors), then handed to the
// codec's `one(doc, &message)`.
template <typename One>
Result<Message> DecodeDocument(std::string_view json, std::string_view what, One&& one) {
  jsonutil::Json doc;
  RECAP_RETURN_IF_ERROR(jsonutil::Parse(json, what, &doc, jsonutil::CarriedJson()));
  Message m;
  RECAP_RETURN_IF_ERROR(one(doc, &m));
  return m;
}

// EncodeMessages for formats whose messages expand into several array elements: the
// instructions first (when there are any), then each message, expanded by the codec's
// `expand(message, where, &elements)`, into one JSON array text. Each message's elements are
// written and freed before the next message is expanded, so that a bad one is named and a
// huge message is not held twice over.
template <typename Expand>
Result<std::string> EncodeExpanded(const Conversation& conversation, Expand&& expand) {
  std::string out = "[";
  bool first = true;
  auto append = [&](const Message& m, const std::string& where, std::string* text,
                    bool* none_yet) -> Status {
    std::vector<jsonutil::Json> elements;
    RECAP_RETURN_IF_ERROR(expand(m, where, &elements));
    for (jsonutil::Json& j : elements) {
      if (!*none_yet) text->push_back(',');
      RECAP_RETURN_IF_ERROR(jsonutil::AppendDump(j, "`" + where + "`", text, /*depth=*/1));
      j = nullptr;
      *none_yet = false;
    }
    return Status::OK();
  };
  if (conversation.instructions) {
    RECAP_RETURN_IF_ERROR(append(*conversation.instructions, "instructions", &out, &first));
  }
  for (std::size_t i = 0; i < conversation.messages.size(); ++i) {
    RECAP_RETURN_IF_ERROR(
        append(conversation.messages[i], "messages[" + std::to_string(i) + "]", &out, &first));
  }
  out += ']';
  return out;
}

// EncodeMessage for the same formats: the codec's `expand(message, where, &elements)` must
// give exactly one element, else the message needs EncodeMessages; `elements_what` names the
// elements and why there are several ("OpenAI chat messages (each tool result is …)"), and
// `use` the function to call instead.
template <typename Expand>
Result<std::string> EncodeSingle(const Message& message, Expand&& expand,
                                 std::string_view elements_what, std::string_view use) {
  std::vector<jsonutil::Json> elements;
  RECAP_RETURN_IF_ERROR(expand(message, "message", &elements));
  if (elements.size() != 1) {
    return Status::InvalidArgument("the message encodes as " + std::to_string(elements.size()) +
                                   " " + std::string(elements_what) + "; use " + std::string(use) +
                                   " for it.");
  }
  std::string text;
  RECAP_RETURN_IF_ERROR(jsonutil::Dump(elements[0], "the message", &text));
  return text;
}

// EncodeTranscriptParts: the pieces of the JSON array of messages [begin, size()) of `t`, each
// message's elements written by the codec's `fragment(message, where, &text)` (its elements,
// joined by ',', nothing around them) — or taken from what an earlier call kept with the
// message. A fragment written here is kept with the message (model/encoded_forms.h) for every
// later call, by any transcript that shares the message: the cost of a turn is its new messages.
// A message that fails to encode keeps nothing, and its error names it as
// `messages[<index from begin>]`, as EncodeMessages would. A message of no element gives no
// piece. `parts` is cleared first.
template <typename Fragment>
Status KeptParts(const Transcript& t, std::size_t begin, internal::WireFormat format,
                 Fragment&& fragment, std::vector<std::string_view>* parts) {
  parts->clear();
  if (begin > t.size()) {
    return Status::InvalidArgument("EncodeTranscript: `begin` (" + std::to_string(begin) +
                                   ") is past the transcript's " + std::to_string(t.size()) +
                                   " messages");
  }
  parts->reserve(t.size() - begin);
  for (std::size_t i = begin; i < t.size(); ++i) {
    internal::EncodedForms& forms = internal::TranscriptAccess::Encoded(t, i);
    const std::string* text = forms.Find(format);
    if (text == nullptr) {
      std::string written;
      Status s = fragment(t[i], "messages[" + std::to_string(i - begin) + "]", &written);
      if (!s.ok()) {
        parts->clear();
        return s;
      }
      text = &forms.Keep(format, std::move(written));
    }
    if (!text->empty()) parts->emplace_back(*text);
  }
  return Status::OK();
}

// The array the pieces make, '[' + the pieces joined by ',' + ']', written over *out's content
// (one copy of their bytes). *out keeps its memory when the array fits in it: a host that
// passes the same string every turn allocates (and faults pages in) only when the body grows
// past what it held, and then with half as much again to spare, so that a session growing turn
// by turn moves it now and then, not every turn. (Cleared first, so that growing copies
// nothing; reserve() is called only to grow: before C++20 a smaller request may shrink it.)
inline void JoinPartsInto(const std::vector<std::string_view>& parts, std::string* out) {
  std::size_t total = 2 + parts.size();
  for (std::string_view p : parts) total += p.size();
  out->clear();
  if (total > out->capacity()) {
    out->reserve(std::max(total, out->capacity() + out->capacity() / 2));
  }
  out->push_back('[');
  for (std::size_t k = 0; k < parts.size(); ++k) {
    if (k > 0) out->push_back(',');
    out->append(parts[k].data(), parts[k].size());
  }
  out->push_back(']');
}

inline std::string JoinParts(const std::vector<std::string_view>& parts) {
  std::string out;
  JoinPartsInto(parts, &out);
  return out;
}

// EncodeTranscript on KeptParts.
template <typename Fragment>
Result<std::string> EncodeKept(const Transcript& t, std::size_t begin, internal::WireFormat format,
                               Fragment&& fragment) {
  std::vector<std::string_view> parts;
  RECAP_RETURN_IF_ERROR(KeptParts(t, begin, format, fragment, &parts));
  return JoinParts(parts);
}

// EncodeTranscriptTo on KeptParts: *out is written only once every message has encoded, so a
// failure leaves it as it was.
template <typename Fragment>
Status EncodeKeptTo(const Transcript& t, std::size_t begin, internal::WireFormat format,
                    Fragment&& fragment, std::string* out) {
  if (out == nullptr) {
    return Status::InvalidArgument("EncodeTranscriptTo: `out` is null; pass the string to write");
  }
  std::vector<std::string_view> parts;
  RECAP_RETURN_IF_ERROR(KeptParts(t, begin, format, fragment, &parts));
  JoinPartsInto(parts, out);
  return Status::OK();
}

// The fragment of a format whose messages expand into elements (`expand`, as EncodeExpanded).
template <typename Expand>
Status ExpandedFragment(const Message& m, const std::string& where, std::string* text,
                        Expand&& expand) {
  std::vector<jsonutil::Json> elements;
  RECAP_RETURN_IF_ERROR(expand(m, where, &elements));
  for (std::size_t k = 0; k < elements.size(); ++k) {
    if (k > 0) text->push_back(',');
    RECAP_RETURN_IF_ERROR(jsonutil::AppendDump(elements[k], "`" + where + "`", text, /*depth=*/1));
    elements[k] = nullptr;
  }
  return Status::OK();
}

}  // namespace codec_shell
}  // namespace v0
}  // namespace recap

#endif  // RECAP_SRC_CORE_CODECS_CODEC_SHELL_H_
