// The JSONL event sinks (SPEC R10).
//
// Both sinks hold a mutex around write + flush: one sink is shared by every session of a
// Compactor, and without the lock two events written at once could interleave inside a line.
// Flushing after each event costs a write(2) per event, which is fine at a few events per
// compaction, and means a host that crashes loses no event already reported.

#include "recap/events.h"

#include <cerrno>
#include <cstdio>
#include <mutex>
#include <string>
#include <system_error>
#include <utility>

#include "recap_internal/log_internal.h"

namespace recap {
inline namespace v0 {

const char* EventTypeName(EventType type) noexcept {
  switch (type) {
    case EventType::kCompactionStarted: return "compaction_started";
    case EventType::kCompactionProgress: return "compaction_progress";
    case EventType::kCompactionCompleted: return "compaction_completed";
    case EventType::kCompactionSkipped: return "compaction_skipped";
    case EventType::kContextReduced: return "context_reduced";
    case EventType::kCompactionFailed: return "compaction_failed";
    case EventType::kPluginHookFailed: return "plugin_hook_failed";
    case EventType::kWindowUnknown: return "window_unknown";
    case EventType::kProviderCheckpoint: return "provider_checkpoint";
    case EventType::kToolResultsCleared: return "tool_results_cleared";
    case EventType::kCompactionDiscarded: return "compaction_discarded";
    case EventType::kCompactionUndone: return "compaction_undone";
  }
  return "unknown";
}

EventSink::~EventSink() = default;

namespace {

// An event's JSON is one line by contract, but a host may hand a sink its own Event. A raw
// line break can only sit between JSON tokens (inside a string it would be invalid JSON), so
// turning it into a space keeps the meaning and the one-event-per-line promise.
std::string AsLine(const std::string& json) {
  std::string line = json;
  for (char& c : line) {
    if (c == '\n' || c == '\r') c = ' ';
  }
  line += '\n';
  return line;
}

class JsonlStreamSink final : public EventSink {
 public:
  explicit JsonlStreamSink(std::ostream& out) : out_(out) {}

  void OnEvent(const Event& event) override {
    const std::string line = AsLine(event.json);
    std::lock_guard<std::mutex> lock(mutex_);
    out_.write(line.data(), static_cast<std::streamsize>(line.size()));
    out_.flush();
  }

 private:
  std::mutex mutex_;
  std::ostream& out_;
};

class JsonlFileSink final : public EventSink {
 public:
  JsonlFileSink(std::FILE* file, std::string path) : file_(file), path_(std::move(path)) {}
  ~JsonlFileSink() override { std::fclose(file_); }
  JsonlFileSink(const JsonlFileSink&) = delete;
  JsonlFileSink& operator=(const JsonlFileSink&) = delete;

  void OnEvent(const Event& event) override {
    const std::string line = AsLine(event.json);
    std::lock_guard<std::mutex> lock(mutex_);
    errno = 0;
    const bool ok =
        std::fwrite(line.data(), 1, line.size(), file_) == line.size() && std::fflush(file_) == 0;
    const int err = errno;
    // A full disk would otherwise log once per event; say it when it starts and when it ends.
    if (!ok) {
      if (!failing_) {
        RECAP_LOG_WARN("cannot write to the event log {}: {}; events are being lost", path_,
                       std::generic_category().message(err));
      }
      std::clearerr(file_);
    } else if (failing_) {
      RECAP_LOG_WARN("writing to the event log {} works again", path_);
    }
    failing_ = !ok;
  }

 private:
  std::mutex mutex_;
  std::FILE* file_;
  const std::string path_;
  bool failing_ = false;
};

}  // namespace

std::shared_ptr<EventSink> NewJsonlSink(std::ostream& out) {
  return std::make_shared<JsonlStreamSink>(out);
}

Result<std::shared_ptr<EventSink>> NewJsonlFileSink(const std::string& path) {
  // Append mode (O_APPEND): every write lands at the current end of the file, so a log that
  // another process also appends to, or that was truncated by a rotation tool, is never
  // overwritten. "b" keeps Windows from writing "\r\n". "e" (glibc) sets close-on-exec: agent
  // hosts spawn tools, and a tool should not inherit the host's event log.
#if defined(__GLIBC__)
  const char* mode = "abe";
#else
  const char* mode = "ab";
#endif
  errno = 0;
  std::FILE* file = std::fopen(path.c_str(), mode);
  if (file == nullptr) {
    const int err = errno;
    return Status::IOError("cannot open the event log \"" + path +
                           "\" for appending: " + std::generic_category().message(err) +
                           ". Check that its directory exists and is writable.");
  }
  return std::shared_ptr<EventSink>(std::make_shared<JsonlFileSink>(file, path));
}

}  // namespace v0
}  // namespace recap
