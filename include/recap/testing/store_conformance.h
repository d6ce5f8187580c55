/// @file
/// recap::testing — the SessionStore conformance suite: what every SessionStore must do (SPEC
/// R6.5, R8, R12, R13), written once and run against each implementation: recap's own three
/// stores, and a host's own (docs/adapters.md). It is a Catch2 v2 test helper: link
/// recap::testing (find_package(recap COMPONENTS testing), which finds Catch2 2.13) and
/// Catch2::Catch2WithMain.
///
/// A test file instantiates it for one store with one line:
///
/// ```cpp
///   RECAP_SESSION_STORE_CONFORMANCE_TESTS("in-memory store",
///                                         [] { return recap::NewInMemorySessionStore(); })
/// ```
///
/// which defines one Catch2 TEST_CASE per check below, named "<store name>: R… what it checks".
/// The factory is called once or more per test case and must return a fresh, empty store each
/// time (for a database store: a new file in a temporary directory). It may be any expression
/// convertible to SessionStoreFactory; put one that contains a top-level comma (a lambda with two
/// captures) in parentheses, as for any macro argument.
///
/// The checks call the store only through the SessionStore interface and compare messages by
/// their native JSON encoding, so nothing in them depends on the in-memory store. Beyond the
/// interface's comments they pin down these choices, which every store must share:
///
///  * an empty session id is rejected with kInvalidArgument;
///  * appending nothing writes nothing and returns the current version;
///  * each successful write moves the version by exactly one (an append of N messages too);
///  * a message id may appear only once among a session's active messages: an append or a
///    commit that would repeat one fails with kInvalidArgument and changes nothing;
///  * a commit whose expected_version differs from the session's fails with kConflict; a
///    commit against the current version that does not fit the transcript (unknown ids, a
///    `replaced` that is not the transcript's prefix, a checkpoint not flagged summary, nothing
///    to do) fails with kInvalidArgument — the caller saw this transcript, so it is a bug, not
///    a race — and in both cases nothing changes;
///  * LoadChanges(v) answers appended_only exactly when only appends happened after v, and a
///    `v` beyond the current version is kInvalidArgument;
///  * History() retires messages with replaced_by "compaction:<n>" / "reduction:<n>", n
///    counting that session's compactions / reductions from 1;
///  * CreateSessions creates sessions at version 1; a message whose calls share an id is
///    refused by it and by AppendMessages;
///  * CommitUndo retires what it takes back with replaced_by "undo:<n>", n counting that
///    session's undos from 1.
#ifndef RECAP_TESTING_STORE_CONFORMANCE_H_
#define RECAP_TESTING_STORE_CONFORMANCE_H_

#include <functional>
#include <memory>

#include <catch2/catch.hpp>

#include "recap/session_store.h"

