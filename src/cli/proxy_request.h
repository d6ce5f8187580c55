// recap CLI — a model request as `recap proxy` receives it (SPEC R19.2), and the request it
// sends upstream in its place.
//
// The proxy keeps the conversation — the messages (Anthropic `messages`, chat `messages` and
// Responses `input` after their leading system and developer ones) — as a recap session, and sends
// upstream what Prepare returns instead. Everything else of the client's body stays as the
// client wrote it, byte for byte (its model, tools, system prompt, `cache_control`
// breakpoints, sampling settings, members recap does not know): the upstream body is the
// client's text with the messages' value replaced, so that a provider's prompt cache sees the
// same prefix the client would have sent. The system prompt and the tool catalog are counted
// as the request's instructions and tool catalog (RequestSizes), not stored in the session.
#ifndef RECAP_CLI_PROXY_REQUEST_H_
#define RECAP_CLI_PROXY_REQUEST_H_

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "recap/status.h"

namespace recap_cli {

// The messages are views into `body` (or into `input_message`): a ProxyRequest moves, it is not
// copied.
struct ProxyRequest {
  ProxyRequest() = default;
  ProxyRequest(ProxyRequest&&) = default;
  ProxyRequest& operator=(ProxyRequest&&) = default;
  ProxyRequest(const ProxyRequest&) = delete;
  ProxyRequest& operator=(const ProxyRequest&) = delete;

  std::string format;  // "anthropic", "openai-chat" or "openai-responses"
  std::string body;    // as the client sent it
  // Where the messages' value lies in `body` (Responses: `input`).
  std::size_t messages_at = 0;
  std::size_t messages_length = 0;
  // The conversation's messages, each as its JSON text (a Responses `input` given as a string
  // is one user message item).
  std::vector<std::string_view> messages;
  std::string input_message;  // Responses: the user message an `input` string stands for
  // Chat and Responses: the leading system and developer messages (items), which stay in the
  // request as they are (the request's own instructions), before the conversation.
  std::vector<std::string_view> leading;
  std::size_t instructions_chars = 0;  // the system prompt's size (code points of its JSON)
  std::size_t tool_catalog_chars = 0;  // the tools' size (code points of their JSON)
  bool stream = false;
  std::string model;
  std::optional<std::string> previous_response_id;  // Responses
};

// Reads a request body of `format`. A body that is not a JSON object, or whose messages are
// missing or not an array, is kInvalidArgument with a message that says which member and what
// it should be.
recap::Result<ProxyRequest> ParseProxyRequest(const std::string& format, std::string body);

// The body to send upstream: the client's, with the messages' value replaced by the leading
// messages (chat) and then the elements of `messages_array` (a JSON array text, as the codecs
// write it); for Responses, `previous_response_id` removed (the upstream gets the whole
// prepared input).
std::string UpstreamBody(const ProxyRequest& request, std::string_view messages_array);
// The same from the prepared array's pieces (EncodeTranscriptParts: the elements are the pieces
// joined by ','), with one copy of each.
std::string UpstreamBody(const ProxyRequest& request, const std::vector<std::string_view>& parts);

// Prompt-caching breakpoints (`cache_control`, on a message or on its content blocks) belong to
// the request that carries them: a client moves them to its newest messages every turn. The
// session keeps messages without them (WithoutBreakpoints), and the upstream gets exactly the
// request's own (PlaceBreakpoints) on the messages still sent.

// `message_json` without any `cache_control` member (itself when it has none).
std::string WithoutBreakpoints(std::string_view message_json);

// `prepared_array` (the messages to send, as the codecs write them) with the breakpoints of
// `request`'s messages put back on the same messages — found by their text without breakpoints —
// and on the same content blocks. The newest kMaxBreakpointSearch messages are searched: a
// breakpoint on a message older than that, or on one a compaction retired, is dropped (the
// API takes at most four, and a client puts them on its newest messages).
inline constexpr std::size_t kMaxBreakpointSearch = 64;
// Whether any of the request's messages holds a breakpoint.
bool HasBreakpoints(const ProxyRequest& request);
// Changes `prepared_array` in place, only when the request has breakpoints to place.
void PlaceBreakpoints(const ProxyRequest& request, std::string* prepared_array);

}  // namespace recap_cli

#endif  // RECAP_CLI_PROXY_REQUEST_H_
