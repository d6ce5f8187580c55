// recap CLI — a model request as `recap proxy` receives it (proxy_request.h).
#include "proxy_request.h"

#include <map>
#include <utility>

#include <nlohmann/json.hpp>

#include "recap/measure.h"

#include "chain.h"
#include "json_skim.h"
#include "recap_internal/json_depth.h"

namespace recap_cli {
namespace proxy_request {

using Json = nlohmann::json;

recap::Status Bad(const std::string& format, const std::string& what) {
  return recap::Status::InvalidArgument("the " + format + " request " + what);
}

bool IsSpace(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }

// The offset of `view` in `text` (a view into it).
std::size_t At(const std::string& text, std::string_view view) {
  return static_cast<std::size_t>(view.data() - text.data());
}

// `body` without the top-level member `key` whose value is `value` (a view into it), and the
// comma that separated it from a neighbour.
std::string WithoutMember(const std::string& body, std::string_view value, const std::string& key) {
  const std::string quoted = "\"" + key + "\"";
  std::size_t begin = body.rfind(quoted, At(body, value));
  if (begin == std::string::npos) return body;
  std::size_t end = At(body, value) + value.size();
  std::size_t after = end;
  while (after < body.size() && IsSpace(body[after])) ++after;
  if (after < body.size() && body[after] == ',') {
    end = after + 1;
  } else {
    std::size_t before = begin;
    while (before > 0 && IsSpace(body[before - 1])) --before;
    if (before > 0 && body[before - 1] == ',') begin = before - 1;
  }
  return body.substr(0, begin) + body.substr(end);
}

void DropBreakpoints(Json& j) {
  if (j.is_object()) {
    j.erase("cache_control");
    for (auto& member : j.items()) DropBreakpoints(member.value());
  } else if (j.is_array()) {
    for (Json& e : j) DropBreakpoints(e);
  }
}

// Where a message holds breakpoints: on itself, and on which of its content blocks.
struct Breakpoints {
  std::optional<Json> message;
  std::vector<std::pair<std::size_t, Json>> blocks;
};

Breakpoints BreakpointsOf(const Json& m) {
  Breakpoints b;
  if (!m.is_object()) return b;
  if (const auto it = m.find("cache_control"); it != m.end()) b.message = *it;
  if (const auto c = m.find("content"); c != m.end() && c->is_array()) {
    for (std::size_t i = 0; i < c->size(); ++i) {
      const Json& block = (*c)[i];
      if (!block.is_object()) continue;
      if (const auto it = block.find("cache_control"); it != block.end()) {
        b.blocks.emplace_back(i, *it);
      }
    }
  }
  return b;
}

}  // namespace proxy_request

using proxy_request::At;
using proxy_request::Bad;

recap::Result<ProxyRequest> ParseProxyRequest(const std::string& format, std::string body) {
  ProxyRequest r;
  r.format = format;
  r.body = std::move(body);
  const std::string& b = r.body;
  // Before any parser sees it: nlohmann/json destroys a document recursively.
  if (recap::internal::FindTooDeep(b) != std::string::npos) {
    return Bad(format, "body nests deeper than " + std::to_string(recap::internal::kMaxJsonDepth) +
                           " levels; no real request does");
  }
  // One pass over the body's members, without parsing it: the messages are read (and checked)
  // by the chain and the codec, and the rest goes upstream as the client wrote it.
  const std::optional<std::vector<std::pair<std::string, std::string_view>>> members =
      ObjectMembers(b);
  if (!members) return Bad(format, "body is not a JSON object");
  std::map<std::string, std::string_view> by_name;
  for (const auto& [name, value] : *members) by_name[name] = value;  // the last one, as a parser
  const auto find = [&](const char* name) -> std::optional<std::string_view> {
    const auto it = by_name.find(name);
    if (it == by_name.end()) return std::nullopt;
    return it->second;
  };
  // A small member's value, parsed (null when it is not valid JSON).
  const auto value_of = [](std::string_view text) {
    return proxy_request::Json::parse(text.begin(), text.end(), nullptr, false);
  };
  const char* member = format == "openai-responses" ? "input" : "messages";
  const std::optional<std::string_view> messages = find(member);
  if (!messages) {
    return Bad(format, std::string("has no `") + member + "`: send the conversation in it");
  }
  r.messages_at = At(b, *messages);
  r.messages_length = messages->size();
  const std::size_t first = messages->find_first_not_of(" \t\r\n");
  if (format == "openai-responses" && first != std::string_view::npos &&
      (*messages)[first] == '"') {
    // One user message, given as a string.
    const proxy_request::Json text = value_of(*messages);
    if (!text.is_string()) return Bad(format, "`input` is not a valid JSON string");
    r.input_message =
        proxy_request::Json{{"type", "message"}, {"role", "user"}, {"content", text}}.dump();
  } else {
    const std::optional<std::vector<std::string_view>> elements = ArrayElements(*messages);
    if (!elements) {
      return Bad(format, std::string("`") + member + "` is not an array of messages");
    }
    std::size_t i = 0;
    if (format == "openai-chat" || format == "openai-responses") {
      // The leading system and developer messages (items) are the request's own instructions:
      // they stay before the conversation, never summarized.
      for (; i < elements->size(); ++i) {
        const std::optional<std::string_view> role_text = MemberText((*elements)[i], "role");
        const proxy_request::Json role = role_text ? value_of(*role_text) : proxy_request::Json();
        if (role != "system" && role != "developer") break;
        r.leading.emplace_back((*elements)[i]);
        r.instructions_chars += recap::CountCodePoints((*elements)[i]);
      }
    }
    r.messages.reserve(elements->size() - i);
    for (; i < elements->size(); ++i) r.messages.emplace_back((*elements)[i]);
  }
  if (!r.input_message.empty()) r.messages.emplace_back(r.input_message);
  if (r.messages.empty()) {
    return Bad(format, std::string("has no message") +
                           (r.leading.empty() ? "" : " after its system and developer ones") +
                           ": send the conversation in `" + member + "`");
  }
  for (const char* name : {"system", "instructions"}) {
    if (const std::optional<std::string_view> v = find(name)) {
      r.instructions_chars += recap::CountCodePoints(*v);
    }
  }
  if (const std::optional<std::string_view> tools = find("tools")) {
    r.tool_catalog_chars = recap::CountCodePoints(*tools);
  }
  if (const std::optional<std::string_view> v = find("stream")) {
    const proxy_request::Json stream = value_of(*v);
    r.stream = stream.is_boolean() && stream.get<bool>();
  }
  if (const std::optional<std::string_view> v = find("model")) {
    const proxy_request::Json model = value_of(*v);
    if (model.is_string()) r.model = model.get<std::string>();
  }
  if (const std::optional<std::string_view> v = find("previous_response_id")) {
    const proxy_request::Json id = value_of(*v);
    if (id.is_string()) r.previous_response_id = id.get<std::string>();
  }
  return r;
}

std::string UpstreamBody(const ProxyRequest& request, std::string_view messages_array) {
  // The array's elements, without its brackets.
  std::string_view inner;
  const std::size_t open = messages_array.find('[');
  const std::size_t close = messages_array.rfind(']');
  if (open != std::string_view::npos && close != std::string_view::npos && close > open) {
    inner = messages_array.substr(open + 1, close - open - 1);
    std::size_t k = 0;
    while (k < inner.size() && proxy_request::IsSpace(inner[k])) ++k;
    if (k == inner.size()) inner = {};
  }
  std::vector<std::string_view> parts;
  if (!inner.empty()) parts.push_back(inner);
  return UpstreamBody(request, parts);
}

std::string UpstreamBody(const ProxyRequest& request, const std::vector<std::string_view>& parts) {
  const std::string_view before(request.body.data(), request.messages_at);
  std::string_view after(request.body);
  after.remove_prefix(request.messages_at + request.messages_length);
  std::size_t size = before.size() + after.size() + 2;
  for (const std::string_view m : request.leading) size += m.size() + 1;
  for (const std::string_view p : parts) size += p.size() + 1;
  // One allocation, one copy of each part.
  std::string body;
  body.reserve(size);
  body.append(before);
  body += '[';
  bool first = true;
  for (const std::vector<std::string_view>* list : {&request.leading, &parts}) {
    for (const std::string_view m : *list) {
      if (m.empty()) continue;
      if (!first) body += ',';
      body.append(m);
      first = false;
    }
  }
  body += ']';
  body.append(after);
  if (request.previous_response_id) {
    if (const std::optional<std::string_view> id = MemberText(body, "previous_response_id")) {
      body = proxy_request::WithoutMember(body, *id, "previous_response_id");
    }
  }
  return body;
}

bool HasBreakpoints(const ProxyRequest& request) {
  for (const std::string_view m : request.messages) {
    if (m.find("cache_control") != std::string_view::npos) return true;
  }
  return false;
}

std::string WithoutBreakpoints(std::string_view message_json) {
  if (message_json.find("cache_control") == std::string_view::npos) {
    return std::string(message_json);
  }
  proxy_request::Json j =
      proxy_request::Json::parse(message_json.begin(), message_json.end(), nullptr, false);
  if (j.is_discarded()) return std::string(message_json);
  proxy_request::DropBreakpoints(j);
  return j.dump(-1, ' ', false, proxy_request::Json::error_handler_t::replace);
}

void PlaceBreakpoints(const ProxyRequest& request, std::string* prepared) {
  const std::string_view prepared_array(*prepared);
  using proxy_request::Json;
  // The request's messages with breakpoints, by their canonical text without them.
  std::map<std::string, proxy_request::Breakpoints> wanted;
  for (const std::string_view m : request.messages) {
    if (m.find("cache_control") == std::string_view::npos) continue;
    const Json j = Json::parse(m.begin(), m.end(), nullptr, false);
    proxy_request::Breakpoints b = proxy_request::BreakpointsOf(j);
    if (!b.message && b.blocks.empty()) continue;
    recap::Result<std::string> key = recap_proxy::Canonical(m, "message");
    if (key.ok()) wanted.emplace(std::move(*key), std::move(b));
  }
  const std::optional<std::vector<std::string_view>> elements = ArrayElements(prepared_array);
  if (wanted.empty() || !elements) return;
  // The newest messages first; each wanted message marks one sent message at most.
  std::map<std::size_t, std::string> replaced;
  const std::size_t n = elements->size();
  for (std::size_t k = 0; k < n && k < kMaxBreakpointSearch && !wanted.empty(); ++k) {
    const std::size_t i = n - 1 - k;
    recap::Result<std::string> key = recap_proxy::Canonical((*elements)[i], "message");
    if (!key.ok()) continue;
    const auto it = wanted.find(*key);
    if (it == wanted.end()) continue;
    Json m = Json::parse((*elements)[i].begin(), (*elements)[i].end(), nullptr, false);
    if (!m.is_object()) continue;
    if (it->second.message) m["cache_control"] = *it->second.message;
    for (const auto& [block, value] : it->second.blocks) {
      if (m.contains("content") && m["content"].is_array() && block < m["content"].size() &&
          m["content"][block].is_object()) {
        m["content"][block]["cache_control"] = value;
      }
    }
    replaced[i] = m.dump(-1, ' ', false, Json::error_handler_t::replace);
    wanted.erase(it);
  }
  if (replaced.empty()) return;
  std::string out = "[";
  for (std::size_t i = 0; i < n; ++i) {
    if (i > 0) out += ',';
    const auto r = replaced.find(i);
    if (r != replaced.end()) {
      out += r->second;
    } else {
      out.append((*elements)[i].data(), (*elements)[i].size());
    }
  }
  out += ']';
  *prepared = std::move(out);
}

}  // namespace recap_cli
