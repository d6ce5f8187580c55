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
    auto content = j.find("content");
    if (content != j.end()) {
      // Anthropic's block: its summary as text; null content is a compaction that failed.
      if (!content->is_string()) continue;
      found = ProviderCheckpoint{"anthropic", content->get<std::string>()};
    } else if (j.contains("encrypted_content")) {
      found = ProviderCheckpoint{"openai", {}};
    }
  }
  return found;
}

}  // namespace v0
}  // namespace recap
