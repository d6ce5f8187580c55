// recap::anthropic: the mapping rules of docs/message-model.md, one behaviour a test case,
// and the errors a person sees for bad input.
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
using recap::testing::JsonDifference;

void RequireRoundTrip(const std::string& json, const recap::DecodeOptions& options = {}) {
  auto conv = recap::anthropic::DecodeMessages(json, options);
  REQUIRE(conv.ok());
  auto encoded = recap::anthropic::EncodeMessages(*conv);
  REQUIRE(encoded.ok());
  INFO(*encoded);
  REQUIRE(JsonDifference(json, *encoded).empty());
}

std::string DecodeError(const std::string& json, const recap::DecodeOptions& options = {}) {
  auto conv = recap::anthropic::DecodeMessages(json, options);
  REQUIRE_FALSE(conv.ok());
  CHECK(conv.status().code() == recap::StatusCode::kInvalidArgument);
  return conv.status().message();
}

// A response the way the API returns it and a client stores it, with thinking.
const char* const kSample = R"([
  {"role":"user","content":"What's in /tmp?"},
  {"id":"msg_01ABC","type":"message","role":"assistant","model":"claude-sonnet-4-5",
   "content":[
     {"type":"thinking","thinking":"I should list it.","signature":"EqQBCkYIBxgCKkB+/=="},
     {"type":"redacted_thinking","data":"EmwKAhgBEgy3va3pzix/LafPsn4a"},
     {"type":"text","text":"Listing."},
     {"type":"tool_use","id":"toolu_01","name":"bash","input":{"command":"ls /tmp","timeout":30}}],
   "stop_reason":"tool_use","stop_sequence":null,
   "usage":{"input_tokens":10,"output_tokens":20}},
  {"role":"user","content":[
     {"type":"tool_result","tool_use_id":"toolu_01","content":"a.txt\nb.txt"}]},
  {"role":"assistant","content":[{"type":"text","text":"Two files."}]}
])";

}  // namespace

TEST_CASE("§1 anthropic decodes text, thinking, tool_use and tool_result blocks", "[anthropic]") {
  auto conv = recap::anthropic::DecodeMessages(kSample);
  REQUIRE(conv.ok());
  CHECK_FALSE(conv->instructions.has_value());
  REQUIRE(conv->messages.size() == 4);

  const Message& q = conv->messages[0];
  CHECK(q.role == Role::kUser);
  CHECK(q.form == ContentForm::kString);
  CHECK(std::get<Text>(q.parts[0]).text == "What's in /tmp?");

  const Message& a = conv->messages[1];
  CHECK(a.role == Role::kAssistant);
  CHECK(a.form == ContentForm::kList);
  // The API's message id is a foreign field: recap's own id is assigned by the Transcript.
  CHECK(a.id.empty());
  CHECK(
      a.extra ==
      R"({"id":"msg_01ABC","type":"message","model":"claude-sonnet-4-5","stop_reason":"tool_use",)"
      R"("stop_sequence":null,"usage":{"input_tokens":10,"output_tokens":20}})");
  REQUIRE(a.parts.size() == 4);
  const auto& thinking = std::get<Opaque>(a.parts[0]);
  CHECK(thinking.kind == "thinking");
  CHECK(thinking.payload ==
        R"({"type":"thinking","thinking":"I should list it.","signature":"EqQBCkYIBxgCKkB+/=="})");
  CHECK(thinking.link == OpaqueLink::kNone);
  const auto& redacted = std::get<Opaque>(a.parts[1]);
  CHECK(redacted.kind == "redacted_thinking");
  CHECK(redacted.payload ==
        R"({"type":"redacted_thinking","data":"EmwKAhgBEgy3va3pzix/LafPsn4a"})");
  const auto& call = std::get<ToolCall>(a.parts[3]);
  CHECK(call.id == "toolu_01");
  CHECK(call.name == "bash");
  CHECK(call.arguments == R"({"command":"ls /tmp","timeout":30})");
  CHECK(call.extra.empty());

  const Message& results = conv->messages[2];
  CHECK(results.role == Role::kUser);
  CHECK_FALSE(recap::IsTurnStart(results));
  const auto& r = std::get<ToolResult>(results.parts[0]);
  CHECK(r.call_id == "toolu_01");
  CHECK(r.form == ContentForm::kString);
  CHECK_FALSE(r.is_error);
  CHECK(r.extra.empty());
  CHECK(std::get<Text>(r.content[0]).text == "a.txt\nb.txt");

  RequireRoundTrip(kSample);
}

