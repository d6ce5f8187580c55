// recap proxy — the model's reply from what the upstream sent (reply.h).
#include "reply.h"

#include <utility>
#include <variant>

#include <nlohmann/json.hpp>

#include "recap/codec.h"

namespace recap_proxy {

namespace {

using Json = nlohmann::ordered_json;

recap::Status Bad(const std::string& format, const std::string& what) {
  return recap::Status::InvalidArgument("the upstream's " + format + " answer: " + what);
}

// A JSON object member as a string ("" when absent or not a string).
std::string Text(const Json& j, const char* name) {
  const auto it = j.find(name);
  return it != j.end() && it->is_string() ? it->get<std::string>() : std::string();
}

}  // namespace

struct ReplyAssembler::State {
  std::string format;
  recap::Status error;  // the first error; the assembly stops there
  bool done = false;
  // anthropic: the message the events describe, and each tool_use block's input in pieces
  bool started = false;
  Json message = Json::object();
  std::map<std::size_t, std::string> inputs;
  // openai-chat
  std::string role = "assistant";
  std::string content;
  bool has_content = false;
  std::map<std::size_t, Json> calls;
  // openai-responses: the output items, and the response's id
  Json output = Json::array();
  std::string response_id;

  recap::Status Fail(recap::Status s) {
    if (error.ok()) error = std::move(s);
    return error;
  }

  recap::Status Anthropic(const Json& j) {
    const std::string type = Text(j, "type");
    if (type == "ping" || type == "message_delta") return recap::Status::OK();
    if (type == "error") return Fail(Bad(format, "an error event: " + j.dump()));
    if (type == "message_start") {
      const auto m = j.find("message");
      if (m == j.end() || !m->is_object())
        return Fail(Bad(format, "message_start without a message"));
      message = Json::object();
      message["role"] = m->value("role", std::string("assistant"));
      message["content"] =
          m->contains("content") && (*m)["content"].is_array() ? (*m)["content"] : Json::array();
      started = true;
      return recap::Status::OK();
    }
    if (!started) return Fail(Bad(format, "'" + type + "' before message_start"));
    if (type == "message_stop") {
      done = true;
      return recap::Status::OK();
    }
    const auto index_it = j.find("index");
    if (index_it == j.end() || !index_it->is_number_unsigned()) {
      return Fail(Bad(format, "'" + type + "' without an index"));
    }
    const std::size_t index = index_it->get<std::size_t>();
    Json& content = message["content"];
    if (type == "content_block_start") {
      const auto block = j.find("content_block");
      if (block == j.end() || !block->is_object() || index != content.size()) {
        return Fail(Bad(format, "content_block_start out of order"));
      }
      content.push_back(*block);
      return recap::Status::OK();
    }
    if (index >= content.size()) return Fail(Bad(format, "'" + type + "' for no block"));
    Json& block = content[index];
    if (type == "content_block_delta") {
      const auto delta = j.find("delta");
      if (delta == j.end() || !delta->is_object())
        return Fail(Bad(format, "a delta without delta"));
      const std::string kind = Text(*delta, "type");
      if (kind == "text_delta") {
        block["text"] = Text(block, "text") + Text(*delta, "text");
      } else if (kind == "input_json_delta") {
        inputs[index] += Text(*delta, "partial_json");
      } else if (kind == "thinking_delta") {
        block["thinking"] = Text(block, "thinking") + Text(*delta, "thinking");
      } else if (kind == "signature_delta") {
        block["signature"] = Text(block, "signature") + Text(*delta, "signature");
      } else if (kind == "citations_delta") {
        if (!block.contains("citations") || !block["citations"].is_array()) {
          block["citations"] = Json::array();
        }
        if (delta->contains("citation")) block["citations"].push_back((*delta)["citation"]);
      } else {
        return Fail(Bad(format, "a delta of unknown type '" + kind + "'"));
      }
      return recap::Status::OK();
    }
    if (type == "content_block_stop") {
      const auto input = inputs.find(index);
      if (input != inputs.end() && !input->second.empty()) {
        Json parsed = Json::parse(input->second, nullptr, false);
        if (parsed.is_discarded()) {
          return Fail(Bad(format, "a tool_use input that is not JSON"));
        }
        block["input"] = std::move(parsed);
      }
      return recap::Status::OK();
    }
    return Fail(Bad(format, "an event of unknown type '" + type + "'"));
  }

