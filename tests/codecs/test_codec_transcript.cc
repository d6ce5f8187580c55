// The codecs' EncodeTranscript (recap/codec.h): the same text as EncodeMessages, assembled
// from each message's kept encoded form, kept once and shared by every transcript holding the
// message (issue 22: what to send costs what is new); EncodeTranscriptTo writes the same text
// into a string the host keeps, in its memory (issue 39).
#include <cstdint>
#include <cstdlib>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include <catch2/catch.hpp>

#include "recap/recap.h"

#include "model/encoded_forms.h"
#include "model/transcript_access.h"
#include "support/build_speed.h"
#include "support/generator.h"
#include "support/test_data.h"

namespace {

using recap::Conversation;
using recap::Message;
using recap::Result;
using recap::Transcript;
using recap::internal::WireFormat;

struct Codec {
  const char* name;
  WireFormat format;
  Result<std::string> (*transcript)(const Transcript&, std::size_t);
  Result<std::string> (*messages)(const Conversation&);
  recap::Status (*to)(const Transcript&, std::size_t, std::string*);
};

const Codec kCodecs[] = {
    {"native", WireFormat::kNative, recap::native::EncodeTranscript, recap::native::EncodeMessages,
     recap::native::EncodeTranscriptTo},
    {"openai_chat", WireFormat::kOpenAiChat, recap::openai_chat::EncodeTranscript,
     recap::openai_chat::EncodeMessages, recap::openai_chat::EncodeTranscriptTo},
    {"anthropic", WireFormat::kAnthropic, recap::anthropic::EncodeTranscript,
     recap::anthropic::EncodeMessages, recap::anthropic::EncodeTranscriptTo},
    {"openai_responses", WireFormat::kOpenAiResponses, recap::openai_responses::EncodeTranscript,
     recap::openai_responses::EncodeMessages, recap::openai_responses::EncodeTranscriptTo},
};

// What EncodeMessages writes for messages [begin, size()) of `t` — for recap's own form, the
// array inside its document — or its error.
Result<std::string> Reference(const Codec& codec, const Transcript& t, std::size_t begin = 0) {
  Conversation conversation;
  for (std::size_t i = begin; i < t.size(); ++i) conversation.messages.push_back(t[i]);
  Result<std::string> text = codec.messages(conversation);
  if (!text.ok() || codec.format != WireFormat::kNative) return text;
  const std::string& doc = *text;
  const std::size_t at = doc.find(",\"messages\":");
  REQUIRE(at != std::string::npos);
  REQUIRE(doc.back() == '}');
  return doc.substr(at + 12, doc.size() - at - 13);
}

// The three paths agree: the same text, or the same error. EncodeTranscriptTo writes over
// what its string held (on error it leaves it).
void CheckSame(const Codec& codec, const Transcript& t, std::size_t begin = 0) {
  INFO(codec.name << " from " << begin << " of " << t.size());
  const Result<std::string> want = Reference(codec, t, begin);
  const Result<std::string> got = codec.transcript(t, begin);
  std::string into = "what the host's string held before";
  const recap::Status to = codec.to(t, begin, &into);
  REQUIRE(got.ok() == want.ok());
  REQUIRE(to.ok() == want.ok());
  if (want.ok()) {
    REQUIRE(*got == *want);
    REQUIRE(into == *want);
  } else {
    CHECK(got.status() == want.status());
    CHECK(to == want.status());
    CHECK(into == "what the host's string held before");
  }
}

std::uint64_t FirstSeed(int* cases, int default_cases) {
  const char* env = std::getenv("RECAP_SEED");
  *cases = env != nullptr ? 1 : default_cases;
  return env != nullptr ? std::strtoull(env, nullptr, 10) : 1;
}

}  // namespace

