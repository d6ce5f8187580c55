// R12.3: the summarizer's circuit breaker, one per Compactor (every session shares it): after
// three failures in a row of auto compactions' summarizer calls, auto compaction leaves the
// summarizer alone for 30 s, then 60 s, doubling up to 10 minutes; a success closes it.
//
// Thread-safe: each method takes the breaker's own lock and calls nothing out under it but the
// TimeSource.
#ifndef RECAP_SRC_CORE_COMPACTOR_SUMMARIZER_BREAKER_H_
#define RECAP_SRC_CORE_COMPACTOR_SUMMARIZER_BREAKER_H_

#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>

#include "recap/time_source.h"

namespace recap {
inline namespace v0 {
namespace compactor_detail {

class SummarizerBreaker {
 public:
  static constexpr int kFailures = 3;
  static constexpr std::chrono::milliseconds kFirstWait{30000};
  static constexpr std::chrono::milliseconds kMaxWait{600000};

  explicit SummarizerBreaker(std::shared_ptr<TimeSource> clock) : clock_(std::move(clock)) {}
  SummarizerBreaker(const SummarizerBreaker&) = delete;
  SummarizerBreaker& operator=(const SummarizerBreaker&) = delete;

  // How long auto compaction still leaves the summarizer alone, in milliseconds (0: it does
  // not; Plan::summarizer_backoff_ms).
  std::uint64_t WaitMs() const;

  // What one summarizer call of a compaction came to. A failure counts only when the
  // compaction was `automatic` (a host's own Compact never opens the breaker).
  void Record(bool ok, bool automatic);

 private:
  const std::shared_ptr<TimeSource> clock_;

  mutable std::mutex mu_;
  // Guarded by mu_:
  int failures_ = 0;                             // in a row
  std::optional<TimeSource::time_point> until_;  // open until then
  std::chrono::milliseconds wait_{kFirstWait};   // how long it opens next time
};

}  // namespace compactor_detail
}  // namespace v0
}  // namespace recap

#endif  // RECAP_SRC_CORE_COMPACTOR_SUMMARIZER_BREAKER_H_
