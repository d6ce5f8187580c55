// Fuzz target for what recap::http reads from a server's JSON: the model list (context-window
// discovery, SPEC R1.2), a whole reply of either protocol, and an error body. Any JSON must end
// in a value, a completion or a status with a message — never a crash — and a discovered window
// is a positive number.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "fuzz_common.h"
#include "http/wire_format.h"

namespace http = recap::internal::http;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view input(reinterpret_cast<const char*>(data), size);
  // As the provider reads a body: JSON nested deeper than recap's limit is refused before it
  // is parsed (a depth bomb then costs one scan, not a million-level tree).
  const nlohmann::json body = http::ParseServerJson(input);
  if (body.is_discarded()) return 0;

  for (const char* model : {"gpt-4o", "llama", "", "scripted-model"}) {
    std::string field;
    const std::optional<std::size_t> window = http::FindContextWindow(body, model, &field);
    if (window) {
      RECAP_FUZZ_REQUIRE(*window > 0, "a discovered window is positive");
      RECAP_FUZZ_REQUIRE(!field.empty(), "a discovered window names its field");
    }
  }
  for (recap::HttpProtocol protocol :
       {recap::HttpProtocol::kOpenAiChat, recap::HttpProtocol::kAnthropic,
        recap::HttpProtocol::kOpenAiResponses}) {
    recap::Result<recap::Completion> reply = http::ParseReply(protocol, body);
    if (!reply.ok()) {
      RECAP_FUZZ_REQUIRE(!reply.status().message().empty(), "a refused reply says why");
    }
  }
  (void)http::ErrorText(body);
  (void)http::ErrorKind(body);
  return 0;
}
