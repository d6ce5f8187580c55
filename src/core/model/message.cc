#include "recap/message.h"

#include <string_view>
#include <unordered_set>
#include <vector>

namespace recap {
inline namespace v0 {

const char* RoleName(Role role) noexcept {
  switch (role) {
    case Role::kSystem: return "system";
    case Role::kUser: return "user";
    case Role::kAssistant: return "assistant";
    case Role::kTool: return "tool";
  }
  return "unknown";
}

std::optional<Role> ParseRole(std::string_view name) noexcept {
  if (name == "system") return Role::kSystem;
  if (name == "user") return Role::kUser;
  if (name == "assistant") return Role::kAssistant;
  if (name == "tool") return Role::kTool;
  return std::nullopt;
}

const char* OriginName(Origin origin) noexcept {
  switch (origin) {
    case Origin::kNone: return "";
    case Origin::kAnthropic: return "anthropic";
    case Origin::kOpenAIChat: return "openai-chat";
    case Origin::kOpenAIResponses: return "openai-responses";
  }
  return "";
}

std::optional<Origin> ParseOrigin(std::string_view name) noexcept {
  if (name == "anthropic") return Origin::kAnthropic;
  if (name == "openai-chat") return Origin::kOpenAIChat;
  if (name == "openai-responses") return Origin::kOpenAIResponses;
  return std::nullopt;
}

namespace {
Message WithText(Role role, std::string text) {
  Message m;
  m.role = role;
  m.parts.emplace_back(Text{std::move(text), {}});
  return m;
}
}  // namespace

Message Message::UserText(std::string text) { return WithText(Role::kUser, std::move(text)); }
Message Message::AssistantText(std::string text) {
  return WithText(Role::kAssistant, std::move(text));
}
Message Message::SystemText(std::string text) { return WithText(Role::kSystem, std::move(text)); }

Message Message::AssistantCalls(std::vector<ToolCall> calls, std::string text) {
  Message m;
  m.role = Role::kAssistant;
  if (!text.empty()) m.parts.emplace_back(Text{std::move(text), {}});
  for (auto& c : calls) m.parts.emplace_back(std::move(c));
  return m;
}

Message Message::ToolOutput(std::string call_id, std::string output, bool is_error) {
  Message m;
  m.role = Role::kTool;
  ToolResult r;
  r.call_id = std::move(call_id);
  r.content.emplace_back(Text{std::move(output), {}});
  r.is_error = is_error;
  m.parts.emplace_back(std::move(r));
  return m;
}

bool IsTurnStart(const Message& m) noexcept {
  if (m.role != Role::kUser || m.summary) return false;
  for (const auto& p : m.parts) {
    if (std::holds_alternative<Text>(p)) return true;
    if (const auto* o = std::get_if<Opaque>(&p); o && o->link == OpaqueLink::kNone) return true;
  }
  return false;
}

bool HasToolCalls(const Message& m) noexcept {
  for (const auto& p : m.parts) {
    if (std::holds_alternative<ToolCall>(p)) return true;
    if (const auto* o = std::get_if<Opaque>(&p); o && o->link == OpaqueLink::kCall) return true;
  }
  return false;
}

std::optional<std::string> RepeatedCallId(const Message& m) {
  // The id a part asks under, or null for a part that asks nothing.
  const auto call_id = [](const Part& p) -> const std::string* {
    if (const auto* c = std::get_if<ToolCall>(&p)) return &c->id;
    if (const auto* o = std::get_if<Opaque>(&p); o != nullptr && o->link == OpaqueLink::kCall) {
      return &o->link_id;
    }
    return nullptr;
  };
  std::size_t calls = 0;
  for (const auto& p : m.parts) calls += call_id(p) != nullptr ? 1 : 0;
  if (calls < 2) return std::nullopt;  // the usual case, and it allocates nothing
  if (calls <= 16) {                   // a few calls: compared pairwise
    for (std::size_t i = 0; i < m.parts.size(); ++i) {
      const std::string* a = call_id(m.parts[i]);
      if (a == nullptr) continue;
      for (std::size_t j = 0; j < i; ++j) {
        const std::string* b = call_id(m.parts[j]);
        if (b != nullptr && *a == *b) return *a;
      }
    }
    return std::nullopt;
  }
  std::unordered_set<std::string_view> seen;
  for (const auto& p : m.parts) {
    const std::string* id = call_id(p);
    if (id != nullptr && !seen.insert(*id).second) return *id;
  }
  return std::nullopt;
}

bool IsInstructions(const Message& m) noexcept { return m.role == Role::kSystem && !m.summary; }

std::string PinnedProblem(const Message& m) {
  if (!m.pinned) return {};
  if (m.role != Role::kUser && m.role != Role::kSystem) {
    return std::string("it is ") + (m.role == Role::kAssistant ? "an assistant" : "a tool") +
           " message; only user and system messages can be pinned";
  }
  if (m.summary) return "it is a checkpoint (summary), which a compaction replaces by design";
  for (const Part& p : m.parts) {
    const bool tool = std::holds_alternative<ToolCall>(p) || std::holds_alternative<ToolResult>(p);
    const auto* o = std::get_if<Opaque>(&p);
    if (tool || (o != nullptr && o->link != OpaqueLink::kNone)) {
      return "it carries tool calls or results, which must stay beside their pair; pin a "
             "message without tool parts";
    }
  }
  return {};
}

std::string JoinedText(const Message& m) {
  std::string out;
  bool first = true;
  for (const auto& p : m.parts) {
    if (const auto* t = std::get_if<Text>(&p)) {
      if (!first) out += '\n';
      out += t->text;
      first = false;
    }
  }
  return out;
}

}  // namespace v0
}  // namespace recap
