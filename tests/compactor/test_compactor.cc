// The Compactor: Prepare's triggers and order (R2, R7), the checkpoint's way into the
// transcript (R3.5, R4, R5), the hard limit (R6.5, R6.6), recovery (R8.3), plugins (R9) and
// events (R10), end to end over the scripted provider and the store of support/test_store.h
// (the in-memory store, or the SQLite store with RECAP_TEST_STORE=sqlite).
#include <string>
#include <vector>

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include "recap/compactor.h"
#include "recap/measure.h"
#include "recap/memory_plugin.h"
#include "recap/offline_summarizer.h"
#include "recap/tail_reducer.h"

#include "support/fake_provider.h"
#include "support/recording_hook.h"
#include "support/recording_sink.h"
#include "support/test_store.h"

using namespace recap;
using recap::testing::RecordingHook;
using recap::testing::RecordingSink;
using recap::testing::ScriptedProvider;
using recap::testing::ScriptedStep;

namespace {

const std::string kS = "session-1";

Config SmallConfig(std::size_t max_chars = 20000) {
  Config c;
  c.limits.max_context_chars = max_chars;
  return c;
}

struct Harness {
  std::shared_ptr<ScriptedProvider> provider = std::make_shared<ScriptedProvider>();
  std::shared_ptr<SessionStore> store = recap::testing::NewTestSessionStore();
  std::shared_ptr<RecordingSink> sink = std::make_shared<RecordingSink>();
  std::unique_ptr<Compactor> compactor;

  explicit Harness(Config config = SmallConfig(),
                   std::vector<std::shared_ptr<PluginHook>> plugins = {}) {
    auto made = Compactor::Create(config, provider, store, std::move(plugins), {sink});
    REQUIRE(made.ok());
    compactor = std::move(made).value();
  }

  void Append(Message m) { REQUIRE(store->Append(kS, std::move(m)).ok()); }
  // A turn: the user asks, the assistant calls a tool, the tool answers, the assistant answers.
  void Turn(int n, std::size_t output_chars = 100) {
    const std::string id = "call_" + std::to_string(n);
    Append(Message::UserText("request " + std::to_string(n)));
    Append(Message::AssistantCalls({ToolCall{id, "read_file", R"({"path":"src/f.cc"})", {}}}));
    Append(Message::ToolOutput(id, std::string(output_chars, 'o')));
    Append(Message::AssistantText("answer " + std::to_string(n)));
  }
  Transcript Active() {
    auto s = store->Load(kS);
    REQUIRE(s.ok());
    return s->transcript;
  }
  std::vector<std::string> Types() { return sink->types(); }
};

bool HasType(const std::vector<std::string>& types, const std::string& t) {
  return std::find(types.begin(), types.end(), t) != types.end();
}

std::size_t SummaryCount(const Transcript& t) {
  std::size_t n = 0;
  for (const Message& m : t) n += m.summary ? 1 : 0;
  return n;
}

}  // namespace

TEST_CASE("R7.2 nothing to do: the transcript comes back as stored, no model call, no event") {
  Harness h;
  h.Turn(1);
  auto p = h.compactor->Prepare(kS, {});
  REQUIRE(p.ok());
  CHECK(p->messages.size() == 4);
  CHECK(p->compactions.empty());
  CHECK(p->reduced_messages == 0);
  CHECK(p->before_chars == p->after_chars);
  CHECK(h.provider->calls() == 0);
  CHECK(h.sink->size() == 0);
  // Appending after the first call is picked up incrementally.
  h.Turn(2);
  auto p2 = h.compactor->Prepare(kS, {});
  REQUIRE(p2.ok());
  CHECK(p2->messages.size() == 8);
  CHECK(p2->messages[7].id == h.Active()[7].id);
}

TEST_CASE("R2.3 the character rule fires at threshold x maxContextChars even with a huge window") {
  Config c = SmallConfig(10000);
  c.provider.context_window = 1000000;  // 850k tokens would never trigger
  Harness h(c);
  for (int i = 1; i <= 3; ++i) h.Turn(i, 2000);  // ~6,200 chars
  RequestSizes sizes;
  sizes.instructions_chars = 1000;
  auto plan = h.compactor->PlanFor(kS, sizes);
  REQUIRE(plan.ok());
  CHECK_FALSE(plan->trigger);
  // The tool catalog counts for the triggers (it is part of what the model sees).
  sizes.tool_catalog_chars = 1500;
  plan = h.compactor->PlanFor(kS, sizes);
  REQUIRE(plan.ok());
  CHECK(plan->trigger);
  CHECK(plan->rule == "chars");
  CHECK(plan->trigger_chars == 8500);
  auto p = h.compactor->Prepare(kS, sizes);
  REQUIRE(p.ok());
  CHECK(p->compactions == std::vector<recap::CompactionReason>{recap::CompactionReason::kAuto});
  CHECK(SummaryCount(h.Active()) == 1);
}

TEST_CASE("R2.1 the window rule fires at threshold x window in estimated tokens") {
  Config c = SmallConfig(800000);
  c.provider.context_window = 1000;  // trigger at 850 tokens = 3,397+ characters
  Harness h(c);
  h.Append(Message::UserText(std::string(3396, 'a')));
  auto plan = h.compactor->PlanFor(kS, {});
  REQUIRE(plan.ok());
  CHECK(plan->window_tokens == std::optional<std::size_t>(1000));
  CHECK(plan->trigger_tokens == 850);
  CHECK_FALSE(plan->trigger);
  h.Append(Message::AssistantText("b"));
  plan = h.compactor->PlanFor(kS, {});
  CHECK(plan->trigger);
  CHECK(plan->rule == "window");
}

TEST_CASE("R2.2 with no trusted window, the window is maxContextChars / 4") {
  Config c = SmallConfig(8000);
  c.provider.context_window = 5000000;  // above the trust limit: ignored (R1.2)
  Harness h(c);
  h.provider->SetContextWindow(std::nullopt);
  auto plan = h.compactor->PlanFor(kS, {});
  REQUIRE(plan.ok());
  CHECK_FALSE(plan->window_tokens.has_value());
  CHECK(plan->trigger_tokens == 1700);  // 0.85 x 2000
}

