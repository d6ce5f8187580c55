// SPEC R6.5 and R8 for the in-memory reference store: the shared conformance suite
// (recap/testing/store_conformance.h), plus what only this store promises.
#include <catch2/catch.hpp>

#include "recap/measure.h"
#include "recap/session_store.h"
#include "recap/testing/store_conformance.h"
#include "recap/transcript.h"

#include "recap_internal/prepared_source.h"

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

namespace {

// Hands over messages prepared as recap's import prepares them on its decoding thread: measured,
// checked, and given their fresh ids (recap_internal/prepared_source.h).
class PreparedList : public internal::PreparedMessageSource {
 public:
  explicit PreparedList(std::vector<Message> messages) : messages_(std::move(messages)) {}
  std::size_t prepared = 0;  // calls of NextPrepared
  Result<bool> NextPrepared(Message* out, Facts* facts) override {
    ++prepared;
    if (next_ == messages_.size()) return false;
    *out = messages_[next_++];
    facts->chars = MessageChars(*out);
    facts->fresh_id = out->id.empty();
    if (facts->fresh_id) out->id = NewMessageId();
    return true;
  }

 private:
  std::vector<Message> messages_;
  std::size_t next_ = 0;
};

}  // namespace

// The store takes a prepared source's messages as they come (builds without NDEBUG check
// what the source promised); a plain source's it repairs and measures itself.
TEST_CASE("R13.1 in-memory store: a prepared source's messages are stored as it prepared them") {
  auto store = NewInMemorySessionStore();
  std::vector<Message> messages = {Message::UserText("caf\xC3\xA9"), Message::AssistantText("ok"),
                                   Message::UserText("again")};
  messages[1].id = "given";
  PreparedList prepared(messages);
  std::vector<NewSession> sessions(1);
  sessions[0].session = "prepared";
  sessions[0].source = &prepared;
  REQUIRE(store->CreateSessions(std::move(sessions)).ok());
  CHECK(prepared.prepared == 4);
  const SessionState state = *store->Load("prepared");
  REQUIRE(state.transcript.size() == 3);
  CHECK(state.transcript[1].id == "given");
  CHECK(state.transcript[0].id.rfind("m_", 0) == 0);
  CHECK(state.transcript[2].id.rfind("m_", 0) == 0);
  CHECK(JoinedText(state.transcript[0]) == "caf\xC3\xA9");
  CHECK(state.transcript.chars() ==
        MessageChars(messages[0]) + MessageChars(messages[1]) + MessageChars(messages[2]));
  // A given id twice is still refused: that check needs the whole session.
  PreparedList twice({messages[1], messages[1]});
  std::vector<NewSession> again(1);
  again[0].session = "twice";
  again[0].source = &twice;
  const auto refused = store->CreateSessions(std::move(again));
  REQUIRE_FALSE(refused.ok());
  CHECK_THAT(refused.status().message(), Catch::Matchers::Contains("\"given\""));
  CHECK(store->Load("twice")->version == 0);
}
