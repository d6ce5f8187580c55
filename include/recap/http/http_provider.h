/// @file
/// recap — the HTTP summarizer providers (component `recap::http`; SPEC R1.2, R2.4, R2.6, R5, §12).
///
/// ```text
///   find_package(recap CONFIG REQUIRED COMPONENTS http)
///   target_link_libraries(my_agent PRIVATE recap::http)
/// ```
///
/// ```cpp
///   recap::HttpProviderOptions options;
///   options.protocol = recap::HttpProtocol::kOpenAiChat;
///   options.base_url = "https://api.openai.com/v1";  // or http://127.0.0.1:8080/v1 (llama.cpp)
///   options.model = "gpt-4o-mini";
///   options.api_key_env = "OPENAI_API_KEY";
///   recap::Result<std::shared_ptr<recap::Provider>> provider = recap::NewHttpProvider(options);
///   if (!provider.ok()) return fail(provider.status().message());  // says which option is wrong
///   auto compactor = recap::Compactor::Create(config, *provider, store);
/// ```
///
/// Three wire protocols, each a Provider (provider.h) that writes checkpoints with a model:
///
/// ```text
///   kOpenAiChat   POST {base_url}/chat/completions, model list GET {base_url}/models. OpenAI
///                 and every OpenAI-compatible server: llama.cpp's server, vLLM, LM Studio,
///                 Ollama's /v1, OpenRouter, proxies. `Authorization: Bearer <key>`.
///   kAnthropic    POST {base_url}/v1/messages, model list GET {base_url}/v1/models.
///                 `x-api-key: <key>` and `anthropic-version`.
///   kOpenAiResponses
///                 POST {base_url}/responses (OpenAI's Responses API), model list GET
///                 {base_url}/models. The system prompt is sent as `instructions`, the span as
///                 `input` items, the limit as `max_output_tokens`, with `store: false` so the
///                 server keeps nothing. A response whose status is `incomplete` because of
///                 max_output_tokens is a cut reply (FinishReason::kLength).
/// ```
///
/// Two more write the checkpoint with the provider's own compaction (SPEC R14.2): the provider
/// returns true from WritesNativeCheckpoints() and the Compactor calls CompactNative(), which
/// sends the span itself (not a rendered text) and returns the provider's artifact as the
/// checkpoint. recap still chooses the cut, keeps the tail, commits, reduces and reports.
///
/// ```text
///   kOpenAiCompact
///                 POST {base_url}/responses/compact with `model`, `input` (the span as
///                 Responses items, byte for byte) and `instructions` (the session's
///                 instructions, and a manual compaction's focus). The reply's `output` items —
///                 the `compaction` item with its `encrypted_content`, and whatever OpenAI keeps
///                 beside it — become one checkpoint message, each item an opaque part.
///   kAnthropicCompact
///                 POST {base_url}/v1/messages with the beta header `anthropic-beta:
///                 compact-2026-09-04`, the span as `messages`, the instructions as `system`
///                 and `"compaction": {"type": "summarize"}` (with the focus as its
///                 `instructions`). The reply (stop_reason "compaction") holds one `compaction`
///                 block; its message is the checkpoint. stop_reason "max_tokens" is a cut
///                 compaction: kResourceExhausted, nothing changed.
/// ```
///
/// Neither streams (`stream` is ignored); Complete() on them fails with kFailedPrecondition.
/// Errors are classified as for the other protocols.
///
/// What a call returns (docs/http-provider.md has the full table):
///
///   * the reply's text, FinishReason::kLength when the model stopped at max_output_tokens
///     (`length`, `max_tokens`, status `incomplete` for `max_output_tokens`), kStop for a natural
///     end, kOther for anything else; usage in prompt and completion tokens (zero when the server
///     does not say);
///   * kResourceExhausted when the server says the prompt is longer than the model's context;
///   * kUnavailable for what may pass — 408, 409, 429, 5xx, 529, connection failures, a stream
///     that ended before its end marker, a reply that is not the JSON it should be — after
///     `max_retries` retries with exponential backoff and jitter, honouring `Retry-After`;
///   * kFailedPrecondition when the server refuses the credentials (401, 403): check the key;
///   * kInvalidArgument for any other rejected request (400, 404, 422 …), not retried;
///   * kDeadlineExceeded when an attempt took longer than `timeout_ms` (or the connection
///     longer than `connect_timeout_ms`);
///   * kCancelled within about 100 ms of the token's cancellation.
///
/// Every message names the URL (without credentials or query) and the HTTP status. The API key
/// is never written anywhere: not in a Status, not in a log record, and it is scrubbed from
/// anything the server echoes back — every run of 8 or more of its characters, also
/// base64-encoded, also when an excerpt cut it (R13.3). Response bodies are bounded (64 MiB
/// for a reply or a stream, 256 KiB read of an error body, 256 KiB of headers) and so is the
/// nesting of every JSON recap parses from a server (R13.1). TLS certificates are verified unless
/// `verify_tls` is turned off explicitly. Redirects are not followed (they would carry the key
/// elsewhere).
///
/// Thread safety: a provider may be used from any number of threads at once; each call runs
/// its own connection. It holds no global state besides libcurl's one-time initialization.
#ifndef RECAP_HTTP_HTTP_PROVIDER_H_
#define RECAP_HTTP_HTTP_PROVIDER_H_

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "recap/export.h"
#include "recap/provider.h"
#include "recap/status.h"

