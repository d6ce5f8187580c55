// The SQLite session store (component recap::sqlite; SPEC R6.5, R8) on real database files,
// each in a fresh temporary directory:
//   * the shared SessionStore conformance suite (recap/testing/store_conformance.h);
//   * persistence: what a store wrote reads back the same after closing and reopening the file,
//     for real transcripts (opaque items, multi-byte UTF-8, big tool results) and every kind of
//     commit, and agrees with the in-memory reference store;
//   * two connections on one file;
//   * the memory store (OpenSqliteMemoryStore), alone and in the same file as the sessions;
//   * files recap cannot use — not a database, damaged, written by a newer recap, read-only,
//     full, missing — give an error that names the file and says what is wrong, and the file is
//     left byte for byte as it was.
// Process crashes and races between processes are in test_sqlite_crash.cc.
#include <grp.h>
#include <sqlite3.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <optional>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <catch2/catch.hpp>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>

#include "recap/codec.h"
#include "recap/memory_plugin.h"
#include "recap/session_store.h"
#include "recap/sqlite/sqlite_store.h"
#include "recap/testing/store_conformance.h"

#include "support/build_speed.h"
#include "support/generator.h"
#include "support/ok.h"
#include "support/temp_dir.h"
#include "support/test_data.h"

using namespace recap;
using recap::testing::NamesIn;
using recap::testing::TempDir;

namespace {

// A new file in a new directory for every store; the directory goes with the store.
std::shared_ptr<SessionStore> NewSqliteStoreInTempDir() {
  struct Holder {
    TempDir dir{"recap-sqlite-conformance"};
    std::shared_ptr<SessionStore> store;
  };
  auto holder = std::make_shared<Holder>();
  auto opened = OpenSqliteSessionStore(holder->dir.File("sessions.db"));
  INFO("open: " << opened.status().ToString());
  REQUIRE(opened.ok());
  holder->store = std::move(opened).value();
  SessionStore* raw = holder->store.get();
  return std::shared_ptr<SessionStore>(std::move(holder), raw);
}

}  // namespace

RECAP_SESSION_STORE_CONFORMANCE_TESTS("sqlite store", NewSqliteStoreInTempDir)

namespace {

using recap::testing::Ok;

void RequireOk(const Status& s) {
  INFO("status: " << s.ToString());
  REQUIRE(s.ok());
}

std::shared_ptr<SessionStore> Open(const std::string& path,
                                   const SqliteStoreOptions& options = {}) {
  return Ok(OpenSqliteSessionStore(path, options));
}

std::string Encode(const Message& m) {
  auto s = native::EncodeMessage(m);
  INFO("status: " << s.status().ToString());
  REQUIRE(s.ok());
  return *s;
}

std::vector<std::string> Encode(const Transcript& t) {
  std::vector<std::string> out;
  out.reserve(t.size());
  for (const Message& m : t) out.push_back(Encode(m));
  return out;
}

std::vector<std::string> Encode(const std::vector<Message>& v) {
  std::vector<std::string> out;
  out.reserve(v.size());
  for (const Message& m : v) out.push_back(Encode(m));
  return out;
}

std::string Lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return std::tolower(c); });
  return s;
}

bool Contains(const std::string& haystack, const std::string& needle) {
  return haystack.find(needle) != std::string::npos;
}

bool ContainsAny(const std::string& haystack, const std::vector<std::string>& needles) {
  const std::string lower = Lower(haystack);
  for (const std::string& n : needles) {
    if (Contains(lower, n)) return true;
  }
  return false;
}

std::optional<std::string> ReadBytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return std::nullopt;
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

void WriteBytes(const std::string& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << bytes;
  REQUIRE(out.good());
}

bool Exists(const std::string& path) { return std::filesystem::exists(path); }

// The names in a directory, sorted.
std::vector<std::string> Listing(const std::string& dir) {
  std::vector<std::string> names;
  for (const auto& e : std::filesystem::directory_iterator(dir))
    names.push_back(e.path().filename());
  std::sort(names.begin(), names.end());
  return names;
}

// Runs SQL on a file through the sqlite3 C API; returns the first column of every row joined
// with "\n", or "error: ..." .
std::string Sql(const std::string& path, const std::string& sql,
                int flags = SQLITE_OPEN_READWRITE) {
  sqlite3* db = nullptr;
  int rc = sqlite3_open_v2(path.c_str(), &db, flags, nullptr);
  if (rc != SQLITE_OK) {
    std::string e = db ? sqlite3_errmsg(db) : sqlite3_errstr(rc);
    sqlite3_close(db);
    return "error: open: " + e;
  }
  std::string out;
  const char* tail = sql.c_str();
  while (tail && *tail) {
    sqlite3_stmt* stmt = nullptr;
    rc = sqlite3_prepare_v2(db, tail, -1, &stmt, &tail);
    if (rc != SQLITE_OK) {
      out = std::string("error: ") + sqlite3_errmsg(db);
      break;
    }
    if (!stmt) break;  // trailing whitespace
    while ((rc = sqlite3_step(stmt)) == SQLITE_ROW) {
      if (!out.empty()) out += "\n";
      const unsigned char* t = sqlite3_column_text(stmt, 0);
      out += t ? reinterpret_cast<const char*>(t) : "NULL";
    }
    sqlite3_finalize(stmt);
    if (rc != SQLITE_DONE) {
      out = std::string("error: ") + sqlite3_errmsg(db);
      break;
    }
  }
  sqlite3_close(db);
  return out;
}

// Everything a store says about one session, comparable as a whole.
struct Snapshot {
  std::uint64_t version = 0;
  std::vector<std::string> transcript;
  std::vector<std::string> history;              // seq, state, replaced_by, message
  std::map<std::uint64_t, std::string> changes;  // since -> everything LoadChanges said
  std::vector<std::string> uncertain;

  bool operator==(const Snapshot& o) const {
    return version == o.version && transcript == o.transcript && history == o.history &&
           changes == o.changes && uncertain == o.uncertain;
  }
};

std::string Describe(const SessionChanges& c) {
  std::string s =
      "version " + std::to_string(c.version) + (c.appended_only ? " appended" : " rewritten");
  for (const Message& m : c.appended) s += "\n+ " + Encode(m);
  for (const Message& m : c.transcript) s += "\n= " + Encode(m);
  return s;
}

Snapshot Take(SessionStore& store, const std::string& session,
              const std::vector<std::uint64_t>& since = {}, bool with_seq = true) {
  Snapshot s;
  SessionState state = Ok(store.Load(session));
  s.version = state.version;
  s.transcript = Encode(state.transcript);
  for (const HistoryEntry& e : Ok(store.History(session))) {
    s.history.push_back((with_seq ? std::to_string(e.seq) : std::string()) + "|" +
                        (e.state == HistoryState::kActive ? "active" : "compacted") + "|" +
                        e.replaced_by + "|" + Encode(e.message));
  }
  for (std::uint64_t v : since) s.changes[v] = Describe(Ok(store.LoadChanges(session, v)));
  for (const UncertainCall& u : Ok(store.UncertainToolCalls(session))) {
    s.uncertain.push_back(std::to_string(u.message) + "|" + u.call_id + "|" + u.name);
  }
  return s;
}

// A shorter copy of `m` with the same id, as the tail reducer would write it: texts and tool
// result texts cut to a few code points plus the marker; opaque items untouched.
Message Shortened(const Message& m) {
  auto cut = [](const std::string& s) {
    std::size_t end = 0, cps = 0;
    while (end < s.size() && cps < 40) {
      ++end;
      while (end < s.size() && (static_cast<unsigned char>(s[end]) & 0xC0) == 0x80) ++end;
      ++cps;
    }
    return s.substr(0, end) + "\xE2\x80\xA6 [truncated by context budget]";
  };
  Message copy = m;
  for (Part& p : copy.parts) {
    if (auto* t = std::get_if<Text>(&p)) {
      t->text = cut(t->text);
    } else if (auto* r = std::get_if<ToolResult>(&p)) {
      for (ResultItem& item : r->content) {
        if (auto* rt = std::get_if<Text>(&item)) rt->text = cut(rt->text);
      }
    }
  }
  return copy;
}

