// R19.2: the reply the proxy appends, put together from the upstream's answer (src/proxy/
// reply.h) — streamed event by event in each format, or whole — is the message the client
// sends back as the assistant's turn (the same recap message, the same fingerprint); an answer
// cut off anywhere, or with an event the format does not send, is never complete.
#include <string>
#include <utility>
#include <vector>

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include "recap/codec.h"

#include "reply.h"

namespace {

using recap_proxy::ReplyAssembler;
using Json = nlohmann::json;
using Events = std::vector<std::pair<std::string, std::string>>;

// Anthropic: a text block, then a tool_use block whose input comes in three pieces.
Events AnthropicStream() {
  return {
      {"message_start",
       R"({"type":"message_start","message":{"id":"msg_1","type":"message","role":"assistant","content":[],"model":"m","usage":{"input_tokens":5}}})"},
      {"content_block_start",
       R"({"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}})"},
      {"ping", R"({"type":"ping"})"},
      {"content_block_delta",
       R"({"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"Let me "}})"},
      {"content_block_delta",
       R"({"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"read it."}})"},
      {"content_block_stop", R"({"type":"content_block_stop","index":0})"},
      {"content_block_start",
       R"({"type":"content_block_start","index":1,"content_block":{"type":"tool_use","id":"toolu_1","name":"Read","input":{}}})"},
      {"content_block_delta",
       R"({"type":"content_block_delta","index":1,"delta":{"type":"input_json_delta","partial_json":"{\"file_"}})"},
      {"content_block_delta",
       R"({"type":"content_block_delta","index":1,"delta":{"type":"input_json_delta","partial_json":"path\": \"a.t"}})"},
      {"content_block_delta",
       R"({"type":"content_block_delta","index":1,"delta":{"type":"input_json_delta","partial_json":"xt\"}"}})"},
      {"content_block_stop", R"({"type":"content_block_stop","index":1})"},
      {"message_delta",
       R"({"type":"message_delta","delta":{"stop_reason":"tool_use"},"usage":{"output_tokens":9}})"},
      {"message_stop", R"({"type":"message_stop"})"},
  };
}
// What the client sends back as that turn.
const char* const kAnthropicBack =
    R"({"role":"assistant","content":[{"type":"text","text":"Let me read it."},{"type":"tool_use","id":"toolu_1","name":"Read","input":{"file_path":"a.txt"}}]})";

Events ChatStream() {
  return {
      {"",
       R"({"id":"c1","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"role":"assistant","content":""}}]})"},
      {"", R"({"id":"c1","choices":[{"index":0,"delta":{"content":"Reading "}}]})"},
      {"", R"({"id":"c1","choices":[{"index":0,"delta":{"content":"now."}}]})"},
      {"",
       R"({"id":"c1","choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"call_1","type":"function","function":{"name":"read","arguments":""}}]}}]})"},
      {"",
       R"({"id":"c1","choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"{\"path\":"}}]}}]})"},
      {"",
       R"({"id":"c1","choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"\"a.txt\"}"}}]}}]})"},
      {"", R"({"id":"c1","choices":[{"index":0,"delta":{},"finish_reason":"tool_calls"}]})"},
      {"", R"({"id":"c1","choices":[],"usage":{"prompt_tokens":5,"completion_tokens":7}})"},
      {"", "[DONE]"},
  };
}
const char* const kChatBack =
    R"({"role":"assistant","content":"Reading now.","tool_calls":[{"id":"call_1","type":"function","function":{"name":"read","arguments":"{\"path\":\"a.txt\"}"}}]})";

const char* const kResponsesOutput =
    R"([{"type":"reasoning","id":"rs_1","summary":[],"encrypted_content":"gAAAA"},{"type":"function_call","id":"fc_1","call_id":"call_9","name":"shell","arguments":"{\"cmd\":\"ls\"}","status":"completed"}])";

Events ResponsesStream() {
  return {
      {"response.created",
       R"({"type":"response.created","response":{"id":"r1","status":"in_progress","output":[]}})"},
      {"response.output_item.added",
       R"({"type":"response.output_item.added","output_index":0,"item":{"type":"reasoning","id":"rs_1"}})"},
      {"response.function_call_arguments.delta",
       R"({"type":"response.function_call_arguments.delta","output_index":1,"delta":"{\"cmd\""})"},
      {"response.completed",
       std::string(
           R"({"type":"response.completed","response":{"id":"r1","status":"completed","output":)") +
           kResponsesOutput + "}}"},
  };
}

std::vector<recap::Message> Assembled(const std::string& format, const Events& events) {
  ReplyAssembler a(format);
  for (const auto& e : events) REQUIRE(a.Event(e.first, e.second).ok());
  REQUIRE(a.complete());
  recap::Result<std::vector<recap::Message>> m = a.Messages();
  INFO(m.status().ToString());
  REQUIRE(m.ok());
  return *m;
}

}  // namespace

