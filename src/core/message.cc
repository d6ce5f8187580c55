#include "recap/message.h"

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
