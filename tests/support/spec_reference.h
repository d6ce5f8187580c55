// A model-free reference of the cutter (SPEC R3) and of the tail reducer (SPEC R6), written
// straight from the SPEC and the public headers (safe_boundary.h, tail_reducer.h), for the
// differential test tests/properties/test_spec_differential.cc.
//
// Deliberately simple and slow (quadratic where that is the obvious way): nothing here shares
// code with src/core/cut/safe_boundary.cc or src/core/reduce/ (tail_reducer.cc, clip_arguments.cc).
// It uses only the public data types, CountCodePoints and IsTurnStart (PrefixBytesForCodePoints for
// failure reports), and — as leaf functions tested on their own — the library's ClipText and
// ClipArguments. Pairing, safe boundaries, turn bookkeeping, character counts, the cut rules, the
// reducer's rounds, ordering and stopping are all computed here.
//
// Where the SPEC leaves a detail open, the reference follows the interpretation the library
// documents in its headers (and, where only there, in the comments of its sources), each
// restated below where it is implemented:
//
//  Cutter (safe_boundary.h)
//   * A result (ToolResult::call_id, or a top-level opaque item linked kResult) answers the
//     nearest earlier call (ToolCall::id, or an opaque item linked kCall) with the same id,
//     "earlier" in the order of messages and of parts inside a message. A result that answers
//     no call is an orphan and constrains nothing (R3.9). A call that no result answers is
//     uncertain (R3.7).
//   * Position p (0 < p < n) is a safe boundary when no answered pair has its call in a message
//     before p and its result in a message at or after p (R3.4, §1).
//   * A transcript without any turn start is one turn from position 0.
//   * A cut position must leave the last message kept and summarize at least one message that
//     is not a checkpoint (R3.5, R3.6).
//   * R3.1: the cut is at the start of the keep_turns-th last turn, or the nearest usable
//     position before it — never after it. R3.2: with 2..keep_turns turns, the same with the
//     last turn. R3.3 (one turn, keep_turns 0, or budget mode): the last usable position in the
//     last turn at or before its newest tool-call round (the last message of the turn calling a
//     tool); with no round, or no usable position there, the turn is kept whole: the cut is at
//     its start or, when the start is not usable (a user message that starts the turn but also
//     carries results of the previous round's calls), at the nearest usable position before it,
//     as R3.1 and R3.2 do. The SPEC decides this last point, not the header: R3.6 skips only
//     when *no* safe boundary leaves anything to summarize, and budget mode or keep_turns 0
//     must not summarize less than keep_turns 1 would. The library currently skips there
//     instead (no_safe_boundary): Decide(options, KeptWholeStart::kSkip) is that reading, which
//     the differential test uses to recognise exactly this known deviation.
//   * R3.8: when the kept part reaches kept_chars_limit, the cut may move forward to: later turn
//     starts (each taken back to the nearest usable position at or before it, but past the
//     current cut), then usable positions inside the last turn. Of those, the earliest whose
//     kept part is below the limit; if none is, the latest of them. This applies also when no
//     base cut was found (the whole transcript would be kept).
//   * No cut: nothing_to_summarize when every message before the last turn (all of them when
//     there is no turn start) is a checkpoint; otherwise no_safe_boundary.
//   * kept_turns counts turn starts at or after the cut; inside_turn is "the cut is after the
//     start of the last turn" (always, with no turn start).
//
//  Reducer (tail_reducer.h)
//   * Round caps: tool-result text items take the tool-result caps; text parts (of any role)
//     and tool-call arguments take the content caps. Opaque items, tool names and checkpoint
//     messages are never touched.
//   * "The largest messages over the round's cap": the messages (not checkpoints) with at least
//     one clippable text over its cap in this round, by their current size in characters,
//     largest first, ties the earlier position first. Clipping a message clips every one of its
//     texts over its cap (ClipText; ClipArguments for arguments).
//   * The transcript is measured before every clip; the reducer stops the moment it fits, and
//     a round only starts while it does not. `rounds` counts the rounds started.
//   * A message whose clipped version would not be smaller (arguments whose JSON structure
//     alone is over the cap) is left as it is and not reported as cut.
#ifndef RECAP_TESTS_SUPPORT_SPEC_REFERENCE_H_
#define RECAP_TESTS_SUPPORT_SPEC_REFERENCE_H_

