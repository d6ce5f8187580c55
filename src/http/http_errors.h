// Private: turning what a server answered into a Status the Compactor can act on, and keeping
// secrets out of every message.
//
// Every message starts with what was asked — "POST http://host/v1/chat/completions" — then
// what went wrong with the HTTP status, then what the server said (shortened, one line,
// scrubbed of the key), then what to do where there is something to do.
#ifndef RECAP_SRC_HTTP_HTTP_ERRORS_H_
#define RECAP_SRC_HTTP_HTTP_ERRORS_H_

#include <chrono>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_set>
#include <vector>

#include <nlohmann/json.hpp>

#include "recap/status.h"

namespace recap {
inline namespace v0 {
namespace internal {
namespace http {

// Keeps secrets out of text (SPEC R13.3). A secret of 8 characters or more: every run of 8 or
// more consecutive characters of it — or of its base64 encoding (standard or URL-safe, at any
// alignment, as in HTTP Basic credentials) — is replaced by "[redacted]", together with the
// rest of the token it sits in (the adjacent letters, digits and "+/=_-"), so a key cut by an
// excerpt at any offset, or echoed inside a longer word, shows nothing of itself. A shorter
// secret (4 to 7 characters) is replaced where it occurs whole; under 4, nothing is done
// (it would mangle ordinary words).
class Scrubber {
 public:
  void Add(const std::string& secret);
  std::string operator()(std::string text) const;
  // The same for a Status's message, around its remedies (recap's own words), which it keeps.
  Status operator()(const Status& status) const;

  // The run length from which a piece of a secret is redacted.
  static constexpr std::size_t kRun = 8;

 private:
  std::vector<std::string> short_secrets_;
  // Every kRun-byte window of every long secret and of its base64 forms.
  std::unordered_set<std::string> windows_;
};

// The URL as it may be shown: scheme, host, port and path; user information and the query
// (either may hold a credential) are left out.
std::string DisplayUrl(const std::string& url);

// One line of at most `max_bytes` (cut on a UTF-8 boundary, "…" added): control characters
// and runs of white space become one space.
std::string Excerpt(std::string_view text, std::size_t max_bytes = 300);

// "an HTML page titled "502 Bad Gateway"" when `body` is HTML; empty otherwise.
std::string DescribeHtml(std::string_view body);

struct HttpFailure {
  Status status;
  bool retry = false;                // may pass: worth another attempt
  bool structured_rejected = false;  // the server refused response_format / json_schema
};

// A non-2xx response. `parsed` is the body parsed once by the caller (discarded when it is
// not JSON); `raw` is the body as received. `what` is "POST <display url>".
HttpFailure ClassifyHttpStatus(const std::string& what, long status, std::string_view raw,
                               const nlohmann::json& parsed, bool structured_sent,
                               const std::string& model);

// A 2xx response whose body is not the JSON it should be. `reason` says what is wrong.
Status MalformedResponse(const std::string& what, long status, const std::string& content_type,
                         std::string_view raw, const std::string& reason);

// An error carried inside a 2xx body or stream (e.g. Anthropic's `overloaded_error` event).
HttpFailure ClassifyInBandError(const std::string& what, long status, const std::string& text,
                                const std::string& kind);

}  // namespace http
}  // namespace internal
}  // namespace v0
}  // namespace recap

#endif  // RECAP_SRC_HTTP_HTTP_ERRORS_H_