// A session written with every kind of write, identically into each of `stores`; returns the
// versions it passed through.
std::vector<std::uint64_t> WriteSession(const std::vector<SessionStore*>& stores,
                                        const std::string& session, std::vector<Message> source) {
  std::vector<std::uint64_t> versions = {0};
  auto each = [&](auto&& write) {
    std::uint64_t v = 0;
    for (std::size_t i = 0; i < stores.size(); ++i) {
      const std::uint64_t got = Ok(write(*stores[i]));
      if (i == 0) v = got;
      REQUIRE(got == v);
    }
    versions.push_back(v);
    return v;
  };
  // Explicit ids for most messages, store-assigned ids for some (those must persist too; the
  // reference store gets the id the SQLite store assigned).
  for (std::size_t i = 0; i < source.size(); ++i) {
    source[i].id = i % 5 == 3 ? std::string() : session + "-" + std::to_string(i);
  }
  std::size_t next = 0;
  auto append = [&](std::size_t n) {
    std::vector<Message> batch;
    for (; n > 0 && next < source.size(); --n) batch.push_back(source[next++]);
    if (batch.empty()) return;
    std::uint64_t v = Ok(stores[0]->AppendMessages(session, batch));
    // The assigned ids, from the first store, for the others.
    SessionState state = Ok(stores[0]->Load(session));
    for (std::size_t j = 0; j < batch.size(); ++j) {
      batch[j].id = state.transcript[state.transcript.size() - batch.size() + j].id;
    }
    for (std::size_t i = 1; i < stores.size(); ++i)
      REQUIRE(Ok(stores[i]->AppendMessages(session, batch)) == v);
    versions.push_back(v);
  };
  append(1);
  append(7);
  for (int i = 0; i < 5; ++i) append(3);
  // A compaction of the first half, with injected context.
  {
    SessionState state = Ok(stores[0]->Load(session));
    CompactionCommit c;
    c.expected_version = state.version;
    for (std::size_t i = 0; i < state.transcript.size() / 2; ++i)
      c.replaced.push_back(state.transcript[i].id);
    c.checkpoint = Message::UserText(
        "## Goal\nKeep the build green \xE2\x9C\x93 \xF0\x9F\x9A\x80 \xE4\xB8\xAD\xE6\x96\x87 — "
        "caf\xC3\xA9\n## Next steps\n- run the tests");
    c.checkpoint.summary = true;
    c.checkpoint.id = session + "-checkpoint-1";
    Message injected = Message::UserText("Memories:\n- prefers tabs");
    injected.id = session + "-injected-1";
    c.injected = {injected};
    c.reason = "auto";
    each([&](SessionStore& s) { return s.CommitCompaction(session, c); });
  }
  append(4);
  // A reduction of the two largest non-checkpoint messages.
  {
    SessionState state = Ok(stores[0]->Load(session));
    std::vector<std::size_t> order;
    for (std::size_t i = 0; i < state.transcript.size(); ++i) {
      if (!state.transcript[i].summary) order.push_back(i);
    }
    std::sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) {
      return state.transcript.chars(a) > state.transcript.chars(b);
    });
    ReductionCommit r;
    r.expected_version = state.version;
    for (std::size_t k = 0; k < 2 && k < order.size(); ++k)
      r.replacements.push_back(Shortened(state.transcript[order[k]]));
    each([&](SessionStore& s) { return s.CommitReduction(session, r); });
  }
  // A tool call whose result never came, recovered with an acknowledgement.
  {
    Message call =
        Message::AssistantCalls({ToolCall{session + "-call-x",
                                          "run_tests",
                                          R"({"target":"all","note":"\u00e9\ud83d\ude80"})",
                                          {}}},
                                "Running the tests \xF0\x9F\xA7\xAA");
    call.id = session + "-uncertain";
    each([&](SessionStore& s) { return s.Append(session, call); });
    SessionState state = Ok(stores[0]->Load(session));
    RecoveryCommit rc;
    rc.expected_version = state.version;
    Message result =
        Message::ToolOutput(session + "-call-x",
                            "The outcome of this call is unknown: the session ended before "
                            "its result was recorded. It was not run again.",
                            true);
    result.id = session + "-recovered";
    rc.results = {RecoveredResult{call.id, result}};
    each([&](SessionStore& s) { return s.CommitRecovery(session, rc); });
  }
  append(5);
  // A second compaction over the first checkpoint.
  {
    SessionState state = Ok(stores[0]->Load(session));
    CompactionCommit c;
    c.expected_version = state.version;
    for (std::size_t i = 0; i + 3 < state.transcript.size(); ++i)
      c.replaced.push_back(state.transcript[i].id);
    c.checkpoint = Message::UserText("Second checkpoint \xF0\x9F\x93\x8C");
    c.checkpoint.summary = true;
    c.checkpoint.id = session + "-checkpoint-2";
    c.reason = "manual";
    each([&](SessionStore& s) { return s.CommitCompaction(session, c); });
  }
  // The rest, and a call left without a result (so UncertainToolCalls has something to say).
  while (next < source.size()) append(6);
  Message dangling = Message::AssistantCalls({ToolCall{session + "-call-y", "deploy", "{}", {}}});
  dangling.id = session + "-dangling";
  each([&](SessionStore& s) { return s.Append(session, dangling); });
  return versions;
}

std::vector<Message> Messages(Result<Conversation> conv) { return Ok(std::move(conv)).messages; }

// Real transcripts plus generated ones with dense multi-byte text and a huge item.
std::map<std::string, std::vector<Message>> Sources() {
  std::map<std::string, std::vector<Message>> out;
  out["claude-code"] = Messages(anthropic::DecodeMessages(
      recap::testing::ClaudeCodeMessagesArray(recap::testing::kClaudeCodeSampleFile)));
  out["claude-code-worktrees"] = Messages(anthropic::DecodeMessages(
      recap::testing::ClaudeCodeMessagesArray(recap::testing::kClaudeCodeWorktreesFile)));
  out["swe-agent"] = recap::testing::SweAgentTranscript().messages;
  out["openhands"] = recap::testing::OpenHandsTranscripts().at(0).conversation.messages;
  recap_test::GeneratorOptions g;
  g.multibyte = 0.9;
  g.dense_4byte = 0.4;
  g.huge_item = 1.0;
  g.huge_min = 200000;
  g.huge_max = 400000;
  g.exceed_caps = true;
  g.min_turns = 8;
  g.max_turns = 12;
  g.result_extra_items = 0.5;
  g.thinking = 0.6;
  out["generated \xF0\x9F\x98\x80"] = recap_test::GenerateMessages(20240611, g);
  return out;
}

}  // namespace

// Turns a file of the current schema into what an older recap wrote: version 3 lacks what
// `recap prepare` keeps (issue 39); version 2 also R18's turns, undo records and recall index;
// version 1 also the `learned` table.
void Downgrade(const std::string& path, int version) {
  Sql(path, "DROP TABLE encodings; DROP TABLE prepare_memos; PRAGMA user_version = 3;");
  if (version == 3) return;
  Sql(path,
      "DROP TABLE recall_index; ALTER TABLE sessions DROP COLUMN turns; ALTER TABLE sessions "
      "DROP COLUMN undos; ALTER TABLE sessions DROP COLUMN indexed_seq; ALTER TABLE messages "
      "DROP COLUMN turn; ALTER TABLE commits DROP "
      "COLUMN span_seqs; ALTER TABLE commits DROP COLUMN added_seqs; ALTER TABLE commits DROP "
      "COLUMN undone_by; PRAGMA user_version = 2;");
  if (version == 1) Sql(path, "DROP TABLE learned; PRAGMA user_version = 1;");
  REQUIRE(Sql(path, "PRAGMA user_version") == std::to_string(version));
}

TEST_CASE("R8 a new file is a WAL database at the current schema version") {
  TempDir dir("recap-sqlite");
  const std::string path = dir.File("sessions.db");
  CHECK(SqliteSchemaVersion() == 4);
  {
    auto store = Open(path);
    REQUIRE(Exists(path));
    Ok(store->Append("s", Message::UserText("hello")));
  }
  CHECK(Sql(path, "PRAGMA user_version") == std::to_string(SqliteSchemaVersion()));
  CHECK(Sql(path, "PRAGMA journal_mode") == "wal");
  CHECK(Sql(path, "PRAGMA integrity_check") == "ok");
  CHECK(Sql(path, "SELECT name FROM sessions") == "s");
}

TEST_CASE("R8 a version-3 file is read as it is and migrated with what prepare keeps, empty") {
  TempDir dir("recap-sqlite");
  const std::string path = dir.File("old.db");
  {
    auto store = Open(path);
    Ok(store->Append("s", Message::UserText("hello")));
  }
  Downgrade(path, 3);
  {
    SqliteStoreOptions o;
    o.read_only = true;
    auto opened = OpenSqliteSessionStore(path, o);
    INFO(opened.status().ToString());
    REQUIRE(opened.ok());
    CHECK(Ok((*opened)->Load("s")).transcript.size() == 1);
  }
  CHECK(Sql(path, "PRAGMA user_version") == "3");  // a reader does not migrate
  {
    auto store = Open(path);
    CHECK(Ok(store->Load("s")).transcript.size() == 1);
  }
  CHECK(Sql(path, "PRAGMA user_version") == "4");
  CHECK(Sql(path, "SELECT count(*) FROM encodings") == "0");
  CHECK(Sql(path, "SELECT count(*) FROM prepare_memos") == "0");
  CHECK(Sql(path, "PRAGMA integrity_check") == "ok");
}

TEST_CASE(
    "R12.5 a version-1 file is read as it is when opened read-only, and migrated to the current "
    "version by a writer") {
  TempDir dir("recap-sqlite");
  const std::string path = dir.File("old.db");
  {
    auto store = Open(path);
    Ok(store->Append("s", Message::UserText("hello")));
  }
  // What a recap of version 1 left: no `learned` table, user_version 1.
  Downgrade(path, 1);
  {
    SqliteStoreOptions o;
    o.read_only = true;
    auto opened = OpenSqliteSessionStore(path, o);
    INFO(opened.status().ToString());
    REQUIRE(opened.ok());
    SessionState state = Ok((*opened)->Load("s"));
    CHECK(state.version == 1);
    CHECK(state.learned.empty());
    CHECK(Ok((*opened)->LoadChanges("s", 0)).learned.empty());
    CHECK((*opened)->SaveLearned("s", "{}").code() == StatusCode::kFailedPrecondition);
  }
  CHECK(Sql(path, "PRAGMA user_version") == "1");  // not migrated by a reader
  {
    auto store = Open(path);
    CHECK(Sql(path, "PRAGMA user_version") == std::to_string(SqliteSchemaVersion()));
    REQUIRE(store->SaveLearned("s", R"({"paused":true})").ok());
    CHECK(Ok(store->Load("s")).learned == R"({"paused":true})");
    CHECK(Ok(store->Load("s")).transcript.size() == 1);
  }
  CHECK(Sql(path, "PRAGMA integrity_check") == "ok");
}

