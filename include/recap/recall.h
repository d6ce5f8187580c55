/// @file
/// recap — getting it back (SPEC R18): what a compaction summarized, a clearing cleared or the
/// reducer clipped stays in the session's history (R8), and the model or the person can have it
/// back.
///
/// The model asks through a tool: put RecallTool(format) in the request's tool catalog and set
/// compaction.recallTool in the configuration, so that checkpoints, the ledger's "left out" line
/// and clearing markers tell the model what it can ask for. When the model calls `recap_recall`,
/// answer the call with Compactor::AnswerRecall and append the result like any tool result. A
/// host (or a person, through `recap recall`) asks with Compactor::Recall.
///
/// How messages are found (SessionStore::SearchHistory): by id, by turn range, or by words —
/// each word or run of words (`parse_config`, `src/app.py`) the query holds; messages holding
/// more of them rank first. Case is ignored. Query syntax of any search engine is plain text here.
#ifndef RECAP_RECALL_H_
#define RECAP_RECALL_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "recap/export.h"
#include "recap/message.h"
#include "recap/status.h"

namespace recap {
inline namespace v0 {

/// The recall tool's name, as the model calls it.
inline constexpr const char* kRecallToolName = "recap_recall";

/// What Compactor::Recall looks for (ParseRecallArguments makes one from the tool's call).
struct RecallQuery {
  /// Words to look for (at most 32 are used, each at most 200 bytes: a longer query is cut).
  std::string text;
  /// Messages to get back by id (checkpoints, the ledger and clearing markers name them).
  std::vector<std::string> ids;
  /// A turn range, inclusive (HistoryEntry::turn); last_turn 0: none. With `text`, only messages
  /// of these turns are searched.
  std::uint64_t first_turn = 0;
  std::uint64_t last_turn = 0;  ///< the range's last turn; 0: no range
  /// The answer's size: the originals' text, best first, is cut to fit this many characters.
  std::size_t max_chars = 8000;
  /// At most this many messages.
  std::size_t max_messages = 20;
  /// Messages still active too (by default only what was compacted, cleared, clipped or undone:
  /// the model already sees the active ones).
  bool include_active = false;
};

/// One original Compactor::Recall found.
struct RecalledMessage {
  std::string id;           ///< the message's id
  std::uint64_t seq = 0;    ///< the store's order
  std::uint64_t turn = 0;   ///< HistoryEntry::turn
  Role role = Role::kUser;  ///< who wrote it
  /// "summarized" (retired by a compaction), "reduced" (its tool result cleared or its content
  /// clipped), "undone" (a checkpoint or reduced copy an undo took back), or "active".
  std::string state;
  std::string replaced_by;  ///< HistoryEntry::replaced_by
  std::string text;         ///< the message as the model reads it, clipped to the budget
  bool clipped = false;     ///< `text` was cut (it ends with the truncation marker)
  double score = 0;         ///< HistoryHit::score
};

/// What Compactor::Recall found: the originals, and the answer the model reads.
struct Recalled {
  std::vector<RecalledMessage> messages;  ///< best first
  /// Messages that matched but did not fit max_chars; their ids are named in `text`.
  std::size_t left_out = 0;
  std::vector<std::string> left_out_ids;  ///< their ids
  /// The whole answer as the model reads it (the recall tool's result).
  std::string text;
};

/// The wire formats the recall tool is defined in.
enum class ToolFormat : std::uint8_t { kOpenAIChat, kAnthropic, kOpenAIResponses };

/// The recall tool's definition as one JSON object of the format's tool catalog: an OpenAI chat
/// `{"type":"function","function":{…}}`, an Anthropic `{"name":…,"input_schema":{…}}`, or an
/// OpenAI Responses `{"type":"function","name":…,"parameters":{…}}`. Its parameters: `query`
/// (words), `ids` (message ids), `max_chars` (the answer's size).
RECAP_EXPORT std::string RecallTool(ToolFormat format);

/// A recap_recall call's arguments (a JSON object) as a query. kInvalidArgument, saying what was
/// wrong in the tool's words, when they are not an object, name neither `query` nor `ids`, or
/// give a member of the wrong type. `max_chars` is kept within [200, 100000]; unknown members are
/// ignored.
RECAP_EXPORT Result<RecallQuery> ParseRecallArguments(std::string_view arguments);

}  // namespace v0
}  // namespace recap

#endif  // RECAP_RECALL_H_
