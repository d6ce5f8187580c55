/// @file
/// recap — configuration (SPEC R1).
///
/// The C++ structs mirror the JSON form, whose keys and defaults are:
///
/// ```text
///   {
///     "compaction":  { "auto": true, "threshold": 0.85, "keepTurns": 2,
///                      "maxOutputTokens": 16000, "calibrate": false, "fallback": "none",
///                      "recallTool": false,
///                      "background": { "enabled": false, "startAt": 0.7, "maxWaitMs": 600000,
///                                      "workers": 4 } },
///     "limits":      { "maxContextChars": 800000 },
///     "pluginHooks": { "timeoutMs": 5000 },
///     "provider":    { "contextWindow": null }
///   }
/// ```
///
/// Every key is optional; a missing key keeps its default. A value out of range, of the wrong
/// type, or an unknown key is rejected with a Status that names the key (as a path such as
/// `compaction.threshold`), the value, and what is allowed (R1.1). docs/configuration.md
/// describes every key.
#ifndef RECAP_CONFIG_H_
#define RECAP_CONFIG_H_

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "recap/export.h"
#include "recap/status.h"

namespace recap {
inline namespace v0 {

/// What a compaction does when its summarizer call fails (compaction.fallback, R1.3).
enum class Fallback : std::uint8_t {
  kNone,     ///< a failed summarizer call fails the compaction
  kOffline,  ///< ...falls back to the offline summarizer (R1.3)
};

/// R14.3: the cheap tier before summarizing. When a trigger fires, the content of older tool
/// results is replaced by kClearedToolResultMarker — all but the newest `keep_recent` results,
/// and never those of the tools named in `exclude_tools` — if that frees at least
/// `min_free_chars` characters (each clearing costs the host its prompt cache from that point
/// on). If the request is then under the trigger, no summarizer is called. The originals stay in
/// the session's history. Off by default. JSON: `compaction.clearToolResults`, either true /
/// false or an object {"enabled", "keepRecent", "excludeTools", "minFreeChars"}.
struct ClearToolResultsConfig {
  bool enabled = false;                    ///< "enabled": clear old tool results
  int keep_recent = 3;                     ///< "keepRecent": newest results kept; 0 .. 100000
  std::vector<std::string> exclude_tools;  ///< tool names, as the calls name them
  std::size_t min_free_chars = 20000;      ///< "minFreeChars": clear only if it frees this; >= 0
};

/// What a cleared tool result holds (R14.3), exactly.
inline constexpr const char* kClearedToolResultMarker =
    "[tool result cleared to save context; the original is in the session history]";
/// With compaction.recallTool on (R18.2), the marker names the message to ask for instead:
/// kClearedToolResultRecallMarker followed by the message id and `"\"]}]"`.
inline constexpr const char* kClearedToolResultRecallMarker =
    "[tool result cleared to save context; to see it again, call recap_recall with {\"ids\": [\"";

/// R15: background compaction. When the full request reaches `start_at` x the trigger,
/// Prepare hands a snapshot of the span before a safe cut to a worker thread and returns at once
/// with the whole transcript; the next Prepare after the checkpoint is ready swaps it in (one
/// transaction replacing exactly that span; what was appended meanwhile follows it). While it
/// runs, a Prepare waits for it only when the request would otherwise reach the context window
/// or limits.maxContextChars (or an overflow was reported), and then at most `max_wait_ms`.
/// The compactions run on at most `workers` threads of the Compactor's own, started when first
/// needed; one more is started for a Prepare that must wait for a compaction no worker has
/// taken yet. Off by default. JSON: `compaction.background`, either true / false or an object
/// {"enabled", "startAt", "maxWaitMs", "workers"}.
struct BackgroundConfig {
  bool enabled = false;              ///< "enabled": compact in the background
  double start_at = 0.7;             ///< "startAt": 0.1 .. 1, a fraction of the trigger
  std::size_t max_wait_ms = 600000;  ///< "maxWaitMs": >= 1; the HTTP provider's default time-out
  int workers = 4;                   ///< "workers": 1 .. 64
};

/// R17: the ledger of every compaction and its guard. When enabled, recap reads each span's
/// must-keep artifacts (recap/ledger.h), tells the summarizer about them, and adds to the
/// checkpoint, in a "Kept by recap" section, whatever the summarizer left out. `max_chars`
/// bounds that section; the Compactor also keeps it within a quarter of the checkpoint's own
/// cap (half the compaction trigger, R12.7), so a small window never fills with it. Over its
/// budget, the oldest entries of the least important kinds go first and the section says how
/// many were left out and from which messages. JSON: `compaction.ledger`, either true / false
/// or an object {"enabled", "maxChars"}.
struct LedgerConfig {
  bool enabled = true;           ///< "enabled": build the ledger and guard the checkpoint
  std::size_t max_chars = 8000;  ///< "maxChars": the "Kept by recap" section's bound; >= 200
};

/// When and how to compact: the JSON object `compaction` (docs/configuration.md).
struct CompactionConfig {
  bool auto_compact = true;               ///< "auto": Prepare compacts when a trigger fires
  double threshold = 0.85;                ///< "threshold": the trigger's fraction; 0.1 .. 0.99
  int keep_turns = 2;                     ///< "keepTurns": turns kept verbatim; 0 .. 20
  std::size_t max_output_tokens = 16000;  ///< "maxOutputTokens": the summarizer's; >= 1
  bool calibrate = false;                 ///< "calibrate": use reported prompt tokens (R2.4)
  Fallback fallback = Fallback::kNone;    ///< "fallback": "none" or "offline" (R1.3)
  /// How much of the session's instructions (a leading system message, R12.1) the summarizer
  /// is shown, in characters; 0 shows none.
  std::size_t instructions_for_summarizer_chars = 8000;
  /// The most one compaction may send to the summarizer, in estimated tokens (characters / 4)
  /// over all its requests; null = no limit. Over it, the newest part of the span is sent in
  /// full and older parts are shortened harder, never dropped without a trace (R4.7).
  std::optional<std::size_t> max_summarizer_input_tokens;  ///< >= 1000, or null
  ClearToolResultsConfig clear_tool_results;               ///< "clearToolResults" (R14.3)
  BackgroundConfig background;                             ///< "background" (R15)
  LedgerConfig ledger;                                     ///< "ledger" (R17)
  /// R18.2: the host offers the model the recap_recall tool (RecallTool in its catalog, calls
  /// answered with Compactor::AnswerRecall). Then each compaction adds a line after the
  /// checkpoint saying which messages it summarized and that recap_recall gets them back, the
  /// ledger's "left out" line says so too, and a cleared tool result's marker names its message
  /// id to ask for. Off: nothing mentions a tool the model may not have.
  bool recall_tool = false;  ///< "recallTool"
};

/// The hard limit: the JSON object `limits`.
struct LimitsConfig {
  /// "maxContextChars": the most characters of instructions and transcript a request may
  /// carry (R6); >= 4000.
  std::size_t max_context_chars = 800000;
};

/// The plugin hooks' time limit: the JSON object `pluginHooks` (R9.2).
struct PluginHooksConfig {
  std::size_t timeout_ms = 5000;  ///< "timeoutMs": the most one hook call may take; >= 1
};

/// R12.6: the Compactor keeps each session it serves in memory between calls (its measured
/// transcript and what it learned); past this many bytes (an estimate of the transcripts'
/// memory) it drops the sessions used least recently. A dropped session is loaded from the
/// store again when it comes back.
struct CacheConfig {
  std::size_t max_bytes = std::size_t{512} << 20;  ///< "maxBytes": >= 0
};

/// What recap is told of the model: the JSON object `provider`.
struct ProviderConfig {
  /// "contextWindow": the model's context window in tokens; null = ask the provider (R1.2).
  std::optional<std::size_t> context_window;
};

/// The most Config::FromFile reads by default: 1 MiB. A configuration is a few hundred bytes;
/// a file near this size is the wrong file (a log, a device, a pipe that never ends).
inline constexpr std::size_t kMaxConfigFileBytes = std::size_t{1} << 20;

/// A Compactor's whole configuration: the JSON form (see above) as C++ structs.
struct RECAP_EXPORT Config {
  CompactionConfig compaction;     ///< "compaction"
  LimitsConfig limits;             ///< "limits"
  PluginHooksConfig plugin_hooks;  ///< "pluginHooks"
  ProviderConfig provider;         ///< "provider"
  CacheConfig cache;               ///< "cache" (R12.6)

  /// Parses the JSON form. An empty object gives the defaults.
  static Result<Config> FromJson(std::string_view json);
  /// Reads the configuration file at `path` and parses it with FromJson. At most `max_bytes`
  /// are read, plus one to tell that there is more: a larger file, or an endless stream such as
  /// /dev/urandom or a pipe, is refused (InvalidArgument) without reading further. A file that
  /// cannot be opened is NotFound, a failed read IOError, a directory InvalidArgument. Every
  /// message names the file.
  static Result<Config> FromFile(const std::string& path,
                                 std::size_t max_bytes = kMaxConfigFileBytes);
  /// Checks the ranges of R1.1 (for configs built in C++).
  Status Validate() const;
  /// The JSON form, every key written.
  std::string ToJson() const;
};

/// A context window above this many tokens is not trusted (R1.2).
inline constexpr std::size_t kMaxTrustedContextWindow = 2000000;

}  // namespace v0
}  // namespace recap

#endif  // RECAP_CONFIG_H_
