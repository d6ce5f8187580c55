// recap::native: the stored form records everything the model holds, byte-exact where it
// matters (opaque payloads), strictly read.
#include <string>

#include <catch2/catch.hpp>

#include "recap/codec.h"

#include "support/test_data.h"

namespace {

using recap::ContentForm;
using recap::Message;
using recap::Opaque;
using recap::OpaqueLink;
using recap::Role;
using recap::Text;
using recap::ToolCall;
using recap::ToolResult;

std::string Encode(const Message& m) {
  auto r = recap::native::EncodeMessage(m);
  REQUIRE(r.ok());
  return *r;
}

Message Decode(const std::string& json) {
  auto r = recap::native::DecodeMessage(json);
  INFO(json);
  REQUIRE(r.ok());
  return *r;
}

std::string DecodeError(const std::string& json) {
  auto r = recap::native::DecodeMessages(json);
  REQUIRE_FALSE(r.ok());
  CHECK(r.status().code() == recap::StatusCode::kInvalidArgument);
  return r.status().message();
}

// A message that uses every member the model has.
Message Everything() {
  Message m;
  m.id = "m_0123";
  m.role = Role::kUser;
  m.summary = true;
  m.form = ContentForm::kList;
  m.extra = R"({"name":"alice","n":[1,2.5]})";
  m.parts.emplace_back(Text{"hello \xE2\x9C\x93", R"({"cache_control":{"type":"ephemeral"}})"});
  m.parts.emplace_back(ToolCall{"c1", "ls", "{ \"path\" : \".\" }", R"({"type":"function"})"});
  ToolResult r;
  r.call_id = "c1";
  r.is_error = true;
  r.form = ContentForm::kString;
  r.extra = R"({"is_error":false})";
  r.content.emplace_back(Text{"out", {}});
  r.content.emplace_back(
      Opaque{"image", R"({"type":"image","source":{"data":"AA=="}})", OpaqueLink::kNone, {}});
  m.parts.emplace_back(std::move(r));
  m.parts.emplace_back(Opaque{
      "thinking", R"({"type":"thinking","thinking":"t","signature":"s"})", OpaqueLink::kNone, {}});
  m.parts.emplace_back(Opaque{"server_tool_use", R"({"type":"server_tool_use","id":"s1"})",
                              OpaqueLink::kCall, "s1"});
  return m;
}

}  // namespace

TEST_CASE("§1 native form of a simple message is small and readable", "[native]") {
  Message m = Message::UserText("hi");
  m.id = "m_1";
  CHECK(Encode(m) == R"({"id":"m_1","role":"user","parts":[{"type":"text","text":"hi"}]})");
  // Default members are omitted, including an empty id.
  CHECK(Encode(Message::AssistantText("ok")) ==
        R"({"role":"assistant","parts":[{"type":"text","text":"ok"}]})");
  CHECK(Encode(Message::ToolOutput("c", "x")) ==
        R"({"role":"tool","parts":[{"type":"tool_result","call_id":"c",)"
        R"("content":[{"type":"text","text":"x"}]}]})");
}

TEST_CASE("§1 native form records every member of the model", "[native]") {
  const Message original = Everything();
  const std::string json = Encode(original);
  CHECK(
      json ==
      R"({"id":"m_0123","role":"user","summary":true,"form":"list","parts":[)"
      "{\"type\":\"text\",\"text\":\"hello "
      "\xE2\x9C\x93\",\"extra\":{\"cache_control\":{\"type\":\"ephemeral\"}}},"
      R"({"type":"tool_call","id":"c1","name":"ls","arguments":"{ \"path\" : \".\" }",)"
      R"("extra":{"type":"function"}},)"
      R"({"type":"tool_result","call_id":"c1","content":[{"type":"text","text":"out"},)"
      R"({"type":"opaque","kind":"image","payload":{"type":"image","source":{"data":"AA=="}}}],)"
      R"("is_error":true,"form":"string","extra":{"is_error":false}},)"
      R"({"type":"opaque","kind":"thinking",)"
      R"("payload":{"type":"thinking","thinking":"t","signature":"s"}},)"
      R"({"type":"opaque","kind":"server_tool_use","payload":{"type":"server_tool_use","id":"s1"},)"
      R"("link":"call","link_id":"s1"}],"extra":{"name":"alice","n":[1,2.5]}})");

  const Message back = Decode(json);
  CHECK(back.id == original.id);
  CHECK(back.role == original.role);
  CHECK(back.summary);
  CHECK(back.form == ContentForm::kList);
  CHECK(back.extra == original.extra);
  REQUIRE(back.parts.size() == original.parts.size());
  CHECK(std::get<Text>(back.parts[0]).extra == std::get<Text>(original.parts[0]).extra);
  CHECK(std::get<ToolCall>(back.parts[1]).arguments == "{ \"path\" : \".\" }");
  const auto& r = std::get<ToolResult>(back.parts[2]);
  CHECK(r.is_error);
  CHECK(r.form == ContentForm::kString);
  CHECK(r.extra == R"({"is_error":false})");
  CHECK(std::get<Opaque>(r.content[1]).payload == R"({"type":"image","source":{"data":"AA=="}})");
  const auto& linked = std::get<Opaque>(back.parts[4]);
  CHECK(linked.link == OpaqueLink::kCall);
  CHECK(linked.link_id == "s1");
  // Encoding what was decoded gives the same text: the form is a fixed point.
  CHECK(Encode(back) == json);
}

