// Private: the three wire protocols — request bodies, replies, streamed replies, error bodies
// and model lists — as JSON, with nlohmann::json (a private dependency of recap::http).
//
// Every function here is tolerant in what it reads (missing fields take defaults, unknown
// fields are ignored) and never throws for any input: a reply that lacks what it must have
// comes back as a description of what is missing, for the caller's "malformed response"
// Status.
#ifndef RECAP_SRC_HTTP_WIRE_FORMAT_H_
#define RECAP_SRC_HTTP_WIRE_FORMAT_H_

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "recap/http/http_provider.h"
#include "recap/provider.h"
#include "recap/status.h"

#include "sse_parser.h"

namespace recap {
inline namespace v0 {
namespace internal {
namespace http {

// Parses a body or event from a server: discarded when it is not JSON, or when it nests
// deeper than recap's one bound, internal::kMaxJsonDepth (SPEC R13.1; checked before parsing:
// nlohmann parses iteratively but copies, compares, dumps and destroys recursively, so one
// hostile document could exhaust the stack). `*too_deep`, if given, is then set to a
// description, "nested deeper than 1000 levels (at byte 1000)", or for JSON whose bytes are
// not UTF-8, "with invalid UTF-8 at byte 12 (JSON must be UTF-8)"; else cleared.
nlohmann::json ParseServerJson(std::string_view text, std::string* too_deep = nullptr);

// A choice's or delta's `content` that is neither a string, an array of parts nor null:
// "`<where>` is a number; expected a string or an array of parts". Empty when it is fine.
std::string BadContent(const nlohmann::json* content, const std::string& where);

// "stop", "end_turn", "stop_sequence", "eos" -> kStop; "length", "max_tokens",
// "max_output_tokens", "model_length" -> kLength; anything else (tool calls, content filter,
// refusal, pause) -> kOther.
FinishReason MapFinishReason(const std::string& reason);

// The request body. `structured`: add OpenAI's response_format for request.json_schema.
// Fails (kInvalidArgument) only when the messages cannot be written in the protocol's format.
Result<std::string> BuildRequestBody(HttpProtocol protocol, const std::string& model,
                                     const std::string& max_tokens_field,
                                     const CompletionRequest& request, bool structured,
                                     bool stream);

// R14.2: the body of a provider-native compaction (openai_compact, anthropic_compact): the span
// written by the protocol's codec and spliced in as it wrote it, so that the providers' own
// artifacts in it go back byte for byte. Fails (kInvalidArgument) when the span cannot be
// written in the protocol's format.
Result<std::string> BuildNativeBody(HttpProtocol protocol, const std::string& model,
                                    const NativeCompactionRequest& request);

// R14.2: the checkpoint message of a native compaction's reply text (ParseReply's `text` for
// those protocols): Anthropic's assistant message holding the `compaction` block, or one
// assistant message holding every output item of OpenAI's reply as an opaque part (kind = the
// item's type). Fails, saying what is missing, when it holds no compaction artifact.
Result<Message> NativeCheckpointMessage(HttpProtocol protocol, const std::string& text);

// A whole (non-streamed) reply. Returns the completion, or fails with kUnavailable whose
// message says what was missing (the caller adds the URL and status).
Result<Completion> ParseReply(HttpProtocol protocol, const nlohmann::json& body);

// The human-readable error a server put in an error body: OpenAI's and Anthropic's
// {"error": {"message", "type", "code"}}, {"error": "text"}, {"message": …}, {"detail": …}.
// Empty when there is none.
std::string ErrorText(const nlohmann::json& body);
// The error's machine-readable type/code (e.g. "context_length_exceeded",
// "overloaded_error"), joined by a space; empty when there is none.
std::string ErrorKind(const nlohmann::json& body);

// Accumulates a streamed reply from its server-sent events.
class StreamAccumulator {
 public:
  explicit StreamAccumulator(HttpProtocol protocol) : protocol_(protocol) {}

  // Returns false to stop the transfer: the stream carried an error event, or an event that
  // is not JSON (see error()).
  bool OnEvent(const SseEvent& event);

  // The stream's end marker arrived (`[DONE]`, `message_stop`, `response.completed` or
  // `response.incomplete`), or a finish reason did.
  bool finished() const { return done_ || finish_seen_; }
  bool saw_end_marker() const { return done_; }
  // Non-empty when the stream failed: the server's error text or what was malformed.
  const std::string& error() const { return error_; }
  // The server's error kind for an error event (e.g. "overloaded_error").
  const std::string& error_kind() const { return error_kind_; }
  bool malformed() const { return malformed_; }
  std::size_t events() const { return events_; }
  std::size_t text_chars() const { return text_chars_; }
  Completion Take();

 private:
  void AddText(const std::string& text);
  bool OnOpenAi(const nlohmann::json& chunk);
  void OnAnthropic(const nlohmann::json& event);
  bool OnResponses(const nlohmann::json& event);

  HttpProtocol protocol_;
  Completion completion_;
  std::string finish_reason_;
  bool done_ = false;
  bool finish_seen_ = false;
  bool refused_ = false;
  bool malformed_ = false;
  std::string error_;
  std::string error_kind_;
  std::size_t events_ = 0;
  std::size_t text_chars_ = 0;
};

// The context window the model list reports for `model` (see NewHttpProvider). `field`
// receives the path of the field it came from, e.g. "data[2].meta.n_ctx_train".
std::optional<std::size_t> FindContextWindow(const nlohmann::json& list, const std::string& model,
                                             std::string* field);

}  // namespace http
}  // namespace internal
}  // namespace v0
}  // namespace recap

#endif  // RECAP_SRC_HTTP_WIRE_FORMAT_H_
