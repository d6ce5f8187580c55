#include "recap/compactor.h"

#include <algorithm>
#include <atomic>
#include <cctype>
#include <chrono>
#include <cmath>
#include <iterator>
#include <list>
#include <map>
#include <mutex>
#include <unordered_map>

#include "recap/measure.h"
#include "recap/offline_summarizer.h"
#include "recap/tail_reducer.h"

#include "events/event_emitter.h"
#include "json/json_util.h"
#include "model/transcript_access.h"
#include "plugins/plugin_runner.h"
#include "recap_internal/json_depth.h"
#include "recap_internal/log_internal.h"
#include "summarize/summarize.h"

namespace recap {
inline namespace v0 {

namespace {

using internal::EventEmitter;

// What the last compaction attempt of a Prepare did; it shapes the R7 error text.
enum class AttemptKind { kNone, kCommitted, kSkipped, kFailed, kDisabled };

struct Attempt {
  AttemptKind kind = AttemptKind::kNone;
  SkipReason skip = SkipReason::kNone;
  Status error;  // kFailed
  std::size_t before_full = 0;
  std::size_t after_full = 0;
  bool provider_failed = false;  // the summarizer's call failed (R12.3 counts these)
  bool budget_step = false;      // Prepare's step 3, the budget compaction
  std::size_t calls = 0;         // requests to the summarizer
  Usage usage;                   // what the summarizer reported
  CompactOutcome outcome;
};

// Everything the Compactor remembers about one session between calls. Guarded by `mu`, which
// also serializes Prepare/Compact/Recover for the session.
struct SessionCache {
  std::mutex mu;
  bool loaded = false;
  Transcript transcript;
  std::uint64_t version = 0;

  // R2.6: an overflow was reported; the window is lowered to what was rejected.
  bool overflow_pending = false;
  std::optional<std::size_t> overflow_window;
  std::size_t last_full_tokens = 0;  // estimate of the last request Prepare handed out

  // R2.4: the provider's count for the last request, and the transcript size it described.
  std::optional<std::size_t> reported_prompt_tokens;
  std::size_t chars_at_report = 0;
  std::size_t chars_at_last_prepare = 0;

  // R2.5: consecutive auto compactions that freed < 10%, and the pause they cause. R12.4: the
  // pause also lifts once the transcript has grown by a tenth of the trigger since it began.
  int weak_streak = 0;
  bool paused = false;
  std::size_t chars_at_pause = 0;

  // R12.4: the (instructions, tool catalog) sizes for which `irreducible` was last said.
  std::optional<std::pair<std::size_t, std::size_t>> irreducible_said_for;

  // R12.2: window_unknown was emitted for this session.
  bool window_unknown_said = false;

  // R12.1: characters of the pinned messages of the transcript (kept up to date on append).
  std::size_t pinned_chars = 0;

  // R12.6: about how much memory the cached transcript holds (TranscriptBytes), kept up to
  // date by whoever holds `mu`; read by the cache's accounting without it.
  std::atomic<std::size_t> bytes{0};

  // R12.5: the learned state as the store last had it (LearnedText of the fields above).
  std::string learned_text;

  // Turn starts ever seen (monotonic): "once per turn" for the budget compaction (R7 step 3).
  std::uint64_t turn_serial = 0;
  std::optional<std::uint64_t> budget_tried_at;
};

std::size_t CountTurnStarts(const Transcript& t) {
  std::size_t n = 0;
  for (const Message& m : t) n += IsTurnStart(m) ? 1 : 0;
  return n;
}

// R12.5: what the Compactor learned about a session, as the store keeps it: a JSON object of
// the fields that differ from a fresh session's, or "" when none does.
std::string LearnedText(const SessionCache& c) {
  jsonutil::Json j = jsonutil::Json::object();
  if (c.overflow_pending) j["overflowPending"] = true;
  if (c.overflow_window) j["overflowWindow"] = *c.overflow_window;
  if (c.reported_prompt_tokens) {
    j["promptTokens"] = *c.reported_prompt_tokens;
    j["charsAtReport"] = c.chars_at_report;
  }
  if (c.weak_streak != 0) j["weakStreak"] = c.weak_streak;
  if (c.paused) {
    j["paused"] = true;
    j["charsAtPause"] = c.chars_at_pause;
  }
  return j.empty() ? std::string() : j.dump();
}

// Takes `text` (LearnedText, maybe written by another host or another recap) into `c`. What
// does not read as expected is left at a fresh session's value: it is advice.
void ApplyLearned(SessionCache& c, const std::string& text) {
  c.learned_text = text;
  c.overflow_pending = false;
  c.overflow_window.reset();
  c.reported_prompt_tokens.reset();
  c.chars_at_report = 0;
  c.weak_streak = 0;
  c.paused = false;
  c.chars_at_pause = 0;
  // Written by recap, but read from a file anyone may have touched: a few hundred bytes, one
  // level deep; anything else is not parsed at all (R13.1).
  if (text.empty() || text.size() > 4096 ||
      internal::FindTooDeep(text, 2) != std::string_view::npos)
    return;
  const jsonutil::Json j = jsonutil::Json::parse(text, nullptr, false);
  if (!j.is_object()) return;
  auto count = [&](const char* key) -> std::optional<std::size_t> {
    auto it = j.find(key);
    if (it == j.end() || !it->is_number_unsigned()) return std::nullopt;
    return it->get<std::size_t>();
  };
  auto flag = [&](const char* key) {
    auto it = j.find(key);
    return it != j.end() && it->is_boolean() && it->get<bool>();
  };
  c.overflow_pending = flag("overflowPending");
  c.overflow_window = count("overflowWindow");
  if (c.overflow_window && *c.overflow_window == 0) c.overflow_window.reset();
  c.reported_prompt_tokens = count("promptTokens");
  c.chars_at_report = count("charsAtReport").value_or(0);
  c.weak_streak = static_cast<int>(std::min<std::size_t>(count("weakStreak").value_or(0), 2));
  c.paused = flag("paused");
  c.chars_at_pause = count("charsAtPause").value_or(0);
}

// R12.6: about how many bytes of memory a message takes in the cache: its strings and the
// fixed size of the objects that hold them. An estimate, for the cache's budget.
std::size_t MessageBytes(const Message& m) {
  constexpr std::size_t kPerMessage = sizeof(Message) + 96;  // + its Transcript entry
  std::size_t n = kPerMessage + m.id.size() + m.extra.size();
  auto opaque = [](const Opaque& o) { return o.kind.size() + o.payload.size() + o.link_id.size(); };
  for (const Part& p : m.parts) {
    n += sizeof(Part);
    if (const auto* t = std::get_if<Text>(&p)) {
      n += t->text.size() + t->extra.size();
    } else if (const auto* c = std::get_if<ToolCall>(&p)) {
      n += c->id.size() + c->name.size() + c->arguments.size() + c->extra.size();
    } else if (const auto* r = std::get_if<ToolResult>(&p)) {
      n += r->call_id.size() + r->extra.size();
      for (const ResultItem& item : r->content) {
        n += sizeof(ResultItem);
        if (const auto* it = std::get_if<Text>(&item)) {
          n += it->text.size() + it->extra.size();
        } else {
          n += opaque(std::get<Opaque>(item));
        }
      }
    } else {
      n += opaque(std::get<Opaque>(p));
    }
  }
  return n;
}

std::size_t TranscriptBytes(const Transcript& t) {
  std::size_t n = 0;
  for (const Message& m : t) n += MessageBytes(m);
  return n;
}

// R12.1: characters of the session's instructions (a leading system message), 0 when none.
std::size_t StoredInstructionsChars(const Transcript& t) {
  return !t.empty() && IsInstructions(t[0]) ? t.chars(0) : 0;
}

std::size_t PinnedChars(const Transcript& t) {
  std::size_t n = 0;
  for (std::size_t i = 0; i < t.size(); ++i) n += t[i].pinned ? t.chars(i) : 0;
  return n;
}

// Kept by a compaction whose span holds it, before the checkpoint (R12.1).
bool KeptByCompaction(const Transcript& t, std::size_t i) {
  return t[i].pinned || (i == 0 && IsInstructions(t[0]));
}

bool IsResultOnly(const Message& m) {
  if (m.parts.empty()) return false;
  for (const auto& p : m.parts) {
    if (!std::holds_alternative<ToolResult>(p)) return false;
  }
  return true;
}

}  // namespace

struct Compactor::Impl {
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

  static constexpr std::chrono::milliseconds kWindowRetryFirst{60000};
  static constexpr std::chrono::milliseconds kWindowRetryMax{600000};
  static constexpr int kBreakerFailures = 3;
  static constexpr std::chrono::milliseconds kBreakerFirst{30000};
  static constexpr std::chrono::milliseconds kBreakerMax{600000};

  Impl(Config c, std::shared_ptr<Provider> p, std::shared_ptr<SessionStore> s,
       std::vector<std::shared_ptr<PluginHook>> hooks,
       std::vector<std::shared_ptr<EventSink>> sinks, std::shared_ptr<TimeSource> time)
      : config(std::move(c)),
        provider(std::move(p)),
        // Made here, not when first needed: sessions falling back at once share it.
        offline(NewOfflineSummarizer()),
        store(std::move(s)),
        plugins(std::move(hooks)),
        events(std::move(sinks)),
        clock(time ? std::move(time) : SteadyTimeSource()) {}

  // The offline summarizer, known by what it is, never by its name: a host's provider that
  // calls itself "offline" is a model like any other (chunked requests, the fallback).
  static bool IsOffline(const Provider& p) { return internal::IsOfflineSummarizer(p); }

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
      c.version = state->version;
      ApplyLearned(c, state->learned);
      c.pinned_chars = PinnedChars(c.transcript);
      c.bytes = TranscriptBytes(c.transcript);
      c.turn_serial = CountTurnStarts(c.transcript);
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
          c.paused = false;  // R2.5: a new turn lifts the no-progress pause
          c.weak_streak = 0;
        }
        const bool pinned = m.pinned;
        c.bytes += MessageBytes(m);
        c.transcript.Append(std::move(m));
        if (pinned) c.pinned_chars += c.transcript.chars(c.transcript.size() - 1);
      }
    } else {
      // Another writer rewrote the session: start over from what it holds now.
      c.transcript = std::move(changes->transcript);
      c.pinned_chars = PinnedChars(c.transcript);
      c.bytes = TranscriptBytes(c.transcript);
      c.turn_serial += 1;
      c.paused = false;
      c.weak_streak = 0;
      c.reported_prompt_tokens.reset();
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

  Result<internal::SummarizeOutput> RunSummarizer(Provider& p, const internal::SummarizeInput& in,
                                                  const std::string& session,
                                                  const CancellationToken& cancel) {
    auto progress = [&](int chunk, int chunks) {
      events.Emit(EventType::kCompactionProgress, session,
                  internal::CompactionProgressFields(chunk, chunks));
    };
    // A host's Provider may throw despite its contract; that must not take the session
    // down with it, so it becomes an ordinary failed compaction.
    try {
      return internal::Summarize(p, in, cancel, progress);
    } catch (const std::exception& e) {
      return Status::Internal("the summarizer (" + p.Name() + ") threw an exception: " + e.what());
    } catch (...) {
      return Status::Internal("the summarizer (" + p.Name() + ") threw a non-standard exception");
    }
  }

  // Cuts the summarizer's checkpoint to at most `max_chars` characters as a message (R12.7).
  Status FitCheckpoint(internal::SummarizeOutput& summary, std::size_t max_chars,
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
  Attempt RunCompaction(const std::string& session, SessionCache& c, const RequestSizes& sizes,
                        const Plan& plan, CompactionReason reason, CutMode mode,
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
    // is summarized. A span with nothing else (earlier checkpoints aside) is nothing to do.
    std::vector<std::string> kept_ids;
    std::vector<std::string> replaced_ids;
    Transcript span;
    bool something_new = false;
    std::size_t kept_chars_in_span = 0;
    for (std::size_t i = 0; i < cut.position; ++i) {
      if (KeptByCompaction(t, i)) {
        kept_ids.push_back(t[i].id);
        kept_chars_in_span += t.chars(i);
        continue;
      }
      replaced_ids.push_back(t[i].id);
      internal::TranscriptAccess::AppendFrom(span, t, i);
      something_new = something_new || !t[i].summary;
    }
    if (!something_new) {
      a.kind = AttemptKind::kSkipped;
      a.skip = SkipReason::kNothingToSummarize;
      a.outcome.skipped = a.skip;
      events.Emit(EventType::kCompactionSkipped, session,
                  internal::CompactionSkippedFields(SkipReasonName(a.skip)));
      return a;
    }
    const std::size_t summarized_chars = cut.summarized_chars - kept_chars_in_span;

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
        std::min<std::size_t>(config.plugin_hooks.timeout_ms, 24u * 3600u * 1000u));
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

    auto summary = RunSummarizer(writer, in, session, cancel);
    a.calls += summary.ok() ? summary->calls : 1;
    if (summary.ok()) a.usage = summary->usage;
    if (!IsOffline(writer) &&
        !(!summary.ok() && summary.status().code() == StatusCode::kCancelled)) {
      a.provider_failed = !summary.ok();
      RecordSummarizer(summary.ok(), automatic);
    }
    if (!summary.ok() && config.compaction.fallback == Fallback::kOffline && !IsOffline(writer) &&
        summary.status().code() != StatusCode::kCancelled) {
      RECAP_LOG_WARN("session {}: summarizer failed ({}); writing the checkpoint offline", session,
                     summary.status().message());
      in.max_request_chars = 0;
      in.max_output_tokens = OfflineOutputTokens(plan);
      summary = RunSummarizer(*offline, in, session, cancel);
      a.calls += 1;
      if (summary.ok()) a.usage = summary->usage;
    }
    if (summary.ok()) {
      // R12.7: no checkpoint above half the trigger. A reply within its budget that would
      // still make a larger one is cut to fit, as a reply over its budget is, and marked
      // partial (R5.2); one that cannot be made to fit is refused.
      Status fitted = FitCheckpoint(*summary, KeptLimit(plan), session);
      if (!fitted.ok()) summary = fitted;
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
      after =
          internal::RunAfterCompact(plugins, participating, after_ctx, fields_by_plugin, timeout);
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
    commit.checkpoint = CheckpointMessage(checkpoint);
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
      if (KeptByCompaction(t, i)) internal::TranscriptAccess::AppendFrom(next, t, i);
    }
    const std::size_t checkpoint_at = next.size();
    next.Append(commit.checkpoint);
    for (const auto& m : commit.injected) next.Append(m);
    for (std::size_t i = cut.position; i < t.size(); ++i) {
      internal::TranscriptAccess::AppendFrom(next, t, i);  // as measured and checked
    }
    const std::size_t before_t = t.chars();
    c.transcript = std::move(next);
    c.pinned_chars = PinnedChars(c.transcript);
    c.bytes = TranscriptBytes(c.transcript);
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
    events.Emit(EventType::kCompactionCompleted, session,
                internal::CompactionCompletedFields(info));

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

  // R6: clips the kept tail to the target and persists it. Returns false with `error` set
  // when the store refused.
  Status RunReduction(const std::string& session, SessionCache& c, const RequestSizes& sizes,
                      std::size_t* reduced_messages) {
    // R12.1: the session's own instructions count as instructions; the reducer leaves them
    // (and pinned messages) alone and brings the rest to the target.
    const std::size_t stored = StoredInstructionsChars(c.transcript);
    const std::size_t target =
        ReductionTarget(config.limits.max_context_chars, sizes.instructions_chars + stored) +
        stored;
    ReduceResult r = ReduceTail(c.transcript, target);
    if (r.clipped.empty()) return Status::OK();
    ReductionCommit commit;
    commit.expected_version = c.version;
    for (std::size_t i : r.clipped) commit.replacements.push_back(r.transcript[i]);
    auto committed = store->CommitReduction(session, commit);
    if (!committed.ok()) {
      if (committed.status().code() == StatusCode::kConflict) c.loaded = false;
      return committed.status().WithContext("could not save the reduced transcript");
    }
    c.transcript = std::move(r.transcript);
    c.bytes = TranscriptBytes(c.transcript);
    c.version = *committed;
    c.reported_prompt_tokens.reset();
    *reduced_messages += r.clipped.size();
    events.Emit(
        EventType::kContextReduced, session,
        internal::ContextReducedFields(r.clipped.size(), sizes.instructions_chars + r.before_chars,
                                       sizes.instructions_chars + r.after_chars));
    return Status::OK();
  }

  // R7 step 4, R12.8: what every attempt of this Prepare did, in order, and what to do.
  // `attempts`: step 1's (or why it did not run), then step 3's budget compaction if it ran;
  // `reduced_first` / `reduced_all`: messages the reducer clipped in step 2 / in all.
  std::string BudgetMessage(std::size_t reducible, const RequestSizes& sizes,
                            const std::vector<Attempt>& attempts, std::size_t reduced_first,
                            std::size_t reduced_all, bool budget_tried_before,
                            std::size_t stored_instructions) const {
    const std::size_t limit = config.limits.max_context_chars;
    std::string msg = "Context budget exceeded (approximately " + std::to_string(reducible) +
                      " characters of conversation; limit " + std::to_string(limit) + ").";
    const Attempt* first = nullptr;
    const Attempt* budget = nullptr;
    for (const Attempt& a : attempts) (a.budget_step ? budget : first) = &a;
    auto skipped_because = [](const Attempt& a) -> std::string {
      if (a.skip == SkipReason::kNoProgress) {
        return "it is paused: the last two freed less than a tenth of the request each (it "
               "resumes at a new turn, or once the conversation has grown by a tenth of the "
               "trigger)";
      }
      if (a.skip == SkipReason::kIrreducible) {
        return "the instructions and the tool catalog alone reach the compaction trigger, so "
               "summarizing the conversation cannot bring the request under it";
      }
      if (a.skip == SkipReason::kSummarizerUnavailable) {
        return "the summarizer failed three times in a row and is left alone for a while";
      }
      if (a.skip == SkipReason::kUncertainToolResults) {
        return "tool calls have no recorded result; recover the session first";
      }
      return "there is no safe boundary to summarize";
    };
    // What happened after step 1, in order.
    std::vector<std::string> then;
    if (reduced_first > 0) {
      then.push_back("the reducer clipped " + std::to_string(reduced_first) +
                     (reduced_first == 1 ? " message" : " messages"));
    }
    if (budget != nullptr) {
      std::string b = "a budget compaction ";
      if (budget->kind == AttemptKind::kCommitted) {
        b += "summarized " + std::to_string(budget->outcome.summarized_messages) +
             " more messages inside the last turn";
        if (reduced_all > reduced_first) {
          b += " and the reducer clipped " + std::to_string(reduced_all - reduced_first) + " more";
        }
      } else if (budget->kind == AttemptKind::kFailed) {
        b += "failed (" + budget->error.message() + ")";
      } else if (budget->skip != SkipReason::kNone &&
                 budget->skip != SkipReason::kNothingToSummarize &&
                 budget->skip != SkipReason::kNoSafeBoundary) {
        b += "was skipped because " + skipped_because(*budget);
      } else {
        b += "found nothing left to summarize";
      }
      then.push_back(std::move(b));
    }
    std::string rest;
    for (const std::string& t : then) rest += (rest.empty() ? "" : ", then ") + t;
    if (first != nullptr && first->kind == AttemptKind::kCommitted) {
      if (rest.empty()) {
        msg += " Automatic compaction ran but could not reduce it enough.";
      } else {
        msg += " Automatic compaction ran (" + std::to_string(first->outcome.summarized_messages) +
               " messages summarized), then " + rest + ", but it is still over the limit.";
      }
    } else {
      if (first != nullptr && first->kind == AttemptKind::kDisabled) {
        msg += " Automatic compaction is disabled.";
      } else if (first != nullptr && first->kind == AttemptKind::kFailed) {
        msg += " Automatic compaction failed (" + first->error.message() + ").";
      } else if (first != nullptr && first->kind == AttemptKind::kSkipped) {
        msg += " Automatic compaction was skipped because " + skipped_because(*first) + ".";
      }
      if (!rest.empty()) {
        rest[0] = static_cast<char>(std::toupper(static_cast<unsigned char>(rest[0])));
        msg += " " + rest + ".";
      }
    }
    if (budget_tried_before) {
      msg += " A budget compaction was already tried in this turn.";
    }
    const std::size_t instructions = sizes.instructions_chars + stored_instructions;
    if (instructions + kMinReductionTarget > limit) {
      msg += " The instructions alone are " + std::to_string(instructions) +
             " characters, more than the limit leaves room for.";
    }
    msg +=
        " To continue: compact manually (with a focus), trim large tool outputs, start a new"
        " session, or raise limits.maxContextChars.";
    return msg;
  }
};

const char* CompactionReasonName(CompactionReason reason) noexcept {
  switch (reason) {
    case CompactionReason::kAuto: return "auto";
    case CompactionReason::kManual: return "manual";
    case CompactionReason::kBudget: return "budget";
    case CompactionReason::kOverflow: return "overflow";
  }
  return "auto";
}

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
  auto impl = std::make_unique<Impl>(std::move(config), std::move(provider), std::move(store),
                                     std::move(plugins), std::move(sinks), std::move(time));
  return std::unique_ptr<Compactor>(new Compactor(std::move(impl)));
}

