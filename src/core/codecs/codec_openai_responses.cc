// OpenAI Responses API input items <-> recap messages. The mapping is documented in
// docs/message-model.md ("OpenAI Responses items"); the comments here explain the choices that
// are not obvious.
//
// One item becomes one message, with one exception: `reasoning` items travel with the item
// they precede when that is the model's own (an assistant message or a call), as leading
// opaque parts of its message. The cutter never separates the parts of a message, so a kept
// call keeps its reasoning and a summarized one loses it with the call.
#include <string>
#include <utility>
#include <vector>

#include "recap/codec.h"

#include "codecs/codec_shell.h"
#include "json/json_util.h"

namespace recap {
inline namespace v0 {
namespace openai_responses {

namespace {

using jsonutil::Json;
using jsonutil::JsonPath;

std::string Where(const JsonPath& path) { return "`" + path.ToString() + "`"; }

// A call and the item answering it, other than function calls: the output's member naming
// the call (the call always names itself with `call_id`, except an MCP approval request).
struct OpaquePair {
  const char* call;
  const char* call_key;
  const char* output;
  const char* output_key;
};
constexpr OpaquePair kOpaquePairs[] = {
    {"computer_call", "call_id", "computer_call_output", "call_id"},
    {"custom_tool_call", "call_id", "custom_tool_call_output", "call_id"},
    {"local_shell_call", "call_id", "local_shell_call_output", "id"},
    {"mcp_approval_request", "id", "mcp_approval_response", "approval_request_id"},
};

// Content part types of a `message` item (and of a function_call_output's list). Opaque
// parts of these kinds are content; other opaque parts are whole items.
bool IsContentKind(const std::string& kind) {
  return kind.rfind("input_", 0) == 0 || kind.rfind("output_", 0) == 0 || kind == "refusal";
}

// Opaque kinds of the other formats, which have no Responses equivalent.
bool IsForeignKind(const std::string& kind) {
  return kind == "thinking" || kind == "redacted_thinking" || kind == "image" ||
         kind == "document" || kind == "image_url" || kind == "file";
}

const char* DefaultTextType(Role role) {
  return role == Role::kAssistant ? "output_text" : "input_text";
}

// ---------------------------------------------------------------------------------------------
// Decoding

// One content part. `text_type` is the text type the role implies; a text part of another
// text type records it in its extra.
Status DecodePart(Json& part, const JsonPath& path, const char* text_type,
                  const DecodeOptions& options, ResultItem* out) {
  if (!part.is_object()) {
    return jsonutil::WrongType(path, part, "a content part object with a `type`");
  }
  auto type_it = part.find("type");
  if (type_it == part.end()) {
    return jsonutil::MissingMember(path, "type",
                                   "every content part needs a string `type` such as "
                                   "\"input_text\"");
  }
  const JsonPath type_path = path.Member("type");
  if (!type_it->is_string()) return jsonutil::WrongType(type_path, *type_it, "a string");
  const std::string type = type_it->get<std::string>();
  if (type == "input_text" || type == "output_text") {
    auto text_it = part.find("text");
    if (text_it == part.end()) {
      return jsonutil::MissingMember(path, "text", "a text part needs its text");
    }
    if (!text_it->is_string()) {
      return jsonutil::WrongType(path.Member("text"), *text_it, "a string");
    }
    Text t;
    t.text = jsonutil::TakeString(*text_it);
    Json extra = jsonutil::TakeUnknown(part, {"type", "text"});
    if (type != text_type) extra["type"] = type;
    t.extra = jsonutil::ExtraText(extra);
    *out = std::move(t);
    return Status::OK();
  }
  if (codec_shell::IsToolShapedPartType(type)) {
    return codec_shell::ToolShapedPartRefused(
        Where(type_path), type,
        "In OpenAI Responses a call is an input item of its own (`function_call`, with its "
        "`call_id`) and its result another (`function_call_output`)");
  }
  const bool known =
      type == "refusal" || type == "input_image" || type == "input_file" || type == "input_audio";
  if (!known && !options.keep_unknown_blocks) {
    return Status::InvalidArgument(
        Where(type_path) + " is " + jsonutil::Quote(type) +
        ", a content part type recap does not know (known: \"input_text\", \"output_text\", "
        "\"refusal\", \"input_image\", \"input_file\", \"input_audio\"). Set "
        "DecodeOptions::keep_unknown_blocks to keep unknown parts as opaque items.");
  }
  Opaque o;
  o.kind = type;
  o.payload = jsonutil::DumpValid(part);
  *out = std::move(o);
  return Status::OK();
}

// `content` of a message item, or `output` of a function_call_output.
template <typename Item>
Status DecodeContent(Json& item, const char* key, const JsonPath& path, const char* text_type,
                     const DecodeOptions& options, std::vector<Item>* items, ContentForm* form) {
  auto it = item.find(key);
  if (it == item.end()) {
    return jsonutil::MissingMember(path, key, "expected a string or an array of content parts");
  }
  const JsonPath content_path = path.Member(key);
  if (it->is_string()) {
    *form = ContentForm::kString;
    items->emplace_back(Text{jsonutil::TakeString(*it), {}});
    return Status::OK();
  }
  if (!it->is_array()) {
    return jsonutil::WrongType(content_path, *it, "a string or an array of content parts");
  }
  *form = ContentForm::kList;
  for (std::size_t i = 0; i < it->size(); ++i) {
    ResultItem part;
    Status s = DecodePart((*it)[i], content_path.Index(i), text_type, options, &part);
    RECAP_RETURN_IF_ERROR(s);
    if (auto* t = std::get_if<Text>(&part)) {
      items->emplace_back(std::move(*t));
    } else {
      items->emplace_back(std::move(std::get<Opaque>(part)));
    }
  }
  return Status::OK();
}

Status StringMember(Json& item, const char* key, const JsonPath& path, const char* why,
                    std::string* out) {
  auto it = item.find(key);
  if (it == item.end()) return jsonutil::MissingMember(path, key, why);
  if (!it->is_string()) return jsonutil::WrongType(path.Member(key), *it, "a string");
  *out = jsonutil::TakeString(*it);
  return Status::OK();
}

Status DecodeMessageItem(Json& item, const JsonPath& path, const DecodeOptions& options,
                         Message* msg) {
  auto role_it = item.find("role");
  if (role_it == item.end()) {
    return jsonutil::MissingMember(path, "role",
                                   "expected one of \"user\", \"assistant\", \"system\", "
                                   "\"developer\"");
  }
  if (!role_it->is_string()) return jsonutil::WrongType(path.Member("role"), *role_it, "a string");
  const std::string role = role_it->get<std::string>();
  if (role == "user") {
    msg->role = Role::kUser;
  } else if (role == "assistant") {
    msg->role = Role::kAssistant;
  } else if (role == "system" || role == "developer") {
    msg->role = Role::kSystem;
  } else {
    return Status::InvalidArgument(Where(path.Member("role")) + " is " + jsonutil::Quote(role) +
                                   "; expected one of \"user\", \"assistant\", \"system\", "
                                   "\"developer\".");
  }
  // `type` ("message") is optional in the input list; it stays in extra only when written.
  Json extra = jsonutil::TakeUnknown(item, {"role", "content"});
  if (role == "developer") extra["role"] = "developer";
  std::vector<Part> parts;
  Status s =
      DecodeContent(item, "content", path, DefaultTextType(msg->role), options, &parts, &msg->form);
  RECAP_RETURN_IF_ERROR(s);
  for (Part& p : parts) msg->parts.push_back(std::move(p));
  msg->extra = jsonutil::ExtraText(extra);
  return Status::OK();
}

// Which side of a pair an opaque item is on, and the id linking it.
void LinkOpaque(const std::string& type, const Json& item, Opaque* o) {
  for (const OpaquePair& pair : kOpaquePairs) {
    const bool is_call = type == pair.call;
    if (!is_call && type != pair.output) continue;
    auto id = item.find(is_call ? pair.call_key : pair.output_key);
    if (id == item.end() || !id->is_string()) return;
    o->link = is_call ? OpaqueLink::kCall : OpaqueLink::kResult;
    o->link_id = id->get<std::string>();
    return;
  }
}

// An item that is the model's own: reasoning before it stays with it.
// A compaction item is not: reasoning is the model's thinking toward a reply, not part of a
// checkpoint, and goes before it as its own message.
bool IsModelItem(const Message& m) {
  if (m.role != Role::kAssistant || m.summary) return false;
  for (const Part& p : m.parts) {
    if (const auto* o = std::get_if<Opaque>(&p)) {
      if (o->link == OpaqueLink::kResult) return false;
    }
  }
  return true;
}

Status DecodeItem(Json& item, const JsonPath& path, const DecodeOptions& options, Message* out) {
  if (!item.is_object()) return jsonutil::WrongType(path, item, "an input item object");
  Message msg;
  auto type_it = item.find("type");
  if (type_it != item.end() && !type_it->is_string()) {
    return jsonutil::WrongType(path.Member("type"), *type_it, "a string");
  }
  const std::string type = type_it == item.end() ? "message" : type_it->get<std::string>();
  if (type == "message") {
    Status s = DecodeMessageItem(item, path, options, &msg);
    RECAP_RETURN_IF_ERROR(s);
  } else if (type == "function_call") {
    msg.role = Role::kAssistant;
    ToolCall call;
    Status s = StringMember(item, "call_id", path,
                            "a function call needs the `call_id` its output answers", &call.id);
    if (s.ok())
      s = StringMember(item, "name", path, "a function call needs the tool's name", &call.name);
    if (s.ok()) {
      // Kept as the exact text given: it may not even be valid JSON, and the model sees it again.
      s = StringMember(item, "arguments", path,
                       "a function call needs its arguments as a JSON text", &call.arguments);
    }
    RECAP_RETURN_IF_ERROR(s);
    call.extra =
        jsonutil::ExtraText(jsonutil::TakeUnknown(item, {"type", "call_id", "name", "arguments"}));
    msg.parts.emplace_back(std::move(call));
  } else if (type == "function_call_output") {
    msg.role = Role::kTool;
    ToolResult result;
    Status s =
        StringMember(item, "call_id", path, "a function call output must name the call it answers",
                     &result.call_id);
    if (s.ok()) {
      s = DecodeContent(item, "output", path, "input_text", options, &result.content, &result.form);
    }
    RECAP_RETURN_IF_ERROR(s);
    result.extra = jsonutil::ExtraText(jsonutil::TakeUnknown(item, {"type", "call_id", "output"}));
    msg.parts.emplace_back(std::move(result));
  } else if (IsContentKind(type)) {
    // A content part where an item belongs: carried as an opaque item, it would come back as
    // the content of a message on the way out.
    return Status::InvalidArgument(
        Where(path.Member("type")) + " is " + jsonutil::Quote(type) +
        ", a content part type, not an item type; content parts go in a message item's "
        "`content` ({\"role\": ..., \"content\": [...]}).");
  } else {
    // reasoning (with its encrypted_content), the other tools' calls and outputs, item
    // references and item types recap does not know: carried whole, byte for byte.
    Opaque o;
    o.kind = type;
    LinkOpaque(type, item, &o);
    o.payload = jsonutil::DumpValid(item);
    msg.role = o.link == OpaqueLink::kResult
                   ? (type == "mcp_approval_response" ? Role::kUser : Role::kTool)
                   : Role::kAssistant;
    msg.parts.emplace_back(std::move(o));
  }
  msg.origin = Origin::kOpenAIResponses;
  // A compaction item makes its message a checkpoint OpenAI wrote (R14.1).
  if (type == "compaction") msg.summary = FindProviderCheckpoint(msg).has_value();
  *out = std::move(msg);
  return Status::OK();
}

bool IsReasoningOnly(const Message& m) {
  if (m.role != Role::kAssistant || m.parts.empty()) return false;
  for (const Part& p : m.parts) {
    const auto* o = std::get_if<Opaque>(&p);
    if (o == nullptr || o->kind != "reasoning") return false;
  }
  return true;
}

constexpr const char* kWhat = "the OpenAI Responses input items";

Status NotAnArray(const Json& doc) {
  std::string msg = "the OpenAI Responses input is " + std::string(jsonutil::TypeName(doc)) +
                    "; expected an array of input items";
  if (doc.is_object() && doc.contains("input")) {
    msg += " (this looks like a request body: pass the value of its `input` member)";
  }
  return Status::InvalidArgument(msg + ".");
}

// Decodes the items of the array at the reader's cursor one by one and hands each message to
// `sink`, attaching each run of reasoning items to the model's item that follows it: the run
// is all that is held back while the items are read.
Status DecodeItems(jsonutil::Reader& reader, const DecodeOptions& options,
                   const MessageSink& sink) {
  const JsonPath root("input");
  std::vector<Part> pending;  // reasoning waiting for the item it precedes
  bool first = true;
  auto emit = [&](Message&& m) {
    const bool instructions = first && options.split_instructions && m.role == Role::kSystem;
    first = false;
    return sink(std::move(m), instructions);
  };
  auto flush = [&] {
    if (pending.empty()) return Status::OK();
    Message m;
    m.role = Role::kAssistant;
    m.origin = Origin::kOpenAIResponses;
    m.parts = std::move(pending);
    pending.clear();
    return emit(std::move(m));
  };
  Status s = jsonutil::ForEachElement(
      reader,
      [&](Json& element, std::size_t i) {
        Message m;
        Status st = DecodeItem(element, root.Index(i), options, &m);
        RECAP_RETURN_IF_ERROR(st);
        element = nullptr;
        if (IsReasoningOnly(m)) {
          for (Part& p : m.parts) pending.push_back(std::move(p));
          return Status::OK();
        }
        // (Not to a message item without content: its parts could not say where it begins.)
        if (!pending.empty() && !m.parts.empty() && IsModelItem(m)) {
          m.parts.insert(m.parts.begin(), std::make_move_iterator(pending.begin()),
                         std::make_move_iterator(pending.end()));
          pending.clear();
        } else {
          st = flush();
          RECAP_RETURN_IF_ERROR(st);
        }
        return emit(std::move(m));
      },
      NotAnArray);
  RECAP_RETURN_IF_ERROR(s);
  return flush();
}

// ---------------------------------------------------------------------------------------------
// Encoding

Status TextPartJson(const Text& t, const char* text_type, const std::string& where, Json* out) {
  Json part = Json::object();
  part["type"] = text_type;
  part["text"] = t.text;
  // A recorded type (output_text in a user message, say) is written back over the default.
  Status s = jsonutil::MergeExtraText(t.extra, where, &part);
  RECAP_RETURN_IF_ERROR(s);
  *out = std::move(part);
  return Status::OK();
}

struct ContentItem {
  const Text* text = nullptr;
  const Opaque* opaque = nullptr;
  std::string where;
};

Status WriteContent(const std::vector<ContentItem>& items, ContentForm form, const char* key,
                    const char* text_type, Json* target) {
  const bool one_plain_text =
      items.size() == 1 && items[0].text != nullptr && items[0].text->extra.empty();
  if (form != ContentForm::kList && (one_plain_text || items.empty())) {
    (*target)[key] = one_plain_text ? items[0].text->text : std::string();
    return Status::OK();
  }
  Json list = Json::array();
  for (const ContentItem& item : items) {
    Json part;
    Status s = item.text != nullptr
                   ? TextPartJson(*item.text, text_type, item.where, &part)
                   : jsonutil::ParsePayload(item.opaque->payload, item.where, &part);
    RECAP_RETURN_IF_ERROR(s);
    list.push_back(std::move(part));
  }
  (*target)[key] = std::move(list);
  return Status::OK();
}

Status ForeignOpaque(const Opaque& o, const std::string& where) {
  return Status::InvalidArgument("`" + where + "` is an opaque " + jsonutil::Quote(o.kind) +
                                 " block of another format, which has no OpenAI Responses "
                                 "equivalent.");
}

// Encodes one recap message into its items, in part order.
Status ExpandOwnFields(const Message& m, const std::string& where, std::vector<Json>* out) {
  std::vector<ContentItem> content;
  const char* text_type = DefaultTextType(m.role);
  auto flush_content = [&]() -> Status {
    if (content.empty()) return Status::OK();
    Json j = Json::object();
    j["role"] = m.role == Role::kAssistant ? "assistant"
                : m.role == Role::kSystem  ? "system"
                                           : "user";
    Status s = WriteContent(content, m.form, "content", text_type, &j);
    if (s.ok()) s = jsonutil::MergeExtraText(m.extra, where, &j);
    RECAP_RETURN_IF_ERROR(s);
    content.clear();
    out->push_back(std::move(j));
    return Status::OK();
  };
  bool wrote_content = false;
  for (std::size_t i = 0; i < m.parts.size(); ++i) {
    std::string part_where = where + ".parts[" + std::to_string(i) + "]";
    const Part& p = m.parts[i];
    if (const auto* t = std::get_if<Text>(&p)) {
      if (m.role == Role::kTool) {
        return Status::InvalidArgument("`" + part_where +
                                       "` is a text in a tool message; OpenAI Responses "
                                       "carries a tool's output only as a "
                                       "`function_call_output`.");
      }
      content.push_back({t, nullptr, std::move(part_where)});
      continue;
    }
    if (const auto* o = std::get_if<Opaque>(&p)) {
      if (IsForeignKind(o->kind)) return ForeignOpaque(*o, part_where);
      if (IsContentKind(o->kind)) {
        content.push_back({nullptr, o, std::move(part_where)});
        continue;
      }
    }
    // An item of its own: what content came before it is one message item.
    if (!content.empty()) {
      if (wrote_content) {
        return Status::InvalidArgument("`" + where +
                                       "` holds content on both sides of another item; OpenAI "
                                       "Responses needs them as separate messages.");
      }
      Status s = flush_content();
      RECAP_RETURN_IF_ERROR(s);
      wrote_content = true;
    }
    Json j;
    if (const auto* o = std::get_if<Opaque>(&p)) {
      Status s = jsonutil::ParsePayload(o->payload, part_where, &j);
      RECAP_RETURN_IF_ERROR(s);
    } else if (const auto* c = std::get_if<ToolCall>(&p)) {
      j = Json::object();
      j["type"] = "function_call";
      j["call_id"] = c->id;
      j["name"] = c->name;
      j["arguments"] = c->arguments;
      Status s = jsonutil::MergeExtraText(c->extra, part_where, &j, {"type"});
      RECAP_RETURN_IF_ERROR(s);
    } else {
      const auto& r = std::get<ToolResult>(p);
      j = Json::object();
      j["type"] = "function_call_output";
      j["call_id"] = r.call_id;
      std::vector<ContentItem> items;
      for (std::size_t k = 0; k < r.content.size(); ++k) {
        ContentItem item;
        item.where = part_where + ".content[" + std::to_string(k) + "]";
        if (const auto* t = std::get_if<Text>(&r.content[k])) {
          item.text = t;
        } else {
          const Opaque& part = std::get<Opaque>(r.content[k]);
          if (IsForeignKind(part.kind)) return ForeignOpaque(part, item.where);
          item.opaque = &part;
        }
        items.push_back(std::move(item));
      }
      // OpenAI Responses has no is_error: an error result is written as its output alone.
      Status s = WriteContent(items, r.form, "output", "input_text", &j);
      if (s.ok()) s = jsonutil::MergeExtraText(r.extra, part_where, &j, {"type"});
      RECAP_RETURN_IF_ERROR(s);
    }
    out->push_back(std::move(j));
  }
  if (!content.empty() && wrote_content) {
    return Status::InvalidArgument("`" + where +
                                   "` holds content on both sides of another item; OpenAI "
                                   "Responses needs them as separate messages.");
  }
  if (!content.empty() || m.parts.empty()) {
    if (m.parts.empty() && m.role != Role::kTool) {
      // An empty message is an empty message item.
      Json j = Json::object();
      j["role"] = m.role == Role::kAssistant ? "assistant"
                  : m.role == Role::kSystem  ? "system"
                                             : "user";
      Status s = WriteContent({}, m.form, "content", text_type, &j);
      if (s.ok()) s = jsonutil::MergeExtraText(m.extra, where, &j);
      RECAP_RETURN_IF_ERROR(s);
      out->push_back(std::move(j));
      return Status::OK();
    }
    return flush_content();
  }
  return Status::OK();
}

// A message of another format is written without that format's own fields (ForeignFields).
Status Expand(const Message& m, const std::string& where, std::vector<Json>* out) {
  std::optional<Message> stripped;
  Status s = codec_shell::ForeignFields(m, Origin::kOpenAIResponses, where, &stripped);
  RECAP_RETURN_IF_ERROR(s);
  return ExpandOwnFields(stripped ? *stripped : m, where, out);
}

}  // namespace

Status DecodeEach(std::string_view json, const DecodeOptions& options, const MessageSink& sink) {
  return codec_shell::Guarded("decoding OpenAI Responses items", [&]() -> Status {
    jsonutil::Reader reader(json, kWhat, jsonutil::CarriedJson());
    return DecodeItems(reader, options, sink);
  });
}

Result<Conversation> DecodeMessages(std::string_view json, const DecodeOptions& options) {
  return codec_shell::Collect(
      [&](const MessageSink& sink) { return DecodeEach(json, options, sink); });
}

Result<Message> DecodeMessage(std::string_view json, const DecodeOptions& options) {
  return codec_shell::Guarded("decoding an OpenAI Responses item", [&] {
    return codec_shell::DecodeDocument(json, kWhat, [&](Json& doc, Message* m) {
      return DecodeItem(doc, JsonPath("item"), options, m);
    });
  });
}

Result<std::string> EncodeMessages(const Conversation& conversation) {
  return codec_shell::Guarded("encoding OpenAI Responses items",
                              [&] { return codec_shell::EncodeExpanded(conversation, Expand); });
}

Result<std::string> EncodeMessage(const Message& message) {
  return codec_shell::Guarded("encoding an OpenAI Responses item", [&] {
    return codec_shell::EncodeSingle(
        message, Expand,
        "OpenAI Responses items (its reasoning, calls and outputs are items of their own)",
        "openai_responses::EncodeMessages");
  });
}

namespace {

// One message's piece of the array (EncodeTranscript, EncodeTranscriptTo, EncodeTranscriptParts).
Status Fragment(const Message& m, const std::string& where, std::string* text) {
  return codec_shell::ExpandedFragment(m, where, text, Expand);
}

}  // namespace

Result<std::string> EncodeTranscript(const Transcript& transcript, std::size_t begin) {
  return codec_shell::Guarded("encoding OpenAI Responses items", [&] {
    return codec_shell::EncodeKept(transcript, begin, internal::WireFormat::kOpenAiResponses,
                                   Fragment);
  });
}

Status EncodeTranscriptTo(const Transcript& transcript, std::size_t begin, std::string* out) {
  return codec_shell::Guarded("encoding OpenAI Responses items", [&] {
    return codec_shell::EncodeKeptTo(transcript, begin, internal::WireFormat::kOpenAiResponses,
                                     Fragment, out);
  });
}

Status EncodeTranscriptParts(const Transcript& transcript, std::size_t begin,
                             std::vector<std::string_view>* parts) {
  return codec_shell::Guarded("encoding OpenAI Responses items", [&] {
    return codec_shell::KeptParts(transcript, begin, internal::WireFormat::kOpenAiResponses,
                                  Fragment, parts);
  });
}

}  // namespace openai_responses
}  // namespace v0
}  // namespace recap
