// recap_host_loop — a whole agent session on recap::core alone.
//
// The host keeps its conversation in OpenAI chat-completions JSON. Each message that arrives
// (the user's, the model's, a tool's) is decoded and appended to the session store. Right
// before each model request the host calls Compactor::Prepare and sends what it returns. Here
// the store is recap's in-memory store and checkpoints are written by the offline summarizer,
// so the example needs no network, no API key and no other library.
//
// The system prompt is stored too, as the session's first message: it is then the session's
// instructions (SPEC R12.1), kept first in every request, never summarized or clipped.
//
// It runs as a test: it exits non-zero if a request would have gone out over the limit, if a
// tool call was separated from its result, if the instructions were not first and whole, or
// if the store lost or duplicated a message.
#include <cstdio>
#include <iostream>
#include <map>
#include <set>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "recap/recap.h"

namespace {

using nlohmann::json;

json UserText(const std::string& text) { return {{"role", "user"}, {"content", text}}; }
json AssistantText(const std::string& text) { return {{"role", "assistant"}, {"content", text}}; }
json AssistantCall(const std::string& id, const std::string& name, const json& arguments) {
  return {{"role", "assistant"},
          {"content", nullptr},
          {"tool_calls",
           json::array({{{"id", id},
                         {"type", "function"},
                         {"function", {{"name", name}, {"arguments", arguments.dump()}}}}})}};
}
json ToolOutput(const std::string& id, const std::string& output) {
  return {{"role", "tool"}, {"tool_call_id", id}, {"content", output}};
}

std::string BuildLog(std::size_t lines) {
  std::string log;
  for (std::size_t i = 0; i < lines; ++i) {
    log += "[test " + std::to_string(i) + "] parser_test.cc: ok \xE2\x9C\x93\n";  // U+2713
  }
  return log;
}

// Prints each event's type and keeps the count (a host would log or export them).
class PrintingSink : public recap::EventSink {
 public:
  void OnEvent(const recap::Event& event) override {
    std::printf("    event %s\n", event.type.c_str());
    ++counts[event.type];
  }
  std::map<std::string, int> counts;
};

int failures = 0;
void Expect(bool ok, const std::string& what) {
  if (!ok) {
    std::fprintf(stderr, "recap_host_loop: FAILED: %s\n", what.c_str());
    ++failures;
  }
}

}  // namespace

