// A host's whole life (SPEC §15, R12): what a Compactor meets when it runs for weeks, serves
// many sessions and talks to servers that are down — the offline fallback shared by sessions
// at once, the budget error of a Prepare that tried several things, the no-progress pause and
// a request that compaction cannot help. Over the scripted provider and the store of
// support/test_store.h (in-memory, or SQLite / PostgreSQL with RECAP_TEST_STORE).
#include <algorithm>
#include <atomic>
#include <chrono>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <catch2/catch.hpp>

#include "recap/compactor.h"
#include "recap/measure.h"
#include "recap/memory_plugin.h"
#include "recap/time_source.h"

#include "support/fake_provider.h"
#include "support/host.h"
#include "support/ok.h"
#include "support/recording_sink.h"
#include "support/test_store.h"

using namespace recap;
using recap::testing::RecordingSink;
using recap::testing::ScriptedProvider;
using recap::testing::ScriptedStep;

namespace {

using recap::testing::Ok;

// The shared host (support/host.h) over the scripted provider and the test store, on the
// machine's clock or the test's.
struct Host : recap::testing::CompactorHost<> {
  explicit Host(const Config& config, std::shared_ptr<TimeSource> clock = nullptr)
      : CompactorHost(config, {nullptr, nullptr, std::move(clock)}) {}

  // A turn: a request, a tool call, its output of `output_chars`, an answer.
  void Turn(const std::string& session, int n, std::size_t output_chars = 100) {
    const std::string id = "call_" + std::to_string(n);
    Append(session, Message::UserText("request " + std::to_string(n)));
    Append(session,
           Message::AssistantCalls({ToolCall{id, "read_file", R"({"path":"src/f.cc"})", {}}}));
    Append(session, Message::ToolOutput(id, std::string(output_chars, 'o')));
    Append(session, Message::AssistantText("answer " + std::to_string(n)));
  }
};

// Time that moves only when the test says so.
class ManualTime : public TimeSource {
 public:
  std::chrono::steady_clock::time_point Now() override {
    std::lock_guard<std::mutex> lock(mu_);
    return now_;
  }
  void Advance(std::chrono::milliseconds by) {
    std::lock_guard<std::mutex> lock(mu_);
    now_ += by;
  }

 private:
  std::mutex mu_;
  std::chrono::steady_clock::time_point now_{std::chrono::hours(1)};
};

Config Small(std::size_t max_chars = 20000) {
  Config c;
  c.limits.max_context_chars = max_chars;
  return c;
}

}  // namespace

TEST_CASE("R12 two sessions falling back to the offline summarizer at once share it safely") {
  Config c = Small();
  c.compaction.fallback = Fallback::kOffline;
  Host h(c);
  h.provider->SetDefault(ScriptedStep::Fail(Status::Unavailable("the summarizer is down")));
  const std::vector<std::string> sessions = {"a", "b", "c", "d"};
  for (const std::string& s : sessions) {
    for (int i = 1; i <= 4; ++i) h.Turn(s, i);
  }
  // Every session compacts at the same moment, each on its own thread; each summarizer call
  // fails, so each falls back to the offline summarizer (ThreadSanitizer watches the build
  // that runs this under build-tsan).
  std::atomic<int> ready{0};
  std::vector<std::thread> threads;
  std::vector<Result<CompactOutcome>> outcomes(sessions.size(), Status::Internal("not run"));
  for (std::size_t k = 0; k < sessions.size(); ++k) {
    threads.emplace_back([&, k] {
      ++ready;
      while (ready.load() < static_cast<int>(sessions.size())) std::this_thread::yield();
      outcomes[k] = h.compactor->Compact(sessions[k]);
    });
  }
  for (std::thread& t : threads) t.join();
  for (std::size_t k = 0; k < sessions.size(); ++k) {
    INFO("session " << sessions[k]);
    REQUIRE(outcomes[k].ok());
    CHECK(outcomes[k]->compacted);
    CHECK(outcomes[k]->writer == "offline");
  }
  CHECK(h.provider->calls() == sessions.size());
}

TEST_CASE(
    "R12.8 the budget error tells every attempt of the prepare, auto compaction ran, then a budget "
    "compaction found nothing left") {
  Config c = Small(20000);
  c.compaction.keep_turns = 1;
  Host h(c);
  ScriptedStep reply;  // a checkpoint of about 2,500 characters
  reply.text = R"({"goal":")" + std::string(2500, 'g') + R"("})";
  h.provider->SetDefault(reply);
  for (int i = 1; i <= 6; ++i) h.Turn("s", i, 3000);
  // The last turn is one long request: after the automatic compaction it is all that is left
  // beside the checkpoint, and no clipping brings it under the limit beside instructions this
  // large (just under the trigger of 17,000, so compaction can help the request).
  h.Append("s", Message::UserText(std::string(5000, 'q')));
  RequestSizes sizes;
  sizes.instructions_chars = 16990;
  auto p = h.compactor->Prepare("s", sizes);
  REQUIRE_FALSE(p.ok());
  CHECK(p.status().code() == StatusCode::kContextBudgetExceeded);
  const std::string msg = p.status().message();
  INFO(msg);
  CHECK(msg.find("Automatic compaction ran (") != std::string::npos);
  CHECK(msg.find("messages summarized") != std::string::npos);
  CHECK(msg.find("then a budget compaction found nothing left to summarize") != std::string::npos);
  CHECK(msg.find("skipped because there is no safe boundary") == std::string::npos);
  CHECK(msg.find("The instructions alone are 16990 characters") != std::string::npos);
  // What the events said happened, in order.
  const std::vector<std::string> types = h.sink->types();
  REQUIRE(std::count(types.begin(), types.end(), "compaction_completed") == 1);
  CHECK(h.sink->OfType("compaction_skipped").back()["reason"] == "nothing_to_summarize");
}

