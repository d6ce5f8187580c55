#include "http_errors.h"

#include <algorithm>
#include <cctype>
#include <cstddef>
#include <vector>

#include "recap_internal/remedy_text.h"
#include "wire_format.h"

namespace recap {
inline namespace v0 {
namespace internal {
namespace http {
namespace {

std::string Lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

bool Contains(const std::string& haystack, const char* needle) {
  return haystack.find(needle) != std::string::npos;
}

// Phrases servers use when the prompt does not fit the model (OpenAI, Anthropic, vLLM,
// llama.cpp, LM Studio, Ollama, proxies).
bool SaysTooLong(const std::string& lower) {
  static const char* const kPhrases[] = {
      "context_length_exceeded",    "maximum context length",
      "context length exceeded",    "exceeds the context window",
      "exceed_context_size",        "exceeds the available context size",
      "prompt is too long",         "prompt too long",
      "input is too long",          "too many tokens",
      "maximum input length",       "reduce the length of the messages",
      "context window exceeded",    "exceeds the maximum context",
      "requested more tokens than", "n_ctx"};
  for (const char* p : kPhrases) {
    if (Contains(lower, p)) return true;
  }
  return false;
}

bool MentionsStructuredOutput(const std::string& lower) {
  return Contains(lower, "response_format") || Contains(lower, "json_schema") ||
         Contains(lower, "text.format") || Contains(lower, "response format") ||
         Contains(lower, "structured output");
}

// What the server said, for the message: its error text, an HTML page's title, or the
// body's start.
std::string ServerSays(std::string_view raw, const nlohmann::json& parsed) {
  std::string text = ErrorText(parsed);
  if (!text.empty()) return Excerpt(text);
  std::string html = DescribeHtml(raw);
  if (!html.empty()) return html;
  if (raw.empty()) return {};
  return "\"" + Excerpt(raw, 200) + "\"";
}

std::string Join(const std::string& what, long status, const std::string& problem,
                 const std::string& says, const std::string& advice) {
  std::string m = what + " answered HTTP " + std::to_string(status) + ": " + problem;
  if (!says.empty()) m += " The server said: " + says + ".";
  if (!advice.empty()) m += " " + advice;
  return m;
}

// Join, its advice naming options as remedies (docs/errors.md).
Status Joined(StatusCode code, const std::string& what, long status, const std::string& problem,
              const std::string& says, const internal::RemedyText& advice) {
  internal::RemedyText m(Join(what, status, problem, says, ""));
  m << " " << advice;
  return m.ToStatus(code);
}

}  // namespace

namespace {

// The base64 characters of `secret` that depend on its bytes alone when it is encoded after
// `offset` other bytes (0, 1 or 2: the three alignments), in `alphabet`: the characters that
// mix in a neighbour's bits, at either end, are left out.
std::string Base64Core(const std::string& secret, std::size_t offset, const char* alphabet) {
  std::string in(offset, '\0');
  in += secret;
  std::string out;
  std::size_t i = 0;
  for (; i + 2 < in.size(); i += 3) {
    const unsigned v = (static_cast<unsigned char>(in[i]) << 16) |
                       (static_cast<unsigned char>(in[i + 1]) << 8) |
                       static_cast<unsigned char>(in[i + 2]);
    for (int s = 18; s >= 0; s -= 6) out.push_back(alphabet[(v >> s) & 63]);
  }
  // The 1 or 2 bytes left would be encoded with what follows: not part of the core.
  // Characters 0..offset of the first group hold bits of the bytes before.
  const std::size_t skip = offset == 0 ? 0 : offset + 1;
  return out.size() > skip ? out.substr(skip) : std::string();
}

bool TokenChar(char c) {
  const auto u = static_cast<unsigned char>(c);
  return std::isalnum(u) || c == '+' || c == '/' || c == '=' || c == '_' || c == '-';
}

}  // namespace

void Scrubber::Add(const std::string& secret) {
  if (secret.size() < 4) return;
  if (secret.size() < kRun) {
    short_secrets_.push_back(secret);
    return;
  }
  auto add_windows = [this](const std::string& s) {
    for (std::size_t i = 0; i + kRun <= s.size(); ++i) windows_.insert(s.substr(i, kRun));
  };
  add_windows(secret);
  static const char* const kAlphabets[] = {
      "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/",
      "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"};
  for (const char* alphabet : kAlphabets) {
    for (std::size_t offset = 0; offset < 3; ++offset) {
      add_windows(Base64Core(secret, offset, alphabet));
    }
  }
}

Status Scrubber::operator()(const Status& status) const {
  if (status.ok()) return status;
  const std::string& m = status.message();
  internal::RemedyText out;
  std::size_t at = 0;
  for (const Remedy& r : status.remedies()) {
    out << (*this)(m.substr(at, r.offset - at));
    out.Remedy(r.id, std::string_view(m).substr(r.offset, r.size), r.value);
    at = r.offset + r.size;
  }
  out << (*this)(m.substr(at));
  return out.ToStatus(status.code());
}

std::string Scrubber::operator()(std::string text) const {
  if (!windows_.empty() && text.size() >= kRun) {
    // Mark every byte covered by a window of a secret, widen each marked stretch to the token
    // around it, then write each stretch as one "[redacted]".
    std::vector<bool> marked(text.size(), false);
    bool any = false;
    for (std::size_t i = 0; i + kRun <= text.size(); ++i) {
      if (windows_.count(text.substr(i, kRun)) != 0) {
        std::fill(marked.begin() + static_cast<std::ptrdiff_t>(i),
                  marked.begin() + static_cast<std::ptrdiff_t>(i + kRun), true);
        any = true;
      }
    }
    if (any) {
      for (std::size_t i = 0; i < text.size(); ++i) {
        if (!marked[i]) continue;
        std::size_t b = i;
        while (b > 0 && !marked[b - 1] && TokenChar(text[b - 1])) marked[--b] = true;
        std::size_t e = i;
        while (e < text.size() && marked[e]) ++e;
        while (e < text.size() && TokenChar(text[e])) marked[e++] = true;
        i = e;
      }
      std::string out;
      out.reserve(text.size());
      for (std::size_t i = 0; i < text.size();) {
        if (!marked[i]) {
          out.push_back(text[i++]);
          continue;
        }
        while (i < text.size() && marked[i]) ++i;
        out += "[redacted]";
      }
      text = std::move(out);
    }
  }
  for (const std::string& s : short_secrets_) {
    for (std::size_t at = text.find(s); at != std::string::npos; at = text.find(s, at)) {
      text.replace(at, s.size(), "[redacted]");
      at += 10;
    }
  }
  return text;
}

std::string DisplayUrl(const std::string& url) {
  std::string out = url;
  const auto scheme_end = out.find("://");
  if (scheme_end != std::string::npos) {
    const auto authority = scheme_end + 3;
    const auto path = out.find_first_of("/?#", authority);
    const auto at = out.rfind('@', path == std::string::npos ? out.size() : path);
    if (at != std::string::npos && at >= authority) out.erase(authority, at + 1 - authority);
  }
  const auto query = out.find_first_of("?#");
  if (query != std::string::npos) out.erase(query);
  return out;
}

std::string Excerpt(std::string_view text, std::size_t max_bytes) {
  std::string out;
  bool space = false;
  for (char c : text) {
    const auto u = static_cast<unsigned char>(c);
    if (u < 0x20 || u == 0x7F || c == ' ') {
      space = !out.empty();
      continue;
    }
    if (space) out.push_back(' ');
    space = false;
    out.push_back(c);
    if (out.size() >= max_bytes) break;
  }
  if (out.size() >= max_bytes) {
    while (!out.empty() && (static_cast<unsigned char>(out.back()) & 0xC0) == 0x80) out.pop_back();
    if (!out.empty() && static_cast<unsigned char>(out.back()) >= 0xC0) out.pop_back();
    out += "…";
  }
  return out;
}

std::string DescribeHtml(std::string_view body) {
  std::size_t i = 0;
  while (i < body.size() && std::isspace(static_cast<unsigned char>(body[i]))) ++i;
  if (i >= body.size() || body[i] != '<') return {};
  const std::string lower = Lower(body.substr(0, std::size_t{64} * 1024));
  if (!Contains(lower, "<html") && !Contains(lower, "<!doctype") && !Contains(lower, "<body") &&
      !Contains(lower, "<head") && !Contains(lower, "<title")) {
    return {};
  }
  const auto open = lower.find("<title");
  if (open != std::string::npos) {
    const auto start = lower.find('>', open);
    const auto end = lower.find("</title", open);
    if (start != std::string::npos && end != std::string::npos && start < end) {
      return "an HTML page titled \"" + Excerpt(body.substr(start + 1, end - start - 1), 120) +
             "\"";
    }
  }
  return "an HTML page";
}

HttpFailure ClassifyHttpStatus(const std::string& what, long status, std::string_view raw,
                               const nlohmann::json& parsed, bool structured_sent,
                               const std::string& model) {
  const std::string says = ServerSays(raw, parsed);
  const std::string lower = parsed.is_discarded()
                                ? Lower(raw.substr(0, std::size_t{64} * 1024))
                                : Lower(ErrorText(parsed) + " " + ErrorKind(parsed));
  HttpFailure f;
  if ((status == 400 || status == 422 || status == 413) && (status == 413 || SaysTooLong(lower))) {
    f.status = Status::ResourceExhausted(
        Join(what, status,
             "the request is longer than the model's context window (context overflow).", says,
             "recap sends the span to summarize in one request; a smaller span (or a model with a "
             "larger window) is needed."));
    return f;
  }
  if (structured_sent && (status == 400 || status == 422) && MentionsStructuredOutput(lower)) {
    f.structured_rejected = true;
    internal::RemedyText advice("Turn off ");
    advice.Option("HttpProviderOptions.structured_output") << " for this server.";
    f.status = Joined(
        StatusCode::kInvalidArgument, what, status,
        "the server rejected the structured-output request (response_format or text.format).", says,
        advice);
    return f;
  }
  if (status == 401 || status == 403) {
    internal::RemedyText advice("Check the API key ");
    advice.Remedy("http.api_key",
                  "(HttpProviderOptions.api_key or the variable named by api_key_env)");
    advice << " and that it may use model \"" + model + "\".";
    f.status = Joined(StatusCode::kFailedPrecondition, what, status,
                      "the server refused the credentials.", says, advice);
    return f;
  }
  if (status == 429) {
    f.retry = true;
    f.status = Status::Unavailable(Join(what, status, "rate limited.", says, ""));
    return f;
  }
  if (status == 529 || status == 503 || Contains(lower, "overloaded")) {
    if (status >= 500 || status == 429) {
      f.retry = true;
      f.status = Status::Unavailable(Join(what, status, "the server is overloaded.", says, ""));
      return f;
    }
  }
  if (status >= 500 || status == 408 || status == 409 || status == 425) {
    f.retry = true;
    f.status = Status::Unavailable(Join(what, status, "the server failed.", says, ""));
    return f;
  }
  if (status >= 300 && status < 400) {
    internal::RemedyText advice(
        "recap does not follow redirects (they would carry the API key elsewhere): set ");
    advice.Option("HttpProviderOptions.base_url") << " to the final address.";
    f.status = Joined(StatusCode::kInvalidArgument, what, status,
                      "the server redirected the request.", "", advice);
    return f;
  }
  if (status == 404) {
    internal::RemedyText advice("Check ");
    advice.Option("HttpProviderOptions.base_url")
        << " (OpenAI-compatible servers usually end in /v1) and the model \"" + model + "\".";
    f.status = Joined(StatusCode::kInvalidArgument, what, status, "not found.", says, advice);
    return f;
  }
  if (status >= 400) {
    f.status =
        Status::InvalidArgument(Join(what, status, "the server rejected the request.", says, ""));
    return f;
  }
  f.retry = true;
  f.status = Status::Unavailable(Join(what, status, "an unexpected HTTP status.", says, ""));
  return f;
}

Status MalformedResponse(const std::string& what, long status, const std::string& content_type,
                         std::string_view raw, const std::string& reason) {
  std::string m = what + " answered HTTP " + std::to_string(status) +
                  " with a malformed response: " + reason + " (" + std::to_string(raw.size()) +
                  " bytes";
  if (!content_type.empty()) m += ", " + Excerpt(content_type, 80);
  m += ")";
  const std::string html = DescribeHtml(raw);
  if (!html.empty()) {
    m += "; it is " + html;
  } else if (!raw.empty()) {
    m += "; it starts \"" + Excerpt(raw, 120) + "\"";
  }
  internal::RemedyText said(m + ". Is ");
  said.Option("HttpProviderOptions.base_url")
      << " the API's address (not a web page or a proxy's login)?";
  return said.ToStatus(StatusCode::kUnavailable);
}

HttpFailure ClassifyInBandError(const std::string& what, long status, const std::string& text,
                                const std::string& kind) {
  const std::string lower = Lower(text + " " + kind);
  HttpFailure f;
  const std::string says = text.empty() ? std::string() : Excerpt(text);
  if (SaysTooLong(lower)) {
    f.status = Status::ResourceExhausted(
        Join(what, status,
             "the reply carried an error: the request is longer than the model's "
             "context window (context overflow).",
             says, ""));
    return f;
  }
  f.retry = true;  // overloaded_error, api_error and the like: the next attempt may pass
  f.status = Status::Unavailable(
      Join(what, status,
           "the reply carried an error" +
               (kind.empty() ? std::string(".") : " (" + Excerpt(kind, 80) + ")."),
           says, ""));
  return f;
}

}  // namespace http
}  // namespace internal
}  // namespace v0
}  // namespace recap
