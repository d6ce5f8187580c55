// recap_http_compact — compacts a bundled session through a real model server.
//
//   RECAP_BASE_URL=http://127.0.0.1:8080/v1 RECAP_MODEL=local recap_http_compact
//   RECAP_PROTOCOL=anthropic RECAP_BASE_URL=https://api.anthropic.com
//     RECAP_MODEL=claude-3-5-haiku-latest RECAP_API_KEY_ENV=ANTHROPIC_API_KEY recap_http_compact
//
// The server is named by environment variables:
//
//   RECAP_BASE_URL     the API's address (required), e.g. https://api.openai.com/v1
//   RECAP_MODEL        the model (required)
//   RECAP_PROTOCOL     openai_chat (default) or anthropic
//   RECAP_API_KEY      the API key, or
//   RECAP_API_KEY_ENV  the name of the variable that holds it (e.g. OPENAI_API_KEY)
//   RECAP_STREAM       1 to stream the reply
//
// With none of them set it prints what to set and exits 0 ("skipped"), so that it can run as
// a test on a machine without a server. With some but not all required ones set, it says which
// are missing and exits 1.
//
// It loads the first run of the bundled tau-bench transcript (an OpenAI chat-completions
// conversation; tests/data/SOURCES.md), appends it to an in-memory session, and asks the
// Compactor for a manual compaction written by the model: it prints the context window the
// server reports, the events, and the checkpoint. Exit status: 0 on success or skip, 1 for a
// missing setting or an unreadable transcript, 2 when the compaction failed (the message says
// why: the URL, the HTTP status, and what to check).
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "recap/codec.h"
#include "recap/compactor.h"
#include "recap/events.h"
#include "recap/http/http_provider.h"

#ifndef RECAP_EXAMPLE_TRANSCRIPT
#define RECAP_EXAMPLE_TRANSCRIPT ""
#endif

namespace {

std::string Env(const char* name) {
  const char* v = std::getenv(name);
  return v ? std::string(v) : std::string();
}

class PrintingSink : public recap::EventSink {
 public:
  void OnEvent(const recap::Event& event) override {
    std::cout << "  event: " << event.json << "\n";
  }
};

int Run() {
  const std::string base_url = Env("RECAP_BASE_URL");
  const std::string model = Env("RECAP_MODEL");
  const std::string protocol = Env("RECAP_PROTOCOL");
  const std::string key = Env("RECAP_API_KEY");
  const std::string key_env = Env("RECAP_API_KEY_ENV");
  if (base_url.empty() && model.empty() && protocol.empty() && key.empty() && key_env.empty()) {
    std::cout << "recap_http_compact: skipped: set RECAP_BASE_URL and RECAP_MODEL (and, if the "
                 "server needs a key, RECAP_API_KEY or RECAP_API_KEY_ENV; RECAP_PROTOCOL=anthropic "
                 "for Anthropic's API) to compact a bundled session through a model server.\n";
    return 0;
  }
  std::vector<std::string> missing;
  if (base_url.empty()) missing.push_back("RECAP_BASE_URL (e.g. http://127.0.0.1:8080/v1)");
  if (model.empty()) missing.push_back("RECAP_MODEL (the model's name)");
  if (!missing.empty()) {
    std::cerr << "recap_http_compact: missing:";
    for (const auto& m : missing) std::cerr << "\n  " << m;
    std::cerr << "\n";
    return 1;
  }

  recap::HttpProviderOptions options;
  if (!protocol.empty()) {
    auto parsed = recap::ParseHttpProtocol(protocol);
    if (!parsed.ok()) {
      std::cerr << "recap_http_compact: RECAP_PROTOCOL: " << parsed.status().message() << "\n";
      return 1;
    }
    options.protocol = *parsed;
  }
  options.base_url = base_url;
  options.model = model;
  options.api_key = key;
  options.api_key_env = key_env;
  options.stream = Env("RECAP_STREAM") == "1";
  options.timeout_ms = 300000;
  auto provider = recap::NewHttpProvider(options);
  if (!provider.ok()) {
    std::cerr << "recap_http_compact: " << provider.status().message() << "\n";
    return 1;
  }

  // The host's part: load a transcript (here the first tau-bench run).
  std::ifstream in(RECAP_EXAMPLE_TRANSCRIPT);
  if (!in) {
    std::cerr << "recap_http_compact: cannot read " << RECAP_EXAMPLE_TRANSCRIPT << "\n";
    return 1;
  }
  std::stringstream text;
  text << in.rdbuf();
  nlohmann::json runs = nlohmann::json::parse(text.str(), nullptr, false);
  if (!runs.is_array() || runs.empty() || !runs[0].contains("traj")) {
    std::cerr << "recap_http_compact: " << RECAP_EXAMPLE_TRANSCRIPT << " is not a tau-bench file\n";
    return 1;
  }
  auto conversation = recap::openai_chat::DecodeMessages(runs[0]["traj"].dump());
  if (!conversation.ok()) {
    std::cerr << "recap_http_compact: " << conversation.status().message() << "\n";
    return 1;
  }

  recap::Config config;
  auto compactor = recap::Compactor::Create(config, *provider, recap::NewInMemorySessionStore(), {},
                                            {std::make_shared<PrintingSink>()});
  if (!compactor.ok()) {
    std::cerr << "recap_http_compact: " << compactor.status().message() << "\n";
    return 1;
  }
  const std::string session = "tau-bench-run-0";
  auto appended = (*compactor)->store().AppendMessages(session, conversation->messages);
  if (!appended.ok()) {
    std::cerr << "recap_http_compact: " << appended.status().message() << "\n";
    return 1;
  }

  const auto window = (*provider)->ContextWindow();
  std::cout << "server: " << recap::HttpProtocolName(options.protocol) << " at " << base_url
            << ", model " << model << ", context window "
            << (window ? std::to_string(*window) + " tokens" : std::string("unknown")) << "\n"
            << "session: " << conversation->messages.size() << " messages; compacting...\n";

  recap::CompactOptions compact;
  auto outcome = (*compactor)->Compact(session, compact);
  if (!outcome.ok()) {
    std::cerr << "recap_http_compact: compaction failed: " << outcome.status().ToString() << "\n";
    return 2;
  }
  if (!outcome->compacted) {
    std::cout << "nothing to compact (the session is too short)\n";
    return 0;
  }
  std::cout << "summarized " << outcome->summarized_messages << " messages ("
            << outcome->before_chars << " -> " << outcome->after_chars << " chars), checkpoint by "
            << outcome->writer << (outcome->partial ? " (partial)" : "") << ":\n"
            << recap::RenderCheckpoint(outcome->checkpoint) << "\n";
  return 0;
}

}  // namespace

int main() {
  try {
    return Run();
  } catch (const std::exception& e) {  // recap does not throw; the JSON handling above may
    std::cerr << "recap_http_compact: " << e.what() << "\n";
    return 1;
  }
}
