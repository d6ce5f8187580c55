// recap CLI — the configuration (--config, $RECAP_CONFIG, the limits' flags) and the
// summarizer (--provider and its flags; the HTTP provider's failures in the command's words).
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iostream>
#include <sstream>
#include <string>
#include <system_error>
#include <utility>

#include <sys/stat.h>

#include "recap/sqlite/sqlite_store.h"

#include "cli.h"
#include "progress.h"
#include "recap_internal/printable.h"
#include "recap_internal/store_rules.h"
#if RECAP_CLI_HAVE_POSTGRES
#include "recap/postgres/postgres_store.h"
#endif
#if RECAP_CLI_HAVE_HTTP
#include "recap/http/http_provider.h"
#endif

namespace recap_cli {

std::vector<OptionSpec> ConfigOptions() {
  return {{"config", true}, {"max-context-chars", true}, {"keep-turns", true}};
}

recap::Result<recap::Config> BuildConfig(const Args& args, bool* usage, std::string* source) {
  *usage = false;
  if (source != nullptr) source->clear();
  recap::Config config;
  // Without --config, $RECAP_CONFIG names the file: a shell host sets it once instead of
  // repeating its settings on every call.
  const char* from_env = std::getenv("RECAP_CONFIG");
  const bool env = !args.Has("config") && from_env != nullptr && *from_env != '\0';
  if (args.Has("config") || env) {
    const std::string path = env ? std::string(from_env) : args.Get("config");
    const std::string named_by = env ? "$RECAP_CONFIG" : "--config";
    std::string text;
    std::string error;
    const std::string what =
        path == "-" ? "the configuration on standard input (" + named_by + " -)"
                    : "the configuration file '" + Shown(path) + "' (" + named_by + ")";
    if (!ReadBounded(path, kMaxConfigBytes, what, "the limit for a configuration file",
                     "Check the path given with " + named_by, &text, &error)) {
      if (error.find("is a folder") != std::string::npos) {
        error += env ? "; set RECAP_CONFIG to the configuration file"
                     : "; name the configuration file with --config FILE";
      }
      return recap::Status::NotFound(error);
    }
    recap::Result<recap::Config> parsed = recap::Config::FromJson(text);
    if (!parsed.ok()) {
      return parsed.status().WithContext(
          (path == "-" ? "the configuration on standard input"
                       : "the configuration file '" + Shown(path) + "'") +
          (env ? " named by $RECAP_CONFIG is not valid (fix it, or unset RECAP_CONFIG for the "
                 "defaults)"
               : " is not valid (fix it, or leave --config out for the defaults)"));
    }
    config = *parsed;
    if (source != nullptr) *source = std::move(text);
  }
  std::string error;
  std::size_t n = 0;
  if (args.Has("max-context-chars")) {
    if (!ParseCount(args, "max-context-chars", &n, &error)) {
      *usage = true;
      return recap::Status::InvalidArgument(error);
    }
    config.limits.max_context_chars = n;
  }
  if (args.Has("keep-turns")) {
    if (!ParseCount(args, "keep-turns", &n, &error) || n > 20) {
      *usage = true;
      return recap::Status::InvalidArgument(error.empty() ? "--keep-turns must be between 0 and 20"
                                                          : error);
    }
    config.compaction.keep_turns = static_cast<int>(n);
  }
  recap::Status valid = config.Validate();
  if (!valid.ok()) {
    *usage = args.Has("max-context-chars") || args.Has("keep-turns");
    return valid.WithContext("the configuration is out of range");
  }
  return config;
}

#if RECAP_CLI_HAVE_HTTP
const char* const kProviderHelp =
    "  --provider P              who writes the checkpoint: offline (default; no network),\n"
    "                            openai (OpenAI-compatible chat completions),\n"
    "                            openai-responses (the OpenAI Responses API), anthropic,\n"
    "                            or the providers' own compaction: openai-compact\n"
    "                            (POST /responses/compact) or anthropic-compact\n"
    "                            (Anthropic's on-demand compaction)\n"
    "  --base-url URL            the API's base URL (not for offline), e.g.\n"
    "                            https://api.openai.com/v1 or http://127.0.0.1:8080/v1\n"
    "  --model M                 the model to ask (not for offline)\n"
    "  --api-key-env VAR         the environment variable holding the API key (optional\n"
    "                            for servers that need none)\n"
    "  --timeout-ms N            time allowed for one request to the model, in ms\n"
    "                            (default 120000)\n"
    "  --connect-timeout-ms N    time allowed to connect, in ms (default 10000)\n"
    "  --ca-path PATH            a CA bundle (PEM) or a directory of hashed certificates\n"
    "                            to verify the server with; default: $CURL_CA_BUNDLE,\n"
    "                            then $SSL_CERT_FILE, then the system's\n"
    "  --allow-insecure-http     send the API key over plain http:// to a host that is\n"
    "                            not loopback (refused otherwise)\n";
std::vector<OptionSpec> ProviderOptions() {
  return {{"provider", true},   {"base-url", true},
          {"model", true},      {"api-key-env", true},
          {"timeout-ms", true}, {"connect-timeout-ms", true},
          {"ca-path", true},    {"allow-insecure-http", false}};
}
#else
const char* const kProviderHelp =
    "  --provider P              who writes the checkpoint: offline (default; no network).\n"
    "                            This build has no HTTP component, so openai,\n"
    "                            openai-responses and anthropic are not available (build\n"
    "                            recap with RECAP_BUILD_HTTP=ON)\n";
std::vector<OptionSpec> ProviderOptions() { return {{"provider", true}}; }
#endif

#if RECAP_CLI_HAVE_HTTP
namespace {

// The command's time-outs (HttpProviderOptions' default of 600 s is for hosts whose spans
// are long; at a terminal, two minutes without an answer is a server that is not coming).
constexpr std::uint32_t kCommandTimeoutMs = 120000;
constexpr std::uint32_t kCommandConnectTimeoutMs = 10000;
constexpr std::size_t kMaxTimeoutMs = 3600000;

// The options of the HTTP provider that its messages name (recap::Remedy; docs/errors.md), in
// the command's words: the flags that set them (`ca_source`: the flag or variable --ca-path's
// value came from), or plain words for what the command keeps as the library has it.
std::optional<std::string> HttpRemedyInCommandWords(const recap::Remedy& r,
                                                    const std::string& ca_source) {
  static const char* const kFlags[][2] = {
      {"HttpProviderOptions.connect_timeout_ms", "--connect-timeout-ms"},
      {"HttpProviderOptions.timeout_ms", "--timeout-ms"},
      {"HttpProviderOptions.allow_insecure_http", "--allow-insecure-http"},
      {"http.allow_insecure_http", "--allow-insecure-http"},
      {"HttpProviderOptions.base_url", "--base-url"},
      {"HttpProviderOptions.api_key_env", "--api-key-env"},
      {"HttpProviderOptions.model", "--model"},
      {"HttpProviderOptions.structured_output", "structured output"},
      {"http.api_key", "(the variable named by --api-key-env)"},
  };
  for (const auto& f : kFlags) {
    if (r.id == f[0]) return std::string(f[1]);
  }
  if (r.id == "HttpProviderOptions.ca_path") return ca_source;
  // The retry settings have no flag: the command keeps the library's (2 retries, at most 30 s
  // apart), so its messages say what happened in plain words.
  if (r.id == "HttpProviderOptions.max_retries")
    return std::string(", the most the command retries");
  if (r.id == "HttpProviderOptions.max_retry_delay_ms") {
    return "the command waits between tries (" + r.value + " ms)";
  }
  // Any other option the command sets itself: its bare name.
  const std::string prefix = "HttpProviderOptions.";
  if (r.id.rfind(prefix, 0) == 0) return r.id.substr(prefix.size());
  return std::nullopt;
}

std::string InCommandWords(const recap::Status& status, const std::string& ca_source) {
  return status.Rendered(
      [&](const recap::Remedy& r) { return HttpRemedyInCommandWords(r, ca_source); });
}

// The HTTP provider with every failure it reports in the command's words, which also tells
// the progress line what the command is waiting for.
class CommandProvider final : public recap::Provider {
 public:
  CommandProvider(std::shared_ptr<recap::Provider> inner, std::string ca_source,
                  std::string waiting)
      : inner_(std::move(inner)), ca_source_(std::move(ca_source)), waiting_(std::move(waiting)) {}

