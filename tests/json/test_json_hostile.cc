// SPEC R13.1: no input crashes recap or makes it hang. Depth bombs of 100,000 and 1,000,000
// levels in every shape and in every place a parser of recap meets JSON (a whole document, an
// extra field, an opaque payload, tool-call arguments, a string), objects with a million
// members, numbers with ten thousand digits, and configuration files that are too large or
// never end.
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <functional>
#include <string>
#include <vector>

#include <catch2/catch.hpp>
#include <sys/stat.h>
#include <sys/wait.h>

#include "recap/checkpoint.h"
#include "recap/codec.h"
#include "recap/config.h"
#include "recap/measure.h"
#include "recap/tail_reducer.h"
#include "recap/transcript.h"

#include "support/temp_dir.h"

namespace {

using recap::Conversation;
using recap::DecodeOptions;
using recap::Message;
using recap::Result;
using recap::Status;

constexpr std::size_t kLevels[] = {100000, 1000000};

// The shapes of a depth bomb, `levels` containers deep.
enum class Shape { kArrays, kObjects, kMixed, kOpenOnly };

const char* ShapeName(Shape s) {
  switch (s) {
    case Shape::kArrays: return "[[[";
    case Shape::kObjects: return "{\"a\":{\"a\":";
    case Shape::kMixed: return "[{\"a\":[{\"a\":";
    case Shape::kOpenOnly: return "[[[ never closed";
  }
  return "?";
}

std::string Bomb(Shape shape, std::size_t levels) {
  std::string s;
  switch (shape) {
    case Shape::kArrays:
      s.assign(levels, '[');
      s.append(levels, ']');
      break;
    case Shape::kObjects:
      s.reserve(levels * 6 + 4);
      for (std::size_t i = 0; i < levels; ++i) s += "{\"a\":";
      s += "null";
      s.append(levels, '}');
      break;
    case Shape::kMixed:
      s.reserve(levels * 5);
      for (std::size_t i = 0; i < levels; ++i) s += i % 2 == 0 ? "[" : "{\"a\":";
      s += "0";
      for (std::size_t i = levels; i-- > 0;) s += i % 2 == 0 ? "]" : "}";
      break;
    case Shape::kOpenOnly: s.assign(levels, '['); break;
  }
  return s;
}

// `text` as the content of a JSON string literal.
std::string Escaped(const std::string& text) {
  std::string out;
  out.reserve(text.size() + text.size() / 4);
  for (char c : text) {
    if (c == '"' || c == '\\') out += '\\';
    out += c;
  }
  return out;
}

struct Codec {
  const char* name;
  std::function<Result<Conversation>(std::string_view)> decode_all;
  std::function<Result<Message>(std::string_view)> decode_one;
  std::function<Status(std::string_view)> decode_each;
  std::function<Result<std::string>(const Conversation&)> encode;
  // A one-message document with `json` (a JSON value) as an unknown field, as an opaque
  // payload, and (escaped) as the text of a string.
  std::function<std::string(const std::string&)> in_extra;
  std::function<std::string(const std::string&)> in_payload;
  std::function<std::string(const std::string&)> in_string;
};

Status Drain(std::string_view json,
             Status (*each)(std::string_view, const DecodeOptions&, const recap::MessageSink&)) {
  return each(json, DecodeOptions{}, [](Message&&, bool) { return Status::OK(); });
}

std::vector<Codec> Codecs() {
  using namespace recap;
  std::vector<Codec> codecs;
  codecs.push_back(
      {"native", [](std::string_view j) { return native::DecodeMessages(j); },
       [](std::string_view j) { return native::DecodeMessage(j); },
       [](std::string_view j) { return Drain(j, &native::DecodeEach); },
       [](const Conversation& c) { return native::EncodeMessages(c); },
       [](const std::string& v) {
         return "[{\"role\":\"user\",\"parts\":[],\"extra\":{\"deep\":" + v + "}}]";
       },
       [](const std::string& v) {
         return "[{\"role\":\"user\",\"parts\":[{\"type\":\"opaque\",\"kind\":\"image\","
                "\"payload\":" +
                v + "}]}]";
       },
       [](const std::string& v) {
         return "[{\"role\":\"user\",\"parts\":[{\"type\":\"text\",\"text\":\"" + Escaped(v) +
                "\"}]}]";
       }});
  codecs.push_back(
      {"openai_chat", [](std::string_view j) { return openai_chat::DecodeMessages(j); },
       [](std::string_view j) { return openai_chat::DecodeMessage(j); },
       [](std::string_view j) { return Drain(j, &openai_chat::DecodeEach); },
       [](const Conversation& c) { return openai_chat::EncodeMessages(c); },
       [](const std::string& v) {
         return "[{\"role\":\"user\",\"content\":\"x\",\"deep\":" + v + "}]";
       },
       [](const std::string& v) {
         return "[{\"role\":\"user\",\"content\":[{\"type\":\"image_url\",\"image_url\":" + v +
                "}]}]";
       },
       [](const std::string& v) {
         return "[{\"role\":\"user\",\"content\":\"" + Escaped(v) + "\"}]";
       }});
  codecs.push_back(
      {"anthropic", [](std::string_view j) { return anthropic::DecodeMessages(j); },
       [](std::string_view j) { return anthropic::DecodeMessage(j); },
       [](std::string_view j) { return Drain(j, &anthropic::DecodeEach); },
       [](const Conversation& c) { return anthropic::EncodeMessages(c); },
       [](const std::string& v) {
         return "[{\"role\":\"user\",\"content\":\"x\",\"deep\":" + v + "}]";
       },
       [](const std::string& v) {
         return "[{\"role\":\"user\",\"content\":[{\"type\":\"image\",\"source\":" + v + "}]}]";
       },
       [](const std::string& v) {
         return "[{\"role\":\"user\",\"content\":\"" + Escaped(v) + "\"}]";
       }});
  codecs.push_back({"openai_responses",
                    [](std::string_view j) { return openai_responses::DecodeMessages(j); },
                    [](std::string_view j) { return openai_responses::DecodeMessage(j); },
                    [](std::string_view j) { return Drain(j, &openai_responses::DecodeEach); },
                    [](const Conversation& c) { return openai_responses::EncodeMessages(c); },
                    [](const std::string& v) {
                      return "[{\"role\":\"user\",\"content\":\"x\",\"deep\":" + v + "}]";
                    },
                    [](const std::string& v) {
                      return "[{\"type\":\"reasoning\",\"id\":\"rs_1\",\"summary\":" + v + "}]";
                    },
                    [](const std::string& v) {
                      return "[{\"role\":\"user\",\"content\":\"" + Escaped(v) + "\"}]";
                    }});
  return codecs;
}

void RequireTooDeep(const Status& s) {
  REQUIRE_FALSE(s.ok());
  CHECK(s.code() == recap::StatusCode::kInvalidArgument);
  CHECK_THAT(s.message(), Catch::Contains("nested deeper than 1000 levels"));
  CHECK_THAT(s.message(), Catch::Contains("byte offset"));
}

}  // namespace