  recap::Status ChatChunk(const Json& j) {
    const auto choices = j.find("choices");
    if (choices == j.end() || !choices->is_array()) {
      return Fail(Bad(format, "a chunk without choices"));
    }
    if (choices->empty()) return recap::Status::OK();  // e.g. the usage chunk
    const Json& choice = (*choices)[0];
    const auto delta = choice.find("delta");
    if (delta != choice.end() && delta->is_object()) {
      if (delta->contains("role") && (*delta)["role"].is_string()) role = (*delta)["role"];
      if (delta->contains("content") && (*delta)["content"].is_string()) {
        content += (*delta)["content"].get<std::string>();
        has_content = true;
      }
      if (delta->contains("tool_calls") && (*delta)["tool_calls"].is_array()) {
        for (const Json& piece : (*delta)["tool_calls"]) {
          const std::size_t index = piece.value("index", std::size_t{0});
          Json& call = calls[index];
          if (call.is_null()) {
            call = {
                {"id", ""}, {"type", "function"}, {"function", {{"name", ""}, {"arguments", ""}}}};
          }
          if (!Text(piece, "id").empty()) call["id"] = Text(piece, "id");
          if (piece.contains("function") && piece["function"].is_object()) {
            const Json& f = piece["function"];
            call["function"]["name"] = Text(call["function"], "name") + Text(f, "name");
            call["function"]["arguments"] =
                Text(call["function"], "arguments") + Text(f, "arguments");
          }
        }
      }
    }
    if (choice.contains("finish_reason") && choice["finish_reason"].is_string()) done = true;
    return recap::Status::OK();
  }

