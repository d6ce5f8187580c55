// A SessionStore that hands every call to another store: the base of the tests' stores that
// change one or two calls (inject a fault, a concurrent write) and leave the rest as they are.
// A subclass overrides only what it changes and reaches the store underneath as inner().
#ifndef RECAP_TESTS_SUPPORT_FORWARDING_STORE_H_
#define RECAP_TESTS_SUPPORT_FORWARDING_STORE_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "recap/session_store.h"

namespace recap::testing {

class ForwardingStore : public SessionStore {
 public:
  explicit ForwardingStore(std::shared_ptr<SessionStore> inner) : inner_(std::move(inner)) {}

  Result<SessionState> Load(const std::string& s) override { return inner_->Load(s); }
  Result<SessionChanges> LoadChanges(const std::string& s, std::uint64_t v) override {
    return inner_->LoadChanges(s, v);
  }
  Result<std::uint64_t> AppendMessages(const std::string& s, std::vector<Message> m) override {
    return inner_->AppendMessages(s, std::move(m));
  }
  Result<std::vector<std::uint64_t>> CreateSessions(std::vector<NewSession> n) override {
    return inner_->CreateSessions(std::move(n));
  }
  Result<std::uint64_t> CommitCompaction(const std::string& s, const CompactionCommit& c) override {
    return inner_->CommitCompaction(s, c);
  }
  Result<std::uint64_t> CommitReduction(const std::string& s, const ReductionCommit& c) override {
    return inner_->CommitReduction(s, c);
  }
  Result<std::uint64_t> CommitRecovery(const std::string& s, const RecoveryCommit& c) override {
    return inner_->CommitRecovery(s, c);
  }
  Result<std::vector<HistoryEntry>> History(const std::string& s) override {
    return inner_->History(s);
  }
  Result<std::vector<std::string>> ListSessions() override { return inner_->ListSessions(); }
  Result<std::vector<UncertainCall>> UncertainToolCalls(const std::string& s) override {
    return inner_->UncertainToolCalls(s);
  }
  Status SaveLearned(const std::string& s, const std::string& learned) override {
    return inner_->SaveLearned(s, learned);
  }
  Status ForEachHistoryEntry(const std::string& s,
                             const std::function<Status(HistoryEntry&&)>& visit) override {
    return inner_->ForEachHistoryEntry(s, visit);
  }

 protected:
  SessionStore& inner() { return *inner_; }

 private:
  std::shared_ptr<SessionStore> inner_;
};

}  // namespace recap::testing

#endif  // RECAP_TESTS_SUPPORT_FORWARDING_STORE_H_
