// The rules every database store checks the same way, with the same messages: what an append,
// a compaction and a recovery must look like before they touch a table, and the conflict and
// duplicate-id statuses (SPEC R8; session_store.h and the conformance suite pin them down).
// Private to recap: no installed header declares it and no library exports it. Its code is
// compiled into recap::core and, in a shared build, into each adapter that uses it, hidden in
// each (src/core/CMakeLists.txt, recap_seam).
#ifndef RECAP_SRC_CORE_RECAP_INTERNAL_STORE_RULES_H_
#define RECAP_SRC_CORE_RECAP_INTERNAL_STORE_RULES_H_

#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "recap/message.h"
#include "recap/session_store.h"
#include "recap/status.h"
#include "recap/transcript.h"

#include "recap_internal/prepared_source.h"

namespace recap {
inline namespace v0 {
namespace internal {

// `"<s>"`, as the stores' messages quote names and ids (invalid UTF-8 repaired: a status
// message is always valid UTF-8).
std::string QuotedName(const std::string& s);

// An empty session id is kInvalidArgument.
Status CheckSessionName(const std::string& session);

// Session ids starting with this are recap's command-line tool's: it keeps a session's
// instructions in a companion session (docs/cli.md), which no host may write.
inline constexpr const char* kReservedSessionPrefix = "recap-cli.";

// For what writes a session (an append, a new session, a commit): CheckSessionName, and an id
// that is not valid UTF-8 or (unless `allow_reserved`, the command line's own stores) starts
// with kReservedSessionPrefix is kInvalidArgument.
Status CheckWrittenSessionName(const std::string& session, bool allow_reserved);

// The messages of an append as the store will write them: empty ids filled with fresh ones,
// UTF-8 repaired and sizes measured (Transcript::Append). Two messages of the batch with one
// id are kInvalidArgument.
Result<Transcript> PrepareAppend(std::vector<Message> messages);

// Message `i` of an append or of a new session that is pinned but cannot be (PinnedProblem).
Status PinnedStatus(const std::string& what, std::size_t i, const std::string& problem);

// Message `i` of an append (`what`: "the append") or of a new session whose calls share `id`.
Status RepeatedCallIdStatus(const std::string& what, std::size_t i, const std::string& id);

// The messages of one NewSession in order — its vector, then its source — each prepared as
// PrepareAppend prepares an append's (a fresh id when empty, UTF-8 repaired, measured, a
// message whose calls share an id refused), and a message id given twice refused. Only given
// ids are remembered, so a million messages with fresh ids cost no memory here. A source that
// is a PreparedMessageSource (recap_internal/prepared_source.h) has done that work already,
// and its messages are not measured or checked again.
class NewSessionReader {
 public:
  explicit NewSessionReader(NewSession& session) : session_(session) {}
  // Sets *out and *chars to the next message and returns true; false at the end.
  Result<bool> Next(Message* out, std::size_t* chars);
  std::size_t count() const { return count_; }

 private:
  NewSession& session_;
  std::size_t next_in_vector_ = 0;
  std::size_t count_ = 0;
  std::unordered_set<std::string> given_ids_;
  PreparedMessageSource* prepared_ = nullptr;  // the source, when it is one
  bool plain_ = false;                         // the source is not one
};

// The checks of a CreateSessions call that need no table: at least one session, names valid
// and each given once.
Status CheckNewSessions(const std::vector<NewSession>& sessions, bool allow_reserved);

// A session of a CreateSessions call that exists already (version `version`).
Status SessionExists(const std::string& session, std::uint64_t version);

// A session of a CreateSessions call that got no message.
Status NewSessionEmpty(const std::string& session);

// An append's message `i` whose id an active message already has.
Status AppendIdTaken(const std::string& session, std::size_t i, const std::string& id);

// A commit's added message (`which`: "the checkpoint", "injected message 2", …) whose id an
// active message or another message of the commit already has.
Status CommitIdTaken(const std::string& session, const std::string& which, const std::string& id);

// What to call added message k of a compaction (0: the checkpoint) in messages.
std::string CompactionAddedName(const CompactionCommit& commit, std::size_t k);

// kConflict when `expected` is not `now` (the session's version); OK otherwise.
Status CheckExpectedVersion(const std::string& session, std::uint64_t expected, std::uint64_t now);

// A session's row in a database store's `sessions` table, as both the SQLite and the
// PostgreSQL store read it (docs/sqlite-store.md, docs/postgres.md).
struct SessionRow {
  std::int64_t id = 0;
  std::uint64_t version = 0;
  std::uint64_t rewrite_version = 0;  // the last version that did more than append
  std::int64_t compactions = 0;
  std::int64_t reductions = 0;
  std::int64_t recoveries = 0;
  std::int64_t undos = 0;
  std::uint64_t turns = 0;         // turn starts stored (HistoryEntry::turn)
  std::int64_t next_position = 0;  // the PostgreSQL store keeps it in the row; SQLite asks
};

// The opening every commit of a database store shares, once the store has found (and
// locked) the session's row inside its transaction: the row when the session is at
// `expected`, kConflict when another writer moved it, and NothingToCommitAgainst for a session
// never written.
Result<SessionRow> CommitAgainst(const std::string& session, std::uint64_t expected,
                                 const std::optional<SessionRow>& row);

// kInvalidArgument when LoadChanges asks for a version beyond the session's.
Status CheckSinceVersion(const std::string& session, std::uint64_t since, std::uint64_t version);

// A commit against version 0 of a session never written: there is nothing to replace.
Status NothingToCommitAgainst(const std::string& session);

// Where a compaction's messages go, the same in every store: `added` (the checkpoint, then
// the injected messages) and the position of the first kept message. The kept messages take
// the places just before the messages after the span, which ends at `last_position`; `added`
// follows them.
struct CompactionPlacement {
  Transcript added;
  std::int64_t first_position = 0;
};
CompactionPlacement PlaceCompaction(const CompactionCommit& commit, std::int64_t last_position);

// The checks of a compaction that need no table: something replaced, a summary checkpoint.
Status CheckCompactionShape(const std::string& session, const CompactionCommit& commit);

// A compaction's replaced[i] that is not an active message of the session.
Status ReplacedNotActive(const std::string& session, std::size_t i, const std::string& id);

// A compaction's replaced[i] that is active but not the active message at place i.
Status ReplacedOutOfOrder(const std::string& session, std::size_t i, const std::string& id,
                          const std::string& active_id);

// A compaction that replaces more messages than the session has active.
Status ReplacesTooMany(const std::string& session, std::size_t replaced, std::size_t active);

// The span of a compaction against the session's leading active messages (`leading`: their
// ids in order, at most commit.kept.size() + commit.replaced.size() of them; `is_active`: true
// for any active id). OK when they are exactly `kept` and `replaced`, each in its own order;
// otherwise the error names the first entry that does not fit. Also refused: an id in both
// lists, or given twice.
Status CheckCompactionSpan(const std::string& session, const CompactionCommit& commit,
                           const std::vector<std::string>& leading, std::size_t active_count,
                           const std::function<bool(const std::string&)>& is_active);

// A reduction with no replacements.
Status NoReplacements(const std::string& session);

// CommitUndo cannot take back `commit` ("compaction:3") of the session, because `why`.
Status UndoImpossible(const std::string& session, const std::string& commit,
                      const std::string& why);
// CommitUndo would restore a message whose id an active message appended since holds.
Status UndoTaken(const std::string& session, const std::string& commit, const std::string& id);

// Replacement i of a reduction whose id is not an active message of the session.
Status ReplacementNotActive(const std::string& session, std::size_t i, const std::string& id);

// Replacement i of a reduction that replaces a message an earlier one already replaces.
Status ReplacedTwice(const std::string& session, std::size_t i, const std::string& id);

// Where a recovery's results go, against the active transcript's ids in order.
struct RecoveryPlan {
  Transcript results;  // the recovered results, measured, in the commit's order
  // anchor id -> the indexes of the results that follow it, in order
  std::unordered_map<std::string, std::vector<std::size_t>> after;
};
Result<RecoveryPlan> PlanRecovery(const std::string& session,
                                  const std::vector<std::string>& active_ids,
                                  const RecoveryCommit& commit);

}  // namespace internal
}  // namespace v0
}  // namespace recap

#endif  // RECAP_SRC_CORE_RECAP_INTERNAL_STORE_RULES_H_
