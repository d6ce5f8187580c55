/// @file
/// recap — PluginHook: extending a compaction (SPEC R9).
///
/// A plugin takes part in every compaction through two hooks:
///
///  * BeforeCompact runs before the summarizer call. It may add instructions and extra output
///    fields to that same call (one model call serves recap and every plugin).
///  * AfterCompact runs after the checkpoint exists, and receives it together with the values
///    the summarizer wrote into the plugin's own fields. It may return context to inject
///    after the checkpoint (it enters the transcript as a user message) and a short report
///    that the completion event carries.
///
/// Both have no-op defaults: override what you need.
///
/// Every hook call runs under `pluginHooks.timeoutMs` on a thread of its own. A hook that
/// returns a non-OK Status, throws, exceeds the limit, or returns garbage (an output field
/// whose name is not a plain identifier or collides with a checkpoint field, a schema that is
/// not JSON, invalid UTF-8) is reported as `plugin_hook_failed` and the compaction goes on
/// without it (R9.2). A hook past its limit is abandoned, not killed: it keeps running on its
/// own thread until it returns, holding its own copies of its inputs and a reference to the
/// plugin, so it never touches memory recap has freed. Plugins must therefore be thread-safe
/// and should honour `cancel`, which is cancelled when the hook is abandoned.
#ifndef RECAP_PLUGIN_HOOK_H_
#define RECAP_PLUGIN_HOOK_H_

#include <map>
#include <string>
#include <vector>

#include "recap/cancellation.h"
#include "recap/checkpoint.h"
#include "recap/export.h"
#include "recap/status.h"

namespace recap {
inline namespace v0 {

/// What PluginHook::BeforeCompact is told.
struct BeforeCompactContext {
  std::string session;       ///< the session being compacted
  std::string reason;        ///< "auto", "manual", "budget", "overflow"
  std::size_t messages = 0;  ///< how many messages will be summarized
  std::size_t chars = 0;     ///< and their characters
};

/// What PluginHook::BeforeCompact adds to the summarizer call.
struct BeforeCompactResult {
  std::string instructions;                ///< added to the summarizer's instructions
  std::vector<OutputField> output_fields;  ///< added to the reply's schema
};

/// What PluginHook::AfterCompact is told.
struct AfterCompactContext {
  std::string session;                        ///< the session compacted
  std::string reason;                         ///< "auto", "manual", "budget", "overflow"
  Checkpoint checkpoint;                      ///< the checkpoint written
  std::map<std::string, std::string> fields;  ///< this plugin's fields: name -> JSON text
};

/// What PluginHook::AfterCompact returns.
struct AfterCompactResult {
  std::string inject_context;  ///< empty: nothing injected
  std::string report;          ///< empty: no report
};

/// A plugin taking part in every compaction through two hooks (see above).
class RECAP_EXPORT PluginHook {
 public:
  virtual ~PluginHook();

  /// A stable, short name: it appears in events and selects the plugin's fields.
  virtual std::string Name() const = 0;

  /// Runs before the summarizer call; may add instructions and output fields to it. The
  /// default adds nothing.
  virtual Result<BeforeCompactResult> BeforeCompact(const BeforeCompactContext& context,
                                                    const CancellationToken& cancel);
  /// Runs once the checkpoint exists; may return context to inject after it and a report for
  /// the completion event. The default returns neither.
  virtual Result<AfterCompactResult> AfterCompact(const AfterCompactContext& context,
                                                  const CancellationToken& cancel);
};

}  // namespace v0
}  // namespace recap

#endif  // RECAP_PLUGIN_HOOK_H_
