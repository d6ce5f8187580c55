// The SQLite memory store (recap/sqlite/sqlite_store.h): the memory plugin's memories by scope,
// in the same file and schema as the sessions (the `memories` table).
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "recap/sqlite/sqlite_store.h"

#include "connection.h"

namespace recap {
inline namespace v0 {
namespace {

using sqlite_internal::Connection;
using sqlite_internal::NowUtc;
using sqlite_internal::OpenConnection;
using sqlite_internal::Quoted;

class SqliteMemoryStore final : public MemoryStore {
 public:
  explicit SqliteMemoryStore(std::unique_ptr<Connection> c) : c_(std::move(c)) {}

  Status Add(const std::string& scope, const std::vector<std::string>& memories) override {
    if (memories.empty()) return Status::OK();
    std::lock_guard<std::mutex> lock(mu_);
    return c_->Transaction("adding memories to scope " + Quoted(scope), true, [&] {
      const std::string now = NowUtc();
      for (const std::string& text : memories) {
        SQLite::Statement& st =
            c_->Stmt("INSERT OR IGNORE INTO memories (scope, text, added_at) VALUES (?, ?, ?)");
        st.bind(1, scope);
        st.bind(2, text);
        st.bind(3, now);
        st.exec();
      }
    });
  }

  Result<std::vector<std::string>> List(const std::string& scope) override {
    std::lock_guard<std::mutex> lock(mu_);
    std::vector<std::string> out;
    Status s = c_->Transaction("listing the memories of scope " + Quoted(scope), false, [&] {
      SQLite::Statement& st =
          c_->Stmt("SELECT text FROM memories WHERE scope = ? ORDER BY memory_id");
      st.bind(1, scope);
      while (st.executeStep()) out.push_back(st.getColumn(0).getString());
    });
    RECAP_RETURN_IF_ERROR(s);
    return out;
  }

 private:
  std::mutex mu_;
  std::unique_ptr<Connection> c_;
};

}  // namespace

Result<std::shared_ptr<MemoryStore>> OpenSqliteMemoryStore(const std::string& path,
                                                           const SqliteStoreOptions& options) {
  Result<std::unique_ptr<Connection>> c = OpenConnection(path, options);
  RECAP_RETURN_IF_ERROR(c);
  return std::shared_ptr<MemoryStore>(std::make_shared<SqliteMemoryStore>(std::move(c).value()));
}

}  // namespace v0
}  // namespace recap
