// Fuzz target for the streaming reply path of recap::http: the server-sent-events parser fed
// in pieces of every size (the first bytes of the input choose where the body is split), and
// each event handed to the reply accumulator of both protocols. Checks: the events do not
// depend on how the body was split; whatever the stream holds ends in a completion or an error
// text, never a crash.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "fuzz_common.h"
#include "http/sse_parser.h"
#include "http/wire_format.h"

namespace http = recap::internal::http;

namespace {

std::vector<http::SseEvent> Parse(std::string_view body, std::size_t piece) {
  std::vector<http::SseEvent> events;
  http::SseParser parser([&](const http::SseEvent& e) {
    events.push_back(e);
    return true;
  });
  for (std::size_t at = 0; at < body.size(); at += piece) {
    parser.Feed(body.substr(at, piece));
  }
  parser.Finish();
  return events;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size == 0) return 0;
  const std::size_t piece = 1 + data[0] % 17;
  const std::string_view body(reinterpret_cast<const char*>(data) + 1, size - 1);

  const std::vector<http::SseEvent> whole = Parse(body, body.size() + 1);
  const std::vector<http::SseEvent> split = Parse(body, piece);
  RECAP_FUZZ_REQUIRE(whole.size() == split.size(), "the split does not change the events");
  for (std::size_t i = 0; i < whole.size(); ++i) {
    RECAP_FUZZ_REQUIRE(whole[i].event == split[i].event && whole[i].data == split[i].data,
                       "the split does not change an event");
  }

  for (recap::HttpProtocol protocol :
       {recap::HttpProtocol::kOpenAiChat, recap::HttpProtocol::kAnthropic,
        recap::HttpProtocol::kOpenAiResponses}) {
    http::StreamAccumulator accumulator(protocol);
    for (const http::SseEvent& e : whole) {
      if (!accumulator.OnEvent(e)) break;
    }
    if (accumulator.malformed()) {
      RECAP_FUZZ_REQUIRE(!accumulator.error().empty(), "a malformed stream says what was wrong");
    }
    const recap::Completion completion = accumulator.Take();
    (void)completion;
  }
  return 0;
}
