/// @file
/// recap — where recap's diagnostics go.
///
/// recap logs through spdlog internally, but no spdlog type crosses this header. By default
/// recap is silent (LogLevel::kOff). A host turns logging on by choosing a level and, usually,
/// handing recap a callback that forwards records to the host's own logger — a few lines for
/// an spdlog, glog or syslog user:
///
/// ```cpp
///   recap::SetLogHandler(recap::LogLevel::kInfo,
///       [](recap::LogLevel lvl, std::string_view msg) { my_logger.log(lvl, msg); });
/// ```
///
/// Without a callback, records at or above the level go to stderr. Log records never contain
/// message contents or secrets (API keys), only sizes, ids and decisions.
///
/// Thread safety: all functions may be called from any thread; the handler may be called
/// concurrently from several threads and must be thread-safe itself.
#ifndef RECAP_LOG_H_
#define RECAP_LOG_H_

#include <functional>
#include <string_view>

#include "recap/export.h"

namespace recap {
inline namespace v0 {

/// How much recap logs, from the most (kTrace) to nothing (kOff, the default).
enum class LogLevel : int { kTrace = 0, kDebug, kInfo, kWarn, kError, kOff };

/// Receives each record at or above the level set: its level and its text (no newline).
using LogHandler = std::function<void(LogLevel level, std::string_view message)>;

/// Sets the minimum level and where records go. An empty handler means stderr.
RECAP_EXPORT void SetLogHandler(LogLevel level, LogHandler handler);
/// Changes only the level.
RECAP_EXPORT void SetLogLevel(LogLevel level);
/// The minimum level set now.
RECAP_EXPORT LogLevel GetLogLevel() noexcept;
/// Writes one record at `level` to where recap's records go (the handler, or stderr), when
/// `level` is at or above the level set. recap's own libraries log through it; a host's own
/// store or provider may too, to keep its records beside recap's. kOff writes nothing.
RECAP_EXPORT void Log(LogLevel level, std::string_view message);

/// "trace", "debug", "info", "warn", "error", "off".
RECAP_EXPORT const char* LogLevelName(LogLevel level) noexcept;

}  // namespace v0
}  // namespace recap

#endif  // RECAP_LOG_H_
