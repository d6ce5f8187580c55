// Fault sweep (issue 8): real sessions replayed turn by turn through Prepare (as in
// test_long_session.cc), once without faults to count the steps, then once per step with a
// fault injected exactly there:
//
//   * the store refuses the k-th write (an append, a compaction or a reduction commit) — or
//     applies it and then reports a failure, as when a connection drops after the commit;
//   * the provider fails, throws, answers garbage or answers nothing at its k-th call;
//   * plugins that throw, hang past their limit and return garbage take part in every
//     compaction of a whole replay.
//
// The host does what a host does: retries a refused append once, and retries Prepare once when
// it failed for a reason other than the budget. After every replay the store's history holds
// every message the host appended exactly once, as appended, and the active transcript is a
// valid conversation: no tool result lost its call and no call its result, beyond what the
// source itself had.
#include <chrono>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include <catch2/catch.hpp>

#include "recap/codec.h"
#include "recap/compactor.h"
#include "recap/measure.h"

#include "support/fake_provider.h"
#include "support/forwarding_store.h"
#include "support/recording_hook.h"
#include "support/recording_sink.h"
#include "support/test_data.h"

using namespace recap;
using recap::testing::RecordingHook;
using recap::testing::RecordingSink;
using recap::testing::ScriptedProvider;
using recap::testing::ScriptedStep;

namespace {

enum class StoreFault { kNone, kRefuse, kLostAcknowledgement };

// Counts every write and injects one fault at the chosen one (1-based).
class FaultyStore : public recap::testing::ForwardingStore {
 public:
  FaultyStore(std::shared_ptr<SessionStore> inner, std::size_t fail_at, StoreFault fault)
      : ForwardingStore(std::move(inner)), fail_at_(fail_at), fault_(fault) {}
  std::size_t writes() const { return writes_; }
  bool fired() const { return fired_; }

  Result<std::uint64_t> AppendMessages(const std::string& s, std::vector<Message> m) override {
    // An append whose acknowledgement is lost would be appended twice by any host that retries;
    // that is the host's idempotency problem, not the store's, so appends are only refused.
    if (Fault() != StoreFault::kNone) return Status::IOError("injected: the disk is full");
    return ForwardingStore::AppendMessages(s, std::move(m));
  }
  Result<std::uint64_t> CommitCompaction(const std::string& s, const CompactionCommit& c) override {
    return Apply(Fault(), [&] { return ForwardingStore::CommitCompaction(s, c); });
  }
  Result<std::uint64_t> CommitReduction(const std::string& s, const ReductionCommit& c) override {
    return Apply(Fault(), [&] { return ForwardingStore::CommitReduction(s, c); });
  }

 private:
  StoreFault Fault() {
    if (++writes_ != fail_at_) return StoreFault::kNone;
    fired_ = true;
    return fault_;
  }
  template <typename F>
  Result<std::uint64_t> Apply(StoreFault fault, F commit) {
    if (fault == StoreFault::kRefuse) return Status::IOError("injected: the commit failed");
    Result<std::uint64_t> done = commit();
    if (fault == StoreFault::kLostAcknowledgement && done.ok()) {
      return Status::Unavailable("injected: the connection dropped after the commit");
    }
    return done;
  }

