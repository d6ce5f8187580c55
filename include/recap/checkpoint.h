/// @file
/// recap — the checkpoint: what a compaction leaves in place of the messages it summarized
/// (SPEC R4, R5).
///
/// The summarizer is asked for one JSON object with the fields of Checkpoint (R4.1). Its reply
/// is parsed forgivingly where the meaning is clear — a code fence around the JSON, a string
/// where a list is expected, a bare path in relevantFiles — and strictly otherwise (R4.2). A
/// reply that is not a checkpoint becomes a text-only checkpoint (R4.3). A reply cut by the
/// output limit is salvaged: a truncated JSON object is repaired to its complete fields, or
/// its text is kept (R5.2). Fields that plugins asked for are extracted and handed to them,
/// never rendered.
///
/// The checkpoint enters the transcript as one user message flagged `summary`, rendered in a
/// fixed layout: a Markdown heading per section, in the order of R4.1, empty sections left
/// out (R4.4). docs/checkpoint-format.md shows it.
///
/// Pure functions; thread-safe.
#ifndef RECAP_CHECKPOINT_H_
#define RECAP_CHECKPOINT_H_

#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "recap/export.h"
#include "recap/message.h"

namespace recap {
inline namespace v0 {

/// A file that matters to the session, and why (a checkpoint's `relevantFiles`).
struct RelevantFile {
  std::string path;  ///< the file's path, as the session names it
  std::string why;   ///< why it matters; may be empty
};

/// What a compaction leaves in place of the messages it summarized: the sections of R4.1
/// (docs/checkpoint-format.md), or a text.
struct Checkpoint {
  std::string goal;                          ///< what the session is trying to achieve
  std::vector<std::string> instructions;     ///< the user's instructions and constraints
  std::vector<std::string> discoveries;      ///< facts learned: how things work, causes, decisions
  std::vector<std::string> accomplished;     ///< work that is done
  std::string current_state;                 ///< where things stand now
  std::vector<std::string> next_steps;       ///< what remains
  std::vector<RelevantFile> relevant_files;  ///< files that matter, and why

  /// false for a text-only checkpoint (R4.3): then only `text` is set (and kept_by_recap).
  bool structured = true;
  std::string text;  ///< a text-only checkpoint's text

  /// R17.2: what the guard added from the span's ledger because the summarizer left it out —
  /// the body of the "Kept by recap" section (Markdown, by kind; recap/ledger.h), rendered
  /// last, after the sections or the text. Empty when the summarizer kept everything. Written
  /// by the Compactor, never read from a summarizer's reply.
  std::string kept_by_recap;

  /// True when nothing at all is set.
  bool empty() const noexcept;
};

/// An output field a plugin asks the summarizer for (R9.1).
struct OutputField {
  std::string name;         ///< a JSON member name, e.g. "memories"
  std::string description;  ///< what to put there, for the summarizer's instructions
  std::string json_schema;  ///< the member's JSON Schema text, e.g. {"type":"array",...}
};

/// What ParseCheckpoint made of a summarizer's reply.
struct ParsedCheckpoint {
  Checkpoint checkpoint;  ///< the checkpoint read from the reply
  /// The plugin fields found in the reply: name -> the member's JSON text.
  std::map<std::string, std::string> plugin_fields;
  bool usable = false;   ///< false: nothing usable was written (R5.3)
  bool partial = false;  ///< the reply was cut and this is what could be recovered (R5.2)
  /// When not usable though not blank: what the reply is instead of a checkpoint, such as "an
  /// HTML page", "a refusal", "an empty JSON object" (docs/checkpoint-format.md). Empty
  /// otherwise, and for a reply cut before anything usable was written (R5.3).
  std::string problem;
};

/// Parses a summarizer reply. `truncated` says the reply was cut by the output limit. Prose
/// that is no checkpoint in the JSON form is kept as a text-only checkpoint (R4.3), except a
/// reply that carries no checkpoint at all: JSON with none of the sections filled (a scalar,
/// an empty object or array, unknown members only), text that starts like JSON but is not,
/// an HTML page, an HTTP error line, or a short refusal; that one is not usable and `problem`
/// says what it is. Members of a checkpoint object that are neither sections nor plugin fields
/// are kept as Discoveries ("name: text") when they hold text.
RECAP_EXPORT ParsedCheckpoint ParseCheckpoint(std::string_view reply, bool truncated,
                                              const std::vector<OutputField>& plugin_fields = {});

/// Repairs a JSON text cut off mid-way into the longest valid prefix of complete members,
/// closing open strings, arrays and objects. nullopt when no object can be recovered.
RECAP_EXPORT std::optional<std::string> SalvageTruncatedJson(std::string_view text);

/// The fixed, readable layout of R4.4.
RECAP_EXPORT std::string RenderCheckpoint(const Checkpoint& checkpoint);

/// Reads a rendered checkpoint back (used to hand a previous checkpoint to the summarizer as
/// prior state and to the offline summarizer). Text that is not in the layout becomes a
/// text-only checkpoint.
RECAP_EXPORT Checkpoint ParseRenderedCheckpoint(std::string_view rendered);

/// The checkpoint as the message that enters the transcript: role user, summary = true.
RECAP_EXPORT Message CheckpointMessage(const Checkpoint& checkpoint);

/// The JSON Schema of the reply: the fields of R4.1 plus the plugins' fields.
RECAP_EXPORT std::string CheckpointJsonSchema(const std::vector<OutputField>& plugin_fields = {});

/// The checkpoint as the JSON object of R4.1 (what the schema describes).
RECAP_EXPORT std::string CheckpointToJson(const Checkpoint& checkpoint);

}  // namespace v0
}  // namespace recap

#endif  // RECAP_CHECKPOINT_H_