TEST_CASE("R1.2 the window comes from config, then the host's profile, then the provider") {
  SECTION("provider") {
    Harness h(SmallConfig(800000));
    h.provider->SetContextWindow(100000);
    CHECK(h.compactor->PlanFor(kS, {})->window_tokens == std::optional<std::size_t>(100000));
  }
  SECTION("profile over provider") {
    Harness h(SmallConfig(800000));
    h.provider->SetContextWindow(100000);
    RequestSizes sizes;
    sizes.profile_context_window = 64000;
    CHECK(h.compactor->PlanFor(kS, sizes)->window_tokens == std::optional<std::size_t>(64000));
  }
  SECTION("config over both; an untrusted provider value counts as unknown") {
    Config c = SmallConfig(800000);
    c.provider.context_window = 32000;
    Harness h(c);
    h.provider->SetContextWindow(3000000);
    RequestSizes sizes;
    sizes.profile_context_window = 64000;
    CHECK(h.compactor->PlanFor(kS, sizes)->window_tokens == std::optional<std::size_t>(32000));
  }
  SECTION("untrusted everywhere") {
    Harness h(SmallConfig(800000));
    h.provider->SetContextWindow(2000001);
    CHECK_FALSE(h.compactor->PlanFor(kS, {})->window_tokens.has_value());
  }
}

TEST_CASE("R2.4 calibration uses the provider's prompt-token count when switched on") {
  for (bool calibrate : {false, true}) {
    Config c = SmallConfig(800000);
    c.provider.context_window = 10000;  // trigger at 8,500 tokens
    c.compaction.calibrate = calibrate;
    Harness h(c);
    h.Turn(1, 400);
    REQUIRE(h.compactor->Prepare(kS, {}).ok());
    // The real tokenizer counted far more than the estimate (e.g. a dense language).
    h.compactor->ReportPromptTokens(kS, 8400);
    h.Append(Message::UserText(std::string(800, 'x')));  // +200 estimated tokens
    auto plan = h.compactor->PlanFor(kS, {});
    REQUIRE(plan.ok());
    INFO("calibrate " << calibrate);
    CHECK(plan->trigger == calibrate);
  }
}

TEST_CASE(
    "R2.5 after two weak auto compactions in a row, auto compaction pauses until a new turn") {
  Config c = SmallConfig(1000000);
  c.compaction.threshold = 0.1;  // trigger at 100,000 characters; the hard limit stays far away
  Harness h(c);
  // Checkpoints as big as R12.7 lets them be (just under half the trigger): each compaction
  // frees less than a tenth of the request.
  ScriptedStep echo;
  echo.respond = [](const CompletionRequest&) {
    return R"({"goal":")" + std::string(47000, 'g') + R"("})";
  };
  h.provider->SetDefault(echo);
  RequestSizes sizes;
  // A catalog below the trigger (R12.4: one above it would make compaction pointless) that
  // with the checkpoint and the kept turn keeps every request above it.
  sizes.tool_catalog_chars = 60000;
  for (int i = 1; i <= 4; ++i) h.Turn(i, 15000);
  h.Append(Message::UserText(std::string(30000, 'q')));
  auto p1 = h.compactor->Prepare(kS, sizes);
  REQUIRE(p1.ok());
  CHECK(p1->compactions.size() == 1);
  h.Append(Message::AssistantCalls({ToolCall{"x1", "t", "{}", {}}}));
  h.Append(Message::ToolOutput("x1", std::string(200, 'r')));
  auto p2 = h.compactor->Prepare(kS, sizes);
  REQUIRE(p2.ok());
  CHECK(p2->compactions.size() == 1);
  const std::size_t calls_after_two = h.provider->calls();
  h.sink->Clear();
  // Same turn: paused.
  h.Append(Message::AssistantCalls({ToolCall{"x2", "t", "{}", {}}}));
  h.Append(Message::ToolOutput("x2", std::string(100, 'r')));
  auto p3 = h.compactor->Prepare(kS, sizes);
  REQUIRE(p3.ok());
  CHECK(p3->compactions.empty());
  auto skipped = h.sink->OfType("compaction_skipped");
  REQUIRE(skipped.size() == 1);
  CHECK(skipped[0]["reason"] == "no_progress");
  CHECK(h.provider->calls() == calls_after_two);
  // A new turn lifts the pause.
  h.Append(Message::UserText("next request"));
  auto p4 = h.compactor->Prepare(kS, sizes);
  REQUIRE(p4.ok());
  CHECK(h.provider->calls() > calls_after_two);
}

TEST_CASE("R2.6 an overflow report triggers the next Prepare and lowers the window") {
  Config c = SmallConfig(800000);
  Harness h(c);
  for (int i = 1; i <= 4; ++i) h.Turn(i, 500);
  auto p = h.compactor->Prepare(kS, {});
  REQUIRE(p.ok());
  CHECK(p->compactions.empty());
  h.compactor->ReportOverflow(kS, 900);
  auto plan = h.compactor->PlanFor(kS, {});
  REQUIRE(plan.ok());
  CHECK(plan->trigger);
  CHECK(plan->reason == recap::CompactionReason::kOverflow);
  CHECK(plan->window_tokens == std::optional<std::size_t>(900));
  auto p2 = h.compactor->Prepare(kS, {});
  REQUIRE(p2.ok());
  CHECK(p2->compactions ==
        std::vector<recap::CompactionReason>{recap::CompactionReason::kOverflow});
  auto started = h.sink->OfType("compaction_started");
  REQUIRE(started.size() == 1);
  CHECK(started[0]["reason"] == "overflow");
}

TEST_CASE("R2.6 overflow obeys auto: with auto off nothing compacts") {
  Config c = SmallConfig(800000);
  c.compaction.auto_compact = false;
  Harness h(c);
  for (int i = 1; i <= 4; ++i) h.Turn(i, 500);
  h.compactor->ReportOverflow(kS, 100);
  auto p = h.compactor->Prepare(kS, {});
  REQUIRE(p.ok());
  CHECK(p->compactions.empty());
  CHECK(h.provider->calls() == 0);
}

TEST_CASE("R3.5 a previous checkpoint is merged into the next one, never kept beside it") {
  Harness h(SmallConfig(10000));
  RequestSizes sizes;
  sizes.tool_catalog_chars = 1000;
  for (int i = 1; i <= 4; ++i) h.Turn(i, 1500);
  h.Append(Message::UserText(std::string(2000, 'n')));
  REQUIRE(h.compactor->Prepare(kS, sizes).ok());
  REQUIRE(SummaryCount(h.Active()) == 1);
  for (int i = 5; i <= 8; ++i) h.Turn(i, 1500);
  REQUIRE(h.compactor->Prepare(kS, sizes).ok());
  CHECK(SummaryCount(h.Active()) == 1);
  CHECK(h.Active()[0].summary);
  auto requests = h.provider->Requests();
  REQUIRE(requests.size() >= 2);
  CHECK(requests.back().prior.has_value());  // the earlier checkpoint arrives as prior state
}

