// SPEC R9: plugin hooks under a time limit (the private runner the Compactor uses) and the
// built-in memory plugin.
//
// Hooks that hang are abandoned on their own threads. Tests that abandon one wait for it to
// finish before they end, so that AddressSanitizer and ThreadSanitizer see the late return
// touch only memory it owns.
#include <chrono>
#include <map>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include <catch2/catch.hpp>

#include "recap/measure.h"
#include "recap/memory_plugin.h"
#include "recap/plugin_hook.h"

#include "plugins/plugin_runner.h"
#include "support/fake_provider.h"
#include "support/recording_hook.h"
#include "support/recording_sink.h"

using namespace recap;
using recap::testing::Field;
using recap::testing::Garbage;
using recap::testing::GarbageRequest;
using recap::testing::RecordingHook;
using std::chrono::milliseconds;
using Clock = std::chrono::steady_clock;
using Plugins = std::vector<std::shared_ptr<PluginHook>>;

namespace {

constexpr milliseconds kGenerous{5000};  // for hooks that are expected to finish

BeforeCompactContext BeforeContext() {
  BeforeCompactContext c;
  c.session = "s1";
  c.reason = "auto";
  c.messages = 12;
  c.chars = 3400;
  return c;
}

AfterCompactContext AfterContext() {
  AfterCompactContext c;
  c.session = "s1";
  c.reason = "auto";
  c.checkpoint.goal = "Ship the release";
  c.checkpoint.next_steps = {"tag it"};
  return c;
}

std::shared_ptr<RecordingHook> Hook(const std::string& name) {
  return std::make_shared<RecordingHook>(name);
}

// A plugin that overrides nothing but its name.
class NamedOnly : public PluginHook {
 public:
  std::string Name() const override { return "plain"; }
};

long long MillisSince(Clock::time_point t0) {
  return std::chrono::duration_cast<milliseconds>(Clock::now() - t0).count();
}

// Runs one plugin's BeforeCompact and returns its single failure's text.
std::string BeforeFailure(const std::shared_ptr<PluginHook>& plugin,
                          milliseconds timeout = kGenerous) {
  internal::BeforeCompactRun run = internal::RunBeforeCompact({plugin}, BeforeContext(), timeout);
  REQUIRE(run.ok.empty());
  REQUIRE(run.failures.size() == 1);
  CHECK(run.failures[0].hook == "beforeCompact");
  CHECK(run.failures[0].plugin == plugin->Name());
  return run.failures[0].error;
}

std::string AfterFailure(const std::shared_ptr<PluginHook>& plugin,
                         milliseconds timeout = kGenerous) {
  internal::AfterCompactRun run =
      internal::RunAfterCompact({plugin}, {plugin->Name()}, AfterContext(), {}, timeout);
  REQUIRE(run.ok.empty());
  REQUIRE(run.failures.size() == 1);
  CHECK(run.failures[0].hook == "afterCompact");
  CHECK(run.failures[0].plugin == plugin->Name());
  return run.failures[0].error;
}

}  // namespace

// ---- R9.1 ---------------------------------------------------------------------------------

TEST_CASE("R9.1 beforeCompact instructions and output fields are collected in plugin order") {
  auto alpha = Hook("alpha");
  alpha->before().result.instructions = "List open questions.";
  alpha->before().result.output_fields = {Field("alpha_notes", "open questions")};
  auto beta = Hook("beta");
  beta->before().result.instructions = "Name the owners.";
  beta->before().result.output_fields = {Field("beta_a"), Field("beta_b", "b", "")};

  internal::BeforeCompactRun run =
      internal::RunBeforeCompact({alpha, beta}, BeforeContext(), kGenerous);
  CHECK(run.failures.empty());
  REQUIRE(run.ok.size() == 2);
  CHECK(run.ok[0].plugin == "alpha");
  CHECK(run.ok[0].request.instructions == "List open questions.");
  REQUIRE(run.ok[0].request.output_fields.size() == 1);
  CHECK(run.ok[0].request.output_fields[0].name == "alpha_notes");
  CHECK(run.ok[0].request.output_fields[0].description == "open questions");
  CHECK(run.ok[1].plugin == "beta");
  REQUIRE(run.ok[1].request.output_fields.size() == 2);
  CHECK(run.ok[1].request.output_fields[1].json_schema.empty());  // no schema is fine

  // Each hook saw the compaction it is part of.
  REQUIRE(alpha->BeforeCalls().size() == 1);
  const BeforeCompactContext seen = alpha->BeforeCalls()[0];
  CHECK(seen.session == "s1");
  CHECK(seen.reason == "auto");
  CHECK(seen.messages == 12);
  CHECK(seen.chars == 3400);
  CHECK(beta->BeforeCalls().size() == 1);
}

