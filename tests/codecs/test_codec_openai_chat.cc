// recap::openai_chat: the mapping rules of docs/message-model.md, one behaviour a test case,
// and the errors a person sees for bad input.
#include <string>

#include <catch2/catch.hpp>

#include "recap/codec.h"

#include "support/test_data.h"

namespace {

using recap::ContentForm;
using recap::Message;
using recap::Opaque;
using recap::Role;
using recap::Text;
using recap::ToolCall;
using recap::ToolResult;
using recap::testing::JsonDifference;

// Decodes and re-encodes `json` and requires the same JSON value back.
void RequireRoundTrip(const std::string& json, const recap::DecodeOptions& options = {}) {
  auto conv = recap::openai_chat::DecodeMessages(json, options);
  REQUIRE(conv.ok());
  auto encoded = recap::openai_chat::EncodeMessages(*conv);
  REQUIRE(encoded.ok());
  INFO(*encoded);
  REQUIRE(JsonDifference(json, *encoded).empty());
}

std::string DecodeError(const std::string& json, const recap::DecodeOptions& options = {}) {
  auto conv = recap::openai_chat::DecodeMessages(json, options);
  REQUIRE_FALSE(conv.ok());
  CHECK(conv.status().code() == recap::StatusCode::kInvalidArgument);
  return conv.status().message();
}

const char* const kSample = R"([
  {"role": "system", "content": "You are an airline agent."},
  {"role": "user", "content": "Book me a flight."},
  {"role": "assistant", "content": null, "tool_calls": [
    {"id": "call_1", "type": "function",
     "function": {"name": "search", "arguments": "{\"from\":\"JFK\",\"to\":\"SEA\"}"}},
    {"id": "call_2", "type": "function", "function": {"name": "user", "arguments": "{}"}}]},
  {"role": "tool", "tool_call_id": "call_1", "name": "search", "content": "[]"},
  {"role": "tool", "tool_call_id": "call_2", "name": "user", "content": "{\"id\": 7}"},
  {"role": "assistant", "content": "No flights found."}
])";

}  // namespace

TEST_CASE("§1 openai_chat decodes roles, texts, tool calls and tool results", "[openai_chat]") {
  auto conv = recap::openai_chat::DecodeMessages(kSample);
  REQUIRE(conv.ok());
  REQUIRE(conv->instructions.has_value());
  CHECK(conv->instructions->role == Role::kSystem);
  CHECK(recap::JoinedText(*conv->instructions) == "You are an airline agent.");
  REQUIRE(conv->messages.size() == 5);

  const Message& user = conv->messages[0];
  CHECK(user.role == Role::kUser);
  CHECK(user.form == ContentForm::kString);
  CHECK(user.id.empty());
  REQUIRE(user.parts.size() == 1);
  CHECK(std::get<Text>(user.parts[0]).text == "Book me a flight.");

  const Message& calls = conv->messages[1];
  CHECK(calls.role == Role::kAssistant);
  CHECK(calls.form == ContentForm::kNull);
  REQUIRE(calls.parts.size() == 2);
  const auto& c1 = std::get<ToolCall>(calls.parts[0]);
  CHECK(c1.id == "call_1");
  CHECK(c1.name == "search");
  CHECK(c1.arguments == R"({"from":"JFK","to":"SEA"})");
  CHECK(c1.extra == R"({"type":"function"})");

  const Message& result = conv->messages[2];
  CHECK(result.role == Role::kTool);
  CHECK(result.extra == R"({"name":"search"})");
  REQUIRE(result.parts.size() == 1);
  const auto& r = std::get<ToolResult>(result.parts[0]);
  CHECK(r.call_id == "call_1");
  CHECK(r.form == ContentForm::kString);
  CHECK_FALSE(r.is_error);
  REQUIRE(r.content.size() == 1);
  CHECK(std::get<Text>(r.content[0]).text == "[]");

  RequireRoundTrip(kSample);
}

