// R18.2 through the whole stack: a host loop over each wire format with a stand-in model. After
// a compaction whose summary names nothing, the person asks for a fact only the compacted span
// held; the stand-in model, reading the request as the provider's API would receive it, calls
// recap_recall (offered in the request's tool catalog in that format), the host answers the
// call with Compactor::AnswerRecall, and the next request carries the call paired with its
// result and the fact, from which the model answers.
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include "recap/codec.h"
#include "recap/compactor.h"
#include "recap/recall.h"

#include "support/host.h"

using namespace recap;
using recap::testing::CompactorHost;
using recap::testing::Ok;
using recap::testing::ScriptedStep;
using Json = nlohmann::json;

namespace {

struct Wire {
  const char* name;
  ToolFormat format;
  std::function<Result<std::string>(const Transcript&)> encode;
  std::function<Result<Message>(std::string_view)> decode;
};

std::vector<Wire> Wires() {
  return {
      {"openai chat", ToolFormat::kOpenAIChat,
       [](const Transcript& t) { return openai_chat::EncodeTranscript(t); },
       [](std::string_view j) { return openai_chat::DecodeMessage(j); }},
      {"anthropic", ToolFormat::kAnthropic,
       [](const Transcript& t) { return anthropic::EncodeTranscript(t); },
       [](std::string_view j) { return anthropic::DecodeMessage(j); }},
      {"openai responses", ToolFormat::kOpenAIResponses,
       [](const Transcript& t) { return openai_responses::EncodeTranscript(t); },
       [](std::string_view j) { return openai_responses::DecodeMessage(j); }},
  };
}

// The tool calls of a request's messages, each with the index of the message or item that
// answers it, as the format pairs them (-1: none).
struct Call {
  std::string id;
  std::string name;
  Json arguments;
  int answered_at = -1;
  std::string result;
};

std::vector<Call> Calls(ToolFormat f, const Json& messages) {
  std::vector<Call> calls;
  for (std::size_t i = 0; i < messages.size(); ++i) {
    const Json& m = messages[i];
    if (f == ToolFormat::kOpenAIChat) {
      if (m.value("role", "") == "assistant" && m.contains("tool_calls")) {
        for (const Json& c : m["tool_calls"]) {
          calls.push_back({c["id"], c["function"]["name"],
                           Json::parse(c["function"]["arguments"].get<std::string>()), -1, ""});
        }
      }
      if (m.value("role", "") == "tool") {
        for (Call& c : calls) {
          if (c.id == m["tool_call_id"]) {
            c.answered_at = static_cast<int>(i);
            c.result = m["content"].is_string() ? m["content"].get<std::string>()
                                                : m["content"][0]["text"].get<std::string>();
          }
        }
      }
    } else if (f == ToolFormat::kAnthropic) {
      if (!m["content"].is_array()) continue;
      for (const Json& block : m["content"]) {
        if (block["type"] == "tool_use") {
          calls.push_back({block["id"], block["name"], block["input"], -1, ""});
        } else if (block["type"] == "tool_result") {
          for (Call& c : calls) {
            if (c.id != block["tool_use_id"]) continue;
            c.answered_at = static_cast<int>(i);
            c.result = block["content"].is_string()
                           ? block["content"].get<std::string>()
                           : block["content"][0]["text"].get<std::string>();
          }
        }
      }
    } else {
      if (m.value("type", "") == "function_call") {
        calls.push_back(
            {m["call_id"], m["name"], Json::parse(m["arguments"].get<std::string>()), -1, ""});
      } else if (m.value("type", "") == "function_call_output") {
        for (Call& c : calls) {
          if (c.id != m["call_id"]) continue;
          c.answered_at = static_cast<int>(i);
          c.result = m["output"].is_string() ? m["output"].get<std::string>()
                                             : m["output"][0]["text"].get<std::string>();
        }
      }
    }
  }
  return calls;
}

// Where the call `id` is made: the index of the message or item holding it.
int CallAt(ToolFormat f, const Json& messages, const std::string& id) {
  for (std::size_t i = 0; i < messages.size(); ++i) {
    const std::string text = messages[i].dump();
    const bool here =
        f == ToolFormat::kOpenAIResponses
            ? messages[i].value("type", "") == "function_call" && messages[i]["call_id"] == id
            : messages[i].value("role", "") == "assistant" &&
                  text.find("\"" + id + "\"") != std::string::npos;
    if (here) return static_cast<int>(i);
  }
  return -1;
}

// The stand-in model: reads the request as the API receives it and answers with one message in
// the format's wire form.
std::string StandInModel(ToolFormat f, const Json& request, int* recall_calls) {
  const Json& tools = request["tools"];
  REQUIRE(tools.size() == 1);
  const std::string tool_name = f == ToolFormat::kOpenAIChat
                                    ? tools[0]["function"]["name"].get<std::string>()
                                    : tools[0]["name"].get<std::string>();
  REQUIRE(tool_name == "recap_recall");
  // A recall already answered: the model answers from it.
  for (const Call& c : Calls(f, request["messages"])) {
    if (c.name != "recap_recall" || c.answered_at < 0) continue;
    const std::size_t at = c.result.find("ZEBRA-42");
    if (at == std::string::npos) continue;
    const std::string answer = "The launch code is ZEBRA-42.";
    if (f == ToolFormat::kOpenAIResponses) {
      return Json{{"type", "message"},
                  {"role", "assistant"},
                  {"content", Json::array({{{"type", "output_text"}, {"text", answer}}})}}
          .dump();
    }
    return Json{{"role", "assistant"}, {"content", answer}}.dump();
  }
  // Otherwise it does not know the code: it asks for it.
  ++*recall_calls;
  const std::string args = R"({"query":"launch code"})";
  switch (f) {
    case ToolFormat::kOpenAIChat:
      return Json{{"role", "assistant"},
                  {"content", nullptr},
                  {"tool_calls",
                   Json::array({{{"id", "call_r1"},
                                 {"type", "function"},
                                 {"function", {{"name", "recap_recall"}, {"arguments", args}}}}})}}
          .dump();
    case ToolFormat::kAnthropic:
      return Json{{"role", "assistant"},
                  {"content", Json::array({{{"type", "tool_use"},
                                            {"id", "toolu_r1"},
                                            {"name", "recap_recall"},
                                            {"input", Json::parse(args)}}})}}
          .dump();
    case ToolFormat::kOpenAIResponses:
      return Json{{"type", "function_call"},
                  {"call_id", "call_r1"},
                  {"name", "recap_recall"},
                  {"arguments", args}}
          .dump();
  }
  return {};
}

}  // namespace

