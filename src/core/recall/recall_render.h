// Recalled messages as the model reads them (recap/recall.h, R18.2).
#ifndef RECAP_SRC_CORE_RECALL_RECALL_RENDER_H_
#define RECAP_SRC_CORE_RECALL_RECALL_RENDER_H_

#include <string>
#include <vector>

#include "recap/recall.h"
#include "recap/session_store.h"

namespace recap {
inline namespace v0 {
namespace recall_internal {

// "summarized", "reduced", "undone" or "active" (RecalledMessage::state).
std::string StateOf(const HistoryEntry& e);

// A message's content as the model reads it in an answer: its text, each tool call as
// `call <name> <arguments>`, each result as `result of <call id>: <text>`, other content by kind.
std::string ContentText(const Message& m);

// The answer to `query` from the store's hits, best first, within query.max_chars characters
// (headers included): a message asked for by id whole while the budget lasts; one found by words
// whole when it fits its share of what remains (what remains over the hits still to come, at
// least 600), else the part of it around where a term first occurs, cut to its share; the first
// that does not fit cut to what remains (when at least 200 characters do); the rest left out and
// named by id.
// Hits beyond query.max_messages are left out and named too; `maybe_more`: the store may have
// had more matches than it returned, and the answer says so.
Recalled Render(std::vector<HistoryHit> hits, const RecallQuery& query, bool maybe_more = false);

// The line a compaction adds after its checkpoint when the host offers the recall tool
// (compaction.recallTool): which messages the checkpoint replaced, and how to have them back.
std::string RecallNote(const std::vector<std::string>& replaced_ids);

}  // namespace recall_internal
}  // namespace v0
}  // namespace recap

#endif  // RECAP_SRC_CORE_RECALL_RECALL_RENDER_H_