TEST_CASE(
    "R18 a version-2 file is searched by a scan when opened read-only and migrated by a writer "
    "that fills its turns and recall index but cannot undo its old compactions") {
  TempDir dir("recap-sqlite");
  const std::string path = dir.File("old.db");
  std::uint64_t v = 0;
  std::vector<HistoryEntry> history;
  {
    auto store = Open(path);
    Ok(store->AppendMessages(
        "s", {Message::UserText("the launch code is ZEBRA-42"), Message::AssistantText("noted"),
              Message::UserText("now the weather"), Message::UserText("and the tides")}));
    // A reduced copy of a person's message keeps its original's turn (3), also when the turns
    // are counted again by the migration or by a read-only reader.
    SessionState state = Ok(store->Load("s"));
    Message clipped = Message::UserText("and the\xE2\x80\xA6");
    clipped.id = state.transcript[3].id;
    Ok(store->CommitReduction("s", ReductionCommit{state.version, {clipped}}));
    state = Ok(store->Load("s"));
    CompactionCommit c;
    c.expected_version = state.version;
    c.replaced = {state.transcript[0].id, state.transcript[1].id};
    c.checkpoint = Message::UserText("## Goal\nweather");
    c.checkpoint.summary = true;
    v = Ok(store->CommitCompaction("s", c));
    history = Ok(store->History("s"));
    REQUIRE(history.size() == 6);
    CHECK(history[4].replaced_by == "");  // the reduced copy
    CHECK(history[4].turn == 3);
  }
  Downgrade(path, 2);
  HistorySearch q;
  q.terms = {"zebra-42"};
  {
    SqliteStoreOptions o;
    o.read_only = true;
    auto store = Ok(OpenSqliteSessionStore(path, o));
    const std::vector<HistoryHit> hits = Ok(store->SearchHistory("s", q));
    REQUIRE(hits.size() == 1);
    CHECK(hits[0].entry.replaced_by == "compaction:1");
    CHECK(hits[0].entry.turn == 1);
    const std::vector<HistoryEntry> h = Ok(store->History("s"));
    REQUIRE(h.size() == history.size());
    for (std::size_t i = 0; i < h.size(); ++i) CHECK(h[i].turn == history[i].turn);
  }
  CHECK(Sql(path, "PRAGMA user_version") == "2");  // not migrated by a reader
  {
    auto store = Open(path);
    CHECK(Sql(path, "PRAGMA user_version") == std::to_string(SqliteSchemaVersion()));
    CHECK(Sql(path, "SELECT turns FROM sessions") == "3");
    // The migration built the index: the stored messages are in it before any search.
    CHECK(Sql(path, "SELECT indexed_seq FROM sessions") ==
          Sql(path, "SELECT max(seq) FROM messages"));
    CHECK(Sql(path, "SELECT count(*) FROM recall_index WHERE recall_index MATCH 'zebra'") == "1");
    const std::vector<HistoryHit> hits = Ok(store->SearchHistory("s", q));
    REQUIRE(hits.size() == 1);
    CHECK(JoinedText(hits[0].entry.message) == "the launch code is ZEBRA-42");
    const std::vector<HistoryEntry> h = Ok(store->History("s"));
    REQUIRE(h.size() == history.size());
    for (std::size_t i = 0; i < h.size(); ++i) CHECK(h[i].turn == history[i].turn);
    // The compaction made before the migration recorded no places.
    Result<UndoOutcome> undo = store->CommitUndo("s", UndoCommit{v});
    INFO(undo.status().ToString());
    CHECK(undo.status().code() == StatusCode::kFailedPrecondition);
    CHECK(undo.status().message().find("older recap") != std::string::npos);
    // What is appended and compacted after it is found and undone as usual.
    v = Ok(store->Append("s", Message::UserText("the boat is called PELICAN")));
    const SessionState state = Ok(store->Load("s"));
    CompactionCommit c;
    c.expected_version = v;
    REQUIRE(state.transcript.size() == 4);
    for (const Message& m : state.transcript) c.replaced.push_back(m.id);
    c.checkpoint = Message::UserText("## Goal\nboats");
    c.checkpoint.summary = true;
    v = Ok(store->CommitCompaction("s", c));
    q.terms = {"pelican"};
    CHECK(Ok(store->SearchHistory("s", q)).size() == 1);
    CHECK(Ok(store->CommitUndo("s", UndoCommit{v})).commit == "compaction:2");
  }
  CHECK(Sql(path, "PRAGMA integrity_check") == "ok");
}

TEST_CASE(
    "R18.1 the recall index is written when a session is first searched after new messages and "
    "a read-only store scans what it lacks") {
  TempDir dir("recap-sqlite");
  const std::string path = dir.File("sessions.db");
  auto store = Open(path);
  const std::uint64_t v = Ok(store->AppendMessages(
      "s", {Message::UserText("the heron is grey"), Message::AssistantText("yes")}));
  const SessionState state = Ok(store->Load("s"));
  CompactionCommit c;
  c.expected_version = v;
  c.replaced = {state.transcript[0].id, state.transcript[1].id};
  c.checkpoint = Message::UserText("## Goal\nbirds");
  c.checkpoint.summary = true;
  Ok(store->CommitCompaction("s", c));
  CHECK(Sql(path, "SELECT indexed_seq FROM sessions") == "0");  // appends write no index
  HistorySearch q;
  q.terms = {"heron"};
  SqliteStoreOptions ro;
  ro.read_only = true;
  auto reader = Ok(OpenSqliteSessionStore(path, ro));
  CHECK(Ok(reader->SearchHistory("s", q)).size() == 1);  // scanned
  CHECK(Sql(path, "SELECT indexed_seq FROM sessions") == "0");
  CHECK(Ok(store->SearchHistory("s", q)).size() == 1);  // indexed, then asked
  CHECK(Sql(path, "SELECT indexed_seq FROM sessions") ==
        Sql(path, "SELECT max(seq) FROM messages"));
  CHECK(Sql(path, "SELECT count(*) FROM recall_index WHERE recall_index MATCH 'heron'") == "1");
  Ok(store->Append("s", Message::UserText("a heron again")));
  CHECK(Ok(store->SearchHistory("s", q)).size() == 1);  // the active one is not asked for
  q.include_active = true;
  CHECK(Ok(store->SearchHistory("s", q)).size() == 2);
  CHECK(Ok(reader->SearchHistory("s", q)).size() == 2);
}

TEST_CASE("R8.1 what a store wrote reads back the same after reopening the file") {
  TempDir dir("recap-sqlite");
  const std::string path = dir.File("sessions.db");
  const auto sources = Sources();
  std::map<std::string, std::vector<std::uint64_t>> versions;
  std::map<std::string, Snapshot> before;
  std::vector<std::string> sessions_before;
  auto reference = NewInMemorySessionStore();
  {
    auto store = Open(path);
    for (const auto& [name, messages] : sources) {
      INFO("session " << name);
      // LoadChanges is compared from a sample of the versions the session passed through.
      const std::vector<std::uint64_t> all =
          WriteSession({store.get(), reference.get()}, name, messages);
      std::vector<std::uint64_t>& sample = versions[name];
      for (std::size_t i = 0; i < all.size(); i += std::max<std::size_t>(1, all.size() / 8))
        sample.push_back(all[i]);
      for (std::size_t i = all.size() >= 3 ? all.size() - 3 : 0; i < all.size(); ++i)
        sample.push_back(all[i]);
    }
    for (const auto& [name, messages] : sources) {
      INFO("session " << name);
      before[name] = Take(*store, name, versions[name]);
      // The same as the in-memory reference store, seq numbers aside.
      CHECK(Take(*store, name, versions[name], false) ==
            Take(*reference, name, versions[name], false));
    }
    sessions_before = Ok(store->ListSessions());
    CHECK(sessions_before == Ok(reference->ListSessions()));
  }  // closed: the WAL is checkpointed into the file

  CHECK(Sql(path, "PRAGMA integrity_check") == "ok");
  {
    auto store = Open(path);
    CHECK(Ok(store->ListSessions()) == sessions_before);
    for (const auto& [name, messages] : sources) {
      INFO("session " << name);
      const Snapshot after = Take(*store, name, versions[name]);
      CHECK(after.version == before[name].version);
      CHECK(after.transcript == before[name].transcript);
      CHECK(after.history == before[name].history);
      CHECK(after.changes == before[name].changes);
      CHECK(after.uncertain == before[name].uncertain);
    }
    // A reopened store goes on where the old one stopped: versions, ids, appends-only changes.
    const std::string name = sources.begin()->first;
    const std::uint64_t v = before[name].version;
    Message more = Message::UserText("after reopening \xF0\x9F\x94\x81");
    CHECK(Ok(store->Append(name, more)) == v + 1);
    SessionChanges changes = Ok(store->LoadChanges(name, v));
    CHECK(changes.appended_only);
    REQUIRE(changes.appended.size() == 1);
    CHECK(JoinedText(changes.appended[0]) == "after reopening \xF0\x9F\x94\x81");
    // Ids stay unique across the reopen: the id of a message that was active before it is
    // still taken.
    const SessionState reopened = Ok(store->Load(name));
    REQUIRE(reopened.transcript.size() >= 2);
    Message duplicate = Message::UserText("same id");
    duplicate.id = reopened.transcript[reopened.transcript.size() - 2].id;  // not the new one
    CHECK(Contains(before[name].transcript.back(), "\"" + duplicate.id + "\""));
    CHECK(store->Append(name, duplicate).status().code() == StatusCode::kInvalidArgument);
    // A commit against the version before the append is stale.
    CompactionCommit stale;
    stale.expected_version = v;
    stale.replaced = {Ok(store->Load(name)).transcript[0].id};
    stale.checkpoint = Message::UserText("s");
    stale.checkpoint.summary = true;
    CHECK(store->CommitCompaction(name, stale).status().code() == StatusCode::kConflict);
  }
}

