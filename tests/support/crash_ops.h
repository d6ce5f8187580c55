// The deterministic sequence of writes that the crash test (tests/sqlite/test_sqlite_crash.cc) runs
// in a child process it kills at random instants (tests/support/sqlite_crash_child_main.cc),
// and replays on the in-memory store to know what the database must hold.
//
// Op k (k = 0, 1, ...) is a function of the seed, k and the active transcript before it — which
// is itself a function of the seed and k — so the child, restarted after a kill, continues from
// the database's state: every op moves the session version by exactly one, so the next op's
// index is the session's version. The ops:
//   * appends of 1-3 messages (ids "a<k>-<j>"): texts of 30-400 code points with multi-byte
//     characters, now and then one of 5,000-30,000 (several database pages), sometimes an
//     opaque signed-thinking item;
//   * every 6th op (k % 6 == 5), when the transcript has 4+ messages, a compaction of a prefix
//     into a checkpoint "c<k>";
//   * k % 6 == 2, when there is a message to shorten, a reduction replacing one non-checkpoint
//     message by a shorter copy with the same id;
//   * k % 12 == 0, when the transcript holds a checkpoint (so that some compaction is not undone
//     yet), an undo of the newest compaction or reduction (R18.3).
// Header-only and free of Catch2 so that the child can use it.
#ifndef RECAP_TESTS_SUPPORT_CRASH_OPS_H_
#define RECAP_TESTS_SUPPORT_CRASH_OPS_H_

#include <cstdint>
#include <string>
#include <vector>

#include "recap/message.h"
#include "recap/session_store.h"
#include "recap/status.h"
#include "recap/transcript.h"

namespace recap::testing::crash {

inline constexpr const char* kSession = "crash";

inline std::uint64_t SplitMix(std::uint64_t x) noexcept {
  x += 0x9E3779B97F4A7C15ULL;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ULL;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBULL;
  return x ^ (x >> 31);
}

class OpRng {
 public:
  explicit OpRng(std::uint64_t seed) : state_(seed) {}
  std::uint64_t Next() noexcept { return state_ = SplitMix(state_); }
  // In [0, n); modulo bias is irrelevant here, determinism is what matters.
  std::uint64_t Below(std::uint64_t n) noexcept { return n == 0 ? 0 : Next() % n; }

