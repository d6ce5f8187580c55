// SPEC §1 and R11.1's foundation: a transcript measures each message once and answers sizes
// in constant time; copies share messages instead of copying bytes.
#include <unistd.h>

#include <set>
#include <string>
#include <thread>

#include <catch2/catch.hpp>
#include <sys/wait.h>

#include "recap/measure.h"
#include "recap/transcript.h"

using namespace recap;

TEST_CASE("§1 transcript totals and ranges follow the cached per-message sizes") {
  Transcript t;
  CHECK(t.empty());
  CHECK(t.chars() == 0);
  t.Append(Message::UserText("hello"));                    // 5
  t.Append(Message::AssistantText("h\xC3\xA9llo world"));  // 11
  t.Append(Message::UserText(std::string(10, 'x')));       // 10
  REQUIRE(t.size() == 3);
  CHECK(t.chars() == 26);
  CHECK(t.chars(1) == 11);
  CHECK(t.chars(1, 3) == 21);
  CHECK(t.chars(0, 0) == 0);
  CHECK(t.tokens() == EstimateTokens(26));
  std::size_t sum = 0;
  for (const Message& m : t) sum += MessageChars(m);
  CHECK(sum == t.chars());
}

TEST_CASE("§1 every appended message gets a stable unique id, given ids are kept") {
  Transcript t;
  std::set<std::string> ids;
  for (int i = 0; i < 1000; ++i) t.Append(Message::UserText("m"));
  for (const Message& m : t) ids.insert(m.id);
  CHECK(ids.size() == 1000);
  Message named = Message::UserText("x");
  named.id = "host-id-7";
  t.Append(named);
  CHECK(t.back().id == "host-id-7");
  const std::string first = t[0].id;
  Transcript copy = t;
  CHECK(copy[0].id == first);
}

TEST_CASE("§1 invalid UTF-8 entering a transcript is replaced, not rejected") {
  Transcript t;
  Message m = Message::ToolOutput("call_\xFF", "binary \xFF\xFE output");
  t.Append(m);
  const auto& r = std::get<ToolResult>(t[0].parts[0]);
  CHECK(IsValidUtf8(r.call_id));
  CHECK(IsValidUtf8(std::get<Text>(r.content[0]).text));
  CHECK(std::get<Text>(r.content[0]).text == "binary \xEF\xBF\xBD\xEF\xBF\xBD output");
  CHECK(t.chars() == CountCodePoints("binary \xFF\xFE output"));
}

TEST_CASE("§1 copies and slices share messages, Set replaces one and updates the sums") {
  Transcript t;
  for (int i = 0; i < 5; ++i)
    t.Append(Message::UserText(std::string(static_cast<std::size_t>(i + 1), 'a')));
  Transcript copy = t;
  CHECK(copy.shared(2).get() == t.shared(2).get());
  Transcript tail = t.Slice(2, 5);
  REQUIRE(tail.size() == 3);
  CHECK(tail.shared(0).get() == t.shared(2).get());
  CHECK(tail.chars() == 3 + 4 + 5);

  copy.Set(1, Message::UserText("0123456789"));
  CHECK(copy.chars(1) == 10);
  CHECK(copy.chars() == 1 + 10 + 3 + 4 + 5);
  CHECK(t.chars() == 15);  // the original is untouched
  CHECK(t.chars(1) == 2);

  std::vector<std::pair<std::size_t, Message>> batch;
  batch.emplace_back(0, Message::UserText(""));
  batch.emplace_back(4, Message::UserText("xy"));
  copy.Set(std::move(batch));
  CHECK(copy.chars() == 0 + 10 + 3 + 4 + 2);
  CHECK(copy.chars(3, 5) == 6);
}

TEST_CASE("§1 a moved-from transcript is a valid empty one") {
  Transcript t;
  t.Append(Message::UserText("abc"));
  Transcript moved = std::move(t);
  CHECK(moved.chars() == 3);
  CHECK(t.size() == 0);  // NOLINT(bugprone-use-after-move): documented behaviour
  CHECK(t.chars() == 0);
  t.Append(Message::UserText("de"));
  CHECK(t.chars() == 2);
}

TEST_CASE("§1 a 100 MB single message is measured without trouble") {
  Transcript t;
  std::string big(100u * 1024u * 1024u, 'x');
  big.replace(0, 4, "\xF0\x9F\x98\x80");
  t.Append(Message::ToolOutput("c1", std::move(big)));
  CHECK(t.chars() == 100u * 1024u * 1024u - 3u);
}

