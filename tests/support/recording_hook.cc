#include "support/recording_hook.h"

#include <algorithm>
#include <stdexcept>
#include <thread>
#include <utility>

namespace recap {
namespace testing {

HookGate::HookGate(std::chrono::milliseconds give_up)
    : give_up_at_(std::chrono::steady_clock::now() + give_up) {}

void HookGate::Open() {
  std::lock_guard<std::mutex> lock(mu_);
  open_ = true;
  cv_.notify_all();
}

bool HookGate::is_open() const {
  std::lock_guard<std::mutex> lock(mu_);
  return open_;
}

bool HookGate::WaitFor(std::chrono::milliseconds d) const {
  std::unique_lock<std::mutex> lock(mu_);
  const auto until = std::min(std::chrono::steady_clock::now() + d, give_up_at_);
  cv_.wait_until(lock, until, [&] { return open_; });
  return open_ || std::chrono::steady_clock::now() >= give_up_at_;
}

RecordingHook::RecordingHook(std::string name) : name_(std::move(name)) {}

template <class R>
Result<R> RecordingHook::Play(const HookScript<R>& script, const CancellationToken& cancel) {
  // Keep the log alive on this thread whatever happens to the hook's other owners.
  std::shared_ptr<Log> log = log_;
  auto finish = [&log](bool cancelled) {
    std::lock_guard<std::mutex> lock(log->mu);
    ++log->finished;
    log->saw_cancel = log->saw_cancel || cancelled;
    log->cv.notify_all();
  };

  const auto deadline = std::chrono::steady_clock::now() + script.sleep;
  while (std::chrono::steady_clock::now() < deadline) {
    if (script.honour_cancel && cancel.IsCancelled()) {
      finish(true);
      return Status::Cancelled("the recording hook was cancelled");
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  // Hold the gate by a shared_ptr of this thread's own: the script may outlive the test.
  if (const std::shared_ptr<HookGate> gate = script.hold) {
    while (!gate->WaitFor(std::chrono::milliseconds(2))) {
      if (script.honour_cancel && cancel.IsCancelled()) {
        finish(true);
        return Status::Cancelled("the recording hook was cancelled");
      }
    }
  }
  const bool cancelled = cancel.IsCancelled();
  if (script.throw_std) {
    finish(cancelled);
    throw std::runtime_error(script.throw_what);
  }
  if (script.throw_other) {
    finish(cancelled);
    throw 42;
  }
  finish(cancelled);
  if (!script.error.ok()) return script.error;
  return script.result;
}

Result<BeforeCompactResult> RecordingHook::BeforeCompact(const BeforeCompactContext& context,
                                                         const CancellationToken& cancel) {
  {
    std::lock_guard<std::mutex> lock(log_->mu);
    log_->before.push_back(context);
    ++log_->started;
  }
  return Play(before_, cancel);
}

Result<AfterCompactResult> RecordingHook::AfterCompact(const AfterCompactContext& context,
                                                       const CancellationToken& cancel) {
  {
    std::lock_guard<std::mutex> lock(log_->mu);
    log_->after.push_back(context);
    ++log_->started;
  }
  return Play(after_, cancel);
}

std::vector<BeforeCompactContext> RecordingHook::BeforeCalls() const {
  std::lock_guard<std::mutex> lock(log_->mu);
  return log_->before;
}

std::vector<AfterCompactContext> RecordingHook::AfterCalls() const {
  std::lock_guard<std::mutex> lock(log_->mu);
  return log_->after;
}

std::size_t RecordingHook::started() const {
  std::lock_guard<std::mutex> lock(log_->mu);
  return log_->started;
}

std::size_t RecordingHook::finished() const {
  std::lock_guard<std::mutex> lock(log_->mu);
  return log_->finished;
}

bool RecordingHook::saw_cancel() const {
  std::lock_guard<std::mutex> lock(log_->mu);
  return log_->saw_cancel;
}

bool RecordingHook::WaitForFinished(std::size_t count, std::chrono::milliseconds timeout) const {
  std::unique_lock<std::mutex> lock(log_->mu);
  return log_->cv.wait_for(lock, timeout, [&] { return log_->finished >= count; });
}

OutputField Field(std::string name, std::string description, std::string json_schema) {
  OutputField f;
  f.name = std::move(name);
  f.description = std::move(description);
  f.json_schema = std::move(json_schema);
  return f;
}

BeforeCompactResult GarbageRequest(Garbage kind) {
  BeforeCompactResult r;
  r.instructions = "Also fill the requested fields.";
  switch (kind) {
    case Garbage::kBadFieldName: r.output_fields.push_back(Field("2 bad-name")); break;
    case Garbage::kLongFieldName: r.output_fields.push_back(Field(std::string(65, 'a'))); break;
    case Garbage::kCheckpointField: r.output_fields.push_back(Field("goal")); break;
    case Garbage::kDuplicateField:
      r.output_fields.push_back(Field("notes"));
      r.output_fields.push_back(Field("notes"));
      break;
    case Garbage::kInvalidSchema:
      r.output_fields.push_back(Field("notes", "a value", "{not json"));
      break;
    case Garbage::kNonObjectSchema:
      r.output_fields.push_back(Field("notes", "a value", "[1,2]"));
      break;
    case Garbage::kInvalidUtf8: r.instructions = "bad \x80 byte"; break;
    case Garbage::kHugeInstructions: r.instructions = std::string(100001, 'x'); break;
  }
  return r;
}

}  // namespace testing
}  // namespace recap
