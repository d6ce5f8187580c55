// The chaos soak (issue 17, SPEC R12): a host's whole life in a few minutes.
//
// Two "hosts" — each a SQLite store opened on one shared file and a Compactor with the HTTP
// provider — serve S sessions (default 50) for T turns each (default 1,000), on two threads:
// each host its half of the sessions, and every 50th turn of a session served by the other
// host (a fleet). A turn appends one turn of a real transcript from tests/data (tau-bench,
// Claude Code, SWE-agent, OpenHands, replayed in a loop with fresh ids) or of a W1-shaped
// generated session, then calls Prepare, as a host does before each model request. The
// summarizer is an OpenAI-compatible server on 127.0.0.1 (tests/support/http_test_server.h),
// and faults come on a schedule over the run's turns:
//
//   0% - 10%     the model list is down (the window is unknown: window_unknown, back-off)
//   20% - 25%    the summarizer answers 503 (compactions fail; the back-off of R12.3)
//   40% - 40.2%  the summarizer takes 5 s a reply (--recap_slow_ms)
//   60% - 63%    the summarizer answers 503 again
//   throughout   host 0 compacts in the background (compaction.background, R15), host 1 in
//                Prepare, so a session served by both meets background compactions its other
//                host made stale; each host restarts five times (a new store and Compactor on
//                the same file, the old one destroyed by its last user, mid-compaction perhaps);
//                every 300th turn of a session (every quarter of its turns, when fewer)
//                reports an overflow; one session in ten has a tool catalog at 90% of the
//                limit; most sessions begin with their instructions (a system message)
//
// After every Prepare it checks: the result is a conversation the model accepts (every tool
// call answered, no result without its call), the instructions come first and unchanged, and
// it is under limits.maxContextChars — or Prepare refused with kContextBudgetExceeded. At the
// end every message it appended is in its session's history. It prints summarizer calls per
// 1,000 turns, the time Prepare took on turns with nothing to do (p50, p99), resident memory
// over the run, and what failed (nothing, or it exits 1).
//
//   --recap_sessions=N   sessions (default 50)
//   --recap_turns=N      turns per session (default 1000)
//   --recap_slow_ms=N    the slow summarizer's delay (default 5000)
//   --recap_smoke        6 sessions x 60 turns, a 300 ms slow stretch (the ctest soak.smoke)
//   --recap_dir=PATH     folder for the database (default $TMPDIR or /tmp)
// Exit status: 0 every check held, 1 a check failed, 2 the soak could not run.
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "recap/http/http_provider.h"
#include "recap/recap.h"
#include "recap/sqlite/sqlite_store.h"

#include "support/http_test_server.h"
#include "support/test_data.h"
#include "w1_workload.h"