TEST_CASE("R9.1 a plugin that overrides no hook takes part with nothing to add") {
  auto plain = std::make_shared<NamedOnly>();
  internal::BeforeCompactRun before =
      internal::RunBeforeCompact({plain}, BeforeContext(), kGenerous);
  CHECK(before.failures.empty());
  REQUIRE(before.ok.size() == 1);
  CHECK(before.ok[0].request.instructions.empty());
  CHECK(before.ok[0].request.output_fields.empty());
  internal::AfterCompactRun after =
      internal::RunAfterCompact({plain}, {"plain"}, AfterContext(), {}, kGenerous);
  CHECK(after.failures.empty());
  REQUIRE(after.ok.size() == 1);
  CHECK(after.ok[0].result.inject_context.empty());
  CHECK(after.ok[0].result.report.empty());
}

TEST_CASE(
    "R9.1 afterCompact gets the checkpoint and only its own fields, and its injection and report "
    "come back in plugin order") {
  auto alpha = Hook("alpha");
  alpha->after().result.inject_context = "## Open questions\n- who owns the API?\n";
  alpha->after().result.report = "1 question";
  auto beta = Hook("beta");
  beta->after().result.report = "owners noted";
  auto gamma = Hook("gamma");  // its beforeCompact failed: not participating
  auto delta = Hook("delta");  // participating, but the summarizer wrote none of its fields

  const std::map<std::string, std::map<std::string, std::string>> fields = {
      {"alpha", {{"alpha_notes", R"(["who owns the API?"])"}}},
      {"beta", {{"beta_a", R"("x")"}, {"beta_b", "42"}}},
      {"gamma", {{"gamma_secret", "1"}}}};
  internal::AfterCompactRun run = internal::RunAfterCompact(
      {alpha, beta, gamma, delta}, {"beta", "alpha", "delta"}, AfterContext(), fields, kGenerous);

  CHECK(run.failures.empty());
  REQUIRE(run.ok.size() == 3);
  CHECK(run.ok[0].plugin == "alpha");
  CHECK(run.ok[0].result.inject_context == "## Open questions\n- who owns the API?\n");
  CHECK(run.ok[0].result.report == "1 question");
  CHECK(run.ok[1].plugin == "beta");
  CHECK(run.ok[1].result.report == "owners noted");
  CHECK(run.ok[2].plugin == "delta");

  REQUIRE(alpha->AfterCalls().size() == 1);
  const AfterCompactContext a = alpha->AfterCalls()[0];
  CHECK(a.session == "s1");
  CHECK(a.reason == "auto");
  CHECK(a.checkpoint.goal == "Ship the release");
  CHECK(a.fields ==
        std::map<std::string, std::string>{{"alpha_notes", R"(["who owns the API?"])"}});
  REQUIRE(beta->AfterCalls().size() == 1);
  CHECK(beta->AfterCalls()[0].fields ==
        std::map<std::string, std::string>{{"beta_a", R"("x")"}, {"beta_b", "42"}});
  CHECK(gamma->AfterCalls().empty());
  REQUIRE(delta->AfterCalls().size() == 1);
  CHECK(delta->AfterCalls()[0].fields.empty());
}

// ---- R9.2: failures ------------------------------------------------------------------------

TEST_CASE("R9.2 a hook that returns an error is reported and the others go on") {
  auto bad = Hook("bad");
  bad->before().error = Status::Unavailable("the notes service is down");
  auto good = Hook("good");
  good->before().result.output_fields = {Field("good_notes")};
  internal::BeforeCompactRun run =
      internal::RunBeforeCompact({bad, good}, BeforeContext(), kGenerous);
  REQUIRE(run.failures.size() == 1);
  CHECK(run.failures[0].plugin == "bad");
  CHECK(run.failures[0].hook == "beforeCompact");
  CHECK(run.failures[0].error ==
        "plugin \"bad\" beforeCompact failed: the notes service is down; compaction continues "
        "without it");
  REQUIRE(run.ok.size() == 1);
  CHECK(run.ok[0].plugin == "good");

  auto bad_after = Hook("bad");
  bad_after->after().error = Status::Internal("");
  CHECK(AfterFailure(bad_after) ==
        "plugin \"bad\" afterCompact failed with status internal; compaction continues without it");
}

