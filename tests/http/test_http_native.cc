// The provider-native summarizers (SPEC R14.2): recap::http's `openai_compact` (POST
// /responses/compact) and `anthropic_compact` (Anthropic's on-demand compaction), against the
// tests' scripted server speaking the shapes the providers document (docs/http-provider.md
// names the pages). recap chooses the cut and keeps the tail; the returned artifact becomes the
// checkpoint; usage is reported; errors are classified as for the other protocols.
#include <memory>
#include <string>
#include <vector>

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include "recap/codec.h"
#include "recap/compactor.h"
#include "recap/http/http_provider.h"

#include "support/host.h"
#include "support/http_test_server.h"
#include "support/ok.h"
#include "support/recording_sink.h"

using namespace recap;
using recap::testing::HttpTestServer;
using recap::testing::ScriptedHttpResponse;
using Json = nlohmann::json;

namespace {

const std::string kKey = "sk-native-SECRET-4242";
const std::string kInstructions = "You are a travel agent. Never book without consent.";
const std::string kEncrypted = "gAAAAABnative-encrypted-state-0001";

using recap::testing::Ok;

HttpProviderOptions Options(const HttpTestServer& server, HttpProtocol protocol) {
  HttpProviderOptions o;
  o.protocol = protocol;
  o.base_url = server.BaseUrl() + (protocol == HttpProtocol::kOpenAiCompact ? "/v1" : "");
  o.model = protocol == HttpProtocol::kOpenAiCompact ? "gpt-test" : "claude-test";
  o.api_key = kKey;
  o.connect_timeout_ms = 2000;
  o.timeout_ms = 5000;
  o.retry_base_delay_ms = 10;
  o.max_retry_delay_ms = 2000;
  o.context_window = 4000;  // the trigger at 3,400 tokens
  return o;
}

// OpenAI's reply to POST /responses/compact: the compacted window (a user message kept as it
// was, then the compaction item) and usage.
std::string OpenAiCompacted(const std::string& encrypted = kEncrypted) {
  return R"({"id":"resp_c1","object":"response.compaction","created_at":1764900000,)"
         R"("output":[{"type":"message","role":"user","content":[{"type":"input_text",)"
         R"("text":"Book me a flight to Lisbon."}]},{"type":"compaction","id":"cmp_01",)"
         R"("encrypted_content":")" +
         encrypted +
         R"("}],"usage":{"input_tokens":1200,"output_tokens":300,"total_tokens":1500}})";
}

// Anthropic's reply to an on-demand compaction: one block, stop_reason "compaction".
std::string AnthropicCompacted(const std::string& summary, const std::string& stop = "compaction") {
  Json block = {{"type", "compaction"}, {"content", summary}};
  if (summary.empty()) block["content"] = nullptr;
  const Json j = {{"id", "msg_c1"},
                  {"type", "message"},
                  {"role", "assistant"},
                  {"model", "claude-test"},
                  {"content", {block}},
                  {"stop_reason", stop},
                  {"usage", {{"input_tokens", 900}, {"output_tokens", 120}}}};
  return j.dump();
}

// Keeps the last turn; `fallback` when the provider fails.
Config KeepOneTurn(Fallback fallback) {
  Config config;
  config.compaction.keep_turns = 1;
  config.compaction.fallback = fallback;
  return config;
}

// The shared host (support/host.h) over the HTTP provider `options` make and an in-memory store.
struct Host : recap::testing::CompactorHost<Provider> {
  Host(const HttpProviderOptions& options, Fallback fallback = Fallback::kNone)
      : CompactorHost(KeepOneTurn(fallback),
                      {Ok(NewHttpProvider(options)), NewInMemorySessionStore()}) {}
  void Turns(int from, int to) {
    std::vector<Message> m;
    for (int i = from; i < to; ++i) {
      m.push_back(
          Message::UserText("question " + std::to_string(i) + " " + std::string(2000, 'q')));
      m.push_back(
          Message::AssistantText("answer " + std::to_string(i) + " " + std::string(2500, 'a')));
    }
    Append("s", std::move(m));
  }
};

std::string OpaquePayloads(const Message& m) {
  std::string out;
  for (const Part& p : m.parts) {
    if (const auto* o = std::get_if<Opaque>(&p)) out += o->payload + "\n";
  }
  return out;
}

}  // namespace

