// Anthropic Messages API `messages` <-> recap messages. The mapping is documented in
// docs/message-model.md; the comments here explain the choices that are not obvious.
#include <string>
#include <utility>
#include <vector>

#include "recap/codec.h"

#include "codecs/codec_shell.h"
#include "json/json_util.h"

namespace recap {
inline namespace v0 {
namespace anthropic {

namespace {

using jsonutil::Json;
using jsonutil::JsonPath;

std::string Where(const JsonPath& path) { return "`" + path.ToString() + "`"; }

bool EndsWith(std::string_view s, std::string_view suffix) {
  return s.size() >= suffix.size() && s.substr(s.size() - suffix.size()) == suffix;
}

// Block types recap carries without reading them.
bool IsPlainOpaqueType(std::string_view type) {
  return type == "thinking" || type == "redacted_thinking" || type == "image" ||
         type == "document" || type == "search_result" || type == "container_upload" ||
         type == "compaction";
}

// ---------------------------------------------------------------------------------------------
// Decoding

Status RequireString(Json& object, const JsonPath& path, std::string_view member,
                     std::string_view why, Json** out) {
  auto it = object.find(member);
  if (it == object.end()) return jsonutil::MissingMember(path, member, why);
  if (!it->is_string()) return jsonutil::WrongType(path.Member(member), *it, "a string");
  *out = &*it;
  return Status::OK();
}

// The block's `type`, which every block must have as a string.
Status BlockType(Json& block, const JsonPath& path, std::string* type) {
  if (!block.is_object()) {
    return jsonutil::WrongType(path, block, "a content block object with a `type`");
  }
  auto it = block.find("type");
  if (it == block.end()) {
    return jsonutil::MissingMember(path, "type",
                                   "every content block needs a string `type` such as \"text\"");
  }
  if (!it->is_string()) return jsonutil::WrongType(path.Member("type"), *it, "a string");
  *type = it->get<std::string>();
  return Status::OK();
}

Status DecodeText(Json& block, const JsonPath& path, Text* out) {
  Json* text = nullptr;
  Status s = RequireString(block, path, "text", "a \"text\" block needs its text", &text);
  RECAP_RETURN_IF_ERROR(s);
  out->text = jsonutil::TakeString(*text);
  out->extra = jsonutil::ExtraText(jsonutil::TakeUnknown(block, {"type", "text"}));
  return Status::OK();
}

Opaque MakeOpaque(Json& block, std::string type) {
  Opaque o;
  o.kind = std::move(type);
  o.payload = jsonutil::DumpValid(block);
  return o;
}

// An item of a tool_result's content list: text, or anything else (images, documents,
// search results, tool references) carried as an opaque item.
Status DecodeResultItem(Json& block, const JsonPath& path, ResultItem* out) {
  std::string type;
  Status s = BlockType(block, path, &type);
  RECAP_RETURN_IF_ERROR(s);
  if (type == "text") {
    Text t;
    s = DecodeText(block, path, &t);
    RECAP_RETURN_IF_ERROR(s);
    *out = std::move(t);
  } else {
    *out = MakeOpaque(block, std::move(type));
  }
  return Status::OK();
}

Status DecodeToolUse(Json& block, const JsonPath& path, ToolCall* out) {
  Json* id = nullptr;
  Json* name = nullptr;
  Status s =
      RequireString(block, path, "id", "a tool_use block needs the id its result names", &id);
  if (s.ok())
    s = RequireString(block, path, "name", "a tool_use block needs the tool's name", &name);
  RECAP_RETURN_IF_ERROR(s);
  auto input = block.find("input");
  if (input == block.end()) {
    return jsonutil::MissingMember(path, "input",
                                   "a tool_use block needs its `input` (an object, possibly {})");
  }
  out->id = jsonutil::TakeString(*id);
  out->name = jsonutil::TakeString(*name);
  // Ordered, compact, UTF-8 kept: the same text every time the same input is decoded.
  out->arguments = jsonutil::DumpValid(*input);
  out->extra = jsonutil::ExtraText(jsonutil::TakeUnknown(block, {"type", "id", "name", "input"}));
  return Status::OK();
}

Status DecodeToolResult(Json& block, const JsonPath& path, ToolResult* out) {
  Json* id = nullptr;
  Status s = RequireString(block, path, "tool_use_id",
                           "a tool_result block must name the tool_use it answers", &id);
  RECAP_RETURN_IF_ERROR(s);
  out->call_id = jsonutil::TakeString(*id);
  Json extra = jsonutil::TakeUnknown(block, {"type", "tool_use_id", "content", "is_error"});

  auto error = block.find("is_error");
  if (error != block.end()) {
    if (!error->is_boolean()) {
      return jsonutil::WrongType(path.Member("is_error"), *error, "true or false");
    }
    out->is_error = error->get<bool>();
    // An explicit `false` means the same as none, but was written: keep it written.
    if (!out->is_error) extra["is_error"] = false;
  }

  auto content = block.find("content");
  if (content == block.end()) {
    out->form = ContentForm::kAbsent;
  } else if (content->is_null()) {
    out->form = ContentForm::kNull;
  } else if (content->is_string()) {
    out->form = ContentForm::kString;
    out->content.emplace_back(Text{jsonutil::TakeString(*content), {}});
  } else if (content->is_array()) {
    out->form = ContentForm::kList;
    const JsonPath content_path = path.Member("content");
    out->content.reserve(content->size());
    for (std::size_t i = 0; i < content->size(); ++i) {
      ResultItem item;
      s = DecodeResultItem((*content)[i], content_path.Index(i), &item);
      RECAP_RETURN_IF_ERROR(s);
      out->content.push_back(std::move(item));
    }
  } else {
    return jsonutil::WrongType(path.Member("content"), *content,
                               "a string or an array of content blocks");
  }
  out->extra = jsonutil::ExtraText(extra);
  return Status::OK();
}

Status DecodeBlock(Json& block, const JsonPath& path, const DecodeOptions& options, Part* out) {
  std::string type;
  Status s = BlockType(block, path, &type);
  RECAP_RETURN_IF_ERROR(s);
  if (type == "text") {
    Text t;
    s = DecodeText(block, path, &t);
    if (s.ok()) *out = std::move(t);
    return s;
  }
  if (type == "tool_use") {
    ToolCall c;
    s = DecodeToolUse(block, path, &c);
    if (s.ok()) *out = std::move(c);
    return s;
  }
  if (type == "tool_result") {
    ToolResult r;
    s = DecodeToolResult(block, path, &r);
    if (s.ok()) *out = std::move(r);
    return s;
  }
  if (IsPlainOpaqueType(type)) {
    *out = MakeOpaque(block, std::move(type));
    return Status::OK();
  }
  // Server tools (web search, code execution, MCP, …) run on Anthropic's side and come back
  // as a *_tool_use / *_tool_result pair. recap does not read them but links them so the
  // cutter never separates the two.
  const bool call = EndsWith(type, "_tool_use");
  if (call || EndsWith(type, "_tool_result")) {
    auto id = block.find(call ? "id" : "tool_use_id");
    std::string link_id = id != block.end() && id->is_string() ? id->get<std::string>() : "";
    Opaque o = MakeOpaque(block, std::move(type));
    if (!link_id.empty()) {
      o.link = call ? OpaqueLink::kCall : OpaqueLink::kResult;
      o.link_id = std::move(link_id);
    }
    *out = std::move(o);
    return Status::OK();
  }
  if (!options.keep_unknown_blocks) {
    return Status::InvalidArgument(
        Where(path.Member("type")) + " is " + jsonutil::Quote(type) +
        ", a content block type recap does not know (known: \"text\", \"image\", \"document\", "
        "\"search_result\", \"thinking\", \"redacted_thinking\", \"tool_use\", \"tool_result\", "
        "\"container_upload\", \"compaction\" and server tool blocks ending in \"_tool_use\" or "
        "\"_tool_result\"). Set DecodeOptions::keep_unknown_blocks to keep unknown blocks as "
        "opaque items.");
  }
  *out = MakeOpaque(block, std::move(type));
  return Status::OK();
}

Status DecodeOne(Json& m, const JsonPath& path, const DecodeOptions& options, Message* out) {
  if (!m.is_object()) return jsonutil::WrongType(path, m, "a message object with a `role`");
  auto role_it = m.find("role");
  if (role_it == m.end()) {
    return jsonutil::MissingMember(path, "role", "expected \"user\" or \"assistant\"");
  }
  const JsonPath role_path = path.Member("role");
  if (!role_it->is_string()) {
    return jsonutil::WrongType(role_path, *role_it, "a string, \"user\" or \"assistant\"");
  }
  const std::string role = role_it->get<std::string>();
  Message msg;
  if (role == "user") {
    msg.role = Role::kUser;
  } else if (role == "assistant") {
    msg.role = Role::kAssistant;
  } else if (role == "system") {
    // A system message between the turns (the API's mid-conversation system messages, which
    // Claude Code sends): kept as one, and written back as one. The system prompt itself is
    // the request's top-level `system`, never in `messages`.
    msg.role = Role::kSystem;
  } else {
    return Status::InvalidArgument(Where(role_path) + " is " + jsonutil::Quote(role) +
                                   "; expected \"user\", \"assistant\" or \"system\".");
  }
  // OpenAI chat's members in what should be an Anthropic message: kept as extra they would be
  // sent back as written and the calls never seen (the cutter could part them from their
  // results), so the message is refused, saying which format it looks like.
  for (const char* member : {"tool_calls", "tool_call_id", "function_call"}) {
    if (m.contains(member)) {
      return Status::InvalidArgument(
          Where(path) + " has `" + member +
          "`, which is OpenAI chat's, not Anthropic's: Anthropic carries calls and results as "
          "`tool_use` and `tool_result` content blocks. Decode OpenAI chat messages with "
          "recap::openai_chat (the format \"openai-chat\").");
    }
  }
  // Message-level fields of a response (id, model, stop_reason, usage, …) are kept as extra;
  // recap's own Message::id is assigned by the Transcript.
  Json extra = jsonutil::TakeUnknown(m, {"role", "content"});
  auto content = m.find("content");
  if (content == m.end()) {
    msg.form = ContentForm::kAbsent;
  } else if (content->is_null()) {
    msg.form = ContentForm::kNull;
  } else if (content->is_string()) {
    msg.form = ContentForm::kString;
    msg.parts.emplace_back(Text{jsonutil::TakeString(*content), {}});
  } else if (content->is_array()) {
    msg.form = ContentForm::kList;
    const JsonPath content_path = path.Member("content");
    msg.parts.reserve(content->size());
    for (std::size_t i = 0; i < content->size(); ++i) {
      Part part;
      Status s = DecodeBlock((*content)[i], content_path.Index(i), options, &part);
      RECAP_RETURN_IF_ERROR(s);
      msg.parts.push_back(std::move(part));
    }
  } else {
    return jsonutil::WrongType(path.Member("content"), *content,
                               "a string or an array of content blocks");
  }
  msg.extra = jsonutil::ExtraText(extra);
  msg.origin = Origin::kAnthropic;
  // A compaction block makes the message a checkpoint Anthropic wrote (R14.1).
  msg.summary = FindProviderCheckpoint(msg).has_value();
  *out = std::move(msg);
  return Status::OK();
}

constexpr const char* kWhat = "the Anthropic messages JSON";

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

std::string Index(const std::string& where, std::string_view member, std::size_t i) {
  return where + "." + std::string(member) + "[" + std::to_string(i) + "]";
}

Status TextBlock(const Text& t, const std::string& where, Json* out) {
  Json block = Json::object();
  block["type"] = "text";
  block["text"] = t.text;
  Status s = jsonutil::MergeExtraText(t.extra, where, &block, {"type"});
  RECAP_RETURN_IF_ERROR(s);
  *out = std::move(block);
  return Status::OK();
}

bool IsPlainText(const Text& t) { return t.extra.empty(); }

Status ToolUseBlock(const ToolCall& c, const std::string& where, Json* out) {
  Json block = Json::object();
  block["type"] = "tool_use";
  block["id"] = c.id;
  block["name"] = c.name;
  Json input;
  Status s = jsonutil::Parse(
      c.arguments,
      "the arguments of the tool call " + jsonutil::Quote(c.name) + " at `" + where + "`", &input,
      jsonutil::CarriedJson());
  if (!s.ok()) {
    return Status::InvalidArgument(s.message() +
                                   " Anthropic's tool_use block needs them as a JSON value "
                                   "(`input`).");
  }
  block["input"] = std::move(input);
  // An OpenAI call's extra holds "type": "function", which must not rename the block.
  s = jsonutil::MergeExtraText(c.extra, where, &block, {"type"});
  RECAP_RETURN_IF_ERROR(s);
  *out = std::move(block);
  return Status::OK();
}

Status ToolResultBlock(const ToolResult& r, const std::string& where, Json* out) {
  Json block = Json::object();
  block["type"] = "tool_result";
  block["tool_use_id"] = r.call_id;
  const bool one_plain_text = r.content.size() == 1 && std::holds_alternative<Text>(r.content[0]) &&
                              IsPlainText(std::get<Text>(r.content[0]));
  if (r.content.empty() && r.form != ContentForm::kList) {
    if (r.form == ContentForm::kNull) {
      block["content"] = nullptr;
    } else if (r.form == ContentForm::kString) {
      block["content"] = "";
    }
    // Default and absent: no content member, which Anthropic reads as an empty result.
  } else if (one_plain_text && r.form != ContentForm::kList) {
    block["content"] = std::get<Text>(r.content[0]).text;
  } else {
    Json list = Json::array();
    for (std::size_t i = 0; i < r.content.size(); ++i) {
      const std::string item_where = Index(where, "content", i);
      Json item;
      Status s =
          std::holds_alternative<Text>(r.content[i])
              ? TextBlock(std::get<Text>(r.content[i]), item_where, &item)
              : jsonutil::ParsePayload(std::get<Opaque>(r.content[i]).payload, item_where, &item);
      RECAP_RETURN_IF_ERROR(s);
      list.push_back(std::move(item));
    }
    block["content"] = std::move(list);
  }
  if (r.is_error) block["is_error"] = true;
  Status s = jsonutil::MergeExtraText(r.extra, where, &block, {"type"});
  RECAP_RETURN_IF_ERROR(s);
  *out = std::move(block);
  return Status::OK();
}

Status EncodeOneOwnFields(const Message& m, const std::string& where, Json* out) {
  if (m.role == Role::kSystem && m.origin != Origin::kAnthropic) {
    return Status::InvalidArgument(
        "`" + where +
        "` is a system message, which the Anthropic Messages API accepts inside `messages` only "
        "as a mid-conversation system message of its own: pass its text as the request's "
        "top-level `system` parameter instead.");
  }
  Json j = Json::object();
  // A recap `tool` message (as decoded from OpenAI chat) is a user turn of tool results here.
  j["role"] = m.role == Role::kAssistant ? "assistant"
              : m.role == Role::kSystem  ? "system"
                                         : "user";
  const bool one_plain_text = m.parts.size() == 1 && std::holds_alternative<Text>(m.parts[0]) &&
                              IsPlainText(std::get<Text>(m.parts[0]));
  if (m.parts.empty() && (m.form == ContentForm::kNull || m.form == ContentForm::kAbsent)) {
    if (m.form == ContentForm::kNull) j["content"] = nullptr;
  } else if (m.form == ContentForm::kString && (one_plain_text || m.parts.empty())) {
    j["content"] = m.parts.empty() ? std::string() : std::get<Text>(m.parts[0]).text;
  } else {
    Json list = Json::array();
    for (std::size_t i = 0; i < m.parts.size(); ++i) {
      const std::string part_where = Index(where, "parts", i);
      const Part& p = m.parts[i];
      Json block;
      Status s;
      if (const auto* t = std::get_if<Text>(&p)) {
        s = TextBlock(*t, part_where, &block);
      } else if (const auto* c = std::get_if<ToolCall>(&p)) {
        if (m.role != Role::kAssistant) {
          return Status::InvalidArgument("`" + part_where + "` is a tool call in a " +
                                         RoleName(m.role) +
                                         " message; Anthropic carries tool_use blocks only in "
                                         "assistant messages.");
        }
        s = ToolUseBlock(*c, part_where, &block);
      } else if (const auto* r = std::get_if<ToolResult>(&p)) {
        if (m.role == Role::kAssistant) {
          return Status::InvalidArgument("`" + part_where +
                                         "` is a tool result in an assistant message; Anthropic "
                                         "carries tool_result blocks only in user messages.");
        }
        s = ToolResultBlock(*r, part_where, &block);
      } else {
        s = jsonutil::ParsePayload(std::get<Opaque>(p).payload, part_where, &block);
      }
      RECAP_RETURN_IF_ERROR(s);
      list.push_back(std::move(block));
    }
    j["content"] = std::move(list);
  }
  Status s = jsonutil::MergeExtraText(m.extra, where, &j, {"role"});
  RECAP_RETURN_IF_ERROR(s);
  *out = std::move(j);
  return Status::OK();
}

// A message of another format is written without that format's own fields (ForeignFields).
Status EncodeOne(const Message& m, const std::string& where, Json* out) {
  std::optional<Message> stripped;
  Status s = codec_shell::ForeignFields(m, Origin::kAnthropic, where, &stripped);
  RECAP_RETURN_IF_ERROR(s);
  return EncodeOneOwnFields(stripped ? *stripped : m, where, out);
}

}  // namespace

Status DecodeEach(std::string_view json, const DecodeOptions& options, const MessageSink& sink) {
  return codec_shell::Guarded("decoding Anthropic messages", [&]() -> Status {
    jsonutil::Reader reader(json, kWhat, jsonutil::CarriedJson());
    const JsonPath root("messages");
    return jsonutil::ForEachElement(
        reader,
        [&](Json& element, std::size_t i) {
          Message m;
          Status s = DecodeOne(element, root.Index(i), options, &m);
          RECAP_RETURN_IF_ERROR(s);
          element = nullptr;
          return sink(std::move(m), false);  // the system prompt is never in `messages`
        },
        NotAnArray);
  });
}

Result<Conversation> DecodeMessages(std::string_view json, const DecodeOptions& options) {
  return codec_shell::Collect(
      [&](const MessageSink& sink) { return DecodeEach(json, options, sink); });
}

Result<Message> DecodeMessage(std::string_view json, const DecodeOptions& options) {
  return codec_shell::Guarded("decoding an Anthropic message", [&] {
    return codec_shell::DecodeDocument(json, kWhat, [&](Json& doc, Message* m) {
      return DecodeOne(doc, JsonPath("message"), options, m);
    });
  });
}

Result<std::string> EncodeMessages(const Conversation& conversation) {
  return codec_shell::Guarded("encoding Anthropic messages", [&]() -> Result<std::string> {
    if (conversation.instructions) {
      return Status::InvalidArgument(
          "the conversation has instructions, but the Anthropic Messages API takes the system "
          "prompt outside `messages` (the request's top-level `system` parameter): send the "
          "instructions' text there and encode a Conversation without them.");
    }
    std::string out = "[";
    for (std::size_t i = 0; i < conversation.messages.size(); ++i) {
      const std::string where = "messages[" + std::to_string(i) + "]";
      Json j;
      Status s = EncodeOne(conversation.messages[i], where, &j);
      RECAP_RETURN_IF_ERROR(s);
      if (i > 0) out += ',';
      s = jsonutil::AppendDump(j, "`" + where + "`", &out, /*depth=*/1);
      RECAP_RETURN_IF_ERROR(s);
    }
    out += ']';
    return out;
  });
}

Result<std::string> EncodeMessage(const Message& message) {
  return codec_shell::Guarded("encoding an Anthropic message", [&]() -> Result<std::string> {
    Json j;
    Status s = EncodeOne(message, "message", &j);
    std::string text;
    if (s.ok()) s = jsonutil::Dump(j, "the message", &text);
    RECAP_RETURN_IF_ERROR(s);
    return text;
  });
}

namespace {

// One message's piece of the array (EncodeTranscript, EncodeTranscriptTo, EncodeTranscriptParts).
Status Fragment(const Message& m, const std::string& where, std::string* text) {
  Json j;
  RECAP_RETURN_IF_ERROR(EncodeOne(m, where, &j));
  return jsonutil::AppendDump(j, "`" + where + "`", text, /*depth=*/1);
}

}  // namespace

Result<std::string> EncodeTranscript(const Transcript& transcript, std::size_t begin) {
  return codec_shell::Guarded("encoding Anthropic messages", [&] {
    return codec_shell::EncodeKept(transcript, begin, internal::WireFormat::kAnthropic, Fragment);
  });
}

Status EncodeTranscriptTo(const Transcript& transcript, std::size_t begin, std::string* out) {
  return codec_shell::Guarded("encoding Anthropic messages", [&] {
    return codec_shell::EncodeKeptTo(transcript, begin, internal::WireFormat::kAnthropic, Fragment,
                                     out);
  });
}

Status EncodeTranscriptParts(const Transcript& transcript, std::size_t begin,
                             std::vector<std::string_view>* parts) {
  return codec_shell::Guarded("encoding Anthropic messages", [&] {
    return codec_shell::KeptParts(transcript, begin, internal::WireFormat::kAnthropic, Fragment,
                                  parts);
  });
}

}  // namespace anthropic
}  // namespace v0
}  // namespace recap
