// The SQLite store's recall index (recall_index.h).
#include "recall_index.h"

#include <string>
#include <string_view>
#include <unordered_map>

#include <SQLiteCpp/Statement.h>

#include "recap_internal/body_codec.h"
#include "recap_internal/history_search.h"

namespace recap {
namespace sqlite_internal {

std::string_view IndexedText(std::string_view text) {
  if (text.size() <= kMaxIndexedBytes) return text;
  std::size_t n = kMaxIndexedBytes;
  while (n > 0 && (static_cast<unsigned char>(text[n]) & 0xC0) == 0x80) --n;
  return text.substr(0, n);
}

void BackfillRecall(SQLite::Database& db) {
  SQLite::Statement rows(db,
                         "SELECT m.seq, m.session_id, b.body, m.message_id, m.replaced_by FROM "
                         "messages m JOIN bodies b ON b.seq = m.seq ORDER BY m.session_id, m.seq");
  // The turns of messages a reduction retired, by id: the copy that replaced one (a later row
  // with the same id) is of the same turn.
  std::unordered_map<std::string, std::uint64_t> reduced;
  SQLite::Statement turn(db, "UPDATE messages SET turn = ? WHERE seq = ?");
  SQLite::Statement turns(db,
                          "UPDATE sessions SET turns = ?, indexed_seq = ? WHERE session_id = ?");
  SQLite::Statement index(db, "INSERT INTO recall_index (rowid, text) VALUES (?, ?)");
  std::int64_t session = -1;
  std::uint64_t count = 0;
  std::int64_t last_seq = 0;
  auto close = [&] {
    if (session < 0) return;
    turns.reset();
    turns.bind(1, static_cast<std::int64_t>(count));
    turns.bind(2, last_seq);
    turns.bind(3, session);
    turns.exec();
  };
  while (rows.executeStep()) {
    const std::int64_t seq = rows.getColumn(0).getInt64();
    const std::int64_t sid = rows.getColumn(1).getInt64();
    if (sid != session) {
      close();
      session = sid;
      count = 0;
      reduced.clear();
    }
    last_seq = seq;
    const std::string id = rows.getColumn(3).getString();
    const SQLite::Column body = rows.getColumn(2);
    Result<Message> m = internal::DecodeBody(std::string_view(
        static_cast<const char*>(body.getBlob()), static_cast<std::size_t>(body.getBytes())));
    if (!m.ok()) continue;
    std::uint64_t t = 0;
    if (auto copy_of = reduced.find(id); copy_of != reduced.end()) {
      t = copy_of->second;
      reduced.erase(copy_of);
    } else {
      t = count = internal::TurnOf(*m, count);
    }
    const SQLite::Column by = rows.getColumn(4);
    if (!by.isNull() && by.getString().rfind("reduction:", 0) == 0) reduced[id] = t;
    turn.reset();
    turn.bind(1, static_cast<std::int64_t>(t));
    turn.bind(2, seq);
    turn.exec();
    const std::string text = internal::SearchableText(*m);
    if (text.empty()) continue;
    const std::string_view indexed = IndexedText(text);
    index.reset();
    index.bind(1, seq);
    index.bindNoCopy(2, indexed.data(), static_cast<int>(indexed.size()));
    index.exec();
  }
  close();
}

}  // namespace sqlite_internal
}  // namespace recap