TEST_CASE("R8 invalid UTF-8 is repaired the same way in every view, before and after reopening") {
  TempDir dir("recap-sqlite");
  const std::string path = dir.File("sessions.db");
  Message bad = Message::UserText("caf\xC3");
  bad.id = "id-\xFF";
  std::string id;
  {
    auto store = Open(path);
    Ok(store->Append("s1", bad));
    id = Ok(store->Load("s1")).transcript[0].id;
    CHECK(id == "id-\xEF\xBF\xBD");
    CHECK(Ok(store->History("s1"))[0].message.id == id);
    CHECK(Ok(store->LoadChanges("s1", 0)).appended[0].id == id);
    CHECK(JoinedText(Ok(store->Load("s1")).transcript[0]) == "caf\xEF\xBF\xBD");
  }
  auto store = Open(path);
  SessionState state = Ok(store->Load("s1"));
  REQUIRE(state.transcript.size() == 1);
  CHECK(state.transcript[0].id == id);
  CHECK(JoinedText(state.transcript[0]) == "caf\xEF\xBF\xBD");
  CHECK(store->Append("s1", bad).status().code() == StatusCode::kInvalidArgument);
}

TEST_CASE("R8 two stores on one file see each other's writes") {
  TempDir dir("recap-sqlite");
  const std::string path = dir.File("sessions.db");
  auto a = Open(path);
  auto b = Open(path);
  const std::string s = "shared";
  CHECK(Ok(b->Load(s)).version == 0);

  // An append through one is an append for the other.
  std::vector<Message> batch = {Message::UserText("one \xC3\xA9"),
                                Message::AssistantText("two \xF0\x9F\x98\x80"),
                                Message::UserText("three")};
  const std::uint64_t v1 = Ok(a->AppendMessages(s, batch));
  SessionChanges seen = Ok(b->LoadChanges(s, 0));
  CHECK(seen.version == v1);
  CHECK(seen.appended_only);
  CHECK(Encode(seen.appended) == Encode(Ok(a->Load(s)).transcript));
  CHECK(Ok(b->ListSessions()) == std::vector<std::string>{s});

  // A compaction through one is a rewrite for the other.
  SessionState state = Ok(b->Load(s));
  CompactionCommit c;
  c.expected_version = state.version;
  c.replaced = {state.transcript[0].id, state.transcript[1].id};
  c.checkpoint = Message::UserText("checkpoint");
  c.checkpoint.summary = true;
  const std::uint64_t v2 = Ok(b->CommitCompaction(s, c));
  SessionChanges rewritten = Ok(a->LoadChanges(s, v1));
  CHECK(rewritten.version == v2);
  CHECK_FALSE(rewritten.appended_only);
  CHECK(Encode(rewritten.transcript) == Encode(Ok(b->Load(s)).transcript));

  // A commit through the first against the version it last saw conflicts and changes nothing.
  CompactionCommit stale = c;
  stale.expected_version = v1;
  stale.checkpoint.id = "other-checkpoint";
  CHECK(a->CommitCompaction(s, stale).status().code() == StatusCode::kConflict);
  CHECK(Take(*a, s) == Take(*b, s));
  CHECK(Ok(a->Load(s)).version == v2);

  // The same message id cannot enter twice through two connections.
  Message m = Message::UserText("unique");
  m.id = "the-one";
  Ok(a->Append(s, m));
  CHECK(b->Append(s, m).status().code() == StatusCode::kInvalidArgument);
  CHECK(Take(*a, s) == Take(*b, s));
}

TEST_CASE("R9.3 the SQLite memory store adds, lists, dedupes, keeps scopes apart and persists") {
  TempDir dir("recap-sqlite");
  const std::string path = dir.File("memories.db");
  const std::string unicode =
      "uses \xE2\x9C\x93 and \xF0\x9F\x98\x80 in commit messages \xE4\xB8\xAD";
  {
    auto memories = Ok(OpenSqliteMemoryStore(path));
    CHECK(Ok(memories->List("project")).empty());
    RequireOk(memories->Add("project",
                            {"prefers tabs", "the API lives in services/api", "prefers tabs"}));
    CHECK(Ok(memories->List("project")) ==
          std::vector<std::string>{"prefers tabs", "the API lives in services/api"});
    RequireOk(memories->Add("project", {"the API lives in services/api", unicode}));
    CHECK(Ok(memories->List("project")) ==
          std::vector<std::string>{"prefers tabs", "the API lives in services/api", unicode});
    // Exact text match: a different case is a different memory.
    RequireOk(memories->Add("project", {"Prefers tabs"}));
    CHECK(Ok(memories->List("project")).size() == 4);
    // Scopes are separate.
    CHECK(Ok(memories->List("other")).empty());
    RequireOk(memories->Add("other", {"prefers tabs"}));
    CHECK(Ok(memories->List("other")) == std::vector<std::string>{"prefers tabs"});
    CHECK(Ok(memories->List("project")).size() == 4);
    RequireOk(memories->Add("other", {}));
    CHECK(Ok(memories->List("other")).size() == 1);
  }
  auto memories = Ok(OpenSqliteMemoryStore(path));
  CHECK(Ok(memories->List("project")) == std::vector<std::string>{"prefers tabs",
                                                                  "the API lives in services/api",
                                                                  unicode, "Prefers tabs"});
  CHECK(Ok(memories->List("other")) == std::vector<std::string>{"prefers tabs"});
  // Two connections to the memories.
  auto second = Ok(OpenSqliteMemoryStore(path));
  RequireOk(second->Add("other", {"second connection"}));
  CHECK(Ok(memories->List("other")) ==
        std::vector<std::string>{"prefers tabs", "second connection"});
}

TEST_CASE("R9.3 sessions and memories share one file") {
  TempDir dir("recap-sqlite");
  const std::string path = dir.File("agent.db");
  Snapshot sessions_before;
  {
    // The memory store creates the file, the session store opens it next to it.
    auto memories = Ok(OpenSqliteMemoryStore(path));
    auto store = Open(path);
    for (int i = 0; i < 20; ++i) {
      Ok(store->Append("s1", Message::UserText("message " + std::to_string(i))));
      RequireOk(memories->Add("default", {"memory " + std::to_string(i % 7)}));
    }
    sessions_before = Take(*store, "s1", {0, 5, 20});
    CHECK(Ok(memories->List("default")).size() == 7);
  }
  CHECK(Sql(path, "PRAGMA integrity_check") == "ok");
  {
    auto store = Open(path);
    auto memories = Ok(OpenSqliteMemoryStore(path));
    CHECK(Take(*store, "s1", {0, 5, 20}) == sessions_before);
    CHECK(Ok(store->ListSessions()) == std::vector<std::string>{"s1"});
    std::vector<std::string> expected;
    for (int i = 0; i < 7; ++i) expected.push_back("memory " + std::to_string(i));
    CHECK(Ok(memories->List("default")) == expected);
  }
  // Opened the other way round on a new file.
  const std::string path2 = dir.File("agent2.db");
  {
    auto store = Open(path2);
    Ok(store->Append("s1", Message::UserText("x")));
    auto memories = Ok(OpenSqliteMemoryStore(path2));
    RequireOk(memories->Add("default", {"y"}));
  }
  CHECK(Ok(Ok(OpenSqliteMemoryStore(path2))->List("default")) == std::vector<std::string>{"y"});
  CHECK(Ok(Open(path2)->Load("s1")).transcript.size() == 1);
}

namespace {

// The message of a failed open, Load or Append: every failure must name the file.
void CheckNamesFile(const Status& s, const std::string& path) {
  INFO("status: " << s.ToString());
  CHECK_FALSE(s.ok());
  CHECK(Contains(s.message(), path));
}

// Opens `path` and reads `session`: the first failure, or OK.
Status OpenAndRead(const std::string& path, const std::string& session,
                   const SqliteStoreOptions& options = {}) {
  auto opened = OpenSqliteSessionStore(path, options);
  if (!opened.ok()) return opened.status();
  auto& store = **opened;
  if (auto r = store.Load(session); !r.ok()) return r.status();
  if (auto r = store.History(session); !r.ok()) return r.status();
  if (auto r = store.ListSessions(); !r.ok()) return r.status();
  if (auto r = store.LoadChanges(session, 0); !r.ok()) return r.status();
  return Status::OK();
}

}  // namespace

