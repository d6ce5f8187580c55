// recap CLI — the server of `recap proxy` (proxy_server.h).
#include "proxy_server.h"

#include <httplib.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <deque>
#include <limits>
#include <map>
#include <mutex>
#include <random>
#include <thread>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>
#include <sys/socket.h>
#include <sys/stat.h>

#include "recap/codec.h"
#include "recap/compactor.h"
#include "recap/http/http_provider.h"

#include "chain.h"
#include "cli.h"
#include "curl_transport.h"
#include "proxy_request.h"
#include "reply.h"
#include "report.h"
#include "sse_parser.h"

namespace recap_cli {
namespace proxy_server {

namespace http = recap::internal::http;
using JsonValue = nlohmann::json;

constexpr const char* kSaltSession = "recap-cli.proxy-salt";
constexpr std::size_t kMaxQueuedBytes = std::size_t{4}
                                        << 20;  // a slow client holds back the upstream

// --- small helpers -----------------------------------------------------------------------------

std::string Hex(const recap_proxy::Link& link) {
  char buf[33];
  std::snprintf(buf, sizeof buf, "%016llx%016llx", static_cast<unsigned long long>(link.a),
                static_cast<unsigned long long>(link.b));
  return buf;
}

std::optional<recap_proxy::Link> ParseHexLink(std::string_view text) {
  if (text.size() != 32) return std::nullopt;
  recap_proxy::Link link;
  for (std::size_t i = 0; i < 32; ++i) {
    const char c = text[i];
    int v = 0;
    if (c >= '0' && c <= '9') {
      v = c - '0';
    } else if (c >= 'a' && c <= 'f') {
      v = c - 'a' + 10;
    } else {
      return std::nullopt;
    }
    std::uint64_t& half = i < 16 ? link.a : link.b;
    half = (half << 4) | static_cast<std::uint64_t>(v);
  }
  return link;
}

std::string RandomHex(std::size_t bytes) {
  std::random_device rd;
  std::string out;
  static const char* digits = "0123456789abcdef";
  for (std::size_t i = 0; i < bytes; ++i) {
    const unsigned v = rd() & 0xffu;
    out += digits[v >> 4];
    out += digits[v & 0xfu];
  }
  return out;
}

std::string Lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

// The format a path speaks, or empty: the three endpoints, with or without the /v1 prefix.
std::string FormatOfPath(const std::string& path) {
  std::string p = path;
  if (p.rfind("/v1/", 0) == 0) p = p.substr(3);
  if (p == "/messages") return "anthropic";
  if (p == "/chat/completions") return "openai-chat";
  if (p == "/responses") return "openai-responses";
  return {};
}

// The format's error body: what a client of that API reads as an error.
std::string ErrorBody(const std::string& format, int status, const std::string& message) {
  JsonValue j;
  const bool client_side = status >= 400 && status < 500;
  if (format == "anthropic") {
    j["type"] = "error";
    j["error"] = {{"type", client_side ? "invalid_request_error" : "api_error"},
                  {"message", message}};
  } else {
    j["error"] = {{"message", message},
                  {"type", client_side ? "invalid_request_error" : "server_error"},
                  {"param", nullptr},
                  {"code", "recap_proxy"}};
  }
  return j.dump();
}

// The client's credential as it sent it (an API key, or an Authorization header's value): what
// tells clients apart. Never logged, never stored.
std::string Credential(const httplib::Request& req) {
  for (const char* name : {"x-api-key", "authorization", "api-key"}) {
    if (req.has_header(name)) return std::string(name) + ":" + req.get_header_value(name);
  }
  return {};
}

bool HopByHop(const std::string& lower) {
  static const char* const kDropped[] = {"host",
                                         "content-length",
                                         "connection",
                                         "keep-alive",
                                         "transfer-encoding",
                                         "te",
                                         "trailer",
                                         "upgrade",
                                         "expect",
                                         "proxy-authorization",
                                         "proxy-connection",
                                         "accept-encoding",
                                         "x-recap-session",
                                         "x-recap-token",
                                         "remote_addr",
                                         "remote_port",
                                         "local_addr",
                                         "local_port"};
  for (const char* d : kDropped) {
    if (lower == d) return true;
  }
  return false;
}

// --- codecs by format ---------------------------------------------------------------------------

recap::Result<recap::Conversation> Decode(const std::string& format, const std::string& json) {
  recap::DecodeOptions options;
  options.keep_unknown_blocks = true;
  options.split_instructions = false;
  if (format == "anthropic") return recap::anthropic::DecodeMessages(json, options);
  if (format == "openai-chat") return recap::openai_chat::DecodeMessages(json, options);
  return recap::openai_responses::DecodeMessages(json, options);
}

// The transcript's messages in `format`, as views of each message's kept encoding (valid while
// the transcript holds them): no copy until the upstream body is written.
recap::Status EncodeParts(const std::string& format, const recap::Transcript& t,
                          std::vector<std::string_view>* parts) {
  if (format == "anthropic") return recap::anthropic::EncodeTranscriptParts(t, 0, parts);
  if (format == "openai-chat") return recap::openai_chat::EncodeTranscriptParts(t, 0, parts);
  return recap::openai_responses::EncodeTranscriptParts(t, 0, parts);
}

// The messages [begin, end) as one array; `bare`: without their prompt-caching breakpoints,
// which belong to the request, not the session.
std::string JoinArray(const std::vector<std::string_view>& texts, std::size_t begin,
                      std::size_t end, bool bare = false) {
  std::string out = "[";
  for (std::size_t i = begin; i < end; ++i) {
    if (i > begin) out += ',';
    if (bare) {
      out += WithoutBreakpoints(texts[i]);
    } else {
      out.append(texts[i]);
    }
  }
  out += ']';
  return out;
}

// Whether a message (an item of Responses' input) is the model's: what a reply is made of.
bool IsReplyItem(const std::string& format, std::string_view text) {
  const JsonValue j = JsonValue::parse(text.begin(), text.end(), nullptr, false);
  if (!j.is_object()) return false;
  if (j.contains("role")) return j["role"].is_string() && j["role"] == "assistant";
  if (format != "openai-responses") return false;
  const std::string type = j.value("type", std::string());
  if (type.empty() || type == "item_reference") return false;
  return type.size() < 7 || type.compare(type.size() - 7, 7, "_output") != 0;
}

// How many of `messages`, from `at`, are the client's copy of one reply: one message, or for
// Responses the run of the model's items.
std::size_t ReplySpan(const std::string& format, const std::vector<std::string_view>& messages,
                      std::size_t at) {
  std::size_t end = at;
  while (end < messages.size() && IsReplyItem(format, messages[end])) {
    ++end;
    if (format != "openai-responses") break;
  }
  return end - at;
}

std::string FingerprintHash(const std::vector<recap::Message>& reply) {
  const recap_proxy::Fingerprint fp = recap_proxy::ReplyFingerprint(reply);
  recap::Result<recap_proxy::Link> h =
      recap_proxy::ChainNext(recap_proxy::Link{}, JsonValue(fp).dump(), "reply");
  return h.ok() ? Hex(*h) : std::string();
}

// What a message's id says of the request it came with (proxy_server.h).
struct Tag {
  bool reply = false;
  std::size_t count = 0;
  recap_proxy::Link link;
  std::string fingerprint;  // reply: its hash
  std::string response_id;  // reply: a Responses id
  bool last = true;         // the last message of its append
};

std::optional<Tag> ParseTag(const std::string& id) {
  if (id.size() < 3 || (id.compare(0, 3, "pc-") != 0 && id.compare(0, 3, "pr-") != 0)) {
    return std::nullopt;
  }
  Tag tag;
  tag.reply = id[1] == 'r';
  std::size_t at = 3;
  const std::size_t dash = id.find('-', at);
  if (dash == std::string::npos) return std::nullopt;
  try {
    tag.count = static_cast<std::size_t>(std::stoull(id.substr(at, dash - at)));
  } catch (...) {
    return std::nullopt;
  }
  std::optional<recap_proxy::Link> link = ParseHexLink(std::string_view(id).substr(dash + 1, 32));
  if (!link) return std::nullopt;
  tag.link = *link;
  at = dash + 33;
  if (at >= id.size()) {
    if (tag.reply) return std::nullopt;
    return tag;
  }
  if (id[at] != '-') return std::nullopt;
  const std::string rest = id.substr(at + 1);
  if (!tag.reply) {
    tag.last = false;
    return tag;
  }
  if (!rest.empty() && rest[0] == 'r') {
    tag.last = false;
    return tag;
  }
  tag.fingerprint = rest.substr(0, 32);
  if (rest.size() > 33) tag.response_id = rest.substr(33);
  return tag;
}

// --- the upstream exchange --------------------------------------------------------------------

// One request to the upstream, on a thread of its own, its answer handed over as it arrives.
struct Exchange {
  http::HttpRequest request;
  std::unique_ptr<recap_proxy::ReplyAssembler> assembler;  // null: nothing to assemble
  std::unique_ptr<http::SseParser> sse;