TEST_CASE("anthropic tool_use input becomes ordered compact arguments with UTF-8 kept",
          "[anthropic]") {
  const std::string json =
      R"([{"role":"assistant","content":[{"type":"tool_use","id":"t","name":"write",)"
      R"("input":{ "z": [1, 2.5, {"b": true, "a": null}], "path": "caf\u00e9/\u2713.txt", "e": "" },)"
      R"("caller":{"type":"direct"}}]}])";
  auto conv = recap::anthropic::DecodeMessages(json);
  REQUIRE(conv.ok());
  const auto& call = std::get<ToolCall>(conv->messages[0].parts[0]);
  CHECK(call.arguments ==
        "{\"z\":[1,2.5,{\"b\":true,\"a\":null}],\"path\":\"caf\xC3\xA9/"
        "\xE2\x9C\x93.txt\",\"e\":\"\"}");
  CHECK(call.extra == R"({"caller":{"type":"direct"}})");
  RequireRoundTrip(json);
}

TEST_CASE("anthropic tool_result content: string, list of blocks, or absent", "[anthropic]") {
  const std::string json = R"([{"role":"user","content":[
    {"type":"tool_result","tool_use_id":"a","content":"plain"},
    {"type":"tool_result","tool_use_id":"b","content":[
      {"type":"text","text":"see image","citations":null},
      {"type":"image","source":{"type":"base64","media_type":"image/png","data":"iVBORw0KGgo="}},
      {"type":"tool_reference","tool_name":"Grep"}]},
    {"type":"tool_result","tool_use_id":"c"},
    {"type":"tool_result","tool_use_id":"d","content":[],"cache_control":{"type":"ephemeral"}}
  ]}])";
  auto conv = recap::anthropic::DecodeMessages(json);
  REQUIRE(conv.ok());
  const auto& parts = conv->messages[0].parts;
  REQUIRE(parts.size() == 4);
  CHECK(std::get<ToolResult>(parts[0]).form == ContentForm::kString);
  const auto& listed = std::get<ToolResult>(parts[1]);
  CHECK(listed.form == ContentForm::kList);
  REQUIRE(listed.content.size() == 3);
  CHECK(std::get<Text>(listed.content[0]).text == "see image");
  CHECK(std::get<Text>(listed.content[0]).extra == R"({"citations":null})");
  CHECK(std::get<Opaque>(listed.content[1]).kind == "image");
  CHECK(std::get<Opaque>(listed.content[2]).kind == "tool_reference");
  CHECK(std::get<Opaque>(listed.content[2]).payload ==
        R"({"type":"tool_reference","tool_name":"Grep"})");
  const auto& absent = std::get<ToolResult>(parts[2]);
  CHECK(absent.form == ContentForm::kAbsent);
  CHECK(absent.content.empty());
  const auto& empty = std::get<ToolResult>(parts[3]);
  CHECK(empty.form == ContentForm::kList);
  CHECK(empty.extra == R"({"cache_control":{"type":"ephemeral"}})");
  RequireRoundTrip(json);
}

TEST_CASE("anthropic is_error: true is modelled, an explicit false is kept as written",
          "[anthropic]") {
  const std::string json = R"([{"role":"user","content":[
    {"type":"tool_result","tool_use_id":"a","content":"boom","is_error":true},
    {"type":"tool_result","tool_use_id":"b","content":"fine","is_error":false},
    {"type":"tool_result","tool_use_id":"c","content":"fine"}]}])";
  auto conv = recap::anthropic::DecodeMessages(json);
  REQUIRE(conv.ok());
  const auto& parts = conv->messages[0].parts;
  CHECK(std::get<ToolResult>(parts[0]).is_error);
  CHECK(std::get<ToolResult>(parts[0]).extra.empty());
  CHECK_FALSE(std::get<ToolResult>(parts[1]).is_error);
  CHECK(std::get<ToolResult>(parts[1]).extra == R"({"is_error":false})");
  CHECK_FALSE(std::get<ToolResult>(parts[2]).is_error);
  CHECK(std::get<ToolResult>(parts[2]).extra.empty());
  RequireRoundTrip(json);
}