TEST_CASE("R14.2 openai_compact: the span goes to /responses/compact, its output is the checkpoint",
          "[R14.2]") {
  HttpTestServer server;
  Host h(Options(server, HttpProtocol::kOpenAiCompact));
  CHECK(h.provider->WritesNativeCheckpoints());
  CHECK(h.provider->Name() == "openai-compact");
  REQUIRE(h.store->Append("s", Message::SystemText(kInstructions)).ok());
  h.Turns(0, 4);
  const Transcript before = Ok(h.store->Load("s")).transcript;
  server.Push(ScriptedHttpResponse::Json(200, OpenAiCompacted()));

  const Prepared p = Ok(h.compactor->Prepare("s", {}));
  REQUIRE(p.compactions.size() == 1);
  const auto requests = server.Requests();
  REQUIRE(requests.size() == 1);
  CHECK(requests[0].method == "POST");
  CHECK(requests[0].path == "/v1/responses/compact");
  CHECK(requests[0].Header("authorization") == "Bearer " + kKey);
  const Json body = Json::parse(requests[0].body);
  CHECK(body.at("model") == "gpt-test");
  CHECK(body.at("instructions") == kInstructions);  // the session's, in full
  // The span as Responses items: everything before the kept last turn but the instructions.
  Conversation span;
  for (std::size_t i = 1; i + 2 < before.size(); ++i) span.messages.push_back(before[i]);
  CHECK(body.at("input") == Json::parse(Ok(openai_responses::EncodeMessages(span))));

  // The instructions stay; the checkpoint holds OpenAI's output as it came; the tail stays.
  // R17.2: an artifact recap cannot read gets the span's ledger as a message of its own
  // right after it.
  REQUIRE(p.messages.size() == 5);
  CHECK(p.messages[0].id == before[0].id);
  const auto artifact = FindProviderCheckpoint(p.messages[1]);
  REQUIRE(artifact);
  CHECK(artifact->writer == "openai");
  CHECK(p.messages[1].summary);
  CHECK(OpaquePayloads(p.messages[1]).find(kEncrypted) != std::string::npos);
  CHECK(p.messages[2].summary);
  // Each request is over 2,000 characters here, more than the section's budget in this small
  // window: the section names them and where they are.
  CHECK(JoinedText(p.messages[2]) ==
        "## Kept by recap\nLeft out for room: 3 requests (from messages " + before[1].id + " to " +
            before[5].id + ").\n");
  CHECK(p.messages[3].id == before[before.size() - 2].id);

  const auto done = h.sink->OfType("compaction_completed");
  REQUIRE(done.size() == 1);
  CHECK(done[0]["checkpoint"]["writer"] == "openai-compact");
  CHECK(done[0]["ledger"]["request"]["total"] == 3);
  CHECK(done[0]["ledger"]["request"]["kept"] == 0);
  CHECK(done[0]["ledger"]["request"]["left_out"] == 3);
  CHECK(done[0]["usage"]["prompt_tokens"] == 1200);
  CHECK(done[0]["usage"]["completion_tokens"] == 300);
  CHECK(done[0]["usage"]["calls"] == 1);
  CHECK(h.sink->OfType("provider_checkpoint").empty());  // recap's own commit, nothing retired

  // The next compaction sends the artifact back byte for byte, and its successor replaces it.
  h.Turns(4, 8);
  server.Push(ScriptedHttpResponse::Json(200, OpenAiCompacted("gAAAAABsecond")));
  const Prepared again = Ok(h.compactor->Prepare("s", {}));
  REQUIRE(again.compactions.size() == 1);
  const auto second = server.Requests().back();
  CHECK(second.body.find(R"({"type":"compaction","id":"cmp_01","encrypted_content":")" +
                         kEncrypted + R"("})") != std::string::npos);
  std::size_t artifacts = 0;
  for (const Message& m : again.messages) artifacts += FindProviderCheckpoint(m) ? 1 : 0;
  CHECK(artifacts == 1);
  CHECK(OpaquePayloads(again.messages[1]).find("gAAAAABsecond") != std::string::npos);
}