  std::mutex mu;
  std::condition_variable cv;
  std::deque<std::string> chunks;
  std::size_t queued = 0;
  bool streaming = false;
  bool finished = false;
  http::TransportResult result;
  recap::CancellationSource cancel;
  std::atomic<bool> client_gone{false};
  std::thread thread;
  // A streamed answer's status line and headers, as they were when the stream began.
  std::vector<std::pair<std::string, std::string>> stream_headers;
  std::string stream_content_type;
  long stream_status = 200;

  ~Exchange() {
    client_gone = true;
    cancel.Cancel();
    cv.notify_all();
    if (thread.joinable()) thread.join();
  }

  void Start() {
    if (assembler) {
      sse = std::make_unique<http::SseParser>([this](const http::SseEvent& e) {
        (void)assembler->Event(e.event, e.data);  // an error leaves the reply incomplete
        return true;
      });
    }
    request.on_stream_start = [this](const http::TransportResult& so_far) {
      std::lock_guard<std::mutex> lock(mu);
      stream_headers = so_far.headers;
      stream_content_type = so_far.content_type;
      stream_status = so_far.status;
    };
    thread = std::thread([this] {
      http::TransportResult r =
          http::Perform(request, cancel.Token(), [this](std::string_view chunk) {
            if (sse) sse->Feed(chunk);
            std::unique_lock<std::mutex> lock(mu);
            cv.wait(lock, [&] { return queued < kMaxQueuedBytes || client_gone; });
            if (client_gone) return false;
            chunks.emplace_back(chunk);
            queued += chunk.size();
            streaming = true;
            cv.notify_all();
            return true;
          });
      if (sse && r.error == http::TransportError::kNone) sse->Finish();
      std::lock_guard<std::mutex> lock(mu);
      result = std::move(r);
      finished = true;
      cv.notify_all();
    });
  }

  // Waits until the answer starts streaming or is whole.
  void AwaitStart() {
    std::unique_lock<std::mutex> lock(mu);
    cv.wait(lock, [&] { return streaming || finished; });
  }
};

// Whether a response header of the upstream's is the connection's own (or set by the server
// library from the body), not passed on.
bool OwnResponseHeader(const std::string& lower) {
  static const char* const kOwn[] = {
      "connection", "keep-alive", "transfer-encoding", "content-length",     "content-type",
      "te",         "trailer",    "upgrade",           "proxy-authenticate", "proxy-connection"};
  for (const char* o : kOwn) {
    if (lower == o) return true;
  }
  return false;
}

void PassHeaders(const std::vector<std::pair<std::string, std::string>>& headers,
                 httplib::Response* res) {
  for (const auto& [name, value] : headers) {
    if (!OwnResponseHeader(Lower(name))) res->set_header(name.c_str(), value);
  }
}

// recap's own words for a transport failure, and the status it answers with.
std::pair<int, std::string> TransportFailure(const http::TransportResult& r,
                                             const std::string& upstream) {
  using E = http::TransportError;
  switch (r.error) {
    case E::kConnect:
    case E::kConnectTimeout:
      return {502, "recap proxy could not reach the upstream " + upstream + " (" + r.detail +
                       "); check that it runs and the --upstream URL"};
    case E::kTimeout:
      return {504, "the upstream " + upstream + " did not finish answering in time"};
    case E::kTls:
      return {502, "recap proxy could not verify the upstream's TLS certificate (" + r.detail +
                       "); give its CA with --ca-path FILE"};
    case E::kTooLarge:
      return {502, "the upstream's answer was larger than recap proxy relays (64 MiB)"};
    default:
      return {502, "the upstream " + upstream +
                       " closed the connection before its answer was "
                       "complete (" +
                       r.detail + ")"};
  }
}

// The Compactor's events worth a line of the log: compactions, undoes and failures.
class LogSink : public recap::EventSink {
 public:
  explicit LogSink(std::function<void(const std::string&)> log) : log_(std::move(log)) {}
  void OnEvent(const recap::Event& event) override {
    if (!log_) return;
    const std::string& t = event.type;
    if (t.find("compaction") == std::string::npos && t.find("failed") == std::string::npos &&
        t.find("reduction") == std::string::npos && t.find("window") == std::string::npos) {
      return;
    }
    log_("session " + event.session + ": " + t + " " + event.json);
  }