TEST_CASE("§1 openai_chat keeps a leading system message apart only when asked", "[openai_chat]") {
  const std::string json = R"([{"role":"system","content":"rules"},{"role":"user","content":"hi"},
                               {"role":"system","content":"later note"}])";
  auto split = recap::openai_chat::DecodeMessages(json);
  REQUIRE(split.ok());
  REQUIRE(split->instructions.has_value());
  REQUIRE(split->messages.size() == 2);
  // A system message later in the conversation is an ordinary message (SPEC §1).
  CHECK(split->messages[1].role == Role::kSystem);

  recap::DecodeOptions keep;
  keep.split_instructions = false;
  auto whole = recap::openai_chat::DecodeMessages(json, keep);
  REQUIRE(whole.ok());
  CHECK_FALSE(whole->instructions.has_value());
  CHECK(whole->messages.size() == 3);

  RequireRoundTrip(json);
  RequireRoundTrip(json, keep);

  auto no_system = recap::openai_chat::DecodeMessages(R"([{"role":"user","content":"hi"}])");
  REQUIRE(no_system.ok());
  CHECK_FALSE(no_system->instructions.has_value());
}

TEST_CASE("openai_chat reads `developer` as a system message and writes it back", "[openai_chat]") {
  const std::string json = R"([{"role":"developer","content":"Be brief."},
                               {"role":"user","content":"hi"}])";
  auto conv = recap::openai_chat::DecodeMessages(json);
  REQUIRE(conv.ok());
  REQUIRE(conv->instructions.has_value());
  CHECK(conv->instructions->role == Role::kSystem);
  CHECK(conv->instructions->extra == R"({"role":"developer"})");
  auto encoded = recap::openai_chat::EncodeMessages(*conv);
  REQUIRE(encoded.ok());
  CHECK(*encoded ==
        R"([{"role":"developer","content":"Be brief."},{"role":"user","content":"hi"}])");
}

TEST_CASE("openai_chat records how content was written: string, list, null or absent",
          "[openai_chat]") {
  const std::string json = R"([
    {"role":"user","content":"plain"},
    {"role":"user","content":[{"type":"text","text":"one"},{"type":"text","text":"two"}]},
    {"role":"user","content":[{"type":"text","text":"a single part stays a list"}]},
    {"role":"assistant","content":null,"tool_calls":[
      {"id":"c","type":"function","function":{"name":"f","arguments":"{}"}}]},
    {"role":"assistant","tool_calls":[
      {"id":"d","type":"function","function":{"name":"f","arguments":"{}"}}]},
    {"role":"assistant","content":"","tool_calls":[
      {"id":"e","type":"function","function":{"name":"f","arguments":"{}"}}]},
    {"role":"tool","tool_call_id":"c","content":[{"type":"text","text":"listed"}]},
    {"role":"tool","tool_call_id":"d","content":null},
    {"role":"tool","tool_call_id":"e"}
  ])";
  recap::DecodeOptions keep;
  keep.split_instructions = false;
  auto conv = recap::openai_chat::DecodeMessages(json, keep);
  REQUIRE(conv.ok());
  const auto& m = conv->messages;
  CHECK(m[0].form == ContentForm::kString);
  CHECK(m[1].form == ContentForm::kList);
  CHECK(m[1].parts.size() == 2);
  CHECK(m[2].form == ContentForm::kList);
  CHECK(m[3].form == ContentForm::kNull);
  CHECK(m[4].form == ContentForm::kAbsent);
  CHECK(m[5].form == ContentForm::kString);
  CHECK(std::get<ToolResult>(m[6].parts[0]).form == ContentForm::kList);
  CHECK(std::get<ToolResult>(m[7].parts[0]).form == ContentForm::kNull);
  CHECK(std::get<ToolResult>(m[8].parts[0]).form == ContentForm::kAbsent);
  CHECK(std::get<ToolResult>(m[8].parts[0]).content.empty());
  RequireRoundTrip(json, keep);
}

