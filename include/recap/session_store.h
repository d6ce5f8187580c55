/// @file
/// recap — SessionStore: where sessions live (SPEC R6.5, R8).
///
/// A session is an ordered list of messages. The *active transcript* is what is sent to the
/// model; the *history* is everything ever stored for the session, including messages that a
/// compaction summarized or the reducer replaced — those stay readable, marked compacted
/// (R6.5, R8.1), so nothing a session contained is ever lost.
///
/// Every change moves the session's *version* forward by at least one. The three commits
/// that rewrite the active transcript — a compaction, a reduction and a recovery — take the
/// version the caller based its work on and are all-or-nothing: if the session changed
/// meanwhile they fail with StatusCode::kConflict and change nothing (R8.2); otherwise the
/// whole commit becomes visible at once, and a crash at any instant leaves either the old
/// state or the new one (R8.1). Appends are not version-checked: a host appends as its agent
/// produces messages.
///
/// Sessions are isolated: no call for one session reads or changes another's (R8.4). A
/// session that was never written reads as empty with version 0.
///
/// Implementations: NewInMemorySessionStore() below (the reference: simple, exact, for tests
/// and short-lived hosts), the SQLite store of the `recap::sqlite` component, and the
/// PostgreSQL store of the `recap::postgres` component (sessions shared by many hosts).
/// Writing one is described in docs/adapters.md; the conformance tests in tests/ check one.
///
/// Errors every method shares (a store of a host's own must give the same codes; the
/// conformance suite, recap/testing/store_conformance.h, checks stores against them):
/// ```text
///   kInvalidArgument   an empty session id; a message the rules below refuse. Nothing stored.
///   kConflict          the session changed since the version a commit was based on, or a
///                      session CreateSessions should create exists already. Nothing stored.
///   kIOError, kUnavailable, kCorruption, kDeadlineExceeded
///                      the store's own medium failed (a full disk, a lost connection, a damaged
///                      file, a lock held too long). Nothing stored; the message says what to do.
/// ```
///
/// Thread safety: implementations must allow concurrent calls from several threads, for the
/// same session or different ones.
#ifndef RECAP_SESSION_STORE_H_
#define RECAP_SESSION_STORE_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "recap/export.h"
#include "recap/message.h"
#include "recap/safe_boundary.h"
#include "recap/status.h"
#include "recap/transcript.h"