TEST_CASE("R8 a file that is not a database is refused, named, and left as it was") {
  TempDir dir("recap-sqlite");
  const std::string path = dir.File("notes.txt");
  std::string text;
  for (int i = 0; i < 200; ++i)
    text += "Line " + std::to_string(i) + ": these are my notes, not a database.\n";
  WriteBytes(path, text);
  const auto listing = Listing(dir.path());

  SECTION("session store") {
    const Status s = OpenAndRead(path, "s1");
    INFO("status: " << s.ToString());
    REQUIRE_FALSE(s.ok());
    CheckNamesFile(s, path);
    CHECK(ContainsAny(s.message(), {"not a database", "not a sqlite", "not a recap"}));
    // And a write through an open store, if it opened at all.
    auto opened = OpenSqliteSessionStore(path);
    if (opened.ok()) CheckNamesFile((*opened)->Append("s1", Message::UserText("x")).status(), path);
  }
  SECTION("memory store") {
    auto opened = OpenSqliteMemoryStore(path);
    Status s = opened.ok() ? (*opened)->List("default").status() : opened.status();
    REQUIRE_FALSE(s.ok());
    CheckNamesFile(s, path);
    if (opened.ok()) CheckNamesFile((*opened)->Add("default", {"x"}), path);
  }
  CHECK(ReadBytes(path) == text);
  CHECK(Listing(dir.path()) == listing);
}

TEST_CASE("R8 a SQLite database of another program is not taken over") {
  // A valid database with user_version 0 and tables that are not recap's: recap must not add
  // its schema to someone else's file.
  TempDir dir("recap-sqlite");
  const std::string path = dir.File("other-app.db");
  REQUIRE(Sql(path,
              "CREATE TABLE notes (id INTEGER PRIMARY KEY, body TEXT); "
              "INSERT INTO notes (body) VALUES ('keep me');",
              SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE) == "");
  const auto bytes = ReadBytes(path);
  REQUIRE(bytes.has_value());
  const Status s = OpenAndRead(path, "s1");
  INFO("status: " << s.ToString());
  CHECK_FALSE(s.ok());
  CheckNamesFile(s, path);
  CHECK(ReadBytes(path) == bytes);
  CHECK(Sql(path, "SELECT name FROM sqlite_schema ORDER BY name") == "notes");
}

namespace {

// A store file with several hundred KB in it, closed (so the WAL is checkpointed into it).
// Returns the session's snapshot.
Snapshot WriteBigStore(const std::string& path) {
  auto store = Open(path);
  recap_test::Rng rng(7);
  for (int i = 0; i < 300; ++i) {
    Message m = i % 2 == 0 ? Message::UserText(recap_test::RandomText(
                                 rng, 400 + rng.Below(2000), recap_test::TextStyle::kMixed))
                           : Message::AssistantText(recap_test::RandomText(
                                 rng, 400 + rng.Below(2000), recap_test::TextStyle::kCjk));
    m.id = "m" + std::to_string(i);
    Ok(store->Append("big", m));
    if (i % 50 == 49) Ok(store->Append("other-" + std::to_string(i), Message::UserText("small")));
  }
  Snapshot s = Take(*store, "big", {0, 100});
  return s;
}

std::size_t PageSize(const std::string& bytes) {
  const unsigned hi = static_cast<unsigned char>(bytes[16]),
                 lo = static_cast<unsigned char>(bytes[17]);
  const std::size_t size = (hi << 8) | lo;
  return size == 1 ? 65536 : size;
}

std::string Garbage(std::size_t n, std::uint64_t seed) {
  recap_test::Rng rng(seed);
  std::string g(n, '\0');
  for (char& c : g) c = static_cast<char>(rng.Below(256));
  g[0] = static_cast<char>(0x55);  // never a valid b-tree page type
  return g;
}

// Damages page `page` (1-based) of the closed store file and checks that reading it fails
// with kCorruption naming the file, or gives exactly what was stored; never anything else.
void CheckDamagedPage(const std::string& path, const Snapshot& stored, std::uint64_t page) {
  std::string bytes = *ReadBytes(path);
  const std::size_t page_size = PageSize(bytes);
  INFO("page " << page << " of " << bytes.size() / page_size << " (" << page_size
               << " bytes each)");
  REQUIRE(bytes.size() >= page * page_size);
  bytes.replace((page - 1) * page_size, page_size, Garbage(page_size, page));
  WriteBytes(path, bytes);

  auto opened = OpenSqliteSessionStore(path);
  Status failure;
  if (!opened.ok()) {
    failure = opened.status();
  } else {
    auto& store = **opened;
    auto load = store.Load("big");
    auto history = store.History("big");
    auto changes = store.LoadChanges("big", 100);
    auto list = store.ListSessions();
    for (const Status* s : {&load.status(), &history.status(), &changes.status(), &list.status()}) {
      if (!s->ok()) {
        INFO("status: " << s->ToString());
        CHECK(s->code() == StatusCode::kCorruption);
        CheckNamesFile(*s, path);
        if (failure.ok()) failure = *s;
      }
    }
    // What did read must be right.
    if (load.ok()) {
      CHECK(load->version == stored.version);
      CHECK(Encode(load->transcript) == stored.transcript);
    }
    if (history.ok() && load.ok() && changes.ok()) CHECK(Take(store, "big", {0, 100}) == stored);
    // A write must not "repair" the file either; it may fail or, if the damage is elsewhere,
    // succeed — but the check below of the bytes only holds when nothing was written, so none is
    // attempted here.
  }
  std::cerr << "damaged page " << page << ": "
            << (failure.ok() ? std::string("everything read back intact") : failure.ToString())
            << "\n";
  if (!failure.ok()) {
    INFO("status: " << failure.ToString());
    CheckNamesFile(failure, path);
    CHECK(ContainsAny(failure.message(), {"damaged", "corrupt", "malformed"}));
  }
  opened = Status::Internal("closed");  // drop the store before comparing bytes
  CHECK(ReadBytes(path) == bytes);
}

}  // namespace

TEST_CASE("R8 a damaged store file is reported as corruption and left as it was") {
  TempDir dir("recap-sqlite");
  const std::string path = dir.File("sessions.db");
  const Snapshot stored = WriteBigStore(path);
  const std::size_t size = ReadBytes(path)->size();
  REQUIRE(size > 300 * 1024);
  REQUIRE_FALSE(Exists(path + "-wal"));  // checkpointed when the store closed

  SECTION("page 2") { CheckDamagedPage(path, stored, 2); }
  SECTION("page 3") { CheckDamagedPage(path, stored, 3); }
  SECTION("the root pages of every table and index") {
    const std::string roots =
        Sql(path, "SELECT rootpage FROM sqlite_schema WHERE rootpage > 1 ORDER BY rootpage",
            SQLITE_OPEN_READONLY);
    INFO("roots: " << roots);
    REQUIRE(roots.rfind("error", 0) != 0);
    const std::string pristine = *ReadBytes(path);
    std::istringstream in(roots);
    std::string root;
    while (std::getline(in, root)) {
      WriteBytes(path, pristine);
      CheckDamagedPage(path, stored, std::stoull(root));
    }
  }
}

TEST_CASE("R8 a damaged page in the middle of the data is never read back as valid data") {
  // SQLite does not checksum pages: garbage in a page that holds message bodies can only be
  // caught by recap checking what it decodes. Every 11th page; RECAP_DAMAGE_EVERY_PAGE=1 tries
  // them all (about 7 s).
  TempDir dir("recap-sqlite");
  const std::string path = dir.File("sessions.db");
  const Snapshot stored = WriteBigStore(path);
  const std::string pristine = *ReadBytes(path);
  const std::size_t pages = pristine.size() / PageSize(pristine);
  const std::size_t step = std::getenv("RECAP_DAMAGE_EVERY_PAGE") ? 1 : 11;
  for (std::size_t page = 4; page <= pages; page += step) {
    WriteBytes(path, pristine);
    CheckDamagedPage(path, stored, page);
  }
}

TEST_CASE("R8 a file written by a newer recap is refused and left as it was") {
  TempDir dir("recap-sqlite");
  const std::string path = dir.File("future.db");
  const int newer = SqliteSchemaVersion() + 1;
  REQUIRE(
      Sql(path,
          "CREATE TABLE sessions (session_id INTEGER PRIMARY KEY, name TEXT, future_column BLOB); "
          "INSERT INTO sessions (name) VALUES ('s1'); "
          "PRAGMA user_version = " +
              std::to_string(newer) + ";",
          SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE) == "");
  REQUIRE(Sql(path, "PRAGMA user_version") == std::to_string(newer));
  const auto bytes = ReadBytes(path);
  const auto listing = Listing(dir.path());

  SECTION("session store") {
    const Status s = OpenAndRead(path, "s1");
    INFO("status: " << s.ToString());
    REQUIRE_FALSE(s.ok());
    CHECK(s.code() == StatusCode::kCorruption);
    CheckNamesFile(s, path);
    CHECK(ContainsAny(s.message(), {"newer"}));
    CHECK(Contains(s.message(), std::to_string(newer)));
  }
  SECTION("memory store") {
    auto opened = OpenSqliteMemoryStore(path);
    Status s = opened.ok() ? (*opened)->List("default").status() : opened.status();
    INFO("status: " << s.ToString());
    REQUIRE_FALSE(s.ok());
    CheckNamesFile(s, path);
    CHECK(ContainsAny(s.message(), {"newer"}));
  }
  // Not switched to WAL (that rewrites the header), not migrated, nothing added.
  CHECK(ReadBytes(path) == bytes);
  CHECK(Listing(dir.path()) == listing);
  CHECK(Sql(path, "PRAGMA user_version") == std::to_string(newer));
}