TEST_CASE(
    "R12.4 the no-progress pause lifts once the transcript has grown by a tenth of the trigger, "
    "not only at a new turn") {
  Config c = Small(1000000);
  c.compaction.threshold = 0.1;  // trigger at 100,000 characters
  Host h(c);
  ScriptedStep big;
  big.respond = [](const CompletionRequest&) {
    return R"({"goal":")" + std::string(47000, 'g') + R"("})";
  };
  h.provider->SetDefault(big);
  RequestSizes sizes;
  sizes.tool_catalog_chars = 60000;  // below the trigger; every request stays above it
  for (int i = 1; i <= 4; ++i) h.Turn("s", i, 15000);
  h.Append("s", Message::UserText(std::string(30000, 'q')));
  REQUIRE(h.compactor->Prepare("s", sizes).ok());
  int round = 0;
  auto tool_round = [&](std::size_t output_chars) {
    const std::string id = "r" + std::to_string(++round);
    h.Append("s", Message::AssistantCalls({ToolCall{id, "t", "{}", {}}}));
    h.Append("s", Message::ToolOutput(id, std::string(output_chars, 'r')));
  };
  tool_round(200);
  REQUIRE(h.compactor->Prepare("s", sizes).ok());  // the second weak one: paused now
  const std::size_t calls = h.provider->calls();
  h.sink->Clear();
  // Growth below a tenth of the trigger (10,000 characters): still paused.
  for (int k = 0; k < 4; ++k) {
    tool_round(2000);
    auto p = h.compactor->Prepare("s", sizes);
    REQUIRE(p.ok());
    CHECK(p->compactions.empty());
  }
  CHECK(h.provider->calls() == calls);
  const auto skipped = h.sink->OfType("compaction_skipped");
  REQUIRE(skipped.size() == 4);
  for (const auto& e : skipped) CHECK(e["reason"] == "no_progress");
  // Past a tenth of the trigger since the pause began (no new user turn): it compacts again.
  tool_round(3000);
  auto p = h.compactor->Prepare("s", sizes);
  REQUIRE(p.ok());
  CHECK(p->compactions == std::vector<recap::CompactionReason>{recap::CompactionReason::kAuto});
  CHECK(h.provider->calls() > calls);
}

TEST_CASE(
    "R12.4 when instructions and tool catalog alone reach the trigger, compaction is not "
    "attempted, irreducible, said once") {
  Host h(Small(20000));  // trigger at 17,000 characters
  RequestSizes sizes;
  sizes.instructions_chars = 3000;
  sizes.tool_catalog_chars = 15000;  // 18,000 with the instructions, 90% of the limit
  auto plan = h.compactor->PlanFor("s", sizes);
  for (int i = 1; i <= 10; ++i) {
    h.Turn("s", i, 200);
    auto p = h.compactor->Prepare("s", sizes);
    REQUIRE(p.ok());
    CHECK(p->compactions.empty());
  }
  CHECK(h.provider->calls() == 0);
  const auto skipped = h.sink->OfType("compaction_skipped");
  REQUIRE(skipped.size() == 1);
  CHECK(skipped[0]["reason"] == "irreducible");
  plan = h.compactor->PlanFor("s", sizes);
  REQUIRE(plan.ok());
  CHECK(plan->trigger);
  CHECK(plan->irreducible);
  // The catalog shrinks: compaction can help again, and runs.
  sizes.tool_catalog_chars = 2000;
  for (int i = 11; i <= 40 && h.provider->calls() == 0; ++i) {
    h.Turn("s", i, 600);
    REQUIRE(h.compactor->Prepare("s", sizes).ok());
  }
  CHECK(h.provider->calls() >= 1);
  plan = h.compactor->PlanFor("s", sizes);
  REQUIRE(plan.ok());
  CHECK_FALSE(plan->irreducible);
  // Back above the trigger: said again, once.
  sizes.tool_catalog_chars = 15000;
  h.sink->Clear();
  for (int i = 41; i <= 43; ++i) {
    h.Turn("s", i, 200);
    REQUIRE(h.compactor->Prepare("s", sizes).ok());
  }
  CHECK(h.sink->OfType("compaction_skipped").size() == 1);
}

TEST_CASE("R12.4 a 50-round tool loop calls the summarizer at most once a prepare") {
  Config c = Small(40000);
  Host h(c);
  RequestSizes sizes;
  sizes.tool_catalog_chars = 8000;
  h.Append("s", Message::UserText("Fix every failing test"));
  std::size_t most = 0;
  for (int i = 1; i <= 50; ++i) {
    const std::string id = "t" + std::to_string(i);
    h.Append("s", Message::AssistantCalls({ToolCall{id, "run_tests", "{}", {}}}));
    h.Append("s", Message::ToolOutput(id, std::string(1500, 'x')));
    const std::size_t before = h.provider->calls();
    auto p = h.compactor->Prepare("s", sizes);
    REQUIRE(p.ok());
    most = std::max(most, h.provider->calls() - before);
  }
  CHECK(most <= 1);
  CHECK(h.provider->calls() >= 2);  // it did compact in the loop
}

using std::chrono::seconds;

