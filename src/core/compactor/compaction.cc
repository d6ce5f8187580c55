// One compaction (R3, R4, R5, R7.1, R12.7): the cut, the plugins, the summarizer with its
// fallback and back-off, the checkpoint fitted to half the trigger, the commit and the events.
#include "compactor/compactor_impl.h"

namespace recap {
inline namespace v0 {

Result<internal::SummarizeOutput> Compactor::Impl::RunSummarizer(
    Provider& p, const internal::SummarizeInput& in, const std::string& session,
    const CancellationToken& cancel) const {
  auto progress = [&](int chunk, int chunks) {
    events.Emit(EventType::kCompactionProgress, session,
                internal::CompactionProgressFields(chunk, chunks));
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

// One compaction: cut, plugins, summarizer, commit, events. Changes nothing unless it
// commits (R7.1). `plan` is the caller's evaluation of R2 for this very transcript and these
// sizes: the triggers are evaluated once per state of the session, not again here.
Attempt Compactor::Impl::RunCompaction(const std::string& session, SessionCache& c,
                                       const RequestSizes& sizes, const Plan& plan,
                                       CompactionReason reason, CutMode mode,
                                       const std::string& focus, const CancellationToken& cancel) {
  Attempt a;
  a.before_full = plan.full_chars;
  const Transcript& t = c.transcript;
  // R12.3: an automatic compaction leaves a summarizer that keeps failing alone for a while
  // (straight to the offline one when that is the fallback); a manual one always tries.
  const char* reason_name = CompactionReasonName(reason);
  const bool automatic = reason != CompactionReason::kManual;
  const bool backing_off = automatic && !IsOffline(*provider) && plan.summarizer_backoff_ms > 0;
  const bool offline_instead = backing_off && config.compaction.fallback == Fallback::kOffline;
  if (backing_off && !offline_instead) {
    a.kind = AttemptKind::kSkipped;
    a.skip = SkipReason::kSummarizerUnavailable;
    events.Emit(EventType::kCompactionSkipped, session,
                internal::CompactionSkippedFields(SkipReasonName(a.skip)));
    return a;
  }

  CutOptions cut_options;
  cut_options.keep_turns = config.compaction.keep_turns;
  cut_options.mode = mode;
  cut_options.kept_chars_limit = KeptLimit(plan);
  const CutDecision cut = FindCut(t, cut_options);
  if (!cut.ok()) {
    a.kind = AttemptKind::kSkipped;
    a.skip = cut.skip;
    a.outcome.skipped = cut.skip;
    events.Emit(EventType::kCompactionSkipped, session,
                internal::CompactionSkippedFields(SkipReasonName(cut.skip)));
    return a;
  }

  // R12.1: the span's instructions and pinned messages stay, verbatim and first; the rest
  // is summarized. So does a provider's checkpoint that recap's summarizer cannot read
  // (R14.1): dropping it would lose what it holds. A span with nothing else (earlier
  // checkpoints aside) is nothing to do.
  // A provider-native summarizer (R14.2) is sent such a checkpoint of its own with the rest,
  // and its new one replaces it.
  std::vector<std::string> kept_ids;
  std::vector<std::string> replaced_ids;
  Transcript span;
  bool something_new = false;
  std::size_t kept_chars_in_span = 0;
  std::vector<bool> kept(cut.position, false);
  auto split = [&](bool keep_unreadable) {
    kept_ids.clear();
    replaced_ids.clear();
    span = Transcript();
    something_new = false;
    kept_chars_in_span = 0;
    for (std::size_t i = 0; i < cut.position; ++i) {
      kept[i] = KeptByCompaction(t, i) || (keep_unreadable && IsUnreadableProviderCheckpoint(t[i]));
      if (kept[i]) {
        kept_ids.push_back(t[i].id);
        kept_chars_in_span += t.chars(i);
        continue;
      }
      replaced_ids.push_back(t[i].id);
      internal::TranscriptAccess::AppendFrom(span, t, i);
      something_new = something_new || !t[i].summary;
    }
  };
  const bool native = !offline_instead && provider->WritesNativeCheckpoints();
  split(!native);
  if (!something_new) {
    a.kind = AttemptKind::kSkipped;
    a.skip = SkipReason::kNothingToSummarize;
    a.outcome.skipped = a.skip;
    events.Emit(EventType::kCompactionSkipped, session,
                internal::CompactionSkippedFields(SkipReasonName(a.skip)));
    return a;
  }
  std::size_t summarized_chars = cut.summarized_chars - kept_chars_in_span;

  events.Emit(EventType::kCompactionStarted, session,
              internal::CompactionStartedFields(reason_name, plan.full_chars, plan.full_tokens));

  // Plugins first: their instructions and fields ride on the same summarizer call (R9.1).
  BeforeCompactContext before_ctx;
  before_ctx.session = session;
  before_ctx.reason = reason_name;
  before_ctx.messages = replaced_ids.size();
  before_ctx.chars = summarized_chars;
  // Clamped so that huge configured values cannot overflow the clock's arithmetic.
  const auto timeout = std::chrono::milliseconds(
      std::min<std::size_t>(config.plugin_hooks.timeout_ms, std::size_t{24} * 3600 * 1000));
  internal::BeforeCompactRun before;
  if (!plugins.empty()) before = internal::RunBeforeCompact(plugins, before_ctx, timeout);
  for (const auto& f : before.failures) {
    events.Emit(EventType::kPluginHookFailed, session,
                internal::PluginHookFailedFields(f.plugin, f.hook, f.error));
  }

  internal::SummarizeInput in;
  in.span = std::move(span);
  in.focus = focus;
  if (!kept_ids.empty() && IsInstructions(t[0]) &&
      config.compaction.instructions_for_summarizer_chars > 0) {
    const std::string text = JoinedText(t[0]);
    const std::size_t limit = config.compaction.instructions_for_summarizer_chars;
    const std::size_t bytes = PrefixBytesForCodePoints(text, limit);
    in.instructions = text.substr(0, bytes);
    if (bytes < text.size()) in.instructions += "\n[… the rest of the instructions is not shown]";
  }
  for (const auto& r : before.ok) {
    if (!r.request.instructions.empty()) in.plugin_instructions.push_back(r.request.instructions);
    for (const auto& f : r.request.output_fields) in.plugin_fields.push_back(f);
  }
  Provider& writer = offline_instead ? *offline : *provider;
  in.max_output_tokens =
      IsOffline(writer) ? OfflineOutputTokens(plan) : config.compaction.max_output_tokens;
  in.max_request_chars = IsOffline(writer) ? 0 : RequestBudget(plan);
  // The summarizer input budget, in characters (an estimated token is four); the offline
  // summarizer reads the structured span and is sent nothing.
  const auto& input_tokens = config.compaction.max_summarizer_input_tokens;
  if (input_tokens && !IsOffline(writer)) {
    in.max_input_chars = *input_tokens > SIZE_MAX / 4 ? SIZE_MAX : *input_tokens * 4;
  }

  if (native && !kept_ids.empty() && IsInstructions(t[0]))
    in.native_instructions = JoinedText(t[0]);
  in.known_prior_message = c.checkpoint_message;
  in.known_prior = c.checkpoint;
  auto summary = RunSummarizer(writer, in, session, cancel);
  a.calls += summary.ok() ? summary->calls : 1;
  if (summary.ok()) a.usage = summary->usage;
  if (!IsOffline(writer) && !(!summary.ok() && summary.status().code() == StatusCode::kCancelled)) {
    a.provider_failed = !summary.ok();
    RecordSummarizer(summary.ok(), automatic);
  }
  if (!summary.ok() && config.compaction.fallback == Fallback::kOffline && !IsOffline(writer) &&
      summary.status().code() != StatusCode::kCancelled) {
    RECAP_LOG_WARN("session {}: summarizer failed ({}); writing the checkpoint offline", session,
                   summary.status().message());
    in.max_request_chars = 0;
    in.max_output_tokens = OfflineOutputTokens(plan);
    if (native) {
      // The offline summarizer cannot read an encrypted checkpoint: it stays, after all.
      split(true);
      in.span = span;
      summarized_chars = cut.summarized_chars - kept_chars_in_span;
    }
    summary = RunSummarizer(*offline, in, session, cancel);
    a.calls += 1;
    if (summary.ok()) a.usage = summary->usage;
  }
  if (summary.ok()) {
    // R12.7: no checkpoint above half the trigger. A reply within its budget that would
    // still make a larger one is cut to fit, as a reply over its budget is, and marked
    // partial (R5.2); one that cannot be made to fit is refused.
    // A provider's artifact is not recap's to cut.
    if (!summary->native_checkpoint) {
      Status fitted = FitCheckpoint(*summary, KeptLimit(plan), session);
      if (!fitted.ok()) summary = fitted;
    }
  }
  if (!summary.ok()) {
    a.kind = AttemptKind::kFailed;
    a.error = summary.status();
    events.Emit(EventType::kCompactionFailed, session,
                internal::CompactionFailedFields(reason_name, summary.status().message()));
    return a;
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
  internal::AfterCompactRun after;
  if (!participating.empty()) {
    AfterCompactContext after_ctx;
    after_ctx.session = session;
    after_ctx.reason = reason_name;
    after_ctx.checkpoint = checkpoint;
    after = internal::RunAfterCompact(plugins, participating, after_ctx, fields_by_plugin, timeout);
  }
  for (const auto& f : after.failures) {
    events.Emit(EventType::kPluginHookFailed, session,
                internal::PluginHookFailedFields(f.plugin, f.hook, f.error));
  }

  CompactionCommit commit;
  commit.expected_version = c.version;
  commit.reason = reason_name;
  commit.replaced = std::move(replaced_ids);
  commit.kept = kept_ids;
  commit.checkpoint =
      summary->native_checkpoint ? *summary->native_checkpoint : CheckpointMessage(checkpoint);
  commit.checkpoint.id = NewMessageId();
  for (const auto& r : after.ok) {
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
    events.Emit(EventType::kCompactionFailed, session,
                internal::CompactionFailedFields(reason_name, a.error.message()));
    if (committed.status().code() == StatusCode::kConflict) c.loaded = false;  // reload next
    return a;
  }

  Transcript next;
  for (std::size_t i = 0; i < cut.position; ++i) {
    if (kept[i]) internal::TranscriptAccess::AppendFrom(next, t, i);
  }
  const std::size_t checkpoint_at = next.size();
  next.Append(commit.checkpoint);
  for (const auto& m : commit.injected) next.Append(m);
  for (std::size_t i = cut.position; i < t.size(); ++i) {
    internal::TranscriptAccess::AppendFrom(next, t, i);  // as measured and checked
  }
  const std::size_t before_t = t.chars();
  c.transcript = std::move(next);
  // Kept as its struct: the next compaction takes it as its prior without parsing it back.
  if (summary->native_checkpoint) {
    c.checkpoint_message.reset();  // the provider's artifact, not a struct of recap's
    c.checkpoint.reset();
  } else {
    c.checkpoint_message = c.transcript.shared(checkpoint_at);
    c.checkpoint = std::make_shared<const Checkpoint>(checkpoint);
  }
  c.pinned_chars = PinnedChars(c.transcript);
  c.bytes = CachedBytes(c);
  c.version = *committed;
  c.reported_prompt_tokens.reset();  // the transcript it described is gone

  // The request's size after the commit: arithmetic, no second evaluation of the triggers.
  a.after_full = sizes.instructions_chars + c.transcript.chars() + sizes.tool_catalog_chars;
  a.kind = AttemptKind::kCommitted;

  internal::CompletedInfo info;
  info.reason = reason_name;
  info.before_chars = plan.full_chars;
  info.before_tokens = plan.full_tokens;
  info.after_chars = a.after_full;
  info.after_tokens = EstimateTokens(a.after_full);
  info.summarized_messages = commit.replaced.size();
  info.summarized_chars = summarized_chars;
  info.checkpoint_chars = c.transcript.chars(checkpoint_at);
  info.structured = checkpoint.structured;
  info.partial = summary->parsed.partial;
  info.writer = summary->writer;
  info.prompt_tokens = summary->usage.prompt_tokens;
  info.completion_tokens = summary->usage.completion_tokens;
  info.calls = summary->calls;
  for (const auto& r : after.ok) {
    if (!r.result.report.empty()) info.plugins.push_back({r.plugin, r.result.report});
  }
  events.Emit(EventType::kCompactionCompleted, session, internal::CompactionCompletedFields(info));

  a.outcome.compacted = true;
  a.outcome.summarized_messages = commit.replaced.size();
  a.outcome.before_chars = before_t;
  a.outcome.after_chars = c.transcript.chars();
  a.outcome.checkpoint = checkpoint;
  a.outcome.partial = summary->parsed.partial;
  a.outcome.writer = summary->writer;
  a.outcome.version = c.version;
  RECAP_LOG_INFO("session {}: compacted ({}): {} messages summarized, {} -> {} chars", session,
                 reason_name, commit.replaced.size(), a.before_full, a.after_full);
  return a;
}

}  // namespace v0
}  // namespace recap
