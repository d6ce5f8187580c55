#include "sse_parser.h"

namespace recap {
inline namespace v0 {
namespace internal {
namespace http {

bool SseParser::Feed(std::string_view chunk) {
  if (stopped_) return false;
  for (char c : chunk) {
    if (c == '\n' && last_was_cr_) {  // the second half of "\r\n"
      last_was_cr_ = false;
      continue;
    }
    last_was_cr_ = (c == '\r');
    if (c == '\n' || c == '\r') {
      const bool go_on = Line(line_);
      line_.clear();
      if (!go_on) {
        stopped_ = true;
        return false;
      }
    } else {
      line_.push_back(c);
    }
  }
  return true;
}

bool SseParser::Finish() {
  if (stopped_) return false;
  if (!line_.empty()) {
    const bool go_on = Line(line_);
    line_.clear();
    if (!go_on) return false;
  }
  return Dispatch();
}

bool SseParser::Line(std::string_view line) {
  if (line.empty()) return Dispatch();
  if (line.front() == ':') return true;  // a comment, e.g. a keep-alive
  std::string_view field = line;
  std::string_view value;
  const auto colon = line.find(':');
  if (colon != std::string_view::npos) {
    field = line.substr(0, colon);
    value = line.substr(colon + 1);
    if (!value.empty() && value.front() == ' ') value.remove_prefix(1);
  }
  if (field == "data") {
    if (has_data_) pending_.data.push_back('\n');
    pending_.data.append(value);
    has_data_ = true;
  } else if (field == "event") {
    pending_.event = std::string(value);
  }
  return true;
}

bool SseParser::Dispatch() {
  if (!has_data_) {
    pending_ = SseEvent{};
    return true;
  }
  SseEvent event = std::move(pending_);
  pending_ = SseEvent{};
  has_data_ = false;
  return callback_(event);
}

}  // namespace http
}  // namespace internal
}  // namespace v0
}  // namespace recap