TEST_CASE("§1 chunked storage: copies stay independent across chunk boundaries") {
  const std::size_t n = Transcript::kChunk * 3 + 17;
  Transcript t;
  for (std::size_t i = 0; i < n; ++i) t.Append(Message::UserText(std::string(i % 7 + 1, 'a')));
  Transcript snapshot = t;  // what Prepare hands out
  t.Append(Message::UserText("after"));
  CHECK(snapshot.size() == n);
  CHECK(t.size() == n + 1);
  CHECK(t.chars() == snapshot.chars() + 5);
  // A change in the copy is invisible in the snapshot, in every chunk.
  for (std::size_t i : {std::size_t{0}, Transcript::kChunk - 1, Transcript::kChunk, n - 1}) {
    const std::size_t before = snapshot.chars();
    t.Set(i, Message::UserText(std::string(100, 'z')));
    CHECK(snapshot.chars() == before);
    CHECK(snapshot[i].parts.size() == 1);
    CHECK(std::get<Text>(snapshot[i].parts[0]).text.size() == i % 7 + 1);
  }
  // Ranges agree with a plain sum everywhere.
  std::size_t sum = 0;
  for (std::size_t i = 0; i < t.size(); ++i) {
    CHECK(t.chars(0, i) == sum);
    sum += MessageChars(t[i]);
  }
  CHECK(t.chars() == sum);
  // Slices at a chunk start share chunks; others copy pointers; both measure right.
  Transcript tail = t.Slice(Transcript::kChunk, t.size());
  CHECK(tail.size() == t.size() - Transcript::kChunk);
  CHECK(tail.chars() == t.chars(Transcript::kChunk, t.size()));
  CHECK(tail.shared(0).get() == t.shared(Transcript::kChunk).get());
  Transcript mid = t.Slice(3, 300);
  CHECK(mid.size() == 297);
  CHECK(mid.chars() == t.chars(3, 300));
  CHECK(mid.chars(5, 200) == t.chars(8, 203));
  Transcript empty_tail = t.Slice(t.size(), t.size());
  CHECK(empty_tail.empty());
  CHECK(empty_tail.chars() == 0);
}

// ---- what the cutter needs (SPEC R3, R11.4): Transcript::cut_facts and pairing() ----

namespace {

Message CallsOf(std::vector<std::string> ids) {
  std::vector<ToolCall> calls;
  for (auto& id : ids) calls.push_back(ToolCall{id, "tool", "{}", {}});
  return Message::AssistantCalls(std::move(calls));
}
Message ResultsOf(std::vector<std::string> ids) {
  Message m;
  m.role = Role::kUser;
  for (auto& id : ids) {
    ToolResult r;
    r.call_id = id;
    r.content.emplace_back(Text{"out", {}});
    m.parts.emplace_back(std::move(r));
  }
  return m;
}

}  // namespace

TEST_CASE("R11.4 each message's cut facts are noted when it is appended") {
  Transcript t;
  Message checkpoint = Message::UserText("## Goal");
  checkpoint.summary = true;
  t.Append(checkpoint);                          // 0
  t.Append(Message::UserText("go"));             // 1
  t.Append(CallsOf({"a", "b"}));                 // 2
  t.Append(Message::ToolOutput("b", "x"));       // 3
  t.Append(Message::AssistantText("thinking"));  // 4
  t.Append(Message::ToolOutput("a", "y"));       // 5
  t.Append(ResultsOf({}));                       // 6 (no parts: nothing)
  // Append(Message) checks every string: each message is noted well-formed as well.
  constexpr std::uint8_t kChecked = Transcript::kWellFormedFact;
  CHECK(t.cut_facts(0).flags == (Transcript::kSummaryFact | kChecked));
  CHECK(t.cut_facts(1).flags == (Transcript::kTurnStartFact | kChecked));
  CHECK(t.cut_facts(2).flags == (Transcript::kCallsToolFact | kChecked));
  CHECK(t.cut_facts(3).reach == 1);  // answers the call in message 2
  CHECK(t.cut_facts(4).reach == 0);
  CHECK(t.cut_facts(5).reach == 3);
  CHECK(t.cut_facts(6).flags == kChecked);
  CHECK(t.pairing() == Transcript::Pairing::kClosed);

  // Results answering several calls: the earliest one counts. A call and its result in one
  // message constrain nothing.
  Transcript u;
  u.Append(CallsOf({"p"}));         // 0
  u.Append(CallsOf({"q"}));         // 1
  u.Append(ResultsOf({"q", "p"}));  // 2
  Message both;
  both.role = Role::kAssistant;
  both.parts.emplace_back(Opaque{"server_tool_use", "{}", OpaqueLink::kCall, "s"});
  both.parts.emplace_back(Opaque{"server_tool_result", "{}", OpaqueLink::kResult, "s"});
  u.Append(both);  // 3
  CHECK(u.cut_facts(2).reach == 2);
  CHECK(u.cut_facts(3).reach == 0);
  CHECK(u.cut_facts(3).flags == (Transcript::kCallsToolFact | kChecked));
  CHECK(u.pairing() == Transcript::Pairing::kClosed);
}

