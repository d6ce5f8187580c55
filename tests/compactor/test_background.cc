// Background compaction (SPEC R15, compaction.background): Prepare starts a compaction on a
// worker at startAt x the trigger and returns at once with the whole transcript; the worker (or,
// when it cannot, the next Prepare) swaps the checkpoint in, in one transaction that replaces
// exactly the snapshotted span, and the next Prepare reports it; a
// session changed meanwhile discards it with an event; one compaction per session at a time; a
// Prepare waits only when the request would otherwise reach the window or the hard limit, and
// at most maxWaitMs; destroying the Compactor mid-compaction cancels and joins; the events say
// "background": true. Over the store of support/test_store.h (in-memory, or SQLite /
// PostgreSQL with RECAP_TEST_STORE).
#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <mutex>
#include <set>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include <catch2/catch.hpp>

#include "recap/compactor.h"
#include "recap/config.h"
#include "recap/log.h"

#include "support/fake_provider.h"
#include "support/forwarding_store.h"
#include "support/generator.h"
#include "support/host.h"
#include "support/ok.h"
#include "support/recording_sink.h"
#include "support/test_store.h"

using namespace recap;
using recap::testing::RecordingSink;

namespace {

using recap::testing::Ok;

// A summarizer whose first `gated` calls wait until Open() (or, when it honours them, until
// their cancellation); the others answer at once. Counts calls and the most that ran at once.
class GatedProvider : public Provider {
 public:
  explicit GatedProvider(int gated = 1000000, bool honour_cancel = true)
      : gated_(gated), honour_cancel_(honour_cancel) {}

  void Open() {
    std::lock_guard<std::mutex> lock(mu_);
    open_ = true;
    cv_.notify_all();
  }
  void Close() {
    std::lock_guard<std::mutex> lock(mu_);
    open_ = false;
  }
  void FailWith(Status s) {
    std::lock_guard<std::mutex> lock(mu_);
    fail_ = std::move(s);
  }
  int started() const { return started_.load(); }
  int finished() const { return finished_.load(); }
  int max_active() const { return max_active_.load(); }
  // Waits (at most 10 s) until `n` calls have started.
  bool WaitStarted(int n) const {
    for (int i = 0; i < 5000 && started_.load() < n; ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
    }
    return started_.load() >= n;
  }
  // Waits (at most 10 s) until `n` calls have finished.
  bool WaitFinished(int n) const {
    for (int i = 0; i < 5000 && finished_.load() < n; ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
    }
    return finished_.load() >= n;
  }

  Result<Completion> Complete(const CompletionRequest&, const CancellationToken& cancel) override {
    const int n = ++started_;
    const int active = ++active_;
    int seen = max_active_.load();
    while (active > seen && !max_active_.compare_exchange_weak(seen, active)) {
    }
    bool cancelled = false;
    Status fail;
    {
      std::unique_lock<std::mutex> lock(mu_);
      if (n <= gated_) {
        while (!open_ && !(honour_cancel_ && cancel.IsCancelled())) {
          cv_.wait_for(lock, std::chrono::milliseconds(2));
        }
      }
      cancelled = !open_ && n <= gated_ && cancel.IsCancelled();
      fail = fail_;
    }
    --active_;
    ++finished_;
    if (cancelled) return Status::Cancelled("cancelled while waiting");
    if (!fail.ok()) return fail;
    Completion c;
    c.text = recap::testing::ValidCheckpointJson("Finish the background task");
    return c;
  }
  std::string Name() const override { return "gated"; }

 private:
  const int gated_;
  const bool honour_cancel_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  bool open_ = false;
  Status fail_;
  std::atomic<int> started_{0};
  std::atomic<int> finished_{0};
  std::atomic<int> active_{0};
  std::atomic<int> max_active_{0};
};

// Captures recap's log at debug level while it lives, so that a test can wait for a step that
// only the log shows (e.g. "Prepare waits for the background compaction in flight").
class LogWatch {
 public:
  LogWatch() {
    SetLogHandler(LogLevel::kDebug, [this](LogLevel, std::string_view line) {
      std::lock_guard<std::mutex> lock(mu_);
      lines_.emplace_back(line);
    });
  }
  ~LogWatch() { SetLogHandler(LogLevel::kOff, {}); }
  LogWatch(const LogWatch&) = delete;
  LogWatch& operator=(const LogWatch&) = delete;

  // Waits until a line contains `text`; false if none did within `timeout` (a hang guard).
  bool WaitFor(const std::string& text,
               std::chrono::milliseconds timeout = std::chrono::seconds(30)) const {
    const auto give_up = std::chrono::steady_clock::now() + timeout;
    for (;;) {
      {
        std::lock_guard<std::mutex> lock(mu_);
        for (const std::string& l : lines_) {
          if (l.find(text) != std::string::npos) return true;
        }
      }
      if (std::chrono::steady_clock::now() >= give_up) return false;
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
  }

 private:
  mutable std::mutex mu_;
  std::vector<std::string> lines_;
};

// A window of 10,000 tokens: the trigger at 8,500 tokens (about 34,000 characters), a
// background start at 0.7 of that (5,950 tokens, about 23,800 characters), the window itself at
// 40,000 characters.
Config Background(std::size_t max_wait_ms = 600000) {
  Config c;
  c.provider.context_window = 10000;
  c.compaction.keep_turns = 1;
  c.compaction.background.enabled = true;
  c.compaction.background.start_at = 0.7;
  c.compaction.background.max_wait_ms = max_wait_ms;
  return c;
}

// The shared host (support/host.h) over a GatedProvider (a new one unless given) and the test
// store (unless given), on session "s".
struct Host : recap::testing::CompactorHost<GatedProvider> {
  int turns = 0;