#include <cstddef>
#include <string>
#include <vector>

#include "recap/message.h"
#include "recap/safe_boundary.h"
#include "recap/tail_reducer.h"
#include "recap/transcript.h"

namespace recap_spec {

// SPEC §1: code points of texts, tool names, arguments, tool-result contents (texts and opaque
// payloads) and opaque payloads of a message.
std::size_t Chars(const recap::Message& m);

// One matched call/result pair, by message position (call <= result).
struct Pair {
  std::size_t call = 0;
  std::size_t result = 0;
};

// R3.3, a last turn kept whole whose start is not a usable cut position: where the cut goes.
enum class KeptWholeStart {
  kSnapBack,  // the nearest usable position before the turn's start (the SPEC's reading)
  kSkip,      // no cut from the R3.3 rule (what the library does; R3.8 may still move it)
};

// Everything the reference cutter needs to know about one transcript, found once.
class ReferenceCutter {
 public:
  explicit ReferenceCutter(const recap::Transcript& t);

  // The decision for `options`, as SPEC R3 and safe_boundary.h describe it.
  // `unusable_turn_start`, when given, is set when the R3.3 rule met a last turn kept whole
  // whose start is not a usable cut (the only case where `kept_whole` matters).
  recap::CutDecision Decide(const recap::CutOptions& options,
                            KeptWholeStart kept_whole = KeptWholeStart::kSnapBack,
                            bool* unusable_turn_start = nullptr) const;

  // Building blocks, exposed for tests and failure reports.
  std::size_t size() const { return n_; }
  bool Safe(std::size_t p) const;              // p in 0..n
  std::size_t KeptChars(std::size_t p) const;  // characters of [p, n)
  const std::vector<std::size_t>& turns() const { return turns_; }
  const std::vector<Pair>& pairs() const { return pairs_; }
  const std::vector<recap::UncertainCall>& uncertain() const { return uncertain_; }

 private:
  // Safe, 0 < p < n, and summarizes a message that is not a checkpoint.
  bool Usable(std::size_t p) const { return usable_[p]; }

  std::size_t n_ = 0;
  std::vector<bool> safe_;          // per position 0..n
  std::vector<bool> usable_;        // per position 0..n
  std::vector<std::size_t> chars_;  // per message
  std::vector<bool> summary_;       // per message
  std::vector<bool> calls_tool_;    // per message: holds a tool call or an opaque call
  std::vector<std::size_t> turns_;  // turn starts, ascending
  std::vector<Pair> pairs_;         // answered pairs across messages and within one
  std::vector<recap::UncertainCall> uncertain_;
};

// The reducer's outcome, as ReduceResult reports it, with the messages as plain values.
struct ReferenceReduction {
  std::vector<recap::Message> messages;
  std::vector<std::size_t> clipped;  // ascending
  std::size_t clips = 0;
  std::size_t before_chars = 0;
  std::size_t after_chars = 0;
  int rounds = 0;
  bool fits = false;
};

// SPEC R6.2–R6.4 on `t` towards `target_chars`.
ReferenceReduction ReferenceReduce(const recap::Transcript& t, std::size_t target_chars);

// ---- Reporting helpers ----

// The first difference between two messages in any field ("" when equal).
std::string MessageDifference(const recap::Message& expected, const recap::Message& actual);

// A compact dump, one line per message: position, role, flags (S checkpoint, T turn start),
// id, characters, and parts: T<chars> text, C(id,name,<arg chars>) call, R(call_id,[items])
// result, O(kind[,call|result id],<payload chars>) opaque. At most `max_messages` lines (the
// first and last halves when longer).
std::string DumpTranscript(const recap::Transcript& t, std::size_t max_messages = 400);

std::string DescribeDecision(const recap::CutDecision& d);
std::string DescribeOptions(const recap::CutOptions& o);

}  // namespace recap_spec

#endif  // RECAP_TESTS_SUPPORT_SPEC_REFERENCE_H_
