#include "support/http_test_server.h"

#include <ifaddrs.h>
#include <poll.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <csignal>
#include <cstring>
#include <stdexcept>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>

#if RECAP_TEST_HAVE_TLS
#include <openssl/err.h>
#include <openssl/ssl.h>
#endif

namespace recap {
namespace testing {
namespace {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

std::string Lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

std::string Trim(const std::string& s) {
  std::size_t b = 0, e = s.size();
  while (b < e && std::isspace(static_cast<unsigned char>(s[b]))) ++b;
  while (e > b && std::isspace(static_cast<unsigned char>(s[e - 1]))) --e;
  return s.substr(b, e - b);
}

const char* Reason(int status) {
  switch (status) {
    case 200: return "OK";
    case 302: return "Found";
    case 400: return "Bad Request";
    case 401: return "Unauthorized";
    case 403: return "Forbidden";
    case 404: return "Not Found";
    case 413: return "Payload Too Large";
    case 429: return "Too Many Requests";
    case 500: return "Internal Server Error";
    case 502: return "Bad Gateway";
    case 503: return "Service Unavailable";
    case 529: return "Overloaded";
    default: return "Status";
  }
}

std::string Hex(std::size_t n) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%zx", n);
  return buf;
}

}  // namespace

std::string RecordedHttpRequest::Header(const std::string& name) const {
  const std::string want = Lower(name);
  for (const auto& [k, v] : headers) {
    if (Lower(k) == want) return v;
  }
  return {};
}

bool RecordedHttpRequest::HasHeader(const std::string& name) const {
  const std::string want = Lower(name);
  return std::any_of(headers.begin(), headers.end(),
                     [&](const auto& h) { return Lower(h.first) == want; });
}

ScriptedHttpResponse ScriptedHttpResponse::Json(int status, std::string body, HttpHeaders headers) {
  ScriptedHttpResponse r;
  r.status = status;
  r.headers = std::move(headers);
  r.headers.emplace_back("Content-Type", "application/json");
  r.body = std::move(body);
  return r;
}

ScriptedHttpResponse ScriptedHttpResponse::Text(int status, std::string content_type,
                                                std::string body) {
  ScriptedHttpResponse r;
  r.status = status;
  r.headers.emplace_back("Content-Type", std::move(content_type));
  r.body = std::move(body);
  return r;
}

ScriptedHttpResponse ScriptedHttpResponse::Truncated(std::string body, std::size_t sent) {
  ScriptedHttpResponse r = Json(200, std::move(body));
  r.close_after = sent;
  return r;
}

ScriptedHttpResponse ScriptedHttpResponse::Drip(std::string body, std::size_t piece,
                                                std::chrono::milliseconds interval) {
  ScriptedHttpResponse r = Json(200, {});
  for (std::size_t i = 0; i < body.size(); i += piece) r.pieces.push_back(body.substr(i, piece));
  r.piece_delay = interval;
  r.body = std::move(body);
  return r;
}

ScriptedHttpResponse ScriptedHttpResponse::Sse(const std::vector<std::string>& data,
                                               std::chrono::milliseconds interval) {
  ScriptedHttpResponse r;
  r.status = 200;
  r.headers.emplace_back("Content-Type", "text/event-stream");
  r.headers.emplace_back("Cache-Control", "no-cache");
  r.framing = Framing::kChunked;
  r.piece_delay = interval;
  for (const std::string& d : data) {
    const bool raw = d.rfind("event:", 0) == 0 || d.rfind("data:", 0) == 0 || d.rfind(":", 0) == 0;
    r.pieces.push_back((raw ? d : "data: " + d) + "\n\n");
  }
  for (const std::string& p : r.pieces) r.body += p;
  return r;
}

// One accepted connection: its socket and, for HTTPS, its TLS session.
struct HttpTestServer::Connection {
  int fd = -1;
#if RECAP_TEST_HAVE_TLS
  SSL* ssl = nullptr;
#endif
};

HttpTestServer::HttpTestServer() { Start("127.0.0.1"); }

HttpTestServer::HttpTestServer(const std::string& ipv4_address) { Start(ipv4_address); }

HttpTestServer::HttpTestServer(const TlsIdentity& identity) {
#if RECAP_TEST_HAVE_TLS
  SSL_CTX* ctx = SSL_CTX_new(TLS_server_method());
  if (ctx == nullptr) throw std::runtime_error("SSL_CTX_new failed");
  if (SSL_CTX_use_certificate_chain_file(ctx, identity.certificate_file.c_str()) != 1 ||
      SSL_CTX_use_PrivateKey_file(ctx, identity.key_file.c_str(), SSL_FILETYPE_PEM) != 1) {
    SSL_CTX_free(ctx);
    throw std::runtime_error("the test server cannot load " + identity.certificate_file + " and " +
                             identity.key_file);
  }
  tls_context_ = ctx;
  // SSL_write to a client that has hung up raises SIGPIPE, which would end the whole test
  // program (plain connections use send with MSG_NOSIGNAL instead).
  std::signal(SIGPIPE, SIG_IGN);
  Start("127.0.0.1");
#else
  (void)identity;
  throw std::runtime_error("the tests were built without OpenSSL: no HTTPS test server");
#endif
}

void HttpTestServer::Start(const std::string& ipv4_address) {
  address_ = ipv4_address;
  default_ = ScriptedHttpResponse::Json(
      500,
      R"({"error":{"message":"the test server has no scripted response left","type":"test"}})");
  listen_fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (listen_fd_ < 0) throw std::runtime_error(std::string("socket: ") + std::strerror(errno));
  int one = 1;
  ::setsockopt(listen_fd_, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  if (::inet_pton(AF_INET, ipv4_address.c_str(), &addr.sin_addr) != 1) {
    ::close(listen_fd_);
    throw std::runtime_error("not an IPv4 address: " + ipv4_address);
  }
  addr.sin_port = 0;
  if (::bind(listen_fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 ||
      ::listen(listen_fd_, 64) != 0) {
    const std::string err = std::strerror(errno);
    ::close(listen_fd_);
    throw std::runtime_error("bind/listen on " + ipv4_address + ": " + err);
  }
  socklen_t len = sizeof addr;
  ::getsockname(listen_fd_, reinterpret_cast<sockaddr*>(&addr), &len);
  port_ = ntohs(addr.sin_port);
  acceptor_ = std::thread([this] { AcceptLoop(); });
}

HttpTestServer::~HttpTestServer() { Stop(); }

std::string HttpTestServer::BaseUrl() const {
  return std::string(tls_context_ != nullptr ? "https://" : "http://") + address_ + ":" +
         std::to_string(port_);
}

void HttpTestServer::Push(ScriptedHttpResponse response) {
  std::lock_guard<std::mutex> lock(mu_);
  queue_.push_back(std::move(response));
}

void HttpTestServer::Route(const std::string& method, const std::string& path,
                           ScriptedHttpResponse response) {
  std::lock_guard<std::mutex> lock(mu_);
  routes_[{method, path}] = std::move(response);
}

void HttpTestServer::SetDefault(ScriptedHttpResponse response) {
  std::lock_guard<std::mutex> lock(mu_);
  default_ = std::move(response);
}

std::vector<RecordedHttpRequest> HttpTestServer::Requests() const {
  std::lock_guard<std::mutex> lock(mu_);
  return requests_;
}

std::size_t HttpTestServer::request_count() const {
  std::lock_guard<std::mutex> lock(mu_);
  return requests_seen_;
}

void HttpTestServer::KeepRequests(bool keep) {
  std::lock_guard<std::mutex> lock(mu_);
  keep_requests_ = keep;
}

std::size_t HttpTestServer::pending() const {
  std::lock_guard<std::mutex> lock(mu_);
  return queue_.size();
}

std::size_t HttpTestServer::connection_count() const { return connections_accepted_.load(); }

std::size_t HttpTestServer::tls_failures() const { return tls_failures_.load(); }

void HttpTestServer::Stop() {
  if (stopping_.exchange(true)) return;
  if (acceptor_.joinable()) acceptor_.join();
  std::vector<ConnectionThread> connections;
  {
    std::lock_guard<std::mutex> lock(mu_);
    connections.swap(connections_);
  }
  for (ConnectionThread& c : connections) c.thread.join();
  if (listen_fd_ >= 0) ::close(listen_fd_);
  listen_fd_ = -1;
#if RECAP_TEST_HAVE_TLS
  if (tls_context_ != nullptr) SSL_CTX_free(static_cast<SSL_CTX*>(tls_context_));
#endif
  tls_context_ = nullptr;
}

void HttpTestServer::AcceptLoop() {
  while (!stopping_.load()) {
    pollfd p{listen_fd_, POLLIN, 0};
    if (::poll(&p, 1, 20) <= 0) continue;
    const int fd = ::accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
    if (fd < 0) continue;
    ++connections_accepted_;
    std::lock_guard<std::mutex> lock(mu_);
    for (auto it = connections_.begin(); it != connections_.end();) {
      if (it->done->load()) {
        it->thread.join();
        it = connections_.erase(it);
      } else {
        ++it;
      }
    }
    auto done = std::make_shared<std::atomic<bool>>(false);
    ConnectionThread& added = connections_.emplace_back();
    added.done = done;
    added.thread = std::thread([this, fd, done] {
      struct MarkDone {
        std::atomic<bool>& flag;
        ~MarkDone() { flag.store(true); }
      } mark{*done};
      Connection c;
      c.fd = fd;
#if RECAP_TEST_HAVE_TLS
      if (tls_context_ != nullptr) {
        // A handshake that stalls must not hold Stop() for ever.
        timeval tv{10, 0};
        ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
        ::setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
        c.ssl = SSL_new(static_cast<SSL_CTX*>(tls_context_));
        SSL_set_fd(c.ssl, fd);
        if (SSL_accept(c.ssl) != 1) {
          ++tls_failures_;
          ERR_clear_error();
          SSL_free(c.ssl);
          ::close(fd);
          return;
        }
      }
#endif
      Serve(c);
#if RECAP_TEST_HAVE_TLS
      if (c.ssl != nullptr) {
        SSL_shutdown(c.ssl);
        SSL_free(c.ssl);
      }
#endif
      ::close(fd);
    });
  }
}

ScriptedHttpResponse HttpTestServer::Next(const RecordedHttpRequest& request) {
  std::lock_guard<std::mutex> lock(mu_);
  ++requests_seen_;
  if (keep_requests_) requests_.push_back(request);
  auto route = routes_.find({request.method, request.path});
  if (route != routes_.end()) return route->second;
  if (queue_.empty()) return default_;
  ScriptedHttpResponse r = std::move(queue_.front());
  queue_.pop_front();
  return r;
}

bool HttpTestServer::Wait(Connection& c, std::chrono::milliseconds d) const {
  const int fd = c.fd;
  const auto until = Clock::now() + d;
  for (;;) {
    if (stopping_.load()) return false;
    const auto left = std::chrono::duration_cast<milliseconds>(until - Clock::now()).count();
    if (left <= 0) return true;
    pollfd p{fd, POLLIN, 0};
    const int n = ::poll(&p, 1, static_cast<int>(std::min<long long>(left, 10)));
    if (n > 0) {
      if (p.revents & (POLLHUP | POLLERR)) return false;
      char peeked;
      const ssize_t got = ::recv(fd, &peeked, 1, MSG_PEEK | MSG_DONTWAIT);
      if (got == 0) return false;  // the client closed its end
      if (got < 0 && errno != EAGAIN && errno != EWOULDBLOCK) return false;
      if (got > 0) ::usleep(1000);  // unexpected extra bytes: do not spin on them
    }
  }
}

bool HttpTestServer::Hold(Connection& c, const ScriptedHttpResponse& r) {
  const auto until = Clock::now() + r.hold_limit;
  for (;;) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (requests_seen_ >= r.hold_until_requests) return true;
    }
    if (holds_given_up_.load() > 0) return true;
    if (Clock::now() >= until) {
      ++holds_given_up_;
      return true;
    }
    if (!Wait(c, milliseconds(2))) return false;
  }
}

bool HttpTestServer::SendAll(Connection& c, const std::string& data) const {
#if RECAP_TEST_HAVE_TLS
  if (c.ssl != nullptr) {
    std::size_t sent = 0;
    while (sent < data.size()) {
      if (stopping_.load()) return false;
      const int n = SSL_write(c.ssl, data.data() + sent,
                              static_cast<int>(std::min<std::size_t>(data.size() - sent, 1 << 20)));
      if (n <= 0) return false;
      sent += static_cast<std::size_t>(n);
    }
    return true;
  }
#endif
  // Non-blocking sends between polls, so that a client that stops reading (without closing)
  // cannot hold the serving thread, and Stop(), for ever.
  std::size_t sent = 0;
  while (sent < data.size()) {
    if (stopping_.load()) return false;
    pollfd p{c.fd, POLLOUT, 0};
    const int ready = ::poll(&p, 1, 20);
    if (ready < 0 && errno != EINTR) return false;
    if (ready <= 0) continue;
    if (p.revents & (POLLERR | POLLHUP)) return false;
    const ssize_t n =
        ::send(c.fd, data.data() + sent, data.size() - sent, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n < 0) {
      if (errno == EINTR || errno == EAGAIN || errno == EWOULDBLOCK) continue;
      return false;
    }
    sent += static_cast<std::size_t>(n);
  }
  return true;
}

long HttpTestServer::ReadSome(Connection& c, char* buffer, std::size_t size) const {
#if RECAP_TEST_HAVE_TLS
  if (c.ssl != nullptr) {
    if (SSL_pending(c.ssl) == 0) {
      pollfd p{c.fd, POLLIN, 0};
      if (::poll(&p, 1, 20) <= 0) return 0;
    }
    const int n = SSL_read(c.ssl, buffer, static_cast<int>(size));
    return n > 0 ? n : -1;
  }
#endif
  pollfd p{c.fd, POLLIN, 0};
  if (::poll(&p, 1, 20) <= 0) return 0;
  const ssize_t n = ::recv(c.fd, buffer, size, 0);
  return n > 0 ? static_cast<long>(n) : -1;
}

void HttpTestServer::Serve(Connection& c) {
  // Read the head.
  std::string in;
  std::size_t head_end = std::string::npos;
  const auto give_up = Clock::now() + std::chrono::seconds(10);
  while (head_end == std::string::npos) {
    if (stopping_.load() || Clock::now() > give_up || in.size() > (1u << 20)) return;
    char buf[8192];
    const long n = ReadSome(c, buf, sizeof buf);
    if (n < 0) return;
    in.append(buf, static_cast<std::size_t>(n));
    head_end = in.find("\r\n\r\n");
  }
  RecordedHttpRequest req;
  {
    const std::string head = in.substr(0, head_end);
    std::size_t line_end = head.find("\r\n");
    const std::string request_line = head.substr(0, line_end);
    const auto s1 = request_line.find(' ');
    const auto s2 = request_line.find(' ', s1 + 1);
    if (s1 == std::string::npos || s2 == std::string::npos) return;
    req.method = request_line.substr(0, s1);
    req.path = request_line.substr(s1 + 1, s2 - s1 - 1);
    std::size_t pos = line_end == std::string::npos ? head.size() : line_end + 2;
    while (pos < head.size()) {
      std::size_t end = head.find("\r\n", pos);
      if (end == std::string::npos) end = head.size();
      const std::string line = head.substr(pos, end - pos);
      const auto colon = line.find(':');
      if (colon != std::string::npos) {
        req.headers.emplace_back(Trim(line.substr(0, colon)), Trim(line.substr(colon + 1)));
      }
      pos = end + 2;
    }
  }
  std::size_t length = 0;
  if (!req.Header("content-length").empty()) length = std::stoul(req.Header("content-length"));
  if (Lower(req.Header("expect")) == "100-continue") {
    if (!SendAll(c, "HTTP/1.1 100 Continue\r\n\r\n")) return;
  }
  req.body = in.substr(head_end + 4);
  while (req.body.size() < length) {
    if (stopping_.load() || Clock::now() > give_up) return;
    char buf[65536];
    const long n = ReadSome(c, buf, sizeof buf);
    if (n < 0) return;
    req.body.append(buf, static_cast<std::size_t>(n));
  }

  const ScriptedHttpResponse r = Next(req);
  if (r.delay.count() > 0 && !Wait(c, r.delay)) return;
  if (r.hold_until_requests > 0 && !Hold(c, r)) return;

  std::string head = "HTTP/1.1 " + std::to_string(r.status) + " " + Reason(r.status) + "\r\n";
  for (const auto& [k, v] : r.headers) head += k + ": " + v + "\r\n";
  switch (r.framing) {
    case ScriptedHttpResponse::Framing::kContentLength:
      head +=
          "Content-Length: " + std::to_string(r.content_length.value_or(r.body.size())) + "\r\n";
      break;
    case ScriptedHttpResponse::Framing::kChunked: head += "Transfer-Encoding: chunked\r\n"; break;
    case ScriptedHttpResponse::Framing::kClose: break;
  }
  head += "Connection: close\r\n\r\n";
  if (!SendAll(c, head)) return;

  std::vector<std::string> pieces = r.pieces;
  if (pieces.empty() && !r.body.empty()) pieces.push_back(r.body);
  const bool chunked = r.framing == ScriptedHttpResponse::Framing::kChunked;
  std::size_t budget = r.close_after.value_or(static_cast<std::size_t>(-1));
  bool cut = false;
  for (std::size_t i = 0; i < pieces.size(); ++i) {
    if (i > 0 && r.piece_delay.count() > 0 && !Wait(c, r.piece_delay)) return;
    std::string piece = pieces[i];
    if (piece.size() > budget) {
      piece.resize(budget);
      cut = true;
    }
    budget -= piece.size();
    if (!piece.empty()) {
      const std::string out = chunked ? Hex(piece.size()) + "\r\n" + piece + "\r\n" : piece;
      if (!SendAll(c, out)) return;
    }
    if (cut || budget == 0) {
      cut = cut || i + 1 < pieces.size() || r.close_after.has_value();
      break;
    }
  }
  if (!cut && !r.repeat.empty()) {
    const std::string out = chunked ? Hex(r.repeat.size()) + "\r\n" + r.repeat + "\r\n" : r.repeat;
    // Without a delay, small repeats go out about 64 KiB at a time: a 13-byte keep-alive sent
    // one system call at a time took half a minute to reach 64 MiB under a sanitizer.
    const std::size_t per_send =
        r.piece_delay.count() > 0 ? 1
                                  : std::max<std::size_t>(1, (std::size_t{64} << 10) / out.size());
    std::string batch;
    for (std::size_t k = 0; k < per_send; ++k) batch += out;
    for (std::size_t i = 0; r.repeat_times == ScriptedHttpResponse::kForever || i < r.repeat_times;
         i += per_send) {
      if (r.piece_delay.count() > 0 && !Wait(c, r.piece_delay)) return;
      const std::size_t n = r.repeat_times == ScriptedHttpResponse::kForever
                                ? per_send
                                : std::min(per_send, r.repeat_times - i);
      if (!SendAll(c, n == per_send ? batch : batch.substr(0, n * out.size()))) return;
    }
  }
  if (!cut && chunked) SendAll(c, "0\r\n\r\n");
  ::shutdown(c.fd, SHUT_WR);
  // Let the client read everything before the socket closes (a close with unread input
  // would reset the connection).
  Wait(c, milliseconds(200));
}

int UnusedLoopbackPort() {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) throw std::runtime_error("socket failed");
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = 0;
  if (::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
    ::close(fd);
    throw std::runtime_error("bind failed");
  }
  socklen_t len = sizeof addr;
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
  ::close(fd);
  return ntohs(addr.sin_port);
}