namespace recap {
inline namespace v0 {

/// A session as SessionStore::Load reads it.
struct SessionState {
  Transcript transcript;      ///< the active messages, in order
  std::uint64_t version = 0;  ///< 0 for a session never written
  std::string learned;        ///< what a Compactor saved with SaveLearned (R12.5); may be empty
};

/// What changed since a version the caller already has (see LoadChanges).
struct SessionChanges {
  std::uint64_t version = 0;  ///< the session's version now
  /// true: only appends happened since; `appended` holds them in order.
  /// false: something else changed (a commit by another writer); `transcript` holds the
  /// whole active transcript.
  bool appended_only = true;
  std::vector<Message> appended;  ///< what was appended, in order, when appended_only
  Transcript transcript;          ///< the whole active transcript, when not appended_only
  std::string learned;  ///< the session's learned state now (SaveLearned), whatever changed
};

/// A compaction (R8.1): the first `replaced.size()` active messages — whose ids must be exactly
/// `replaced`, in order — are marked compacted, and `checkpoint` followed by `injected` take
/// their place. With `kept` (R12.1), the span is kept.size() + replaced.size() messages and the
/// kept ones stay, first (see below).
struct CompactionCommit {
  std::uint64_t expected_version = 0;  ///< the version the compaction was based on
  std::vector<std::string> replaced;   ///< the ids of the messages it replaces, in order
  Message checkpoint;                  ///< flagged summary
  std::vector<Message> injected;       ///< context plugins add after the checkpoint (R9.1)
  std::string reason;                  ///< "auto", "manual", "budget", "overflow"
  /// Messages among the leading ones that stay active, verbatim and in their order, before the
  /// checkpoint (R12.1): the session's instructions and pinned messages. The leading
  /// kept.size() + replaced.size() active messages are exactly these and `replaced`, each list
  /// in its own order, kept ones anywhere among the replaced. The transcript afterwards is:
  /// kept, checkpoint, injected, then the messages after the span.
  std::vector<std::string> kept;
};

/// A reduction (R6.5): each replacement takes the place of the active message with the same
/// id; the original stays in the history, marked compacted.
struct ReductionCommit {
  std::uint64_t expected_version = 0;  ///< the version the reduction was based on
  std::vector<Message> replacements;   ///< the reduced copies, each with its original's id
};

/// An acknowledged recovery (R8.3): each result is inserted right after the active message
/// with id `after`, in the order given.
struct RecoveredResult {
  std::string after;  ///< the id of the active message it goes after
  Message result;     ///< the recorded result
};
/// The results an acknowledged recovery inserts (SessionStore::CommitRecovery).
struct RecoveryCommit {
  std::uint64_t expected_version = 0;    ///< the version the recovery was based on
  std::vector<RecoveredResult> results;  ///< in the order they are inserted
};

/// Whether a message of the history is in the active transcript.
enum class HistoryState : std::uint8_t {
  kActive,     ///< in the active transcript
  kCompacted,  ///< summarized by a compaction, or replaced by a reduced copy
};

/// A message of a session's history (SessionStore::History).
struct HistoryEntry {
  std::uint64_t seq = 0;  ///< the store's own order: every stored message gets the next number
  Message message;        ///< the message as it was stored
  HistoryState state = HistoryState::kActive;  ///< active, or retired

  /// What retired it: "compaction:<n>", "reduction:<n>", or "undo:<n>" (a checkpoint or reduced
  /// copy that CommitUndo took back); empty if active.
  std::string replaced_by;
  /// The person's turn it belongs to (R18.1): how many turn starts (IsTurnStart) the session had
  /// stored up to it, itself included — 0 for what came before the first. A reduced copy has its
  /// original's turn; a checkpoint, the turn it was written in.
  std::uint64_t turn = 0;
};

/// What SearchHistory looks for (R18.1). A message matches when its id is in `ids`, or, with
/// `terms` or a turn range given, when it is within the range (when given) and holds one of the
/// terms (when given). Nothing asked matches nothing.
struct HistorySearch {
  /// Words as a person types them. A term with punctuation inside ("parse_config", "app.py")
  /// matches that run of words; punctuation alone, or a term without a letter or digit, matches
  /// nothing. Case is ignored; the scan and the SQLite store also ignore the accents of Latin
  /// letters, the PostgreSQL store does not (docs/embedding.md, "Getting it back").
  std::vector<std::string> terms;
  std::vector<std::string> ids;  ///< every stored copy of these messages matches, whatever its text
  std::uint64_t first_turn = 0;  ///< a turn range, inclusive; last_turn 0: none
  std::uint64_t last_turn = 0;   ///< the range's last turn; 0: no range
  bool include_active = false;   ///< active messages too; by default only retired ones
  std::size_t limit = 20;        ///< at most this many entries, best first
};

/// A message SearchHistory found.
struct HistoryHit {
  HistoryEntry entry;  ///< the message and what the history says of it
  /// Relevance to `terms` (larger is better; the stores' own scales, not comparable across
  /// stores); 0 for a message matched by id or turn alone.
  double score = 0;
};

/// An undo (R18.3): the newest compaction or reduction of the session that is not undone yet is
/// taken back — what it retired is active again, in its places, and what it added (the
/// checkpoint and injected messages, the reduced copies) is retired as "undo:<n>".
struct UndoCommit {
  std::uint64_t expected_version = 0;  ///< the version the undo was based on
};

/// What SessionStore::CommitUndo took back.
struct UndoOutcome {
  bool undone = false;        ///< false: the session has no compaction or reduction left to undo
  std::string commit;         ///< what was undone: "compaction:<n>" or "reduction:<n>"
  std::string reason;         ///< a compaction's reason ("auto", "manual", …); empty otherwise
  std::size_t restored = 0;   ///< messages active again
  std::size_t retired = 0;    ///< messages the commit had added, retired now
  std::uint64_t version = 0;  ///< the session's version afterwards
};

/// The messages of a session being created (SessionStore::CreateSessions), handed over one at a
/// time, so that creating a session of millions of messages never holds all of them at once
/// (the `recap import` command streams a file's messages into the store this way).
class RECAP_EXPORT MessageSource {
 public:
  virtual ~MessageSource();
  /// Sets *out to the next message and returns true, or returns false at the end. A Status that
  /// is not OK abandons the whole CreateSessions call: nothing of it is stored, and that Status
  /// is what CreateSessions returns.
  virtual Result<bool> Next(Message* out) = 0;
};

/// One session for CreateSessions: `messages`, then whatever `source` gives (when set; read
/// once, in order, after the sessions listed before it).
struct NewSession {
  std::string session;              ///< the session's id
  std::vector<Message> messages;    ///< its first messages
  MessageSource* source = nullptr;  ///< the rest, or null; the caller's, read during the call
};

/// Where sessions live: the interface every store implements (see above).
class RECAP_EXPORT SessionStore {
 public:
  virtual ~SessionStore();

  /// The active transcript and version.
  virtual Result<SessionState> Load(const std::string& session) = 0;

  /// What changed since `since_version`. Cheap when only appends happened: it costs what was
  /// appended, not the session's size. This is what keeps Compactor::Prepare O(new messages).
  /// kInvalidArgument when `since_version` is beyond the session's version.
  virtual Result<SessionChanges> LoadChanges(const std::string& session,
                                             std::uint64_t since_version) = 0;

  /// Appends messages at the end of the active transcript; a message with an empty id gets a
  /// fresh one. Returns the new version. A message whose calls share an id (RepeatedCallId) is
  /// refused with kInvalidArgument naming the id, and so is the whole append. Also refused, with
  /// kInvalidArgument and nothing stored: a message whose id an active message of the session
  /// already has, or that appears twice in the append; a `pinned` message that is not a user or
  /// system message without tool parts.
  virtual Result<std::uint64_t> AppendMessages(const std::string& session,
                                               std::vector<Message> messages) = 0;
  /// One message; calls AppendMessages.
  Result<std::uint64_t> Append(const std::string& session, Message message);

  /// Creates sessions that were never written, each with all its messages, as one write: either
  /// every one of them is created whole, or nothing changes — a crash at any instant leaves none
  /// of them or all of them (SPEC R13.6). "Never written" is checked inside that write, so of two
  /// callers creating the same session at once exactly one succeeds and the other gets
  /// StatusCode::kConflict naming the session, with nothing of its call stored. A session must
  /// get at least one message and may appear only once in the call; its messages follow the rules
  /// of AppendMessages (an empty id gets a fresh one; ids unique within the session). Returns each
  /// session's new version, in the order given. This is how a host (or `recap import`) stores a
  /// conversation and its companions together, e.g. a transcript and its instructions.
  virtual Result<std::vector<std::uint64_t>> CreateSessions(std::vector<NewSession> sessions) = 0;

  /// @name The commits that rewrite the active transcript
  /// The three commits below are all-or-nothing and version-checked: kConflict when the session
  /// is no longer at the commit's expected version (another writer came first; reload and
  /// decide again), kInvalidArgument against a session never written (nothing to replace).
  /// They return the new version.
  /// @{

  /// Retires the leading span of the active transcript (`kept`, then `replaced`, each exactly
  /// the active messages at those places, in order) and puts the checkpoint, the injected
  /// messages and `kept` in its place; the replaced messages stay in the history, compacted.
  /// kInvalidArgument, nothing changed, when: nothing is replaced or the checkpoint is not a
  /// summary; an id of `replaced` is not active ("not active"), or is active but not at its
  /// place ("out of order"); the commit replaces more messages than are active; an id is in
  /// both lists or twice in one; an added message has the id of an active one ("id taken").
  virtual Result<std::uint64_t> CommitCompaction(const std::string& session,
                                                 const CompactionCommit& commit) = 0;
  /// Replaces active messages by reduced copies, in place; the originals stay in the history,
  /// compacted. kInvalidArgument, nothing changed, when: there is no replacement; a replacement
  /// names a message that is not active ("not active"); two replacements name the same message
  /// ("replaced twice").
  virtual Result<std::uint64_t> CommitReduction(const std::string& session,
                                                const ReductionCommit& commit) = 0;
  /// Inserts the recorded results of uncertain tool calls, each after the active message it
  /// names. kInvalidArgument, nothing changed, when: there is no result; a result goes after a
  /// message that is not active; a result's id is taken (by an active message or another
  /// result).
  virtual Result<std::uint64_t> CommitRecovery(const std::string& session,
                                               const RecoveryCommit& commit) = 0;
  /// @}

  /// Takes back the newest compaction or reduction not undone yet (R18.3), all-or-nothing and
  /// version-checked like the commits above. The messages it retired take their places again;
  /// kept messages go back where they were; messages appended or recovered since stay after the
  /// restored ones, in their order; what it added is retired ("undo:<n>") and stays in the
  /// history. A second call takes back the one before. Returns undone == false, changing nothing,
  /// when nothing is left to undo. kFailedPrecondition, nothing changed, when the commit cannot
  /// be taken back (it was written by a recap that did not record its places; a message appended
  /// since took the id of one it would restore). The default refuses with kFailedPrecondition: a
  /// store of a host's own has no undo unless it implements this.
  virtual Result<UndoOutcome> CommitUndo(const std::string& session, const UndoCommit& commit);

  /// The history's messages that match `search` (R18.1), best first: those named by id (in the
  /// order of `ids`, each id's copies in store order), then those matching the terms, most
  /// relevant first (ties: newer first), or, with a turn range and no terms, in store order.
  /// Never more than search.limit; nothing of another session. The default walks the history
  /// (ForEachHistoryEntry) and ranks by how many of the terms a message holds, then how often; the
  /// SQLite and PostgreSQL stores use their full-text indexes (docs/embedding.md, "Getting it
  /// back", says how each ranks).
  virtual Result<std::vector<HistoryHit>> SearchHistory(const std::string& session,
                                                        const HistorySearch& search);

  /// Every message ever stored for the session, in store order (seq), active or compacted.
  virtual Result<std::vector<HistoryEntry>> History(const std::string& session) = 0;

  /// The session ids the store holds, sorted.
  virtual Result<std::vector<std::string>> ListSessions() = 0;

  /// The tool calls of the active transcript that have no result (R3.7). The default loads
  /// the transcript and scans it.
  virtual Result<std::vector<UncertainCall>> UncertainToolCalls(const std::string& session);

  /// Saves what a Compactor learned about the session (R12.5: a window lowered by an overflow
  /// report, the calibration, the no-progress pause), an opaque text that Load and LoadChanges
  /// return in `learned`; empty clears it. It is advice, not content: it does not move the
  /// session's version, conflicts with nothing (the last save wins), and may be written with
  /// relaxed durability. A session never written keeps nothing. The default keeps nothing
  /// either (a store of a host's own without it works; what was learned is then relearned
  /// after a restart); recap's stores keep it.
  virtual Status SaveLearned(const std::string& session, const std::string& learned);

  /// Hands `visit` what History() returns, one entry at a time and in the same order, so that a
  /// session of millions of messages is never held at once: the SQLite store reads each entry
  /// from the file as it goes (the default calls History() and hands its entries over). A Status
  /// from `visit` that is not OK stops the walk and is returned as is. `visit` runs while the
  /// store is busy reading and must not call the store. A session never written has no entries.
  virtual Status ForEachHistoryEntry(const std::string& session,
                                     const std::function<Status(HistoryEntry&&)>& visit);
};

/// The in-memory reference store. Everything is lost when the last reference goes.
RECAP_EXPORT std::shared_ptr<SessionStore> NewInMemorySessionStore();

}  // namespace v0
}  // namespace recap

#endif  // RECAP_SESSION_STORE_H_
