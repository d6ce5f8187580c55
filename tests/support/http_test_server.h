// HttpTestServer: a scripted HTTP/1.1 server on 127.0.0.1 for the HTTP provider's tests.
//
// Plain POSIX sockets; HTTPS through OpenSSL when the tests are built with it
// (RECAP_TEST_HAVE_TLS, support/test_tls.h makes the certificates). It listens on an ephemeral
// port of 127.0.0.1 (or of another local address, for the tests of what recap refuses to send
// off the machine), accepts on a thread of its own and serves each connection on another (so
// concurrent clients work), one request per connection ("Connection: close"). Each request takes
// the next scripted response (FIFO) — or the route's response when one is set for its method and
// path — and is recorded, so a test can check what the client sent.
//
//   recap::testing::HttpTestServer server;
//   server.Push(ScriptedHttpResponse::Json(429, R"({"error":{"message":"slow down"}})",
//                                          {{"Retry-After", "1"}}));
//   server.Push(ScriptedHttpResponse::Json(200, reply));
//   options.base_url = server.BaseUrl() + "/v1";
//   ... two requests later ...
//   CHECK(server.Requests()[1].Header("authorization") == "Bearer sk-…");
//
// A response can misbehave on purpose: wait before answering, drip its body in pieces, lie
// about its length and close early, stream server-sent events that stop short, or send a body
// that never ends. Every wait ends at once when the client goes away or the server stops, so
// no test waits for a script that nobody listens to any more.
#ifndef RECAP_TESTS_SUPPORT_HTTP_TEST_SERVER_H_
#define RECAP_TESTS_SUPPORT_HTTP_TEST_SERVER_H_

#include <atomic>
#include <chrono>
#include <cstddef>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

namespace recap {
namespace testing {

using HttpHeaders = std::vector<std::pair<std::string, std::string>>;

struct RecordedHttpRequest {
  std::string method;  // "GET", "POST"
  std::string path;    // the request target, e.g. "/v1/chat/completions"
  HttpHeaders headers;
  std::string body;
  // The value of the first header with this name (case-insensitive); empty if absent.
  std::string Header(const std::string& name) const;
  bool HasHeader(const std::string& name) const;
};

struct ScriptedHttpResponse {
  enum class Framing {
    kContentLength,  // Content-Length: the body's size (or `content_length` when set)
    kChunked,        // Transfer-Encoding: chunked, one chunk per piece
    kClose,          // no length: the body ends when the server closes the connection
  };

  int status = 200;
  HttpHeaders headers;  // e.g. {"Content-Type", "application/json"}
  // The body, sent as `pieces` when those are set (with `piece_delay` before each but the
  // first), else in one piece.
  std::string body;
  std::vector<std::string> pieces;
  std::chrono::milliseconds piece_delay{0};
  Framing framing = Framing::kContentLength;
  std::optional<std::size_t> content_length;  // a lie, for truncation tests
  // Stop after this many body bytes and close the connection (a chunked body then also lacks
  // its final empty chunk).
  std::optional<std::size_t> close_after;
  // Waited before the status line.
  std::chrono::milliseconds delay{0};
  // Then, when set: held until the server has received this many requests in all (this one
  // included), so that a test can tell that requests were in flight together without timing
  // them. A hang guard: a hold gives up after `hold_limit` (counted in holds_given_up(), and
  // every later hold is then let through at once, so a failing test fails fast).
  std::size_t hold_until_requests = 0;
  std::chrono::milliseconds hold_limit{30000};
  // After the body (or its pieces): `repeat` sent again `repeat_times` times, `piece_delay`
  // apart; kForever sends it until the client goes away (a body or stream that never ends).
  static constexpr std::size_t kForever = static_cast<std::size_t>(-1);
  std::string repeat;
  std::size_t repeat_times = 0;

  // A JSON body with Content-Type application/json.
  static ScriptedHttpResponse Json(int status, std::string body, HttpHeaders headers = {});
  // Any body with the given content type.
  static ScriptedHttpResponse Text(int status, std::string content_type, std::string body);
  // Content-Length says the whole body, but the connection closes after `sent` bytes.
  static ScriptedHttpResponse Truncated(std::string body, std::size_t sent);
  // A 200 JSON body sent `piece` bytes at a time, `interval` apart.
  static ScriptedHttpResponse Drip(std::string body, std::size_t piece,
                                   std::chrono::milliseconds interval);
  // Server-sent events: each of `data` becomes "data: <item>\n\n" (items already starting
  // with "event:" or "data:" are sent as they are, followed by a blank line), one chunk each.
  static ScriptedHttpResponse Sse(
      const std::vector<std::string>& data,
      std::chrono::milliseconds interval = std::chrono::milliseconds(0));
};

// The certificate and key an HTTPS test server presents (PEM files).
struct TlsIdentity {
  std::string certificate_file;
  std::string key_file;
};

class HttpTestServer {
 public:
  // Binds 127.0.0.1 on an ephemeral port and starts serving. Throws std::runtime_error when
  // the socket cannot be set up.
  HttpTestServer();
  // Binds `ipv4_address` (a local address, e.g. one of LocalNonLoopbackAddress()) instead.
  explicit HttpTestServer(const std::string& ipv4_address);
  // Serves HTTPS with `identity`; throws std::runtime_error when the tests were built without
  // TLS support or the files do not load.
  explicit HttpTestServer(const TlsIdentity& identity);
  ~HttpTestServer();
  HttpTestServer(const HttpTestServer&) = delete;
  HttpTestServer& operator=(const HttpTestServer&) = delete;

