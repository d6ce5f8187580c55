// CreateSqliteSessions (SPEC R13.1, R8.1, R8.2): a new database built aside and given its name
// when complete. What it writes reads back as CreateSessions would have written it; a build
// that fails, or a process killed in the middle, leaves no file; a file another process
// creates meanwhile gets the sessions (or refuses a session it has); an existing file is
// written in place.
#include <signal.h>
#include <sqlite3.h>
#include <unistd.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <functional>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include <catch2/catch.hpp>
#include <sys/wait.h>

#include "recap/codec.h"
#include "recap/session_store.h"
#include "recap/sqlite/sqlite_store.h"

#include "support/generator.h"
#include "support/ok.h"
#include "support/temp_dir.h"

using namespace recap;
using recap::testing::NamesIn;
using recap::testing::Ok;
using recap::testing::TempDir;

namespace {

std::vector<std::string> Encoded(const std::vector<Message>& messages) {
  std::vector<std::string> out;
  for (const Message& m : messages) out.push_back(Ok(native::EncodeMessage(m)));
  return out;
}

std::vector<std::string> Encoded(const Transcript& t) { return Encoded(t.ToVector()); }

// Hands over `messages` one at a time; calls `at(i)` before message i when set, and fails
// with `failure` at message `fail_at`.
class ListSource : public MessageSource {
 public:
  explicit ListSource(std::vector<Message> messages) : messages_(std::move(messages)) {}
  std::function<void(std::size_t)> at;
  std::size_t fail_at = SIZE_MAX;
  Status failure = Status::InvalidArgument("message 7 of the file is not a message");

  Result<bool> Next(Message* out) override {
    if (next_ == fail_at) return failure;
    if (next_ == messages_.size()) return false;
    if (at) at(next_);
    *out = messages_[next_++];
    return true;
  }

 private:
  std::vector<Message> messages_;
  std::size_t next_ = 0;
};

std::vector<Message> Generated(std::uint64_t seed, std::size_t rounds) {
  recap_test::GeneratorOptions options;
  options.min_turns = static_cast<int>(rounds);
  options.max_turns = static_cast<int>(rounds);
  return recap_test::GenerateMessages(seed, options);
}

std::string JournalMode(const std::string& path) {
  sqlite3* db = nullptr;
  REQUIRE(sqlite3_open_v2(path.c_str(), &db, SQLITE_OPEN_READONLY, nullptr) == SQLITE_OK);
  sqlite3_stmt* st = nullptr;
  REQUIRE(sqlite3_prepare_v2(db, "PRAGMA journal_mode", -1, &st, nullptr) == SQLITE_OK);
  REQUIRE(sqlite3_step(st) == SQLITE_ROW);
  std::string mode = reinterpret_cast<const char*>(sqlite3_column_text(st, 0));
  sqlite3_finalize(st);
  sqlite3_close(db);
  return mode;
}

}  // namespace

