// Failure injection (issue 3): whatever goes wrong in one compaction — the provider fails,
// throws, times out, answers nothing or the wrong shape; the store refuses the commit; a
// plugin throws or hangs — the transcript in the store is exactly what it was, and the event
// that says so is emitted. (A plugin's failure is the exception: compaction goes on without it.)
#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include "recap/codec.h"
#include "recap/compactor.h"

#include "support/fake_provider.h"
#include "support/forwarding_store.h"
#include "support/recording_hook.h"
#include "support/recording_sink.h"

using namespace recap;
using recap::testing::RecordingHook;
using recap::testing::RecordingSink;
using recap::testing::ScriptedProvider;
using recap::testing::ScriptedStep;

namespace {

const std::string kS = "session-f";

// A store that does what the in-memory store does, except that the commits it is told to
// refuse fail with the given status.
class FailingStore : public recap::testing::ForwardingStore {
 public:
  using ForwardingStore::ForwardingStore;
  Status fail_compaction;
  Status fail_reduction;

  Result<std::uint64_t> CommitCompaction(const std::string& s, const CompactionCommit& c) override {
    if (!fail_compaction.ok()) return fail_compaction;
    return ForwardingStore::CommitCompaction(s, c);
  }
  Result<std::uint64_t> CommitReduction(const std::string& s, const ReductionCommit& c) override {
    if (!fail_reduction.ok()) return fail_reduction;
    return ForwardingStore::CommitReduction(s, c);
  }
};

struct Setup {
  std::shared_ptr<ScriptedProvider> provider = std::make_shared<ScriptedProvider>();
  std::shared_ptr<FailingStore> store = std::make_shared<FailingStore>(NewInMemorySessionStore());
  std::shared_ptr<RecordingSink> sink = std::make_shared<RecordingSink>();
  std::unique_ptr<Compactor> compactor;

  explicit Setup(std::vector<std::shared_ptr<PluginHook>> plugins = {},
                 std::size_t timeout_ms = 5000) {
    Config c;
    c.limits.max_context_chars = 800000;
    c.plugin_hooks.timeout_ms = timeout_ms;
    auto made = Compactor::Create(c, provider, store, std::move(plugins), {sink});
    REQUIRE(made.ok());
    compactor = std::move(made).value();
    for (int n = 1; n <= 4; ++n) {
      const std::string id = "call_" + std::to_string(n);
      Append(Message::UserText("request " + std::to_string(n)));
      Append(Message::AssistantCalls({ToolCall{id, "read_file", R"({"path":"src/f.cc"})", {}}}));
      Append(Message::ToolOutput(id, "contents of src/f.cc, part " + std::to_string(n)));
      Append(Message::AssistantText("answer " + std::to_string(n)));
    }
  }
  void Append(Message m) { REQUIRE(store->Append(kS, std::move(m)).ok()); }

  // The active transcript as recap's JSON, message by message: what "unchanged" compares.
  std::vector<std::string> Snapshot() {
    auto s = store->Load(kS);
    REQUIRE(s.ok());
    std::vector<std::string> out;
    for (const Message& m : s->transcript) {
      auto json = native::EncodeMessage(m);
      REQUIRE(json.ok());
      out.push_back(*json);
    }
    return out;
  }
};

// Runs a manual compaction expected to fail, and checks that nothing changed and that
// compaction_failed was the last event.
void ExpectFailedAndUnchanged(Setup& s, const std::string& needle) {
  const std::vector<std::string> before = s.Snapshot();
  auto out = s.compactor->Compact(kS);
  REQUIRE_FALSE(out.ok());
  INFO("status: " << out.status().ToString());
  CHECK(out.status().message().find(needle) != std::string::npos);
  CHECK(s.Snapshot() == before);
  const auto types = s.sink->types();
  REQUIRE_FALSE(types.empty());
  CHECK(types.back() == "compaction_failed");
  CHECK(s.sink->OfType("compaction_failed").size() == 1);
  CHECK(s.sink->OfType("compaction_completed").empty());
}

}  // namespace

TEST_CASE("R7.1 failure injection: the provider times out") {
  Setup s;
  s.provider->Push(
      ScriptedStep::Fail(Status::DeadlineExceeded("the model did not answer within 30 s")));
  ExpectFailedAndUnchanged(s, "did not answer");
}

