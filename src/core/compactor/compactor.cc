#include "recap/compactor.h"

#include "compactor/compactor_impl.h"
#include "recap_internal/store_rules.h"

namespace recap {
inline namespace v0 {
namespace {

// A compaction whose commit the store refused because another writer committed to the session
// since this call read it (kConflict): nothing of it was stored.
bool LostToAnotherWriter(const Attempt& a) {
  return a.kind == AttemptKind::kFailed && a.error.code() == StatusCode::kConflict;
}

}  // namespace

const char* CompactionReasonName(CompactionReason reason) noexcept {
  switch (reason) {
    case CompactionReason::kAuto: return "auto";
    case CompactionReason::kManual: return "manual";
    case CompactionReason::kBudget: return "budget";
    case CompactionReason::kOverflow: return "overflow";
  }
  return "auto";
}

Status Compactor::Impl::Reentered(const std::string& call, const std::string& session) {
  return Status::FailedPrecondition(
      call + " for session " + internal::QuotedName(session) +
      " was called from inside a callback that the same compactor is running on this thread (its "
      "summarizer, an event sink or a plugin hook): the call running the callback holds its "
      "session, so this one would wait for it forever. Nothing was done; make the call after "
      "that call has returned");
}

Compactor::Impl::Impl(Config c, std::shared_ptr<Provider> p, std::shared_ptr<SessionStore> s,
                      std::vector<std::shared_ptr<PluginHook>> hooks,
                      std::vector<std::shared_ptr<EventSink>> sinks,
                      std::shared_ptr<TimeSource> time)
    : config(c),
      provider(std::move(p)),
      offline(NewOfflineSummarizer()),
      store(std::move(s)),
      plugins(std::move(hooks)),
      clock(time ? std::move(time) : SteadyTimeSource()),
      events(std::move(sinks)),
      sessions(config.cache.max_bytes),
      window_source(provider, clock),
      breaker(clock),
      background_queue(static_cast<std::size_t>(config.compaction.background.workers),
                       [this](const std::shared_ptr<BackgroundTask>& task) { RunTask(task); }) {}

Compactor::Compactor(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Compactor::~Compactor() = default;

Result<std::unique_ptr<Compactor>> Compactor::Create(
    Config config, std::shared_ptr<Provider> provider, std::shared_ptr<SessionStore> store,
    std::vector<std::shared_ptr<PluginHook>> plugins, std::vector<std::shared_ptr<EventSink>> sinks,
    std::shared_ptr<TimeSource> time) {
  Status valid = config.Validate();
  RECAP_RETURN_IF_ERROR(valid);
  for (const auto& p : plugins) {
    if (!p) return Status::InvalidArgument("Compactor::Create: a plugin is null");
  }
  for (const auto& s : sinks) {
    if (!s) return Status::InvalidArgument("Compactor::Create: an event sink is null");
  }
  if (!provider) provider = NewOfflineSummarizer();
  if (!store) store = NewInMemorySessionStore();
  auto impl = std::make_unique<Impl>(config, std::move(provider), std::move(store),
                                     std::move(plugins), std::move(sinks), std::move(time));
  return std::unique_ptr<Compactor>(new Compactor(std::move(impl)));
}

// Compactor::Prepare, once, in the order of SPEC §8 (R7). kConflict when another writer
// committed between its read and its write (the session is then read again at the next call).
Result<Prepared> Compactor::Impl::PrepareOnce(const std::string& session, const RequestSizes& sizes,
                                              const CancellationToken& cancel) {
  SessionTable::Use cache = sessions.Get(session);
  SessionCache& c = *cache;
  std::lock_guard<std::mutex> lock(c.mu);
  RECAP_RETURN_IF_ERROR(Sync(session, c));
  if (c.version() == 0) {
    // Never written: a typo in the id would otherwise send an empty conversation.
    return Status::NotFound("session " + internal::QuotedName(session) +
                            " has no messages in the store: append its first messages before "
                            "preparing it (or check the session id)");
  }
  PrepareRun run{session, sizes, cancel};
  Survey(c, run);
  RECAP_RETURN_IF_ERROR(CompactAtTrigger(c, run));  // step 1
  RECAP_RETURN_IF_ERROR(ReduceToLimit(c, run));     // step 2
  RECAP_RETURN_IF_ERROR(CompactForBudget(c, run));  // step 3
  for (const Attempt& a : run.attempts) {
    if (a.calls > 0) run.out.waited_for_summarizer = true;
    if (a.kind == AttemptKind::kCommitted) {
      run.out.summarized_messages += a.outcome.summarized_messages;
    }
    run.out.summarizer_calls += a.calls;
    run.out.summarizer_usage.prompt_tokens += a.usage.prompt_tokens;
    run.out.summarizer_usage.completion_tokens += a.usage.completion_tokens;
  }
  SaveLearned(session, c);
  // Step 4: fail with what happened and what to do; the reductions above stay persisted.
  if (run.Reducible(c) > config.limits.max_context_chars) {
    return BudgetError(run.Reducible(c), sizes, run.attempts, run.reduced_first,
                       run.out.reduced_messages, run.budget_tried_before,
                       StoredInstructionsChars(c.transcript()));
  }
  return Handed(c, run);
}

void Compactor::Impl::Survey(SessionCache& c, PrepareRun& run) {
  Prepared& out = run.out;
  Plan& plan = run.plan;
  out.provider_retired_messages = AdoptProviderCheckpoint(run.session, c);
  // R15: a background compaction is swapped in, waited for, or started first.
  const bool background = config.compaction.background.enabled;
  // The request's size before this call's swap, or the worker's since the last call.
  const std::size_t reducible_before = run.Reducible(c) + c.background_removed_chars();
  if (background) {
    run.in_flight = PrepareBackground(run.session, c, run.sizes, run.cancel, plan, out);
  } else {
    Evaluate(run.sizes, c, plan);
  }
  run.evaluated_version = c.version();
  SayWindowUnknown(run.session, c, plan);
  out.before_chars = plan.reducible_chars;
  out.before_tokens = plan.full_tokens;
  if (out.background_swapped) {
    // The sizes before the swap this call made.
    out.before_chars = reducible_before;
    out.before_tokens = EstimateTokens(reducible_before + run.sizes.tool_catalog_chars);
  }
  out.window_tokens = plan.window_tokens;
  out.window_source = plan.window_source;
  out.fallback_window_tokens = FallbackWindow();
  out.trigger_rule = plan.rule;
  // R12.4: the no-progress pause lifts once the transcript has grown by a tenth of the
  // trigger since it began, not only at a new turn.
  c.LiftPauseAfterGrowth(std::min(plan.trigger_tokens * 4, plan.trigger_chars));
  if (!plan.irreducible) c.IrreducibleGone();
}

void Compactor::Impl::Skip(PrepareRun& run, SkipReason reason, bool say) {
  Attempt& a = run.attempts.emplace_back();
  a.kind = AttemptKind::kSkipped;
  a.skip = reason;
  if (say) {
    events.Emit(EventType::kCompactionSkipped, run.session,
                internal::CompactionSkippedFields(SkipReasonName(reason)));
  }
}

Status Compactor::Impl::CompactAtTrigger(SessionCache& c, PrepareRun& run) {
  Plan& plan = run.plan;
  // One gate, `auto`, for every trigger.
  if (!config.compaction.auto_compact) {
    run.attempts.emplace_back().kind = AttemptKind::kDisabled;
    return Status::OK();
  }
  if (!plan.trigger) return Status::OK();
  if (run.in_flight) {
    // R15.3: a compaction in the background is this step's for as long as the request may go
    // out as it is; when it waited for one that did not end, no second one beside it.
    if (run.out.background_wait_ms > 0) Skip(run, SkipReason::kBackgroundRunning, true);
    return Status::OK();
  }
  if (c.paused() && plan.reason != CompactionReason::kOverflow) {
    Skip(run, SkipReason::kNoProgress, true);  // R2.5
    return Status::OK();
  }
  if (plan.irreducible) {
    // R12.4: instructions and catalog alone reach the trigger; no compaction can help. Said
    // once for each size of them.
    const std::pair<std::size_t, std::size_t> fixed{run.sizes.instructions_chars,
                                                    run.sizes.tool_catalog_chars};
    Skip(run, SkipReason::kIrreducible, c.SayIrreducibleFor(fixed));
    c.OverflowHandled();
    return Status::OK();
  }
  c.OverflowHandled();
  // R14.3: the cheap tier first; when it brings the request under the trigger, no summarizer
  // is called. Not for an overflow, which the model has already refused.
  if (config.compaction.clear_tool_results.enabled && plan.reason == CompactionReason::kAuto) {
    run.out.cleared_tool_result_messages = ClearToolResults(run.session, c);
    if (run.out.cleared_tool_result_messages > 0) {
      Evaluate(run.sizes, c, plan);
      if (!(plan.trigger && plan.reason.has_value())) return Status::OK();
    }
  }
  // R15.1: with background on, the summarizer runs on a worker unless the request cannot go
  // out as it is.
  if (config.compaction.background.enabled && plan.reason == CompactionReason::kAuto &&
      SummarizerAvailable(plan) && !MustWait(plan, c) &&
      StartBackground(run.session, c, run.sizes, plan)) {
    run.out.background_started = true;
    run.out.background_in_flight = true;
    return Status::OK();
  }
  Attempt& a = run.attempts.emplace_back(RunCompaction(
      run.session, c, run.sizes, plan, *plan.reason, CutMode::kNormal, {}, run.cancel));
  // R8.2: another writer committed since this call read the session. Nothing of the
  // compaction is stored; Prepare reads the session again and decides again.
  if (LostToAnotherWriter(a)) return a.error;
  if (a.kind == AttemptKind::kCommitted) {
    run.out.compactions.push_back(*plan.reason);
    c.CountProgress(a.before_full, a.after_full);  // R2.5
  }
  return Status::OK();
}

Status Compactor::Impl::ReduceToLimit(SessionCache& c, PrepareRun& run) {
  if (run.Reducible(c) <= config.limits.max_context_chars) return Status::OK();
  RECAP_RETURN_IF_ERROR(RunReduction(run.session, c, run.sizes, &run.out.reduced_messages));
  run.reduced_first = run.out.reduced_messages;
  return Status::OK();
}

Status Compactor::Impl::CompactForBudget(SessionCache& c, PrepareRun& run) {
  const std::size_t limit = config.limits.max_context_chars;
  if (run.Reducible(c) <= limit || !config.compaction.auto_compact ||
      run.out.background_in_flight) {
    return Status::OK();
  }
  if (!c.TryBudgetThisTurn()) {
    run.budget_tried_before = true;  // once per turn
    return Status::OK();
  }
  // The plan of step 1 still describes the session unless a commit since changed it.
  Plan now = run.plan;
  if (c.version() != run.evaluated_version) Evaluate(run.sizes, c, now);
  Attempt& a = run.attempts.emplace_back(RunCompaction(
      run.session, c, run.sizes, now, CompactionReason::kBudget, CutMode::kBudget, {}, run.cancel));
  a.budget_step = true;
  if (LostToAnotherWriter(a)) return a.error;
  if (a.kind == AttemptKind::kCommitted) run.out.compactions.push_back(CompactionReason::kBudget);
  if (run.Reducible(c) > limit) {
    RECAP_RETURN_IF_ERROR(RunReduction(run.session, c, run.sizes, &run.out.reduced_messages));
  }
  return Status::OK();
}

Prepared Compactor::Impl::Handed(SessionCache& c, PrepareRun& run) {
  Prepared& out = run.out;
  const std::string& session = run.session;
  out.messages = c.transcript();
  out.version = c.version();
  out.after_chars = run.Reducible(c);
  out.after_tokens = EstimateTokens(out.after_chars + run.sizes.tool_catalog_chars);
  out.over_window = out.window_tokens && out.after_tokens > *out.window_tokens;
  if (out.over_window) {
    RECAP_LOG_WARN(
        "session {}: the request is ~{} tokens, over the model's window of {} tokens ({}); "
        "instructions {} and tool catalog {} characters",
        internal::QuotedName(session), out.after_tokens, *out.window_tokens, out.window_source,
        run.sizes.instructions_chars, run.sizes.tool_catalog_chars);
  }
  // A result whose call is not before it (appended without its call, or after it): the model
  // APIs refuse such a request. The transcript's pairing facts settle it without a scan unless
  // they are unsure (Transcript::Pairing::kUnknown, which an orphan makes them).
  if (c.transcript().pairing() == Transcript::Pairing::kUnknown) {
    for (const OrphanResult& o : AnalyzePairing(c.transcript()).orphans) {
      out.orphan_results.push_back(o.call_id);
    }
    if (!out.orphan_results.empty()) {
      RECAP_LOG_WARN(
          "session {}: {} tool result(s) answer no call before them (first: call id {}); the "
          "model API will refuse the request",
          internal::QuotedName(session), out.orphan_results.size(),
          internal::QuotedName(out.orphan_results.front()));
    }
  }
  c.Handed(out.after_tokens);
  return std::move(out);
}

Result<Prepared> Compactor::Prepare(const std::string& session, const RequestSizes& sizes,
                                    const CancellationToken& cancel) {
  if (internal::CallScope::Inside(impl_.get())) return Impl::Reentered("Prepare", session);
  internal::CallScope scope(impl_.get());
  // Another writer — another host of the fleet, another Compactor's background swap — may
  // commit between this call's read of the session and its own write; the store then refuses
  // the write (kConflict) and nothing of it is stored. The call reads the session again and
  // decides again, up to three times in all.
  for (int attempt = 1;; ++attempt) {
    Result<Prepared> prepared = impl_->PrepareOnce(session, sizes, cancel);
    if (prepared.ok() || prepared.status().code() != StatusCode::kConflict ||
        cancel.IsCancelled()) {
      return prepared;
    }
    if (attempt == 3) {
      return Status::Conflict(
          "another writer changed session " + internal::QuotedName(session) +
          " during each of Prepare's 3 tries to write it (last: " + prepared.status().message() +
          "). What was stored is intact; call Prepare again once the other writer is done");
    }
    RECAP_LOG_INFO("session {}: another writer changed it during Prepare; reading it again ({})",
                   session, prepared.status().message());
  }
}

Result<Plan> Compactor::PlanFor(const std::string& session, const RequestSizes& sizes) {
  if (internal::CallScope::Inside(impl_.get())) return Impl::Reentered("Plan", session);
  internal::CallScope scope(impl_.get());
  SessionTable::Use cache = impl_->sessions.Get(session);
  SessionCache& c = *cache;
  std::lock_guard<std::mutex> lock(c.mu);
  RECAP_RETURN_IF_ERROR(impl_->Sync(session, c));
  Plan plan;
  // R14.1: judged on the transcript as Prepare will have it once a provider's checkpoint has
  // retired what precedes it; the cache gets its own transcript back before returning.
  std::optional<Transcript> held;
  if (c.provider_checkpoint_pending()) {
    if (const auto at = RetirableProviderCheckpoint(c.transcript())) {
      std::size_t retired = 0;
      for (std::size_t i = 0; i < *at; ++i) retired += KeptByCompaction(c.transcript(), i) ? 0 : 1;
      plan.provider_retired_messages = retired;
      held = c.Substitute(Impl::AfterProviderCheckpoint(c.transcript(), *at));
    }
  }
  impl_->Evaluate(sizes, c, plan);
  if (impl_->config.compaction.background.enabled) {
    const BackgroundQueue::Look task = impl_->background_queue.Find(session);
    if (task.task) {
      plan.background_ready = task.done && task.task->job.summary.has_value();
      plan.background_in_flight = !task.done;
    }
  }
  CutOptions options;
  options.keep_turns = impl_->config.compaction.keep_turns;
  options.kept_chars_limit = impl_->KeptLimit(plan);
  plan.cut = FindCut(c.transcript(), options);
  // R14.3: what clearing would do, and whether that alone would bring the request under the
  // trigger (judged on the cleared transcript, which is then put back).
  if (impl_->config.compaction.clear_tool_results.enabled) {
    Impl::Clearing clearing = impl_->PlanClearing(c.transcript());
    plan.clearable_results = clearing.results;
    plan.clearable_messages = clearing.replacements.size();
    plan.clearable_chars = clearing.freed_chars;
    plan.would_clear =
        plan.trigger && plan.reason == CompactionReason::kAuto && !plan.paused &&
        !plan.irreducible && plan.auto_enabled && !clearing.replacements.empty() &&
        clearing.freed_chars >= impl_->config.compaction.clear_tool_results.min_free_chars;
    if (plan.would_clear) {
      Transcript cleared_transcript = c.transcript();
      cleared_transcript.Set(std::move(clearing.replacements));
      const Transcript before = c.Substitute(std::move(cleared_transcript));
      Plan cleared;
      impl_->Evaluate(sizes, c, cleared);
      plan.clearing_suffices = !cleared.trigger;
      c.Restore(before);
    }
  }
  if (plan.cut.ok()) {
    // The checkpoint's size is not known before the model writes it; estimate it as a
    // twentieth of what it replaces, within the summarizer's output budget.
    const std::size_t checkpoint_estimate =
        std::min(plan.cut.summarized_chars,
                 std::min<std::size_t>(2000 + plan.cut.summarized_chars / 20,
                                       impl_->config.compaction.max_output_tokens * 4));
    plan.estimated_after_chars =
        sizes.instructions_chars + checkpoint_estimate + plan.cut.kept_chars;
    // R17.3: the ledger a compaction now would guard (its span: what the cut summarizes, the
    // instructions and pinned messages aside).
    if (impl_->config.compaction.ledger.enabled) {
      const Transcript& t = c.transcript();
      Transcript span;
      for (std::size_t i = 0; i < plan.cut.position && i < t.size(); ++i) {
        if (!KeptByCompaction(t, i)) internal::TranscriptAccess::AppendFrom(span, t, i);
      }
      plan.ledger = BuildLedger(span, 0, span.size(), impl_->CarriedLedger(session, c, span),
                                impl_->LedgerBound());
    }
  } else {
    plan.estimated_after_chars = plan.reducible_chars;
  }
  plan.would_reduce = plan.estimated_after_chars > impl_->config.limits.max_context_chars;
  if (held) c.Restore(std::move(*held));
  return plan;
}

Result<CompactOutcome> Compactor::Compact(const std::string& session, const CompactOptions& options,
                                          const CancellationToken& cancel) {
  if (internal::CallScope::Inside(impl_.get())) return Impl::Reentered("Compact", session);
  internal::CallScope scope(impl_.get());
  SessionTable::Use cache = impl_->sessions.Get(session);
  SessionCache& c = *cache;
  std::lock_guard<std::mutex> lock(c.mu);
  RECAP_RETURN_IF_ERROR(impl_->Sync(session, c));
  // R15.3: one compaction at a time; the host's own replaces one running in the background,
  // once that has stopped.
  if (impl_->config.compaction.background.enabled) {
    if (auto running = impl_->AbandonTask(session, "a manual compaction replaced it")) {
      const std::size_t max_wait = impl_->config.compaction.background.max_wait_ms;
      if (!impl_->background_queue.Wait(running, impl_->MaxWait(), cancel, nullptr)) {
        if (cancel.IsCancelled()) return Status::Cancelled("compaction was cancelled");
        return Status::Unavailable(
            "session " + internal::QuotedName(session) +
            ": a compaction of it running in the background was cancelled and has not stopped "
            "within compaction.background.maxWaitMs (" +
            std::to_string(max_wait) +
            " ms; its summarizer does not answer). Nothing was changed; compact again later.");
      }
      impl_->background_queue.Forget(session, running);
    }
  }
  const std::size_t retired = impl_->AdoptProviderCheckpoint(session, c);
  Plan plan;
  impl_->Evaluate(options.sizes, c, plan);
  Attempt a = impl_->RunCompaction(session, c, options.sizes, plan, CompactionReason::kManual,
                                   CutMode::kNormal, options.focus, cancel);
  a.outcome.provider_retired_messages = retired;
  impl_->SaveLearned(session, c);
  if (a.kind == AttemptKind::kFailed) return a.error;
  a.outcome.version = c.version();
  if (a.kind == AttemptKind::kSkipped) {
    a.outcome.before_chars = a.outcome.after_chars = c.transcript().chars();
  }
  return a.outcome;
}

void Compactor::ReportOverflow(const std::string& session,
                               std::optional<std::size_t> rejected_tokens) {
  if (internal::CallScope::Inside(impl_.get())) {
    RECAP_LOG_WARN("{}", Impl::Reentered("ReportOverflow", session).message());
    return;
  }
  internal::CallScope scope(impl_.get());
  SessionTable::Use cache = impl_->sessions.Get(session);
  SessionCache& c = *cache;
  std::lock_guard<std::mutex> lock(c.mu);
  // What the store knows first (another host may have learned something), then this; a store
  // that cannot be read now still gets the report in memory.
  (void)impl_->Sync(session, c);
  c.OverflowReported(rejected_tokens);
  impl_->SaveLearned(session, c);
}

void Compactor::ReportPromptTokens(const std::string& session, std::size_t prompt_tokens) {
  if (internal::CallScope::Inside(impl_.get())) {
    RECAP_LOG_WARN("{}", Impl::Reentered("ReportPromptTokens", session).message());
    return;
  }
  internal::CallScope scope(impl_.get());
  SessionTable::Use cache = impl_->sessions.Get(session);
  SessionCache& c = *cache;
  std::lock_guard<std::mutex> lock(c.mu);
  (void)impl_->Sync(session, c);
  if (!c.PromptTokensReported(prompt_tokens)) {
    // The request it counted was compacted or rewritten since (a background swap, a manual
    // compaction, another writer): the next Prepare judges its own on estimates.
    RECAP_LOG_DEBUG("session {}: a token count for a transcript rewritten since was ignored",
                    session);
    return;
  }
  // Kept in the store only when calibration uses it (R2.4): otherwise it is never read.
  if (impl_->config.compaction.calibrate) impl_->SaveLearned(session, c);
}

Result<RecoveryOutcome> Compactor::Recover(const std::string& session, bool acknowledge) {
  if (internal::CallScope::Inside(impl_.get())) return Impl::Reentered("Recover", session);
  internal::CallScope scope(impl_.get());
  SessionTable::Use cache = impl_->sessions.Get(session);
  SessionCache& c = *cache;
  std::lock_guard<std::mutex> lock(c.mu);
  RECAP_RETURN_IF_ERROR(impl_->Sync(session, c));
  RecoveryOutcome out;
  out.version = c.version();
  const Transcript& t = c.transcript();
  std::vector<UncertainCall> uncertain = FindUncertainToolCalls(t);
  if (uncertain.empty()) return out;

  if (!acknowledge) {
    std::string list;
    for (std::size_t k = 0; k < uncertain.size() && k < 5; ++k) {
      if (k) list += ", ";
      list += uncertain[k].call_id;
      if (!uncertain[k].name.empty()) list += " (" + uncertain[k].name + ")";
    }
    if (uncertain.size() > 5) list += ", and " + std::to_string(uncertain.size() - 5) + " more";
    return Status::FailedPrecondition(
        "session " + internal::QuotedName(session) + " has " + std::to_string(uncertain.size()) +
        " tool call(s) with no recorded result: " + list +
        ". recap never re-runs a tool. Check what these calls did, then recover with "
        "acknowledgement (Compactor::Recover(session, true), or `recap sessions recover " +
        session + " --acknowledge`); each missing result is then recorded as unknown.");
  }

  // Results are written the way this transcript writes them: as `tool` messages, or as user
  // messages carrying tool results (Anthropic style).
  bool user_style = false;
  for (const Message& m : t) {
    if (m.role == Role::kUser && IsResultOnly(m)) user_style = true;
    if (m.role == Role::kTool) {
      user_style = false;
      break;
    }
  }
  RecoveryCommit commit;
  commit.expected_version = c.version();
  for (const UncertainCall& u : uncertain) {
    // After the call's message and the results already given to its siblings.
    std::size_t after = u.message;
    while (after + 1 < t.size() && IsResultOnly(t[after + 1])) ++after;
    ToolResult r;
    r.call_id = u.call_id;
    r.is_error = true;
    r.content.emplace_back(
        Text{"Outcome unknown: the session stopped before this tool call's result was recorded. "
             "The call was not repeated. Check its effects before relying on it.",
             {}});
    Message m;
    m.role = user_style ? Role::kUser : Role::kTool;
    m.id = NewMessageId();
    m.parts.emplace_back(std::move(r));
    commit.results.push_back({t[after].id, std::move(m)});
  }
  // A result answers the newest call of its id, so a call that shares its id with a later
  // call (the same message asking twice, as data stored before stores refused it may) cannot
  // be answered by any result recap records: the recovery would report success while the call
  // stays open, and compaction would stay refused. Check the transcript as it would be, and
  // record nothing unless every call gets its answer.
  {
    std::unordered_map<std::string, std::vector<std::size_t>> after_id;  // anchor -> results
    for (std::size_t k = 0; k < commit.results.size(); ++k) {
      after_id[commit.results[k].after].push_back(k);
    }
    Transcript would_be;
    for (const Message& m : t) {
      would_be.Append(m);
      auto it = after_id.find(m.id);
      if (it == after_id.end()) continue;
      for (std::size_t k : it->second) would_be.Append(commit.results[k].result);
    }
    const std::vector<UncertainCall> still = FindUncertainToolCalls(would_be);
    if (!still.empty()) {
      std::string list;
      for (std::size_t k = 0; k < still.size() && k < 5; ++k) {
        list += (k ? ", " : "") + std::string("\"") + still[k].call_id + "\" in message " +
                std::to_string(still[k].message);
      }
      if (still.size() > 5) list += ", and " + std::to_string(still.size() - 5) + " more";
      return Status::FailedPrecondition(
          "session " + internal::QuotedName(session) +
          " cannot be recovered by recording results: " + std::to_string(still.size()) +
          " tool call(s) share their id with a later call (" + list +
          "), so a recorded result would answer the later call and these would stay "
          "open. Nothing was recorded. The session's messages need distinct call ids: store a "
          "corrected copy as a new session");
    }
  }
  // R15.2: a recovery changes the session under a compaction running in the background.
  if (impl_->config.compaction.background.enabled) {
    impl_->AbandonTask(session, "a call was recovered");
  }
  auto committed = impl_->store->CommitRecovery(session, commit);
  if (!committed.ok()) {
    if (committed.status().code() == StatusCode::kConflict) c.Invalidate();
    return committed.status().WithContext("could not save the recovery");
  }
  c.Invalidate();  // positions moved: reload the whole transcript once
  RECAP_RETURN_IF_ERROR(impl_->Sync(session, c));
  out.recovered = std::move(uncertain);
  out.version = c.version();
  return out;
}

const Config& Compactor::config() const noexcept { return impl_->config; }

Compactor::CacheStats Compactor::cache_stats() const {
  const auto [sessions, bytes] = impl_->sessions.Figures();
  return CacheStats{sessions, bytes, impl_->config.cache.max_bytes};
}
SessionStore& Compactor::store() noexcept { return *impl_->store; }

}  // namespace v0
}  // namespace recap
