#include "compactor/window_source.h"

#include <algorithm>
#include <exception>

#include "recap/config.h"
#include "recap/status.h"

namespace recap {
inline namespace v0 {
namespace compactor_detail {

std::optional<std::size_t> WindowSource::Get() {
  std::lock_guard<std::mutex> lock(mu_);
  if (final_) return window_;
  const TimeSource::time_point now = clock_->Now();
  if (next_query_ && now < *next_query_) return std::nullopt;
  Result<std::size_t> asked = Status::Internal("");
  try {
    asked = provider_->QueryContextWindow();
  } catch (const std::exception& e) {
    asked = Status::Internal(std::string("it threw an exception: ") + e.what());
  } catch (...) {
    asked = Status::Internal("it threw a non-standard exception");
  }
  if (asked.ok() && *asked > 0 && *asked <= kMaxTrustedContextWindow) {
    window_ = *asked;
    final_ = true;
    error_.clear();
    loud_ = false;
    return window_;
  }
  if (!asked.ok() && asked.status().code() == StatusCode::kNotFound) {
    final_ = true;  // it reports none, now or later
    error_ = asked.status().message();
    loud_ = false;
    return std::nullopt;
  }
  error_ = asked.ok()
               ? "the provider reported " + std::to_string(*asked) + " tokens, more than the " +
                     std::to_string(kMaxTrustedContextWindow) + " recap trusts"
               : asked.status().message();
  loud_ = true;
  next_query_ = now + retry_;
  retry_ = std::min(retry_ * 2, kMaxRetry);
  return std::nullopt;
}

std::optional<std::string> WindowSource::Failure() const {
  std::lock_guard<std::mutex> lock(mu_);
  if (!loud_) return std::nullopt;
  return error_;
}

}  // namespace compactor_detail
}  // namespace v0
}  // namespace recap
