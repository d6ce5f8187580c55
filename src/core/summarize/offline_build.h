// The parts of the offline summarizer that its files share: the caps that keep a checkpoint
// bounded, one-line text (offline_lines.cc), the paths found in text (offline_paths.cc), what
// the span's tool calls state (offline_calls.cc), and the checkpoint built section by section
// (offline_sections.cc) and fitted to the output budget (offline_fit.cc) for the Provider
// (offline_summarizer.cc). They are in namespace offline_build, not offline_reading.h's
// `offline`: a unity build compiles these files in one translation unit with
// offline_reading.cc, whose own file-private helpers have the same names (Trim).
#ifndef RECAP_SUMMARIZE_OFFLINE_BUILD_H_
#define RECAP_SUMMARIZE_OFFLINE_BUILD_H_

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_set>
#include <vector>

#include "recap/checkpoint.h"
#include "recap/ledger.h"
#include "recap/provider.h"
#include "recap/transcript.h"

#include "json/json_util.h"
#include "reading/transcript_reading.h"

namespace recap {
inline namespace v0 {
namespace offline_build {

using jsonutil::Json;

// Caps keep a checkpoint bounded however long the session: each compaction merges the prior
// and extends it, so without them the lists would grow for ever. The latest entries win.
constexpr std::size_t kMaxInstructions = 50;
constexpr std::size_t kMaxAccomplished = 50;
constexpr std::size_t kMaxDiscoveries = 30;
constexpr std::size_t kMaxFiles = 30;
constexpr std::size_t kMaxNextSteps = 20;          // the first unfinished items of the to-do list
constexpr std::size_t kInstructionChars = 300;     // an older request, once the budget is spent
constexpr std::size_t kInstructionsBudget = 6000;  // the newest requests are kept whole within
constexpr std::size_t kGoalChars = 1000;
constexpr std::size_t kStateChars = 1000;
constexpr std::size_t kLineChars = 200;        // a main argument or an error's first line
constexpr std::size_t kPriorTextChars = 2000;  // a text-only prior, kept as a discovery
constexpr std::size_t kMaxPathBytes = 260;

// ---- One-line text (offline_lines.cc) -------------------------------------------------------

// `s` without the whitespace around it.
std::string_view Trim(std::string_view s);

// One line of at most `max` code points: runs of whitespace become one space, a longer text
// ends with "…". (The reducer's marker would be noise in a one-line entry.) Reads no more of
// `text` than the line needs: a code point is at most four bytes (an invalid byte counts as
// one), so 4 * max + 4 bytes of the flattened line settle whether it is longer than `max`.
std::string OneLine(std::string_view text, std::size_t max);

// The line of a tool's error output that says what went wrong: a traceback's last line (the
// exception), else the first line that mentions an error or failure (test runners print
// banners first), else the first line.
std::string ErrorLine(std::string_view text);

// ---- Paths (offline_paths.cc) ---------------------------------------------------------------

bool IsPathChar(char ch);
bool HasLetter(std::string_view s);
// True when `line` is a diff header ("diff --git a/x b/x", "--- a/x", "+++ b/x").
bool IsDiffHeader(std::string_view line);
// The paths in `text`, appended to `out` in order.
void ScanPaths(std::string_view text, std::vector<std::string>& out);
bool IsPathKey(std::string_view key);

// ---- What the span's tool calls state (offline_calls.cc) ------------------------------------

// A tool call of the span, with what its arguments and its result state.
struct CallSeen {
  std::string_view name;
  std::string main;
  std::string target;  // the file it works on, else its main argument: "the same call"
  reading::ToolKind kind;
  bool writes = false;
  std::vector<std::string> files;      // the files it reads or writes
  const ToolResult* result = nullptr;  // nullptr: its outcome is not in this span
  bool flagged = false;                // the result says it failed (flag, exit code, leading error)
  bool mentions = false;               // the result mentions an error
  bool rejected = false;               // the person refused it
  bool failed = false;                 // flagged, or mentions an error and the next call retried it
  Json doc;                            // the parsed arguments of a to-do call (kept for those only)
};

// "The same call": the same tool on the same target.
inline std::string SameCall(const CallSeen& c) { return std::string(c.name) + '\x1f' + c.target; }

// The text items of a tool result joined by newlines: a view of the single text when there is
// one (the usual case), else joined into `scratch`.
std::string_view ResultText(const ToolResult& r, std::string& scratch);

// The calls of the span in order, each with its result when the span holds it; `mentioned`
// gets every path any call's arguments hold.
std::vector<CallSeen> ReadCalls(const Transcript& span, std::unordered_set<std::string>& mentioned);

// ---- The checkpoint (offline_sections.cc, offline_fit.cc) -----------------------------------

// The checkpoint of a span, section by section (SPEC §5's order).
Checkpoint Build(const SummarySource& source);

// R17: what the span's ledger holds that the checkpoint does not, written in the section it
// belongs to, the ledger's own words: files as relevant files, open to-dos as next steps,
// failures not resolved as discoveries. Requests (and their identifiers) are WriteInstructions'
// own, clipped to its lines; what they lack is the guard's.
// In ledger order, while the checkpoint stays within `max_chars` (the rest is the guard's).
void KeepLedger(const Ledger& ledger, std::size_t max_chars, Checkpoint& cp);

// Makes the checkpoint's JSON at most `max_chars` code points, giving up first what matters
// least: the older half of the finished work, as often as it takes, then of the errors met,
// of the files (the prior's come first) and of the user's instructions; then the current
// state and the goal are cut to one shorter line. The newest entries of every list stay
// longest. Returns the JSON, which is still longer than `max_chars` only when even the
// smallest checkpoint is.
std::string FitCheckpoint(Checkpoint& cp, std::size_t max_chars);

}  // namespace offline_build
}  // namespace v0
}  // namespace recap

#endif  // RECAP_SUMMARIZE_OFFLINE_BUILD_H_
