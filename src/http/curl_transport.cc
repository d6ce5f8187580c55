#include "curl_transport.h"

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <memory>

#include <curl/curl.h>

#include "recap/version.h"

namespace recap {
inline namespace v0 {
namespace internal {
namespace http {
namespace {

constexpr long kPollSliceMs = 50;

// libcurl's global state, initialized once per process, thread-safely (a function-local
// static). Never cleaned up: other code in the process may use libcurl too.
bool CurlReady() {
  static const bool kReady = curl_global_init(CURL_GLOBAL_DEFAULT) == CURLE_OK;
  return kReady;
}

struct EasyDeleter {
  void operator()(CURL* h) const { curl_easy_cleanup(h); }
};
struct MultiDeleter {
  void operator()(CURLM* h) const { curl_multi_cleanup(h); }
};
struct SlistDeleter {
  void operator()(curl_slist* l) const { curl_slist_free_all(l); }
};
using EasyHandle = std::unique_ptr<CURL, EasyDeleter>;
using MultiHandle = std::unique_ptr<CURLM, MultiDeleter>;
using HeaderList = std::unique_ptr<curl_slist, SlistDeleter>;

// Keeps `easy` attached to `multi` for its scope; detaches before either is freed (members of
// Perform() are destroyed in reverse order, so this guard goes first).
class Attachment {
 public:
  Attachment(CURLM* multi, CURL* easy) : multi_(multi), easy_(easy) {
    attached_ = curl_multi_add_handle(multi_, easy_) == CURLM_OK;
  }
  ~Attachment() {
    if (attached_) curl_multi_remove_handle(multi_, easy_);
  }
  Attachment(const Attachment&) = delete;
  Attachment& operator=(const Attachment&) = delete;
  bool ok() const { return attached_; }

 private:
  CURLM* multi_;
  CURL* easy_;
  bool attached_ = false;
};

struct Exchange {
  const BodySink* sink = nullptr;
  const std::function<void(const TransportResult&)>* on_stream_start = nullptr;
  bool stream_started = false;
  const CancellationToken* cancel = nullptr;
  TransportResult* out = nullptr;
  bool sink_stopped = false;
  bool too_large = false;
  bool headers_too_large = false;
  bool error_body_cut = false;
  std::size_t header_bytes = 0;
};

bool EqualsNoCase(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  for (std::size_t i = 0; i < a.size(); ++i) {
    if (std::tolower(static_cast<unsigned char>(a[i])) !=
        std::tolower(static_cast<unsigned char>(b[i])))
      return false;
  }
  return true;
}

std::string_view Trim(std::string_view s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front()))) s.remove_prefix(1);
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.remove_suffix(1);
  return s;
}

// A non-negative number of seconds or milliseconds ("2", "1.5"); nullopt for anything else
// (an HTTP date in Retry-After falls back to recap's own backoff).
std::optional<double> ParseNonNegative(std::string_view text) {
  std::string s(Trim(text));
  if (s.empty() || !(std::isdigit(static_cast<unsigned char>(s[0])))) return std::nullopt;
  char* end = nullptr;
  const double v = std::strtod(s.c_str(), &end);
  if (end == s.c_str() || *end != '\0' || !(v >= 0) || v > 1e9) return std::nullopt;
  return v;
}

size_t OnHeader(char* data, size_t size, size_t count, void* user) {
  auto* ex = static_cast<Exchange*>(user);
  const size_t n = size * count;
  std::string_view line(data, n);
  ex->header_bytes += n;
  if (ex->header_bytes > kMaxHeaderBytes) {
    ex->headers_too_large = true;
    return 0;  // CURLE_WRITE_ERROR
  }
  if (line.size() >= 5 && line.substr(0, 5) == "HTTP/") {
    // A new response (a 100 Continue comes before the real one): start over.
    ex->out->content_type.clear();
    ex->out->headers.clear();
    ex->out->retry_after.reset();
    const auto space = line.find(' ');
    if (space != std::string_view::npos)
      ex->out->status = std::atol(std::string(line.substr(space + 1, 3)).c_str());
    return n;
  }
  const auto colon = line.find(':');
  if (colon == std::string_view::npos) return n;
  const std::string_view name = Trim(line.substr(0, colon));
  const std::string_view value = Trim(line.substr(colon + 1));
  ex->out->headers.emplace_back(name, value);
  if (EqualsNoCase(name, "content-type")) {
    ex->out->content_type = std::string(value);
  } else if (EqualsNoCase(name, "retry-after-ms")) {
    if (auto v = ParseNonNegative(value))
      ex->out->retry_after = std::chrono::milliseconds(static_cast<long long>(*v));
  } else if (EqualsNoCase(name, "retry-after")) {
    // retry-after-ms, when both are present, is the more precise one.
    if (!ex->out->retry_after) {
      if (auto v = ParseNonNegative(value))
        ex->out->retry_after = std::chrono::milliseconds(static_cast<long long>(*v * 1000.0));
    }
  }
  return n;
}

bool IsEventStream(const std::string& content_type) {
  std::string lower = content_type;
  for (char& c : lower) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return lower.find("text/event-stream") != std::string::npos;
}

size_t OnBody(char* data, size_t size, size_t count, void* user) {
  auto* ex = static_cast<Exchange*>(user);
  const size_t n = size * count;
  ex->out->body_bytes += n;
  const long status = ex->out->status;
  const bool success = status >= 200 && status < 300;
  if (success && ex->sink && *ex->sink && IsEventStream(ex->out->content_type)) {
    if (ex->out->body_bytes > kMaxBodyBytes) {  // a stream that does not end
      ex->too_large = true;
      return 0;
    }
    if (!ex->stream_started) {
      ex->stream_started = true;
      if (ex->on_stream_start != nullptr && *ex->on_stream_start) (*ex->on_stream_start)(*ex->out);
    }
    if (!(*ex->sink)(std::string_view(data, n))) {
      ex->sink_stopped = true;
      return 0;  // CURLE_WRITE_ERROR
    }
    return n;
  }
  if (success) {
    if (ex->out->body.size() + n > kMaxBodyBytes) {
      ex->too_large = true;
      return 0;
    }
    ex->out->body.append(data, n);
  } else {
    ex->out->body.append(data, std::min(n, kMaxErrorBodyBytes - ex->out->body.size()));
    if (ex->out->body.size() >= kMaxErrorBodyBytes) {
      // Enough to classify it; an error body that never ends must not hold the call.
      ex->error_body_cut = true;
      return 0;
    }
  }
  return n;
}

int OnProgress(void* user, curl_off_t, curl_off_t, curl_off_t, curl_off_t) {
  auto* ex = static_cast<Exchange*>(user);
  return ex->cancel->IsCancelled() ? 1 : 0;  // non-zero aborts the transfer
}

TransportResult Fail(TransportError error, std::string detail) {
  TransportResult r;
  r.error = error;
  r.detail = std::move(detail);
  return r;
}

}  // namespace

std::string UserAgent() {
  std::string ua = "recap/";
  ua += RECAP_VERSION_STRING;
  if (const curl_version_info_data* info = curl_version_info(CURLVERSION_NOW)) {
    ua += " libcurl/";
    ua += info->version;
  }
  return ua;
}

TransportResult Perform(const HttpRequest& request, const CancellationToken& cancel,
                        const BodySink& sink, const std::function<void()>& tick) {
  if (!CurlReady()) return Fail(TransportError::kSetup, "libcurl could not be initialized");
  if (cancel.IsCancelled()) return Fail(TransportError::kCancelled, "cancelled before sending");

  EasyHandle easy(curl_easy_init());
  MultiHandle multi(curl_multi_init());
  if (!easy || !multi) return Fail(TransportError::kSetup, "libcurl could not create a handle");

  HeaderList headers;
  for (const std::string& h : request.headers) {
    curl_slist* next = curl_slist_append(headers.get(), h.c_str());
    if (!next) return Fail(TransportError::kSetup, "out of memory building the request headers");
    (void)headers.release();  // `next` now owns the list, including what `headers` held
    headers.reset(next);
  }

  TransportResult result;
  Exchange ex;
  ex.sink = &sink;
  ex.on_stream_start = &request.on_stream_start;
  ex.cancel = &cancel;
  ex.out = &result;
  char errbuf[CURL_ERROR_SIZE] = {0};

  CURL* h = easy.get();
  bool ok = true;
  auto set = [&ok](CURLcode c) { ok = ok && c == CURLE_OK; };
  set(curl_easy_setopt(h, CURLOPT_URL, request.url.c_str()));
#if LIBCURL_VERSION_NUM >= 0x075500  // 7.85.0
  set(curl_easy_setopt(h, CURLOPT_PROTOCOLS_STR, "http,https"));
#else
  set(curl_easy_setopt(h, CURLOPT_PROTOCOLS, static_cast<long>(CURLPROTO_HTTP | CURLPROTO_HTTPS)));
#endif
  set(curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L));
  set(curl_easy_setopt(h, CURLOPT_FOLLOWLOCATION, 0L));
  set(curl_easy_setopt(h, CURLOPT_ERRORBUFFER, errbuf));
  set(curl_easy_setopt(h, CURLOPT_USERAGENT, UserAgent().c_str()));
  set(curl_easy_setopt(h, CURLOPT_ACCEPT_ENCODING, ""));  // whatever libcurl can decode
  set(curl_easy_setopt(h, CURLOPT_HTTPHEADER, headers.get()));
  set(curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT_MS,
                       static_cast<long>(request.connect_timeout_ms)));
  set(curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, static_cast<long>(request.timeout_ms)));
  set(curl_easy_setopt(h, CURLOPT_SSL_VERIFYPEER, request.verify_tls ? 1L : 0L));
  set(curl_easy_setopt(h, CURLOPT_SSL_VERIFYHOST, request.verify_tls ? 2L : 0L));
  if (!request.ca_file.empty()) set(curl_easy_setopt(h, CURLOPT_CAINFO, request.ca_file.c_str()));
  if (!request.ca_dir.empty()) set(curl_easy_setopt(h, CURLOPT_CAPATH, request.ca_dir.c_str()));
  if (request.no_proxy) set(curl_easy_setopt(h, CURLOPT_NOPROXY, "*"));
  set(curl_easy_setopt(h, CURLOPT_HEADERFUNCTION, &OnHeader));
  set(curl_easy_setopt(h, CURLOPT_HEADERDATA, &ex));
  set(curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, &OnBody));
  set(curl_easy_setopt(h, CURLOPT_WRITEDATA, &ex));
  // Belt and braces: the loop below checks the token every slice; the progress callback
  // also stops a transfer that is busy inside libcurl.
  set(curl_easy_setopt(h, CURLOPT_NOPROGRESS, 0L));
  set(curl_easy_setopt(h, CURLOPT_XFERINFOFUNCTION, &OnProgress));
  set(curl_easy_setopt(h, CURLOPT_XFERINFODATA, &ex));
  if (request.method == "POST") {
    set(curl_easy_setopt(h, CURLOPT_POST, 1L));
    set(curl_easy_setopt(h, CURLOPT_POSTFIELDSIZE_LARGE,
                         static_cast<curl_off_t>(request.body.size())));
    set(curl_easy_setopt(h, CURLOPT_POSTFIELDS, request.body.c_str()));
  } else {
    set(curl_easy_setopt(h, CURLOPT_HTTPGET, 1L));
  }
  if (!ok) return Fail(TransportError::kSetup, "libcurl refused an option");

  Attachment attach(multi.get(), h);
  if (!attach.ok()) return Fail(TransportError::kSetup, "libcurl could not start the transfer");

  bool cancelled = false;
  for (;;) {
    int running = 0;
    if (curl_multi_perform(multi.get(), &running) != CURLM_OK) {
      return Fail(TransportError::kSetup, "libcurl's transfer loop failed");
    }
    if (running == 0) break;
    if (cancel.IsCancelled()) {
      cancelled = true;
      break;
    }
    if (tick) tick();
    if (curl_multi_poll(multi.get(), nullptr, 0, kPollSliceMs, nullptr) != CURLM_OK) {
      return Fail(TransportError::kSetup, "libcurl's transfer loop failed");
    }
  }
  if (tick) tick();
  if (cancelled) return Fail(TransportError::kCancelled, "cancelled");

  CURLcode code = CURLE_OK;
  int queued = 0;
  while (CURLMsg* msg = curl_multi_info_read(multi.get(), &queued)) {
    if (msg->msg == CURLMSG_DONE) code = msg->data.result;
  }
  if (code == CURLE_OK) return result;

  std::string detail = errbuf[0] ? std::string(errbuf) : std::string(curl_easy_strerror(code));
  while (!detail.empty() && (detail.back() == '\n' || detail.back() == '\r')) detail.pop_back();
  TransportError error = TransportError::kNetwork;
  switch (code) {
    case CURLE_ABORTED_BY_CALLBACK:
      error = cancel.IsCancelled() ? TransportError::kCancelled : TransportError::kNetwork;
      break;
    case CURLE_WRITE_ERROR:
      if (ex.error_body_cut) {
        result.body_cut = true;
        return result;  // the status and the body's start: the caller classifies them
      }
      error = ex.headers_too_large ? TransportError::kHeadersTooLarge
              : ex.too_large       ? TransportError::kTooLarge
              : ex.sink_stopped    ? TransportError::kAborted
                                   : TransportError::kNetwork;
      break;
    case CURLE_OPERATION_TIMEDOUT: {
      curl_off_t connect_us = 0;
      curl_easy_getinfo(h, CURLINFO_CONNECT_TIME_T, &connect_us);
      error = connect_us == 0 ? TransportError::kConnectTimeout : TransportError::kTimeout;
      break;
    }
    case CURLE_COULDNT_RESOLVE_HOST:
    case CURLE_COULDNT_RESOLVE_PROXY:
    case CURLE_COULDNT_CONNECT: error = TransportError::kConnect; break;
    case CURLE_SSL_CONNECT_ERROR:
    case CURLE_PEER_FAILED_VERIFICATION:
    case CURLE_SSL_CERTPROBLEM:
    case CURLE_SSL_CACERT_BADFILE:
    case CURLE_SSL_CIPHER: error = TransportError::kTls; break;
    case CURLE_URL_MALFORMAT:
    case CURLE_UNSUPPORTED_PROTOCOL:
    case CURLE_OUT_OF_MEMORY: error = TransportError::kSetup; break;
    default:
      error = TransportError::kNetwork;  // partial file, reset, got nothing, recv/send error
      break;
  }
  result.error = error;
  result.detail = std::move(detail);
  return result;
}

}  // namespace http
}  // namespace internal
}  // namespace v0
}  // namespace recap
