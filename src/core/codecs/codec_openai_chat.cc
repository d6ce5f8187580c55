// OpenAI chat-completions `messages` <-> recap messages. The mapping is documented in
// docs/message-model.md; the comments here explain the choices that are not obvious.
#include <string>
#include <utility>
#include <vector>

#include "recap/codec.h"

#include "codecs/codec_shell.h"
#include "json/json_util.h"

namespace recap {
inline namespace v0 {
namespace openai_chat {

namespace {

using jsonutil::Json;
using jsonutil::JsonPath;

constexpr const char* kAcceptedRoles =
    "one of \"system\", \"developer\", \"user\", \"assistant\", \"tool\"";

std::string Where(const JsonPath& path) { return "`" + path.ToString() + "`"; }

// ---------------------------------------------------------------------------------------------
// Decoding

// A content part of a user/system/assistant message or of a tool message's content list.
Status DecodePart(Json& part, const JsonPath& path, const DecodeOptions& options, ResultItem* out) {
  if (!part.is_object()) {
    return jsonutil::WrongType(path, part, "a content part object with a `type`");
  }
  auto type_it = part.find("type");
  if (type_it == part.end()) {
    return jsonutil::MissingMember(path, "type",
                                   "every content part needs a string `type` such as \"text\"");
  }
  const JsonPath type_path = path.Member("type");
  if (!type_it->is_string()) return jsonutil::WrongType(type_path, *type_it, "a string");
  const std::string type = type_it->get<std::string>();
  if (type == "text") {
    auto text_it = part.find("text");
    if (text_it == part.end()) {
      return jsonutil::MissingMember(path, "text", "a \"text\" part needs its text");
    }
    if (!text_it->is_string()) {
      return jsonutil::WrongType(path.Member("text"), *text_it, "a string");
    }
    Text t;
    t.text = jsonutil::TakeString(*text_it);
    t.extra = jsonutil::ExtraText(jsonutil::TakeUnknown(part, {"type", "text"}));
    *out = std::move(t);
    return Status::OK();
  }
  if (codec_shell::IsToolShapedPartType(type)) {
    return codec_shell::ToolShapedPartRefused(
        Where(type_path), type,
        "In OpenAI chat a call goes in the assistant message's `tool_calls` and its result in a "
        "`tool` message with its `tool_call_id`");
  }
  // Media and refusals are carried, not read: recap has nothing to do with their insides.
  const bool known =
      type == "image_url" || type == "input_audio" || type == "file" || type == "refusal";
  if (!known && !options.keep_unknown_blocks) {
    return Status::InvalidArgument(
        Where(type_path) + " is " + jsonutil::Quote(type) +
        ", a content part type recap does not know (known: \"text\", \"image_url\", "
        "\"input_audio\", \"file\", \"refusal\"). Set DecodeOptions::keep_unknown_blocks to keep "
        "unknown parts as opaque items.");
  }
  Opaque o;
  o.kind = type;
  o.payload = jsonutil::DumpValid(part);
  *out = std::move(o);
  return Status::OK();
}

// Content of a user/system/assistant message or of a tool message: a string, a list of
// parts, null or absent. Appends the items to `items` and reports the form.
template <typename Item>
Status DecodeContent(Json& message, const JsonPath& path, const DecodeOptions& options,
                     std::vector<Item>* items, ContentForm* form) {
  auto it = message.find("content");
  if (it == message.end()) {
    *form = ContentForm::kAbsent;
    return Status::OK();
  }
  const JsonPath content_path = path.Member("content");
  if (it->is_null()) {
    *form = ContentForm::kNull;
    return Status::OK();
  }
  if (it->is_string()) {
    *form = ContentForm::kString;
    items->emplace_back(Text{jsonutil::TakeString(*it), {}});
    return Status::OK();
  }
  if (!it->is_array()) {
    return jsonutil::WrongType(content_path, *it, "a string, an array of content parts, or null");
  }
  *form = ContentForm::kList;
  items->reserve(items->size() + it->size());
  for (std::size_t i = 0; i < it->size(); ++i) {
    ResultItem item;
    Status s = DecodePart((*it)[i], content_path.Index(i), options, &item);
    RECAP_RETURN_IF_ERROR(s);
    if (auto* t = std::get_if<Text>(&item)) {
      items->emplace_back(std::move(*t));
    } else {
      items->emplace_back(std::move(std::get<Opaque>(item)));
    }
  }
  return Status::OK();
}

Status DecodeToolCall(Json& call, const JsonPath& path, ToolCall* out) {
  if (!call.is_object()) {
    return jsonutil::WrongType(path, call,
                               "a tool call object {\"id\", \"type\", \"function\": {\"name\", "
                               "\"arguments\"}}");
  }
  auto id = call.find("id");
  if (id == call.end()) {
    return jsonutil::MissingMember(path, "id",
                                   "a tool call needs the `id` its `tool` message answers");
  }
  if (!id->is_string()) return jsonutil::WrongType(path.Member("id"), *id, "a string");
  auto fn = call.find("function");
  if (fn == call.end()) {
    return jsonutil::MissingMember(
        path, "function",
        "recap reads tool calls of type \"function\" ({\"name\", \"arguments\"})");
  }
  const JsonPath fn_path = path.Member("function");
  if (!fn->is_object()) {
    return jsonutil::WrongType(fn_path, *fn, "an object {\"name\", \"arguments\"}");
  }
  auto name = fn->find("name");
  if (name == fn->end()) {
    return jsonutil::MissingMember(fn_path, "name", "a function call needs the tool's name");
  }
  if (!name->is_string()) return jsonutil::WrongType(fn_path.Member("name"), *name, "a string");
  auto args = fn->find("arguments");
  if (args == fn->end()) {
    return jsonutil::MissingMember(fn_path, "arguments",
                                   "a function call needs its arguments as a JSON text");
  }
  if (!args->is_string()) {
    return jsonutil::WrongType(fn_path.Member("arguments"), *args,
                               "a string (the arguments as a JSON text, e.g. \"{}\")");
  }
  out->id = jsonutil::TakeString(*id);
  out->name = jsonutil::TakeString(*name);
  // Kept as the exact text given: it may not even be valid JSON, and the model sees it again.
  out->arguments = jsonutil::TakeString(*args);
  Json fn_extra = jsonutil::TakeUnknown(*fn, {"name", "arguments"});
  Json extra = jsonutil::TakeUnknown(call, {"id", "function"});  // `type` lands here
  if (!fn_extra.empty()) extra["function"] = std::move(fn_extra);
  out->extra = jsonutil::ExtraText(extra);
  return Status::OK();
}

Status DecodeOne(Json& m, const JsonPath& path, const DecodeOptions& options, Message* out) {
  if (!m.is_object()) return jsonutil::WrongType(path, m, "a message object with a `role`");
  auto role_it = m.find("role");
  if (role_it == m.end()) {
    return jsonutil::MissingMember(path, "role", std::string("expected ") + kAcceptedRoles);
  }
  const JsonPath role_path = path.Member("role");
  if (!role_it->is_string()) {
    return jsonutil::WrongType(role_path, *role_it, std::string("a string, ") + kAcceptedRoles);
  }
  const std::string role = role_it->get<std::string>();
  Message msg;
  if (role == "system" || role == "developer" || role == "user") {
    msg.role = role == "user" ? Role::kUser : Role::kSystem;
    Json extra = jsonutil::TakeUnknown(m, {"role", "content"});
    // `developer` is OpenAI's newer name for the system role; recap treats it as system and
    // remembers the name so that encoding writes it back.
    if (role == "developer") extra["role"] = "developer";
    Status s = DecodeContent(m, path, options, &msg.parts, &msg.form);
    RECAP_RETURN_IF_ERROR(s);
    msg.extra = jsonutil::ExtraText(extra);
  } else if (role == "assistant") {
    msg.role = Role::kAssistant;
    Json extra = jsonutil::TakeUnknown(m, {"role", "content", "tool_calls"});
    Status s = DecodeContent(m, path, options, &msg.parts, &msg.form);
    RECAP_RETURN_IF_ERROR(s);
    auto calls = m.find("tool_calls");
    if (calls != m.end()) {
      const JsonPath calls_path = path.Member("tool_calls");
      if (calls->is_array() && !calls->empty()) {
        msg.parts.reserve(msg.parts.size() + calls->size());
        for (std::size_t i = 0; i < calls->size(); ++i) {
          ToolCall call;
          s = DecodeToolCall((*calls)[i], calls_path.Index(i), &call);
          RECAP_RETURN_IF_ERROR(s);
          msg.parts.emplace_back(std::move(call));
        }
      } else if (calls->is_array() || calls->is_null()) {
        // `[]` and `null` carry no call; keeping them as written keeps the round trip exact.
        extra["tool_calls"] = std::move(*calls);
      } else {
        return jsonutil::WrongType(calls_path, *calls, "an array of tool calls");
      }
    }
    msg.extra = jsonutil::ExtraText(extra);
  } else if (role == "tool") {
    msg.role = Role::kTool;
    Json extra = jsonutil::TakeUnknown(m, {"role", "content", "tool_call_id"});
    auto id = m.find("tool_call_id");
    if (id == m.end()) {
      return jsonutil::MissingMember(path, "tool_call_id",
                                     "a `tool` message must name the tool call it answers");
    }
    if (!id->is_string()) {
      return jsonutil::WrongType(path.Member("tool_call_id"), *id, "a string");
    }
    ToolResult result;
    result.call_id = jsonutil::TakeString(*id);
    Status s = DecodeContent(m, path, options, &result.content, &result.form);
    RECAP_RETURN_IF_ERROR(s);
    msg.parts.emplace_back(std::move(result));
    msg.extra = jsonutil::ExtraText(extra);
  } else if (role == "function") {
    return Status::InvalidArgument(
        Where(role_path) +
        " is \"function\", the legacy function-calling role, which recap does not accept; "
        "write it as a \"tool\" message with a `tool_call_id` answering an assistant "
        "`tool_calls` entry.");
  } else {
    return Status::InvalidArgument(Where(role_path) + " is " + jsonutil::Quote(role) +
                                   "; expected " + kAcceptedRoles + ".");
  }
  msg.origin = Origin::kOpenAIChat;
  *out = std::move(msg);
  return Status::OK();
}

constexpr const char* kWhat = "the OpenAI chat JSON";

Status NotAnArray(const Json& doc) {
  std::string msg =
      std::string(kWhat) + " is " + jsonutil::TypeName(doc) + "; expected an array of messages";
  if (doc.is_object() && doc.contains("messages")) {
    msg += " (this looks like a request body: pass the value of its `messages` member)";
  }
  return Status::InvalidArgument(msg + ".");
}

// ---------------------------------------------------------------------------------------------
// Encoding

Status TextJson(const Text& t, const std::string& where, Json* out) {
  Json part = Json::object();
  part["type"] = "text";
  part["text"] = t.text;
  Status s = jsonutil::MergeExtraText(t.extra, where, &part, {"type"});
  RECAP_RETURN_IF_ERROR(s);
  *out = std::move(part);
  return Status::OK();
}

// A text or opaque item of a content field, with where it sits for error messages.
struct ContentItem {
  const Text* text = nullptr;
  const Opaque* opaque = nullptr;
  std::string where;
};

// Writes `items` as `key` of `target` in the form recorded, falling back to OpenAI's natural
// form when the recorded one cannot hold them (e.g. a "string" form with two texts).
Status WriteContent(const std::vector<ContentItem>& items, ContentForm form, bool null_when_empty,
                    Json* target) {
  const bool one_plain_text =
      items.size() == 1 && items[0].text != nullptr && items[0].text->extra.empty();
  if (form == ContentForm::kAbsent && items.empty()) return Status::OK();
  if (form == ContentForm::kNull && items.empty()) {
    (*target)["content"] = nullptr;
    return Status::OK();
  }
  if (form != ContentForm::kList) {
    if (one_plain_text) {
      (*target)["content"] = items[0].text->text;
      return Status::OK();
    }
    if (items.empty()) {
      if (form == ContentForm::kDefault && null_when_empty) {
        (*target)["content"] = nullptr;
      } else {
        (*target)["content"] = "";
      }
      return Status::OK();
    }
  }
  Json list = Json::array();
  for (const ContentItem& item : items) {
    Json part;
    Status s = item.text != nullptr
                   ? TextJson(*item.text, item.where, &part)
                   : jsonutil::ParsePayload(item.opaque->payload, item.where, &part);
    RECAP_RETURN_IF_ERROR(s);
    list.push_back(std::move(part));
  }
  (*target)["content"] = std::move(list);
  return Status::OK();
}

Status ToolCallJson(const ToolCall& call, const std::string& where, Json* out) {
  Json j = Json::object();
  j["id"] = call.id;
  // A call decoded without `type` gains it here: the API requires it in requests.
  j["type"] = "function";
  Json fn = Json::object();
  fn["name"] = call.name;
  fn["arguments"] = call.arguments;
  j["function"] = std::move(fn);
  Status s = jsonutil::MergeExtraText(call.extra, where, &j);
  RECAP_RETURN_IF_ERROR(s);
  *out = std::move(j);
  return Status::OK();
}

Status ToolMessageJson(const ToolResult& r, const Message& m, const std::string& where, Json* out) {
  Json j = Json::object();
  j["role"] = "tool";
  j["tool_call_id"] = r.call_id;
  std::vector<ContentItem> items;
  items.reserve(r.content.size());
  for (std::size_t i = 0; i < r.content.size(); ++i) {
    ContentItem item;
    item.where = where + ".content[" + std::to_string(i) + "]";
    if (const auto* t = std::get_if<Text>(&r.content[i])) {
      item.text = t;
    } else {
      item.opaque = &std::get<Opaque>(r.content[i]);
    }
    items.push_back(std::move(item));
  }
  // OpenAI has no is_error: an error result is written as its content alone.
  Status s = WriteContent(items, r.form, false, &j);
  if (s.ok()) s = jsonutil::MergeExtraText(m.extra, where, &j);
  if (s.ok()) s = jsonutil::MergeExtraText(r.extra, where, &j);
  RECAP_RETURN_IF_ERROR(s);
  *out = std::move(j);
  return Status::OK();
}

// Encodes one recap message into one or more OpenAI messages (a message carrying several
// tool results becomes several `tool` messages). `where` is its path, e.g. "messages[3]".
Status ExpandOwnFields(const Message& m, const std::string& where, std::vector<Json>* out) {
  std::vector<ContentItem> content;
  std::vector<std::pair<const ToolCall*, std::string>> calls;
  std::vector<std::pair<const ToolResult*, std::string>> results;
  for (std::size_t i = 0; i < m.parts.size(); ++i) {
    std::string part_where = where + ".parts[" + std::to_string(i) + "]";
    const Part& p = m.parts[i];
    if (const auto* t = std::get_if<Text>(&p)) {
      content.push_back({t, nullptr, std::move(part_where)});
    } else if (const auto* o = std::get_if<Opaque>(&p)) {
      content.push_back({nullptr, o, std::move(part_where)});
    } else if (const auto* c = std::get_if<ToolCall>(&p)) {
      if (m.role != Role::kAssistant) {
        return Status::InvalidArgument("`" + part_where + "` is a tool call in a " +
                                       RoleName(m.role) +
                                       " message; OpenAI chat carries tool calls only in "
                                       "assistant messages.");
      }
      calls.emplace_back(c, std::move(part_where));
    } else {
      if (m.role != Role::kTool && m.role != Role::kUser) {
        return Status::InvalidArgument("`" + part_where + "` is a tool result in a " +
                                       RoleName(m.role) +
                                       " message; OpenAI chat carries tool results only as "
                                       "`tool` messages.");
      }
      results.emplace_back(&std::get<ToolResult>(p), std::move(part_where));
    }
  }

  for (const auto& [result, result_where] : results) {
    Json j;
    Status s = ToolMessageJson(*result, m, result_where, &j);
    RECAP_RETURN_IF_ERROR(s);
    out->push_back(std::move(j));
  }
  if (m.role == Role::kTool) {
    if (results.empty()) {
      return Status::InvalidArgument("`" + where +
                                     "` is a tool message without a tool result; OpenAI chat "
                                     "needs a `tool_call_id` for every `tool` message.");
    }
    if (content.empty()) return Status::OK();
  }
  // Texts beside tool results (an Anthropic habit) follow them as a user message.
  if (!results.empty() && content.empty()) return Status::OK();

  Json j = Json::object();
  j["role"] = m.role == Role::kAssistant ? "assistant"
              : m.role == Role::kSystem  ? "system"
                                         : "user";
  const ContentForm form = results.empty() ? m.form : ContentForm::kDefault;
  Status s = WriteContent(content, form, !calls.empty(), &j);
  RECAP_RETURN_IF_ERROR(s);
  if (!calls.empty()) {
    Json list = Json::array();
    for (const auto& [c, call_where] : calls) {
      Json call;
      s = ToolCallJson(*c, call_where, &call);
      RECAP_RETURN_IF_ERROR(s);
      list.push_back(std::move(call));
    }
    j["tool_calls"] = std::move(list);
  }
  s = jsonutil::MergeExtraText(m.extra, where, &j);
  RECAP_RETURN_IF_ERROR(s);
  out->push_back(std::move(j));
  return Status::OK();
}

// A message of another format is written without that format's own fields (ForeignFields).
Status Expand(const Message& m, const std::string& where, std::vector<Json>* out) {
  std::optional<Message> stripped;
  Status s = codec_shell::ForeignFields(m, Origin::kOpenAIChat, where, &stripped);
  RECAP_RETURN_IF_ERROR(s);
  return ExpandOwnFields(stripped ? *stripped : m, where, out);
}

}  // namespace

Status DecodeEach(std::string_view json, const DecodeOptions& options, const MessageSink& sink) {
  return codec_shell::Guarded("decoding OpenAI chat messages", [&]() -> Status {
    jsonutil::Reader reader(json, kWhat, jsonutil::CarriedJson());
    const JsonPath root("messages");
    return jsonutil::ForEachElement(
        reader,
        [&](Json& element, std::size_t i) {
          Message m;
          Status s = DecodeOne(element, root.Index(i), options, &m);
          RECAP_RETURN_IF_ERROR(s);
          element = nullptr;  // the tree goes before the sink stores the message
          const bool instructions = i == 0 && options.split_instructions && m.role == Role::kSystem;
          return sink(std::move(m), instructions);
        },
        NotAnArray);
  });
}

Result<Conversation> DecodeMessages(std::string_view json, const DecodeOptions& options) {
  return codec_shell::Collect(
      [&](const MessageSink& sink) { return DecodeEach(json, options, sink); });
}

Result<Message> DecodeMessage(std::string_view json, const DecodeOptions& options) {
  return codec_shell::Guarded("decoding an OpenAI chat message", [&] {
    return codec_shell::DecodeDocument(json, kWhat, [&](Json& doc, Message* m) {
      return DecodeOne(doc, JsonPath("message"), options, m);
    });
  });
}

Result<std::string> EncodeMessages(const Conversation& conversation) {
  return codec_shell::Guarded("encoding OpenAI chat messages",
                              [&] { return codec_shell::EncodeExpanded(conversation, Expand); });
}

Result<std::string> EncodeMessage(const Message& message) {
  return codec_shell::Guarded("encoding an OpenAI chat message", [&] {
    return codec_shell::EncodeSingle(
        message, Expand, "OpenAI chat messages (each tool result is its own `tool` message)",
        "openai_chat::EncodeMessages");
  });
}

namespace {

// One message's piece of the array (EncodeTranscript, EncodeTranscriptTo, EncodeTranscriptParts).
Status Fragment(const Message& m, const std::string& where, std::string* text) {
  return codec_shell::ExpandedFragment(m, where, text, Expand);
}

}  // namespace

Result<std::string> EncodeTranscript(const Transcript& transcript, std::size_t begin) {
  return codec_shell::Guarded("encoding OpenAI chat messages", [&] {
    return codec_shell::EncodeKept(transcript, begin, internal::WireFormat::kOpenAiChat, Fragment);
  });
}

Status EncodeTranscriptTo(const Transcript& transcript, std::size_t begin, std::string* out) {
  return codec_shell::Guarded("encoding OpenAI chat messages", [&] {
    return codec_shell::EncodeKeptTo(transcript, begin, internal::WireFormat::kOpenAiChat, Fragment,
                                     out);
  });
}

Status EncodeTranscriptParts(const Transcript& transcript, std::size_t begin,
                             std::vector<std::string_view>* parts) {
  return codec_shell::Guarded("encoding OpenAI chat messages", [&] {
    return codec_shell::KeptParts(transcript, begin, internal::WireFormat::kOpenAiChat, Fragment,
                                  parts);
  });
}

}  // namespace openai_chat
}  // namespace v0
}  // namespace recap