TEST_CASE("R9.2 a hook that throws a std::exception is reported") {
  auto hook = Hook("thrower");
  hook->before().throw_std = true;
  hook->before().throw_what = "boom";
  CHECK(BeforeFailure(hook) ==
        "plugin \"thrower\" beforeCompact threw: boom; compaction continues without it");
  hook->after().throw_std = true;
  hook->after().throw_what = "bang";
  CHECK(AfterFailure(hook) ==
        "plugin \"thrower\" afterCompact threw: bang; compaction continues without it");
}

TEST_CASE("R9.2 a hook that throws something that is not a std::exception is reported") {
  auto hook = Hook("odd");
  hook->before().throw_other = true;
  CHECK(BeforeFailure(hook) ==
        "plugin \"odd\" beforeCompact threw an exception that is not a std::exception; "
        "compaction continues without it");
  hook->after().throw_other = true;
  CHECK(AfterFailure(hook).find("afterCompact threw an exception that is not") !=
        std::string::npos);
}

TEST_CASE("R9.2 a hook that hangs past the limit is abandoned within the limit") {
  // `slow` hangs until the gate opens, like a stuck plugin that ignores cancellation; `next`
  // returns at once and has the whole limit, a generous one, so that it succeeds on any
  // machine. Whether `slow` was abandoned is told by what had finished when the run returned:
  // a runner that waited for it would return only after the gate gave up, with it finished.
  auto gate = std::make_shared<recap::testing::HookGate>();
  recap::testing::OpenOnExit open_gate(gate);
  auto slow = Hook("slow");
  slow->before().hold = gate;
  auto next = Hook("next");
  next->before().result.instructions = "still here";

  internal::BeforeCompactRun run =
      internal::RunBeforeCompact({slow, next}, BeforeContext(), milliseconds(2000));
  CHECK(slow->finished() == 0);  // abandoned, not waited for
  REQUIRE(run.failures.size() == 1);
  CHECK(run.failures[0].error ==
        "plugin \"slow\" beforeCompact timed out after 2000 ms; compaction continues without it");
  REQUIRE(run.ok.size() == 1);
  CHECK(run.ok[0].request.instructions == "still here");

  // The abandoned call finishes on its own later and saw its token cancelled.
  gate->Open();
  REQUIRE(slow->WaitForFinished(1, kGenerous));
  CHECK(slow->saw_cancel());
}

TEST_CASE("R9.2 an afterCompact that hangs is abandoned within the limit") {
  auto gate = std::make_shared<recap::testing::HookGate>();
  recap::testing::OpenOnExit open_gate(gate);
  auto slow = Hook("slow");
  slow->after().hold = gate;  // hangs until opened: a runner that waited would not return
  const std::string error = AfterFailure(slow, milliseconds(100));
  CHECK(slow->finished() == 0);  // abandoned, not waited for
  CHECK(error ==
        "plugin \"slow\" afterCompact timed out after 100 ms; compaction continues without it");
  gate->Open();
  REQUIRE(slow->WaitForFinished(1, kGenerous));
}

TEST_CASE("R9.2 a hung hook that honours cancellation stops soon after it is abandoned") {
  auto polite = Hook("polite");
  polite->before().sleep = milliseconds(60000);
  polite->before().honour_cancel = true;
  BeforeFailure(polite, milliseconds(50));
  REQUIRE(polite->WaitForFinished(1, milliseconds(2000)));
  CHECK(polite->saw_cancel());
}

