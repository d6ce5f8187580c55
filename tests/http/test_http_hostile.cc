// The HTTP provider against a hostile or broken server (issue 16, SPEC R13.1, R13.3, R13.4),
// over real HTTP to servers the tests start (support/http_test_server.h):
//
//  * R13.3 no part of a secret leaks: a server that echoes the API key — whole, cut by recap's
//    excerpt at every offset, base64-encoded — gets no 8 consecutive characters of it into a
//    Status, a log record or an event; the same for secret extra headers and a URL's password.
//  * R13.4 no key in cleartext off the machine: plain http:// with a key to a host that is not
//    loopback is refused before any connection; loopback stays allowed, and does not go through
//    a proxy named by the environment.
//  * R13.1 reply parsers: depth bombs in every body recap parses (a reply, an error body, a
//    stream event, a model list), bodies, streams and headers that never end.
#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <mutex>
#include <string>
#include <vector>

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>
#include <sys/resource.h>

#include "recap/compactor.h"
#include "recap/http/http_provider.h"
#include "recap/log.h"

#include "support/http_test_server.h"
#include "support/recording_sink.h"

using namespace recap;
using recap::testing::HttpTestServer;
using recap::testing::RecordingSink;
using recap::testing::ScriptedHttpResponse;
using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

namespace {

// 164 characters, as long as a real OpenAI project key.
std::string LongKey() {
  std::string key = "sk-proj-";
  const char* alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_-";
  unsigned state = 12345;
  while (key.size() < 164) {
    state = state * 1103515245u + 12345u;
    key.push_back(alphabet[(state >> 16) % 64]);
  }
  return key;
}
const std::string kKey = LongKey();

// The length of the longest run of `secret`'s characters (a substring of it) found in `text`.
std::size_t LongestRun(const std::string& text, const std::string& secret) {
  std::size_t best = 0;
  std::vector<std::size_t> prev(secret.size() + 1, 0), cur(secret.size() + 1, 0);
  for (std::size_t i = 1; i <= text.size(); ++i) {
    for (std::size_t j = 1; j <= secret.size(); ++j) {
      cur[j] = text[i - 1] == secret[j - 1] ? prev[j - 1] + 1 : 0;
      best = std::max(best, cur[j]);
    }
    std::swap(prev, cur);
  }
  return best;
}

std::string Base64(const std::string& in, bool url_safe = false) {
  const char* table = url_safe ? "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"
                               : "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string out;
  std::size_t i = 0;
  for (; i + 2 < in.size(); i += 3) {
    const unsigned v = (static_cast<unsigned char>(in[i]) << 16) |
                       (static_cast<unsigned char>(in[i + 1]) << 8) |
                       static_cast<unsigned char>(in[i + 2]);
    for (int s = 18; s >= 0; s -= 6) out.push_back(table[(v >> s) & 63]);
  }
  if (i + 1 == in.size()) {
    const unsigned v = static_cast<unsigned char>(in[i]) << 16;
    out += {table[(v >> 18) & 63], table[(v >> 12) & 63], '=', '='};
  } else if (i + 2 == in.size()) {
    const unsigned v =
        (static_cast<unsigned char>(in[i]) << 16) | (static_cast<unsigned char>(in[i + 1]) << 8);
    out += {table[(v >> 18) & 63], table[(v >> 12) & 63], table[(v >> 6) & 63], '='};
  }
  return out;
}

// Every text recap wrote while it lives: log records at debug level.
class LogCapture {
 public:
  LogCapture() {
    SetLogHandler(LogLevel::kDebug, [this](LogLevel, std::string_view line) {
      std::lock_guard<std::mutex> lock(mu_);
      lines_.emplace_back(line);
    });
  }
  ~LogCapture() { SetLogHandler(LogLevel::kOff, {}); }
  std::vector<std::string> lines() const {
    std::lock_guard<std::mutex> lock(mu_);
    return lines_;
  }
  std::string all() const {
    std::string out;
    for (const std::string& l : lines()) out += l + "\n";
    return out;
  }

