#include "recap/testing/store_conformance.h"

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <map>
#include <random>
#include <set>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "recap/codec.h"
#include "recap/measure.h"
#include "recap/safe_boundary.h"

namespace recap {
namespace testing {
namespace conformance {

namespace {

template <class T>
T Ok(Result<T> r) {
  INFO("status: " << r.status().ToString());
  REQUIRE(r.ok());
  return std::move(r).value();
}

template <class T>
void RequireCode(const Result<T>& r, StatusCode code) {
  INFO("status: " << r.status().ToString());
  REQUIRE(r.status().code() == code);
  CHECK_FALSE(r.status().message().empty());
}

// A message's whole content (ids, roles, parts, flags) as one comparable string.
std::string Print(const Message& m) {
  Result<std::string> s = native::EncodeMessage(m);
  INFO("status: " << s.status().ToString());
  REQUIRE(s.ok());
  return *s;
}

Message User(const std::string& text, const std::string& id = {}) {
  Message m = Message::UserText(text);
  m.id = id;
  return m;
}

Message Assistant(const std::string& text, const std::string& id = {}) {
  Message m = Message::AssistantText(text);
  m.id = id;
  return m;
}

Message Summary(const std::string& text, const std::string& id = {}) {
  Message m = Message::UserText(text);
  m.summary = true;
  m.id = id;
  return m;
}

std::vector<std::string> Ids(const Transcript& t) {
  std::vector<std::string> out;
  for (const Message& m : t) out.push_back(m.id);
  return out;
}

std::vector<std::string> Ids(const std::vector<Message>& v) {
  std::vector<std::string> out;
  out.reserve(v.size());
  for (const Message& m : v) out.push_back(m.id);
  return out;
}

std::vector<std::string> Printed(const Transcript& t) {
  std::vector<std::string> out;
  for (const Message& m : t) out.push_back(Print(m));
  return out;
}

const char* StateName(HistoryState s) {
  return s == HistoryState::kActive ? "active" : "compacted";
}

// Everything a store holds for one session, in comparable form.
struct Snapshot {
  std::uint64_t version = 0;
  std::vector<std::string> active;   // printed messages
  std::vector<std::string> history;  // "seq state replaced_by message"
};

Snapshot Take(SessionStore& store, const std::string& session) {
  Snapshot s;
  SessionState state = Ok(store.Load(session));
  s.version = state.version;
  s.active = Printed(state.transcript);
  for (const HistoryEntry& e : Ok(store.History(session))) {
    s.history.push_back(std::to_string(e.seq) + " " + StateName(e.state) + " " + e.replaced_by +
                        " " + Print(e.message));
  }
  return s;
}

void RequireSame(const Snapshot& before, const Snapshot& after) {
  CHECK(after.version == before.version);
  CHECK(after.active == before.active);
  CHECK(after.history == before.history);
}

// Appends `texts` one message at a time with ids "<prefix>0", "<prefix>1", …, alternating
// user and assistant; returns the version after the last.
std::uint64_t Fill(SessionStore& store, const std::string& session, int count,
                   const std::string& prefix = "m") {
  std::uint64_t v = 0;
  for (int i = 0; i < count; ++i) {
    const std::string id = prefix + std::to_string(i);
    v = Ok(store.Append(session,
                        i % 2 == 0 ? User("text of " + id, id) : Assistant("text of " + id, id)));
  }
  return v;
}

const HistoryEntry* FindEntry(const std::vector<HistoryEntry>& h, const std::string& id,
                              HistoryState state) {
  for (const HistoryEntry& e : h) {
    if (e.message.id == id && e.state == state) return &e;
  }
  return nullptr;
}

void RequireIncreasingSeq(const std::vector<HistoryEntry>& h) {
  for (std::size_t i = 1; i < h.size(); ++i) {
    INFO("history entry " << i);
    REQUIRE(h[i].seq > h[i - 1].seq);
  }
}

}  // namespace

void EmptySession(const SessionStoreFactory& make) {
  auto store = make();
  SessionState state = Ok(store->Load("never"));
  CHECK(state.version == 0);
  CHECK(state.transcript.empty());

  SessionChanges changes = Ok(store->LoadChanges("never", 0));
  CHECK(changes.version == 0);
  CHECK(changes.appended_only);
  CHECK(changes.appended.empty());
  RequireCode(store->LoadChanges("never", 1), StatusCode::kInvalidArgument);

  CHECK(Ok(store->History("never")).empty());
  CHECK(Ok(store->UncertainToolCalls("never")).empty());
  CHECK(Ok(store->ListSessions()).empty());

  // Appending nothing is not a write.
  CHECK(Ok(store->AppendMessages("never", {})) == 0);
  CHECK(Ok(store->Load("never")).version == 0);

  RequireCode(store->Load(""), StatusCode::kInvalidArgument);
  RequireCode(store->Append("", User("x")), StatusCode::kInvalidArgument);
}

void AppendKeepsOrder(const SessionStoreFactory& make) {
  auto store = make();
  CHECK(Ok(store->Append("s1", User("first", "u1"))) == 1);
  std::vector<Message> batch = {Assistant("second", "a1"), User("third", "u2"),
                                Assistant("fourth \xF0\x9F\x98\x80 multi-byte", "a2")};
  std::vector<std::string> expected = {Print(User("first", "u1"))};
  for (const Message& m : batch) expected.push_back(Print(m));
  CHECK(Ok(store->AppendMessages("s1", batch)) == 2);  // N messages, one version

  SessionState state = Ok(store->Load("s1"));
  CHECK(state.version == 2);
  CHECK(Printed(state.transcript) == expected);

  std::vector<HistoryEntry> history = Ok(store->History("s1"));
  REQUIRE(history.size() == 4);
  RequireIncreasingSeq(history);
  for (std::size_t i = 0; i < history.size(); ++i) {
    CHECK(history[i].state == HistoryState::kActive);
    CHECK(history[i].replaced_by.empty());
    CHECK(Print(history[i].message) == expected[i]);
  }
  CHECK(Ok(store->ListSessions()) == std::vector<std::string>{"s1"});
  CHECK(Ok(store->Append("s1", User("fifth"))) == 3);
}

void MessageIds(const SessionStoreFactory& make) {
  auto store = make();
  std::vector<Message> unnamed;
  unnamed.reserve(100);
  for (int i = 0; i < 100; ++i) unnamed.push_back(User("m" + std::to_string(i)));
  Ok(store->AppendMessages("s1", unnamed));
  Ok(store->Append("s1", User("named", "host-7")));
  SessionState state = Ok(store->Load("s1"));
  REQUIRE(state.transcript.size() == 101);
  std::set<std::string> ids;
  for (const Message& m : state.transcript) {
    CHECK_FALSE(m.id.empty());
    ids.insert(m.id);
  }
  CHECK(ids.size() == 101);
  CHECK(state.transcript.back().id == "host-7");
  // The assigned ids are the stored ones: History and LoadChanges agree with Load.
  std::vector<HistoryEntry> history = Ok(store->History("s1"));
  REQUIRE(history.size() == 101);
  for (std::size_t i = 0; i < history.size(); ++i) {
    CHECK(history[i].message.id == state.transcript[i].id);
  }
  CHECK(Ids(Ok(store->LoadChanges("s1", 0)).appended) == Ids(state.transcript));

  const Snapshot before = Take(*store, "s1");
  // A repeated id, alone, after a new one, or twice in one batch: the whole append fails.
  RequireCode(store->Append("s1", User("again", "host-7")), StatusCode::kInvalidArgument);
  RequireCode(store->AppendMessages("s1", {User("new", "fresh-1"), User("again", "host-7")}),
              StatusCode::kInvalidArgument);
  RequireCode(store->AppendMessages("s1", {User("x", "twice"), User("y", "twice")}),
              StatusCode::kInvalidArgument);
  RequireSame(before, Take(*store, "s1"));
  // The rejected batch left nothing behind: its new id is still free.
  CHECK(Ok(store->Append("s1", User("new", "fresh-1"))) == before.version + 1);
}

void LoadChangesAppendedOnly(const SessionStoreFactory& make) {
  auto store = make();
  const std::uint64_t v1 = Ok(store->AppendMessages("s1", {User("a", "a"), Assistant("b", "b")}));
  const std::uint64_t v2 = Ok(store->Append("s1", User("c", "c")));
  const std::uint64_t v3 =
      Ok(store->AppendMessages("s1", {Assistant("d", "d"), User("e", "e"), Assistant("f", "f")}));
  REQUIRE(v3 == v1 + 2);

  auto changes = Ok(store->LoadChanges("s1", v1));
  CHECK(changes.version == v3);
  CHECK(changes.appended_only);
  CHECK(Ids(changes.appended) == std::vector<std::string>{"c", "d", "e", "f"});
  CHECK(Print(changes.appended[0]) == Print(User("c", "c")));

  CHECK(Ids(Ok(store->LoadChanges("s1", v2)).appended) == std::vector<std::string>{"d", "e", "f"});
  changes = Ok(store->LoadChanges("s1", v3));
  CHECK(changes.appended_only);
  CHECK(changes.appended.empty());
  CHECK(changes.version == v3);
  changes = Ok(store->LoadChanges("s1", 0));
  CHECK(changes.appended_only);  // nothing but appends ever happened
  CHECK(Ids(changes.appended) == std::vector<std::string>{"a", "b", "c", "d", "e", "f"});

  RequireCode(store->LoadChanges("s1", v3 + 1), StatusCode::kInvalidArgument);
}

void LoadChangesAfterRewrite(const SessionStoreFactory& make) {
  auto store = make();
  const std::uint64_t v1 = Fill(*store, "s1", 4);
  CompactionCommit c;
  c.expected_version = v1;
  c.replaced = {"m0", "m1"};
  c.checkpoint = Summary("summary", "cp");
  const std::uint64_t v2 = Ok(store->CommitCompaction("s1", c));
  CHECK(v2 == v1 + 1);

  auto full = [&](std::uint64_t since) {
    SessionChanges ch = Ok(store->LoadChanges("s1", since));
    INFO("since " << since);
    CHECK_FALSE(ch.appended_only);
    CHECK(ch.version == Ok(store->Load("s1")).version);
    CHECK(Printed(ch.transcript) == Printed(Ok(store->Load("s1")).transcript));
  };
  full(v1);
  full(0);
  SessionChanges ch = Ok(store->LoadChanges("s1", v2));
  CHECK(ch.appended_only);
  CHECK(ch.appended.empty());

  const std::uint64_t v3 = Ok(store->AppendMessages("s1", {User("x", "x"), Assistant("y", "y")}));
  ch = Ok(store->LoadChanges("s1", v2));
  CHECK(ch.appended_only);
  CHECK(ch.version == v3);
  CHECK(Ids(ch.appended) == std::vector<std::string>{"x", "y"});
  full(v1);

  ReductionCommit r;
  r.expected_version = v3;
  r.replacements = {User("short", "x")};
  const std::uint64_t v4 = Ok(store->CommitReduction("s1", r));
  full(v3);
  CHECK(Ok(store->LoadChanges("s1", v4)).appended_only);

  Message call = Message::AssistantCalls({ToolCall{"call-1", "run", "{}", ""}});
  call.id = "call-msg";
  const std::uint64_t v5 = Ok(store->Append("s1", call));
  RecoveryCommit rc;
  rc.expected_version = v5;
  rc.results.push_back({"call-msg", Message::ToolOutput("call-1", "outcome unknown")});
  const std::uint64_t v6 = Ok(store->CommitRecovery("s1", rc));
  CHECK(v6 == v5 + 1);
  full(v5);
  CHECK(Ok(store->LoadChanges("s1", v6)).appended_only);
}

void Compaction(const SessionStoreFactory& make) {
  auto store = make();
  const std::uint64_t v = Fill(*store, "s1", 6);
  const std::vector<HistoryEntry> original = Ok(store->History("s1"));

  CompactionCommit c;
  c.expected_version = v;
  c.replaced = {"m0", "m1", "m2"};
  c.checkpoint = Summary("## Goal\nship it");  // no id: the store assigns one
  c.injected = {Summary("## Memories\n- tabs", "inj-1")};
  c.reason = "auto";
  CHECK(Ok(store->CommitCompaction("s1", c)) == v + 1);

  SessionState state = Ok(store->Load("s1"));
  CHECK(state.version == v + 1);
  REQUIRE(state.transcript.size() == 5);
  const Message cp = state.transcript[0];  // a copy: `state` is reassigned below
  CHECK(cp.summary);
  CHECK(JoinedText(cp) == "## Goal\nship it");
  CHECK_FALSE(cp.id.empty());
  CHECK(state.transcript[1].id == "inj-1");
  CHECK(Ids(state.transcript.Slice(2, 5)) == std::vector<std::string>{"m3", "m4", "m5"});

  std::vector<HistoryEntry> h = Ok(store->History("s1"));
  REQUIRE(h.size() == 8);
  RequireIncreasingSeq(h);
  for (int i = 0; i < 6; ++i) {
    const std::string id = "m" + std::to_string(i);
    INFO(id);
    const bool summarized = i < 3;
    const HistoryEntry* e =
        FindEntry(h, id, summarized ? HistoryState::kCompacted : HistoryState::kActive);
    REQUIRE(e != nullptr);
    CHECK(e->replaced_by == (summarized ? "compaction:1" : ""));
    CHECK(Print(e->message) == Print(original[static_cast<std::size_t>(i)].message));
  }
  const HistoryEntry* cp_entry = FindEntry(h, cp.id, HistoryState::kActive);
  const HistoryEntry* inj_entry = FindEntry(h, "inj-1", HistoryState::kActive);
  REQUIRE(cp_entry != nullptr);
  REQUIRE(inj_entry != nullptr);
  CHECK(cp_entry->seq > original.back().seq);
  CHECK(inj_entry->seq > original.back().seq);
  CHECK(Print(cp_entry->message) == Print(cp));

  // A second compaction folds the first checkpoint in; the given id is kept.
  CompactionCommit c2;
  c2.expected_version = v + 1;
  c2.replaced = {cp.id, "inj-1", "m3"};
  c2.checkpoint = Summary("## Goal\nship it again", "cp-2");
  CHECK(Ok(store->CommitCompaction("s1", c2)) == v + 2);
  state = Ok(store->Load("s1"));
  CHECK(Ids(state.transcript) == std::vector<std::string>{"cp-2", "m4", "m5"});
  h = Ok(store->History("s1"));
  REQUIRE(h.size() == 9);
  for (const std::string& id : {cp.id, std::string("inj-1"), std::string("m3")}) {
    INFO(id);
    const HistoryEntry* e = FindEntry(h, id, HistoryState::kCompacted);
    REQUIRE(e != nullptr);
    CHECK(e->replaced_by == "compaction:2");
  }
  CHECK(FindEntry(h, "m0", HistoryState::kCompacted)->replaced_by == "compaction:1");
}

void Reduction(const SessionStoreFactory& make) {
  auto store = make();
  const std::uint64_t v = Fill(*store, "s1", 4);
  const Snapshot before = Take(*store, "s1");
  const std::vector<HistoryEntry> original = Ok(store->History("s1"));

  ReductionCommit r;
  r.expected_version = v;
  r.replacements = {Assistant("m1 clipped", "m1"), Assistant("m3 clipped", "m3")};
  CHECK(Ok(store->CommitReduction("s1", r)) == v + 1);

  SessionState state = Ok(store->Load("s1"));
  CHECK(Ids(state.transcript) == std::vector<std::string>{"m0", "m1", "m2", "m3"});
  CHECK(Print(state.transcript[0]) == before.active[0]);
  CHECK(Print(state.transcript[1]) == Print(Assistant("m1 clipped", "m1")));
  CHECK(Print(state.transcript[2]) == before.active[2]);
  CHECK(Print(state.transcript[3]) == Print(Assistant("m3 clipped", "m3")));

  std::vector<HistoryEntry> h = Ok(store->History("s1"));
  REQUIRE(h.size() == 6);
  RequireIncreasingSeq(h);
  for (const char* id : {"m1", "m3"}) {
    INFO(id);
    const HistoryEntry* old = FindEntry(h, id, HistoryState::kCompacted);
    const HistoryEntry* now = FindEntry(h, id, HistoryState::kActive);
    REQUIRE(old != nullptr);
    REQUIRE(now != nullptr);
    CHECK(old->replaced_by == "reduction:1");
    CHECK(JoinedText(old->message) == std::string("text of ") + id);  // the original
    CHECK(JoinedText(now->message) == std::string(id) + " clipped");
    CHECK(now->seq > original.back().seq);
  }

  // Reducing the same message again retires the first replacement.
  ReductionCommit r2;
  r2.expected_version = v + 1;
  r2.replacements = {Assistant("m1 clipped more", "m1")};
  CHECK(Ok(store->CommitReduction("s1", r2)) == v + 2);
  h = Ok(store->History("s1"));
  REQUIRE(h.size() == 7);
  int m1_entries = 0;
  for (const HistoryEntry& e : h) {
    if (e.message.id != "m1") continue;
    ++m1_entries;
    if (JoinedText(e.message) == "m1 clipped") {
      CHECK(e.state == HistoryState::kCompacted);
      CHECK(e.replaced_by == "reduction:2");
    }
  }
  CHECK(m1_entries == 3);
  CHECK(JoinedText(Ok(store->Load("s1")).transcript[1]) == "m1 clipped more");
}

void Recovery(const SessionStoreFactory& make) {
  auto store = make();
  Message call = Message::AssistantCalls({ToolCall{"c1", "read", R"({"path":"a"})", ""},
                                          ToolCall{"c2", "write", R"({"path":"b"})", ""},
                                          ToolCall{"c3", "shell", R"({"cmd":"make"})", ""}},
                                         "Working on it.");
  call.id = "calls";
  Message answered = Message::ToolOutput("c1", "contents of a");
  answered.id = "r1";
  const std::uint64_t v =
      Ok(store->AppendMessages("s1", {User("please fix it", "u0"), call, answered}));

  std::vector<UncertainCall> uncertain = Ok(store->UncertainToolCalls("s1"));
  REQUIRE(uncertain.size() == 2);
  CHECK(uncertain[0].message == 1);
  CHECK(uncertain[0].call_id == "c2");
  CHECK(uncertain[0].name == "write");
  CHECK(uncertain[1].call_id == "c3");

  RecoveryCommit rc;
  rc.expected_version = v;
  Message r2 = Message::ToolOutput("c2", "outcome unknown; not repeated", true);
  r2.id = "rec-2";
  rc.results.push_back({"calls", r2});
  rc.results.push_back({"calls", Message::ToolOutput("c3", "outcome unknown; not repeated", true)});
  CHECK(Ok(store->CommitRecovery("s1", rc)) == v + 1);

  SessionState state = Ok(store->Load("s1"));
  REQUIRE(state.transcript.size() == 5);
  CHECK(state.transcript[0].id == "u0");
  CHECK(state.transcript[1].id == "calls");
  CHECK(state.transcript[2].id == "rec-2");  // several after one anchor keep their order
  CHECK(Print(state.transcript[2]) == Print(r2));
  CHECK_FALSE(state.transcript[3].id.empty());
  CHECK(std::get<ToolResult>(state.transcript[3].parts[0]).call_id == "c3");
  CHECK(state.transcript[4].id == "r1");
  CHECK(Ok(store->UncertainToolCalls("s1")).empty());

  std::vector<HistoryEntry> h = Ok(store->History("s1"));
  REQUIRE(h.size() == 5);
  RequireIncreasingSeq(h);
  for (const HistoryEntry& e : h) CHECK(e.state == HistoryState::kActive);
  CHECK(FindEntry(h, "rec-2", HistoryState::kActive) != nullptr);
  CHECK(FindEntry(h, state.transcript[3].id, HistoryState::kActive) != nullptr);
}

void StaleVersionConflicts(const SessionStoreFactory& make) {
  auto store = make();
  const std::uint64_t seen = Fill(*store, "s1", 6);
  Ok(store->Append("s1", User("meanwhile", "late")));  // another writer moves the session on
  const Snapshot before = Take(*store, "s1");

  CompactionCommit c;
  c.expected_version = seen;
  c.replaced = {"m0", "m1"};
  c.checkpoint = Summary("summary");
  RequireCode(store->CommitCompaction("s1", c), StatusCode::kConflict);

  ReductionCommit r;
  r.expected_version = seen;
  r.replacements = {User("clipped", "m0")};
  RequireCode(store->CommitReduction("s1", r), StatusCode::kConflict);

  RecoveryCommit rc;
  rc.expected_version = seen;
  rc.results.push_back({"m1", Message::ToolOutput("x", "unknown")});
  RequireCode(store->CommitRecovery("s1", rc), StatusCode::kConflict);

  // A version the session never reached is no better.
  c.expected_version = before.version + 5;
  RequireCode(store->CommitCompaction("s1", c), StatusCode::kConflict);
  RequireSame(before, Take(*store, "s1"));

  // The same commit against the current version goes through.
  c.expected_version = before.version;
  CHECK(Ok(store->CommitCompaction("s1", c)) == before.version + 1);
  // ... after which the old version is stale too.
  r.expected_version = before.version;
  r.replacements = {User("clipped", "m2")};
  RequireCode(store->CommitReduction("s1", r), StatusCode::kConflict);
}

void ConcurrentCommitsOneWins(const SessionStoreFactory& make) {
  auto store = make();
  for (int round = 0; round < 20; ++round) {
    const std::string session = "race-" + std::to_string(round);
    INFO(session);
    const std::uint64_t v = Fill(*store, session, 6);

    // Two compactions (or, in odd rounds, a compaction and a reduction) based on version v.
    CompactionCommit a;
    a.expected_version = v;
    a.replaced = {"m0", "m1", "m2"};
    a.checkpoint = Summary("by writer A", "cp-a");
    CompactionCommit b = a;
    b.checkpoint = Summary("by writer B", "cp-b");
    ReductionCommit rb;
    rb.expected_version = v;
    rb.replacements = {Assistant("clipped by B", "m5")};
    const bool mixed = round % 2 == 1;

    std::atomic<int> ready{0};
    Status sa, sb;
    auto start = [&] {
      ready.fetch_add(1);
      while (ready.load() < 2) std::this_thread::yield();
    };
    std::thread ta([&] {
      start();
      sa = store->CommitCompaction(session, a).status();
    });
    std::thread tb([&] {
      start();
      sb = mixed ? store->CommitReduction(session, rb).status()
                 : store->CommitCompaction(session, b).status();
    });
    ta.join();
    tb.join();

    INFO("A: " << sa.ToString() << "; B: " << sb.ToString());
    REQUIRE(sa.ok() != sb.ok());
    const Status& loser = sa.ok() ? sb : sa;
    CHECK(loser.code() == StatusCode::kConflict);

    SessionState state = Ok(store->Load(session));
    CHECK(state.version == v + 1);
    std::vector<HistoryEntry> h = Ok(store->History(session));
    if (sa.ok() || !mixed) {
      const std::string winner = sa.ok() ? "cp-a" : "cp-b";
      CHECK(Ids(state.transcript) == std::vector<std::string>{winner, "m3", "m4", "m5"});
      CHECK(h.size() == 7);
      int summaries = 0;
      for (const HistoryEntry& e : h) summaries += e.message.summary ? 1 : 0;
      CHECK(summaries == 1);
    } else {
      CHECK(JoinedText(state.transcript[5]) == "clipped by B");
      CHECK(h.size() == 7);
    }
  }
}

void ConcurrentAppendsAndReads(const SessionStoreFactory& make) {
  auto store = make();
  constexpr int kWriters = 4;
  constexpr int kPerWriter = 50;
  std::atomic<int> writers_done{0};

  // The reader follows the session with LoadChanges alone, as Compactor::Prepare does.
  // Catch2's assertions are not thread-safe, so threads only record what they saw.
  std::vector<std::string> followed;
  std::uint64_t since = 0;
  std::string reader_error;
  auto follow = [&] {
    Result<SessionChanges> ch = store->LoadChanges("s1", since);
    if (!ch.ok()) {
      reader_error = ch.status().ToString();
    } else if (ch->version < since) {
      reader_error = "the version went back from " + std::to_string(since);
    } else if (!ch->appended_only) {
      reader_error = "appended_only is false though only appends happened";
    } else {
      for (const Message& m : ch->appended) followed.push_back(m.id);
      since = ch->version;
    }
    return reader_error.empty();
  };
  std::thread reader([&] {
    while (writers_done.load() < kWriters && follow()) {
    }
  });
  std::vector<std::thread> writers;
  writers.reserve(kWriters);
  for (int w = 0; w < kWriters; ++w) {
    writers.emplace_back([&, w] {
      for (int i = 0; i < kPerWriter; ++i) {
        const std::string id = "w" + std::to_string(w) + "-" + std::to_string(i);
        if (!store->Append("s1", User(id, id)).ok()) break;
      }
      writers_done.fetch_add(1);
    });
  }
  for (auto& t : writers) t.join();
  reader.join();
  follow();
  INFO(reader_error);
  CHECK(reader_error.empty());

  SessionState state = Ok(store->Load("s1"));
  CHECK(state.version == static_cast<std::uint64_t>(kWriters) * kPerWriter);
  REQUIRE(state.transcript.size() == static_cast<std::size_t>(kWriters * kPerWriter));
  CHECK(followed == Ids(state.transcript));
  // Each writer's messages keep that writer's order.
  std::map<std::string, int> next;
  for (const std::string& id : Ids(state.transcript)) {
    const std::string writer = id.substr(0, id.find('-'));
    CHECK(std::stoi(id.substr(id.find('-') + 1)) == next[writer]++);
  }
  CHECK(Ok(store->History("s1")).size() == state.transcript.size());
}

void Isolation(const SessionStoreFactory& make) {
  auto store = make();
  Ok(store->Append("b", User("in b", "x")));
  Ok(store->Append("a", User("in a", "x")));  // the same id in another session is fine
  const std::uint64_t v1 = Fill(*store, "s1", 6, "one-");
  const std::uint64_t v2 = Fill(*store, "s2", 4, "two-");
  CHECK(v1 == 6);
  CHECK(v2 == 4);  // versions are per session
  CHECK(Ok(store->ListSessions()) == std::vector<std::string>{"a", "b", "s1", "s2"});

  const Snapshot s2_before = Take(*store, "s2");
  const Snapshot a_before = Take(*store, "a");
  CompactionCommit c;
  c.expected_version = v1;
  c.replaced = {"one-0", "one-1"};
  c.checkpoint = Summary("s1 summary");
  Ok(store->CommitCompaction("s1", c));
  ReductionCommit r;
  r.expected_version = v1 + 1;
  r.replacements = {User("clipped", "one-2")};
  Ok(store->CommitReduction("s1", r));
  Ok(store->Append("s1", User("more")));
  RequireSame(s2_before, Take(*store, "s2"));
  RequireSame(a_before, Take(*store, "a"));
  SessionChanges ch = Ok(store->LoadChanges("s2", v2));
  CHECK(ch.appended_only);
  CHECK(ch.appended.empty());

  // Another session's ids are unknown here.
  const Snapshot s1_before = Take(*store, "s1");
  CompactionCommit wrong;
  wrong.expected_version = v2;
  wrong.replaced = {"one-3"};
  wrong.checkpoint = Summary("x");
  RequireCode(store->CommitCompaction("s2", wrong), StatusCode::kInvalidArgument);
  ReductionCommit wrong_r;
  wrong_r.expected_version = v2;
  wrong_r.replacements = {User("x", "one-4")};
  RequireCode(store->CommitReduction("s2", wrong_r), StatusCode::kInvalidArgument);
  RecoveryCommit wrong_rc;
  wrong_rc.expected_version = v2;
  wrong_rc.results.push_back({"one-4", Message::ToolOutput("c", "x")});
  RequireCode(store->CommitRecovery("s2", wrong_rc), StatusCode::kInvalidArgument);
  RequireSame(s2_before, Take(*store, "s2"));
  RequireSame(s1_before, Take(*store, "s1"));
}

void HistoryKeepsEverything(const SessionStoreFactory& make) {
  const std::uint64_t seed = std::random_device{}();
  INFO("seed " << seed << " (the sequence of operations is drawn from it)");
  std::mt19937_64 rng(seed);
  auto below = [&](std::uint64_t n) { return rng() % n; };

  auto store = make();
  const std::string s = "s1";
  std::vector<Message> model;          // the expected active transcript
  std::multiset<std::string> stored;   // every message ever stored, printed
  std::set<std::string> appended_ids;  // what the host appended
  std::uint64_t version = 0;
  int next_id = 0;
  auto fresh = [&](const char* prefix) { return prefix + std::to_string(next_id++); };

  for (int step = 0; step < 200; ++step) {
    INFO("step " << step);
    const std::uint64_t op = below(100);
    if (op < 65 || model.size() < 3) {
      std::vector<Message> batch;
      const std::uint64_t n = 1 + below(3);
      for (std::uint64_t i = 0; i < n; ++i) {
        const std::string id = fresh("h");
        batch.push_back(i % 2 ? Assistant("reply " + id, id) : User("ask " + id, id));
        appended_ids.insert(id);
      }
      version = Ok(store->AppendMessages(s, batch));
      for (Message& m : batch) {
        stored.insert(Print(m));
        model.push_back(std::move(m));
      }
    } else if (op < 80) {
      CompactionCommit c;
      c.expected_version = version;
      const std::size_t k = 1 + below(model.size() - 1);
      for (std::size_t i = 0; i < k; ++i) c.replaced.push_back(model[i].id);
      c.checkpoint = Summary("summary " + std::to_string(step), fresh("cp"));
      if (below(2)) c.injected.push_back(Summary("memories", fresh("inj")));
      version = Ok(store->CommitCompaction(s, c));
      std::vector<Message> next = {c.checkpoint};
      next.insert(next.end(), c.injected.begin(), c.injected.end());
      next.insert(next.end(), model.begin() + static_cast<std::ptrdiff_t>(k), model.end());
      for (const Message& m : c.injected) stored.insert(Print(m));
      stored.insert(Print(c.checkpoint));
      model = std::move(next);
    } else if (op < 95) {
      ReductionCommit r;
      r.expected_version = version;
      std::set<std::size_t> picked;
      const std::uint64_t n = 1 + below(2);
      for (std::uint64_t i = 0; i < n; ++i) picked.insert(below(model.size()));
      for (std::size_t p : picked) {
        Message m = model[p];
        m.parts = {Text{"clipped at step " + std::to_string(step), ""}};
        r.replacements.push_back(m);
      }
      version = Ok(store->CommitReduction(s, r));
      for (const Message& m : r.replacements) {
        stored.insert(Print(m));
        for (Message& cur : model) {
          if (cur.id == m.id) cur = m;
        }
      }
    } else {
      RecoveryCommit rc;
      rc.expected_version = version;
      const std::size_t p = below(model.size());
      Message m = Message::ToolOutput("call-" + std::to_string(step), "outcome unknown");
      m.id = fresh("rec");
      rc.results.push_back({model[p].id, m});
      version = Ok(store->CommitRecovery(s, rc));
      stored.insert(Print(m));
      model.insert(model.begin() + static_cast<std::ptrdiff_t>(p + 1), m);
    }
    SessionState state = Ok(store->Load(s));
    REQUIRE(state.version == static_cast<std::uint64_t>(step + 1));
    std::vector<std::string> expected;
    expected.reserve(model.size());
    for (const Message& m : model) expected.push_back(Print(m));
    REQUIRE(Printed(state.transcript) == expected);
  }

  std::vector<HistoryEntry> h = Ok(store->History(s));
  RequireIncreasingSeq(h);
  std::multiset<std::string> in_history;
  std::multiset<std::string> active_in_history;
  std::map<std::string, int> originals_seen;
  for (const HistoryEntry& e : h) {
    const std::string printed = Print(e.message);
    in_history.insert(printed);
    if (e.state == HistoryState::kActive) {
      CHECK(e.replaced_by.empty());
      active_in_history.insert(printed);
    } else {
      const std::string& by = e.replaced_by;
      const bool compaction = by.rfind("compaction:", 0) == 0;
      const bool reduction = by.rfind("reduction:", 0) == 0;
      INFO("replaced_by " << by);
      CHECK((compaction || reduction));
    }
    if (appended_ids.count(e.message.id) && JoinedText(e.message).rfind("clipped", 0) != 0) {
      ++originals_seen[e.message.id];
    }
  }
  // Every message ever stored is there exactly once, and nothing else is.
  CHECK(in_history == stored);
  // Every message the host appended is there exactly once in its original form.
  CHECK(originals_seen.size() == appended_ids.size());
  for (const auto& kv : originals_seen) {
    INFO(kv.first);
    CHECK(kv.second == 1);
  }
  // The active entries are exactly the active transcript.
  std::multiset<std::string> active;
  for (const Message& m : model) active.insert(Print(m));
  CHECK(active_in_history == active);
}

void ForEachHistoryEntryIsHistory(const SessionStoreFactory& make) {
  auto store = make();
  const std::string s = "s1";
  CHECK(store
            ->ForEachHistoryEntry("never",
                                  [](HistoryEntry&&) {
                                    FAIL("a session never written has no entries");
                                    return Status::OK();
                                  })
            .ok());
  // A history with compacted, reduced and active entries.
  std::vector<Message> batch;
  for (int i = 0; i < 40; ++i) {
    const std::string id = "m" + std::to_string(i);
    batch.push_back(i % 2 ? Assistant("reply " + id, id) : User("ask " + id, id));
  }
  std::uint64_t version = Ok(store->AppendMessages(s, batch));
  CompactionCommit c;
  c.expected_version = version;
  for (int i = 0; i < 10; ++i) c.replaced.push_back(batch[static_cast<std::size_t>(i)].id);
  c.checkpoint = Summary("summary", "cp1");
  version = Ok(store->CommitCompaction(s, c));
  ReductionCommit r;
  r.expected_version = version;
  Message clipped = batch[20];
  clipped.parts = {Text{"clipped", ""}};
  r.replacements.push_back(clipped);
  version = Ok(store->CommitReduction(s, r));
  REQUIRE(Ok(store->AppendMessages(s, {User("last", "m40")})) == version + 1);

  const std::vector<HistoryEntry> whole = Ok(store->History(s));
  REQUIRE(whole.size() == 43);
  std::vector<HistoryEntry> walked;
  REQUIRE(store
              ->ForEachHistoryEntry(s,
                                    [&](HistoryEntry&& e) {
                                      walked.push_back(std::move(e));
                                      return Status::OK();
                                    })
              .ok());
  REQUIRE(walked.size() == whole.size());
  for (std::size_t i = 0; i < whole.size(); ++i) {
    INFO("entry " << i);
    CHECK(walked[i].seq == whole[i].seq);
    CHECK(walked[i].state == whole[i].state);
    CHECK(walked[i].replaced_by == whole[i].replaced_by);
    CHECK(Print(walked[i].message) == Print(whole[i].message));
  }
  // The visitor's Status stops the walk and comes back as is.
  std::size_t seen = 0;
  const Status stopped = store->ForEachHistoryEntry(s, [&](HistoryEntry&&) {
    return ++seen == 5 ? Status::Cancelled("enough after five") : Status::OK();
  });
  CHECK(stopped.code() == StatusCode::kCancelled);
  CHECK(stopped.message() == "enough after five");
  CHECK(seen == 5);
  // The store works as before after a walk that stopped half-way: reads and a write.
  CHECK(Ok(store->History(s)).size() == 43);
  CHECK(Ok(store->AppendMessages(s, {User("after", "m41")})) == version + 2);
  CHECK(store->ForEachHistoryEntry("", [](HistoryEntry&&) { return Status::OK(); }).code() ==
        StatusCode::kInvalidArgument);
}

void BadCommitsChangeNothing(const SessionStoreFactory& make) {
  auto store = make();
  const std::uint64_t v = Fill(*store, "s1", 6);
  const Snapshot before = Take(*store, "s1");

  auto compaction = [&](std::vector<std::string> replaced, Message checkpoint,
                        std::vector<Message> injected = {}) {
    CompactionCommit c;
    c.expected_version = v;
    c.replaced = std::move(replaced);
    c.checkpoint = std::move(checkpoint);
    c.injected = std::move(injected);
    return store->CommitCompaction("s1", c);
  };
  // Every store refuses each bad commit with the same words: `says` is a phrase the message
  // must hold (the stores share their messages, src/core/internal/recap_internal/store_rules.h).
  auto bad = [&](const Result<std::uint64_t>& r, const char* what, const char* says) {
    INFO(what);
    RequireCode(r, StatusCode::kInvalidArgument);
    INFO("status: " << r.status().ToString());
    CHECK(r.status().message().find(says) != std::string::npos);
    CHECK(r.status().message().find("\"s1\"") != std::string::npos);
    RequireSame(before, Take(*store, "s1"));
  };

  bad(compaction({"m0", "nope"}, Summary("s")), "unknown id in replaced",
      "replaced[1] is \"nope\", which is not an active message");
  bad(compaction({"m1", "m2"}, Summary("s")), "replaced is not the prefix",
      "replaced[0] is \"m1\" but active message 0 of session \"s1\" is \"m0\"");
  bad(compaction({"m0", "m2"}, Summary("s")), "replaced skips a message",
      "replaces the leading messages of the transcript, in order");
  bad(compaction({"m1", "m0"}, Summary("s")), "replaced out of order",
      "replaced[0] is \"m1\" but active message 0");
  bad(compaction({"m0", "m1", "m2", "m3", "m4", "m5", "m6"}, Summary("s")),
      "replaced longer than the transcript",
      "replaces 7 messages but session \"s1\" has only 6 active messages");
  bad(compaction({}, Summary("s")), "nothing replaced", "`replaced` is empty");
  bad(compaction({"m0"}, User("not flagged summary")), "checkpoint not flagged summary",
      "must be flagged summary");
  bad(compaction({"m0"}, Summary("s", "m4")), "checkpoint id of a kept message",
      "the checkpoint has id \"m4\"");
  bad(compaction({"m0"}, Summary("s", "cp"), {Summary("i", "dup"), Summary("j", "dup")}),
      "injected ids repeat", "injected message 1 has id \"dup\"");
  bad(compaction({"m0"}, Summary("s", "cp"), {Summary("i", "cp")}), "injected id of the checkpoint",
      "injected message has id \"cp\"");

  auto reduction = [&](std::vector<Message> replacements) {
    ReductionCommit r;
    r.expected_version = v;
    r.replacements = std::move(replacements);
    return store->CommitReduction("s1", r);
  };
  bad(reduction({User("x", "nope")}), "reduction of an unknown id",
      "replacement 0 has id \"nope\", which is not an active message");
  bad(reduction({User("x", "m1"), User("y", "nope")}), "one good and one unknown replacement",
      "replacement 1 has id \"nope\"");
  bad(reduction({User("x", "m1"), User("y", "m1")}), "the same message replaced twice",
      "replacement 1 replaces \"m1\" of session \"s1\" a second time");
  bad(reduction({User("x")}), "a replacement without id", "replacement 0 has id \"\"");
  bad(reduction({}), "an empty reduction", "`replacements` is empty");

  auto recovery = [&](std::vector<RecoveredResult> results) {
    RecoveryCommit rc;
    rc.expected_version = v;
    rc.results = std::move(results);
    return store->CommitRecovery("s1", rc);
  };
  Message result = Message::ToolOutput("c", "unknown");
  Message colliding = result;
  colliding.id = "m0";
  bad(recovery({{"nope", result}}), "recovery after an unknown message",
      "recovered result 0 goes after \"nope\", which is not an active message");
  bad(recovery({{"m1", result}, {"nope", result}}), "one good and one bad anchor",
      "recovered result 1 goes after \"nope\"");
  bad(recovery({{"m1", colliding}}), "recovered result with an active id",
      "recovered result has id \"m0\"");
  bad(recovery({}), "an empty recovery", "`results` is empty");

  // A session name that is not UTF-8 is named in valid UTF-8 (a status message always is).
  for (const std::string& odd : {std::string("s\xff\xfe"), std::string("s\xc3")}) {
    CompactionCommit none;
    none.replaced = {"m0"};
    none.checkpoint = Summary("s");
    const Result<std::uint64_t> r = store->CommitCompaction(odd, none);
    REQUIRE_FALSE(r.ok());
    CHECK(IsValidUtf8(r.status().message()));
  }

  // The store is still fully usable at the same version.
  CompactionCommit good;
  good.expected_version = v;
  good.replaced = {"m0"};
  good.checkpoint = Summary("s", "cp");
  CHECK(Ok(store->CommitCompaction("s1", good)) == v + 1);
}

namespace {

// Hands out `count` messages "<prefix>i" (user and assistant in turn), then fails with `fail`
// instead of ending when it is set.
class CountingSource : public MessageSource {
 public:
  CountingSource(std::string prefix, int count, Status fail = Status::OK())
      : prefix_(std::move(prefix)), count_(count), fail_(std::move(fail)) {}
  Result<bool> Next(Message* out) override {
    if (given_ == count_) {
      if (!fail_.ok()) return fail_;
      return false;
    }
    const std::string id = prefix_ + std::to_string(given_);
    *out = given_ % 2 == 0 ? User("text of " + id, id) : Assistant("text of " + id, id);
    ++given_;
    return true;
  }
  int given() const { return given_; }

