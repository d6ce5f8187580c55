// Background compaction (R15): a compaction started early on a worker thread from a snapshot,
// swapped in by a later Prepare, or discarded when the session changed underneath it.
#include "compactor/compactor_impl.h"

namespace recap {
inline namespace v0 {

Compactor::Impl::~Impl() {
  BackgroundQueue::Stopped stopped =
      background_queue.Stop("the Compactor was destroyed before a Prepare swapped it in");
  // Every compaction_started gets its end.
  for (const auto& task : stopped.never_ran) {
    task->job.error = Status::Cancelled(
        "compaction was cancelled: the Compactor was destroyed before a "
        "worker took it");
    SayFailed(task->job);
  }
  for (const auto& task : stopped.never_swapped) {
    SayDiscarded(task->job, "the Compactor was destroyed before a Prepare swapped it in");
  }
}

std::chrono::milliseconds Compactor::Impl::MaxWait() const {
  return std::chrono::milliseconds(std::min<std::size_t>(config.compaction.background.max_wait_ms,
                                                         std::size_t{24} * 3600 * 1000));
}

void Compactor::Impl::RunTask(const std::shared_ptr<BackgroundTask>& task) {
  // The summarizer, plugin hooks and event sinks it runs may not call this Compactor back.
  internal::CallScope scope(this);
  SummarizeJob(task->job, task->cancel.Token());
  // Read before Ran marks it done: from then on a Prepare holding the session may take it.
  const std::string session = task->job.session;
  const bool ok = task->job.summary.has_value();
  Ran(*task);
  if (ok) SwapWhenReady(session, task);
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

// The end of a background task's summarizer work, reported before the task is marked done:
// the next Prepare of its session (which waits for "done") sees its events in order.
void Compactor::Impl::Ran(BackgroundTask& task) {
  const BackgroundQueue::Fate before = background_queue.BeforeReport(task);
  const bool ok = task.job.summary.has_value();
  if (before.abandoned && (ok || !before.stopping)) {
    SayDiscarded(task.job, before.why);
  } else if (!ok) {
    SayFailed(task.job);  // a failure, or the cancellation of a Compactor going away
  }
  const BackgroundQueue::Fate after = background_queue.MarkDone(task);
  // Given up while the lines above ran: its good result is not going to be swapped in.
  if (!before.abandoned && after.abandoned && ok) SayDiscarded(task.job, after.why);
}

bool Compactor::Impl::SummarizerAvailable(const Plan& plan) const {
  return plan.summarizer_backoff_ms == 0 || config.compaction.fallback == Fallback::kOffline;
}

bool Compactor::Impl::MustWait(const Plan& plan, const SessionCache& c) const {
  const std::size_t window = plan.window_tokens ? *plan.window_tokens : FallbackWindow();
  return c.overflow_pending() || plan.reducible_chars > config.limits.max_context_chars ||
         plan.full_tokens >= window;
}

bool Compactor::Impl::StartBackground(const std::string& session, SessionCache& c,
                                      const RequestSizes& sizes, const Plan& plan) {
  auto task = std::make_shared<BackgroundTask>();
  task->sizes = sizes;
  const Attempt begun = BeginCompaction(session, c, plan, CompactionReason::kAuto, CutMode::kNormal,
                                        {}, /*background=*/true, task->job);
  if (begun.kind != AttemptKind::kNone) {
    c.BackgroundFoundNothing();
    return false;
  }
  const std::size_t messages = task->job.replaced_ids.size();  // the worker may change it
  background_queue.Start(session, std::move(task));
  RECAP_LOG_DEBUG("session {}: compaction of {} messages started in the background", session,
                  messages);
  return true;
}

std::shared_ptr<BackgroundTask> Compactor::Impl::AbandonTask(const std::string& session,
                                                             const std::string& why) {
  BackgroundQueue::Abandoned given_up = background_queue.Abandon(session, why);
  if (given_up.discarded) SayDiscarded(given_up.discarded->job, why);
  return given_up.running;
}

void Compactor::Impl::Collect(SessionCache& c, const RequestSizes& sizes, BackgroundTask& task,
                              Prepared& out) {
  CompactionJob& job = task.job;
  if (!job.summary) return;  // it failed: Ran said so, and R12.3 counted it
  // R15.2: the span must still be what was snapshotted, message for message: the same object,
  // or (after the cache reloaded the session) the same id, role and size. Another writer's
  // compaction, a recovery, a reduction or a provider's checkpoint changes that.
  const Transcript& t = c.transcript();
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
    // A conflict is another writer's change (compaction_discarded); any other refusal of the
    // store is a failure (compaction_failed).
    out.background_discarded = a.error.code() == StatusCode::kConflict;
    return;
  }
  out.background_swapped = true;
  out.compactions.push_back(job.reason);
  out.summarized_messages += a.outcome.summarized_messages;
  c.OverflowHandled();  // the request the model refused is gone
  // R2.5, as for a compaction in Prepare.
  c.CountProgress(a.before_full, a.after_full);
  // Not again before the conversation has grown by a tenth of the trigger: a checkpoint that
  // leaves the request above startAt x the trigger would otherwise start one every turn.
  const std::size_t trigger = std::min(job.kept_limit * 2, config.limits.max_context_chars);
  c.RestBackground(trigger);
}

void Compactor::Impl::SwapWhenReady(const std::string& session,
                                    const std::shared_ptr<BackgroundTask>& task) {
  if (!background_queue.IsCurrent(session, task)) return;
  // Every call that takes a task (Prepare, Compact, Recover) holds the session's lock, so the
  // check below and the swap are one step for them. A Prepare that holds it now (waiting for
  // this task, or running beside it) collects it itself, or leaves it to this worker.
  SessionTable::Use cache = sessions.Get(session);
  SessionCache& c = *cache;
  std::lock_guard<std::mutex> session_lock(c.mu);
  const Status synced = Sync(session, c);
  if (!synced.ok()) {
    // The next Prepare syncs again and collects it, or reports the store's error itself.
    RECAP_LOG_DEBUG("session {}: a finished background compaction waits for the next Prepare: {}",
                    session, synced.message());
    return;
  }
  if (!background_queue.Claim(session, task)) return;
  SessionCache::BackgroundReport report;
  if (std::optional<SessionCache::BackgroundReport> kept = c.TakeBackgroundReport()) {
    report = std::move(*kept);
  }
  const std::size_t chars_before = c.transcript().chars();
  Collect(c, task->sizes, *task, report.prepared);
  if (report.prepared.background_swapped && chars_before > c.transcript().chars()) {
    report.removed_chars += chars_before - c.transcript().chars();
  }
  c.KeepBackgroundReport(std::move(report));
}

bool Compactor::Impl::PrepareBackground(const std::string& session, SessionCache& c,
                                        const RequestSizes& sizes, const CancellationToken& cancel,
                                        Plan& plan, Prepared& out) {
  const BackgroundQueue::Look found = background_queue.TakeIfDone(session);
  std::shared_ptr<BackgroundTask> task = found.task;
  if (std::optional<SessionCache::BackgroundReport> report = c.TakeBackgroundReport()) {
    // A worker swapped it in (or discarded it) since the last Prepare: this call reports it.
    const Prepared& r = report->prepared;
    out.background_swapped = out.background_swapped || r.background_swapped;
    out.background_discarded = out.background_discarded || r.background_discarded;
    out.compactions.insert(out.compactions.end(), r.compactions.begin(), r.compactions.end());
    out.summarized_messages += r.summarized_messages;
    out.summarizer_calls += r.summarizer_calls;
    out.summarizer_usage.prompt_tokens += r.summarizer_usage.prompt_tokens;
    out.summarizer_usage.completion_tokens += r.summarizer_usage.completion_tokens;
  }
  if (task && found.done) {
    if (!found.abandoned) Collect(c, sizes, *task, out);
    task.reset();
  }
  Evaluate(sizes, c, plan);
  if (task) {
    if (!MustWait(plan, c)) {
      out.background_in_flight = true;
      return true;
    }
    out.waited_for_summarizer = true;
    RECAP_LOG_DEBUG("session {}: Prepare waits for the background compaction in flight", session);
    bool finished = background_queue.Wait(task, MaxWait(), cancel, &out.background_wait_ms);
    if (!finished && !cancel.IsCancelled()) {
      // R15.3: bounded. Given up and cancelled; a summarizer that honours its token ends at
      // once, and then this Prepare compacts itself.
      AbandonTask(session, "a Prepare waited compaction.background.maxWaitMs (" +
                               std::to_string(config.compaction.background.max_wait_ms) +
                               " ms) for it and went on without it");
      RECAP_LOG_WARN(
          "session {}: the background compaction did not finish within {} ms; Prepare goes "
          "on without it",
          session, config.compaction.background.max_wait_ms);
      finished = background_queue.Wait(task, std::chrono::milliseconds(200), cancel,
                                       &out.background_wait_ms);
    }
    if (!finished) {
      // Still running (its summarizer ignores cancellation, or the caller cancelled): no
      // second compaction beside it.
      out.background_in_flight = true;
      return true;
    }
    background_queue.Forget(session, task);
    if (!background_queue.IsAbandoned(*task)) Collect(c, sizes, *task, out);
    Evaluate(sizes, c, plan);
  }
  // Start one early: between startAt x the trigger and the trigger, when the request may still
  // go out as it is. At the trigger, step 1 decides (it starts one too unless it must wait).
  if (plan.background_reached && !plan.trigger && config.compaction.auto_compact && !c.paused() &&
      !plan.irreducible && SummarizerAvailable(plan) && !c.background_skipped_this_turn() &&
      !c.background_resting() && !MustWait(plan, c)) {
    if (StartBackground(session, c, sizes, plan)) {
      out.background_started = true;
      out.background_in_flight = true;
      return true;
    }
  }
  return false;
}

}  // namespace v0
}  // namespace recap
