// recap_recall_tool — the model gets back what a compaction summarized (SPEC R18).
//
// A host in OpenAI chat-completions JSON offers the model one extra tool, `recap_recall`
// (recap::RecallTool gives its catalog entry), and tells recap so (compaction.recallTool).
// Early in the session a tool result holds a fact — a deploy token. Turns go by, the
// conversation outgrows its limit and recap compacts it with the offline summarizer, which
// keeps no such detail. When the person asks for the token, the stand-in model (a function
// here, reading the request as an API would) finds no token in what it was sent, calls
// recap_recall, and the host answers the call with Compactor::AnswerRecall. The next request
// carries the original tool result back, and the model answers. At the end the host undoes the
// compaction (Compactor::Uncompact) and shows the event it emitted.
//
// It runs as a test: it exits non-zero unless the fact was compacted away, recalled, and
// answered, and the undo restored every original.
#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "recap/recap.h"

namespace {

using nlohmann::json;

// Prints each event as it happens.
class PrintSink : public recap::EventSink {
 public:
  void OnEvent(const recap::Event& e) override {
    if (e.type == "compaction_completed" || e.type == "compaction_undone") {
      std::cout << "  event: " << e.json.substr(0, 160) << (e.json.size() > 160 ? "…" : "") << "\n";
    }
  }
};

// The stand-in model: answers from a recap_recall result when the request has one, calls the
// tool when the person asks for the token and the request does not hold it, chats otherwise.
json Model(const json& request) {
  const json& messages = request["messages"];
  const std::string last = messages.back().value("role", "");
  if (last == "tool") {
    const std::string result = messages.back()["content"].get<std::string>();
    const auto at = result.find("DEPLOY-");
    if (at != std::string::npos) {
      return {{"role", "assistant"},
              {"content", "The deploy token is " + result.substr(at, 13) + "."}};
    }
  }
  const std::string asked = messages.back().value("content", "");
  if (asked.find("deploy token") != std::string::npos &&
      request["messages"].dump().find("DEPLOY-") == std::string::npos) {
    json args = {{"query", "deploy token"}};
    return {{"role", "assistant"},
            {"content", nullptr},
            {"tool_calls",
             json::array({{{"id", "call_recall_1"},
                           {"type", "function"},
                           {"function",
                            {{"name", recap::kRecallToolName}, {"arguments", args.dump()}}}}})}};
  }
  return {{"role", "assistant"}, {"content", "Noted. " + std::string(600, '.')}};
}

}  // namespace

int main() {
  recap::Config config;
  config.limits.max_context_chars = 8000;
  config.compaction.keep_turns = 1;
  config.compaction.recall_tool = true;  // the host offers recap_recall: recap may say so
  auto store = recap::NewInMemorySessionStore();
  auto compactor =
      recap::Compactor::Create(config, nullptr, store, {}, {std::make_shared<PrintSink>()});
  if (!compactor.ok()) {
    std::cerr << compactor.status().ToString() << "\n";
    return 1;
  }
  const std::string session = "session-1";
  auto append = [&](const json& m) {
    auto decoded = recap::openai_chat::DecodeMessage(m.dump());
    return decoded.ok() && store->Append(session, *decoded).ok();
  };
  // The catalog the host sends with every request: its own tools plus recap_recall.
  const json tools = json::array({json::parse(recap::RecallTool(recap::ToolFormat::kOpenAIChat))});

  // The start of the session: a tool result holds the fact.
  bool ok = append({{"role", "user"}, {"content", "Fetch the deploy token from the vault."}}) &&
            append({{"role", "assistant"},
                    {"content", nullptr},
                    {"tool_calls", json::array({{{"id", "call_vault"},
                                                 {"type", "function"},
                                                 {"function",
                                                  {{"name", "vault_read"},
                                                   {"arguments", R"({"key":"deploy"})"}}}}})}}) &&
            append({{"role", "tool"},
                    {"tool_call_id", "call_vault"},
                    {"content", "deploy token: DEPLOY-7Q2XK9 (rotates monthly)"}}) &&
            append({{"role", "assistant"}, {"content", "I have read the token."}});

  std::vector<std::string> asks;
  for (int i = 0; i < 12; ++i) asks.push_back("Step " + std::to_string(i) + ": keep working.");
  asks.push_back("What was the deploy token?");
  std::string answer;
  bool compacted_away = false;
  bool recalled = false;
  for (const std::string& ask : asks) {
    ok = ok && append({{"role", "user"}, {"content", ask}});
    for (int round = 0; ok && round < 3; ++round) {
      auto prepared = (*compactor)->Prepare(session, {});
      if (!prepared.ok()) {
        std::cerr << prepared.status().ToString() << "\n";
        return 1;
      }
      auto body = recap::openai_chat::EncodeTranscript(prepared->messages);
      if (!body.ok()) return 1;
      const json request = {
          {"model", "stand-in"}, {"messages", json::parse(*body)}, {"tools", tools}};
      if (ask.find("deploy token") != std::string::npos && round == 0) {
        compacted_away = body->find("DEPLOY-7Q2XK9") == std::string::npos;
        std::cout << "asked for the token; the request holds it: "
                  << (compacted_away ? "no (compacted)" : "yes") << "\n";
      }
      const json reply = Model(request);
      ok = append(reply);
      if (!reply.contains("tool_calls")) {
        answer = reply["content"].get<std::string>();
        break;
      }
      // Answer each recap_recall call; append the result like any tool result.
      auto stored = store->Load(session);
      const recap::Message& last = stored->transcript[stored->transcript.size() - 1];
      for (const recap::Part& part : last.parts) {
        const auto* call = std::get_if<recap::ToolCall>(&part);
        if (call == nullptr || call->name != recap::kRecallToolName) continue;
        auto result = (*compactor)->AnswerRecall(session, *call, recap::ToolFormat::kOpenAIChat);
        if (!result.ok()) {
          std::cerr << result.status().ToString() << "\n";
          return 1;
        }
        std::cout << "model called recap_recall " << call->arguments << "\n";
        recalled = true;
        ok = ok && store->Append(session, *result).ok();
      }
    }
  }
  std::cout << "answer: " << answer << "\n";

  // Undo every compaction: each message ever appended is active again, in order.
  std::size_t undone = 0;
  for (;;) {
    auto u = (*compactor)->Uncompact(session);
    if (!u.ok()) {
      std::cerr << u.status().ToString() << "\n";
      return 1;
    }
    if (!u->undone) break;
    ++undone;
  }
  auto state = store->Load(session);
  auto history = store->History(session);
  if (!state.ok() || !history.ok()) return 1;
  std::vector<std::string> appended;  // what the host appended, in order
  for (const recap::HistoryEntry& e : *history) {
    if (!e.message.summary) appended.push_back(e.message.id);
  }
  std::vector<std::string> active;
  for (const recap::Message& m : state->transcript) active.push_back(m.id);
  const bool restored = active == appended;
  std::cout << undone << " compaction(s) undone; the session has " << state->transcript.size()
            << " active messages again\n";
  const bool passed = ok && compacted_away && recalled &&
                      answer == "The deploy token is DEPLOY-7Q2XK9." && undone > 0 && restored;
  std::cout << (passed ? "ok" : "FAILED") << "\n";
  return passed ? 0 : 1;
}