Result<Prepared> Compactor::Prepare(const std::string& session, const RequestSizes& sizes,
                                    const CancellationToken& cancel) {
  auto cache = impl_->Cache(session);
  SessionCache& c = *cache;
  std::lock_guard<std::mutex> lock(c.mu);
  Status synced = impl_->Sync(session, c);
  RECAP_RETURN_IF_ERROR(synced);

  const Config& cfg = impl_->config;
  Prepared out;
  Plan plan;
  impl_->Evaluate(sizes, c, plan);
  const auto evaluated_version = c.version;
  impl_->SayWindowUnknown(session, c, plan);
  out.before_chars = plan.reducible_chars;
  out.before_tokens = plan.full_tokens;
  out.window_tokens = plan.window_tokens;
  out.window_source = plan.window_source;
  out.fallback_window_tokens = impl_->FallbackWindow();
  out.trigger_rule = plan.rule;
  // What this call tried, in order, for the budget error (R12.8).
  std::vector<Attempt> attempts;
  std::size_t reductions = 0;

  // R12.4: the no-progress pause lifts once the transcript has grown by a tenth of the
  // trigger since it began, not only at a new turn.
  if (c.paused) {
    const std::size_t trigger = std::min(plan.trigger_tokens * 4, plan.trigger_chars);
    if (c.transcript.chars() >= c.chars_at_pause + trigger / 10) {
      c.paused = false;
      c.weak_streak = 0;
    }
  }
  if (!plan.irreducible) c.irreducible_said_for.reset();

  // Step 1 (R2): one gate, `auto`, for every trigger.
  if (!cfg.compaction.auto_compact) {
    attempts.emplace_back().kind = AttemptKind::kDisabled;
  } else if (plan.trigger) {
    if (c.paused && plan.reason != CompactionReason::kOverflow) {
      Attempt& a = attempts.emplace_back();
      a.kind = AttemptKind::kSkipped;
      a.skip = SkipReason::kNoProgress;
      impl_->events.Emit(EventType::kCompactionSkipped, session,
                         internal::CompactionSkippedFields(SkipReasonName(a.skip)));
    } else if (plan.irreducible) {
      // R12.4: instructions and catalog alone reach the trigger; no compaction can help.
      Attempt& a = attempts.emplace_back();
      a.kind = AttemptKind::kSkipped;
      a.skip = SkipReason::kIrreducible;
      const std::pair<std::size_t, std::size_t> fixed{sizes.instructions_chars,
                                                      sizes.tool_catalog_chars};
      if (c.irreducible_said_for != fixed) {
        c.irreducible_said_for = fixed;
        impl_->events.Emit(EventType::kCompactionSkipped, session,
                           internal::CompactionSkippedFields(SkipReasonName(a.skip)));
      }
      c.overflow_pending = false;
    } else {
      c.overflow_pending = false;
      Attempt& last = attempts.emplace_back(impl_->RunCompaction(
          session, c, sizes, plan, *plan.reason, CutMode::kNormal, {}, cancel));
      if (last.kind == AttemptKind::kCommitted) {
        out.compactions.push_back(*plan.reason);
        // R2.5: two auto compactions in a row that each free < 10% pause auto compaction.
        const bool weak = last.after_full * 10 > last.before_full * 9;  // freed < 10%
        c.weak_streak = weak ? c.weak_streak + 1 : 0;
        if (c.weak_streak >= 2 && !c.paused) {
          c.paused = true;
          c.chars_at_pause = c.transcript.chars();
        }
      }
    }
  }

  // Step 2 (R6): the hard limit on reducible content.
  const std::size_t limit = cfg.limits.max_context_chars;
  auto reducible = [&] { return sizes.instructions_chars + c.transcript.chars(); };
  if (reducible() > limit) {
    Status s = impl_->RunReduction(session, c, sizes, &out.reduced_messages);
    RECAP_RETURN_IF_ERROR(s);
    reductions = out.reduced_messages;
  }
  // Step 3: a last-chance compaction inside the last turn, once per turn.
  bool budget_tried_before = false;
  if (reducible() > limit && cfg.compaction.auto_compact) {
    if (c.budget_tried_at != c.turn_serial) {
      c.budget_tried_at = c.turn_serial;
      // The plan of step 1 still describes the session unless a commit since changed it.
      Plan now = plan;
      if (c.version != evaluated_version) impl_->Evaluate(sizes, c, now);
      Attempt& budget = attempts.emplace_back(impl_->RunCompaction(
          session, c, sizes, now, CompactionReason::kBudget, CutMode::kBudget, {}, cancel));
      budget.budget_step = true;
      if (budget.kind == AttemptKind::kCommitted)
        out.compactions.push_back(CompactionReason::kBudget);
      if (reducible() > limit) {
        Status s = impl_->RunReduction(session, c, sizes, &out.reduced_messages);
        RECAP_RETURN_IF_ERROR(s);
      }
    } else {
      budget_tried_before = true;
    }
  }
  for (const Attempt& a : attempts) {
    if (a.kind == AttemptKind::kCommitted) out.summarized_messages += a.outcome.summarized_messages;
    out.summarizer_calls += a.calls;
    out.summarizer_usage.prompt_tokens += a.usage.prompt_tokens;
    out.summarizer_usage.completion_tokens += a.usage.completion_tokens;
  }
  impl_->SaveLearned(session, c);
  // Step 4: fail with what happened and what to do; the reduction above stays persisted.
  if (reducible() > limit) {
    return Status::ContextBudgetExceeded(
        impl_->BudgetMessage(reducible(), sizes, attempts, reductions, out.reduced_messages,
                             budget_tried_before, StoredInstructionsChars(c.transcript)));
  }

  out.messages = c.transcript;
  out.version = c.version;
  out.after_chars = reducible();
  out.after_tokens = EstimateTokens(out.after_chars + sizes.tool_catalog_chars);
  c.last_full_tokens = out.after_tokens;
  c.chars_at_last_prepare = c.transcript.chars();
  return out;
}

