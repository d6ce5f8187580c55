#include "recap/provider.h"

namespace recap {
inline namespace v0 {

const char* FinishReasonName(FinishReason reason) noexcept {
  switch (reason) {
    case FinishReason::kStop: return "stop";
    case FinishReason::kLength: return "length";
    case FinishReason::kOther: return "other";
  }
  return "other";
}

// Out of line so that the vtable has one home (the library), not one per translation unit.
Provider::~Provider() = default;

Result<std::size_t> Provider::QueryContextWindow() {
  if (std::optional<std::size_t> window = ContextWindow()) return *window;
  return Status::NotFound("the provider (" + Name() + ") does not report a context window");
}

Result<NativeCompaction> Provider::CompactNative(const NativeCompactionRequest&,
                                                 const CancellationToken&) {
  return Status::FailedPrecondition("the provider (" + Name() +
                                    ") has no native compaction; it writes checkpoints with "
                                    "Complete()");
}

}  // namespace v0
}  // namespace recap