  std::size_t fail_at_;
  StoreFault fault_;
  std::size_t writes_ = 0;
  bool fired_ = false;
};

std::set<std::string> OrphanIds(const Transcript& t) {
  std::set<std::string> ids;
  for (const auto& o : AnalyzePairing(t).orphans) ids.insert(o.call_id);
  return ids;
}
std::set<std::string> UncertainIds(const Transcript& t) {
  std::set<std::string> ids;
  for (const auto& u : AnalyzePairing(t).uncertain) ids.insert(u.call_id);
  return ids;
}

bool Subset(const std::set<std::string>& a, const std::set<std::string>& b) {
  for (const auto& x : a) {
    if (!b.count(x)) return false;
  }
  return true;
}

struct Outcome {
  std::size_t writes = 0;
  std::size_t provider_calls = 0;
  std::size_t compactions = 0;
  std::size_t hook_failures = 0;
  std::size_t compaction_failures = 0;
  std::size_t leading_summaries = 0;  // the checkpoint and injected context at the end
  std::size_t clearings = 0;          // tool_results_cleared events (issue 19)
  std::size_t retirements = 0;        // provider_checkpoint events (issue 19)
  std::size_t background_swaps = 0;   // compactions swapped in from the background (issue 20)
  std::map<std::string, std::size_t> before_failures;  // plugin -> its failed beforeCompacts
  bool fired = false;
};

// Replays `source` through a Compactor on a FaultyStore, checking at every request and at the
// end. `provider` is scripted by the caller.
// `injecting`: how many of the hooks inject context after each compaction.
// `hook_timeout_ms`: the hooks' limit (plugin_hooks.timeout_ms).
Outcome Replay(const recap::testing::NamedTranscript& source, std::size_t headroom,
               std::size_t fail_at, StoreFault fault, std::shared_ptr<ScriptedProvider> provider,
               std::vector<std::shared_ptr<PluginHook>> hooks = {}, std::size_t injecting = 0,
               bool tiers = false, bool background = false, std::size_t hook_timeout_ms = 30) {
  INFO("transcript " << source.name << ", fault at write " << fail_at << " ("
                     << (fault == StoreFault::kRefuse ? "refused" : "lost acknowledgement") << ")");
  const std::size_t instructions =
      source.conversation.instructions ? MessageChars(*source.conversation.instructions) : 0;
  Config config;
  config.limits.max_context_chars = std::max<std::size_t>(4000, instructions + headroom);
  config.compaction.keep_turns = 1;
  config.plugin_hooks.timeout_ms = hook_timeout_ms;
  // Issue 19: the cheap tier clears old tool results first, and provider checkpoints arrive.
  if (tiers) config.compaction.clear_tool_results = {true, 1, {}, 500};
  // Issue 20: compactions start early on a worker, which swaps them in. The replay waits for
  // each to finish and be swapped in before the next message, as a host's model call would
  // outlast the summarizer: the writes then come in the same order in every run.
  if (background) config.compaction.background.enabled = true;
  auto store = std::make_shared<FaultyStore>(NewInMemorySessionStore(), fail_at, fault);
  auto sink = std::make_shared<RecordingSink>();
  auto made = Compactor::Create(config, provider, store, std::move(hooks), {sink});
  REQUIRE(made.ok());
  Compactor& compactor = **made;
  const std::string session = "sweep";
  RequestSizes sizes;
  sizes.instructions_chars = instructions;

  const Transcript whole(source.conversation.messages);
  const std::set<std::string> source_orphans = OrphanIds(whole);
  const std::set<std::string> source_uncertain = UncertainIds(whole);
  std::map<std::string, std::string> originals;  // id -> the message as appended

  std::size_t artifacts = 0;
  std::set<std::string> open_calls;  // calls of the messages so far without their result yet
  std::size_t eligible = 0;
  for (std::size_t i = 0; i < source.conversation.messages.size(); ++i) {
    Message m = source.conversation.messages[i];
    m.id = "orig-" + std::to_string(i);
    // Where no call waits for its result: as a provider puts its compaction between rounds.
    if (tiers && i > 0 && open_calls.empty() && ++eligible % 4 == 0) {
      // An encrypted provider checkpoint before this turn, as a host appends OpenAI's item.
      Message a;
      a.id = "artifact-" + std::to_string(++artifacts);
      a.role = Role::kAssistant;
      a.summary = true;
      a.parts.emplace_back(Opaque{"compaction",
                                  R"({"type":"compaction","encrypted_content":"gAAAA)" +
                                      std::to_string(artifacts) + R"("})",
                                  OpaqueLink::kNone,
                                  {}});
      auto enc = native::EncodeMessage(a);
      REQUIRE(enc.ok());
      originals[a.id] = *enc;
      Result<std::uint64_t> added = store->Append(session, a);
      if (!added.ok()) added = store->Append(session, a);
      REQUIRE(added.ok());
    }
    auto encoded = native::EncodeMessage(m);
    REQUIRE(encoded.ok());
    originals[m.id] = *encoded;
    if (m.role == Role::kAssistant && i > 0) {
      Result<Prepared> prepared = compactor.Prepare(session, sizes);
      if (!prepared.ok() && prepared.status().code() != StatusCode::kContextBudgetExceeded) {
        INFO("Prepare failed: " << prepared.status().ToString());
        prepared = compactor.Prepare(session, sizes);  // the host tries once more
      }
      if (prepared.ok()) {
        REQUIRE(instructions + prepared->messages.chars() <= config.limits.max_context_chars);
        REQUIRE(Subset(OrphanIds(prepared->messages), source_orphans));
        REQUIRE(UncertainIds(prepared->messages).empty());
      } else {
        REQUIRE(prepared.status().code() == StatusCode::kContextBudgetExceeded);
      }
      for (int wait = 0; background && wait < 5000; ++wait) {
        auto plan = compactor.PlanFor(session, sizes);
        // Done, and swapped in by its worker (or left for the next Prepare: ready).
        if (plan.ok() && !plan->background_in_flight && !plan->background_ready) break;
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
      }
    }
    for (const Part& p : m.parts) {
      if (const auto* c = std::get_if<ToolCall>(&p)) open_calls.insert(c->id);
      if (const auto* r = std::get_if<ToolResult>(&p)) open_calls.erase(r->call_id);
    }
    Result<std::uint64_t> appended = store->Append(session, m);
    if (!appended.ok()) appended = store->Append(session, m);  // the host retries once
    REQUIRE(appended.ok());
  }

  // Every original exactly once in the history, as appended.
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
  // The active transcript is a conversation: pairing as in the source, the last message the
  // source's last, at most one checkpoint and it comes first.
  auto state = store->Load(session);
  REQUIRE(state.ok());
  const Transcript& active = state->transcript;
  REQUIRE(!active.empty());
  CHECK(Subset(OrphanIds(active), source_orphans));
  CHECK(Subset(UncertainIds(active), source_uncertain));
  CHECK(active.back().id == "orig-" + std::to_string(source.conversation.messages.size() - 1));
  // What recap wrote leads: the checkpoint, then the context the hooks injected after it, and
  // nothing of it further down (the sources hold no summary messages of their own).
  std::size_t leading = 0;
  while (leading < active.size() && active[leading].summary) ++leading;
  CHECK(leading <= 1 + injecting + (tiers ? 1 : 0));  // + an encrypted artifact kept first
  for (std::size_t i = leading; i < active.size(); ++i) {
    INFO("active message " << i << " of " << active.size());
    // Only a provider checkpoint that arrived since the last Prepare may stand further down.
    if (!tiers || !FindProviderCheckpoint(active[i])) CHECK_FALSE(active[i].summary);
  }
  if (tiers && artifacts > 0) {
    // The newest artifact is never lost: it is active (kept or not yet retired).
    const std::string newest = "gAAAA" + std::to_string(artifacts) + "\"";
    bool found = false;
    for (const Message& m : active) {
      for (const Part& p : m.parts) {
        const auto* o = std::get_if<Opaque>(&p);
        found = found || (o != nullptr && o->payload.find(newest) != std::string::npos);
      }
    }
    CHECK(found);
  }
  if (tiers && leading > 1) {
    // The encrypted artifact recap's summarizer kept, then its checkpoint.
    CHECK(FindProviderCheckpoint(active[0]));
    CHECK(JoinedText(active[1]).rfind("# Checkpoint", 0) == 0);
  } else if (leading > 1) {
    CHECK(JoinedText(active[0]).rfind("# Checkpoint", 0) == 0);
    CHECK(JoinedText(active[1]) == "Remember: the fine plugin's note");
  }

  Outcome out;
  out.writes = store->writes();
  out.provider_calls = provider->calls();
  out.compactions = sink->OfType("compaction_completed").size();
  out.hook_failures = sink->OfType("plugin_hook_failed").size();
  for (const auto& e : sink->OfType("plugin_hook_failed")) {
    if (e["hook"] == "beforeCompact") ++out.before_failures[e["plugin"].get<std::string>()];
  }
  out.compaction_failures = sink->OfType("compaction_failed").size();
  out.leading_summaries = leading;
  out.clearings = sink->OfType("tool_results_cleared").size();
  out.retirements = sink->OfType("provider_checkpoint").size();
  for (const auto& e : sink->OfType("compaction_completed")) {
    out.background_swaps += e.contains("background") ? 1 : 0;
  }
  out.fired = store->fired();
  return out;
}

