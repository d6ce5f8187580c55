// The providers' own checkpoints (R14.1) as the codecs carry them: an Opaque part of kind
// "compaction", whose payload is Anthropic's `compaction` block or OpenAI's `compaction` item.
// Declared in recap/message.h; here because only the codecs' room knows the providers' shapes.
#include <optional>
#include <string>

#include "recap/message.h"

#include "json/json_util.h"

namespace recap {
inline namespace v0 {

std::optional<ProviderCheckpoint> FindProviderCheckpoint(const Message& m) {
  std::optional<ProviderCheckpoint> found;
  for (const auto& p : m.parts) {
    const auto* o = std::get_if<Opaque>(&p);
    if (o == nullptr || o->kind != "compaction") continue;
    jsonutil::Json j;
    if (!jsonutil::Parse(o->payload, "a compaction payload", &j).ok() || !j.is_object()) continue;
    // Honoured only when well formed for its provider (issue 35): it retires everything
    // before it, so a malformed or ambiguous one is carried as it is and nothing more. A
    // message decoded from a format is held to that format's shape: Anthropic's block has its
    // summary in `content`; OpenAI's Responses item has `encrypted_content` and no `content`;
    // OpenAI chat has no compaction at all. A message of unknown origin (made by a host, or
    // stored before recap recorded origins) is told by its members; one with both is taken
    // for Anthropic's, whose block may carry `encrypted_content` beside its `content`.
    auto content = j.find("content");
    auto encrypted = j.find("encrypted_content");
    const bool anthropic_shape = content != j.end();
    if (m.origin == Origin::kOpenAIChat) continue;
    if (m.origin == Origin::kOpenAIResponses && anthropic_shape) continue;
    // Anthropic returns its block in an assistant turn only: one in a user turn is forged.
    if (m.origin == Origin::kAnthropic && (!anthropic_shape || m.role != Role::kAssistant)) {
      continue;
    }
    if (anthropic_shape) {
      // Anthropic's block: its summary as text; null content is a compaction that failed.
      if (!content->is_string()) continue;
      const std::string& text = content->get_ref<const std::string&>();
      if (text.find_first_not_of(" \t\r\n") == std::string::npos) continue;  // says nothing
      found = ProviderCheckpoint{"anthropic", text};
    } else if (encrypted != j.end()) {
      // OpenAI's item: an opaque string, not blank, and a non-empty string id when it has one.
      if (!encrypted->is_string() || encrypted->get_ref<const std::string&>().find_first_not_of(
                                         " \t\r\n") == std::string::npos) {
        continue;
      }
      if (auto id = j.find("id");
          id != j.end() && (!id->is_string() || id->get_ref<const std::string&>().empty())) {
        continue;
      }
      found = ProviderCheckpoint{"openai", {}};
    }
  }
  return found;
}

}  // namespace v0
}  // namespace recap
