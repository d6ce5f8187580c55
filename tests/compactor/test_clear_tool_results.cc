// The cheap tier before summarizing (SPEC R14.3, compaction.clearToolResults): when a trigger
// fires, older tool results are replaced by the exact marker; if that brings the request under
// the trigger no summarizer is called; it runs only when it frees minFreeChars; originals stay
// in the store; idempotent; tool_results_cleared; PlanFor says what it would clear. Over the
// store of support/test_store.h (in-memory, or SQLite / PostgreSQL with RECAP_TEST_STORE).
#include <map>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include "recap/compactor.h"
#include "recap/config.h"

#include "support/fake_provider.h"
#include "support/host.h"
#include "support/ok.h"
#include "support/recording_sink.h"

using namespace recap;

namespace {

using recap::testing::Ok;

// The shared host (support/host.h) over the scripted provider and the test store.
struct Host : recap::testing::CompactorHost<> {
  using CompactorHost::CompactorHost;
  // A turn: a request, `calls` tool calls of `tool` each answered with `output_chars`, a reply.
  void Turn(int n, const std::string& tool, std::size_t output_chars, int calls = 1) {
    std::vector<Message> m = {Message::UserText("request " + std::to_string(n))};
    for (int k = 0; k < calls; ++k) {
      const std::string id = "call_" + std::to_string(n) + "_" + std::to_string(k);
      m.push_back(Message::AssistantCalls({ToolCall{id, tool, R"({"path":"f.cc"})", {}}}));
      m.push_back(Message::ToolOutput(id, std::string(output_chars, 'o')));
    }
    m.push_back(Message::AssistantText("answer " + std::to_string(n)));
    Append("s", std::move(m));
  }
};

// A window of 10,000 tokens: the trigger at 8,500 tokens, about 34,000 characters.
Config Clearing(int keep_recent = 3, std::size_t min_free = 20000) {
  Config c;
  c.provider.context_window = 10000;
  c.compaction.keep_turns = 1;
  c.compaction.clear_tool_results.enabled = true;
  c.compaction.clear_tool_results.keep_recent = keep_recent;
  c.compaction.clear_tool_results.min_free_chars = min_free;
  return c;
}

// Each tool result of the transcript: its call id and its text.
std::map<std::string, std::string> Results(const Transcript& t) {
  std::map<std::string, std::string> out;
  for (const Message& m : t) {
    for (const Part& p : m.parts) {
      if (const auto* r = std::get_if<ToolResult>(&p)) {
        std::string text;
        for (const auto& item : r->content) {
          if (const auto* x = std::get_if<Text>(&item)) text += x->text;
        }
        out[r->call_id] = text;
      }
    }
  }
  return out;
}

const std::string kMarker =
    "[tool result cleared to save context; the original is in the session history]";

}  // namespace

TEST_CASE("R14.3 the marker is exactly the one the contract names", "[R14.3]") {
  CHECK(std::string(kClearedToolResultMarker) == kMarker);
}

TEST_CASE("R14.3 clearing old tool results instead of summarizing, when that is enough",
          "[R14.3]") {
  Host h(Clearing());
  for (int n = 0; n < 8; ++n) h.Turn(n, "read_file", 4500);  // 36,000 chars of results
  const SessionState loaded = Ok(h.store->Load("s"));
  const Transcript& before = loaded.transcript;

  // What Prepare would do, said first, with nothing written.
  const Plan plan = Ok(h.compactor->PlanFor("s", {}));
  CHECK(plan.trigger);
  CHECK(plan.would_clear);
  CHECK(plan.clearing_suffices);
  CHECK(plan.clearable_results == 5);  // all but the newest 3
  CHECK(plan.clearable_messages == 5);
  CHECK(plan.clearable_chars == 5 * (4500 - kMarker.size()));
  CHECK(Ok(h.store->Load("s")).version == loaded.version);

  const Prepared p = Ok(h.compactor->Prepare("s", {}));
  CHECK(p.cleared_tool_result_messages == 5);
  CHECK(p.compactions.empty());
  CHECK(h.provider->calls() == 0);  // no summarizer
  CHECK(p.after_chars == before.chars() - plan.clearable_chars);
  const auto results = Results(p.messages);
  REQUIRE(results.size() == 8);
  for (int n = 0; n < 8; ++n) {
    const std::string& text = results.at("call_" + std::to_string(n) + "_0");
    CHECK(text == (n < 5 ? kMarker : std::string(4500, 'o')));
  }
  const auto events = h.sink->OfType("tool_results_cleared");
  REQUIRE(events.size() == 1);
  CHECK(events[0]["messages"] == 5);
  CHECK(events[0]["results"] == 5);
  CHECK(events[0]["freed_chars"] == plan.clearable_chars);
  CHECK(h.sink->OfType("compaction_started").empty());

  // The originals stay in the store's history, compacted.
  std::size_t originals = 0;
  for (const auto& e : Ok(h.store->History("s"))) {
    for (const Part& part : e.message.parts) {
      const auto* r = std::get_if<ToolResult>(&part);
      if (r != nullptr && std::get<Text>(r->content[0]).text == std::string(4500, 'o') &&
          e.state == HistoryState::kCompacted) {
        ++originals;
      }
    }
  }
  CHECK(originals == 5);

  // Idempotent: nothing more to clear, nothing written, no event.
  const std::uint64_t version = Ok(h.store->Load("s")).version;
  const Prepared again = Ok(h.compactor->Prepare("s", {}));
  CHECK(again.cleared_tool_result_messages == 0);
  CHECK(Ok(h.store->Load("s")).version == version);
  CHECK(h.sink->OfType("tool_results_cleared").size() == 1);
  const Plan after = Ok(h.compactor->PlanFor("s", {}));
  CHECK(after.clearable_results == 0);
}