 private:
  std::string prefix_;
  int count_;
  Status fail_;
  int given_ = 0;
};

Message TwoCallsOneId() {
  return Message::AssistantCalls(
      {ToolCall{"call_x", "read", "{}", {}}, ToolCall{"call_x", "read", "{\"path\":\"b\"}", {}}});
}

}  // namespace

void CreateSessions(const SessionStoreFactory& make) {
  auto store = make();
  Fill(*store, "old", 3);

  // Two new sessions at once, one from a vector, one from a vector and a source.
  CountingSource source("s", 2500);
  std::vector<NewSession> two(2);
  two[0].session = "instructions";
  two[0].messages.push_back(Message::SystemText("Never refund."));
  two[1].session = "transcript";
  two[1].messages.push_back(User("first", "t-first"));
  two[1].source = &source;
  // Called outside CHECK: the macro names its expression twice.
  const std::vector<std::uint64_t> created = Ok(store->CreateSessions(std::move(two)));
  CHECK(created == std::vector<std::uint64_t>{1, 1});
  CHECK(source.given() == 2500);

  SessionState inst = Ok(store->Load("instructions"));
  CHECK(inst.version == 1);
  REQUIRE(inst.transcript.size() == 1);
  CHECK(JoinedText(inst.transcript[0]) == "Never refund.");
  CHECK_FALSE(inst.transcript[0].id.empty());  // a fresh id

  SessionState t = Ok(store->Load("transcript"));
  CHECK(t.version == 1);
  REQUIRE(t.transcript.size() == 2501);
  CHECK(t.transcript[0].id == "t-first");
  CHECK(t.transcript[1].id == "s0");
  CHECK(t.transcript[2500].id == "s2499");
  CHECK(JoinedText(t.transcript[2500]) == "text of s2499");
  CHECK(t.transcript.chars() == MessageChars(User("first")) + [] {
    std::size_t n = 0;
    for (int i = 0; i < 2500; ++i) n += std::string("text of s" + std::to_string(i)).size();
    return n;
  }());
  // Created sessions behave like appended ones afterwards.
  SessionChanges changes = Ok(store->LoadChanges("transcript", 0));
  CHECK(changes.appended_only);
  CHECK(changes.appended.size() == 2501);
  CHECK(Ok(store->Append("transcript", User("next"))) == 2);
  std::vector<HistoryEntry> h = Ok(store->History("transcript"));
  CHECK(h.size() == 2502);
  RequireIncreasingSeq(h);
  std::vector<std::string> names = Ok(store->ListSessions());
  CHECK(names == std::vector<std::string>{"instructions", "old", "transcript"});
  // The other session was not touched.
  CHECK(Ok(store->Load("old")).version == 3);
}

void CompactionKeepsInstructionsAndPinned(const SessionStoreFactory& make) {
  auto store = make();
  const std::string s = "s1";
  Message instructions = Message::SystemText("Never refund.");
  instructions.id = "i0";
  Message rule = User("Always answer in French.", "p");
  rule.pinned = true;
  std::uint64_t v =
      Ok(store->AppendMessages(s, {instructions, User("u1 text", "u1"), Assistant("a1 text", "a1"),
                                   rule, User("u2 text", "u2"), Assistant("a2 text", "a2"),
                                   User("u3 text", "u3"), Assistant("a3 text", "a3")}));
  const std::vector<HistoryEntry> before = Ok(store->History(s));

  // Refused, changing nothing: each shows the message a store gives.
  const Snapshot untouched = Take(*store, s);
  struct Bad {
    std::vector<std::string> kept, replaced, checkpoint_id;
    const char* says;
  };
  const std::vector<Bad> bad = {
      {{"i0"}, {"u1", "u2"}, {"cp"}, "active message 2 of session \"s1\" is \"a1\""},
      {{"gone"}, {"u1"}, {"cp"}, "kept[0] is \"gone\", which is not an active message"},
      {{"i0", "u1"},
       {"u1", "a1"},
       {"cp"},
       "which `kept` (or an earlier entry of `replaced`) names too"},
      {{"i0", "i0"},
       {"u1"},
       {"cp"},
       "kept[1] is \"i0\", which an earlier entry of `kept` names too"},
      {{"a3"}, {"i0"}, {"cp"}, "a compaction covers the leading messages of the transcript"},
      {{"i0", "p"}, {"u1", "a1", "u2", "a2"}, {"p"}, "\"p\""},
  };
  for (const Bad& b : bad) {
    INFO(b.says);
    CompactionCommit c;
    c.expected_version = v;
    c.kept = b.kept;
    c.replaced = b.replaced;
    c.checkpoint = Summary("summary", b.checkpoint_id[0]);
    Result<std::uint64_t> r = store->CommitCompaction(s, c);
    REQUIRE_FALSE(r.ok());
    CHECK(r.status().code() == StatusCode::kInvalidArgument);
    CHECK_THAT(r.status().message(), Catch::Matchers::Contains(b.says));
    RequireSame(untouched, Take(*store, s));
  }

  // Kept: the instructions first and the pinned rule from the middle of the span.
  CompactionCommit c;
  c.expected_version = v;
  c.kept = {"i0", "p"};
  c.replaced = {"u1", "a1", "u2", "a2"};
  c.checkpoint = Summary("summary 1", "cp1");
  v = Ok(store->CommitCompaction(s, c));
  SessionState state = Ok(store->Load(s));
  CHECK(state.version == v);
  CHECK(Ids(state.transcript) == std::vector<std::string>{"i0", "p", "cp1", "u3", "a3"});
  CHECK(Print(state.transcript[0]) == Print(instructions));
  CHECK(Print(state.transcript[1]) == Print(rule));  // pinned, as it was written
  CHECK(state.transcript[1].pinned);
  std::vector<HistoryEntry> h = Ok(store->History(s));
  REQUIRE(h.size() == before.size() + 1);
  RequireIncreasingSeq(h);
  // The kept ones are the same entries of the history (same seq), still active.
  for (const char* id : {"i0", "p"}) {
    INFO(id);
    const HistoryEntry* now = FindEntry(h, id, HistoryState::kActive);
    const HistoryEntry* was = FindEntry(before, id, HistoryState::kActive);
    REQUIRE(now != nullptr);
    REQUIRE(was != nullptr);
    CHECK(now->seq == was->seq);
    CHECK(now->replaced_by.empty());
  }
  for (const char* id : {"u1", "a1", "u2", "a2"}) {
    INFO(id);
    CHECK(FindEntry(h, id, HistoryState::kCompacted) != nullptr);
    CHECK(FindEntry(h, id, HistoryState::kActive) == nullptr);
  }
  CHECK_FALSE(Ok(store->LoadChanges(s, v - 1)).appended_only);

  // Appends go after the tail; a second compaction keeps them again and merges cp1.
  v = Ok(store->Append(s, User("u4 text", "u4")));
  CompactionCommit c2;
  c2.expected_version = v;
  c2.kept = {"i0", "p"};
  c2.replaced = {"cp1", "u3"};
  c2.checkpoint = Summary("summary 2", "cp2");
  Message context = User("context from a plugin", "ctx");
  context.summary = true;
  c2.injected = {context};
  v = Ok(store->CommitCompaction(s, c2));
  state = Ok(store->Load(s));
  CHECK(Ids(state.transcript) == std::vector<std::string>{"i0", "p", "cp2", "ctx", "a3", "u4"});
  // The store stays consistent afterwards: a reduction of a kept message and an append.
  ReductionCommit r;
  r.expected_version = v;
  Message shorter = state.transcript[4];
  shorter.parts = {Text{"a3 clipped", ""}};
  r.replacements = {shorter};
  CHECK(Ok(store->CommitReduction(s, r)) == v + 1);
  CHECK(Ok(store->Append(s, User("u5 text", "u5"))) == v + 2);
  state = Ok(store->Load(s));
  CHECK(Ids(state.transcript) ==
        std::vector<std::string>{"i0", "p", "cp2", "ctx", "a3", "u4", "u5"});
  CHECK(JoinedText(state.transcript[4]) == "a3 clipped");
}

void PinnedOnlyWhereItCanStay(const SessionStoreFactory& make) {
  auto store = make();
  Message call = Message::AssistantCalls({ToolCall{"c1", "read", "{}", {}}});
  call.pinned = true;
  Message assistant = Assistant("ok", "a");
  assistant.pinned = true;
  Message result = Message::ToolOutput("c1", "out");
  result.role = Role::kUser;
  result.pinned = true;
  const std::vector<std::pair<Message, const char*>> refused = {
      {call, "is pinned, but it is an assistant message"},
      {assistant, "is pinned, but it is an assistant message"},
      {result, "is pinned, but it carries tool calls or results"},
  };
  for (const auto& [m, says] : refused) {
    INFO(says);
    Result<std::uint64_t> r = store->AppendMessages("s", {User("first", "u0"), m});
    REQUIRE_FALSE(r.ok());
    CHECK(r.status().code() == StatusCode::kInvalidArgument);
    CHECK_THAT(r.status().message(),
               Catch::Matchers::Contains(std::string("message 1 of the append ") + says));
    CHECK(Ok(store->Load("s")).version == 0);
    std::vector<NewSession> one(1);
    one[0].session = "new";
    one[0].messages = {User("first", "u0"), m};
    Result<std::vector<std::uint64_t>> created = store->CreateSessions(std::move(one));
    REQUIRE_FALSE(created.ok());
    CHECK_THAT(created.status().message(), Catch::Matchers::Contains(says));
  }
  // A pinned user or system text goes in, and comes back pinned.
  Message rule = User("rule", "r");
  rule.pinned = true;
  Message sys = Message::SystemText("mid-session system note");
  sys.id = "sys";
  sys.pinned = true;
  REQUIRE(Ok(store->AppendMessages("s", {User("first", "u0"), rule, sys})) == 1);
  SessionState state = Ok(store->Load("s"));
  REQUIRE(state.transcript.size() == 3);
  CHECK_FALSE(state.transcript[0].pinned);
  CHECK(state.transcript[1].pinned);
  CHECK(state.transcript[2].pinned);
}

void LearnedStateIsKept(const SessionStoreFactory& make) {
  auto store = make();
  const std::uint64_t v = Fill(*store, "s1", 4);
  Fill(*store, "s2", 2);
  // Nothing saved: empty.
  CHECK(Ok(store->Load("s1")).learned.empty());
  const std::string state = R"({"overflowWindow":5000,"paused":true,"charsAtPause":1200})";
  REQUIRE(store->SaveLearned("s1", state).ok());
  // Returned by Load and LoadChanges, the version unchanged, the other session untouched.
  SessionState loaded = Ok(store->Load("s1"));
  CHECK(loaded.learned == state);
  CHECK(loaded.version == v);
  CHECK(Ok(store->LoadChanges("s1", v)).learned == state);
  CHECK(Ok(store->LoadChanges("s1", 0)).learned == state);
  CHECK(Ok(store->Load("s2")).learned.empty());
  // Appends and commits leave it; a later save replaces it; an empty one clears it.
  std::uint64_t v2 = Ok(store->Append("s1", User("more", "m-more")));
  CHECK(Ok(store->LoadChanges("s1", v)).learned == state);
  CompactionCommit c;
  c.expected_version = v2;
  c.replaced = {"m0", "m1"};
  c.checkpoint = Summary("summary", "cp");
  REQUIRE(store->CommitCompaction("s1", c).ok());
  CHECK(Ok(store->Load("s1")).learned == state);
  REQUIRE(store->SaveLearned("s1", R"({"weakStreak":1})").ok());
  CHECK(Ok(store->Load("s1")).learned == R"({"weakStreak":1})");
  REQUIRE(store->SaveLearned("s1", "").ok());
  CHECK(Ok(store->Load("s1")).learned.empty());
  // A session never written keeps nothing (and is not created).
  REQUIRE(store->SaveLearned("never", state).ok());
  const SessionState never = Ok(store->Load("never"));
  CHECK(never.version == 0);
  CHECK(never.learned.empty());
  const std::vector<std::string> names = Ok(store->ListSessions());
  CHECK(std::find(names.begin(), names.end(), "never") == names.end());
  CHECK(store->SaveLearned("", state).code() == StatusCode::kInvalidArgument);
}

// A source handing over prepared messages one at a time, as an importer does.
class VectorSource : public MessageSource {
 public:
  explicit VectorSource(std::vector<Message> messages) : messages_(std::move(messages)) {}
  Result<bool> Next(Message* out) override {
    if (next_ == messages_.size()) return false;
    *out = messages_[next_++];
    return true;
  }

