/// @file
/// recap — what the codecs exchange: a conversation as a foreign format holds it.
///
/// A foreign transcript may open with a system message: that is the session's instructions.
/// Codecs keep it apart (SPEC §1): it counts as instructions in every size rule and is never
/// summarized or clipped, so it must not enter the Transcript. A system message later in the
/// conversation is an ordinary message.
#ifndef RECAP_CONVERSATION_H_
#define RECAP_CONVERSATION_H_

#include <functional>
#include <optional>
#include <vector>

#include "recap/message.h"
#include "recap/status.h"

namespace recap {
inline namespace v0 {

/// A conversation as a foreign format holds it: the instructions kept apart (see above).
struct Conversation {
  std::optional<Message> instructions;  ///< the leading system message, if there was one
  std::vector<Message> messages;        ///< everything after it, in order
};

/// How the codecs' decoders treat what they meet (codec.h).
struct DecodeOptions {
  /// What to do with a content block or part whose `type` this version of recap does not know.
  /// false (default): reject the document with a Status naming the type and where it was.
  /// true: keep it as an opaque item, written back unchanged (forward compatibility with new
  /// provider block types; recap cannot pair such blocks if they are calls or results).
  bool keep_unknown_blocks = false;
  /// Whether a leading system message becomes Conversation::instructions (default) or stays
  /// in Conversation::messages.
  bool split_instructions = true;
};

/// Where a streaming decode (DecodeEach in codec.h) puts each message as soon as it is
/// complete. `message` is the caller's to keep (move from it). `is_instructions` is true for the
/// one message DecodeMessages would have made Conversation::instructions (the leading system
/// message, with DecodeOptions::split_instructions). A non-OK Status stops the decode, and
/// DecodeEach returns that Status unchanged.
using MessageSink = std::function<Status(Message&& message, bool is_instructions)>;

}  // namespace v0
}  // namespace recap

#endif  // RECAP_CONVERSATION_H_