namespace {

using Clock = std::chrono::steady_clock;
using recap::Message;
using recap::testing::HttpTestServer;
using recap::testing::ScriptedHttpResponse;

constexpr std::size_t kLimit = 60000;

struct Options {
  std::size_t sessions = 50;
  std::size_t turns = 1000;
  long slow_ms = 5000;
  std::string dir;
};

// One turn: a user message and what follows it up to the next one.
using Turn = std::vector<Message>;

struct SessionPlan {
  std::string name;
  std::optional<Message> instructions;
  const std::vector<Turn>* turns = nullptr;
  std::size_t catalog = 3000;
  std::set<std::string> appended;  // ids this session stored
  std::mutex mu;                   // one host serves it at a time
};

// The complete turns of `messages`: each from a turn start to the next, every call answered
// inside it.
std::vector<Turn> TurnsOf(const std::vector<Message>& messages) {
  std::vector<Turn> out;
  Turn current;
  auto flush = [&] {
    if (current.empty()) return;
    recap::Transcript t;
    for (const Message& m : current) t.Append(m);
    if (recap::FindUncertainToolCalls(t).empty()) out.push_back(std::move(current));
    current.clear();
  };
  for (const Message& m : messages) {
    if (recap::IsTurnStart(m)) flush();
    if (!current.empty() || recap::IsTurnStart(m)) current.push_back(m);
  }
  flush();
  return out;
}

// A turn with fresh message ids and its call ids made unique for this replay.
std::vector<Message> Fresh(const Turn& turn, const std::string& prefix) {
  std::vector<Message> out = turn;
  std::size_t i = 0;
  for (Message& m : out) {
    m.id = prefix + "-" + std::to_string(i++);
    for (recap::Part& p : m.parts) {
      if (auto* c = std::get_if<recap::ToolCall>(&p)) c->id += "~" + prefix;
      if (auto* r = std::get_if<recap::ToolResult>(&p)) {
        r->call_id += "~" + prefix;
        for (auto& item : r->content) {
          if (auto* o = std::get_if<recap::Opaque>(&item); o && !o->link_id.empty()) {
            o->link_id += "~" + prefix;
          }
        }
      }
      if (auto* o = std::get_if<recap::Opaque>(&p); o && !o->link_id.empty()) {
        o->link_id += "~" + prefix;
      }
    }
  }
  return out;
}

double RssMb() {
  std::FILE* f = std::fopen("/proc/self/status", "r");
  if (f == nullptr) return -1;
  char line[256];
  long kb = -1;
  while (std::fgets(line, sizeof line, f) != nullptr) {
    if (std::strncmp(line, "VmRSS:", 6) == 0) kb = std::atol(line + 6);
  }
  std::fclose(f);
  return static_cast<double>(kb) / 1024.0;
}

std::string CheckpointReply() {
  nlohmann::json checkpoint = {
      {"goal", "Keep serving the user's requests"},
      {"instructions", nlohmann::json::array({"Answer precisely"})},
      {"currentState", "Work is under way"},
      {"accomplished", nlohmann::json::array({"Read the files", "Ran the tools"})},
      {"discoveries", nlohmann::json::array()},
      {"relevantFiles", nlohmann::json::array()},
      {"nextSteps", nlohmann::json::array({"Continue"})}};
  nlohmann::json reply = {
      {"id", "chatcmpl-soak"},
      {"object", "chat.completion"},
      {"choices",
       nlohmann::json::array({{{"index", 0},
                               {"message", {{"role", "assistant"}, {"content", checkpoint.dump()}}},
                               {"finish_reason", "stop"}}})},
      {"usage", {{"prompt_tokens", 1200}, {"completion_tokens", 180}}}};
  return reply.dump();
}

struct Host {
  std::shared_ptr<recap::SessionStore> store;
  std::unique_ptr<recap::Compactor> compactor;
};

class Soak {
 public:
  Soak(Options o, std::string db) : o_(std::move(o)), db_(std::move(db)) {}

  int Run() {
    server_.KeepRequests(false);
    SetPhase(0, true);
    if (!Prepare()) return 2;
    hosts_[0] = MakeHost(/*background=*/true);
    hosts_[1] = MakeHost();
    if (!hosts_[0] || !hosts_[1]) return 2;
    const auto started = Clock::now();
    std::thread a([&] { Serve(0); });
    std::thread b([&] { Serve(1); });
    a.join();
    b.join();
    const double seconds = std::chrono::duration<double>(Clock::now() - started).count();
    CheckHistories();
    Report(seconds);
    return failures_.empty() ? 0 : 1;
  }

 private:
  bool Prepare() {
    // The session sources: the real transcripts, and W1-shaped generated ones.
    for (const auto& t : recap::testing::AllRealTranscripts()) {
      std::vector<Turn> turns = TurnsOf(t.conversation.messages);
      if (turns.empty()) continue;
      pools_.push_back(std::move(turns));
      pool_instructions_.push_back(t.conversation.instructions);
      if (pools_.size() >= 40) break;
    }
    for (std::uint64_t k = 0; k < 4; ++k) {
      recap_bench::W1Options w;
      w.messages = 600;
      w.seed = 1000 + k;
      pools_.push_back(TurnsOf(recap_bench::GenerateW1(w)));
      pool_instructions_.push_back(std::nullopt);
    }
    sessions_.reserve(o_.sessions);
    for (std::size_t k = 0; k < o_.sessions; ++k) {
      auto s = std::make_unique<SessionPlan>();
      s->name = "soak-" + std::to_string(k);
      // Every other session is W1-shaped, the rest real.
      const std::size_t real = pools_.size() - 4;
      const std::size_t pool = k % 2 == 0 ? (k / 2) % real : real + (k / 2) % 4;
      s->turns = &pools_[pool];
      if (k % 2 == 1 || !pool_instructions_[pool]) {
        if (k % 4 == 1)
          s->instructions = Message::SystemText(
              "You are the soak's agent. Never delete files. Always answer in English.");
      } else {
        s->instructions = *pool_instructions_[pool];
      }
      if (s->instructions) {
        s->instructions->role = recap::Role::kSystem;
        s->instructions->summary = false;
      }
      if (k % 10 == 3) s->catalog = kLimit * 9 / 10;  // irreducible
      sessions_.push_back(std::move(s));
    }
    return true;
  }