TEST_CASE("anthropic server tool blocks are opaque items linked as call and result",
          "[anthropic]") {
  const std::string json = R"([{"role":"assistant","content":[
    {"type":"server_tool_use","id":"srvtoolu_1","name":"web_search","input":{"query":"recap"}},
    {"type":"web_search_tool_result","tool_use_id":"srvtoolu_1","content":[
      {"type":"web_search_result","url":"https://example.com","title":"Ex","encrypted_content":"Eo8B"}]},
    {"type":"mcp_tool_use","id":"mcptoolu_1","name":"echo","server_name":"s","input":{}},
    {"type":"mcp_tool_result","tool_use_id":"mcptoolu_1","is_error":false,
     "content":[{"type":"text","text":"hi"}]},
    {"type":"code_execution_tool_result","tool_use_id":"srvtoolu_2",
     "content":{"type":"code_execution_result","stdout":"1"}},
    {"type":"container_upload","file_id":"file_1"},
    {"type":"text","text":"Found it.","citations":[{"type":"web_search_result_location",
     "url":"https://example.com","cited_text":"x","encrypted_index":"Eo"}]}
  ]}])";
  auto conv = recap::anthropic::DecodeMessages(json);
  REQUIRE(conv.ok());
  const auto& parts = conv->messages[0].parts;
  REQUIRE(parts.size() == 7);
  const auto& use = std::get<Opaque>(parts[0]);
  CHECK(use.kind == "server_tool_use");
  CHECK(use.link == OpaqueLink::kCall);
  CHECK(use.link_id == "srvtoolu_1");
  const auto& result = std::get<Opaque>(parts[1]);
  CHECK(result.kind == "web_search_tool_result");
  CHECK(result.link == OpaqueLink::kResult);
  CHECK(result.link_id == "srvtoolu_1");
  CHECK(std::get<Opaque>(parts[2]).link == OpaqueLink::kCall);
  CHECK(std::get<Opaque>(parts[3]).link == OpaqueLink::kResult);
  CHECK(std::get<Opaque>(parts[4]).link_id == "srvtoolu_2");
  CHECK(std::get<Opaque>(parts[5]).link == OpaqueLink::kNone);
  CHECK(std::get<Text>(parts[6]).extra.find("citations") != std::string::npos);
  CHECK(recap::HasToolCalls(conv->messages[0]));
  RequireRoundTrip(json);
}

TEST_CASE("anthropic images and documents in user messages are opaque and byte-exact",
          "[anthropic]") {
  const std::string json = R"([{"role":"user","content":[
    {"type":"image","source":{"type":"url","url":"https://example.com/a.png"}},
    {"type":"document","source":{"type":"text","media_type":"text/plain","data":"\u00e9t\u00e9"},
     "title":"T","citations":{"enabled":true}},
    {"type":"search_result","source":"https://x","title":"X",
     "content":[{"type":"text","text":"y"}]},
    {"type":"text","text":"Compare these."}]}])";
  auto conv = recap::anthropic::DecodeMessages(json);
  REQUIRE(conv.ok());
  const auto& parts = conv->messages[0].parts;
  CHECK(std::get<Opaque>(parts[0]).kind == "image");
  CHECK(std::get<Opaque>(parts[1]).payload ==
        "{\"type\":\"document\",\"source\":{\"type\":\"text\",\"media_type\":\"text/plain\","
        "\"data\":\"\xC3\xA9t\xC3\xA9\"},\"title\":\"T\",\"citations\":{\"enabled\":true}}");
  CHECK(std::get<Opaque>(parts[2]).kind == "search_result");
  // An image is something a person sent: the message starts a turn.
  CHECK(recap::IsTurnStart(conv->messages[0]));
  RequireRoundTrip(json);

  auto encoded = recap::anthropic::EncodeMessages(*conv);
  REQUIRE(encoded.ok());
  auto again = recap::anthropic::DecodeMessages(*encoded);
  REQUIRE(again.ok());
  for (std::size_t i = 0; i < 3; ++i) {
    CHECK(std::get<Opaque>(again->messages[0].parts[i]).payload ==
          std::get<Opaque>(parts[i]).payload);
  }
}

TEST_CASE("anthropic rejects an unknown block type unless keep_unknown_blocks is set",
          "[anthropic]") {
  const std::string json =
      R"([{"role":"assistant","content":[{"type":"text","text":"a"},{"type":"telepathy","x":[1]}]}])";
  const std::string msg = DecodeError(json);
  CHECK_THAT(msg, Catch::Contains("`messages[0].content[1].type`"));
  CHECK_THAT(msg, Catch::Contains("\"telepathy\""));
  CHECK_THAT(msg, Catch::Contains("keep_unknown_blocks"));

  recap::DecodeOptions keep;
  keep.keep_unknown_blocks = true;
  auto conv = recap::anthropic::DecodeMessages(json, keep);
  REQUIRE(conv.ok());
  const auto& o = std::get<Opaque>(conv->messages[0].parts[1]);
  CHECK(o.kind == "telepathy");
  CHECK(o.payload == R"({"type":"telepathy","x":[1]})");
  RequireRoundTrip(json, keep);
}

