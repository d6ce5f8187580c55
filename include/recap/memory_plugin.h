/// @file
/// recap — the built-in memory plugin (SPEC R9.3).
///
/// At each compaction it asks the summarizer, in the same call, for durable memories: facts
/// about the user and the project worth keeping across sessions ("prefers tabs", "the API
/// lives in services/api"). It stores new ones in a MemoryStore under a scope (by default one
/// scope for every session, so memories carry from one session to the next) and injects the
/// scope's memories after the checkpoint, so the model keeps them in view.
///
/// MemoryStore is the small storage interface behind it: the in-memory one here, a SQLite one
/// in the `recap::sqlite` component.
#ifndef RECAP_MEMORY_PLUGIN_H_
#define RECAP_MEMORY_PLUGIN_H_

#include <memory>
#include <string>
#include <vector>

#include "recap/export.h"
#include "recap/plugin_hook.h"
#include "recap/status.h"

namespace recap {
inline namespace v0 {

/// Thread-safe storage of memories, as plain texts, by scope.
class RECAP_EXPORT MemoryStore {
 public:
  virtual ~MemoryStore();
  /// Adds the memories not already stored in the scope (exact text match), in order.
  virtual Status Add(const std::string& scope, const std::vector<std::string>& memories) = 0;
  /// All memories of the scope, oldest first.
  virtual Result<std::vector<std::string>> List(const std::string& scope) = 0;
};

/// A MemoryStore in memory: everything is lost when the last reference goes.
RECAP_EXPORT std::shared_ptr<MemoryStore> NewInMemoryMemoryStore();

/// How NewMemoryPlugin keeps and injects memories.
struct MemoryPluginOptions {
  std::string scope = "default";  ///< where memories are kept; "" means one scope per session
  std::size_t max_memories = 50;  ///< how many of the newest are injected
};

/// Name() is "memory"; its output field is "memories" (a list of strings).
RECAP_EXPORT std::shared_ptr<PluginHook> NewMemoryPlugin(std::shared_ptr<MemoryStore> store,
                                                         MemoryPluginOptions options = {});

}  // namespace v0
}  // namespace recap

#endif  // RECAP_MEMORY_PLUGIN_H_
