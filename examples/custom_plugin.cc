// recap_custom_plugin — extending a compaction with a PluginHook of your own.
//
// The plugin here, "open-tasks", makes sure the tasks a user asked for and that are not done
// yet survive every compaction:
//
//   * BeforeCompact asks the summarizer for one more member of the checkpoint object,
//     "open_tasks" (an array of strings), and adds a sentence to its instructions;
//   * AfterCompact reads that member back, injects the list into the compacted transcript as
//     context right after the checkpoint, and reports how many tasks it carried over (the
//     report appears in the compaction_completed event).
//
// A plugin may fail: an error it returns, an exception it throws or a hook that overruns
// pluginHooks.timeoutMs is reported as a plugin_hook_failed event and the compaction goes on
// without it (SPEC R9). Here a reply whose "open_tasks" is not a list of strings is refused
// that way.
//
// The summarizer is a stand-in Provider — a few lines that play a model answering with a
// checkpoint object — because the offline summarizer writes the fixed checkpoint only and has
// no way to fill a plugin's member. A real host passes recap's HTTP provider (or its own
// client) instead; nothing else changes.
//
// It runs as a test: exit 0 when the open tasks reached the transcript and the report reached
// the event, 1 otherwise.
#include <cstdio>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "recap/recap.h"

namespace {

using nlohmann::json;

// --- the plugin ---------------------------------------------------------------------------

class OpenTasksPlugin : public recap::PluginHook {
 public:
  std::string Name() const override { return "open-tasks"; }

  recap::Result<recap::BeforeCompactResult> BeforeCompact(
      const recap::BeforeCompactContext& context, const recap::CancellationToken&) override {
    std::printf("  open-tasks: %zu messages (%zu chars) are about to be summarized\n",
                context.messages, context.chars);
    recap::BeforeCompactResult result;
    result.instructions =
        "Also list, in open_tasks, every task the user asked for that is not finished yet, "
        "one short imperative sentence each.";
    result.output_fields.push_back({"open_tasks", "the user's unfinished tasks, one sentence each",
                                    R"({"type": "array", "items": {"type": "string"}})"});
    return result;
  }

  recap::Result<recap::AfterCompactResult> AfterCompact(const recap::AfterCompactContext& context,
                                                        const recap::CancellationToken&) override {
    recap::AfterCompactResult result;
    auto field = context.fields.find("open_tasks");
    if (field == context.fields.end()) {
      result.report = "the summarizer listed no open tasks";
      return result;
    }
    const json tasks = json::parse(field->second, nullptr, false);
    if (!tasks.is_array()) {
      return recap::Status::InvalidArgument("open_tasks is not a list: " + field->second);
    }
    std::string context_text = "Tasks still open from the summarized part of the conversation:\n";
    for (const json& task : tasks) {
      if (!task.is_string()) {
        return recap::Status::InvalidArgument("open_tasks holds a non-string: " + task.dump());
      }
      context_text += "- " + task.get<std::string>() + "\n";
    }
    if (!tasks.empty()) result.inject_context = context_text;
    result.report = std::to_string(tasks.size()) + " open task(s) carried over";
    return result;
  }
};

// --- a stand-in for the model ---------------------------------------------------------------

// Answers the summarizer's request with a checkpoint object; puts every user request that has
// no "done" answer yet into open_tasks. It also checks that the plugin's member reached the
// JSON schema recap sends.
class StandInModel : public recap::Provider {
 public:
  recap::Result<recap::Completion> Complete(const recap::CompletionRequest& request,
                                            const recap::CancellationToken&) override {
    saw_field = request.json_schema && request.json_schema->find("open_tasks") != std::string::npos;
    saw_instructions = request.system_prompt.find("open_tasks") != std::string::npos;
    json open = json::array();
    std::string goal;
    if (request.source != nullptr && request.source->span != nullptr) {
      for (const recap::Message& m : request.source->span->ToVector()) {
        const std::string text = recap::JoinedText(m);
        if (m.role == recap::Role::kUser && text.rfind("Please ", 0) == 0) {
          if (goal.empty()) goal = text;
          open.push_back(text.substr(7));
        }
        if (m.role == recap::Role::kAssistant && text.rfind("Done: ", 0) == 0 && !open.empty()) {
          open.erase(open.begin());  // the oldest request is done
        }
      }
    }
    const json checkpoint = {{"goal", goal},
                             {"current_state", "Working through the user's requests."},
                             {"open_tasks", open}};
    recap::Completion completion;
    completion.text = checkpoint.dump();
    return completion;
  }
  std::string Name() const override { return "stand-in-model"; }