TEST_CASE("R13.1 every codec refuses depth bombs of 100,000 and 1,000,000 levels, every shape") {
  for (const Codec& codec : Codecs()) {
    for (std::size_t levels : kLevels) {
      for (Shape shape : {Shape::kArrays, Shape::kObjects, Shape::kMixed, Shape::kOpenOnly}) {
        const std::string bomb = Bomb(shape, levels);
        INFO(codec.name << ", " << levels << " levels of " << ShapeName(shape));
        SECTION(std::string(codec.name) + " " + std::to_string(levels) + " " + ShapeName(shape)) {
          // As the whole document, as an unknown field and as an opaque payload.
          RequireTooDeep(codec.decode_all(bomb).status());
          RequireTooDeep(codec.decode_one(bomb).status());
          RequireTooDeep(codec.decode_each(bomb));
          RequireTooDeep(codec.decode_all(codec.in_extra(bomb)).status());
          RequireTooDeep(codec.decode_each(codec.in_extra(bomb)));
          RequireTooDeep(codec.decode_all(codec.in_payload(bomb)).status());
          RequireTooDeep(codec.decode_each(codec.in_payload(bomb)));
        }
      }
    }
  }
}

TEST_CASE("R13.1 a depth bomb inside a string is only text: decoded, kept and encoded intact") {
  for (const Codec& codec : Codecs()) {
    for (std::size_t levels : kLevels) {
      INFO(codec.name << ", " << levels << " levels");
      const std::string bomb = Bomb(Shape::kObjects, levels);
      const std::string doc = codec.in_string(bomb);
      Result<Conversation> conv = codec.decode_all(doc);
      REQUIRE(conv.ok());
      REQUIRE(conv->messages.size() == 1);
      CHECK(recap::JoinedText(conv->messages[0]) == bomb);
      Result<std::string> again = codec.encode(*conv);
      REQUIRE(again.ok());
      CHECK(again->find(Escaped(bomb)) != std::string::npos);
    }
  }
}