TEST_CASE("openai_chat keeps unmodelled fields in extra, including nested ones", "[openai_chat]") {
  const std::string json = R"([
    {"role":"user","name":"alice","content":[
      {"type":"text","text":"look","cache_control":{"type":"ephemeral"}}]},
    {"role":"assistant","content":"ok","refusal":null,"reasoning_content":"thought",
     "tool_calls":[{"index":0,"id":"c1","type":"function",
                    "function":{"name":"f","arguments":"{\"x\":1}","strict":true}}]},
    {"role":"tool","tool_call_id":"c1","content":"done","name":"f"},
    {"role":"assistant","content":"empty calls","tool_calls":[]},
    {"role":"assistant","content":"null calls","tool_calls":null,"function_call":null}
  ])";
  auto conv = recap::openai_chat::DecodeMessages(json);
  REQUIRE(conv.ok());
  const auto& m = conv->messages;
  CHECK(m[0].extra == R"({"name":"alice"})");
  CHECK(std::get<Text>(m[0].parts[0]).extra == R"({"cache_control":{"type":"ephemeral"}})");
  CHECK(m[1].extra == R"({"refusal":null,"reasoning_content":"thought"})");
  const auto& call = std::get<ToolCall>(m[1].parts[1]);
  CHECK(call.extra == R"({"index":0,"type":"function","function":{"strict":true}})");
  CHECK(m[3].parts.size() == 1);
  CHECK(m[3].extra == R"({"tool_calls":[]})");
  RequireRoundTrip(json);
}

TEST_CASE("openai_chat keeps tool-call arguments as the exact text given", "[openai_chat]") {
  // Models do produce broken argument JSON; recap must hand it back as it was, spaces and all.
  const std::string json =
      R"([{"role":"assistant","content":null,"tool_calls":[{"id":"c","type":"function",)"
      R"("function":{"name":"f","arguments":"{ \"a\" :  1, \"u\": \"\u00e9\" "}}]}])";
  auto conv = recap::openai_chat::DecodeMessages(json);
  REQUIRE(conv.ok());
  CHECK(std::get<ToolCall>(conv->messages[0].parts[0]).arguments ==
        "{ \"a\" :  1, \"u\": \"\xC3\xA9\" ");
  RequireRoundTrip(json);
}

TEST_CASE("openai_chat carries media and refusal parts as opaque items", "[openai_chat]") {
  const std::string json = R"([
    {"role":"user","content":[
      {"type":"text","text":"what is this?"},
      {"type":"image_url","image_url":{"url":"data:image/png;base64,iVBORw0KGgo=","detail":"low"}},
      {"type":"input_audio","input_audio":{"data":"UklGRg==","format":"wav"}},
      {"type":"file","file":{"file_id":"file-abc"}}]},
    {"role":"assistant","content":[{"type":"refusal","refusal":"I can't help with that."}]}
  ])";
  auto conv = recap::openai_chat::DecodeMessages(json);
  REQUIRE(conv.ok());
  const auto& parts = conv->messages[0].parts;
  REQUIRE(parts.size() == 4);
  const auto& image = std::get<Opaque>(parts[1]);
  CHECK(image.kind == "image_url");
  CHECK(
      image.payload ==
      R"({"type":"image_url","image_url":{"url":"data:image/png;base64,iVBORw0KGgo=","detail":"low"}})");
  CHECK(image.link == recap::OpaqueLink::kNone);
  CHECK(std::get<Opaque>(parts[2]).kind == "input_audio");
  CHECK(std::get<Opaque>(parts[3]).kind == "file");
  CHECK(std::get<Opaque>(conv->messages[1].parts[0]).kind == "refusal");
  RequireRoundTrip(json);
}

