/// @file
/// recap — events: what recap did, as it happens (SPEC R10).
///
/// Every event is one JSON object with "v": 1, "type", "session" and "at" (UTC, RFC 3339 with
/// milliseconds) and the fields of its type; docs/events.md lists them all with an example.
///
/// ```text
///   compaction_started    compaction_progress   compaction_completed
///   compaction_skipped    context_reduced       compaction_failed     plugin_hook_failed
///   window_unknown
/// ```
///
/// The summarizer's token usage travels in its own field ("usage" of compaction_completed),
/// so a host can keep compaction's tokens out of its agent's budget.
///
/// Events go to any number of sinks. A sink is called synchronously on the thread that runs
/// Prepare or Compact, in the order events happen; it should be quick. An exception thrown by
/// a sink is caught and logged, and never interrupts recap's work.
///
/// Thread safety: one sink may be called from several threads (several sessions at once);
/// implementations must be thread-safe. NewJsonlSink's sinks are.
#ifndef RECAP_EVENTS_H_
#define RECAP_EVENTS_H_

#include <cstdint>
#include <memory>
#include <ostream>
#include <string>

#include "recap/export.h"
#include "recap/status.h"

namespace recap {
inline namespace v0 {

/// The event types (R10, window_unknown of R12.2, provider_checkpoint and tool_results_cleared of
/// R14), one table: EventTypeName gives the text of an event's "type" (for instance,
/// EventTypeName(EventType::kCompactionCompleted) is "compaction_completed"). A host comparing
/// Event::type compares with these names.
enum class EventType : std::uint8_t {
  kCompactionStarted,    ///< a compaction begins: a safe cut was found, the summarizer is next
  kCompactionProgress,   ///< R4.7: one chunk of a chunked summary is done
  kCompactionCompleted,  ///< the compaction committed its checkpoint
  kCompactionSkipped,    ///< a compaction was due or asked for but could do nothing
  kContextReduced,       ///< R6: the tail reducer clipped kept content, and that was committed
  kCompactionFailed,     ///< R7.1: a compaction that had started did not commit; nothing changed
  kPluginHookFailed,     ///< R9.2: a plugin hook failed; the compaction went on without it
  kWindowUnknown,        ///< R12.2: no context window is known; the fallback window is used
  kProviderCheckpoint,   ///< R14.1: a provider's own checkpoint arrived; what precedes it retired
  kToolResultsCleared,   ///< R14.3: old tool results cleared instead of (or before) summarizing
  kCompactionDiscarded,  ///< R15.2: a background compaction's result dropped, the session changed
  kCompactionUndone,     ///< R18.3: Compactor::Uncompact took back a compaction, clearing or clip
};
/// The text of an event's "type" for `type`, e.g. "compaction_completed".
RECAP_EXPORT const char* EventTypeName(EventType type) noexcept;

/// One event, as an EventSink receives it.
struct Event {
  std::string type;     ///< EventTypeName of its type, e.g. "compaction_completed"
  std::string session;  ///< the session it concerns
  std::string json;     ///< the whole event as one line of JSON (no newline)
};

/// Where events go; give the Compactor any number of them (Compactor::Create). Thread safety:
/// see above.
class RECAP_EXPORT EventSink {
 public:
  virtual ~EventSink();
  /// Called with each event, synchronously, in the order events happen; should be quick.
  virtual void OnEvent(const Event& event) = 0;
};

/// Writes each event as one line to `out`, flushing after each. `out` must outlive the sink.
RECAP_EXPORT std::shared_ptr<EventSink> NewJsonlSink(std::ostream& out);

/// Appends each event as one line to the file at `path` (created if missing).
RECAP_EXPORT Result<std::shared_ptr<EventSink>> NewJsonlFileSink(const std::string& path);

}  // namespace v0
}  // namespace recap

#endif  // RECAP_EVENTS_H_
