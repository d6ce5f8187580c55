// The SQLite store's recall index (recall_index.h).
#include "recall_index.h"

#include <string>
#include <string_view>

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

void BackfillTurns(SQLite::Database& db) {
  SQLite::Statement rows(db,
                         "SELECT m.seq, m.session_id, b.body FROM messages m JOIN bodies b ON "
                         "b.seq = m.seq ORDER BY m.session_id, m.seq");
  SQLite::Statement turn(db, "UPDATE messages SET turn = ? WHERE seq = ?");
  SQLite::Statement turns(db, "UPDATE sessions SET turns = ? WHERE session_id = ?");
  std::int64_t session = -1;
  std::uint64_t count = 0;
  auto close = [&] {
    if (session < 0) return;
    turns.reset();
    turns.bind(1, static_cast<std::int64_t>(count));
    turns.bind(2, session);
    turns.exec();
  };
  while (rows.executeStep()) {
    const std::int64_t seq = rows.getColumn(0).getInt64();
    const std::int64_t sid = rows.getColumn(1).getInt64();
    if (sid != session) {
      close();
      session = sid;
      count = 0;
    }
    const SQLite::Column body = rows.getColumn(2);
    Result<Message> m = internal::DecodeBody(std::string_view(
        static_cast<const char*>(body.getBlob()), static_cast<std::size_t>(body.getBytes())));
    if (!m.ok()) continue;
    const std::uint64_t t = internal::TurnOf(*m, count);
    count = t;
    turn.reset();
    turn.bind(1, static_cast<std::int64_t>(t));
    turn.bind(2, seq);
    turn.exec();
  }
  close();
}

}  // namespace sqlite_internal
}  // namespace recap