TEST_CASE("openai_chat rejects an unknown part type unless keep_unknown_blocks is set",
          "[openai_chat]") {
  const std::string json =
      R"([{"role":"user","content":[{"type":"text","text":"hi"},{"type":"hologram","z":1}]}])";
  const std::string msg = DecodeError(json);
  CHECK_THAT(msg, Catch::Contains("`messages[0].content[1].type`"));
  CHECK_THAT(msg, Catch::Contains("\"hologram\""));
  CHECK_THAT(msg, Catch::Contains("keep_unknown_blocks"));

  recap::DecodeOptions keep;
  keep.keep_unknown_blocks = true;
  auto conv = recap::openai_chat::DecodeMessages(json, keep);
  REQUIRE(conv.ok());
  const auto& o = std::get<Opaque>(conv->messages[0].parts[1]);
  CHECK(o.kind == "hologram");
  CHECK(o.payload == R"({"type":"hologram","z":1})");
  RequireRoundTrip(json, keep);
}

TEST_CASE("R14.1 openai_chat refuses a tool call or result as a content part, even kept",
          "[openai_chat][R14.1]") {
  // Issue 35 (4): [{"type":"tool_use",…}] in an assistant message was kept opaque, and
  // `prepare --format anthropic` then sent it as a real tool_use that no result answers.
  recap::DecodeOptions keep;
  keep.keep_unknown_blocks = true;
  for (const std::string part :
       {R"({"type":"tool_use","id":"t1","name":"ls","input":{}})",
        R"({"type":"tool_result","tool_use_id":"t1","content":"a"})",
        R"({"type":"function_call","call_id":"c1","name":"ls","arguments":"{}"})",
        R"({"type":"function_call_output","call_id":"c1","output":"a"})",
        R"({"type":"server_tool_use","id":"s1","name":"web_search","input":{}})",
        R"({"type":"web_search_tool_result","tool_use_id":"s1","content":[]})",
        R"({"type":"custom_tool_call","call_id":"c2","name":"x","input":""})"}) {
    const std::string json = R"([{"role":"assistant","content":[)" + part + "]}]";
    INFO(json);
    auto conv = recap::openai_chat::DecodeMessages(json, keep);
    REQUIRE_FALSE(conv.ok());
    CHECK_THAT(conv.status().message(), Catch::Contains("`messages[0].content[0].type`"));
    CHECK_THAT(conv.status().message(), Catch::Contains("tool_calls"));
  }
}