TEST_CASE("R14.3 excluded tools and the newest keepRecent results are never cleared", "[R14.3]") {
  Host h(Clearing(2, 1000));
  Config config = Clearing(2, 1000);
  config.compaction.clear_tool_results.exclude_tools = {"memory"};
  Host x(config);
  for (Host* host : {&h, &x}) {
    for (int n = 0; n < 8; ++n) host->Turn(n, n % 2 == 0 ? "memory" : "read_file", 4500);
    Ok(host->compactor->Prepare("s", {}));
  }
  const auto all = Results(Ok(h.store->Load("s")).transcript);
  const auto kept = Results(Ok(x.store->Load("s")).transcript);
  for (int n = 0; n < 8; ++n) {
    const std::string id = "call_" + std::to_string(n) + "_0";
    CHECK((all.at(id) == kMarker) == (n < 6));
    CHECK((kept.at(id) == kMarker) == (n < 6 && n % 2 == 1));
  }
}

TEST_CASE("R14.3 below minFreeChars it does not run, and the summarizer does the work", "[R14.3]") {
  // 200 results of 150 chars: clearing frees 197 x 71 = ~14,000 chars, under 20,000.
  Host h(Clearing());
  for (int n = 0; n < 20; ++n) h.Turn(n, "grep", 150, 10);
  const Plan plan = Ok(h.compactor->PlanFor("s", {}));
  CHECK(plan.trigger);
  CHECK(plan.clearable_results == 197);
  CHECK(plan.clearable_chars < 20000);
  CHECK_FALSE(plan.would_clear);
  const Prepared p = Ok(h.compactor->Prepare("s", {}));
  CHECK(p.cleared_tool_result_messages == 0);
  CHECK(p.compactions.size() == 1);
  CHECK(h.sink->OfType("tool_results_cleared").empty());
  // With a lower minimum, the same session clears instead.
  Host low(Clearing(3, 1000));
  for (int n = 0; n < 20; ++n) low.Turn(n, "grep", 150, 10);
  CHECK(Ok(low.compactor->PlanFor("s", {})).would_clear);
}

TEST_CASE("R14.3 when clearing is not enough the summarizer runs after it", "[R14.3]") {
  Host h(Clearing());
  // Long answers the tier cannot touch keep the request over the trigger.
  for (int n = 0; n < 8; ++n) {
    h.Turn(n, "read_file", 4500);
    REQUIRE(h.store->Append("s", Message::AssistantText(std::string(3000, 'w'))).ok());
  }
  const Plan plan = Ok(h.compactor->PlanFor("s", {}));
  CHECK(plan.would_clear);
  CHECK_FALSE(plan.clearing_suffices);
  const Prepared p = Ok(h.compactor->Prepare("s", {}));
  CHECK(p.cleared_tool_result_messages == 5);
  CHECK(p.compactions.size() == 1);
  CHECK(h.provider->calls() >= 1);
  const auto types = h.sink->types();
  REQUIRE(types.size() >= 3);
  CHECK(types[0] == "tool_results_cleared");
  CHECK(types[1] == "compaction_started");
}

TEST_CASE("R14.3 off by default, and not for an overflow the model reported", "[R14.3]") {
  Config config = Clearing();
  config.compaction.clear_tool_results.enabled = false;
  Host off(config);
  for (int n = 0; n < 8; ++n) off.Turn(n, "read_file", 4500);
  CHECK(Ok(off.compactor->PlanFor("s", {})).clearable_results == 0);
  const Prepared p = Ok(off.compactor->Prepare("s", {}));
  CHECK(p.cleared_tool_result_messages == 0);
  CHECK(p.compactions.size() == 1);
  CHECK(Config().compaction.clear_tool_results.enabled == false);

  Config roomy = Clearing();
  roomy.provider.context_window = 1000000;
  Host h(roomy);
  for (int n = 0; n < 8; ++n) h.Turn(n, "read_file", 4500);
  h.compactor->ReportOverflow("s", 9000);
  const Prepared o = Ok(h.compactor->Prepare("s", {}));
  CHECK(o.cleared_tool_result_messages == 0);
  CHECK(o.compactions == std::vector<CompactionReason>{CompactionReason::kOverflow});
}
