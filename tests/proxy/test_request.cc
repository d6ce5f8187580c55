// R19.2: a request as `recap proxy` receives it, and the one it sends upstream instead
// (src/cli/proxy_request.h): the conversation is read out, the system prompt and tools are
// counted, and the upstream body is the client's byte for byte but for the messages' value
// (and a Responses previous_response_id, the upstream getting the whole input).
#include <optional>
#include <string>
#include <vector>

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include "json_skim.h"
#include "proxy_request.h"

namespace {

using recap_cli::ParseProxyRequest;
using recap_cli::ProxyRequest;
using recap_cli::UpstreamBody;
using Json = nlohmann::json;

ProxyRequest Parsed(const std::string& format, const std::string& body) {
  recap::Result<ProxyRequest> r = ParseProxyRequest(format, body);
  INFO(r.status().ToString());
  REQUIRE(r.ok());
  return std::move(*r);
}

}  // namespace

TEST_CASE("R19.2 an Anthropic request: the messages read out, the rest sent as it came",
          "[proxy]") {
  const std::string body =
      R"({"model":"claude-x","max_tokens":1024,"system":[{"type":"text","text":"You are a coder.","cache_control":{"type":"ephemeral"}}],)"
      R"("tools":[{"name":"Read","input_schema":{"type":"object"}}],)"
      R"( "messages": [ {"role":"user","content":"hi"}, {"role":"assistant","content":[{"type":"text","text":"hello"}]},{"role":"user","content":"read a.txt"} ] ,"stream":true, "temperature": 0.50})";
  const ProxyRequest r = Parsed("anthropic", body);
  REQUIRE(r.messages.size() == 3);
  CHECK(Json::parse(r.messages[1]) ==
        Json::parse(R"({"role":"assistant","content":[{"type":"text","text":"hello"}]})"));
  CHECK(r.stream);
  CHECK(r.model == "claude-x");
  CHECK(r.instructions_chars > 16);
  CHECK(r.tool_catalog_chars > 20);
  const std::string prepared =
      R"([{"role":"user","content":"# Checkpoint"},{"role":"user","content":"read a.txt"}])";
  const std::string up = UpstreamBody(r, prepared);
  // Everything before and after the messages' value, byte for byte (0.50 stays 0.50).
  CHECK(up.substr(0, r.messages_at) == body.substr(0, r.messages_at));
  const std::string tail = body.substr(r.messages_at + r.messages_length);
  CHECK(up.substr(up.size() - tail.size()) == tail);
  CHECK(up.find("\"temperature\": 0.50") != std::string::npos);
  const Json sent = Json::parse(up);
  CHECK(sent["messages"] == Json::parse(prepared));
  CHECK(sent["system"] == Json::parse(body)["system"]);
}

TEST_CASE("R19.2 a chat request keeps its leading system messages out of the session", "[proxy]") {
  const std::string body =
      R"({"model":"m","messages":[{"role":"system","content":"Be brief."},{"role":"developer","content":"Use tools."},{"role":"user","content":"hi"},{"role":"user","content":"a \"],[{\" b\\"}]})";
  const ProxyRequest r = Parsed("openai-chat", body);
  REQUIRE(r.leading.size() == 2);
  REQUIRE(r.messages.size() == 2);
  // Brackets and quotes inside a string are text, not structure.
  CHECK(Json::parse(r.messages[1])["content"] == "a \"],[{\" b\\");
  CHECK(r.instructions_chars > 0);
  CHECK(!r.stream);
  const Json sent = Json::parse(UpstreamBody(r, R"([{"role":"user","content":"hi"}])"));
  REQUIRE(sent["messages"].size() == 3);
  CHECK(sent["messages"][0]["content"] == "Be brief.");
  CHECK(sent["messages"][2]["content"] == "hi");
  // An empty prepared array still leaves the instructions.
  CHECK(Json::parse(UpstreamBody(r, "[]"))["messages"].size() == 2);
  CHECK(Json::parse(UpstreamBody(r, " [ ] "))["messages"].size() == 2);
}

TEST_CASE(
    "R19.2 a Responses request keeps its leading developer and system items out of the "
    "session",
    "[proxy]") {
  // As Codex sends them: its prompt as developer items before the conversation.
  const std::string body =
      R"({"model":"m","input":[{"type":"message","role":"developer","content":[{"type":"input_text","text":"You are a coding agent."}]},)"
      R"({"role":"system","content":"Sandbox: read-only."},)"
      R"({"type":"message","role":"user","content":[{"type":"input_text","text":"hi"}]}]})";
  const ProxyRequest r = Parsed("openai-responses", body);
  REQUIRE(r.leading.size() == 2);
  REQUIRE(r.messages.size() == 1);
  CHECK(r.instructions_chars > 0);
  const Json sent = Json::parse(UpstreamBody(r, R"([{"role":"user","content":"checkpoint"}])"));
  REQUIRE(sent["input"].size() == 3);
  CHECK(sent["input"][0]["role"] == "developer");
  CHECK(sent["input"][1]["role"] == "system");
  CHECK(sent["input"][2]["content"] == "checkpoint");
}

