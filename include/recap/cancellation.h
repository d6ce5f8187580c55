/// @file
/// recap — cooperative cancellation.
///
/// A CancellationSource owns the flag; any number of CancellationTokens observe it. A
/// long-running call (a summarizer request, a chunked summary) checks its token between steps
/// and stops with StatusCode::kCancelled once cancellation is requested. Tokens are cheap to
/// copy and may outlive their source (they then stay in whatever state the source left).
///
/// Thread safety: Cancel() and IsCancelled() may race freely.
#ifndef RECAP_CANCELLATION_H_
#define RECAP_CANCELLATION_H_

#include <atomic>
#include <memory>

namespace recap {
inline namespace v0 {

/// What a long-running call watches to know whether it should stop; made by
/// CancellationSource::Token(), or default-constructed: never cancelled.
class CancellationToken {
 public:
  /// A token that is never cancelled.
  CancellationToken() = default;
  /// True once the source it came from was cancelled.
  bool IsCancelled() const noexcept { return flag_ && flag_->load(std::memory_order_acquire); }

 private:
  friend class CancellationSource;
  explicit CancellationToken(std::shared_ptr<std::atomic<bool>> flag) : flag_(std::move(flag)) {}
  std::shared_ptr<std::atomic<bool>> flag_;
};

/// Owns a cancellation flag and hands out tokens that observe it.
class CancellationSource {
 public:
  /// A source not cancelled yet.
  CancellationSource() : flag_(std::make_shared<std::atomic<bool>>(false)) {}
  /// Requests cancellation: every token of this source reads cancelled from now on.
  void Cancel() noexcept { flag_->store(true, std::memory_order_release); }
  /// True once Cancel() was called.
  bool IsCancelled() const noexcept { return flag_->load(std::memory_order_acquire); }
  /// A token observing this source.
  CancellationToken Token() const { return CancellationToken(flag_); }

 private:
  std::shared_ptr<std::atomic<bool>> flag_;
};

}  // namespace v0
}  // namespace recap

#endif  // RECAP_CANCELLATION_H_
