// HttpTestServer: a scripted HTTP/1.1 server on 127.0.0.1 for the HTTP provider's tests.
//
// Plain POSIX sockets, no dependency. It listens on an ephemeral loopback port, accepts on a
// thread of its own and serves each connection on another (so concurrent clients work), one
// request per connection ("Connection: close"). Each request takes the next scripted response
// (FIFO) — or the route's response when one is set for its method and path — and is recorded,
// so a test can check what the client sent.
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
// about its length and close early, or stream server-sent events that stop short. Every wait
// ends at once when the client goes away or the server stops, so no test waits for a script
// that nobody listens to any more.
#ifndef RECAP_TESTS_SUPPORT_HTTP_TEST_SERVER_H_
#define RECAP_TESTS_SUPPORT_HTTP_TEST_SERVER_H_

#include <atomic>
#include <chrono>
#include <cstddef>
#include <deque>
#include <map>
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

class HttpTestServer {
 public:
  // Binds 127.0.0.1 on an ephemeral port and starts serving. Throws std::runtime_error when
  // the socket cannot be set up.
  HttpTestServer();
  ~HttpTestServer();
  HttpTestServer(const HttpTestServer&) = delete;
  HttpTestServer& operator=(const HttpTestServer&) = delete;

  int port() const { return port_; }
  // "http://127.0.0.1:<port>"
  std::string BaseUrl() const;

  // Queues a response for the next request that has no route.
  void Push(ScriptedHttpResponse response);
  // Answers every `method` request for `path` (exactly, query included) with `response`.
  void Route(const std::string& method, const std::string& path, ScriptedHttpResponse response);
  // The answer when the queue is empty. Default: 500 with a JSON error saying so.
  void SetDefault(ScriptedHttpResponse response);

  std::vector<RecordedHttpRequest> Requests() const;
  std::size_t request_count() const;
  std::size_t pending() const;  // queued responses not used yet

  // Stops accepting, ends every connection's waits and joins the threads. Idempotent.
  void Stop();

 private:
  void AcceptLoop();
  void Serve(int fd);
  ScriptedHttpResponse Next(const RecordedHttpRequest& request);
  // Waits up to `d`; false when the server stops or the peer of `fd` has closed.
  bool Wait(int fd, std::chrono::milliseconds d) const;
  bool SendAll(int fd, const std::string& data) const;

  int listen_fd_ = -1;
  int port_ = 0;
  std::atomic<bool> stopping_{false};
  std::thread acceptor_;

  mutable std::mutex mu_;
  std::deque<ScriptedHttpResponse> queue_;
  std::map<std::pair<std::string, std::string>, ScriptedHttpResponse> routes_;
  ScriptedHttpResponse default_;
  std::vector<RecordedHttpRequest> requests_;
  std::vector<std::thread> connections_;
};

// A port on 127.0.0.1 that nothing listens on (bound, then closed), for "connection
// refused".
int UnusedLoopbackPort();

}  // namespace testing
}  // namespace recap

#endif  // RECAP_TESTS_SUPPORT_HTTP_TEST_SERVER_H_
