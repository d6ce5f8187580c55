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
// also serializes Prepare/Compact/Recover for the session: every member below is read and
// changed only by a call that holds it (`bytes` aside, which the SessionTable reads without).
//
// The transcript and what is derived from it (its version, the pinned characters, the bytes,
// the kept checkpoint, the provider-checkpoint flag, the turn count) change only through the
// methods of the first group, each of which keeps them consistent; the bookkeeping of the
// triggers below them is plain data the Compactor's steps read and set.
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
  // R14.1: the provider's checkpoint was adopted, or there is none to adopt.
  void ProviderCheckpointSettled() { provider_checkpoint_pending_ = false; }
  // The next Prepare's judgement of `t` instead of the transcript (Plan: what Prepare would
  // see once a provider's checkpoint or a clearing has been applied); nothing else changes.
  // Returns the transcript it held, to be given back with Restore.
  Transcript Substitute(Transcript t);
  void Restore(Transcript held) { transcript_ = std::move(held); }

  // --- The triggers' bookkeeping.

  // R2.6: an overflow was reported; the window is lowered to what was rejected.
  bool overflow_pending = false;
  std::optional<std::size_t> overflow_window;
  std::size_t last_full_tokens = 0;  // estimate of the last request Prepare handed out

  // R2.4: the provider's count for the last request, and the transcript size it described.
  std::optional<std::size_t> reported_prompt_tokens;
  std::size_t chars_at_report = 0;
  std::size_t chars_at_last_prepare = 0;
  // The transcript was rewritten (compacted, reduced, reloaded after another writer) since the
  // last Prepare returned it: a count reported now describes a request that is gone. A
  // background compaction's worker swaps between two Prepares, before the host reports.
  bool rewritten_since_prepare = false;

  // R2.5: consecutive auto compactions that freed < 10%, and the pause they cause. R12.4: the
  // pause also lifts once the transcript has grown by a tenth of the trigger since it began.
  // Changed through CountProgress and LiftPause only (ApplyLearned reads them back).
  int weak_streak = 0;
  bool paused = false;
  std::size_t chars_at_pause = 0;
  // A committed auto compaction took the request from `before_full` to `after_full`: two in a
  // row that free less than a tenth pause auto compaction (R2.5).
  void CountProgress(std::size_t before_full, std::size_t after_full) {
    const bool weak = after_full * 10 > before_full * 9;  // freed < 10%
    weak_streak = weak ? weak_streak + 1 : 0;
    if (weak_streak >= 2 && !paused) {
      paused = true;
      chars_at_pause = transcript_.chars();
    }
  }
  // A new turn, a rewrite by another writer, or growth by a tenth of the trigger (R12.4) lifts
  // the pause and starts the count again.
  void LiftPause() {
    paused = false;
    weak_streak = 0;
  }

  // R12.4: the (instructions, tool catalog) sizes for which `irreducible` was last said.
  std::optional<std::pair<std::size_t, std::size_t>> irreducible_said_for;

  // R12.2: window_unknown was emitted for this session.
  bool window_unknown_said = false;

  // R12.6: about how much memory the cached transcript holds (CachedBytes), kept up to date by
  // the methods above; read by the SessionTable without `mu`.
  std::atomic<std::size_t> bytes{0};

  // R12.5: the learned state as the store last had it (LearnedText of the fields above).
  std::string learned_text;

  // R15: the turn (turn_serial) at which a background start found nothing to compact; it is
  // not tried again before the next turn.
  std::optional<std::uint64_t> background_skipped_at;
  // R15: after a background swap, none starts early again before the transcript has this many
  // characters (a tenth of the trigger more than it had).
  std::size_t background_rest_until_chars = 0;
  // R15.2: what a worker's swap did since the last Prepare (the worker commits a finished
  // compaction itself when no call holds the session); the next Prepare reports it.
  struct BackgroundReport {
    Prepared prepared;  // background_swapped / _discarded, compactions, summarizer figures
    std::size_t removed_chars = 0;  // transcript characters the swap took away
  };
  std::optional<BackgroundReport> background_report;

  // The turn at which Prepare's step 3 last tried its budget compaction (R7).
  std::optional<std::uint64_t> budget_tried_at;

 private:
  void Rederive();  // pinned_chars_, bytes, provider_checkpoint_pending_ from transcript_
  // The transcript the last reported count described is gone (R2.4): the count is dropped,
  // and one reported before the next Prepare is ignored.
  void ForgetReportedCount() {
    reported_prompt_tokens.reset();
    rewritten_since_prepare = true;
  }

  bool loaded_ = false;
  Transcript transcript_;
  std::uint64_t version_ = 0;
  std::size_t pinned_chars_ = 0;
  std::uint64_t turn_serial_ = 0;
  bool provider_checkpoint_pending_ = false;
  std::shared_ptr<const Message> checkpoint_message_;
  std::shared_ptr<const Checkpoint> checkpoint_;
};

std::size_t CountTurnStarts(const Transcript& t);

// R12.5: what the Compactor learned about a session, as the store keeps it: a JSON object of
// the fields that differ from a fresh session's, or "" when none does.
std::string LearnedText(const SessionCache& c);

// Takes `text` (LearnedText, maybe written by another host or another recap) into `c`. What
// does not read as expected is left at a fresh session's value: it is advice.
void ApplyLearned(SessionCache& c, const std::string& text);

// R12.6: about how many bytes of memory a message takes in the cache: its strings and the
// fixed size of the objects that hold them. An estimate, for the cache's budget.
std::size_t MessageBytes(const Message& m);

std::size_t TranscriptBytes(const Transcript& t);

// The same for the checkpoint struct a session keeps beside its transcript
// (SessionCache::checkpoint), so the cache's budget sees it too.
std::size_t CheckpointBytes(const Checkpoint& c);

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
