// The HTTP provider's options checked (http_options.h), and the protocols' names.
#include "http_options.h"

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

#include "http_errors.h"
#include "recap_internal/log_internal.h"
#include "recap_internal/remedy_text.h"
#include "wire_format.h"

namespace recap {
inline namespace v0 {
namespace internal {
namespace http_options {

bool HasLineBreakOrControl(const std::string& s) {
  return std::any_of(s.begin(), s.end(), [](char c) {
    const auto u = static_cast<unsigned char>(c);
    return u < 0x20 ? c != '\t' : u == 0x7F;
  });
}

bool EqualsNoCase(const std::string& a, const std::string& b) {
  return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin(), [](char x, char y) {
           return std::tolower(static_cast<unsigned char>(x)) ==
                  std::tolower(static_cast<unsigned char>(y));
         });
}

std::string Lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

bool LooksSecret(const std::string& header_name) {
  const std::string n = Lower(header_name);
  for (const char* word : {"key", "auth", "token", "secret", "cookie", "password"}) {
    if (n.find(word) != std::string::npos) return true;
  }
  return false;
}

bool ValidHeaderName(const std::string& name) {
  if (name.empty()) return false;
  return std::all_of(name.begin(), name.end(), [](char c) {
    const auto u = static_cast<unsigned char>(c);
    return u > 0x20 && u < 0x7F && c != ':';
  });
}

UrlParts SplitUrl(const std::string& url) {
  UrlParts p;
  const auto scheme_end = url.find("://");
  if (scheme_end == std::string::npos) return p;
  p.scheme = Lower(url.substr(0, scheme_end));
  const auto start = scheme_end + 3;
  auto end = url.find_first_of("/?#", start);
  if (end == std::string::npos) end = url.size();
  std::string authority = url.substr(start, end - start);
  const auto at = authority.rfind('@');
  if (at != std::string::npos) {
    p.userinfo = authority.substr(0, at);
    authority.erase(0, at + 1);
  }
  if (!authority.empty() && authority[0] == '[') {
    const auto close = authority.find(']');
    p.host = authority.substr(1, close == std::string::npos ? std::string::npos : close - 1);
  } else {
    p.host = authority.substr(0, authority.find(':'));
  }
  p.host = Lower(p.host);
  return p;
}

bool IsLoopbackHost(const std::string& host) {
  if (host == "localhost" || host == "localhost.") return true;
  in_addr v4{};
  if (::inet_pton(AF_INET, host.c_str(), &v4) == 1) return (ntohl(v4.s_addr) >> 24) == 127;
  in6_addr v6{};
  if (::inet_pton(AF_INET6, host.c_str(), &v6) == 1) {
    if (IN6_IS_ADDR_LOOPBACK(&v6)) return true;
    return IN6_IS_ADDR_V4MAPPED(&v6) && v6.s6_addr[12] == 127;
  }
  return false;
}

namespace {

// kInvalidArgument for the option `name` of HttpProviderOptions: "HttpProviderOptions.<name>"
// (a remedy: the command names its flag), then `rest`.
Status Invalid(const std::string& name, const std::string& rest) {
  internal::RemedyText m;
  m.Option("HttpProviderOptions." + name) << rest;
  return m.ToStatus(StatusCode::kInvalidArgument);
}

}  // namespace

Result<std::string> CheckHttpOptions(HttpProviderOptions& options) {
  // base_url
  std::string& base = options.base_url;
  while (!base.empty() && std::isspace(static_cast<unsigned char>(base.back()))) base.pop_back();
  while (!base.empty() && base.back() == '/') base.pop_back();
  if (base.empty()) {
    return Invalid("base_url",
                   " is empty: set it to the API's address, e.g. "
                   "\"https://api.openai.com/v1\", \"https://api.anthropic.com\" or "
                   "\"http://127.0.0.1:8080/v1\" (llama.cpp's server)");
  }
  const std::string lower = Lower(base);
  if (lower.rfind("http://", 0) != 0 && lower.rfind("https://", 0) != 0) {
    return Invalid("base_url", " \"" +
                                   internal::http::DisplayUrl(internal::http::Excerpt(base, 200)) +
                                   "\" must start with http:// or https://");
  }
  if (HasLineBreakOrControl(base) || base.find(' ') != std::string::npos) {
    return Invalid("base_url", " contains spaces or control characters");
  }
  if (base.find_first_of("?#") != std::string::npos) {
    return Invalid("base_url", " \"" + internal::http::DisplayUrl(base) +
                                   "\" must not have a query or fragment: "
                                   "recap appends the endpoint's path to it");
  }
  if (options.protocol == HttpProtocol::kAnthropic && lower.size() >= 3 &&
      lower.compare(lower.size() - 3, 3, "/v1") == 0) {
    base.resize(base.size() - 3);  // recap adds /v1/messages itself
  }
  // model
  if (options.model.empty()) {
    return Invalid("model",
                   " is empty: name the model to ask, e.g. \"gpt-4o-mini\" or "
                   "\"claude-3-5-haiku-latest\" (any name for a local server that serves one)");
  }
  if (HasLineBreakOrControl(options.model)) return Invalid("model", " contains control characters");
  // key
  std::string key;
  if (!options.api_key.empty() && !options.api_key_env.empty()) {
    internal::RemedyText m;
    m.Option("HttpProviderOptions.api_key") << " and ";
    m.Option("HttpProviderOptions.api_key_env", "api_key_env") << " are both set: set one of them";
    return m.ToStatus(StatusCode::kInvalidArgument);
  }
  if (!options.api_key_env.empty()) {
    const char* value = std::getenv(options.api_key_env.c_str());
    if (!value || !*value) {
      internal::RemedyText m;
      m.Option("HttpProviderOptions.api_key_env")
          << " names the environment variable \"" +
                 internal::http::Excerpt(options.api_key_env, 100) +
                 "\", which is not set or is empty: export the API key in it, or leave ";
      m.Option("HttpProviderOptions.api_key_env", "api_key_env")
          << " empty for a server that needs no key";
      return m.ToStatus(StatusCode::kFailedPrecondition);
    }
    key = value;
  } else {
    key = options.api_key;
  }
  if (HasLineBreakOrControl(key) || key.find(' ') != std::string::npos) {
    internal::RemedyText m;
    if (options.api_key_env.empty()) {
      m.Option("HttpProviderOptions.api_key");
    } else {
      m.Option("HttpProviderOptions.api_key_env") << "'s variable";
    }
    m << " holds spaces or control characters (a stray newline?); it was not used";
    return m.ToStatus(StatusCode::kInvalidArgument);
  }
  // headers
  for (const auto& [name, value] : options.extra_headers) {
    if (!ValidHeaderName(name)) {
      return Invalid("extra_headers",
                     ": the header name \"" + internal::http::Excerpt(name, 80) +
                         "\" is empty or contains spaces, ':' or control characters");
    }
    if (HasLineBreakOrControl(value)) {
      return Invalid("extra_headers", ": the value of \"" + name +
                                          "\" contains a line break or "
                                          "control character");
    }
  }
  // cleartext (R13.4): no credential over plain http:// off the machine, unless asked for
  {
    const UrlParts url = SplitUrl(base);
    internal::RemedyText credential;  // what would go in cleartext
    if (!key.empty()) {
      credential.Option(options.api_key_env.empty() ? "HttpProviderOptions.api_key"
                                                    : "HttpProviderOptions.api_key_env",
                        options.api_key_env.empty() ? "api_key" : "api_key_env");
    } else if (url.userinfo.find(':') != std::string::npos) {
      credential << "a password in ";
      credential.Option("HttpProviderOptions.base_url", "base_url");
    } else {
      for (const auto& [name, value] : options.extra_headers) {
        if (LooksSecret(name) && !value.empty()) {
          credential << "extra_headers \"" + name + "\"";
          break;
        }
      }
    }
    if (url.scheme == "http" && !credential.text().empty() && !IsLoopbackHost(url.host) &&
        !options.allow_insecure_http) {
      internal::RemedyText m;
      m.Option("HttpProviderOptions.base_url")
          << " \"" + internal::http::DisplayUrl(base) +
                 "\" is plain http:// to a host that is not loopback, and "
          << credential << " would be sent over it in cleartext: use https://, or set ";
      m.Remedy("http.allow_insecure_http", "HttpProviderOptions.allow_insecure_http = true")
          << " if the network is yours (loopback — 127.0.0.1, ::1, localhost — is always "
             "allowed)";
      return m.ToStatus(StatusCode::kInvalidArgument);
    }
    if (url.scheme == "http" && !credential.text().empty() && !IsLoopbackHost(url.host)) {
      RECAP_LOG_WARN("http provider: {} goes to {} in cleartext (allow_insecure_http)",
                     credential.text(), internal::http::DisplayUrl(base));
    }
  }
  // limits
  if (options.connect_timeout_ms == 0) return Invalid("connect_timeout_ms", " must be at least 1");
  if (options.timeout_ms == 0) return Invalid("timeout_ms", " must be at least 1");
  if (options.max_retries > kMaxRetries) {
    return Invalid("max_retries", " is " + std::to_string(options.max_retries) +
                                      "; allowed: 0 to " + std::to_string(kMaxRetries));
  }
  if (options.max_retry_delay_ms < options.retry_base_delay_ms) {
    return Invalid("max_retry_delay_ms", " (" + std::to_string(options.max_retry_delay_ms) +
                                             ") is smaller than retry_base_delay_ms (" +
                                             std::to_string(options.retry_base_delay_ms) + ")");
  }
  if (!options.ca_path.empty()) {
    struct stat st {};
    if (::stat(options.ca_path.c_str(), &st) != 0) {
      return Invalid("ca_path", " \"" + options.ca_path +
                                    "\" does not exist: give a PEM bundle file "
                                    "or a directory of hashed certificates");
    }
  }
  if (options.protocol == HttpProtocol::kAnthropic &&
      (options.anthropic_version.empty() || HasLineBreakOrControl(options.anthropic_version))) {
    return Invalid("anthropic_version", " is empty or malformed: use e.g. \"2023-06-01\"");
  }
  if (options.max_tokens_field != "max_tokens" &&
      options.max_tokens_field != "max_completion_tokens") {
    return Invalid("max_tokens_field", " is \"" +
                                           internal::http::Excerpt(options.max_tokens_field, 60) +
                                           "\": use \"max_tokens\" or \"max_completion_tokens\"");
  }
  if (options.context_window && *options.context_window == 0) {
    return Invalid("context_window", " is 0: leave it unset to read it from the model list");
  }
  return key;
}

}  // namespace http_options
}  // namespace internal

const char* HttpProtocolName(HttpProtocol protocol) noexcept {
  switch (protocol) {
    case HttpProtocol::kOpenAiChat: return "openai_chat";
    case HttpProtocol::kAnthropic: return "anthropic";
    case HttpProtocol::kOpenAiResponses: return "openai_responses";
    case HttpProtocol::kOpenAiCompact: return "openai_compact";
    case HttpProtocol::kAnthropicCompact: return "anthropic_compact";
  }
  return "unknown";
}

Result<HttpProtocol> ParseHttpProtocol(const std::string& name) {
  const std::string n = internal::http_options::Lower(name);
  if (n == "openai_chat" || n == "openai") return HttpProtocol::kOpenAiChat;
  if (n == "anthropic") return HttpProtocol::kAnthropic;
  if (n == "openai_responses" || n == "responses") return HttpProtocol::kOpenAiResponses;
  if (n == "openai_compact" || n == "openai-compact") return HttpProtocol::kOpenAiCompact;
  if (n == "anthropic_compact" || n == "anthropic-compact") return HttpProtocol::kAnthropicCompact;
  return Status::InvalidArgument("unknown HTTP protocol \"" + internal::http::Excerpt(name, 40) +
                                 "\": use \"openai_chat\" (also \"openai\"), \"anthropic\", "
                                 "\"openai_responses\" (also \"responses\"), \"openai_compact\" "
                                 "or \"anthropic_compact\"");
}

}  // namespace v0
}  // namespace recap
