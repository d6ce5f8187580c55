// Private: an incremental parser for server-sent events (the WHATWG EventSource format) as
// the OpenAI and Anthropic APIs stream them.
//
// Feed() takes the body in whatever pieces the network delivers; every complete event (the
// lines up to a blank line) is handed to the callback with its `event:` name and its `data:`
// lines joined by '\n'. Comments (lines starting with ':'), `id:` and `retry:` are ignored.
// Lines may end in "\n", "\r\n" or "\r". Finish() dispatches a last event that was not
// followed by a blank line, as EventSource does not — a caller that needs the end marker sees
// it missing either way.
#ifndef RECAP_SRC_HTTP_SSE_PARSER_H_
#define RECAP_SRC_HTTP_SSE_PARSER_H_

#include <cstddef>
#include <functional>
#include <string>
#include <string_view>

namespace recap {
inline namespace v0 {
namespace internal {
namespace http {

struct SseEvent {
  std::string event;  // empty when the server sent no `event:` line
  std::string data;
};

class SseParser {
 public:
  // Returns false to stop: Feed() then returns false too and ignores further input.
  using Callback = std::function<bool(const SseEvent&)>;
  explicit SseParser(Callback callback) : callback_(std::move(callback)) {}

  bool Feed(std::string_view chunk);
  // Dispatches a pending event, if any. Returns false if the callback stopped.
  bool Finish();

 private:
  bool Line(std::string_view line);
  bool Dispatch();

  Callback callback_;
  std::string line_;  // an incomplete line carried over from the previous chunk
  bool last_was_cr_ = false;
  SseEvent pending_;
  bool has_data_ = false;
  bool stopped_ = false;
};

}  // namespace http
}  // namespace internal
}  // namespace v0
}  // namespace recap

#endif  // RECAP_SRC_HTTP_SSE_PARSER_H_
