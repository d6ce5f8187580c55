/// @file
/// recap — the Compactor: keeps each session's conversation inside the model's context window.
///
/// A host calls Prepare once per turn, right before each model request, and sends what it
/// returns. Prepare does, in this order (SPEC R7):
///
///   1. If a trigger of R2 fires (and compaction.auto is on): compact — the older part of the
///      transcript is summarized into a checkpoint by one summarizer call (several for a very
///      long span), the recent turns are kept verbatim (R3), and the result is committed to
///      the SessionStore in one transaction.
///   2. If the conversation (instructions + transcript) is over limits.maxContextChars:
///      reduce — clip oversized content in what was kept (R6) and commit that.
///   3. Still over: once per turn, compact with reason "budget" (cutting inside the last turn)
///      and reduce again.
///   4. Still over: fail with StatusCode::kContextBudgetExceeded and a message that says how
///      big the conversation is, what compaction did, and what the host can do.
///
/// A failed compaction changes nothing, is reported as `compaction_failed`, and Prepare goes
/// on to step 2 (R7.1). Each step is reported as an event (events.h).
///
/// Cost: when there is nothing to do, Prepare costs what was appended since the previous call
/// (the Compactor keeps each session's measured transcript and asks the store only for
/// changes), and what it returns shares the messages instead of copying them.
///
/// Thread safety: all methods may be called from any thread. Calls for the same session are
/// serialized; calls for different sessions run in parallel.
///
/// Background compaction (compaction.background, SPEC R15): when the request reaches startAt x
/// the trigger, Prepare hands the span before a safe cut to one of the Compactor's worker
/// threads (compaction.background.workers, 4 by default, started when first needed) and returns
/// at once; the worker swaps the checkpoint in when it is ready (the next Prepare reports it).
/// The summarizer, the plugin hooks and the event sinks are then called from a worker thread too,
/// and the session store for the swap. At most one compaction per session runs at a time.
/// Destroying the Compactor cancels the background compactions and joins the workers (it waits
/// for a summarizer that ignores its cancellation token).
#ifndef RECAP_COMPACTOR_H_
#define RECAP_COMPACTOR_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "recap/cancellation.h"
#include "recap/checkpoint.h"
#include "recap/config.h"
#include "recap/events.h"
#include "recap/export.h"
#include "recap/ledger.h"
#include "recap/plugin_hook.h"
#include "recap/provider.h"
#include "recap/recall.h"
#include "recap/safe_boundary.h"
#include "recap/session_store.h"
#include "recap/status.h"
#include "recap/time_source.h"
#include "recap/transcript.h"