std::vector<recap::testing::NamedTranscript> Sources() {
  std::vector<recap::testing::NamedTranscript> picked;
  for (auto& t : recap::testing::AllRealTranscripts()) {
    if (t.name == "tau-bench/run-000" || t.name == "tau-bench/run-017" ||
        t.name.rfind("claude-code/ef958aa1", 0) == 0 || t.format == "swe_agent") {
      picked.push_back(std::move(t));
    }
  }
  return picked;
}

std::size_t Headroom(const recap::testing::NamedTranscript& t) {
  return t.format == "openai_chat" ? 3000 : 12000;
}

}  // namespace

TEST_CASE("issue 8 R7 R8.1 fault sweep: the store fails at every write of a long session") {
  const auto sources = Sources();
  REQUIRE(sources.size() >= 4);
  std::size_t runs = 0, fired = 0;
  for (const auto& source : sources) {
    const Outcome clean = Replay(source, Headroom(source), 0, StoreFault::kNone,
                                 std::make_shared<ScriptedProvider>());
    REQUIRE(clean.compactions > 0);
    // Every write, or every few on the long sessions: at least 40 injection points each.
    const std::size_t stride = std::max<std::size_t>(1, clean.writes / 40);
    for (StoreFault fault : {StoreFault::kRefuse, StoreFault::kLostAcknowledgement}) {
      for (std::size_t k = 1; k <= clean.writes; k += stride) {
        const Outcome o =
            Replay(source, Headroom(source), k, fault, std::make_shared<ScriptedProvider>());
        ++runs;
        fired += o.fired ? 1 : 0;
      }
    }
  }
  CHECK(fired == runs);  // every run really met its fault
  WARN("store fault sweep: " << runs << " replays, one injected fault each");
}