TEST_CASE("R9.2 several hung hooks hold the caller at most one limit each") {
  // Each hook hangs until the gate opens. The run returns having given up on all three while
  // none has finished: the caller waited out each one's limit and nothing more (a runner that
  // waited for a hung hook would return only once the gate gave up, with hooks finished).
  auto gate = std::make_shared<recap::testing::HookGate>();
  recap::testing::OpenOnExit open_gate(gate);
  Plugins plugins;
  std::vector<std::shared_ptr<RecordingHook>> hooks;
  for (int i = 0; i < 3; ++i) {
    hooks.push_back(Hook("slow" + std::to_string(i)));
    hooks.back()->before().hold = gate;
    plugins.push_back(hooks.back());
  }
  internal::BeforeCompactRun run =
      internal::RunBeforeCompact(plugins, BeforeContext(), milliseconds(60));
  for (auto& h : hooks) CHECK(h->finished() == 0);
  REQUIRE(run.failures.size() == 3);
  for (const auto& f : run.failures)
    CHECK(f.error.find("timed out after 60 ms") != std::string::npos);
  CHECK(run.ok.empty());
  gate->Open();
  for (auto& h : hooks) REQUIRE(h->WaitForFinished(1, kGenerous));
}

TEST_CASE(
    "R9.2 an abandoned hook that returns after everything it was given is gone does "
    "not touch freed memory") {
  // Run under AddressSanitizer and ThreadSanitizer: the hook's late return must only touch
  // the state its thread owns.
  std::weak_ptr<RecordingHook> before_weak;
  std::weak_ptr<RecordingHook> after_weak;
  {
    auto hook = Hook("late");
    hook->before().sleep = milliseconds(200);
    hook->before().result.instructions = std::string(5000, 'i');
    hook->before().result.output_fields = {Field("late_notes")};
    before_weak = hook;
    {
      BeforeCompactContext context = BeforeContext();
      context.session = std::string(1000, 's');  // heap-allocated, freed below
      internal::BeforeCompactRun run =
          internal::RunBeforeCompact({hook}, context, milliseconds(20));
      CHECK(run.failures.size() == 1);
    }
    auto after_hook = Hook("late_after");
    after_hook->after().sleep = milliseconds(200);
    after_hook->after().result.inject_context = std::string(5000, 'c');
    after_weak = after_hook;
    {
      AfterCompactContext context = AfterContext();
      context.checkpoint.discoveries.assign(100, std::string(100, 'd'));
      std::map<std::string, std::map<std::string, std::string>> fields = {
          {"late_after", {{"late_notes", std::string(1000, 'f')}}}};
      internal::AfterCompactRun run = internal::RunAfterCompact({after_hook}, {"late_after"},
                                                                context, fields, milliseconds(20));
      CHECK(run.failures.size() == 1);
    }
  }
  // The test holds no reference any more; the abandoned threads hold the last ones and drop
  // them when their hooks return.
  const auto deadline = Clock::now() + kGenerous;
  while ((!before_weak.expired() || !after_weak.expired()) && Clock::now() < deadline) {
    std::this_thread::sleep_for(milliseconds(10));
  }
  CHECK(before_weak.expired());
  CHECK(after_weak.expired());
}

TEST_CASE("R9.2 garbage from beforeCompact is reported and the plugin is left out") {
  struct Case {
    Garbage kind;
    std::string says;
  };
  const std::vector<Case> cases = {
      {Garbage::kBadFieldName, "output field \"2 bad-name\" is not a plain name"},
      {Garbage::kLongFieldName,
       "is not a plain name (letters, digits and _, not starting with "
       "a digit, at most 64 characters)"},
      {Garbage::kCheckpointField, "output field \"goal\" is a checkpoint field"},
      {Garbage::kDuplicateField, "output field \"notes\" is asked for twice"},
      {Garbage::kInvalidSchema, "the JSON schema of output field \"notes\" is not JSON"},
      {Garbage::kNonObjectSchema, "is an array, not an object"},
      {Garbage::kInvalidUtf8, "invalid UTF-8 in the instructions"},
      {Garbage::kHugeInstructions,
       "100001 characters in the instructions, over the limit of 100000"},
  };
  for (const Case& c : cases) {
    INFO(c.says);
    auto hook = Hook("junk");
    hook->before().result = GarbageRequest(c.kind);
    const std::string error = BeforeFailure(hook);
    CHECK(error.rfind("plugin \"junk\" beforeCompact returned garbage: ", 0) == 0);
    CHECK(error.find(c.says) != std::string::npos);
    CHECK(error.find("; compaction continues without it") != std::string::npos);
  }
  for (const char* name : {"instructions", "currentState", "relevantFiles", "nextSteps"}) {
    auto hook = Hook("junk");
    hook->before().result.output_fields = {Field(name)};
    CHECK(BeforeFailure(hook).find("is a checkpoint field") != std::string::npos);
  }
  auto many = Hook("many");
  for (int i = 0; i < 33; ++i)
    many->before().result.output_fields.push_back(Field("f" + std::to_string(i)));
  CHECK(BeforeFailure(many).find("asks for 33 output fields; the limit is 32") !=
        std::string::npos);
  auto bad_description = Hook("desc");
  bad_description->before().result.output_fields = {Field("notes", "caf\xC3")};
  CHECK(BeforeFailure(bad_description)
            .find("invalid UTF-8 in the description of output field \"notes\"") !=
        std::string::npos);
}