TEST_CASE(
    "R12.2 an unknown window is loud, window_unknown once per session with the error and the "
    "fallback, asked again with back-off, and the window in Plan and Prepared") {
  auto clock = std::make_shared<ManualTime>();
  Config c = Small(200000);  // fallback window 50,000 tokens
  Host h(c, clock);
  h.provider->SetContextWindowError(
      Status::Unavailable("GET http://127.0.0.1:9/v1/models failed: connection refused"));
  // About 6,100 estimated tokens: far under the fallback window's trigger (42,500), over a
  // 6,000-token model's (5,100).
  for (int i = 1; i <= 3; ++i) h.Turn("s", i, 8000);

  auto p = h.compactor->Prepare("s", {});
  REQUIRE(p.ok());
  CHECK_FALSE(p->window_tokens.has_value());
  CHECK(p->window_source == "fallback");
  CHECK(p->fallback_window_tokens == 50000);
  auto unknown = h.sink->OfType("window_unknown");
  REQUIRE(unknown.size() == 1);
  CHECK(unknown[0]["session"] == "s");
  CHECK(unknown[0]["error"].get<std::string>().find("connection refused") != std::string::npos);
  CHECK(unknown[0]["fallback"]["tokens"] == 50000);
  CHECK(unknown[0]["fallback"]["rule"] == "maxContextChars / 4");
  const std::size_t asked = h.provider->window_queries();
  CHECK(asked == 1);

  // Within the minute: not asked again, not said again.
  clock->Advance(seconds(30));
  h.Turn("s", 4);
  REQUIRE(h.compactor->Prepare("s", {}).ok());
  CHECK(h.provider->window_queries() == asked);
  // After it: asked again; still unknown, and this session was told already.
  clock->Advance(seconds(31));
  REQUIRE(h.compactor->Prepare("s", {}).ok());
  CHECK(h.provider->window_queries() == asked + 1);
  CHECK(h.sink->OfType("window_unknown").size() == 1);
  // The wait doubles: 120 s now.
  clock->Advance(seconds(90));
  REQUIRE(h.compactor->Prepare("s", {}).ok());
  CHECK(h.provider->window_queries() == asked + 1);
  // Another session hears it once too.
  h.Turn("t", 1);
  REQUIRE(h.compactor->Prepare("t", {}).ok());
  CHECK(h.sink->OfType("window_unknown").size() == 2);
  CHECK(h.sink->OfType("window_unknown").back()["session"] == "t");

  // The model list answers: a 6,000-token model. The window rule then fires.
  h.provider->SetContextWindowError(Status::OK());
  h.provider->SetContextWindow(6000);
  clock->Advance(seconds(31));
  auto plan = h.compactor->PlanFor("s", {});
  REQUIRE(plan.ok());
  REQUIRE(plan->window_tokens.has_value());
  CHECK(*plan->window_tokens == 6000);
  CHECK(plan->window_source == "provider");
  p = h.compactor->Prepare("s", {});
  REQUIRE(p.ok());
  CHECK(p->compactions == std::vector<recap::CompactionReason>{recap::CompactionReason::kAuto});
  CHECK(p->window_source == "provider");
  CHECK(p->trigger_rule == "window");
  // Known now: never asked again.
  const std::size_t known_after = h.provider->window_queries();
  clock->Advance(seconds(3600));
  h.Turn("s", 9);
  REQUIRE(h.compactor->Prepare("s", {}).ok());
  CHECK(h.provider->window_queries() == known_after);
}

TEST_CASE(
    "R12.2 a window from the configuration or the host's profile is not looked up, and nothing is "
    "said") {
  Config c = Small(200000);
  c.provider.context_window = 8000;
  Host h(c);
  h.provider->SetContextWindowError(Status::Unavailable("down"));
  h.Turn("s", 1);
  auto p = h.compactor->Prepare("s", {});
  REQUIRE(p.ok());
  CHECK(p->window_source == "config");
  CHECK(*p->window_tokens == 8000);
  Host h2(Small(200000));
  h2.provider->SetContextWindowError(Status::Unavailable("down"));
  h2.Turn("s", 1);
  RequestSizes sizes;
  sizes.profile_context_window = 9000;
  p = h2.compactor->Prepare("s", sizes);
  REQUIRE(p.ok());
  CHECK(p->window_source == "profile");
  CHECK(h.provider->window_queries() + h2.provider->window_queries() == 0);
  CHECK(h.sink->OfType("window_unknown").empty());
  CHECK(h2.sink->OfType("window_unknown").empty());
}

TEST_CASE(
    "R7.1 R12.3 a reply that carries no checkpoint is a failed compaction: nothing replaced, "
    "counted like an error",
    "[R7.1][R12.3]") {
  // Issue 35 (3): each of these replaced the summarized span (`compacted`, not even partial).
  const std::string reply =
      GENERATE(std::string("I cannot help with that."), std::string("null"), std::string("{}"),
               std::string("[]"), std::string(R"("x")"), std::string(R"({"goal": 5})"),
               std::string("<html><body><h1>502 Bad Gateway</h1></body></html>"),
               std::string(200000, '['), std::string(R"({"summary": "all done"})"));
  INFO(reply.substr(0, 80));
  auto clock = std::make_shared<ManualTime>();
  Config c = Small(20000);  // trigger 17,000
  Host h(c, clock);
  h.provider->SetDefault(ScriptedStep::Reply(reply));
  for (int i = 1; i <= 7; ++i) h.Turn("s", i, 2500);  // ~17,900 characters, over the trigger
  const SessionState before = *h.store->Load("s");
  int turn = 7;
  for (int k = 0; k < 3; ++k) {
    h.Turn("s", ++turn, 300);
    auto p = h.compactor->Prepare("s", {});
    REQUIRE(p.ok());
    CHECK(p->compactions.empty());
  }
  const SessionState after = *h.store->Load("s");
  CHECK(after.transcript.size() == before.transcript.size() + 3 * 4);
  for (std::size_t i = 0; i < before.transcript.size(); ++i) {
    CHECK(after.transcript[i].id == before.transcript[i].id);
  }
  const auto failed = h.sink->OfType("compaction_failed");
  REQUIRE(failed.size() == 3);
  CHECK(failed[0]["error"].get<std::string>().find("carries no checkpoint") != std::string::npos);
  CHECK(h.sink->OfType("compaction_completed").empty());
  // Three in a row: the breaker opens as for a summarizer that errs (R12.3).
  h.Turn("s", ++turn, 300);
  REQUIRE(h.compactor->Prepare("s", {}).ok());
  CHECK(h.provider->calls() == 3);
  CHECK(h.sink->OfType("compaction_skipped").size() == 1);
}

