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

class RECAP_EXPORT TimeSource {
 public:
  using time_point = std::chrono::steady_clock::time_point;
  virtual ~TimeSource();
  virtual time_point Now() = 0;
};

/// std::chrono::steady_clock.
RECAP_EXPORT std::shared_ptr<TimeSource> SteadyTimeSource();

}  // namespace v0
}  // namespace recap

#endif  // RECAP_TIME_SOURCE_H_