namespace {

// What a child process saw, step by step: "<step>\t<code>\t<message>" lines.
struct StepReport {
  std::map<std::string, std::pair<int, std::string>> steps;
  bool Has(const std::string& step) const { return steps.count(step) != 0; }
  bool Ok(const std::string& step) const { return Has(step) && steps.at(step).first == 0; }
  std::string Says(const std::string& step) const { return Has(step) ? steps.at(step).second : ""; }
};

std::string Flatten(std::string s) {
  std::replace(s.begin(), s.end(), '\n', ' ');
  std::replace(s.begin(), s.end(), '\t', ' ');
  return s;
}

// Runs `body` in a forked child that, when this process is root, first becomes nobody
// (uid/gid 65534: root ignores file permissions). `body` appends report lines to the string.
template <class Body>
StepReport RunAsNobody(Body body) {
  int fds[2];
  REQUIRE(::pipe(fds) == 0);
  const pid_t pid = ::fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    ::close(fds[0]);
    std::string out;
    if (::geteuid() == 0) {
      if (::setgroups(0, nullptr) != 0 || ::setgid(65534) != 0 || ::setuid(65534) != 0) {
        out = "drop\t1\tcould not drop privileges\n";
      }
    }
    if (out.empty()) body(out);
    std::size_t done = 0;
    while (done < out.size()) {
      const ssize_t n = ::write(fds[1], out.data() + done, out.size() - done);
      if (n <= 0) break;
      done += static_cast<std::size_t>(n);
    }
    ::_exit(0);
  }
  ::close(fds[1]);
  std::string text;
  char buf[4096];
  ssize_t n;
  while ((n = ::read(fds[0], buf, sizeof buf)) > 0) text.append(buf, static_cast<std::size_t>(n));
  ::close(fds[0]);
  int status = 0;
  ::waitpid(pid, &status, 0);
  INFO("child output:\n" << text);
  REQUIRE(WIFEXITED(status));
  REQUIRE(WEXITSTATUS(status) == 0);
  StepReport report;
  std::istringstream lines(text);
  std::string line;
  while (std::getline(lines, line)) {
    const auto a = line.find('\t');
    const auto b = line.find('\t', a + 1);
    report.steps[line.substr(0, a)] = {std::stoi(line.substr(a + 1, b - a - 1)),
                                       line.substr(b + 1)};
  }
  REQUIRE_FALSE(report.Has("drop"));
  return report;
}

void Report(std::string& out, const std::string& step, const Status& s) {
  out +=
      step + "\t" + std::to_string(static_cast<int>(s.code())) + "\t" + Flatten(s.message()) + "\n";
}

// In the child: open, read, append; each step reported.
void OpenReadAppend(std::string& out, const std::string& path) {
  auto opened = OpenSqliteSessionStore(path);
  Report(out, "open", opened.status());
  if (!opened.ok()) return;
  auto& store = **opened;
  auto loaded = store.Load("s1");
  Report(out, "load", loaded.status());
  if (loaded.ok()) out += "loaded\t0\t" + std::to_string(loaded->transcript.size()) + "\n";
  Report(out, "append", store.Append("s1", Message::UserText("written by nobody")).status());
  auto memories = OpenSqliteMemoryStore(path);
  Report(out, "memory-open", memories.status());
  if (memories.ok()) Report(out, "memory-add", (*memories)->Add("default", {"by nobody"}));
}

void Chown(const std::string& path, uid_t uid) {
  if (::geteuid() == 0) REQUIRE(::chown(path.c_str(), uid, uid) == 0);
}

bool WriteRefusal(const std::string& message) {
  return ContainsAny(message,
                     {"read-only", "readonly", "read only", "permission", "writ", "access"});
}

}  // namespace

TEST_CASE("R8 a read-only file or folder: writes fail naming the file, nothing changes") {
  TempDir dir("recap-sqlite");
  REQUIRE(::chmod(dir.path().c_str(), 0755) == 0);  // nobody may enter
  const std::string folder = dir.File("store");
  REQUIRE(::mkdir(folder.c_str(), 0755) == 0);
  const std::string path = folder + "/sessions.db";
  Snapshot stored;
  {
    auto store = Open(path);
    for (int i = 0; i < 5; ++i) Ok(store->Append("s1", Message::UserText("m" + std::to_string(i))));
    RequireOk(Ok(OpenSqliteMemoryStore(path))->Add("default", {"a memory"}));
    stored = Take(*store, "s1", {0, 3});
  }
  REQUIRE_FALSE(Exists(path + "-wal"));

  SECTION("read-only file in a writable folder") {
    Chown(folder, 65534);
    Chown(path, 65534);
    REQUIRE(::chmod(path.c_str(), 0444) == 0);
  }
  SECTION("writable file in a read-only folder") {
    Chown(folder, 0);
    Chown(path, 65534);
    REQUIRE(::chmod(path.c_str(), 0644) == 0);
    REQUIRE(::chmod(folder.c_str(), 0555) == 0);
  }
  const auto bytes = ReadBytes(path);
  const auto listing = Listing(folder);
  StepReport report = RunAsNobody([&](std::string& out) { OpenReadAppend(out, path); });
  std::string seen;
  for (const auto& [step, result] : report.steps) {
    seen += step + ": " + std::to_string(result.first) + " " + result.second + "\n";
  }
  INFO("child steps:\n" << seen);
  std::cerr << "as nobody:\n" << seen;
  // The open may fail (it cannot set the file up for writing) or succeed for reading; either
  // way no write gets through, and each failure names the file and says why.
  REQUIRE(report.Has("open"));
  const std::string failed_step = report.Ok("open") ? "append" : "open";
  INFO("step " << failed_step << ": " << report.Says(failed_step));
  REQUIRE(report.Has(failed_step));
  CHECK_FALSE(report.Ok(failed_step));
  CHECK(Contains(report.Says(failed_step), path));
  CHECK(WriteRefusal(report.Says(failed_step)));
  if (report.Has("load") && !report.Ok("load")) CHECK(Contains(report.Says("load"), path));
  if (report.Ok("load")) CHECK(report.Says("loaded") == "5");
  if (report.Has("memory-add")) {
    CHECK_FALSE(report.Ok("memory-add"));
    CHECK(Contains(report.Says("memory-add"), path));
  }
  if (report.Has("memory-open") && !report.Ok("memory-open"))
    CHECK(Contains(report.Says("memory-open"), path));

  CHECK(ReadBytes(path) == bytes);
  ::chmod(folder.c_str(), 0755);
  ::chmod(path.c_str(), 0644);
  CHECK(Take(*Open(path), "s1", {0, 3}) == stored);
}

TEST_CASE("R8 a new file in a read-only folder: the open fails naming the file") {
  TempDir dir("recap-sqlite");
  REQUIRE(::chmod(dir.path().c_str(), 0755) == 0);
  const std::string folder = dir.File("readonly");
  REQUIRE(::mkdir(folder.c_str(), 0555) == 0);
  const std::string path = folder + "/new.db";
  StepReport report = RunAsNobody([&](std::string& out) {
    Report(out, "open", OpenSqliteSessionStore(path).status());
    Report(out, "memory-open", OpenSqliteMemoryStore(path).status());
  });
  for (const std::string step : {"open", "memory-open"}) {
    INFO(step << ": " << report.Says(step));
    REQUIRE(report.Has(step));
    CHECK_FALSE(report.Ok(step));
    CHECK(Contains(report.Says(step), path));
  }
  CHECK(Listing(folder).empty());
}

TEST_CASE("R8 a full database: the write fails as resource exhausted and changes nothing") {
  TempDir dir("recap-sqlite");
  const std::string path = dir.File("sessions.db");
  SqliteStoreOptions options;
  options.max_page_count = 100;
  auto store = Open(path, options);
  recap_test::Rng rng(99);
  Snapshot before;
  Status failure;
  std::size_t appended = 0;
  for (int i = 0; i < 2000 && failure.ok(); ++i) {
    before = Take(*store, "s1", {0});
    std::vector<Message> batch;
    for (int j = 0; j < 3; ++j) {
      batch.push_back(
          Message::UserText(recap_test::RandomText(rng, 1500, recap_test::TextStyle::kMixed)));
    }
    auto r = store->AppendMessages("s1", batch);
    if (r.ok()) {
      appended += batch.size();
    } else {
      failure = r.status();
    }
  }
  INFO("status: " << failure.ToString() << " after " << appended << " messages");
  REQUIRE_FALSE(failure.ok());
  CHECK(failure.code() == StatusCode::kResourceExhausted);
  CheckNamesFile(failure, path);
  CHECK(ContainsAny(failure.message(), {"full", "space", "max_page_count", "size", "limit"}));
  CHECK(appended > 0);
  // Nothing of the failed append is visible, and the store still works for reading.
  CHECK(Take(*store, "s1", {0}) == before);
  CHECK(Sql(path, "PRAGMA integrity_check") == "ok");
  // The other commits hit the same wall without damage.
  SessionState state = Ok(store->Load("s1"));
  ReductionCommit grow;
  grow.expected_version = state.version;
  Message bigger = state.transcript[0];
  bigger.parts = {Text{std::string(200000, 'x'), {}}};
  grow.replacements = {bigger};
  auto r = store->CommitReduction("s1", grow);
  REQUIRE_FALSE(r.ok());  // 200 KB more in a file already at its page cap
  CHECK(r.status().code() == StatusCode::kResourceExhausted);
  CheckNamesFile(r.status(), path);
  CHECK(Take(*store, "s1", {0}) == before);
  store.reset();
  CHECK(Sql(path, "PRAGMA integrity_check") == "ok");
  // Reopened without the cap, the file has what was acknowledged and takes more.
  auto reopened = Open(path);
  CHECK(Take(*reopened, "s1", {0}) == before);
  const std::uint64_t v = Ok(reopened->Append("s1", Message::UserText("more")));
  CHECK(Ok(reopened->Load("s1")).version == v);
}