  Json ChatMessage() const {
    Json m = {{"role", role}, {"content", has_content ? Json(content) : Json()}};
    if (!calls.empty()) {
      Json list = Json::array();
      for (const auto& c : calls) list.push_back(c.second);
      m["tool_calls"] = std::move(list);
    }
    return m;
  }
};

ReplyAssembler::ReplyAssembler(std::string format) : state_(std::make_unique<State>()) {
  state_->format = std::move(format);
}

ReplyAssembler::~ReplyAssembler() = default;

recap::Status ReplyAssembler::Event(std::string_view event, std::string_view data) {
  State& s = *state_;
  if (!s.error.ok()) return s.error;
  if (s.done && s.format != "openai-chat") return recap::Status::OK();  // after the end
  if (s.format == "openai-chat" && data == "[DONE]") return recap::Status::OK();
  const Json j = Json::parse(data.begin(), data.end(), nullptr, false);
  if (!j.is_object()) {
    return s.Fail(Bad(
        s.format, "an event" + (event.empty() ? std::string() : " '" + std::string(event) + "'") +
                      " whose data is not a JSON object"));
  }
  if (s.format == "anthropic") return s.Anthropic(j);
  if (s.format == "openai-chat") return s.ChatChunk(j);
  if (s.format == "openai-responses") {
    const std::string type = Text(j, "type");
    if (type == "response.created") {
      const auto response = j.find("response");
      if (response != j.end() && response->is_object()) s.response_id = Text(*response, "id");
    }
    if (type == "response.completed" || type == "response.incomplete") {
      const auto response = j.find("response");
      if (response == j.end() || !response->is_object() || !response->contains("output") ||
          !(*response)["output"].is_array()) {
        return s.Fail(Bad(s.format, type + " without response.output"));
      }
      s.output = (*response)["output"];
      if (const std::string id = Text(*response, "id"); !id.empty()) s.response_id = id;
      s.done = true;
    } else if (type == "response.failed" || type == "error") {
      return s.Fail(Bad(s.format, "'" + type + "': " + j.dump()));
    }
    return recap::Status::OK();
  }
  return s.Fail(recap::Status::InvalidArgument("unknown format '" + s.format + "'"));
}

recap::Status ReplyAssembler::Body(std::string_view json) {
  State& s = *state_;
  const Json j = Json::parse(json.begin(), json.end(), nullptr, false);
  if (!j.is_object()) return s.Fail(Bad(s.format, "a body that is not a JSON object"));
  if (s.format == "anthropic") {
    if (!j.contains("content") || !j["content"].is_array()) {
      return s.Fail(Bad(s.format, "a message without content"));
    }
    s.message = Json::object();
    s.message["role"] = j.value("role", std::string("assistant"));
    s.message["content"] = j["content"];
    s.started = s.done = true;
  } else if (s.format == "openai-chat") {
    if (!j.contains("choices") || !j["choices"].is_array() || j["choices"].empty() ||
        !j["choices"][0].contains("message") || !j["choices"][0]["message"].is_object()) {
      return s.Fail(Bad(s.format, "a completion without choices[0].message"));
    }
    const Json& m = j["choices"][0]["message"];
    s.role = m.value("role", std::string("assistant"));
    if (m.contains("content") && m["content"].is_string()) {
      s.content = m["content"];
      s.has_content = true;
    }
    if (m.contains("tool_calls") && m["tool_calls"].is_array()) {
      std::size_t i = 0;
      for (const Json& c : m["tool_calls"]) s.calls[i++] = c;
    }
    s.done = true;
  } else if (s.format == "openai-responses") {
    if (!j.contains("output") || !j["output"].is_array()) {
      return s.Fail(Bad(s.format, "a response without output"));
    }
    s.output = j["output"];
    s.response_id = Text(j, "id");
    s.done = true;
  } else {
    return s.Fail(recap::Status::InvalidArgument("unknown format '" + s.format + "'"));
  }
  return recap::Status::OK();
}

bool ReplyAssembler::complete() const { return state_->error.ok() && state_->done; }

const std::string& ReplyAssembler::response_id() const { return state_->response_id; }

recap::Result<std::vector<recap::Message>> ReplyAssembler::Messages() const {
  const State& s = *state_;
  if (!s.error.ok()) return s.error;
  if (!s.done) {
    return recap::Status::FailedPrecondition("the upstream's " + s.format +
                                             " answer ended before it was complete");
  }
  recap::DecodeOptions options;
  options.keep_unknown_blocks = true;
  options.split_instructions = false;
  std::vector<recap::Message> out;
  if (s.format == "openai-responses") {
    recap::Result<recap::Conversation> c =
        recap::openai_responses::DecodeMessages(s.output.dump(), options);
    if (!c.ok()) return c.status();
    return std::move(c->messages);
  }
  const std::string text = s.format == "anthropic" ? s.message.dump() : s.ChatMessage().dump();
  recap::Result<recap::Message> m = s.format == "anthropic"
                                        ? recap::anthropic::DecodeMessage(text, options)
                                        : recap::openai_chat::DecodeMessage(text, options);
  if (!m.ok()) return m.status();
  out.push_back(std::move(m).value());
  return out;
}

Fingerprint ReplyFingerprint(const std::vector<recap::Message>& reply) {
  std::string f;
  const auto add = [&f](char tag, const std::string& text) {
    f += tag;
    f += std::to_string(text.size());
    f += ':';
    f += text;
  };
  for (const recap::Message& m : reply) {
    add('m', std::string(recap::RoleName(m.role)));
    for (const recap::Part& p : m.parts) {
      // An empty text is the same as none (a chat client sends back `"content": null` for
      // the "" it received); opaque parts (thinking, reasoning) are left out, since clients
      // differ in whether they send them back.
      if (const auto* t = std::get_if<recap::Text>(&p)) {
        if (!t->text.empty()) add('t', t->text);
      } else if (const auto* c = std::get_if<recap::ToolCall>(&p)) {
        add('c', c->id);
        add('n', c->name);
      }
    }
  }
  return f;
}

}  // namespace recap_proxy
