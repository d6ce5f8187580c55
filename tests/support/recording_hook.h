// RecordingHook: a PluginHook that does what a test tells it and records every call.
//
// Each hook is scripted on its own: what it returns, or a Status error, or an exception
// (std::runtime_error or an int), optionally after sleeping (to simulate a hang; by default
// the sleep ignores cancellation like a stuck plugin would). Garbage results are ordinary
// return values; GarbageRequest() builds the usual kinds.
//
// recap abandons a hook that runs past its limit, and the abandoned call finishes later on its
// own thread, possibly after the test moved on. The recorded state therefore lives in a
// shared block that the hook and any observer own together, and WaitForFinished() lets a test
// wait for stragglers before it ends.
//
//   auto hook = std::make_shared<recap::testing::RecordingHook>("notes");
//   hook->before().result.instructions = "Also list open questions.";
//   hook->after().sleep = std::chrono::milliseconds(500);  // hangs past a 100 ms limit
//
// A hook that must time out whatever the machine's speed waits on a HookGate instead of a
// sleep: it hangs until the test opens the gate (or the gate gives up, a hang guard far past
// any limit a test sets), so "it was abandoned" is decided by what finished, not by a clock.
//
//   auto gate = std::make_shared<recap::testing::HookGate>();
//   hook->after().hold = gate;  // hangs until gate->Open()
//   ... run; CHECK(hook->finished() == 0); gate->Open(); hook->WaitForFinished(1, ...) ...
#ifndef RECAP_TESTS_SUPPORT_RECORDING_HOOK_H_
#define RECAP_TESTS_SUPPORT_RECORDING_HOOK_H_

#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "recap/plugin_hook.h"

namespace recap {
namespace testing {

// A gate that hooks wait on until a test opens it. It opens itself after `give_up` (a hang
// guard: a runner that wrongly waited for its hooks is then caught by what finished, instead
// of hanging the test). OpenOnExit opens it when a test's scope ends, also on a failed REQUIRE.
class HookGate {
 public:
  explicit HookGate(std::chrono::milliseconds give_up = std::chrono::seconds(30));
  HookGate(const HookGate&) = delete;
  HookGate& operator=(const HookGate&) = delete;

  void Open();
  bool is_open() const;
  // Waits up to `d` for the gate to open (or give up); true when it is open.
  bool WaitFor(std::chrono::milliseconds d) const;

 private:
  mutable std::mutex mu_;
  mutable std::condition_variable cv_;
  bool open_ = false;
  const std::chrono::steady_clock::time_point give_up_at_;
};

// Opens a gate when it goes out of scope, so that a failing REQUIRE does not leave its hooks
// hanging.
class OpenOnExit {
 public:
  explicit OpenOnExit(std::shared_ptr<HookGate> gate) : gate_(std::move(gate)) {}
  ~OpenOnExit() { gate_->Open(); }
  OpenOnExit(const OpenOnExit&) = delete;
  OpenOnExit& operator=(const OpenOnExit&) = delete;

 private:
  std::shared_ptr<HookGate> gate_;
};

// How one hook behaves, checked in this order: sleep, hold, throw, error, result.
template <class R>
struct HookScript {
  R result;
  Status error;              // non-OK: returned instead of `result`
  bool throw_std = false;    // throws std::runtime_error(throw_what)
  bool throw_other = false;  // throws an int (not a std::exception)
  std::string throw_what = "scripted hook failure";
  std::chrono::milliseconds sleep{0};
  bool honour_cancel = false;  // stop sleeping (and return kCancelled) once cancelled
  // Set: after the sleep, wait until this gate opens (honour_cancel applies here too).
  std::shared_ptr<HookGate> hold;
};

class RecordingHook : public PluginHook {
 public:
  explicit RecordingHook(std::string name);

  // The scripts; set them before the hook runs (they are read without a lock).
  HookScript<BeforeCompactResult>& before() { return before_; }
  HookScript<AfterCompactResult>& after() { return after_; }

  std::vector<BeforeCompactContext> BeforeCalls() const;
  std::vector<AfterCompactContext> AfterCalls() const;
  std::size_t started() const;   // calls of either hook that began
  std::size_t finished() const;  // calls that returned or threw
  bool saw_cancel() const;       // some call observed its token cancelled
  // Waits until `count` calls finished; false if that did not happen within `timeout`.
  bool WaitForFinished(std::size_t count, std::chrono::milliseconds timeout) const;

  std::string Name() const override { return name_; }
  Result<BeforeCompactResult> BeforeCompact(const BeforeCompactContext& context,
                                            const CancellationToken& cancel) override;
  Result<AfterCompactResult> AfterCompact(const AfterCompactContext& context,
                                          const CancellationToken& cancel) override;

 private:
  struct Log {
    mutable std::mutex mu;
    mutable std::condition_variable cv;
    std::vector<BeforeCompactContext> before;
    std::vector<AfterCompactContext> after;
    std::size_t started = 0;
    std::size_t finished = 0;
    bool saw_cancel = false;
  };
  template <class R>
  Result<R> Play(const HookScript<R>& script, const CancellationToken& cancel);

  const std::string name_;
  HookScript<BeforeCompactResult> before_;
  HookScript<AfterCompactResult> after_;
  std::shared_ptr<Log> log_ = std::make_shared<Log>();
};

enum class Garbage {
  kBadFieldName,      // "2 bad-name"
  kLongFieldName,     // 65 characters
  kCheckpointField,   // "goal"
  kDuplicateField,    // "notes" twice
  kInvalidSchema,     // "{not json"
  kNonObjectSchema,   // "[1,2]"
  kInvalidUtf8,       // instructions with a stray continuation byte
  kHugeInstructions,  // 100,001 characters
};

// A BeforeCompactResult with exactly one problem of the given kind.
BeforeCompactResult GarbageRequest(Garbage kind);

// A well-formed output field.
OutputField Field(std::string name, std::string description = "a value",
                  std::string json_schema = R"({"type":"string"})");

}  // namespace testing
}  // namespace recap

#endif  // RECAP_TESTS_SUPPORT_RECORDING_HOOK_H_