TEST_CASE("R3.7 uncertain tool results block compaction until recovered (R8.3)") {
  Harness h(SmallConfig(10000));
  for (int i = 1; i <= 4; ++i) h.Turn(i, 1500);
  h.Append(Message::AssistantCalls({ToolCall{"lost", "deploy", R"({"env":"prod"})", {}}}));
  h.Append(Message::UserText(std::string(3000, 'u')));
  auto p = h.compactor->Prepare(kS, {});
  REQUIRE(p.ok());
  auto skipped = h.sink->OfType("compaction_skipped");
  REQUIRE(skipped.size() == 1);
  CHECK(skipped[0]["reason"] == "uncertain_tool_results");

  auto refused = h.compactor->Recover(kS, false);
  REQUIRE_FALSE(refused.ok());
  CHECK(refused.status().code() == StatusCode::kFailedPrecondition);
  CHECK(refused.status().message().find("lost (deploy)") != std::string::npos);
  CHECK(refused.status().message().find("never re-runs") != std::string::npos);
  CHECK(FindUncertainToolCalls(h.Active()).size() == 1);  // refused: nothing changed

  auto recovered = h.compactor->Recover(kS, true);
  REQUIRE(recovered.ok());
  REQUIRE(recovered->recovered.size() == 1);
  Transcript t = h.Active();
  CHECK(FindUncertainToolCalls(t).empty());
  // The result sits right after the call and says the outcome is unknown.
  std::size_t call_at = 0;
  for (std::size_t i = 0; i < t.size(); ++i) {
    if (HasToolCalls(t[i]) && std::get<ToolCall>(t[i].parts[0]).id == "lost") call_at = i;
  }
  const auto& r = std::get<ToolResult>(t[call_at + 1].parts.at(0));
  CHECK(r.call_id == "lost");
  CHECK(r.is_error);
  // What the recorded result says (JoinedText reads text parts only, and a result has none).
  REQUIRE(r.content.size() == 1);
  const auto* said = std::get_if<Text>(&r.content[0]);
  REQUIRE(said != nullptr);
  CHECK(said->text.rfind("Outcome unknown: the session stopped before this tool call's result "
                         "was recorded.",
                         0) == 0);
  CHECK(said->text.find("The call was not repeated.") != std::string::npos);
  h.sink->Clear();
  REQUIRE(h.compactor->Prepare(kS, {}).ok());
  CHECK(HasType(h.Types(), "compaction_completed"));
}

TEST_CASE("R4.4 R4.5 the checkpoint is one summary message, summarized opaque items go with it") {
  Harness h(SmallConfig(10000));
  Message thinking;
  thinking.role = Role::kAssistant;
  thinking.parts.emplace_back(
      Opaque{"thinking", R"({"type":"thinking","signature":"old"})", OpaqueLink::kNone, {}});
  thinking.parts.emplace_back(Text{"first thoughts", {}});
  h.Append(Message::UserText("start"));
  h.Append(thinking);
  for (int i = 1; i <= 4; ++i) h.Turn(i, 1500);
  Message kept = thinking;
  std::get<Opaque>(kept.parts[0]).payload = R"({"type":"thinking","signature":"new"})";
  h.Append(Message::UserText(std::string(3000, 'q')));
  h.Append(kept);
  REQUIRE(h.compactor->Prepare(kS, {}).ok());
  Transcript t = h.Active();
  REQUIRE(t[0].summary);
  CHECK(t[0].role == Role::kUser);
  CHECK(JoinedText(t[0]).find("# Checkpoint") != std::string::npos);
  CHECK(JoinedText(t[0]).find("## Goal") != std::string::npos);
  std::size_t opaque = 0;
  for (const Message& m : t) {
    for (const auto& part : m.parts) {
      if (const auto* o = std::get_if<Opaque>(&part)) {
        ++opaque;
        CHECK(o->payload == R"({"type":"thinking","signature":"new"})");
      }
    }
  }
  CHECK(opaque == 1);
}

TEST_CASE("R4.6 manual compaction runs with auto off and passes the focus") {
  Config c = SmallConfig(800000);
  c.compaction.auto_compact = false;
  Harness h(c);
  for (int i = 1; i <= 4; ++i) h.Turn(i);
  CompactOptions options;
  options.focus = "keep the database migration details";
  auto out = h.compactor->Compact(kS, options);
  REQUIRE(out.ok());
  CHECK(out->compacted);
  CHECK(out->summarized_messages == 8);
  CHECK(out->writer == "scripted");
  auto requests = h.provider->Requests();
  REQUIRE(requests.size() == 1);
  CHECK(requests[0].focus == "keep the database migration details");
  CHECK(requests[0].request.system_prompt.find("keep the database migration details") !=
        std::string::npos);
  auto started = h.sink->OfType("compaction_started");
  REQUIRE(started.size() == 1);
  CHECK(started[0]["reason"] == "manual");
}

TEST_CASE("R3.6 manual compaction with nothing to summarize is skipped and changes nothing") {
  Harness h;
  h.Append(Message::UserText("only message"));
  auto out = h.compactor->Compact(kS);
  REQUIRE(out.ok());
  CHECK_FALSE(out->compacted);
  CHECK(out->skipped == SkipReason::kNothingToSummarize);
  CHECK(h.sink->OfType("compaction_skipped").at(0)["reason"] == "nothing_to_summarize");
  CHECK(h.Active().size() == 1);
}

