// Private: runs plugin hooks under a time limit and checks what they return (SPEC R9.2).
//
// Each hook call runs on a thread of its own. The caller waits at most `timeout`; a hook
// still running then is cancelled (its token) and abandoned: its thread is detached and keeps
// only shared ownership of its inputs, the plugin and its result slot, so whenever it returns
// it touches nothing the caller has freed. Exceptions of any type are caught on the hook's
// thread. A result that fails the checks below is garbage and the plugin is left out.
//
// Plugins run one after another, each with its own limit, so a compaction with k plugins
// waits at most k × timeout per hook kind, and the order of failures and results is the order
// of `plugins` (deterministic events).
//
// Every HookFailure::error is a whole sentence naming the plugin and the hook and ending in
// "; compaction continues without it", ready for the `plugin_hook_failed` event.
#ifndef RECAP_SRC_CORE_PLUGINS_PLUGIN_RUNNER_H_
#define RECAP_SRC_CORE_PLUGINS_PLUGIN_RUNNER_H_

#include <chrono>
#include <cstddef>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "recap/plugin_hook.h"

namespace recap {
inline namespace v0 {
namespace internal {

// Limits on what one hook may return; above them the result counts as garbage.
inline constexpr std::size_t kMaxPluginTextChars = 100000;  // instructions, context, report…
inline constexpr std::size_t kMaxPluginOutputFields = 32;   // output fields of one plugin
inline constexpr std::size_t kMaxFieldNameLength = 64;

struct HookFailure {
  std::string plugin;
  std::string hook;   // "beforeCompact" | "afterCompact"
  std::string error;  // a whole sentence, see above
};

struct PluginRequest {
  std::string plugin;
  BeforeCompactResult request;
};

struct BeforeCompactRun {
  std::vector<PluginRequest> ok;
  std::vector<HookFailure> failures;
};

// Runs BeforeCompact of every plugin. A request is accepted when its instructions and field
// descriptions are valid UTF-8 within kMaxPluginTextChars, it has at most
// kMaxPluginOutputFields fields, every field name matches ^[A-Za-z_][A-Za-z0-9_]{0,63}$ and is
// neither a checkpoint field (R4.1) nor a field of this or an earlier accepted plugin, and
// every json_schema is empty or a JSON object. A plugin whose name an earlier plugin already
// has is a failure too: names select fields and must be unique.
BeforeCompactRun RunBeforeCompact(const std::vector<std::shared_ptr<PluginHook>>& plugins,
                                  const BeforeCompactContext& context,
                                  std::chrono::milliseconds timeout);

struct PluginReport {
  std::string plugin;
  AfterCompactResult result;
};

struct AfterCompactRun {
  std::vector<PluginReport> ok;
  std::vector<HookFailure> failures;
};

// Runs AfterCompact of each plugin in `plugins` whose name is in `participating` (those whose
// BeforeCompact succeeded), giving each only its own fields (fields_by_plugin[name]). A
// result is accepted when inject_context and report are valid UTF-8 within
// kMaxPluginTextChars.
AfterCompactRun RunAfterCompact(
    const std::vector<std::shared_ptr<PluginHook>>& plugins,
    const std::vector<std::string>& participating, const AfterCompactContext& base_context,
    const std::map<std::string, std::map<std::string, std::string>>& fields_by_plugin,
    std::chrono::milliseconds timeout);

// True for a name matching ^[A-Za-z_][A-Za-z0-9_]{0,63}$.
bool IsPlainFieldName(const std::string& name) noexcept;

}  // namespace internal
}  // namespace v0
}  // namespace recap

#endif  // RECAP_SRC_CORE_PLUGINS_PLUGIN_RUNNER_H_
