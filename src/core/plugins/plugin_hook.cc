// PluginHook's defaults: a plugin that overrides nothing takes part in no compaction.
#include "recap/plugin_hook.h"

namespace recap {
inline namespace v0 {

PluginHook::~PluginHook() = default;

Result<BeforeCompactResult> PluginHook::BeforeCompact(const BeforeCompactContext& /*context*/,
                                                      const CancellationToken& /*cancel*/) {
  return BeforeCompactResult{};
}

Result<AfterCompactResult> PluginHook::AfterCompact(const AfterCompactContext& /*context*/,
                                                    const CancellationToken& /*cancel*/) {
  return AfterCompactResult{};
}

}  // namespace v0
}  // namespace recap
