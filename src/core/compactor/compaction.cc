// One compaction (R3, R4, R5, R7.1, R12.7): the cut, the plugins, the summarizer with its
// fallback and back-off, the checkpoint fitted to half the trigger, the commit and the events.
#include "checkpoint/ledger.h"
#include "compactor/compactor_impl.h"
#include "recall/recall_render.h"

namespace recap {
inline namespace v0 {

Result<internal::SummarizeOutput> Compactor::Impl::RunSummarizer(
    Provider& p, const internal::SummarizeInput& in, const CompactionJob& job,
    const CancellationToken& cancel) const {
  auto progress = [&](int chunk, int chunks) {
    events.Emit(EventType::kCompactionProgress, job.session,
                Fields(job, internal::CompactionProgressFields(chunk, chunks)));
  };
  // A host's Provider may throw despite its contract; that must not take the session
  // down with it, so it becomes an ordinary failed compaction.
  try {
    if (p.WritesNativeCheckpoints()) return RunNative(p, in, cancel);
    return internal::Summarize(p, in, cancel, progress);
  } catch (const std::exception& e) {
    return Status::Internal("the summarizer (" + p.Name() + ") threw an exception: " + e.what());
  } catch (...) {
    return Status::Internal("the summarizer (" + p.Name() + ") threw a non-standard exception");
  }
}

// R14.2: the provider compacts the span on its servers; its artifact is the checkpoint.
Result<internal::SummarizeOutput> Compactor::Impl::RunNative(Provider& p,
                                                             const internal::SummarizeInput& in,
                                                             const CancellationToken& cancel) {
  const std::string context = "summarizer (" + p.Name() + ")";
  if (cancel.IsCancelled()) return Status::Cancelled("compaction was cancelled");
  NativeCompactionRequest request;
  request.span = &in.span;
  request.instructions = in.native_instructions;
  request.focus = in.focus;
  request.max_output_tokens = in.max_output_tokens;
  Result<NativeCompaction> got = p.CompactNative(request, cancel);
  if (!got.ok()) {
    if (cancel.IsCancelled()) return Status::Cancelled("compaction was cancelled");
    return got.status().WithContext(context);
  }
  const std::optional<ProviderCheckpoint> artifact = FindProviderCheckpoint(got->checkpoint);
  if (!artifact) {
    return Status::Unavailable(context +
                               ": the reply holds no compaction artifact (an Anthropic "
                               "`compaction` block with content, or an OpenAI `compaction` "
                               "item); nothing was changed");
  }
  internal::SummarizeOutput out;
  out.writer = p.Name();
  out.calls = 1;
  out.usage = got->usage;
  out.parsed.usable = true;
  // What recap can read of it, for the plugins and the outcome: Anthropic's summary text.
  if (artifact->readable()) out.parsed.checkpoint = ParseRenderedCheckpoint(artifact->text);
  out.parsed.checkpoint.structured = false;
  out.native_checkpoint = std::move(got->checkpoint);
  out.native_checkpoint->summary = true;
  return out;
}

// Cuts the summarizer's checkpoint to at most `max_chars` characters as a message (R12.7).
Status Compactor::Impl::FitCheckpoint(internal::SummarizeOutput& summary, std::size_t max_chars,
                                      const std::string& session) const {
  Checkpoint& cp = summary.parsed.checkpoint;
  std::size_t chars = MessageChars(CheckpointMessage(cp));
  if (chars <= max_chars) return Status::OK();
  const std::size_t was = chars;
  const bool fits = internal::ShrinkCheckpoint(cp, [&](const Checkpoint& c) {
    chars = MessageChars(CheckpointMessage(c));
    return chars <= max_chars;
  });
  if (!fits) {
    return Status::ResourceExhausted(
        "The checkpoint the summarizer wrote (" + std::to_string(was) +
        " characters) cannot be made to fit half of the compaction trigger (" +
        std::to_string(max_chars) +
        " characters), even cut to its goal and current state. Raise limits.maxContextChars "
        "(or provider.contextWindow) and compact again.");
  }
  summary.parsed.partial = true;
  RECAP_LOG_WARN(
      "session {}: the checkpoint ({} characters) was cut to {} to stay within half "
      "of the compaction trigger ({})",
      session, was, chars, max_chars);
  return Status::OK();
}

Ledger Compactor::Impl::CarriedLedger(const std::string& session, const SessionCache& c,
                                      const Transcript& span) const {
  bool holds_checkpoint = false;
  for (std::size_t i = 0; i < span.size(); ++i) {
    if (!span[i].summary) continue;
    if (c.ledger() && span.shared(i) == c.ledger_message()) return *c.ledger();
    holds_checkpoint = true;
  }
  if (!holds_checkpoint) return Ledger();
  // After a reload: what every compaction before carried is the ledger of what they retired.
  LedgerBuilder builder(Ledger(), LedgerBound());
  const Status walked = store->ForEachHistoryEntry(session, [&](HistoryEntry&& e) {
    if (e.state != HistoryState::kActive) builder.Read(e.message);
    return Status::OK();
  });
  if (!walked.ok()) {
    RECAP_LOG_WARN(
        "session {}: the ledger of earlier compactions could not be read from the store ({}); "
        "this compaction guards only its own span",
        session, walked.message());
    return Ledger();
  }
  return builder.Finish();
}

Status Compactor::Impl::GuardAndFit(internal::SummarizeOutput& summary, CompactionJob& job) const {
  Checkpoint& cp = summary.parsed.checkpoint;
  // The section never makes the checkpoint larger than what it replaces: a compaction frees
  // room (R3). What does not fit is named in the section's last line, by message.
  // Nor past the checkpoint's cap (R12.7): in a window too small even for the line that says
  // what was left out, the section is dropped (the event still counts what it held).
  constexpr std::size_t kHeading = 20;  // "\n\n## Kept by recap\n"
  const auto guard = [&] {
    cp.kept_by_recap.clear();
    const std::size_t bare = MessageChars(CheckpointMessage(cp));
    std::size_t room = job.summarized_chars > bare ? job.summarized_chars - bare : 0;
    room = std::min(room, job.kept_limit > bare + kHeading ? job.kept_limit - bare - kHeading : 0);
    job.guard =
        GuardCheckpoint(RenderCheckpoint(cp), job.ledger, std::min(job.ledger_max_chars, room),
                        config.compaction.recall_tool);
    cp.kept_by_recap = job.guard.section;
    if (MessageChars(CheckpointMessage(cp)) > job.kept_limit) cp.kept_by_recap.clear();
  };
  if (!job.ledger_on) return FitCheckpoint(summary, job.kept_limit, job.session);
  if (MessageChars(CheckpointMessage(cp)) <= job.kept_limit) {
    guard();
    return Status::OK();
  }
  // Too large already: the summarizer's part is fitted to leave the section its budget (and
  // its heading), then guarded, since fitting may cut what it carried; when even that cannot
  // be, it is fitted to the cap as without the ledger.
  const std::size_t reserve = std::min(job.kept_limit / 2, job.ledger_max_chars + kHeading);
  if (!FitCheckpoint(summary, job.kept_limit - reserve, job.session).ok()) {
    RECAP_RETURN_IF_ERROR(FitCheckpoint(summary, job.kept_limit, job.session));
  }
  guard();
  return Status::OK();
}

// Phase 1 of a compaction: the cut and the span. See CompactionJob.
Attempt Compactor::Impl::BeginCompaction(const std::string& session, const SessionCache& c,
                                         const Plan& plan, CompactionReason reason, CutMode mode,
                                         const std::string& focus, bool background,
                                         CompactionJob& job) {
  Attempt a;
  a.before_full = plan.full_chars;
  const Transcript& t = c.transcript();
  // A background start that finds nothing to do says nothing: Prepare tries again at a later
  // turn, and the trigger's own compaction reports it if it still holds then.
  auto skip = [&](SkipReason why) {
    a.kind = AttemptKind::kSkipped;
    a.skip = why;
    a.outcome.skipped = why;
    if (!background) {
      events.Emit(EventType::kCompactionSkipped, session,
                  internal::CompactionSkippedFields(SkipReasonName(why)));
    }
    return a;
  };
  // R12.3: an automatic compaction leaves a summarizer that keeps failing alone for a while
  // (straight to the offline one when that is the fallback); a manual one always tries.
  job.session = session;
  job.reason = reason;
  job.background = background;
  job.automatic = reason != CompactionReason::kManual;
  const bool backing_off = job.automatic && !IsOffline(*provider) && plan.summarizer_backoff_ms > 0;
  job.offline_instead = backing_off && config.compaction.fallback == Fallback::kOffline;
  if (backing_off && !job.offline_instead) {
    a.skip = SkipReason::kSummarizerUnavailable;
    a.kind = AttemptKind::kSkipped;
    if (!background) {
      events.Emit(EventType::kCompactionSkipped, session,
                  internal::CompactionSkippedFields(SkipReasonName(a.skip)));
    }
    return a;
  }

  CutOptions cut_options;
  cut_options.keep_turns = config.compaction.keep_turns;
  cut_options.mode = mode;
  cut_options.kept_chars_limit = KeptLimit(plan);
  job.cut = FindCut(t, cut_options);
  if (!job.cut.ok()) return skip(job.cut.skip);

  job.snapshot = t;  // shares the messages: a copy of pointers, not of content
  job.version = c.version();
  job.before_full_chars = plan.full_chars;
  job.before_full_tokens = plan.full_tokens;
  job.kept_limit = KeptLimit(plan);
  job.offline_output_tokens = OfflineOutputTokens(plan);
  // R17.2: the guard's section has at most a quarter of the checkpoint's cap (R12.7). The
  // offline summarizer's own budget gives it that room, so that its checkpoint and the section
  // together stay within what the checkpoint alone had (R3.8: compactions stay rare).
  job.ledger_on = config.compaction.ledger.enabled;
  if (job.ledger_on) {
    job.ledger_max_chars = std::min(config.compaction.ledger.max_chars, job.kept_limit / 4);
    const std::size_t room = job.ledger_max_chars / 4;  // in tokens
    const std::size_t tokens = job.offline_output_tokens;
    job.offline_output_tokens = std::max(tokens / 2, tokens > room ? tokens - room : 0);
  }
  job.native = !job.offline_instead && provider->WritesNativeCheckpoints();
  if (!SplitSpan(job, !job.native)) return skip(SkipReason::kNothingToSummarize);

  events.Emit(EventType::kCompactionStarted, session,
              Fields(job, internal::CompactionStartedFields(CompactionReasonName(reason),
                                                            plan.full_chars, plan.full_tokens)));

  internal::SummarizeInput& in = job.in;
  in.focus = focus;
  if (!job.kept_ids.empty() && IsInstructions(t[0]) &&
      config.compaction.instructions_for_summarizer_chars > 0) {
    const std::string text = JoinedText(t[0]);
    const std::size_t limit = config.compaction.instructions_for_summarizer_chars;
    const std::size_t bytes = PrefixBytesForCodePoints(text, limit);
    in.instructions = text.substr(0, bytes);
    if (bytes < text.size()) in.instructions += "\n[… the rest of the instructions is not shown]";
  }
  const Provider& writer = job.offline_instead ? *offline : *provider;
  in.max_output_tokens =
      IsOffline(writer) ? job.offline_output_tokens : config.compaction.max_output_tokens;
  in.max_request_chars = IsOffline(writer) ? 0 : RequestBudget(plan);
  // The summarizer input budget, in characters (an estimated token is four); the offline
  // summarizer reads the structured span and is sent nothing.
  const auto& input_tokens = config.compaction.max_summarizer_input_tokens;
  if (input_tokens && !IsOffline(writer)) {
    in.max_input_chars = *input_tokens > SIZE_MAX / 4 ? SIZE_MAX : *input_tokens * 4;
  }
  if (job.native && !job.kept_ids.empty() && IsInstructions(t[0]))
    in.native_instructions = JoinedText(t[0]);
  in.known_prior_message = c.checkpoint_message();
  in.known_prior = c.checkpoint();
  // R17.1: the ledger's carried part; the span is read in SummarizeJob, off this thread when
  // the compaction runs in the background.
  if (job.ledger_on) job.carried = CarriedLedger(session, c, in.span);
  return a;  // kNone: ready for SummarizeJob
}

// R12.1: the span's instructions and pinned messages stay, verbatim and first; the rest
// is summarized. So does a provider's checkpoint that recap's summarizer cannot read
// (R14.1) when `keep_unreadable`: dropping it would lose what it holds. A provider-native
// summarizer (R14.2) is sent such a checkpoint of its own with the rest, and its new one
// replaces it. False when the span holds nothing new (earlier checkpoints aside).
bool Compactor::Impl::SplitSpan(CompactionJob& job, bool keep_unreadable) {
  const Transcript& t = job.snapshot;
  const std::size_t position = job.cut.position;
  job.kept_ids.clear();
  job.replaced_ids.clear();
  job.in.span = Transcript();
  job.kept.assign(position, false);
  bool something_new = false;
  std::size_t kept_chars_in_span = 0;
  for (std::size_t i = 0; i < position; ++i) {
    job.kept[i] =
        KeptByCompaction(t, i) || (keep_unreadable && IsUnreadableProviderCheckpoint(t[i]));
    if (job.kept[i]) {
      job.kept_ids.push_back(t[i].id);
      kept_chars_in_span += t.chars(i);
      continue;
    }
    job.replaced_ids.push_back(t[i].id);
    internal::TranscriptAccess::AppendFrom(job.in.span, t, i);
    something_new = something_new || !t[i].summary;
  }
  job.summarized_chars = job.cut.summarized_chars - kept_chars_in_span;
  return something_new;
}

// Phase 2: the plugins and the summarizer. Reads only `job` and what the Compactor shares
// between threads (provider, plugins, events, the breaker): a worker may run it.
void Compactor::Impl::SummarizeJob(CompactionJob& job, const CancellationToken& cancel) {
  const std::string& session = job.session;
  const char* reason_name = CompactionReasonName(job.reason);
  // Plugins first: their instructions and fields ride on the same summarizer call (R9.1).
  BeforeCompactContext before_ctx;
  before_ctx.session = session;
  before_ctx.reason = reason_name;
  before_ctx.messages = job.replaced_ids.size();
  before_ctx.chars = job.summarized_chars;
  // Clamped so that huge configured values cannot overflow the clock's arithmetic.
  const auto timeout = std::chrono::milliseconds(
      std::min<std::size_t>(config.plugin_hooks.timeout_ms, std::size_t{24} * 3600 * 1000));
  internal::BeforeCompactRun before;
  if (!plugins.empty()) before = internal::RunBeforeCompact(plugins, before_ctx, timeout);
  for (const auto& f : before.failures) {
    events.Emit(EventType::kPluginHookFailed, session,
                Fields(job, internal::PluginHookFailedFields(f.plugin, f.hook, f.error)));
  }
  internal::SummarizeInput& in = job.in;
  for (const auto& r : before.ok) {
    if (!r.request.instructions.empty()) in.plugin_instructions.push_back(r.request.instructions);
    for (const auto& f : r.request.output_fields) in.plugin_fields.push_back(f);
  }

  const Provider& writer_for_listing = job.offline_instead ? *offline : *provider;
  if (job.ledger_on) {
    job.ledger = BuildLedger(in.span, 0, in.span.size(), job.carried, LedgerBound());
    in.ledger = &job.ledger;
    // Listed for a model within an eighth of what one request may hold (R4.7), so that the
    // listing never splits a span into more chunks; a request too small for it lists nothing.
    std::size_t listing = config.compaction.ledger.max_chars;
    if (in.max_request_chars > 0) listing = std::min(listing, in.max_request_chars / 8);
    in.must_keep.clear();
    if (!IsOffline(writer_for_listing) && listing >= 200) {
      in.must_keep = internal::MustKeepListing(job.ledger, listing);
    }
  }

  Provider& writer = job.offline_instead ? *offline : *provider;
  auto summary = RunSummarizer(writer, in, job, cancel);
  job.calls += summary.ok() ? summary->calls : 1;
  if (summary.ok()) job.usage = summary->usage;
  if (!IsOffline(writer) && !(!summary.ok() && summary.status().code() == StatusCode::kCancelled)) {
    job.provider_failed = !summary.ok();
    breaker.Record(summary.ok(), job.automatic);
  }
  if (!summary.ok() && config.compaction.fallback == Fallback::kOffline && !IsOffline(writer) &&
      summary.status().code() != StatusCode::kCancelled) {
    RECAP_LOG_WARN("session {}: summarizer failed ({}); writing the checkpoint offline", session,
                   summary.status().message());
    in.max_request_chars = 0;
    in.max_output_tokens = job.offline_output_tokens;
    if (job.native) {
      // The offline summarizer cannot read an encrypted checkpoint: it stays, after all.
      SplitSpan(job, true);
    }
    summary = RunSummarizer(*offline, in, job, cancel);
    job.calls += 1;
    if (summary.ok()) job.usage = summary->usage;
  }
  if (summary.ok()) {
    // R12.7: no checkpoint above half the trigger. A reply within its budget that would
    // still make a larger one is cut to fit, as a reply over its budget is, and marked
    // partial (R5.2); one that cannot be made to fit is refused.
    // A provider's artifact is not recap's to cut: what it lacks of the ledger goes in a
    // message of its own after it (R17.2).
    if (!summary->native_checkpoint) {
      Status fitted = GuardAndFit(*summary, job);
      if (!fitted.ok()) summary = fitted;
    } else if (job.ledger_on) {
      job.guard = GuardCheckpoint(summary->parsed.checkpoint.text, job.ledger, job.ledger_max_chars,
                                  config.compaction.recall_tool);
    }
  }
  if (!summary.ok()) {
    job.error = summary.status();  // reported by whoever finishes the job (SayFailed)
    return;
  }
  const Checkpoint& checkpoint = summary->parsed.checkpoint;

  // Each plugin sees only the fields it asked for.
  std::vector<std::string> participating;
  std::map<std::string, std::map<std::string, std::string>> fields_by_plugin;
  for (const auto& r : before.ok) {
    participating.push_back(r.plugin);
    auto& mine = fields_by_plugin[r.plugin];
    for (const auto& f : r.request.output_fields) {
      auto it = summary->parsed.plugin_fields.find(f.name);
      if (it != summary->parsed.plugin_fields.end()) mine[f.name] = it->second;
    }
  }
  if (!participating.empty()) {
    AfterCompactContext after_ctx;
    after_ctx.session = session;
    after_ctx.reason = reason_name;
    after_ctx.checkpoint = checkpoint;
    job.after =
        internal::RunAfterCompact(plugins, participating, after_ctx, fields_by_plugin, timeout);
  }
  for (const auto& f : job.after.failures) {
    events.Emit(EventType::kPluginHookFailed, session,
                Fields(job, internal::PluginHookFailedFields(f.plugin, f.hook, f.error)));
  }
  job.summary = std::move(*summary);
}

// Phase 3: the commit and the cache. `c.transcript()` begins with the job's snapshot up to the
// cut (Prepare checked that for a background job); what follows the cut now stays after the
// checkpoint, as it is.
Attempt Compactor::Impl::FinishCompaction(SessionCache& c, const RequestSizes& sizes,
                                          CompactionJob& job) {
  Attempt a;
  a.before_full = job.before_full_chars;
  a.calls = job.calls;
  a.usage = job.usage;
  a.provider_failed = job.provider_failed;
  const std::string& session = job.session;
  const char* reason_name = CompactionReasonName(job.reason);
  if (!job.summary) {
    a.kind = AttemptKind::kFailed;
    a.error = job.error;
    SayFailed(job);
    return a;
  }
  internal::SummarizeOutput& summary = *job.summary;
  const Checkpoint& checkpoint = summary.parsed.checkpoint;
  const Transcript& t = c.transcript();

  CompactionCommit commit;
  commit.expected_version = c.version();
  commit.reason = reason_name;
  commit.replaced = job.replaced_ids;
  commit.kept = job.kept_ids;
  commit.checkpoint =
      summary.native_checkpoint ? *summary.native_checkpoint : CheckpointMessage(checkpoint);
  commit.checkpoint.id = NewMessageId();
  if (summary.native_checkpoint && !job.guard.section.empty()) {
    Message m = Message::UserText("## Kept by recap\n" + job.guard.section);
    m.summary = true;
    m.id = NewMessageId();
    commit.injected.push_back(std::move(m));
  }
  if (config.compaction.recall_tool && !job.replaced_ids.empty()) {
    // R18.2: where the originals are and how to have them back.
    Message m = Message::UserText(recall_internal::RecallNote(job.replaced_ids));
    m.summary = true;
    m.id = NewMessageId();
    commit.injected.push_back(std::move(m));
  }
  for (const auto& r : job.after.ok) {
    if (r.result.inject_context.empty()) continue;
    // Injected context is bounded, recap-made context like the checkpoint: flagged summary
    // so it is never clipped and never counts as a turn a person started.
    Message m = Message::UserText(r.result.inject_context);
    m.summary = true;
    m.id = NewMessageId();
    commit.injected.push_back(std::move(m));
  }

  auto committed = store->CommitCompaction(session, commit);
  if (!committed.ok()) {
    a.kind = AttemptKind::kFailed;
    a.error = committed.status().WithContext("could not save the compaction");
    if (job.background && committed.status().code() == StatusCode::kConflict) {
      // R15.2: another writer changed the session since this Prepare read it.
      events.Emit(EventType::kCompactionDiscarded, session,
                  Fields(job, internal::CompactionDiscardedFields(
                                  reason_name, job.replaced_ids.size(),
                                  "another writer changed the session in the store")));
    } else {
      events.Emit(EventType::kCompactionFailed, session,
                  Fields(job, internal::CompactionFailedFields(reason_name, a.error.message())));
    }
    if (committed.status().code() == StatusCode::kConflict) c.Invalidate();  // reload next
    return a;
  }

  const std::size_t position = job.cut.position;
  Transcript next;
  for (std::size_t i = 0; i < position; ++i) {
    if (job.kept[i]) internal::TranscriptAccess::AppendFrom(next, t, i);
  }
  const std::size_t checkpoint_at = next.size();
  next.Append(commit.checkpoint);
  for (const auto& m : commit.injected) next.Append(m);
  for (std::size_t i = position; i < t.size(); ++i) {
    internal::TranscriptAccess::AppendFrom(next, t, i);  // as measured and checked
  }
  const std::size_t before_t = t.chars();
  const std::size_t before_full = sizes.instructions_chars + before_t + sizes.tool_catalog_chars;
  c.Committed(std::move(next), *committed);  // the count reported for it is forgotten
  // Kept as its struct: the next compaction takes it as its prior without parsing it back.
  if (summary.native_checkpoint) {
    c.ForgetCheckpoint();  // the provider's artifact, not a struct of recap's
  } else {
    c.KeepCheckpoint(checkpoint_at, checkpoint);
  }
  if (job.ledger_on) c.KeepLedger(checkpoint_at, std::move(job.ledger));

  // The request's size after the commit: arithmetic, no second evaluation of the triggers.
  a.after_full = sizes.instructions_chars + c.transcript().chars() + sizes.tool_catalog_chars;
  a.kind = AttemptKind::kCommitted;
  // A background compaction's request has grown since it started: the swap reports the sizes
  // of the request it changes.
  if (job.background) a.before_full = before_full;

  internal::CompletedInfo info;
  info.reason = reason_name;
  info.before_chars = a.before_full;
  info.before_tokens = job.background ? EstimateTokens(before_full) : job.before_full_tokens;
  info.after_chars = a.after_full;
  info.after_tokens = EstimateTokens(a.after_full);
  info.summarized_messages = commit.replaced.size();
  info.summarized_chars = job.summarized_chars;
  info.checkpoint_chars = c.transcript().chars(checkpoint_at);
  info.structured = checkpoint.structured;
  info.partial = summary.parsed.partial;
  info.writer = summary.writer;
  info.prompt_tokens = summary.usage.prompt_tokens;
  info.completion_tokens = summary.usage.completion_tokens;
  info.calls = summary.calls;
  for (const auto& r : job.after.ok) {
    if (!r.result.report.empty()) info.plugins.push_back({r.plugin, r.result.report});
  }
  if (job.ledger_on) info.ledger = job.guard.tally;
  events.Emit(EventType::kCompactionCompleted, session,
              Fields(job, internal::CompactionCompletedFields(info)));

  a.outcome.compacted = true;
  a.outcome.summarized_messages = commit.replaced.size();
  a.outcome.before_chars = before_t;
  a.outcome.after_chars = c.transcript().chars();
  a.outcome.checkpoint = checkpoint;
  a.outcome.partial = summary.parsed.partial;
  a.outcome.writer = summary.writer;
  a.outcome.version = c.version();
  RECAP_LOG_INFO("session {}: compacted ({}{}): {} messages summarized, {} -> {} chars", session,
                 reason_name, job.background ? ", in the background" : "", commit.replaced.size(),
                 a.before_full, a.after_full);
  return a;
}

// One compaction, start to end, on the caller's thread.
Attempt Compactor::Impl::RunCompaction(const std::string& session, SessionCache& c,
                                       const RequestSizes& sizes, const Plan& plan,
                                       CompactionReason reason, CutMode mode,
                                       const std::string& focus, const CancellationToken& cancel) {
  CompactionJob job;
  Attempt begun = BeginCompaction(session, c, plan, reason, mode, focus, false, job);
  if (begun.kind != AttemptKind::kNone) return begun;
  SummarizeJob(job, cancel);
  return FinishCompaction(c, sizes, job);
}

}  // namespace v0
}  // namespace recap
