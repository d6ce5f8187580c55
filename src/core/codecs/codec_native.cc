// recap's own JSON form of messages: everything the model holds, nothing more. The format is
// specified in docs/message-model.md; session stores write it, so reading is strict (an
// unknown member is an error, not something to guess about) and versioned.
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "recap/codec.h"

#include "codecs/codec_shell.h"
#include "json/json_util.h"

namespace recap {
inline namespace v0 {
namespace native {

namespace {

using jsonutil::Json;
using jsonutil::JsonPath;

constexpr int kFormatVersion = 1;

std::string Where(const JsonPath& path) { return "`" + path.ToString() + "`"; }

const char* FormName(ContentForm form) {
  switch (form) {
    case ContentForm::kString: return "string";
    case ContentForm::kList: return "list";
    case ContentForm::kNull: return "null";
    case ContentForm::kAbsent: return "absent";
    case ContentForm::kDefault: break;
  }
  return nullptr;
}

const char* LinkName(OpaqueLink link) {
  switch (link) {
    case OpaqueLink::kCall: return "call";
    case OpaqueLink::kResult: return "result";
    case OpaqueLink::kNone: break;
  }
  return nullptr;
}

// ---------------------------------------------------------------------------------------------
// Encoding

Status PutExtra(const std::string& extra, const std::string& where, Json* target) {
  if (extra.empty()) return Status::OK();
  Json parsed;
  Status s = jsonutil::ParseExtra(extra, where, &parsed);
  RECAP_RETURN_IF_ERROR(s);
  if (!parsed.empty()) (*target)["extra"] = std::move(parsed);
  return Status::OK();
}

Json TextJson(const Text& t, const std::string& where, Status* s) {
  Json j = Json::object();
  j["type"] = "text";
  j["text"] = t.text;
  *s = PutExtra(t.extra, where, &j);
  return j;
}

// How deep a payload sits in a conversation document at most (conversation > messages >
// message > parts > tool result > content > item): one embedded deeper than internal::kMaxJsonDepth
// less this would make a document recap could not read back.
constexpr int kPayloadDepth = 7;

// The payload goes in as a JSON value so that a stored session stays readable, but only when
// re-serializing that value gives back exactly the payload's bytes (a payload recap decoded
// always does: numbers keep their text). Anything else — other whitespace, an escaped
// character, duplicate keys, not JSON at all, nested too deep — is stored as a string, because
// signed thinking and encrypted content must come back unchanged.
Json OpaqueJson(const Opaque& o) {
  Json j = Json::object();
  j["type"] = "opaque";
  j["kind"] = o.kind;
  Json value;
  bool embedded = false;
  if (jsonutil::Parse(o.payload, "payload", &value, jsonutil::CarriedJson()).ok()) {
    std::string again;
    embedded = jsonutil::Dump(value, "payload", &again, kPayloadDepth).ok() && again == o.payload;
  }
  if (embedded) {
    j["payload"] = std::move(value);
  } else {
    j["payload_text"] = o.payload;
  }
  if (const char* link = LinkName(o.link)) j["link"] = link;
  if (!o.link_id.empty()) j["link_id"] = o.link_id;
  return j;
}

Status PartJson(const Part& p, const std::string& where, Json* out) {
  Status s;
  if (const auto* t = std::get_if<Text>(&p)) {
    *out = TextJson(*t, where, &s);
  } else if (const auto* c = std::get_if<ToolCall>(&p)) {
    Json j = Json::object();
    j["type"] = "tool_call";
    j["id"] = c->id;
    j["name"] = c->name;
    j["arguments"] = c->arguments;
    s = PutExtra(c->extra, where, &j);
    *out = std::move(j);
  } else if (const auto* r = std::get_if<ToolResult>(&p)) {
    Json j = Json::object();
    j["type"] = "tool_result";
    j["call_id"] = r->call_id;
    Json content = Json::array();
    for (std::size_t i = 0; i < r->content.size(); ++i) {
      const std::string item_where = where + ".content[" + std::to_string(i) + "]";
      if (const auto* text = std::get_if<Text>(&r->content[i])) {
        content.push_back(TextJson(*text, item_where, &s));
        RECAP_RETURN_IF_ERROR(s);
      } else {
        content.push_back(OpaqueJson(std::get<Opaque>(r->content[i])));
      }
    }
    j["content"] = std::move(content);
    if (r->is_error) j["is_error"] = true;
    if (const char* form = FormName(r->form)) j["form"] = form;
    s = PutExtra(r->extra, where, &j);
    *out = std::move(j);
  } else {
    *out = OpaqueJson(std::get<Opaque>(p));
  }
  return s;
}

Status MessageJson(const Message& m, const std::string& where, Json* out) {
  Json j = Json::object();
  if (!m.id.empty()) j["id"] = m.id;
  j["role"] = RoleName(m.role);
  if (m.summary) j["summary"] = true;
  if (m.pinned) j["pinned"] = true;
  if (const char* form = FormName(m.form)) j["form"] = form;
  if (m.origin != Origin::kNone) j["origin"] = OriginName(m.origin);
  Json parts = Json::array();
  for (std::size_t i = 0; i < m.parts.size(); ++i) {
    Json part;
    Status s = PartJson(m.parts[i], where + ".parts[" + std::to_string(i) + "]", &part);
    RECAP_RETURN_IF_ERROR(s);
    parts.push_back(std::move(part));
  }
  j["parts"] = std::move(parts);
  Status s = PutExtra(m.extra, where, &j);
  RECAP_RETURN_IF_ERROR(s);
  *out = std::move(j);
  return Status::OK();
}

// Appends the message to `out`, `depth` containers deep in the document.
Status AppendMessage(const Message& m, const std::string& where, std::string* out, int depth) {
  Json j;
  Status s = MessageJson(m, where, &j);
  RECAP_RETURN_IF_ERROR(s);
  return jsonutil::AppendDump(j, "`" + where + "`", out, depth);
}

// ---------------------------------------------------------------------------------------------
// Decoding

// Fails on the first member of `object` not in `accepted`, naming it and listing them.
Status OnlyMembers(const Json& object, const JsonPath& path,
                   std::initializer_list<std::string_view> accepted) {
  for (auto it = object.begin(); it != object.end(); ++it) {
    bool ok = false;
    for (std::string_view a : accepted) ok = ok || it.key() == a;
    if (ok) continue;
    std::string list;
    for (std::string_view a : accepted) {
      if (!list.empty()) list += ", ";
      list += "`" + std::string(a) + "`";
    }
    return Status::InvalidArgument(
        Where(path) + " has the member " + jsonutil::Quote(it.key()) +
        ", which recap's native form does not define (accepted: " + list + ").");
  }
  return Status::OK();
}

Status GetString(Json& object, const JsonPath& path, std::string_view member, bool required,
                 std::string* out) {
  auto it = object.find(member);
  if (it == object.end()) {
    if (!required) return Status::OK();
    return jsonutil::MissingMember(path, member, "it is required");
  }
  if (!it->is_string()) return jsonutil::WrongType(path.Member(member), *it, "a string");
  *out = jsonutil::TakeString(*it);
  return Status::OK();
}

Status GetExtra(Json& object, const JsonPath& path, std::string* out) {
  auto it = object.find("extra");
  if (it == object.end()) return Status::OK();
  if (!it->is_object()) return jsonutil::WrongType(path.Member("extra"), *it, "an object");
  *out = jsonutil::ExtraText(*it);
  return Status::OK();
}

Status GetForm(Json& object, const JsonPath& path, ContentForm* out) {
  auto it = object.find("form");
  if (it == object.end()) return Status::OK();
  const JsonPath form_path = path.Member("form");
  constexpr const char* kAccepted = "\"string\", \"list\", \"null\" or \"absent\"";
  if (!it->is_string()) return jsonutil::WrongType(form_path, *it, kAccepted);
  const auto& form = it->get_ref<const std::string&>();
  if (form == "string") {
    *out = ContentForm::kString;
  } else if (form == "list") {
    *out = ContentForm::kList;
  } else if (form == "null") {
    *out = ContentForm::kNull;
  } else if (form == "absent") {
    *out = ContentForm::kAbsent;
  } else {
    return Status::InvalidArgument(Where(form_path) + " is " + jsonutil::Quote(form) +
                                   "; expected " + kAccepted + ".");
  }
  return Status::OK();
}

Status DecodeText(Json& j, const JsonPath& path, Text* out) {
  Status s = OnlyMembers(j, path, {"type", "text", "extra"});
  if (s.ok()) s = GetString(j, path, "text", true, &out->text);
  if (s.ok()) s = GetExtra(j, path, &out->extra);
  return s;
}

Status DecodeOpaque(Json& j, const JsonPath& path, Opaque* out) {
  Status s = OnlyMembers(j, path, {"type", "kind", "payload", "payload_text", "link", "link_id"});
  if (s.ok()) s = GetString(j, path, "kind", true, &out->kind);
  RECAP_RETURN_IF_ERROR(s);
  auto payload = j.find("payload");
  auto payload_text = j.find("payload_text");
  if ((payload == j.end()) == (payload_text == j.end())) {
    return Status::InvalidArgument(Where(path) +
                                   " must have exactly one of `payload` (a JSON value) and "
                                   "`payload_text` (a string).");
  }
  if (payload != j.end()) {
    out->payload = jsonutil::DumpValid(*payload);
  } else {
    s = GetString(j, path, "payload_text", true, &out->payload);
    RECAP_RETURN_IF_ERROR(s);
  }
  auto link = j.find("link");
  if (link != j.end()) {
    const JsonPath link_path = path.Member("link");
    if (link->is_string() && *link == "call") {
      out->link = OpaqueLink::kCall;
    } else if (link->is_string() && *link == "result") {
      out->link = OpaqueLink::kResult;
    } else if (!link->is_string()) {
      return jsonutil::WrongType(link_path, *link, "\"call\" or \"result\"");
    } else {
      return Status::InvalidArgument(Where(link_path) + " is " +
                                     jsonutil::Quote(link->get<std::string>()) +
                                     "; expected \"call\" or \"result\".");
    }
  }
  return GetString(j, path, "link_id", false, &out->link_id);
}

Status PartType(const Json& j, const JsonPath& path, std::string* type) {
  if (!j.is_object()) return jsonutil::WrongType(path, j, "a part object with a `type`");
  auto it = j.find("type");
  if (it == j.end()) {
    return jsonutil::MissingMember(
        path, "type", "expected \"text\", \"tool_call\", \"tool_result\" or \"opaque\"");
  }
  if (!it->is_string()) return jsonutil::WrongType(path.Member("type"), *it, "a string");
  *type = it->get<std::string>();
  return Status::OK();
}

Status DecodeToolResult(Json& j, const JsonPath& path, ToolResult* out) {
  Status s = OnlyMembers(j, path, {"type", "call_id", "content", "is_error", "form", "extra"});
  if (s.ok()) s = GetString(j, path, "call_id", true, &out->call_id);
  if (s.ok()) s = GetForm(j, path, &out->form);
  if (s.ok()) s = GetExtra(j, path, &out->extra);
  RECAP_RETURN_IF_ERROR(s);
  auto error = j.find("is_error");
  if (error != j.end()) {
    if (!error->is_boolean()) {
      return jsonutil::WrongType(path.Member("is_error"), *error, "true or false");
    }
    out->is_error = error->get<bool>();
  }
  auto content = j.find("content");
  if (content == j.end()) return Status::OK();
  const JsonPath content_path = path.Member("content");
  if (!content->is_array()) {
    return jsonutil::WrongType(content_path, *content, "an array of text and opaque items");
  }
  out->content.reserve(content->size());
  for (std::size_t i = 0; i < content->size(); ++i) {
    const JsonPath item_path = content_path.Index(i);
    Json& item = (*content)[i];
    std::string type;
    s = PartType(item, item_path, &type);
    RECAP_RETURN_IF_ERROR(s);
    if (type == "text") {
      Text t;
      s = DecodeText(item, item_path, &t);
      out->content.emplace_back(std::move(t));
    } else if (type == "opaque") {
      Opaque o;
      s = DecodeOpaque(item, item_path, &o);
      out->content.emplace_back(std::move(o));
    } else {
      return Status::InvalidArgument(Where(item_path.Member("type")) + " is " +
                                     jsonutil::Quote(type) +
                                     "; a tool result's content holds \"text\" and \"opaque\" "
                                     "items.");
    }
    RECAP_RETURN_IF_ERROR(s);
  }
  return Status::OK();
}

Status DecodePart(Json& j, const JsonPath& path, Part* out) {
  std::string type;
  Status s = PartType(j, path, &type);
  RECAP_RETURN_IF_ERROR(s);
  if (type == "text") {
    Text t;
    s = DecodeText(j, path, &t);
    *out = std::move(t);
  } else if (type == "tool_call") {
    ToolCall c;
    s = OnlyMembers(j, path, {"type", "id", "name", "arguments", "extra"});
    if (s.ok()) s = GetString(j, path, "id", true, &c.id);
    if (s.ok()) s = GetString(j, path, "name", true, &c.name);
    if (s.ok()) s = GetString(j, path, "arguments", true, &c.arguments);
    if (s.ok()) s = GetExtra(j, path, &c.extra);
    *out = std::move(c);
  } else if (type == "tool_result") {
    ToolResult r;
    s = DecodeToolResult(j, path, &r);
    *out = std::move(r);
  } else if (type == "opaque") {
    Opaque o;
    s = DecodeOpaque(j, path, &o);
    *out = std::move(o);
  } else {
    // The native form is recap's own: a type it does not know means a newer writer or damage,
    // never a provider's new block, so keep_unknown_blocks does not apply.
    return Status::InvalidArgument(Where(path.Member("type")) + " is " + jsonutil::Quote(type) +
                                   "; expected \"text\", \"tool_call\", \"tool_result\" or "
                                   "\"opaque\".");
  }
  return s;
}

Status DecodeOne(Json& j, const JsonPath& path, Message* out) {
  if (!j.is_object()) return jsonutil::WrongType(path, j, "a message object");
  Status s =
      OnlyMembers(j, path, {"id", "role", "summary", "pinned", "form", "origin", "parts", "extra"});
  RECAP_RETURN_IF_ERROR(s);
  Message m;
  s = GetString(j, path, "id", false, &m.id);
  RECAP_RETURN_IF_ERROR(s);
  std::string role;
  s = GetString(j, path, "role", true, &role);
  RECAP_RETURN_IF_ERROR(s);
  if (auto parsed = ParseRole(role)) {
    m.role = *parsed;
  } else {
    return Status::InvalidArgument(Where(path.Member("role")) + " is " + jsonutil::Quote(role) +
                                   "; expected \"system\", \"user\", \"assistant\" or \"tool\".");
  }
  auto summary = j.find("summary");
  if (summary != j.end()) {
    if (!summary->is_boolean()) {
      return jsonutil::WrongType(path.Member("summary"), *summary, "true or false");
    }
    m.summary = summary->get<bool>();
  }
  auto pinned = j.find("pinned");
  if (pinned != j.end()) {
    if (!pinned->is_boolean()) {
      return jsonutil::WrongType(path.Member("pinned"), *pinned, "true or false");
    }
    m.pinned = pinned->get<bool>();
  }
  if (auto origin = j.find("origin"); origin != j.end()) {
    std::optional<Origin> parsed;
    if (origin->is_string()) parsed = ParseOrigin(origin->get_ref<const std::string&>());
    if (!parsed) {
      constexpr const char* kOrigins = "\"anthropic\", \"openai-chat\" or \"openai-responses\"";
      if (!origin->is_string())
        return jsonutil::WrongType(path.Member("origin"), *origin, kOrigins);
      return Status::InvalidArgument(Where(path.Member("origin")) + " is " +
                                     jsonutil::Quote(origin->get_ref<const std::string&>()) +
                                     "; expected " + kOrigins + ".");
    }
    m.origin = *parsed;
  }
  s = GetForm(j, path, &m.form);
  if (s.ok()) s = GetExtra(j, path, &m.extra);
  RECAP_RETURN_IF_ERROR(s);
  auto parts = j.find("parts");
  if (parts != j.end()) {
    const JsonPath parts_path = path.Member("parts");
    if (!parts->is_array()) return jsonutil::WrongType(parts_path, *parts, "an array of parts");
    m.parts.reserve(parts->size());
    for (std::size_t i = 0; i < parts->size(); ++i) {
      Part p;
      s = DecodePart((*parts)[i], parts_path.Index(i), &p);
      RECAP_RETURN_IF_ERROR(s);
      m.parts.push_back(std::move(p));
    }
  }
  *out = std::move(m);
  return Status::OK();
}

constexpr const char* kWhat = "the recap messages JSON";

// Reads the messages of the array at the reader's cursor one by one into `sink`; the first
// can be the instructions (`split`: a leading system message is).
Status StreamMessages(jsonutil::Reader& reader, bool split, bool first_can_be_instructions,
                      const MessageSink& sink) {
  Status s = reader.BeginArray();
  const JsonPath root("messages");
  for (std::size_t i = 0; s.ok(); ++i) {
    bool more = false;
    s = reader.NextElement(&more);
    if (!s.ok() || !more) break;
    Json element;
    s = reader.ReadValue(&element);
    if (!s.ok()) break;
    Message m;
    s = DecodeOne(element, root.Index(i), &m);
    if (!s.ok()) break;
    element = nullptr;
    const bool instructions =
        i == 0 && first_can_be_instructions && split && m.role == Role::kSystem;
    s = sink(std::move(m), instructions);
  }
  return s;
}

// The object form {"format", "version", "instructions", "messages"}, with the reader at its
// '{'. A first pass reads every member but `messages` (checking the messages' syntax without
// a tree of them), so that the format, the version and the instructions are judged before any
// message is; a second pass streams the messages.
Status DecodeConversationObject(jsonutil::Reader& reader, std::string_view json,
                                const DecodeOptions& options, const MessageSink& sink) {
  const JsonPath root("conversation");
  Json doc = Json::object();  // the members but the messages, which are only located
  std::size_t messages_at = std::string_view::npos;
  Status unknown;  // the first member the form does not define, judged once the syntax is
  Status s = reader.BeginObject();
  while (s.ok()) {
    bool more = false;
    std::string key;
    s = reader.NextMember(&more, &key);
    if (!s.ok() || !more) break;
    if (key == "messages") {
      messages_at = reader.Offset();
      s = reader.SkipValue();
    } else if (key == "format" || key == "version" || key == "instructions") {
      s = reader.ReadValue(&doc[key]);
    } else {
      if (unknown.ok()) {
        Json one = Json::object();
        one[key] = nullptr;
        unknown = OnlyMembers(one, root, {"format", "version", "instructions", "messages"});
      }
      s = reader.SkipValue();
    }
  }
  if (s.ok()) s = reader.Finish();
  if (s.ok()) s = unknown;
  RECAP_RETURN_IF_ERROR(s);

  auto format = doc.find("format");
  if (format != doc.end() && !(format->is_string() && *format == "recap")) {
    return Status::InvalidArgument("`conversation.format` is " +
                                   (format->is_string()
                                        ? jsonutil::Quote(format->get<std::string>())
                                        : std::string(jsonutil::TypeName(*format))) +
                                   "; expected \"recap\".");
  }
  auto version = doc.find("version");
  if (version != doc.end()) {
    const std::optional<std::int64_t> integer = jsonutil::IntegerValue(*version);
    if (!integer) return jsonutil::WrongType(root.Member("version"), *version, "the integer 1");
    const long long v = *integer;
    if (v > kFormatVersion) {
      return Status::InvalidArgument(
          "the conversation was written in version " + std::to_string(v) +
          " of recap's native form by a newer recap; this version reads version " +
          std::to_string(kFormatVersion) + ".");
    }
    if (v < 1) {
      return Status::InvalidArgument("`conversation.version` is " + std::to_string(v) +
                                     "; expected 1.");
    }
  }
  if (messages_at == std::string_view::npos) {
    return jsonutil::MissingMember(root, "messages", "expected an array of messages");
  }
  jsonutil::Reader messages(json, kWhat, jsonutil::CarriedJson());
  messages.Seek(messages_at, 1);
  if (messages.Peek() != '[') {
    Json value;
    s = messages.ReadValue(&value);
    RECAP_RETURN_IF_ERROR(s);
    return jsonutil::WrongType(root.Member("messages"), value, "an array of messages");
  }
  auto instructions = doc.find("instructions");
  if (instructions != doc.end() && !instructions->is_null()) {
    Message m;
    s = DecodeOne(*instructions, JsonPath("instructions"), &m);
    RECAP_RETURN_IF_ERROR(s);
    // Without split_instructions they go back in front of the messages.
    s = sink(std::move(m), options.split_instructions);
    RECAP_RETURN_IF_ERROR(s);
  }
  return StreamMessages(messages, options.split_instructions, false, sink);
}

}  // namespace

Status DecodeEach(std::string_view json, const DecodeOptions& options, const MessageSink& sink) {
  return codec_shell::Guarded("decoding recap messages", [&]() -> Status {
    jsonutil::Reader reader(json, kWhat, jsonutil::CarriedJson());
    const char first = reader.Peek();
    if (first == '{') return DecodeConversationObject(reader, json, options, sink);
    if (first == '[') {
      Status s = StreamMessages(reader, options.split_instructions, true, sink);
      if (s.ok()) s = reader.Finish();
      return s;
    }
    Json doc;
    Status s = reader.ReadValue(&doc);
    if (s.ok()) s = reader.Finish();
    RECAP_RETURN_IF_ERROR(s);
    return Status::InvalidArgument(
        std::string(kWhat) + " is " + jsonutil::TypeName(doc) +
        "; expected an array of messages or an object {\"format\": \"recap\", \"version\": 1, "
        "\"instructions\", \"messages\"}.");
  });
}

Result<Conversation> DecodeMessages(std::string_view json, const DecodeOptions& options) {
  return codec_shell::Collect(
      [&](const MessageSink& sink) { return DecodeEach(json, options, sink); });
}

Result<Message> DecodeMessage(std::string_view json, const DecodeOptions& /*options*/) {
  return codec_shell::Guarded("decoding a recap message", [&] {
    return codec_shell::DecodeDocument(json, "the recap message JSON", [&](Json& doc, Message* m) {
      return DecodeOne(doc, JsonPath("message"), m);
    });
  });
}

Result<std::string> EncodeMessages(const Conversation& conversation) {
  return codec_shell::Guarded("encoding recap messages", [&]() -> Result<std::string> {
    // Written piece by piece so that a bad message is named in the error and the whole
    // document never exists twice in memory (as a JSON tree and as text).
    std::string out = "{\"format\":\"recap\",\"version\":" + std::to_string(kFormatVersion) +
                      ",\"instructions\":";
    if (conversation.instructions) {
      Status s = AppendMessage(*conversation.instructions, "instructions", &out, 1);
      RECAP_RETURN_IF_ERROR(s);
    } else {
      out += "null";
    }
    out += ",\"messages\":[";
    for (std::size_t i = 0; i < conversation.messages.size(); ++i) {
      if (i > 0) out += ',';
      Status s =
          AppendMessage(conversation.messages[i], "messages[" + std::to_string(i) + "]", &out, 2);
      RECAP_RETURN_IF_ERROR(s);
    }
    out += "]}";
    return out;
  });
}

Result<std::string> EncodeMessage(const Message& message) {
  return codec_shell::Guarded("encoding a recap message", [&]() -> Result<std::string> {
    std::string text;
    Status s = AppendMessage(message, "message", &text, 0);
    RECAP_RETURN_IF_ERROR(s);
    return text;
  });
}

namespace {

// One message's piece of the array (EncodeTranscript, EncodeTranscriptTo, EncodeTranscriptParts).
Status Fragment(const Message& m, const std::string& where, std::string* text) {
  return AppendMessage(m, where, text, 1);
}

}  // namespace

Result<std::string> EncodeTranscript(const Transcript& transcript, std::size_t begin) {
  return codec_shell::Guarded("encoding recap messages", [&] {
    return codec_shell::EncodeKept(transcript, begin, internal::WireFormat::kNative, Fragment);
  });
}

Status EncodeTranscriptTo(const Transcript& transcript, std::size_t begin, std::string* out) {
  return codec_shell::Guarded("encoding recap messages", [&] {
    return codec_shell::EncodeKeptTo(transcript, begin, internal::WireFormat::kNative, Fragment,
                                     out);
  });
}

Status EncodeTranscriptParts(const Transcript& transcript, std::size_t begin,
                             std::vector<std::string_view>* parts) {
  return codec_shell::Guarded("encoding recap messages", [&] {
    return codec_shell::KeptParts(transcript, begin, internal::WireFormat::kNative, Fragment,
                                  parts);
  });
}

}  // namespace native
}  // namespace v0
}  // namespace recap