TEST_CASE(
    "R12.3 a down summarizer does not tax every turn, after 3 failed auto compactions it is left "
    "alone, 30 s doubling, the hard limit still applies, a manual compaction still tries") {
  auto clock = std::make_shared<ManualTime>();
  Config c = Small(20000);  // trigger 17,000
  Host h(c, clock);
  h.provider->SetDefault(ScriptedStep::Fail(Status::Unavailable("HTTP 503 from the summarizer")));
  for (int i = 1; i <= 7; ++i) h.Turn("s", i, 2500);  // ~17,900 characters, over the trigger
  int turn = 7;
  auto next_turn = [&](std::size_t output = 300) {
    h.Turn("s", ++turn, output);
    auto p = h.compactor->Prepare("s", {});
    REQUIRE(p.ok());
    return p;
  };
  for (int k = 0; k < 3; ++k) (void)next_turn();
  CHECK(h.provider->calls() == 3);
  CHECK(h.sink->OfType("compaction_failed").size() == 3);
  // Open: no call; compaction_skipped says why.
  h.sink->Clear();
  (void)next_turn();
  (void)next_turn();
  CHECK(h.provider->calls() == 3);
  auto skipped = h.sink->OfType("compaction_skipped");
  REQUIRE(skipped.size() == 2);
  CHECK(skipped[0]["reason"] == "summarizer_unavailable");
  auto plan = h.compactor->PlanFor("s", {});
  REQUIRE(plan.ok());
  CHECK(plan->summarizer_backoff_ms > 0);
  // The hard limit still applies meanwhile: a big output is clipped.
  auto big = next_turn(30000);
  CHECK(big->reduced_messages > 0);
  CHECK(h.provider->calls() == 3);
  // A manual compaction always tries.
  auto manual = h.compactor->Compact("s");
  CHECK_FALSE(manual.ok());
  CHECK(h.provider->calls() == 4);
  // After 30 s: one try; it fails, and the wait doubles.
  clock->Advance(seconds(31));
  (void)next_turn();
  CHECK(h.provider->calls() == 5);
  clock->Advance(seconds(31));
  (void)next_turn();
  CHECK(h.provider->calls() == 5);
  clock->Advance(seconds(30));
  // It answers again: the first success closes the breaker.
  h.provider->SetDefault(ScriptedStep::Reply(recap::testing::ValidCheckpointJson()));
  auto ok = next_turn();
  CHECK(h.provider->calls() == 6);
  CHECK(ok->compactions == std::vector<recap::CompactionReason>{recap::CompactionReason::kAuto});
  for (int i = 0; i < 12; ++i) (void)next_turn(1500);
  CHECK(h.sink->OfType("compaction_skipped").size() == 4);  // none since it closed
}

TEST_CASE(
    "R12.3 with fallback offline a down summarizer is skipped straight to the offline one while it "
    "backs off") {
  auto clock = std::make_shared<ManualTime>();
  Config c = Small(20000);
  c.compaction.fallback = Fallback::kOffline;
  Host h(c, clock);
  h.provider->SetDefault(ScriptedStep::Fail(Status::Unavailable("HTTP 503 from the summarizer")));
  for (int i = 1; i <= 6; ++i) h.Turn("s", i, 2500);
  int turn = 6;
  for (int k = 0; k < 24; ++k) {
    h.Turn("s", ++turn, 2500);
    auto p = h.compactor->Prepare("s", {});
    REQUIRE(p.ok());
  }
  const auto completed = h.sink->OfType("compaction_completed");
  REQUIRE(completed.size() >= 4);
  for (const auto& e : completed) CHECK(e["checkpoint"]["writer"] == "offline");
  CHECK(h.provider->calls() == 3);  // three failures, then left alone
}

namespace {

// The text of the first Text part.
std::string FirstText(const Message& m) {
  for (const Part& p : m.parts) {
    if (const auto* t = std::get_if<Text>(&p)) return t->text;
  }
  return {};
}

}  // namespace

TEST_CASE(
    "R12.1 a leading system message is the session's instructions, kept first through every "
    "compaction, never summarized or clipped, and shown to the summarizer") {
  Config c = Small(40000);
  Host h(c);
  const std::string policy = "Never refund. " + std::string(9000, 'p');  // 9,014 characters
  Message system = Message::SystemText(policy);
  system.id = "instructions";
  h.Append("s", system);
  int compactions = 0;
  for (int i = 1; i <= 40; ++i) {
    h.Turn("s", i, 1500);
    auto p = h.compactor->Prepare("s", {});
    REQUIRE(p.ok());
    compactions += static_cast<int>(p->compactions.size());
    REQUIRE_FALSE(p->messages.empty());
    CHECK(p->messages[0].id == "instructions");
    CHECK(FirstText(p->messages[0]) == policy);
  }
  REQUIRE(compactions >= 2);
  // One entry of the history, never compacted.
  std::size_t entries = 0;
  for (const HistoryEntry& e : Ok(h.store->History("s"))) {
    if (e.message.id != "instructions") continue;
    ++entries;
    CHECK(e.state == HistoryState::kActive);
  }
  CHECK(entries == 1);
  // The summarizer saw the instructions, clipped to instructionsForSummarizerChars (8,000),
  // apart from the messages to summarize, and never as one of them.
  const auto requests = h.provider->Requests();
  REQUIRE(requests.size() >= static_cast<std::size_t>(compactions));  // long spans in chunks
  for (const auto& r : requests) {
    const std::string& prompt = r.request.system_prompt;
    CHECK(prompt.find("Never refund.") != std::string::npos);
    CHECK(prompt.find(std::string(7900, 'p')) != std::string::npos);
    CHECK(prompt.find(std::string(8001, 'p')) == std::string::npos);
    REQUIRE(r.span.has_value());
    for (const Message& m : *r.span) CHECK(m.id != "instructions");
  }
  // The reducer never clips it, even far over the limit (compaction off: only the reducer).
  Config off = Small(20000);
  off.compaction.auto_compact = false;
  Host r(off);
  Message long_policy = Message::SystemText("Never refund. " + std::string(17000, 'p'));
  r.Append("s", long_policy);
  r.Turn("s", 1, 6000);
  auto p = r.compactor->Prepare("s", {});
  REQUIRE(p.ok());
  CHECK(p->reduced_messages > 0);
  CHECK(FirstText(p->messages[0]) == FirstText(long_policy));
  CHECK(p->after_chars <= 20000);
}