  // `background`: compaction.background on (issue 20, R15); host 0 runs so, host 1 blocks.
  std::shared_ptr<Host> MakeHost(bool background = false) {
    recap::SqliteStoreOptions so;
    so.synchronous = recap::SqliteSynchronous::kNormal;
    so.busy_timeout_ms = 60000;
    auto store = recap::OpenSqliteSessionStore(db_, so);
    if (!store.ok()) {
      Fail("opening the store: " + store.status().message());
      return nullptr;
    }
    recap::HttpProviderOptions ho;
    ho.base_url = server_.BaseUrl() + "/v1";
    ho.model = "soak-model";
    ho.max_retries = 0;
    ho.timeout_ms = 20000;
    auto provider = recap::NewHttpProvider(ho);
    if (!provider.ok()) {
      Fail("the provider: " + provider.status().message());
      return nullptr;
    }
    recap::Config config;
    config.limits.max_context_chars = kLimit;
    config.cache.max_bytes = 64u << 20;
    config.compaction.background.enabled = background;
    auto compactor = recap::Compactor::Create(config, *provider, *store);
    if (!compactor.ok()) {
      Fail("Compactor::Create: " + compactor.status().message());
      return nullptr;
    }
    auto host = std::make_shared<Host>();
    host->store = *store;
    host->compactor = std::move(compactor).value();
    return host;
  }

  // Sets the server's routes for the phase of the run at global turn `g`.
  void SetPhase(std::size_t g, bool force = false) {
    const std::size_t total = o_.sessions * o_.turns;
    const double at = total == 0 ? 0 : static_cast<double>(g) / static_cast<double>(total);
    const bool models_down = at < 0.10;
    const bool summarizer_down = (at >= 0.20 && at < 0.25) || (at >= 0.60 && at < 0.63);
    const bool slow = at >= 0.40 && at < 0.402;
    const int phase = (models_down ? 1 : 0) | (summarizer_down ? 2 : 0) | (slow ? 4 : 0);
    std::lock_guard<std::mutex> lock(phase_mu_);
    if (!force && phase == phase_) return;
    phase_ = phase;
    server_.Route("GET", "/v1/models",
                  models_down
                      ? ScriptedHttpResponse::Json(503, R"({"error":{"message":"down"}})")
                      : ScriptedHttpResponse::Json(
                            200, R"({"data":[{"id":"soak-model","context_length":16000}]})"));
    ScriptedHttpResponse reply =
        summarizer_down ? ScriptedHttpResponse::Json(503, R"({"error":{"message":"overloaded"}})")
                        : ScriptedHttpResponse::Json(200, CheckpointReply());
    if (slow) reply.delay = std::chrono::milliseconds(o_.slow_ms);
    server_.Route("POST", "/v1/chat/completions", reply);
  }

  void Serve(int me) {
    const std::size_t total = o_.sessions * o_.turns;
    std::size_t served = 0;
    for (std::size_t t = 0; t < o_.turns; ++t) {
      for (std::size_t k = static_cast<std::size_t>(me); k < sessions_.size(); k += 2) {
        SessionPlan& s = *sessions_[k];
        // Every 50th turn of a session the other host serves it.
        const int which = t % 50 == 49 ? 1 - me : me;
        std::shared_ptr<Host> host = std::atomic_load(&hosts_[which]);
        {
          std::lock_guard<std::mutex> lock(s.mu);
          PlayTurn(s, t, *host);
        }
        const std::size_t g = ++turns_done_;
        SetPhase(g);
        if (g % std::max<std::size_t>(1, total / 20) == 0) {
          std::lock_guard<std::mutex> lock(stats_mu_);
          rss_.emplace_back(g, RssMb());
        }
        // Five times a run, each host restarts: a new store and Compactor on the file.
        if (++served % std::max<std::size_t>(10, total / 10) == 0) {
          // The old Compactor goes with its last user: mid-compaction, perhaps (R15.4).
          std::shared_ptr<Host> fresh = MakeHost(/*background=*/me == 0);
          if (fresh) std::atomic_store(&hosts_[me], fresh);
          ++restarts_;
        }
        if (!failures_.empty() && failures_.size() > 20) return;
      }
    }
  }

