// The Compactor's private state and machinery (Compactor::Impl), shared by its files:
// compactor.cc (the public methods, the cache of sessions, the window, the triggers),
// compaction.cc (one compaction: cut, plugins, summarizer, commit, events) and budget.cc
// (the reduction of R6 and the budget error of R7). Included by those files only.
#ifndef RECAP_SRC_CORE_COMPACTOR_COMPACTOR_IMPL_H_
#define RECAP_SRC_CORE_COMPACTOR_COMPACTOR_IMPL_H_

#include <algorithm>
#include <atomic>
#include <cctype>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <deque>
#include <iterator>
#include <list>
#include <map>
#include <mutex>
#include <thread>
#include <unordered_map>
#include <vector>

#include "recap/compactor.h"
#include "recap/measure.h"
#include "recap/offline_summarizer.h"
#include "recap/tail_reducer.h"

#include "compactor/session_cache.h"
#include "events/event_emitter.h"
#include "model/transcript_access.h"
#include "plugins/plugin_runner.h"
#include "recap_internal/call_scope.h"
#include "recap_internal/log_internal.h"
#include "summarize/summarize.h"

namespace recap {
inline namespace v0 {

using compactor_detail::ApplyLearned;
using compactor_detail::Attempt;
using compactor_detail::AttemptKind;
using compactor_detail::CountTurnStarts;
using compactor_detail::HoldsProviderCheckpoint;
using compactor_detail::IsResultOnly;
using compactor_detail::IsUnreadableProviderCheckpoint;
using compactor_detail::KeptByCompaction;
using compactor_detail::LearnedText;
using compactor_detail::MessageBytes;
using compactor_detail::PinnedChars;
using compactor_detail::RetirableProviderCheckpoint;
using compactor_detail::SessionCache;
using compactor_detail::StoredInstructionsChars;
using compactor_detail::TranscriptBytes;
using internal::EventEmitter;

// Hidden: Compactor is exported, and a nested class would be too; its members are no part of
// the API (tests/package/check_exports.cmake).
#if defined(__GNUC__)
#define RECAP_COMPACTOR_IMPL_HIDDEN __attribute__((visibility("hidden")))
#else
#define RECAP_COMPACTOR_IMPL_HIDDEN
#endif

struct RECAP_COMPACTOR_IMPL_HIDDEN Compactor::Impl {
  // One compaction between its decision and its commit, in three phases. BeginCompaction
  // (under the session's lock) cuts and fills the job from the session's transcript;
  // SummarizeJob runs the plugins and the summarizer on the job alone, so that a worker may run
  // it while Prepare serves the session (R15); FinishCompaction (under the lock again) commits
  // it and brings the cache up to date. The job shares the snapshot's messages, never the
  // SessionCache.
  struct CompactionJob {
    std::string session;
    CompactionReason reason = CompactionReason::kAuto;
    bool background = false;  // R15: its events say so
    bool automatic = true;    // a summarizer failure counts for R12.3
    bool offline_instead = false;
    bool native = false;  // a provider-native summarizer (R14.2)
    std::size_t before_full_chars = 0;
    std::size_t before_full_tokens = 0;
    std::size_t kept_limit = 0;
    std::size_t offline_output_tokens = 0;
    Transcript snapshot;  // the transcript it cut
    std::uint64_t version = 0;
    CutDecision cut;
    std::vector<bool> kept;  // per message before the cut: stays before the checkpoint
    std::vector<std::string> kept_ids;
    std::vector<std::string> replaced_ids;
    std::size_t summarized_chars = 0;
    internal::SummarizeInput in;
    // What SummarizeJob came to: the checkpoint, or the error (already reported).
    std::optional<internal::SummarizeOutput> summary;
    Status error;
    internal::AfterCompactRun after;
    std::size_t calls = 0;
    Usage usage;
    bool provider_failed = false;
  };

  // The fields of an event about `job`, with "background": true when it ran in the background.
  static jsonutil::Json Fields(const CompactionJob& job, jsonutil::Json fields) {
    return job.background ? internal::InBackground(std::move(fields)) : fields;
  }

  Config config;
  std::shared_ptr<Provider> provider;
  std::shared_ptr<Provider> offline;
  std::shared_ptr<SessionStore> store;
  std::vector<std::shared_ptr<PluginHook>> plugins;
  EventEmitter events;

  // R12.6: the sessions' caches, least recently used last, within config.cache.max_bytes.
  struct Slot {
    std::shared_ptr<SessionCache> cache;
    std::list<std::string>::iterator used;  // its place in `lru`
    std::size_t bytes = 0;                  // counted in cached_bytes
  };
  std::mutex sessions_mu;
  std::unordered_map<std::string, Slot> sessions;
  std::list<std::string> lru;  // most recently used first
  std::size_t cached_bytes = 0;

  std::shared_ptr<TimeSource> clock;

  // R1.2, R12.2: the provider's window. Asked when first needed; a failure is asked again
  // after a wait that starts at a minute and doubles up to ten; a provider that says it
  // reports none (kNotFound) is not asked again.
  std::mutex window_mu;
  bool provider_window_final = false;  // known, or reported as never known
  std::optional<std::size_t> provider_window;
  std::string window_error;        // why it is unknown
  bool window_error_loud = false;  // a failure, not "the provider reports none"
  std::optional<TimeSource::time_point> next_window_query;
  std::chrono::milliseconds window_retry{kWindowRetryFirst};

  // R12.3: the summarizer's failures in auto compactions, for every session: after three in
  // a row, auto compaction leaves it alone until `breaker_until` (30 s, doubling to 10 min).
  std::mutex breaker_mu;
  int provider_failures = 0;
  std::optional<TimeSource::time_point> breaker_until;
  std::chrono::milliseconds breaker_wait{kBreakerFirst};

  // R15: background compactions, one per session at most (keyed by session; kept apart from
  // the cache, which may drop a session meanwhile). A task is queued, then run by a worker (or
  // by a Prepare that cannot wait for a worker to take it), then done until a Prepare of its
  // session swaps it in or discards it.
  struct BackgroundTask {
    CompactionJob job;
    RequestSizes sizes;  // of the Prepare that started it, for the sizes its events report
    CancellationSource cancel;
    enum class State { kQueued, kRunning, kDone } state = State::kQueued;  // under bg_mu
    // Given up (by a manual compaction, a recovery, a Prepare that waited maxWaitMs, the
    // Compactor's destruction) and cancelled: its result is never swapped in; Ran reports it.
    // It stays in bg_tasks while it runs.
    bool abandoned = false;
    std::string abandoned_why;
  };
  std::mutex bg_mu;
  std::condition_variable bg_cv;  // a task queued or done, or stopping
  std::unordered_map<std::string, std::shared_ptr<BackgroundTask>> bg_tasks;
  std::deque<std::shared_ptr<BackgroundTask>> bg_queue;
  std::vector<std::thread> bg_workers;
  std::size_t bg_idle = 0;
  bool bg_stopping = false;

  static constexpr std::chrono::milliseconds kWindowRetryFirst{60000};
  static constexpr std::chrono::milliseconds kWindowRetryMax{600000};
  static constexpr int kBreakerFailures = 3;
  static constexpr std::chrono::milliseconds kBreakerFirst{30000};
  static constexpr std::chrono::milliseconds kBreakerMax{600000};

  Impl(Config c, std::shared_ptr<Provider> p, std::shared_ptr<SessionStore> s,
       std::vector<std::shared_ptr<PluginHook>> hooks,
       std::vector<std::shared_ptr<EventSink>> sinks, std::shared_ptr<TimeSource> time)
      : config(c),
        provider(std::move(p)),
        // Made here, not when first needed: sessions falling back at once share it.
        offline(NewOfflineSummarizer()),
        store(std::move(s)),
        plugins(std::move(hooks)),
        events(std::move(sinks)),
        clock(time ? std::move(time) : SteadyTimeSource()) {}

  // Cancels the background compactions and joins the workers (R15.4).
  ~Impl();
  Impl(const Impl&) = delete;
  Impl& operator=(const Impl&) = delete;

  // The offline summarizer, known by what it is, never by its name: a host's provider that
  // calls itself "offline" is a model like any other (chunked requests, the fallback).
  static bool IsOffline(const Provider& p) { return internal::IsOfflineSummarizer(p); }

  // kFailedPrecondition for `call` of `session` made inside a call of the same Compactor.
  static Status Reentered(const std::string& call, const std::string& session);

  // A session's cache for one call: made when missing, marked most recently used; when the
  // call ends (CacheUse's destructor), its size is counted and the least recently used
  // sessions that no call is using are dropped until the cache fits its budget.
  class CacheUse {
   public:
    CacheUse(Impl* impl, std::string session, std::shared_ptr<SessionCache> cache)
        : impl_(impl), session_(std::move(session)), cache_(std::move(cache)) {}
    ~CacheUse() { impl_->Release(session_, std::move(cache_)); }
    CacheUse(const CacheUse&) = delete;
    CacheUse& operator=(const CacheUse&) = delete;
    SessionCache& operator*() const { return *cache_; }
    SessionCache* operator->() const { return cache_.get(); }

   private:
    Impl* impl_;
    std::string session_;
    std::shared_ptr<SessionCache> cache_;
  };

  CacheUse Cache(const std::string& session) {
    std::lock_guard<std::mutex> lock(sessions_mu);
    auto it = sessions.find(session);
    if (it == sessions.end()) {
      lru.push_front(session);
      it = sessions.emplace(session, Slot{std::make_shared<SessionCache>(), lru.begin(), 0}).first;
    } else if (it->second.used != lru.begin()) {
      lru.splice(lru.begin(), lru, it->second.used);
    }
    return CacheUse(this, session, it->second.cache);
  }

  void Release(const std::string& session, std::shared_ptr<SessionCache> cache) {
    std::vector<std::shared_ptr<SessionCache>> dropped;  // freed after the lock
    {
      std::lock_guard<std::mutex> lock(sessions_mu);
      auto it = sessions.find(session);
      if (it != sessions.end() && it->second.cache == cache) {
        const std::size_t now = cache->bytes.load(std::memory_order_relaxed);
        cached_bytes = cached_bytes - it->second.bytes + now;
        it->second.bytes = now;
      }
      cache.reset();
      // The most recently used session always stays: a session larger than the budget is
      // not loaded again at every call.
      auto victim = lru.end();
      while (cached_bytes > config.cache.max_bytes && victim != lru.begin() &&
             std::prev(victim) != lru.begin()) {
        --victim;
        auto slot = sessions.find(*victim);
        if (slot->second.cache.use_count() > 1) continue;  // a call is using it
        cached_bytes -= slot->second.bytes;
        dropped.push_back(std::move(slot->second.cache));
        sessions.erase(slot);
        victim = lru.erase(victim);
      }
    }
    if (!dropped.empty()) {
      RECAP_LOG_DEBUG("cache over cache.maxBytes ({}): dropped {} least recently used sessions",
                      config.cache.max_bytes, dropped.size());
    }
  }

  // How many sessions are cached, and their bytes (for tests and Plan).
  std::pair<std::size_t, std::size_t> CacheFigures() {
    std::lock_guard<std::mutex> lock(sessions_mu);
    return {sessions.size(), cached_bytes};
  }

  // Brings the cached transcript up to date with the store: O(what was appended) when only
  // appends happened since the last call, a full load otherwise.
  Status Sync(const std::string& session, SessionCache& c) {
    if (!c.loaded) {
      auto state = store->Load(session);
      RECAP_RETURN_IF_ERROR(state);
      c.transcript = std::move(state->transcript);
      c.checkpoint_message.reset();  // no message of a fresh load is the one it was made for
      c.checkpoint.reset();
      c.version = state->version;
      ApplyLearned(c, state->learned);
      c.pinned_chars = PinnedChars(c.transcript);
      c.bytes = TranscriptBytes(c.transcript);
      c.turn_serial = CountTurnStarts(c.transcript);
      c.provider_checkpoint_pending = HoldsProviderCheckpoint(c.transcript);
      c.loaded = true;
      return Status::OK();
    }
    auto changes = store->LoadChanges(session, c.version);
    RECAP_RETURN_IF_ERROR(changes);
    // Another host of the fleet (or another Compactor) learned something: take it (R12.5).
    if (changes->learned != c.learned_text) ApplyLearned(c, changes->learned);
    if (changes->appended_only) {
      for (auto& m : changes->appended) {
        if (IsTurnStart(m)) {
          ++c.turn_serial;
          c.LiftPause();  // R2.5: a new turn lifts the no-progress pause
        }
        const bool pinned = m.pinned;
        if (!c.provider_checkpoint_pending && FindProviderCheckpoint(m)) {
          c.provider_checkpoint_pending = true;
        }
        c.bytes += MessageBytes(m);
        c.transcript.Append(std::move(m));
        if (pinned) c.pinned_chars += c.transcript.chars(c.transcript.size() - 1);
      }
    } else {
      // Another writer rewrote the session: start over from what it holds now.
      c.transcript = std::move(changes->transcript);
      c.checkpoint_message.reset();
      c.checkpoint.reset();
      c.pinned_chars = PinnedChars(c.transcript);
      c.bytes = TranscriptBytes(c.transcript);
      c.provider_checkpoint_pending = HoldsProviderCheckpoint(c.transcript);
      c.turn_serial += 1;
      c.LiftPause();
      ForgetReportedCount(c);
    }
    c.version = changes->version;
    return Status::OK();
  }

  // R12.5: keeps what was learned about the session in the store, when it changed. A store
  // that cannot save it now is told again at the next call; nothing else depends on it.
  void SaveLearned(const std::string& session, SessionCache& c) {
    if (!c.loaded) return;  // nothing read yet: what the store has must not be overwritten
    std::string text = LearnedText(c);
    if (text == c.learned_text) return;
    Status saved = store->SaveLearned(session, text);
    if (!saved.ok()) {
      RECAP_LOG_DEBUG(
          "session {}: what was learned could not be saved ({}); trying again at "
          "the next call",
          session, saved.message());
      return;
    }
    c.learned_text = std::move(text);
  }

  // R1.2: configuration, then the host's profile, then the provider; each source above the
  // trust limit counts as if it had said nothing. An overflow report caps the result (R2.6).
  struct WindowChoice {
    std::optional<std::size_t> tokens;
    const char* source = "fallback";
  };
  WindowChoice Window(const RequestSizes& sizes, const SessionCache& c) {
    auto trusted = [](std::optional<std::size_t> w) -> std::optional<std::size_t> {
      if (w && *w > 0 && *w <= kMaxTrustedContextWindow) return w;
      return std::nullopt;
    };
    WindowChoice w;
    if ((w.tokens = trusted(config.provider.context_window))) {
      w.source = "config";
    } else if ((w.tokens = trusted(sizes.profile_context_window))) {
      w.source = "profile";
    } else if ((w.tokens = ProviderWindow())) {
      w.source = "provider";
    }
    if (c.overflow_window && (!w.tokens || *c.overflow_window < *w.tokens)) {
      w.tokens = c.overflow_window;
      w.source = "overflow";
    }
    return w;
  }

  // The provider's window, asking it when the wait of R12.2 allows.
  std::optional<std::size_t> ProviderWindow() {
    std::lock_guard<std::mutex> lock(window_mu);
    if (provider_window_final) return provider_window;
    const TimeSource::time_point now = clock->Now();
    if (next_window_query && now < *next_window_query) return std::nullopt;
    Result<std::size_t> asked = Status::Internal("");
    try {
      asked = provider->QueryContextWindow();
    } catch (const std::exception& e) {
      asked = Status::Internal(std::string("it threw an exception: ") + e.what());
    } catch (...) {
      asked = Status::Internal("it threw a non-standard exception");
    }
    if (asked.ok() && *asked > 0 && *asked <= kMaxTrustedContextWindow) {
      provider_window = *asked;
      provider_window_final = true;
      window_error.clear();
      return provider_window;
    }
    if (!asked.ok() && asked.status().code() == StatusCode::kNotFound) {
      provider_window_final = true;  // it reports none, now or later
      window_error = asked.status().message();
      window_error_loud = false;
      return std::nullopt;
    }
    window_error = asked.ok() ? "the provider reported " + std::to_string(*asked) +
                                    " tokens, more than the " +
                                    std::to_string(kMaxTrustedContextWindow) + " recap trusts"
                              : asked.status().message();
    window_error_loud = true;
    next_window_query = now + window_retry;
    window_retry = std::min(window_retry * 2, kWindowRetryMax);
    return std::nullopt;
  }

  // R12.2: once per session, when the provider's window could not be read.
  void SayWindowUnknown(const std::string& session, SessionCache& c, const Plan& plan) {
    if (c.window_unknown_said || plan.window_source != std::string("fallback")) return;
    std::string error;
    {
      std::lock_guard<std::mutex> lock(window_mu);
      if (!window_error_loud) return;
      error = window_error;
    }
    c.window_unknown_said = true;
    events.Emit(EventType::kWindowUnknown, session,
                internal::WindowUnknownFields(error, FallbackWindow(), "maxContextChars / 4"));
    RECAP_LOG_WARN(
        "session {}: the context window is unknown ({}); the triggers use "
        "maxContextChars / 4 = {} tokens until it is known",
        session, error, FallbackWindow());
  }

  std::size_t FallbackWindow() const { return config.limits.max_context_chars / 4; }

  // Evaluates R2 for the current transcript into `plan` (no side effects).
  void Evaluate(const RequestSizes& sizes, SessionCache& c, Plan& plan) {
    const std::size_t t_chars = c.transcript.chars();
    plan.auto_enabled = config.compaction.auto_compact;
    plan.full_chars = sizes.instructions_chars + t_chars + sizes.tool_catalog_chars;
    plan.full_tokens = EstimateTokens(plan.full_chars);
    plan.reducible_chars = sizes.instructions_chars + t_chars;
    const WindowChoice chosen = Window(sizes, c);
    plan.window_tokens = chosen.tokens;
    plan.window_source = chosen.source;
    const double threshold = config.compaction.threshold;
    const std::size_t window = plan.window_tokens ? *plan.window_tokens : FallbackWindow();
    plan.trigger_tokens =
        static_cast<std::size_t>(std::floor(threshold * static_cast<double>(window)));
    plan.trigger_chars = static_cast<std::size_t>(
        std::floor(threshold * static_cast<double>(config.limits.max_context_chars)));

    std::size_t used_tokens = plan.full_tokens;
    if (config.compaction.calibrate && c.reported_prompt_tokens) {
      // R2.4: what the provider counted for the last request, plus an estimate of what
      // was added since.
      const std::size_t added = t_chars > c.chars_at_report ? t_chars - c.chars_at_report : 0;
      used_tokens = *c.reported_prompt_tokens + EstimateTokens(added);
    }
    plan.trigger = false;
    plan.rule.clear();
    plan.reason.reset();
    if (c.overflow_pending) {
      plan.trigger = true;
      plan.rule = "overflow";
      plan.reason = CompactionReason::kOverflow;
    } else if (used_tokens >= plan.trigger_tokens) {
      plan.trigger = true;
      plan.rule = plan.window_tokens ? "window" : "fallback";
      plan.reason = CompactionReason::kAuto;
    } else if (plan.full_chars >= plan.trigger_chars) {
      plan.trigger = true;
      plan.rule = "chars";
      plan.reason = CompactionReason::kAuto;
    }
    if (config.compaction.background.enabled) {
      // R15.1: startAt x the trigger, by the same two measures.
      const double at = config.compaction.background.start_at;
      plan.background_start_tokens =
          static_cast<std::size_t>(std::floor(at * static_cast<double>(plan.trigger_tokens)));
      plan.background_start_chars =
          static_cast<std::size_t>(std::floor(at * static_cast<double>(plan.trigger_chars)));
      plan.background_reached = used_tokens >= plan.background_start_tokens ||
                                plan.full_chars >= plan.background_start_chars;
    }
    plan.paused = c.paused;
    // R12.4: what no compaction can shrink reaches the trigger by itself: instructions (the
    // host's and the session's own, R12.1), pinned messages and the tool catalog.
    const std::size_t fixed = sizes.instructions_chars + StoredInstructionsChars(c.transcript) +
                              c.pinned_chars + sizes.tool_catalog_chars;
    plan.irreducible = EstimateTokens(fixed) >= plan.trigger_tokens || fixed >= plan.trigger_chars;
    plan.summarizer_backoff_ms = BreakerWaitMs();
  }

  // R12.3: how long auto compaction still leaves the summarizer alone (0: it does not).
  std::uint64_t BreakerWaitMs() {
    std::lock_guard<std::mutex> lock(breaker_mu);
    if (!breaker_until) return 0;
    const TimeSource::time_point now = clock->Now();
    if (now >= *breaker_until) return 0;
    return static_cast<std::uint64_t>(
        std::chrono::duration_cast<std::chrono::milliseconds>(*breaker_until - now).count());
  }

  // R12.3: what one summarizer call of a compaction came to. `automatic`: a failure counts.
  void RecordSummarizer(bool ok, bool automatic) {
    std::lock_guard<std::mutex> lock(breaker_mu);
    if (ok) {
      provider_failures = 0;
      breaker_until.reset();
      breaker_wait = kBreakerFirst;
      return;
    }
    if (!automatic) return;
    if (++provider_failures < kBreakerFailures) return;
    breaker_until = clock->Now() + breaker_wait;
    breaker_wait = std::min(breaker_wait * 2, kBreakerMax);
  }

  // R3.8: the kept part should stay below half of the smaller trigger, in characters.
  std::size_t KeptLimit(const Plan& plan) const {
    const std::size_t by_window = plan.trigger_tokens * 4;
    const std::size_t trigger = std::min(by_window, plan.trigger_chars);
    return std::max<std::size_t>(1, trigger / 2);
  }

  // The offline summarizer's reply budget: maxOutputTokens, and no more than half of what the
  // kept part may hold (a quarter of the trigger), so that a checkpoint merged again and again
  // never crowds the conversation out of a small window. A model is given maxOutputTokens as
  // configured; the offline summarizer is ours to keep small.
  std::size_t OfflineOutputTokens(const Plan& plan) const {
    constexpr std::size_t kMinTokens = 500;  // about 2,000 characters: a goal, a state, a few
                                             // instructions, however small the window
    const std::size_t share = KeptLimit(plan) / 2 / 4;
    return std::min(config.compaction.max_output_tokens, std::max(share, kMinTokens));
  }

  // How much one summarizer request may hold (R4.7): the window less the reply's budget,
  // with a margin for the estimate's error. recap's offline summarizer needs no limit.
  std::size_t RequestBudget(const Plan& plan) const {
    if (IsOffline(*provider)) return 0;
    const std::size_t window = plan.window_tokens ? *plan.window_tokens : FallbackWindow();
    const std::size_t out = config.compaction.max_output_tokens;
    std::size_t in_tokens = window > out ? window - out : 0;
    in_tokens = std::max(in_tokens, window / 2);
    return std::max<std::size_t>(16000, in_tokens * 4 * 9 / 10);
  }

  // kNone: the job is ready for SummarizeJob (compaction_started was emitted). Otherwise why
  // not (kSkipped; compaction_skipped emitted unless `background`).
  Attempt BeginCompaction(const std::string& session, const SessionCache& c, const Plan& plan,
                          CompactionReason reason, CutMode mode, const std::string& focus,
                          bool background, CompactionJob& job);
  bool SplitSpan(CompactionJob& job, bool keep_unreadable);
  void SummarizeJob(CompactionJob& job, const CancellationToken& cancel);
  Attempt FinishCompaction(SessionCache& c, const RequestSizes& sizes, CompactionJob& job);

  Result<internal::SummarizeOutput> RunSummarizer(Provider& p, const internal::SummarizeInput& in,
                                                  const CompactionJob& job,
                                                  const CancellationToken& cancel) const;

  // R14.2: a provider-native summarizer compacts the span; its artifact is the checkpoint.
  static Result<internal::SummarizeOutput> RunNative(Provider& p,
                                                     const internal::SummarizeInput& in,
                                                     const CancellationToken& cancel);

  // Cuts the summarizer's checkpoint to at most `max_chars` characters as a message (R12.7).
  Status FitCheckpoint(internal::SummarizeOutput& summary, std::size_t max_chars,
                       const std::string& session) const;

  // One compaction: cut, plugins, summarizer, commit, events. Changes nothing unless it
  // commits (R7.1). `plan` is the caller's evaluation of R2 for this very transcript and these
  // sizes: the triggers are evaluated once per state of the session, not again here.
  Attempt RunCompaction(const std::string& session, SessionCache& c, const RequestSizes& sizes,
                        const Plan& plan, CompactionReason reason, CutMode mode,
                        const std::string& focus, const CancellationToken& cancel);

  // R14.1: when a provider's checkpoint arrived, retires what precedes it (the instructions
  // and pinned messages stay), as one compaction commit whose checkpoint is that message
  // flagged summary; emits provider_checkpoint. Returns the messages retired (0 when there was
  // nothing to do, or the store refused: then the transcript is unchanged and it is tried
  // again at the next call).
  std::size_t AdoptProviderCheckpoint(const std::string& session, SessionCache& c);

  // R14.3: what clearing old tool results would do to `t` now: the messages it would
  // replace (each a copy whose results hold kClearedToolResultMarker), the results cleared and
  // the characters freed.
  struct Clearing {
    std::vector<std::pair<std::size_t, Message>> replacements;
    std::size_t results = 0;
    std::size_t freed_chars = 0;
  };
  Clearing PlanClearing(const Transcript& t) const;

  // R14.3: clears as PlanClearing says when it frees at least minFreeChars, commits it as a
  // reduction (the originals stay in the history) and emits tool_results_cleared. Returns the
  // messages changed (0 when it did not run or the store refused: then nothing changed).
  std::size_t ClearToolResults(const std::string& session, SessionCache& c);

  // The transcript `t` is after what precedes `at` was retired: the kept messages, `checkpoint`
  // (by default t[at] flagged summary, for PlanFor, which writes nothing), the rest.
  static Transcript AfterProviderCheckpoint(const Transcript& t, std::size_t at,
                                            std::optional<Message> checkpoint = std::nullopt);

  // R15, before step 1 of Prepare (background on): swaps in (or drops) the session's finished
  // background compaction, evaluates R2 into `plan`, waits for one still running when the
  // request would otherwise reach the window or the hard limit (MustWait; at most maxWaitMs,
  // and no longer than `cancel` allows), and starts one when the request has reached startAt x
  // the trigger but not the trigger. Returns true when one still runs as it returns: Prepare
  // then starts no compaction of its own.
  // Compactor::Prepare, once: kConflict when another writer committed between its read and
  // its write (the session is then read again at the next call).
  Result<Prepared> PrepareOnce(const std::string& session, const RequestSizes& sizes,
                               const CancellationToken& cancel);
  bool PrepareBackground(const std::string& session, SessionCache& c, const RequestSizes& sizes,
                         const CancellationToken& cancel, Plan& plan, Prepared& out);
  // Hands a compaction of the session to a worker; false when BeginCompaction found nothing to
  // do (then not again before the next turn).
  bool StartBackground(const std::string& session, SessionCache& c, const RequestSizes& sizes,
                       const Plan& plan);
  // R15.2, on the worker that finished `task`: swaps it in at once, under the session's lock,
  // unless a call holds the session (that call, or the next, collects it then) or it was given
  // up. The host's next Prepare then finds it in place and reports it (background_report).
  void SwapWhenReady(const std::string& session, const std::shared_ptr<BackgroundTask>& task);
  // compaction.background.maxWaitMs, clamped so that huge values cannot overflow the clock.
  std::chrono::milliseconds MaxWait() const {
    return std::chrono::milliseconds(std::min<std::size_t>(config.compaction.background.max_wait_ms,
                                                           std::size_t{24} * 3600 * 1000));
  }
  // A background compaction may start: the summarizer is not being left alone (R12.3), or the
  // offline summarizer stands in for it meanwhile.
  bool SummarizerAvailable(const Plan& plan) const;
  // The request may not go out as it is while a compaction runs: it reaches the window, the
  // hard limit (limits.maxContextChars), or the model refused the last one.
  bool MustWait(const Plan& plan, const SessionCache& c) const;
  // Swaps the finished task's checkpoint in when the span it snapshotted is still the session's,
  // else reports it discarded. Adds what it committed to `out`.
  void Collect(SessionCache& c, const RequestSizes& sizes, BackgroundTask& task, Prepared& out);
  // Waits until `task` is done, at most `max_wait` and while `cancel` is not cancelled; a task
  // no worker has taken yet goes first in the queue (with a worker of its own when all are
  // busy). Adds the time waited to *waited_ms. True when it is done.
  bool WaitForTask(const std::shared_ptr<BackgroundTask>& task, std::chrono::milliseconds max_wait,
                   const CancellationToken& cancel, std::uint64_t* waited_ms);
  // Gives up the session's background compaction, if any (a manual compaction or a recovery
  // replaces it; a Prepare stops waiting): a queued or finished one is dropped and reported
  // discarded at once; a running one is cancelled, stays the session's until it ends (no
  // second compaction beside it, R15.3), and is returned so that the caller may wait for it.
  std::shared_ptr<BackgroundTask> AbandonTask(const std::string& session, const std::string& why);
  // Removes `task` from the session's slot (when it is still there).
  void ForgetTask(const std::string& session, const std::shared_ptr<BackgroundTask>& task);
  // Starts a worker when the queue holds more tasks than idle workers will take, up to
  // compaction.background.workers (beyond it when `beyond_limit`). bg_mu held.
  void SpawnWorkerIfNeeded(bool beyond_limit);
  // Emits compaction_discarded / compaction_failed (job.error) for `job`.
  void SayDiscarded(const CompactionJob& job, const std::string& why);
  void SayFailed(const CompactionJob& job);
  // After a background task's SummarizeJob (bg_mu not held): reports a task given up as
  // discarded, a failed one as failed, then marks it done; a good one waits for its Prepare.
  void Ran(BackgroundTask& task);
  void WorkerLoop();

  // R6: clips the kept tail to the target and persists it. Returns false with `error` set
  // when the store refused.
  Status RunReduction(const std::string& session, SessionCache& c, const RequestSizes& sizes,
                      std::size_t* reduced_messages);

  // R7 step 4, R12.8: what every attempt of this Prepare did, in order, and what to do.
  // `attempts`: step 1's (or why it did not run), then step 3's budget compaction if it ran;
  // `reduced_first` / `reduced_all`: messages the reducer clipped in step 2 / in all.
  std::string BudgetMessage(std::size_t reducible, const RequestSizes& sizes,
                            const std::vector<Attempt>& attempts, std::size_t reduced_first,
                            std::size_t reduced_all, bool budget_tried_before,
                            std::size_t stored_instructions) const;
};

}  // namespace v0
}  // namespace recap

#endif  // RECAP_SRC_CORE_COMPACTOR_COMPACTOR_IMPL_H_
