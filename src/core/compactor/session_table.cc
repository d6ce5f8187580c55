#include "compactor/session_table.h"

#include <iterator>
#include <vector>

#include "recap_internal/log_internal.h"

namespace recap {
inline namespace v0 {
namespace compactor_detail {

SessionTable::Use SessionTable::Get(const std::string& session) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = slots_.find(session);
  if (it == slots_.end()) {
    lru_.push_front(session);
    it = slots_.emplace(session, Slot{std::make_shared<SessionCache>(), lru_.begin(), 0}).first;
  } else if (it->second.used != lru_.begin()) {
    lru_.splice(lru_.begin(), lru_, it->second.used);
  }
  return Use(this, session, it->second.cache);
}

std::pair<std::size_t, std::size_t> SessionTable::Figures() const {
  std::lock_guard<std::mutex> lock(mu_);
  return {slots_.size(), bytes_};
}

void SessionTable::Release(const std::string& session, std::shared_ptr<SessionCache> cache) {
  std::vector<std::shared_ptr<SessionCache>> dropped;  // freed after the lock
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = slots_.find(session);
    if (it != slots_.end() && it->second.cache == cache) {
      const std::size_t now = cache->bytes();
      bytes_ = bytes_ - it->second.bytes + now;
      it->second.bytes = now;
    }
    cache.reset();
    // The most recently used session always stays: a session larger than the budget is
    // not loaded again at every call.
    auto victim = lru_.end();
    while (bytes_ > max_bytes_ && victim != lru_.begin() && std::prev(victim) != lru_.begin()) {
      --victim;
      auto slot = slots_.find(*victim);
      if (slot->second.cache.use_count() > 1) continue;  // a call is using it
      bytes_ -= slot->second.bytes;
      dropped.push_back(std::move(slot->second.cache));
      slots_.erase(slot);
      victim = lru_.erase(victim);
    }
  }
  if (!dropped.empty()) {
    RECAP_LOG_DEBUG("cache over cache.maxBytes ({}): dropped {} least recently used sessions",
                    max_bytes_, dropped.size());
  }
}

}  // namespace compactor_detail
}  // namespace v0
}  // namespace recap
