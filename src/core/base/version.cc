#include "recap/version.h"

namespace recap {
inline namespace v0 {

const char* LibraryVersion() noexcept { return RECAP_VERSION_STRING; }

}  // namespace v0
}  // namespace recap