  recap::Result<recap::Completion> Complete(const recap::CompletionRequest& request,
                                            const recap::CancellationToken& cancel) override {
    SetActiveProgressStep(waiting_);
    recap::Result<recap::Completion> r = inner_->Complete(request, cancel);
    if (r.ok()) return r;
    return recap::Status(r.status().code(), InCommandWords(r.status(), ca_source_));
  }
  std::optional<std::size_t> ContextWindow() override { return inner_->ContextWindow(); }
  std::string Name() const override { return inner_->Name(); }
  bool WritesNativeCheckpoints() const override { return inner_->WritesNativeCheckpoints(); }
  recap::Result<recap::NativeCompaction> CompactNative(
      const recap::NativeCompactionRequest& request,
      const recap::CancellationToken& cancel) override {
    SetActiveProgressStep(waiting_);
    recap::Result<recap::NativeCompaction> r = inner_->CompactNative(request, cancel);
    if (r.ok()) return r;
    return recap::Status(r.status().code(), InCommandWords(r.status(), ca_source_));
  }

 private:
  std::shared_ptr<recap::Provider> inner_;
  std::string ca_source_;
  std::string waiting_;
};

bool ParseMs(const Args& args, const std::string& name, std::uint32_t* out, std::string* error) {
  std::size_t n = 0;
  if (!ParseCount(args, name, &n, error) || n == 0 || n > kMaxTimeoutMs) {
    *error = "--" + name + " wants a number of milliseconds from 1 to " +
             std::to_string(kMaxTimeoutMs) + " (one hour), not '" + args.Get(name) + "'";
    return false;
  }
  *out = static_cast<std::uint32_t>(n);
  return true;
}

}  // namespace
#endif

recap::Result<std::shared_ptr<recap::Provider>> BuildProvider(const Args& args, bool* usage) {
  *usage = false;
  const std::string name = args.Get("provider", "offline");
  if (name == "offline") {
    for (const char* flag : {"base-url", "model", "api-key-env", "timeout-ms", "connect-timeout-ms",
                             "ca-path", "allow-insecure-http"}) {
      if (args.Has(flag)) {
        *usage = true;
        return recap::Status::InvalidArgument(
            std::string("--") + flag +
            " is for --provider openai, openai-responses, anthropic, openai-compact or "
            "anthropic-compact (as are --base-url, "
            "--model, --api-key-env, --timeout-ms, --connect-timeout-ms, --ca-path and "
            "--allow-insecure-http); the offline summarizer needs none of them");
      }
    }
    return std::shared_ptr<recap::Provider>();
  }
#if RECAP_CLI_HAVE_HTTP
  if (name == "openai" || name == "openai-responses" || name == "anthropic" ||
      name == "openai-compact" || name == "anthropic-compact") {
    recap::HttpProviderOptions options;
    options.protocol = name == "openai"             ? recap::HttpProtocol::kOpenAiChat
                       : name == "openai-responses" ? recap::HttpProtocol::kOpenAiResponses
                       : name == "openai-compact"   ? recap::HttpProtocol::kOpenAiCompact
                       : name == "anthropic"        ? recap::HttpProtocol::kAnthropic
                                                    : recap::HttpProtocol::kAnthropicCompact;
    options.base_url = args.Get("base-url");
    options.model = args.Get("model");
    options.api_key_env = args.Get("api-key-env");
    if (options.base_url.empty() || options.model.empty()) {
      *usage = true;
      std::string missing;
      if (options.base_url.empty()) {
        missing = std::string("--base-url URL (where the API lives, e.g. ") +
                  (name.rfind("anthropic", 0) == 0 ? "https://api.anthropic.com"
                                                   : "https://api.openai.com/v1") +
                  ")";
      }
      if (options.model.empty()) {
        missing += (missing.empty() ? "" : " and ") + std::string("--model M (the model to ask)");
      }
      return recap::Status::InvalidArgument("--provider " + name + " needs " + missing);
    }
    std::string error;
    options.timeout_ms = kCommandTimeoutMs;
    options.connect_timeout_ms = kCommandConnectTimeoutMs;
    if ((args.Has("timeout-ms") && !ParseMs(args, "timeout-ms", &options.timeout_ms, &error)) ||
        (args.Has("connect-timeout-ms") &&
         !ParseMs(args, "connect-timeout-ms", &options.connect_timeout_ms, &error))) {
      *usage = true;
      return recap::Status::InvalidArgument(error);
    }
    options.allow_insecure_http = args.Has("allow-insecure-http");
    // The CA: --ca-path, else the variables curl's own tool and OpenSSL read.
    std::string ca_source = "--ca-path";
    if (args.Has("ca-path")) {
      options.ca_path = args.Get("ca-path");
    } else {
      for (const char* variable : {"CURL_CA_BUNDLE", "SSL_CERT_FILE"}) {
        const char* value = std::getenv(variable);
        if (value != nullptr && *value != '\0') {
          options.ca_path = value;
          ca_source = std::string("$") + variable + " (or --ca-path)";
          break;
        }
      }
    }
    const std::string shown_url = options.base_url;
    const std::uint32_t timeout_s = (options.timeout_ms + 999) / 1000;
    recap::Result<std::shared_ptr<recap::Provider>> provider =
        recap::NewHttpProvider(std::move(options));
    if (!provider.ok()) {
      // A flag's value that the provider refuses (a malformed --base-url, a missing
      // --ca-path, cleartext without --allow-insecure-http) is a usage error; an unset
      // --api-key-env variable is not.
      *usage = provider.status().code() == recap::StatusCode::kInvalidArgument;
      return recap::Status(
          provider.status().code(),
          "--provider " + name + ": " + InCommandWords(provider.status(), ca_source));
    }
    std::string waiting = "waiting for " + (*provider)->Name() + " (up to " +
                          std::to_string(timeout_s) + " s a request; --timeout-ms)";
    return std::shared_ptr<recap::Provider>(
        std::make_shared<CommandProvider>(*provider, ca_source, std::move(waiting)));
  }
  *usage = true;
  return recap::Status::InvalidArgument("unknown provider '" + name +
                                        "'; use offline, openai, openai-responses, anthropic, "
                                        "openai-compact or anthropic-compact");
#else
  *usage = true;
  return recap::Status::InvalidArgument(
      "unknown provider '" + name +
      "'; this build only has the offline summarizer (--provider offline). openai, "
      "openai-responses, anthropic, openai-compact and anthropic-compact need recap built with "
      "its HTTP component "
      "(RECAP_BUILD_HTTP=ON, libcurl)");
#endif
}

}  // namespace recap_cli
