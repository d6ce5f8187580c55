// ScriptedProvider: a Provider whose replies a test writes in advance (spdlog's test_sink as
// model: a small, thread-safe recording double).
//
// A test queues steps; each Complete() call takes the next one and answers with its text,
// finish reason and usage, or fails with its Status, or throws, optionally after a delay that
// honours cancellation. When the queue is empty the default step answers (a valid checkpoint
// unless the test sets another). Every request is recorded, so a test can check what recap
// asked for: the prompt, the rendered span, the schema, the structured source.
//
//   auto provider = std::make_shared<recap::testing::ScriptedProvider>();
//   provider->Push(ScriptedStep::Reply(R"({"goal":"ship it"})"));
//   provider->Push(ScriptedStep::Fail(recap::Status::Unavailable("503 from the server")));
//   ... run recap ...
//   CHECK(provider->calls() == 2);
//   CHECK(provider->Requests()[0].request.json_schema.has_value());
#ifndef RECAP_TESTS_SUPPORT_FAKE_PROVIDER_H_
#define RECAP_TESTS_SUPPORT_FAKE_PROVIDER_H_

#include <chrono>
#include <cstddef>
#include <deque>
#include <functional>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "recap/checkpoint.h"
#include "recap/provider.h"
#include "recap/status.h"
#include "recap/transcript.h"

namespace recap {
namespace testing {

struct ScriptedStep {
  std::string text;
  FinishReason finish = FinishReason::kStop;
  Usage usage;
  Status error;  // non-OK: Complete returns it (after the delay)
  // Waited before answering. A cancellation during the wait ends it at once and Complete
  // returns kCancelled, as the Provider contract asks.
  std::chrono::milliseconds delay{0};
  bool throws = false;  // Complete throws std::runtime_error(text) (after the delay)
  // When set, computes the reply text from the request (e.g. to echo a plugin's field);
  // `text` is then ignored.
  std::function<std::string(const CompletionRequest&)> respond;

  static ScriptedStep Reply(std::string text, Usage usage = {});
  // A reply cut by max_output_tokens (FinishReason::kLength).
  static ScriptedStep Truncated(std::string text);
  static ScriptedStep Fail(Status error);
  static ScriptedStep Throw(std::string what = "scripted provider failure");
  static ScriptedStep Slow(std::chrono::milliseconds delay, std::string text);
};

// What one Complete() call received. `request.source` is cleared (it points into the caller's
// stack); what it pointed to is copied into `span`, `prior` and `focus`.
struct RecordedRequest {
  CompletionRequest request;
  std::optional<Transcript> span;
  std::optional<Checkpoint> prior;
  std::string focus;
  bool cancelled = false;  // the token was cancelled while this call waited
};

// A complete, valid checkpoint reply (R4.1) whose goal is `goal`.
std::string ValidCheckpointJson(const std::string& goal = "Finish the task");

class ScriptedProvider : public Provider {
 public:
  explicit ScriptedProvider(std::string name = "scripted");

  // Queues a step; steps answer calls in the order pushed.
  void Push(ScriptedStep step);
  // The step that answers when the queue is empty. Default: Reply(ValidCheckpointJson()).
  void SetDefault(ScriptedStep step);
  void SetContextWindow(std::optional<std::size_t> tokens);
  // While set (not OK), QueryContextWindow fails with it, as a provider whose model list does
  // not answer does; OK again: the window set above (or kNotFound) is reported.
  void SetContextWindowError(Status error);
  std::size_t window_queries() const;  // ContextWindow() and QueryContextWindow() calls
  void SetName(std::string name);

  std::size_t calls() const;    // Complete() calls so far, finished or not
  std::size_t pending() const;  // queued steps not used yet
  std::vector<RecordedRequest> Requests() const;

  Result<Completion> Complete(const CompletionRequest& request,
                              const CancellationToken& cancel) override;
  std::optional<std::size_t> ContextWindow() override;
  Result<std::size_t> QueryContextWindow() override;
  std::string Name() const override;

 private:
  mutable std::mutex mu_;
  std::string name_;
  std::deque<ScriptedStep> queue_;
  ScriptedStep default_step_;
  std::optional<std::size_t> window_;
  Status window_error_;
  std::size_t window_queries_ = 0;
  std::vector<RecordedRequest> requests_;
};

}  // namespace testing
}  // namespace recap

#endif  // RECAP_TESTS_SUPPORT_FAKE_PROVIDER_H_
