/// @file
/// recap — codecs between the neutral message model and foreign message formats.
///
/// Three providers' formats and recap's own, one shape. Each namespace offers:
///
/// ```text
///   DecodeMessages(json)        a JSON array of messages -> Conversation
///   DecodeEach(json, o, sink)   the same array, each Message handed to `sink` as soon as it
///                               is decoded (a streaming decode; see below)
///   DecodeMessage(json)         one JSON message object -> Message
///   EncodeMessages(conv)        Conversation -> a JSON array text
///   EncodeMessage(m)            Message -> a JSON object text
///   EncodeTranscript(t, begin)  the messages [begin, size()) of a Transcript -> a JSON array
///                               text: what EncodeMessages writes for a Conversation of those
///                               messages without instructions (for recap's own form, the
///                               array of messages that DecodeMessages also reads), assembled
///                               from each message's kept encoded form (see below)
///   EncodeTranscriptTo(t, begin, &out)
///                               the same array written over `out`'s content, into the memory
///                               `out` already has when the array fits in it (outgrown, it grows
///                               with half as much again to spare; it is never shrunk): a host
///                               that passes the same string every turn allocates only now and
///                               then as the session grows. (A new string each turn is new memory
///                               the system must map: on a 55 MB body, faulting its pages in
///                               costs several times the copy itself.) The same errors as
///                               EncodeTranscript, and a null `out`; on error `out` is left as
///                               it was.
///   EncodeTranscriptParts(t, begin, &parts)
///                               the same array's pieces without copying them: each message's
///                               kept form (its elements joined by ','), in order; the array is
///                               '[' + the pieces joined by ',' + ']'. A host that writes the
///                               body out (writev, a streaming request) needs no copy at all.
///                               Each view stays valid while a Transcript holds its message.
///
///   recap::native       recap's own JSON form, which records everything the model holds
///                       (ids, the summary flag, extra fields, content forms). It is what the
///                       session stores write.
///   recap::openai_chat  OpenAI chat-completions `messages` (system/developer, user, assistant
///                       with `tool_calls`, `tool` messages with `tool_call_id`).
///   recap::anthropic    Anthropic Messages API `messages` (content blocks `text`, `tool_use`,
///                       `tool_result`, `thinking`, `redacted_thinking`, images, documents and
///                       server tool blocks).
///   recap::openai_responses
///                       OpenAI Responses API input items (`message`, `function_call`,
///                       `function_call_output`, `reasoning` with its `encrypted_content`, and
///                       every other item type carried whole). One item is one message, except
///                       that reasoning items travel with the model's item they precede.
/// ```
///
/// Decoding and then encoding in the same format gives back an equal JSON value (the same
/// members with the same values; whitespace and key order may differ): fields recap does not
/// model are carried in `extra`, and the way content was written in `form`. Opaque payloads
/// (thinking, signatures, encrypted content, images) are kept byte-for-byte. Numbers keep
/// the text they were written with wherever recap carries them (extra, payloads, Anthropic's
/// tool input): 1E5, 1.50, -0 and a 30-digit integer come back as written, not as a double.
///
/// Encoding into a different format than the one decoded maps what has an equivalent and
/// reports what has none with a Status (e.g. a system message inside an Anthropic transcript).
/// The codecs record the format on each message (Message::origin): written into another format,
/// a message leaves out the unmodelled fields of its own (its and its parts' `extra`), and an
/// opaque part of it (thinking, reasoning, an image block, a provider's checkpoint) is refused
/// with a Status naming the message, never written as if it were native there.
///
/// Errors are InvalidArgument Statuses that name where the problem is, as a JSON path such as
/// `messages[12].content[3].type`, and what would be accepted. Malformed JSON and invalid
/// UTF-8 are rejected, never repaired. Documents nested deeper than 1,000 levels are refused
/// (SPEC R13.1), and so is encoding what would nest deeper than that. Nothing is partially
/// decoded: a failed DecodeMessages returns no messages. Documents of any size are accepted.
///
/// Streaming decode. DecodeEach reads the array (or, for the native form, the conversation
/// object) one element at a time and calls `sink` with each Message the moment it is complete,
/// so that a host can write a long transcript into its store while reading it: no more than one
/// element is ever held as a JSON tree (plus, for Responses items, the reasoning items waiting
/// for the item they go with), and decoded strings are moved, not copied, into the Message (a
/// 200 MB tool output exists twice at most: in `json` and in the Message). `is_instructions`
/// marks the one message DecodeMessages would make Conversation::instructions. DecodeMessages
/// is DecodeEach collecting into a Conversation, so both give the same messages and the same
/// errors. But an error found part way (a bad message, malformed JSON further on) comes after
/// the sink has taken the messages before it: a host must treat the messages of a failed
/// DecodeEach as not imported (e.g. roll back the transaction it wrote them in). A sink's own
/// non-OK Status stops the decode and is returned unchanged; an exception it throws passes
/// through DecodeEach to the caller.
///
/// What to send costs what is new. A host that sends the transcript Compactor::Prepare returned
/// encodes it with EncodeTranscript rather than ToVector() and EncodeMessages: each message's
/// encoded form is kept with the message the first time it is written, and shared by every
/// Transcript that holds the message (the next turn's, a copy, a slice), so the next turn's body
/// costs its new messages plus one copy of the kept text. The kept text lives as long as the
/// message is in a transcript: a session encoded in one format holds its text about twice. A
/// message that cannot be encoded in the format keeps nothing, and the error names it by its
/// index from `begin`.
///
/// All functions are pure and thread-safe (DecodeEach calls `sink` on the calling thread).
#ifndef RECAP_CODEC_H_
#define RECAP_CODEC_H_

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