Result<Plan> Compactor::PlanFor(const std::string& session, const RequestSizes& sizes) {
  auto cache = impl_->Cache(session);
  SessionCache& c = *cache;
  std::lock_guard<std::mutex> lock(c.mu);
  Status synced = impl_->Sync(session, c);
  RECAP_RETURN_IF_ERROR(synced);
  Plan plan;
  impl_->Evaluate(sizes, c, plan);
  CutOptions options;
  options.keep_turns = impl_->config.compaction.keep_turns;
  options.kept_chars_limit = impl_->KeptLimit(plan);
  plan.cut = FindCut(c.transcript, options);
  if (plan.cut.ok()) {
    // The checkpoint's size is not known before the model writes it; estimate it as a
    // twentieth of what it replaces, within the summarizer's output budget.
    const std::size_t checkpoint_estimate =
        std::min(plan.cut.summarized_chars,
                 std::min<std::size_t>(2000 + plan.cut.summarized_chars / 20,
                                       impl_->config.compaction.max_output_tokens * 4));
    plan.estimated_after_chars =
        sizes.instructions_chars + checkpoint_estimate + plan.cut.kept_chars;
  } else {
    plan.estimated_after_chars = plan.reducible_chars;
  }
  plan.would_reduce = plan.estimated_after_chars > impl_->config.limits.max_context_chars;
  return plan;
}