TEST_CASE("R19.2 a Responses request: input as a string or items, previous_response_id dropped",
          "[proxy]") {
  const ProxyRequest s =
      Parsed("openai-responses", R"({"model":"m","input":"say hi","instructions":"Be brief."})");
  REQUIRE(s.messages.size() == 1);
  CHECK(Json::parse(s.messages[0]) ==
        Json::parse(R"({"type":"message","role":"user","content":"say hi"})"));
  CHECK(s.instructions_chars > 0);
  const std::string items = R"([{"type":"message","role":"user","content":"hi"}])";
  for (const std::string body :
       {std::string(R"({"previous_response_id":"resp_1","model":"m","input":)") + items + "}",
        std::string(R"({"model":"m","previous_response_id" : "resp_1" ,"input":)") + items + "}",
        std::string(R"({"model":"m","input":)") + items + R"(,"previous_response_id":"resp_1"})"}) {
    INFO(body);
    const ProxyRequest r = Parsed("openai-responses", body);
    REQUIRE(r.previous_response_id == std::string("resp_1"));
    const std::string up = UpstreamBody(r, items);
    const Json sent = Json::parse(up);  // still valid JSON
    CHECK(!sent.contains("previous_response_id"));
    CHECK(sent["input"] == Json::parse(items));
    CHECK(sent["model"] == "m");
  }
}

TEST_CASE("R19.4 a request recap cannot read says which member and what it should be", "[proxy]") {
  CHECK(ParseProxyRequest("anthropic", "not json").status().message().find("not a JSON object") !=
        std::string::npos);
  const recap::Status missing = ParseProxyRequest("anthropic", R"({"model":"m"})").status();
  CHECK(missing.code() == recap::StatusCode::kInvalidArgument);
  CHECK(missing.message().find("`messages`") != std::string::npos);
  CHECK(ParseProxyRequest("openai-responses", R"({"input":{"a":1}})")
            .status()
            .message()
            .find("`input` is not an array") != std::string::npos);
  CHECK(ParseProxyRequest("openai-chat", R"({"messages":3})")
            .status()
            .message()
            .find("not an array") != std::string::npos);
}

TEST_CASE("R19.5 breakpoints are the request's: kept out of the session and put back where sent",
          "[proxy]") {
  const std::string cc = R"({"type":"ephemeral"})";
  CHECK(recap_cli::WithoutBreakpoints(R"({"role":"user","content":"x"})") ==
        R"({"role":"user","content":"x"})");
  CHECK(
      Json::parse(recap_cli::WithoutBreakpoints(
          R"({"role":"user","cache_control":{"type":"ephemeral"},"content":[{"type":"text","text":"x","cache_control":{"type":"ephemeral"}}]})")) ==
      Json::parse(R"({"role":"user","content":[{"type":"text","text":"x"}]})"));
  // The client's request: a breakpoint on a message that is still sent (its second block), one
  // on the message itself, one on a message a compaction retired.
  const std::string body =
      R"({"model":"m","messages":[)"
      R"({"role":"user","content":[{"type":"text","text":"old","cache_control":{"type":"ephemeral"}}]},)"
      R"({"role":"assistant","content":"kept","cache_control":{"type":"ephemeral"}},)"
      R"({"role":"user","content":[{"type":"text","text":"a"},{"type":"text","text":"b","cache_control":{"type":"ephemeral","ttl":"1h"}}]}]})";
  const ProxyRequest r = Parsed("anthropic", body);
  // What recap prepared (no breakpoints, other whitespace): a checkpoint, then the last two.
  const std::string prepared =
      R"([{"role":"user","content":"checkpoint"}, {"content":"kept","role":"assistant"},)"
      R"( {"role":"user","content":[{"type":"text","text":"a"},{"type":"text","text":"b"}]}])";
  std::string placed = prepared;
  recap_cli::PlaceBreakpoints(r, &placed);
  const Json sent = Json::parse(placed);
  REQUIRE(sent.size() == 3);
  CHECK(!sent[0].contains("cache_control"));
  CHECK(sent[0].dump().find("cache_control") == std::string::npos);
  CHECK(sent[1]["cache_control"] == Json::parse(cc));
  CHECK(!sent[2]["content"][0].contains("cache_control"));
  CHECK(sent[2]["content"][1]["cache_control"] ==
        Json::parse(R"({"type":"ephemeral","ttl":"1h"})"));
  // Nothing to place: the prepared text as it was, byte for byte.
  const ProxyRequest plain = Parsed("anthropic", R"({"messages":[{"role":"user","content":"a"}]})");
  std::string unchanged = prepared;
  recap_cli::PlaceBreakpoints(plain, &unchanged);
  CHECK(unchanged == prepared);
}

TEST_CASE("R19.2 the skim follows strings with escaped quotes and runs of backslashes", "[proxy]") {
  // Each element a string or object whose text holds quotes and backslashes in every order.
  const std::string array =
      R"(["plain", "a\"b", "c\\", "d\\\"e", "\\\\", {"k\"":"v\\","w":["]","\"]"]}, "end"])";
  const std::optional<std::vector<std::string_view>> elements = recap_cli::ArrayElements(array);
  REQUIRE(elements);
  const Json parsed = Json::parse(array);
  REQUIRE(elements->size() == parsed.size());
  for (std::size_t i = 0; i < parsed.size(); ++i) {
    CHECK(Json::parse((*elements)[i]) == parsed[i]);
  }
  // An unterminated string, or one whose last quote is escaped, is not followed.
  CHECK(!recap_cli::ArrayElements(R"(["abc)"));
  CHECK(!recap_cli::ArrayElements(R"(["abc\"])"));
  const auto members = recap_cli::ObjectMembers(R"({"a\"b": "x\\", "c": [1, "\""]})");
  REQUIRE(members);
  REQUIRE(members->size() == 2);
  CHECK((*members)[0].first == "a\"b");
  CHECK((*members)[1].second == R"([1, "\""])");
}
