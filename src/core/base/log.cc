#include "recap/log.h"

#include <cstdio>
#include <mutex>

#include <spdlog/logger.h>
#include <spdlog/sinks/base_sink.h>

#include "recap_internal/printable.h"

namespace recap {
inline namespace v0 {

namespace {

spdlog::level::level_enum ToSpd(LogLevel level) {
  switch (level) {
    case LogLevel::kTrace: return spdlog::level::trace;
    case LogLevel::kDebug: return spdlog::level::debug;
    case LogLevel::kInfo: return spdlog::level::info;
    case LogLevel::kWarn: return spdlog::level::warn;
    case LogLevel::kError: return spdlog::level::err;
    case LogLevel::kOff: return spdlog::level::off;
  }
  return spdlog::level::off;
}

LogLevel FromSpd(spdlog::level::level_enum level) {
  switch (level) {
    case spdlog::level::trace: return LogLevel::kTrace;
    case spdlog::level::debug: return LogLevel::kDebug;
    case spdlog::level::info: return LogLevel::kInfo;
    case spdlog::level::warn: return LogLevel::kWarn;
    case spdlog::level::err:
    case spdlog::level::critical: return LogLevel::kError;
    default: return LogLevel::kOff;
  }
}

// Forwards formatted records to the host's handler, or to stderr when there is none.
class HandlerSink final : public spdlog::sinks::base_sink<std::mutex> {
 public:
  void SetHandler(LogHandler handler) {
    std::lock_guard<std::mutex> lock(mutex_);
    handler_ = std::move(handler);
  }

 protected:
  void sink_it_(const spdlog::details::log_msg& msg) override {
    const std::string_view text(msg.payload.data(), msg.payload.size());
    if (handler_) {
      handler_(FromSpd(msg.level), text);
    } else {
      std::fprintf(stderr, "[recap] %s: %.*s\n", LogLevelName(FromSpd(msg.level)),
                   static_cast<int>(text.size()), text.data());
    }
  }
  void flush_() override {}

 private:
  LogHandler handler_;
};

struct LoggerState {
  std::shared_ptr<HandlerSink> sink = std::make_shared<HandlerSink>();
  spdlog::logger logger{"recap", sink};
  LoggerState() { logger.set_level(spdlog::level::off); }
};

LoggerState& State() {
  static LoggerState state;  // constructed on first use; thread-safe since C++11
  return state;
}

}  // namespace

void Log(LogLevel level, std::string_view message) {
  if (level >= LogLevel::kOff) return;
  spdlog::logger& logger = State().logger;
  const spdlog::level::level_enum spd = ToSpd(level);
  if (!logger.should_log(spd)) return;
  // One record, one line, nothing a terminal acts on: a session id or a reply quoted in the
  // text has its control characters escaped (internal::Printable).
  const std::string line = internal::Printable(message);
  logger.log(spd, spdlog::string_view_t(line.data(), line.size()));
}

void SetLogHandler(LogLevel level, LogHandler handler) {
  State().sink->SetHandler(std::move(handler));
  State().logger.set_level(ToSpd(level));
}

void SetLogLevel(LogLevel level) { State().logger.set_level(ToSpd(level)); }

LogLevel GetLogLevel() noexcept { return FromSpd(State().logger.level()); }

const char* LogLevelName(LogLevel level) noexcept {
  switch (level) {
    case LogLevel::kTrace: return "trace";
    case LogLevel::kDebug: return "debug";
    case LogLevel::kInfo: return "info";
    case LogLevel::kWarn: return "warn";
    case LogLevel::kError: return "error";
    case LogLevel::kOff: return "off";
  }
  return "off";
}

}  // namespace v0
}  // namespace recap
