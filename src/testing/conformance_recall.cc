// The conformance checks of R18: searching the history and undoing a rewrite.
#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "recap/testing/store_conformance.h"

#include "conformance_helpers.h"

namespace recap {
namespace testing {
namespace conformance {

namespace {

std::vector<std::string> HitIds(const std::vector<HistoryHit>& hits) {
  std::vector<std::string> out;
  for (const HistoryHit& h : hits) out.push_back(h.entry.message.id);
  return out;
}

bool Has(const std::vector<std::string>& v, const std::string& id) {
  return std::find(v.begin(), v.end(), id) != v.end();
}

// Undo is optional for a store of a host's own (SessionStore::CommitUndo's default refuses):
// the undo checks then say so and check nothing.
bool Undoes(SessionStore& store) {
  Fill(store, "probe", 1);
  Result<UndoOutcome> u = store.CommitUndo("probe", UndoCommit{1});
  if (!u.ok() && u.status().code() == StatusCode::kFailedPrecondition &&
      u.status().message().find("is not implemented by it") != std::string::npos) {
    WARN(
        "this store does not implement SessionStore::CommitUndo: the undo checks are skipped "
        "(Compactor::Uncompact will refuse, saying so)");
    return false;
  }
  return true;
}

// A session of three turns about a parser, compacted up to its last turn:
//   u1 "fix the parse_config bug in src/app.py"      turn 1   retired
//   a1 "parse_config fails on empty files"           turn 1   retired
//   r1 tool call read {"path":"src/app.py"}          turn 1   retired
//   t1 its result "def parse_config(): ... ERR-4471" turn 1   retired
//   u2 "also rename the flag to --strict"            turn 2   retired
//   a2 "renamed; the ticket is ERR-4471"             turn 2   retired
//   checkpoint                                        turn 2   active
//   u3 "run the tests"                               turn 3   active
std::uint64_t ParserSession(SessionStore& store, const std::string& session) {
  std::vector<Message> ms;
  ms.push_back(User("fix the parse_config bug in src/app.py", "u1"));
  ms.push_back(Assistant("parse_config fails on empty files", "a1"));
  ToolCall call;
  call.id = "call-1";
  call.name = "read";
  call.arguments = R"({"path":"src/app.py"})";
  Message r1 = Message::AssistantCalls({call});
  r1.id = "r1";
  ms.push_back(r1);
  Message t1 = Message::ToolOutput("call-1", "def parse_config():\n    raise ERR-4471");
  t1.id = "t1";
  ms.push_back(t1);
  ms.push_back(User("also rename the flag to --strict \xE2\x80\x94 " + session, "u2"));
  ms.push_back(Assistant("renamed; the ticket is ERR-4471", "a2"));
  std::uint64_t v = Ok(store.AppendMessages(session, ms));
  CompactionCommit c;
  c.expected_version = v;
  c.replaced = {"u1", "a1", "r1", "t1", "u2", "a2"};
  c.checkpoint = Summary("## Goal\nthe parser", "cp-" + session);
  c.reason = "auto";
  v = Ok(store.CommitCompaction(session, c));
  return Ok(store.Append(session, User("run the tests", "u3")));
}

}  // namespace

void SearchFindsWhatWasRetired(const SessionStoreFactory& make) {
  auto store = make();
  ParserSession(*store, "s1");

  // Turns: each person's message starts one; a checkpoint belongs to the turn it was written in.
  // (Optional for a store of a host's own: one that leaves every turn 0 is told, and turn ranges
  // then find nothing in it.)
  const std::vector<HistoryEntry> turned = Ok(store->History("s1"));
  const bool counts_turns =
      std::any_of(turned.begin(), turned.end(), [](const HistoryEntry& e) { return e.turn != 0; });
  if (!counts_turns) WARN("this store leaves HistoryEntry::turn 0: the turn checks are skipped");
  for (const HistoryEntry& e : counts_turns ? turned : std::vector<HistoryEntry>{}) {
    INFO(e.message.id);
    const std::string& id = e.message.id;
    const std::uint64_t want = id == "u3" ? 3 : (id == "u2" || id == "a2" || id == "cp-s1") ? 2 : 1;
    CHECK(e.turn == want);
  }

  HistorySearch q;
  q.terms = {"parse_config"};
  std::vector<HistoryHit> hits = Ok(store->SearchHistory("s1", q));
  std::vector<std::string> ids = HitIds(hits);
  CHECK(Has(ids, "u1"));
  CHECK(Has(ids, "a1"));
  CHECK(Has(ids, "t1"));
  CHECK_FALSE(Has(ids, "u2"));
  for (const HistoryHit& h : hits) {
    CHECK(h.entry.state == HistoryState::kCompacted);
    CHECK(h.entry.replaced_by == "compaction:1");
    CHECK(h.score > 0);
  }

  // A message holding more of the terms ranks first.
  q.terms = {"ERR-4471", "ticket"};
  ids = HitIds(Ok(store->SearchHistory("s1", q)));
  REQUIRE(ids.size() == 2);
  CHECK(ids[0] == "a2");
  CHECK(ids[1] == "t1");

  // Case is ignored; a path is found as its run of words; a tool call's arguments are searched.
  q.terms = {"SRC/APP.PY"};
  ids = HitIds(Ok(store->SearchHistory("s1", q)));
  CHECK(Has(ids, "u1"));
  CHECK(Has(ids, "r1"));

  // Active messages only when asked.
  q.terms = {"tests"};
  CHECK(Ok(store->SearchHistory("s1", q)).empty());
  q.include_active = true;
  CHECK(HitIds(Ok(store->SearchHistory("s1", q))) == std::vector<std::string>{"u3"});

  // By id (the asked order, whatever the text), and by turn range.
  HistorySearch by_id;
  by_id.ids = {"a2", "u1", "nope"};
  CHECK(HitIds(Ok(store->SearchHistory("s1", by_id))) == std::vector<std::string>{"a2", "u1"});
  HistorySearch by_turn;
  by_turn.first_turn = 2;
  by_turn.last_turn = 2;
  if (counts_turns) {
    CHECK(HitIds(Ok(store->SearchHistory("s1", by_turn))) == std::vector<std::string>{"u2", "a2"});
    by_turn.terms = {"flag"};
    CHECK(HitIds(Ok(store->SearchHistory("s1", by_turn))) == std::vector<std::string>{"u2"});
    by_turn.terms = {"parse_config"};  // in turn 1 only
    CHECK(Ok(store->SearchHistory("s1", by_turn)).empty());
    // first_turn alone is no range: the terms are searched in every turn.
    HistorySearch first_only;
    first_only.terms = {"parse_config"};
    first_only.first_turn = 2;
    CHECK(Ok(store->SearchHistory("s1", first_only)).size() == 3);
    // A range past what any store's integers hold is the whole history after first_turn.
    by_turn.terms = {"flag"};
    by_turn.last_turn = UINT64_MAX;
    CHECK(HitIds(Ok(store->SearchHistory("s1", by_turn))) == std::vector<std::string>{"u2"});
  }

  // The limit, and nothing asked.
  HistorySearch limited;
  limited.terms = {"parse_config", "ERR-4471", "flag"};
  limited.limit = 2;
  CHECK(Ok(store->SearchHistory("s1", limited)).size() == 2);
  CHECK(Ok(store->SearchHistory("s1", HistorySearch{})).empty());
  CHECK(Ok(store->SearchHistory("never-written", limited)).empty());
  RequireCode(store->SearchHistory("", limited), StatusCode::kInvalidArgument);
}

void SearchIsolatesSessions(const SessionStoreFactory& make) {
  auto store = make();
  ParserSession(*store, "alpha");
  ParserSession(*store, "beta");
  // Each session's own word is found in it and never in the other.
  HistorySearch own;
  own.terms = {"beta"};
  CHECK(HitIds(Ok(store->SearchHistory("beta", own))) == std::vector<std::string>{"u2"});
  CHECK(Ok(store->SearchHistory("alpha", own)).empty());
  own.terms = {"alpha"};
  CHECK(Ok(store->SearchHistory("beta", own)).empty());
  HistorySearch q;
  q.terms = {"parse_config", "ERR-4471"};
  q.include_active = true;
  for (const char* s : {"alpha", "beta"}) {
    INFO(s);
    const std::vector<HistoryHit> hits = Ok(store->SearchHistory(s, q));
    CHECK(hits.size() == 4);
    const std::vector<HistoryEntry> mine = Ok(store->History(s));
    for (const HistoryHit& h : hits) {
      const bool found = std::any_of(mine.begin(), mine.end(), [&](const HistoryEntry& e) {
        return e.seq == h.entry.seq && Print(e.message) == Print(h.entry.message);
      });
      CHECK(found);
    }
  }
  HistorySearch by_id;
  by_id.ids = {"cp-beta"};
  by_id.include_active = true;
  CHECK(Ok(store->SearchHistory("alpha", by_id)).empty());
}

void SearchTakesAnyText(const SessionStoreFactory& make) {
  auto store = make();
  ParserSession(*store, "s1");
  const Snapshot before = Take(*store, "s1");
  // Terms that are search syntax somewhere, punctuation alone, and a huge one: each a plain
  // word or nothing, never an error.
  const std::vector<std::vector<std::string>> queries = {
      {"\"", "\"\"", "*", "-", "NEAR", "AND", "OR", "NOT", "(", ")", "^", ":", "{}"},
      {"parse_config\"", "\"ERR", "NEAR(parse_config", "-strict", "flag*", "col:flag"},
      {std::string(1 << 20, 'x')},
      {"\xE2\x80\x94", "\xC3\xA9t\xC3\xA9", std::string("\0a", 2)},
  };
  for (const auto& terms : queries) {
    HistorySearch q;
    q.terms = terms;
    q.include_active = true;
    Result<std::vector<HistoryHit>> hits = store->SearchHistory("s1", q);
    INFO("status: " << hits.status().ToString());
    CHECK(hits.ok());
  }
  HistorySearch q;
  q.terms = {"-strict"};
  CHECK(HitIds(Ok(store->SearchHistory("s1", q))) == std::vector<std::string>{"u2"});
  // Punctuation alone matches nothing, whatever the text holds (u2 holds an em dash).
  q.terms = {"\xE2\x80\x94", "--", "*", "\xE2\x80\xA6", "\"\""};
  q.include_active = true;
  CHECK(Ok(store->SearchHistory("s1", q)).empty());
  q.include_active = false;
  q.terms = {"NEAR(parse_config"};  // the words "near" and "parse_config": nothing holds both
  CHECK(Ok(store->SearchHistory("s1", q)).empty());
  RequireSame(before, Take(*store, "s1"));
}

void UndoTakesBackTheNewestRewrite(const SessionStoreFactory& make) {
  auto store = make();
  if (!Undoes(*store)) return;
  const std::uint64_t v0 = Fill(*store, "s1", 6);
  const Snapshot original = Take(*store, "s1");

  // Nothing to undo yet: nothing changes.
  UndoOutcome none = Ok(store->CommitUndo("s1", UndoCommit{v0}));
  CHECK_FALSE(none.undone);
  CHECK(none.version == v0);
  RequireSame(original, Take(*store, "s1"));

  CompactionCommit c;
  c.expected_version = v0;
  c.replaced = {"m0", "m1", "m2"};
  c.checkpoint = Summary("## Goal\nship it", "cp-1");
  c.injected = {Summary("## Memories\n- tabs", "inj-1")};
  c.reason = "manual";
  std::uint64_t v = Ok(store->CommitCompaction("s1", c));
  Message clipped = User("text of m4 (clipped)", "m4");
  v = Ok(store->CommitReduction("s1", ReductionCommit{v, {clipped}}));
  v = Ok(store->Append("s1", User("after", "late")));

  // A stale version conflicts and changes nothing.
  const Snapshot reduced = Take(*store, "s1");
  RequireCode(store->CommitUndo("s1", UndoCommit{v - 1}), StatusCode::kConflict);
  RequireSame(reduced, Take(*store, "s1"));

  // The reduction first: the original is back in its place.
  UndoOutcome u1 = Ok(store->CommitUndo("s1", UndoCommit{v}));
  CHECK(u1.undone);
  CHECK(u1.commit == "reduction:1");
  CHECK(u1.restored == 1);
  CHECK(u1.retired == 1);
  CHECK(u1.version == v + 1);
  SessionState state = Ok(store->Load("s1"));
  CHECK(Ids(state.transcript) ==
        std::vector<std::string>{"cp-1", "inj-1", "m3", "m4", "m5", "late"});
  CHECK(JoinedText(state.transcript[3]) == "text of m4");
  SessionChanges changes = Ok(store->LoadChanges("s1", v));
  CHECK_FALSE(changes.appended_only);

  // Then the compaction: the transcript as it was, with what was appended since after it.
  UndoOutcome u2 = Ok(store->CommitUndo("s1", UndoCommit{u1.version}));
  CHECK(u2.undone);
  CHECK(u2.commit == "compaction:1");
  CHECK(u2.reason == "manual");
  CHECK(u2.restored == 3);
  CHECK(u2.retired == 2);
  state = Ok(store->Load("s1"));
  std::vector<std::string> want = original.active;
  want.push_back(Print(User("after", "late")));
  CHECK(Printed(state.transcript) == want);
  const std::vector<HistoryEntry> h = Ok(store->History("s1"));
  for (const char* id : {"cp-1", "inj-1"}) {
    const HistoryEntry* e = FindEntry(h, id, HistoryState::kCompacted);
    REQUIRE(e != nullptr);
    CHECK(e->replaced_by == "undo:2");
  }
  CHECK(FindEntry(h, "m4", HistoryState::kCompacted)->replaced_by == "undo:1");
  for (const char* id : {"m0", "m1", "m2", "m4"}) CHECK(FindEntry(h, id, HistoryState::kActive));

  // Nothing left to undo; the session works on: appends, a new compaction, its undo.
  CHECK_FALSE(Ok(store->CommitUndo("s1", UndoCommit{u2.version})).undone);
  CompactionCommit again;
  again.expected_version = u2.version;
  again.replaced = {"m0", "m1"};
  again.checkpoint = Summary("## Goal\nagain", "cp-2");
  v = Ok(store->CommitCompaction("s1", again));
  CHECK(Ok(store->Load("s1")).transcript.size() == 6);
  UndoOutcome u3 = Ok(store->CommitUndo("s1", UndoCommit{v}));
  CHECK(u3.commit == "compaction:2");
  CHECK(Printed(Ok(store->Load("s1")).transcript) == want);
}

void UndoKeepsKeptMessagesInPlace(const SessionStoreFactory& make) {
  auto store = make();
  if (!Undoes(*store)) return;
  std::vector<Message> ms = {Message::SystemText("be brief"), User("u0 text", "u0"),
                             Assistant("a0 text", "a0"),      User("pinned rule", "p0"),
                             Assistant("a1 text", "a1"),      User("u2 text", "u2")};
  ms[0].id = "sys";
  ms[3].pinned = true;
  const std::uint64_t v0 = Ok(store->AppendMessages("s1", ms));
  const Snapshot original = Take(*store, "s1");
  CompactionCommit c;
  c.expected_version = v0;
  c.kept = {"sys", "p0"};
  c.replaced = {"u0", "a0", "a1"};
  c.checkpoint = Summary("## Goal\nx", "cp-1");
  const std::uint64_t v = Ok(store->CommitCompaction("s1", c));
  CHECK(Ids(Ok(store->Load("s1")).transcript) ==
        std::vector<std::string>{"sys", "p0", "cp-1", "u2"});
  const UndoOutcome u = Ok(store->CommitUndo("s1", UndoCommit{v}));
  CHECK(u.restored == 3);
  CHECK(u.retired == 1);
  CHECK(Printed(Ok(store->Load("s1")).transcript) == original.active);
}

void UndoRefusesWhatItCannotRestore(const SessionStoreFactory& make) {
  auto store = make();
  if (!Undoes(*store)) return;
  const std::uint64_t v0 = Fill(*store, "s1", 4);
  CompactionCommit c;
  c.expected_version = v0;
  c.replaced = {"m0", "m1"};
  c.checkpoint = Summary("## Goal\nx", "cp-1");
  std::uint64_t v = Ok(store->CommitCompaction("s1", c));
  // An id a retired message had, taken by a message appended since.
  v = Ok(store->Append("s1", User("a new m1", "m1")));
  const Snapshot before = Take(*store, "s1");
  Result<UndoOutcome> u = store->CommitUndo("s1", UndoCommit{v});
  RequireCode(u, StatusCode::kFailedPrecondition);
  CHECK(u.status().message().find("m1") != std::string::npos);
  RequireSame(before, Take(*store, "s1"));
  RequireCode(store->CommitUndo("never-written", UndoCommit{0}), StatusCode::kInvalidArgument);
}

}  // namespace conformance
}  // namespace testing
}  // namespace recap
