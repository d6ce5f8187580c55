// R1.2, R12.2: the context window as the provider reports it, one per Compactor. Asked when
// first needed; a failure is asked again after a wait that starts at a minute and doubles up
// to ten; a provider that says it reports none (kNotFound) is not asked again, nor one that
// gave a window recap trusts (at most kMaxTrustedContextWindow tokens).
//
// Thread-safe: each method takes the source's own lock. Get holds it while the provider is
// asked, so that two calls never ask at once; the provider may not call the Compactor back
// (a CallScope is around every call that reaches here).
#ifndef RECAP_SRC_CORE_COMPACTOR_WINDOW_SOURCE_H_
#define RECAP_SRC_CORE_COMPACTOR_WINDOW_SOURCE_H_

#include <chrono>
#include <cstddef>
#include <memory>
#include <mutex>
#include <optional>
#include <string>

#include "recap/provider.h"
#include "recap/time_source.h"

namespace recap {
inline namespace v0 {
namespace compactor_detail {

class WindowSource {
 public:
  static constexpr std::chrono::milliseconds kFirstRetry{60000};
  static constexpr std::chrono::milliseconds kMaxRetry{600000};

  WindowSource(std::shared_ptr<Provider> provider, std::shared_ptr<TimeSource> clock)
      : provider_(std::move(provider)), clock_(std::move(clock)) {}
  WindowSource(const WindowSource&) = delete;
  WindowSource& operator=(const WindowSource&) = delete;

  // The provider's window in tokens, asking it when the wait allows; nullopt while unknown.
  std::optional<std::size_t> Get();

  // Why the window is unknown when asking failed (the error, or a window recap does not
  // trust): what window_unknown reports. Nothing when it is known, not asked yet, or the
  // provider said it reports none.
  std::optional<std::string> Failure() const;

 private:
  const std::shared_ptr<Provider> provider_;
  const std::shared_ptr<TimeSource> clock_;

  mutable std::mutex mu_;
  // Guarded by mu_:
  bool final_ = false;  // known, or reported as never known
  std::optional<std::size_t> window_;
  std::string error_;  // why it is unknown
  bool loud_ = false;  // error_ is a failure, not "the provider reports none"
  std::optional<TimeSource::time_point> next_query_;
  std::chrono::milliseconds retry_{kFirstRetry};
};

}  // namespace compactor_detail
}  // namespace v0
}  // namespace recap

#endif  // RECAP_SRC_CORE_COMPACTOR_WINDOW_SOURCE_H_
