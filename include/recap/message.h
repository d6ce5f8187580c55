/// @file
/// recap — the neutral message model (SPEC §1).
///
/// A Message is a role and an ordered list of parts. A part is one of:
///
/// ```text
///   Text        text a person or the model wrote;
///   ToolCall    the model asking for a tool: `id`, `name`, `arguments` (a JSON text, kept
///               byte-exact unless the tail reducer clips it);
///   ToolResult  what a tool returned for the call `call_id`: a list of items (texts and opaque
///               items such as images) and `is_error`;
///   Opaque      provider data recap never reads or changes: signed thinking, encrypted
///               reasoning, images, server-side tool blocks. `kind` names it, `payload` is its
///               JSON text. A codec may mark an opaque item as one side of a call/result pair
///               (`link`, `link_id`) so the cutter keeps such pairs together like tool calls.
/// ```
///
/// Foreign formats (OpenAI chat completions, Anthropic Messages) convert into this model and
/// back without loss. What recap does not model is kept, not dropped: every struct has an
/// `extra` member holding a JSON object text of the foreign fields it did not recognise, and
/// `form` members remember how a content field was written (a string, a list, null, absent).
/// Codecs write `extra` back and the rest of recap ignores it; it is never counted as
/// characters. See docs/message-model.md.
///
/// All strings are UTF-8. Messages are plain values; Transcript (transcript.h) is where sizes
/// are measured and cached.
#ifndef RECAP_MESSAGE_H_
#define RECAP_MESSAGE_H_

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "recap/export.h"