TEST_CASE("native opaque payloads come back byte-identical whatever their bytes", "[native]") {
  // Each of these differs from its own re-serialization, so it must be stored as text.
  const char* const payloads[] = {
      R"({"type": "thinking", "signature": "x"})",  // spaces
      R"({"s":"\u00e9"})",                          // an escape that reads back unescaped
      R"({"a":1,"a":2})",                           // duplicate keys
      "{not json at all",
      "",
  };
  for (const char* payload : payloads) {
    INFO(payload);
    Message m;
    m.role = Role::kAssistant;
    m.parts.emplace_back(Opaque{"reasoning", payload, OpaqueLink::kNone, {}});
    const std::string json = Encode(m);
    CHECK(json.find("payload_text") != std::string::npos);
    CHECK(std::get<Opaque>(Decode(json).parts[0]).payload == payload);
  }
  // Numbers keep their text (R13.2), so these re-serialize to themselves and are embedded.
  const char* const numbers[] = {
      R"({"a":1e5})", R"({"a":1.0E+2,"b":-0})",
      R"({"big":123456789012345678901234567890})",  // beyond 64 bits
  };
  for (const char* payload : numbers) {
    INFO(payload);
    Message m;
    m.role = Role::kAssistant;
    m.parts.emplace_back(Opaque{"reasoning", payload, OpaqueLink::kNone, {}});
    const std::string json = Encode(m);
    CHECK(json.find("payload_text") == std::string::npos);
    CHECK(json.find(std::string("\"payload\":") + payload) != std::string::npos);
    CHECK(std::get<Opaque>(Decode(json).parts[0]).payload == payload);
  }
  // A compact payload, as the codecs produce, is embedded as a value.
  const std::string compact =
      "{\"type\":\"thinking\",\"thinking\":\"caf\xC3\xA9 \\\"q\\\"\\n\","
      "\"n\":[1,2.5,-3,true,null],\"signature\":\"EqQB+/==\"}";
  Message m;
  m.role = Role::kAssistant;
  m.parts.emplace_back(Opaque{"thinking", compact, OpaqueLink::kNone, {}});
  const std::string json = Encode(m);
  CHECK(json.find("payload_text") == std::string::npos);
  CHECK(std::get<Opaque>(Decode(json).parts[0]).payload == compact);
}

TEST_CASE("native conversations carry instructions, a bare array is accepted", "[native]") {
  recap::Conversation conv;
  conv.instructions = Message::SystemText("rules");
  conv.messages.push_back(Message::UserText("hi"));
  auto encoded = recap::native::EncodeMessages(conv);
  REQUIRE(encoded.ok());
  CHECK(*encoded == R"({"format":"recap","version":1,)"
                    R"("instructions":{"role":"system","parts":[{"type":"text","text":"rules"}]},)"
                    R"("messages":[{"role":"user","parts":[{"type":"text","text":"hi"}]}]})");
  auto back = recap::native::DecodeMessages(*encoded);
  REQUIRE(back.ok());
  REQUIRE(back->instructions.has_value());
  CHECK(recap::JoinedText(*back->instructions) == "rules");
  CHECK(back->messages.size() == 1);

  recap::DecodeOptions keep;
  keep.split_instructions = false;
  auto whole = recap::native::DecodeMessages(*encoded, keep);
  REQUIRE(whole.ok());
  CHECK_FALSE(whole->instructions.has_value());
  CHECK(whole->messages.size() == 2);

  const std::string bare = R"([{"role":"system","parts":[]},{"role":"user","parts":[]}])";
  auto split = recap::native::DecodeMessages(bare);
  REQUIRE(split.ok());
  CHECK(split->instructions.has_value());
  CHECK(split->messages.size() == 1);
  auto unsplit = recap::native::DecodeMessages(bare, keep);
  REQUIRE(unsplit.ok());
  CHECK(unsplit->messages.size() == 2);

  recap::Conversation empty;
  auto none = recap::native::EncodeMessages(empty);
  REQUIRE(none.ok());
  CHECK(*none == R"({"format":"recap","version":1,"instructions":null,"messages":[]})");
}

