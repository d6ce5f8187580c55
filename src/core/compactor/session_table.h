// R12.6: the sessions one Compactor keeps in memory (a SessionCache each), the least recently
// used dropped first to stay within cache.maxBytes. A call holds its session's cache through a
// SessionTable::Use; when the call ends, the session's size is counted again and sessions that
// no call is using are dropped until the table fits its budget (the most recently used one
// always stays, however large).
//
// Thread-safe: every method takes the table's own lock, which is never held while a session's
// lock (SessionCache::mu) is taken, nor while a dropped cache is freed.
#ifndef RECAP_SRC_CORE_COMPACTOR_SESSION_TABLE_H_
#define RECAP_SRC_CORE_COMPACTOR_SESSION_TABLE_H_

#include <cstddef>
#include <list>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <utility>

#include "compactor/session_cache.h"

namespace recap {
inline namespace v0 {
namespace compactor_detail {

class SessionTable {
 public:
  explicit SessionTable(std::size_t max_bytes) : max_bytes_(max_bytes) {}
  SessionTable(const SessionTable&) = delete;
  SessionTable& operator=(const SessionTable&) = delete;

  // One call's hold on a session's cache; it keeps the cache alive (a table that drops the
  // session meanwhile forgets it, the call does not).
  class Use {
   public:
    Use(SessionTable* table, std::string session, std::shared_ptr<SessionCache> cache)
        : table_(table), session_(std::move(session)), cache_(std::move(cache)) {}
    ~Use() { table_->Release(session_, std::move(cache_)); }
    Use(const Use&) = delete;
    Use& operator=(const Use&) = delete;
    SessionCache& operator*() const { return *cache_; }
    SessionCache* operator->() const { return cache_.get(); }

   private:
    SessionTable* table_;
    std::string session_;
    std::shared_ptr<SessionCache> cache_;
  };

  // The session's cache (made empty when missing), marked most recently used.
  Use Get(const std::string& session);

  // How many sessions are cached, and about how many bytes they hold.
  std::pair<std::size_t, std::size_t> Figures() const;

 private:
  // A Use ends: counts the session's bytes again and drops what the budget no longer holds.
  void Release(const std::string& session, std::shared_ptr<SessionCache> cache);

  struct Slot {
    std::shared_ptr<SessionCache> cache;
    std::list<std::string>::iterator used;  // its place in lru_
    std::size_t bytes = 0;                  // counted in bytes_
  };

  const std::size_t max_bytes_;

  mutable std::mutex mu_;
  // Guarded by mu_:
  std::unordered_map<std::string, Slot> slots_;
  std::list<std::string> lru_;  // most recently used first
  std::size_t bytes_ = 0;       // the sum of the slots' bytes
};

}  // namespace compactor_detail
}  // namespace v0
}  // namespace recap

#endif  // RECAP_SRC_CORE_COMPACTOR_SESSION_TABLE_H_
