// Background compaction (R15): a compaction started early on a worker thread from a snapshot,
// swapped in by a later Prepare, or discarded when the session changed underneath it.
#include "compactor/compactor_impl.h"

namespace recap {
inline namespace v0 {

Compactor::Impl::~Impl() {
  std::vector<std::shared_ptr<BackgroundTask>> never_ran;
  {
    std::lock_guard<std::mutex> lock(bg_mu);
    bg_stopping = true;
    for (auto& [session, task] : bg_tasks) task->cancel.Cancel();
    for (auto& task : bg_queue) {
      task->state = BackgroundTask::State::kDone;
      never_ran.push_back(task);
    }
    bg_queue.clear();
  }
  bg_cv.notify_all();
  // A summarizer call in flight sees its token cancelled; the join waits for it to return.
  for (std::thread& worker : bg_workers) worker.join();
  for (const auto& task : never_ran) {
    events.Emit(EventType::kCompactionFailed, task->job.session,
                Fields(task->job, internal::CompactionFailedFields(
                                      CompactionReasonName(task->job.reason),
                                      "compaction was cancelled: the Compactor was destroyed "
                                      "before a worker took it")));
  }
}

void Compactor::Impl::WorkerLoop() {
  std::unique_lock<std::mutex> lock(bg_mu);
  for (;;) {
    ++bg_idle;
    bg_cv.wait(lock, [&] { return bg_stopping || !bg_queue.empty(); });
    --bg_idle;
    if (bg_queue.empty()) return;  // stopping
    std::shared_ptr<BackgroundTask> task = std::move(bg_queue.front());
    bg_queue.pop_front();
    task->state = BackgroundTask::State::kRunning;
    lock.unlock();
    SummarizeJob(task->job, task->cancel.Token());
    Ran(*task);
    lock.lock();
  }
}

void Compactor::Impl::SayDiscarded(const CompactionJob& job, const std::string& why) {
  events.Emit(EventType::kCompactionDiscarded, job.session,
              Fields(job, internal::CompactionDiscardedFields(CompactionReasonName(job.reason),
                                                              job.replaced_ids.size(), why)));
  RECAP_LOG_INFO("session {}: a background compaction was discarded: {}", job.session, why);
}

void Compactor::Impl::SayFailed(const CompactionJob& job) {
  events.Emit(EventType::kCompactionFailed, job.session,
              Fields(job, internal::CompactionFailedFields(CompactionReasonName(job.reason),
                                                           job.error.message())));
}

void Compactor::Impl::Ran(BackgroundTask& task) {
  std::string why;
  {
    std::lock_guard<std::mutex> lock(bg_mu);
    task.state = BackgroundTask::State::kDone;
    if (task.abandoned) why = task.abandoned_why;
  }
  bg_cv.notify_all();
  if (!why.empty()) {
    SayDiscarded(task.job, why);
  } else if (!task.job.summary) {
    SayFailed(task.job);
  }
}

bool Compactor::Impl::MustWait(const Plan& plan, const SessionCache& c) const {
  const std::size_t window = plan.window_tokens ? *plan.window_tokens : FallbackWindow();
  return c.overflow_pending || plan.reducible_chars > config.limits.max_context_chars ||
         plan.full_tokens >= window;
}

bool Compactor::Impl::StartBackground(const std::string& session, SessionCache& c,
                                      const Plan& plan) {
  auto task = std::make_shared<BackgroundTask>();
  const Attempt begun = BeginCompaction(session, c, plan, CompactionReason::kAuto, CutMode::kNormal,
                                        {}, /*background=*/true, task->job);
  if (begun.kind != AttemptKind::kNone) {
    c.background_skipped_at = c.turn_serial;
    return false;
  }
  {
    std::lock_guard<std::mutex> lock(bg_mu);
    bg_tasks[session] = task;
    bg_queue.push_back(task);
    if (bg_idle == 0 &&
        bg_workers.size() < static_cast<std::size_t>(config.compaction.background.workers)) {
      bg_workers.emplace_back([this] { WorkerLoop(); });
    }
  }
  bg_cv.notify_all();
  RECAP_LOG_DEBUG("session {}: compaction of {} messages started in the background", session,
                  task->job.replaced_ids.size());
  return true;
}

std::shared_ptr<Compactor::Impl::BackgroundTask> Compactor::Impl::WaitForTask(
    const std::string& session, const std::shared_ptr<BackgroundTask>& task,
    std::uint64_t* waited_ms) {
  const auto began = std::chrono::steady_clock::now();
  const auto max_wait = std::chrono::milliseconds(std::min<std::size_t>(
      config.compaction.background.max_wait_ms, std::size_t{24} * 3600 * 1000));
  std::unique_lock<std::mutex> lock(bg_mu);
  if (task->state == BackgroundTask::State::kQueued) {
    // No worker has taken it yet: it goes first, and when every worker is busy, one more is
    // started for it, so that it does not wait behind other sessions' compactions. (Run here,
    // it could not be given up after maxWaitMs.)
    bg_queue.erase(std::find(bg_queue.begin(), bg_queue.end(), task));
    bg_queue.push_front(task);
    if (bg_idle == 0) bg_workers.emplace_back([this] { WorkerLoop(); });
    bg_cv.notify_all();
  }
  const bool done = bg_cv.wait_until(lock, began + max_wait,
                                     [&] { return task->state == BackgroundTask::State::kDone; });
  *waited_ms = static_cast<std::uint64_t>(std::chrono::duration_cast<std::chrono::milliseconds>(
                                              std::chrono::steady_clock::now() - began)
                                              .count());
  auto it = bg_tasks.find(session);
  if (it != bg_tasks.end() && it->second == task) bg_tasks.erase(it);
  if (done) return task;
  // R15.3: bounded. It is cancelled; whoever finishes it reports it discarded.
  task->abandoned = true;
  task->abandoned_why = "a Prepare waited compaction.background.maxWaitMs (" +
                        std::to_string(config.compaction.background.max_wait_ms) +
                        " ms) for it and went on without it";
  task->cancel.Cancel();
  RECAP_LOG_WARN(
      "session {}: the background compaction did not finish within {} ms; Prepare "
      "goes on without it",
      session, config.compaction.background.max_wait_ms);
  return nullptr;
}

void Compactor::Impl::AbandonTask(const std::string& session, const std::string& why) {
  std::shared_ptr<BackgroundTask> task;
  {
    std::lock_guard<std::mutex> lock(bg_mu);
    auto it = bg_tasks.find(session);
    if (it == bg_tasks.end()) return;
    task = std::move(it->second);
    bg_tasks.erase(it);
    if (task->state == BackgroundTask::State::kQueued) {
      bg_queue.erase(std::find(bg_queue.begin(), bg_queue.end(), task));
      task->state = BackgroundTask::State::kDone;
    } else if (task->state == BackgroundTask::State::kRunning) {
      task->abandoned = true;
      task->abandoned_why = why;
      task->cancel.Cancel();
      return;  // whoever runs it reports it when it ends (Ran)
    } else if (!task->job.summary) {
      return;  // it failed, and Ran said so
    }
  }
  SayDiscarded(task->job, why);
}

void Compactor::Impl::Collect(SessionCache& c, const RequestSizes& sizes, BackgroundTask& task,
                              Prepared& out) {
  CompactionJob& job = task.job;
  if (!job.summary) return;  // it failed: Ran said so, and R12.3 counted it
  // R15.2: the span must still be what was snapshotted, message for message: the same object,
  // or (after the cache reloaded the session) the same id, role and size. Another writer's
  // compaction, a recovery, a reduction or a provider's checkpoint changes that.
  const Transcript& t = c.transcript;
  const std::size_t position = job.cut.position;
  bool same = t.size() >= position;
  for (std::size_t i = 0; same && i < position; ++i) {
    if (t.shared(i) == job.snapshot.shared(i)) continue;
    same = t[i].id == job.snapshot[i].id && t[i].role == job.snapshot[i].role &&
           t.chars(i) == job.snapshot.chars(i);
  }
  if (!same) {
    out.background_discarded = true;
    SayDiscarded(job,
                 "the session changed before it could be swapped in (another writer compacted or "
                 "rewrote it, a call was recovered, or its messages were reduced)");
    return;
  }
  const Attempt a = FinishCompaction(c, sizes, job);
  out.summarizer_calls += a.calls;
  out.summarizer_usage.prompt_tokens += a.usage.prompt_tokens;
  out.summarizer_usage.completion_tokens += a.usage.completion_tokens;
  if (a.kind != AttemptKind::kCommitted) {
    out.background_discarded = true;
    return;
  }
  out.background_swapped = true;
  out.compactions.push_back(job.reason);
  out.summarized_messages += a.outcome.summarized_messages;
  c.overflow_pending = false;  // the request the model refused is gone
}

bool Compactor::Impl::PrepareBackground(const std::string& session, SessionCache& c,
                                        const RequestSizes& sizes, Plan& plan, Prepared& out) {
  std::shared_ptr<BackgroundTask> task;
  bool done = false;
  {
    std::lock_guard<std::mutex> lock(bg_mu);
    auto it = bg_tasks.find(session);
    if (it != bg_tasks.end()) {
      task = it->second;
      done = task->state == BackgroundTask::State::kDone;
      if (done) bg_tasks.erase(it);
    }
  }
  if (task && done) {
    Collect(c, sizes, *task, out);
    task.reset();
  }
  Evaluate(sizes, c, plan);
  if (task) {
    if (!MustWait(plan, c)) {
      out.background_in_flight = true;
      return true;
    }
    out.waited_for_summarizer = true;
    std::shared_ptr<BackgroundTask> finished = WaitForTask(session, task, &out.background_wait_ms);
    if (finished) {
      Collect(c, sizes, *finished, out);
      Evaluate(sizes, c, plan);
    }
  }
  // Start one early: between startAt x the trigger and the trigger, when the request may still
  // go out as it is. At the trigger, step 1 decides (it starts one too unless it must wait).
  if (plan.background_reached && !plan.trigger && config.compaction.auto_compact && !c.paused &&
      !plan.irreducible && plan.summarizer_backoff_ms == 0 &&
      c.background_skipped_at != c.turn_serial && !MustWait(plan, c)) {
    if (StartBackground(session, c, plan)) {
      out.background_started = true;
      out.background_in_flight = true;
      return true;
    }
  }
  return false;
}

}  // namespace v0
}  // namespace recap
