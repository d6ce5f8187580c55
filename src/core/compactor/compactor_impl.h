// The Compactor's private state (Compactor::Impl): declarations only. Its parts that are shared
// by every session and provide their own synchronization are classes of their own — the
// session table (session_table.h), the window source (window_source.h), the summarizer's
// breaker (summarizer_breaker.h) and the background queue (background_queue.h); one session's
// state is its SessionCache (session_cache.h), guarded by that cache's own lock. The methods are
// defined by topic:
//
//   compactor.cc     the public methods; Prepare in the order of R7 (PrepareOnce and its steps)
//   sync.cc          the cache and the store: Sync, SaveLearned
//   triggers.cc      R2 evaluated into a Plan, the window (R1.2, R12.2), the sizes a compaction
//                    may use (kept part, checkpoint, summarizer request)
//   compaction.cc    one compaction: Begin, SummarizeJob, Finish (compaction_job.h)
//   background.cc    background compaction (R15) on the queue's workers
//   budget.cc        the reduction of R6 and the budget error of R7
//   clear_tool_results.cc, retire_before_provider_checkpoint.cc   R14.3, R14.1
//
// Locking: a call of the public API holds its session's SessionCache::mu for its whole length
// (that serializes the calls of one session); the shared parts take their own locks briefly and
// never while calling out, except the window source, which holds its lock while it asks the
// provider. No lock is held while another session's lock is taken. Nothing here is called
// back from a summarizer, plugin hook or event sink (CallScope refuses such calls).
#ifndef RECAP_SRC_CORE_COMPACTOR_COMPACTOR_IMPL_H_
#define RECAP_SRC_CORE_COMPACTOR_COMPACTOR_IMPL_H_

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "recap/compactor.h"
#include "recap/measure.h"
#include "recap/offline_summarizer.h"
#include "recap/tail_reducer.h"

#include "compactor/background_queue.h"
#include "compactor/compaction_job.h"
#include "compactor/session_cache.h"
#include "compactor/session_table.h"
#include "compactor/summarizer_breaker.h"
#include "compactor/window_source.h"
#include "events/event_emitter.h"
#include "model/transcript_access.h"
#include "plugins/plugin_runner.h"
#include "recap_internal/call_scope.h"
#include "recap_internal/log_internal.h"
#include "summarize/summarize.h"