TEST_CASE("R13.1 encoding refuses a host's extra or payload nested 100,000 and 1,000,000 deep") {
  using namespace recap;
  for (std::size_t levels : kLevels) {
    for (Shape shape : {Shape::kArrays, Shape::kObjects, Shape::kMixed}) {
      INFO(levels << " levels of " << ShapeName(shape));
      const std::string bomb = Bomb(shape, levels);
      Message with_extra = Message::UserText("x");
      with_extra.extra = "{\"deep\":" + bomb + "}";
      Message with_text_extra = Message::UserText("x");
      std::get<Text>(with_text_extra.parts[0]).extra = "{\"deep\":" + bomb + "}";
      Message with_payload = Message::UserText("x");
      with_payload.parts.emplace_back(Opaque{"input_image", bomb, OpaqueLink::kNone, {}});
      const Message* messages[] = {&with_extra, &with_text_extra, &with_payload};
      for (const Message* m : messages) {
        Conversation conv;
        conv.messages.push_back(*m);
        for (const Codec& codec : Codecs()) {
          INFO(codec.name);
          Result<std::string> r = codec.encode(conv);
          if (std::string(codec.name) == "native" && m == &with_payload) {
            // The native form keeps a payload it cannot embed as a string, byte for byte.
            REQUIRE(r.ok());
            Result<Conversation> back = native::DecodeMessages(*r);
            REQUIRE(back.ok());
            CHECK(std::get<Opaque>(back->messages[0].parts[1]).payload == bomb);
            continue;
          }
          RequireTooDeep(r.status());
          CHECK_THAT(r.status().message(), Catch::Contains("messages[0]"));
        }
      }
    }
  }
}

TEST_CASE("R13.1 tool-call arguments nested 100,000 and 1,000,000 deep: kept, clipped, refused") {
  using namespace recap;
  for (std::size_t levels : kLevels) {
    for (Shape shape : {Shape::kArrays, Shape::kObjects, Shape::kMixed}) {
      INFO(levels << " levels of " << ShapeName(shape));
      const std::string bomb = Bomb(shape, levels);
      // Arguments are a JSON text inside a string: decoding keeps them as they are.
      const std::string chat =
          "[{\"role\":\"user\",\"content\":\"go\"},{\"role\":\"assistant\",\"content\":null,"
          "\"tool_calls\":[{\"id\":\"c1\",\"type\":\"function\",\"function\":{\"name\":\"f\","
          "\"arguments\":\"" +
          Escaped(bomb) + "\"}}]},{\"role\":\"tool\",\"tool_call_id\":\"c1\",\"content\":\"ok\"}]";
      Result<Conversation> conv = openai_chat::DecodeMessages(chat);
      REQUIRE(conv.ok());
      REQUIRE(std::get<ToolCall>(conv->messages[1].parts[0]).arguments == bomb);
      Result<std::string> back = openai_chat::EncodeMessages(*conv);
      REQUIRE(back.ok());
      CHECK(*back == chat);
      // Anthropic needs them as a JSON value: refused with the call named, not a crash.
      Result<std::string> anthropic = anthropic::EncodeMessages(*conv);
      RequireTooDeep(anthropic.status());
      CHECK_THAT(anthropic.status().message(), Catch::Contains("messages[1].parts[0]"));

      // A stored message with such arguments goes through a reduction: clipped like text
      // (recap does not parse JSON that deep), within the cap, idempotent.
      const std::string clipped = ClipArguments(bomb, 16000);
      CHECK(clipped == ClipText(bomb, 16000));
      CHECK(ClipArguments(clipped, 16000) == clipped);
      const std::string with_long_string =
          "{\"log\":\"" + std::string(40000, 'y') + "\",\"deep\":" + bomb + "}";
      CHECK(ClipArguments(with_long_string, 16000) == ClipText(with_long_string, 16000));

      Transcript t;
      for (Message& m : conv->messages) t.Append(std::move(m));
      const ReduceResult reduced = ReduceTail(t, 4000);
      REQUIRE(reduced.transcript.size() == 3);
      const auto& call = std::get<ToolCall>(reduced.transcript[1].parts[0]);
      CHECK(call.id == "c1");
      CHECK(reduced.fits);
      CHECK(CountCodePoints(call.arguments) <= kContentCaps.front());
      CHECK(IsValidUtf8(call.arguments));
    }
  }
}