TEST_CASE("R9.2 plain field names: letters, digits and _, at most 64, not starting with a digit") {
  CHECK(internal::IsPlainFieldName("memories"));
  CHECK(internal::IsPlainFieldName("_x9"));
  CHECK(internal::IsPlainFieldName(std::string(64, 'a')));
  CHECK_FALSE(internal::IsPlainFieldName(std::string(65, 'a')));
  CHECK_FALSE(internal::IsPlainFieldName(""));
  CHECK_FALSE(internal::IsPlainFieldName("9lives"));
  CHECK_FALSE(internal::IsPlainFieldName("a-b"));
  CHECK_FALSE(internal::IsPlainFieldName("a b"));
  CHECK_FALSE(internal::IsPlainFieldName("caf\xC3\xA9"));
}

TEST_CASE("R9.2 a field another plugin already asked for is garbage for the later plugin") {
  auto first = Hook("first");
  first->before().result.output_fields = {Field("notes")};
  auto second = Hook("second");
  second->before().result.output_fields = {Field("other"), Field("notes")};
  internal::BeforeCompactRun run =
      internal::RunBeforeCompact({first, second}, BeforeContext(), kGenerous);
  REQUIRE(run.ok.size() == 1);
  CHECK(run.ok[0].plugin == "first");
  REQUIRE(run.failures.size() == 1);
  CHECK(run.failures[0].error ==
        "plugin \"second\" beforeCompact returned garbage: output field \"notes\" is already "
        "asked for by plugin \"first\"; compaction continues without it");

  // A rejected plugin claims nothing: a third one may use the field it asked for.
  auto third = Hook("third");
  third->before().result.output_fields = {Field("other")};
  run = internal::RunBeforeCompact({first, second, third}, BeforeContext(), kGenerous);
  CHECK(run.ok.size() == 2);
}

TEST_CASE("R9.2 two plugins with one name: the second is not run") {
  auto a = Hook("same");
  auto b = Hook("same");
  internal::BeforeCompactRun run = internal::RunBeforeCompact({a, b}, BeforeContext(), kGenerous);
  REQUIRE(run.ok.size() == 1);
  REQUIRE(run.failures.size() == 1);
  CHECK(run.failures[0].error.find("an earlier plugin has the same name") != std::string::npos);
  CHECK(b->BeforeCalls().empty());
  internal::AfterCompactRun after =
      internal::RunAfterCompact({a, b}, {"same"}, AfterContext(), {}, kGenerous);
  CHECK(after.ok.size() == 1);
  CHECK(a->AfterCalls().size() == 1);
  CHECK(b->AfterCalls().empty());
}

TEST_CASE("R9.2 a null plugin is reported, not dereferenced") {
  Plugins plugins = {nullptr, Hook("fine")};
  internal::BeforeCompactRun run = internal::RunBeforeCompact(plugins, BeforeContext(), kGenerous);
  REQUIRE(run.failures.size() == 1);
  CHECK(run.failures[0].plugin == "#1");
  CHECK(run.ok.size() == 1);
  CHECK(internal::RunAfterCompact(plugins, {"fine"}, AfterContext(), {}, kGenerous).ok.size() == 1);
}

