// `recap proxy` (SPEC R19, src/cli/proxy_server.h): what putting it between an agent and the
// model API costs and saves, measured in one run against the same client talking to the same
// upstream directly. The proxy is the built `recap proxy`, run as a child process on 127.0.0.1
// with a SQLite file of its own; the upstream is a stand-in served by this program (cpp-httplib,
// as the proxy itself): chat completions and Anthropic Messages, streamed (SSE) or not, one
// fixed short reply; a summarizer request (its prompt holds "You write checkpoints") gets a
// short checkpoint; GET /v1/models names one model. It counts the request bytes it receives.
//
//   1. Added time to first byte. A client sends a streamed request (chat completions, and
//      Anthropic Messages) with its whole conversation, through the proxy and directly to the
//      stand-in, back to back in alternating order each turn; each turn the conversation grows
//      by a user message and the reply (as a real client resends its whole history), so the
//      proxy does its per-turn work: chain match, append of what is new, Prepare, encode, the
//      upstream request. Conversations: W1 (w1_workload.h) at 200 and 2,000 messages, each
//      conversation's first user text made its own; --recap_sessions conversations of
//      --recap_turns timed turns each (the first request of each, which creates the session,
//      is reported apart). Nothing is compacted (compaction.auto off, provider.contextWindow
//      the largest recap trusts, limits.maxContextChars 10^9). Added = proxied - direct, per
//      turn; p50 and p99. Against the time nlohmann::json::parse takes for the same body once,
//      in the same turn (median): the goal is p99 added < 2x that.
//   2. 100 concurrent streamed conversations (W1's first 200 messages, made distinct, half chat
//      and half Anthropic), each a client thread running --recap_concurrent_turns turns, all
//      started at once; errors (must be 0), wall time, TTFB under load, the proxy's peak RSS
//      (VmHWM of /proc/PID/status) against cache.maxBytes (--recap_max_bytes, default 32 MiB:
//      less than the conversations hold, so that the Compactor's cache must drop some).
//   3. Bytes sent upstream per turn over a long real session replayed turn by turn: the Claude
//      Code sample of tests/data (214 Anthropic messages, 105 model replies) as its client
//      sent it, each request the whole history up to a reply, the stand-in answering with that
//      reply (so that the next request extends the session), limits.maxContextChars 200,000 so
//      recap compacts (in the background, as the proxy does by default). The bodies the
//      upstream received with the proxy (model requests, and the summarizer's apart) against
//      the client's request bodies, which are what the upstream receives without it.
//
// No budget: comparisons, printed as tables. Each proxy's log goes to DIR/proxy-*.log.
//
// Flags:
//   --recap_smoke               tiny sizes (20- and 40-message conversations, 5 concurrent,
//                               a short replay): the `bench.proxy_smoke` ctest, a few seconds
//   --recap_sessions=N          conversations per size and format in figure 1 (default 5)
//   --recap_turns=N             timed turns per conversation in figure 1 (default 20)
//   --recap_concurrent=N        concurrent conversations in figure 2 (default 100)
//   --recap_concurrent_turns=N  turns per conversation in figure 2 (default 5)
//   --recap_max_bytes=N         cache.maxBytes of figure 2's proxy (default 33554432)
//   --recap_figures=LIST        which figures to run, e.g. 13 (default 123)
//   --recap_cli=PATH            the `recap` program (default: the one built beside this bench)
//   --recap_dir=DIR             where the files go (default: a new folder under $TMPDIR)
//   --recap_json=FILE           also write the figures as JSON comparisons, one object a line
// Exit status: 0, or 2 when something failed (a request, the proxy, an error in figure 2).
#include <fcntl.h>
#include <httplib.h>
#include <signal.h>
#include <spawn.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <map>
#include <memory>
#include <mutex>
#include <sstream>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>
#include <sys/stat.h>
#include <sys/wait.h>

#include "recap/codec.h"
#include "recap/config.h"
#include "recap/conversation.h"

#include "bench_support.h"
#include "support/test_data.h"
#include "w1_workload.h"

extern char** environ;

namespace {

using Clock = std::chrono::steady_clock;
using Json = nlohmann::json;

constexpr const char* kModel = "bench-model";
constexpr const char* kReplyText = "Done: the change is in place and the tests pass.";
constexpr const char* kSystemPrompt = "You are a coding agent working in a repository.";
constexpr const char* kKey = "bench-key-not-a-secret";

double Seconds(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double>(b - a).count();
}

double Percentile(std::vector<double> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  std::size_t k = static_cast<std::size_t>(std::ceil(p * static_cast<double>(v.size())));
  if (k == 0) k = 1;
  return v[std::min(k, v.size()) - 1];
}

std::string Ms(double s) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.2f ms", s * 1e3);
  return buf;
}

std::string Mib(double bytes) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f MiB", bytes / (1024.0 * 1024.0));
  return buf;
}

// --- the stand-in upstream ----------------------------------------------------------------------

std::string SseData(const std::string& json) { return "data: " + json + "\n\n"; }
std::string SseEvent(const std::string& name, const std::string& json) {
  return "event: " + name + "\n" + SseData(json);
}

// The stand-in's answers, written once: each a first event and the rest (two writes), or a
// whole body.
struct Answers {
  std::string chat_first, chat_rest, chat_body;
  std::string anthropic_first, anthropic_rest, anthropic_body;
  std::string chat_checkpoint, anthropic_checkpoint;
};

