// R18.3 as a second process would meet it: one process runs a host's turns (append, Prepare
// with automatic compaction by the offline summarizer) while another undoes compactions of the
// same session through its own Compactor, on one SQLite file. Every call either succeeds or is
// refused with kConflict (the other came first); afterwards the session is whole: every message
// ever appended is in its history exactly once, the active transcript has unique ids, each tool
// call with its result, and a fresh Compactor prepares it.
#include <unistd.h>

#include <chrono>
#include <iostream>
#include <set>
#include <string>
#include <thread>

#include <catch2/catch.hpp>
#include <sys/wait.h>

#include "recap/compactor.h"
#include "recap/sqlite/sqlite_store.h"

#include "support/ok.h"
#include "support/temp_dir.h"

using namespace recap;
using recap::testing::Ok;
using recap::testing::TempDir;

namespace {

Config Small() {
  Config c;
  c.limits.max_context_chars = 4000;
  c.compaction.keep_turns = 1;
  return c;
}

constexpr int kTurns = 40;

// "<ok> <conflict> <other>" counts of the host's turns.
int Host(const std::string& path) {
  auto store = OpenSqliteSessionStore(path);
  if (!store.ok()) return 3;
  auto compactor = Compactor::Create(Small(), nullptr, *store);
  if (!compactor.ok()) return 3;
  int other = 0;
  for (int turn = 0; turn < kTurns; ++turn) {
    const std::string n = std::to_string(turn);
    Status s = (*store)
                   ->AppendMessages(
                       "s", {Message::UserText("turn " + n + " " + std::string(300, 'u')),
                             Message::AssistantCalls({ToolCall{"c" + n, "read", "{}", {}}}),
                             Message::ToolOutput("c" + n, "result " + n + std::string(200, 'r')),
                             Message::AssistantText("done " + n)})
                   .status();
    if (!s.ok()) ++other;
    Result<Prepared> p = (*compactor)->Prepare("s", {});
    if (!p.ok() && p.status().code() != StatusCode::kConflict) ++other;
  }
  return other == 0 ? 0 : 1;
}

}  // namespace

TEST_CASE("R18.3 an undo racing a second process's turns leaves the session whole") {
  TempDir dir("recap-undo-race");
  const std::string path = dir.File("s.db");
  { Ok(OpenSqliteSessionStore(path)); }  // created before forking
  const pid_t pid = ::fork();
  REQUIRE(pid >= 0);
  if (pid == 0) ::_exit(Host(path));

  int undone = 0;
  int conflicts = 0;
  {
    auto store = Ok(OpenSqliteSessionStore(path));
    auto compactor = Ok(Compactor::Create(Small(), nullptr, store));
    for (int i = 0; i < 200; ++i) {
      Result<UncompactOutcome> u = compactor->Uncompact("s");
      if (u.ok()) {
        undone += u->undone ? 1 : 0;
      } else {
        INFO(u.status().ToString());
        // Refused: the other process came first, or has not written the session yet.
        CHECK((u.status().code() == StatusCode::kConflict ||
               (u.status().code() == StatusCode::kNotFound && undone == 0)));
        conflicts += u.status().code() == StatusCode::kConflict ? 1 : 0;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
    }
  }
  int status = 0;
  REQUIRE(::waitpid(pid, &status, 0) == pid);
  REQUIRE(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == 0);
  std::cerr << "R18.3 undo race: " << undone << " undone, " << conflicts
            << " refused as conflicts\n";

  // The host's last turns compacted, so the undos had work whenever they ran after it.
  CHECK(undone > 0);

  auto store = Ok(OpenSqliteSessionStore(path));
  const std::vector<HistoryEntry> history = Ok(store->History("s"));
  // Every appended message exactly once (checkpoints and reduced copies aside).
  std::multiset<std::string> appended;
  for (const HistoryEntry& e : history) {
    if (e.message.summary || e.replaced_by.rfind("reduction:", 0) == 0) continue;
    appended.insert(JoinedText(e.message) + "#" + e.message.id);
  }
  CHECK(appended.size() == 4 * kTurns);
  for (const std::string& a : appended) CHECK(appended.count(a) == 1);
  const SessionState state = Ok(store->Load("s"));
  std::set<std::string> active;
  for (const Message& m : state.transcript) CHECK(active.insert(m.id).second);
  CHECK(FindUncertainToolCalls(state.transcript).empty());
  auto compactor = Ok(Compactor::Create(Small(), nullptr, store));
  const Prepared p = Ok(compactor->Prepare("s", {}));
  CHECK(p.orphan_results.empty());
}
