#include "support/fake_provider.h"

#include <stdexcept>
#include <thread>
#include <utility>

#include <nlohmann/json.hpp>

namespace recap {
namespace testing {

ScriptedStep ScriptedStep::Reply(std::string text, Usage usage) {
  ScriptedStep s;
  s.text = std::move(text);
  s.usage = usage;
  return s;
}

ScriptedStep ScriptedStep::Truncated(std::string text) {
  ScriptedStep s;
  s.text = std::move(text);
  s.finish = FinishReason::kLength;
  return s;
}

ScriptedStep ScriptedStep::Fail(Status error) {
  ScriptedStep s;
  s.error = std::move(error);
  return s;
}

ScriptedStep ScriptedStep::Throw(std::string what) {
  ScriptedStep s;
  s.text = std::move(what);
  s.throws = true;
  return s;
}

ScriptedStep ScriptedStep::Slow(std::chrono::milliseconds delay, std::string text) {
  ScriptedStep s;
  s.text = std::move(text);
  s.delay = delay;
  return s;
}

std::string ValidCheckpointJson(const std::string& goal) {
  nlohmann::ordered_json j;
  j["goal"] = goal;
  j["instructions"] = {"Keep the public API stable"};
  j["discoveries"] = {"The build uses CMake and Ninja"};
  j["accomplished"] = {"Read the code"};
  j["currentState"] = "Work in progress";
  j["nextSteps"] = {"Run the tests"};
  j["relevantFiles"] = {{{"path", "src/main.cc"}, {"why", "entry point"}}};
  return j.dump();
}

ScriptedProvider::ScriptedProvider(std::string name)
    : name_(std::move(name)), default_step_(ScriptedStep::Reply(ValidCheckpointJson())) {}

void ScriptedProvider::Push(ScriptedStep step) {
  std::lock_guard<std::mutex> lock(mu_);
  queue_.push_back(std::move(step));
}

void ScriptedProvider::SetDefault(ScriptedStep step) {
  std::lock_guard<std::mutex> lock(mu_);
  default_step_ = std::move(step);
}

void ScriptedProvider::SetContextWindow(std::optional<std::size_t> tokens) {
  std::lock_guard<std::mutex> lock(mu_);
  window_ = tokens;
}

void ScriptedProvider::SetName(std::string name) {
  std::lock_guard<std::mutex> lock(mu_);
  name_ = std::move(name);
}

std::size_t ScriptedProvider::calls() const {
  std::lock_guard<std::mutex> lock(mu_);
  return requests_.size();
}

std::size_t ScriptedProvider::pending() const {
  std::lock_guard<std::mutex> lock(mu_);
  return queue_.size();
}

std::vector<RecordedRequest> ScriptedProvider::Requests() const {
  std::lock_guard<std::mutex> lock(mu_);
  return requests_;
}

Result<Completion> ScriptedProvider::Complete(const CompletionRequest& request,
                                              const CancellationToken& cancel) {
  RecordedRequest record;
  record.request = request;
  record.request.source = nullptr;
  if (request.source) {
    if (request.source->span) record.span = *request.source->span;
    if (request.source->prior) record.prior = *request.source->prior;
    record.focus = request.source->focus;
  }

  ScriptedStep step;
  std::size_t index;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (queue_.empty()) {
      step = default_step_;
    } else {
      step = std::move(queue_.front());
      queue_.pop_front();
    }
    index = requests_.size();
    requests_.push_back(std::move(record));
  }

  // Sleep in short slices so that a cancellation is noticed well within the 100 ms the
  // Provider contract allows.
  const auto deadline = std::chrono::steady_clock::now() + step.delay;
  while (std::chrono::steady_clock::now() < deadline) {
    if (cancel.IsCancelled()) {
      std::lock_guard<std::mutex> lock(mu_);
      requests_[index].cancelled = true;
      return Status::Cancelled("the scripted provider's call was cancelled");
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }

  if (step.throws) throw std::runtime_error(step.text);
  if (!step.error.ok()) return step.error;
  Completion c;
  c.text = step.respond ? step.respond(request) : step.text;
  c.finish_reason = step.finish;
  c.usage = step.usage;
  return c;
}

std::optional<std::size_t> ScriptedProvider::ContextWindow() {
  std::lock_guard<std::mutex> lock(mu_);
  ++window_queries_;
  return window_;
}

Result<std::size_t> ScriptedProvider::QueryContextWindow() {
  std::lock_guard<std::mutex> lock(mu_);
  ++window_queries_;
  if (!window_error_.ok()) return window_error_;
  if (window_) return *window_;
  return Status::NotFound("the provider (" + name_ + ") does not report a context window");
}

void ScriptedProvider::SetContextWindowError(Status error) {
  std::lock_guard<std::mutex> lock(mu_);
  window_error_ = std::move(error);
}

std::size_t ScriptedProvider::window_queries() const {
  std::lock_guard<std::mutex> lock(mu_);
  return window_queries_;
}

std::string ScriptedProvider::Name() const {
  std::lock_guard<std::mutex> lock(mu_);
  return name_;
}

}  // namespace testing
}  // namespace recap
