// recap_sqlite_host — a host whose sessions live in a SQLite file and whose checkpoints are
// written by a model server named by the environment.
//
//   recap_sqlite_host                                    offline summarizer, temporary file
//   RECAP_DB=./sessions.db recap_sqlite_host             keep the session file
//   RECAP_BASE_URL=http://127.0.0.1:8080/v1 RECAP_MODEL=local recap_sqlite_host
//   RECAP_PROTOCOL=anthropic RECAP_BASE_URL=https://api.anthropic.com
//     RECAP_MODEL=claude-3-5-haiku-latest RECAP_API_KEY_ENV=ANTHROPIC_API_KEY recap_sqlite_host
//
// The environment:
//
//   RECAP_DB           the session file (default: a new temporary file, removed at the end)
//   RECAP_BASE_URL     the model server's API address; with RECAP_MODEL it selects the HTTP
//   RECAP_MODEL        provider. Without both, the offline summarizer writes the checkpoints.
//   RECAP_PROTOCOL     openai_chat (default) or anthropic
//   RECAP_API_KEY_ENV  the name of the variable that holds the API key (e.g. OPENAI_API_KEY);
//                      recap reads it and never prints it
//
// It replays a bundled real conversation (the first tau-bench airline run: a system prompt,
// 31 messages, tool calls and their results) the way a host runs it: each message is appended
// to the session file as it arrives, and right before each model request — before each
// assistant message — the host calls Compactor::Prepare and would send what it returns. Half
// way through, the host "restarts": it drops the Compactor and the store and opens the file
// again; the session carries on from where it was.
//
// It runs as a test (offline, and by the HTTP tests against a scripted server): exit 0 when
// every request stayed within limits.maxContextChars with no tool call separated from its
// result and the file's history holds each appended message once; 1 for a setup error (the
// message says what to set); 2 when a guarantee did not hold.
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "recap/recap.h"
#include "recap/sqlite/sqlite_store.h"
#if RECAP_EXAMPLE_HAVE_HTTP
#include "recap/http/http_provider.h"
#endif

#ifndef RECAP_EXAMPLE_TRANSCRIPT
#define RECAP_EXAMPLE_TRANSCRIPT ""
#endif

namespace {

std::string Env(const char* name) {
  const char* v = std::getenv(name);
  return v ? std::string(v) : std::string();
}

int SetupError(const std::string& message) {
  std::fprintf(stderr, "recap_sqlite_host: %s\n", message.c_str());
  return 1;
}

// The summarizer: the HTTP provider when the environment names a server, else null (recap's
// offline summarizer).
recap::Result<std::shared_ptr<recap::Provider>> ProviderFromEnvironment() {
  const std::string base_url = Env("RECAP_BASE_URL");
  const std::string model = Env("RECAP_MODEL");
  if (base_url.empty() && model.empty()) return std::shared_ptr<recap::Provider>();
  if (base_url.empty() || model.empty()) {
    return recap::Status::InvalidArgument(
        "set both RECAP_BASE_URL and RECAP_MODEL to use a model server, or neither for the "
        "offline summarizer");
  }
#if RECAP_EXAMPLE_HAVE_HTTP
  recap::HttpProviderOptions options;
  if (!Env("RECAP_PROTOCOL").empty()) {
    recap::Result<recap::HttpProtocol> protocol = recap::ParseHttpProtocol(Env("RECAP_PROTOCOL"));
    if (!protocol.ok()) return protocol.status().WithContext("RECAP_PROTOCOL");
    options.protocol = *protocol;
  }
  options.base_url = base_url;
  options.model = model;
  options.api_key_env = Env("RECAP_API_KEY_ENV");
  return recap::NewHttpProvider(std::move(options));
#else
  return recap::Status::InvalidArgument(
      "RECAP_BASE_URL is set, but this build has no HTTP component (build recap with "
      "RECAP_BUILD_HTTP=ON); unset it for the offline summarizer");
#endif
}

class CountingSink : public recap::EventSink {
 public:
  void OnEvent(const recap::Event& event) override {
    // A host would log the line as it is (docs/events.md); here a few fields are picked out.
    const nlohmann::json e = nlohmann::json::parse(event.json, nullptr, false);
    if (event.type == "compaction_completed") {
      ++completed;
      std::printf("    event compaction_completed: %s messages summarized, checkpoint by %s\n",
                  e["summarized"]["messages"].dump().c_str(),
                  e["checkpoint"]["writer"].get<std::string>().c_str());
    } else {
      if (event.type == "compaction_failed") ++failed;
      std::printf("    event %s\n", event.type.c_str());
    }
  }
  int completed = 0;
  int failed = 0;
};

int broken = 0;
void Expect(bool ok, const std::string& what) {
  if (!ok) {
    std::fprintf(stderr, "recap_sqlite_host: FAILED: %s\n", what.c_str());
    ++broken;
  }
}

}  // namespace

