#include "compactor/background_queue.h"

#include <algorithm>

namespace recap {
inline namespace v0 {
namespace compactor_detail {

BackgroundQueue::~BackgroundQueue() {
  bool stopped = false;
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopped = stopped_;
  }
  if (!stopped) Stop("the Compactor was destroyed");
}

void BackgroundQueue::Start(const std::string& session, std::shared_ptr<BackgroundTask> task) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    tasks_[session] = task;
    queue_.push_back(std::move(task));
    SpawnWorkerIfNeeded(false);
  }
  changed_.notify_all();
}

BackgroundQueue::Look BackgroundQueue::LookLocked(const std::string& session) const {
  Look look;
  auto it = tasks_.find(session);
  if (it == tasks_.end()) return look;
  look.task = it->second;
  look.done = look.task->state == BackgroundTask::State::kDone;
  look.abandoned = look.task->abandoned;
  return look;
}

BackgroundQueue::Look BackgroundQueue::Find(const std::string& session) const {
  std::lock_guard<std::mutex> lock(mu_);
  return LookLocked(session);
}

BackgroundQueue::Look BackgroundQueue::TakeIfDone(const std::string& session) {
  std::lock_guard<std::mutex> lock(mu_);
  Look look = LookLocked(session);
  if (look.done) tasks_.erase(session);
  return look;
}

bool BackgroundQueue::Wait(const std::shared_ptr<BackgroundTask>& task,
                           std::chrono::milliseconds max_wait, const CancellationToken& cancel,
                           std::uint64_t* waited_ms) {
  const auto began = std::chrono::steady_clock::now();
  const auto deadline = began + max_wait;
  std::unique_lock<std::mutex> lock(mu_);
  if (task->state == BackgroundTask::State::kQueued) {
    // No worker has taken it yet: it goes first, and when every worker is busy, one more is
    // started for it, so that it does not wait behind other sessions' compactions. (Run by
    // the waiting caller itself, it could not be given up after maxWaitMs.)
    queue_.erase(std::find(queue_.begin(), queue_.end(), task));
    queue_.push_front(task);
    SpawnWorkerIfNeeded(true);
    changed_.notify_all();
  }
  // Woken by the task's end; every 20 ms to look at the caller's token.
  while (task->state != BackgroundTask::State::kDone && !cancel.IsCancelled()) {
    const auto now = std::chrono::steady_clock::now();
    if (now >= deadline) break;
    changed_.wait_until(lock, std::min(deadline, now + std::chrono::milliseconds(20)));
  }
  if (waited_ms != nullptr) {
    *waited_ms += static_cast<std::uint64_t>(std::chrono::duration_cast<std::chrono::milliseconds>(
                                                 std::chrono::steady_clock::now() - began)
                                                 .count());
  }
  return task->state == BackgroundTask::State::kDone;
}

BackgroundQueue::Abandoned BackgroundQueue::Abandon(const std::string& session,
                                                    const std::string& why) {
  std::lock_guard<std::mutex> lock(mu_);
  Abandoned out;
  auto it = tasks_.find(session);
  if (it == tasks_.end()) return out;
  std::shared_ptr<BackgroundTask> task = it->second;
  if (task->state == BackgroundTask::State::kRunning) {
    // It stays the session's until it ends (R15.3); its worker reports it.
    if (!task->abandoned) {
      task->abandoned = true;
      task->abandoned_why = why;
    }
    task->cancel.Cancel();
    out.running = std::move(task);
    return out;
  }
  tasks_.erase(it);
  if (task->state == BackgroundTask::State::kQueued) {
    queue_.erase(std::find(queue_.begin(), queue_.end(), task));
    task->state = BackgroundTask::State::kDone;
    out.discarded = std::move(task);
  } else if (!task->abandoned && task->job.summary.has_value()) {
    out.discarded = std::move(task);  // else its worker reported its end
  }
  return out;
}

void BackgroundQueue::Forget(const std::string& session,
                             const std::shared_ptr<BackgroundTask>& task) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = tasks_.find(session);
  if (it != tasks_.end() && it->second == task) tasks_.erase(it);
}

bool BackgroundQueue::IsAbandoned(const BackgroundTask& task) const {
  std::lock_guard<std::mutex> lock(mu_);
  return task.abandoned;
}

BackgroundQueue::Fate BackgroundQueue::BeforeReport(const BackgroundTask& task) const {
  std::lock_guard<std::mutex> lock(mu_);
  return Fate{task.abandoned, stopping_, task.abandoned_why};
}

BackgroundQueue::Fate BackgroundQueue::MarkDone(BackgroundTask& task) {
  Fate fate;
  {
    std::lock_guard<std::mutex> lock(mu_);
    fate = Fate{task.abandoned, stopping_, task.abandoned_why};
    task.state = BackgroundTask::State::kDone;
  }
  changed_.notify_all();
  return fate;
}

bool BackgroundQueue::IsCurrentLocked(const std::string& session,
                                      const std::shared_ptr<BackgroundTask>& task) const {
  if (stopping_ || task->abandoned) return false;
  auto it = tasks_.find(session);
  return it != tasks_.end() && it->second == task;
}

bool BackgroundQueue::IsCurrent(const std::string& session,
                                const std::shared_ptr<BackgroundTask>& task) const {
  std::lock_guard<std::mutex> lock(mu_);
  return IsCurrentLocked(session, task);
}

bool BackgroundQueue::Claim(const std::string& session,
                            const std::shared_ptr<BackgroundTask>& task) {
  std::lock_guard<std::mutex> lock(mu_);
  if (!IsCurrentLocked(session, task)) return false;
  tasks_.erase(session);
  return true;
}

BackgroundQueue::Stopped BackgroundQueue::Stop(const std::string& why) {
  Stopped out;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (stopped_) return out;
    stopped_ = true;
    stopping_ = true;
    for (auto& [session, task] : tasks_) {
      if (task->state == BackgroundTask::State::kRunning && !task->abandoned) {
        task->abandoned = true;
        task->abandoned_why = why;
      }
      if (task->state == BackgroundTask::State::kDone && !task->abandoned && task->job.summary) {
        out.never_swapped.push_back(task);
      }
      task->cancel.Cancel();
    }
    for (auto& task : queue_) {
      task->state = BackgroundTask::State::kDone;
      out.never_ran.push_back(task);
    }
    queue_.clear();
  }
  changed_.notify_all();
  // No worker is started once stopping_ is set, so the list no longer changes.
  for (std::thread& worker : workers_) worker.join();
  return out;
}

void BackgroundQueue::WorkerLoop() {
  std::unique_lock<std::mutex> lock(mu_);
  for (;;) {
    ++idle_;
    changed_.wait(lock, [&] { return stopping_ || !queue_.empty(); });
    --idle_;
    if (queue_.empty()) return;  // stopping
    std::shared_ptr<BackgroundTask> task = std::move(queue_.front());
    queue_.pop_front();
    task->state = BackgroundTask::State::kRunning;
    lock.unlock();
    run_(task);
    task.reset();
    lock.lock();
  }
}

void BackgroundQueue::SpawnWorkerIfNeeded(bool beyond_limit) {
  if (stopping_ || queue_.size() <= idle_) return;
  if (!beyond_limit && workers_.size() >= workers_limit_) return;
  workers_.emplace_back([this] { WorkerLoop(); });
}

}  // namespace compactor_detail
}  // namespace v0
}  // namespace recap