 private:
  mutable std::mutex mu_;
  std::vector<std::string> lines_;
};

// No run of 8 or more characters of `secret` in `text` (R13.3).
void CheckNoRun(const std::string& text, const std::string& secret, const std::string& what) {
  const std::size_t run = LongestRun(text, secret);
  INFO(what << ": " << text);
  CHECK(run < 8);
}

HttpProviderOptions Options(const HttpTestServer& server, HttpProtocol protocol) {
  HttpProviderOptions o;
  o.protocol = protocol;
  o.base_url = server.BaseUrl() + (protocol == HttpProtocol::kAnthropic ? "" : "/v1");
  o.model = "test-model";
  o.api_key = kKey;
  o.connect_timeout_ms = 2000;
  o.timeout_ms = 10000;
  o.max_retries = 0;
  o.retry_base_delay_ms = 1;
  o.max_retry_delay_ms = 10;
  return o;
}

std::shared_ptr<Provider> Make(const HttpProviderOptions& o) {
  auto p = NewHttpProvider(o);
  INFO((p.ok() ? std::string() : p.status().message()));
  REQUIRE(p.ok());
  return *p;
}

CompletionRequest Request() {
  CompletionRequest r;
  r.system_prompt = "You write checkpoints.";
  r.messages.push_back(Message::UserText("summarize this"));
  r.max_output_tokens = 1000;
  return r;
}

const HttpProtocol kProtocols[] = {HttpProtocol::kOpenAiChat, HttpProtocol::kAnthropic,
                                   HttpProtocol::kOpenAiResponses};

// An error body of the protocol carrying `message`.
std::string ErrorBody(HttpProtocol protocol, const std::string& message) {
  nlohmann::json j;
  if (protocol == HttpProtocol::kAnthropic) {
    j = {{"type", "error"}, {"error", {{"type", "authentication_error"}, {"message", message}}}};
  } else {
    j = {{"error", {{"message", message}, {"type", "invalid_request_error"}}}};
  }
  return j.dump();
}

// An in-stream error event of the protocol carrying `message`.
std::string ErrorEvent(HttpProtocol protocol, const std::string& message) {
  if (protocol == HttpProtocol::kAnthropic) {
    return "event: error\ndata: " +
           nlohmann::json{{"type", "error"},
                          {"error", {{"type", "overloaded_error"}, {"message", message}}}}
               .dump();
  }
  if (protocol == HttpProtocol::kOpenAiResponses) {
    return "event: error\ndata: " +
           nlohmann::json{{"type", "error"}, {"code", "server_error"}, {"message", message}}.dump();
  }
  return nlohmann::json{{"error", {{"message", message}, {"type", "server_error"}}}}.dump();
}

}  // namespace

// --- R13.3: no part of a secret leaks ----------------------------------------------------------

TEST_CASE(
    "R13.3 a 401 echoing the key, cut by the excerpt at every offset, leaks no 8 characters of it, "
    "all three protocols") {
  LogCapture logs;
  for (HttpProtocol protocol : kProtocols) {
    HttpTestServer server;
    auto p = Make(Options(server, protocol));
    // The excerpt of a server's error text is 300 bytes: fillers from 100 to 310 bytes put its
    // end before, at every offset inside, and after the 164-character key.
    for (std::size_t filler = 100; filler <= 310; ++filler) {
      server.Push(ScriptedHttpResponse::Json(
          401, ErrorBody(protocol, std::string(filler, 'x') + kKey + " is not a valid key")));
      auto r = p->Complete(Request(), {});
      REQUIRE_FALSE(r.ok());
      CHECK(r.status().code() == StatusCode::kFailedPrecondition);
      CheckNoRun(r.status().message(), kKey,
                 std::string(HttpProtocolName(protocol)) + ", filler " + std::to_string(filler));
    }
    // The excerpt really cut inside the key (the check above saw partial keys).
    CHECK(server.request_count() == 211);
  }
  CheckNoRun(logs.all(), kKey, "the log");
}

