// Long sessions (issue 3): real transcripts replayed turn by turn through Prepare with a small
// maxContextChars and a provider whose replies mix structured, text-only, truncated, failing
// and slow answers. At every model request:
//   * what would be sent fits the hard limit, or the error is the exact R7 text;
//   * no tool call is separated from its result in what is sent;
//   * events come in a valid order;
// and at the end the store's history holds every original message exactly once.
#include <map>
#include <set>
#include <string>

#include <catch2/catch.hpp>

#include "recap/codec.h"
#include "recap/compactor.h"
#include "recap/measure.h"

#include "support/fake_provider.h"
#include "support/recording_sink.h"
#include "support/test_data.h"
#include "support/test_store.h"

using namespace recap;
using recap::testing::RecordingSink;
using recap::testing::ScriptedProvider;
using recap::testing::ScriptedStep;

namespace {

void QueueMixedReplies(ScriptedProvider& p, int cycles) {
  const std::string valid =
      recap::testing::ValidCheckpointJson("Keep the customer's bookings right");
  for (int i = 0; i < cycles; ++i) {
    p.Push(ScriptedStep::Reply(valid, Usage{1000, 200}));
    p.Push(ScriptedStep::Reply("Plain prose summary: the agent looked up the reservation."));
    p.Push(ScriptedStep::Truncated(valid.substr(0, valid.size() / 2)));
    p.Push(ScriptedStep::Fail(Status::Unavailable("HTTP 503 from the summarizer")));
    p.Push(ScriptedStep::Slow(std::chrono::milliseconds(2), valid));
    p.Push(ScriptedStep::Truncated(""));  // nothing usable: R5.3
    p.Push(ScriptedStep::Reply("   "));   // empty: a failed compaction
  }
}

// Events of one Prepare: every compaction_started is followed by progress events and then
// exactly one completed or failed; reductions and skips stand alone; hook failures only
// inside a compaction.
void CheckEventOrder(const std::vector<std::string>& types) {
  bool open = false;
  for (const auto& t : types) {
    INFO("events: " << [&] {
      std::string s;
      for (auto& x : types) s += x + " ";
      return s;
    }());
    if (t == "compaction_started") {
      REQUIRE_FALSE(open);
      open = true;
    } else if (t == "compaction_progress" || t == "plugin_hook_failed") {
      REQUIRE(open);
    } else if (t == "compaction_completed" || t == "compaction_failed") {
      REQUIRE(open);
      open = false;
    } else if (t == "compaction_skipped" || t == "context_reduced") {
      REQUIRE_FALSE(open);
    } else {
      FAIL("unknown event type " << t);
    }
  }
  REQUIRE_FALSE(open);
}

std::set<std::string> OrphanIds(const Transcript& t) {
  std::set<std::string> ids;
  for (const auto& o : AnalyzePairing(t).orphans) ids.insert(o.call_id);
  return ids;
}

struct Stats {
  std::size_t prepares = 0, compactions = 0, failures = 0, budget_errors = 0;
};

Stats Replay(const recap::testing::NamedTranscript& source, std::size_t headroom) {
  INFO("transcript " << source.name);
  const std::size_t instructions =
      source.conversation.instructions ? MessageChars(*source.conversation.instructions) : 0;
  Config config;
  config.limits.max_context_chars = std::max<std::size_t>(4000, instructions + headroom);
  config.compaction.keep_turns = 2;
  auto provider = std::make_shared<ScriptedProvider>();
  QueueMixedReplies(*provider, 400);
  auto store = recap::testing::NewTestSessionStore();
  auto sink = std::make_shared<RecordingSink>();
  auto made = Compactor::Create(config, provider, store, {}, {sink});
  REQUIRE(made.ok());
  auto& compactor = **made;
  const std::string session = "replay";
  RequestSizes sizes;
  sizes.instructions_chars = instructions;
  sizes.tool_catalog_chars = 1500;

  // The source's own anomalies (orphan results) are allowed to show up; nothing else.
  Transcript whole(source.conversation.messages);
  const std::set<std::string> source_orphans = OrphanIds(whole);
  std::map<std::string, std::string> originals;  // id -> the message as appended (native JSON)

  std::size_t prepares = 0, compacted = 0, failures = 0, budget_errors = 0;
  for (std::size_t i = 0; i < source.conversation.messages.size(); ++i) {
    Message m = source.conversation.messages[i];
    m.id = "orig-" + std::to_string(i);
    auto encoded = native::EncodeMessage(m);
    REQUIRE(encoded.ok());
    originals[m.id] = *encoded;
    // Before every model request: the next message is the model's.
    if (m.role == Role::kAssistant && i > 0) {
      sink->Clear();
      auto prepared = compactor.Prepare(session, sizes);
      ++prepares;
      CheckEventOrder(sink->types());
      failures += sink->OfType("compaction_failed").size();
      if (!prepared.ok()) {
        REQUIRE(prepared.status().code() == StatusCode::kContextBudgetExceeded);
        REQUIRE(prepared.status().message().rfind("Context budget exceeded (approximately ", 0) ==
                0);
        ++budget_errors;
      } else {
        const Transcript& sent = prepared->messages;
        REQUIRE(instructions + sent.chars() <= config.limits.max_context_chars);
        auto pairing = AnalyzePairing(sent);
        for (const auto& o : pairing.orphans) {
          INFO("result " << o.call_id << " at " << o.message << " lost its call");
          REQUIRE(source_orphans.count(o.call_id) == 1);
        }
        compacted += prepared->compactions.size();
      }
    }
    REQUIRE(store->Append(session, m).ok());
  }
  // Nothing lost, nothing duplicated: every original is in the history exactly once, as it
  // was appended (reduced copies and checkpoints are additional entries).
  auto history = store->History(session);
  REQUIRE(history.ok());
  std::map<std::string, int> seen;
  for (const auto& e : *history) {
    auto it = originals.find(e.message.id);
    if (it == originals.end()) continue;
    auto enc = native::EncodeMessage(e.message);
    REQUIRE(enc.ok());
    if (*enc == it->second) ++seen[e.message.id];
  }
  for (const auto& [id, json] : originals) {
    INFO("message " << id);
    REQUIRE(seen[id] == 1);
  }
  CHECK(prepares > 0);
  Stats stats;
  stats.prepares = prepares;
  stats.compactions = compacted;
  stats.failures = failures;
  stats.budget_errors = budget_errors;
  return stats;
}

void Add(Stats& total, const Stats& s) {
  total.prepares += s.prepares;
  total.compactions += s.compactions;
  total.failures += s.failures;
  total.budget_errors += s.budget_errors;
}

}  // namespace

