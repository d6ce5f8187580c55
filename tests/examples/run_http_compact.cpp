// Runs examples/http_compact against a real HTTP server on 127.0.0.1 (support/http_test_server.h)
// that plays an OpenAI-compatible model: its model list reports a context window, and its
// chat completion returns a checkpoint. The example is started as a child process with the
// server named by environment variables, as a user would run it; this test checks that it
// compacted through the server and printed the checkpoint.
//
//   run_http_compact <path of recap_http_compact>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <cstdio>
#include <cstdlib>
#include <string>

#include <nlohmann/json.hpp>

#include "support/http_test_server.h"

using recap::testing::HttpTestServer;
using recap::testing::ScriptedHttpResponse;

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s <recap_http_compact>\n", argv[0]);
    return 2;
  }
  HttpTestServer server;
  server.Route("GET", "/v1/models",
               ScriptedHttpResponse::Json(
                   200, R"({"data": [{"id": "scripted-model", "context_length": 32768}]})"));
  const std::string checkpoint =
      R"({"goal": "Change the user's flight reservation", "instructions": ["Confirm before booking"], )"
      R"("current_state": "Reservation found; waiting for the user's confirmation", )"
      R"("accomplished": ["Looked up the reservation"], "next_steps": ["Book the new flight"]})";
  nlohmann::json reply = {
      {"id", "chatcmpl-1"},
      {"object", "chat.completion"},
      {"choices", {{{"index", 0},
                    {"message", {{"role", "assistant"}, {"content", checkpoint}}},
                    {"finish_reason", "stop"}}}},
      {"usage", {{"prompt_tokens", 1234}, {"completion_tokens", 56}}}};
  server.SetDefault(ScriptedHttpResponse::Json(200, reply.dump()));

  const std::string command = std::string("env -u RECAP_API_KEY_ENV -u RECAP_PROTOCOL ") +
                              "RECAP_BASE_URL=" + server.BaseUrl() + "/v1 " +
                              "RECAP_MODEL=scripted-model RECAP_API_KEY=sk-example-SECRET '" +
                              argv[1] + "' 2>&1";
  FILE* pipe = ::popen(command.c_str(), "r");
  if (pipe == nullptr) {
    std::perror("popen");
    return 1;
  }
  std::string output;
  std::array<char, 4096> buffer{};
  std::size_t n = 0;
  while ((n = std::fread(buffer.data(), 1, buffer.size(), pipe)) > 0) output.append(buffer.data(), n);
  const int status = ::pclose(pipe);
  std::fputs(output.c_str(), stdout);

  int failures = 0;
  auto expect = [&](bool ok, const char* what) {
    if (!ok) {
      std::fprintf(stderr, "run_http_compact: FAILED: %s\n", what);
      ++failures;
    }
  };
  expect(WIFEXITED(status) && WEXITSTATUS(status) == 0, "the example exits 0");
  expect(output.find("compaction_completed") != std::string::npos,
         "the example reports compaction_completed");
  expect(output.find("Change the user's flight reservation") != std::string::npos,
         "the example prints the checkpoint the server wrote");
  expect(output.find("SECRET") == std::string::npos, "the API key is never printed");
  bool posted = false;
  for (const auto& r : server.Requests()) {
    if (r.method == "POST" && r.path == "/v1/chat/completions") {
      posted = true;
      expect(r.Header("authorization") == "Bearer sk-example-SECRET", "the key is sent as a bearer token");
    }
  }
  expect(posted, "the example posted a chat completion to the server");
  return failures == 0 ? 0 : 1;
}