int main() {
  // 1. The host's settings.
  recap::Result<std::shared_ptr<recap::Provider>> provider = ProviderFromEnvironment();
  if (!provider.ok()) return SetupError(provider.status().message());
  std::string db = Env("RECAP_DB");
  const bool temporary = db.empty();
  if (temporary) {
    char path[] = "/tmp/recap-sqlite-host-XXXXXX";
    const int fd = ::mkstemp(path);
    if (fd < 0) return SetupError("cannot create a temporary file in /tmp");
    ::close(fd);
    ::unlink(path);  // the store creates the database file itself
    db = std::string(path) + ".db";
  }
  recap::Result<recap::Config> config = recap::Config::FromJson(R"({
    "compaction": {"keepTurns": 1},
    "limits": {"maxContextChars": 14000}
  })");
  if (!config.ok()) return SetupError(config.status().ToString());

  // 2. The conversation that will arrive (the host's own format: OpenAI chat messages).
  std::ifstream in(RECAP_EXAMPLE_TRANSCRIPT, std::ios::binary);
  std::stringstream text;
  text << in.rdbuf();
  const nlohmann::json runs = nlohmann::json::parse(text.str(), nullptr, false);
  if (!runs.is_array() || runs.empty() || !runs[0].contains("traj")) {
    return SetupError(std::string("cannot read the tau-bench file ") + RECAP_EXAMPLE_TRANSCRIPT);
  }
  recap::Result<recap::Conversation> conversation =
      recap::openai_chat::DecodeMessages(runs[0]["traj"].dump());
  if (!conversation.ok()) return SetupError(conversation.status().ToString());
  recap::RequestSizes sizes;
  if (conversation->instructions) {
    sizes.instructions_chars = recap::MessageChars(*conversation->instructions);
  }

  std::printf("session file %s; summarizer %s\n", db.c_str(),
              *provider ? (*provider)->Name().c_str() : "offline");
  const std::string session = "tau-bench-airline-0";
  std::shared_ptr<recap::SessionStore> store;
  std::unique_ptr<recap::Compactor> compactor;
  auto sink = std::make_shared<CountingSink>();
  auto open = [&]() -> recap::Status {
    recap::Result<std::shared_ptr<recap::SessionStore>> opened = recap::OpenSqliteSessionStore(db);
    if (!opened.ok()) return opened.status();
    store = *opened;
    recap::Result<std::unique_ptr<recap::Compactor>> created =
        recap::Compactor::Create(*config, *provider, store, {}, {sink});
    if (!created.ok()) return created.status();
    compactor = std::move(created).value();
    return recap::Status::OK();
  };
  if (recap::Status s = open(); !s.ok()) return SetupError(s.ToString());

  // 3. The session, message by message.
  const std::vector<recap::Message>& messages = conversation->messages;
  std::size_t requests = 0;
  std::size_t appended = 0;
  for (std::size_t i = 0; i < messages.size(); ++i) {
    if (i == messages.size() / 2) {
      std::printf("  -- the host restarts: the store and the Compactor are opened again --\n");
      compactor.reset();
      store.reset();
      if (recap::Status s = open(); !s.ok()) return SetupError(s.ToString());
    }
    if (messages[i].role == recap::Role::kAssistant) {
      // A model request is due: what goes out is the instructions + Prepare's transcript.
      recap::Result<recap::Prepared> prepared = compactor->Prepare(session, sizes);
      if (!prepared.ok()) {
        Expect(false, "Prepare before request " + std::to_string(requests + 1) + ": " +
                          prepared.status().ToString());
        break;
      }
      ++requests;
      std::printf("  request %2zu: %6zu -> %6zu chars, %2zu messages%s\n", requests,
                  prepared->before_chars, prepared->after_chars, prepared->messages.size(),
                  prepared->compactions.empty() ? "" : ", compacted");
      Expect(prepared->after_chars <= config->limits.max_context_chars,
             "request " + std::to_string(requests) + " is within maxContextChars");
      const recap::PairingReport pairing = recap::AnalyzePairing(prepared->messages);
      Expect(pairing.uncertain.empty() && pairing.orphans.empty(),
             "request " + std::to_string(requests) + " keeps every tool call with its result");
    }
    recap::Result<std::uint64_t> stored = store->Append(session, messages[i]);
    if (!stored.ok()) return SetupError("append: " + stored.status().ToString());
    ++appended;
  }

  // 4. What the file holds: every appended message, exactly once, plus recap's checkpoints.
  recap::Result<std::vector<recap::HistoryEntry>> history = store->History(session);
  Expect(history.ok(), "the history reads");
  if (history.ok()) {
    std::multiset<std::string> ids;
    for (const recap::HistoryEntry& e : *history) {
      if (!e.message.summary) ids.insert(e.message.id);
    }
    std::set<std::string> distinct(ids.begin(), ids.end());
    std::printf(
        "%zu requests, %d compaction(s); the file's history: %zu entries, %zu distinct "
        "messages of the host's %zu\n",
        requests, sink->completed, history->size(), distinct.size(), appended);
    Expect(distinct.size() == appended, "the history holds every appended message");
  }
  Expect(sink->completed >= 1, "the session was compacted at least once");
  Expect(sink->failed == 0, "no compaction failed");

  compactor.reset();
  store.reset();
  if (temporary) {
    for (const char* suffix : {"", "-wal", "-shm"}) std::remove((db + suffix).c_str());
  }
  if (broken != 0) return 2;
  std::printf("ok\n");
  return 0;
}
