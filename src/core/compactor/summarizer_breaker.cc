#include "compactor/summarizer_breaker.h"

#include <algorithm>

namespace recap {
inline namespace v0 {
namespace compactor_detail {

std::uint64_t SummarizerBreaker::WaitMs() const {
  std::lock_guard<std::mutex> lock(mu_);
  if (!until_) return 0;
  const TimeSource::time_point now = clock_->Now();
  if (now >= *until_) return 0;
  return static_cast<std::uint64_t>(
      std::chrono::duration_cast<std::chrono::milliseconds>(*until_ - now).count());
}

void SummarizerBreaker::Record(bool ok, bool automatic) {
  std::lock_guard<std::mutex> lock(mu_);
  if (ok) {
    failures_ = 0;
    until_.reset();
    wait_ = kFirstWait;
    return;
  }
  if (!automatic) return;
  if (++failures_ < kFailures) return;
  until_ = clock_->Now() + wait_;
  wait_ = std::min(wait_ * 2, kMaxWait);
}

}  // namespace compactor_detail
}  // namespace v0
}  // namespace recap