TEST_CASE("EncodeTranscript writes what EncodeMessages writes, in every format, kept or not") {
  int cases = 0;
  const std::uint64_t first = FirstSeed(&cases, recap_test::kSlowBuild ? 500 : 1000);
  int encodable = 0;
  for (int k = 0; k < cases; ++k) {
    const std::uint64_t seed = first + static_cast<std::uint64_t>(k);
    INFO("RECAP_SEED=" << seed);
    recap_test::GeneratorOptions options;
    options.max_turns = 4;
    Transcript t(recap_test::GenerateMessages(seed, options));
    std::mt19937_64 rng(seed);
    for (const Codec& codec : kCodecs) {
      CheckSame(codec, t);  // every fragment written now
      CheckSame(codec, t);  // every fragment kept
      if (codec.transcript(t, 0).ok()) ++encodable;
      // A copy that grows: the old messages' forms are shared, the new ones written.
      Transcript grown = t;
      for (const Message& m : recap_test::GenerateMessages(seed + 1000000, options)) {
        Message copy = m;
        copy.id += "-more";
        grown.Append(std::move(copy));
      }
      CheckSame(codec, grown);
      // A message replaced: its form is written again, not taken from the old one.
      if (t.size() > 1) {
        const std::size_t i = rng() % t.size();
        Message changed = t[i];
        changed.parts.push_back(recap::Text{"added after encoding"});
        Transcript set = t;
        set.Set(i, std::move(changed));
        CheckSame(codec, set);
        CheckSame(codec, t);  // the original is untouched
      }
      // Slices and a start past the leading messages.
      const std::size_t begin = t.size() == 0 ? 0 : rng() % (t.size() + 1);
      CheckSame(codec, t, begin);
      CheckSame(codec, t.Slice(begin, t.size()));
    }
  }
  // Most generated transcripts encode in most formats: the comparison compared text.
  if (cases > 1) CHECK(encodable > cases * 2);
}

TEST_CASE("EncodeTranscript on the real transcripts, in their own format and the others") {
  for (const recap::testing::NamedTranscript& named : recap::testing::AllRealTranscripts()) {
    INFO(named.name);
    const Transcript t(named.conversation.messages);
    for (const Codec& codec : kCodecs) CheckSame(codec, t);
  }
}

TEST_CASE("EncodeTranscript keeps each message's form once, shared by the transcripts holding it") {
  Transcript t;
  t.Append(Message::UserText("first"));
  t.Append(Message::AssistantText("second"));
  REQUIRE(recap::openai_chat::EncodeTranscript(t).ok());
  const std::string* kept =
      recap::internal::TranscriptAccess::Encoded(t, 0).Find(WireFormat::kOpenAiChat);
  REQUIRE(kept != nullptr);
  CHECK(*kept == R"({"role":"user","content":"first"})");
  // Not kept in a format not asked for.
  CHECK(recap::internal::TranscriptAccess::Encoded(t, 0).Find(WireFormat::kAnthropic) == nullptr);

  // The next turn: a copy with one more message. The old message's form is the same object;
  // only the new message gets written.
  Transcript next = t;
  next.Append(Message::UserText("third"));
  CHECK(recap::internal::TranscriptAccess::Encoded(next, 0).Find(WireFormat::kOpenAiChat) == kept);
  CHECK(recap::internal::TranscriptAccess::Encoded(next, 2).Find(WireFormat::kOpenAiChat) ==
        nullptr);
  const Result<std::string> body = recap::openai_chat::EncodeTranscript(next);
  REQUIRE(body.ok());
  CHECK(*body == R"([{"role":"user","content":"first"},{"role":"assistant","content":"second"},)"
                 R"({"role":"user","content":"third"}])");
  CHECK(recap::internal::TranscriptAccess::Encoded(next, 0).Find(WireFormat::kOpenAiChat) == kept);

  // A transcript built from another's messages (as the Compactor rebuilds after a compaction)
  // shares their forms too.
  Transcript rebuilt;
  recap::internal::TranscriptAccess::AppendFrom(rebuilt, next, 1);
  CHECK(recap::internal::TranscriptAccess::Encoded(rebuilt, 0).Find(WireFormat::kOpenAiChat) ==
        recap::internal::TranscriptAccess::Encoded(next, 1).Find(WireFormat::kOpenAiChat));
}

