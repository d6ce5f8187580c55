// The SQLite store's recall index (SPEC R18.1): each message's searchable text in the FTS5
// table `recall_index` (schema.h, version 3), written when a session is searched after new
// messages; and the migration's fill of the turns and the index for messages stored before.
// Private to recap::sqlite.
#ifndef RECAP_SRC_SQLITE_RECALL_INDEX_H_
#define RECAP_SRC_SQLITE_RECALL_INDEX_H_

#include <cstddef>
#include <cstdint>
#include <string_view>

#include <SQLiteCpp/Database.h>

#include "recap/message.h"

namespace recap {
namespace sqlite_internal {

// What is indexed of one message: the first this many bytes of its searchable text (a 200 MB
// tool output is found by its first 4 MiB).
inline constexpr std::size_t kMaxIndexedBytes = std::size_t{4} << 20;

// What is indexed of a message's searchable text: `text` cut to kMaxIndexedBytes, at the start
// of a UTF-8 sequence.
std::string_view IndexedText(std::string_view text);

// Fills `messages.turn`, `sessions.turns`, the index and `sessions.indexed_seq` for every
// message of the file, inside the migration's transaction. A body that cannot be decoded counts
// no turn and is not indexed (the store reports it when the message is read).
void BackfillRecall(SQLite::Database& db);

}  // namespace sqlite_internal
}  // namespace recap

#endif  // RECAP_SRC_SQLITE_RECALL_INDEX_H_