TEST_CASE(
    "issue 19 R14.1 R14.3 fault sweep: cleared tool results and provider checkpoints under "
    "store faults") {
  const auto sources = Sources();
  std::size_t runs = 0, fired = 0, clearings = 0, retirements = 0;
  for (const auto& source : sources) {
    if (source.format == "openai_chat") continue;  // the long sessions, with big tool outputs
    const Outcome clean = Replay(source, Headroom(source), 0, StoreFault::kNone,
                                 std::make_shared<ScriptedProvider>(), {}, 0, /*tiers=*/true);
    REQUIRE(clean.compactions + clean.clearings + clean.retirements > 0);
    clearings += clean.clearings;
    retirements += clean.retirements;
    const std::size_t stride = std::max<std::size_t>(1, clean.writes / 30);
    for (StoreFault fault : {StoreFault::kRefuse, StoreFault::kLostAcknowledgement}) {
      for (std::size_t k = 1; k <= clean.writes; k += stride) {
        const Outcome o = Replay(source, Headroom(source), k, fault,
                                 std::make_shared<ScriptedProvider>(), {}, 0, /*tiers=*/true);
        ++runs;
        fired += o.fired ? 1 : 0;
      }
    }
  }
  CHECK(clearings > 0);
  CHECK(retirements > 0);
  CHECK(fired == runs);
  WARN("tiers fault sweep: " << runs << " replays, " << clearings << " clearings and "
                             << retirements << " retirements in the clean runs");
}

