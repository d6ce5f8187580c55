// R15: the background compactions of one Compactor — at most one task per session, the queue
// of tasks no worker has taken yet, and the worker threads (up to
// compaction.background.workers, one more for a Prepare that cannot wait behind others). The
// queue knows when a task is queued, running, done or given up; it knows nothing of what a task
// does: a worker hands each task it takes to the `run` function the queue was made with, and
// what a task's end means (events, the swap) is the caller's (background.cc).
//
// Thread-safe: every method takes the queue's own lock (mu_) and calls nothing out under it;
// `run` is called without it and may call the queue back. A task's state, abandoned and
// abandoned_why are guarded by mu_ as well: read them through the queue. Its job belongs to the
// worker while it runs, then to whoever holds the session's lock and takes it from the queue.
#ifndef RECAP_SRC_CORE_COMPACTOR_BACKGROUND_QUEUE_H_
#define RECAP_SRC_CORE_COMPACTOR_BACKGROUND_QUEUE_H_

#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "recap/cancellation.h"
#include "recap/compactor.h"

#include "compactor/compaction_job.h"

namespace recap {
inline namespace v0 {
namespace compactor_detail {

struct BackgroundTask {
  CompactionJob job;
  RequestSizes sizes;  // of the Prepare that started it, for the sizes its events report
  CancellationSource cancel;

  enum class State { kQueued, kRunning, kDone };
  // Guarded by BackgroundQueue::mu_:
  State state = State::kQueued;
  // Given up (by a manual compaction, a recovery, a Prepare that waited maxWaitMs, the
  // Compactor's destruction) and cancelled: its result is never swapped in. It stays the
  // session's while it runs.
  bool abandoned = false;
  std::string abandoned_why;
};

class BackgroundQueue {
 public:
  using Run = std::function<void(const std::shared_ptr<BackgroundTask>&)>;

  BackgroundQueue(std::size_t workers, Run run) : workers_limit_(workers), run_(std::move(run)) {}
  // Stops, when Stop was not called.
  ~BackgroundQueue();
  BackgroundQueue(const BackgroundQueue&) = delete;
  BackgroundQueue& operator=(const BackgroundQueue&) = delete;

  // Makes `task` the session's and queues it; starts a worker when the queue holds more tasks
  // than idle workers will take.
  void Start(const std::string& session, std::shared_ptr<BackgroundTask> task);

  // The session's task as it is now (null when it has none).
  struct Look {
    std::shared_ptr<BackgroundTask> task;
    bool done = false;
    bool abandoned = false;
  };
  Look Find(const std::string& session) const;
  // The same, and the task stops being the session's when it is done.
  Look TakeIfDone(const std::string& session);

  // Waits until `task` is done, at most `max_wait` and while `cancel` is not cancelled; a task
  // no worker has taken yet goes first in the queue (with a worker of its own when every
  // worker is busy). Adds the time waited to *waited_ms (when not null). True when it is done.
  bool Wait(const std::shared_ptr<BackgroundTask>& task, std::chrono::milliseconds max_wait,
            const CancellationToken& cancel, std::uint64_t* waited_ms);

  // Gives up the session's task, if any, and cancels it. A running one stays the session's
  // until it ends (no second compaction beside it, R15.3) and is returned as `running`; a
  // queued one is dropped (never run) and a finished one forgotten, and either is returned as
  // `discarded` when its end still has to be reported (not already by the worker).
  struct Abandoned {
    std::shared_ptr<BackgroundTask> running;
    std::shared_ptr<BackgroundTask> discarded;
  };
  Abandoned Abandon(const std::string& session, const std::string& why);

  // `task` stops being the session's (when it still is).
  void Forget(const std::string& session, const std::shared_ptr<BackgroundTask>& task);

  bool IsAbandoned(const BackgroundTask& task) const;

  // The worker's side of a task's end. BeforeReport: whether it was given up (and why), and
  // whether the queue is stopping. MarkDone: marks it done (waking whoever waits) and returns
  // the same facts as they are then.
  struct Fate {
    bool abandoned = false;
    bool stopping = false;
    std::string why;
  };
  Fate BeforeReport(const BackgroundTask& task) const;
  Fate MarkDone(BackgroundTask& task);

  // Whether `task` is still the session's, not given up, and the queue not stopping: a
  // finished task may then be swapped in. Claim also makes it stop being the session's.
  bool IsCurrent(const std::string& session, const std::shared_ptr<BackgroundTask>& task) const;
  bool Claim(const std::string& session, const std::shared_ptr<BackgroundTask>& task);

  // Stops: every running task is given up with `why`, every task cancelled, the queued ones
  // marked done; then the workers are joined (a summarizer call in flight sees its token
  // cancelled; the join waits for it to return). Returns the tasks no worker took, and the
  // finished ones no Prepare swapped in, for their ends to be reported. Once only.
  struct Stopped {
    std::vector<std::shared_ptr<BackgroundTask>> never_ran;
    std::vector<std::shared_ptr<BackgroundTask>> never_swapped;
  };
  Stopped Stop(const std::string& why);

 private:
  void WorkerLoop();
  // Starts a worker when the queue holds more tasks than idle workers will take, up to
  // workers_limit_ (beyond it when `beyond_limit`). mu_ held.
  void SpawnWorkerIfNeeded(bool beyond_limit);
  bool IsCurrentLocked(const std::string& session,
                       const std::shared_ptr<BackgroundTask>& task) const;
  Look LookLocked(const std::string& session) const;  // mu_ held

  const std::size_t workers_limit_;
  const Run run_;

  mutable std::mutex mu_;
  std::condition_variable changed_;  // a task queued or done, or stopping
  // Guarded by mu_:
  std::unordered_map<std::string, std::shared_ptr<BackgroundTask>> tasks_;  // one a session
  std::deque<std::shared_ptr<BackgroundTask>> queue_;  // not taken by a worker yet
  std::vector<std::thread> workers_;
  std::size_t idle_ = 0;  // workers waiting for a task
  bool stopping_ = false;
  bool stopped_ = false;  // Stop ran
};

}  // namespace compactor_detail
}  // namespace v0
}  // namespace recap

#endif  // RECAP_SRC_CORE_COMPACTOR_BACKGROUND_QUEUE_H_
