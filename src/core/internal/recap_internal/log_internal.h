// Private: how recap's own code writes to recap's log. Never include from a public header.
#ifndef RECAP_SRC_CORE_RECAP_INTERNAL_LOG_INTERNAL_H_
#define RECAP_SRC_CORE_RECAP_INTERNAL_LOG_INTERNAL_H_

#include <string>
#include <utility>

#include <fmt/format.h>

#include "recap/log.h"

namespace recap {
inline namespace v0 {
namespace internal {

// Formats and writes one record when `level` is on; costs one level read when it is off.
// Every recap library logs through the public recap::Log (log.h), so that a shared build
// keeps one logger, in librecap_core, without exporting anything that is not public.
template <typename... Args>
void LogAt(LogLevel level, fmt::format_string<Args...> format, Args&&... args) {
  if (level < GetLogLevel()) return;
  Log(level, fmt::format(format, std::forward<Args>(args)...));
}

}  // namespace internal
}  // namespace v0
}  // namespace recap

#define RECAP_LOG_DEBUG(...) ::recap::internal::LogAt(::recap::LogLevel::kDebug, __VA_ARGS__)
#define RECAP_LOG_INFO(...) ::recap::internal::LogAt(::recap::LogLevel::kInfo, __VA_ARGS__)
#define RECAP_LOG_WARN(...) ::recap::internal::LogAt(::recap::LogLevel::kWarn, __VA_ARGS__)
#define RECAP_LOG_ERROR(...) ::recap::internal::LogAt(::recap::LogLevel::kError, __VA_ARGS__)

#endif  // RECAP_SRC_CORE_RECAP_INTERNAL_LOG_INTERNAL_H_