namespace recap {
/// The component `recap::testing`: helpers for a host's tests of its own parts.
namespace testing {

/// Makes a fresh, empty store each time it is called (see above).
using SessionStoreFactory = std::function<std::shared_ptr<SessionStore>()>;

/// The checks of the conformance suite, one function per check: each runs against the stores
/// `make` returns and fails through Catch2's assertions. RECAP_SESSION_STORE_CONFORMANCE_TESTS
/// defines a test case for each.
namespace conformance {
/// R8: a session never written is empty at version 0.
void EmptySession(const SessionStoreFactory& make);
/// R8.1: appends keep order and move the version by one.
void AppendKeepsOrder(const SessionStoreFactory& make);
/// R8: ids are assigned, kept and unique among active messages.
void MessageIds(const SessionStoreFactory& make);
/// R8: LoadChanges returns only what was appended since.
void LoadChangesAppendedOnly(const SessionStoreFactory& make);
/// R8: LoadChanges returns the whole transcript after a rewrite.
void LoadChangesAfterRewrite(const SessionStoreFactory& make);
/// R8.1: a compaction commit replaces the prefix and keeps it readable as compacted.
void Compaction(const SessionStoreFactory& make);
/// R6.5: a reduction commit replaces in place and keeps originals.
void Reduction(const SessionStoreFactory& make);
/// R8.3: a recovery commit inserts results after their anchors.
void Recovery(const SessionStoreFactory& make);
/// R8.2: a commit against a stale version conflicts and changes nothing.
void StaleVersionConflicts(const SessionStoreFactory& make);
/// R8.2: two writers commit against one version: exactly one wins.
void ConcurrentCommitsOneWins(const SessionStoreFactory& make);
/// R8: concurrent appends and incremental reads stay consistent.
void ConcurrentAppendsAndReads(const SessionStoreFactory& make);
/// R8.4: sessions are isolated.
void Isolation(const SessionStoreFactory& make);
/// R6.5: the history holds every stored message exactly once.
void HistoryKeepsEverything(const SessionStoreFactory& make);
/// R13.1: ForEachHistoryEntry hands over History() one entry at a time and stops at the visitor's
/// error.
void ForEachHistoryEntryIsHistory(const SessionStoreFactory& make);
/// R8.1: a bad commit is rejected and changes nothing.
void BadCommitsChangeNothing(const SessionStoreFactory& make);
/// R13.6: CreateSessions stores new sessions whole, from a source.
void CreateSessions(const SessionStoreFactory& make);
/// R13.1: CreateSessions writes many messages and 2 MiB ones exactly, in order, after another
/// session's.
void CreateSessionsLargeAndMany(const SessionStoreFactory& make);
/// R12.1: a compaction keeps the instructions and pinned messages it is told to, first, as they
/// were.
void CompactionKeepsInstructionsAndPinned(const SessionStoreFactory& make);
/// R12.1: only user and system messages without tool parts can be pinned, and they come back
/// pinned.
void PinnedOnlyWhereItCanStay(const SessionStoreFactory& make);
/// R12.5: what a Compactor learned is kept beside the session, outside its versions.
void LearnedStateIsKept(const SessionStoreFactory& make);
/// R13.6: a refused CreateSessions stores nothing of any session.
void CreateSessionsAllOrNothing(const SessionStoreFactory& make);
/// R13: a message whose calls share an id is refused.
void RepeatedCallIdsRefused(const SessionStoreFactory& make);
/// R13.6: two creators of one new session: exactly one wins.
void ConcurrentCreatesOneWins(const SessionStoreFactory& make);
/// R15.2: a compaction of the leading span commits after later appends and leaves them after the
/// checkpoint.
void CompactionAfterAppends(const SessionStoreFactory& make);
/// R18.1: a search finds retired messages by words, id and turn, best first.
void SearchFindsWhatWasRetired(const SessionStoreFactory& make);
/// R18.1: a search never returns another session's messages.
void SearchIsolatesSessions(const SessionStoreFactory& make);
/// R18.1: search syntax and huge terms are plain text, never errors.
void SearchTakesAnyText(const SessionStoreFactory& make);
/// R18.3: an undo takes back the newest compaction or reduction, then the one before.
void UndoTakesBackTheNewestRewrite(const SessionStoreFactory& make);
/// R18.3: an undo puts kept messages back where they were.
void UndoKeepsKeptMessagesInPlace(const SessionStoreFactory& make);
/// R18.3: an undo that cannot restore changes nothing.
void UndoRefusesWhatItCannotRestore(const SessionStoreFactory& make);
}  // namespace conformance

}  // namespace testing
}  // namespace recap

#define RECAP_STORE_CONFORMANCE_CASE_(store_name, factory, title, check)                  \
  TEST_CASE(store_name ": " title, "[conformance]") {                                     \
    ::recap::testing::conformance::check(::recap::testing::SessionStoreFactory(factory)); \
  }