namespace recap {
inline namespace v0 {

/// What the host sends besides the transcript, measured in characters (SPEC §1): the system
/// instructions and the serialized tool catalog. The catalog counts for the triggers of R2
/// (they protect what the model sees) but never for the hard limit (it cannot be reduced).
struct RequestSizes {
  std::size_t instructions_chars = 0;  ///< the system instructions the host sends
  std::size_t tool_catalog_chars = 0;  ///< the serialized tool catalog the host sends
  /// A context window the host knows from its own model profile (R1.2); used when the
  /// configuration names none.
  std::optional<std::size_t> profile_context_window;
};

/// Why a compaction ran: a trigger of R2 (kAuto), an overflow report (kOverflow, R2.6), the
/// budget compaction of R7 step 3 (kBudget), or the host's Compact call (kManual, R4.6).
enum class CompactionReason : std::uint8_t { kAuto, kManual, kBudget, kOverflow };
/// "auto", "manual", "budget", "overflow": the `reason` of the compaction events, of
/// CompactionCommit and of the plugins' contexts.
RECAP_EXPORT const char* CompactionReasonName(CompactionReason reason) noexcept;

/// What Compactor::Prepare returns: what to send, and what the call did to get there.
struct Prepared {
  /// What to send after the instructions; shares the store's messages.
  Transcript messages;
  std::uint64_t version = 0;      ///< the session version `messages` reflects
  std::size_t before_chars = 0;   ///< reducible content (instructions + transcript) before
  std::size_t after_chars = 0;    ///< reducible content after
  std::size_t before_tokens = 0;  ///< estimated tokens of the full request before
  std::size_t after_tokens = 0;   ///< estimated tokens of the full request after
  std::vector<CompactionReason> compactions;  ///< the compactions that committed, in order
  std::size_t reduced_messages = 0;           ///< messages the reducer cut (0: it did not run)
  /// What the compactions of this call cost, without an event sink (the agent's own model
  /// calls never count here): messages summarized (and retired from the active transcript).
  std::size_t summarized_messages = 0;
  /// Requests to the summarizer (a failed compaction counts one; a chunked one, one per chunk;
  /// the offline fallback, one more).
  std::size_t summarizer_calls = 0;
  /// The tokens the summarizer reported for those requests.
  Usage summarizer_usage;
  /// R14.3: messages whose old tool results were cleared (compaction.clearToolResults).
  std::size_t cleared_tool_result_messages = 0;
  /// R14.1: messages retired because a provider's own checkpoint (Anthropic's `compaction`
  /// block, OpenAI's `compaction` item) arrived after them; the event provider_checkpoint says
  /// the same.
  std::size_t provider_retired_messages = 0;

  /// R15, with compaction.background on: this call handed a compaction to a worker and
  /// returned without waiting for it.
  bool background_started = false;
  /// The checkpoint a background compaction wrote was committed since the last Prepare, by its
  /// worker or by this call (its reason is in `compactions`, its cost in the figures above,
  /// `before_*` the sizes without it).
  bool background_swapped = false;
  /// Such a result was dropped because the session had changed (event compaction_discarded).
  bool background_discarded = false;
  /// A background compaction of the session still runs as this call returns.
  bool background_in_flight = false;
  /// How long this call waited for one (it waits only when the request would otherwise reach
  /// the window or the hard limit).
  std::uint64_t background_wait_ms = 0;
  /// This call waited for a summarizer: it ran one itself or waited for a background one.
  bool waited_for_summarizer = false;

  /// The window the triggers used (R1.2, R12.2), when known.
  std::optional<std::size_t> window_tokens;
  /// Where the window came from: "config", "profile", "provider", "overflow" (lowered by
  /// ReportOverflow), or "fallback" when none is known (the window is then
  /// fallback_window_tokens, and the event `window_unknown` said why, once for the session).
  std::string window_source;
  /// The window the triggers use when none is known: maxContextChars / 4.
  std::size_t fallback_window_tokens = 0;
  /// The rule of R2 that fired at the start of this call ("window", "fallback", "chars",
  /// "overflow"), or empty when none did.
  std::string trigger_rule;
  /// The request goes out larger than the known window: after_tokens (the estimate of
  /// instructions, transcript and tool catalog) exceeds window_tokens (never the fallback),
  /// after everything this call did — because the instructions and tool catalog alone reach it
  /// (R12.4), a compaction failed or was skipped, or limits.maxContextChars is above the window.
  /// The model is likely to refuse it: shorten the instructions or the tool catalog, fix the
  /// summarizer, or use a larger window. Recap's log says it too (a warning).
  bool over_window = false;
  /// The call ids of tool results in `messages` whose call does not come before them (a result
  /// appended without its call): the model APIs refuse such a request. recap never makes one —
  /// compaction keeps each call with its result — so these came in with the session's
  /// messages; the store keeps them as appended. Empty when every result has its call. Recap's
  /// log says it too (a warning).
  std::vector<std::string> orphan_results;
};

/// What Prepare would do now, without calling the model or writing anything (R7.3).
struct Plan {
  bool trigger = false;                    ///< a rule of R2 fires (or an overflow was reported)
  std::optional<CompactionReason> reason;  ///< kAuto or kOverflow when trigger; none otherwise
  std::string rule;          ///< which rule fired: "window", "fallback", "chars", "overflow"
  bool paused = false;       ///< auto compaction is paused for lack of progress (R2.5)
  bool auto_enabled = true;  ///< compaction.auto is on
  std::optional<std::size_t> window_tokens;  ///< the trusted window in use, if any (R1.2)
  std::string window_source;  ///< "config", "profile", "provider", "overflow" or "fallback" (R12.2)
  /// Instructions and tool catalog alone reach the trigger: compaction cannot help, and
  /// Prepare does not attempt it (R12.4; the hard limit of R6 still applies).
  bool irreducible = false;
  /// The summarizer failed 3 auto compactions in a row: Prepare leaves it alone for this long
  /// still (R12.3); 0 when it is not backing off.
  std::uint64_t summarizer_backoff_ms = 0;
  std::size_t full_chars = 0;             ///< instructions + transcript + tool catalog
  std::size_t full_tokens = 0;            ///< the same in estimated tokens
  std::size_t reducible_chars = 0;        ///< instructions + transcript
  std::size_t trigger_tokens = 0;         ///< threshold x window (the fallback window when unknown)
  std::size_t trigger_chars = 0;          ///< threshold x maxContextChars
  CutDecision cut;                        ///< where a compaction would cut now
  std::size_t estimated_after_chars = 0;  ///< reducible content after it, checkpoint estimated
  bool would_reduce = false;              ///< over the hard limit even after the compaction
  /// R14.1: messages Prepare would retire first because a provider's own checkpoint arrived
  /// after them; the sizes above already count without them.
  std::size_t provider_retired_messages = 0;
  /// R14.3, with compaction.clearToolResults on: what clearing old tool results would do now —
  /// the results it would clear.
  std::size_t clearable_results = 0;
  std::size_t clearable_messages = 0;  ///< the messages holding them
  std::size_t clearable_chars = 0;     ///< the characters it would free
  /// Whether Prepare would clear them (a trigger fires and it frees at least minFreeChars).
  bool would_clear = false;
  /// And whether that alone would bring the request under the trigger, so that no summarizer
  /// is called.
  bool clearing_suffices = false;
  /// R15, with compaction.background on: the size at which Prepare starts a compaction in the
  /// background (startAt x the trigger), in estimated tokens.
  std::size_t background_start_tokens = 0;
  std::size_t background_start_chars = 0;  ///< the same in characters
  bool background_reached = false;         ///< the request has reached it
  /// A compaction of this session runs in the background now. Only this Compactor's own are
  /// seen: `recap plan`, a process of its own, never has one.
  bool background_in_flight = false;
  /// A background compaction of this session finished and was not swapped in by its worker (a
  /// call held the session, or the store could not be read); the next Prepare swaps it in.
  bool background_ready = false;
  /// R17.3, with compaction.ledger on: the ledger a compaction now would guard — the must-keep
  /// artifacts of the span it would summarize, after what the checkpoint it would replace
  /// carried (recap/ledger.h). Empty when nothing would be cut.
  Ledger ledger;
};

/// What a manual compaction (Compactor::Compact) is given.
struct CompactOptions {
  std::string focus;   ///< added to the summarizer's instructions (R4.6)
  RequestSizes sizes;  ///< what the host sends besides the transcript, as for Prepare
};

/// What Compactor::Compact did.
struct CompactOutcome {
  bool compacted = false;                  ///< a compaction committed
  SkipReason skipped = SkipReason::kNone;  ///< why not, when !compacted
  std::size_t summarized_messages = 0;     ///< messages the checkpoint replaced
  std::size_t before_chars = 0;            ///< transcript characters before
  std::size_t after_chars = 0;             ///< transcript characters after
  Checkpoint checkpoint;                   ///< the checkpoint written
  bool partial = false;                    ///< R5.2: salvaged from a cut reply
  std::string writer;                      ///< the provider that wrote the checkpoint (R1.3)
  std::uint64_t version = 0;               ///< the session's version afterwards
  /// R14.1: messages retired first because a provider's own checkpoint arrived after them.
  std::size_t provider_retired_messages = 0;
};

/// What Uncompact took back (R18.3).
struct UncompactOutcome {
  bool undone = false;  ///< false: nothing left to undo (nothing changed)
  std::string commit;   ///< "compaction:<n>" or "reduction:<n>" (a clearing or the reducer's clip)
  std::string reason;   ///< a compaction's reason ("auto", "manual", …)
  std::size_t restored_messages = 0;  ///< active again
  std::size_t retired_messages = 0;   ///< the checkpoint and what it injected, or reduced copies
  std::size_t before_chars = 0;       ///< the transcript's characters before
  std::size_t after_chars = 0;        ///< the transcript's characters after
  std::uint64_t version = 0;          ///< the session's version afterwards
};

/// What Compactor::Recover recorded.
struct RecoveryOutcome {
  std::vector<UncertainCall> recovered;  ///< the calls whose missing results were recorded
  std::uint64_t version = 0;             ///< the session's version afterwards
};

/// Keeps each session's conversation inside the model's context window (see above).
class RECAP_EXPORT Compactor {
 public:
  /// Creates a Compactor. `provider` writes checkpoints; null means recap's offline summarizer.
  /// `store` holds the sessions; null means a new in-memory store. `plugins` take part in every
  /// compaction (plugin_hook.h); `sinks` receive the events (events.h). Fails when `config` is
  /// out of range. `time` times the back-offs of R12.2 and R12.3; null means the machine's
  /// monotonic clock (SteadyTimeSource()).
  static Result<std::unique_ptr<Compactor>> Create(
      Config config, std::shared_ptr<Provider> provider, std::shared_ptr<SessionStore> store,
      std::vector<std::shared_ptr<PluginHook>> plugins = {},
      std::vector<std::shared_ptr<EventSink>> sinks = {},
      std::shared_ptr<TimeSource> time = nullptr);

  ~Compactor();
  Compactor(const Compactor&) = delete;
  Compactor& operator=(const Compactor&) = delete;

  /// The per-turn call (see above).
  Result<Prepared> Prepare(const std::string& session, const RequestSizes& sizes,
                           const CancellationToken& cancel = {});

  /// What Prepare would do now (R7.3). Reads the store; never writes or calls the model.
  Result<Plan> PlanFor(const std::string& session, const RequestSizes& sizes);

  /// A manual compaction with optional focus (R4.6). Runs whether or not compaction.auto is
  /// on; skips (compacted == false) when there is nothing to summarize.
  Result<CompactOutcome> Compact(const std::string& session, const CompactOptions& options = {},
                                 const CancellationToken& cancel = {});

  /// The model rejected the last request for this session as too long (R2.6). The next
  /// Prepare treats the trigger as reached (reason "overflow") and, from now on, the window
  /// is taken as at most `rejected_tokens` — by default the estimate of the last request
  /// Prepare returned.
  void ReportOverflow(const std::string& session,
                      std::optional<std::size_t> rejected_tokens = std::nullopt);

  /// The provider's count of prompt tokens for the last request of this session (R2.4). With
  /// compaction.calibrate on, the window rule uses it plus the estimate of what was added. A
  /// count reported after the transcript was rewritten since the last Prepare (a background
  /// compaction swapped in, a manual compaction, another writer) is ignored: the request it
  /// counted is gone.
  void ReportPromptTokens(const std::string& session, std::size_t prompt_tokens);

  /// Records, for each tool call without a result, that its outcome is unknown and it was not
  /// repeated (R8.3). Refuses with kFailedPrecondition unless `acknowledge` is true, saying
  /// which calls are uncertain. recap never re-runs a tool.
  Result<RecoveryOutcome> Recover(const std::string& session, bool acknowledge);

  /// R18.1: the originals in the session's history that match `query` (recap/recall.h), best
  /// first, cut to its budget. Changes no message; the SQLite store may write its recall index
  /// first (the messages stored since its last search, one transaction). Works with every store
  /// (one without an index of its own is scanned).
  Result<Recalled> Recall(const std::string& session, const RecallQuery& query);

  /// R18.2: the tool result that answers the model's `recap_recall` call, to append to the
  /// session like any tool result: a `tool` message (OpenAI chat and Responses) or a user message
  /// carrying the result (Anthropic), by `format`. Arguments the model got wrong are answered with
  /// an error result that says how to call the tool, so the model can try again. kInvalidArgument
  /// when `call` is not a recap_recall call; the store's error when it cannot be read.
  Result<Message> AnswerRecall(const std::string& session, const ToolCall& call,
                               ToolFormat format = ToolFormat::kOpenAIChat);

  /// R18.3: restores the active transcript as it was before the session's newest compaction,
  /// clearing or reduction not undone yet, in one transaction of the store: the checkpoint and
  /// what it injected (or the reduced copies) retired to the history as "undo:<n>", the originals
  /// active again in their places, messages appended since after them. A second call undoes the
  /// one before. A compaction of the session running in the background is cancelled first. The
  /// event compaction_undone says what was undone. undone == false when nothing is left to undo.
  /// Note that the next Prepare compacts again when the restored transcript is over the trigger:
  /// a host that wants it to stay turns compaction.auto off or raises the limits first.
  /// kFailedPrecondition when the store cannot undo (SessionStore::CommitUndo); kNotFound for a
  /// session never written.
  Result<UncompactOutcome> Uncompact(const std::string& session);

  /// The configuration it was created with.
  const Config& config() const noexcept;
  /// The store it keeps the sessions in: the one given to Create, or its in-memory one. A host
  /// appends each turn's messages here (SessionStore::Append) before calling Prepare.
  SessionStore& store() noexcept;

  /// What the per-session cache holds now (R12.6): sessions, their estimated bytes, the budget
  /// (cache.maxBytes). The most recently used session stays even when it alone is larger.
  struct CacheStats {
    std::size_t sessions = 0;   ///< sessions held
    std::size_t bytes = 0;      ///< their estimated bytes
    std::size_t max_bytes = 0;  ///< the budget, cache.maxBytes
  };
  /// What the per-session cache holds now (CacheStats).
  CacheStats cache_stats() const;

 private:
  struct Impl;
  explicit Compactor(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace v0
}  // namespace recap

#endif  // RECAP_COMPACTOR_H_
