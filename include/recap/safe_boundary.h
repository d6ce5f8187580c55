/// @file
/// recap — where a compaction may cut (SPEC R3).
///
/// A cut position p splits a transcript of n messages into the summarized part [0, p) and the
/// kept part [p, n). The kept part is always an exact suffix of the transcript, and p is always
/// a *safe boundary*: every tool call before p has its result before p, and every tool result
/// after p has its call after p. A tool call and its result are therefore never on different
/// sides, and parallel calls stay together with all their results.
///
/// Pairing is by id: a result (ToolResult::call_id, or an opaque item linked as kResult)
/// answers the nearest earlier call with the same id. A result whose call is absent (an
/// "orphan", common in transcripts from the wild) is an ordinary message and constrains
/// nothing (R3.9). A call with no result is an *uncertain* tool call (R3.7): the session must
/// be recovered before it is compacted.
///
/// Everything here is a pure function of its arguments: no I/O, no allocation beyond the
/// result, thread-safe. Cost is linear in the number of messages and parts, except FindCut's
/// (below).
#ifndef RECAP_SAFE_BOUNDARY_H_
#define RECAP_SAFE_BOUNDARY_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "recap/export.h"
#include "recap/transcript.h"

namespace recap {
inline namespace v0 {

/// A tool call with no result anywhere after it.
struct UncertainCall {
  std::size_t message = 0;  ///< position of the message holding the call
  std::string call_id;      ///< the call's id
  std::string name;         ///< the tool's name; empty for opaque calls
};

/// A tool result whose call does not precede it.
struct OrphanResult {
  std::size_t message = 0;  ///< position of the message holding the result
  std::string call_id;      ///< the id of the call it names
};

/// How the calls and results of a transcript pair up (AnalyzePairing).
struct PairingReport {
  std::size_t pairs = 0;                 ///< matched call/result pairs
  std::vector<UncertainCall> uncertain;  ///< calls without a result, in order
  std::vector<OrphanResult> orphans;     ///< results without their call, in order
};

/// How calls and results of `t` pair up.
RECAP_EXPORT PairingReport AnalyzePairing(const Transcript& t);

/// The calls that have no result (R3.7); same as AnalyzePairing(t).uncertain.
RECAP_EXPORT std::vector<UncertainCall> FindUncertainToolCalls(const Transcript& t);

/// safe[p] != 0 when position p (0..size) is a safe boundary. Position 0 is always safe; a
/// position after an uncertain call never is (its result is not before it).
RECAP_EXPORT std::vector<std::uint8_t> FindSafeBoundaries(const Transcript& t);

/// Positions of the messages that start a turn (IsTurnStart), in order.
RECAP_EXPORT std::vector<std::size_t> FindTurnStarts(const Transcript& t);

/// How FindCut cuts.
enum class CutMode : std::uint8_t {
  kNormal,  ///< keep the last keep_turns turns (R3.1, R3.2)
  kBudget,  ///< last-chance compaction: cut inside the last turn (R3.3)
};

/// Why a compaction does nothing: the cutter's reasons (FindCut), then the Compactor's.
enum class SkipReason : std::uint8_t {
  kNone,                  ///< it does not skip: there is a cut
  kNothingToSummarize,    ///< no message (other than earlier checkpoints) would be summarized
  kNoSafeBoundary,        ///< there is history, but no safe boundary leaves anything to summarize
  kUncertainToolResults,  ///< a tool call has no result; recover the session first (R3.7, R8.3)
  // Set by the Compactor, never by the cutter:
  kNoProgress,             ///< auto compaction paused: the last two freed < 10% each (R2.5)
  kIrreducible,            ///< instructions + tool catalog alone reach the trigger (R12.4)
  kSummarizerUnavailable,  ///< the summarizer failed 3 auto compactions in a row (R12.3)
  /// R15.3: a compaction of the session still runs in the background (given up, and not yet
  /// stopped after its cancellation): no second one starts beside it.
  kBackgroundRunning,
};

/// "nothing_to_summarize", "no_safe_boundary", "uncertain_tool_results", "no_progress",
/// "irreducible", "summarizer_unavailable", "background_running"; "none" for kNone. The `reason` of
/// compaction_skipped.
RECAP_EXPORT const char* SkipReasonName(SkipReason reason) noexcept;

/// What FindCut is asked.
struct CutOptions {
  int keep_turns = 2;               ///< turns to keep; 0..20 (R1.1); values outside are clamped
  CutMode mode = CutMode::kNormal;  ///< normal, or the last-chance budget cut
  /// R3.8: when non-zero, the kept part should stay below this many characters (the
  /// Compactor passes half the trigger). The cut moves forward — fewer kept turns, then inside
  /// the last turn — until the kept part is below it or no safe boundary is left.
  std::size_t kept_chars_limit = 0;
};

/// Where FindCut cuts, or why it does not.
struct CutDecision {
  SkipReason skip = SkipReason::kNone;   ///< kNone when there is a cut
  std::size_t position = 0;              ///< first kept message; valid when ok()
  std::size_t summarized_chars = 0;      ///< characters of [0, position)
  std::size_t kept_chars = 0;            ///< characters of [position, size)
  std::size_t kept_turns = 0;            ///< turn starts in the kept part
  bool inside_turn = false;              ///< the cut fell inside the last turn (R3.3)
  bool moved_for_size = false;           ///< R3.8 moved the cut forward
  std::vector<UncertainCall> uncertain;  ///< filled when skip == kUncertainToolResults

  /// True when there is a cut (skip == kNone).
  bool ok() const noexcept { return skip == SkipReason::kNone; }
};

/// Decides where a compaction of `t` cuts (R3.1–R3.4, R3.6–R3.9):
///
///  * With more than keep_turns turns, the cut is at the start of the keep_turns-th last turn
///    (or the nearest safe boundary before it; never a later one, which would keep fewer turns
///    than asked). With 2..keep_turns turns, the last turn alone is kept (R3.2).
///  * With one turn, keep_turns == 0, or mode == kBudget, the cut falls inside the last turn at
///    the last safe boundary at or before its newest tool-call round (the last message calling
///    a tool), so that round and what follows it are kept (R3.3). A last turn without a
///    tool-call round, or without such a boundary, is kept whole: the cut is at its start, or
///    the nearest safe boundary before it when the start is not one.
///  * Then R3.8 may move the cut forward (see CutOptions::kept_chars_limit).
///  * A transcript with an uncertain tool call is never cut (kUncertainToolResults); a cut that
///    would summarize nothing but earlier checkpoints is kNothingToSummarize; history with no
///    usable safe boundary is kNoSafeBoundary. The last message is always kept.
///
/// Cost: FindCut reads what the transcript noted of each message when it was appended
/// (Transcript::cut_facts) from the end backwards, only as far as the cut looks — the last
/// keep_turns turns, or R3.8's moves — so it does not grow with the session (SPEC R11.4). When
/// those notes cannot settle the pairing (Transcript::pairing() is not kClosed: uncertain calls,
/// orphan or repeated results, ...), it is FindCutReference: linear in messages and parts.
RECAP_EXPORT CutDecision FindCut(const Transcript& t, const CutOptions& options);

/// The same decision, always from a full scan of the transcript (pairing every call and result,
/// as AnalyzePairing does). FindCut returns exactly this for every transcript and options; kept
/// as the reference its tests compare against.
RECAP_EXPORT CutDecision FindCutReference(const Transcript& t, const CutOptions& options);

}  // namespace v0
}  // namespace recap

#endif  // RECAP_SAFE_BOUNDARY_H_
