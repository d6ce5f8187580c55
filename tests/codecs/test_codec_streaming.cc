// Streaming decode (issue 16, SPEC R13.1): each format's DecodeEach hands every message to the
// caller's sink as soon as it is complete, holding no more than one element of the document
// as a tree, with the errors DecodeMessages gives (DecodeMessages is built on it).
//
// Peak memory is measured in a child process (getrusage), never time.
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include <catch2/catch.hpp>
#include <sys/wait.h>

#include "recap/codec.h"

#include "support/test_data.h"

// AddressSanitizer keeps freed blocks in quarantine (256 MiB by default) and adds red zones to
// every allocation, so a peak measured under it says nothing about the decoder. The sanitized
// build still runs the work and checks its result; the Release build checks the memory.
#if defined(__SANITIZE_ADDRESS__)
#define RECAP_TEST_UNDER_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define RECAP_TEST_UNDER_ASAN 1
#endif
#endif
#if defined(RECAP_TEST_UNDER_ASAN)
constexpr bool kMemoryIsMeasured = false;
#else
constexpr bool kMemoryIsMeasured = true;
#endif

namespace {

using recap::Conversation;
using recap::DecodeOptions;
using recap::Message;
using recap::MessageSink;
using recap::Result;
using recap::Role;
using recap::Status;

using EachFn = Status (*)(std::string_view, const DecodeOptions&, const MessageSink&);
using AllFn = Result<Conversation> (*)(std::string_view, const DecodeOptions&);
using EncodeFn = Result<std::string> (*)(const Conversation&);

struct Format {
  const char* name;
  EachFn each;
  AllFn all;
  EncodeFn encode;
};

const Format kFormats[] = {
    {"native", &recap::native::DecodeEach, &recap::native::DecodeMessages,
     &recap::native::EncodeMessages},
    {"openai_chat", &recap::openai_chat::DecodeEach, &recap::openai_chat::DecodeMessages,
     &recap::openai_chat::EncodeMessages},
    {"anthropic", &recap::anthropic::DecodeEach, &recap::anthropic::DecodeMessages,
     &recap::anthropic::EncodeMessages},
    {"openai_responses", &recap::openai_responses::DecodeEach,
     &recap::openai_responses::DecodeMessages, &recap::openai_responses::EncodeMessages},
};

struct Received {
  std::vector<Message> messages;
  std::vector<bool> instructions;
};

Status Collect(const Format& f, std::string_view json, Received* got,
               const DecodeOptions& options = {}) {
  return f.each(json, options, [got](Message&& m, bool is_instructions) {
    got->messages.push_back(std::move(m));
    got->instructions.push_back(is_instructions);
    return Status::OK();
  });
}

std::string Native(const Message& m) {
  Result<std::string> r = recap::native::EncodeMessage(m);
  REQUIRE(r.ok());
  return *r;
}

// What DecodeEach handed over, checked against DecodeMessages of the same text: the same
// messages in the same order, the instructions flagged (and only they).
void CheckSameAsDecodeMessages(const Format& f, const std::string& json,
                               const DecodeOptions& options) {
  Result<Conversation> all = f.all(json, options);
  REQUIRE(all.ok());
  Received got;
  REQUIRE(Collect(f, json, &got, options).ok());
  std::vector<const Message*> want;
  if (all->instructions) want.push_back(&*all->instructions);
  for (const Message& m : all->messages) want.push_back(&m);
  REQUIRE(got.messages.size() == want.size());
  for (std::size_t i = 0; i < want.size(); ++i) {
    INFO("message " << i);
    CHECK(Native(got.messages[i]) == Native(*want[i]));
    CHECK(got.instructions[i] == (i == 0 && all->instructions.has_value()));
  }
}

}  // namespace

