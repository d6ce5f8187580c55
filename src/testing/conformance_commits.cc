// The store conformance checks of commits (R6.5, R8.1 to R8.3, R12.1, R15.2): compaction,
// reduction and recovery commits, stale and bad commits, what a compaction keeps and which
// messages can be pinned, a compaction committed after later appends.
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "recap/measure.h"
#include "recap/safe_boundary.h"
#include "recap/testing/store_conformance.h"

#include "conformance_helpers.h"

namespace recap {
namespace testing {
namespace conformance {

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