TEST_CASE("openai_chat errors name the JSON path and what is accepted", "[openai_chat]") {
  SECTION("unknown role") {
    const std::string msg = DecodeError(R"([{"role":"user","content":"a"},{"role":"robot"}])");
    CHECK_THAT(msg, Catch::Contains("`messages[1].role`"));
    CHECK_THAT(msg, Catch::Contains("\"robot\""));
    CHECK_THAT(msg, Catch::Contains("\"assistant\""));
  }
  SECTION("the legacy function role") {
    const std::string msg = DecodeError(R"([{"role":"function","name":"f","content":"x"}])");
    CHECK_THAT(msg, Catch::Contains("`messages[0].role`"));
    CHECK_THAT(msg, Catch::Contains("legacy"));
    CHECK_THAT(msg, Catch::Contains("tool_call_id"));
  }
  SECTION("missing role") {
    CHECK_THAT(DecodeError(R"([{"content":"x"}])"), Catch::Contains("`messages[0]` has no `role`"));
  }
  SECTION("role of the wrong type") {
    CHECK_THAT(DecodeError(R"([{"role":1}])"),
               Catch::Contains("`messages[0].role` is a number; expected a string"));
  }
  SECTION("content of the wrong type") {
    const std::string msg = DecodeError(R"([{"role":"user","content":42}])");
    CHECK_THAT(msg, Catch::Contains("`messages[0].content` is a number"));
    CHECK_THAT(msg, Catch::Contains("a string, an array of content parts, or null"));
  }
  SECTION("a part without type") {
    CHECK_THAT(DecodeError(R"([{"role":"user","content":[{"text":"x"}]}])"),
               Catch::Contains("`messages[0].content[0]` has no `type`"));
  }
  SECTION("a part whose type is not a string") {
    CHECK_THAT(DecodeError(R"([{"role":"user","content":[{"type":null}]}])"),
               Catch::Contains("`messages[0].content[0].type` is null; expected a string"));
  }
  SECTION("a text part without text") {
    CHECK_THAT(DecodeError(R"([{"role":"user","content":[{"type":"text"}]}])"),
               Catch::Contains("`messages[0].content[0]` has no `text`"));
  }
  SECTION("a tool call without id") {
    const std::string msg = DecodeError(R"([{"role":"assistant","tool_calls":[{"type":"function",)"
                                        R"("function":{"name":"f","arguments":"{}"}}]}])");
    CHECK_THAT(msg, Catch::Contains("`messages[0].tool_calls[0]` has no `id`"));
  }
  SECTION("a tool call without function") {
    CHECK_THAT(DecodeError(R"([{"role":"assistant","tool_calls":[{"id":"c","type":"custom"}]}])"),
               Catch::Contains("`messages[0].tool_calls[0]` has no `function`"));
  }
  SECTION("arguments given as an object") {
    const std::string msg = DecodeError(
        R"([{"role":"assistant","tool_calls":[{"id":"c","function":{"name":"f","arguments":{}}}]}])");
    CHECK_THAT(msg, Catch::Contains("`messages[0].tool_calls[0].function.arguments` is an object"));
    CHECK_THAT(msg, Catch::Contains("JSON text"));
  }
  SECTION("tool_calls of the wrong type") {
    CHECK_THAT(DecodeError(R"([{"role":"assistant","tool_calls":"c"}])"),
               Catch::Contains("`messages[0].tool_calls` is a string; expected an array"));
  }
  SECTION("a tool message without tool_call_id") {
    const std::string msg = DecodeError(R"([{"role":"tool","content":"x"}])");
    CHECK_THAT(msg, Catch::Contains("`messages[0]` has no `tool_call_id`"));
  }
  SECTION("a message that is not an object") {
    CHECK_THAT(DecodeError(R"(["hello"])"),
               Catch::Contains("`messages[0]` is a string; expected a message object"));
  }
  SECTION("a request body instead of the messages array") {
    const std::string msg = DecodeError(R"({"model":"gpt-4o","messages":[]})");
    CHECK_THAT(msg, Catch::Contains("expected an array of messages"));
    CHECK_THAT(msg, Catch::Contains("`messages` member"));
  }
}

TEST_CASE("openai_chat rejects malformed JSON with the byte offset", "[openai_chat]") {
  const std::string msg = DecodeError(R"([{"role":"user","content":"a"},])");
  CHECK_THAT(msg, Catch::Contains("not valid JSON"));
  CHECK_THAT(msg, Catch::Contains("byte offset 31"));
  CHECK_THAT(msg, Catch::Contains("line 1, column 32"));

  const std::string cut = DecodeError(R"([{"role":"user","content":"a)");
  CHECK_THAT(cut, Catch::Contains("cut off"));

  const std::string empty = DecodeError("");
  CHECK_THAT(empty, Catch::Contains("byte offset 0"));
}

TEST_CASE("openai_chat rejects invalid UTF-8 instead of repairing it", "[openai_chat]") {
  // "caf" followed by a lone 0xE9 (Latin-1 é): not UTF-8.
  const std::string json = "[{\"role\":\"user\",\"content\":\"caf\xE9\"}]";
  const std::string msg = DecodeError(json);
  CHECK_THAT(msg, Catch::Contains("UTF-8"));
  CHECK_THAT(msg, Catch::Contains("byte offset"));
  // The message itself must stay printable: the bad byte is escaped.
  CHECK(msg.find('\xE9') == std::string::npos);

  const std::string surrogate = DecodeError(R"([{"role":"user","content":"\ud800"}])");
  CHECK_THAT(surrogate, Catch::Contains("surrogate"));
}