TEST_CASE("R13.1 DecodeEach hands over what DecodeMessages decodes, in order, every format") {
  // Every real transcript, written in each format that can hold it.
  for (const auto& named : recap::testing::AllRealTranscripts()) {
    for (const Format& f : kFormats) {
      Conversation conv = named.conversation;
      if (std::string(f.name) == "anthropic") conv.instructions.reset();
      Result<std::string> json = f.encode(conv);
      if (!json.ok()) continue;  // e.g. a block of another format
      INFO(named.name << " as " << f.name);
      for (bool split : {true, false}) {
        DecodeOptions options;
        options.split_instructions = split;
        options.keep_unknown_blocks = true;  // another format's blocks, e.g. thinking
        CheckSameAsDecodeMessages(f, *json, options);
      }
    }
  }
}

TEST_CASE("R13.1 DecodeEach flags the leading system message as the instructions") {
  const std::string chat =
      R"([{"role":"system","content":"be brief"},{"role":"user","content":"hi"},)"
      R"({"role":"system","content":"later"}])";
  Received got;
  REQUIRE(Collect(kFormats[1], chat, &got).ok());
  CHECK(got.instructions == std::vector<bool>{true, false, false});
  DecodeOptions keep;
  keep.split_instructions = false;
  Received kept;
  REQUIRE(Collect(kFormats[1], chat, &kept, keep).ok());
  CHECK(kept.instructions == std::vector<bool>{false, false, false});

  // The native object form: its `instructions` member comes first, wherever it is written.
  const std::string native =
      R"({"messages":[{"role":"user","parts":[{"type":"text","text":"hi"}]}],"version":1,)"
      R"("instructions":{"role":"system","parts":[{"type":"text","text":"be brief"}]},)"
      R"("format":"recap"})";
  Received n;
  REQUIRE(Collect(kFormats[0], native, &n).ok());
  REQUIRE(n.messages.size() == 2);
  CHECK(n.instructions == std::vector<bool>{true, false});
  CHECK(recap::JoinedText(n.messages[0]) == "be brief");

  // Responses: a reasoning item first is the model's, so no instructions.
  const std::string items =
      R"([{"type":"reasoning","id":"rs_1","summary":[]},{"role":"system","content":"s"}])";
  Received r;
  REQUIRE(Collect(kFormats[3], items, &r).ok());
  CHECK(r.instructions == std::vector<bool>{false, false});
}

TEST_CASE("R13.1 DecodeEach keeps reasoning items with the model's item that follows") {
  const std::string items =
      R"([{"role":"user","content":"go"},{"type":"reasoning","id":"rs_1","summary":[]},)"
      R"({"type":"reasoning","id":"rs_2","summary":[]},)"
      R"({"type":"function_call","call_id":"c1","name":"f","arguments":"{}"},)"
      R"({"type":"function_call_output","call_id":"c1","output":"ok"},)"
      R"({"type":"reasoning","id":"rs_3","summary":[]}])";
  Received got;
  REQUIRE(Collect(kFormats[3], items, &got).ok());
  REQUIRE(got.messages.size() == 4);
  const Message& call = got.messages[1];
  REQUIRE(call.parts.size() == 3);
  CHECK(std::get<recap::Opaque>(call.parts[0]).kind == "reasoning");
  CHECK(std::get<recap::Opaque>(call.parts[1]).kind == "reasoning");
  CHECK(std::get<recap::ToolCall>(call.parts[2]).id == "c1");
  // A trailing reasoning item has nothing to go with: its own message, at the end.
  REQUIRE(got.messages[3].parts.size() == 1);
  CHECK_THAT(std::get<recap::Opaque>(got.messages[3].parts[0]).payload, Catch::Contains("rs_3"));
}