TEST_CASE(
    "R13.3 a key echoed in a body that is not JSON, an HTML title or a 2xx that is not a reply "
    "leaks no 8 characters of it") {
  LogCapture logs;
  HttpTestServer server;
  auto p = Make(Options(server, HttpProtocol::kOpenAiChat));
  // The raw excerpts are 200 bytes (an error body that is not JSON), 120 (an HTML title, a
  // 2xx that is not JSON): fillers around each put the cut at every offset of the key.
  struct Shape {
    const char* name;
    std::size_t from, to;
    ScriptedHttpResponse (*make)(const std::string& filler);
  };
  const Shape shapes[] = {
      {"401 text/plain", 20, 210,
       [](const std::string& f) {
         return ScriptedHttpResponse::Text(401, "text/plain", f + kKey + " unauthorized");
       }},
      {"502 HTML title", 0, 130,
       [](const std::string& f) {
         return ScriptedHttpResponse::Text(
             502, "text/html",
             "<html><head><title>" + f + kKey + "</title></head><body>bad gateway</body></html>");
       }},
      {"200 not JSON", 0, 130,
       [](const std::string& f) {
         return ScriptedHttpResponse::Text(200, "text/plain", f + kKey + " hello");
       }},
      {"200 JSON without choices", 0, 130,
       [](const std::string& f) {
         return ScriptedHttpResponse::Json(200, "{\"unexpected\":\"" + f + kKey + "\"}");
       }},
  };
  for (const Shape& shape : shapes) {
    for (std::size_t filler = shape.from; filler <= shape.to; ++filler) {
      server.Push(shape.make(std::string(filler, 'y')));
      auto r = p->Complete(Request(), {});
      REQUIRE_FALSE(r.ok());
      CheckNoRun(r.status().message(), kKey,
                 std::string(shape.name) + ", filler " + std::to_string(filler));
    }
  }
  CheckNoRun(logs.all(), kKey, "the log");
}

TEST_CASE(
    "R13.3 an error event inside a stream echoing the key at every offset leaks no 8 characters of "
    "it, all three protocols") {
  LogCapture logs;
  for (HttpProtocol protocol : kProtocols) {
    HttpTestServer server;
    HttpProviderOptions o = Options(server, protocol);
    o.stream = true;
    auto p = Make(o);
    for (std::size_t filler = 130; filler <= 305; filler += 1) {
      server.Push(
          ScriptedHttpResponse::Sse({ErrorEvent(protocol, std::string(filler, 'z') + kKey)}));
      auto r = p->Complete(Request(), {});
      REQUIRE_FALSE(r.ok());
      CHECK(r.status().code() == StatusCode::kUnavailable);
      CheckNoRun(r.status().message(), kKey,
                 std::string(HttpProtocolName(protocol)) + ", filler " + std::to_string(filler));
    }
  }
  CheckNoRun(logs.all(), kKey, "the log");
}

TEST_CASE(
    "R13.3 a key echoed base64-encoded, in every alignment and cut at every offset, leaks no 8 "
    "characters of it") {
  LogCapture logs;
  for (HttpProtocol protocol : kProtocols) {
    HttpTestServer server;
    auto p = Make(Options(server, protocol));
    // Whole, after 0, 1 or 2 other bytes (each shifts the encoding), standard and URL-safe;
    // and as HTTP Basic credentials ("user:<key>").
    std::vector<std::string> encoded;
    for (const std::string& before : {std::string(), std::string("a"), std::string("ab"),
                                      std::string("Bearer "), std::string("user:")}) {
      encoded.push_back(Base64(before + kKey));
      encoded.push_back(Base64(before + kKey, true));
    }
    for (const std::string& e : encoded) {
      server.Push(ScriptedHttpResponse::Json(
          401, ErrorBody(protocol, "your credentials " + e + " were refused")));
      auto r = p->Complete(Request(), {});
      REQUIRE_FALSE(r.ok());
      CheckNoRun(r.status().message(), e, "base64 " + e);
      CHECK(r.status().message().find("were refused") != std::string::npos);
    }
    // Cut by the excerpt at every offset.
    const std::string e = Base64(kKey);
    for (std::size_t filler = 70; filler <= 302; filler += 1) {
      server.Push(
          ScriptedHttpResponse::Json(401, ErrorBody(protocol, std::string(filler, 'q') + e)));
      auto r = p->Complete(Request(), {});
      REQUIRE_FALSE(r.ok());
      CheckNoRun(r.status().message(), e, "cut base64, filler " + std::to_string(filler));
    }
  }
  CheckNoRun(logs.all(), Base64(kKey), "the log");
}