TEST_CASE("R13.1 the configuration and the checkpoint parser refuse depth bombs") {
  for (std::size_t levels : kLevels) {
    for (Shape shape : {Shape::kArrays, Shape::kObjects, Shape::kMixed, Shape::kOpenOnly}) {
      INFO(levels << " levels of " << ShapeName(shape));
      const std::string bomb = Bomb(shape, levels);
      RequireTooDeep(recap::Config::FromJson(bomb).status());
      RequireTooDeep(recap::Config::FromJson("{\"compaction\":" + bomb + "}").status());
      RequireTooDeep(
          recap::Config::FromJson("{\"compaction\":{\"threshold\":" + bomb + "}}").status());
      // A summarizer's reply that is a bomb is no structured checkpoint, whole or cut.
      for (bool truncated : {false, true}) {
        const std::string reply = "{\"goal\":" + bomb + "}";
        const recap::ParsedCheckpoint parsed = recap::ParseCheckpoint(reply, truncated, {});
        CHECK_FALSE((parsed.usable && parsed.checkpoint.structured));
      }
      // The salvage of a cut reply stops at recap's one depth bound (1,000 levels,
      // recap_internal/json_depth.h), as every other reader does.
      const auto salvaged = recap::SalvageTruncatedJson("{\"goal\":" + bomb);
      if (salvaged) {
        std::size_t opened = 0;
        for (char c : *salvaged) opened += c == '[' || c == '{';
        CHECK(opened <= 1000);
      }
    }
  }
}

TEST_CASE("R13.1 an object with a million members decodes and encodes (no quadratic work)") {
  // A million unknown members of one message; ordered objects searched member by member for
  // every insertion took hours on this.
  const std::size_t n = 1000000;
  std::string doc = "[{\"role\":\"user\",\"content\":\"x\"";
  doc.reserve(n * 16);
  for (std::size_t i = 0; i < n; ++i) {
    doc += ",\"k" + std::to_string(i) + "\":" + std::to_string(i);
  }
  doc += "}]";
  Result<Conversation> conv = recap::openai_chat::DecodeMessages(doc);
  REQUIRE(conv.ok());
  const std::string prefix = "[{\"role\":\"user\",\"content\":\"x\",";
  CHECK(conv->messages[0].extra ==
        "{" + doc.substr(prefix.size(), doc.size() - prefix.size() - 2) + "}");
  Result<std::string> back = recap::openai_chat::EncodeMessages(*conv);
  REQUIRE(back.ok());
  CHECK(*back == doc);
  // And a million duplicates of one key: the last value wins, in the first one's place.
  std::string dup = "{\"role\":\"user\",\"content\":\"x\"";
  for (std::size_t i = 0; i < n; ++i) dup += ",\"k\":" + std::to_string(i);
  dup += "}";
  Result<Message> m = recap::openai_chat::DecodeMessage(dup);
  REQUIRE(m.ok());
  CHECK(m->extra == "{\"k\":" + std::to_string(n - 1) + "}");
}

TEST_CASE("R13.1 numbers of ten thousand digits and beyond a double's range are carried") {
  const std::string digits(10000, '7');
  const std::string numbers[] = {digits,     "-" + digits, "0." + digits, "1" + digits + "e-99999",
                                 "1e999999", "-1E999999",  "1e-999999"};
  for (const std::string& n : numbers) {
    INFO(n.substr(0, 40));
    const std::string doc = "[{\"role\":\"user\",\"content\":\"x\",\"n\":" + n + "}]";
    Result<Conversation> conv = recap::openai_chat::DecodeMessages(doc);
    REQUIRE(conv.ok());
    CHECK(conv->messages[0].extra == "{\"n\":" + n + "}");
    Result<std::string> back = recap::openai_chat::EncodeMessages(*conv);
    REQUIRE(back.ok());
    CHECK(*back == doc);
  }
}

TEST_CASE("R13.1 invalid UTF-8 beside a number is refused at its byte") {
  const std::string doc = "[{\"role\":\"user\",\"content\":\"x\",\"n\":1.50,\"s\":\"a\xFF\"}]";
  const Status s = recap::openai_chat::DecodeMessages(doc).status();
  REQUIRE_FALSE(s.ok());
  CHECK_THAT(s.message(), Catch::Contains("UTF-8"));
  CHECK_THAT(s.message(), Catch::Contains("byte offset " + std::to_string(doc.find('\xFF'))));
  // A number glued to a bad byte is not a number.
  const std::string glued = "[{\"role\":\"user\",\"content\":\"x\",\"n\":1.5\xC3}]";
  const Status g = recap::openai_chat::DecodeMessages(glued).status();
  REQUIRE_FALSE(g.ok());
  CHECK_THAT(g.message(), Catch::Contains("byte offset " + std::to_string(glued.find('\xC3'))));
}