TEST_CASE("R6 a message is noted well-formed only when the transcript checked it itself") {
  Transcript t;
  t.Append(Message::UserText("bad \xFF byte"));  // repaired on the way in
  Message vouched = Message::UserText("vouched for");
  vouched.id = "v1";  // Append(shared_ptr) takes a message with an id
  t.Append(std::make_shared<const Message>(vouched));
  Message measured = Message::UserText("measured");
  measured.id = "m1";
  t.AppendMeasured(std::make_shared<const Message>(measured), MessageChars(measured));
  CHECK((t.cut_facts(0).flags & Transcript::kWellFormedFact) != 0);
  CHECK(IsValidUtf8(JoinedText(t[0])));
  CHECK((t.cut_facts(1).flags & Transcript::kWellFormedFact) == 0);
  CHECK((t.cut_facts(2).flags & Transcript::kWellFormedFact) == 0);
  // Set checks (and repairs) the message it is given.
  t.Set(1, Message::UserText("replaced \xC3"));
  CHECK((t.cut_facts(1).flags & Transcript::kWellFormedFact) != 0);
  CHECK(IsValidUtf8(JoinedText(t[1])));
  // A slice keeps what was noted.
  const Transcript s = t.Slice(1, 3);
  CHECK((s.cut_facts(0).flags & Transcript::kWellFormedFact) != 0);
  CHECK((s.cut_facts(1).flags & Transcript::kWellFormedFact) == 0);
}

TEST_CASE("R11.4 open calls: copies share them, and appending to a copy leaves the original") {
  Transcript t;
  t.Append(Message::UserText("go"));
  t.Append(CallsOf({"a", "b"}));
  CHECK(t.pairing() == Transcript::Pairing::kOpen);
  Transcript copy = t;
  copy.Append(Message::ToolOutput("a", "1"));
  CHECK(copy.pairing() == Transcript::Pairing::kOpen);
  copy.Append(Message::ToolOutput("b", "2"));
  CHECK(copy.pairing() == Transcript::Pairing::kClosed);
  CHECK(copy.cut_facts(3).reach == 2);
  CHECK(t.pairing() == Transcript::Pairing::kOpen);  // still waiting for both
  t.Append(Message::ToolOutput("b", "2"));
  t.Append(Message::ToolOutput("a", "1"));
  CHECK(t.pairing() == Transcript::Pairing::kClosed);
  CHECK(t.cut_facts(3).reach == 2);

  Transcript moved = std::move(t);
  CHECK(moved.pairing() == Transcript::Pairing::kClosed);
  CHECK(t.pairing() == Transcript::Pairing::kClosed);  // NOLINT(bugprone-use-after-move)
}

TEST_CASE("R11.4 what the open calls cannot settle makes the pairing unknown") {
  SECTION("an orphan result") {
    Transcript t;
    t.Append(Message::ToolOutput("ghost", "x"));
    CHECK(t.pairing() == Transcript::Pairing::kUnknown);
    // ... for good: later messages do not make it known again.
    t.Append(Message::UserText("hi"));
    CHECK(t.pairing() == Transcript::Pairing::kUnknown);
    CHECK((t.cut_facts(1).flags & ~Transcript::kWellFormedFact) ==
          Transcript::kTurnStartFact);  // flags are noted still
  }
  SECTION("a second result for an answered call") {
    Transcript t;
    t.Append(CallsOf({"a"}));
    t.Append(Message::ToolOutput("a", "1"));
    CHECK(t.pairing() == Transcript::Pairing::kClosed);
    t.Append(Message::ToolOutput("a", "again"));
    CHECK(t.pairing() == Transcript::Pairing::kUnknown);
  }
  SECTION("a call id reused while its call is open; reused after its result is fine") {
    Transcript t;
    t.Append(CallsOf({"a"}));
    t.Append(Message::ToolOutput("a", "1"));
    t.Append(CallsOf({"a"}));
    CHECK(t.pairing() == Transcript::Pairing::kOpen);
    t.Append(CallsOf({"a"}));
    CHECK(t.pairing() == Transcript::Pairing::kUnknown);
  }
  SECTION("more open calls than are tracked") {
    Transcript t;
    for (int i = 0; i < 64; ++i) t.Append(CallsOf({"c" + std::to_string(i)}));
    CHECK(t.pairing() == Transcript::Pairing::kOpen);
    t.Append(CallsOf({"one more"}));
    CHECK(t.pairing() == Transcript::Pairing::kUnknown);
  }
}