  int port() const { return port_; }
  // "http://127.0.0.1:<port>" ("https://" with TLS; the bound address in place of 127.0.0.1).
  std::string BaseUrl() const;

  // Queues a response for the next request that has no route.
  void Push(ScriptedHttpResponse response);
  // Answers every `method` request for `path` (exactly, query included) with `response`.
  void Route(const std::string& method, const std::string& path, ScriptedHttpResponse response);
  // The answer when the queue is empty. Default: 500 with a JSON error saying so.
  void SetDefault(ScriptedHttpResponse response);

  // With false, requests are counted but not kept (a long soak sends thousands of large ones).
  void KeepRequests(bool keep);
  std::vector<RecordedHttpRequest> Requests() const;
  std::size_t request_count() const;
  std::size_t pending() const;  // queued responses not used yet
  // Connections accepted so far (also those that never sent a whole request, or failed the
  // TLS handshake).
  std::size_t connection_count() const;
  // Connections whose TLS handshake failed (the client refused the certificate).
  std::size_t tls_failures() const;
  // Holds (ScriptedHttpResponse::hold_until_requests) that gave up waiting.
  std::size_t holds_given_up() const { return holds_given_up_.load(); }

  // Stops accepting, ends every connection's waits and joins the threads. Idempotent.
  void Stop();

 private:
  struct Connection;
  void Start(const std::string& ipv4_address);
  void AcceptLoop();
  void Serve(Connection& c);
  ScriptedHttpResponse Next(const RecordedHttpRequest& request);
  // Waits up to `d`; false when the server stops or the peer has closed.
  bool Wait(Connection& c, std::chrono::milliseconds d) const;
  // The hold of `r`; false when the server stops or the peer has closed.
  bool Hold(Connection& c, const ScriptedHttpResponse& r);
  bool SendAll(Connection& c, const std::string& data) const;
  // Reads what is there (waiting at most ~20 ms): > 0 bytes read, 0 nothing yet, < 0 closed.
  long ReadSome(Connection& c, char* buffer, std::size_t size) const;

  int listen_fd_ = -1;
  int port_ = 0;
  std::string address_ = "127.0.0.1";
  void* tls_context_ = nullptr;  // SSL_CTX*, when serving HTTPS
  std::atomic<std::size_t> connections_accepted_{0};
  std::atomic<std::size_t> tls_failures_{0};
  std::atomic<std::size_t> holds_given_up_{0};
  std::atomic<bool> stopping_{false};
  std::thread acceptor_;

  mutable std::mutex mu_;
  std::deque<ScriptedHttpResponse> queue_;
  std::map<std::pair<std::string, std::string>, ScriptedHttpResponse> routes_;
  ScriptedHttpResponse default_;
  std::vector<RecordedHttpRequest> requests_;
  bool keep_requests_ = true;
  std::size_t requests_seen_ = 0;
  // One thread per connection; finished ones are joined as new connections come, so a test
  // that makes thousands of requests does not keep thousands of threads.
  struct ConnectionThread {
    std::thread thread;
    std::shared_ptr<std::atomic<bool>> done;
  };
  std::vector<ConnectionThread> connections_;
};

// A port on 127.0.0.1 that nothing listens on (bound, then closed), for "connection
// refused".
int UnusedLoopbackPort();

// A port on 127.0.0.1 where a connection is never established: a listening socket whose
// backlog is full and which never accepts, so the kernel drops further SYNs and a client waits
// in connect() until its own time-out. Closed with the object.
class UnansweredLoopbackPort {
 public:
  UnansweredLoopbackPort();
  ~UnansweredLoopbackPort();
  UnansweredLoopbackPort(const UnansweredLoopbackPort&) = delete;
  UnansweredLoopbackPort& operator=(const UnansweredLoopbackPort&) = delete;
  int port() const { return port_; }

 private:
  int listen_fd_ = -1;
  int port_ = 0;
  std::vector<int> fillers_;
};

// An IPv4 address of this machine that is not loopback (e.g. the address of eth0), or empty
// when it has none: a server bound there is "off the machine" as far as recap's cleartext
// rule is concerned, yet reachable by the test.
std::string LocalNonLoopbackAddress();

}  // namespace testing
}  // namespace recap

#endif  // RECAP_TESTS_SUPPORT_HTTP_TEST_SERVER_H_