TEST_CASE("issue 20 R15 fault sweep: background compaction under store and summarizer faults") {
  const auto sources = Sources();
  std::size_t runs = 0, fired = 0, swaps = 0, provider_runs = 0;
  for (const auto& source : sources) {
    const Outcome clean =
        Replay(source, Headroom(source), 0, StoreFault::kNone, std::make_shared<ScriptedProvider>(),
               {}, 0, false, /*background=*/true);
    REQUIRE(clean.compactions > 0);
    swaps += clean.background_swaps;
    const std::size_t stride = std::max<std::size_t>(1, clean.writes / 30);
    for (StoreFault fault : {StoreFault::kRefuse, StoreFault::kLostAcknowledgement}) {
      for (std::size_t k = 1; k <= clean.writes; k += stride) {
        const Outcome o =
            Replay(source, Headroom(source), k, fault, std::make_shared<ScriptedProvider>(), {}, 0,
                   false, /*background=*/true);
        ++runs;
        fired += o.fired ? 1 : 0;
      }
    }
    // The summarizer fails at each of its calls in turn, on the worker.
    for (std::size_t k = 1; k <= clean.provider_calls; ++k) {
      auto provider = std::make_shared<ScriptedProvider>();
      for (std::size_t before = 1; before < k; ++before) {
        provider->Push(ScriptedStep::Reply(recap::testing::ValidCheckpointJson("Go on")));
      }
      provider->Push(ScriptedStep::Fail(Status::Unavailable("injected: HTTP 503")));
      const Outcome o = Replay(source, Headroom(source), 0, StoreFault::kNone, provider, {}, 0,
                               false, /*background=*/true);
      INFO("fault at provider call " << k);
      CHECK(o.compaction_failures >= 1);
      ++provider_runs;
    }
  }
  CHECK(swaps > 0);  // the clean runs did swap background compactions in
  CHECK(fired == runs);
  WARN("background fault sweep: " << runs << " store faults, " << provider_runs
                                  << " summarizer faults, " << swaps
                                  << " background swaps in the clean runs");
}

TEST_CASE("issue 8 R1.3 R5 fault sweep: the summarizer fails at every call of a long session") {
  const auto sources = Sources();
  std::size_t runs = 0, failed_runs = 0;
  for (const auto& source : sources) {
    const Outcome clean = Replay(source, Headroom(source), 0, StoreFault::kNone,
                                 std::make_shared<ScriptedProvider>());
    REQUIRE(clean.provider_calls > 0);
    const std::vector<ScriptedStep> faults = {
        ScriptedStep::Fail(Status::Unavailable("injected: HTTP 503")),
        ScriptedStep::Throw("injected: the client threw"),
        ScriptedStep::Reply("{\"goal\": 42, \"next_steps\": \"not a list\""),
        ScriptedStep::Reply(std::string("\xFF\xFE not UTF-8 \xC3")),
        ScriptedStep::Truncated(""),
    };
    for (std::size_t k = 1; k <= clean.provider_calls; ++k) {
      for (const ScriptedStep& fault : faults) {
        auto provider = std::make_shared<ScriptedProvider>();
        for (std::size_t before = 1; before < k; ++before) {
          provider->Push(ScriptedStep::Reply(recap::testing::ValidCheckpointJson("Go on")));
        }
        provider->Push(fault);
        const Outcome o = Replay(source, Headroom(source), 0, StoreFault::kNone, provider);
        ++runs;
        // The fault was met: its step was used, and the ones that cannot give a checkpoint
        // (a failure, a throw, a cut reply with nothing in it) failed a compaction.
        INFO("fault at provider call " << k);
        CHECK(provider->pending() == 0);
        const bool fails = !fault.error.ok() || fault.throws ||
                           (fault.finish == FinishReason::kLength && fault.text.empty());
        if (fails) {
          CHECK(o.compaction_failures >= 1);
          ++failed_runs;
        }
      }
    }
  }
  CHECK(failed_runs > 0);
  WARN("provider fault sweep: " << runs << " replays, " << failed_runs
                                << " of them with a fault that fails a compaction");
}