TEST_CASE("R5.2 a cut reply that still holds a checkpoint is kept and marked partial") {
  Harness h(SmallConfig(800000));
  for (int i = 1; i <= 4; ++i) h.Turn(i);
  h.provider->Push(ScriptedStep::Truncated(
      R"({"goal":"migrate the db","instructions":["use alembic"],"discoveries":["the )"));
  auto out = h.compactor->Compact(kS);
  REQUIRE(out.ok());
  CHECK(out->partial);
  CHECK(out->checkpoint.goal == "migrate the db");
  auto done = h.sink->OfType("compaction_completed");
  REQUIRE(done.size() == 1);
  CHECK(done[0]["checkpoint"]["partial"] == true);
  CHECK(done[0]["checkpoint"]["structured"] == true);
}

TEST_CASE("R5.3 a cut reply with nothing usable fails, names maxOutputTokens, changes nothing") {
  Config c = SmallConfig(800000);
  c.compaction.max_output_tokens = 321;
  Harness h(c);
  for (int i = 1; i <= 4; ++i) h.Turn(i);
  const Transcript before = h.Active();
  h.provider->Push(ScriptedStep::Truncated(""));
  auto out = h.compactor->Compact(kS);
  REQUIRE_FALSE(out.ok());
  CHECK(out.status().message().find("compaction.maxOutputTokens") != std::string::npos);
  CHECK(out.status().message().find("321") != std::string::npos);
  CHECK(out.status().message().find("Raise") != std::string::npos);
  CHECK(h.Active().size() == before.size());
  auto failed = h.sink->OfType("compaction_failed");
  REQUIRE(failed.size() == 1);
  CHECK(failed[0]["reason"] == "manual");
}

TEST_CASE("R1.3 with fallback offline a failed summarizer call is replaced by the offline one") {
  Config c = SmallConfig(800000);
  c.compaction.fallback = Fallback::kOffline;
  Harness h(c);
  for (int i = 1; i <= 4; ++i) h.Turn(i);
  h.provider->Push(ScriptedStep::Fail(Status::Unavailable("HTTP 503 from http://127.0.0.1:9/v1")));
  auto out = h.compactor->Compact(kS);
  REQUIRE(out.ok());
  CHECK(out->writer == "offline");
  CHECK(out->checkpoint.goal.find("request 1") != std::string::npos);
  auto done = h.sink->OfType("compaction_completed");
  REQUIRE(done.size() == 1);
  CHECK(done[0]["checkpoint"]["writer"] == "offline");
}

TEST_CASE("R7.1 a failed compaction changes nothing, is reported, and Prepare goes on") {
  SECTION("the provider fails") {
    Harness h(SmallConfig(10000));
    for (int i = 1; i <= 4; ++i) h.Turn(i, 2100);  // 8,580 chars: over the 8,500 trigger
    h.provider->Push(ScriptedStep::Fail(Status::Unavailable("connection refused")));
    auto p = h.compactor->Prepare(kS, {});
    REQUIRE(p.ok());  // under the hard limit: the request goes out uncompacted
    CHECK(p->compactions.empty());
    auto failed = h.sink->OfType("compaction_failed");
    REQUIRE(failed.size() == 1);
    CHECK(failed[0]["reason"] == "auto");
    CHECK(failed[0]["error"].get<std::string>().find("connection refused") != std::string::npos);
    CHECK(SummaryCount(h.Active()) == 0);
    CHECK(h.Active().size() == 16);
  }
  SECTION("the provider throws") {
    Harness h(SmallConfig(800000));
    for (int i = 1; i <= 4; ++i) h.Turn(i);
    h.provider->Push(ScriptedStep::Throw("boom"));
    const std::size_t before = h.Active().size();
    auto out = h.compactor->Compact(kS);
    REQUIRE_FALSE(out.ok());
    CHECK(out.status().message().find("boom") != std::string::npos);
    CHECK(h.Active().size() == before);
    CHECK(h.sink->OfType("compaction_failed").size() == 1);
  }
  SECTION("the provider answers with nothing") {
    Harness h(SmallConfig(800000));
    for (int i = 1; i <= 4; ++i) h.Turn(i);
    h.provider->Push(ScriptedStep::Reply("   "));
    const std::size_t before = h.Active().size();
    CHECK_FALSE(h.compactor->Compact(kS).ok());
    CHECK(h.Active().size() == before);
  }
  SECTION("text that is not JSON becomes a text-only checkpoint (R4.3)") {
    Harness h(SmallConfig(800000));
    for (int i = 1; i <= 4; ++i) h.Turn(i);
    h.provider->Push(ScriptedStep::Reply("We migrated the database; tests pass."));
    auto out = h.compactor->Compact(kS);
    REQUIRE(out.ok());
    CHECK_FALSE(out->checkpoint.structured);
    CHECK(h.sink->OfType("compaction_completed").at(0)["checkpoint"]["structured"] == false);
  }
}

TEST_CASE("R6.5 R6.6 over the hard limit the kept tail is clipped, persisted and reported") {
  Config c = SmallConfig(10000);
  c.compaction.auto_compact = false;  // isolate the reducer
  Harness h(c);
  h.Append(Message::UserText("grep everything"));                                  // 15
  h.Append(Message::AssistantCalls({ToolCall{"g", "grep", R"({"q":"x"})", {}}}));  // 4 + 9
  h.Append(Message::ToolOutput("g", std::string(30000, 'm')));
  const std::string original_id = h.Active()[2].id;
  auto p = h.compactor->Prepare(kS, {});
  REQUIRE(p.ok());
  CHECK(p->reduced_messages == 1);
  CHECK(p->before_chars == 30028);
  CHECK(p->after_chars == 8028);
  // Persisted: the store's active copy is the clipped one, under the same id ...
  Transcript t = h.Active();
  CHECK(t[2].id == original_id);
  CHECK(t.chars(2) == 8000);
  // ... and the original is still in the history, marked compacted.
  auto history = h.store->History(kS);
  REQUIRE(history.ok());
  std::size_t originals = 0;
  for (const auto& e : *history) {
    if (e.message.id == original_id && e.state == HistoryState::kCompacted) {
      ++originals;
      CHECK(MessageChars(e.message) == 30000);
    }
  }
  CHECK(originals == 1);
  auto reduced = h.sink->OfType("context_reduced");
  REQUIRE(reduced.size() == 1);
  CHECK(reduced[0]["messages"] == 1);
  CHECK(reduced[0]["before"]["chars"] == 30028);
  CHECK(reduced[0]["after"]["chars"] == 8028);
  // The next Prepare has nothing left to do.
  h.sink->Clear();
  auto again = h.compactor->Prepare(kS, {});
  REQUIRE(again.ok());
  CHECK(again->reduced_messages == 0);
  CHECK(h.sink->size() == 0);
}

TEST_CASE("R7 step 4: the budget error says what compaction did and what to do") {
  SECTION("auto compaction disabled") {
    Config c = SmallConfig(4000);
    c.compaction.auto_compact = false;
    Harness h(c);
    for (int i = 0; i < 12; ++i) {
      h.Append(Message::UserText(std::string(900, 'u')));
      h.Append(Message::AssistantText(std::string(900, 'a')));
    }
    auto p = h.compactor->Prepare(kS, {});
    REQUIRE_FALSE(p.ok());
    CHECK(p.status().code() == StatusCode::kContextBudgetExceeded);
    const std::string msg = p.status().message();
    CHECK(
        msg.rfind(
            "Context budget exceeded (approximately 21600 characters of conversation; limit 4000).",
            0) == 0);
    CHECK(msg.find("Automatic compaction is disabled.") != std::string::npos);
    CHECK(msg.find("raise limits.maxContextChars") != std::string::npos);
  }
  SECTION("instructions alone exceed the limit") {
    Harness h(SmallConfig(4000));
    h.Append(Message::UserText("hi"));
    RequestSizes sizes;
    sizes.instructions_chars = 5000;
    auto p = h.compactor->Prepare(kS, sizes);
    REQUIRE_FALSE(p.ok());
    CHECK(p.status().message().find("The instructions alone are 5000 characters") !=
          std::string::npos);
    // Issue 35's rough edge: the advice was to compact or start a new session, which cannot
    // help when the instructions go with every request.
    CHECK(p.status().message().find("shorten the instructions") != std::string::npos);
    CHECK(p.status().message().find("new session") == std::string::npos);
    CHECK(p.status().message().find("compact manually") == std::string::npos);
  }
  SECTION("no safe boundary") {
    Harness h(SmallConfig(4000));
    // One call whose result is the last message: nothing can be cut.
    h.Append(Message::AssistantCalls({ToolCall{"c", "t", std::string(1, '1'), {}}}));
    for (int i = 0; i < 10; ++i) {
      Message m = Message::UserText(std::string(1000, 'w'));
      m.summary = false;
      h.Append(m);
    }
    h.Append(Message::ToolOutput("c", "done"));
    auto p = h.compactor->Prepare(kS, {});
    // The reducer cannot clip 1,000-character user texts below 1,024, so it stays over.
    REQUIRE_FALSE(p.ok());
    CHECK(p.status().message().find(
              "Automatic compaction was skipped because there is no safe boundary to summarize.") !=
          std::string::npos);
  }
}

namespace {

// Arguments nested `depth` levels deep: [[[...["src/deep.cc"]...]]], valid JSON.
std::string DeepArguments(std::size_t depth) {
  return std::string(depth, '[') + "\"src/deep.cc\"" + std::string(depth, ']');
}

}  // namespace

TEST_CASE("R13.1 a stored tool call nested 100,000 and 1,000,000 levels deep compacts") {
  for (std::size_t depth : {std::size_t{100000}, std::size_t{1000000}}) {
    for (bool offline : {true, false}) {
      INFO("depth " << depth << (offline ? ", offline" : ", scripted provider"));
      Config c = SmallConfig(800000);
      // A small window makes the request budget (16,000 characters) far smaller than the deep
      // arguments, so the scripted provider reads them shortened (R4.7).
      c.provider.context_window = 5000;
      Harness h(c);
      if (offline) {
        auto made = Compactor::Create(c, NewOfflineSummarizer(), h.store, {}, {h.sink});
        REQUIRE(made.ok());
        h.compactor = std::move(made).value();
      }
      const std::string deep = DeepArguments(depth);
      h.Append(Message::UserText("Parse the nested data"));
      h.Append(Message::AssistantCalls({ToolCall{"deep", "deep_tool", deep, {}}}));
      h.Append(Message::ToolOutput("deep", "done"));
      for (int i = 1; i <= 3; ++i) h.Turn(i);
      auto out = h.compactor->Compact(kS);
      REQUIRE(out.ok());
      REQUIRE(out->compacted);
      CHECK(out->summarized_messages == 7);
      if (offline) {
        REQUIRE_FALSE(out->checkpoint.accomplished.empty());
        CHECK(out->checkpoint.accomplished[0].rfind("deep_tool: ", 0) == 0);
      } else {
        REQUIRE(h.provider->calls() >= 1);
        const auto requests = h.provider->Requests();  // a copy: keep it alive
        const std::string& text =
            std::get<Text>(requests[0].request.messages.at(0).parts.at(0)).text;
        CHECK(text.find("[tool call deep: deep_tool]") != std::string::npos);
        CHECK(text.size() < deep.size());  // read shortened
      }
      // Nothing is lost: the deep call stays in the history, byte for byte.
      auto history = h.store->History(kS);
      REQUIRE(history.ok());
      bool kept = false;
      for (const auto& e : *history) {
        for (const auto& part : e.message.parts) {
          if (const auto* call = std::get_if<ToolCall>(&part); call && call->id == "deep") {
            kept = call->arguments == deep && e.state == HistoryState::kCompacted;
          }
        }
      }
      CHECK(kept);
    }
  }
}

namespace {

// A session of `turns` turns whose tool outputs are `output_chars` long, compacted manually
// with one scripted reply; checks what every over-budget reply must leave behind: the session
// did not grow, no checkpoint above `max_checkpoint` characters, and nothing of the session
// lost (every message appended is in the history, the summarized ones marked compacted).
struct OverBudgetRun {
  Result<CompactOutcome> out = Status::Internal("not run");
  std::vector<nlohmann::json> completed;
  std::vector<nlohmann::json> failed;
  std::size_t before_chars = 0;
  std::size_t after_chars = 0;
  std::size_t checkpoint_chars = 0;  // the active transcript's first message, if a summary
  std::size_t history = 0;           // history entries
  std::size_t compacted = 0;         // history entries marked compacted
};

OverBudgetRun RunOverBudget(const Config& c, ScriptedStep reply, int turns,
                            std::size_t output_chars) {
  Harness h(c);
  for (int i = 1; i <= turns; ++i) h.Turn(i, output_chars);
  OverBudgetRun run;
  run.before_chars = h.Active().chars();
  h.provider->Push(std::move(reply));
  run.out = h.compactor->Compact(kS);
  const Transcript after = h.Active();
  run.after_chars = after.chars();
  if (!after.empty() && after[0].summary) run.checkpoint_chars = after.chars(0);
  run.completed = h.sink->OfType("compaction_completed");
  run.failed = h.sink->OfType("compaction_failed");
  auto history = h.store->History(kS);
  REQUIRE(history.ok());
  for (const auto& e : *history) {
    if (e.message.summary) continue;
    ++run.history;
    if (e.state == HistoryState::kCompacted) ++run.compacted;
  }
  return run;
}

constexpr std::size_t kMB30 = 30u * 1000u * 1000u;

}  // namespace

TEST_CASE("R12.7 R5.2 a 30 MB summarizer reply is cut at maxOutputTokens x 4 and treated as cut") {
  Config c = SmallConfig(800000);  // half the trigger: 340,000 characters, far above the budget
  c.compaction.max_output_tokens = 2000;
  const std::size_t budget = 2000 * 4;

  struct Case {
    const char* name;
    std::string reply;
    bool structured;
  };
  std::vector<Case> cases;
  // A goal of 30 MB after a short instruction.
  cases.push_back(
      {"goal",
       R"({"instructions":["keep the tests green"],"goal":")" + std::string(kMB30, 'g') + R"("})",
       true});
  // A complete, valid JSON object of 30 MB: many finished steps after a short goal.
  {
    std::string r = R"({"goal":"ship the release","accomplished":[)";
    for (std::size_t i = 0; r.size() < kMB30; ++i) {
      r += (i ? ",\"" : "\"") + std::string("step ") + std::to_string(i) + " done\"";
    }
    r += "]}";
    cases.push_back({"valid JSON", std::move(r), true});
  }
  // Not JSON at all: 30 MB of prose.
  {
    std::string r;
    while (r.size() < kMB30) r += "The agent edited src/a.cc and ran the tests again. ";
    cases.push_back({"prose", std::move(r), false});
  }
  // Invalid UTF-8 throughout 30 MB of findings.
  {
    std::string r = "{\"goal\":\"fix \xFF the build\",\"discoveries\":[";
    for (std::size_t i = 0; r.size() < kMB30; ++i) {
      r += (i ? ",\"" : "\"") + std::string("ok \xFF\xC3 \xE2\x82 ") + std::to_string(i) + "\"";
    }
    r += "]}";
    cases.push_back({"invalid UTF-8", std::move(r), true});
  }

  for (auto& k : cases) {
    INFO(k.name);
    OverBudgetRun run = RunOverBudget(c, ScriptedStep::Reply(std::move(k.reply)), 6, 20000);
    INFO((run.out.ok() ? std::string("ok") : run.out.status().ToString()));
    REQUIRE(run.out.ok());
    REQUIRE(run.out->compacted);
    // Treated as cut (R5.2): partial, in the outcome and in the completion event.
    CHECK(run.out->partial);
    REQUIRE(run.completed.size() == 1);
    CHECK(run.completed[0]["checkpoint"]["partial"] == true);
    CHECK(run.out->checkpoint.structured == k.structured);
    // The checkpoint holds at most the budget's worth of the reply (and its layout).
    CHECK(run.checkpoint_chars > 0);
    CHECK(run.checkpoint_chars <= budget + 200);
    CHECK(IsValidUtf8(RenderCheckpoint(run.out->checkpoint)));
    // The session did not grow, and nothing of it was lost.
    CHECK(run.after_chars < run.before_chars);
    CHECK(run.history == 24);
    CHECK(run.compacted == run.out->summarized_messages);
  }
}

TEST_CASE("R12.7 R13.1 a 30 MB reply nested 30,000,000 levels deep is cut and changes nothing") {
  Config c = SmallConfig(800000);
  c.compaction.max_output_tokens = 2000;
  for (const char open : {'[', '{'}) {
    INFO("opening " << open);
    std::string reply = R"({"goal":"parse it","accomplished":)";
    reply += open == '[' ? std::string(kMB30, '[') : [] {
      std::string s;
      while (s.size() < kMB30) s += "{\"a\":";
      return s;
    }();
    OverBudgetRun run = RunOverBudget(c, ScriptedStep::Reply(std::move(reply)), 6, 20000);
    // Whatever comes of it, nothing crashed, the session did not grow and nothing was lost.
    if (run.out.ok() && run.out->compacted) {
      CHECK(run.out->partial);
      CHECK(run.checkpoint_chars <= 2000 * 4 + 200);
      CHECK(run.after_chars < run.before_chars);
      CHECK(run.compacted == run.out->summarized_messages);
    } else {
      CHECK(run.after_chars == run.before_chars);
      CHECK(run.compacted == 0);
    }
    CHECK(run.history == 24);
  }
}

TEST_CASE("R12.7 a reply within maxOutputTokens but above half the trigger is cut to fit") {
  // max_context_chars 20,000: the trigger is 17,000 characters, half of it 8,500; a reply of
  // maxOutputTokens (16,000 tokens, 64,000 characters) would be far above it.
  const Config c = SmallConfig(20000);
  const std::size_t half_trigger = 8500;
  std::string reply = R"({"goal":")" + std::string(3000, 'G') +
                      R"(","instructions":["use alembic","never drop a table"],"accomplished":[)";
  for (int i = 0; i < 100; ++i) {
    reply += (i ? "," : "") + std::string("\"step ") + std::to_string(i) + " " +
             std::string(400, 's') + "\"";
  }
  reply += R"(],"currentState":"migrating","nextSteps":["run the migration"]})";
  REQUIRE(reply.size() < 64000);
  REQUIRE(reply.size() > 4 * half_trigger);

  OverBudgetRun run = RunOverBudget(c, ScriptedStep::Reply(reply), 6, 3000);
  REQUIRE(run.out.ok());
  REQUIRE(run.out->compacted);
  CHECK(run.checkpoint_chars <= half_trigger);
  CHECK(run.out->partial);
  REQUIRE(run.completed.size() == 1);
  CHECK(run.completed[0]["checkpoint"]["partial"] == true);
  CHECK(run.completed[0]["checkpoint"]["chars"].get<std::size_t>() <= half_trigger);
  // What matters most stays: the user's instructions, the pending work, the newest step.
  const Checkpoint& cp = run.out->checkpoint;
  CHECK(cp.instructions == std::vector<std::string>{"use alembic", "never drop a table"});
  CHECK(cp.next_steps == std::vector<std::string>{"run the migration"});
  REQUIRE_FALSE(cp.accomplished.empty());
  CHECK(cp.accomplished.back().rfind("step 99 ", 0) == 0);
  CHECK(cp.accomplished.size() < 100);
  CHECK(run.after_chars < run.before_chars);
  CHECK(run.history == 24);
  CHECK(run.compacted == run.out->summarized_messages);
}