TEST_CASE("R8 create_if_missing=false: a missing file is not found and not created") {
  TempDir dir("recap-sqlite");
  const std::string path = dir.File("missing.db");
  SqliteStoreOptions options;
  options.create_if_missing = false;
  SECTION("session store") {
    auto r = OpenSqliteSessionStore(path, options);
    INFO("status: " << r.status().ToString());
    REQUIRE_FALSE(r.ok());
    CHECK(r.status().code() == StatusCode::kNotFound);
    CheckNamesFile(r.status(), path);
  }
  SECTION("memory store") {
    auto r = OpenSqliteMemoryStore(path, options);
    INFO("status: " << r.status().ToString());
    REQUIRE_FALSE(r.ok());
    CHECK(r.status().code() == StatusCode::kNotFound);
    CheckNamesFile(r.status(), path);
  }
  CHECK(Listing(dir.path()).empty());
  // An existing file opens as usual.
  Open(path).reset();
  auto again = OpenSqliteSessionStore(path, options);
  INFO("status: " << again.status().ToString());
  CHECK(again.ok());
}

TEST_CASE("R8 a file in a folder that does not exist: the open fails naming the file") {
  TempDir dir("recap-sqlite");
  const std::string path = dir.File("no/such/folder/sessions.db");
  auto r = OpenSqliteSessionStore(path);
  INFO("status: " << r.status().ToString());
  REQUIRE_FALSE(r.ok());
  CheckNamesFile(r.status(), path);
  CHECK(Listing(dir.path()).empty());
}

TEST_CASE("R8 every durability setting stores the same data") {
  TempDir dir("recap-sqlite");
  for (SqliteSynchronous sync :
       {SqliteSynchronous::kOff, SqliteSynchronous::kNormal, SqliteSynchronous::kFull}) {
    const std::string path = dir.File("sync-" + std::to_string(static_cast<int>(sync)) + ".db");
    INFO("file " << path);
    SqliteStoreOptions options;
    options.synchronous = sync;
    Snapshot written;
    {
      auto store = Open(path, options);
      for (int i = 0; i < 10; ++i)
        Ok(store->Append("s1", Message::UserText("m" + std::to_string(i))));
      written = Take(*store, "s1", {0, 5});
    }
    CHECK(Sql(path, "PRAGMA integrity_check") == "ok");
    CHECK(Take(*Open(path), "s1", {0, 5}) == written);
  }
}

TEST_CASE(
    "R8.2 a writer that finds the file locked waits busy_timeout_ms, then fails as unavailable") {
  TempDir dir("recap-sqlite");
  const std::string path = dir.File("sessions.db");
  SqliteStoreOptions options;
  options.busy_timeout_ms = 200;
  auto store = Open(path, options);
  Ok(store->Append("s1", Message::UserText("before the lock")));
  const Snapshot before = Take(*store, "s1", {0});

  // Another connection holds the write lock.
  sqlite3* other = nullptr;
  REQUIRE(sqlite3_open_v2(path.c_str(), &other, SQLITE_OPEN_READWRITE, nullptr) == SQLITE_OK);
  REQUIRE(sqlite3_exec(other, "BEGIN IMMEDIATE", nullptr, nullptr, nullptr) == SQLITE_OK);
  const auto started = std::chrono::steady_clock::now();
  auto r = store->Append("s1", Message::UserText("while locked"));
  const auto waited = std::chrono::steady_clock::now() - started;
  INFO("status: " << r.status().ToString());
  CHECK(r.status().code() == StatusCode::kUnavailable);
  CheckNamesFile(r.status(), path);
  CHECK(ContainsAny(r.status().message(), {"busy_timeout_ms", "locked"}));
  // The remedy is data (docs/errors.md): the command says it in its own words.
  REQUIRE(r.status().remedies().size() == 1);
  const recap::Remedy& remedy = r.status().remedies()[0];
  CHECK(remedy.id == "sqlite.busy_timeout_ms");
  CHECK(remedy.value == "200");
  CHECK(r.status().message().substr(remedy.offset, remedy.size) ==
        "busy_timeout_ms (200 ms); retry, or raise busy_timeout_ms");
  CHECK(waited >= std::chrono::milliseconds(150));
  CHECK(waited < std::chrono::seconds(5));
  // Readers are not blocked by a writer in WAL mode.
  CHECK(Take(*store, "s1", {0}) == before);
  REQUIRE(sqlite3_exec(other, "ROLLBACK", nullptr, nullptr, nullptr) == SQLITE_OK);
  sqlite3_close(other);
  // Once the lock is gone the same write goes through.
  CHECK(Ok(store->Append("s1", Message::UserText("after the lock"))) == before.version + 1);
}

TEST_CASE("R8 two connections appending at once from several threads: every append lands once") {
  TempDir dir("recap-sqlite");
  const std::string path = dir.File("sessions.db");
  auto a = Open(path);
  auto b = Open(path);
  constexpr int kThreads = 4, kPerThread = 25;
  std::vector<std::string> failures(kThreads);
  std::vector<std::vector<std::uint64_t>> versions(kThreads);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      SessionStore& store = t % 2 == 0 ? *a : *b;
      for (int i = 0; i < kPerThread; ++i) {
        Message m =
            Message::UserText("thread " + std::to_string(t) + " message " + std::to_string(i));
        m.id = "t" + std::to_string(t) + "-" + std::to_string(i);
        auto r = store.Append("shared", m);
        if (!r.ok()) {
          failures[t] = r.status().ToString();
          return;
        }
        versions[t].push_back(*r);
      }
    });
  }
  for (auto& th : threads) th.join();
  for (int t = 0; t < kThreads; ++t) {
    INFO("thread " << t << ": " << failures[t]);
    CHECK(failures[t].empty());
  }
  std::set<std::uint64_t> all;
  for (const auto& v : versions) all.insert(v.begin(), v.end());
  CHECK(all.size() == static_cast<std::size_t>(kThreads * kPerThread));  // every version once
  SessionState state = Ok(a->Load("shared"));
  CHECK(state.version == static_cast<std::uint64_t>(kThreads * kPerThread));
  CHECK(state.transcript.size() == static_cast<std::size_t>(kThreads * kPerThread));
  // Each thread's messages in its own order.
  std::map<std::string, int> last;
  for (const Message& m : state.transcript) {
    const std::string thread = m.id.substr(0, m.id.find('-'));
    const int i = std::stoi(m.id.substr(m.id.find('-') + 1));
    if (last.count(thread)) CHECK(i == last[thread] + 1);
    last[thread] = i;
  }
  CHECK(Take(*a, "shared", {0, 50}) == Take(*b, "shared", {0, 50}));
}

TEST_CASE("R8 several connections opening one new file at once all open it and write to it") {
  // Each opening switches a new file to WAL mode. A connection that still held its first read
  // made that switch fail at once with "database is locked" (SQLite does not wait for a lock
  // another connection may be waiting on too), without waiting busy_timeout_ms: two hosts whose
  // first runs met failed one of them about one time in 30.
  TempDir dir("recap-sqlite-new");
  const int rounds = recap_test::kSlowBuild ? 100 : 300;
  constexpr int kConnections = 3;
  int failed_rounds = 0;
  std::string first_failure;
  for (int round = 0; round < rounds; ++round) {
    const std::string path = dir.File("new-" + std::to_string(round) + ".db");
    std::atomic<int> ready{0};
    std::vector<std::string> failures(kConnections);
    std::vector<std::thread> threads;
    for (int c = 0; c < kConnections; ++c) {
      threads.emplace_back([&, c] {
        ready.fetch_add(1);
        while (ready.load() < kConnections) std::this_thread::yield();
        // Start apart by 0 to 0.4 ms, different every round, so every overlap of two
        // openings comes up.
        std::this_thread::sleep_for(std::chrono::microseconds((round * 7919 + c * 104729) % 400));
        auto store = OpenSqliteSessionStore(path, {});
        if (!store.ok()) {
          failures[c] = store.status().ToString();
          return;
        }
        auto r = (*store)->Append("s", Message::UserText("from " + std::to_string(c)));
        if (!r.ok()) failures[c] = r.status().ToString();
      });
    }
    for (auto& th : threads) th.join();
    bool ok = true;
    for (const std::string& f : failures) {
      if (f.empty()) continue;
      ok = false;
      if (first_failure.empty()) first_failure = "round " + std::to_string(round) + ": " + f;
    }
    if (!ok) {
      ++failed_rounds;
      continue;
    }
    CHECK(Ok(Open(path)->Load("s")).transcript.size() == static_cast<std::size_t>(kConnections));
  }
  INFO(failed_rounds << " of " << rounds << " rounds failed; the first: " << first_failure);
  CHECK(failed_rounds == 0);
}