TEST_CASE("R13.3 secret extra headers and a URL's password are scrubbed like the key") {
  LogCapture logs;
  HttpTestServer server;
  const std::string token = "proxy-token-" + kKey.substr(20, 60);
  const std::string password = "pw-" + kKey.substr(90, 40);
  HttpProviderOptions o = Options(server, HttpProtocol::kOpenAiChat);
  o.api_key.clear();
  o.extra_headers = {{"X-Proxy-Token", token}, {"X-Request-Tag", "not-a-secret-tag-value"}};
  o.base_url = "http://robot:" + password + "@127.0.0.1:" + std::to_string(server.port()) + "/v1";
  auto p = Make(o);
  for (std::size_t filler = 240; filler <= 302; ++filler) {
    server.Push(ScriptedHttpResponse::Json(
        401, ErrorBody(HttpProtocol::kOpenAiChat, std::string(filler - 240, 'w') + " token " +
                                                      token + " password " + password + " basic " +
                                                      Base64("robot:" + password) + " tag " +
                                                      "not-a-secret-tag-value")));
    auto r = p->Complete(Request(), {});
    REQUIRE_FALSE(r.ok());
    const std::string& m = r.status().message();
    CheckNoRun(m, token, "token");
    CheckNoRun(m, password, "password");
    CheckNoRun(m, Base64("robot:" + password), "basic credentials");
    CHECK(m.find("not-a-secret-tag-value") != std::string::npos);  // only secrets go
  }
  // The URL's credentials reached the server (curl sends them as Basic) and no message shows
  // the URL with them.
  CHECK(server.Requests().at(0).Header("authorization") == "Basic " + Base64("robot:" + password));
  CheckNoRun(logs.all(), password, "the log");
}

TEST_CASE(
    "R13.3 a key echoed by the summarizer's server reaches no event, log record or Status of the "
    "Compactor") {
  LogCapture logs;
  HttpTestServer server;
  server.Route("GET", "/v1/models",
               ScriptedHttpResponse::Json(401, ErrorBody(HttpProtocol::kOpenAiChat, kKey)));
  auto provider = NewHttpProvider(Options(server, HttpProtocol::kOpenAiChat));
  REQUIRE(provider.ok());
  auto sink = std::make_shared<RecordingSink>();
  Config config;
  config.limits.max_context_chars = 20000;
  auto made = Compactor::Create(config, *provider, NewInMemorySessionStore(), {}, {sink});
  REQUIRE(made.ok());
  Compactor& compactor = **made;
  for (int n = 1; n <= 6; ++n) {
    REQUIRE(compactor.store().Append("s", Message::UserText("request " + std::to_string(n))).ok());
    REQUIRE(compactor.store().Append("s", Message::AssistantText(std::string(900, 'a'))).ok());
  }
  for (std::size_t filler : {150u, 160u, 170u, 200u, 250u, 290u, 295u, 299u}) {
    server.Push(ScriptedHttpResponse::Json(
        401, ErrorBody(HttpProtocol::kOpenAiChat, std::string(filler, 'x') + kKey)));
    auto outcome = compactor.Compact("s");
    REQUIRE_FALSE(outcome.ok());
    CheckNoRun(outcome.status().message(), kKey, "Compact's status");
  }
  const auto failed = sink->OfType("compaction_failed");
  CHECK(failed.size() == 8);
  for (const Event& e : sink->events()) CheckNoRun(e.json, kKey, "event " + e.type);
  CheckNoRun(logs.all(), kKey, "the log");
}

// --- R13.4: no key in cleartext off the machine ------------------------------------------------

