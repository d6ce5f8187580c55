// The ledger of a compaction's span (SPEC R17.1): the artifacts a checkpoint must keep,
// read from the span's messages alone, deterministically and without a model — each request
// the person made (in their own words, the wrappers of known harnesses removed), each
// identifier they typed (tokens with a digit, URLs, paths), each file a call of the span wrote
// or edited, the newest to-do list's open items, and each failure no later call of the span
// retried successfully; after the ledger of the checkpoint being replaced, carried forward.
// Deduplicated, in order, each entry with the id of the message it came from.
//
// The guard that adds to a checkpoint what it lacks of its ledger (R17.2) and the events that
// report it (R17.3) are built on this; not yet wired into compaction (issue 37).
#ifndef RECAP_SRC_CORE_CHECKPOINT_LEDGER_H_
#define RECAP_SRC_CORE_CHECKPOINT_LEDGER_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "recap/transcript.h"

namespace recap {
inline namespace v0 {

enum class LedgerKind : std::uint8_t {
  kRequest,     // what the person asked, in their words
  kIdentifier,  // a token the person typed: a URL, a path, a token with a digit
  kFile,        // a file a call of the span wrote or edited
  kTodo,        // an open item of the newest to-do list
  kFailure,     // a call that failed and was not retried successfully
};

// "request", "identifier", "file", "todo", "failure".
const char* LedgerKindName(LedgerKind kind) noexcept;

struct LedgerEntry {
  LedgerKind kind = LedgerKind::kRequest;
  std::string text;
  std::string message_id;  // the message it came from
};

struct Ledger {
  std::vector<LedgerEntry> entries;
  std::size_t Count(LedgerKind kind) const noexcept;
};

// A request longer than this (in code points) is clipped, with a marker saying how much.
inline constexpr std::size_t kLedgerRequestMaxChars = 2000;

// The ledger of messages [begin, end) of `transcript`, after `carried`'s entries.
Ledger BuildLedger(const Transcript& transcript, std::size_t begin, std::size_t end,
                   const Ledger& carried = {});

// Whether `checkpoint` (its text: Markdown or JSON) already carries `entry`: its text found in
// the checkpoint's, both read without case, Markdown emphasis or runs of white space; a path
// also by its last two components (a checkpoint may write it relative); a failure also by what
// failed (its command or path, without the tool's name and how it failed); a to-do item
// without its status.
bool LedgerCarries(std::string_view checkpoint, const LedgerEntry& entry);

// What the guard adds to a checkpoint (R17.2): the entries of `ledger` that `checkpoint` does
// not carry, within `max_chars` (the oldest entries of the least important kinds left out
// first: identifiers, then failures, to-dos, files, requests), and per kind what it had, what
// the checkpoint kept by itself, what was added and what was left out.
struct LedgerGuard {
  struct Tally {
    std::size_t total = 0, kept = 0, added = 0, left_out = 0;
  };
  std::vector<LedgerEntry> added;     // in the ledger's order
  std::vector<LedgerEntry> left_out;  // in the ledger's order
  Tally tally[5];                     // by LedgerKind
  std::string section;                // "Kept by recap" in Markdown; empty when nothing added
};
LedgerGuard GuardCheckpoint(std::string_view checkpoint, const Ledger& ledger,
                            std::size_t max_chars);

namespace ledger_internal {

// The identifiers of a person's words, in order, each once.
std::vector<std::string> Identifiers(std::string_view words);

}  // namespace ledger_internal

}  // namespace v0
}  // namespace recap

#endif  // RECAP_SRC_CORE_CHECKPOINT_LEDGER_H_