TEST_CASE(
    "R18.2 host loop: after a compaction the model recalls a fact only the compacted span held, "
    "in each wire format, and every request pairs each call with its result") {
  for (const Wire& wire : Wires()) {
    INFO("format: " << wire.name);
    Config config;
    config.compaction.keep_turns = 1;
    config.compaction.ledger.enabled = false;  // the summary alone decides what is sent
    config.compaction.recall_tool = true;
    CompactorHost<> h(config);
    h.provider->SetDefault(ScriptedStep::Reply(
        R"({"goal":"help the user","user_requests":["some things"],"current_state":"working"})"));
    h.Append("s",
             {Message::UserText("look up the launch code in vault.txt"),
              Message::AssistantCalls({ToolCall{"call_1", "read", R"({"path":"vault.txt"})", {}}}),
              Message::ToolOutput("call_1", "launch code: ZEBRA-42"),
              Message::AssistantText("I have it."), Message::UserText("now something else"),
              Message::AssistantText(std::string(400, 'x'))});
    REQUIRE(Ok(h.compactor->Compact("s")).compacted);
    h.Append("s", Message::UserText("what was the launch code?"));

    int recall_calls = 0;
    std::string answer;
    for (int turn = 0; turn < 4 && answer.empty(); ++turn) {
      const Prepared p = h.Prepare("s");
      CHECK(p.orphan_results.empty());
      CHECK(FindUncertainToolCalls(p.messages).empty());
      const std::string body = Ok(wire.encode(p.messages));
      // What the API receives: the messages (or input items) and the tool catalog.
      const Json request = {{"messages", Json::parse(body)},
                            {"tools", Json::array({Json::parse(RecallTool(wire.format))})}};
      if (turn == 0) CHECK(body.find("ZEBRA-42") == std::string::npos);  // compacted away
      // Every call is answered by the next message or item, as the APIs require.
      for (const Call& c : Calls(wire.format, request["messages"])) {
        INFO("call " << c.id);
        CHECK(c.answered_at == CallAt(wire.format, request["messages"], c.id) + 1);
      }
      const std::string reply = StandInModel(wire.format, request, &recall_calls);
      Message m = Ok(wire.decode(reply));
      h.Append("s", m);
      const Message stored = Ok(h.store->Load("s")).transcript.ToVector().back();
      bool called = false;
      for (const Part& part : stored.parts) {
        const auto* call = std::get_if<ToolCall>(&part);
        if (call == nullptr || call->name != kRecallToolName) continue;
        h.Append("s", Ok(h.compactor->AnswerRecall("s", *call, wire.format)));
        called = true;
      }
      if (!called) answer = JoinedText(stored);
    }
    CHECK(recall_calls == 1);
    CHECK(answer == "The launch code is ZEBRA-42.");
  }
}