TEST_CASE(
    "R12.1 pinned user messages survive compaction verbatim, in order, before the checkpoint") {
  Host h(Small(30000));
  Message rule1 = Message::UserText("Always answer in French.");
  rule1.pinned = true;
  rule1.id = "rule1";
  Message rule2 = Message::UserText("Never touch the production database.");
  rule2.pinned = true;
  rule2.id = "rule2";
  h.Turn("s", 1, 2000);
  h.Append("s", rule1);
  h.Turn("s", 2, 2000);
  h.Append("s", rule2);
  for (int i = 3; i <= 30; ++i) {
    h.Turn("s", i, 2000);
    REQUIRE(h.compactor->Prepare("s", {}).ok());
  }
  auto out = h.compactor->Compact("s");
  REQUIRE(out.ok());
  REQUIRE(out->compacted);
  const Transcript t = Ok(h.store->Load("s")).transcript;
  REQUIRE(t.size() >= 3);
  CHECK(t[0].id == "rule1");
  CHECK(t[1].id == "rule2");
  CHECK(t[2].summary);
  CHECK(FirstText(t[0]) == "Always answer in French.");
  CHECK(t[0].pinned);
  for (const auto& r : h.provider->Requests()) {
    REQUIRE(r.span.has_value());
    for (const Message& m : *r.span) CHECK_FALSE(m.pinned);
  }
}

TEST_CASE(
    "R12.1 a span that is only instructions, pinned messages and an earlier checkpoint is nothing "
    "to summarize") {
  Host h(Small(20000));
  Message system = Message::SystemText("Be brief.");
  h.Append("s", system);
  Message rule = Message::UserText("Answer in French.");
  rule.pinned = true;
  h.Append("s", rule);
  h.Turn("s", 1);
  auto out = h.compactor->Compact("s");
  REQUIRE(out.ok());
  CHECK_FALSE(out->compacted);
  CHECK(out->skipped == SkipReason::kNothingToSummarize);
  CHECK(h.provider->calls() == 0);
}

TEST_CASE(
    "R12.6 the per-session cache stays within cache.maxBytes, dropping the least recently used "
    "sessions, which come back from the store intact") {
  Config c = Small(20000);
  c.cache.max_bytes = 100000;
  Host h(c);
  const int kSessions = 60;
  // About 8,000 characters each: 60 of them are several times the budget.
  for (int k = 0; k < kSessions; ++k) {
    for (int i = 1; i <= 4; ++i) h.Turn("s" + std::to_string(k), i, 1800);
  }
  std::size_t most = 0;
  for (int round = 0; round < 3; ++round) {
    for (int k = 0; k < kSessions; ++k) {
      const std::string session = "s" + std::to_string(k);
      h.Turn(session, 10 + round, 100);
      auto p = h.compactor->Prepare(session, {});
      REQUIRE(p.ok());
      // What comes back is the stored session, whether or not it was cached.
      CHECK(p->messages.size() == Ok(h.store->Load(session)).transcript.size());
      const Compactor::CacheStats stats = h.compactor->cache_stats();
      most = std::max(most, stats.bytes);
      CHECK(stats.max_bytes == 100000);
    }
  }
  INFO("largest cache: " << most << " bytes");
  // Within the budget, give or take the one session just served.
  CHECK(most <= 100000 + 20000);
  const Compactor::CacheStats end = h.compactor->cache_stats();
  CHECK(end.sessions < static_cast<std::size_t>(kSessions));
  CHECK(end.sessions >= 2);
  // A generous budget keeps every session.
  Config roomy = Small(20000);
  Host all(roomy);
  for (int k = 0; k < 20; ++k) {
    all.Turn("s" + std::to_string(k), 1);
    REQUIRE(all.compactor->Prepare("s" + std::to_string(k), {}).ok());
  }
  CHECK(all.compactor->cache_stats().sessions == 20);
}

TEST_CASE("R12.6 a cache of 0 bytes keeps only the session in use, and every call is still right") {
  Config c = Small(20000);
  c.cache.max_bytes = 0;
  Host h(c);
  for (int k = 0; k < 5; ++k) {
    for (int i = 1; i <= 14; ++i) {
      const std::string session = "s" + std::to_string(k);
      h.Turn(session, i, 1500);
      auto p = h.compactor->Prepare(session, {});
      REQUIRE(p.ok());
      CHECK(p->messages.size() == Ok(h.store->Load(session)).transcript.size());
    }
  }
  CHECK(h.compactor->cache_stats().sessions == 1);
  CHECK(h.sink->OfType("compaction_completed").size() >= 5);
}