TEST_CASE("R11.4 Set keeps the facts when calls and results stay, slices re-derive them") {
  Transcript t;
  t.Append(Message::UserText("go"));
  t.Append(CallsOf({"a"}));
  t.Append(Message::ToolOutput("a", std::string(100, 'x')));
  t.Append(Message::UserText("next"));
  REQUIRE(t.pairing() == Transcript::Pairing::kClosed);

  Transcript clipped = t;
  clipped.Set(2, Message::ToolOutput("a", "x"));  // as the reducer clips: same id
  CHECK(clipped.pairing() == Transcript::Pairing::kClosed);
  CHECK(clipped.cut_facts(2).reach == 1);
  Message marked = t[3];
  marked.summary = true;
  clipped.Set(3, marked);
  CHECK((clipped.cut_facts(3).flags & ~Transcript::kWellFormedFact) == Transcript::kSummaryFact);
  CHECK((t.cut_facts(3).flags & ~Transcript::kWellFormedFact) ==
        Transcript::kTurnStartFact);  // the original is untouched

  Transcript renamed = t;
  renamed.Set(2, Message::ToolOutput("b", "x"));
  CHECK(renamed.pairing() == Transcript::Pairing::kUnknown);
  CHECK(t.pairing() == Transcript::Pairing::kClosed);

  // A prefix cut before a result: its call is open in the slice.
  CHECK(t.Slice(0, 2).pairing() == Transcript::Pairing::kOpen);
  // A slice after a call: its result is an orphan there.
  CHECK(t.Slice(2, 4).pairing() == Transcript::Pairing::kUnknown);
  CHECK(t.Slice(3, 4).pairing() == Transcript::Pairing::kClosed);
  CHECK(t.Slice(0, 4).pairing() == Transcript::Pairing::kClosed);

  // Sharing chunks from a later chunk start: not re-derived, so unknown.
  Transcript big;
  for (std::size_t i = 0; i < Transcript::kChunk + 10; ++i) big.Append(Message::UserText("m"));
  CHECK(big.Slice(Transcript::kChunk, big.size()).pairing() == Transcript::Pairing::kUnknown);
  CHECK(big.Slice(0, big.size()).pairing() == Transcript::Pairing::kClosed);
  CHECK(big.Slice(1, big.size()).pairing() == Transcript::Pairing::kClosed);
}

TEST_CASE(
    "NewMessageId: m_ and 24 lowercase hex digits, in the order one thread made them, never "
    "repeated") {
  std::set<std::string> seen;
  std::string previous;
  std::size_t ascending = 0;
  for (int i = 0; i < 100000; ++i) {
    const std::string id = NewMessageId();
    REQUIRE(id.size() == 26);
    REQUIRE(id.compare(0, 2, "m_") == 0);
    for (std::size_t k = 2; k < id.size(); ++k) {
      INFO(id);
      REQUIRE(((id[k] >= '0' && id[k] <= '9') || (id[k] >= 'a' && id[k] <= 'f')));
    }
    REQUIRE(seen.insert(id).second);
    if (!previous.empty() && previous < id) ++ascending;
    previous = id;
  }
  // The first 8 digits count up: only a wrap of the 32-bit counter breaks the order.
  CHECK(ascending >= 99998);
  // Different threads draw different ids.
  std::string other;
  std::thread([&] { other = NewMessageId(); }).join();
  CHECK(seen.count(other) == 0);
}

TEST_CASE(
    "NewMessageId: a forked process draws other ids than its parent (a host that forks workers "
    "appends to one session from both)") {
  (void)NewMessageId();  // the generator is seeded in this process before the fork
  int fds[2];
  REQUIRE(::pipe(fds) == 0);
  const pid_t child = ::fork();
  REQUIRE(child >= 0);
  if (child == 0) {
    ::close(fds[0]);
    std::string ids;
    for (int i = 0; i < 20; ++i) ids += NewMessageId() + "\n";
    (void)!::write(fds[1], ids.data(), ids.size());
    ::_exit(0);
  }
  ::close(fds[1]);
  std::set<std::string> mine;
  for (int i = 0; i < 20; ++i) mine.insert(NewMessageId());
  std::string theirs;
  char buf[4096];
  for (ssize_t n; (n = ::read(fds[0], buf, sizeof buf)) > 0;)
    theirs.append(buf, static_cast<std::size_t>(n));
  ::close(fds[0]);
  int status = 0;
  ::waitpid(child, &status, 0);
  std::size_t shared = 0, count = 0;
  for (std::size_t at = 0; at < theirs.size();) {
    const std::size_t end = theirs.find('\n', at);
    shared += mine.count(theirs.substr(at, end - at));
    ++count;
    at = end + 1;
  }
  CHECK(count == 20);
  CHECK(shared == 0);
}