namespace recap {
inline namespace v0 {

/// Who wrote a message: the system (instructions), the person, the model, or a tool.
enum class Role : std::uint8_t { kSystem, kUser, kAssistant, kTool };

/// "system", "user", "assistant", "tool".
RECAP_EXPORT const char* RoleName(Role role) noexcept;
/// The inverse of RoleName; nullopt for anything else.
RECAP_EXPORT std::optional<Role> ParseRole(std::string_view name) noexcept;

/// How a foreign format wrote a content field, so that a codec can write it back the same way.
/// kDefault lets the encoder choose its format's natural form; the others are a string, a list,
/// null and a field left out.
enum class ContentForm : std::uint8_t { kDefault, kString, kList, kNull, kAbsent };

/// Text a person or the model wrote.
struct Text {
  std::string text;   ///< the text itself
  std::string extra;  ///< JSON object text of unmodelled fields (e.g. "citations"); may be empty
};

/// The model asking for a tool.
struct ToolCall {
  std::string id;         ///< the call's id, which its result names (ToolResult::call_id)
  std::string name;       ///< the tool's name
  std::string arguments;  ///< a JSON text, normally an object
  std::string extra;      ///< JSON object text of unmodelled fields; may be empty
};

/// Which side of a call/result pair an opaque item is, for items a provider pairs itself
/// (such as Anthropic's server_tool_use and web_search_tool_result).
enum class OpaqueLink : std::uint8_t { kNone, kCall, kResult };

/// Provider data recap never reads or changes (see above).
struct Opaque {
  std::string kind;     ///< e.g. "thinking", "redacted_thinking", "image", "reasoning"
  std::string payload;  ///< a JSON text recap never reads; written back byte-exact
  OpaqueLink link = OpaqueLink::kNone;  ///< the side of a call/result pair it is, if any
  std::string link_id;                  ///< the pair's id when link != kNone
};

/// An item of a tool result: a text, or an opaque item such as an image.
using ResultItem = std::variant<Text, Opaque>;

/// What a tool returned for a call.
struct ToolResult {
  std::string call_id;                       ///< the id of the call it answers (ToolCall::id)
  std::vector<ResultItem> content;           ///< what the tool returned, in order
  bool is_error = false;                     ///< the tool reported a failure
  ContentForm form = ContentForm::kDefault;  ///< string or list in the foreign format
  std::string extra;                         ///< JSON object text of unmodelled fields
};

/// A part of a message: one of the four kinds above.
using Part = std::variant<Text, ToolCall, ToolResult, Opaque>;

/// The wire format a message was decoded from. The codecs set it; a message a host or recap
/// itself makes has kNone. What a message carries for its own format alone — its unmodelled
/// fields (`extra` of the message and of its parts) and its opaque parts — is written back only
/// into that format: an encoder for another format leaves the fields out and refuses an opaque
/// part with a Status naming the message, and a provider's checkpoint is honoured only in the
/// shape of the format it came in (SPEC R14.1). Messages stored before recap recorded it have
/// kNone and are written as they always were.
enum class Origin : std::uint8_t { kNone, kAnthropic, kOpenAIChat, kOpenAIResponses };

/// "anthropic", "openai-chat", "openai-responses" (the names the command line's --format takes),
/// or "" for kNone.
RECAP_EXPORT const char* OriginName(Origin origin) noexcept;
/// The inverse of OriginName for the three formats; nullopt for anything else.
RECAP_EXPORT std::optional<Origin> ParseOrigin(std::string_view name) noexcept;

/// One message of a conversation: a role and its parts, in order (see above).
struct RECAP_EXPORT Message {
  std::string id;           ///< stable; Transcript::Append assigns one when empty
  Role role = Role::kUser;  ///< who wrote it
  std::vector<Part> parts;  ///< its content, in order
  bool summary = false;     ///< this message is a checkpoint (SPEC R4.4)
  /// Kept verbatim by every compaction, in its place before the checkpoint, and never clipped
  /// (R12.1): for a user or system message without tool parts that must survive as written
  /// (a rule the user stated, a task description). The stores refuse it on anything else.
  bool pinned = false;
  ContentForm form = ContentForm::kDefault;  ///< how the foreign format wrote its content
  std::string extra;              ///< JSON object text of the foreign message's unmodelled fields
  Origin origin = Origin::kNone;  ///< the format it was decoded from (above)

  /// A user message with one text part (a convenience for hosts and tests, as the four below).
  static Message UserText(std::string text);
  /// An assistant message with one text part.
  static Message AssistantText(std::string text);
  /// A system message with one text part.
  static Message SystemText(std::string text);
  /// An assistant message carrying the given calls (and optional text before them).
  static Message AssistantCalls(std::vector<ToolCall> calls, std::string text = {});
  /// A `tool` message with one textual result, as OpenAI chat writes them.
  static Message ToolOutput(std::string call_id, std::string output, bool is_error = false);
};

/// True when the message starts a turn: a non-summary user message carrying something a
/// person wrote (a text or an unlinked opaque item such as an image). A user message that
/// only carries tool results is not a turn start (SPEC §1).
RECAP_EXPORT bool IsTurnStart(const Message& m) noexcept;

/// True when the message carries at least one ToolCall or an opaque call.
RECAP_EXPORT bool HasToolCalls(const Message& m) noexcept;

/// True when the message is a session's instructions when it comes first (R12.1): a system
/// message that is not a checkpoint.
RECAP_EXPORT bool IsInstructions(const Message& m) noexcept;

/// Why `m` cannot be pinned (an assistant or tool message, or one with tool calls, results or
/// linked opaque items), or empty when it can (or is not pinned).
RECAP_EXPORT std::string PinnedProblem(const Message& m);

/// The first id that two calls of the message share (tool calls' `id`s and opaque calls'
/// `link_id`s), or nullopt. A result answers one call of an id, so a message asking twice under
/// one id could never have both answered: the stores refuse it (session_store.h) and `recap
/// import` names it.
RECAP_EXPORT std::optional<std::string> RepeatedCallId(const Message& m);

/// The message's texts joined with `"\n"` (text parts only; for display and summarizing).
RECAP_EXPORT std::string JoinedText(const Message& m);

/// A checkpoint a provider's server wrote (SPEC R14.1): Anthropic's `compaction` content block
/// (Messages API) or OpenAI's `compaction` item (Responses API), carried as an Opaque part of
/// kind "compaction". The two are told apart by their fields: Anthropic's block has `content`
/// (the summary as text), OpenAI's item only `encrypted_content`, which no one but OpenAI reads.
struct ProviderCheckpoint {
  std::string writer;  ///< "anthropic" or "openai"
  /// The summary as text when the provider shows it (Anthropic's `content`); empty for an
  /// encrypted one.
  std::string text;
  /// True when its summary can be read (`text`): Anthropic's; OpenAI's is encrypted.
  bool readable() const noexcept { return writer == "anthropic"; }
};

/// The provider checkpoint `m` holds (the last one, if several), or nullopt. An Anthropic
/// block whose `content` is null is a compaction that produced nothing, which the API treats as
/// no block at all: nullopt. One is honoured only when well formed for the format the message
/// came in (Message::origin): an Anthropic message's block has a non-blank `content`; a
/// Responses item has a non-empty `encrypted_content` and no `content`; OpenAI chat has none. The
/// codecs flag a message holding one `summary` when they decode it. Cheap for messages without an
/// opaque part of kind "compaction".
RECAP_EXPORT std::optional<ProviderCheckpoint> FindProviderCheckpoint(const Message& m);

}  // namespace v0
}  // namespace recap

#endif  // RECAP_MESSAGE_H_