TEST_CASE(
    "R13.4 plain http with a key to a host that is not loopback is refused when the provider is "
    "created, naming allow_insecure_http") {
  const std::vector<std::string> urls = {"http://10.9.8.7/v1",
                                         "http://example.com/v1",
                                         "HTTP://api.example.com:8080/v1",
                                         "http://[fd00::2]:8080/v1",
                                         "http://127.0.0.1.nip.io/v1",
                                         "http://localhost.example.com/v1",
                                         "http://192.168.1.20:11434/v1",
                                         "http://[::ffff:10.0.0.1]/v1"};
  for (const std::string& url : urls) {
    for (int credential = 0; credential < 4; ++credential) {
      HttpProviderOptions o;
      o.base_url = url;
      o.model = "m";
      std::string what;
      if (credential == 0) {
        o.api_key = "sk-cleartext-test-key";
        what = "api_key";
      } else if (credential == 1) {
        ::setenv("RECAP_TEST_CLEARTEXT_KEY", "sk-cleartext-test-key", 1);
        o.api_key_env = "RECAP_TEST_CLEARTEXT_KEY";
        what = "api_key_env";
      } else if (credential == 2) {
        o.extra_headers = {{"Authorization", "Bearer sk-cleartext-test-key"}};
        what = "an Authorization header";
      } else {
        const auto scheme_end = url.find("://") + 3;
        o.base_url = url.substr(0, scheme_end) + "user:pass@" + url.substr(scheme_end);
        what = "a password in the URL";
      }
      auto p = NewHttpProvider(o);
      INFO(url << " with " << what);
      REQUIRE_FALSE(p.ok());
      CHECK(p.status().code() == StatusCode::kInvalidArgument);
      const std::string& m = p.status().message();
      CHECK(m.find("allow_insecure_http") != std::string::npos);
      CHECK(m.find("https://") != std::string::npos);
      CHECK(m.find("cleartext") != std::string::npos);
      CHECK(m.find("sk-cleartext-test-key") == std::string::npos);
      CHECK(m.find("pass@") == std::string::npos);
    }
  }
  ::unsetenv("RECAP_TEST_CLEARTEXT_KEY");
}

TEST_CASE("R13.4 loopback over plain http stays allowed with a key, and anything without one") {
  for (const std::string& url :
       {"http://127.0.0.1:8080/v1", "http://127.9.8.7/v1", "http://localhost:8080/v1",
        "http://LOCALHOST/v1", "http://[::1]:8080/v1", "https://api.example.com/v1",
        "https://10.9.8.7/v1"}) {
    HttpProviderOptions o;
    o.base_url = url;
    o.model = "m";
    o.api_key = "sk-loopback-test-key";
    auto p = NewHttpProvider(o);
    INFO(url << ": " << (p.ok() ? std::string() : p.status().message()));
    CHECK(p.ok());
  }
  HttpProviderOptions o;
  o.base_url = "http://10.9.8.7/v1";  // no key, no credential: nothing to protect
  o.model = "m";
  CHECK(NewHttpProvider(o).ok());
  o.extra_headers = {{"X-Request-Tag", "abc"}};
  CHECK(NewHttpProvider(o).ok());
}

TEST_CASE("R13.4 a server off the loopback gets no connection from a provider holding a key") {
  const std::string address = recap::testing::LocalNonLoopbackAddress();
  if (address.empty()) {
    WARN("this machine has no non-loopback IPv4 address; the refusal itself is checked above");
    return;
  }
  HttpTestServer server(address);
  server.SetDefault(ScriptedHttpResponse::Json(200, R"({"data":[]})"));
  HttpProviderOptions o = Options(server, HttpProtocol::kOpenAiChat);
  REQUIRE(o.base_url.rfind("http://" + address, 0) == 0);
  auto p = NewHttpProvider(o);
  REQUIRE_FALSE(p.ok());
  CHECK(p.status().message().find("allow_insecure_http") != std::string::npos);
  // The same server is reachable: a provider without a key talks to it.
  o.api_key.clear();
  auto keyless = NewHttpProvider(o);
  REQUIRE(keyless.ok());
  (void)(*keyless)->Complete(Request(), {});
  CHECK(server.request_count() == 1);
  CHECK_FALSE(server.Requests().at(0).HasHeader("authorization"));
  CHECK(server.connection_count() == 1);
}

