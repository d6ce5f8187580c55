// SPEC §1 and R11.1's foundation: a transcript measures each message once and answers sizes
// in constant time; copies share messages instead of copying bytes.
#include <catch2/catch.hpp>

#include <set>
#include <string>

#include "recap/measure.h"
#include "recap/transcript.h"

using namespace recap;

TEST_CASE("§1 transcript totals and ranges follow the cached per-message sizes") {
  Transcript t;
  CHECK(t.empty());
  CHECK(t.chars() == 0);
  t.Append(Message::UserText("hello"));                       // 5
  t.Append(Message::AssistantText("h\xC3\xA9llo world"));     // 11
  t.Append(Message::UserText(std::string(10, 'x')));          // 10
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

TEST_CASE("§1 every appended message gets a stable unique id; given ids are kept") {
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

TEST_CASE("§1 copies and slices share messages; Set replaces one and updates the sums") {
  Transcript t;
  for (int i = 0; i < 5; ++i) t.Append(Message::UserText(std::string(static_cast<std::size_t>(i + 1), 'a')));
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