 private:
  std::function<void(const std::string&)> log_;
};

// Each session's newest events, for its /recap/ page.
class EventRing : public recap::EventSink {
 public:
  static constexpr std::size_t kPerSession = 1000;
  void OnEvent(const recap::Event& event) override {
    JsonValue j = JsonValue::parse(event.json, nullptr, false);
    if (!j.is_object()) return;
    std::lock_guard<std::mutex> lock(mu_);
    std::deque<JsonValue>& q = events_[event.session];
    q.push_back(std::move(j));
    if (q.size() > kPerSession) q.pop_front();
  }
  std::vector<JsonValue> Of(const std::string& session) const {
    std::lock_guard<std::mutex> lock(mu_);
    const auto it = events_.find(session);
    if (it == events_.end()) return {};
    return std::vector<JsonValue>(it->second.begin(), it->second.end());
  }

 private:
  mutable std::mutex mu_;
  std::map<std::string, std::deque<JsonValue>> events_;
};

// "%XX" for every byte a query value may not hold as it is.
std::string UrlEncode(const std::string& text) {
  static const char* digits = "0123456789ABCDEF";
  std::string out;
  for (const unsigned char c : text) {
    if (std::isalnum(c) || c == '-' || c == '_' || c == '.' || c == '~') {
      out += static_cast<char>(c);
    } else {
      out += '%';
      out += digits[c >> 4];
      out += digits[c & 15];
    }
  }
  return out;
}

}  // namespace proxy_server

using proxy_server::Exchange;
using proxy_server::Tag;

struct ProxyServer::Impl {
  ProxyOptions options;
  httplib::Server server;
  int bound_port = 0;
  int listening_socket = -1;
  std::string salt;

  std::mutex mu;  // guards what follows
  recap_proxy::ChainIndex index;
  recap_proxy::DigestCache digests;                     // has its own lock
  std::map<std::string, std::uint64_t> seen_version;    // session -> its version as last read
  std::map<std::string, std::string> response_session;  // Responses id -> session
  std::map<std::string, std::shared_ptr<std::mutex>> session_locks;
  std::map<std::string, std::shared_ptr<recap::Compactor>> compactors;
  std::map<std::string, std::chrono::steady_clock::time_point> last_used;  // session -> request
  std::shared_ptr<proxy_server::EventRing> ring = std::make_shared<proxy_server::EventRing>();

  void Log(const std::string& line) const {
    if (options.log) options.log(line);
  }

  std::shared_ptr<std::mutex> SessionLock(const std::string& session) {
    std::lock_guard<std::mutex> lock(mu);
    std::shared_ptr<std::mutex>& m = session_locks[session];
    if (!m) m = std::make_shared<std::mutex>();
    return m;
  }

  // --- the proxy's state in the store ---

  recap::Status LoadSalt() {
    recap::SessionStore& store = *options.store;
    for (int attempt = 0; attempt < 2; ++attempt) {
      recap::Result<recap::SessionState> state = store.Load(proxy_server::kSaltSession);
      if (!state.ok()) return state.status();
      if (state->version != 0 && !state->transcript.empty()) {
        const recap::Message& m = state->transcript[0];
        for (const recap::Part& p : m.parts) {
          if (const auto* t = std::get_if<recap::Text>(&p)) salt = t->text;
        }
        if (salt.size() == 64) return recap::Status::OK();
        return recap::Status::Corruption(
            "the proxy's salt in session '" + std::string(proxy_server::kSaltSession) +
            "' is damaged; remove that session to start the proxy's chains anew");
      }
      recap::Message m;
      m.role = recap::Role::kSystem;
      m.parts.emplace_back(recap::Text{proxy_server::RandomHex(32), {}});
      std::vector<recap::NewSession> create(1);
      create[0].session = proxy_server::kSaltSession;
      create[0].messages.push_back(std::move(m));
      recap::Result<std::vector<std::uint64_t>> made = store.CreateSessions(std::move(create));
      if (made.ok() || made.status().code() == recap::StatusCode::kConflict) continue;
      return made.status();
    }
    return recap::Status::Internal("the proxy's salt could not be read back after it was written");
  }

  // Reads `session`'s latest request from its messages' ids into the index (mu held).
  void RestoreFrom(const std::string& session, const recap::Transcript& t, std::uint64_t version) {
    seen_version[session] = version;
    for (std::size_t i = t.size(); i-- > 0;) {
      const std::optional<Tag> tag = proxy_server::ParseTag(t[i].id);
      if (!tag || !tag->last) continue;
      std::optional<recap_proxy::Fingerprint> reply;
      if (tag->reply) {
        reply = tag->fingerprint;
        if (!tag->response_id.empty()) response_session[tag->response_id] = session;
      }
      index.Restore(session, tag->link, tag->count, reply);
      return;
    }
  }