TEST_CASE(
    "R13.4 a key over plain http to loopback never goes through a proxy named by the environment") {
  HttpTestServer server;
  HttpTestServer proxy;
  server.SetDefault(ScriptedHttpResponse::Json(
      200, R"({"choices":[{"message":{"content":"ok"},"finish_reason":"stop"}]})"));
  proxy.SetDefault(ScriptedHttpResponse::Json(
      200, R"({"choices":[{"message":{"content":"via proxy"},"finish_reason":"stop"}]})"));
  struct Env {
    std::vector<std::pair<std::string, std::string>> saved;
    explicit Env(const std::string& proxy_url) {
      for (const char* name :
           {"http_proxy", "HTTP_PROXY", "all_proxy", "ALL_PROXY", "no_proxy", "NO_PROXY"}) {
        const char* v = std::getenv(name);
        saved.emplace_back(name, v ? v : "\x01");
        ::unsetenv(name);
      }
      ::setenv("http_proxy", proxy_url.c_str(), 1);
      ::setenv("ALL_PROXY", proxy_url.c_str(), 1);
    }
    ~Env() {
      for (const auto& [name, value] : saved) {
        if (value == "\x01") {
          ::unsetenv(name.c_str());
        } else {
          ::setenv(name.c_str(), value.c_str(), 1);
        }
      }
    }
  } env(proxy.BaseUrl());
  auto p = Make(Options(server, HttpProtocol::kOpenAiChat));
  auto r = p->Complete(Request(), {});
  REQUIRE(r.ok());
  CHECK(r->text == "ok");
  CHECK(server.request_count() == 1);
  CHECK(proxy.connection_count() == 0);
}

// --- R13.1: reply parsers ----------------------------------------------------------------------

namespace {

std::string ArrayBomb(std::size_t depth) {
  return std::string(depth, '[') + std::string(depth, ']');
}
std::string ObjectBomb(std::size_t depth) {
  std::string s;
  s.reserve(depth * 6 + 2);
  for (std::size_t i = 0; i < depth; ++i) s += "{\"a\":";
  s += "1";
  s.append(depth, '}');
  return s;
}

}  // namespace

TEST_CASE(
    "R13.1 a reply is read up to recap's one depth bound, 1,000 levels, and refused one "
    "level deeper") {
  // The bound every JSON reader in recap shares (recap_internal/json_depth.h); replies had
  // their own, 512, before.
  for (std::size_t arrays : {999u, 1000u}) {
    const std::string body =
        "{\"id\":\"c\",\"object\":\"chat.completion\",\"x\":" + ArrayBomb(arrays) +
        ",\"choices\":[{\"index\":0,\"message\":{\"role\":\"assistant\",\"content\":"
        "\"ok\"},\"finish_reason\":\"stop\"}]}";
    HttpTestServer server;
    server.Push(ScriptedHttpResponse::Json(200, body));
    auto p = Make(Options(server, HttpProtocol::kOpenAiChat));
    auto r = p->Complete(Request(), {});
    INFO(arrays + 1 << " levels");
    if (arrays + 1 <= 1000) {
      REQUIRE(r.ok());
      CHECK(r->text == "ok");
    } else {
      REQUIRE_FALSE(r.ok());
      CHECK(r.status().code() == StatusCode::kUnavailable);
      CHECK(r.status().message().find("nested deeper than 1000 levels") != std::string::npos);
    }
  }
}

TEST_CASE(
    "R13.1 a reply body nested 100,000 and 1,000,000 levels deep is refused before it is parsed, "
    "all three protocols") {
  for (HttpProtocol protocol : kProtocols) {
    for (std::size_t depth : {100000u, 1000000u}) {
      for (const std::string& bomb :
           {ArrayBomb(depth), ObjectBomb(depth), "{\"choices\":" + ArrayBomb(depth) + "}"}) {
        HttpTestServer server;
        server.Push(ScriptedHttpResponse::Json(200, bomb));
        auto p = Make(Options(server, protocol));
        auto r = p->Complete(Request(), {});
        INFO(HttpProtocolName(protocol) << ", depth " << depth);
        REQUIRE_FALSE(r.ok());
        CHECK(r.status().code() == StatusCode::kUnavailable);
        CHECK(r.status().message().find("nested deeper than") != std::string::npos);
        CHECK(r.status().message().find("malformed") != std::string::npos);
      }
    }
  }
}