UnansweredLoopbackPort::UnansweredLoopbackPort() {
  listen_fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (listen_fd_ < 0) throw std::runtime_error("socket failed");
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = 0;
  if (::bind(listen_fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 ||
      ::listen(listen_fd_, 0) != 0) {
    ::close(listen_fd_);
    throw std::runtime_error("bind/listen failed");
  }
  socklen_t len = sizeof addr;
  ::getsockname(listen_fd_, reinterpret_cast<sockaddr*>(&addr), &len);
  port_ = ntohs(addr.sin_port);
  // Fill the accept queue (backlog 0 holds one; a few more for good measure) with
  // connections that are never accepted; each waits at most 200 ms to be established.
  for (int i = 0; i < 4; ++i) {
    const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (fd < 0) break;
    (void)::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr);
    pollfd p{fd, POLLOUT, 0};
    ::poll(&p, 1, 200);
    fillers_.push_back(fd);
  }
}

UnansweredLoopbackPort::~UnansweredLoopbackPort() {
  for (int fd : fillers_) ::close(fd);
  if (listen_fd_ >= 0) ::close(listen_fd_);
}

std::string LocalNonLoopbackAddress() {
  ifaddrs* list = nullptr;
  if (::getifaddrs(&list) != 0) return {};
  std::string found;
  for (ifaddrs* a = list; a != nullptr && found.empty(); a = a->ifa_next) {
    if (a->ifa_addr == nullptr || a->ifa_addr->sa_family != AF_INET) continue;
    const auto* in = reinterpret_cast<const sockaddr_in*>(a->ifa_addr);
    if ((ntohl(in->sin_addr.s_addr) >> 24) == 127) continue;
    char text[INET_ADDRSTRLEN] = {0};
    if (::inet_ntop(AF_INET, &in->sin_addr, text, sizeof text) != nullptr) found = text;
  }
  ::freeifaddrs(list);
  return found;
}

}  // namespace testing
}  // namespace recap