  explicit Host(const Config& config, std::shared_ptr<GatedProvider> p = nullptr,
                std::shared_ptr<SessionStore> s = nullptr)
      : CompactorHost(config, {std::move(p), std::move(s)}) {}
  // A turn of about `chars` characters: a request, a tool call and its result, an answer.
  void Turn(std::size_t chars = 2000) {
    const int n = ++turns;
    const std::string id = "call_" + std::to_string(n);
    std::vector<Message> m = {
        Message::UserText("request " + std::to_string(n)),
        Message::AssistantCalls({ToolCall{id, "read", R"({"path":"f.cc"})", {}}}),
        Message::ToolOutput(id, std::string(chars > 100 ? chars - 100 : 1, 'o')),
        Message::AssistantText("answer " + std::to_string(n))};
    Append("s", std::move(m));
  }
  Plan PlanNow() { return Ok(compactor->PlanFor("s", {})); }
  // Turns until Prepare starts a background compaction (at most 40).
  Prepared TurnsUntilStarted() {
    for (int i = 0; i < 40; ++i) {
      Turn();
      Prepared p = Prepare();
      if (p.background_started) return p;
    }
    FAIL("no background compaction started in 40 turns");
    return {};
  }
  // Waits (at most 10 s) until the sink has received `n` events of `type`.
  std::vector<nlohmann::json> WaitEvents(const std::string& type, std::size_t n = 1) {
    for (int i = 0; i < 5000 && sink->OfType(type).size() < n; ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
    }
    return sink->OfType(type);
  }
  // Waits until no background compaction runs (finished, or never started).
  void WaitNotInFlight() {
    for (int i = 0; i < 5000; ++i) {
      if (!PlanNow().background_in_flight) return;
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
    }
    FAIL("the background compaction never finished");
  }
};

std::vector<std::string> Ids(const Transcript& t) {
  std::vector<std::string> out;
  for (const Message& m : t) out.push_back(m.id);
  return out;
}

bool HasBackgroundTrue(const nlohmann::json& e) {
  return e.contains("background") && e["background"] == true;
}

}  // namespace

TEST_CASE("R15.1 Prepare starts a compaction at startAt x the trigger and returns at once",
          "[R15.1][compactor]") {
  Host h(Background());
  const Prepared started = h.TurnsUntilStarted();
  // The summarizer is still waiting (the gate is closed): Prepare did not wait for it.
  CHECK(h.provider->finished() == 0);
  CHECK(started.background_in_flight);
  CHECK_FALSE(started.waited_for_summarizer);
  CHECK(started.compactions.empty());
  // The whole transcript, as the store has it.
  CHECK(Ids(started.messages) == Ids(Ok(h.store->Load("s")).transcript));
  // Between startAt x the trigger and the trigger.
  CHECK(started.before_tokens >= 5950);
  CHECK(started.before_tokens < 8500);
  const Plan plan = h.PlanNow();
  CHECK(plan.background_in_flight);
  CHECK_FALSE(plan.background_ready);
  CHECK(plan.background_reached);
  CHECK(plan.background_start_tokens == 5950);
  auto begun = h.sink->OfType("compaction_started");
  REQUIRE(begun.size() == 1);
  CHECK(begun[0]["reason"] == "auto");
  CHECK(HasBackgroundTrue(begun[0]));  // R15.5
  h.provider->Open();
}

TEST_CASE(
    "R15.2 a finished compaction is swapped in before the next Prepare, what was "
    "appended meanwhile follows it",
    "[R15.2][compactor]") {
  Host h(Background());
  h.TurnsUntilStarted();
  const std::uint64_t version_at_start = Ok(h.store->Load("s")).version;
  // The conversation goes on while the summarizer works.
  h.Turn();
  const Prepared meanwhile = h.Prepare();
  CHECK(meanwhile.background_in_flight);
  CHECK(meanwhile.compactions.empty());
  const Transcript before_swap = Ok(h.store->Load("s")).transcript;
  const std::uint64_t version_before_swap = Ok(h.store->Load("s")).version;
  CHECK(version_before_swap == version_at_start + 1);
  h.provider->Open();
  // The worker commits it as soon as it is written: no Prepare pays for that write.
  auto done = h.WaitEvents("compaction_completed");
  REQUIRE(done.size() == 1);
  CHECK(HasBackgroundTrue(done[0]));
  CHECK(done[0]["checkpoint"]["writer"] == "gated");
  const SessionState swapped_state = Ok(h.store->Load("s"));
  CHECK(swapped_state.version == version_before_swap + 1);  // one transaction
  const Transcript& t = swapped_state.transcript;
  REQUIRE(t.size() >= 1);
  CHECK(t[0].summary);  // the checkpoint first
  // Everything after the checkpoint is the unchanged end of the transcript before the swap,
  // including the turn appended while the summarizer worked.
  const std::size_t kept = t.size() - 1;
  REQUIRE(kept <= before_swap.size());
  for (std::size_t i = 0; i < kept; ++i) {
    const Message& now = t[1 + i];
    const Message& was = before_swap[before_swap.size() - kept + i];
    CHECK(now.id == was.id);
    CHECK(t.chars(1 + i) == before_swap.chars(before_swap.size() - kept + i));
  }
  CHECK(kept >= 4);  // at least the turn appended after the snapshot
  // The history holds every message, the replaced ones retired by this compaction.
  std::set<std::string> history;
  for (const auto& e : Ok(h.store->History("s"))) history.insert(e.message.id);
  for (const Message& m : before_swap) CHECK(history.count(m.id) == 1);

  // The next Prepare finds it in place and reports it: the swap, its cost, the size before it.
  h.Turn();
  const Prepared swapped = h.Prepare();
  CHECK(swapped.background_swapped);
  CHECK_FALSE(swapped.background_discarded);
  CHECK_FALSE(swapped.waited_for_summarizer);
  REQUIRE(swapped.compactions.size() == 1);
  CHECK(swapped.compactions[0] == CompactionReason::kAuto);
  CHECK(swapped.summarizer_calls == 1);
  CHECK(swapped.after_chars < swapped.before_chars);
  // The size before is the request as it would have been without the swap.
  CHECK(swapped.before_chars >= before_swap.chars());
  const SessionState state = Ok(h.store->Load("s"));
  CHECK(state.version == version_before_swap + 2);  // the swap, then the turn's append
  CHECK(Ids(swapped.messages) == Ids(state.transcript));
  // Reported once.
  h.Turn();
  const Prepared later = h.Prepare();
  CHECK_FALSE(later.background_swapped);
  CHECK(later.compactions.empty());
  CHECK(h.sink->OfType("compaction_completed").size() == 1);
  CHECK(h.PlanNow().background_in_flight == false);
  CHECK(h.PlanNow().background_ready == false);
}

namespace {

// A store whose LoadChanges fails while `fail_changes` is set (a database gone for a moment).
class FlakyChangesStore : public recap::testing::ForwardingStore {
 public:
  using ForwardingStore::ForwardingStore;
  std::atomic<bool> fail_changes{false};
  std::atomic<int> refused{0};
  // Another writer's append lands just before the next commit this many commits (0: never).
  std::atomic<int> interleave_before_commit{0};
  std::atomic<int> interleaved{0};