TEST_CASE("openai_chat rejects documents nested too deeply to handle safely", "[openai_chat]") {
  std::string json = "[{\"role\":\"user\",\"content\":[{\"type\":\"x\",\"deep\":";
  json += std::string(5000, '[') + std::string(5000, ']') + "}]}]";
  CHECK_THAT(DecodeError(json), Catch::Contains("nested deeper than"));
}

TEST_CASE("openai_chat DecodeMessage and EncodeMessage work on one message", "[openai_chat]") {
  const std::string json =
      R"({"role":"assistant","content":"Let me look.","tool_calls":[{"id":"c","type":"function",)"
      R"("function":{"name":"ls","arguments":"{}"}}]})";
  auto m = recap::openai_chat::DecodeMessage(json);
  REQUIRE(m.ok());
  CHECK(m->role == Role::kAssistant);
  CHECK(m->parts.size() == 2);
  auto encoded = recap::openai_chat::EncodeMessage(*m);
  REQUIRE(encoded.ok());
  CHECK(JsonDifference(json, *encoded).empty());

  auto bad = recap::openai_chat::DecodeMessage(R"({"role":"user","content":7})");
  REQUIRE_FALSE(bad.ok());
  CHECK_THAT(bad.status().message(), Catch::Contains("`message.content` is a number"));
}

TEST_CASE("openai_chat encodes messages built with the model's conveniences", "[openai_chat]") {
  recap::Conversation conv;
  conv.instructions = Message::SystemText("rules");
  conv.messages.push_back(Message::UserText("hi"));
  conv.messages.push_back(Message::AssistantCalls({ToolCall{"c1", "ls", R"({"path":"."})", {}}}));
  conv.messages.push_back(Message::ToolOutput("c1", "a.txt", true));
  conv.messages.push_back(Message::AssistantText("There is a.txt."));
  auto encoded = recap::openai_chat::EncodeMessages(conv);
  REQUIRE(encoded.ok());
  // An error result has no OpenAI equivalent beyond its text; the call gains "type".
  CHECK(*encoded ==
        R"([{"role":"system","content":"rules"},{"role":"user","content":"hi"},)"
        R"({"role":"assistant","content":null,"tool_calls":[{"id":"c1","type":"function",)"
        R"("function":{"name":"ls","arguments":"{\"path\":\".\"}"}}]},)"
        R"({"role":"tool","tool_call_id":"c1","content":"a.txt"},)"
        R"({"role":"assistant","content":"There is a.txt."}])");
}

TEST_CASE("openai_chat writes a message with several tool results as several tool messages",
          "[openai_chat]") {
  // The shape an Anthropic user turn has: results for parallel calls, then a text.
  Message m;
  m.role = Role::kUser;
  ToolResult a;
  a.call_id = "t1";
  a.content.emplace_back(Text{"one", {}});
  ToolResult b;
  b.call_id = "t2";
  b.content.emplace_back(Text{"two", {}});
  b.content.emplace_back(Text{"more", {}});
  m.parts.emplace_back(a);
  m.parts.emplace_back(b);
  m.parts.emplace_back(Text{"thanks", {}});
  recap::Conversation conv;
  conv.messages.push_back(m);
  auto encoded = recap::openai_chat::EncodeMessages(conv);
  REQUIRE(encoded.ok());
  CHECK(*encoded == R"([{"role":"tool","tool_call_id":"t1","content":"one"},)"
                    R"({"role":"tool","tool_call_id":"t2","content":[{"type":"text","text":"two"},)"
                    R"({"type":"text","text":"more"}]},{"role":"user","content":"thanks"}])");

  auto single = recap::openai_chat::EncodeMessage(m);
  REQUIRE_FALSE(single.ok());
  CHECK_THAT(single.status().message(), Catch::Contains("EncodeMessages"));
  CHECK_THAT(single.status().message(), Catch::Contains("3 OpenAI chat messages"));
}

