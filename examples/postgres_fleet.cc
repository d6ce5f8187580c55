// recap_postgres_fleet — a fleet of agent hosts sharing their sessions through PostgreSQL: the
// conversation moves from one machine to the other at every turn.
//
//   RECAP_PG_URL=postgresql://user@host/db recap_postgres_fleet
//   RECAP_PG_URL='host=/run/postgresql dbname=agents user=recap' recap_postgres_fleet
//   RECAP_PG_URL=postgresql://user@host/db RECAP_PG_SCHEMA=fleet_demo recap_postgres_fleet
//
// The environment:
//
//   RECAP_PG_URL     the server: a postgresql:// URL or a libpq key=value string (required).
//                    A password may be in it, or in PGPASSWORD or ~/.pgpass; it is never
//                    printed (the address is shown with the password removed)
//   RECAP_PG_SCHEMA  the PostgreSQL schema for recap's tables (default: a fresh one named after
//                    the process id and the time, recap_fleet_<pid>_<seconds>, so that runs
//                    never meet; it is left in the database afterwards for a look with psql).
//                    The session's name carries the same <pid>_<seconds>, so a schema given
//                    here may be used by any number of runs
//
// It replays a bundled real conversation (the first tau-bench airline run: a system prompt,
// 31 messages, 8 user turns, tool calls and their results) as a fleet runs it. Two "machines",
// A and B, each have what a host process has: a store of its own (its own connections) and a
// Compactor of its own. The turns alternate between them — turn 1 on A, turn 2 on B, turn 3 on
// A, … — and the machine handling a turn appends the turn's messages through its store and,
// right before each model request, calls its Compactor::Prepare and would send what it
// returns. Each machine's Compactor finds what the other wrote since its last turn (appends,
// and the other's compactions) in the shared schema. The summarizer is the offline one.
//
// Exit 0 when every request stayed within limits.maxContextChars with no tool call separated
// from its result and the history holds each appended message exactly once; 1 for a setup
// error (the message says what to set); 2 when a guarantee did not hold.
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <fstream>
#include <map>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "recap/postgres/postgres_store.h"
#include "recap/recap.h"
#include "recap/safe_boundary.h"

#ifndef RECAP_EXAMPLE_TRANSCRIPT
#define RECAP_EXAMPLE_TRANSCRIPT ""
#endif

namespace {

std::string Env(const char* name) {
  const char* v = std::getenv(name);
  return v ? std::string(v) : std::string();
}

int SetupError(const std::string& message) {
  std::fprintf(stderr, "recap_postgres_fleet: %s\n", message.c_str());
  return 1;
}

// The connection string with any password taken out, for printing: the password of a URL's
// user:password@ part, a password=… query parameter, or a key=value string's password=….
std::string WithoutPassword(const std::string& connection) {
  std::string s = connection;
  const bool url = s.rfind("postgresql://", 0) == 0 || s.rfind("postgres://", 0) == 0;
  if (url) {
    const std::size_t start = s.find("://") + 3;
    const std::size_t end = s.find_first_of("/?", start);
    const std::size_t at = s.rfind('@', end == std::string::npos ? s.size() : end);
    if (at != std::string::npos && at >= start) {
      const std::size_t colon = s.find(':', start);
      if (colon != std::string::npos && colon < at) s.replace(colon, at - colon, ":***");
    }
    for (std::size_t p = s.find('?'); p != std::string::npos; p = s.find('&', p + 1)) {
      if (s.compare(p + 1, 9, "password=") != 0) continue;
      const std::size_t value = p + 10;
      const std::size_t next = s.find('&', value);
      s.replace(value, (next == std::string::npos ? s.size() : next) - value, "***");
    }
    return s;
  }
  // key=value pairs: password=secret or password='a secret with \' and spaces'.
  for (std::size_t p = s.find("password"); p != std::string::npos; p = s.find("password", p + 1)) {
    if (p != 0 && s[p - 1] != ' ' && s[p - 1] != '\t') continue;
    std::size_t v = p + 8;
    while (v < s.size() && (s[v] == ' ' || s[v] == '\t')) ++v;
    if (v >= s.size() || s[v] != '=') continue;
    ++v;
    while (v < s.size() && (s[v] == ' ' || s[v] == '\t')) ++v;
    std::size_t end = v;
    if (end < s.size() && s[end] == '\'') {
      for (++end; end < s.size() && s[end] != '\''; ++end) {
        if (s[end] == '\\') ++end;
      }
      if (end < s.size()) ++end;
    } else {
      while (end < s.size() && s[end] != ' ' && s[end] != '\t') ++end;
    }
    s.replace(v, end - v, "***");
  }
  return s;
}

// One machine's event sink: counts its compactions and prints what it did.
class MachineSink : public recap::EventSink {
 public:
  explicit MachineSink(std::string machine) : machine_(std::move(machine)) {}
  void OnEvent(const recap::Event& event) override {
    const nlohmann::json e = nlohmann::json::parse(event.json, nullptr, false);
    if (event.type == "compaction_completed") {
      ++completed;
      std::printf("    [%s] compaction_completed (%s): %s messages summarized, %s -> %s chars\n",
                  machine_.c_str(), e.value("reason", std::string("?")).c_str(),
                  e["summarized"]["messages"].dump().c_str(), e["before"]["chars"].dump().c_str(),
                  e["after"]["chars"].dump().c_str());
    } else {
      if (event.type == "compaction_failed") ++failed;
      if (event.type == "context_reduced") ++reduced;
      std::printf("    [%s] %s\n", machine_.c_str(), event.type.c_str());
    }
  }
  int completed = 0;
  int failed = 0;
  int reduced = 0;

