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
    // before it, so a malformed or ambiguous one is carried as it is and nothing more.
    // (Anthropic's block may carry `encrypted_content` beside its `content`; which provider
    // wrote a block with both is not known here, so both members alone are not refused.)
    auto content = j.find("content");
    auto encrypted = j.find("encrypted_content");
    if (content != j.end()) {
      // Anthropic's block: its summary as text; null content is a compaction that failed.
      if (!content->is_string()) continue;
      const std::string& text = content->get_ref<const std::string&>();
      if (text.find_first_not_of(" \t\r\n") == std::string::npos) continue;  // says nothing
      found = ProviderCheckpoint{"anthropic", text};
    } else if (encrypted != j.end()) {
      // OpenAI's item: an opaque, non-empty string, and a string id when it has one.
      if (!encrypted->is_string() || encrypted->get_ref<const std::string&>().empty()) continue;
      if (auto id = j.find("id"); id != j.end() && !id->is_string()) continue;
      found = ProviderCheckpoint{"openai", {}};
    }
  }
  return found;
}

}  // namespace v0
}  // namespace recap