namespace recap {
inline namespace v0 {

using compactor_detail::Attempt;
using compactor_detail::AttemptKind;
using compactor_detail::BackgroundQueue;
using compactor_detail::BackgroundTask;
using compactor_detail::CompactionJob;
using compactor_detail::CountTurnStarts;
using compactor_detail::Fields;
using compactor_detail::HoldsProviderCheckpoint;
using compactor_detail::IsResultOnly;
using compactor_detail::IsUnreadableProviderCheckpoint;
using compactor_detail::KeptByCompaction;
using compactor_detail::MessageBytes;
using compactor_detail::PinnedChars;
using compactor_detail::RetirableProviderCheckpoint;
using compactor_detail::SessionCache;
using compactor_detail::SessionTable;
using compactor_detail::StoredInstructionsChars;
using compactor_detail::SummarizerBreaker;
using compactor_detail::TranscriptBytes;
using compactor_detail::WindowSource;
using internal::EventEmitter;

// Hidden: Compactor is exported, and a nested class would be too; its members are no part of
// the API (tests/package/check_exports.cmake).
#if defined(__GNUC__)
#define RECAP_COMPACTOR_IMPL_HIDDEN __attribute__((visibility("hidden")))
#else
#define RECAP_COMPACTOR_IMPL_HIDDEN
#endif

struct RECAP_COMPACTOR_IMPL_HIDDEN Compactor::Impl {
  Impl(Config c, std::shared_ptr<Provider> p, std::shared_ptr<SessionStore> s,
       std::vector<std::shared_ptr<PluginHook>> hooks,
       std::vector<std::shared_ptr<EventSink>> sinks, std::shared_ptr<TimeSource> time);
  // Stops the background queue: cancels its compactions and joins its workers (R15.4), then
  // reports the end of each compaction that never finished.
  ~Impl();
  Impl(const Impl&) = delete;
  Impl& operator=(const Impl&) = delete;

  // --- Constant after construction.
  const Config config;
  const std::shared_ptr<Provider> provider;
  // recap's offline summarizer, made here, not when first needed: sessions falling back at
  // once share it.
  const std::shared_ptr<Provider> offline;
  const std::shared_ptr<SessionStore> store;
  const std::vector<std::shared_ptr<PluginHook>> plugins;
  const std::shared_ptr<TimeSource> clock;

  // --- Each provides its own synchronization.
  EventEmitter events;
  SessionTable sessions;       // R12.6: the sessions' caches
  WindowSource window_source;  // R1.2, R12.2: the provider's window
  SummarizerBreaker breaker;   // R12.3
  // R15: declared last, so that it is destroyed (its workers joined) before the parts above
  // that its tasks use.
  BackgroundQueue background_queue;

  // The offline summarizer, known by what it is, never by its name: a host's provider that
  // calls itself "offline" is a model like any other (chunked requests, the fallback).
  static bool IsOffline(const Provider& p) { return internal::IsOfflineSummarizer(p); }

  // kFailedPrecondition for `call` of `session` made inside a call of the same Compactor.
  static Status Reentered(const std::string& call, const std::string& session);

  // --- Below, `c` is the session's cache and its lock (c.mu) is held by the caller.

  // sync.cc. Brings the cached transcript up to date with the store: O(what was appended)
  // when only appends happened since the last call, a full load otherwise.
  Status Sync(const std::string& session, SessionCache& c);
  // R12.5: keeps what was learned about the session in the store, when it changed. A store
  // that cannot save it now is told again at the next call; nothing else depends on it.
  void SaveLearned(const std::string& session, SessionCache& c);

  // triggers.cc. R1.2: configuration, then the host's profile, then the provider; each source
  // above the trust limit counts as if it had said nothing. An overflow report caps the result
  // (R2.6).
  struct WindowChoice {
    std::optional<std::size_t> tokens;
    const char* source = "fallback";
  };
  WindowChoice Window(const RequestSizes& sizes, const SessionCache& c);
  // R12.2: once per session, when the provider's window could not be read.
  void SayWindowUnknown(const std::string& session, SessionCache& c, const Plan& plan);
  std::size_t FallbackWindow() const { return config.limits.max_context_chars / 4; }
  // Evaluates R2 for the session's transcript into `plan` (no side effects but asking the
  // provider its window).
  void Evaluate(const RequestSizes& sizes, const SessionCache& c, Plan& plan);
  // R3.8: the kept part should stay below half of the smaller trigger, in characters.
  std::size_t KeptLimit(const Plan& plan) const;
  // The offline summarizer's reply budget: maxOutputTokens, and no more than half of what the
  // kept part may hold (a quarter of the trigger), so that a checkpoint merged again and again
  // never crowds the conversation out of a small window. A model is given maxOutputTokens as
  // configured; the offline summarizer is ours to keep small.
  std::size_t OfflineOutputTokens(const Plan& plan) const;
  // How much one summarizer request may hold (R4.7): the window less the reply's budget,
  // with a margin for the estimate's error. recap's offline summarizer needs no limit.
  std::size_t RequestBudget(const Plan& plan) const;

  // --- One compaction (compaction.cc; compaction_job.h says the phases).

  // kNone: the job is ready for SummarizeJob (compaction_started was emitted). Otherwise why
  // not (kSkipped; compaction_skipped emitted unless `background`).
  Attempt BeginCompaction(const std::string& session, const SessionCache& c, const Plan& plan,
                          CompactionReason reason, CutMode mode, const std::string& focus,
                          bool background, CompactionJob& job);
  bool SplitSpan(CompactionJob& job, bool keep_unreadable);
  void SummarizeJob(CompactionJob& job, const CancellationToken& cancel);
  Attempt FinishCompaction(SessionCache& c, const RequestSizes& sizes, CompactionJob& job);

  Result<internal::SummarizeOutput> RunSummarizer(Provider& p, const internal::SummarizeInput& in,
                                                  const CompactionJob& job,
                                                  const CancellationToken& cancel) const;

  // R14.2: a provider-native summarizer compacts the span; its artifact is the checkpoint.
  static Result<internal::SummarizeOutput> RunNative(Provider& p,
                                                     const internal::SummarizeInput& in,
                                                     const CancellationToken& cancel);

  // R17.1: what the checkpoint(s) in `span` carried: the cached ledger when the span holds the
  // very message it belongs to; else, when the span holds a checkpoint, the ledger of every
  // message the session's history has retired (rebuilt once, after a reload); else nothing.
  Ledger CarriedLedger(const std::string& session, const SessionCache& c,
                       const Transcript& span) const;
  // The most text a ledger keeps (BuildLedger's max_chars): 8 x compaction.ledger.maxChars,
  // more than a checkpoint's section could ever show.
  std::size_t LedgerBound() const { return config.compaction.ledger.max_chars * 8; }
  // R17.2: adds to the checkpoint what it lacks of the job's ledger, and fits it to `max_chars`
  // with the section (R12.7). Not OK when even that cannot be made to fit.
  Status GuardAndFit(internal::SummarizeOutput& summary, CompactionJob& job) const;

  // Cuts the summarizer's checkpoint to at most `max_chars` characters as a message (R12.7).
  Status FitCheckpoint(internal::SummarizeOutput& summary, std::size_t max_chars,
                       const std::string& session) const;

  // One compaction: cut, plugins, summarizer, commit, events. Changes nothing unless it
  // commits (R7.1). `plan` is the caller's evaluation of R2 for this very transcript and these
  // sizes: the triggers are evaluated once per state of the session, not again here.
  Attempt RunCompaction(const std::string& session, SessionCache& c, const RequestSizes& sizes,
                        const Plan& plan, CompactionReason reason, CutMode mode,
                        const std::string& focus, const CancellationToken& cancel);

  // --- The provider's checkpoint (R14.1) and the cheap tier (R14.3).

  // R14.1: when a provider's checkpoint arrived, retires what precedes it (the instructions
  // and pinned messages stay), as one compaction commit whose checkpoint is that message
  // flagged summary; emits provider_checkpoint. Returns the messages retired (0 when there was
  // nothing to do, or the store refused: then the transcript is unchanged and it is tried
  // again at the next call).
  std::size_t AdoptProviderCheckpoint(const std::string& session, SessionCache& c);

  // R14.3: what clearing old tool results would do to `t` now: the messages it would
  // replace (each a copy whose results hold kClearedToolResultMarker), the results cleared and
  // the characters freed.
  struct Clearing {
    std::vector<std::pair<std::size_t, Message>> replacements;
    std::size_t results = 0;
    std::size_t freed_chars = 0;
  };
  Clearing PlanClearing(const Transcript& t) const;

  // R14.3: clears as PlanClearing says when it frees at least minFreeChars, commits it as a
  // reduction (the originals stay in the history) and emits tool_results_cleared. Returns the
  // messages changed (0 when it did not run or the store refused: then nothing changed).
  std::size_t ClearToolResults(const std::string& session, SessionCache& c);

  // The transcript `t` is after what precedes `at` was retired: the kept messages, `checkpoint`
  // (by default t[at] flagged summary, for PlanFor, which writes nothing), the rest.
  static Transcript AfterProviderCheckpoint(const Transcript& t, std::size_t at,
                                            std::optional<Message> checkpoint = std::nullopt);

  // --- One Prepare (compactor.cc), in the order of SPEC §8.

  // What one Prepare has found and done so far, handed from step to step.
  struct PrepareRun {
    PrepareRun(const std::string& s, const RequestSizes& z, const CancellationToken& k)
        : session(s), sizes(z), cancel(k) {}
    const std::string& session;
    const RequestSizes& sizes;
    const CancellationToken& cancel;
    Prepared out;
    Plan plan;                            // R2 evaluated before step 1 (again after a clearing)
    bool in_flight = false;               // a background compaction is step 1's (R15.3)
    std::uint64_t evaluated_version = 0;  // the version `plan` was first evaluated at
    std::vector<Attempt> attempts;        // what each step tried, in order (R12.8)
    std::size_t reduced_first = 0;        // messages step 2 clipped
    bool budget_tried_before = false;     // step 3 already ran this turn
    std::size_t Reducible(const SessionCache& c) const {
      return sizes.instructions_chars + c.transcript().chars();
    }
  };
  // Compactor::Prepare, once: kConflict when another writer committed between its read and
  // its write (the session is then read again at the next call).
  Result<Prepared> PrepareOnce(const std::string& session, const RequestSizes& sizes,
                               const CancellationToken& cancel);
  // Before step 1: retires what precedes a provider's checkpoint (R14.1), swaps in or waits
  // for a background compaction (R15), evaluates R2 into run.plan, says an unknown window
  // (R12.2), records the sizes before, and lifts the no-progress pause when it may (R12.4).
  void Survey(SessionCache& c, PrepareRun& run);
  // Step 1: a rule of R2 fired: clears old tool results (R14.3), starts a compaction in the
  // background (R15.1) or compacts with reason auto or overflow — unless compaction is off,
  // one is running, it is paused (R2.5) or cannot help (R12.4).
  Status CompactAtTrigger(SessionCache& c, PrepareRun& run);
  // Step 2: over the hard limit, the kept tail is reduced (R6).
  Status ReduceToLimit(SessionCache& c, PrepareRun& run);
  // Step 3: still over, once per turn: a compaction with reason budget, then reduced again.
  Status CompactForBudget(SessionCache& c, PrepareRun& run);
  // The request as it goes out: the messages, the sizes after, orphan results (R7.2).
  Prepared Handed(SessionCache& c, PrepareRun& run);
  // A skipped attempt of step 1, with compaction_skipped when `say`.
  void Skip(PrepareRun& run, SkipReason reason, bool say);

  // --- Background compaction (background.cc, R15).

  // Before step 1 of Prepare (background on): swaps in (or drops) the session's finished
  // background compaction, evaluates R2 into `plan`, waits for one still running when the
  // request would otherwise reach the window or the hard limit (MustWait; at most maxWaitMs,
  // and no longer than `cancel` allows), and starts one when the request has reached startAt x
  // the trigger but not the trigger. Returns true when one still runs as it returns: Prepare
  // then starts no compaction of its own.
  bool PrepareBackground(const std::string& session, SessionCache& c, const RequestSizes& sizes,
                         const CancellationToken& cancel, Plan& plan, Prepared& out);
  // Hands a compaction of the session to a worker; false when BeginCompaction found nothing to
  // do (then not again before the next turn).
  bool StartBackground(const std::string& session, SessionCache& c, const RequestSizes& sizes,
                       const Plan& plan);
  // R15.2, on the worker that finished `task`: swaps it in at once, under the session's lock,
  // unless a call holds the session (that call, or the next, collects it then) or it was given
  // up. The host's next Prepare then finds it in place and reports it (background_report).
  void SwapWhenReady(const std::string& session, const std::shared_ptr<BackgroundTask>& task);
  // compaction.background.maxWaitMs, clamped so that huge values cannot overflow the clock.
  std::chrono::milliseconds MaxWait() const;
  // A background compaction may start: the summarizer is not being left alone (R12.3), or the
  // offline summarizer stands in for it meanwhile.
  bool SummarizerAvailable(const Plan& plan) const;
  // The request may not go out as it is while a compaction runs: it reaches the window, the
  // hard limit (limits.maxContextChars), or the model refused the last one.
  bool MustWait(const Plan& plan, const SessionCache& c) const;
  // Swaps the finished task's checkpoint in when the span it snapshotted is still the session's,
  // else reports it discarded. Adds what it committed to `out`.
  void Collect(SessionCache& c, const RequestSizes& sizes, BackgroundTask& task, Prepared& out);
  // Gives up the session's background compaction, if any (a manual compaction or a recovery
  // replaces it; a Prepare stops waiting): a queued or finished one is dropped and reported
  // discarded at once; a running one is cancelled, stays the session's until it ends (no
  // second compaction beside it, R15.3), and is returned so that the caller may wait for it
  // (BackgroundQueue::Wait).
  std::shared_ptr<BackgroundTask> AbandonTask(const std::string& session, const std::string& why);
  // Emits compaction_discarded / compaction_failed (job.error) for `job`.
  void SayDiscarded(const CompactionJob& job, const std::string& why);
  void SayFailed(const CompactionJob& job);
  // After a background task's SummarizeJob: reports a task given up as discarded, a failed
  // one as failed, then marks it done; a good one waits for its Prepare.
  void Ran(BackgroundTask& task);
  // A worker's run of `task` (the queue's Run): the summarizer, then its end, then the swap.
  void RunTask(const std::shared_ptr<BackgroundTask>& task);

  // --- The hard limit (budget.cc).

  // R6: clips the kept tail to the target and persists it; the store's refusal is returned.
  Status RunReduction(const std::string& session, SessionCache& c, const RequestSizes& sizes,
                      std::size_t* reduced_messages);

  // R7 step 4, R12.8: kContextBudgetExceeded saying what every attempt of this Prepare did,
  // in order, and what to do (their errors' remedies kept).
  // `attempts`: step 1's (or why it did not run), then step 3's budget compaction if it ran;
  // `reduced_first` / `reduced_all`: messages the reducer clipped in step 2 / in all.
  Status BudgetError(std::size_t reducible, const RequestSizes& sizes,
                     const std::vector<Attempt>& attempts, std::size_t reduced_first,
                     std::size_t reduced_all, bool budget_tried_before,
                     std::size_t stored_instructions) const;
};

}  // namespace v0
}  // namespace recap

#endif  // RECAP_SRC_CORE_COMPACTOR_COMPACTOR_IMPL_H_