namespace recap {
inline namespace v0 {

/// The wire protocol an HTTP provider speaks (see above).
enum class HttpProtocol : std::uint8_t {
  kOpenAiChat,        ///< OpenAI chat completions and compatible servers
  kAnthropic,         ///< Anthropic Messages API
  kOpenAiResponses,   ///< OpenAI Responses API (POST {base_url}/responses)
  kOpenAiCompact,     ///< R14.2: OpenAI's own compaction (POST {base_url}/responses/compact)
  kAnthropicCompact,  ///< R14.2: Anthropic's on-demand compaction (POST {base_url}/v1/messages)
};

/// "openai_chat", "anthropic", "openai_responses", "openai_compact", "anthropic_compact".
RECAP_EXPORT const char* HttpProtocolName(HttpProtocol protocol) noexcept;
/// Parses "openai_chat" (also "openai"), "anthropic", "openai_responses" (also "responses"),
/// "openai_compact" (also "openai-compact"), "anthropic_compact" (also "anthropic-compact").
/// Fails with kInvalidArgument naming the accepted values.
RECAP_EXPORT Result<HttpProtocol> ParseHttpProtocol(const std::string& name);

/// What NewHttpProvider makes: where the API lives, the model, the key, and how to talk to it.
struct HttpProviderOptions {
  HttpProtocol protocol = HttpProtocol::kOpenAiChat;  ///< the wire protocol

  /// Where the API lives, http:// or https://, without the endpoint: for OpenAI
  /// "https://api.openai.com/v1" (the `/v1` is part of it), for Anthropic
  /// "https://api.anthropic.com" (a trailing `/v1` is tolerated and dropped). A trailing slash
  /// is ignored. Required.
  std::string base_url;
  /// The model to ask, sent as `model`. Required.
  std::string model;

  /// The API key, or the name of an environment variable holding it (read once, when the
  /// provider is created; it must then be set and non-empty). Set at most one. Neither is fine
  /// for servers that need no key (most local ones), or when `extra_headers` authenticates.
  std::string api_key;
  std::string api_key_env;  ///< the name of an environment variable holding the key

  /// Sent with every request, after recap's own headers: {"OpenAI-Organization", "org-…"},
  /// for instance, or a proxy's token. Names and values must not contain line breaks. Values of
  /// headers whose name suggests a secret (…key…, …auth…, …token…, …secret…, cookie) are
  /// scrubbed from messages like the key.
  std::vector<std::pair<std::string, std::string>> extra_headers;

  /// Time allowed to establish the connection (TCP and TLS).
  std::uint32_t connect_timeout_ms = 10000;
  /// Time allowed for one attempt, from connecting to the last byte of the reply. Generous by
  /// default: a long span summarized with a large output budget takes minutes. A time-out is
  /// kDeadlineExceeded and is not retried.
  std::uint32_t timeout_ms = 600000;

  /// Retries after a failure that may pass (see above); 0 disables them.
  std::uint32_t max_retries = 2;
  /// Backoff before retry n (1-based): a random delay between half and all of
  /// retry_base_delay_ms × 2^(n-1), capped at max_retry_delay_ms. A `Retry-After` (seconds) or
  /// `retry-after-ms` header replaces it; a server that asks for more than max_retry_delay_ms
  /// is not retried (kUnavailable says how long it asked for).
  std::uint32_t retry_base_delay_ms = 500;
  std::uint32_t max_retry_delay_ms = 30000;  ///< the longest backoff (see retry_base_delay_ms)

  /// Plain http:// carries the key in cleartext. With a credential (api_key, api_key_env, an
  /// extra header whose name looks secret, or a password in base_url), NewHttpProvider refuses
  /// a plain http:// base_url whose host is not loopback (127.0.0.0/8, ::1, localhost) with
  /// kInvalidArgument, before any connection (SPEC R13.4). Set this to send it anyway (a
  /// trusted private network). Loopback is always allowed; a loopback URL never goes through
  /// a proxy named by the environment (http_proxy, ALL_PROXY …).
  bool allow_insecure_http = false;

  /// TLS: verify the server's certificate and name. Turn off only for a test server you
  /// control; a warning is logged when it is off.
  bool verify_tls = true;
  /// A CA bundle file (PEM) or a directory of hashed certificates to verify against instead of
  /// the system's. Must exist. The library reads no environment variable for it (SSL_CERT_FILE,
  /// CURL_CA_BUNDLE are the `recap` command's business, or the host's).
  std::string ca_path;

  /// Ask the model for JSON that follows recap's checkpoint schema (CompletionRequest::
  /// json_schema). OpenAI chat protocol: sent as `response_format` {type: json_schema};
  /// Responses protocol: as `text.format` {type: json_schema}. If the server rejects it (a 400
  /// that mentions response_format, text.format or json_schema), the request is retried once
  /// without it and it is not sent again by this provider. Anthropic protocol:
  /// ignored (recap's prompt already asks for the JSON, and its parser is forgiving).
  bool structured_output = false;

  /// The `anthropic-version` header (Anthropic protocol).
  std::string anthropic_version = "2023-06-01";

  /// OpenAI chat protocol: the name of the output limit field. Newer OpenAI reasoning models
  /// want "max_completion_tokens"; most compatible servers only know "max_tokens". (The
  /// Responses protocol always sends max_output_tokens.)
  std::string max_tokens_field = "max_tokens";

  /// Stream the reply (server-sent events) instead of waiting for the whole body. The text is
  /// the same; `on_progress`, if set, is called as it arrives. A stream that stops before its
  /// end marker (`data: [DONE]`, `message_stop`, `response.completed` or
  /// `response.incomplete`) is a failure that may pass — kUnavailable, retried — never a reply
  /// taken as complete: recap must not mistake a cut connection for a finished (or a
  /// length-limited) checkpoint.
  bool stream = false;
  /// Called on the calling thread with the number of characters of reply text received so
  /// far, at most every 100 ms and once at the end. Must not throw.
  std::function<void(std::size_t chars_received)> on_progress;

  /// The context window to report instead of asking the server (R1.2). Unset: ContextWindow()
  /// reads the model list once (see below).
  std::optional<std::size_t> context_window;

  /// Name() of the provider, used in events (`checkpoint.writer`) and logs. Empty: "openai",
  /// "anthropic", "openai-responses", "openai-compact" or "anthropic-compact".
  std::string name;
};

/// Creates a provider. Fails with kInvalidArgument when an option is missing or malformed, or
/// kFailedPrecondition when api_key_env names a variable that is not set — the message names
/// the option and what would be accepted. Creating a provider makes no request.
///
/// ContextWindow() (R1.2): unless `context_window` is set, the first call fetches the model
/// list (GET {base_url}/models, or {base_url}/v1/models for Anthropic), finds the entry whose
/// `id` (or `name`, `model`) is `model` — or the only entry when the server lists just one —
/// and reads the first of `context_length`, `context_window`, `max_model_len`,
/// `max_context_length`, `max_input_tokens`, `meta.n_ctx_train`, found on the entry itself or
/// in an object nested in it (e.g. OpenRouter's `top_provider.context_length`). A value above
/// 2,000,000 is ignored. The answer — a number or "unknown" — is kept for the provider's life;
/// a failed request is asked again after a minute. It uses connect_timeout_ms and at most 10 s.
RECAP_EXPORT Result<std::shared_ptr<Provider>> NewHttpProvider(HttpProviderOptions options);

}  // namespace v0
}  // namespace recap

#endif  // RECAP_HTTP_HTTP_PROVIDER_H_