 private:
  std::uint64_t state_;
};

// `code_points` code points of valid UTF-8: ASCII words with 2-, 3- and 4-byte characters.
inline std::string OpText(OpRng& rng, std::size_t code_points) {
  static const char* const kPieces[] = {"a",
                                        "b",
                                        "c",
                                        "d",
                                        "e",
                                        " ",
                                        " ",
                                        "\n",
                                        "\xC3\xA9",
                                        "\xC3\x9F",
                                        "\xE4\xB8\xAD",
                                        "\xE2\x82\xAC",
                                        "\xF0\x9F\x98\x80",
                                        "\xF0\x9D\x84\x9E",
                                        "\"",
                                        "\\"};
  std::string s;
  s.reserve(code_points * 2);
  for (std::size_t i = 0; i < code_points; ++i)
    s += kPieces[rng.Below(sizeof kPieces / sizeof kPieces[0])];
  return s;
}

enum class OpKind { kAppend, kCompact, kReduce, kUndo };

struct Op {
  OpKind kind = OpKind::kAppend;
  std::vector<Message> append;
  CompactionCommit compaction;
  ReductionCommit reduction;
  UndoCommit undo;
  // Ids this op brings into the history (appended messages, the checkpoint) and how many
  // history entries it adds.
  std::vector<std::string> new_ids;
  std::size_t new_history_entries = 0;
};

inline std::size_t CodePoints(const std::string& s) {
  std::size_t n = 0;
  for (unsigned char c : s) n += (c & 0xC0) != 0x80;
  return n;
}

inline Op MakeOp(std::uint64_t seed, std::uint64_t k, const Transcript& t) {
  OpRng rng(SplitMix(seed ^ SplitMix(k * 0x100000001B3ULL + 7)));
  Op op;
  const std::string ks = std::to_string(k);
  if (k > 0 && k % 12 == 0) {
    for (const Message& m : t) {
      if (!m.summary) continue;
      op.kind = OpKind::kUndo;
      op.undo.expected_version = k;
      return op;
    }
  }
  if (k % 6 == 5 && t.size() >= 4) {
    op.kind = OpKind::kCompact;
    const std::size_t n = t.size() / 2 + static_cast<std::size_t>(rng.Below(t.size() / 4 + 1));
    for (std::size_t i = 0; i < n && i + 1 < t.size(); ++i)
      op.compaction.replaced.push_back(t[i].id);
    op.compaction.expected_version = k;
    op.compaction.checkpoint =
        Message::UserText("Checkpoint of op " + ks + ": " + OpText(rng, 200));
    op.compaction.checkpoint.summary = true;
    op.compaction.checkpoint.id = "c" + ks;
    op.compaction.reason = "auto";
    op.new_ids.push_back(op.compaction.checkpoint.id);
    op.new_history_entries = 1;
    return op;
  }
  if (k % 6 == 2) {
    std::vector<std::size_t> candidates;
    for (std::size_t i = 0; i < t.size(); ++i) {
      if (!t[i].summary && CodePoints(JoinedText(t[i])) > 20) candidates.push_back(i);
    }
    if (!candidates.empty()) {
      const Message& original = t[candidates[rng.Below(candidates.size())]];
      Message copy = original.role == Role::kAssistant ? Message::AssistantText("reduced@" + ks)
                                                       : Message::UserText("reduced@" + ks);
      copy.role = original.role;
      copy.id = original.id;
      op.kind = OpKind::kReduce;
      op.reduction.expected_version = k;
      op.reduction.replacements.push_back(std::move(copy));
      op.new_history_entries = 1;
      return op;
    }
  }
  op.kind = OpKind::kAppend;
  const std::size_t count = 1 + static_cast<std::size_t>(rng.Below(3));
  for (std::size_t j = 0; j < count; ++j) {
    const std::size_t size = rng.Below(16) == 0 ? 5000 + rng.Below(25000) : 30 + rng.Below(370);
    Message m = j % 2 == 0 ? Message::UserText(OpText(rng, size))
                           : Message::AssistantText(OpText(rng, size));
    if (j % 2 == 1 && rng.Below(4) == 0) {
      m.parts.insert(m.parts.begin(),
                     Opaque{"thinking",
                            "{\"thinking\":\"step " + std::to_string(rng.Below(1000000)) +
                                "\",\"signature\":\"sig-" + ks + "\"}",
                            OpaqueLink::kNone, ""});
    }
    m.id = "a" + ks + "-" + std::to_string(j);
    op.new_ids.push_back(m.id);
    op.append.push_back(std::move(m));
  }
  op.new_history_entries = count;
  return op;
}

// Runs op k against the store; returns the new version (k + 1 when all is well).
inline Result<std::uint64_t> ApplyOp(SessionStore& store, const Op& op) {
  switch (op.kind) {
    case OpKind::kAppend: return store.AppendMessages(kSession, op.append);
    case OpKind::kCompact: return store.CommitCompaction(kSession, op.compaction);
    case OpKind::kReduce: return store.CommitReduction(kSession, op.reduction);
    case OpKind::kUndo: {
      Result<UndoOutcome> undone = store.CommitUndo(kSession, op.undo);
      if (!undone.ok()) return undone.status();
      if (!undone->undone) return Status::Internal("op: nothing to undo");
      return undone->version;
    }
  }
  return Status::Internal("unknown op kind");
}

}  // namespace recap::testing::crash

#endif  // RECAP_TESTS_SUPPORT_CRASH_OPS_H_
