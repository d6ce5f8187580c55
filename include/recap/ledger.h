/// @file
/// recap — the ledger of a compaction (SPEC R17): what a checkpoint must keep, whoever writes it.
///
/// For every compaction recap reads the span it summarizes, deterministically and without a
/// model, into a ledger of must-keep artifacts: each request the person made (in their own
/// words, the wrappers of known harnesses removed), each identifier they typed (tokens with a
/// digit, URLs, paths), each file a call of the span wrote or edited, the newest to-do list's
/// open items, and each failure no later call of the span retried successfully; after the
/// ledger of the checkpoint being replaced, carried forward, so that a fact survives any number
/// of compactions. After the summarizer returns, the guard checks the checkpoint against the
/// ledger and adds what it lacks, verbatim, in a "Kept by recap" section
/// (docs/checkpoint-format.md).
///
/// The Compactor does all of this itself (compaction.ledger in docs/configuration.md); these
/// functions are public so that a host can see what a span holds (Plan::ledger shows it too)
/// and test its own summarizer against it. Pure functions; thread-safe.
#ifndef RECAP_LEDGER_H_
#define RECAP_LEDGER_H_

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "recap/export.h"
#include "recap/transcript.h"

namespace recap {
inline namespace v0 {

/// What a ledger entry is, from the most important kind to the least.
enum class LedgerKind : std::uint8_t {
  kRequest,     ///< what the person asked, in their words
  kIdentifier,  ///< a token the person typed: a URL, a path, a token with a digit
  kFile,        ///< a file a call of the span wrote or edited
  kTodo,        ///< an open item of the newest to-do list
  kFailure,     ///< a call that failed and was not retried successfully
};
/// How many kinds there are: the size of the arrays indexed by LedgerKind.
inline constexpr std::size_t kLedgerKinds = 5;

/// "request", "identifier", "file", "todo", "failure".
RECAP_EXPORT const char* LedgerKindName(LedgerKind kind) noexcept;

/// One must-keep artifact of a span.
struct LedgerEntry {
  LedgerKind kind = LedgerKind::kRequest;  ///< what it is
  std::string text;                        ///< the artifact, verbatim
  std::string message_id;                  ///< the message it came from
};

/// A span's must-keep artifacts (BuildLedger).
struct RECAP_EXPORT Ledger {
  std::vector<LedgerEntry> entries;  ///< deduplicated, in the order the span states them
  /// Entries let go because the ledger outgrew its bound (BuildLedger's `max_chars`): the
  /// oldest of the least important kinds, counted by kind, with the first and the last message
  /// they came from. The guard reports them as left out.
  std::array<std::size_t, kLedgerKinds> pruned{};
  /// @{
  /// The first and the last message the entries let go came from.
  std::string pruned_from, pruned_to;
  /// @}
  /// How many of `entries` are of `kind`.
  std::size_t Count(LedgerKind kind) const noexcept;
};

/// A request longer than this (in code points) is clipped, with a marker saying how much.
inline constexpr std::size_t kLedgerRequestMaxChars = 2000;

/// The ledger of messages [begin, end) of `transcript`, after `carried`'s entries. Checkpoints
/// and other recap-made messages (flagged summary) are not read: what they hold is `carried`.
/// `max_chars` (0: no bound) bounds the entries' text: over it, the oldest entries of the least
/// important kinds (identifiers, then failures, to-dos, files, requests) are let go and counted
/// in `pruned`, so that a span of millions of messages, or a session compacted a thousand
/// times, keeps a ledger of bounded size. The Compactor bounds it at 8 x compaction.ledger's
/// maxChars: more than a checkpoint's section could ever show.
RECAP_EXPORT Ledger BuildLedger(const Transcript& transcript, std::size_t begin, std::size_t end,
                                const Ledger& carried = {}, std::size_t max_chars = 0);

/// Whether `checkpoint` (its text: Markdown or JSON) already carries `entry`: its text found in
/// the checkpoint's, both read without case, Markdown emphasis or runs of white space; a path
/// also by its last two components (a checkpoint may write it relative); a failure also by what
/// failed (its command or path, without the tool's name and how it failed); a to-do item
/// without its status.
RECAP_EXPORT bool LedgerCarries(std::string_view checkpoint, const LedgerEntry& entry);

/// Per kind: what the ledger had, what the checkpoint kept by itself, what the guard added and
/// what it left out for room.
struct LedgerTally {
  /// @{
  /// Entries: had (total), kept by the checkpoint itself, added by the guard, left out.
  std::size_t total = 0, kept = 0, added = 0, left_out = 0;
  /// @}
};

/// What the guard adds to a checkpoint (R17.2).
struct LedgerGuard {
  std::vector<LedgerEntry> added;                 ///< in the ledger's order
  std::vector<LedgerEntry> left_out;              ///< in the ledger's order
  std::array<LedgerTally, kLedgerKinds> tally{};  ///< by LedgerKind
  /// The body of the "Kept by recap" section in Markdown (by kind, "### Requests" …, then what
  /// was left out and from which messages); empty when the checkpoint carries everything.
  std::string section;
};

/// The entries of `ledger` that `checkpoint` does not carry, within `max_chars` characters of
/// section: over it, the oldest entries of the least important kinds are left out first
/// (identifiers, then failures, to-dos, files, requests). With `recall_tool` (the host offers
/// the model recap_recall, R18.2), the line that counts what was left out says how to get it.
RECAP_EXPORT LedgerGuard GuardCheckpoint(std::string_view checkpoint, const Ledger& ledger,
                                         std::size_t max_chars, bool recall_tool = false);

}  // namespace v0
}  // namespace recap

#endif  // RECAP_LEDGER_H_