TEST_CASE("R13.1 an error body nested 100,000 levels deep is not parsed, and the message says so") {
  HttpTestServer server;
  for (int status : {400, 401, 500}) {
    server.Push(ScriptedHttpResponse::Json(status, "{\"error\":" + ArrayBomb(100000) + "}"));
    auto p = Make(Options(server, HttpProtocol::kOpenAiChat));
    auto r = p->Complete(Request(), {});
    REQUIRE_FALSE(r.ok());
    const std::string& m = r.status().message();
    INFO(m);
    CHECK(m.find("HTTP " + std::to_string(status)) != std::string::npos);
    CHECK(m.find("nested deeper than") != std::string::npos);
    CHECK(m.size() < 2000);
  }
}

TEST_CASE(
    "R13.1 a stream event nested 100,000 and 1,000,000 levels deep ends the stream with a clear "
    "error, all three protocols") {
  for (HttpProtocol protocol : kProtocols) {
    for (std::size_t depth : {100000u, 1000000u}) {
      HttpTestServer server;
      // A deep event among ordinary ones, then a clean end: the deep one must not be skipped.
      server.Push(ScriptedHttpResponse::Sse({ObjectBomb(depth), "[DONE]"}));
      HttpProviderOptions o = Options(server, protocol);
      o.stream = true;
      auto p = Make(o);
      auto r = p->Complete(Request(), {});
      INFO(HttpProtocolName(protocol) << ", depth " << depth);
      REQUIRE_FALSE(r.ok());
      CHECK(r.status().message().find("nested deeper than") != std::string::npos);
      CHECK(r.status().message().find("event 1") != std::string::npos);
    }
  }
}

TEST_CASE(
    "R13.1 a model list nested 100,000 and 1,000,000 levels deep leaves the window unknown and "
    "says why") {
  for (std::size_t depth : {100000u, 1000000u}) {
    LogCapture logs;
    HttpTestServer server;
    server.Route("GET", "/v1/models",
                 ScriptedHttpResponse::Json(
                     200, "{\"data\":[{\"id\":\"test-model\",\"x\":" + ObjectBomb(depth) + "}]}"));
    auto p = Make(Options(server, HttpProtocol::kOpenAiChat));
    CHECK_FALSE(p->ContextWindow().has_value());
    const std::string log = logs.all();
    INFO(log);
    CHECK(log.find("nested deeper than") != std::string::npos);
    CHECK(log.find("context window stays unknown") != std::string::npos);
  }
}

TEST_CASE(
    "R13.1 a stream that never ends is cut off at the size limit with a clear error, not read "
    "until the time-out") {
  HttpTestServer server;
  ScriptedHttpResponse endless = ScriptedHttpResponse::Sse(
      {R"({"choices":[{"index":0,"delta":{"role":"assistant","content":""}}]})"});
  endless.repeat = "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"" +
                   std::string(4000, 'a') + "\"}}]}\n\n";
  endless.repeat_times = ScriptedHttpResponse::kForever;
  server.Push(endless);
  HttpProviderOptions o = Options(server, HttpProtocol::kOpenAiChat);
  o.stream = true;
  o.timeout_ms = 30000;
  auto p = Make(o);
  auto r = p->Complete(Request(), {});
  REQUIRE_FALSE(r.ok());
  const std::string& m = r.status().message();
  INFO(m);
  CHECK(r.status().code() == StatusCode::kUnavailable);  // not kDeadlineExceeded
  CHECK(m.find("larger than") != std::string::npos);
  CHECK(m.find("64 MiB") != std::string::npos);
}