TEST_CASE("issue 3 long session: tau-bench runs replayed through Prepare") {
  auto all = recap::testing::AllRealTranscripts();
  std::size_t replayed = 0;
  Stats total;
  for (const auto& t : all) {
    if (t.format != "openai_chat") continue;
    if (replayed++ % 5 != 0) continue;  // every fifth run: 40 runs, all shapes
    Add(total, Replay(t, 3000));
  }
  CHECK(replayed >= 200);
  // The mix really exercised both paths.
  CHECK(total.compactions > 20);
  CHECK(total.failures > 5);
  WARN("tau-bench: " << total.prepares << " prepares, " << total.compactions << " compactions, "
                     << total.failures << " failed compactions, " << total.budget_errors
                     << " budget errors");
}

TEST_CASE("issue 3 long session: Claude Code, SWE-agent and OpenHands sessions") {
  auto all = recap::testing::AllRealTranscripts();
  std::size_t replayed = 0;
  Stats total;
  for (const auto& t : all) {
    if (t.format == "openai_chat") continue;
    Add(total, Replay(t, 12000));
    ++replayed;
  }
  CHECK(replayed >= 4);
  CHECK(total.compactions > 5);
  WARN("agents: " << total.prepares << " prepares, " << total.compactions << " compactions, "
                  << total.failures << " failed compactions, " << total.budget_errors
                  << " budget errors");
}

// The embedded default in a small window: the offline checkpoint is merged into at every
// compaction, and must not grow until it crowds the conversation out. Its reply budget is
// maxOutputTokens and at most a quarter of the trigger (R5.1), so compactions stay rare
// however long the session, and the newest instructions are the ones it keeps.
TEST_CASE("R5.1 R3.8 offline checkpoint in a small window: 400 turns, compactions stay rare") {
  Config config;
  config.limits.max_context_chars = 16000;
  config.compaction.keep_turns = 1;
  auto store = recap::testing::NewTestSessionStore();
  auto made = Compactor::Create(config, nullptr, store);
  REQUIRE(made.ok());
  auto& compactor = **made;
  const std::string session = "small-window";
  constexpr int kTurns = 400;
  std::vector<int> compacted_at;
  std::size_t largest_checkpoint = 0;
  for (int turn = 0; turn < kTurns; ++turn) {
    const std::string tag = "t" + std::to_string(turn);
    std::vector<Message> messages;
    messages.push_back(Message::UserText("request " + tag + ": keep " + std::string(200, 'u')));
    messages.push_back(Message::AssistantCalls(
        {ToolCall{tag + "-c", "read_file", R"({"path":"src/f)" + tag + R"(.cc"})", {}}}));
    messages.push_back(Message::ToolOutput(tag + "-c", std::string(600, 'r')));
    messages.push_back(Message::AssistantText("answer " + tag));
    REQUIRE(store->AppendMessages(session, std::move(messages)).ok());
    auto prepared = compactor.Prepare(session, {});
    INFO("turn " << turn << ": " << prepared.status().ToString());
    REQUIRE(prepared.ok());
    REQUIRE(prepared->messages.chars() <= config.limits.max_context_chars);
    if (prepared->compactions.empty()) continue;
    compacted_at.push_back(turn);
    const Message& checkpoint = prepared->messages[0];
    REQUIRE(checkpoint.summary);
    largest_checkpoint = std::max(largest_checkpoint, MessageChars(checkpoint));
    // The newest instruction the compaction summarized is in the checkpoint: with keep_turns
    // 1 that is the previous turn's request.
    const std::string text = JoinedText(checkpoint);
    CHECK(text.find("request t" + std::to_string(turn - 1) + ":") != std::string::npos);
  }
  REQUIRE(compacted_at.size() >= 10);
  // Steady state: the turns between compactions over the second half of the session.
  int late = 0;
  for (int t : compacted_at) late += t >= kTurns / 2 ? 1 : 0;
  WARN("offline in 16,000 characters: " << compacted_at.size() << " compactions in " << kTurns
                                        << " turns, " << late << " in the last " << kTurns / 2
                                        << "; largest checkpoint " << largest_checkpoint
                                        << " characters");
  CHECK(late <= kTurns / 2 / 5);  // one compaction in five turns or fewer
  CHECK(largest_checkpoint <= config.limits.max_context_chars / 4);
}