  Result<SessionChanges> LoadChanges(const std::string& s, std::uint64_t v) override {
    if (fail_changes) {
      ++refused;
      return Status::Unavailable("the database went away");
    }
    return ForwardingStore::LoadChanges(s, v);
  }
  Result<std::uint64_t> CommitCompaction(const std::string& s, const CompactionCommit& c) override {
    Interleave(s);
    return ForwardingStore::CommitCompaction(s, c);
  }
  Result<std::uint64_t> CommitReduction(const std::string& s, const ReductionCommit& c) override {
    Interleave(s);
    return ForwardingStore::CommitReduction(s, c);
  }

 private:
  void Interleave(const std::string& s) {
    if (interleave_before_commit <= 0) return;
    --interleave_before_commit;
    ++interleaved;
    REQUIRE(inner().Append(s, Message::UserText("from another host")).ok());
  }
};

}  // namespace

TEST_CASE(
    "R8.2 R15.2 a Prepare that meets another writer's commit reads the session again and "
    "decides again",
    "[R8.2][R15.2][compactor]") {
  // With background compaction, another Compactor's worker may commit to a session at any
  // time, between this Prepare's read and its write; the store refuses that write (kConflict).
  auto store = std::make_shared<FlakyChangesStore>(recap::testing::NewTestSessionStore());
  Config config;
  config.compaction.auto_compact = false;
  config.limits.max_context_chars = 5000;
  auto compactor = Ok(Compactor::Create(config, std::make_shared<GatedProvider>(0), store));
  REQUIRE(store
              ->AppendMessages("s", {Message::UserText("read it"),
                                     Message::AssistantCalls({ToolCall{"c1", "read", "{}", {}}}),
                                     Message::ToolOutput("c1", std::string(20000, 'x'))})
              .ok());
  SECTION("once") {
    store->interleave_before_commit = 1;
    const Prepared p = Ok(compactor->Prepare("s", {}));
    CHECK(store->interleaved == 1);
    CHECK(p.reduced_messages > 0);
    CHECK(p.after_chars <= 5000);
    REQUIRE(p.messages.size() == 4);
    CHECK(JoinedText(p.messages[3]) == "from another host");
    CHECK(Ids(p.messages) == Ids(Ok(store->Load("s")).transcript));
  }
  SECTION("at every attempt: the conflict is returned after three, nothing written by it") {
    store->interleave_before_commit = 100;
    auto p = compactor->Prepare("s", {});
    REQUIRE_FALSE(p.ok());
    CHECK(p.status().code() == StatusCode::kConflict);
    CHECK(store->interleaved == 3);
    const SessionState state = Ok(store->Load("s"));
    CHECK(state.transcript.size() == 6);  // the three messages and three appends, none clipped
    CHECK(state.transcript.chars(2) >= 20000);
  }
}

TEST_CASE(
    "R8.2 a compaction that meets another writer's commit is retried, and after three tries is "
    "a conflict, not a budget error",
    "[R8.2][compactor]") {
  // Issue 35 (1): the conflict of the compaction's commit was folded into
  // ContextBudgetExceeded ("raise limits.maxContextChars"), so Prepare's retry never ran.
  auto store = std::make_shared<FlakyChangesStore>(recap::testing::NewTestSessionStore());
  Config config;
  config.limits.max_context_chars = 4000;
  config.compaction.keep_turns = 1;
  auto provider = std::make_shared<GatedProvider>(0);
  auto compactor = Ok(Compactor::Create(config, provider, store));
  // Twelve turns of 900 characters: nothing to clip, so only a compaction brings the session
  // under the limit.
  for (int i = 0; i < 12; ++i) {
    REQUIRE(store
                ->AppendMessages("s", {Message::UserText("question " + std::to_string(i) + " " +
                                                         std::string(400, 'q')),
                                       Message::AssistantText(std::string(500, 'a'))})
                .ok());
  }
  SECTION("once: the second try reads the other writer's message and compacts") {
    store->interleave_before_commit = 1;
    const Prepared p = Ok(compactor->Prepare("s", {}));
    CHECK(store->interleaved == 1);
    CHECK(provider->started() == 2);
    REQUIRE(p.compactions.size() == 1);
    CHECK(p.after_chars <= 4000);
    CHECK(JoinedText(p.messages.back()) == "from another host");
    CHECK(Ids(p.messages) == Ids(Ok(store->Load("s")).transcript));
  }
  SECTION("at every try: kConflict naming the other writer, nothing written by it") {
    store->interleave_before_commit = 100;
    auto p = compactor->Prepare("s", {});
    REQUIRE_FALSE(p.ok());
    INFO(p.status().ToString());
    CHECK(p.status().code() == StatusCode::kConflict);
    CHECK(p.status().message().find("changed since") != std::string::npos);
    CHECK(p.status().message().find("maxContextChars") == std::string::npos);
    CHECK(store->interleaved == 3);
    const SessionState state = Ok(store->Load("s"));
    CHECK(state.transcript.size() == 27);  // 24 messages and three appends, none replaced
    CHECK_FALSE(state.transcript[0].summary);
  }
}

TEST_CASE("R8.2 prepares beside a thread that appends never fail for the budget",
          "[R8.2][compactor]") {
  // The race of issue 35 (1) as a host meets it: one thread appends turns while another
  // prepares at a tight limit. Whatever interleaving happens, each Prepare either returns a
  // request under the limit or (three conflicts in a row) kConflict; never a budget error.
  auto store = recap::testing::NewTestSessionStore();
  Config config;
  config.limits.max_context_chars = 4000;
  config.compaction.keep_turns = 1;
  auto compactor = Ok(Compactor::Create(config, std::make_shared<GatedProvider>(0), store));
  REQUIRE(store->Append("s", Message::UserText("start")).ok());
  std::atomic<bool> done{false};
  std::thread appender([&] {
    for (int i = 0; i < 1000 && !done; ++i) {
      (void)store->AppendMessages(
          "s", {Message::UserText("turn " + std::to_string(i) + " " + std::string(300, 'u')),
                Message::AssistantText(std::string(300, 'a'))});
    }
  });
  int budget_errors = 0, conflicts = 0, prepared = 0;
  for (int i = 0; i < 1000; ++i) {
    auto p = compactor->Prepare("s", {});
    if (p.ok()) {
      ++prepared;
      CHECK(p->after_chars <= 4000);
    } else if (p.status().code() == StatusCode::kConflict) {
      ++conflicts;
    } else {
      INFO(p.status().ToString());
      CHECK(p.status().code() != StatusCode::kContextBudgetExceeded);
      ++budget_errors;
    }
  }
  done = true;
  appender.join();
  INFO(prepared << " prepared, " << conflicts << " conflicts");
  CHECK(budget_errors == 0);
  CHECK(Ok(compactor->Prepare("s", {})).after_chars <= 4000);
}

TEST_CASE(
    "R15.2 a callback run by a background worker that calls back into its compactor is refused "
    "at once",
    "[R15.2][compactor]") {
  // Issue 35 (2): the worker emits compaction_completed while it holds the session to swap the
  // checkpoint in; a sink that called Prepare there waited for the worker itself, forever.
  struct CallingBackSink : EventSink {
    Compactor* compactor = nullptr;
    std::mutex mu;
    std::vector<Status> got;
    void OnEvent(const Event& e) override {
      if (e.type != "compaction_completed") return;
      Status prepared = compactor->Prepare("s", {}).status();
      Status planned = compactor->PlanFor("s", {}).status();
      std::lock_guard<std::mutex> lock(mu);
      got.push_back(prepared);
      got.push_back(planned);
    }
  };
  auto calling = std::make_shared<CallingBackSink>();
  auto recording = std::make_shared<RecordingSink>();
  auto provider = std::make_shared<GatedProvider>(0);
  auto store = recap::testing::NewTestSessionStore();
  auto compactor = Ok(Compactor::Create(Background(), provider, store, {}, {calling, recording}));
  calling->compactor = compactor.get();
  bool started = false;
  for (int i = 0; i < 40 && !started; ++i) {
    REQUIRE(store
                ->AppendMessages("s", {Message::UserText("request " + std::to_string(i)),
                                       Message::AssistantText(std::string(1900, 'a'))})
                .ok());
    started = Ok(compactor->Prepare("s", {})).background_started;
  }
  REQUIRE(started);
  for (int i = 0; i < 5000 && recording->OfType("compaction_completed").empty(); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  REQUIRE(recording->OfType("compaction_completed").size() == 1);
  std::lock_guard<std::mutex> lock(calling->mu);
  REQUIRE(calling->got.size() == 2);
  for (const Status& s : calling->got) {
    INFO(s.ToString());
    CHECK(s.code() == StatusCode::kFailedPrecondition);
    CHECK(s.message().find("from inside a callback") != std::string::npos);
  }
}

TEST_CASE("R15.2 a worker that cannot read the session leaves the swap to the next Prepare",
          "[R15.2][compactor]") {
  auto store = std::make_shared<FlakyChangesStore>(recap::testing::NewTestSessionStore());
  Host h(Background(), nullptr, store);
  h.TurnsUntilStarted();
  const std::uint64_t version = Ok(h.store->Load("s")).version;
  store->fail_changes = true;
  h.provider->Open();
  for (int i = 0; i < 5000 && store->refused == 0; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  REQUIRE(store->refused > 0);  // the worker tried to bring the session up to date, and could not
  // Nothing was written, nothing reported yet; the result waits.
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  CHECK(Ok(h.store->Load("s")).version == version);
  CHECK(h.sink->OfType("compaction_completed").empty());
  CHECK(h.sink->OfType("compaction_discarded").empty());
  store->fail_changes = false;
  CHECK(h.PlanNow().background_ready);
  const Prepared p = h.Prepare();
  CHECK(p.background_swapped);
  REQUIRE(p.compactions.size() == 1);
  const SessionState state = Ok(h.store->Load("s"));
  CHECK(state.version == version + 1);
  CHECK(state.transcript[0].summary);
  CHECK(Ids(p.messages) == Ids(state.transcript));
  CHECK(h.sink->OfType("compaction_completed").size() == 1);
}

TEST_CASE(
    "R15.2 R2.4 a token count reported after the worker's swap is not taken for the "
    "compacted transcript",
    "[R15.2][R2.4][compactor]") {
  // The host's model call sends the whole transcript Prepare returned; the worker swaps the
  // checkpoint in meanwhile; the host then reports what the provider counted for that request.
  Config config = Background();
  config.compaction.calibrate = true;
  Host h(config);
  h.TurnsUntilStarted();
  h.Turn(4000);
  const Prepared sent = h.Prepare();
  REQUIRE(sent.background_in_flight);
  h.provider->Open();
  REQUIRE(h.WaitEvents("compaction_completed").size() == 1);
  // The provider counted more than recap estimated: past the trigger (8,500), under the window.
  h.compactor->ReportPromptTokens("s", 9500);
  h.Turn(500);
  const Prepared p = h.Prepare();
  CHECK(p.background_swapped);
  // The count described the request before the swap: the next one is judged on estimates,
  // and no trigger fires on a transcript the checkpoint has made small.
  CHECK(p.after_tokens < 8500);
  CHECK_FALSE(p.background_started);
  CHECK(h.provider->started() == 1);
  CHECK_FALSE(h.PlanNow().trigger);
}

TEST_CASE("R15.2 a session changed underneath discards the result with an event",
          "[R15.2][compactor]") {
  SECTION("another writer compacted the session") {
    Host h(Background());
    h.TurnsUntilStarted();
    // A second host (its own Compactor, the same store) compacts the session by hand.
    Config other = Background();
    other.compaction.background.enabled = false;
    auto second = Ok(Compactor::Create(other, std::make_shared<GatedProvider>(0), h.store));
    REQUIRE(Ok(second->Compact("s")).compacted);
    const SessionState after_other = Ok(h.store->Load("s"));
    h.provider->Open();
    // The worker finds the session changed and drops its result; the next Prepare says so.
    REQUIRE(h.WaitEvents("compaction_discarded").size() == 1);
    const Prepared p = h.Prepare();
    CHECK(p.background_discarded);
    CHECK_FALSE(p.background_swapped);
    CHECK(p.compactions.empty());
    const SessionState now = Ok(h.store->Load("s"));
    CHECK(now.version == after_other.version);  // nothing written
    CHECK(Ids(now.transcript) == Ids(after_other.transcript));
    auto discarded = h.sink->OfType("compaction_discarded");
    REQUIRE(discarded.size() == 1);
    CHECK(HasBackgroundTrue(discarded[0]));
    CHECK(discarded[0]["reason"] == "auto");
    CHECK(discarded[0]["messages"].get<std::size_t>() > 0);
    CHECK(discarded[0]["why"].get<std::string>().find("session changed") != std::string::npos);
    CHECK(h.sink->OfType("compaction_completed").empty());
  }
  SECTION("a manual compaction of the same Compactor replaces it") {
    Host h(Background(), std::make_shared<GatedProvider>(1));  // only the first call waits
    h.TurnsUntilStarted();
    REQUIRE(h.provider->WaitStarted(1));
    const CompactOutcome manual = Ok(h.compactor->Compact("s"));
    CHECK(manual.compacted);
    // The background call was cancelled; its result, had it any, is discarded.
    auto discarded = h.WaitEvents("compaction_discarded");
    const std::uint64_t version = Ok(h.store->Load("s")).version;
    h.Turn();
    const Prepared p = h.Prepare();
    CHECK_FALSE(p.background_swapped);
    CHECK(Ok(h.store->Load("s")).version == version + 1);  // the append only
    REQUIRE(discarded.size() == 1);
    CHECK(HasBackgroundTrue(discarded[0]));
    CHECK(discarded[0]["why"] == "a manual compaction replaced it");
    CHECK(h.sink->OfType("compaction_failed").empty());
    CHECK(h.sink->OfType("compaction_completed").size() == 1);  // the manual one
  }
  SECTION("a call was recovered") {
    Host h(Background());
    h.TurnsUntilStarted();
    REQUIRE(h.provider->WaitStarted(1));
    // A tool call whose result never came, then recovered.
    REQUIRE(
        h.store
            ->AppendMessages("s", {Message::UserText("go on"),
                                   Message::AssistantCalls({ToolCall{"lost", "run", "{}", {}}})})
            .ok());
    const std::uint64_t version = Ok(h.store->Load("s")).version;
    REQUIRE(Ok(h.compactor->Recover("s", true)).recovered.size() == 1);
    auto discarded = h.WaitEvents("compaction_discarded");
    REQUIRE(discarded.size() == 1);
    CHECK(discarded[0]["why"] == "a call was recovered");
    CHECK(HasBackgroundTrue(discarded[0]));
    h.provider->Open();
    const Prepared p = h.Prepare();
    CHECK_FALSE(p.background_swapped);
    CHECK(Ok(h.store->Load("s")).version >= version + 1);  // the recovery; no swap of the old span
    // A compaction this Prepare started runs on; once it is done (and swapped in by its
    // worker), the next Prepare reports it: every completed compaction is one of the new span.
    h.WaitNotInFlight();
    const Prepared q = h.Prepare();
    CHECK(h.sink->OfType("compaction_completed").size() ==
          static_cast<std::size_t>(p.compactions.size() + q.compactions.size()));
  }
}

TEST_CASE("R15.3 one compaction at a time, a Prepare waits only at the window, and bounded",
          "[R15.3][compactor]") {
  SECTION("past the trigger, under the window: no second compaction and no wait") {
    Host h(Background());
    h.TurnsUntilStarted();
    REQUIRE(h.provider->WaitStarted(1));
    // Six turns of about 500 tokens: past the trigger (8,500), under the window (10,000).
    for (int i = 0; i < 6; ++i) {
      h.Turn();
      const Prepared p = h.Prepare();
      CHECK(p.background_in_flight);
      CHECK_FALSE(p.waited_for_summarizer);
      CHECK(p.compactions.empty());
    }
    CHECK(h.PlanNow().trigger);  // past the trigger by now
    CHECK(h.provider->started() == 1);
    h.provider->Open();
  }
  SECTION("at the window, Prepare waits for the one in flight and swaps it in") {
    Host h(Background());
    h.TurnsUntilStarted();
    h.Turn(20000);  // the request now reaches the window
    // The summarizer is let go only once Prepare is seen waiting for it (its log says so): a
    // Prepare that did not wait would return with the summarizer still held, not swapped in.
    LogWatch log;
    std::atomic<bool> seen_waiting{false};
    std::thread opener([&] {
      seen_waiting = log.WaitFor("Prepare waits for the background compaction in flight");
      h.provider->Open();
    });
    const Prepared p = h.Prepare();
    opener.join();
    CHECK(seen_waiting);
    CHECK(p.waited_for_summarizer);
    CHECK(p.background_swapped);
    CHECK(h.provider->started() >= 1);
    CHECK(h.provider->max_active() == 1);
    CHECK(p.after_tokens < 10000);
  }
  SECTION("a wait longer than maxWaitMs gives the background compaction up") {
    Host h(Background(150), std::make_shared<GatedProvider>(1));
    h.TurnsUntilStarted();
    h.Turn(20000);
    const auto t0 = std::chrono::steady_clock::now();
    const Prepared p = h.Prepare();
    const auto took = std::chrono::steady_clock::now() - t0;
    CHECK(took >= std::chrono::milliseconds(140));
    CHECK(p.background_wait_ms >= 140);
    CHECK_FALSE(p.background_swapped);
    // Prepare went on with a compaction of its own, which committed.
    REQUIRE(p.compactions.size() == 1);
    auto discarded = h.WaitEvents("compaction_discarded");
    REQUIRE(discarded.size() == 1);  // the abandoned one, cancelled
    CHECK(HasBackgroundTrue(discarded[0]));
    CHECK(discarded[0]["why"].get<std::string>().find("maxWaitMs (150 ms)") != std::string::npos);
  }
  SECTION("an overflow report makes the next Prepare wait") {
    Host h(Background());
    h.TurnsUntilStarted();
    h.compactor->ReportOverflow("s");
    std::thread opener([&] {
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
      h.provider->Open();
    });
    const Prepared p = h.Prepare();
    opener.join();
    CHECK(p.background_swapped);
    CHECK(p.compactions.size() == 1);  // the overflow is answered by the swap
  }
}

TEST_CASE("R15.4 destroying the Compactor mid-compaction cancels and joins, many times",
          "[R15.4][compactor]") {
  const int rounds = 25;
  for (int round = 0; round < rounds; ++round) {
    INFO("round " << round);
    // Half honour their cancellation token at once; the others finish on their own shortly.
    const bool honour = round % 2 == 0;
    auto provider = std::make_shared<GatedProvider>(1000000, honour);
    auto store = recap::testing::NewTestSessionStore();
    auto sink = std::make_shared<RecordingSink>();
    std::thread late_opener;
    {
      Host h(Background(), provider, store);
      h.sink = sink;
      h.compactor = Ok(Compactor::Create(Background(), provider, store, {}, {sink}));
      h.TurnsUntilStarted();
      if (round % 3 == 0) {
        // A second session's compaction queued behind it, perhaps never taken by a worker.
        REQUIRE(store
                    ->AppendMessages("t", {Message::UserText(std::string(30000, 'x')),
                                           Message::AssistantText("ok"), Message::UserText("more")})
                    .ok());
        (void)h.compactor->Prepare("t", {});
      }
      if (!honour) {
        late_opener = std::thread([provider] {
          std::this_thread::sleep_for(std::chrono::milliseconds(20));
          provider->Open();
        });
      }
    }  // ~Compactor: cancels, joins
    if (late_opener.joinable()) late_opener.join();
    CHECK(provider->started() == provider->finished());
    // What it wrote stays readable and whole.
    CHECK(Ok(store->Load("s")).transcript.size() > 0);
    if (honour) {
      auto failed = sink->OfType("compaction_failed");
      REQUIRE_FALSE(failed.empty());
      for (const auto& f : failed) CHECK(HasBackgroundTrue(f));
    }
  }
}

TEST_CASE("R15.4 background failures count for the summarizer's back-off",
          "[R15.4][R12.3][compactor]") {
  Host h(Background());
  h.provider->FailWith(Status::Unavailable("503 from the model"));
  h.provider->Open();
  int failures = 0;
  for (int i = 0; i < 40 && h.PlanNow().summarizer_backoff_ms == 0; ++i) {
    h.Turn(800);
    (void)h.compactor->Prepare("s", {});
    h.WaitNotInFlight();
    failures = static_cast<int>(h.sink->OfType("compaction_failed").size());
  }
  CHECK(h.PlanNow().summarizer_backoff_ms > 0);
  CHECK(failures >= 3);
  for (const auto& f : h.sink->OfType("compaction_failed")) CHECK(HasBackgroundTrue(f));
  // Backing off, Prepare starts no background compaction.
  const int calls = h.provider->started();
  h.Turn(800);
  const Prepared p = h.Prepare();
  CHECK_FALSE(p.background_started);
  CHECK(h.provider->started() == calls);
}

namespace {

std::uint64_t RunSeed() {
  if (const char* s = std::getenv("RECAP_SEED")) return std::strtoull(s, nullptr, 0);
  return 0x15A1;
}

}  // namespace

TEST_CASE("R15 properties: generated sessions with background compaction lose nothing",
          "[R15][property]") {
  const std::uint64_t run = RunSeed();
  const bool memory = recap::testing::TestStoreKind() == "memory";
  const int cases = memory ? 120 : 12;
  std::size_t swapped = 0, started = 0, discarded = 0;
  for (int k = 0; k < cases; ++k) {
    const std::uint64_t seed = recap_test::MixSeed(run, static_cast<std::uint64_t>(k));
    INFO("seed " << seed << " (run seed " << run << ", case " << k
                 << "; replay with RECAP_SEED=" << run << ")");
    recap_test::Rng rng(seed);
    recap_test::GeneratorOptions options;
    options.min_turns = 4;
    options.max_turns = 16;
    options.leading_summary = 0;
    options.orphan_result = 0;
    options.leading_orphan = 0;
    const std::vector<Message> generated = recap_test::GenerateMessages(seed, options);
    Config config = Background();
    config.limits.max_context_chars = 2'000'000;
    config.provider.context_window = 1500 + rng.Below(4000);
    config.compaction.keep_turns = static_cast<int>(rng.Below(3));
    config.compaction.background.start_at = 0.3 + 0.1 * static_cast<double>(rng.Below(7));
    // Summarizers that answer at once or soon; a Prepare may meet one in flight.
    auto provider = std::make_shared<GatedProvider>(0);
    Host h(config, provider);
    std::set<std::string> appended;
    std::vector<Message> pending;
    for (std::size_t i = 0; i < generated.size(); ++i) {
      pending.push_back(generated[i]);
      if (!rng.OneIn(3) && i + 1 < generated.size()) continue;
      for (Message& m : pending) appended.insert(m.id);
      REQUIRE(h.store->AppendMessages("s", pending).ok());
      pending.clear();
      if (rng.OneIn(4)) std::this_thread::sleep_for(std::chrono::milliseconds(rng.Below(3)));
      auto prepared = h.compactor->Prepare("s", {});
      if (!prepared.ok()) {
        REQUIRE(prepared.status().code() == StatusCode::kContextBudgetExceeded);
        continue;
      }
      started += prepared->background_started ? 1 : 0;
      swapped += prepared->background_swapped ? 1 : 0;
      discarded += prepared->background_discarded ? 1 : 0;
      const SessionState state = Ok(h.store->Load("s"));
      // What Prepare returned is what the store holds, or, when a compaction still ran as it
      // returned, what the worker's swap made of it since: a checkpoint, then an unchanged end.
      const std::vector<std::string> returned = Ids(prepared->messages);
      const std::vector<std::string> stored = Ids(state.transcript);
      if (returned != stored) {
        CHECK(prepared->background_in_flight);
        REQUIRE_FALSE(stored.empty());
        CHECK(state.transcript[0].summary);
        REQUIRE(stored.size() - 1 <= returned.size());
        CHECK(std::equal(stored.begin() + 1, stored.end(),
                         returned.end() - static_cast<std::ptrdiff_t>(stored.size() - 1)));
      }
      // Every tool result follows its call: no cut separated them (the generator makes no
      // orphan results here).
      std::set<std::string> calls;
      for (const Message& m : state.transcript) {
        for (const Part& part : m.parts) {
          if (const auto* c = std::get_if<ToolCall>(&part)) calls.insert(c->id);
          if (const auto* r = std::get_if<ToolResult>(&part)) CHECK(calls.count(r->call_id) == 1);
        }
      }
    }
    // Nothing is lost: every message ever appended is in the history.
    std::set<std::string> history;
    for (const auto& e : Ok(h.store->History("s"))) history.insert(e.message.id);
    for (const std::string& id : appended) CHECK(history.count(id) == 1);
    h.compactor.reset();  // joins the workers before the provider goes
    CHECK(provider->started() == provider->finished());
    CHECK(provider->max_active() <= 1);  // one session: one compaction at a time
  }
  INFO("started " << started << ", swapped " << swapped << ", discarded " << discarded);
  CHECK(started > (memory ? 100u : 10u));
  CHECK(swapped > (memory ? 50u : 5u));
}

TEST_CASE("R18.3 Uncompact cancels a compaction running in the background, and undoes",
          "[R18.3][compactor]") {
  Host h(Background(), std::make_shared<GatedProvider>(1));  // the first call waits
  for (int i = 0; i < 3; ++i) h.Turn();
  // A compaction to undo, committed by another writer of the store.
  const SessionState before = Ok(h.store->Load("s"));
  CompactionCommit c;
  c.expected_version = before.version;
  for (std::size_t i = 0; i < 4; ++i) c.replaced.push_back(before.transcript[i].id);
  c.checkpoint = Message::UserText("## Goal\nearlier turns");
  c.checkpoint.summary = true;
  c.reason = "auto";
  Ok(h.store->CommitCompaction("s", c));
  h.TurnsUntilStarted();  // a background compaction waits in its summarizer
  REQUIRE(h.provider->WaitStarted(1));

  const UncompactOutcome u = Ok(h.compactor->Uncompact("s"));
  CHECK(u.commit == "compaction:1");
  const auto discarded = h.WaitEvents("compaction_discarded");
  REQUIRE(discarded.size() == 1);
  CHECK(HasBackgroundTrue(discarded[0]));
  CHECK(discarded[0]["why"] == "the session's last compaction was undone");
  h.provider->Open();
  REQUIRE(h.provider->WaitFinished(1));
  h.WaitNotInFlight();
  // The cancelled compaction never swapped in: the undone span is active, in its places.
  const SessionState after = Ok(h.store->Load("s"));
  for (std::size_t i = 0; i < 4; ++i) CHECK(after.transcript[i].id == before.transcript[i].id);
  CHECK(h.sink->OfType("compaction_completed").empty());
}
