// recap CLI — progress lines on stderr for work that lasts over a second.
//
// A Progress shows one line, rewritten in place ("\r" + clear to end of line) with the current
// step and the time elapsed, and only when stderr is a terminal and the work has been going for
// longer than the delay (one second; RECAP_PROGRESS_DELAY_MS overrides it, which the tests use).
// A small thread redraws the line a few times a second, so a single long step (one summarizer
// request to a slow server) still shows that the command is alive. When stderr is a file or a pipe
// it prints nothing, so scripts and logs see only the command's real output. Finish() (or the
// destructor) erases the line it left, so what follows starts on a clean line.
#ifndef RECAP_CLI_PROGRESS_H_
#define RECAP_CLI_PROGRESS_H_

#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "recap/events.h"

namespace recap_cli {

class Progress {
 public:
  // `what` starts every line, e.g. "importing big.jsonl".
  explicit Progress(std::string what);
  ~Progress();
  Progress(const Progress&) = delete;
  Progress& operator=(const Progress&) = delete;

  // Sets the current step ("decoding", "summarizing: chunk 2 of 5 done"); shown when due.
  void Update(const std::string& step);
  // Stops the redrawing and erases the line, if one was shown. Idempotent.
  void Finish();

  // Whether this process shows progress at all (stderr is a terminal).
  static bool Enabled();

 private:
  void Run();
  void DrawLocked();

  std::mutex mu_;
  std::condition_variable wake_;
  const std::string what_;
  const std::chrono::steady_clock::time_point start_;
  const std::chrono::milliseconds delay_;
  const bool enabled_;
  std::string step_;
  bool shown_ = false;
  bool done_ = false;
  std::thread thread_;
};

// Finishes the Progress currently shown, if any, so that an error message that follows starts on
// a clean line (Failure() and UsageError() call it).
void FinishActiveProgress();

// Sets the step of the Progress currently shown, if any (the HTTP provider says what it waits
// for: "waiting for openai (up to 120 s a request; --timeout-ms)").
void SetActiveProgressStep(const std::string& step);

// An event sink that turns compaction events into progress steps and passes every event on to
// `next` (which may be null).
std::shared_ptr<recap::EventSink> NewProgressSink(Progress* progress,
                                                  std::shared_ptr<recap::EventSink> next);

}  // namespace recap_cli

#endif  // RECAP_CLI_PROGRESS_H_