TEST_CASE("R12.7 R5.3 a reply whose goal alone is 30 MB is cut, and what is left is refused") {
  Config c = SmallConfig(800000);
  c.compaction.max_output_tokens = 2000;
  const std::string reply = R"({"goal":")" + std::string(kMB30, 'g') + R"(","instructions":["x"]})";
  SECTION("no fallback: the compaction fails, names the option, and changes nothing") {
    OverBudgetRun run = RunOverBudget(c, ScriptedStep::Reply(reply), 6, 20000);
    REQUIRE_FALSE(run.out.ok());
    const std::string msg = run.out.status().message();
    CHECK(msg.find("ran past compaction.maxOutputTokens (2000 tokens, 8000 characters)") !=
          std::string::npos);
    CHECK(msg.find("Raise compaction.maxOutputTokens") != std::string::npos);
    REQUIRE(run.failed.size() == 1);
    CHECK(run.failed[0]["error"].get<std::string>().find("compaction.maxOutputTokens") !=
          std::string::npos);
    CHECK(run.completed.empty());
    CHECK(run.after_chars == run.before_chars);
    CHECK(run.history == 24);
    CHECK(run.compacted == 0);
  }
  SECTION("fallback offline: the offline summarizer writes the checkpoint instead") {
    c.compaction.fallback = Fallback::kOffline;
    OverBudgetRun run = RunOverBudget(c, ScriptedStep::Reply(reply), 6, 20000);
    REQUIRE(run.out.ok());
    REQUIRE(run.out->compacted);
    CHECK(run.out->writer == "offline");
    CHECK(run.out->checkpoint.goal == "request 1");
    CHECK(run.after_chars < run.before_chars);
    CHECK(run.compacted == run.out->summarized_messages);
  }
}