TEST_CASE("R13.1 DecodeEach fails with DecodeMessages' error, after the messages before it") {
  struct Bad {
    int format;
    std::string json;
    std::size_t before;  // messages handed over before the error
  };
  const Bad cases[] = {
      {1, R"([{"role":"user","content":"a"},{"role":"user","content":"b"},{"role":"robot"}])", 2},
      {1, R"([{"role":"user","content":"a"},])", 1},
      {1, R"({"model":"m","messages":[]})", 0},
      {1, "[{\"role\":\"user\",\"content\":\"caf\xE9\"}]", 0},
      {2, R"([{"role":"user","content":"a"},{"role":"system","content":"s"},{"role":"tool"}])", 2},
      {3, R"([{"role":"user","content":"a"},{"type":"input_text","text":"x"}])", 1},
      {3, R"([{"type":"reasoning","id":"r"},{"role":"user","content":7}])", 0},
      {0, R"({"format":"recap","version":2,"messages":[]})", 0},
      {0, R"({"format":"recap","messages":[{"role":"user"}],"surprise":1})", 0},
      {0, R"([{"role":"user","parts":[]},{"role":"user","parts":[{"type":"x"}]}])", 1},
  };
  for (const Bad& bad : cases) {
    const Format& f = kFormats[bad.format];
    INFO(f.name << ": " << bad.json);
    const Result<Conversation> all = f.all(bad.json, {});
    REQUIRE_FALSE(all.ok());
    Received got;
    const Status each = Collect(f, bad.json, &got);
    REQUIRE_FALSE(each.ok());
    CHECK(each.code() == all.status().code());
    CHECK(each.message() == all.status().message());
    CHECK(got.messages.size() == bad.before);
  }
}

TEST_CASE("R13.1 a sink's error stops DecodeEach and comes back unchanged") {
  for (const Format& f : kFormats) {
    Conversation conv;
    for (int i = 0; i < 10; ++i) conv.messages.push_back(Message::UserText("m"));
    Result<std::string> json = f.encode(conv);
    REQUIRE(json.ok());
    int calls = 0;
    const Status s = f.each(*json, {}, [&](Message&&, bool) {
      return ++calls == 3 ? Status::Unavailable("the store is gone") : Status::OK();
    });
    INFO(f.name);
    CHECK(s.code() == recap::StatusCode::kUnavailable);
    CHECK(s.message() == "the store is gone");
    CHECK(calls == 3);
  }
}

// ---- Peak memory, in a child process ---------------------------------------------------------

namespace {

// A line "<name>: <n> kB" of /proc/self/status, in kB; -1 when there is none.
long StatusKb(const char* name) {
  std::FILE* f = std::fopen("/proc/self/status", "r");
  if (f == nullptr) return -1;
  char line[256];
  long kb = -1;
  const std::size_t n = std::strlen(name);
  while (std::fgets(line, sizeof line, f) != nullptr) {
    if (std::strncmp(line, name, n) == 0 && line[n] == ':') kb = std::atol(line + n + 1);
  }
  std::fclose(f);
  return kb;
}

// Starts a new peak: the kernel forgets the highest resident size so far (VmHWM).
bool ResetPeak() {
  std::FILE* f = std::fopen("/proc/self/clear_refs", "w");
  if (f == nullptr) return false;
  const bool ok = std::fputs("5", f) >= 0;
  return std::fclose(f) == 0 && ok;
}

// Runs `work` in a child process and returns by how many kilobytes its peak resident size grew
// during `work` over what `prepare` left resident, or -1 when the child failed (or the kernel
// cannot reset the peak).
long PeakGrowthKb(const std::function<void()>& prepare, const std::function<bool()>& work) {
  int fds[2];
  REQUIRE(::pipe(fds) == 0);
  const pid_t child = ::fork();
  REQUIRE(child >= 0);
  if (child == 0) {
    ::close(fds[0]);
    prepare();
    const long before = StatusKb("VmRSS");
    const bool reset = ResetPeak();
    const bool ok = work();
    const long growth = ok && reset && before >= 0 ? StatusKb("VmHWM") - before : -1;
    (void)!::write(fds[1], &growth, sizeof growth);
    ::_exit(0);
  }
  ::close(fds[1]);
  long growth = -1;
  const ssize_t n = ::read(fds[0], &growth, sizeof growth);
  ::close(fds[0]);
  int status = 0;
  ::waitpid(child, &status, 0);
  REQUIRE(n == static_cast<ssize_t>(sizeof growth));
  return growth;
}

}  // namespace