#include "recap/conversation.h"
#include "recap/export.h"
#include "recap/message.h"
#include "recap/status.h"
#include "recap/transcript.h"

namespace recap {
inline namespace v0 {

/// recap's own JSON form (see above): what the session stores write. Its functions say what
/// every codec's do; the other namespaces' say what differs in theirs.
namespace native {
/// Decodes a JSON array of messages into a Conversation: a leading system message becomes its
/// instructions (with DecodeOptions::split_instructions). In recap's own form, also an object
/// `{"instructions": <message or null>, "messages": [...]}`, as EncodeMessages writes it.
RECAP_EXPORT Result<Conversation> DecodeMessages(std::string_view json,
                                                 const DecodeOptions& options = {});
/// The streaming decode (see above): each message handed to `sink` as soon as it is decoded,
/// with the same messages and errors as DecodeMessages; `sink`'s own non-OK Status stops it and
/// is returned.
RECAP_EXPORT Status DecodeEach(std::string_view json, const DecodeOptions& options,
                               const MessageSink& sink);
/// Decodes one JSON message object.
RECAP_EXPORT Result<Message> DecodeMessage(std::string_view json,
                                           const DecodeOptions& options = {});
/// Encodes a Conversation. In recap's own form, the object `{"format": "recap", "version",
/// "instructions", "messages"}` that DecodeMessages reads.
RECAP_EXPORT Result<std::string> EncodeMessages(const Conversation& conversation);
/// Encodes one message as a JSON object.
RECAP_EXPORT Result<std::string> EncodeMessage(const Message& message);
/// The messages [begin, size()) of `transcript` as a JSON array, assembled from each message's
/// kept encoded form (see above); an error names the message by its index from `begin`. In
/// recap's own form: the messages as a JSON array (no document around them).
RECAP_EXPORT Result<std::string> EncodeTranscript(const Transcript& transcript,
                                                  std::size_t begin = 0);
/// EncodeTranscript's array written over `*out`'s content, in the memory `out` already has when
/// it fits (see above). The same errors, and a null `out`; on error `*out` is left as it was.
RECAP_EXPORT Status EncodeTranscriptTo(const Transcript& transcript, std::size_t begin,
                                       std::string* out);
/// EncodeTranscript's array as pieces, without copying them (see above): `*parts` gets each
/// message's kept form, in order; the array is '[' + the pieces joined by ',' + ']'.
RECAP_EXPORT Status EncodeTranscriptParts(const Transcript& transcript, std::size_t begin,
                                          std::vector<std::string_view>* parts);
}  // namespace native

/// OpenAI chat-completions `messages` (see above).
namespace openai_chat {
/// @copydoc recap::native::DecodeMessages
RECAP_EXPORT Result<Conversation> DecodeMessages(std::string_view json,
                                                 const DecodeOptions& options = {});
/// @copydoc recap::native::DecodeEach
RECAP_EXPORT Status DecodeEach(std::string_view json, const DecodeOptions& options,
                               const MessageSink& sink);
/// @copydoc recap::native::DecodeMessage
RECAP_EXPORT Result<Message> DecodeMessage(std::string_view json,
                                           const DecodeOptions& options = {});
/// Encodes a Conversation as a JSON array of messages, its instructions first.
RECAP_EXPORT Result<std::string> EncodeMessages(const Conversation& conversation);
/// Encodes one message as a JSON object. A message with several tool results encodes as
/// several `tool` messages; EncodeMessage then fails and says to use EncodeMessages.
RECAP_EXPORT Result<std::string> EncodeMessage(const Message& message);
/// @copydoc recap::native::EncodeTranscript
RECAP_EXPORT Result<std::string> EncodeTranscript(const Transcript& transcript,
                                                  std::size_t begin = 0);
/// @copydoc recap::native::EncodeTranscriptTo
RECAP_EXPORT Status EncodeTranscriptTo(const Transcript& transcript, std::size_t begin,
                                       std::string* out);
/// @copydoc recap::native::EncodeTranscriptParts
RECAP_EXPORT Status EncodeTranscriptParts(const Transcript& transcript, std::size_t begin,
                                          std::vector<std::string_view>* parts);
}  // namespace openai_chat

/// Anthropic Messages API `messages` (see above).
namespace anthropic {
/// Decodes a JSON array of messages into a Conversation. Conversation::instructions stays
/// empty: Anthropic carries the system prompt outside the messages array. EncodeMessages
/// rejects a Conversation with instructions for the same reason.
RECAP_EXPORT Result<Conversation> DecodeMessages(std::string_view json,
                                                 const DecodeOptions& options = {});
/// @copydoc recap::native::DecodeEach
RECAP_EXPORT Status DecodeEach(std::string_view json, const DecodeOptions& options,
                               const MessageSink& sink);
/// @copydoc recap::native::DecodeMessage
RECAP_EXPORT Result<Message> DecodeMessage(std::string_view json,
                                           const DecodeOptions& options = {});
/// Encodes a Conversation without instructions as a JSON array of messages.
RECAP_EXPORT Result<std::string> EncodeMessages(const Conversation& conversation);
/// @copydoc recap::native::EncodeMessage
RECAP_EXPORT Result<std::string> EncodeMessage(const Message& message);
/// @copydoc recap::native::EncodeTranscript
/// A system message among them has no place in Anthropic's `messages`: start after the leading
/// ones (`begin`) and send their text as the request's `system`.
RECAP_EXPORT Result<std::string> EncodeTranscript(const Transcript& transcript,
                                                  std::size_t begin = 0);
/// @copydoc recap::native::EncodeTranscriptTo
RECAP_EXPORT Status EncodeTranscriptTo(const Transcript& transcript, std::size_t begin,
                                       std::string* out);
/// @copydoc recap::native::EncodeTranscriptParts
RECAP_EXPORT Status EncodeTranscriptParts(const Transcript& transcript, std::size_t begin,
                                          std::vector<std::string_view>* parts);
}  // namespace anthropic

/// OpenAI Responses API input items (see above).
namespace openai_responses {
/// Decodes a JSON array of input items (the value of a request's `input`) into a
/// Conversation. Item types recap does not model are kept as opaque items whatever
/// DecodeOptions says; the calls and outputs of the computer, custom and local shell tools and
/// MCP approvals are paired like function calls. DecodeOptions::keep_unknown_blocks applies to
/// content part types inside a message.
RECAP_EXPORT Result<Conversation> DecodeMessages(std::string_view json,
                                                 const DecodeOptions& options = {});
/// @copydoc recap::native::DecodeEach
RECAP_EXPORT Status DecodeEach(std::string_view json, const DecodeOptions& options,
                               const MessageSink& sink);
/// Decodes one JSON input item.
RECAP_EXPORT Result<Message> DecodeMessage(std::string_view json,
                                           const DecodeOptions& options = {});
/// Encodes a Conversation as a JSON array of input items, its instructions first.
RECAP_EXPORT Result<std::string> EncodeMessages(const Conversation& conversation);
/// Encodes one message as one JSON item. A message that encodes as several items (reasoning
/// with its call, several calls) makes EncodeMessage fail and say to use EncodeMessages.
RECAP_EXPORT Result<std::string> EncodeMessage(const Message& message);
/// @copydoc recap::native::EncodeTranscript
RECAP_EXPORT Result<std::string> EncodeTranscript(const Transcript& transcript,
                                                  std::size_t begin = 0);
/// @copydoc recap::native::EncodeTranscriptTo
RECAP_EXPORT Status EncodeTranscriptTo(const Transcript& transcript, std::size_t begin,
                                       std::string* out);
/// @copydoc recap::native::EncodeTranscriptParts
RECAP_EXPORT Status EncodeTranscriptParts(const Transcript& transcript, std::size_t begin,
                                          std::vector<std::string_view>* parts);
}  // namespace openai_responses

}  // namespace v0
}  // namespace recap

#endif  // RECAP_CODEC_H_