TEST_CASE("R13.1 a new database built aside holds what CreateSessions would have written") {
  TempDir dir;
  const std::string path = dir.File("new.db");
  const std::vector<Message> first = Generated(11, 40);
  const std::vector<Message> second = Generated(12, 5);
  INFO("messages: " << first.size() << " and " << second.size());
  ListSource source(first);
  std::vector<NewSession> sessions(2);
  sessions[0].session = "streamed";
  sessions[0].source = &source;
  sessions[1].session = "listed";
  sessions[1].messages = second;
  // While it is built, nothing is at the path, and nothing beside it.
  source.at = [&](std::size_t i) {
    if (i == first.size() / 2) CHECK(NamesIn(dir.path()).empty());
  };
  const std::vector<std::uint64_t> versions = Ok(CreateSqliteSessions(path, std::move(sessions)));
  CHECK(versions == std::vector<std::uint64_t>{1, 1});
  CHECK(NamesIn(dir.path()) == std::set<std::string>{"new.db"});
  // A WAL database from the start (the header's format versions, bytes 18 and 19, are 2), so
  // that its first opening changes no byte of it.
  {
    std::ifstream in(path, std::ios::binary);
    char header[20] = {};
    in.read(header, sizeof header);
    CHECK(std::string(header, 16) == std::string("SQLite format 3\0", 16));
    CHECK(int(header[18]) == 2);
    CHECK(int(header[19]) == 2);
  }

  // The same sessions, message by message, as the in-memory store creates them; usable as any
  // store file: appended to, then in WAL mode.
  std::shared_ptr<SessionStore> reference = NewInMemorySessionStore();
  std::vector<NewSession> again(2);
  again[0].session = "streamed";
  again[0].messages = first;
  again[1].session = "listed";
  again[1].messages = second;
  Ok(reference->CreateSessions(std::move(again)));
  {
    std::shared_ptr<SessionStore> store = Ok(OpenSqliteSessionStore(path));
    for (const char* name : {"streamed", "listed"}) {
      INFO("session " << name);
      const SessionState built = Ok(store->Load(name));
      const SessionState expected = Ok(reference->Load(name));
      CHECK(built.version == 1);
      CHECK(built.transcript.chars() == expected.transcript.chars());
      // The in-memory store gave fresh ids of its own to messages without one.
      std::vector<Message> a = built.transcript.ToVector();
      std::vector<Message> b = expected.transcript.ToVector();
      REQUIRE(a.size() == b.size());
      for (std::size_t i = 0; i < a.size(); ++i) {
        CHECK(!a[i].id.empty());
        if (b[i].id.rfind("m_", 0) == 0) a[i].id = b[i].id;
      }
      CHECK(Encoded(a) == Encoded(b));
      CHECK(Ok(store->History(name)).size() == b.size());
    }
    Ok(store->AppendMessages("listed", {Message::UserText("one more")}));
    CHECK(Ok(store->Load("listed")).transcript.size() == second.size() + 1);
  }
  CHECK(JournalMode(path) == "wal");
}

TEST_CASE("R8.1 a build that fails leaves no file, and no file beside it") {
  TempDir dir;
  const std::string path = dir.File("failed.db");
  ListSource source(Generated(21, 30));
  source.fail_at = 60;
  std::vector<NewSession> sessions(1);
  sessions[0].session = "s";
  sessions[0].source = &source;
  Result<std::vector<std::uint64_t>> r = CreateSqliteSessions(path, std::move(sessions));
  CHECK(r.status().code() == StatusCode::kInvalidArgument);
  CHECK(r.status().message() == "message 7 of the file is not a message");
  CHECK(NamesIn(dir.path()).empty());

  // Full: the database's size cap is reached half way. The same: an error, and no file.
  SqliteStoreOptions capped;
  capped.max_page_count = 40;
  ListSource big(Generated(22, 200));
  std::vector<NewSession> too_big(1);
  too_big[0].session = "s";
  too_big[0].source = &big;
  r = CreateSqliteSessions(path, std::move(too_big), capped);
  CHECK(r.status().code() == StatusCode::kResourceExhausted);
  CHECK(r.status().message().find("max_page_count") != std::string::npos);
  CHECK(NamesIn(dir.path()).empty());
}

TEST_CASE("R8.1 a process killed while it builds a new database leaves no file") {
  TempDir dir;
  const std::string path = dir.File("killed.db");
  int ready[2];
  REQUIRE(::pipe(ready) == 0);
  const pid_t child = ::fork();
  REQUIRE(child >= 0);
  if (child == 0) {
    ::close(ready[0]);
    ListSource source(Generated(31, 60));
    // Half way through, says so and waits to be killed.
    source.at = [&](std::size_t i) {
      if (i != 100) return;
      const char byte = 'k';
      if (::write(ready[1], &byte, 1) != 1) ::_exit(3);
      for (;;) ::pause();
    };
    std::vector<NewSession> sessions(1);
    sessions[0].session = "s";
    sessions[0].source = &source;
    (void)CreateSqliteSessions(path, std::move(sessions));
    ::_exit(2);  // not reached: killed at message 100
  }
  ::close(ready[1]);
  char byte = 0;
  REQUIRE(::read(ready[0], &byte, 1) == 1);
  ::close(ready[0]);
  ::kill(child, SIGKILL);
  int status = 0;
  REQUIRE(::waitpid(child, &status, 0) == child);
  CHECK(WIFSIGNALED(status));
  CHECK(NamesIn(dir.path()).empty());
}