TEST_CASE("R13.1 a 64 MB tool output is decoded with one copy of it, not several") {
  constexpr std::size_t kBytes = 64u << 20;
  std::string doc;
  const long growth = PeakGrowthKb(
      [&] {
        doc = R"([{"role":"tool","tool_call_id":"c1","content":")";
        doc.reserve(kBytes + 64);
        doc.append(kBytes, 'x');
        doc += R"("}])";
      },
      [&] {
        std::size_t seen = 0;
        Status s = recap::openai_chat::DecodeEach(doc, {}, [&](Message&& m, bool) {
          seen =
              std::get<recap::Text>(std::get<recap::ToolResult>(m.parts[0]).content[0]).text.size();
          return Status::OK();
        });
        return s.ok() && seen == kBytes;
      });
  REQUIRE(growth >= 0);
  INFO("peak grew by " << growth / 1024 << " MiB for a " << (kBytes >> 20) << " MiB string");
  // The decoded string itself (64 MiB) and little else: no token buffer, no tree, no copy.
  if (!kMemoryIsMeasured) return;
  CHECK(growth < static_cast<long>(kBytes / 1024) * 5 / 4);
}

TEST_CASE(
    "R13.1 a 64 MB tool output full of escapes is decoded into one buffer, not a doubling one") {
  // A log: lines of 99 characters, each ended by an escaped newline. A string that grew by
  // doubling as the escapes were undone held its old and new buffers at once (up to 3x).
  constexpr std::size_t kLines = (64u << 20) / 100;
  std::string doc;
  const long growth = PeakGrowthKb(
      [&] {
        doc = R"([{"role":"tool","tool_call_id":"c1","content":")";
        doc.reserve(kLines * 102 + 64);
        for (std::size_t i = 0; i < kLines; ++i) {
          doc.append(98, static_cast<char>('a' + i % 26));
          doc += i % 7 == 0 ? "\\\\\\n" : "\\\"\\n";  // JSON: an escaped \ or ", then \n
        }
        doc += R"("}])";
      },
      [&] {
        bool right = false;
        Status s = recap::openai_chat::DecodeEach(doc, {}, [&](Message&& m, bool) {
          const std::string& text =
              std::get<recap::Text>(std::get<recap::ToolResult>(m.parts[0]).content[0]).text;
          right = text.size() == kLines * 100 &&
                  text.compare(0, 100, std::string(98, 'a') + "\\\n") == 0 &&
                  text.compare(100, 100, std::string(98, 'b') + "\"\n") == 0;
          return Status::OK();
        });
        return s.ok() && right;
      });
  REQUIRE(growth >= 0);
  INFO("peak grew by " << growth / 1024 << " MiB for a " << kLines * 100 / (1 << 20)
                       << " MiB string");
  if (!kMemoryIsMeasured) return;
  CHECK(growth < static_cast<long>(kLines * 100 / 1024) * 5 / 4);
}

TEST_CASE("R13.1 200,000 small messages stream through DecodeEach in little memory") {
  std::string doc;
  const long growth = PeakGrowthKb(
      [&] {
        doc = "[";
        for (int i = 0; i < 200000; ++i) {
          doc += std::string(i ? "," : "") + R"({"role":"user","content":"message number )" +
                 std::to_string(i) + R"(","meta":{"n":1.50}})";
        }
        doc += "]";
      },
      [&] {
        std::size_t n = 0;
        Status s = recap::openai_chat::DecodeEach(doc, {}, [&](Message&&, bool) {
          ++n;
          return Status::OK();
        });
        return s.ok() && n == 200000;
      });
  REQUIRE(growth >= 0);
  INFO("peak grew by " << growth << " KiB for a document of about 11 MiB");
  // One message at a time: a few MiB at most, not a tree of the whole document (which took
  // about ten times the document).
  if (!kMemoryIsMeasured) return;
  CHECK(growth < 8 * 1024);
}