TEST_CASE(
    "anthropic system messages inside messages (the mid-conversation system beta) "
    "round-trip",
    "[anthropic]") {
  // Claude Code 2.1 sends `{"role": "system"}` messages after the first user message, with the
  // beta `mid-conversation-system-2026-04-07`: recap keeps them as system messages and writes
  // them back as they came.
  const std::string json =
      R"([{"role":"user","content":"hi"},{"role":"system","content":"Agent types: a, b"},)"
      R"({"role":"assistant","content":[{"type":"text","text":"ok"}]},)"
      R"({"role":"system","content":[{"type":"text","text":"more","cache_control":{"type":"ephemeral"}}]}])";
  auto conv = recap::anthropic::DecodeMessages(json);
  REQUIRE(conv.ok());
  REQUIRE(conv->messages.size() == 4);
  CHECK(conv->messages[1].role == Role::kSystem);
  CHECK(conv->messages[3].role == Role::kSystem);
  CHECK(!conv->instructions);
  RequireRoundTrip(json, {});
}

TEST_CASE("anthropic errors name the JSON path and what is accepted", "[anthropic]") {
  recap::DecodeOptions keep;
  keep.keep_unknown_blocks = true;
  SECTION("an unknown role") {
    const std::string msg = DecodeError(R"([{"role":"user","content":"a"},{"role":"tool"}])");
    CHECK_THAT(msg, Catch::Contains("`messages[1].role` is \"tool\""));
    CHECK_THAT(msg, Catch::Contains("\"user\", \"assistant\" or \"system\""));
  }
  SECTION("a block without type, even with keep_unknown_blocks") {
    const std::string msg = DecodeError(R"([{"role":"user","content":[{"text":"x"}]}])", keep);
    CHECK_THAT(msg, Catch::Contains("`messages[0].content[0]` has no `type`"));
  }
  SECTION("a block whose type is not a string") {
    CHECK_THAT(DecodeError(R"([{"role":"user","content":[{"type":5}]}])", keep),
               Catch::Contains("`messages[0].content[0].type` is a number; expected a string"));
  }
  SECTION("content of the wrong type") {
    CHECK_THAT(DecodeError(R"([{"role":"user","content":3.5}])"),
               Catch::Contains("`messages[0].content` is a number; expected a string or an "
                               "array of content blocks"));
  }
  SECTION("a tool_use without id") {
    CHECK_THAT(
        DecodeError(
            R"([{"role":"assistant","content":[{"type":"tool_use","name":"f","input":{}}]}])"),
        Catch::Contains("`messages[0].content[0]` has no `id`"));
  }
  SECTION("a tool_use without input") {
    CHECK_THAT(DecodeError(
                   R"([{"role":"assistant","content":[{"type":"tool_use","id":"t","name":"f"}]}])"),
               Catch::Contains("`messages[0].content[0]` has no `input`"));
  }
  SECTION("a tool_result without tool_use_id") {
    CHECK_THAT(DecodeError(R"([{"role":"user","content":[{"type":"tool_result","content":"x"}]}])"),
               Catch::Contains("`messages[0].content[0]` has no `tool_use_id`"));
  }
  SECTION("is_error that is not a boolean") {
    CHECK_THAT(
        DecodeError(
            R"([{"role":"user","content":[{"type":"tool_result","tool_use_id":"t","is_error":"yes"}]}])"),
        Catch::Contains("`messages[0].content[0].is_error` is a string; expected true or false"));
  }
  SECTION("tool_result content of the wrong type") {
    CHECK_THAT(
        DecodeError(
            R"([{"role":"user","content":[{"type":"tool_result","tool_use_id":"t","content":1}]}])"),
        Catch::Contains("`messages[0].content[0].content` is a number"));
  }
  SECTION("a tool_result content block without type") {
    CHECK_THAT(
        DecodeError(
            R"([{"role":"user","content":[{"type":"tool_result","tool_use_id":"t","content":[{}]}]}])"),
        Catch::Contains("`messages[0].content[0].content[0]` has no `type`"));
  }
  SECTION("malformed JSON") {
    const std::string msg = DecodeError("[{\"role\":\"user\",\n \"content\": tru}]");
    CHECK_THAT(msg, Catch::Contains("not valid JSON"));
    CHECK_THAT(msg, Catch::Contains("byte offset 32"));
    CHECK_THAT(msg, Catch::Contains("line 2"));
  }
  SECTION("invalid UTF-8") {
    const std::string msg = DecodeError("[{\"role\":\"user\",\"content\":\"\xC3\x28\"}]");
    CHECK_THAT(msg, Catch::Contains("UTF-8"));
    CHECK_THAT(msg, Catch::Contains("byte offset"));
  }
}