TEST_CASE(
    "R12 Prepared says what ran without an event sink: messages summarized, summarizer calls and "
    "usage, messages reduced") {
  auto provider = std::make_shared<ScriptedProvider>();
  auto store = recap::testing::NewTestSessionStore();
  auto made = Compactor::Create(Small(20000), provider, store);  // no sink at all
  REQUIRE(made.ok());
  std::unique_ptr<Compactor> compactor = std::move(made).value();
  Usage usage;
  usage.prompt_tokens = 4100;
  usage.completion_tokens = 250;
  provider->SetDefault(ScriptedStep::Reply(recap::testing::ValidCheckpointJson(), usage));
  std::size_t summarized = 0, calls = 0, prompt = 0, completion = 0, compactions = 0;
  for (int i = 1; i <= 12; ++i) {
    for (const Message& m : {Message::UserText("request " + std::to_string(i)),
                             Message::AssistantText(std::string(2500, 'a'))}) {
      REQUIRE(store->Append("s", m).ok());
    }
    auto p = compactor->Prepare("s", {});
    REQUIRE(p.ok());
    compactions += p->compactions.size();
    summarized += p->summarized_messages;
    calls += p->summarizer_calls;
    prompt += p->summarizer_usage.prompt_tokens;
    completion += p->summarizer_usage.completion_tokens;
    if (p->compactions.empty()) {
      CHECK(p->summarized_messages == 0);
      CHECK(p->summarizer_calls == 0);
    }
  }
  REQUIRE(compactions >= 1);
  CHECK(calls == provider->calls());
  CHECK(prompt == 4100 * calls);
  CHECK(completion == 250 * calls);
  // Every message summarized is one the store retired.
  std::size_t compacted = 0;
  for (const HistoryEntry& e : Ok(store->History("s"))) {
    compacted += e.state == HistoryState::kCompacted ? 1 : 0;
  }
  CHECK(summarized == compacted);
  // A failing summarizer counts its call, and no usage.
  provider->SetDefault(ScriptedStep::Fail(Status::Unavailable("down")));
  for (int i = 0; i < 6; ++i) {
    REQUIRE(store->Append("s", Message::UserText(std::string(3000, 'u'))).ok());
  }
  const std::size_t before = provider->calls();
  auto p = compactor->Prepare("s", {});
  REQUIRE(p.ok());
  CHECK(p->compactions.empty());
  CHECK(p->summarizer_calls >= 1);
  CHECK(p->summarizer_calls == provider->calls() - before);
  CHECK(p->summarizer_usage.prompt_tokens == 0);
  CHECK(p->summarized_messages == 0);
}

TEST_CASE(
    "R12.5 a restarted host, or another host of the fleet, continues from what the Compactor "
    "learned about a session") {
  auto store = recap::testing::NewTestSessionStore();
  auto provider = std::make_shared<ScriptedProvider>();
  auto sink = std::make_shared<RecordingSink>();
  auto make = [&](const Config& config) {
    auto made = Compactor::Create(config, provider, store, {}, {sink});
    REQUIRE(made.ok());
    return std::move(made).value();
  };
  auto turn = [&](const std::string& session, int n, std::size_t output) {
    const std::string id = "call_" + std::to_string(n);
    REQUIRE(store->Append(session, Message::UserText("request " + std::to_string(n))).ok());
    REQUIRE(store->Append(session, Message::AssistantCalls({ToolCall{id, "read", "{}", {}}})).ok());
    REQUIRE(store->Append(session, Message::ToolOutput(id, std::string(output, 'o'))).ok());
  };
  const Config config = Small(200000);

  SECTION("an overflow report, then a restart") {
    for (int i = 1; i <= 4; ++i) turn("s", i, 3000);
    auto first = make(config);
    REQUIRE(first->Prepare("s", {}).ok());
    first->ReportOverflow("s", 3000);
    first.reset();  // the host goes down
    auto second = make(config);
    auto p = second->Prepare("s", {});
    REQUIRE(p.ok());
    CHECK(p->compactions ==
          std::vector<recap::CompactionReason>{recap::CompactionReason::kOverflow});
    CHECK(p->window_source == "overflow");
    REQUIRE(p->window_tokens.has_value());
    CHECK(*p->window_tokens == 3000);
    // Consumed: a third host does not compact again for it, but keeps the lowered window.
    auto third = make(config);
    auto plan = third->PlanFor("s", {});
    REQUIRE(plan.ok());
    CHECK(plan->window_source == "overflow");
    CHECK(plan->reason != recap::CompactionReason::kOverflow);
  }
  SECTION("two hosts at once: what one learns, the other's next Prepare sees") {
    for (int i = 1; i <= 4; ++i) turn("s", i, 3000);
    auto a = make(config);
    auto b = make(config);
    REQUIRE(a->Prepare("s", {}).ok());
    REQUIRE(b->Prepare("s", {}).ok());  // b has the session cached now
    a->ReportOverflow("s", 2500);
    auto p = b->Prepare("s", {});
    REQUIRE(p.ok());
    CHECK(p->compactions ==
          std::vector<recap::CompactionReason>{recap::CompactionReason::kOverflow});
    CHECK(p->window_source == "overflow");
  }
  SECTION("the no-progress pause survives a restart") {
    Config c = Small(1000000);
    c.compaction.threshold = 0.1;
    ScriptedStep big;
    big.respond = [](const CompletionRequest&) {
      return R"({"goal":")" + std::string(47000, 'g') + R"("})";
    };
    provider->SetDefault(big);
    RequestSizes sizes;
    sizes.tool_catalog_chars = 60000;
    for (int i = 1; i <= 4; ++i) turn("s", i, 15000);
    REQUIRE(store->Append("s", Message::UserText(std::string(30000, 'q'))).ok());
    auto first = make(c);
    REQUIRE(first->Prepare("s", sizes).ok());
    REQUIRE(store->Append("s", Message::AssistantCalls({ToolCall{"x1", "t", "{}", {}}})).ok());
    REQUIRE(store->Append("s", Message::ToolOutput("x1", std::string(200, 'r'))).ok());
    REQUIRE(first->Prepare("s", sizes).ok());
    REQUIRE(first->PlanFor("s", sizes)->paused);
    first.reset();
    auto second = make(c);
    const std::size_t calls = provider->calls();
    sink->Clear();
    REQUIRE(store->Append("s", Message::AssistantCalls({ToolCall{"x2", "t", "{}", {}}})).ok());
    REQUIRE(store->Append("s", Message::ToolOutput("x2", std::string(100, 'r'))).ok());
    auto p = second->Prepare("s", sizes);
    REQUIRE(p.ok());
    CHECK(p->compactions.empty());
    CHECK(provider->calls() == calls);
    const auto skipped = sink->OfType("compaction_skipped");
    REQUIRE(skipped.size() == 1);
    CHECK(skipped[0]["reason"] == "no_progress");
  }
  SECTION("the calibration survives a restart") {
    Config c = Small(200000);
    c.compaction.calibrate = true;
    c.provider.context_window = 10000;                // trigger at 8,500 tokens
    for (int i = 1; i <= 2; ++i) turn("s", i, 4000);  // about 2,000 estimated tokens
    auto first = make(c);
    REQUIRE(first->Prepare("s", {}).ok());
    first->ReportPromptTokens("s", 9000);  // the model counted far more than recap estimates
    first.reset();
    auto second = make(c);
    auto plan = second->PlanFor("s", {});
    REQUIRE(plan.ok());
    CHECK(plan->trigger);
    CHECK(plan->rule == "window");
  }
}

