// The Compactor's record of one session between calls (SessionCache: the transcript as last
// synced, the learned state of R12.5, the pause and budget bookkeeping), what one compaction
// attempt did (Attempt), and the small facts about a transcript the Compactor reads.
#ifndef RECAP_SRC_CORE_COMPACTOR_SESSION_CACHE_H_
#define RECAP_SRC_CORE_COMPACTOR_SESSION_CACHE_H_

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
// also serializes Prepare/Compact/Recover for the session.
struct SessionCache {
  std::mutex mu;
  bool loaded = false;
  Transcript transcript;
  std::uint64_t version = 0;

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
      chars_at_pause = transcript.chars();
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

  // R12.1: characters of the pinned messages of the transcript (kept up to date on append).
  std::size_t pinned_chars = 0;

  // R12.6: about how much memory the cached transcript holds (TranscriptBytes), kept up to
  // date by whoever holds `mu`; read by the cache's accounting without it.
  std::atomic<std::size_t> bytes{0};

  // The last checkpoint this process committed for the session (R3.5): its message as the
  // transcript holds it, and the struct it was rendered from. The next compaction whose span
  // holds that very message (the same object: neither reloaded nor clipped since) takes the
  // struct as its prior; the Markdown is parsed back only after a reload.
  std::shared_ptr<const Message> checkpoint_message;
  std::shared_ptr<const Checkpoint> checkpoint;

  // R12.5: the learned state as the store last had it (LearnedText of the fields above).
  std::string learned_text;

  // R14.1: a message holding a provider's checkpoint arrived (or was loaded) and what precedes
  // it may not be retired yet; Prepare and Compact look, once.
  bool provider_checkpoint_pending = false;

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

  // Turn starts ever seen (monotonic): "once per turn" for the budget compaction (R7 step 3).
  std::uint64_t turn_serial = 0;
  std::optional<std::uint64_t> budget_tried_at;
};

std::size_t CountTurnStarts(const Transcript& t);

// The transcript the last reported count described is gone (R2.4): the count is dropped, and
// one reported before the next Prepare is ignored.
inline void ForgetReportedCount(SessionCache& c) {
  c.reported_prompt_tokens.reset();
  c.rewritten_since_prepare = true;
}

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
