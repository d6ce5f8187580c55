// The HTTP provider: options checked once, then per call an attempt loop — build the body,
// run the exchange (curl_transport), parse the body once, classify a failure, back off and
// retry what may pass.
#include "recap/http/http_provider.h"

#include <algorithm>
#include <atomic>
#include <cctype>
#include <chrono>
#include <cstdlib>
#include <mutex>
#include <random>
#include <thread>
#include <utility>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <nlohmann/json.hpp>
#include <sys/stat.h>

#include "curl_transport.h"
#include "http_errors.h"
#include "http_options.h"
#include "recap_internal/log_internal.h"
#include "recap_internal/remedy_text.h"
#include "sse_parser.h"
#include "wire_format.h"

namespace recap {
inline namespace v0 {
namespace {

using internal::http_options::EqualsNoCase;
using internal::http_options::IsLoopbackHost;
using internal::http_options::LooksSecret;
using internal::http_options::Lower;
using internal::http_options::SplitUrl;
using internal::http_options::UrlParts;

using internal::http::DisplayUrl;
using internal::http::HttpFailure;
using internal::http::HttpRequest;
using internal::http::Scrubber;
using internal::http::TransportError;
using internal::http::TransportResult;
using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

constexpr std::uint32_t kModelListTimeoutMs = 10000;
constexpr auto kModelListRetryAfter = std::chrono::seconds(60);

// A random delay between half and all of base × 2^(retry-1), capped (exponential backoff
// with "equal jitter": never zero, never in lockstep with other clients).
milliseconds Backoff(std::uint32_t retry, std::uint32_t base_ms, std::uint32_t cap_ms) {
  double d = static_cast<double>(base_ms);
  for (std::uint32_t i = 1; i < retry && d < cap_ms; ++i) d *= 2;
  d = std::min(d, static_cast<double>(cap_ms));
  thread_local std::minstd_rand rng(std::random_device{}());
  std::uniform_real_distribution<double> half(0.5, 1.0);
  return milliseconds(static_cast<long long>(d * half(rng)));
}

// Sleeps `delay`, waking every 10 ms to check the token. False when cancelled.
bool SleepUnlessCancelled(milliseconds delay, const CancellationToken& cancel) {
  const auto until = Clock::now() + delay;
  while (Clock::now() < until) {
    if (cancel.IsCancelled()) return false;
    std::this_thread::sleep_for(std::min<Clock::duration>(milliseconds(10), until - Clock::now()));
  }
  return !cancel.IsCancelled();
}

// What ends a complete stream, for messages.
std::string EndMarker(HttpProtocol protocol) {
  switch (protocol) {
    case HttpProtocol::kAnthropic: return "message_stop";
    case HttpProtocol::kOpenAiResponses: return "response.completed or response.incomplete";
    case HttpProtocol::kOpenAiChat:
    case HttpProtocol::kOpenAiCompact:
    case HttpProtocol::kAnthropicCompact: break;
  }
  return "data: [DONE]";
}

// One attempt's outcome.
struct Attempt {
  Result<Completion> result = Status::Unavailable("no attempt was made");
  bool retry = false;
  bool structured_rejected = false;
  std::optional<milliseconds> retry_after;
};

class HttpProvider final : public Provider {
 public:
  HttpProvider(HttpProviderOptions options, std::string api_key)
      : options_(std::move(options)), api_key_(std::move(api_key)) {
    scrub_.Add(api_key_);
    for (const auto& [name, value] : options_.extra_headers) {
      if (LooksSecret(name)) scrub_.Add(value);
    }
    const UrlParts url = SplitUrl(options_.base_url);
    if (!url.userinfo.empty()) {
      scrub_.Add(url.userinfo);
      const auto colon = url.userinfo.find(':');
      if (colon != std::string::npos) scrub_.Add(url.userinfo.substr(colon + 1));
    }
    loopback_ = IsLoopbackHost(url.host);
    native_ = options_.protocol == HttpProtocol::kOpenAiCompact ||
              options_.protocol == HttpProtocol::kAnthropicCompact;
    stream_ = options_.stream && !native_;  // a compaction's reply is one JSON body
    if (options_.protocol == HttpProtocol::kAnthropic ||
        options_.protocol == HttpProtocol::kAnthropicCompact) {
      completion_url_ = options_.base_url + "/v1/messages";
      models_url_ = options_.base_url + "/v1/models";
    } else if (options_.protocol == HttpProtocol::kOpenAiResponses) {
      completion_url_ = options_.base_url + "/responses";
      models_url_ = options_.base_url + "/models";
    } else if (options_.protocol == HttpProtocol::kOpenAiCompact) {
      completion_url_ = options_.base_url + "/responses/compact";
      models_url_ = options_.base_url + "/models";
    } else {
      completion_url_ = options_.base_url + "/chat/completions";
      models_url_ = options_.base_url + "/models";
    }
    if (!options_.name.empty()) {
      name_ = options_.name;
    } else {
      switch (options_.protocol) {
        case HttpProtocol::kAnthropic: name_ = "anthropic"; break;
        case HttpProtocol::kOpenAiResponses: name_ = "openai-responses"; break;
        case HttpProtocol::kOpenAiChat: name_ = "openai"; break;
        case HttpProtocol::kOpenAiCompact: name_ = "openai-compact"; break;
        case HttpProtocol::kAnthropicCompact: name_ = "anthropic-compact"; break;
      }
    }
    if (!options_.verify_tls) {
      RECAP_LOG_WARN("http provider {}: TLS certificate verification is OFF for {}", name_,
                     DisplayUrl(options_.base_url));
    }
    if (!options_.ca_path.empty()) {
      struct stat st {};
      if (::stat(options_.ca_path.c_str(), &st) == 0 && S_ISDIR(st.st_mode)) {
        ca_dir_ = options_.ca_path;
      } else {
        ca_file_ = options_.ca_path;
      }
    }
  }

  Result<Completion> Complete(const CompletionRequest& request,
                              const CancellationToken& cancel) override {
    try {
      return CompleteImpl(request, cancel);
    } catch (const std::bad_alloc&) {
      throw;
    } catch (...) {
      // Nothing below throws by design; if something does, say so without its text (which
      // could quote the reply).
      return Status::Internal("POST " + DisplayUrl(completion_url_) +
                              ": an unexpected exception in recap's HTTP provider");
    }
  }

  std::optional<std::size_t> ContextWindow() override {
    Result<std::size_t> w = QueryContextWindow();
    if (w.ok()) return *w;
    return std::nullopt;
  }

  Result<std::size_t> QueryContextWindow() override {
    if (options_.context_window) return *options_.context_window;
    try {
      return DiscoverContextWindow();
    } catch (const std::bad_alloc&) {
      throw;
    } catch (const std::exception& e) {
      return Status::Internal(scrub_("reading the model list failed: " + std::string(e.what())));
    }
  }

  std::string Name() const override { return name_; }

  bool WritesNativeCheckpoints() const override { return native_; }

  Result<NativeCompaction> CompactNative(const NativeCompactionRequest& request,
                                         const CancellationToken& cancel) override {
    try {
      return CompactNativeImpl(request, cancel);
    } catch (const std::bad_alloc&) {
      throw;
    } catch (...) {
      return Status::Internal("POST " + DisplayUrl(completion_url_) +
                              ": an unexpected exception in recap's HTTP provider");
    }
  }

 private:
  std::vector<std::string> Headers(bool json_body, bool stream) const {
    std::vector<std::string> own;
    if (json_body) own.emplace_back("Content-Type: application/json");
    own.emplace_back(stream ? "Accept: text/event-stream" : "Accept: application/json");
    own.emplace_back("Expect:");  // no "100-continue" round trip before the body
    if (options_.protocol == HttpProtocol::kAnthropic ||
        options_.protocol == HttpProtocol::kAnthropicCompact) {
      own.push_back("anthropic-version: " + options_.anthropic_version);
      // On-demand compaction is a beta: the header names it (docs/http-provider.md).
      if (options_.protocol == HttpProtocol::kAnthropicCompact) {
        own.emplace_back("anthropic-beta: compact-2026-09-04");
      }
      if (!api_key_.empty()) own.push_back("x-api-key: " + api_key_);
    } else if (!api_key_.empty()) {
      own.push_back("Authorization: Bearer " + api_key_);
    }
    // An extra header replaces recap's own of the same name.
    std::vector<std::string> out;
    for (std::string& h : own) {
      const std::string name = h.substr(0, h.find(':'));
      const bool replaced =
          std::any_of(options_.extra_headers.begin(), options_.extra_headers.end(),
                      [&](const auto& extra) { return EqualsNoCase(extra.first, name); });
      if (!replaced) out.push_back(std::move(h));
    }
    for (const auto& [name, value] : options_.extra_headers) {
      out.push_back(value.empty() ? name + ";" : name + ": " + value);
    }
    return out;
  }

  HttpRequest BaseRequest(const std::string& url) const {
    HttpRequest r;
    r.url = url;
    r.connect_timeout_ms = options_.connect_timeout_ms;
    r.timeout_ms = options_.timeout_ms;
    r.verify_tls = options_.verify_tls;
    r.ca_file = ca_file_;
    r.ca_dir = ca_dir_;
    // A proxy on the way to a loopback server would take the request (and the key, in
    // cleartext over http://) off the machine.
    r.no_proxy = loopback_;
    return r;
  }

  Result<Completion> CompleteImpl(const CompletionRequest& request,
                                  const CancellationToken& cancel) {
    if (native_) {
      return Status::FailedPrecondition(
          "the " + std::string(HttpProtocolName(options_.protocol)) + " provider " + name_ +
          " writes checkpoints with its provider's own compaction (CompactNative), not with "
          "Complete(); use the \"openai_responses\" or \"anthropic\" protocol for a model's "
          "completion");
    }
    const bool structured = options_.structured_output && request.json_schema.has_value() &&
                            options_.protocol != HttpProtocol::kAnthropic &&
                            !structured_rejected_.load(std::memory_order_relaxed);
    return Send(
        [&](bool with_schema) {
          return internal::http::BuildRequestBody(options_.protocol, options_.model,
                                                  options_.max_tokens_field, request, with_schema,
                                                  stream_);
        },
        structured, cancel);
  }

  // R14.2: the provider's own compaction of the span; its reply is the checkpoint.
  Result<NativeCompaction> CompactNativeImpl(const NativeCompactionRequest& request,
                                             const CancellationToken& cancel) {
    const std::string what = "POST " + DisplayUrl(completion_url_);
    if (!native_) {
      return Provider::CompactNative(request, cancel);
    }
    if (request.span == nullptr) {
      return Status::InvalidArgument(what + ": NativeCompactionRequest::span is null");
    }
    Result<Completion> reply = Send(
        [&](bool) {
          return internal::http::BuildNativeBody(options_.protocol, options_.model, request);
        },
        false, cancel);
    RECAP_RETURN_IF_ERROR(reply);
    if (reply->finish_reason == FinishReason::kLength) {
      return Status::ResourceExhausted(
          what + ": the compaction was cut at its output limit (" +
          std::to_string(request.max_output_tokens) +
          " tokens) before the summary was complete; nothing was changed. Raise "
          "compaction.maxOutputTokens.");
    }
    Result<Message> checkpoint =
        internal::http::NativeCheckpointMessage(options_.protocol, reply->text);
    if (!checkpoint.ok()) {
      return Status::Unavailable(
          scrub_(what + " answered without a usable compaction: " + checkpoint.status().message()));
    }
    return NativeCompaction{std::move(checkpoint).value(), reply->usage};
  }

  // Sends the body `build` writes (asked again with false when the server refuses structured
  // output), with the retries, back-off and error classification of every protocol.
  Result<Completion> Send(const std::function<Result<std::string>(bool structured)>& build,
                          bool structured, const CancellationToken& cancel) {
    const std::string what = "POST " + DisplayUrl(completion_url_);
    bool structured_retry_done = false;
    std::uint32_t retries = 0;
    const auto started = Clock::now();
    for (std::uint32_t attempt_no = 1;; ++attempt_no) {
      if (cancel.IsCancelled())
        return Status::Cancelled(what + ": cancelled before the request was sent.");
      Result<std::string> body = build(structured);
      if (!body.ok()) {
        return Status::InvalidArgument(what + ": the messages cannot be sent in the " +
                                       HttpProtocolName(options_.protocol) +
                                       " format: " + body.status().message());
      }
      RECAP_LOG_DEBUG("http {}: {} attempt {} ({} bytes{}{})", name_, what, attempt_no,
                      body->size(), structured ? ", structured output" : "",
                      stream_ ? ", streamed" : "");
      const auto attempt_started = Clock::now();
      Attempt a = RunAttempt(what, std::move(body).value(), structured, cancel);
      const auto ms =
          std::chrono::duration_cast<milliseconds>(Clock::now() - attempt_started).count();
      if (a.result.ok()) {
        RECAP_LOG_DEBUG("http {}: {} done in {} ms: finish {}, {} chars, usage {} + {} tokens",
                        name_, what, ms, FinishReasonName(a.result->finish_reason),
                        a.result->text.size(), a.result->usage.prompt_tokens,
                        a.result->usage.completion_tokens);
        return std::move(a.result);
      }
      const Status& failed = a.result.status();
      if (a.structured_rejected && structured && !structured_retry_done) {
        RECAP_LOG_WARN(
            "http {}: the server rejected structured output; retrying without "
            "it (and not asking for it again)",
            name_);
        structured = false;
        structured_retry_done = true;
        structured_rejected_.store(true, std::memory_order_relaxed);
        continue;
      }
      if (!a.retry || retries >= options_.max_retries || cancel.IsCancelled()) {
        if (cancel.IsCancelled()) return Status::Cancelled(what + ": cancelled.");
        RECAP_LOG_DEBUG("http {}: {} failed after {} attempt(s) in {} ms: {}", name_, what,
                        attempt_no, ms, StatusCodeName(failed.code()));
        if (retries == 0) return failed;
        const auto total = std::chrono::duration_cast<milliseconds>(Clock::now() - started).count();
        internal::RemedyText m(failed);
        m << " (gave up after " + std::to_string(attempt_no) + " attempts in " +
                 std::to_string(total) + " ms";
        const std::string n = std::to_string(options_.max_retries);
        m.Remedy("HttpProviderOptions.max_retries", "; max_retries = " + n, n) << ")";
        return m.ToStatus(failed.code());
      }
      ++retries;
      milliseconds delay =
          Backoff(retries, options_.retry_base_delay_ms, options_.max_retry_delay_ms);
      if (a.retry_after) {
        if (*a.retry_after > milliseconds(options_.max_retry_delay_ms)) {
          internal::RemedyText m(failed);
          m << " The server asked to retry after " + std::to_string(a.retry_after->count()) +
                   " ms, longer than ";
          const std::string most = std::to_string(options_.max_retry_delay_ms);
          m.Remedy("HttpProviderOptions.max_retry_delay_ms", "max_retry_delay_ms = " + most, most)
              << "; not retried.";
          return m.ToStatus(failed.code());
        }
        delay = *a.retry_after;
      }
      RECAP_LOG_WARN("http {}: {} failed ({}); retry {} of {} in {} ms", name_, what,
                     StatusCodeName(failed.code()), retries, options_.max_retries, delay.count());
      if (!SleepUnlessCancelled(delay, cancel)) {
        return Status::Cancelled(what + ": cancelled while waiting to retry.");
      }
    }
  }

  Attempt RunAttempt(const std::string& what, std::string body, bool structured,
                     const CancellationToken& cancel) {
    HttpRequest http = BaseRequest(completion_url_);
    http.method = "POST";
    http.headers = Headers(true, stream_);
    http.body = std::move(body);

    // Streaming: the SSE parser feeds the accumulator as bytes arrive.
    internal::http::StreamAccumulator stream(options_.protocol);
    internal::http::SseParser sse(
        [&stream](const internal::http::SseEvent& e) { return stream.OnEvent(e); });
    internal::http::BodySink sink;
    std::function<void()> tick;
    std::size_t reported = static_cast<std::size_t>(-1);
    if (stream_) {
      sink = [&sse](std::string_view chunk) { return sse.Feed(chunk); };
      if (options_.on_progress) {
        auto last = Clock::now() - milliseconds(100);
        tick = [&, last]() mutable {
          const auto now = Clock::now();
          if (now - last < milliseconds(100) || stream.text_chars() == reported) return;
          last = now;
          reported = stream.text_chars();
          options_.on_progress(reported);
        };
      }
    }

    TransportResult t = internal::http::Perform(http, cancel, sink, tick);
    Attempt a;
    a.retry_after = t.retry_after;
    switch (t.error) {
      case TransportError::kNone: break;
      case TransportError::kCancelled:
        a.result = Status::Cancelled(what + ": cancelled.");
        return a;
      case TransportError::kTimeout: {
        internal::RemedyText m(what + ": no complete reply within ");
        m.Option("HttpProviderOptions.timeout_ms", "timeout_ms")
            << " = " + std::to_string(options_.timeout_ms) + " ms" +
                   (t.status ? " (HTTP " + std::to_string(t.status) + ", " +
                                   std::to_string(t.body_bytes) + " bytes received)"
                             : "") +
                   ". Raise ";
        m.Option("HttpProviderOptions.timeout_ms") << " if the model needs longer.";
        a.result = m.ToStatus(StatusCode::kDeadlineExceeded);
        return a;
      }
      case TransportError::kConnectTimeout: {
        internal::RemedyText m(what + ": could not connect within ");
        m.Option("HttpProviderOptions.connect_timeout_ms", "connect_timeout_ms")
            << " = " + std::to_string(options_.connect_timeout_ms) + " ms.";
        a.result = m.ToStatus(StatusCode::kDeadlineExceeded);
        return a;
      }
      case TransportError::kConnect:
        a.retry = true;
        a.result = Status::Unavailable(what + ": could not connect: " + scrub_(t.detail) +
                                       ". Is the server running at that address?");
        return a;
      case TransportError::kNetwork:
        a.retry = true;
        a.result =
            Status::Unavailable(what +
                                (t.status ? " answered HTTP " + std::to_string(t.status) +
                                                " but the connection broke after " +
                                                std::to_string(t.body_bytes) + " bytes of the body"
                                          : ": the connection failed before a response arrived") +
                                ": " + scrub_(t.detail) + ".");
        return a;
      case TransportError::kTls: {
        internal::RemedyText m(what + ": TLS failed: " + scrub_(t.detail) +
                               ". Check the server's certificate, or point ");
        m.Option("HttpProviderOptions.ca_path") << " at the CA that signed it.";
        a.result = m.ToStatus(StatusCode::kFailedPrecondition);
        return a;
      }
      case TransportError::kTooLarge:
        a.result = Status::Unavailable(
            what + " answered HTTP " + std::to_string(t.status) + " with a " +
            (stream_ ? "body or stream" : "body") +
            " larger than recap accepts (64 MiB); it stopped reading after " +
            std::to_string(t.body_bytes) + " bytes. A reply that large is not a checkpoint.");
        return a;
      case TransportError::kHeadersTooLarge:
        a.result = Status::Unavailable(
            what +
            (t.status ? " answered HTTP " + std::to_string(t.status) + " with response headers"
                      : ": the response headers are") +
            " larger than recap accepts (256 KiB).");
        return a;
      case TransportError::kAborted:
        break;  // the stream stopped itself: its state says why (below)
      case TransportError::kSetup:
        a.result = Status::InvalidArgument(
            what + ": the request could not be made: " + scrub_(t.detail) + ".");
        return a;
    }

    const long status = t.status;
    if (status < 200 || status >= 300) {
      std::string too_deep;
      nlohmann::json parsed = internal::http::ParseServerJson(t.body, &too_deep);
      HttpFailure f = internal::http::ClassifyHttpStatus(what, status, t.body, parsed, structured,
                                                         options_.model);
      a.retry = f.retry;
      a.structured_rejected = f.structured_rejected;
      internal::RemedyText m(f.status);
      if (!too_deep.empty())
        m << " (The error body is JSON " + too_deep + "; recap did not parse it.)";
      if (t.body_cut) m << " (Only the first 256 KiB of the error body were read.)";
      a.result = scrub_(m.ToStatus(f.status.code()));
      return a;
    }

    const bool event_stream = Lower(t.content_type).find("text/event-stream") != std::string::npos;
    if (stream_ && event_stream) {
      sse.Finish();
      if (!stream.error().empty()) {
        if (stream.malformed()) {
          a.result = internal::http::MalformedResponse(what, status, t.content_type, "",
                                                       scrub_(stream.error()));
          return a;
        }
        HttpFailure f =
            internal::http::ClassifyInBandError(what, status, stream.error(), stream.error_kind());
        a.retry = f.retry;
        a.result = scrub_(f.status);
        return a;
      }
      if (!stream.finished()) {
        // A cut: never taken as a reply (see HttpProviderOptions::stream).
        a.retry = true;
        a.result = Status::Unavailable(what + " answered HTTP " + std::to_string(status) +
                                       " but the stream ended before its end marker (" +
                                       EndMarker(options_.protocol) + ") after " +
                                       std::to_string(stream.events()) + " events and " +
                                       std::to_string(stream.text_chars()) +
                                       " characters of text; the partial reply was dropped.");
        return a;
      }
      if (tick) tick();
      if (options_.on_progress && reported != stream.text_chars())
        options_.on_progress(stream.text_chars());
      a.result = stream.Take();
      return a;
    }

    // A whole body (also when a stream was asked for but the server answered in one piece).
    std::string too_deep;
    nlohmann::json parsed = internal::http::ParseServerJson(t.body, &too_deep);
    if (parsed.is_discarded()) {
      a.result = scrub_(internal::http::MalformedResponse(what, status, t.content_type, t.body,
                                                          t.body.empty() ? "the body is empty"
                                                          : too_deep.empty()
                                                              ? "the body is not JSON"
                                                              : "the body is JSON " + too_deep));
      return a;
    }
    if (parsed.is_object() && parsed.contains("error") && !parsed["error"].is_null()) {
      HttpFailure f = internal::http::ClassifyInBandError(
          what, status, internal::http::ErrorText(parsed), internal::http::ErrorKind(parsed));
      a.retry = f.retry;
      a.result = scrub_(f.status);
      return a;
    }
    Result<Completion> reply = internal::http::ParseReply(options_.protocol, parsed);
    // A native compaction's artifact is read from the body as the server wrote it.
    if (reply.ok() && native_) reply->text = std::move(t.body);
    if (!reply.ok()) {
      a.result = scrub_(internal::http::MalformedResponse(what, status, t.content_type, t.body,
                                                          reply.status().message()));
      return a;
    }
    a.result = std::move(reply);
    return a;
  }

  // The window from the server's model list, asked once it is needed; a failure is asked
  // again after kModelListRetryAfter (the Compactor waits longer still, R12.2). The errors say
  // what was asked and what to check.
  Result<std::size_t> DiscoverContextWindow() {
    std::lock_guard<std::mutex> lock(window_mu_);
    if (window_known_) {
      if (window_) return *window_;
      return Status::FailedPrecondition(window_error_);
    }
    if (window_failed_at_ && Clock::now() - *window_failed_at_ < kModelListRetryAfter) {
      return Status::Unavailable(window_error_);
    }
    const std::string what = "GET " + DisplayUrl(models_url_);
    const std::string advice =
        "; the context window stays unknown. Check base_url (an OpenAI-compatible server's "
        "usually ends in /v1) and that the server is up, or set context_window";
    HttpRequest http = BaseRequest(models_url_);
    http.method = "GET";
    http.headers = Headers(false, false);
    http.timeout_ms = std::min(options_.timeout_ms, kModelListTimeoutMs);
    TransportResult t = internal::http::Perform(http, CancellationToken());
    if (t.error != TransportError::kNone || t.status < 200 || t.status >= 300) {
      window_failed_at_ = Clock::now();
      window_error_ = scrub_(
          what + " failed (" + (t.status ? "HTTP " + std::to_string(t.status) : std::string()) +
          (t.error != TransportError::kNone ? std::string(t.status ? ", " : "") + t.detail
                                            : std::string()) +
          ")" + advice);
      RECAP_LOG_WARN("http {}: {}", name_, window_error_);
      return Status::Unavailable(window_error_);
    }
    std::string too_deep;
    nlohmann::json parsed = internal::http::ParseServerJson(t.body, &too_deep);
    if (parsed.is_discarded()) {
      window_failed_at_ = Clock::now();
      window_error_ =
          scrub_(what + " answered HTTP " + std::to_string(t.status) + " with a body that is " +
                 (too_deep.empty() ? std::string("not JSON") : "JSON " + too_deep) + " (" +
                 std::to_string(t.body.size()) + " bytes)" + advice);
      RECAP_LOG_WARN("http {}: {}", name_, window_error_);
      return Status::Unavailable(window_error_);
    }
    std::string field;
    window_ = internal::http::FindContextWindow(parsed, options_.model, &field);
    window_known_ = true;
    if (window_) {
      RECAP_LOG_DEBUG("http {}: context window of {} is {} tokens ({} of {})", name_,
                      options_.model, *window_, field, what);
      return *window_;
    }
    window_error_ = scrub_(what + " names no usable context window for model \"" + options_.model +
                           "\"; set context_window to the model's window");
    RECAP_LOG_DEBUG("http {}: {}", name_, window_error_);
    return Status::FailedPrecondition(window_error_);
  }

  const HttpProviderOptions options_;
  const std::string api_key_;
  Scrubber scrub_;
  std::string completion_url_;
  std::string models_url_;
  std::string name_;
  std::string ca_file_;
  std::string ca_dir_;
  bool loopback_ = false;
  bool native_ = false;  // R14.2: openai_compact or anthropic_compact
  bool stream_ = false;  // options_.stream, except for a native compaction
  std::atomic<bool> structured_rejected_{false};

  std::mutex window_mu_;
  bool window_known_ = false;
  std::optional<std::size_t> window_;
  std::optional<Clock::time_point> window_failed_at_;
  std::string window_error_;  // why the window is unknown (scrubbed)
};

}  // namespace

Result<std::shared_ptr<Provider>> NewHttpProvider(HttpProviderOptions options) {
  Result<std::string> key = internal::http_options::CheckHttpOptions(options);
  RECAP_RETURN_IF_ERROR(key);
  return std::shared_ptr<Provider>(
      std::make_shared<HttpProvider>(std::move(options), std::move(key).value()));
}
}  // namespace v0
}  // namespace recap