 private:
  std::vector<Message> messages_;
  std::size_t next_ = 0;
};

void CreateSessionsLargeAndMany(const SessionStoreFactory& make) {
  auto store = make();
  Fill(*store, "before", 5);  // the new session's rows come after another session's
  // 300 messages: more than a few store batches and a tail, with bodies of 2 MiB (over the
  // size a store may write in pieces) at the start, the middle, twice in a row and last, plus
  // multi-byte text and tool pairs.
  std::vector<Message> messages;
  for (int i = 0; i < 300; ++i) {
    const std::string id = "b" + std::to_string(i);
    const bool large = i == 0 || i == 64 || i == 130 || i == 131 || i == 299;
    const std::string text = large ? std::string(2u << 20, static_cast<char>('a' + i % 26))
                                   : "text " + id + " \xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80";
    if (i % 10 == 7) {
      messages.push_back(Message::AssistantCalls({ToolCall{"c" + id, "read", "{\"n\":1.50}", {}}}));
      messages.back().id = id;
    } else if (i % 10 == 8) {
      messages.push_back(Message::ToolOutput("cb" + std::to_string(i - 1), text));
      messages.back().id = id;
    } else {
      messages.push_back(i % 2 == 0 ? User(text, id) : Assistant(text, id));
    }
  }
  VectorSource source(messages);
  std::vector<NewSession> one(1);
  one[0].session = "bulk";
  one[0].source = &source;
  const std::vector<std::uint64_t> created = Ok(store->CreateSessions(std::move(one)));
  CHECK(created == std::vector<std::uint64_t>{1});

  SessionState back = Ok(store->Load("bulk"));
  CHECK(back.version == 1);
  REQUIRE(back.transcript.size() == messages.size());
  std::size_t chars = 0;
  for (std::size_t i = 0; i < messages.size(); ++i) {
    INFO("message " << i);
    CHECK(Print(back.transcript[i]) == Print(messages[i]));
    CHECK(back.transcript.chars(i) == MessageChars(messages[i]));
    chars += MessageChars(messages[i]);
  }
  CHECK(back.transcript.chars() == chars);
  const std::vector<HistoryEntry> h = Ok(store->History("bulk"));
  REQUIRE(h.size() == messages.size());
  RequireIncreasingSeq(h);
  for (std::size_t i = 0; i < h.size(); ++i) CHECK(h[i].message.id == messages[i].id);
  // The session goes on as any other: an append, then a compaction of its first 150.
  std::uint64_t version = Ok(store->Append("bulk", User("after", "b300")));
  CHECK(version == 2);
  CompactionCommit c;
  c.expected_version = version;
  for (int i = 0; i < 150; ++i) c.replaced.push_back(messages[static_cast<std::size_t>(i)].id);
  c.checkpoint = Summary("summary of 150", "cp");
  CHECK(Ok(store->CommitCompaction("bulk", c)) == 3);
  back = Ok(store->Load("bulk"));
  REQUIRE(back.transcript.size() == 152);
  CHECK(Print(back.transcript[1]) == Print(messages[150]));
  CHECK(Print(back.transcript[150]) == Print(messages[299]));
  CHECK(Ok(store->History("bulk")).size() == 302);
  CHECK(Ok(store->Load("before")).version == 5);
}

void CreateSessionsAllOrNothing(const SessionStoreFactory& make) {
  auto store = make();
  Fill(*store, "old", 3);
  const Snapshot old = Take(*store, "old");
  auto nothing_new = [&] {
    CHECK(Ok(store->Load("new-a")).version == 0);
    CHECK(Ok(store->Load("new-b")).version == 0);
    CHECK(Ok(store->ListSessions()) == std::vector<std::string>{"old"});
    RequireSame(old, Take(*store, "old"));
  };
  auto refused = [&](std::vector<NewSession> sessions, StatusCode code, const std::string& words) {
    Result<std::vector<std::uint64_t>> r = store->CreateSessions(std::move(sessions));
    INFO("status: " << r.status().ToString());
    REQUIRE_FALSE(r.ok());
    CHECK(r.status().code() == code);
    CHECK_THAT(r.status().message(), Catch::Matchers::Contains(words));
    nothing_new();
  };
  auto one = [](const std::string& name, std::vector<Message> m, MessageSource* src = nullptr) {
    NewSession n;
    n.session = name;
    n.messages = std::move(m);
    n.source = src;
    return n;
  };
  std::vector<NewSession> v;

  // A session that exists: kConflict naming it, and the other new one is not created either.
  v.push_back(one("new-a", {User("a")}));
  v.push_back(one("old", {User("b")}));
  refused(std::move(v), StatusCode::kConflict, "session \"old\" exists already (version 3)");

  v.clear();
  refused(std::move(v), StatusCode::kInvalidArgument, "no session");
  v.clear();
  v.push_back(one("new-a", {User("a")}));
  v.push_back(one("new-a", {User("b")}));
  refused(std::move(v), StatusCode::kInvalidArgument, "session \"new-a\" twice");
  v.clear();
  v.push_back(one("new-a", {User("a")}));
  v.push_back(one("new-b", {}));
  refused(std::move(v), StatusCode::kInvalidArgument, "new session \"new-b\" got no message");
  v.clear();
  v.push_back(one("", {User("a")}));
  refused(std::move(v), StatusCode::kInvalidArgument, "session id is empty");

  // A source that fails after 1,500 messages: its status, and nothing of either session.
  CountingSource failing("f", 1500, Status::IOError("injected: the file could not be read"));
  v.clear();
  v.push_back(one("new-a", {User("a")}));
  v.push_back(one("new-b", {}, &failing));
  refused(std::move(v), StatusCode::kIOError, "injected: the file could not be read");
  CHECK(failing.given() == 1500);

  // A message whose two calls share an id, late in a source: named, nothing stored.
  class LateBad : public MessageSource {
   public:
    Result<bool> Next(Message* out) override {
      if (n_ == 700) return false;
      *out = n_ == 699 ? TwoCallsOneId() : User("fine " + std::to_string(n_));
      ++n_;
      return true;
    }
    int n_ = 0;
  } late;
  v.clear();
  v.push_back(one("new-a", {}, &late));
  refused(std::move(v), StatusCode::kInvalidArgument,
          "message 699 of new session \"new-a\" holds two tool calls with the id \"call_x\"");

  // A message id given twice in one new session.
  v.clear();
  v.push_back(one("new-a", {User("a", "same"), User("b", "other"), User("c", "same")}));
  refused(std::move(v), StatusCode::kInvalidArgument,
          "message 2 of new session \"new-a\" has id \"same\", which an earlier message");

  // The same id in two different new sessions is fine (ids are per session).
  v.clear();
  v.push_back(one("new-a", {User("a", "same")}));
  v.push_back(one("new-b", {User("b", "same")}));
  const std::vector<std::uint64_t> created = Ok(store->CreateSessions(std::move(v)));
  CHECK(created.size() == 2);
}

void RepeatedCallIdsRefused(const SessionStoreFactory& make) {
  auto store = make();
  Fill(*store, "s", 2);
  const Snapshot before = Take(*store, "s");
  std::vector<Message> batch;
  batch.push_back(User("look at both files"));
  batch.push_back(TwoCallsOneId());
  Result<std::uint64_t> r = store->AppendMessages("s", std::move(batch));
  INFO("status: " << r.status().ToString());
  REQUIRE_FALSE(r.ok());
  CHECK(r.status().code() == StatusCode::kInvalidArgument);
  CHECK_THAT(r.status().message(),
             Catch::Matchers::Contains("message 1 of the append holds two tool calls with the id "
                                       "\"call_x\"") &&
                 Catch::Matchers::Contains("Give each call its own id"));
  RequireSame(before, Take(*store, "s"));
  // An opaque call sharing a tool call's id counts too.
  Message mixed = Message::AssistantCalls({ToolCall{"srv_1", "read", "{}", {}}});
  Opaque o;
  o.kind = "server_tool_use";
  o.payload = R"({"type":"server_tool_use","id":"srv_1"})";
  o.link = OpaqueLink::kCall;
  o.link_id = "srv_1";
  mixed.parts.emplace_back(o);
  CHECK(store->Append("s", mixed).status().code() == StatusCode::kInvalidArgument);
  RequireSame(before, Take(*store, "s"));
  // The same id in two messages (a model that numbers its calls per turn) is allowed.
  CHECK(store->Append("s", Message::AssistantCalls({ToolCall{"call_0", "a", "{}", {}}})).ok());
  CHECK(store->Append("s", Message::ToolOutput("call_0", "done")).ok());
  CHECK(store->Append("s", Message::AssistantCalls({ToolCall{"call_0", "b", "{}", {}}})).ok());
}

void ConcurrentCreatesOneWins(const SessionStoreFactory& make) {
  auto store = make();
  Fill(*store, "old", 2);
  for (int round = 0; round < 20; ++round) {
    const std::string session = "new-" + std::to_string(round);
    INFO(session);
    std::atomic<int> ready{0};
    Result<std::vector<std::uint64_t>> ra = Status::Internal("not run");
    Result<std::vector<std::uint64_t>> rb = Status::Internal("not run");
    auto create = [&](const std::string& prefix, Result<std::vector<std::uint64_t>>* out) {
      CountingSource src(prefix, 300);
      std::vector<NewSession> v(2);
      v[0].session = session;
      v[0].source = &src;
      v[1].session = session + ".companion-" + prefix;
      v[1].messages.push_back(User("companion of " + prefix));
      ready.fetch_add(1);
      while (ready.load() < 2) std::this_thread::yield();
      *out = store->CreateSessions(std::move(v));
    };
    std::thread ta([&] { create("a", &ra); });
    std::thread tb([&] { create("b", &rb); });
    ta.join();
    tb.join();
    INFO("A: " << ra.status().ToString() << "; B: " << rb.status().ToString());
    REQUIRE(ra.ok() != rb.ok());
    const auto& loser = ra.ok() ? rb : ra;
    CHECK(loser.status().code() == StatusCode::kConflict);
    const std::string winner = ra.ok() ? "a" : "b";
    const std::string other = ra.ok() ? "b" : "a";
    SessionState state = Ok(store->Load(session));
    REQUIRE(state.transcript.size() == 300);
    for (const Message& m : state.transcript) REQUIRE(m.id.rfind(winner, 0) == 0);
    CHECK(Ok(store->Load(session + ".companion-" + winner)).version == 1);
    CHECK(Ok(store->Load(session + ".companion-" + other)).version == 0);
  }
}

// R15.2: a background compaction is committed after more messages were appended to the
// session: its span is still the leading part, its expected version the current one.
void CompactionAfterAppends(const SessionStoreFactory& make) {
  auto store = make();
  Fill(*store, "s1", 6);
  // The span m0..m2 was read at this point; the conversation went on.
  const std::uint64_t v = Ok(store->AppendMessages(
      "s1", {User("text of late-0", "late-0"), Assistant("text of late-1", "late-1")}));
  CompactionCommit c;
  c.expected_version = v;
  c.replaced = {"m0", "m1", "m2"};
  c.checkpoint = Summary("## Goal\nship it", "cp-bg");
  c.reason = "auto";
  CHECK(Ok(store->CommitCompaction("s1", c)) == v + 1);
  const SessionState state = Ok(store->Load("s1"));
  CHECK(Ids(state.transcript) ==
        std::vector<std::string>{"cp-bg", "m3", "m4", "m5", "late-0", "late-1"});
  CHECK(JoinedText(state.transcript[4]) == "text of late-0");
  // A reader that last saw the appends is told of a rewrite, and gets the new transcript.
  const SessionChanges changes = Ok(store->LoadChanges("s1", v));
  CHECK_FALSE(changes.appended_only);
  CHECK(Ids(changes.transcript) == Ids(state.transcript));
  // Against the version the span was read at, the same commit conflicts.
  CompactionCommit stale = c;
  stale.expected_version = v - 1;
  stale.checkpoint.id = "cp-stale";
  RequireCode(store->CommitCompaction("s1", stale), StatusCode::kConflict);
}

}  // namespace conformance
}  // namespace testing
}  // namespace recap