TEST_CASE("R9.2 garbage from afterCompact is reported") {
  auto bad_utf8 = Hook("junk");
  bad_utf8->after().result.inject_context = "bad \xFF byte";
  CHECK(AfterFailure(bad_utf8) ==
        "plugin \"junk\" afterCompact returned garbage: invalid UTF-8 in the context to inject; "
        "compaction continues without it");
  auto huge = Hook("junk");
  huge->after().result.report = std::string(100001, 'r');
  CHECK(AfterFailure(huge).find("100001 characters in the report, over the limit of 100000") !=
        std::string::npos);
  auto at_limit = Hook("fine");
  at_limit->after().result.inject_context = std::string(100000, 'c');
  CHECK(internal::RunAfterCompact({at_limit}, {"fine"}, AfterContext(), {}, kGenerous).ok.size() ==
        1);
}

TEST_CASE("R9.2 error texts stay valid UTF-8 whatever a hook throws or returns") {
  auto hook = Hook("bytes");
  hook->before().throw_std = true;
  hook->before().throw_what = "bad \xC3 text";
  const std::string error = BeforeFailure(hook);
  CHECK(IsValidUtf8(error));
  CHECK(error.find("bad \xEF\xBF\xBD text") != std::string::npos);
}

// ---- R9.3: the memory plugin --------------------------------------------------------------

namespace {

AfterCompactContext MemoryContext(const std::string& session, const std::string& memories_json) {
  AfterCompactContext c = AfterContext();
  c.session = session;
  if (!memories_json.empty()) c.fields["memories"] = memories_json;
  return c;
}

AfterCompactResult After(PluginHook& plugin, const AfterCompactContext& context) {
  Result<AfterCompactResult> r = plugin.AfterCompact(context, CancellationToken());
  INFO(r.status().ToString());
  REQUIRE(r.ok());
  return *r;
}

}  // namespace

TEST_CASE("R9.3 the memory plugin asks the summarizer for durable memories") {
  auto plugin = NewMemoryPlugin(NewInMemoryMemoryStore());
  CHECK(plugin->Name() == "memory");
  internal::BeforeCompactRun run = internal::RunBeforeCompact({plugin}, BeforeContext(), kGenerous);
  REQUIRE(run.failures.empty());  // its own request passes the garbage checks
  REQUIRE(run.ok.size() == 1);
  const BeforeCompactResult& r = run.ok[0].request;
  CHECK(r.instructions.find("\"memories\"") != std::string::npos);
  REQUIRE(r.output_fields.size() == 1);
  CHECK(r.output_fields[0].name == "memories");
  CHECK(r.output_fields[0].description.find("durable facts about the user and the project") !=
        std::string::npos);
  CHECK(r.output_fields[0].description.find("not task progress") != std::string::npos);
  CHECK(r.output_fields[0].json_schema == R"({"type":"array","items":{"type":"string"}})");
}

TEST_CASE("R9.3 the memory plugin stores new memories and injects them after the checkpoint") {
  auto store = NewInMemoryMemoryStore();
  auto plugin = NewMemoryPlugin(store);
  AfterCompactResult r =
      After(*plugin, MemoryContext("s1", R"(["prefers tabs", "the API lives in services/api"])"));
  CHECK(r.report == "2 new memories, 2 total");
  CHECK(r.inject_context == "## Memories\n- prefers tabs\n- the API lives in services/api\n");
  CHECK(*store->List("default") ==
        std::vector<std::string>{"prefers tabs", "the API lives in services/api"});

  // Known ones are not stored twice, nor repeated within one reply.
  r = After(*plugin,
            MemoryContext("s2", R"(["prefers tabs", "builds with Ninja", "builds with Ninja"])"));
  CHECK(r.report == "1 new memory, 3 total");
  CHECK(r.inject_context ==
        "## Memories\n- prefers tabs\n- the API lives in services/api\n- builds with Ninja\n");

  // No field at all: nothing new, the known memories are still injected.
  r = After(*plugin, MemoryContext("s3", ""));
  CHECK(r.report == "0 new memories, 3 total");
  CHECK(r.inject_context.find("- builds with Ninja\n") != std::string::npos);
}