TEST_CASE("R13.1 Config::FromFile reads a configuration file within a size limit") {
  recap::testing::TempDir dir;
  const std::string good = dir.File("recap.json");
  { std::ofstream(good) << R"({"compaction": {"keepTurns": 3}})"; }
  Result<recap::Config> config = recap::Config::FromFile(good);
  REQUIRE(config.ok());
  CHECK(config->compaction.keep_turns == 3);

  SECTION("a file over the limit is refused, naming the file, its size and the limit") {
    const std::string big = dir.File("big.json");
    {
      std::ofstream out(big);
      out << "{" << std::string(recap::kMaxConfigFileBytes, ' ') << "}";
    }
    const Status s = recap::Config::FromFile(big).status();
    REQUIRE_FALSE(s.ok());
    CHECK(s.code() == recap::StatusCode::kInvalidArgument);
    CHECK_THAT(s.message(), Catch::Contains(big));
    CHECK_THAT(s.message(), Catch::Contains("larger than 1 MiB"));
    CHECK_THAT(s.message(), Catch::Contains("Config::FromFile"));
    // Exactly at the limit is fine.
    {
      std::ofstream out(big, std::ios::trunc);
      out << "{" << std::string(recap::kMaxConfigFileBytes - 2, ' ') << "}";
    }
    CHECK(recap::Config::FromFile(big).ok());
    // A smaller limit of the caller's.
    CHECK_THAT(recap::Config::FromFile(good, 10).status().message(),
               Catch::Contains("larger than 10 bytes"));
  }
  SECTION("an endless stream is refused within the limit") {
    for (const char* endless : {"/dev/urandom", "/dev/zero"}) {
      INFO(endless);
      const Status s = recap::Config::FromFile(endless).status();
      REQUIRE_FALSE(s.ok());
      CHECK_THAT(s.message(), Catch::Contains("larger than 1 MiB"));
    }
    // A pipe whose writer never stops.
    const std::string fifo = dir.File("fifo");
    REQUIRE(::mkfifo(fifo.c_str(), 0600) == 0);
    const pid_t writer = ::fork();
    REQUIRE(writer >= 0);
    if (writer == 0) {
      std::FILE* f = std::fopen(fifo.c_str(), "w");
      const std::string chunk(65536, ' ');
      while (f != nullptr && std::fwrite(chunk.data(), 1, chunk.size(), f) == chunk.size()) {
      }
      ::_exit(0);
    }
    const Status s = recap::Config::FromFile(fifo).status();
    CHECK_THAT(s.message(), Catch::Contains("larger than 1 MiB"));
    int status = 0;
    ::waitpid(writer, &status, 0);  // the writer dies of SIGPIPE once the reader has gone
  }
  SECTION("a missing file, a directory and bad JSON say what and where") {
    const Status missing = recap::Config::FromFile(dir.File("nope.json")).status();
    CHECK(missing.code() == recap::StatusCode::kNotFound);
    CHECK_THAT(missing.message(), Catch::Contains(dir.File("nope.json")));
    const Status folder = recap::Config::FromFile(dir.path()).status();
    REQUIRE_FALSE(folder.ok());
    CHECK_THAT(folder.message(), Catch::Contains("directory"));
    const std::string bad = dir.File("bad.json");
    { std::ofstream(bad) << R"({"compaction": {"keepTurns": 30}})"; }
    const Status invalid = recap::Config::FromFile(bad).status();
    CHECK_THAT(invalid.message(), Catch::Contains(bad));
    CHECK_THAT(invalid.message(), Catch::Contains("compaction.keepTurns is 30"));
  }
}

TEST_CASE("R13.1 a byte order mark before a document is skipped, anywhere else it is refused") {
  const std::string bom = "\xEF\xBB\xBF";
  Result<recap::Config> config =
      recap::Config::FromJson(bom + R"({"compaction": {"keepTurns": 4}})");
  REQUIRE(config.ok());
  CHECK(config->compaction.keep_turns == 4);
  Result<Conversation> conv =
      recap::openai_chat::DecodeMessages(bom + R"([{"role":"user","content":"hi"}])");
  REQUIRE(conv.ok());
  CHECK(recap::JoinedText(conv->messages[0]) == "hi");
  const Status twice = recap::Config::FromJson(bom + bom + "{}").status();
  REQUIRE_FALSE(twice.ok());
  CHECK_THAT(twice.message(), Catch::Contains("byte offset 3"));
}