TEST_CASE("native decoding is strict and names what it accepts", "[native]") {
  SECTION("an unknown member, e.g. a typo") {
    const std::string msg = DecodeError(R"([{"role":"user","prts":[]}])");
    CHECK_THAT(msg, Catch::Contains("`messages[0]` has the member \"prts\""));
    CHECK_THAT(msg, Catch::Contains("`parts`"));
  }
  SECTION("an unknown role") {
    CHECK_THAT(DecodeError(R"([{"role":"developer"}])"),
               Catch::Contains("`messages[0].role` is \"developer\"; expected \"system\""));
  }
  SECTION("a missing role") {
    CHECK_THAT(DecodeError(R"([{"parts":[]}])"), Catch::Contains("`messages[0]` has no `role`"));
  }
  SECTION("an unknown part type") {
    CHECK_THAT(DecodeError(R"([{"role":"user","parts":[{"type":"image"}]}])"),
               Catch::Contains("`messages[0].parts[0].type` is \"image\"; expected \"text\""));
  }
  SECTION("a part without type") {
    CHECK_THAT(DecodeError(R"([{"role":"user","parts":[{"text":"x"}]}])"),
               Catch::Contains("`messages[0].parts[0]` has no `type`"));
  }
  SECTION("a bad form") {
    CHECK_THAT(DecodeError(R"([{"role":"user","form":"blob","parts":[]}])"),
               Catch::Contains("`messages[0].form` is \"blob\""));
  }
  SECTION("summary that is not a boolean") {
    CHECK_THAT(DecodeError(R"([{"role":"user","summary":1}])"),
               Catch::Contains("`messages[0].summary` is a number; expected true or false"));
  }
  SECTION("an opaque item with both payload forms") {
    CHECK_THAT(
        DecodeError(
            R"([{"role":"user","parts":[{"type":"opaque","kind":"k","payload":{},"payload_text":"{}"}]}])"),
        Catch::Contains("exactly one of `payload`"));
  }
  SECTION("a bad link") {
    CHECK_THAT(
        DecodeError(
            R"([{"role":"user","parts":[{"type":"opaque","kind":"k","payload":{},"link":"both"}]}])"),
        Catch::Contains("`messages[0].parts[0].link` is \"both\""));
  }
  SECTION("a tool result item of the wrong type") {
    CHECK_THAT(DecodeError(R"([{"role":"tool","parts":[{"type":"tool_result","call_id":"c",)"
                           R"("content":[{"type":"tool_call"}]}]}])"),
               Catch::Contains("`messages[0].parts[0].content[0].type`"));
  }
  SECTION("a newer version") {
    const std::string msg = DecodeError(R"({"format":"recap","version":2,"messages":[]})");
    CHECK_THAT(msg, Catch::Contains("newer recap"));
  }
  SECTION("another format") {
    CHECK_THAT(DecodeError(R"({"format":"openai","messages":[]})"),
               Catch::Contains("`conversation.format` is \"openai\"; expected \"recap\""));
  }
  SECTION("malformed JSON") {
    CHECK_THAT(DecodeError(R"({"format":"recap",})"), Catch::Contains("byte offset 18"));
  }
  SECTION("a number instead of a document") {
    CHECK_THAT(DecodeError("42"), Catch::Contains("is a number; expected an array of messages"));
  }
}

TEST_CASE("native encoding reports a broken extra and invalid UTF-8 with their place", "[native]") {
  Message m = Message::UserText("x");
  m.parts.emplace_back(Text{"y", "not json"});
  auto r = recap::native::EncodeMessage(m);
  REQUIRE_FALSE(r.ok());
  CHECK_THAT(r.status().message(), Catch::Contains("the `extra` of `message.parts[1]`"));

  recap::Conversation conv;
  conv.messages.push_back(Message::UserText("fine"));
  conv.messages.push_back(Message::AssistantText("\xC0\xAF"));
  auto bad = recap::native::EncodeMessages(conv);
  REQUIRE_FALSE(bad.ok());
  CHECK_THAT(bad.status().message(), Catch::Contains("`messages[1]`"));
  CHECK_THAT(bad.status().message(), Catch::Contains("UTF-8"));
}

TEST_CASE("native keeps foreign messages intact between two foreign encodings", "[native]") {
  const std::string anthropic = R"([{"role":"assistant","id":"msg_1","content":[
    {"type":"thinking","thinking":"hmm","signature":"Sig=="},
    {"type":"tool_use","id":"t1","name":"f","input":{"b":1,"a":[true]}}]},
    {"role":"user","content":[{"type":"tool_result","tool_use_id":"t1","content":"ok","is_error":false}]}])";
  auto conv = recap::anthropic::DecodeMessages(anthropic);
  REQUIRE(conv.ok());
  auto stored = recap::native::EncodeMessages(*conv);
  REQUIRE(stored.ok());
  auto loaded = recap::native::DecodeMessages(*stored);
  REQUIRE(loaded.ok());
  auto again = recap::anthropic::EncodeMessages(*loaded);
  REQUIRE(again.ok());
  CHECK(recap::testing::JsonDifference(anthropic, *again).empty());
}