TEST_CASE("R9.3 the memory plugin with an empty scope keeps one scope per session") {
  auto store = NewInMemoryMemoryStore();
  MemoryPluginOptions options;
  options.scope = "";
  auto plugin = NewMemoryPlugin(store, options);
  After(*plugin, MemoryContext("s1", R"(["only in s1"])"));
  AfterCompactResult r = After(*plugin, MemoryContext("s2", R"(["only in s2"])"));
  CHECK(r.inject_context == "## Memories\n- only in s2\n");
  CHECK(r.report == "1 new memory, 1 total");
  CHECK(*store->List("s1") == std::vector<std::string>{"only in s1"});
  CHECK(*store->List("s2") == std::vector<std::string>{"only in s2"});
  CHECK(store->List("default")->empty());
}

TEST_CASE("R9.3 the memory plugin injects only the newest max_memories, oldest first") {
  MemoryPluginOptions options;
  options.max_memories = 2;
  auto plugin = NewMemoryPlugin(NewInMemoryMemoryStore(), options);
  AfterCompactResult r = After(*plugin, MemoryContext("s1", R"(["one", "two", "three"])"));
  CHECK(r.inject_context == "## Memories\n- two\n- three\n");
  CHECK(r.report == "3 new memories, 3 total");

  options.max_memories = 0;
  auto silent = NewMemoryPlugin(NewInMemoryMemoryStore(), options);
  r = After(*silent, MemoryContext("s1", R"(["one"])"));
  CHECK(r.inject_context.empty());
  CHECK(r.report == "1 new memory, 1 total");

  auto empty = NewMemoryPlugin(NewInMemoryMemoryStore());
  r = After(*empty, MemoryContext("s1", "[]"));
  CHECK(r.inject_context.empty());
  CHECK(r.report == "0 new memories, 0 total");
}

TEST_CASE("R9.3 the memory plugin reads forgivingly what is clear and rejects what is not") {
  auto store = NewInMemoryMemoryStore();
  auto plugin = NewMemoryPlugin(store);
  // A single string is one memory.
  CHECK(After(*plugin, MemoryContext("s1", R"("uses CMake")")).report == "1 new memory, 1 total");
  // Non-strings and empty strings are skipped; whitespace is folded so each stays one line.
  AfterCompactResult r = After(
      *plugin, MemoryContext("s1", R"([1, null, {"a": 1}, ["x"], "", "  multi\n line\tfact  "])"));
  CHECK(r.report == "1 new memory, 2 total");
  CHECK(r.inject_context == "## Memories\n- uses CMake\n- multi line fact\n");
  CHECK(After(*plugin, MemoryContext("s1", "null")).report == "0 new memories, 2 total");

  // Not JSON, or JSON of the wrong shape: an error, reported as a hook failure.
  for (const char* bad : {"[\"unterminated", "{\"a\": 1}", "42"}) {
    INFO(bad);
    Result<AfterCompactResult> failed =
        plugin->AfterCompact(MemoryContext("s1", bad), CancellationToken());
    CHECK_FALSE(failed.ok());
    CHECK(failed.status().message().find("memories") != std::string::npos);
  }
  internal::AfterCompactRun run =
      internal::RunAfterCompact({plugin}, {"memory"}, MemoryContext("s1", "not json"),
                                {{"memory", {{"memories", "not json"}}}}, kGenerous);
  REQUIRE(run.failures.size() == 1);
  CHECK(run.failures[0].error.rfind("plugin \"memory\" afterCompact failed: ", 0) == 0);
  CHECK(*store->List("default") == std::vector<std::string>{"uses CMake", "multi line fact"});
}

TEST_CASE("R9.3 the memory plugin through the runner: fields in, memories out") {
  auto store = NewInMemoryMemoryStore();
  Plugins plugins = {NewMemoryPlugin(store), Hook("other")};
  internal::BeforeCompactRun before =
      internal::RunBeforeCompact(plugins, BeforeContext(), kGenerous);
  REQUIRE(before.ok.size() == 2);
  std::vector<std::string> participating;
  for (const auto& p : before.ok) participating.push_back(p.plugin);
  std::map<std::string, std::map<std::string, std::string>> fields = {
      {"memory", {{"memories", R"(["the user is Dana"])"}}}};
  internal::AfterCompactRun after =
      internal::RunAfterCompact(plugins, participating, AfterContext(), fields, kGenerous);
  REQUIRE(after.failures.empty());
  REQUIRE(after.ok.size() == 2);
  CHECK(after.ok[0].plugin == "memory");
  CHECK(after.ok[0].result.inject_context == "## Memories\n- the user is Dana\n");
  CHECK(after.ok[0].result.report == "1 new memory, 1 total");
}