Answers MakeAnswers() {
  Answers a;
  const std::string text = kReplyText;
  const std::string half1 = text.substr(0, text.size() / 2);
  const std::string half2 = text.substr(text.size() / 2);
  const auto chunk = [](const Json& delta, const Json& finish) {
    return SseData(Json{
        {"id", "chatcmpl-bench"},
        {"object", "chat.completion.chunk"},
        {"created", 1700000000},
        {"model", kModel},
        {"choices", Json::array({{{"index", 0}, {"delta", delta}, {"finish_reason", finish}}})}}
                       .dump());
  };
  a.chat_first = chunk({{"role", "assistant"}, {"content", ""}}, nullptr);
  a.chat_rest = chunk({{"content", half1}}, nullptr) + chunk({{"content", half2}}, nullptr) +
                chunk(Json::object(), "stop") + "data: [DONE]\n\n";
  const auto chat_body = [](const std::string& content) {
    return Json{
        {"id", "chatcmpl-bench"},
        {"object", "chat.completion"},
        {"created", 1700000000},
        {"model", kModel},
        {"choices", Json::array({{{"index", 0},
                                  {"message", {{"role", "assistant"}, {"content", content}}},
                                  {"finish_reason", "stop"}}})},
        {"usage", {{"prompt_tokens", 1}, {"completion_tokens", 12}, {"total_tokens", 13}}}}
        .dump();
  };
  a.chat_body = chat_body(text);
  const Json usage = {{"input_tokens", 1}, {"output_tokens", 12}};
  a.anthropic_first = SseEvent("message_start", Json{{"type", "message_start"},
                                                     {"message",
                                                      {{"id", "msg_bench"},
                                                       {"type", "message"},
                                                       {"role", "assistant"},
                                                       {"model", kModel},
                                                       {"content", Json::array()},
                                                       {"stop_reason", nullptr},
                                                       {"stop_sequence", nullptr},
                                                       {"usage", usage}}}}
                                                    .dump());
  const auto delta = [](const std::string& piece) {
    return SseEvent("content_block_delta",
                    Json{{"type", "content_block_delta"},
                         {"index", 0},
                         {"delta", {{"type", "text_delta"}, {"text", piece}}}}
                        .dump());
  };
  a.anthropic_rest =
      SseEvent("content_block_start", Json{{"type", "content_block_start"},
                                           {"index", 0},
                                           {"content_block", {{"type", "text"}, {"text", ""}}}}
                                          .dump()) +
      delta(half1) + delta(half2) +
      SseEvent("content_block_stop", R"({"type":"content_block_stop","index":0})") +
      SseEvent("message_delta",
               R"({"type":"message_delta","delta":{"stop_reason":"end_turn","stop_sequence":null},)"
               R"("usage":{"output_tokens":12}})") +
      SseEvent("message_stop", R"({"type":"message_stop"})");
  const auto anthropic_body = [&usage](const Json& content) {
    return Json{{"id", "msg_bench"},        {"type", "message"},  {"role", "assistant"},
                {"model", kModel},          {"content", content}, {"stop_reason", "end_turn"},
                {"stop_sequence", nullptr}, {"usage", usage}}
        .dump();
  };
  a.anthropic_body = anthropic_body(Json::array({{{"type", "text"}, {"text", text}}}));
  const std::string checkpoint =
      Json{{"goal", "continue the session's work"}, {"instructions", Json::array()},
           {"discoveries", Json::array()},          {"accomplished", Json::array({"a"})},
           {"currentState", "carrying on"},         {"nextSteps", Json::array()},
           {"relevantFiles", Json::array()}}
          .dump();
  a.chat_checkpoint = chat_body(checkpoint);
  a.anthropic_checkpoint = anthropic_body(Json::array({{{"type", "text"}, {"text", checkpoint}}}));
  return a;
}

class StandIn {
 public:
  struct Counts {
    std::size_t model_requests = 0, model_bytes = 0;
    std::size_t summarizer_requests = 0, summarizer_bytes = 0;
    std::size_t other_requests = 0;
  };

  StandIn() : answers_(MakeAnswers()) {
    // A thread per connection (cpp-httplib's model): as many as the proxy and the clients
    // keep open at once.
    server_.new_task_queue = [] { return new httplib::ThreadPool(256); };
    server_.set_tcp_nodelay(true);
    server_.set_keep_alive_max_count(100000);
    server_.set_payload_max_length(std::size_t{256} << 20);
    // cpp-httplib listens with a backlog of 5 (CPPHTTPLIB_LISTEN_BACKLOG, compiled into Debian's
    // library): 100 connections at once would overflow it. A second listen() on the bound
    // socket raises it.
    server_.set_socket_options([this](socket_t sock) {
      httplib::default_socket_options(sock);
      listen_fd_ = sock;
    });
    server_.Post(".*",
                 [this](const httplib::Request& req, httplib::Response& res) { Handle(req, res); });
    server_.Get(".*", [this](const httplib::Request& req, httplib::Response& res) {
      if (req.path == "/v1/models" || req.path == "/models") {
        res.set_content(Json{{"data", Json::array({{{"id", kModel},
                                                    {"type", "model"},
                                                    {"context_window", 200000},
                                                    {"max_input_tokens", 200000}}})}}
                            .dump(),
                        "application/json");
      } else {
        res.status = 404;
      }
    });
    port_ = server_.bind_to_any_port("127.0.0.1");
    if (port_ <= 0 || ::listen(listen_fd_, 4096) != 0) {
      throw std::runtime_error("the stand-in upstream could not listen");
    }
    thread_ = std::thread([this] { server_.listen_after_bind(); });
  }
  ~StandIn() {
    server_.stop();
    if (thread_.joinable()) thread_.join();
  }
  int port() const { return port_; }

  // The replay's replies: the `content` of reply k (a JSON text), sent for X-Bench-Reply: k.
  void SetReplies(std::map<std::size_t, std::string> replies) {
    std::lock_guard<std::mutex> lock(mu_);
    replies_ = std::move(replies);
  }
  // The body size of the model request that asked for reply k.
  std::size_t ReplayBytes(std::size_t k) {
    std::lock_guard<std::mutex> lock(mu_);
    const auto it = replay_bytes_.find(k);
    return it == replay_bytes_.end() ? 0 : it->second;
  }
  Counts Take() {
    std::lock_guard<std::mutex> lock(mu_);
    Counts c = counts_;
    counts_ = Counts{};
    replay_bytes_.clear();
    return c;
  }