TEST_CASE(
    "issue 8 R9.2 fault sweep: hooks that throw, hang or return garbage in every compaction") {
  // beforeCompact fails: a throw, and garbage (an output field without a name). A hook whose
  // beforeCompact failed is left out of afterCompact, so the afterCompact failures have hooks
  // of their own: a throw, a hang past the limit, garbage (invalid UTF-8 to inject).
  auto thrower = std::make_shared<RecordingHook>("thrower");
  thrower->before().throw_std = true;
  auto garbage = std::make_shared<RecordingHook>("garbage");
  garbage->before().result.output_fields.push_back({"", "a field without a name", "not a schema"});
  auto after_thrower = std::make_shared<RecordingHook>("after_thrower");
  after_thrower->after().throw_other = true;
  // The sleeper's afterCompact hangs until the gate opens (never, during the sweep), so it
  // times out in every compaction whatever the machine's speed; it stops once cancelled. The
  // limit is what every compaction waits for it, so it stays short; the other hooks return at
  // once and normally succeed well within it.
  auto gate = std::make_shared<recap::testing::HookGate>();
  recap::testing::OpenOnExit open_gate(gate);
  auto sleeper = std::make_shared<RecordingHook>("sleeper");
  sleeper->after().hold = gate;
  sleeper->after().honour_cancel = true;
  auto after_garbage = std::make_shared<RecordingHook>("after_garbage");
  after_garbage->after().result.inject_context = std::string("\xC3\x28 invalid UTF-8");
  // And one that works: a report and context to inject after the checkpoint.
  auto fine = std::make_shared<RecordingHook>("fine");
  fine->after().result.report = "ok";
  fine->after().result.inject_context = "Remember: the fine plugin's note";

  std::size_t compactions = 0, hook_failures = 0, with_context = 0;
  std::map<std::string, std::size_t> before_failures;
  for (const auto& source : Sources()) {
    const Outcome o =
        Replay(source, Headroom(source), 0, StoreFault::kNone, std::make_shared<ScriptedProvider>(),
               {thrower, garbage, after_thrower, sleeper, after_garbage, fine},
               /*injecting=*/1, /*tiers=*/false, /*background=*/false, /*hook_timeout_ms=*/200);
    compactions += o.compactions;
    hook_failures += o.hook_failures;
    with_context += o.leading_summaries == 2 ? 1 : 0;
    for (const auto& [plugin, n] : o.before_failures) before_failures[plugin] += n;
  }
  CHECK(compactions > 0);
  // The five bad hooks fail in every compaction, the afterCompact ones after being called.
  CHECK(hook_failures >= compactions * 5);
  CHECK(before_failures["thrower"] == compactions);
  CHECK(before_failures["garbage"] == compactions);
  CHECK(thrower->AfterCalls().empty());
  CHECK(garbage->AfterCalls().empty());
  // Every hook whose beforeCompact succeeded is called after the compaction, and only those.
  // Their beforeCompact returns at once; should one still come too late on a loaded machine,
  // that hook was rightly left out of that afterCompact, so the count allows for it (and a
  // call that timed out may be recorded by its own thread a little later: waited for).
  for (const auto& hook : {after_thrower, sleeper, after_garbage, fine}) {
    INFO("hook " << hook->Name() << ", beforeCompact failed " << before_failures[hook->Name()]
                 << " times");
    const std::size_t expected = compactions - before_failures[hook->Name()];
    const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(30);
    while (hook->AfterCalls().size() < expected && std::chrono::steady_clock::now() < give_up) {
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    CHECK(hook->AfterCalls().size() == expected);
    CHECK(before_failures[hook->Name()] < compactions);  // not all of them late
  }
  CHECK(with_context > 0);  // the fine hook's context sits right after the checkpoint
  CHECK(sleeper->WaitForFinished(sleeper->started(), std::chrono::seconds(30)));
}
