// Private: how recap's own code emits the events of SPEC R10.
//
// The event schema lives here and nowhere else: each event type has a builder below that takes
// typed values and returns the fields of that type, named and nested exactly as in the R10
// table and docs/events.md. The Compactor calls a builder and hands the result to
// EventEmitter::Emit, which adds the common fields ("v", "type", "session", "at") in front and
// passes the finished line to every sink. A field can therefore not be misspelled at a call
// site, and a change to the schema is a change to this file and docs/events.md.
//
// Thread safety: an EventEmitter is immutable after construction; Emit may be called from any
// number of threads at once (the sinks must be thread-safe, as events.h requires).
#ifndef RECAP_SRC_CORE_EVENTS_EVENT_EMITTER_H_
#define RECAP_SRC_CORE_EVENTS_EVENT_EMITTER_H_

#include <array>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "recap/events.h"
#include "recap/ledger.h"

#include "json/json_util.h"

namespace recap {
inline namespace v0 {
namespace internal {

// The current UTC time as RFC 3339 with milliseconds, e.g. "2026-12-02T10:34:52.123Z".
std::string NowRfc3339Millis();
// The same for a given instant (rounded down to the millisecond).
std::string FormatRfc3339Millis(std::chrono::system_clock::time_point t);

class EventEmitter {
 public:
  // Null sinks are dropped.
  explicit EventEmitter(std::vector<std::shared_ptr<EventSink>> sinks);

  // Builds {"v":1,"type":EventTypeName(type),"session":session,"at":now, ...fields} in that key
  // order and hands it to every sink in turn. A sink that throws is logged (warn) and the others
  // still get the event; Emit itself throws only std::bad_alloc. `fields` must be an object built
  // by one of the builders below; its members keep their order. Text that is not valid UTF-8 (a
  // host's session id, a provider's error message) is written with U+FFFD in its place.
  void Emit(EventType type, const std::string& session, jsonutil::Json fields) const;

  // No sinks: callers on a hot path may skip building the fields at all.
  bool empty() const noexcept { return sinks_.empty(); }

 private:
  std::vector<std::shared_ptr<EventSink>> sinks_;
};

// compaction_started: `reason` is "auto", "manual", "budget" or "overflow"; `before` is the full
// request's characters and estimated tokens.
// -> {"reason", "before": {"chars", "tokens"}}
jsonutil::Json CompactionStartedFields(std::string_view reason, std::size_t before_chars,
                                       std::size_t before_tokens);

// compaction_progress: chunk `chunk` (1-based) of `chunks` of a chunked summary is done (R4.7).
// -> {"chunk", "chunks"}
jsonutil::Json CompactionProgressFields(int chunk, int chunks);

struct CompletedPlugin {
  std::string name;    // PluginHook::Name()
  std::string report;  // AfterCompactResult::report
};

struct CompletedInfo {
  std::string reason;  // as for compaction_started
  std::size_t before_chars = 0;
  std::size_t before_tokens = 0;
  std::size_t after_chars = 0;
  std::size_t after_tokens = 0;
  std::size_t summarized_messages = 0;
  std::size_t summarized_chars = 0;
  std::size_t checkpoint_chars = 0;
  bool structured = false;  // the reply parsed as a checkpoint object (false: text-only, R4.3)
  bool partial = false;     // salvaged from a reply cut at maxOutputTokens (R5.2)
  std::string writer;       // the summarizer that wrote it: a Provider::Name(), or "offline"
  // The summarizer's own usage over every call of this compaction (chunks and fallback
  // included): never the agent's tokens.
  std::uint64_t prompt_tokens = 0;
  std::uint64_t completion_tokens = 0;
  std::size_t calls = 0;
  // One entry per plugin whose AfterCompact returned a non-empty report, in plugin order
  // (docs/events.md promises that; a failed hook is a plugin_hook_failed event instead).
  std::vector<CompletedPlugin> plugins;
  // R17.3: per ledger kind, what the span's ledger had, what the summarizer kept by itself,
  // what the guard added and what it left out for room; none when compaction.ledger is off.
  std::optional<std::array<LedgerTally, kLedgerKinds>> ledger;
};

// compaction_completed.
// -> {"reason", "before": {"chars", "tokens"}, "after": {"chars", "tokens"},
//     "summarized": {"messages", "chars"}, "checkpoint": {"chars", "structured", "partial",
//     "writer"}, "usage": {"prompt_tokens", "completion_tokens", "calls"},
//     "plugins": [{"name", "report"}],
//     "ledger": {"request"|"identifier"|"file"|"todo"|"failure":
//                {"total", "kept", "added", "left_out"}} or null (compaction.ledger off)}
jsonutil::Json CompactionCompletedFields(const CompletedInfo& info);

// compaction_skipped: "nothing_to_summarize", "no_safe_boundary", "uncertain_tool_results",
// "no_progress", "irreducible" or "summarizer_unavailable".
// -> {"reason"}
jsonutil::Json CompactionSkippedFields(std::string_view reason);

// window_unknown: the provider's context window could not be read (`error`, as the provider
// said it); the triggers use `fallback_tokens` (`fallback_rule`, e.g. "maxContextChars / 4").
// -> {"error", "fallback": {"tokens", "rule"}}
jsonutil::Json WindowUnknownFields(std::string_view error, std::size_t fallback_tokens,
                                   std::string_view fallback_rule);

// context_reduced: the reducer clipped `messages` messages; reducible characters before/after.
// -> {"messages", "before": {"chars"}, "after": {"chars"}}
jsonutil::Json ContextReducedFields(std::size_t messages, std::size_t before_chars,
                                    std::size_t after_chars);

// provider_checkpoint (R14.1): a checkpoint written by `writer` ("anthropic", "openai") arrived;
// the `messages` before it were retired from the active transcript; its characters before and
// after.
// -> {"writer", "messages", "before": {"chars"}, "after": {"chars"}}
jsonutil::Json ProviderCheckpointFields(std::string_view writer, std::size_t messages,
                                        std::size_t before_chars, std::size_t after_chars);

// tool_results_cleared (R14.3): `results` old tool results in `messages` messages were replaced
// by the marker, freeing `freed_chars` characters.
// -> {"messages", "results", "freed_chars"}
jsonutil::Json ToolResultsClearedFields(std::size_t messages, std::size_t results,
                                        std::size_t freed_chars);

// compaction_failed: `reason` as for compaction_started; `error` is the Status message.
// -> {"reason", "error"}
jsonutil::Json CompactionFailedFields(std::string_view reason, std::string_view error);

// compaction_discarded (R15.2): a background compaction (`reason` as for compaction_started) of
// `messages` messages finished, but its result was dropped unused: `why` says what changed.
// -> {"reason", "messages", "why"}
jsonutil::Json CompactionDiscardedFields(std::string_view reason, std::size_t messages,
                                         std::string_view why);

// compaction_undone (R18.3): `commit` ("compaction:3", "reduction:2") was taken back; a
// compaction's `reason`; the messages restored and retired; the transcript's characters before
// and after.
// -> {"undone", "reason", "restored_messages", "retired_messages", "before": {"chars"},
//     "after": {"chars"}}
jsonutil::Json CompactionUndoneFields(std::string_view commit, std::string_view reason,
                                      std::size_t restored, std::size_t retired,
                                      std::size_t before_chars, std::size_t after_chars);

// R15.5: `fields` (an object from a builder above) with "background": true added last.
jsonutil::Json InBackground(jsonutil::Json fields);

// plugin_hook_failed: `hook` is "beforeCompact" or "afterCompact"; `error` says what happened
// (the hook's Status, an exception's what(), a timeout, or why its output was refused).
// -> {"plugin", "hook", "error"}
jsonutil::Json PluginHookFailedFields(std::string_view plugin, std::string_view hook,
                                      std::string_view error);

}  // namespace internal
}  // namespace v0
}  // namespace recap

#endif  // RECAP_SRC_CORE_EVENTS_EVENT_EMITTER_H_