TEST_CASE("R10 R7 compaction reasons and skip reasons are enums with the names the events carry") {
  using recap::CompactionReason;
  CHECK(std::string(recap::CompactionReasonName(CompactionReason::kAuto)) == "auto");
  CHECK(std::string(recap::CompactionReasonName(CompactionReason::kManual)) == "manual");
  CHECK(std::string(recap::CompactionReasonName(CompactionReason::kBudget)) == "budget");
  CHECK(std::string(recap::CompactionReasonName(CompactionReason::kOverflow)) == "overflow");
  using recap::SkipReason;
  CHECK(std::string(recap::SkipReasonName(SkipReason::kNoProgress)) == "no_progress");
  CHECK(std::string(recap::SkipReasonName(SkipReason::kIrreducible)) == "irreducible");
  CHECK(std::string(recap::SkipReasonName(SkipReason::kSummarizerUnavailable)) ==
        "summarizer_unavailable");
}

TEST_CASE("issue 19 compaction.maxSummarizerInputTokens caps what one compaction sends",
          "[compactor][R4.7]") {
  auto sent_by = [](const Config& config) {
    auto provider = std::make_shared<ScriptedProvider>();
    auto store = recap::testing::NewTestSessionStore();
    auto compactor = Compactor::Create(config, provider, store);
    REQUIRE(compactor.ok());
    std::vector<Message> turns;
    for (int i = 0; i < 150; ++i) {
      turns.push_back(Message::UserText("question " + std::to_string(i) + std::string(1500, 'q')));
      turns.push_back(Message::AssistantText("answer " + std::string(1500, 'a')));
    }
    REQUIRE(store->AppendMessages("s", std::move(turns)).ok());
    auto prepared = (*compactor)->Prepare("s", {});
    REQUIRE(prepared.ok());
    REQUIRE(prepared->compactions.size() == 1);
    std::size_t sent = 0;
    for (const auto& r : provider->Requests()) {
      sent += CountCodePoints(r.request.system_prompt);
      for (const Message& m : r.request.messages) sent += CountCodePoints(JoinedText(m));
    }
    return std::make_pair(sent, provider->calls());
  };
  Config config;
  config.provider.context_window = 100000;  // 450,000 characters trigger at 340,000
  config.compaction.keep_turns = 1;
  const auto unlimited = sent_by(config);
  CHECK(unlimited.first > 400000);
  config.compaction.max_summarizer_input_tokens = 20000;
  const auto capped = sent_by(config);
  INFO("unlimited: " << unlimited.first << " chars in " << unlimited.second
                     << " calls; capped: " << capped.first << " in " << capped.second);
  CHECK(capped.first <= 80000);
  CHECK(capped.first > 60000);
  CHECK(capped.second <= unlimited.second);
}

