// A consumer of the installed recap::http: builds a provider, checks that bad options are
// refused with a message, and that a server that is not there is a classified failure.
#include <cstdio>
#include <string>

#include "recap/http/http_provider.h"

namespace {
int failures = 0;
void Check(bool ok, const char* what, int line) {
  if (!ok) {
    std::fprintf(stderr, "http consumer: check failed (line %d): %s\n", line, what);
    ++failures;
  }
}
#define CHECK(cond) Check((cond), #cond, __LINE__)
}  // namespace

int main() {
  recap::HttpProviderOptions bad;  // no base URL, no model
  CHECK(!recap::NewHttpProvider(bad).ok());

  recap::HttpProviderOptions options;
  options.base_url = "http://127.0.0.1:1/v1";  // nothing listens on port 1
  options.model = "test-model";
  options.api_key = "sk-consumer-SECRET";
  options.max_retries = 0;
  options.connect_timeout_ms = 2000;
  auto provider = recap::NewHttpProvider(options);
  CHECK(provider.ok());
  if (provider.ok()) {
    recap::CompletionRequest request;
    request.system_prompt = "Summarize.";
    request.messages.push_back(recap::Message::UserText("hello"));
    auto reply = (*provider)->Complete(request, {});
    CHECK(!reply.ok());
    CHECK(reply.status().code() == recap::StatusCode::kUnavailable);
    CHECK(reply.status().message().find("SECRET") == std::string::npos);
  }
  if (failures) return 1;
  std::printf("http consumer: ok\n");
  return 0;
}