TEST_CASE(
    "EncodeTranscriptParts gives the array's pieces without a copy, valid while a transcript holds "
    "them") {
  std::vector<std::string_view> parts;
  std::string joined;
  {
    Transcript t;
    t.Append(Message::UserText("one"));
    t.Append(Message::AssistantText("two"));
    Transcript keeper = t;  // holds the messages after `t` goes
    REQUIRE(recap::openai_chat::EncodeTranscriptParts(t, 0, &parts).ok());
    REQUIRE(parts.size() == 2);
    CHECK(parts[0].data() == recap::internal::TranscriptAccess::Encoded(keeper, 0)
                                 .Find(WireFormat::kOpenAiChat)
                                 ->data());
    joined = "[" + std::string(parts[0]) + "," + std::string(parts[1]) + "]";
    CHECK(joined == *recap::openai_chat::EncodeTranscript(keeper));
    t = Transcript();
    CHECK(std::string(parts[1]) == R"({"role":"assistant","content":"two"})");
  }
  // A failure leaves no pieces.
  Transcript bad;
  bad.Append(Message::UserText("x"));
  bad.Append(Message::SystemText("y"));
  CHECK_FALSE(recap::anthropic::EncodeTranscriptParts(bad, 0, &parts).ok());
  CHECK(parts.empty());
}

TEST_CASE("EncodeTranscript names a message that cannot be encoded, and keeps nothing for it") {
  Transcript t;
  t.Append(Message::UserText("hello"));
  t.Append(Message::SystemText("a system message in the middle"));
  t.Append(Message::AssistantText("bye"));
  const Result<std::string> refused = recap::anthropic::EncodeTranscript(t);
  REQUIRE_FALSE(refused.ok());
  CHECK(refused.status().message().find("messages[1]") != std::string::npos);
  CHECK(recap::internal::TranscriptAccess::Encoded(t, 1).Find(WireFormat::kAnthropic) == nullptr);
  // Counted from `begin`, as the messages of the array it would have written.
  const Result<std::string> from_one = recap::anthropic::EncodeTranscript(t, 1);
  REQUIRE_FALSE(from_one.ok());
  CHECK(from_one.status().message().find("messages[0]") != std::string::npos);
  // Past the system message it encodes.
  const Result<std::string> from_two = recap::anthropic::EncodeTranscript(t, 2);
  REQUIRE(from_two.ok());
  CHECK(*from_two == R"([{"role":"assistant","content":[{"type":"text","text":"bye"}]}])");
  // A start past the end is an error that says so; at the end, an empty array.
  CHECK(recap::openai_chat::EncodeTranscript(t, 4).status().code() ==
        recap::StatusCode::kInvalidArgument);
  CHECK(*recap::openai_chat::EncodeTranscript(t, 3) == "[]");
  CHECK(*recap::native::EncodeTranscript(Transcript()) == "[]");
}

TEST_CASE("EncodeTranscript from several threads at once over transcripts sharing messages") {
  recap_test::GeneratorOptions options;
  options.max_turns = 12;
  const Transcript base(recap_test::GenerateMessages(7, options));
  const Result<std::string> want = recap::native::EncodeTranscript(Transcript(base.ToVector()));
  REQUIRE(want.ok());
  std::vector<std::thread> threads;
  std::vector<int> mismatches(8, 0);
  for (int k = 0; k < 8; ++k) {
    threads.emplace_back([&, k] {
      for (int round = 0; round < 20; ++round) {
        const Transcript copy = base;  // shares every message and its forms
        const Result<std::string> got = recap::native::EncodeTranscript(copy);
        if (!got.ok() || *got != *want) ++mismatches[static_cast<std::size_t>(k)];
      }
    });
  }
  for (std::thread& t : threads) t.join();
  for (int m : mismatches) CHECK(m == 0);
}