Result<CompactOutcome> Compactor::Compact(const std::string& session, const CompactOptions& options,
                                          const CancellationToken& cancel) {
  auto cache = impl_->Cache(session);
  SessionCache& c = *cache;
  std::lock_guard<std::mutex> lock(c.mu);
  Status synced = impl_->Sync(session, c);
  RECAP_RETURN_IF_ERROR(synced);
  Plan plan;
  impl_->Evaluate(options.sizes, c, plan);
  Attempt a = impl_->RunCompaction(session, c, options.sizes, plan, CompactionReason::kManual,
                                   CutMode::kNormal, options.focus, cancel);
  impl_->SaveLearned(session, c);
  if (a.kind == AttemptKind::kFailed) return a.error;
  a.outcome.version = c.version;
  if (a.kind == AttemptKind::kSkipped)
    a.outcome.before_chars = a.outcome.after_chars = c.transcript.chars();
  return a.outcome;
}

void Compactor::ReportOverflow(const std::string& session,
                               std::optional<std::size_t> rejected_tokens) {
  auto cache = impl_->Cache(session);
  SessionCache& c = *cache;
  std::lock_guard<std::mutex> lock(c.mu);
  // What the store knows first (another host may have learned something), then this; a store
  // that cannot be read now still gets the report in memory.
  (void)impl_->Sync(session, c);
  c.overflow_pending = true;
  const std::size_t rejected = rejected_tokens ? *rejected_tokens : c.last_full_tokens;
  if (rejected > 0) {
    c.overflow_window = c.overflow_window ? std::min(*c.overflow_window, rejected) : rejected;
  }
  impl_->SaveLearned(session, c);
}