namespace {

std::shared_ptr<SessionStore> OpenReadOnly(const std::string& path) {
  SqliteStoreOptions o;
  o.read_only = true;
  Result<std::shared_ptr<SessionStore>> s = OpenSqliteSessionStore(path, o);
  INFO(s.status().ToString());
  REQUIRE(s.ok());
  return *s;
}

}  // namespace

TEST_CASE(
    "R13.5 a read-only store creates no file, writes nothing, and follows a writer that comes and "
    "goes") {
  TempDir dir("recap-sqlite-ro");
  const std::string path = dir.File("sessions.db");
  {
    auto w = Open(path);
    Ok(w->AppendMessages("s", {Message::UserText("one"), Message::AssistantText("two")}));
  }
  REQUIRE(NamesIn(dir.path()) == std::set<std::string>{"sessions.db"});
  const std::string bytes = [&] {
    std::ifstream in(path, std::ios::binary);
    return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  }();

  auto r = OpenReadOnly(path);
  CHECK(Ok(r->Load("s")).transcript.size() == 2);
  CHECK(Ok(r->History("s")).size() == 2);
  CHECK(Ok(r->ListSessions()) == std::vector<std::string>{"s"});
  CHECK(NamesIn(dir.path()) == std::set<std::string>{"sessions.db"});

  // Writes are refused, naming the option.
  Result<std::uint64_t> refused = r->Append("s", Message::UserText("three"));
  CHECK(refused.status().code() == StatusCode::kFailedPrecondition);
  CHECK_THAT(refused.status().message(),
             Catch::Matchers::Contains("SqliteStoreOptions::read_only"));
  REQUIRE(refused.status().remedies().size() == 1);
  CHECK(refused.status().remedies()[0].id == "store.read_only");
  std::vector<NewSession> create(1);
  create[0].session = "new";
  create[0].messages.push_back(Message::UserText("x"));
  CHECK(r->CreateSessions(std::move(create)).status().code() == StatusCode::kFailedPrecondition);

  {
    // A writer comes: the reader sees its appends through its -wal.
    auto w = Open(path);
    Ok(w->Append("s", Message::UserText("three")));
    CHECK(Ok(r->Load("s")).transcript.size() == 3);
    Ok(w->Append("s", Message::UserText("four")));
    CHECK(Ok(r->Load("s")).transcript.size() == 4);
    SessionChanges changes = Ok(r->LoadChanges("s", 1));
    CHECK(changes.appended.size() == 2);
    r.reset();  // the reader goes first; the writer, last to close, removes its -wal and -shm
  }
  CHECK(NamesIn(dir.path()) == std::set<std::string>{"sessions.db"});
  // A reader opened when no writer is there, then a writer that comes and goes between two of
  // its reads: the second read sees the new file, and no file is left behind.
  auto r2 = OpenReadOnly(path);
  CHECK(Ok(r2->Load("s")).transcript.size() == 4);
  {
    auto w = Open(path);
    Ok(w->Append("s", Message::UserText("five")));
  }
  CHECK(NamesIn(dir.path()) == std::set<std::string>{"sessions.db"});
  CHECK(Ok(r2->Load("s")).transcript.size() == 5);
  CHECK(Ok(r2->History("s")).size() == 5);
  r2.reset();
  CHECK(NamesIn(dir.path()) == std::set<std::string>{"sessions.db"});

  // Nothing a reader did changed the file: reading it again read-only leaves it byte for byte.
  const std::string now = [&] {
    std::ifstream in(path, std::ios::binary);
    return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  }();
  {
    auto r3 = OpenReadOnly(path);
    CHECK(Ok(r3->Load("s")).transcript.size() == 5);
  }
  const std::string after = [&] {
    std::ifstream in(path, std::ios::binary);
    return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  }();
  CHECK(after == now);
  CHECK(bytes != now);  // (the writers did change it)
}

TEST_CASE(
    "R13.5 a read-only open refuses a missing, empty, foreign or special file and creates "
    "nothing") {
  TempDir dir("recap-sqlite-ro2");
  SqliteStoreOptions o;
  o.read_only = true;
  auto code = [&](const std::string& p) { return OpenSqliteSessionStore(p, o).status().code(); };
  CHECK(code(dir.File("missing.db")) == StatusCode::kNotFound);
  { std::ofstream(dir.File("empty.db")); }
  CHECK(code(dir.File("empty.db")) == StatusCode::kNotFound);
  CHECK(code(dir.path()) == StatusCode::kInvalidArgument);
  CHECK(code("/dev/null") == StatusCode::kInvalidArgument);
  CHECK(NamesIn(dir.path()) == std::set<std::string>{"empty.db"});
  CHECK(std::filesystem::file_size(dir.File("empty.db")) == 0);
}

TEST_CASE("R13.5 check_integrity refuses a damaged file before writing to it") {
  TempDir dir("recap-sqlite-check");
  const std::string path = dir.File("sessions.db");
  {
    auto w = Open(path);
    std::vector<Message> many;
    for (int i = 0; i < 3000; ++i)
      many.push_back(Message::UserText("message " + std::to_string(i)));
    Ok(w->AppendMessages("s", many));
  }
  {
    std::fstream f(path, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(4096 * 2);
    const std::string junk(4096 * 3, '\x5a');
    f.write(junk.data(), static_cast<std::streamsize>(junk.size()));
  }
  SqliteStoreOptions o;
  o.check_integrity = true;
  Result<std::shared_ptr<SessionStore>> s = OpenSqliteSessionStore(path, o);
  CHECK(s.status().code() == StatusCode::kCorruption);
  CHECK_THAT(s.status().message(),
             Catch::Matchers::Contains("quick_check") || Catch::Matchers::Contains("damaged"));
}

TEST_CASE(
    "R13 a 64 MB message is stored and read back whole (written through incremental blob I/O)") {
  TempDir dir("recap-sqlite-big");
  const std::string path = dir.File("sessions.db");
  std::string big(64u << 20, 'x');
  for (std::size_t i = 0; i < big.size(); i += 4099) big[i] = static_cast<char>('a' + i % 26);
  {
    auto w = Open(path);
    Ok(w->AppendMessages("s", {Message::UserText("before"), Message::ToolOutput("c", big),
                               Message::UserText("after")}));
  }
  auto r = Open(path);
  SessionState st = Ok(r->Load("s"));
  REQUIRE(st.transcript.size() == 3);
  const auto& result = std::get<ToolResult>(st.transcript[1].parts.at(0));
  CHECK(std::get<Text>(result.content.at(0)).text == big);
  CHECK(JoinedText(st.transcript[2]) == "after");
}

TEST_CASE(
    "R18.1 the scan and the SQLite index read words alike: Unicode punctuation splits, case and "
    "Latin accents fold") {
  TempDir dir("recap-sqlite");
  auto sqlite = Open(dir.File("s.db"));
  auto memory = NewInMemorySessionStore();
  const std::vector<std::pair<std::string, std::vector<std::string>>> cases = {
      // term, the ids it must find (nothing else)
      {"ÉTÉ", {"m1"}},
      {"cafe", {"m1"}},
      {"\xE2\x80\x9CZEBRA-42\xE2\x80\x9D", {"m2"}},  // curly quotes around it
      {"zebra\xE2\x80\x94"
       "42",
       {"m2"}},                              // an em dash between the words
      {"\xE2\x80\x94", {}},                  // punctuation alone
      {"\xE2\x86\x92", {}},                  // an arrow
      {"\xF0\x9F\x98\x80", {}},              // an emoji
      {"\xD0\x9C\xD0\x98\xD0\xA0", {"m3"}},  // МИР: Cyrillic, upper case
  };
  for (SessionStore* store : {sqlite.get(), memory.get()}) {
    std::vector<Message> ms = {Message::UserText("l'été au café \xE2\x80\x94 fin"),
                               Message::UserText("the code \xE2\x80\x9CZEBRA\xE2\x80\x94"
                                                 "42\xE2\x80\x9D "
                                                 "\xE2\x86\x92 \xF0\x9F\x98\x80"),
                               Message::UserText("\xD0\xBC\xD0\xB8\xD1\x80 (peace)")};
    for (std::size_t i = 0; i < ms.size(); ++i) ms[i].id = "m" + std::to_string(i + 1);
    Ok(store->AppendMessages("s", ms));
    for (const auto& [term, want] : cases) {
      INFO((store == sqlite.get() ? "sqlite" : "in-memory") << ": " << term);
      HistorySearch q;
      q.terms = {term};
      q.include_active = true;
      std::vector<std::string> got;
      for (const HistoryHit& h : Ok(store->SearchHistory("s", q)))
        got.push_back(h.entry.message.id);
      CHECK(got == want);
    }
  }
}