TEST_CASE("R7.2 EncodeTranscriptTo writes into the memory its string already has") {
  recap_test::GeneratorOptions options;
  options.max_turns = 6;
  Transcript t(recap_test::GenerateMessages(11, options));
  for (const Codec& codec : kCodecs) {
    INFO(codec.name);
    const Result<std::string> whole = codec.transcript(t, 0);
    if (!whole.ok()) continue;
    // A string with room for the body: every turn writes into the same memory.
    std::string body;
    body.reserve(whole->size() * 2 + 64);
    const char* const memory = body.data();
    const std::size_t capacity = body.capacity();
    for (std::size_t begin = 0; begin <= t.size(); ++begin) {
      const Result<std::string> want = codec.transcript(t, begin);
      if (!want.ok()) continue;
      REQUIRE(codec.to(t, begin, &body).ok());
      CHECK(body == *want);
      CHECK(body.data() == memory);
      CHECK(body.capacity() == capacity);
    }
    // Outgrown, it grows once; a smaller body after that stays in the grown memory (it is not
    // shrunk to fit).
    Transcript longer = t;
    for (int k = 0; k < 64; ++k) {
      longer.Append(Message::UserText(std::string(static_cast<std::size_t>(capacity), 'x')));
    }
    REQUIRE(codec.to(longer, 0, &body).ok());
    CHECK(body == *codec.transcript(longer, 0));
    const char* const grown = body.data();
    const std::size_t grown_capacity = body.capacity();
    CHECK(grown_capacity > capacity);
    REQUIRE(codec.to(t, 0, &body).ok());
    CHECK(body == *whole);
    CHECK(body.data() == grown);
    CHECK(body.capacity() == grown_capacity);
    // A transcript growing message by message moves the string now and then, not every time.
    std::string growing;
    Transcript grows;
    int moves = 0;
    const char* place = nullptr;
    for (int k = 0; k < 200; ++k) {
      grows.Append(Message::UserText(std::string(500, 'y')));
      REQUIRE(codec.to(grows, 0, &growing).ok());
      if (growing.data() != place) ++moves;
      place = growing.data();
    }
    CHECK(moves <= 16);
    // An empty transcript, and `begin` at the end: an empty array, in the same memory.
    REQUIRE(codec.to(Transcript(), 0, &body).ok());
    CHECK(body == "[]");
    REQUIRE(codec.to(t, t.size(), &body).ok());
    CHECK(body == "[]");
    CHECK(body.data() == grown);
  }
}

TEST_CASE(
    "R7.2 EncodeTranscriptTo fails as EncodeTranscript does and leaves its string as it was") {
  Transcript t;
  t.Append(Message::UserText("hello"));
  t.Append(Message::SystemText("a system message in the middle"));
  t.Append(Message::AssistantText("bye"));
  std::string body = "[\"the last turn's body\"]";
  const recap::Status refused = recap::anthropic::EncodeTranscriptTo(t, 0, &body);
  REQUIRE_FALSE(refused.ok());
  CHECK(refused == recap::anthropic::EncodeTranscript(t).status());
  CHECK(refused.message().find("messages[1]") != std::string::npos);
  CHECK(body == "[\"the last turn's body\"]");
  // A start past the end.
  const recap::Status past = recap::openai_chat::EncodeTranscriptTo(t, 4, &body);
  CHECK(past.code() == recap::StatusCode::kInvalidArgument);
  CHECK(body == "[\"the last turn's body\"]");
  // No string to write into.
  for (const Codec& codec : kCodecs) {
    const recap::Status none = codec.to(t, 0, nullptr);
    CHECK(none.code() == recap::StatusCode::kInvalidArgument);
    CHECK(none.message().find("`out`") != std::string::npos);
  }
  // Past the system message it encodes.
  REQUIRE(recap::anthropic::EncodeTranscriptTo(t, 2, &body).ok());
  CHECK(body == R"([{"role":"assistant","content":[{"type":"text","text":"bye"}]}])");
}