TEST_CASE("R19.2 a streamed reply is the message the client sends back, in each format",
          "[proxy]") {
  recap::DecodeOptions o;
  o.keep_unknown_blocks = true;
  SECTION("anthropic") {
    const std::vector<recap::Message> reply = Assembled("anthropic", AnthropicStream());
    REQUIRE(reply.size() == 1);
    recap::Result<recap::Message> back = recap::anthropic::DecodeMessage(kAnthropicBack, o);
    REQUIRE(back.ok());
    CHECK(recap_proxy::ReplyFingerprint(reply) == recap_proxy::ReplyFingerprint({*back}));
    // The codec writes it as the client would send it.
    CHECK(Json::parse(recap::anthropic::EncodeMessage(reply[0]).value()) ==
          Json::parse(kAnthropicBack));
  }
  SECTION("openai-chat") {
    const std::vector<recap::Message> reply = Assembled("openai-chat", ChatStream());
    REQUIRE(reply.size() == 1);
    recap::Result<recap::Message> back = recap::openai_chat::DecodeMessage(kChatBack, o);
    REQUIRE(back.ok());
    CHECK(recap_proxy::ReplyFingerprint(reply) == recap_proxy::ReplyFingerprint({*back}));
    CHECK(Json::parse(recap::openai_chat::EncodeMessage(reply[0]).value()) ==
          Json::parse(kChatBack));
  }
  SECTION("openai-responses: the output items, reasoning with the call it precedes") {
    const std::vector<recap::Message> reply = Assembled("openai-responses", ResponsesStream());
    recap::Result<recap::Conversation> back =
        recap::openai_responses::DecodeMessages(kResponsesOutput, o);
    REQUIRE(back.ok());
    CHECK(reply.size() == back->messages.size());
    CHECK(recap_proxy::ReplyFingerprint(reply) == recap_proxy::ReplyFingerprint(back->messages));
  }
}

TEST_CASE("R19.2 a whole answer gives the same reply as its stream", "[proxy]") {
  ReplyAssembler anthropic("anthropic");
  REQUIRE(
      anthropic
          .Body(
              std::string(
                  R"({"id":"msg_1","type":"message","role":"assistant","model":"m","stop_reason":"tool_use","usage":{},"content":)") +
              Json::parse(kAnthropicBack)["content"].dump() + "}")
          .ok());
  REQUIRE(anthropic.complete());
  CHECK(recap_proxy::ReplyFingerprint(anthropic.Messages().value()) ==
        recap_proxy::ReplyFingerprint(Assembled("anthropic", AnthropicStream())));

  ReplyAssembler chat("openai-chat");
  REQUIRE(
      chat.Body(std::string(
                    R"({"id":"c1","choices":[{"index":0,"finish_reason":"tool_calls","message":)") +
                kChatBack + "}]}")
          .ok());
  CHECK(recap_proxy::ReplyFingerprint(chat.Messages().value()) ==
        recap_proxy::ReplyFingerprint(Assembled("openai-chat", ChatStream())));

  ReplyAssembler responses("openai-responses");
  REQUIRE(responses
              .Body(std::string(R"({"id":"r1","status":"completed","output":)") + kResponsesOutput +
                    "}")
              .ok());
  CHECK(recap_proxy::ReplyFingerprint(responses.Messages().value()) ==
        recap_proxy::ReplyFingerprint(Assembled("openai-responses", ResponsesStream())));
}

TEST_CASE("R19.2 an answer cut off anywhere is never complete", "[proxy]") {
  const std::vector<std::pair<std::string, Events>> streams = {
      {"anthropic", AnthropicStream()},
      {"openai-chat", ChatStream()},
      {"openai-responses", ResponsesStream()}};
  for (const auto& [format, events] : streams) {
    // Every prefix that stops before the end: the upstream or the client gone mid-stream.
    std::size_t last = events.size();
    if (format == "openai-chat") last -= 2;  // the finish_reason chunk ends it
    for (std::size_t cut = 0; cut + 1 < last + 1 && cut < last; ++cut) {
      INFO(format << " cut after " << cut << " events");
      ReplyAssembler a(format);
      for (std::size_t i = 0; i < cut; ++i)
        REQUIRE(a.Event(events[i].first, events[i].second).ok());
      CHECK(!a.complete());
      CHECK(!a.Messages().ok());
    }
  }
}

TEST_CASE("R19.2 events the format does not send make the reply fail, with what was wrong",
          "[proxy]") {
  SECTION("data that is not JSON") {
    ReplyAssembler a("anthropic");
    const recap::Status s = a.Event("message_start", "{\"type\":");
    CHECK(s.code() == recap::StatusCode::kInvalidArgument);
    CHECK(s.message().find("not a JSON object") != std::string::npos);
    CHECK(!a.complete());
  }
  SECTION("a block before the message, a delta for no block, a tool input that is not JSON") {
    ReplyAssembler before("anthropic");
    CHECK(
        !before
             .Event(
                 "content_block_start",
                 R"({"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}})")
             .ok());
    Events events = AnthropicStream();
    ReplyAssembler nowhere("anthropic");
    REQUIRE(nowhere.Event(events[0].first, events[0].second).ok());
    CHECK(
        !nowhere
             .Event(
                 "content_block_delta",
                 R"({"type":"content_block_delta","index":4,"delta":{"type":"text_delta","text":"x"}})")
             .ok());
    ReplyAssembler broken("anthropic");
    for (std::size_t i = 0; i < 7; ++i)
      REQUIRE(broken.Event(events[i].first, events[i].second).ok());
    REQUIRE(
        broken
            .Event(
                "content_block_delta",
                R"({"type":"content_block_delta","index":1,"delta":{"type":"input_json_delta","partial_json":"{\"a\":"}})")
            .ok());
    CHECK(!broken.Event("content_block_stop", R"({"type":"content_block_stop","index":1})").ok());
    // The rest is ignored: the reply stays failed.
    CHECK(!broken.Event("message_stop", R"({"type":"message_stop"})").ok());
    CHECK(!broken.complete());
  }
  SECTION("an error mid-stream") {
    ReplyAssembler a("openai-responses");
    REQUIRE(a.Event("response.created", R"({"type":"response.created","response":{"output":[]}})")
                .ok());
    CHECK(!a.Event("response.failed",
                   R"({"type":"response.failed","response":{"error":{"message":"overloaded"}}})")
               .ok());
    CHECK(!a.complete());
    ReplyAssembler b("anthropic");
    CHECK(!b.Event("error", R"({"type":"error","error":{"type":"overloaded_error"}})").ok());
  }
}