TEST_CASE(
    "R13.1 a stream that is one endless line, or endless comments, is cut off at the size limit") {
  for (const std::string& repeat : {std::string(65536, 'd'), std::string(": keep-alive\n")}) {
    HttpTestServer server;
    ScriptedHttpResponse endless = ScriptedHttpResponse::Sse({"data: {\"choices\":"});
    endless.pieces.back().pop_back();  // no blank line: the event never ends
    endless.pieces.back().pop_back();
    endless.repeat = repeat;
    endless.repeat_times = ScriptedHttpResponse::kForever;
    server.Push(endless);
    HttpProviderOptions o = Options(server, HttpProtocol::kAnthropic);
    o.stream = true;
    o.timeout_ms = 30000;
    auto p = Make(o);
    auto r = p->Complete(Request(), {});
    REQUIRE_FALSE(r.ok());
    INFO(r.status().message());
    CHECK(r.status().message().find("larger than") != std::string::npos);
  }
}

TEST_CASE(
    "R13.1 an error body that never ends is classified from its start, not read until the "
    "time-out") {
  HttpTestServer server;
  ScriptedHttpResponse endless =
      ScriptedHttpResponse::Text(503, "text/plain", "upstream is overloaded, ");
  endless.framing = ScriptedHttpResponse::Framing::kChunked;
  endless.repeat = std::string(8192, 'e');
  endless.repeat_times = ScriptedHttpResponse::kForever;
  server.Push(endless);
  HttpProviderOptions o = Options(server, HttpProtocol::kOpenAiChat);
  o.timeout_ms = 20000;
  auto p = Make(o);
  auto r = p->Complete(Request(), {});
  REQUIRE_FALSE(r.ok());
  INFO(r.status().message());
  CHECK(r.status().code() == StatusCode::kUnavailable);
  CHECK(r.status().message().find("HTTP 503") != std::string::npos);
  CHECK(r.status().message().find("upstream is overloaded") != std::string::npos);
}

TEST_CASE("R13.1 response headers larger than the limit end the exchange with a clear error") {
  HttpTestServer server;
  ScriptedHttpResponse r = ScriptedHttpResponse::Json(200, R"({"choices":[]})");
  for (int i = 0; i < 5000; ++i) {
    r.headers.emplace_back("X-Filler-" + std::to_string(i), std::string(100, 'h'));
  }
  server.SetDefault(r);
  auto p = Make(Options(server, HttpProtocol::kOpenAiChat));
  auto got = p->Complete(Request(), {});
  REQUIRE_FALSE(got.ok());
  INFO(got.status().message());
  CHECK(got.status().message().find("headers") != std::string::npos);
  CHECK(got.status().message().find("larger than") != std::string::npos);
}

TEST_CASE(
    "R13.1 a reply whose content is not text says what is wrong, not that the reply was empty") {
  struct Case {
    HttpProtocol protocol;
    bool stream;
    std::string body;  // a whole reply, or one stream event
    const char* expected;
  };
  const Case cases[] = {
      {HttpProtocol::kOpenAiChat, false,
       R"({"choices":[{"message":{"role":"assistant","content":42},"finish_reason":"stop"}]})",
       "`choices[0].message.content` is a number; expected a string or an array of parts"},
      {HttpProtocol::kOpenAiChat, false,
       R"({"choices":[{"message":{"role":"assistant","content":{"a":1}},"finish_reason":"stop"}]})",
       "`choices[0].message.content` is an object"},
      {HttpProtocol::kOpenAiChat, true, R"({"choices":[{"index":0,"delta":{"content":true}}]})",
       "`choices[0].delta.content` is a boolean"},
      {HttpProtocol::kAnthropic, false,
       R"({"type":"message","content":42,"stop_reason":"end_turn"})",
       "`content` is a number; expected an array of blocks"},
  };
  for (const Case& c : cases) {
    HttpTestServer server;
    if (c.stream) {
      server.Push(ScriptedHttpResponse::Sse({c.body, "[DONE]"}));
    } else {
      server.Push(ScriptedHttpResponse::Json(200, c.body));
    }
    HttpProviderOptions o = Options(server, c.protocol);
    o.stream = c.stream;
    auto r = Make(o)->Complete(Request(), {});
    INFO(c.body);
    REQUIRE_FALSE(r.ok());
    INFO(r.status().message());
    CHECK(r.status().code() == StatusCode::kUnavailable);
    CHECK(r.status().message().find(c.expected) != std::string::npos);
    CHECK(r.status().message().find("malformed") != std::string::npos);
  }
}