 private:
  void Handle(const httplib::Request& req, httplib::Response& res) {
    const bool anthropic = req.path.find("/messages") != std::string::npos;
    if (!req.has_header("X-Bench-Client")) {
      // Not the bench's client: the proxy's summarizer (its own headers), or something else.
      if (req.body.find("You write checkpoints") == std::string::npos) {
        std::lock_guard<std::mutex> lock(mu_);
        ++counts_.other_requests;
        res.status = 400;
        return;
      }
      {
        std::lock_guard<std::mutex> lock(mu_);
        ++counts_.summarizer_requests;
        counts_.summarizer_bytes += req.body.size();
      }
      const Json j = Json::parse(req.body, nullptr, false);
      if (j.is_object() && j.value("stream", false)) {  // not what recap asks; refused plainly
        res.status = 400;
        return;
      }
      res.set_content(anthropic ? answers_.anthropic_checkpoint : answers_.chat_checkpoint,
                      "application/json");
      return;
    }
    std::string scripted;
    {
      std::lock_guard<std::mutex> lock(mu_);
      ++counts_.model_requests;
      counts_.model_bytes += req.body.size();
      if (req.has_header("X-Bench-Reply")) {
        const std::size_t k =
            std::strtoull(req.get_header_value("X-Bench-Reply").c_str(), nullptr, 10);
        replay_bytes_[k] = req.body.size();
        const auto it = replies_.find(k);
        if (it != replies_.end()) scripted = it->second;
      }
    }
    if (!scripted.empty()) {  // the replay: whole bodies, Anthropic
      res.set_content(Json{{"id", "msg_bench"},
                           {"type", "message"},
                           {"role", "assistant"},
                           {"model", kModel},
                           {"content", Json::parse(scripted)},
                           {"stop_reason", "end_turn"},
                           {"stop_sequence", nullptr},
                           {"usage", {{"input_tokens", 1}, {"output_tokens", 1}}}}
                          .dump(),
                      "application/json");
      return;
    }
    // The bench's clients write "stream" before the messages.
    const bool stream =
        std::string_view(req.body).substr(0, 200).find("\"stream\":true") != std::string_view::npos;
    if (!stream) {
      res.set_content(anthropic ? answers_.anthropic_body : answers_.chat_body, "application/json");
      return;
    }
    const std::string* first = anthropic ? &answers_.anthropic_first : &answers_.chat_first;
    const std::string* rest = anthropic ? &answers_.anthropic_rest : &answers_.chat_rest;
    auto step = std::make_shared<int>(0);
    res.set_header("Cache-Control", "no-cache");
    res.set_chunked_content_provider("text/event-stream",
                                     [first, rest, step](std::size_t, httplib::DataSink& sink) {
                                       if ((*step)++ == 0)
                                         return sink.write(first->data(), first->size());
                                       if (!sink.write(rest->data(), rest->size())) return false;
                                       sink.done();
                                       return true;
                                     });
  }

  const Answers answers_;
  httplib::Server server_;
  int port_ = 0;
  socket_t listen_fd_ = -1;
  std::thread thread_;
  std::mutex mu_;
  Counts counts_;
  std::map<std::size_t, std::string> replies_;
  std::map<std::size_t, std::size_t> replay_bytes_;
};

// The machine's count of connections dropped because a listen queue was full
// (TcpExt ListenOverflows of /proc/net/netstat), or -1.
double ListenOverflows() {
  std::ifstream in("/proc/net/netstat");
  std::string names, values;
  while (std::getline(in, names) && std::getline(in, values)) {
    if (names.rfind("TcpExt:", 0) != 0) continue;
    std::istringstream n(names), v(values);
    std::string name, value;
    while (n >> name && v >> value) {
      if (name == "ListenOverflows") return std::strtod(value.c_str(), nullptr);
    }
  }
  return -1;
}

// --- the proxy, a child process -----------------------------------------------------------------

