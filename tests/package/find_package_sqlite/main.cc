// A consumer of the installed recap::sqlite: opens a store in a new file, runs a compaction
// through the Compactor with the offline summarizer, reopens the file and checks what it holds.
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <string>

#include "recap/compactor.h"
#include "recap/sqlite/sqlite_store.h"

namespace {
int failures = 0;
void Check(bool ok, const char* what, int line) {
  if (!ok) {
    std::fprintf(stderr, "sqlite consumer: check failed (line %d): %s\n", line, what);
    ++failures;
  }
}
#define CHECK(cond) Check((cond), #cond, __LINE__)
}  // namespace

int main() {
  char dir[] = "/tmp/recap-sqlite-consumer-XXXXXX";
  if (!mkdtemp(dir)) return 2;
  const std::string path = std::string(dir) + "/sessions.db";
  {
    auto store = recap::OpenSqliteSessionStore(path);
    if (!store.ok()) {
      std::fprintf(stderr, "%s\n", store.status().ToString().c_str());
      return 1;
    }
    auto config = recap::Config::FromJson(R"({"compaction": {"keepTurns": 1}})");
    CHECK(config.ok());
    auto compactor = recap::Compactor::Create(*config, nullptr, *store);
    CHECK(compactor.ok());
    for (int turn = 0; turn < 3; ++turn) {
      CHECK(
          (*store)->Append("s", recap::Message::UserText("question " + std::to_string(turn))).ok());
      CHECK((*store)
                ->Append("s", recap::Message::AssistantText("answer " + std::to_string(turn)))
                .ok());
    }
    auto outcome = (*compactor)->Compact("s");
    CHECK(outcome.ok() && outcome->compacted);
  }
  auto reopened = recap::OpenSqliteSessionStore(path);
  CHECK(reopened.ok());
  if (reopened.ok()) {
    auto state = (*reopened)->Load("s");
    CHECK(state.ok() && state->transcript.size() == 3 && state->transcript[0].summary);
    auto history = (*reopened)->History("s");
    CHECK(history.ok() && history->size() == 7);
  }
  std::remove(path.c_str());
  std::remove((path + "-wal").c_str());
  std::remove((path + "-shm").c_str());
  rmdir(dir);
  if (failures) return 1;
  std::printf("sqlite consumer: ok (schema version %d)\n", recap::SqliteSchemaVersion());
  return 0;
}