TEST_CASE("R14.2 anthropic_compact: the beta header, the compaction parameter, the block kept",
          "[R14.2]") {
  HttpTestServer server;
  Host h(Options(server, HttpProtocol::kAnthropicCompact));
  CHECK(h.provider->Name() == "anthropic-compact");
  // A logged response's own fields (Claude Code keeps them) are no part of a request.
  Message logged = Message::AssistantText("answer 0 " + std::string(2500, 'a'));
  logged.extra = R"({"id":"msg_logged","model":"claude-x","usage":{"input_tokens":5}})";
  REQUIRE(
      h.store
          ->AppendMessages("s", {Message::UserText("question 0 " + std::string(2000, 'q')), logged})
          .ok());
  h.Turns(1, 4);
  server.Push(ScriptedHttpResponse::Json(
      200, AnthropicCompacted("The user plans a Lisbon trip; flights compared, none booked.")));

  CompactOptions manual;
  manual.focus = "keep the prices";
  const CompactOutcome out = Ok(h.compactor->Compact("s", manual));
  REQUIRE(out.compacted);
  CHECK(out.writer == "anthropic-compact");
  const auto requests = server.Requests();
  REQUIRE(requests.size() == 1);
  CHECK(requests[0].path == "/v1/messages");
  CHECK(requests[0].Header("anthropic-beta") == "compact-2026-09-04");
  CHECK(requests[0].Header("x-api-key") == kKey);
  CHECK_FALSE(requests[0].Header("anthropic-version").empty());
  const Json body = Json::parse(requests[0].body);
  CHECK(body.at("compaction") == Json{{"type", "summarize"}, {"instructions", "keep the prices"}});
  CHECK(body.at("max_tokens").is_number());
  CHECK_FALSE(body.contains("system"));  // the session has no instructions
  REQUIRE(body.at("messages").size() == 6);
  const Json& sent = body.at("messages")[1];
  CHECK(sent.at("role") == "assistant");
  CHECK(sent.size() == 2);  // role and content only: no id, model or usage
  CHECK(sent.at("content")[0].at("text") == "answer 0 " + std::string(2500, 'a'));

  const Transcript t = Ok(h.store->Load("s")).transcript;
  REQUIRE(t.size() == 4);  // the artifact, the ledger's message (R17.2), the last turn
  const auto artifact = FindProviderCheckpoint(t[0]);
  REQUIRE(artifact);
  CHECK(artifact->writer == "anthropic");
  CHECK(artifact->text == "The user plans a Lisbon trip; flights compared, none booked.");
  CHECK(t[0].summary);
  // The block byte for byte as the server wrote it (this server writes members sorted).
  CHECK(Ok(anthropic::EncodeMessage(t[0])) ==
        R"({"role":"assistant","content":[{"content":"The user plans a Lisbon trip; flights )"
        R"(compared, none booked.","type":"compaction"}]})");

  // The next request puts the block first in `messages`, as the API wants it.
  h.Turns(4, 8);
  server.Push(ScriptedHttpResponse::Json(200, AnthropicCompacted("Second summary.")));
  REQUIRE(Ok(h.compactor->Prepare("s", {})).compactions.size() == 1);
  const std::string next_body = server.Requests().back().body;
  const Json next = Json::parse(next_body);
  CHECK(next.at("messages")[0].at("content")[0].at("type") == "compaction");
  // Byte for byte as it came (R14.1): the block's text exactly as the server wrote it.
  CHECK(next_body.find(R"({"content":"The user plans a Lisbon trip; flights compared, none )"
                       R"(booked.","type":"compaction"})") != std::string::npos);
}