namespace {

// What a callback got back from each call it made into the compactor that runs it.
struct CallsBack {
  Compactor* compactor = nullptr;
  std::vector<Status> got;
  int reports = 0;  // ReportOverflow / ReportPromptTokens made (they return nothing)

  void CallAll() {
    got.push_back(compactor->Prepare(kS, {}).status());
    got.push_back(compactor->PlanFor(kS, {}).status());
    got.push_back(compactor->Compact(kS).status());
    got.push_back(compactor->Recover("another session", true).status());
    compactor->ReportOverflow(kS);
    compactor->ReportPromptTokens(kS, 5);
    reports += 2;
  }
};

// A summarizer that, while it writes the checkpoint, calls the compactor that asked for it.
class CallingBackProvider : public Provider {
 public:
  explicit CallingBackProvider(CallsBack& calls) : calls_(calls) {}
  Result<Completion> Complete(const CompletionRequest&, const CancellationToken&) override {
    calls_.CallAll();
    Completion c;
    c.text = recap::testing::ValidCheckpointJson("Finish the task");
    return c;
  }
  std::string Name() const override { return "calling-back"; }
  std::optional<std::size_t> ContextWindow() override { return 100000; }

 private:
  CallsBack& calls_;
};

// An event sink that calls the compactor back on the compaction's completion.
class CallingBackSink : public EventSink {
 public:
  explicit CallingBackSink(CallsBack& calls) : calls_(calls) {}
  void OnEvent(const Event& e) override {
    if (e.type == "compaction_completed") calls_.CallAll();
  }

 private:
  CallsBack& calls_;
};

// A plugin hook that calls the compactor back before the summarizer runs (on the hook's own
// thread, which recap starts for it).
class CallingBackHook : public PluginHook {
 public:
  explicit CallingBackHook(CallsBack& calls) : calls_(calls) {}
  std::string Name() const override { return "calling-back"; }
  Result<BeforeCompactResult> BeforeCompact(const BeforeCompactContext&,
                                            const CancellationToken&) override {
    calls_.CallAll();
    return BeforeCompactResult{};
  }
  Result<AfterCompactResult> AfterCompact(const AfterCompactContext&,
                                          const CancellationToken&) override {
    return AfterCompactResult{};
  }