TEST_CASE("anthropic encoding: tool messages become user turns, system has no place",
          "[anthropic]") {
  SECTION("a recap tool message is a user message of tool_result blocks") {
    recap::Conversation conv;
    conv.messages.push_back(Message::UserText("hi"));
    conv.messages.push_back(Message::AssistantCalls({ToolCall{"t1", "ls", "{}", {}}}, "Looking."));
    conv.messages.push_back(Message::ToolOutput("t1", "no such dir", true));
    auto encoded = recap::anthropic::EncodeMessages(conv);
    REQUIRE(encoded.ok());
    CHECK(*encoded == R"([{"role":"user","content":[{"type":"text","text":"hi"}]},)"
                      R"({"role":"assistant","content":[{"type":"text","text":"Looking."},)"
                      R"({"type":"tool_use","id":"t1","name":"ls","input":{}}]},)"
                      R"({"role":"user","content":[{"type":"tool_result","tool_use_id":"t1",)"
                      R"("content":"no such dir","is_error":true}]}])");
  }
  SECTION("instructions are refused: the system prompt goes outside messages") {
    recap::Conversation conv;
    conv.instructions = Message::SystemText("rules");
    auto encoded = recap::anthropic::EncodeMessages(conv);
    REQUIRE_FALSE(encoded.ok());
    CHECK(encoded.status().code() == recap::StatusCode::kInvalidArgument);
    CHECK_THAT(encoded.status().message(), Catch::Contains("`system` parameter"));
  }
  SECTION("a system message of another format is refused with its position") {
    recap::Conversation conv;
    conv.messages.push_back(Message::UserText("hi"));
    conv.messages.push_back(Message::SystemText("note"));
    auto encoded = recap::anthropic::EncodeMessages(conv);
    REQUIRE_FALSE(encoded.ok());
    CHECK_THAT(encoded.status().message(), Catch::Contains("`messages[1]` is a system message"));
  }
  SECTION("a tool call outside an assistant message, a result inside one") {
    Message user = Message::UserText("x");
    user.parts.emplace_back(ToolCall{"t", "f", "{}", {}});
    auto a = recap::anthropic::EncodeMessage(user);
    REQUIRE_FALSE(a.ok());
    CHECK_THAT(a.status().message(),
               Catch::Contains("`message.parts[1]` is a tool call in a user"));
    Message assistant = Message::AssistantText("x");
    assistant.parts.emplace_back(ToolResult{"t", {}, false, ContentForm::kDefault, {}});
    auto b = recap::anthropic::EncodeMessage(assistant);
    REQUIRE_FALSE(b.ok());
    CHECK_THAT(b.status().message(), Catch::Contains("`message.parts[1]` is a tool result"));
  }
  SECTION("arguments that are not JSON cannot become `input`") {
    Message m = Message::AssistantCalls({ToolCall{"t1", "ls", "{\"path\": ", {}}});
    auto encoded = recap::anthropic::EncodeMessage(m);
    REQUIRE_FALSE(encoded.ok());
    CHECK(encoded.status().code() == recap::StatusCode::kInvalidArgument);
    CHECK_THAT(encoded.status().message(), Catch::Contains("`message.parts[0]`"));
    CHECK_THAT(encoded.status().message(), Catch::Contains("\"ls\""));
    CHECK_THAT(encoded.status().message(), Catch::Contains("not valid JSON"));
  }
}

TEST_CASE("anthropic DecodeMessage and EncodeMessage work on one message", "[anthropic]") {
  const std::string json = R"({"role":"assistant","content":[{"type":"text","text":"Hi",)"
                           R"("cache_control":{"type":"ephemeral"}}],"id":"msg_1"})";
  auto m = recap::anthropic::DecodeMessage(json);
  REQUIRE(m.ok());
  CHECK(m->extra == R"({"id":"msg_1"})");
  CHECK(std::get<Text>(m->parts[0]).extra == R"({"cache_control":{"type":"ephemeral"}})");
  auto encoded = recap::anthropic::EncodeMessage(*m);
  REQUIRE(encoded.ok());
  CHECK(JsonDifference(json, *encoded).empty());

  auto bad = recap::anthropic::DecodeMessage(R"([])");
  REQUIRE_FALSE(bad.ok());
  CHECK_THAT(bad.status().message(), Catch::Contains("`message` is an array"));
}

TEST_CASE("anthropic content null or absent is written back the same way", "[anthropic]") {
  RequireRoundTrip(R"([{"role":"assistant","content":null},{"role":"user"}])");
  RequireRoundTrip(R"([{"role":"user","content":""},{"role":"assistant","content":[]}])");
}
