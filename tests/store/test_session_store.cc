// SPEC R6.5 and R8 for the in-memory reference store: the shared conformance suite
// (recap/testing/store_conformance.h), plus what only this store promises.
#include <catch2/catch.hpp>

#include "recap/session_store.h"
#include "recap/testing/store_conformance.h"

RECAP_SESSION_STORE_CONFORMANCE_TESTS("in-memory store",
                                      [] { return recap::NewInMemorySessionStore(); })

using namespace recap;

TEST_CASE("R8 in-memory store: each store is its own world") {
  auto a = NewInMemorySessionStore();
  auto b = NewInMemorySessionStore();
  REQUIRE(a->Append("s1", Message::UserText("hello")).ok());
  CHECK(b->Load("s1")->version == 0);
  CHECK(b->ListSessions()->empty());
}

TEST_CASE("R8.2 in-memory store: the conflict message says what happened and what to do") {
  auto store = NewInMemorySessionStore();
  for (int i = 0; i < 9; ++i) REQUIRE(store->Append("s1", Message::UserText("m")).ok());
  CompactionCommit c;
  c.expected_version = 7;
  c.replaced = {store->Load("s1")->transcript[0].id};
  c.checkpoint = Message::UserText("summary");
  c.checkpoint.summary = true;
  auto r = store->CommitCompaction("s1", c);
  REQUIRE(r.status().code() == StatusCode::kConflict);
  CHECK(r.status().message() == "session \"s1\" changed since version 7 (now 9); reload and retry");
}

TEST_CASE("R8 in-memory store: LoadChanges after appends costs what was appended") {
  // Not a timing test: a long session followed by a small append hands back only that append,
  // sharing nothing with the rest.
  auto store = NewInMemorySessionStore();
  std::vector<Message> many(20000, Message::UserText("x"));
  const std::uint64_t v = *store->AppendMessages("s1", many);
  REQUIRE(store->Append("s1", Message::AssistantText("new")).ok());
  auto changes = store->LoadChanges("s1", v);
  REQUIRE(changes.ok());
  CHECK(changes->appended_only);
  REQUIRE(changes->appended.size() == 1);
  CHECK(JoinedText(changes->appended[0]) == "new");
  CHECK(changes->transcript.empty());
}

TEST_CASE("R8 in-memory store: invalid UTF-8 is repaired the same way in every view") {
  auto store = NewInMemorySessionStore();
  Message bad = Message::UserText("caf\xC3");  // a truncated sequence
  bad.id = "id-\xFF";
  REQUIRE(store->Append("s1", bad).ok());
  auto loaded = store->Load("s1");
  auto history = store->History("s1");
  auto changes = store->LoadChanges("s1", 0);
  REQUIRE(loaded.ok());
  REQUIRE(history.ok());
  REQUIRE(changes.ok());
  const std::string id = loaded->transcript[0].id;
  CHECK(id == "id-\xEF\xBF\xBD");
  CHECK((*history)[0].message.id == id);
  CHECK(changes->appended[0].id == id);
  CHECK(JoinedText(loaded->transcript[0]) == "caf\xEF\xBF\xBD");
  // The repaired id is the one that must be unique.
  CHECK(store->Append("s1", bad).status().code() == StatusCode::kInvalidArgument);
}