std::string ReadAll(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

class Proxy {
 public:
  Proxy(const std::string& cli, const std::string& dir, const std::string& name, int upstream_port,
        const std::string& config_json)
      : log_(dir + "/proxy-" + name + ".log") {
    const std::string db = dir + "/proxy-" + name + ".db";
    for (const char* suffix : {"", "-wal", "-shm"}) std::remove((db + suffix).c_str());
    const std::string config = dir + "/proxy-" + name + ".config.json";
    {
      std::ofstream out(config);
      out << config_json;
    }
    std::vector<std::string> args = {
        cli,          "proxy",
        "--upstream", "http://127.0.0.1:" + std::to_string(upstream_port),
        "--listen",   "127.0.0.1:0",
        "--db",       db,
        "--config",   config};
    std::vector<char*> argv;
    for (std::string& a : args) argv.push_back(&a[0]);
    argv.push_back(nullptr);
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0);
    posix_spawn_file_actions_addopen(&actions, 1, "/dev/null", O_WRONLY, 0);
    posix_spawn_file_actions_addopen(&actions, 2, log_.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    const int rc = posix_spawn(&pid_, argv[0], &actions, nullptr, argv.data(), environ);
    posix_spawn_file_actions_destroy(&actions);
    if (rc != 0) throw std::runtime_error("could not start " + cli);
    // It says where it listens on stderr.
    const std::string mark = "listening on http://127.0.0.1:";
    const auto deadline = Clock::now() + std::chrono::seconds(30);
    while (Clock::now() < deadline) {
      const std::string text = ReadAll(log_);
      const std::size_t at = text.find(mark);
      if (at != std::string::npos) {
        port_ = std::atoi(text.c_str() + at + mark.size());
        if (port_ > 0) return;
      }
      int status = 0;
      if (waitpid(pid_, &status, WNOHANG) == pid_) {
        pid_ = -1;
        throw std::runtime_error("recap proxy exited before it listened: " + text);
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    Stop();
    throw std::runtime_error("recap proxy did not say where it listens within 30 s: " +
                             ReadAll(log_));
  }
  ~Proxy() { Stop(); }
  Proxy(const Proxy&) = delete;
  Proxy& operator=(const Proxy&) = delete;

  int port() const { return port_; }
  pid_t pid() const { return pid_; }
  const std::string& log_path() const { return log_; }

  // A field of /proc/PID/status in bytes (VmHWM, VmRSS), or 0.
  double StatusBytes(const std::string& field) const {
    std::ifstream in("/proc/" + std::to_string(pid_) + "/status");
    std::string line;
    while (std::getline(in, line)) {
      if (line.rfind(field + ":", 0) == 0) {
        return std::strtod(line.c_str() + field.size() + 1, nullptr) * 1024.0;  // kB
      }
    }
    return 0;
  }

  // What its log says: the sessions it names, how many requests started one as a fork, and how
  // many were compacted before they went upstream.
  void Sessions(std::size_t* sessions, std::size_t* forks, std::size_t* compacted = nullptr) const {
    std::istringstream in(ReadAll(log_));
    std::string line;
    std::map<std::string, int> seen;
    *forks = 0;
    if (compacted != nullptr) *compacted = 0;
    while (std::getline(in, line)) {
      const std::size_t at = line.find(" session ");
      if (at == std::string::npos || line.find("recap proxy: POST ") != 0) continue;
      const std::size_t from = at + 9;
      const std::size_t end = line.find_first_of(" :", from);
      seen[line.substr(from, end - from)] = 1;
      if (line.find("(fork)") != std::string::npos) ++*forks;
      if (compacted != nullptr && line.find(", compacted;") != std::string::npos) ++*compacted;
    }
    *sessions = seen.size();
  }

  void Stop() {
    if (pid_ <= 0) return;
    ::kill(pid_, SIGTERM);
    int status = 0;
    waitpid(pid_, &status, 0);
    pid_ = -1;
  }

 private:
  std::string log_;
  pid_t pid_ = -1;
  int port_ = 0;
};

// --- the client ---------------------------------------------------------------------------------

enum class Format { kChat, kAnthropic };

const char* FormatName(Format f) { return f == Format::kChat ? "openai-chat" : "anthropic"; }

// A conversation as a client keeps it: its messages as JSON texts, resent whole every turn.
struct Conversation {
  Format format = Format::kChat;
  std::vector<std::string> messages;
  bool stream = true;

  std::string Body() const {
    std::size_t size = 256;
    for (const std::string& m : messages) size += m.size() + 1;
    std::string out;
    out.reserve(size);
    out += "{\"model\":\"";
    out += kModel;
    out += "\",\"stream\":";
    out += stream ? "true" : "false";
    out += ",\"max_tokens\":4096,";
    if (format == Format::kAnthropic) {
      out += "\"system\":\"";
      out += kSystemPrompt;
      out += "\",\"messages\":[";
    } else {
      out += "\"messages\":[{\"role\":\"system\",\"content\":\"";
      out += kSystemPrompt;
      out += "\"}";
      if (!messages.empty()) out += ',';
    }
    for (std::size_t i = 0; i < messages.size(); ++i) {
      if (i > 0) out += ',';
      out += messages[i];
    }
    out += "]}";
    return out;
  }
  const char* Path() const {
    return format == Format::kChat ? "/v1/chat/completions" : "/v1/messages";
  }
  httplib::Headers Headers() const {
    httplib::Headers h = {{"Content-Type", "application/json"},
                          {"Accept-Encoding", "identity"},
                          {"X-Bench-Client", "1"}};
    if (format == Format::kChat) {
      h.emplace("Authorization", std::string("Bearer ") + kKey);
    } else {
      h.emplace("x-api-key", kKey);
      h.emplace("anthropic-version", "2023-06-01");
    }
    return h;
  }
  void AddUser(const std::string& text) {
    messages.push_back(
        format == Format::kChat
            ? Json{{"role", "user"}, {"content", text}}.dump()
            : Json{{"role", "user"}, {"content", Json::array({{{"type", "text"}, {"text", text}}})}}
                  .dump());
  }
  void AddReply() {
    messages.push_back(
        format == Format::kChat
            ? Json{{"role", "assistant"}, {"content", kReplyText}}.dump()
            : Json{{"role", "assistant"},
                   {"content", Json::array({{{"type", "text"}, {"text", kReplyText}}})}}
                  .dump());
  }
};

// W1's first `messages` messages in `format`, the first user text starting with `tag`.
Conversation FromW1(const std::vector<recap::Message>& w1, std::size_t messages, Format format,
                    const std::string& tag) {
  recap::Conversation conv;
  conv.messages.assign(w1.begin(), w1.begin() + static_cast<std::ptrdiff_t>(messages));
  for (recap::Message& m : conv.messages) {
    m.id.clear();
    if (m.role != recap::Role::kUser) continue;
    for (recap::Part& p : m.parts) {
      if (auto* t = std::get_if<recap::Text>(&p)) {
        t->text = tag + t->text;
        break;
      }
    }
    break;
  }
  recap::Result<std::string> array = format == Format::kChat
                                         ? recap::openai_chat::EncodeMessages(conv)
                                         : recap::anthropic::EncodeMessages(conv);
  if (!array.ok()) throw std::runtime_error("encoding W1: " + array.status().ToString());
  Conversation c;
  c.format = format;
  for (const Json& m : Json::parse(*array)) c.messages.push_back(m.dump());
  return c;
}

struct Outcome {
  bool ok = false;
  double first = 0;  // seconds to the first byte of the body
  double total = 0;  // seconds to the end of the answer
  std::string error;
};

// Sends `body` and reads the whole answer: ok when 200 and, streamed, the stream's end came.
Outcome Send(httplib::Client& client, const Conversation& conv, const std::string& body,
             const httplib::Headers& extra = {}) {
  httplib::Request req;
  req.method = "POST";
  req.path = conv.Path();
  req.headers = conv.Headers();
  for (const auto& h : extra) req.headers.insert(h);
  req.body = body;
  Outcome out;
  std::string answer;
  bool first = true;
  Clock::time_point t0;
  req.content_receiver = [&](const char* data, std::size_t n, std::uint64_t, std::uint64_t) {
    if (first) {
      out.first = Seconds(t0, Clock::now());
      first = false;
    }
    answer.append(data, n);
    return true;
  };
  t0 = Clock::now();
  httplib::Result r = client.send(req);
  out.total = Seconds(t0, Clock::now());
  if (!r) {
    out.error = "transport error " + httplib::to_string(r.error());
    return out;
  }
  if (r->status != 200) {
    out.error = "HTTP " + std::to_string(r->status) + ": " + answer.substr(0, 300);
    return out;
  }
  if (conv.stream) {
    const char* end = conv.format == Format::kChat ? "data: [DONE]" : "event: message_stop";
    if (answer.find(end) == std::string::npos) {
      out.error = "the stream did not end: " + answer.substr(0, 300);
      return out;
    }
  }
  out.ok = true;
  return out;
}

std::unique_ptr<httplib::Client> NewClient(int port) {
  auto c = std::make_unique<httplib::Client>("127.0.0.1", port);
  c->set_keep_alive(true);
  c->set_tcp_nodelay(true);
  c->set_connection_timeout(10, 0);
  c->set_read_timeout(300, 0);
  c->set_write_timeout(300, 0);
  return c;
}

// The user's text of turn `k` of conversation `tag`: about 300 characters.
std::string UserText(const std::string& tag, int k) {
  std::string text = tag + "turn " + std::to_string(k) +
                     ": look at the failing test again, change the parser so that it accepts the "
                     "new header, run the whole suite and tell me what still fails. ";
  while (text.size() < 300) text += "Keep the change small. ";
  return text;
}

// A configuration under which W1 at 2,000 messages (1.3 million tokens by recap's estimate) is
// not compacted, in the request or in the background: automatic compaction off, the largest
// window recap trusts, and a character limit far above the conversation (no hard limit).
std::string NoCompaction(const std::string& more = "") {
  return std::string(R"({"compaction": {"auto": false}, )") +
         R"("limits": {"maxContextChars": 1000000000}, "provider": {"contextWindow": )" +
         std::to_string(recap::kMaxTrustedContextWindow) + "}" + more + "}";
}

// --- figure 1: added time to first byte ---------------------------------------------------------

struct TtfbRow {
  Format format = Format::kChat;
  std::size_t messages = 0;
  std::size_t samples = 0;
  double body_bytes = 0;  // mean of the timed requests'
  double direct_p50 = 0, direct_p99 = 0, proxy_p50 = 0, proxy_p99 = 0;
  double added_p50 = 0, added_p99 = 0, parse = 0, first_request = 0;
  double proxy_total_p50 = 0, direct_total_p50 = 0;
};

TtfbRow MeasureTtfb(Proxy& proxy, StandIn& standin, const std::vector<recap::Message>& w1,
                    std::size_t messages, Format format, int sessions, int turns, int* failures) {
  TtfbRow row;
  row.format = format;
  row.messages = messages;
  auto via_proxy = NewClient(proxy.port());
  auto direct = NewClient(standin.port());
  std::vector<double> direct_first, proxy_first, added, parse, first_requests, proxy_total,
      direct_total;
  double bytes = 0;
  std::size_t k = 0;
  for (int s = 0; s < sessions; ++s) {
    const std::string tag = "[" + std::string(FormatName(format)) + " " + std::to_string(messages) +
                            " #" + std::to_string(s) + "] ";
    Conversation conv = FromW1(w1, messages, format, tag);
    // The first request: the proxy creates the session with the whole history.
    conv.AddUser(UserText(tag, 0));
    {
      const std::string body = conv.Body();
      Outcome o = Send(*via_proxy, conv, body);
      if (!o.ok) {
        ++*failures;
        std::fprintf(stderr, "recap_bench_proxy: first request: %s\n", o.error.c_str());
      }
      first_requests.push_back(o.first);
      conv.AddReply();
    }
    for (int t = 1; t <= turns; ++t, ++k) {
      conv.AddUser(UserText(tag, t));
      const std::string body = conv.Body();
      bytes += static_cast<double>(body.size());
      const auto t0 = Clock::now();
      {
        Json parsed = Json::parse(body);
        benchmark::DoNotOptimize(parsed);
      }
      parse.push_back(Seconds(t0, Clock::now()));
      Outcome p, d;
      if (k % 2 == 0) {
        p = Send(*via_proxy, conv, body);
        d = Send(*direct, conv, body);
      } else {
        d = Send(*direct, conv, body);
        p = Send(*via_proxy, conv, body);
      }
      for (const Outcome* o : {&p, &d}) {
        if (!o->ok) {
          ++*failures;
          std::fprintf(stderr, "recap_bench_proxy: %s %s: %s\n", FormatName(format),
                       o == &p ? "through the proxy" : "direct", o->error.c_str());
        }
      }
      proxy_first.push_back(p.first);
      direct_first.push_back(d.first);
      added.push_back(p.first - d.first);
      proxy_total.push_back(p.total);
      direct_total.push_back(d.total);
      conv.AddReply();
    }
  }
  row.samples = added.size();
  row.body_bytes = row.samples ? bytes / static_cast<double>(row.samples) : 0;
  row.direct_p50 = Percentile(direct_first, 0.5);
  row.direct_p99 = Percentile(direct_first, 0.99);
  row.proxy_p50 = Percentile(proxy_first, 0.5);
  row.proxy_p99 = Percentile(proxy_first, 0.99);
  row.added_p50 = Percentile(added, 0.5);
  row.added_p99 = Percentile(added, 0.99);
  row.parse = Percentile(parse, 0.5);
  row.first_request = Percentile(first_requests, 0.5);
  row.proxy_total_p50 = Percentile(proxy_total, 0.5);
  row.direct_total_p50 = Percentile(direct_total, 0.5);
  return row;
}

// --- figure 2: concurrent conversations
// -----------------------------------------------------------

struct ConcurrentResult {
  int conversations = 0, turns = 0;
  std::size_t requests = 0, errors = 0;
  double seconds = 0;
  double ttfb_p50 = 0, ttfb_p99 = 0;
  double peak_rss = 0, max_bytes = 0, rss_before = 0;
  double history_bytes = 0;     // what the conversations hold at the end, as the clients send it
  double listen_overflows = 0;  // the machine's, during the run
  std::size_t sessions = 0, forks = 0;
  std::string first_error;
};

ConcurrentResult MeasureConcurrent(const std::string& cli, const std::string& dir, StandIn& standin,
                                   const std::vector<recap::Message>& w1, std::size_t messages,
                                   int conversations, int turns, std::size_t max_bytes) {
  ConcurrentResult res;
  res.conversations = conversations;
  res.turns = turns;
  res.max_bytes = static_cast<double>(max_bytes);
  Proxy proxy(cli, dir, "concurrent", standin.port(),
              NoCompaction(R"(, "cache": {"maxBytes": )" + std::to_string(max_bytes) + "}"));
  res.rss_before = proxy.StatusBytes("VmRSS");
  std::vector<Conversation> convs;
  for (int i = 0; i < conversations; ++i) {
    const std::string tag = "[concurrent #" + std::to_string(i) + "] ";
    convs.push_back(FromW1(w1, messages, i % 2 == 0 ? Format::kChat : Format::kAnthropic, tag));
  }
  std::mutex mu;
  std::condition_variable cv;
  bool go = false;
  std::vector<double> ttfb;
  std::vector<std::thread> threads;
  for (int i = 0; i < conversations; ++i) {
    threads.emplace_back([&, i] {
      Conversation& conv = convs[static_cast<std::size_t>(i)];
      const std::string tag = "[concurrent #" + std::to_string(i) + "] ";
      auto client = NewClient(proxy.port());
      std::vector<double> mine;
      std::size_t errors = 0;
      std::string error;
      {
        std::unique_lock<std::mutex> lock(mu);
        cv.wait(lock, [&] { return go; });
      }
      for (int t = 0; t < turns; ++t) {
        conv.AddUser(UserText(tag, t));
        Outcome o = Send(*client, conv, conv.Body());
        if (o.ok) {
          mine.push_back(o.first);
        } else {
          ++errors;
          if (error.empty()) error = "turn " + std::to_string(t + 1) + ": " + o.error;
        }
        conv.AddReply();
      }
      std::lock_guard<std::mutex> lock(mu);
      ttfb.insert(ttfb.end(), mine.begin(), mine.end());
      res.errors += errors;
      res.requests += static_cast<std::size_t>(turns);
      if (res.first_error.empty()) res.first_error = error;
    });
  }
  const double overflows = ListenOverflows();
  const auto t0 = Clock::now();
  {
    std::lock_guard<std::mutex> lock(mu);
    go = true;
  }
  cv.notify_all();
  for (std::thread& t : threads) t.join();
  res.seconds = Seconds(t0, Clock::now());
  res.listen_overflows = ListenOverflows() - overflows;
  res.peak_rss = proxy.StatusBytes("VmHWM");
  res.ttfb_p50 = Percentile(ttfb, 0.5);
  res.ttfb_p99 = Percentile(ttfb, 0.99);
  for (const Conversation& c : convs) res.history_bytes += static_cast<double>(c.Body().size());
  proxy.Stop();
  proxy.Sessions(&res.sessions, &res.forks);
  standin.Take();
  return res;
}

// --- figure 3: bytes upstream over a replayed session -------------------------------------------

struct ReplayResult {
  std::size_t messages = 0, turns = 0;
  double client_bytes = 0, upstream_bytes = 0;  // model requests
  double last_client = 0, last_upstream = 0;
  double max_client = 0, max_upstream = 0;
  std::size_t summarizer_calls = 0;
  double summarizer_bytes = 0;
  std::size_t sessions = 0, forks = 0, compacted = 0;
  std::vector<std::array<double, 3>> series;  // turn, client bytes, upstream bytes
};

ReplayResult MeasureReplay(const std::string& cli, const std::string& dir, StandIn& standin,
                           std::size_t limit_messages, std::size_t max_context_chars,
                           int* failures) {
  ReplayResult res;
  std::vector<std::string> all = recap::testing::ClaudeCodeMessages(
      recap::testing::DataPath(recap::testing::kClaudeCodeSampleFile));
  if (limit_messages > 0 && all.size() > limit_messages) all.resize(limit_messages);
  res.messages = all.size();
  // As the client sent them: role and content.
  std::vector<std::string> messages;
  std::map<std::size_t, std::string> replies;
  for (std::size_t i = 0; i < all.size(); ++i) {
    const Json m = Json::parse(all[i]);
    messages.push_back(Json{{"role", m.at("role")}, {"content", m.at("content")}}.dump());
    if (m.at("role") == "assistant") replies[i] = m.at("content").dump();
  }
  standin.Take();
  standin.SetReplies(replies);
  Proxy proxy(cli, dir, "replay", standin.port(),
              R"({"limits": {"maxContextChars": )" + std::to_string(max_context_chars) + "}}");
  auto client = NewClient(proxy.port());
  Conversation conv;
  conv.format = Format::kAnthropic;
  conv.stream = false;
  for (std::size_t i = 0; i < messages.size(); ++i) {
    if (i > 0 && replies.count(i) != 0) {  // the request the reply i answered
      const std::string body = conv.Body();
      Outcome o = Send(*client, conv, body, {{"X-Bench-Reply", std::to_string(i)}});
      if (!o.ok) {
        ++*failures;
        std::fprintf(stderr, "recap_bench_proxy: replay turn %zu: %s\n", res.turns + 1,
                     o.error.c_str());
      }
      ++res.turns;
      const double c = static_cast<double>(body.size());
      const double u = static_cast<double>(standin.ReplayBytes(i));
      res.client_bytes += c;
      res.upstream_bytes += u;
      res.last_client = c;
      res.last_upstream = u;
      res.max_client = std::max(res.max_client, c);
      res.max_upstream = std::max(res.max_upstream, u);
      res.series.push_back({static_cast<double>(res.turns), c, u});
    }
    conv.messages.push_back(messages[i]);
  }
  // Closed first: the proxy waits for an idle keep-alive connection's timeout when it stops.
  client.reset();
  proxy.Stop();
  proxy.Sessions(&res.sessions, &res.forks, &res.compacted);
  const StandIn::Counts counts = standin.Take();
  res.summarizer_calls = counts.summarizer_requests;
  res.summarizer_bytes = static_cast<double>(counts.summarizer_bytes);
  standin.SetReplies({});
  return res;
}

}  // namespace

int main(int argc, char** argv) {
  bool smoke = std::getenv("RECAP_BENCH_SMOKE") != nullptr;
  int sessions = -1, turns = -1, concurrent = -1, concurrent_turns = -1;
  std::size_t max_bytes = std::size_t{32} << 20;
  std::string cli = RECAP_BENCH_CLI_PATH;
  std::string dir;
  std::string json_path;
  std::string figures = "123";
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    std::string value;
    const auto number = [&value] {
      return static_cast<int>(std::strtol(value.c_str(), nullptr, 10));
    };
    if (arg == "--recap_smoke") {
      smoke = true;
    } else if (recap_bench::TakeFlag(arg, "recap_sessions", &value)) {
      sessions = number();
    } else if (recap_bench::TakeFlag(arg, "recap_turns", &value)) {
      turns = number();
    } else if (recap_bench::TakeFlag(arg, "recap_concurrent_turns", &value)) {
      concurrent_turns = number();
    } else if (recap_bench::TakeFlag(arg, "recap_concurrent", &value)) {
      concurrent = number();
    } else if (recap_bench::TakeFlag(arg, "recap_max_bytes", &value)) {
      max_bytes = std::strtoull(value.c_str(), nullptr, 10);
    } else if (recap_bench::TakeFlag(arg, "recap_figures", &value)) {
      figures = value;
    } else if (recap_bench::TakeFlag(arg, "recap_cli", &value)) {
      cli = value;
    } else if (recap_bench::TakeFlag(arg, "recap_dir", &value)) {
      dir = value;
    } else if (recap_bench::TakeFlag(arg, "recap_json", &value)) {
      json_path = value;
    } else if (recap_bench::TakeFlag(arg, "recap_repetitions", &value) ||
               arg.rfind("--benchmark_", 0) == 0) {
      // one run: the figures are compared within it
    } else {
      std::fprintf(stderr, "recap_bench_proxy: unknown flag %s (see the top of bench_proxy.cc)\n",
                   arg.c_str());
      return 2;
    }
  }
  if (sessions <= 0) sessions = smoke ? 1 : 5;
  if (turns <= 0) turns = smoke ? 4 : 20;
  if (concurrent <= 0) concurrent = smoke ? 5 : 100;
  if (concurrent_turns <= 0) concurrent_turns = smoke ? 2 : 5;
  const std::vector<std::size_t> sizes =
      smoke ? std::vector<std::size_t>{20, 40} : std::vector<std::size_t>{200, 2000};
  const std::size_t concurrent_messages = smoke ? 20 : 200;
  int failures = 0;
  ::signal(SIGPIPE, SIG_IGN);
  try {
    if (dir.empty()) {
      const char* tmp = std::getenv("TMPDIR");
      std::string pattern =
          std::string(tmp != nullptr && *tmp != '\0' ? tmp : "/tmp") + "/recap-bench-proxy-XXXXXX";
      if (::mkdtemp(&pattern[0]) == nullptr) throw std::runtime_error("mkdtemp failed");
      dir = pattern;
    } else {
      dir += "/proxy";
      ::mkdir(dir.c_str(), 0755);
    }
    recap_bench::W1Options w1o;
    w1o.messages = sizes.back();
    const std::vector<recap::Message> w1 = recap_bench::GenerateW1(w1o);
    StandIn standin;

    const auto run = [&figures](char figure) { return figures.find(figure) != std::string::npos; };
    std::vector<std::string> json_lines;

    // 1.
    if (run('1')) {
      std::vector<TtfbRow> rows;
      std::size_t ttfb_sessions = 0, ttfb_compacted = 0;
      {
        Proxy proxy(cli, dir, "ttfb", standin.port(), NoCompaction());
        for (std::size_t n : sizes) {
          for (Format f : {Format::kChat, Format::kAnthropic}) {
            rows.push_back(MeasureTtfb(proxy, standin, w1, n, f, sessions, turns, &failures));
          }
        }
        proxy.Stop();
        standin.Take();
        std::size_t forks = 0;
        proxy.Sessions(&ttfb_sessions, &forks, &ttfb_compacted);
      }
      std::printf(
          "\nrecap_bench_proxy: time to first byte of a streamed answer, through `recap proxy` "
          "against directly to the stand-in, per turn (%d conversations x %d turns per row; W1, "
          "nothing to compact); parse = nlohmann::json::parse of the same body once (median)\n",
          sessions, turns);
      std::printf("  %-12s %8s %11s %10s %10s %10s %10s %10s %10s %10s %12s %10s\n", "format",
                  "messages", "body bytes", "direct", "direct", "proxy", "proxy", "added", "added",
                  "parse", "p99 added/", "first");
      std::printf("  %-12s %8s %11s %10s %10s %10s %10s %10s %10s %10s %12s %10s\n", "", "", "",
                  "p50", "p99", "p50", "p99", "p50", "p99", "once", "parse", "request");
      for (const TtfbRow& r : rows) {
        const double ratio = r.parse > 0 ? r.added_p99 / r.parse : 0.0;
        std::printf("  %-12s %8s %11s %10s %10s %10s %10s %10s %10s %10s %11.2fx %10s\n",
                    FormatName(r.format),
                    recap_bench::Grouped(static_cast<double>(r.messages)).c_str(),
                    recap_bench::Grouped(r.body_bytes).c_str(), Ms(r.direct_p50).c_str(),
                    Ms(r.direct_p99).c_str(), Ms(r.proxy_p50).c_str(), Ms(r.proxy_p99).c_str(),
                    Ms(r.added_p50).c_str(), Ms(r.added_p99).c_str(), Ms(r.parse).c_str(), ratio,
                    Ms(r.first_request).c_str());
        std::ostringstream j;
        j << "  {\"id\": "
          << recap_bench::JsonString(std::string("proxy/ttfb ") + FormatName(r.format) + " " +
                                     std::to_string(r.messages))
          << ", \"messages\": " << r.messages << ", \"samples\": " << r.samples
          << ", \"body_bytes\": " << recap_bench::JsonNumber(r.body_bytes)
          << ", \"direct_p50_s\": " << recap_bench::JsonNumber(r.direct_p50)
          << ", \"direct_p99_s\": " << recap_bench::JsonNumber(r.direct_p99)
          << ", \"proxy_p50_s\": " << recap_bench::JsonNumber(r.proxy_p50)
          << ", \"proxy_p99_s\": " << recap_bench::JsonNumber(r.proxy_p99)
          << ", \"added_p50_s\": " << recap_bench::JsonNumber(r.added_p50)
          << ", \"added_p99_s\": " << recap_bench::JsonNumber(r.added_p99)
          << ", \"parse_s\": " << recap_bench::JsonNumber(r.parse)
          << ", \"ratio\": " << recap_bench::JsonNumber(ratio)
          << ", \"first_request_s\": " << recap_bench::JsonNumber(r.first_request) << "}";
        json_lines.push_back(j.str());
      }
      std::printf(
          "  (goal: p99 added < 2x parse once; `first request`: the median TTFB of each "
          "conversation's first request through the proxy, which creates its session)\n");
      if (ttfb_compacted > 0) {
        std::printf(
            "  the proxy compacted %zu requests: the figures are not those of its per-turn "
            "work alone\n",
            ttfb_compacted);
        ++failures;
      }
    }

    // 2.
    if (run('2')) {
      const ConcurrentResult conc = MeasureConcurrent(cli, dir, standin, w1, concurrent_messages,
                                                      concurrent, concurrent_turns, max_bytes);
      const double ratio = conc.max_bytes > 0 ? conc.peak_rss / conc.max_bytes : 0.0;
      std::printf(
          "\nrecap_bench_proxy: %d concurrent streamed conversations (W1's first %zu messages, "
          "half chat, half Anthropic) x %d turns through one proxy on %u cores\n",
          conc.conversations, concurrent_messages, conc.turns, std::thread::hardware_concurrency());
      const auto count = [](const char* name, double v) {
        std::printf("  %-38s %14s\n", name, recap_bench::Grouped(v).c_str());
      };
      count("requests", static_cast<double>(conc.requests));
      count("errors (must be 0)", static_cast<double>(conc.errors));
      count("sessions (expected one each)", static_cast<double>(conc.sessions));
      std::printf("  %-38s %12.2f s\n", "wall time", conc.seconds);
      std::printf("  %-38s %14s\n", "TTFB p50 under load", Ms(conc.ttfb_p50).c_str());
      std::printf("  %-38s %14s\n", "TTFB p99 under load", Ms(conc.ttfb_p99).c_str());
      std::printf("  %-38s %14s   (the machine's TcpExt ListenOverflows)\n",
                  "connections dropped, listen queue full",
                  recap_bench::Grouped(conc.listen_overflows).c_str());
      std::printf("  %-38s %14s\n", "conversations' bytes at the end",
                  Mib(conc.history_bytes).c_str());
      std::printf("  %-38s %14s\n", "proxy RSS after start", Mib(conc.rss_before).c_str());
      std::printf("  %-38s %14s   %.2fx cache.maxBytes (%s)\n", "proxy peak RSS (VmHWM)",
                  Mib(conc.peak_rss).c_str(), ratio, Mib(conc.max_bytes).c_str());
      if (conc.errors > 0) {
        std::printf("  first error: %s\n", conc.first_error.c_str());
        ++failures;
      }
      if (conc.sessions != static_cast<std::size_t>(conc.conversations) || conc.forks != 0) {
        std::printf("  expected one session per conversation and no fork; %zu forks\n", conc.forks);
        ++failures;
      }
      std::ostringstream j;
      j << "  {\"id\": \"proxy/concurrent\", \"conversations\": " << conc.conversations
        << ", \"turns\": " << conc.turns << ", \"requests\": " << conc.requests
        << ", \"errors\": " << conc.errors
        << ", \"seconds\": " << recap_bench::JsonNumber(conc.seconds)
        << ", \"ttfb_p50_s\": " << recap_bench::JsonNumber(conc.ttfb_p50)
        << ", \"ttfb_p99_s\": " << recap_bench::JsonNumber(conc.ttfb_p99)
        << ", \"listen_overflows\": " << recap_bench::JsonNumber(conc.listen_overflows)
        << ", \"peak_rss_bytes\": " << recap_bench::JsonNumber(conc.peak_rss)
        << ", \"max_bytes\": " << recap_bench::JsonNumber(conc.max_bytes)
        << ", \"ratio\": " << recap_bench::JsonNumber(ratio) << "}";
      json_lines.push_back(j.str());
    }

    // 3.
    if (run('3')) {
      const ReplayResult rep =
          MeasureReplay(cli, dir, standin, smoke ? 40 : 0, smoke ? 20000 : 200000, &failures);
      const double ratio = rep.client_bytes > 0
                               ? (rep.upstream_bytes + rep.summarizer_bytes) / rep.client_bytes
                               : 0.0;
      std::printf(
          "\nrecap_bench_proxy: bytes the upstream received per turn, the Claude Code sample "
          "(%zu messages) replayed as its client sent it, limits.maxContextChars %s\n",
          rep.messages, smoke ? "20,000" : "200,000");
      std::printf("  %-30s %14s %14s %10s\n", "figure", "with proxy", "without", "ratio");
      const auto line = [](const char* name, double with, double without) {
        std::printf("  %-30s %14s %14s %9.3fx\n", name, recap_bench::Grouped(with).c_str(),
                    recap_bench::Grouped(without).c_str(), without > 0 ? with / without : 0.0);
      };
      line("total bytes, model requests", rep.upstream_bytes, rep.client_bytes);
      line("total bytes, with summarizer's", rep.upstream_bytes + rep.summarizer_bytes,
           rep.client_bytes);
      line("last turn bytes", rep.last_upstream, rep.last_client);
      line("largest turn bytes", rep.max_upstream, rep.max_client);
      std::printf(
          "  turns %zu (%zu logged by the proxy as compacted); summarizer calls %zu (%s "
          "bytes); sessions %zu, forks %zu\n",
          rep.turns, rep.compacted, rep.summarizer_calls,
          recap_bench::Grouped(rep.summarizer_bytes).c_str(), rep.sessions, rep.forks);
      std::printf("  per turn (upstream/client bytes): ");
      const std::size_t every = std::max<std::size_t>(1, rep.series.size() / 10);
      for (std::size_t i = 0; i < rep.series.size(); ++i) {
        if (i % every != 0 && i + 1 != rep.series.size()) continue;
        std::printf("%s#%.0f %s/%s", i == 0 ? "" : ", ", rep.series[i][0],
                    recap_bench::Grouped(rep.series[i][2]).c_str(),
                    recap_bench::Grouped(rep.series[i][1]).c_str());
      }
      std::printf("\n");
      if (rep.sessions != 1 || rep.forks != 0) {
        std::printf("  expected the replay to be one session without forks\n");
        ++failures;
      }
      std::ostringstream j;
      j << "  {\"id\": \"proxy/replay bytes\", \"messages\": " << rep.messages
        << ", \"turns\": " << rep.turns
        << ", \"client_bytes\": " << recap_bench::JsonNumber(rep.client_bytes)
        << ", \"upstream_bytes\": " << recap_bench::JsonNumber(rep.upstream_bytes)
        << ", \"summarizer_bytes\": " << recap_bench::JsonNumber(rep.summarizer_bytes)
        << ", \"summarizer_calls\": " << rep.summarizer_calls
        << ", \"ratio\": " << recap_bench::JsonNumber(ratio)
        << ", \"last_client_bytes\": " << recap_bench::JsonNumber(rep.last_client)
        << ", \"last_upstream_bytes\": " << recap_bench::JsonNumber(rep.last_upstream)
        << ", \"last_ratio\": "
        << recap_bench::JsonNumber(rep.last_client > 0 ? rep.last_upstream / rep.last_client : 0)
        << "}";
      json_lines.push_back(j.str());
    }

    if (!json_path.empty()) {
      std::ofstream out(json_path);
      out << "{\"comparisons\": [\n";
      for (std::size_t i = 0; i < json_lines.size(); ++i) {
        out << json_lines[i] << (i + 1 < json_lines.size() ? "," : "") << "\n";
      }
      out << "]}\n";
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "recap_bench_proxy: %s\n", e.what());
    return 2;
  }
  if (failures > 0) {
    std::fprintf(stderr, "recap_bench_proxy: %d failure(s) (see above)\n", failures);
    return 2;
  }
  return 0;
}