TEST_CASE("R7.1 failure injection: the provider fails, throws, or answers nothing") {
  SECTION("fails") {
    Setup s;
    s.provider->Push(ScriptedStep::Fail(Status::Unavailable("connection refused")));
    ExpectFailedAndUnchanged(s, "connection refused");
  }
  SECTION("throws") {
    Setup s;
    s.provider->Push(ScriptedStep::Throw("provider exploded"));
    ExpectFailedAndUnchanged(s, "provider exploded");
  }
  SECTION("answers an empty text") {
    Setup s;
    s.provider->Push(ScriptedStep::Reply(""));
    ExpectFailedAndUnchanged(s, "the summarizer returned an empty reply");
  }
}

TEST_CASE("R4.3 failure injection: JSON of the wrong shape never corrupts the transcript") {
  // Each reply is valid JSON that is not the checkpoint object. Whether recap keeps it as a
  // text-only checkpoint (R4.3) or fails, the result is one well-formed compaction or none.
  for (const char* reply :
       {R"([1, 2, 3])", R"("just a string")", R"({"goal": 5, "instructions": "x"})",
        R"({"unrelated": {"deeply": [null]}})", R"(null)", R"(42)"}) {
    DYNAMIC_SECTION("reply " << reply) {
      Setup s;
      const std::vector<std::string> before = s.Snapshot();
      s.provider->Push(ScriptedStep::Reply(reply));
      auto out = s.compactor->Compact(kS);
      if (out.ok()) {
        REQUIRE(out->compacted);
        const std::vector<std::string> after = s.Snapshot();
        // One checkpoint in front of an exact suffix of what was there.
        REQUIRE(after.size() >= 2);
        REQUIRE(after.size() - 1 <= before.size());
        CHECK(std::equal(after.begin() + 1, after.end(),
                         before.end() - static_cast<std::ptrdiff_t>(after.size() - 1)));
        CHECK(s.sink->OfType("compaction_completed").size() == 1);
      } else {
        CHECK(s.Snapshot() == before);
        CHECK(s.sink->OfType("compaction_failed").size() == 1);
      }
    }
  }
}

TEST_CASE("R8.1 failure injection: the store refuses the commit") {
  SECTION("an I/O error") {
    Setup s;
    s.store->fail_compaction = Status::IOError("disk on fire");
    s.provider->Push(ScriptedStep::Reply(R"({"goal": "g", "current_state": "s"})"));
    ExpectFailedAndUnchanged(s, "disk on fire");
  }
  SECTION("a conflict with another writer") {
    Setup s;
    s.store->fail_compaction = Status::Conflict("session changed since version 16");
    s.provider->Push(ScriptedStep::Reply(R"({"goal": "g", "current_state": "s"})"));
    ExpectFailedAndUnchanged(s, "changed since");
  }
}

TEST_CASE("R9.2 failure injection: a plugin that throws or hangs does not stop the compaction") {
  SECTION("beforeCompact throws") {
    auto hook = std::make_shared<RecordingHook>("thrower");
    hook->before().throw_std = true;
    Setup s({hook});
    s.provider->Push(ScriptedStep::Reply(R"({"goal": "g", "current_state": "s"})"));
    auto out = s.compactor->Compact(kS);
    REQUIRE(out.ok());
    CHECK(out->compacted);
    CHECK(s.sink->OfType("plugin_hook_failed").size() == 1);
    CHECK(s.sink->OfType("compaction_completed").size() == 1);
  }
  SECTION("afterCompact hangs past the limit") {
    // The afterCompact hangs until the gate opens; the limit is generous, so that the same
    // hook's beforeCompact (which returns at once) succeeds on any machine. A Compact that
    // waited for the hung hook would return only once the gate gave up, with it finished.
    auto gate = std::make_shared<recap::testing::HookGate>();
    recap::testing::OpenOnExit open_gate(gate);
    auto hook = std::make_shared<RecordingHook>("sleeper");
    hook->after().hold = gate;
    Setup s({hook}, /*timeout_ms=*/2000);
    s.provider->Push(ScriptedStep::Reply(R"({"goal": "g", "current_state": "s"})"));
    auto out = s.compactor->Compact(kS);
    REQUIRE(out.ok());
    CHECK(out->compacted);
    CHECK(hook->finished() == 1);  // its beforeCompact; the afterCompact is abandoned, held
    const auto failed = s.sink->OfType("plugin_hook_failed");
    REQUIRE(failed.size() == 1);
    CHECK(failed[0].dump().find("afterCompact") != std::string::npos);
    gate->Open();
    CHECK(hook->WaitForFinished(2, std::chrono::seconds(10)));  // and then ends
  }
}
