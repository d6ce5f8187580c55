// recap_host_loop — the few lines an agent host adds around each model request.
//
// The host keeps its conversation in OpenAI chat-completions JSON. As messages arrive it
// appends them to a recap::Transcript (which measures each one once). Right before each
// request it checks the size against its limit; when over, it asks where a compaction would
// cut and clips the tail with the reducer so that the request fits. (Summarizing the part
// before the cut is the Compactor's job, which arrives with a later release of recap; with the
// core alone the host can already keep every request within its limit.)
//
// It runs as a test: it exits non-zero if a request would have been sent over the limit or if
// anything recap promises does not hold.
#include <cstdio>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "recap/recap.h"

namespace {

using nlohmann::json;

constexpr std::size_t kMaxContextChars = 12000;  // limits.maxContextChars, small for the demo

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

int failures = 0;
void Expect(bool ok, const std::string& what) {
  if (!ok) {
    std::fprintf(stderr, "recap_host_loop: FAILED: %s\n", what.c_str());
    ++failures;
  }
}

}  // namespace

int main() {
  const std::string system_prompt = "You are a careful software engineer. Keep answers short.";

  // What arrives in each turn: the user's message, then what the model and the tools say.
  const std::vector<std::vector<json>> turns = {
      {UserText("Why does parser_test fail?"),
       AssistantCall("call_1", "run", {{"cmd", "ctest -R parser"}}),
       ToolOutput("call_1", BuildLog(500)),  // a large tool output, about 16,000 characters
       AssistantText("Test 17 reads past the end of the buffer.")},
      {UserText("Fix it and rerun."),
       AssistantCall("call_2", "edit", {{"path", "parser.cc"}, {"line", 88}}),
       ToolOutput("call_2", "applied"),
       AssistantCall("call_3", "run", {{"cmd", "ctest -R parser"}}),
       ToolOutput("call_3", BuildLog(60)), AssistantText("Fixed; all parser tests pass.")},
      {UserText("Thanks. Summarize what changed."),
       AssistantText("parser.cc:88 now checks the remaining length before reading.")},
  };

  recap::Transcript transcript;
  const recap::Message instructions = recap::Message::SystemText(system_prompt);
  const std::size_t target =
      recap::ReductionTarget(kMaxContextChars, recap::MessageChars(instructions));
  std::size_t reductions = 0;

  for (std::size_t turn = 0; turn < turns.size(); ++turn) {
    for (const json& incoming : turns[turn]) {
      recap::Result<recap::Message> message = recap::openai_chat::DecodeMessage(incoming.dump());
      if (!message.ok()) {
        std::fprintf(stderr, "recap_host_loop: %s\n", message.status().ToString().c_str());
        return 1;
      }
      transcript.Append(std::move(message).value());
    }

    // Right before the next request.
    std::printf("turn %zu: %zu messages, %zu chars (~%zu tokens), limit %zu\n", turn + 1,
                transcript.size(), transcript.chars(), transcript.tokens(), target);
    if (transcript.chars() > target) {
      recap::CutOptions options;
      options.keep_turns = 2;
      const recap::CutDecision cut = recap::FindCut(transcript, options);
      if (cut.ok()) {
        std::printf("  a compaction would summarize messages [0, %zu) (%zu chars)\n", cut.position,
                    cut.summarized_chars);
      } else {
        std::printf("  a compaction would be skipped: %s\n", recap::SkipReasonName(cut.skip));
      }

      recap::ReduceResult reduced = recap::ReduceTail(transcript, target);
      std::printf("  reduced %zu -> %zu chars, %zu message(s) clipped, fits: %s\n",
                  reduced.before_chars, reduced.after_chars, reduced.clipped.size(),
                  reduced.fits ? "yes" : "no");
      Expect(reduced.fits,
             "the reducer brings turn " + std::to_string(turn + 1) + " within the limit");
      Expect(reduced.transcript.size() == transcript.size(), "the reducer keeps every message");
      transcript = std::move(reduced.transcript);
      ++reductions;
    }

    // The request: instructions + transcript, in the host's format.
    recap::Conversation request;
    request.instructions = instructions;
    request.messages = transcript.ToVector();
    recap::Result<std::string> body = recap::openai_chat::EncodeMessages(request);
    Expect(body.ok(), "the request encodes: " + body.status().ToString());
    Expect(transcript.chars() <= target,
           "the request of turn " + std::to_string(turn + 1) + " is within the limit");
  }

  // The tool-call ids the model produced are intact, each call still has its result.
  const recap::PairingReport pairing = recap::AnalyzePairing(transcript);
  Expect(pairing.pairs == 3, "three call/result pairs, got " + std::to_string(pairing.pairs));
  Expect(pairing.uncertain.empty() && pairing.orphans.empty(), "no call or result lost its pair");
  Expect(reductions >= 1, "the large tool output forced a reduction");

  if (failures != 0) return 1;
  std::printf("ok: every request stayed within %zu characters\n", target);
  return 0;
}