// ---- Rules of the seed that had no test (issue 17, item 9) ----------------------------------

TEST_CASE(
    "R6 the tool catalog never counts for the hard limit: a 150,000-character catalog with a small "
    "transcript is sent") {
  Host h(Small(100000));
  h.Turn("s", 1, 500);
  RequestSizes sizes;
  sizes.tool_catalog_chars = 150000;
  auto p = h.compactor->Prepare("s", sizes);
  INFO(p.status().ToString());
  REQUIRE(p.ok());
  CHECK(p->reduced_messages == 0);
  CHECK(p->messages.size() == 4);
  CHECK(h.sink->OfType("context_reduced").empty());
}

namespace {

Message Filled(Role role, std::size_t chars, char fill) {
  Message m = role == Role::kUser ? Message::UserText(std::string(chars, fill))
                                  : Message::AssistantText(std::string(chars, fill));
  return m;
}

}  // namespace

TEST_CASE("R7 step 3 the budget compaction runs once per turn, and again at the next turn") {
  Host h(Small(20000));
  // 25 turns of texts the reducer cannot clip (each under its smallest cap): 45,000 characters.
  for (int i = 0; i < 25; ++i) {
    h.Append("s", Filled(Role::kUser, 900, 'u'));
    h.Append("s", Filled(Role::kAssistant, 900, 'a'));
  }
  // The automatic compaction fails; the budget compaction (cut inside the last turn) does it.
  h.provider->Push(ScriptedStep::Fail(Status::Unavailable("a passing failure")));
  auto p = h.compactor->Prepare("s", {});
  INFO(p.status().ToString());
  REQUIRE(p.ok());
  CHECK(p->compactions == std::vector<recap::CompactionReason>{recap::CompactionReason::kBudget});
  auto started = h.sink->OfType("compaction_started");
  REQUIRE(started.size() == 2);
  CHECK(started[0]["reason"] == "auto");
  CHECK(started[1]["reason"] == "budget");
  // Same turn, over again: the automatic one fails, and no second budget compaction.
  for (int i = 0; i < 25; ++i) h.Append("s", Filled(Role::kAssistant, 900, 'b'));
  h.provider->Push(ScriptedStep::Fail(Status::Unavailable("a passing failure")));
  const std::size_t calls = h.provider->calls();
  p = h.compactor->Prepare("s", {});
  REQUIRE_FALSE(p.ok());
  CHECK(p.status().code() == StatusCode::kContextBudgetExceeded);
  CHECK(h.provider->calls() == calls + 1);
  CHECK_THAT(p.status().message(),
             Catch::Matchers::Contains("Automatic compaction failed (") &&
                 Catch::Matchers::Contains("A budget compaction was already tried in this turn."));
  // A new turn: the budget compaction runs again.
  h.Append("s", Filled(Role::kUser, 900, 'n'));
  h.provider->Push(ScriptedStep::Fail(Status::Unavailable("a passing failure")));
  p = h.compactor->Prepare("s", {});
  INFO(p.status().ToString());
  REQUIRE(p.ok());
  CHECK(p->compactions == std::vector<recap::CompactionReason>{recap::CompactionReason::kBudget});
}

TEST_CASE(
    "R7 step 4 the budget error's sentences: ran but could not reduce it enough, and failed with "
    "the error") {
  SECTION("ran but could not reduce it enough") {
    Host h(Small(20000));
    // An opaque item (encrypted reasoning, say) is never clipped: a message holding 25,000
    // characters of one stays over the limit, whatever is summarized before it.
    auto reasoning = [](const std::string& id) {
      Message m;
      m.role = Role::kAssistant;
      m.id = id;
      m.parts.push_back(Opaque{"reasoning",
                               R"({"encrypted_content":")" + std::string(25000, 'e') + R"("})",
                               OpaqueLink::kNone,
                               {}});
      return m;
    };
    h.Append("s", Filled(Role::kUser, 900, 'u'));
    h.Append("s", reasoning("r1"));
    // The automatic compaction commits, the budget compaction of this turn finds nothing.
    auto p = h.compactor->Prepare("s", {});
    REQUIRE_FALSE(p.ok());
    // Same turn: more, and another such message. The automatic compaction commits again; the
    // budget compaction was spent for the turn.
    h.Append("s", Filled(Role::kAssistant, 900, 'a'));
    h.Append("s", reasoning("r2"));
    p = h.compactor->Prepare("s", {});
    REQUIRE_FALSE(p.ok());
    INFO(p.status().message());
    CHECK(p.status().message().find("Automatic compaction ran but could not reduce it enough.") !=
          std::string::npos);
    CHECK(p.status().message().find("A budget compaction was already tried in this turn.") !=
          std::string::npos);
    CHECK(h.sink->OfType("compaction_completed").size() == 2);
  }
  SECTION("failed, with the summarizer's error") {
    Config c = Small(20000);
    Host h(c);
    for (int i = 0; i < 25; ++i) {
      h.Append("s", Filled(Role::kUser, 900, 'u'));
      h.Append("s", Filled(Role::kAssistant, 900, 'a'));
    }
    h.provider->SetDefault(ScriptedStep::Fail(Status::Unavailable("HTTP 503 from the summarizer")));
    auto p = h.compactor->Prepare("s", {});
    REQUIRE_FALSE(p.ok());
    INFO(p.status().message());
    CHECK(p.status().message().find("Automatic compaction failed (") != std::string::npos);
    CHECK(p.status().message().find("HTTP 503 from the summarizer") != std::string::npos);
  }
}