TEST_CASE("R8.2 a file another process creates during the build gets the sessions") {
  TempDir dir;
  const std::string path = dir.File("raced.db");
  const std::vector<Message> ours = Generated(41, 20);
  ListSource source(ours);
  source.at = [&](std::size_t i) {
    if (i != 10) return;
    std::shared_ptr<SessionStore> other = Ok(OpenSqliteSessionStore(path));
    Ok(other->AppendMessages("theirs", {Message::UserText("first")}));
  };
  std::vector<NewSession> sessions(1);
  sessions[0].session = "ours";
  sessions[0].source = &source;
  CHECK(Ok(CreateSqliteSessions(path, std::move(sessions))) == std::vector<std::uint64_t>{1});
  std::shared_ptr<SessionStore> store = Ok(OpenSqliteSessionStore(path));
  CHECK(Ok(store->Load("theirs")).transcript.size() == 1);
  const SessionState got = Ok(store->Load("ours"));
  CHECK(got.version == 1);
  REQUIRE(got.transcript.size() == ours.size());
  for (std::size_t i = 0; i < ours.size(); ++i) {
    if (!ours[i].id.empty()) CHECK(got.transcript[i].id == ours[i].id);
  }
  store.reset();
  CHECK(NamesIn(dir.path()) == std::set<std::string>{"raced.db"});
}

TEST_CASE(
    "R8.2 a session another process creates during the build is a conflict, and theirs stays") {
  TempDir dir;
  const std::string path = dir.File("raced.db");
  ListSource source(Generated(51, 20));
  source.at = [&](std::size_t i) {
    if (i != 10) return;
    std::shared_ptr<SessionStore> other = Ok(OpenSqliteSessionStore(path));
    Ok(other->AppendMessages("s", {Message::UserText("theirs")}));
  };
  std::vector<NewSession> sessions(1);
  sessions[0].session = "s";
  sessions[0].source = &source;
  CHECK(CreateSqliteSessions(path, std::move(sessions)).status().code() == StatusCode::kConflict);
  std::shared_ptr<SessionStore> store = Ok(OpenSqliteSessionStore(path));
  const SessionState s = Ok(store->Load("s"));
  REQUIRE(s.transcript.size() == 1);
  CHECK(JoinedText(s.transcript[0]) == "theirs");
}

TEST_CASE("R8.2 an existing file is written in place, and a session it has is a conflict") {
  TempDir dir;
  const std::string path = dir.File("there.db");
  {
    std::shared_ptr<SessionStore> store = Ok(OpenSqliteSessionStore(path));
    Ok(store->AppendMessages("old", {Message::UserText("kept")}));
  }
  std::vector<NewSession> sessions(1);
  sessions[0].session = "new";
  sessions[0].messages = Generated(61, 3);
  CHECK(Ok(CreateSqliteSessions(path, std::move(sessions))) == std::vector<std::uint64_t>{1});
  std::vector<NewSession> clash(1);
  clash[0].session = "old";
  clash[0].messages = {Message::UserText("not kept")};
  CHECK(CreateSqliteSessions(path, std::move(clash)).status().code() == StatusCode::kConflict);
  std::shared_ptr<SessionStore> store = Ok(OpenSqliteSessionStore(path));
  CHECK(JoinedText(Ok(store->Load("old")).transcript[0]) == "kept");
  CHECK(Ok(store->Load("new")).transcript.size() == Generated(61, 3).size());
  store.reset();

  // A folder that is not there: the error of opening the file there, and nothing created.
  std::vector<NewSession> lost(1);
  lost[0].session = "s";
  lost[0].messages = {Message::UserText("x")};
  Result<std::vector<std::uint64_t>> r =
      CreateSqliteSessions(dir.File("missing/folder.db"), std::move(lost));
  CHECK(r.status().code() == StatusCode::kIOError);
  CHECK(r.status().message().find("check that its folder exists") != std::string::npos);
  CHECK(NamesIn(dir.path()) == std::set<std::string>{"there.db"});
}
