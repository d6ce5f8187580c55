#include "recap/time_source.h"

namespace recap {
inline namespace v0 {

TimeSource::~TimeSource() = default;

namespace {

class Steady final : public TimeSource {
 public:
  std::chrono::steady_clock::time_point Now() override { return std::chrono::steady_clock::now(); }
};

}  // namespace

std::shared_ptr<TimeSource> SteadyTimeSource() {
  static const std::shared_ptr<TimeSource> kSteady = std::make_shared<Steady>();
  return kSteady;
}

}  // namespace v0
}  // namespace recap
