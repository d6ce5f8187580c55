/// @file
/// recap — the tiered tail reducer (SPEC R6): clips oversized content in the messages a
/// compaction kept, until the transcript fits a character target.
///
/// The reducer works in rounds of decreasing caps:
///
/// ```text
///   round             1      2      3      4      5
///   tool results    8000   4096   2048   1024    512
///   other content  16000   8192   4096   2048   1024   (texts, tool-call arguments)
/// ```
///
/// In each round the messages with content over the round's cap are clipped largest message
/// first (ties: earlier position first), and the reducer stops the moment the transcript fits.
/// After the last round it stops whether or not it fits.
///
/// A clipped text keeps its beginning, ends with kTruncationMarker and is at most the cap in
/// code points, marker included; a UTF-8 sequence is never split. Tool-call arguments that are
/// valid JSON stay valid JSON: long string values inside them are clipped, not the JSON text.
/// Only content changes — roles, ids, tool-call ids, order and message boundaries stay
/// identical. Checkpoint messages (Message::summary), pinned messages (Message::pinned), a
/// leading system message (the session's instructions, R12.1) and opaque items are never
/// touched.
/// Clipping is idempotent: a text already within a cap is left alone, so a clipped text is
/// never clipped again to the same cap and the marker never appears twice.
///
/// Pure functions; thread-safe.
#ifndef RECAP_TAIL_REDUCER_H_
#define RECAP_TAIL_REDUCER_H_

#include <array>
#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

#include "recap/export.h"
#include "recap/transcript.h"

namespace recap {
inline namespace v0 {

/// U+2026 followed by " [truncated by context budget]": 31 code points.
inline constexpr std::string_view kTruncationMarker = "\xE2\x80\xA6 [truncated by context budget]";

/// The caps on tool results, in code points, round by round (see above).
inline constexpr std::array<std::size_t, 5> kToolResultCaps = {8000, 4096, 2048, 1024, 512};
/// The caps on other content (texts, tool-call arguments), in code points, round by round.
inline constexpr std::array<std::size_t, 5> kContentCaps = {16000, 8192, 4096, 2048, 1024};

/// The smallest target the reducer aims for (R6.1).
inline constexpr std::size_t kMinReductionTarget = 4000;

/// R6.1: max(4000, max_context_chars - instruction_chars), never negative.
RECAP_EXPORT std::size_t ReductionTarget(std::size_t max_context_chars,
                                         std::size_t instruction_chars) noexcept;

/// What ReduceTail did.
struct ReduceResult {
  Transcript transcript;             ///< the reduced transcript; shares unchanged messages
  std::vector<std::size_t> clipped;  ///< positions of the messages that were cut, ascending
  std::size_t clips = 0;             ///< clip operations (a message may be cut in several rounds)
  std::size_t before_chars = 0;      ///< the transcript's characters before
  std::size_t after_chars = 0;       ///< and after
  int rounds = 0;                    ///< cap rounds that ran (0 when it already fit)
  bool fits = false;                 ///< after_chars <= target
};

/// Reduces `t` towards `target_chars` (R6.2–R6.4). When `t` already fits, the result is `t`
/// unchanged with rounds == 0.
RECAP_EXPORT ReduceResult ReduceTail(const Transcript& t, std::size_t target_chars);

/// `text` clipped to at most `cap` code points, marker included; `text` itself when it is
/// within the cap. A cap smaller than the marker yields the marker cut to the cap, never a
/// broken sequence.
RECAP_EXPORT std::string ClipText(std::string_view text, std::size_t cap);

/// Tool-call arguments clipped towards `cap` code points. Valid JSON stays valid JSON with its
/// structure intact: the longest string values are clipped (each ending with the marker) until
/// the text fits, or until no string can be shortened further. Text that is not valid JSON is
/// clipped like ClipText, and so is JSON nested deeper than 1,000 levels, which recap does not
/// parse (SPEC R13.1). Returns `arguments` unchanged when within the cap.
RECAP_EXPORT std::string ClipArguments(std::string_view arguments, std::size_t cap);

}  // namespace v0
}  // namespace recap

#endif  // RECAP_TAIL_REDUCER_H_