  // Reads the sessions the index does not know yet (a restart, another proxy's new ones).
  recap::Status RefreshUnknown() {
    recap::Result<std::vector<std::string>> sessions = options.store->ListSessions();
    if (!sessions.ok()) return sessions.status();
    for (const std::string& s : *sessions) {
      if (s.rfind("recap-cli.", 0) == 0) continue;
      {
        std::lock_guard<std::mutex> lock(mu);
        if (seen_version.count(s) != 0) continue;
      }
      recap::Result<recap::SessionState> state = options.store->Load(s);
      if (!state.ok()) return state.status();
      std::lock_guard<std::mutex> lock(mu);
      RestoreFrom(s, state->transcript, state->version);
    }
    return recap::Status::OK();
  }

  // Makes the index's view of `session` current when the store moved on (another proxy, a
  // compaction). Returns whether it changed.
  recap::Result<bool> Refresh(const std::string& session) {
    std::uint64_t seen = 0;
    {
      std::lock_guard<std::mutex> lock(mu);
      const auto it = seen_version.find(session);
      if (it != seen_version.end()) seen = it->second;
    }
    recap::Result<recap::SessionChanges> changes = options.store->LoadChanges(session, seen);
    if (!changes.ok()) return changes.status();
    if (changes->version == seen) return false;
    recap::Result<recap::SessionState> state = options.store->Load(session);
    if (!state.ok()) return state.status();
    std::lock_guard<std::mutex> lock(mu);
    const std::optional<recap_proxy::ChainIndex::Latest> before = index.LatestOf(session);
    RestoreFrom(session, state->transcript, state->version);
    const std::optional<recap_proxy::ChainIndex::Latest> after = index.LatestOf(session);
    const bool moved = before.has_value() != after.has_value() ||
                       (before && (before->link != after->link || before->reply != after->reply));
    return moved;
  }

  // --- the Compactor for a client, format and model ---

  recap::Result<std::shared_ptr<recap::Compactor>> CompactorFor(const std::string& format,
                                                                const std::string& model,
                                                                const httplib::Request& req) {
    const std::string credential = proxy_server::Credential(req);
    recap::Result<recap_proxy::Link> key_link =
        recap_proxy::ChainNext(recap_proxy::ChainStart(salt, credential, format),
                               proxy_server::JsonValue(model).dump(), "model");
    if (!key_link.ok()) return key_link.status();
    const std::string key = proxy_server::Hex(*key_link);
    {
      std::lock_guard<std::mutex> lock(mu);
      const auto it = compactors.find(key);
      if (it != compactors.end()) return it->second;
    }
    recap::HttpProviderOptions po;
    po.protocol = format == "anthropic"     ? recap::HttpProtocol::kAnthropic
                  : format == "openai-chat" ? recap::HttpProtocol::kOpenAiChat
                                            : recap::HttpProtocol::kOpenAiResponses;
    po.base_url = format == "anthropic" ? options.upstream : options.upstream + "/v1";
    po.model = options.summarizer_model.empty() ? model : options.summarizer_model;
    if (po.model.empty()) po.model = "default";
    po.verify_tls = options.verify_tls;
    po.ca_path = options.ca_path;
    po.max_retries = 1;
    if (req.has_header("x-api-key")) {
      if (format == "anthropic") {
        po.api_key = req.get_header_value("x-api-key");
      } else {
        po.extra_headers.emplace_back("x-api-key", req.get_header_value("x-api-key"));
      }
    } else if (req.has_header("authorization")) {
      const std::string auth = req.get_header_value("authorization");
      if (format != "anthropic" && auth.rfind("Bearer ", 0) == 0) {
        po.api_key = auth.substr(7);
      } else {
        po.extra_headers.emplace_back("Authorization", auth);
      }
    } else if (req.has_header("api-key")) {
      po.extra_headers.emplace_back("api-key", req.get_header_value("api-key"));
    }
    for (const char* h :
         {"anthropic-version", "anthropic-beta", "openai-organization", "openai-project"}) {
      if (req.has_header(h) && !(format == "anthropic" && std::string(h) == "anthropic-version")) {
        po.extra_headers.emplace_back(h, req.get_header_value(h));
      }
    }
    recap::Result<std::shared_ptr<recap::Provider>> provider = recap::NewHttpProvider(po);
    if (!provider.ok()) return provider.status();
    std::vector<std::shared_ptr<recap::EventSink>> sinks = options.sinks;
    sinks.push_back(std::make_shared<proxy_server::LogSink>(options.log));
    sinks.push_back(ring);
    recap::Result<std::unique_ptr<recap::Compactor>> made =
        recap::Compactor::Create(options.config, *provider, options.store, {}, sinks);
    if (!made.ok()) return made.status();
    std::shared_ptr<recap::Compactor> compactor(std::move(*made));
    std::lock_guard<std::mutex> lock(mu);
    return compactors.emplace(key, compactor).first->second;
  }

  // --- answering ---

  static void Error(httplib::Response& res, const std::string& format, int status,
                    const std::string& message) {
    res.status = status;
    res.set_content(proxy_server::ErrorBody(format, status, message), "application/json");
  }

  bool Authorized(const httplib::Request& req, std::string* target) const {
    if (options.token.empty()) return true;
    if (req.has_header("x-recap-token") && req.get_header_value("x-recap-token") == options.token) {
      return true;
    }
    const std::string prefix = "/t/" + options.token;
    if (target->rfind(prefix + "/", 0) == 0) {
      *target = target->substr(prefix.size());
      return true;
    }
    return false;
  }

  std::shared_ptr<Exchange> NewExchange(const httplib::Request& req, const std::string& target,
                                        std::string body, const std::string& format) {
    auto ex = std::make_shared<Exchange>();
    ex->request.method = req.method == "GET" ? "GET" : "POST";
    ex->request.url = options.upstream + target;
    for (const auto& [name, value] : req.headers) {
      if (proxy_server::HopByHop(proxy_server::Lower(name))) continue;
      ex->request.headers.push_back(name + ": " + value);
    }
    ex->request.body = std::move(body);
    ex->request.timeout_ms = 3600000;
    ex->request.verify_tls = options.verify_tls;
    if (!options.ca_path.empty()) {
      struct stat st {};
      if (::stat(options.ca_path.c_str(), &st) == 0 && S_ISDIR(st.st_mode)) {
        ex->request.ca_dir = options.ca_path;
      } else {
        ex->request.ca_file = options.ca_path;
      }
    }
    if (!format.empty()) ex->assembler = std::make_unique<recap_proxy::ReplyAssembler>(format);
    return ex;
  }