TEST_CASE("openai_chat encoding reports what OpenAI chat cannot hold", "[openai_chat]") {
  SECTION("a tool call in a user message") {
    Message m = Message::UserText("x");
    m.parts.emplace_back(ToolCall{"c", "f", "{}", {}});
    auto r = recap::openai_chat::EncodeMessage(m);
    REQUIRE_FALSE(r.ok());
    CHECK_THAT(r.status().message(), Catch::Contains("`message.parts[1]` is a tool call"));
  }
  SECTION("a tool result in an assistant message") {
    Message m = Message::AssistantText("x");
    m.parts.emplace_back(ToolResult{"c", {}, false, ContentForm::kDefault, {}});
    auto r = recap::openai_chat::EncodeMessage(m);
    REQUIRE_FALSE(r.ok());
    CHECK_THAT(r.status().message(), Catch::Contains("`message.parts[1]` is a tool result"));
  }
  SECTION("a tool message without a result") {
    Message m;
    m.role = Role::kTool;
    m.parts.emplace_back(Text{"x", {}});
    auto r = recap::openai_chat::EncodeMessage(m);
    REQUIRE_FALSE(r.ok());
    CHECK_THAT(r.status().message(), Catch::Contains("without a tool result"));
  }
  SECTION("invalid UTF-8 in a text") {
    recap::Conversation conv;
    conv.messages.push_back(Message::UserText("ok"));
    conv.messages.push_back(Message::UserText("bad \xFF byte"));
    auto r = recap::openai_chat::EncodeMessages(conv);
    REQUIRE_FALSE(r.ok());
    CHECK(r.status().code() == recap::StatusCode::kInvalidArgument);
    CHECK_THAT(r.status().message(), Catch::Contains("`messages[1]`"));
    CHECK_THAT(r.status().message(), Catch::Contains("UTF-8"));
  }
  SECTION("an extra that is not a JSON object") {
    Message m = Message::UserText("x");
    m.extra = "[1]";
    auto r = recap::openai_chat::EncodeMessage(m);
    REQUIRE_FALSE(r.ok());
    CHECK_THAT(r.status().message(), Catch::Contains("the `extra` of `message`"));
  }
  SECTION("an opaque payload that is not JSON") {
    Message m = Message::UserText("x");
    m.parts.emplace_back(Opaque{"image_url", "{not json", recap::OpaqueLink::kNone, {}});
    auto r = recap::openai_chat::EncodeMessage(m);
    REQUIRE_FALSE(r.ok());
    CHECK_THAT(r.status().message(),
               Catch::Contains("payload of the opaque item at `message.parts[1]`"));
  }
}

TEST_CASE("openai_chat decodes and encodes a 100 MB message", "[openai_chat][large]") {
  // One huge tool output with multi-byte characters and characters JSON must escape.
  std::string output;
  const std::string chunk = "line \"quoted\" caf\xC3\xA9 \xE2\x9C\x93\ttab\n";
  output.reserve(100u << 20);
  while (output.size() + chunk.size() <= (100u << 20)) output += chunk;
  Message m = Message::ToolOutput("call_big", output);
  recap::Conversation conv;
  conv.messages.push_back(std::move(m));

  auto encoded = recap::openai_chat::EncodeMessages(conv);
  REQUIRE(encoded.ok());
  CHECK(encoded->size() > output.size());
  auto decoded = recap::openai_chat::DecodeMessages(*encoded);
  REQUIRE(decoded.ok());
  REQUIRE(decoded->messages.size() == 1);
  const auto& r = std::get<ToolResult>(decoded->messages[0].parts[0]);
  REQUIRE(r.content.size() == 1);
  CHECK(std::get<Text>(r.content[0]).text == output);
}
