// The Compactor's record of one session between calls (SessionCache: the transcript as last
// synced, the learned state of R12.5, the pause and budget bookkeeping), what one compaction
// attempt did (Attempt), and the small facts about a transcript the Compactor reads.
#ifndef RECAP_SRC_CORE_COMPACTOR_SESSION_CACHE_H_
#define RECAP_SRC_CORE_COMPACTOR_SESSION_CACHE_H_

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "recap/checkpoint.h"
#include "recap/compactor.h"
#include "recap/ledger.h"
#include "recap/message.h"
#include "recap/status.h"
#include "recap/transcript.h"

namespace recap {
inline namespace v0 {
namespace compactor_detail {

// What the last compaction attempt of a Prepare did; it shapes the R7 error text.
enum class AttemptKind { kNone, kCommitted, kSkipped, kFailed, kDisabled };

struct Attempt {
  AttemptKind kind = AttemptKind::kNone;
  SkipReason skip = SkipReason::kNone;
  Status error;  // kFailed
  std::size_t before_full = 0;
  std::size_t after_full = 0;
  bool provider_failed = false;  // the summarizer's call failed (R12.3 counts these)
  bool budget_step = false;      // Prepare's step 3, the budget compaction
  std::size_t calls = 0;         // requests to the summarizer
  Usage usage;                   // what the summarizer reported
  CompactOutcome outcome;
};

// Everything the Compactor remembers about one session between calls. Guarded by `mu`, which
// also serializes Prepare/Compact/Recover for the session: every method below is called only
// by a call that holds it (bytes() aside, which the SessionTable reads without).
//
// Its state changes only through its methods, each named for what happened (a sync, a commit,
// a reported overflow or count, a request handed out, a skip said): the transcript and what is
// derived from it stay consistent, and what the triggers keep between calls reads as the
// rules of SPEC §3, §7 and §18 say it.
class SessionCache {
 public:
  std::mutex mu;

  // --- The transcript as last synced with the store, and what is derived from it.

  bool loaded() const { return loaded_; }
  const Transcript& transcript() const { return transcript_; }
  std::uint64_t version() const { return version_; }
  // R12.1: characters of the pinned messages of the transcript.
  std::size_t pinned_chars() const { return pinned_chars_; }
  // Turn starts ever seen (monotonic): "once per turn" for the budget compaction (R7 step 3)
  // and for a background start that found nothing (R15).
  std::uint64_t turn_serial() const { return turn_serial_; }
  // R14.1: a message holding a provider's checkpoint arrived (or was loaded) and what precedes
  // it may not be retired yet; Prepare and Compact look, once.
  bool provider_checkpoint_pending() const { return provider_checkpoint_pending_; }
  // The last checkpoint this process committed for the session (R3.5): its message as the
  // transcript holds it, and the struct it was rendered from. The next compaction whose span
  // holds that very message (the same object: neither reloaded nor clipped since) takes the
  // struct as its prior; the Markdown is parsed back only after a reload.
  const std::shared_ptr<const Message>& checkpoint_message() const { return checkpoint_message_; }
  const std::shared_ptr<const Checkpoint>& checkpoint() const { return checkpoint_; }
  // R17.1: the full ledger of the compaction this process committed last, beside the message
  // it belongs to (the checkpoint, or a provider's artifact). The next compaction whose span
  // holds that very message carries it forward; after a reload it is rebuilt from the
  // session's history instead.
  const std::shared_ptr<const Message>& ledger_message() const { return ledger_message_; }
  const std::shared_ptr<const Ledger>& ledger() const { return ledger_; }

  // The session as the store holds it, read whole.
  void Reload(Transcript transcript, std::uint64_t version);
  // A message the store has that was appended since the last sync (R2.5: a turn start lifts
  // the no-progress pause).
  void AppendStored(Message m);
  // Another writer rewrote the session: what it holds now, read whole. Counts as a new turn.
  void RewrittenElsewhere(Transcript transcript);
  // The store moved to `version` with nothing to read (LoadChanges found no change).
  void SetVersion(std::uint64_t version) { version_ = version; }
  // Read the whole session again at the next sync (another writer won a commit, or positions
  // moved).
  void Invalidate() { loaded_ = false; }
  // This process committed `next` as version `version` (a compaction, a reduction, the
  // retirement before a provider's checkpoint): the count reported for the old request is
  // forgotten (R2.4).
  void Committed(Transcript next, std::uint64_t version);
  // The same for a commit that replaced messages in place (their content only, R14.3).
  void CommittedReplacements(std::vector<std::pair<std::size_t, Message>> replacements,
                             std::uint64_t version);
  // The checkpoint of the compaction just committed, at `at` in the transcript, and its
  // struct; or none kept (a provider's artifact, or the kept one was retired).
  void KeepCheckpoint(std::size_t at, Checkpoint checkpoint);
  void ForgetCheckpoint();
  // The ledger of the compaction just committed, whose checkpoint is at `at`.
  void KeepLedger(std::size_t at, Ledger ledger);
  // R14.1: the provider's checkpoint was adopted, or there is none to adopt.
  void ProviderCheckpointSettled() { provider_checkpoint_pending_ = false; }
  // The next Prepare's judgement of `t` instead of the transcript (Plan: what Prepare would
  // see once a provider's checkpoint or a clearing has been applied); nothing else changes.
  // Returns the transcript it held, to be given back with Restore.
  Transcript Substitute(Transcript t);
  void Restore(Transcript held) { transcript_ = std::move(held); }

  // --- What the triggers keep between calls (R2.4–R2.6, R12.2–R12.5, R15, R7 step 3).

  // R2.6: an overflow was reported and not yet acted on; the window lowered to what the model
  // rejected (the tokens it named, else the estimate of the last request handed out).
  bool overflow_pending() const { return overflow_pending_; }
  const std::optional<std::size_t>& overflow_window() const { return overflow_window_; }
  void OverflowReported(std::optional<std::size_t> rejected_tokens);
  // A compaction ran (or was found unable to help) for the request the model refused.
  void OverflowHandled() { overflow_pending_ = false; }

  // R2.4: the provider's count for the last request handed out, and the transcript size it
  // described. A count reported after the transcript was rewritten (a compaction, a
  // reduction, another writer, a background swap) describes a request that is gone: it is
  // ignored (false).
  const std::optional<std::size_t>& reported_prompt_tokens() const {
    return reported_prompt_tokens_;
  }
  std::size_t chars_at_report() const { return chars_at_report_; }
  bool PromptTokensReported(std::size_t tokens);
  // Prepare handed out a request of `after_tokens` (estimated) for the transcript as it is.
  void Handed(std::size_t after_tokens);

  // R2.5: two auto compactions in a row that free less than a tenth pause auto compaction;
  // R12.4: the pause lifts at a new turn, a rewrite by another writer, or once the transcript
  // has grown by a tenth of the trigger since it began.
  bool paused() const { return paused_; }
  // A committed auto compaction took the request from `before_full` to `after_full`.
  void CountProgress(std::size_t before_full, std::size_t after_full);
  void LiftPause() {
    paused_ = false;
    weak_streak_ = 0;
  }
  // Lifts the pause when the transcript has grown by a tenth of `trigger_chars` since it began.
  void LiftPauseAfterGrowth(std::size_t trigger_chars);

  // R12.4: compaction_skipped (irreducible) is said once for each size of the instructions
  // and the tool catalog: true when it is to be said now for these sizes. IrreducibleGone:
  // the request is no longer irreducible (the next time is said again).
  bool SayIrreducibleFor(std::pair<std::size_t, std::size_t> fixed);
  void IrreducibleGone() { irreducible_said_for_.reset(); }

  // R12.2: window_unknown is said once a session: true the first time only.
  bool SayWindowUnknownOnce();

  // R12.6: about how much memory the cached transcript and checkpoint hold (CachedBytes),
  // kept up to date by the methods above; read by the SessionTable without `mu`.
  std::size_t bytes() const { return bytes_.load(std::memory_order_relaxed); }

  // R12.5: what was learned, as the store keeps it (a JSON object of what differs from a fresh
  // session's state, or "") and as the store last had it; ApplyLearned takes such a text
  // (maybe another host's) in, leaving at a fresh session's value what does not read as
  // expected: it is advice.
  std::string LearnedText() const;
  const std::string& learned_text() const { return learned_text_; }
  void ApplyLearned(const std::string& text);
  void LearnedSaved(std::string text) { learned_text_ = std::move(text); }

  // R15: a background start found nothing to compact at this turn: none is tried again
  // before the next turn.
  void BackgroundFoundNothing() { background_skipped_at_ = turn_serial_; }
  bool background_skipped_this_turn() const { return background_skipped_at_ == turn_serial_; }
  // R15: after a background swap, none starts early again before the transcript has grown by
  // a tenth of `trigger_chars`.
  void RestBackground(std::size_t trigger_chars) {
    background_rest_until_chars_ = transcript_.chars() + trigger_chars / 10;
  }
  bool background_resting() const { return transcript_.chars() < background_rest_until_chars_; }
  // R15.2: what a worker's swap did since the last Prepare (the worker commits a finished
  // compaction itself when no call holds the session); the next Prepare reports it.
  struct BackgroundReport {
    Prepared prepared;  // background_swapped / _discarded, compactions, summarizer figures
    std::size_t removed_chars = 0;  // transcript characters the swap took away
  };
  std::optional<BackgroundReport> TakeBackgroundReport();
  void KeepBackgroundReport(BackgroundReport report) { background_report_ = std::move(report); }
  std::size_t background_removed_chars() const {
    return background_report_ ? background_report_->removed_chars : 0;
  }

  // R7 step 3: the budget compaction runs once per turn: true (and noted) when it has not run
  // at this turn yet.
  bool TryBudgetThisTurn();

 private:
  void Rederive();  // pinned_chars_, bytes_, provider_checkpoint_pending_ from transcript_
  // The transcript the last reported count described is gone (R2.4): the count is dropped,
  // and one reported before the next Prepare is ignored.
  void ForgetReportedCount() {
    reported_prompt_tokens_.reset();
    rewritten_since_prepare_ = true;
  }

  bool loaded_ = false;
  Transcript transcript_;
  std::uint64_t version_ = 0;
  std::size_t pinned_chars_ = 0;
  std::uint64_t turn_serial_ = 0;
  bool provider_checkpoint_pending_ = false;
  std::shared_ptr<const Message> checkpoint_message_;
  std::shared_ptr<const Checkpoint> checkpoint_;
  std::shared_ptr<const Message> ledger_message_;
  std::shared_ptr<const Ledger> ledger_;
  std::atomic<std::size_t> bytes_{0};

  bool overflow_pending_ = false;
  std::optional<std::size_t> overflow_window_;
  std::size_t last_full_tokens_ = 0;
  std::optional<std::size_t> reported_prompt_tokens_;
  std::size_t chars_at_report_ = 0;
  std::size_t chars_at_last_prepare_ = 0;
  bool rewritten_since_prepare_ = false;
  int weak_streak_ = 0;
  bool paused_ = false;
  std::size_t chars_at_pause_ = 0;
  std::optional<std::pair<std::size_t, std::size_t>> irreducible_said_for_;
  bool window_unknown_said_ = false;
  std::string learned_text_;
  std::optional<std::uint64_t> background_skipped_at_;
  std::size_t background_rest_until_chars_ = 0;
  std::optional<BackgroundReport> background_report_;
  std::optional<std::uint64_t> budget_tried_at_;
};

std::size_t CountTurnStarts(const Transcript& t);

// R12.6: about how many bytes of memory a message takes in the cache: its strings and the
// fixed size of the objects that hold them. An estimate, for the cache's budget.
std::size_t MessageBytes(const Message& m);

std::size_t TranscriptBytes(const Transcript& t);

// The same for the checkpoint struct a session keeps beside its transcript
// (SessionCache::checkpoint), so the cache's budget sees it too.
std::size_t CheckpointBytes(const Checkpoint& c);
// The same for the ledger it keeps (SessionCache::ledger).
std::size_t LedgerBytes(const Ledger& l);

// What `c` holds: its transcript and its kept checkpoint struct.
std::size_t CachedBytes(const SessionCache& c);

// R12.1: characters of the session's instructions (a leading system message), 0 when none.
std::size_t StoredInstructionsChars(const Transcript& t);

std::size_t PinnedChars(const Transcript& t);

// Kept by a compaction whose span holds it, before the checkpoint (R12.1).
bool KeptByCompaction(const Transcript& t, std::size_t i);

bool IsResultOnly(const Message& m);

// R14.1: the position of the newest message holding a provider's checkpoint when something
// must be retired for it (a message before it that no compaction keeps, or the message not yet
// flagged summary); nullopt otherwise.
std::optional<std::size_t> RetirableProviderCheckpoint(const Transcript& t);

// True when some message of `t` holds a provider's checkpoint.
bool HoldsProviderCheckpoint(const Transcript& t);

// R14.1: a provider checkpoint that recap's summarizers cannot read (OpenAI's encrypted one):
// a compaction by one of them keeps it, verbatim, before its own checkpoint.
bool IsUnreadableProviderCheckpoint(const Message& m);

}  // namespace compactor_detail
}  // namespace v0
}  // namespace recap

#endif  // RECAP_SRC_CORE_COMPACTOR_SESSION_CACHE_H_
