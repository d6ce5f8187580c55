// Compactor::Recover on data a store would refuse today but may hold from before: a message
// whose two tool calls share an id (issue 16 item 9). No recorded result can answer the first
// of them, so a recovery must not report success while it stays open, and must record nothing.
#include <memory>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include "recap/compactor.h"
#include "recap/safe_boundary.h"
#include "recap/session_store.h"

using namespace recap;

namespace {

// Holds one session as given, whatever it holds; counts recovery commits.
class FixedStore : public SessionStore {
 public:
  explicit FixedStore(std::vector<Message> messages) {
    for (Message& m : messages) transcript_.Append(std::move(m));
  }
  int recoveries = 0;

  Result<SessionState> Load(const std::string&) override { return SessionState{transcript_, 1}; }
  Result<SessionChanges> LoadChanges(const std::string&, std::uint64_t) override {
    SessionChanges c;
    c.version = 1;
    c.appended_only = false;
    c.transcript = transcript_;
    return c;
  }
  Result<std::uint64_t> AppendMessages(const std::string&, std::vector<Message>) override {
    return Status::Internal("not used");
  }
  Result<std::vector<std::uint64_t>> CreateSessions(std::vector<NewSession>) override {
    return Status::Internal("not used");
  }
  Result<std::uint64_t> CommitCompaction(const std::string&, const CompactionCommit&) override {
    return Status::Internal("not used");
  }
  Result<std::uint64_t> CommitReduction(const std::string&, const ReductionCommit&) override {
    return Status::Internal("not used");
  }
  Result<std::uint64_t> CommitRecovery(const std::string&, const RecoveryCommit&) override {
    ++recoveries;
    return Status::Internal("a recovery was committed");
  }
  Result<std::vector<HistoryEntry>> History(const std::string&) override {
    return std::vector<HistoryEntry>{};
  }
  Result<std::vector<std::string>> ListSessions() override { return std::vector<std::string>{"s"}; }

 private:
  Transcript transcript_;
};

}  // namespace

TEST_CASE(
    "R8.3 recover never reports success while a call stays open: two calls of one id in one "
    "message") {
  Message ask = Message::AssistantCalls({ToolCall{"toolu_1", "read", R"({"p":"a"})", {}},
                                         ToolCall{"toolu_1", "read", R"({"p":"b"})", {}}});
  for (const bool answered_once : {false, true}) {
    INFO("one result already recorded: " << answered_once);
    std::vector<Message> messages = {Message::UserText("read both"), ask};
    if (answered_once) messages.push_back(Message::ToolOutput("toolu_1", "a"));
    auto store = std::make_shared<FixedStore>(messages);
    auto compactor = Compactor::Create(Config{}, nullptr, store);
    REQUIRE(compactor.ok());
    REQUIRE_FALSE(FindUncertainToolCalls(store->Load("s").value().transcript).empty());

    Result<RecoveryOutcome> r = (*compactor)->Recover("s", true);
    INFO(r.status().ToString());
    REQUIRE_FALSE(r.ok());
    CHECK(r.status().code() == StatusCode::kFailedPrecondition);
    CHECK_THAT(r.status().message(),
               Catch::Matchers::Contains("\"toolu_1\" in message 1") &&
                   Catch::Matchers::Contains("share their id with a later call") &&
                   Catch::Matchers::Contains("Nothing was recorded"));
    CHECK(store->recoveries == 0);
  }
}

TEST_CASE("R8.3 recover records results for calls that reuse an id across messages") {
  // A model that numbers its calls per turn: call_0 twice, in two messages, neither answered.
  std::vector<Message> messages = {
      Message::UserText("first"), Message::AssistantCalls({ToolCall{"call_0", "a", "{}", {}}}),
      Message::UserText("second"), Message::AssistantCalls({ToolCall{"call_0", "b", "{}", {}}})};
  auto store = NewInMemorySessionStore();
  REQUIRE(store->AppendMessages("s", messages).ok());
  auto compactor = Compactor::Create(Config{}, nullptr, store);
  REQUIRE(compactor.ok());
  Result<RecoveryOutcome> r = (*compactor)->Recover("s", true);
  INFO(r.status().ToString());
  REQUIRE(r.ok());
  CHECK(r->recovered.size() == 2);
  CHECK(FindUncertainToolCalls(store->Load("s").value().transcript).empty());
}