int main() {
  const std::string session = "example-session";
  const std::string system_prompt = "You are a careful software engineer. Keep answers short.";

  // The configuration a host would read from its settings file (docs/configuration.md).
  recap::Result<recap::Config> config = recap::Config::FromJson(R"({
    "compaction": {"keepTurns": 1, "threshold": 0.5},
    "limits": {"maxContextChars": 12000}
  })");
  if (!config.ok()) {
    std::fprintf(stderr, "recap_host_loop: %s\n", config.status().ToString().c_str());
    return 1;
  }
  const std::size_t max_chars = config->limits.max_context_chars;

  auto store = recap::NewInMemorySessionStore();
  auto sink = std::make_shared<PrintingSink>();
  // No provider: the offline summarizer writes the checkpoints.
  recap::Result<std::unique_ptr<recap::Compactor>> created =
      recap::Compactor::Create(*config, nullptr, store, {}, {sink});
  if (!created.ok()) {
    std::fprintf(stderr, "recap_host_loop: %s\n", created.status().ToString().c_str());
    return 1;
  }
  recap::Compactor& compactor = **created;

  // What arrives in each turn: the user's message, then what the model and the tools say.
  const std::vector<std::vector<json>> turns = {
      {UserText("Why does parser_test fail? Work in src/parser."),
       AssistantCall("call_1", "run", {{"cmd", "ctest -R parser"}}),
       ToolOutput("call_1", BuildLog(500)),  // a large tool output, about 16,000 characters
       AssistantText("Test 17 reads past the end of the buffer in src/parser/parser.cc.")},
      {UserText("Fix it and rerun."),
       AssistantCall("call_2", "edit", {{"path", "src/parser/parser.cc"}, {"line", 88}}),
       ToolOutput("call_2", "applied"),
       AssistantCall("call_3", "run", {{"cmd", "ctest -R parser"}}),
       ToolOutput("call_3", BuildLog(60)), AssistantText("Fixed; all parser tests pass.")},
      {UserText("Now run the whole suite."), AssistantCall("call_4", "run", {{"cmd", "ctest"}}),
       ToolOutput("call_4", BuildLog(200)), AssistantText("All 212 tests pass.")},
      {UserText("Thanks. Summarize what changed."),
       AssistantText("src/parser/parser.cc:88 now checks the remaining length before reading.")},
  };

  // The system prompt, stored first: the session's instructions. (A host that sends its
  // system prompt itself instead passes its size as sizes.instructions_chars.)
  if (!store->Append(session, recap::Message::SystemText(system_prompt)).ok()) return 1;
  recap::RequestSizes sizes;
  std::size_t appended = 1;
  std::size_t compactions = 0;

  std::string body;  // the request body, kept from turn to turn: each turn writes into it
  for (std::size_t turn = 0; turn < turns.size(); ++turn) {
    // As messages arrive, the host stores them.
    for (const json& incoming : turns[turn]) {
      recap::Result<recap::Message> message = recap::openai_chat::DecodeMessage(incoming.dump());
      if (!message.ok()) {
        std::fprintf(stderr, "recap_host_loop: %s\n", message.status().ToString().c_str());
        return 1;
      }
      recap::Result<std::uint64_t> stored = store->Append(session, std::move(message).value());
      if (!stored.ok()) {
        std::fprintf(stderr, "recap_host_loop: %s\n", stored.status().ToString().c_str());
        return 1;
      }
      ++appended;
    }

    // Right before the next model request.
    std::printf("turn %zu:\n", turn + 1);
    recap::Result<recap::Prepared> prepared = compactor.Prepare(session, sizes);
    if (!prepared.ok()) {
      // kContextBudgetExceeded says what recap did and what the host can do.
      std::fprintf(stderr, "recap_host_loop: %s\n", prepared.status().ToString().c_str());
      return 1;
    }
    std::printf("  %zu -> %zu chars (limit %zu), %zu messages to send", prepared->before_chars,
                prepared->after_chars, max_chars, prepared->messages.size());
    for (recap::CompactionReason reason : prepared->compactions)
      std::printf(", compacted (%s)", recap::CompactionReasonName(reason));
    if (prepared->reduced_messages > 0) std::printf(", %zu clipped", prepared->reduced_messages);
    std::printf("\n");
    compactions += prepared->compactions.size();

    // The request: what Prepare returned — the system prompt first — in the host's format.
    Expect(prepared->messages.size() > 0 && prepared->messages[0].role == recap::Role::kSystem &&
               recap::JoinedText(prepared->messages[0]) == system_prompt,
           "the system prompt is first and whole in turn " + std::to_string(turn + 1));
    // EncodeTranscriptTo writes what EncodeMessages would, from each message's kept encoded
    // form, into the string kept from the last turn (in its memory, once it is big enough): a
    // turn costs its new messages and one copy of the kept text, not the whole conversation
    // again, and no new memory.
    const recap::Status encoded =
        recap::openai_chat::EncodeTranscriptTo(prepared->messages, 0, &body);
    Expect(encoded.ok(), "the request encodes: " + encoded.ToString());
    Expect(!body.empty() && body.front() == '[', "the request is a JSON array of messages");
    Expect(prepared->after_chars <= max_chars,
           "the request of turn " + std::to_string(turn + 1) + " is within the limit");
    const recap::PairingReport pairing = recap::AnalyzePairing(prepared->messages);
    Expect(pairing.uncertain.empty() && pairing.orphans.empty(),
           "no tool call is separated from its result in turn " + std::to_string(turn + 1));
  }

  // The history holds every message the host appended exactly once, plus what recap wrote.
  recap::Result<std::vector<recap::HistoryEntry>> history = store->History(session);
  Expect(history.ok(), "the history reads: " + history.status().ToString());
  if (history.ok()) {
    // A clipped copy keeps its original's id, so distinct ids count the host's messages.
    std::set<std::string> ids;
    for (const recap::HistoryEntry& entry : *history) {
      if (!entry.message.summary) ids.insert(entry.message.id);
    }
    std::printf("history: %zu entries, %zu distinct messages of the host\n", history->size(),
                ids.size());
    Expect(ids.size() == appended, "the history holds each of the " + std::to_string(appended) +
                                       " appended messages, got " + std::to_string(ids.size()));
  }

  // The instructions, then the checkpoint, at the head of the session, as the model reads them.
  recap::Result<recap::SessionState> state = store->Load(session);
  Expect(state.ok() && state->transcript.size() > 1 &&
             state->transcript[0].role == recap::Role::kSystem && state->transcript[1].summary,
         "the session starts with its instructions, then a checkpoint");
  if (state.ok() && state->transcript.size() > 1 && state->transcript[1].summary) {
    std::printf("checkpoint:\n%s\n", recap::JoinedText(state->transcript[1]).c_str());
  }

  Expect(compactions >= 1, "the session was compacted at least once");
  Expect(sink->counts["compaction_completed"] >= 1, "compaction_completed was reported");
  if (failures != 0) return 1;
  std::printf("ok: %zu messages appended, %zu compaction(s), every request within %zu characters\n",
              appended, compactions, max_chars);
  return 0;
}
