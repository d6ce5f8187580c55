// recap proxy — the model's reply, put together from what the upstream sent (SPEC R19.2: "append
// the reply to the session"), streamed event by event or whole.
//
// The proxy passes the upstream's answer to the client as it arrives and, beside it, feeds it
// here: each server-sent event (its `event:` name and `data:` text) of a streamed answer, or
// the body of a whole one. At the end, when the answer was complete, Messages() gives the reply
// as recap messages, decoded by recap's codec of the format from the message the events
// describe — what the client will send back as the assistant's turn in its next request.
//
//   anthropic          message_start, content_block_start / _delta (text_delta,
//                      input_json_delta, thinking_delta, signature_delta) / _stop,
//                      message_delta, message_stop; whole: the message object
//   openai-chat        chunks of choices[0].delta (role, content, tool_calls by index with
//                      id, function.name and function.arguments in pieces) up to one with a
//                      finish_reason (then [DONE]); whole: choices[0].message
//   openai-responses   response.created ... response.completed, whose `response.output` is the
//                      whole output; whole: the response object's `output`
//
// Only what the client sends back is kept: the message's role and content (and, for chat, its
// tool calls), not the answer's id, model, usage or stop reason.
//
// A reply is complete only when its end was seen (message_stop, a finish_reason,
// response.completed or response.incomplete): an answer cut off — the upstream gone mid-stream, the
// client gone — is never appended as if it were whole. An event that is not what the format sends
// (data that is not JSON, an event out of order) is an error, and the reply is not complete.
#ifndef RECAP_PROXY_REPLY_H_
#define RECAP_PROXY_REPLY_H_

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "recap/message.h"
#include "recap/status.h"

#include "chain.h"

namespace recap_proxy {

class ReplyAssembler {
 public:
  // `format`: "anthropic", "openai-chat" or "openai-responses".
  explicit ReplyAssembler(std::string format);
  ReplyAssembler(const ReplyAssembler&) = delete;
  ReplyAssembler& operator=(const ReplyAssembler&) = delete;
  ~ReplyAssembler();

  // One server-sent event of a streamed answer. An error stops the assembly (later events
  // are ignored, and the reply is not complete).
  recap::Status Event(std::string_view event, std::string_view data);
  // The body of an answer that was not streamed.
  recap::Status Body(std::string_view json);

  // Whether the answer's end was seen, with no error before it.
  bool complete() const;
  // openai-responses: the response's id (from response.created or response.completed, or the
  // body), empty when none was seen or for the other formats.
  const std::string& response_id() const;
  // The reply, once complete: its messages (one for anthropic and openai-chat; one per output
  // item, with reasoning joined to the item it precedes, for openai-responses).
  recap::Result<std::vector<recap::Message>> Messages() const;

 private:
  struct State;
  std::unique_ptr<State> state_;
};

// The reply's fingerprint for ChainIndex (chain.h): its roles, non-empty texts and its calls'
// ids and names, in order, as recap decoded them — the same whether the reply came from the
// upstream's events or back from the client in its next request.
Fingerprint ReplyFingerprint(const std::vector<recap::Message>& reply);

}  // namespace recap_proxy

#endif  // RECAP_PROXY_REPLY_H_