  bool saw_field = false;
  bool saw_instructions = false;
};

class KeepingSink : public recap::EventSink {
 public:
  void OnEvent(const recap::Event& event) override {
    std::printf("  event %s\n", event.json.c_str());
    events.push_back(event);
  }
  std::vector<recap::Event> events;
};

int failures = 0;
void Expect(bool ok, const std::string& what) {
  if (!ok) {
    std::fprintf(stderr, "recap_custom_plugin: FAILED: %s\n", what.c_str());
    ++failures;
  }
}

}  // namespace

int main() {
  const std::string session = "plugin-example";
  recap::Config config;
  config.compaction.keep_turns = 1;

  auto store = recap::NewInMemorySessionStore();
  auto model = std::make_shared<StandInModel>();
  auto plugin = std::make_shared<OpenTasksPlugin>();
  auto sink = std::make_shared<KeepingSink>();
  recap::Result<std::unique_ptr<recap::Compactor>> created =
      recap::Compactor::Create(config, model, store, {plugin}, {sink});
  if (!created.ok()) {
    std::fprintf(stderr, "recap_custom_plugin: %s\n", created.status().ToString().c_str());
    return 1;
  }
  recap::Compactor& compactor = **created;

  // Three requests; the first is finished, two are not.
  const std::vector<std::pair<recap::Role, std::string>> conversation = {
      {recap::Role::kUser, "Please rename parse_header to ParseHeader everywhere."},
      {recap::Role::kAssistant, "Done: renamed in 14 files."},
      {recap::Role::kUser, "Please add a test for an empty header."},
      {recap::Role::kAssistant, "Writing the test now."},
      {recap::Role::kUser, "Please update the changelog when the test passes."},
      {recap::Role::kAssistant, "Noted."},
      {recap::Role::kUser, "How long will the test take?"},
      {recap::Role::kAssistant, "A few minutes."},
  };
  for (const auto& [role, text] : conversation) {
    recap::Message m = role == recap::Role::kUser ? recap::Message::UserText(text)
                                                  : recap::Message::AssistantText(text);
    recap::Result<std::uint64_t> stored = store->Append(session, std::move(m));
    if (!stored.ok()) {
      std::fprintf(stderr, "recap_custom_plugin: %s\n", stored.status().ToString().c_str());
      return 1;
    }
  }

  std::printf("compacting (keepTurns 1):\n");
  recap::Result<recap::CompactOutcome> outcome = compactor.Compact(session, {});
  if (!outcome.ok()) {
    std::fprintf(stderr, "recap_custom_plugin: %s\n", outcome.status().ToString().c_str());
    return 1;
  }
  Expect(outcome->compacted, "the session was compacted");
  Expect(model->saw_field, "the plugin's open_tasks member reached the summarizer's schema");
  Expect(model->saw_instructions, "the plugin's instructions reached the summarizer");

  recap::Result<recap::SessionState> state = store->Load(session);
  Expect(state.ok(), "the session loads");
  if (!state.ok()) return 1;
  std::printf("\nthe transcript a model now receives:\n");
  bool injected = false;
  for (const recap::Message& m : state->transcript.ToVector()) {
    const std::string text = recap::JoinedText(m);
    std::printf("  [%s%s] %s\n", recap::RoleName(m.role), m.summary ? ", by recap" : "",
                text.substr(0, text.find('\n')).c_str());
    if (text.find("- add a test for an empty header.") != std::string::npos &&
        text.find("- update the changelog") != std::string::npos) {
      injected = true;
    }
  }
  Expect(injected, "the two open tasks were injected after the checkpoint");
  bool reported = false;
  for (const recap::Event& e : sink->events) {
    if (e.type == "compaction_completed" &&
        e.json.find(R"({"name":"open-tasks","report":"2 open task(s) carried over"})") !=
            std::string::npos) {
      reported = true;
    }
  }
  Expect(reported, "compaction_completed carries the plugin's report");
  if (failures != 0) return 1;
  std::printf("ok: the open tasks survived the compaction\n");
  return 0;
}
