// R2 evaluated into a Plan, the context window it is judged against (R1.2, R12.2), and the
// sizes a compaction may use: the kept part (R3.8), the offline checkpoint, one summarizer
// request (R4.7).
#include <algorithm>
#include <cmath>

#include "compactor/compactor_impl.h"

namespace recap {
inline namespace v0 {

Compactor::Impl::WindowChoice Compactor::Impl::Window(const RequestSizes& sizes,
                                                      const SessionCache& c) {
  auto trusted = [](std::optional<std::size_t> w) -> std::optional<std::size_t> {
    if (w && *w > 0 && *w <= kMaxTrustedContextWindow) return w;
    return std::nullopt;
  };
  WindowChoice w;
  if ((w.tokens = trusted(config.provider.context_window))) {
    w.source = "config";
  } else if ((w.tokens = trusted(sizes.profile_context_window))) {
    w.source = "profile";
  } else if ((w.tokens = window_source.Get())) {
    w.source = "provider";
  }
  if (c.overflow_window() && (!w.tokens || *c.overflow_window() < *w.tokens)) {
    w.tokens = c.overflow_window();
    w.source = "overflow";
  }
  return w;
}

void Compactor::Impl::SayWindowUnknown(const std::string& session, SessionCache& c,
                                       const Plan& plan) {
  if (plan.window_source != std::string("fallback")) return;
  const std::optional<std::string> failure = window_source.Failure();
  if (!failure) return;  // not asked yet, or the provider reports none: nothing failed
  if (!c.SayWindowUnknownOnce()) return;
  const std::string& error = *failure;
  events.Emit(EventType::kWindowUnknown, session,
              internal::WindowUnknownFields(error, FallbackWindow(), "maxContextChars / 4"));
  RECAP_LOG_WARN(
      "session {}: the context window is unknown ({}); the triggers use "
      "maxContextChars / 4 = {} tokens until it is known",
      session, error, FallbackWindow());
}

void Compactor::Impl::Evaluate(const RequestSizes& sizes, const SessionCache& c, Plan& plan) {
  const std::size_t t_chars = c.transcript().chars();
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
  if (config.compaction.calibrate && c.reported_prompt_tokens()) {
    // R2.4: what the provider counted for the last request, plus an estimate of what
    // was added since.
    const std::size_t added = t_chars > c.chars_at_report() ? t_chars - c.chars_at_report() : 0;
    used_tokens = *c.reported_prompt_tokens() + EstimateTokens(added);
  }
  plan.trigger = false;
  plan.rule.clear();
  plan.reason.reset();
  if (c.overflow_pending()) {
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
  plan.paused = c.paused();
  // R12.4: what no compaction can shrink reaches the trigger by itself: instructions (the
  // host's and the session's own, R12.1), pinned messages and the tool catalog.
  const std::size_t fixed = sizes.instructions_chars + StoredInstructionsChars(c.transcript()) +
                            c.pinned_chars() + sizes.tool_catalog_chars;
  plan.irreducible = EstimateTokens(fixed) >= plan.trigger_tokens || fixed >= plan.trigger_chars;
  plan.summarizer_backoff_ms = breaker.WaitMs();
}

std::size_t Compactor::Impl::KeptLimit(const Plan& plan) const {
  const std::size_t by_window = plan.trigger_tokens * 4;
  const std::size_t trigger = std::min(by_window, plan.trigger_chars);
  return std::max<std::size_t>(1, trigger / 2);
}

std::size_t Compactor::Impl::OfflineOutputTokens(const Plan& plan) const {
  constexpr std::size_t kMinTokens = 500;  // about 2,000 characters: a goal, a state, a few
                                           // instructions, however small the window
  const std::size_t share = KeptLimit(plan) / 2 / 4;
  return std::min(config.compaction.max_output_tokens, std::max(share, kMinTokens));
}

std::size_t Compactor::Impl::RequestBudget(const Plan& plan) const {
  if (IsOffline(*provider)) return 0;
  const std::size_t window = plan.window_tokens ? *plan.window_tokens : FallbackWindow();
  const std::size_t out = config.compaction.max_output_tokens;
  std::size_t in_tokens = window > out ? window - out : 0;
  in_tokens = std::max(in_tokens, window / 2);
  return std::max<std::size_t>(16000, in_tokens * 4 * 9 / 10);
}

}  // namespace v0
}  // namespace recap