TEST_CASE(
    "R9.3 the memory plugin through the Compactor: its memories are stored and injected after the "
    "checkpoint") {
  auto memories = NewInMemoryMemoryStore();
  auto provider = std::make_shared<ScriptedProvider>();
  auto store = recap::testing::NewTestSessionStore();
  auto sink = std::make_shared<RecordingSink>();
  auto made = Compactor::Create(Small(20000), provider, store, {NewMemoryPlugin(memories)}, {sink});
  REQUIRE(made.ok());
  std::unique_ptr<Compactor> compactor = std::move(made).value();
  ScriptedStep reply;
  reply.respond = [](const CompletionRequest& r) {
    // The plugin's field was asked for in the same request.
    const bool asked = r.system_prompt.find("\"memories\"") != std::string::npos;
    return std::string(R"({"goal":"ship the release","memories":)") +
           (asked ? R"(["the user prefers tabs","CI runs on Debian 12"])" : "[]") + "}";
  };
  provider->SetDefault(reply);
  for (int i = 1; i <= 8; ++i) {
    REQUIRE(store->Append("s", Message::UserText("request " + std::to_string(i))).ok());
    REQUIRE(store->Append("s", Message::AssistantText(std::string(2500, 'a'))).ok());
  }
  auto out = compactor->Compact("s");
  REQUIRE(out.ok());
  REQUIRE(out->compacted);
  CHECK(*memories->List("default") ==
        std::vector<std::string>{"the user prefers tabs", "CI runs on Debian 12"});
  const Transcript t = Ok(store->Load("s")).transcript;
  REQUIRE(t.size() >= 2);
  CHECK(t[0].summary);
  CHECK(t[1].summary);  // injected context: bounded, recap-made
  CHECK(JoinedText(t[1]) == "## Memories\n- the user prefers tabs\n- CI runs on Debian 12\n");
  const auto completed = sink->OfType("compaction_completed");
  REQUIRE(completed.size() == 1);
  REQUIRE(completed[0]["plugins"].size() == 1);
  CHECK(completed[0]["plugins"][0]["name"] == "memory");
  CHECK(completed[0]["plugins"][0]["report"] == "2 new memories, 2 total");
}

TEST_CASE("R10 the summarizer's own usage reaches compaction_completed, summed over its calls") {
  Config c = Small(800000);
  c.provider.context_window = 6000;  // a small window: the span goes in chunks (R4.7)
  Host h(c);
  Usage usage;
  usage.prompt_tokens = 3000;
  usage.completion_tokens = 120;
  h.provider->SetDefault(ScriptedStep::Reply(recap::testing::ValidCheckpointJson(), usage));
  // Texts, which the summarizer's view never shortens (tool outputs it would).
  for (int i = 1; i <= 10; ++i) {
    h.Append("s", Message::UserText("request " + std::to_string(i)));
    h.Append("s", Filled(Role::kAssistant, 6000, 'a'));
  }
  auto out = h.compactor->Compact("s");
  REQUIRE(out.ok());
  REQUIRE(out->compacted);
  const auto completed = h.sink->OfType("compaction_completed");
  REQUIRE(completed.size() == 1);
  const std::size_t calls = h.provider->calls();
  CHECK(calls >= 2);
  CHECK(completed[0]["usage"]["calls"] == calls);
  CHECK(completed[0]["usage"]["prompt_tokens"] == 3000 * calls);
  CHECK(completed[0]["usage"]["completion_tokens"] == 120 * calls);
}

TEST_CASE(
    "R2.6 an overflow reported without a count lowers the window to the estimate of the last "
    "request Prepare returned") {
  Host h(Small(800000));
  for (int i = 1; i <= 4; ++i) h.Turn("s", i, 2000);
  auto p = h.compactor->Prepare("s", {});
  REQUIRE(p.ok());
  const std::size_t sent = p->after_tokens;
  REQUIRE(sent > 0);
  h.compactor->ReportOverflow("s");
  auto plan = h.compactor->PlanFor("s", {});
  REQUIRE(plan.ok());
  REQUIRE(plan->window_tokens.has_value());
  CHECK(*plan->window_tokens == sent);
  CHECK(plan->window_source == "overflow");
  CHECK(plan->reason == recap::CompactionReason::kOverflow);
}

TEST_CASE(
    "R12.5 learned state that is damaged or foreign is ignored, and the session is served as a "
    "fresh one") {
  auto store = recap::testing::NewTestSessionStore();
  for (int i = 1; i <= 3; ++i) {
    REQUIRE(store->Append("s", Message::UserText("request " + std::to_string(i))).ok());
    REQUIRE(store->Append("s", Message::AssistantText("answer")).ok());
  }
  const std::vector<std::string> garbage = {
      "not json {{{",
      "[1,2,3]",
      R"({"overflowWindow":-5,"paused":"yes"})",
      R"({"overflowWindow":0,"weakStreak":99999999999,"promptTokens":1e400})",
      std::string(1000, '{'),
      std::string(1000000, '[') + std::string(1000000, ']')};
  for (const std::string& text : garbage) {
    INFO(text.substr(0, 60));
    REQUIRE(store->SaveLearned("s", text).ok());
    auto made = Compactor::Create(Small(200000), nullptr, store);
    REQUIRE(made.ok());
    auto p = (*made)->Prepare("s", {});
    REQUIRE(p.ok());
    CHECK(p->messages.size() == 6);
    CHECK(p->window_source == "fallback");
    auto plan = (*made)->PlanFor("s", {});
    REQUIRE(plan.ok());
    CHECK_FALSE(plan->paused);
  }
  // A pending overflow that did parse is honoured, the bad window beside it is not.
  REQUIRE(store->SaveLearned("s", R"({"overflowPending":true,"overflowWindow":"big"})").ok());
  auto made = Compactor::Create(Small(200000), nullptr, store);
  REQUIRE(made.ok());
  auto plan = (*made)->PlanFor("s", {});
  REQUIRE(plan.ok());
  CHECK(plan->reason == recap::CompactionReason::kOverflow);
  CHECK(plan->window_source == "fallback");
}