TEST_CASE("R14.2 a refused span is classified like the other protocols and changes nothing",
          "[R14.2]") {
  HttpTestServer server;
  auto provider = Ok(NewHttpProvider(Options(server, HttpProtocol::kAnthropicCompact)));
  // A span holding an open tool call, as the API refuses it.
  Transcript span;
  span.Append(Message::UserText("list the files"));
  span.Append(Message::AssistantCalls({ToolCall{"toolu_1", "ls", "{}", {}}}));
  server.Push(ScriptedHttpResponse::Json(
      400, R"({"type":"error","error":{"type":"invalid_request_error","message":"messages.1: )"
           R"(`tool_use` ids were found without `tool_result` blocks immediately after: )"
           R"(toolu_1 (request by )" +
               kKey + R"x()"}})x"));
  NativeCompactionRequest request;
  request.span = &span;
  const auto refused = provider->CompactNative(request, {});
  REQUIRE_FALSE(refused.ok());
  CHECK(refused.status().code() == StatusCode::kInvalidArgument);
  CHECK(refused.status().message().find("HTTP 400") != std::string::npos);
  CHECK(refused.status().message().find("/v1/messages") != std::string::npos);
  CHECK(refused.status().message().find("toolu_1") != std::string::npos);
  CHECK(refused.status().message().find("SECRET") == std::string::npos);
  CHECK(server.Requests().size() == 1);  // not retried

  // Complete() is not how a native provider writes checkpoints.
  CompletionRequest completion;
  completion.messages.push_back(Message::UserText("x"));
  CHECK(provider->Complete(completion, {}).status().code() == StatusCode::kFailedPrecondition);

  // Through the Compactor: compaction_failed, the session untouched; with the offline
  // fallback, the offline summarizer writes the checkpoint instead.
  for (const Fallback fallback : {Fallback::kNone, Fallback::kOffline}) {
    Host h(Options(server, HttpProtocol::kAnthropicCompact), fallback);
    h.Turns(0, 4);
    const std::uint64_t version = Ok(h.store->Load("s")).version;
    server.Push(ScriptedHttpResponse::Json(
        400, R"({"type":"error","error":{"type":"invalid_request_error","message":"bad"}})"));
    const Prepared p = Ok(h.compactor->Prepare("s", {}));
    if (fallback == Fallback::kNone) {
      CHECK(p.compactions.empty());
      CHECK(h.sink->OfType("compaction_failed").size() == 1);
      CHECK(Ok(h.store->Load("s")).version == version);
    } else {
      REQUIRE(p.compactions.size() == 1);
      CHECK(h.sink->OfType("compaction_completed")[0]["checkpoint"]["writer"] == "offline");
    }
  }
}

TEST_CASE("R14.2 a cut or empty compaction is refused and changes nothing", "[R14.2]") {
  HttpTestServer server;
  SECTION("Anthropic stopped at max_tokens") {
    Host h(Options(server, HttpProtocol::kAnthropicCompact));
    h.Turns(0, 4);
    server.Push(ScriptedHttpResponse::Json(200, AnthropicCompacted("", "max_tokens")));
    const std::uint64_t version = Ok(h.store->Load("s")).version;
    const auto out = h.compactor->Compact("s", {});
    REQUIRE_FALSE(out.ok());
    CHECK(out.status().code() == StatusCode::kResourceExhausted);
    CHECK(out.status().message().find("compaction.maxOutputTokens") != std::string::npos);
    CHECK(Ok(h.store->Load("s")).version == version);
  }
  SECTION("Anthropic answered without a compaction block") {
    Host h(Options(server, HttpProtocol::kAnthropicCompact));
    h.Turns(0, 4);
    server.Push(ScriptedHttpResponse::Json(
        200, R"({"type":"message","role":"assistant","content":[{"type":"text","text":"Hi"}],)"
             R"("stop_reason":"end_turn"})"));
    const auto out = h.compactor->Compact("s", {});
    REQUIRE_FALSE(out.ok());
    CHECK(out.status().code() == StatusCode::kUnavailable);
    CHECK(out.status().message().find("no `compaction` block") != std::string::npos);
  }
  SECTION("OpenAI's output without a compaction item") {
    Host h(Options(server, HttpProtocol::kOpenAiCompact));
    h.Turns(0, 4);
    server.Push(ScriptedHttpResponse::Json(200, R"({"object":"response.compaction","output":[]})"));
    const auto out = h.compactor->Compact("s", {});
    REQUIRE_FALSE(out.ok());
    CHECK(out.status().message().find("no `compaction` item") != std::string::npos);
  }
  SECTION("a 429 is retried like any other request") {
    Host h(Options(server, HttpProtocol::kOpenAiCompact));
    h.Turns(0, 4);
    server.Push(ScriptedHttpResponse::Json(429, R"({"error":{"message":"slow down"}})",
                                           {{"Retry-After", "0"}}));
    server.Push(ScriptedHttpResponse::Json(200, OpenAiCompacted()));
    CHECK(Ok(h.compactor->Compact("s", {})).compacted);
    CHECK(server.Requests().size() == 2);
  }
}