  void PlayTurn(SessionPlan& s, std::size_t t, Host& host) {
    std::vector<Message> batch;
    if (t == 0 && s.instructions) {
      batch.push_back(*s.instructions);
      batch.back().id = s.name + "-instructions";
    }
    const std::vector<Message> turn =
        Fresh((*s.turns)[t % s.turns->size()], s.name + "-t" + std::to_string(t));
    batch.insert(batch.end(), turn.begin(), turn.end());
    for (const Message& m : batch) s.appended.insert(m.id);
    auto appended = host.store->AppendMessages(s.name, batch);
    if (!appended.ok()) {
      Fail(s.name + " turn " + std::to_string(t) + ": append: " + appended.status().message());
      return;
    }
    recap::RequestSizes sizes;
    sizes.tool_catalog_chars = s.catalog;
    const auto started = Clock::now();
    auto p = host.compactor->Prepare(s.name, sizes);
    const double us = std::chrono::duration<double, std::micro>(Clock::now() - started).count();
    if (!p.ok()) {
      if (p.status().code() == recap::StatusCode::kContextBudgetExceeded) {
        ++budget_errors_;
        std::lock_guard<std::mutex> lock(stats_mu_);
        auto& [count, first] = budget_by_session_[s.name];
        if (count++ == 0) first = p.status().message();
        return;
      }
      Fail(s.name + " turn " + std::to_string(t) + ": Prepare: " + p.status().ToString());
      return;
    }
    {
      std::lock_guard<std::mutex> lock(stats_mu_);
      summarizer_calls_ += p->summarizer_calls;
      compactions_ += p->compactions.size();
      background_swaps_ += p->background_swapped ? 1 : 0;
      background_discards_ += p->background_discarded ? 1 : 0;
      if (p->compactions.empty() && p->reduced_messages == 0 && p->summarizer_calls == 0) {
        quiet_us_.push_back(us);
      }
    }
    const std::string where = s.name + " turn " + std::to_string(t) + ": ";
    if (p->after_chars > kLimit) Fail(where + "over the limit: " + std::to_string(p->after_chars));
    if (!recap::FindUncertainToolCalls(p->messages).empty()) {
      Fail(where + "a tool call without its result in what Prepare returned");
    }
    std::set<std::string> calls;
    for (const Message& m : p->messages) {
      for (const recap::Part& part : m.parts) {
        if (const auto* c = std::get_if<recap::ToolCall>(&part)) calls.insert(c->id);
        if (const auto* r = std::get_if<recap::ToolResult>(&part)) {
          if (calls.count(r->call_id) == 0) Fail(where + "a result without its call");
        }
      }
    }
    if (s.instructions) {
      if (p->messages.size() == 0 || p->messages[0].id != s.name + "-instructions" ||
          recap::JoinedText(p->messages[0]) != recap::JoinedText(*s.instructions)) {
        Fail(where + "the instructions are not first, or changed");
      }
    }
    // Now and then the model refuses the request as too long (R2.6), saying how many tokens
    // it took (the server's window: a model refuses what is over it, not a small request).
    if (t % std::min<std::size_t>(300, std::max<std::size_t>(o_.turns / 4, 2)) == 1) {
      host.compactor->ReportOverflow(s.name, 16000);
      ++overflows_;
    }
  }

  void CheckHistories() {
    std::shared_ptr<Host> host = MakeHost();
    if (!host) return;
    for (const auto& s : sessions_) {
      auto history = host->store->History(s->name);
      if (!history.ok()) {
        Fail(s->name + ": history: " + history.status().message());
        continue;
      }
      std::set<std::string> seen;
      for (const recap::HistoryEntry& e : *history) seen.insert(e.message.id);
      for (const std::string& id : s->appended) {
        if (seen.count(id) == 0) {
          Fail(s->name + ": message " + id + " is missing from the history");
          break;
        }
      }
    }
  }

  void Fail(const std::string& what) {
    std::lock_guard<std::mutex> lock(stats_mu_);
    if (failures_.size() < 50) failures_.push_back(what);
  }