/// Defines one Catch2 TEST_CASE per check of the suite for the store `factory` makes (a
/// SessionStoreFactory), each named "<store name>: R… what it checks" (see above).
#define RECAP_SESSION_STORE_CONFORMANCE_TESTS(store_name, factory)                                 \
  RECAP_STORE_CONFORMANCE_CASE_(store_name, factory,                                               \
                                "R8 a session never written is empty at version 0", EmptySession)  \
  RECAP_STORE_CONFORMANCE_CASE_(store_name, factory,                                               \
                                "R8.1 appends keep order and move the version by one",             \
                                AppendKeepsOrder)                                                  \
  RECAP_STORE_CONFORMANCE_CASE_(store_name, factory,                                               \
                                "R8 ids are assigned, kept and unique among active messages",      \
                                MessageIds)                                                        \
  RECAP_STORE_CONFORMANCE_CASE_(store_name, factory,                                               \
                                "R8 LoadChanges returns only what was appended since",             \
                                LoadChangesAppendedOnly)                                           \
  RECAP_STORE_CONFORMANCE_CASE_(store_name, factory,                                               \
                                "R8 LoadChanges returns the whole transcript after a rewrite",     \
                                LoadChangesAfterRewrite)                                           \
  RECAP_STORE_CONFORMANCE_CASE_(store_name, factory,                                               \
                                "R8.1 a compaction commit replaces the prefix and keeps it "       \
                                "readable as compacted",                                           \
                                Compaction)                                                        \
  RECAP_STORE_CONFORMANCE_CASE_(store_name, factory,                                               \
                                "R6.5 a reduction commit replaces in place and keeps originals",   \
                                Reduction)                                                         \
  RECAP_STORE_CONFORMANCE_CASE_(                                                                   \
      store_name, factory, "R8.3 a recovery commit inserts results after their anchors", Recovery) \
  RECAP_STORE_CONFORMANCE_CASE_(store_name, factory,                                               \
                                "R8.2 a commit against a stale version conflicts and changes "     \
                                "nothing",                                                         \
                                StaleVersionConflicts)                                             \
  RECAP_STORE_CONFORMANCE_CASE_(store_name, factory,                                               \
                                "R8.2 two writers commit against one version: exactly one wins",   \
                                ConcurrentCommitsOneWins)                                          \
  RECAP_STORE_CONFORMANCE_CASE_(store_name, factory,                                               \
                                "R8 concurrent appends and incremental reads stay consistent",     \
                                ConcurrentAppendsAndReads)                                         \
  RECAP_STORE_CONFORMANCE_CASE_(store_name, factory, "R8.4 sessions are isolated", Isolation)      \
  RECAP_STORE_CONFORMANCE_CASE_(store_name, factory,                                               \
                                "R6.5 the history holds every stored message exactly once",        \
                                HistoryKeepsEverything)                                            \
  RECAP_STORE_CONFORMANCE_CASE_(store_name, factory,                                               \
                                "R13.1 ForEachHistoryEntry hands over History() one entry at a "   \
                                "time and stops at the visitor's error",                           \
                                ForEachHistoryEntryIsHistory)                                      \
  RECAP_STORE_CONFORMANCE_CASE_(store_name, factory,                                               \
                                "R8.1 a bad commit is rejected and changes nothing",               \
                                BadCommitsChangeNothing)                                           \
  RECAP_STORE_CONFORMANCE_CASE_(store_name, factory,                                               \
                                "R13.6 CreateSessions stores new sessions whole, from a source",   \
                                CreateSessions)                                                    \
  RECAP_STORE_CONFORMANCE_CASE_(store_name, factory,                                               \
                                "R13.1 CreateSessions writes many messages and 2 MiB ones "        \
                                "exactly, in order, after another session's",                      \
                                CreateSessionsLargeAndMany)                                        \
  RECAP_STORE_CONFORMANCE_CASE_(store_name, factory,                                               \
                                "R13.6 a refused CreateSessions stores nothing of any session",    \
                                CreateSessionsAllOrNothing)                                        \
  RECAP_STORE_CONFORMANCE_CASE_(store_name, factory,                                               \
                                "R12.1 a compaction keeps the instructions and pinned messages "   \
                                "it is told to, first, as they were",                              \
                                CompactionKeepsInstructionsAndPinned)                              \
  RECAP_STORE_CONFORMANCE_CASE_(store_name, factory,                                               \
                                "R12.1 only user and system messages without tool parts can be "   \
                                "pinned, and they come back pinned",                               \
                                PinnedOnlyWhereItCanStay)                                          \
  RECAP_STORE_CONFORMANCE_CASE_(store_name, factory,                                               \
                                "R12.5 what a Compactor learned is kept beside the session, "      \
                                "outside its versions",                                            \
                                LearnedStateIsKept)                                                \
  RECAP_STORE_CONFORMANCE_CASE_(store_name, factory,                                               \
                                "R13 a message whose calls share an id is refused",                \
                                RepeatedCallIdsRefused)                                            \
  RECAP_STORE_CONFORMANCE_CASE_(store_name, factory,                                               \
                                "R13.6 two creators of one new session: exactly one wins",         \
                                ConcurrentCreatesOneWins)                                          \
  RECAP_STORE_CONFORMANCE_CASE_(store_name, factory,                                               \
                                "R15.2 a compaction of the leading span commits after later "      \
                                "appends and leaves them after the checkpoint",                    \
                                CompactionAfterAppends)                                            \
  RECAP_STORE_CONFORMANCE_CASE_(store_name, factory,                                               \
                                "R18.1 a search finds retired messages by words, id and turn, "    \
                                "best first",                                                      \
                                SearchFindsWhatWasRetired)                                         \
  RECAP_STORE_CONFORMANCE_CASE_(store_name, factory,                                               \
                                "R18.1 a search never returns another session's messages",         \
                                SearchIsolatesSessions)                                            \
  RECAP_STORE_CONFORMANCE_CASE_(store_name, factory,                                               \
                                "R18.1 search syntax and huge terms are plain text, never errors", \
                                SearchTakesAnyText)                                                \
  RECAP_STORE_CONFORMANCE_CASE_(store_name, factory,                                               \
                                "R18.3 an undo takes back the newest compaction or reduction, "    \
                                "then the one before",                                             \
                                UndoTakesBackTheNewestRewrite)                                     \
  RECAP_STORE_CONFORMANCE_CASE_(store_name, factory,                                               \
                                "R18.3 an undo puts kept messages back where they were",           \
                                UndoKeepsKeptMessagesInPlace)                                      \
  RECAP_STORE_CONFORMANCE_CASE_(store_name, factory,                                               \
                                "R18.3 an undo that cannot restore changes nothing",               \
                                UndoRefusesWhatItCannotRestore)

#endif  // RECAP_TESTING_STORE_CONFORMANCE_H_