void Compactor::ReportPromptTokens(const std::string& session, std::size_t prompt_tokens) {
  auto cache = impl_->Cache(session);
  SessionCache& c = *cache;
  std::lock_guard<std::mutex> lock(c.mu);
  (void)impl_->Sync(session, c);
  c.reported_prompt_tokens = prompt_tokens;
  c.chars_at_report = c.chars_at_last_prepare;
  // Kept in the store only when calibration uses it (R2.4): otherwise it is never read.
  if (impl_->config.compaction.calibrate) impl_->SaveLearned(session, c);
}

Result<RecoveryOutcome> Compactor::Recover(const std::string& session, bool acknowledge) {
  auto cache = impl_->Cache(session);
  SessionCache& c = *cache;
  std::lock_guard<std::mutex> lock(c.mu);
  Status synced = impl_->Sync(session, c);
  RECAP_RETURN_IF_ERROR(synced);
  RecoveryOutcome out;
  out.version = c.version;
  const Transcript& t = c.transcript;
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
        "session \"" + session + "\" has " + std::to_string(uncertain.size()) +
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
  commit.expected_version = c.version;
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
          "session \"" + session + "\" cannot be recovered by recording results: " +
          std::to_string(still.size()) + " tool call(s) share their id with a later call (" + list +
          "), so a recorded result would answer the later call and these would stay "
          "open. Nothing was recorded. The session's messages need distinct call ids: store a "
          "corrected copy as a new session");
    }
  }
  auto committed = impl_->store->CommitRecovery(session, commit);
  if (!committed.ok()) {
    if (committed.status().code() == StatusCode::kConflict) c.loaded = false;
    return committed.status().WithContext("could not save the recovery");
  }
  c.loaded = false;  // positions moved: reload the whole transcript once
  Status reloaded = impl_->Sync(session, c);
  RECAP_RETURN_IF_ERROR(reloaded);
  out.recovered = std::move(uncertain);
  out.version = c.version;
  return out;
}

const Config& Compactor::config() const noexcept { return impl_->config; }

Compactor::CacheStats Compactor::cache_stats() const {
  const auto [sessions, bytes] = impl_->CacheFigures();
  return CacheStats{sessions, bytes, impl_->config.cache.max_bytes};
}
SessionStore& Compactor::store() noexcept { return *impl_->store; }

}  // namespace v0
}  // namespace recap
