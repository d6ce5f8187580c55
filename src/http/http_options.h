// The HTTP provider's options checked (CheckHttpOptions: each field, the key, cleartext off the
// machine, R13.4) and the small facts about URLs and headers the provider itself also uses.
// Private to recap::http (http_options.cc; http_provider.cc builds the provider).
#ifndef RECAP_SRC_HTTP_HTTP_OPTIONS_H_
#define RECAP_SRC_HTTP_HTTP_OPTIONS_H_

#include <cstdint>
#include <string>

#include "recap/http/http_provider.h"
#include "recap/status.h"

namespace recap {
inline namespace v0 {
namespace internal {
// Not internal::http: with a unity build, the anonymous helpers of the other files of
// recap::http (Lower, EqualsNoCase) would meet these in one translation unit.
namespace http_options {

// The most retries HttpProviderOptions::max_retries may ask for.
inline constexpr std::uint32_t kMaxRetries = 10;

bool HasLineBreakOrControl(const std::string& s);
bool EqualsNoCase(const std::string& a, const std::string& b);
std::string Lower(std::string s);
// A header whose value is a credential (Authorization, x-api-key, ...): scrubbed from messages.
bool LooksSecret(const std::string& header_name);
bool ValidHeaderName(const std::string& name);

// The authority's parts of an http(s) URL: user information (may be empty) and host (without
// brackets for IPv6), lower-cased.
struct UrlParts {
  std::string scheme;
  std::string userinfo;
  std::string host;
};
UrlParts SplitUrl(const std::string& url);

// 127.0.0.0/8, ::1 (also as ::ffff:127.x.x.x) and localhost: the request stays on the machine.
bool IsLoopbackHost(const std::string& host);

// Checks `options` (and tidies base_url: trailing slashes, Anthropic's /v1) and returns the
// API key it names (api_key, or api_key_env's variable; empty for none). The errors name each
// option as a remedy (docs/errors.md).
Result<std::string> CheckHttpOptions(HttpProviderOptions& options);

}  // namespace http_options
}  // namespace internal
}  // namespace v0
}  // namespace recap

#endif  // RECAP_SRC_HTTP_HTTP_OPTIONS_H_
