// Private: the logger recap's own code writes to. Never include from a public header.
#ifndef RECAP_SRC_CORE_RECAP_INTERNAL_LOG_INTERNAL_H_
#define RECAP_SRC_CORE_RECAP_INTERNAL_LOG_INTERNAL_H_

#include <memory>

#include <spdlog/spdlog.h>

#include "recap/export.h"

namespace recap {
inline namespace v0 {
namespace internal {

// recap's logger. It is not registered in spdlog's global registry, so it can never clash
// with the host's loggers; its level is kept at "off" until the host asks for records.
// Exported (but in no public header) so that recap's own components, such as recap::http,
// log through it from a shared librecap_core too.
RECAP_EXPORT spdlog::logger& Logger();

}  // namespace internal
}  // namespace v0
}  // namespace recap

#define RECAP_LOG_DEBUG(...) ::recap::internal::Logger().debug(__VA_ARGS__)
#define RECAP_LOG_INFO(...) ::recap::internal::Logger().info(__VA_ARGS__)
#define RECAP_LOG_WARN(...) ::recap::internal::Logger().warn(__VA_ARGS__)
#define RECAP_LOG_ERROR(...) ::recap::internal::Logger().error(__VA_ARGS__)

#endif  // RECAP_SRC_CORE_RECAP_INTERNAL_LOG_INTERNAL_H_