  void Report(double seconds) {
    std::sort(quiet_us_.begin(), quiet_us_.end());
    auto pct = [&](double q) {
      if (quiet_us_.empty()) return 0.0;
      return quiet_us_[std::min(
          quiet_us_.size() - 1,
          static_cast<std::size_t>(q * static_cast<double>(quiet_us_.size())))];
    };
    const std::size_t turns = turns_done_.load();
    std::printf("\nchaos soak — %zu sessions x %zu turns (%zu turns) on two hosts, %.1f s\n\n",
                o_.sessions, o_.turns, turns, seconds);
    std::printf("%-52s %s\n", "figure", "measured");
    std::printf("%-52s %zu\n", "compactions", compactions_);
    std::printf(
        "%-52s %.1f\n", "summarizer calls per 1,000 turns",
        turns ? 1000.0 * static_cast<double>(summarizer_calls_) / static_cast<double>(turns) : 0.0);
    std::printf("%-52s %zu / %zu\n", "background compactions swapped in / discarded",
                background_swaps_, background_discards_);
    std::printf("%-52s %zu\n", "requests the summarizer's server saw", server_.request_count());
    std::printf("%-52s %zu\n", "Prepare refused with kContextBudgetExceeded",
                budget_errors_.load());
    std::printf("%-52s %zu\n", "host restarts", restarts_.load());
    std::printf("%-52s %zu\n", "overflow reports", overflows_.load());
    std::printf("%-52s %.1f us / %.1f us (%zu turns)\n", "Prepare with nothing to do: p50 / p99",
                pct(0.50), pct(0.99), quiet_us_.size());
    std::printf("%-52s %zu\n", "crashes", std::size_t{0});
    if (!budget_by_session_.empty()) {
      std::vector<std::pair<std::size_t, std::string>> by;
      for (const auto& [name, e] : budget_by_session_) by.emplace_back(e.first, name);
      std::sort(by.rbegin(), by.rend());
      std::printf("\nrefused with kContextBudgetExceeded, the sessions most often:\n");
      for (std::size_t i = 0; i < by.size() && i < 5; ++i) {
        std::printf("  %s: %zu turns; first: %.300s\n", by[i].second.c_str(), by[i].first,
                    budget_by_session_[by[i].second].second.c_str());
      }
    }
    std::printf("\nresident memory:");
    for (const auto& [g, mb] : rss_) std::printf(" %zu:%.0fMB", g, mb);
    std::printf("\n\n");
    if (failures_.empty()) {
      std::printf("chaos soak: every check held after every turn\n");
    } else {
      std::printf("chaos soak: %zu check(s) failed:\n", failures_.size());
      for (const std::string& f : failures_) std::printf("  %s\n", f.c_str());
    }
  }

  Options o_;
  std::string db_;
  HttpTestServer server_;
  std::mutex phase_mu_;
  int phase_ = -1;
  std::vector<std::vector<Turn>> pools_;
  std::vector<std::optional<Message>> pool_instructions_;
  std::vector<std::unique_ptr<SessionPlan>> sessions_;
  std::shared_ptr<Host> hosts_[2];
  std::atomic<std::size_t> turns_done_{0};
  std::atomic<std::size_t> budget_errors_{0};
  std::atomic<std::size_t> restarts_{0};
  std::atomic<std::size_t> overflows_{0};
  std::mutex stats_mu_;
  std::size_t summarizer_calls_ = 0;
  std::size_t compactions_ = 0;
  std::size_t background_swaps_ = 0;
  std::size_t background_discards_ = 0;
  std::vector<double> quiet_us_;
  std::vector<std::pair<std::size_t, double>> rss_;
  std::vector<std::string> failures_;
  std::map<std::string, std::pair<std::size_t, std::string>> budget_by_session_;
};

bool Take(const std::string& arg, const char* name, std::string* value) {
  const std::string prefix = std::string("--") + name + "=";
  if (arg.rfind(prefix, 0) != 0) return false;
  *value = arg.substr(prefix.size());
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    std::string v;
    if (arg == "--recap_smoke") {
      o.sessions = 6;
      o.turns = 60;
      o.slow_ms = 300;
    } else if (Take(arg, "recap_sessions", &v)) {
      o.sessions = std::stoul(v);
    } else if (Take(arg, "recap_turns", &v)) {
      o.turns = std::stoul(v);
    } else if (Take(arg, "recap_slow_ms", &v)) {
      o.slow_ms = std::stol(v);
    } else if (Take(arg, "recap_dir", &v)) {
      o.dir = v;
    } else {
      std::fprintf(stderr, "recap soak: unknown argument '%s' (see the top of bench/soak.cc)\n",
                   arg.c_str());
      return 2;
    }
  }
  if (o.sessions < 2 || o.turns < 1) {
    std::fprintf(stderr, "recap soak: --recap_sessions must be at least 2, --recap_turns 1\n");
    return 2;
  }
  if (o.dir.empty()) {
    const char* tmp = std::getenv("TMPDIR");
    o.dir = tmp != nullptr && *tmp != '\0' ? tmp : "/tmp";
  }
  const std::string db =
      (std::filesystem::path(o.dir) / ("recap-soak-" + std::to_string(::getpid()) + ".db"))
          .string();
  int status = 2;
  {
    Soak soak(o, db);
    status = soak.Run();
  }
  for (const char* suffix : {"", "-wal", "-shm"}) std::filesystem::remove(db + suffix);
  return status;
}
