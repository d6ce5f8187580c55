// The store conformance checks of CreateSessions (R13.1, R13.6): new sessions stored whole from
// vectors and sources, many messages and 2 MiB ones, and a refusal that stores nothing.
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "recap/measure.h"
#include "recap/testing/store_conformance.h"

#include "conformance_helpers.h"

namespace recap {
namespace testing {
namespace conformance {

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

}  // namespace conformance
}  // namespace testing
}  // namespace recap