TEST_CASE("R9.3 the in-memory memory store is thread-safe and keeps each text once") {
  auto store = NewInMemoryMemoryStore();
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&store, t] {
      for (int i = 0; i < 100; ++i) {
        (void)store->Add("shared", {"fact " + std::to_string(i), "from " + std::to_string(t)});
        (void)store->List("shared");
      }
    });
  }
  for (auto& t : threads) t.join();
  auto all = store->List("shared");
  REQUIRE(all.ok());
  CHECK(all->size() == 104);
  CHECK(store->List("elsewhere")->empty());
}

// ---- the test doubles other tests rely on --------------------------------------------------

TEST_CASE("support: ScriptedProvider plays its steps in order, then the default") {
  recap::testing::ScriptedProvider provider;
  using recap::testing::ScriptedStep;
  provider.Push(ScriptedStep::Reply("first", Usage{10, 2}));
  provider.Push(ScriptedStep::Truncated("{\"goal\": \"cut"));
  provider.Push(ScriptedStep::Fail(Status::Unavailable("503")));
  provider.Push(ScriptedStep::Throw("provider exploded"));
  CompletionRequest request;
  request.system_prompt = "summarize";
  request.messages = {Message::UserText("the span")};
  request.json_schema = "{}";

  Result<Completion> c = provider.Complete(request, CancellationToken());
  REQUIRE(c.ok());
  CHECK(c->text == "first");
  CHECK(c->usage.prompt_tokens == 10);
  c = provider.Complete(request, CancellationToken());
  CHECK(c->finish_reason == FinishReason::kLength);
  CHECK(provider.Complete(request, CancellationToken()).status().code() ==
        StatusCode::kUnavailable);
  CHECK_THROWS_WITH(provider.Complete(request, CancellationToken()), "provider exploded");
  c = provider.Complete(request, CancellationToken());  // the queue is empty: the default
  REQUIRE(c.ok());
  CHECK(c->text == recap::testing::ValidCheckpointJson());

  CHECK(provider.calls() == 5);
  CHECK(provider.pending() == 0);
  auto requests = provider.Requests();
  REQUIRE(requests.size() == 5);
  CHECK(requests[0].request.system_prompt == "summarize");
  CHECK(requests[0].request.json_schema == std::optional<std::string>("{}"));
  CHECK(requests[0].request.source == nullptr);
  CHECK(provider.Name() == "scripted");
  CHECK_FALSE(provider.ContextWindow().has_value());
  provider.SetContextWindow(128000);
  CHECK(provider.ContextWindow() == std::optional<std::size_t>(128000));
}

TEST_CASE("support: a slow ScriptedProvider step ends promptly when cancelled") {
  recap::testing::ScriptedProvider provider;
  provider.Push(recap::testing::ScriptedStep::Slow(milliseconds(60000), "never"));
  CancellationSource cancel;
  std::thread canceller([&] {
    std::this_thread::sleep_for(milliseconds(50));
    cancel.Cancel();
  });
  const auto t0 = Clock::now();
  Result<Completion> c = provider.Complete(CompletionRequest{}, cancel.Token());
  canceller.join();
  CHECK(MillisSince(t0) < 30000);  // ended by the cancel, far short of the step's 60 s
  CHECK(c.status().code() == StatusCode::kCancelled);
  CHECK(provider.Requests()[0].cancelled);
}

TEST_CASE("support: RecordingSink keeps events in order and parses them") {
  recap::testing::RecordingSink sink;
  sink.OnEvent(Event{"compaction_started", "s1", R"({"v":1,"type":"compaction_started"})"});
  sink.OnEvent(
      Event{"compaction_skipped", "s1", R"({"v":1,"type":"compaction_skipped","reason":"x"})"});
  CHECK(sink.types() == std::vector<std::string>{"compaction_started", "compaction_skipped"});
  CHECK(sink.Parsed(1)["reason"] == "x");
  CHECK(sink.OfType("compaction_skipped").size() == 1);
  CHECK_THROWS_AS(sink.Parsed(2), std::out_of_range);
  sink.Clear();
  CHECK(sink.size() == 0);
}