 private:
  std::string machine_;
};

// What a host process holds: its own store (own connections) and its own Compactor.
struct Machine {
  std::string name;
  std::shared_ptr<recap::SessionStore> store;
  std::unique_ptr<recap::Compactor> compactor;
  std::shared_ptr<MachineSink> sink;
  int turns = 0;
  int requests = 0;
};

int broken = 0;
void Expect(bool ok, const std::string& what) {
  if (!ok) {
    std::fprintf(stderr, "recap_postgres_fleet: FAILED: %s\n", what.c_str());
    ++broken;
  }
}

}  // namespace

int main() {
  // 1. The fleet's settings.
  const std::string url = Env("RECAP_PG_URL");
  if (url.empty()) {
    return SetupError(
        "set RECAP_PG_URL to the PostgreSQL server to use, a postgresql:// URL or a libpq "
        "key=value string, e.g.\n"
        "  RECAP_PG_URL=postgresql://user@host/db recap_postgres_fleet\n"
        "  RECAP_PG_URL='host=/run/postgresql dbname=agents user=recap' recap_postgres_fleet\n"
        "and optionally RECAP_PG_SCHEMA (default: a fresh schema per run). The user needs the "
        "right to create a schema in that database.");
  }
  // This run's tag: names the default schema and the session, so that runs never meet (even
  // in a schema given by RECAP_PG_SCHEMA, used again).
  const std::string run = std::to_string(static_cast<long>(::getpid())) + "_" +
                          std::to_string(static_cast<long long>(std::time(nullptr)));
  std::string schema = Env("RECAP_PG_SCHEMA");
  const bool fresh_schema = schema.empty();
  if (fresh_schema) schema = "recap_fleet_" + run;
  // A small budget, so that a short conversation is compacted several times: with 12000
  // characters (the system prompt alone is over 6000) both machines compact in this run.
  recap::Result<recap::Config> config = recap::Config::FromJson(R"({
    "compaction": {"keepTurns": 1},
    "limits": {"maxContextChars": 12000}
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
  // The host names its messages itself, so that it can tell them apart in the history (and
  // could retry an append whose outcome it did not learn without storing a message twice).
  std::vector<recap::Message> messages = conversation->messages;
  for (std::size_t i = 0; i < messages.size(); ++i) {
    if (messages[i].id.empty()) messages[i].id = "tau0-m" + std::to_string(i);
  }

  // 3. Two machines, each connecting on its own.
  std::printf("server %s; schema %s%s; summarizer offline\n", WithoutPassword(url).c_str(),
              schema.c_str(),
              fresh_schema ? " (fresh: made from the pid and the time, so that runs do not "
                             "collide; set RECAP_PG_SCHEMA to choose one)"
                           : "");
  const std::string session = "tau-bench-airline-0-" + run;
  std::printf("session %s, on two machines: A and B, a store and a Compactor each\n",
              session.c_str());
  Machine machines[2];
  machines[0].name = "A";
  machines[1].name = "B";
  for (Machine& m : machines) {
    recap::PostgresStoreOptions options;
    options.connection = url;
    options.schema = schema;
    options.pool_size = 2;
    options.application_name = "recap_postgres_fleet " + m.name;
    recap::Result<std::shared_ptr<recap::SessionStore>> opened =
        recap::OpenPostgresSessionStore(options);
    if (!opened.ok()) {
      return SetupError("machine " + m.name +
                        " cannot open the PostgreSQL store: " + opened.status().ToString() +
                        "\nCheck RECAP_PG_URL (and RECAP_PG_SCHEMA: lower-case letters, digits "
                        "and '_').");
    }
    m.store = *opened;
    m.sink = std::make_shared<MachineSink>(m.name);
    recap::Result<std::unique_ptr<recap::Compactor>> created =
        recap::Compactor::Create(*config, nullptr, m.store, {}, {m.sink});
    if (!created.ok()) return SetupError(created.status().ToString());
    m.compactor = std::move(created).value();
  }

  // 4. The session, turn by turn, each turn on the next machine. A turn starts with a message
  // a person wrote (recap::IsTurnStart) and runs until the next one.
  std::vector<std::string> appended;
  std::map<int, std::string> compacted_by;  // request number -> machine, for the summary
  int requests = 0;
  int turns = 0;
  std::size_t last_after = 0;
  std::size_t largest_after = 0;
  std::size_t i = 0;
  while (i < messages.size() && broken == 0) {
    Machine& m = machines[turns % 2];
    ++turns;
    ++m.turns;
    std::printf("  turn %d on machine %s\n", turns, m.name.c_str());
    do {
      if (messages[i].role == recap::Role::kAssistant) {
        // A model request is due: what goes out is the instructions + Prepare's transcript.
        recap::Result<recap::Prepared> prepared = m.compactor->Prepare(session, sizes);
        if (!prepared.ok()) {
          Expect(false, "Prepare on machine " + m.name + " before request " +
                            std::to_string(requests + 1) + ": " + prepared.status().ToString());
          break;
        }
        ++requests;
        ++m.requests;
        std::printf("    [%s] request %2d: %6zu -> %6zu chars, %2zu messages%s\n", m.name.c_str(),
                    requests, prepared->before_chars, prepared->after_chars,
                    prepared->messages.size(), prepared->compactions.empty() ? "" : ", compacted");
        if (!prepared->compactions.empty()) compacted_by[requests] = m.name;
        last_after = prepared->after_chars;
        if (prepared->after_chars > largest_after) largest_after = prepared->after_chars;
        Expect(prepared->after_chars <= config->limits.max_context_chars,
               "request " + std::to_string(requests) + " is within maxContextChars");
        const recap::PairingReport pairing = recap::AnalyzePairing(prepared->messages);
        Expect(pairing.uncertain.empty() && pairing.orphans.empty(),
               "request " + std::to_string(requests) + " keeps every tool call with its result");
      }
      recap::Result<std::uint64_t> stored = m.store->Append(session, messages[i]);
      if (!stored.ok()) {
        return SetupError("machine " + m.name + " append: " + stored.status().ToString());
      }
      appended.push_back(messages[i].id);
      ++i;
    } while (i < messages.size() && !recap::IsTurnStart(messages[i]));
  }

  // 5. What the shared schema holds: every appended message exactly once, plus the
  // checkpoints. A reduction keeps a message's id on its clipped copy and retires the
  // original with replaced_by "reduction:<n>", so those originals are not counted.
  // Read through machine B's store, as any machine of the fleet could.
  recap::Result<std::vector<recap::HistoryEntry>> history = machines[1].store->History(session);
  recap::Result<recap::SessionState> state = machines[0].store->Load(session);
  Expect(history.ok(), "the history reads");
  Expect(state.ok(), "the session loads");
  if (history.ok() && state.ok()) {
    std::map<std::string, int> counts;
    std::size_t checkpoints = 0;
    for (const recap::HistoryEntry& e : *history) {
      if (e.replaced_by.rfind("reduction:", 0) == 0) continue;
      if (e.message.summary) {
        ++checkpoints;
        continue;
      }
      ++counts[e.message.id];
    }
    bool once = counts.size() == appended.size();
    for (const std::string& id : appended) {
      if (counts[id] == 1) continue;
      once = false;
      Expect(false, "the history holds message " + id + " exactly once (it holds it " +
                        std::to_string(counts[id]) + " times)");
    }
    Expect(once, "the history holds the appended messages and no others");

    const int compactions = machines[0].sink->completed + machines[1].sink->completed;
    std::printf("\n%d turns, %d requests (A: %d turns, %d requests; B: %d turns, %d requests)\n",
                turns, requests, machines[0].turns, machines[0].requests, machines[1].turns,
                machines[1].requests);
    std::printf("%d compaction(s): A %d, B %d", compactions, machines[0].sink->completed,
                machines[1].sink->completed);
    const char* sep = "; before request";
    for (const auto& [request, machine] : compacted_by) {
      std::printf("%s %d on %s", sep, request, machine.c_str());
      sep = ",";
    }
    std::printf("\nthe largest request %zu chars (maxContextChars %zu), the last %zu\n",
                largest_after, config->limits.max_context_chars, last_after);
    std::printf("the session now: %zu active messages, %zu chars besides the instructions\n",
                state->transcript.size(), state->transcript.chars());
    const std::string held =
        once ? "each of the " + std::to_string(appended.size()) + " appended messages exactly once"
             : std::string("NOT each appended message exactly once");
    std::printf("the history: %zu entries, %zu checkpoint(s), %s\n", history->size(), checkpoints,
                held.c_str());
    Expect(compactions >= 1, "the session was compacted at least once");
  }
  Expect(machines[0].sink->failed + machines[1].sink->failed == 0, "no compaction failed");
  if (fresh_schema) {
    std::printf("the schema %s stays in the database (DROP SCHEMA %s CASCADE removes it)\n",
                schema.c_str(), schema.c_str());
  }

  for (Machine& m : machines) {
    m.compactor.reset();
    m.store.reset();
  }
  if (broken != 0) return 2;
  std::printf("ok\n");
  return 0;
}
