/// @file
/// recap — TimeSource: the time the Compactor reads for its back-offs.
///
/// The Compactor waits before asking an unreachable provider for its context window again
/// (R12.2) and before calling a summarizer that keeps failing (R12.3). It reads the time from a
/// TimeSource: by default the machine's monotonic clock. A host never needs another one; a test
/// or a simulation gives its own to move time forward without waiting.
///
/// Thread safety: Now() may be called from several threads at once.
#ifndef RECAP_TIME_SOURCE_H_
#define RECAP_TIME_SOURCE_H_

#include <chrono>
#include <memory>

#include "recap/export.h"

namespace recap {
inline namespace v0 {

/// A clock the Compactor reads for its back-offs (see above); Compactor::Create takes one.
class RECAP_EXPORT TimeSource {
 public:
  /// A point in time, as std::chrono::steady_clock counts it.
  using time_point = std::chrono::steady_clock::time_point;
  virtual ~TimeSource();
  /// The time now.
  virtual time_point Now() = 0;
};

/// The machine's monotonic clock, std::chrono::steady_clock: the Compactor's default.
RECAP_EXPORT std::shared_ptr<TimeSource> SteadyTimeSource();

}  // namespace v0
}  // namespace recap

#endif  // RECAP_TIME_SOURCE_H_