  // Sends the exchange's answer to the client: whole, or streamed as it comes. `done` runs once
  // the answer was passed on whole and the client got all of it (to append the reply).
  void Answer(const std::shared_ptr<Exchange>& ex, const std::string& format,
              httplib::Response& res, std::function<void(Exchange&)> done) {
    ex->AwaitStart();
    bool streaming = false;
    {
      std::lock_guard<std::mutex> lock(ex->mu);
      streaming = ex->streaming;
    }
    if (!streaming) {
      // Whole (or failed before anything arrived).
      std::unique_lock<std::mutex> lock(ex->mu);
      ex->cv.wait(lock, [&] { return ex->finished; });
      const proxy_server::http::TransportResult& r = ex->result;
      if (r.error != proxy_server::http::TransportError::kNone) {
        const auto [status, message] = proxy_server::TransportFailure(r, options.upstream);
        lock.unlock();
        Log("upstream failed: " + message);
        Error(res, format.empty() ? "openai-chat" : format, status, message);
        return;
      }
      res.status = static_cast<int>(r.status);
      proxy_server::PassHeaders(r.headers, &res);
      res.set_content(r.body, r.content_type.empty() ? "application/json" : r.content_type);
      if (r.status >= 200 && r.status < 300 && ex->assembler) {
        (void)ex->assembler->Body(r.body);
        lock.unlock();
        if (done) done(*ex);
      }
      return;
    }
    std::string content_type = "text/event-stream";
    {
      std::lock_guard<std::mutex> lock(ex->mu);
      res.status = static_cast<int>(ex->stream_status);
      proxy_server::PassHeaders(ex->stream_headers, &res);
      if (!ex->stream_content_type.empty()) content_type = ex->stream_content_type;
    }
    if (!res.has_header("Cache-Control")) res.set_header("Cache-Control", "no-cache");
    res.set_chunked_content_provider(
        content_type,
        [ex, done](std::size_t, httplib::DataSink& sink) {
          std::unique_lock<std::mutex> lock(ex->mu);
          ex->cv.wait(lock, [&] { return !ex->chunks.empty() || ex->finished; });
          while (!ex->chunks.empty()) {
            std::string chunk = std::move(ex->chunks.front());
            ex->chunks.pop_front();
            ex->queued -= chunk.size();
            ex->cv.notify_all();
            lock.unlock();
            if (!sink.write(chunk.data(), chunk.size())) {
              ex->client_gone = true;
              ex->cv.notify_all();
              return false;
            }
            lock.lock();
          }
          if (!ex->finished) return true;
          if (ex->result.error != proxy_server::http::TransportError::kNone) {
            // Cut off upstream: the client sees the cut too, not a clean end.
            return false;
          }
          lock.unlock();
          // The reply is kept before the client sees the end: its next request finds it.
          if (done) done(*ex);
          sink.done();
          return true;
        },
        [ex](bool success) {
          if (!success) {
            ex->client_gone = true;
            ex->cv.notify_all();
          }
        });
  }

  void PassThrough(const httplib::Request& req, httplib::Response& res, std::string target) {
    if (!Authorized(req, &target)) {
      Error(res, "openai-chat", 401, "recap proxy needs its token: send X-Recap-Token");
      return;
    }
    if (req.method == "HEAD") {  // a client's check that the server is up
      res.status = 200;
      return;
    }
    if (req.method != "GET" && req.method != "POST") {
      Error(res, "openai-chat", 405, "recap proxy relays GET and POST only, not " + req.method);
      return;
    }
    std::shared_ptr<Exchange> ex = NewExchange(req, target, req.body, {});
    ex->Start();
    Answer(ex, {}, res, {});
  }

  void Model(const httplib::Request& req, httplib::Response& res, std::string target,
             const std::string& format);

  // The read-only pages at /recap/: the sessions, newest first, each with its report (docs/
  // report.md), reloading themselves every few seconds while the session runs.
  void Pages(const httplib::Request& req, httplib::Response& res, const std::string& path) {
    std::string target = req.target;
    if (!Authorized(req, &target)) {
      res.status = 401;
      res.set_content("recap proxy needs its token: open /t/TOKEN/recap/", "text/plain");
      return;
    }
    if (req.method != "GET") {
      res.status = 405;
      res.set_content("the /recap/ pages are read-only", "text/plain");
      return;
    }
    const std::string base = target.substr(0, target.find("/recap")) + "/recap/";
    if (path == "/recap/session") {
      const std::string session = req.get_param_value("id");
      recap::Result<recap::SessionState> state = options.store->Load(session);
      if (session.empty() || session.rfind("recap-cli.", 0) == 0 || !state.ok() ||
          state->version == 0) {
        res.status = 404;
        res.set_content("no session '" + Shown(session) + "' here; the list is at " + base,
                        "text/plain");
        return;
      }
      recap::Result<std::string> page =
          ReportPage(*options.store, session, options.config, ring->Of(session), 5);
      if (!page.ok()) {
        res.status = 503;
        res.set_content("the report could not be made: " + page.status().message(), "text/plain");
        return;
      }
      res.set_content(*page, "text/html; charset=utf-8");
      return;
    }
    if (path != "/recap" && path != "/recap/") {
      res.status = 404;
      res.set_content("no such page; the sessions are at " + base, "text/plain");
      return;
    }
    recap::Result<std::vector<std::string>> listed = options.store->ListSessions();
    if (!listed.ok()) {
      res.status = 503;
      res.set_content("the sessions could not be read: " + listed.status().message(), "text/plain");
      return;
    }
    std::vector<std::pair<std::int64_t, std::string>> order;  // (µs since its last request, id)
    const auto now = std::chrono::steady_clock::now();
    {
      std::lock_guard<std::mutex> lock(mu);
      for (const std::string& id : *listed) {
        if (id.rfind("recap-cli.", 0) == 0) continue;
        const auto it = last_used.find(id);
        const std::int64_t ago =
            it == last_used.end()
                ? std::numeric_limits<std::int64_t>::max()
                : std::chrono::duration_cast<std::chrono::microseconds>(now - it->second).count();
        order.emplace_back(ago, id);
      }
    }
    std::sort(order.begin(), order.end());
    std::string html =
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><meta name=\"viewport\" "
        "content=\"width=device-width, initial-scale=1\"><meta http-equiv=\"refresh\" "
        "content=\"5\"><title>recap proxy: sessions</title><style>body{font:15px/1.45 "
        "system-ui,sans-serif;max-width:900px;margin:auto;padding:1rem}li{margin:.3rem 0;"
        "overflow-wrap:anywhere}</style></head><body><h1>recap proxy: sessions</h1>"
        "<p>Newest first. Each opens its report; the pages reload every 5 seconds.</p>"
        "<ol id=\"sessions\">\n";
    for (const auto& [ago, id] : order) {
      html += "<li class=\"session\"><a href=\"" + base +
              "session?id=" + proxy_server::UrlEncode(id) + "\">" + HtmlEscape(id) + "</a>";
      if (ago != std::numeric_limits<std::int64_t>::max()) {
        html += " <small>last request " + std::to_string(ago / 1000000) + " s ago</small>";
      }
      html += "</li>\n";
    }
    html += "</ol></body></html>\n";
    res.set_content(html, "text/html; charset=utf-8");
  }

