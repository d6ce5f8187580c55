#include "recap/version.h"

namespace recap {
inline namespace v0 {

const char* Version() noexcept { return RECAP_VERSION_STRING; }

}  // namespace v0
}  // namespace recap
