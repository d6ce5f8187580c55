#include "wire_format.h"

#include <algorithm>
#include <cctype>
#include <utility>
#include <vector>

#include "recap/codec.h"
#include "recap/config.h"
#include "recap/conversation.h"
#include "recap/measure.h"
#include "recap/transcript.h"

#include "recap_internal/json_depth.h"

namespace recap {
inline namespace v0 {
namespace internal {
namespace http {
namespace {

using nlohmann::json;
using nlohmann::ordered_json;

std::string Lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

const json* Member(const json& j, const char* key) {
  if (!j.is_object()) return nullptr;
  auto it = j.find(key);
  return it == j.end() ? nullptr : &*it;
}

std::string StringOr(const json* j, std::string fallback = {}) {
  return j && j->is_string() ? j->get<std::string>() : std::move(fallback);
}

std::uint64_t CountOf(const json* j) {
  if (!j) return 0;
  if (j->is_number_unsigned()) return j->get<std::uint64_t>();
  if (j->is_number_integer()) {
    const auto v = j->get<std::int64_t>();
    return v > 0 ? static_cast<std::uint64_t>(v) : 0;
  }
  if (j->is_number_float()) {
    const double v = j->get<double>();
    return v > 0 && v < 1e15 ? static_cast<std::uint64_t>(v) : 0;
  }
  return 0;
}

// OpenAI content: a string, null, or an array of parts with `text`.
std::string ContentText(const json* content) {
  if (!content) return {};
  if (content->is_string()) return content->get<std::string>();
  std::string out;
  if (content->is_array()) {
    for (const json& part : *content) {
      if (part.is_string()) {
        out += part.get<std::string>();
      } else if (const json* t = Member(part, "text"); t && t->is_string()) {
        const std::string type = StringOr(Member(part, "type"), "text");
        if (type == "text" || type == "output_text") out += t->get<std::string>();
      }
    }
  }
  return out;
}

void ReadOpenAiUsage(const json* usage, Usage* out) {
  if (!usage || !usage->is_object()) return;
  out->prompt_tokens = CountOf(Member(*usage, "prompt_tokens"));
  out->completion_tokens = CountOf(Member(*usage, "completion_tokens"));
}

// Anthropic counts cached prompt tokens apart; the prompt is all of them.
void ReadAnthropicUsage(const json* usage, Usage* out, bool input_too) {
  if (!usage || !usage->is_object()) return;
  if (input_too && (Member(*usage, "input_tokens") || Member(*usage, "cache_read_input_tokens"))) {
    out->prompt_tokens = CountOf(Member(*usage, "input_tokens")) +
                         CountOf(Member(*usage, "cache_creation_input_tokens")) +
                         CountOf(Member(*usage, "cache_read_input_tokens"));
  }
  if (Member(*usage, "output_tokens"))
    out->completion_tokens = CountOf(Member(*usage, "output_tokens"));
}

std::size_t CodePoints(const std::string& s) {
  std::size_t n = 0;
  for (unsigned char c : s) n += (c & 0xC0) != 0x80 ? 1 : 0;
  return n;
}

// The context-window fields servers use, in the order they are trusted.
constexpr const char* kWindowFields[] = {
    "context_length",      // OpenRouter, LM Studio's native API, many proxies
    "context_window",      // Groq, Together, several gateways
    "max_model_len",       // vLLM
    "max_context_length",  // LM Studio (/api/v0/models)
    "max_input_tokens",    // LiteLLM's model info, Anthropic's newer model objects
    "n_ctx_train",         // llama.cpp's server (meta.n_ctx_train)
};

std::optional<std::size_t> TrustedCount(const json& v) {
  std::uint64_t n = 0;
  if (v.is_number_unsigned())
    n = v.get<std::uint64_t>();
  else if (v.is_number_integer() && v.get<std::int64_t>() > 0)
    n = static_cast<std::uint64_t>(v.get<std::int64_t>());
  else if (v.is_number_float() && v.get<double>() >= 1 && v.get<double>() < 1e12)
    n = static_cast<std::uint64_t>(v.get<double>());
  if (n == 0 || n > kMaxTrustedContextWindow) return std::nullopt;  // R1.2
  return static_cast<std::size_t>(n);
}

// Looks for `field` on `entry`, then in the objects nested in it (breadth first, 3 levels).
std::optional<std::size_t> FindField(const json& entry, const char* field, const std::string& path,
                                     std::string* where) {
  std::vector<std::pair<const json*, std::string>> level{{&entry, path}};
  for (int depth = 0; depth < 4 && !level.empty(); ++depth) {
    std::vector<std::pair<const json*, std::string>> next;
    for (const auto& [obj, p] : level) {
      if (const json* v = Member(*obj, field)) {
        if (auto n = TrustedCount(*v)) {
          if (where) *where = p.empty() ? std::string(field) : p + "." + field;
          return n;
        }
      }
      for (auto it = obj->begin(); it != obj->end(); ++it) {
        if (it->is_object()) next.emplace_back(&*it, p.empty() ? it.key() : p + "." + it.key());
      }
    }
    level = std::move(next);
  }
  return std::nullopt;
}

std::string EntryName(const json& entry) {
  for (const char* key : {"id", "name", "model"}) {
    if (const json* v = Member(entry, key); v && v->is_string()) return v->get<std::string>();
  }
  return {};
}

bool EntryIs(const json& entry, const std::string& model) {
  for (const char* key : {"id", "name", "model"}) {
    if (const json* v = Member(entry, key); v && v->is_string() && v->get<std::string>() == model)
      return true;
  }
  return false;
}

// The text of a Responses `output` list: the `output_text` parts of its `message` items, in
// order. `refused` is set when a message holds a refusal part.
std::string ResponseOutputText(const json& output, bool* refused) {
  std::string text;
  for (const json& item : output) {
    if (StringOr(Member(item, "type")) != "message") continue;
    const json* content = Member(item, "content");
    if (!content) continue;
    if (content->is_string()) {
      text += content->get<std::string>();
      continue;
    }
    if (!content->is_array()) continue;
    for (const json& part : *content) {
      const std::string type = StringOr(Member(part, "type"));
      if (type == "output_text" || type == "text") {
        text += StringOr(Member(part, "text"));
      } else if (type == "refusal") {
        *refused = true;
      }
    }
  }
  return text;
}

void ReadResponsesUsage(const json* usage, Usage* out) {
  if (!usage || !usage->is_object()) return;
  out->prompt_tokens = CountOf(Member(*usage, "input_tokens"));
  out->completion_tokens = CountOf(Member(*usage, "output_tokens"));
}

// How a Responses `response` object ended: "completed" is a natural end; "incomplete" because
// of max_output_tokens is a reply cut at the limit (R5); any other incomplete reason (a
// content filter) is kOther.
FinishReason ResponseFinish(const json& response, bool refused) {
  const std::string status = StringOr(Member(response, "status"), "completed");
  if (status == "incomplete") {
    std::string reason;
    if (const json* details = Member(response, "incomplete_details")) {
      reason = StringOr(Member(*details, "reason"));
    }
    return MapFinishReason(reason) == FinishReason::kLength ? FinishReason::kLength
                                                            : FinishReason::kOther;
  }
  return refused ? FinishReason::kOther : FinishReason::kStop;
}

Result<Completion> ParseResponse(const json& body) {
  const std::string status = StringOr(Member(body, "status"), "completed");
  if (status == "failed" || status == "cancelled") {
    return Status::Unavailable("the response's status is \"" + status + "\" and it names no error");
  }
  if (status == "queued" || status == "in_progress") {
    return Status::Unavailable("the response's status is \"" + status +
                               "\": recap asks for a finished response and does not poll "
                               "background ones");
  }
  Completion c;
  bool refused = false;
  const json* output = Member(body, "output");
  if (output && output->is_array()) {
    c.text = ResponseOutputText(*output, &refused);
  } else if (const json* text = Member(body, "output_text"); text && text->is_string()) {
    c.text = text->get<std::string>();  // the SDKs' convenience field, echoed by some proxies
  } else {
    return Status::Unavailable("the reply has no `output` array");
  }
  c.finish_reason = ResponseFinish(body, refused);
  ReadResponsesUsage(Member(body, "usage"), &c.usage);
  return c;
}

}  // namespace

json ParseServerJson(std::string_view text, std::string* too_deep) {
  if (too_deep) too_deep->clear();
  if (const std::size_t at = FindTooDeep(text); at != std::string_view::npos) {
    if (too_deep) {
      *too_deep = "nested deeper than " + std::to_string(kMaxJsonDepth) + " levels (at byte " +
                  std::to_string(at) + ")";
    }
    return json(json::value_t::discarded);
  }
  json parsed = json::parse(text.begin(), text.end(), nullptr, false);
  if (parsed.is_discarded() && too_deep && !IsValidUtf8(text) && !json::accept(ToValidUtf8(text))) {
    return parsed;  // not JSON, whatever its bytes
  }
  if (parsed.is_discarded() && too_deep && !IsValidUtf8(text)) {
    // JSON but for its bytes: said as such, with where (the first bad byte).
    std::size_t at = 0;
    while (at < text.size()) {
      const Utf8Scan scan = ScanCodePoints(text, at, 1);
      if (!scan.valid) break;
      at = scan.end;
    }
    *too_deep = "with invalid UTF-8 at byte " + std::to_string(at) + " (JSON must be UTF-8)";
  }
  return parsed;
}

std::string BadContent(const json* content, const std::string& where) {
  if (!content || content->is_null() || content->is_string() || content->is_array()) return {};
  const char* type = content->is_number()    ? "a number"
                     : content->is_boolean() ? "a boolean"
                     : content->is_object()  ? "an object"
                                             : "not text";
  return "`" + where + "` is " + type + "; expected a string or an array of parts";
}

FinishReason MapFinishReason(const std::string& reason) {
  const std::string r = Lower(reason);
  if (r == "stop" || r == "end_turn" || r == "stop_sequence" || r == "eos" || r == "eos_token")
    return FinishReason::kStop;
  if (r == "length" || r == "max_tokens" || r == "max_output_tokens" || r == "model_length")
    return FinishReason::kLength;
  return FinishReason::kOther;
}

Result<std::string> BuildRequestBody(HttpProtocol protocol, const std::string& model,
                                     const std::string& max_tokens_field,
                                     const CompletionRequest& request, bool structured,
                                     bool stream) {
  Conversation conversation;
  conversation.messages = request.messages;
  ordered_json body = ordered_json::object();
  body["model"] = model;
  if (protocol == HttpProtocol::kOpenAiResponses) {
    // The system prompt travels as `instructions`; nothing is stored on the server, so the
    // request carries the whole input each time and leaves no conversation state behind.
    Result<std::string> items = openai_responses::EncodeMessages(conversation);
    RECAP_RETURN_IF_ERROR(items);
    if (!request.system_prompt.empty()) body["instructions"] = request.system_prompt;
    body["input"] = ordered_json::parse(*items, nullptr, false);
    if (body["input"].is_discarded()) {
      return Status::Internal("recap's message codec wrote JSON that does not parse");
    }
    body["max_output_tokens"] = request.max_output_tokens;
    body["store"] = false;
    if (stream) body["stream"] = true;
    if (structured && request.json_schema) {
      ordered_json schema = ordered_json::parse(*request.json_schema, nullptr, false);
      if (!schema.is_discarded() && schema.is_object()) {
        body["text"] = {{"format",
                         {{"type", "json_schema"},
                          {"name", "recap_checkpoint"},
                          {"schema", std::move(schema)}}}};
      }
    }
    return body.dump(-1, ' ', false, ordered_json::error_handler_t::replace);
  }
  if (protocol == HttpProtocol::kAnthropic) {
    Result<std::string> messages = anthropic::EncodeMessages(conversation);
    RECAP_RETURN_IF_ERROR(messages);
    body["max_tokens"] = request.max_output_tokens;
    if (!request.system_prompt.empty()) body["system"] = request.system_prompt;
    body["messages"] = ordered_json::parse(*messages, nullptr, false);
    if (stream) body["stream"] = true;
  } else {
    if (!request.system_prompt.empty()) {
      conversation.instructions = Message::SystemText(request.system_prompt);
    }
    Result<std::string> messages = openai_chat::EncodeMessages(conversation);
    RECAP_RETURN_IF_ERROR(messages);
    body["messages"] = ordered_json::parse(*messages, nullptr, false);
    body[max_tokens_field] = request.max_output_tokens;
    if (stream) {
      body["stream"] = true;
      body["stream_options"] = {{"include_usage", true}};
    }
    if (structured && request.json_schema) {
      ordered_json schema = ordered_json::parse(*request.json_schema, nullptr, false);
      if (!schema.is_discarded() && schema.is_object()) {
        body["response_format"] = {
            {"type", "json_schema"},
            {"json_schema", {{"name", "recap_checkpoint"}, {"schema", std::move(schema)}}}};
      }
    }
  }
  if (body["messages"].is_discarded()) {
    return Status::Internal("recap's message codec wrote JSON that does not parse");
  }
  return body.dump(-1, ' ', false, ordered_json::error_handler_t::replace);
}

Result<std::string> BuildNativeBody(HttpProtocol protocol, const std::string& model,
                                    const NativeCompactionRequest& request) {
  Conversation conversation;
  conversation.messages = request.span->ToVector();
  const bool anthropic = protocol == HttpProtocol::kAnthropicCompact;
  ordered_json head = ordered_json::object();
  head["model"] = model;
  std::string array;
  if (anthropic) {
    // A stored message's own fields (a logged response's id, model, usage …) are no part of a
    // request's message, which the API reads strictly: only role and content go.
    for (Message& m : conversation.messages) m.extra.clear();
    Result<std::string> messages = anthropic::EncodeMessages(conversation);
    RECAP_RETURN_IF_ERROR(messages);
    array = std::move(messages).value();
    head["max_tokens"] = request.max_output_tokens;
    if (!request.instructions.empty()) head["system"] = request.instructions;
  } else {
    Result<std::string> items = openai_responses::EncodeMessages(conversation);
    RECAP_RETURN_IF_ERROR(items);
    array = std::move(items).value();
    std::string instructions = request.instructions;
    if (!request.focus.empty()) {
      if (!instructions.empty()) instructions += "\n\n";
      instructions += "Focus of this compaction: " + request.focus;
    }
    if (!instructions.empty()) head["instructions"] = instructions;
  }
  std::string out = head.dump(-1, ' ', false, ordered_json::error_handler_t::replace);
  out.pop_back();  // the closing brace: the array goes in as the codec wrote it
  out += anthropic ? ",\"messages\":" : ",\"input\":";
  out += array;
  if (anthropic) {
    ordered_json compaction = {{"type", "summarize"}};
    if (!request.focus.empty()) compaction["instructions"] = request.focus;
    out += ",\"compaction\":" +
           compaction.dump(-1, ' ', false, ordered_json::error_handler_t::replace);
  }
  out += '}';
  return out;
}

Result<Message> NativeCheckpointMessage(HttpProtocol protocol, const std::string& text) {
  // Member order kept, so that the artifact is stored as the server wrote it.
  const ordered_json body = ordered_json::parse(text, nullptr, false);
  if (body.is_discarded() || !body.is_object()) {
    return Status::Unavailable("the reply is not a JSON object");
  }
  if (protocol == HttpProtocol::kAnthropicCompact) {
    auto content = body.find("content");
    if (content == body.end() || !content->is_array()) {
      return Status::Unavailable("the reply has no `content` array");
    }
    const ordered_json message = {{"role", "assistant"}, {"content", *content}};
    DecodeOptions options;
    options.keep_unknown_blocks = true;
    Result<Message> m = anthropic::DecodeMessage(
        message.dump(-1, ' ', false, ordered_json::error_handler_t::replace), options);
    RECAP_RETURN_IF_ERROR(m);
    if (!FindProviderCheckpoint(*m)) {
      auto stop = body.find("stop_reason");
      return Status::Unavailable(
          "its `content` holds no `compaction` block with a summary (stop_reason " +
          (stop != body.end() && stop->is_string() ? "\"" + stop->get<std::string>() + "\""
                                                   : std::string("missing")) +
          ")");
    }
    m->summary = true;
    return m;
  }
  auto output = body.find("output");
  if (output == body.end() || !output->is_array()) {
    return Status::Unavailable("the reply has no `output` array");
  }
  Message m;
  m.role = Role::kAssistant;
  for (const ordered_json& item : *output) {
    Opaque o;
    auto type = item.is_object() ? item.find("type") : item.end();
    o.kind = type != item.end() && type->is_string() ? type->get<std::string>() : "item";
    o.payload = item.dump(-1, ' ', false, ordered_json::error_handler_t::replace);
    m.parts.emplace_back(std::move(o));
  }
  if (!FindProviderCheckpoint(m)) {
    return Status::Unavailable("its `output` holds no `compaction` item with `encrypted_content`");
  }
  m.summary = true;
  return m;
}

Result<Completion> ParseReply(HttpProtocol protocol, const json& body) {
  if (!body.is_object()) return Status::Unavailable("the body is JSON but not an object");
  if (protocol == HttpProtocol::kOpenAiResponses) return ParseResponse(body);
  if (protocol == HttpProtocol::kOpenAiCompact) {
    // The items themselves are read by NativeCheckpointMessage from the body as sent.
    const json* output = Member(body, "output");
    if (!output || !output->is_array())
      return Status::Unavailable("the reply has no `output` array");
    Completion c;
    ReadResponsesUsage(Member(body, "usage"), &c.usage);
    return c;
  }
  if (protocol == HttpProtocol::kAnthropicCompact) {
    const json* content = Member(body, "content");
    if (!content || !content->is_array())
      return Status::Unavailable("the reply has no `content` array");
    Completion c;
    const std::string stop = StringOr(Member(body, "stop_reason"));
    c.finish_reason = stop == "compaction" ? FinishReason::kStop : MapFinishReason(stop);
    ReadAnthropicUsage(Member(body, "usage"), &c.usage, true);
    return c;
  }
  Completion c;
  if (protocol == HttpProtocol::kAnthropic) {
    const json* content = Member(body, "content");
    if (!content || content->is_null()) {
      return Status::Unavailable("the reply has no `content` array");
    }
    if (!content->is_array()) {
      std::string bad = BadContent(content, "content");
      return Status::Unavailable(bad.empty() ? "`content` is a string; expected an array of blocks"
                                             : bad.substr(0, bad.find(';')) +
                                                   "; expected an array of blocks");
    }
    for (const json& block : *content) {
      if (StringOr(Member(block, "type")) == "text") c.text += StringOr(Member(block, "text"));
    }
    const json* stop = Member(body, "stop_reason");
    c.finish_reason =
        stop && stop->is_string() ? MapFinishReason(stop->get<std::string>()) : FinishReason::kStop;
    ReadAnthropicUsage(Member(body, "usage"), &c.usage, true);
    return c;
  }
  const json* choices = Member(body, "choices");
  if (!choices || !choices->is_array() || choices->empty() || !(*choices)[0].is_object()) {
    return Status::Unavailable("the reply has no `choices[0]`");
  }
  const json& choice = (*choices)[0];
  const json* message = Member(choice, "message");
  if (message && message->is_object()) {
    const json* content = Member(*message, "content");
    if (std::string bad = BadContent(content, "choices[0].message.content"); !bad.empty()) {
      return Status::Unavailable(std::move(bad));
    }
    c.text = ContentText(content);
  } else if (const json* text = Member(choice, "text"); text && text->is_string()) {
    c.text = text->get<std::string>();  // legacy completions shape, served by some proxies
  } else {
    return Status::Unavailable("the reply has no `choices[0].message`");
  }
  const json* finish = Member(choice, "finish_reason");
  c.finish_reason = finish && finish->is_string() ? MapFinishReason(finish->get<std::string>())
                                                  : FinishReason::kStop;
  ReadOpenAiUsage(Member(body, "usage"), &c.usage);
  return c;
}

std::string ErrorText(const json& body) {
  if (!body.is_object()) return {};
  if (const json* error = Member(body, "error")) {
    if (error->is_string()) return error->get<std::string>();
    if (const json* m = Member(*error, "message"); m && m->is_string())
      return m->get<std::string>();
  }
  for (const char* key : {"message", "detail"}) {
    if (const json* m = Member(body, key); m && m->is_string()) return m->get<std::string>();
  }
  return {};
}

std::string ErrorKind(const json& body) {
  if (!body.is_object()) return {};
  std::string out;
  auto add = [&out](const json* v) {
    if (v && v->is_string() && !v->get<std::string>().empty()) {
      if (!out.empty()) out += ' ';
      out += v->get<std::string>();
    }
  };
  if (const json* error = Member(body, "error"); error && error->is_object()) {
    add(Member(*error, "type"));
    add(Member(*error, "code"));
  }
  return out;
}

bool StreamAccumulator::OnEvent(const SseEvent& event) {
  ++events_;
  if (event.data == "[DONE]") {
    done_ = true;
    return true;
  }
  std::string too_deep;
  json j = ParseServerJson(event.data, &too_deep);
  if (j.is_discarded() || !j.is_object()) {
    malformed_ = true;
    error_ = "event " + std::to_string(events_) + " of the stream " +
             (too_deep.empty() ? std::string("is not a JSON object") : "is " + too_deep);
    return false;
  }
  if (const json* error = Member(j, "error"); error && !error->is_null()) {
    error_ = ErrorText(j);
    if (error_.empty()) error_ = "the stream carried an error event";
    error_kind_ = ErrorKind(j);
    return false;
  }
  if (protocol_ == HttpProtocol::kOpenAiResponses) {
    return OnResponses(j);
  }
  if (protocol_ == HttpProtocol::kAnthropic) {
    OnAnthropic(j);
    return true;
  }
  return OnOpenAi(j);
}

void StreamAccumulator::AddText(const std::string& text) {
  completion_.text += text;
  text_chars_ += CodePoints(text);
}

bool StreamAccumulator::OnOpenAi(const json& chunk) {
  ReadOpenAiUsage(Member(chunk, "usage"), &completion_.usage);
  const json* choices = Member(chunk, "choices");
  if (!choices || !choices->is_array() || choices->empty()) return true;
  const json& choice = (*choices)[0];
  if (const json* delta = Member(choice, "delta"); delta && delta->is_object()) {
    const json* content = Member(*delta, "content");
    if (std::string bad = BadContent(content, "choices[0].delta.content"); !bad.empty()) {
      malformed_ = true;
      error_ = "event " + std::to_string(events_) + " of the stream: " + bad;
      return false;
    }
    AddText(ContentText(content));
  }
  if (const json* finish = Member(choice, "finish_reason"); finish && finish->is_string()) {
    finish_reason_ = finish->get<std::string>();
    finish_seen_ = true;
  }
  return true;
}

void StreamAccumulator::OnAnthropic(const json& event) {
  const std::string type = StringOr(Member(event, "type"));
  if (type == "message_start") {
    if (const json* message = Member(event, "message")) {
      ReadAnthropicUsage(Member(*message, "usage"), &completion_.usage, true);
    }
  } else if (type == "content_block_start") {
    if (const json* block = Member(event, "content_block");
        block && StringOr(Member(*block, "type")) == "text") {
      AddText(StringOr(Member(*block, "text")));
    }
  } else if (type == "content_block_delta") {
    if (const json* delta = Member(event, "delta");
        delta && StringOr(Member(*delta, "type")) == "text_delta") {
      AddText(StringOr(Member(*delta, "text")));
    }
  } else if (type == "message_delta") {
    if (const json* delta = Member(event, "delta")) {
      if (const json* stop = Member(*delta, "stop_reason"); stop && stop->is_string()) {
        finish_reason_ = stop->get<std::string>();
        finish_seen_ = true;
      }
    }
    ReadAnthropicUsage(Member(event, "usage"), &completion_.usage, false);
  } else if (type == "message_stop") {
    done_ = true;
  }
}

bool StreamAccumulator::OnResponses(const json& event) {
  const std::string type = StringOr(Member(event, "type"));
  if (type == "response.output_text.delta") {
    AddText(StringOr(Member(event, "delta")));
  } else if (type == "response.refusal.delta" || type == "response.refusal.done") {
    refused_ = true;
  } else if (type == "response.completed" || type == "response.incomplete") {
    const json* response = Member(event, "response");
    static const json kEmpty = json::object();
    const json& r = response && response->is_object() ? *response : kEmpty;
    ReadResponsesUsage(Member(r, "usage"), &completion_.usage);
    if (type == "response.incomplete") {
      std::string reason = "incomplete";
      if (const json* details = Member(r, "incomplete_details")) {
        reason = StringOr(Member(*details, "reason"), reason);
      }
      finish_reason_ = reason;  // max_output_tokens -> kLength, anything else kOther
    } else {
      finish_reason_ = refused_ ? "refusal" : "stop";
    }
    done_ = true;
  } else if (type == "response.failed" || type == "error") {
    // `error` events carry code and message at the top; a failed response in `response.error`.
    const json* where = &event;
    if (type == "response.failed") {
      if (const json* response = Member(event, "response")) {
        if (const json* error = Member(*response, "error"); error && error->is_object())
          where = error;
      }
    }
    error_ = StringOr(Member(*where, "message"));
    if (error_.empty()) error_ = "the stream carried a " + type + " event";
    std::string kind = StringOr(Member(*where, "code"));
    const std::string t = StringOr(Member(*where, "type"));
    if (!t.empty() && t != "error") kind = kind.empty() ? t : t + " " + kind;
    error_kind_ = kind;
    return false;
  }
  return true;
}

Completion StreamAccumulator::Take() {
  completion_.finish_reason =
      finish_reason_.empty() ? FinishReason::kStop : MapFinishReason(finish_reason_);
  return std::move(completion_);
}

std::optional<std::size_t> FindContextWindow(const json& list, const std::string& model,
                                             std::string* field) {
  const json* entries = nullptr;
  std::string prefix;
  if (list.is_array()) {
    entries = &list;
  } else if (const json* data = Member(list, "data"); data && data->is_array()) {
    entries = data;
    prefix = "data";
  } else if (const json* models = Member(list, "models"); models && models->is_array()) {
    entries = models;
    prefix = "models";
  }
  const json* entry = nullptr;
  std::string path;
  if (entries) {
    for (std::size_t i = 0; i < entries->size(); ++i) {
      if ((*entries)[i].is_object() && EntryIs((*entries)[i], model)) {
        entry = &(*entries)[i];
        path = prefix + "[" + std::to_string(i) + "]";
        break;
      }
    }
    // A local server that serves one model often names it by its file: take the only one.
    if (!entry && entries->size() == 1 && (*entries)[0].is_object()) {
      entry = &(*entries)[0];
      path = prefix + "[0]";
    }
  } else if (list.is_object() && (EntryIs(list, model) || EntryName(list).empty())) {
    entry = &list;  // a single model object (GET /models/{id})
  }
  if (!entry) return std::nullopt;
  for (const char* f : kWindowFields) {
    if (auto n = FindField(*entry, f, path, field)) return n;
  }
  return std::nullopt;
}

}  // namespace http
}  // namespace internal
}  // namespace v0
}  // namespace recap