 private:
  CallsBack& calls_;
};

void CheckRefused(const CallsBack& calls) {
  REQUIRE(calls.got.size() == 4);
  for (const Status& s : calls.got) {
    INFO(s.ToString());
    CHECK(s.code() == StatusCode::kFailedPrecondition);
    CHECK(s.message().find("from inside a callback") != std::string::npos);
    CHECK(s.message().find("after that call has returned") != std::string::npos);
  }
}

}  // namespace

TEST_CASE(
    "R13.1 a callback that calls back into its compactor is refused at once, and the call "
    "that ran it completes",
    "[R13.1][compactor]") {
  // Issue 35 (2): each of these waited forever for the session its own call held.
  CallsBack calls;
  Config config = SmallConfig();
  std::shared_ptr<Provider> provider = std::make_shared<ScriptedProvider>();
  std::vector<std::shared_ptr<EventSink>> sinks;
  SECTION("from the summarizer") { provider = std::make_shared<CallingBackProvider>(calls); }
  std::vector<std::shared_ptr<PluginHook>> hooks;
  SECTION("from an event sink") { sinks.push_back(std::make_shared<CallingBackSink>(calls)); }
  SECTION("from a plugin hook, on its own thread") {
    hooks.push_back(std::make_shared<CallingBackHook>(calls));
    config.plugin_hooks.timeout_ms = 600000;  // a hook that waited would hold the test, not pass
  }
  auto store = recap::testing::NewTestSessionStore();
  auto compactor = Compactor::Create(config, provider, store, hooks, sinks);
  REQUIRE(compactor.ok());
  calls.compactor = compactor->get();
  for (int i = 0; i < 40; ++i) {
    REQUIRE(store
                ->Append(kS, Message::UserText("request " + std::to_string(i) + " " +
                                               std::string(200, 'r')))
                .ok());
    REQUIRE(store->Append(kS, Message::AssistantText(std::string(200, 'a'))).ok());
  }
  auto compacted = (*compactor)->Compact(kS);
  REQUIRE(compacted.ok());
  CHECK(compacted->compacted);
  CheckRefused(calls);
  CHECK(calls.reports == 2);
  // Outside any callback, the same calls work.
  CHECK((*compactor)->Prepare(kS, {}).ok());
  CHECK((*compactor)->PlanFor(kS, {}).ok());
}

TEST_CASE("R12.4 Prepared says when the request goes out over the known window",
          "[R12.4][compactor]") {
  // Issue 35 (8): a 40,000-character tool catalog and a window of 8,000 tokens: Prepare
  // returned OK and nothing told the host that the model would refuse what it was sent.
  Config config;
  config.provider.context_window = 8000;
  auto compactor = Compactor::Create(config, std::make_shared<ScriptedProvider>(),
                                     recap::testing::NewTestSessionStore());
  REQUIRE(compactor.ok());
  REQUIRE((*compactor)->store().Append(kS, Message::UserText("hello")).ok());
  RequestSizes sizes;
  sizes.tool_catalog_chars = 40000;
  auto over = (*compactor)->Prepare(kS, sizes);
  REQUIRE(over.ok());
  CHECK(over->over_window);
  CHECK(over->after_tokens > 8000);
  sizes.tool_catalog_chars = 4000;
  auto fine = (*compactor)->Prepare(kS, sizes);
  REQUIRE(fine.ok());
  CHECK_FALSE(fine->over_window);
  // No window known: the fallback is no model's limit, so nothing is claimed.
  auto unknown = Compactor::Create(Config{}, std::make_shared<ScriptedProvider>(),
                                   recap::testing::NewTestSessionStore());
  REQUIRE(unknown.ok());
  REQUIRE((*unknown)->store().Append(kS, Message::UserText("hello")).ok());
  sizes.tool_catalog_chars = 400000;
  auto no_window = (*unknown)->Prepare(kS, sizes);
  REQUIRE(no_window.ok());
  CHECK_FALSE(no_window->over_window);
}

TEST_CASE("R3 Prepared names a tool result sent without its call", "[R3][compactor]") {
  // Issue 35's rough edge: a result whose call never happened was accepted and sent, and the
  // model API refused every later request without the host being told.
  Harness h;
  REQUIRE(h.store->Append(kS, Message::UserText("hello")).ok());
  REQUIRE(h.store->Append(kS, Message::ToolOutput("call_never", "out")).ok());
  auto p = h.compactor->Prepare(kS, {});
  REQUIRE(p.ok());
  CHECK(p->orphan_results == std::vector<std::string>{"call_never"});
  // Answered in order, nothing is named; and the check costs no scan then.
  Harness fine;
  REQUIRE(fine.store->Append(kS, Message::UserText("hello")).ok());
  REQUIRE(fine.store->Append(kS, Message::AssistantCalls({ToolCall{"c1", "ls", "{}", ""}})).ok());
  REQUIRE(fine.store->Append(kS, Message::ToolOutput("c1", "out")).ok());
  auto q = fine.compactor->Prepare(kS, {});
  REQUIRE(q.ok());
  CHECK(q->orphan_results.empty());
  CHECK(q->messages.pairing() != Transcript::Pairing::kUnknown);
  // A result before its call is an orphan too.
  Harness late;
  REQUIRE(late.store->Append(kS, Message::UserText("hello")).ok());
  REQUIRE(late.store->Append(kS, Message::ToolOutput("c2", "early")).ok());
  REQUIRE(late.store->Append(kS, Message::AssistantCalls({ToolCall{"c2", "ls", "{}", ""}})).ok());
  auto r = late.compactor->Prepare(kS, {});
  REQUIRE(r.ok());
  CHECK(r->orphan_results == std::vector<std::string>{"c2"});
}

TEST_CASE("R7.2 Prepare of a session never written is kNotFound, not an empty conversation",
          "[R7.2][compactor]") {
  // Issue 35's rough edge: C++, C and Python returned OK with no messages (a typo in the id
  // sent an empty conversation); the command line called it an error. Now all say kNotFound.
  Harness h;
  auto p = h.compactor->Prepare("sesion-1", {});
  REQUIRE_FALSE(p.ok());
  CHECK(p.status().code() == StatusCode::kNotFound);
  CHECK(p.status().message().find("append its first messages") != std::string::npos);
  CHECK(h.sink->types().empty());
  h.Append(Message::UserText("hi"));
  CHECK(h.compactor->Prepare(kS, {}).ok());
}
