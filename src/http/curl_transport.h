// Private: one HTTP exchange over libcurl. The only file that includes <curl/curl.h> is
// curl_transport.cc; nothing here leaks a curl type.
//
// Each Perform() uses its own easy and multi handle, so calls on different threads share
// nothing. The transfer is driven with curl_multi_poll in slices of at most 50 ms, and the
// cancellation token is checked between slices: a cancelled call returns within about that.
#ifndef RECAP_SRC_HTTP_CURL_TRANSPORT_H_
#define RECAP_SRC_HTTP_CURL_TRANSPORT_H_

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "recap/cancellation.h"

namespace recap {
inline namespace v0 {
namespace internal {
namespace http {

struct TransportResult;

struct HttpRequest {
  std::string method = "POST";  // "GET" or "POST"
  std::string url;
  std::vector<std::string> headers;  // "Name: value" lines; may hold secrets, never logged
  std::string body;                  // sent for POST
  std::uint32_t connect_timeout_ms = 10000;
  std::uint32_t timeout_ms = 600000;
  bool verify_tls = true;
  std::string ca_file;    // CURLOPT_CAINFO
  std::string ca_dir;     // CURLOPT_CAPATH
  bool no_proxy = false;  // never use a proxy, whatever the environment says
  // Called once, on the calling thread, right before the first piece of a 2xx event stream goes
  // to the sink: the response's status and headers are whole by then (`recap proxy` passes
  // them on before the stream).
  std::function<void(const TransportResult&)> on_stream_start;
};

// Limits on what a server may send (SPEC R13.1): a 2xx body or a stream, the part of an
// error body that is read (the transfer then stops: the start is enough to classify it),
// the response headers.
inline constexpr std::size_t kMaxBodyBytes = 64u << 20;
inline constexpr std::size_t kMaxErrorBodyBytes = 256u << 10;
inline constexpr std::size_t kMaxHeaderBytes = 256u << 10;

enum class TransportError : std::uint8_t {
  kNone,             // a complete HTTP response arrived (any status)
  kCancelled,        // the token was cancelled
  kTimeout,          // timeout_ms passed
  kConnectTimeout,   // connect_timeout_ms passed before the connection was up
  kConnect,          // could not resolve or connect (refused, unreachable)
  kNetwork,          // the connection failed mid-way: reset, closed early, partial body
  kTls,              // TLS handshake or certificate verification failed
  kAborted,          // the body sink asked to stop (its own reason is the caller's)
  kTooLarge,         // the body (or stream) passed kMaxBodyBytes
  kHeadersTooLarge,  // the response headers passed kMaxHeaderBytes
  kSetup,            // libcurl refused an option or could not start
};

struct TransportResult {
  TransportError error = TransportError::kNone;
  std::string detail;  // libcurl's description of the failure (no headers, no body)
  long status = 0;     // HTTP status of the final response, 0 if none arrived
  std::string content_type;
  // Every header of the final response as received (name, value), within kMaxHeaderBytes.
  std::vector<std::pair<std::string, std::string>> headers;
  std::optional<std::chrono::milliseconds> retry_after;  // Retry-After / retry-after-ms
  std::string body;                                      // the body, unless a sink consumed it
  std::size_t body_bytes = 0;  // bytes received, including what a sink consumed
  bool body_cut = false;       // an error body longer than kMaxErrorBodyBytes: `body` is its start
};

// Receives the body of a 2xx `text/event-stream` response piece by piece instead of
// `TransportResult::body` (any other body is collected whole, for the caller to parse).
// Returning false stops the transfer with TransportError::kAborted.
using BodySink = std::function<bool(std::string_view chunk)>;

// Runs the exchange. `sink` may be empty. `tick`, if set, is called on this thread between
// polling slices (at most every 50 ms).
TransportResult Perform(const HttpRequest& request, const CancellationToken& cancel,
                        const BodySink& sink = {}, const std::function<void()>& tick = {});

// "recap/<version> libcurl/<version>".
std::string UserAgent();

}  // namespace http
}  // namespace internal
}  // namespace v0
}  // namespace recap

#endif  // RECAP_SRC_HTTP_CURL_TRANSPORT_H_