  recap::Status Bind() {
    server.new_task_queue = [n = options.threads] {
      return new httplib::ThreadPool(static_cast<std::size_t>(n));
    };
    server.set_payload_max_length(std::size_t{256} << 20);
    server.set_keep_alive_max_count(1000);
    // An idle connection is closed after 5 s (and a SIGTERM waits no longer for one).
    server.set_keep_alive_timeout(5);
    // The first bytes of a streamed answer go out at once, not after the client's delayed
    // acknowledgement (Nagle's algorithm held them ~40 ms).
    server.set_tcp_nodelay(true);
    // The listening socket, to give it a full backlog once bound (Debian's cpp-httplib listens
    // with a backlog of 5: a hundred agents connecting at once had connections refused).
    server.set_socket_options([this](int sock) {
      httplib::default_socket_options(sock);
      listening_socket = sock;
    });
    server.set_read_timeout(600);
    server.set_write_timeout(600);
    const auto route = [this](const httplib::Request& req, httplib::Response& res) {
      std::string target = req.target.empty() ? req.path : req.target;
      std::string path = req.path;
      if (!options.token.empty()) {
        const std::string prefix = "/t/" + options.token;
        if (path.rfind(prefix + "/", 0) == 0) path = path.substr(prefix.size());
      }
      if (path == "/recap" || path.rfind("/recap/", 0) == 0) {
        Pages(req, res, path);
        return;
      }
      const std::string format = proxy_server::FormatOfPath(path);
      if (req.method == "POST" && !format.empty()) {
        Model(req, res, target, format);
      } else {
        PassThrough(req, res, target);
      }
    };
    server.Get(".*", route);
    server.Post(".*", route);
    server.Put(".*", route);
    server.Delete(".*", route);
    server.Patch(".*", route);
    server.Options(".*", route);
    server.set_pre_routing_handler([this](const httplib::Request& req, httplib::Response& res) {
      if (req.method != "HEAD") return httplib::Server::HandlerResponse::Unhandled;
      std::string target = req.target;
      if (!Authorized(req, &target)) {
        res.status = 401;
      } else {
        res.status = 200;
      }
      return httplib::Server::HandlerResponse::Handled;
    });
    if (options.port == 0) {
      bound_port = server.bind_to_any_port(options.host);
    } else {
      bound_port = server.bind_to_port(options.host, options.port) ? options.port : -1;
    }
    if (bound_port > 0 && listening_socket >= 0) ::listen(listening_socket, SOMAXCONN);
    if (bound_port <= 0) {
      return recap::Status::Unavailable("recap proxy could not listen on " + options.host + ":" +
                                        std::to_string(options.port) +
                                        " (in use, or not an address of this machine); choose "
                                        "another with --listen HOST:PORT");
    }
    return recap::Status::OK();
  }
};

void ProxyServer::Impl::Model(const httplib::Request& req, httplib::Response& res,
                              std::string target, const std::string& format) {
  namespace ps = proxy_server;
  const auto started = std::chrono::steady_clock::now();
  if (!Authorized(req, &target)) {
    Error(res, format, 401,
          "recap proxy needs its token: send X-Recap-Token, or put /t/TOKEN at the end of the "
          "client's base URL");
    return;
  }
  // The body is the proxy's from here on (the connection's request object is not read again
  // for it): moved, not copied, into the request the proxy keeps views of.
  recap::Result<ProxyRequest> parsed =
      ParseProxyRequest(format, std::move(const_cast<std::string&>(req.body)));
  if (!parsed.ok()) {
    Error(res, format, 400, parsed.status().message());
    return;
  }
  ProxyRequest& request = *parsed;
  const std::string credential = ps::Credential(req);

  // Which session, and how much of the request it holds already; its lock, held from when
  // that is decided until the request is prepared.
  std::shared_ptr<std::mutex> session_lock;
  std::unique_lock<std::mutex> held;
  std::string session;
  std::size_t known = 0;
  bool answered = false;
  std::vector<recap_proxy::Link> links;
  bool chained = true;
  std::string why;
  if (request.previous_response_id) {
    // The request's items, chained from the response they follow: the same request sent again
    // (a retry) has the same links, and adds nothing twice.
    recap::Result<std::vector<recap_proxy::Link>> chain =
        recap_proxy::ChainOf(salt, credential + "\n" + *request.previous_response_id, format,
                             request.messages, &digests);
    if (!chain.ok()) {
      Error(res, format, 400, chain.status().message());
      return;
    }
    links = std::move(*chain);
    chained = false;
    for (int pass = 0; pass < 2 && session.empty(); ++pass) {
      if (pass == 1) (void)RefreshUnknown();
      std::lock_guard<std::mutex> lock(mu);
      const auto it = response_session.find(*request.previous_response_id);
      if (it != response_session.end()) session = it->second;
    }
    if (session.empty()) {
      Error(res, format, 400,
            "previous_response_id '" + Shown(*request.previous_response_id) +
                "' is not a response recap proxy relayed: send the whole conversation as "
                "`input`, or the id of a response this proxy returned");
      return;
    }
    why = "previous_response_id";
  } else {
    recap::Result<std::vector<recap_proxy::Link>> chain =
        recap_proxy::ChainOf(salt, credential, format, request.messages, &digests);
    if (!chain.ok()) {
      Error(res, format, 400, chain.status().message());
      return;
    }
    links = std::move(*chain);
    const auto reply_at = [&](std::size_t i) -> std::optional<recap_proxy::Fingerprint> {
      const std::size_t span = ps::ReplySpan(format, request.messages, i);
      if (span == 0) return std::nullopt;
      recap::Result<recap::Conversation> c =
          ps::Decode(format, ps::JoinArray(request.messages, i, i + span));
      if (!c.ok()) return std::nullopt;
      if (c->instructions) c->messages.insert(c->messages.begin(), *c->instructions);
      return ps::FingerprintHash(c->messages);
    };
    const std::string explicit_session =
        req.has_header("x-recap-session") ? req.get_header_value("x-recap-session") : "";
    if (!explicit_session.empty()) {
      std::string error;
      if (!ValidSessionId(explicit_session, &error)) {
        Error(res, format, 400, "X-Recap-Session: " + error);
        return;
      }
    }
    const auto find = [&](recap_proxy::Match* match) -> bool {
      for (int pass = 0; pass < 3; ++pass) {
        if (pass == 1) (void)RefreshUnknown();
        {
          std::lock_guard<std::mutex> lock(mu);
          *match = index.Find(links, reply_at);
        }
        if (match->session.empty()) continue;
        // The store may hold more of that session than the index knew (another proxy).
        recap::Result<bool> moved = Refresh(match->session);
        if (!moved.ok()) {
          Error(res, format, 503,
                "recap proxy could not read its sessions: " + InCommandWords(moved.status()));
          return false;
        }
        if (!*moved) break;
      }
      return true;
    };
    recap_proxy::Match match;
    if (!find(&match)) return;
    if (!explicit_session.empty() && match.session != explicit_session) {
      (void)RefreshUnknown();
      std::lock_guard<std::mutex> lock(mu);
      const auto seen = seen_version.find(explicit_session);
      if (!index.Knows(explicit_session) && seen != seen_version.end() && seen->second > 0) {
        Error(res, format, 409,
              "session '" + Shown(explicit_session) +
                  "' (X-Recap-Session) was not written by recap proxy, so the proxy cannot tell "
                  "which of the request's messages it holds already; name a new session, or "
                  "leave X-Recap-Session out");
        return;
      }
      if (index.Knows(explicit_session)) {
        Error(res, format, 409,
              "the request does not continue session '" + Shown(explicit_session) +
                  "' (X-Recap-Session): its messages differ from the ones that session holds; "
                  "name a new session or send the session's messages unchanged");
        return;
      }
      match = recap_proxy::Match{};
      match.session = explicit_session;
    }
    // Decided again once the session is ours: a request of the same session that held it
    // meanwhile (the reply to the previous request being kept) may have moved it on.
    for (int attempt = 0; attempt < 4 && !match.session.empty() && explicit_session.empty();
         ++attempt) {
      session_lock = SessionLock(match.session);
      held = std::unique_lock<std::mutex>(*session_lock);
      recap_proxy::Match again;
      if (!find(&again)) return;
      if (again.session == match.session) {
        match = again;
        break;
      }
      held.unlock();
      match = again;
    }
    session = match.session;
    known = match.known;
    answered = match.answered;
    why = match.why;
    if (session.empty()) session = "proxy-" + ps::RandomHex(8);
  }

  if (!held.owns_lock()) {
    session_lock = SessionLock(session);
    held = std::unique_lock<std::mutex>(*session_lock);
  }
  {
    std::lock_guard<std::mutex> lock(mu);
    last_used[session] = std::chrono::steady_clock::now();
  }

  if (!chained && !links.empty()) {
    // A previous_response_id request: all of it is new, unless it is the session's latest
    // request again, not yet answered.
    std::lock_guard<std::mutex> lock(mu);
    const std::optional<recap_proxy::ChainIndex::Latest> latest = index.LatestOf(session);
    if (latest && latest->link == links.back() && !latest->reply) known = links.size();
    chained = true;  // recorded, and its reply kept, like any other request
  }
  // What is new: after what the session holds, and after the client's copy of the reply.
  std::size_t first_new = known;
  if (answered) first_new += ps::ReplySpan(format, request.messages, known);
  const std::size_t count = request.messages.size();
  std::size_t appended = 0;
  if (first_new < count) {
    recap::Result<recap::Conversation> conv =
        ps::Decode(format, ps::JoinArray(request.messages, first_new, count, /*bare=*/true));
    if (!conv.ok()) {
      Error(res, format, 400,
            "recap proxy could not read the request's messages: " + conv.status().message());
      return;
    }
    std::vector<recap::Message> fresh = std::move(conv->messages);
    if (conv->instructions) fresh.insert(fresh.begin(), std::move(*conv->instructions));
    const std::string base = chained ? "pc-" + std::to_string(count) + "-" + ps::Hex(links.back())
                                     : "pc-0-" + ps::RandomHex(16);
    for (std::size_t k = 0; k < fresh.size(); ++k) {
      fresh[k].id = k + 1 == fresh.size() ? base : base + "-" + std::to_string(k);
      fresh[k].pinned = false;
    }
    appended = fresh.size();
    recap::Result<std::uint64_t> version = options.store->AppendMessages(session, std::move(fresh));
    if (!version.ok()) {
      Error(
          res, format, version.status().code() == recap::StatusCode::kInvalidArgument ? 400 : 503,
          "recap proxy could not keep the request's messages: " + InCommandWords(version.status()));
      return;
    }
    std::lock_guard<std::mutex> lock(mu);
    seen_version[session] = *version;
    if (chained) index.Record(session, links);
  }  // else: the latest request again (a retry), nothing new

  recap::Result<std::shared_ptr<recap::Compactor>> compactor =
      CompactorFor(format, request.model, req);
  if (!compactor.ok()) {
    Error(res, format, 500,
          "recap proxy could not set up its summarizer: " + compactor.status().message());
    return;
  }
  recap::RequestSizes sizes;
  sizes.instructions_chars = request.instructions_chars;
  sizes.tool_catalog_chars = request.tool_catalog_chars;
  recap::Result<recap::Prepared> prepared = (*compactor)->Prepare(session, sizes);
  if (!prepared.ok()) {
    const bool over = prepared.status().code() == recap::StatusCode::kContextBudgetExceeded;
    Error(res, format, over ? 400 : 503,
          "recap proxy did not send the request: " + InCommandWords(prepared.status()) +
              (over ? "" : "; try again"));
    Log("session " + session + ": not sent: " + prepared.status().message());
    return;
  }
  std::vector<std::string_view> parts;
  const recap::Status encoded = ps::EncodeParts(format, prepared->messages, &parts);
  if (!encoded.ok()) {
    Error(res, format, 500,
          "recap proxy could not write the prepared request: " + encoded.message());
    return;
  }
  std::string upstream_body;
  if (HasBreakpoints(request)) {
    std::string array = "[";
    for (std::size_t i = 0; i < parts.size(); ++i) {
      if (i > 0) array += ',';
      array.append(parts[i]);
    }
    array += ']';
    PlaceBreakpoints(request, &array);
    upstream_body = UpstreamBody(request, array);
  } else {
    upstream_body = UpstreamBody(request, parts);
  }
  parts.clear();
  const std::size_t sent = prepared->messages.size();
  const std::size_t before_tokens = prepared->before_tokens;
  const std::size_t after_tokens = prepared->after_tokens;
  const std::uint64_t prepared_version = prepared->version;
  const std::string compacted = prepared->compactions.empty() ? "" : ", compacted";
  prepared = recap::Status::Cancelled("released");  // the transcript's memory goes back
  {
    std::lock_guard<std::mutex> lock(mu);
    if (prepared_version > seen_version[session]) seen_version[session] = prepared_version;
  }
  held.unlock();

  std::shared_ptr<Exchange> ex = NewExchange(req, target, std::move(upstream_body), format);
  ex->Start();
  const recap_proxy::Link latest = links.empty() ? recap_proxy::Link{} : links.back();
  const std::string rid_of_request = chained ? ps::Hex(latest) : ps::RandomHex(16);
  auto append_reply = [this, session, chained, latest, count, rid_of_request, format,
                       session_lock](Exchange& done) {
    if (!done.assembler || !done.assembler->complete()) return;
    recap::Result<std::vector<recap::Message>> reply = done.assembler->Messages();
    if (!reply.ok() || reply->empty()) {
      Log("session " + session + ": the reply was not kept: " +
          (reply.ok() ? std::string("it was empty") : reply.status().message()));
      return;
    }
    std::lock_guard<std::mutex> held_again(*session_lock);
    {
      std::lock_guard<std::mutex> lock(mu);
      if (chained) {
        const std::optional<recap_proxy::ChainIndex::Latest> now = index.LatestOf(session);
        // Another request of the session came after this one, or its reply was kept already.
        if (!now || now->link != latest || now->reply) return;
      }
    }
    const std::string fp = ps::FingerprintHash(*reply);
    const std::string base = "pr-" + std::to_string(chained ? count : 0) + "-" + rid_of_request;
    const std::string response_id = done.assembler->response_id();
    for (std::size_t k = 0; k < reply->size(); ++k) {
      (*reply)[k].id = k + 1 == reply->size()
                           ? base + "-" + fp + (response_id.empty() ? "" : "-" + response_id)
                           : base + "-r" + std::to_string(k);
    }
    recap::Result<std::uint64_t> version =
        options.store->AppendMessages(session, std::move(*reply));
    if (!version.ok()) {
      Log("session " + session + ": the reply was not kept: " + version.status().message());
      return;
    }
    std::lock_guard<std::mutex> lock(mu);
    seen_version[session] = *version;
    if (chained) index.Answered(session, fp);
    if (!response_id.empty()) response_session[response_id] = session;
  };
  Answer(ex, format, res, append_reply);
  const double ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - started).count();
  char line[512];
  std::snprintf(
      line, sizeof line,
      "%s %s session %s%s: %zu new, %zu of the request's %zu sent (%zu -> %zu tokens)%s; "
      "%s after %.0f ms",
      req.method.c_str(), format.c_str(), session.c_str(),
      why.empty() ? "" : (" (" + why + ")").c_str(), appended, sent, count, before_tokens,
      after_tokens, compacted.c_str(),
      res.status == 200 && request.stream ? "streaming" : std::to_string(res.status).c_str(), ms);
  Log(line);
}

recap::Result<std::unique_ptr<ProxyServer>> ProxyServer::Start(ProxyOptions options) {
  auto impl = std::make_unique<Impl>();
  impl->options = std::move(options);
  RECAP_RETURN_IF_ERROR(impl->LoadSalt());
  RECAP_RETURN_IF_ERROR(impl->RefreshUnknown());
  RECAP_RETURN_IF_ERROR(impl->Bind());
  return std::unique_ptr<ProxyServer>(new ProxyServer(std::move(impl)));
}

ProxyServer::ProxyServer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
ProxyServer::~ProxyServer() { Stop(); }
int ProxyServer::port() const { return impl_->bound_port; }
void ProxyServer::Run() { impl_->server.listen_after_bind(); }
void ProxyServer::Stop() { impl_->server.stop(); }

}  // namespace recap_cli
