// The store conformance checks of appends and reads (R8, R8.1, R13): an empty session, appends
// in order, message ids, LoadChanges after appends and after a rewrite, repeated call ids.
#include <cstdint>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "recap/testing/store_conformance.h"

#include "conformance_helpers.h"

namespace recap {
namespace testing {
namespace conformance {

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

}  // namespace conformance
}  // namespace testing
}  // namespace recap
