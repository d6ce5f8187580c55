// A host's own SessionStore, checked with the installed conformance suite (recap::testing).
// HostStore keeps its sessions in recap's in-memory store and forwards every call, as a host's
// caching or metrics layer over a store would; BrokenStore is the same with one bug (it
// appends a batch of messages in reverse order), which the suite must catch.
#include <algorithm>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include <recap/session_store.h>
#include <recap/testing/store_conformance.h>

namespace {

class HostStore : public recap::SessionStore {
 public:
  explicit HostStore(bool reverse_appends)
      : inner_(recap::NewInMemorySessionStore()), reverse_appends_(reverse_appends) {}

  recap::Result<recap::SessionState> Load(const std::string& session) override {
    return inner_->Load(session);
  }
  recap::Result<recap::SessionChanges> LoadChanges(const std::string& session,
                                                   std::uint64_t since_version) override {
    return inner_->LoadChanges(session, since_version);
  }
  recap::Result<std::uint64_t> AppendMessages(const std::string& session,
                                              std::vector<recap::Message> messages) override {
    if (reverse_appends_) std::reverse(messages.begin(), messages.end());
    return inner_->AppendMessages(session, std::move(messages));
  }
  recap::Result<std::vector<std::uint64_t>> CreateSessions(
      std::vector<recap::NewSession> sessions) override {
    return inner_->CreateSessions(std::move(sessions));
  }
  recap::Result<std::uint64_t> CommitCompaction(const std::string& session,
                                                const recap::CompactionCommit& commit) override {
    return inner_->CommitCompaction(session, commit);
  }
  recap::Result<std::uint64_t> CommitReduction(const std::string& session,
                                               const recap::ReductionCommit& commit) override {
    return inner_->CommitReduction(session, commit);
  }
  recap::Result<std::uint64_t> CommitRecovery(const std::string& session,
                                              const recap::RecoveryCommit& commit) override {
    return inner_->CommitRecovery(session, commit);
  }
  recap::Result<recap::UndoOutcome> CommitUndo(const std::string& session,
                                               const recap::UndoCommit& commit) override {
    return inner_->CommitUndo(session, commit);
  }
  recap::Result<std::vector<recap::HistoryEntry>> History(const std::string& session) override {
    return inner_->History(session);
  }
  recap::Result<std::vector<std::string>> ListSessions() override { return inner_->ListSessions(); }
  recap::Result<std::vector<recap::UncertainCall>> UncertainToolCalls(
      const std::string& session) override {
    return inner_->UncertainToolCalls(session);
  }
  recap::Status SaveLearned(const std::string& session, const std::string& learned) override {
    return inner_->SaveLearned(session, learned);
  }
  recap::Status ForEachHistoryEntry(
      const std::string& session,
      const std::function<recap::Status(recap::HistoryEntry&&)>& visit) override {
    return inner_->ForEachHistoryEntry(session, visit);
  }

 private:
  std::shared_ptr<recap::SessionStore> inner_;
  bool reverse_appends_;
};

}  // namespace

RECAP_SESSION_STORE_CONFORMANCE_TESTS("host store",
                                      [] { return std::make_shared<HostStore>(false); })
RECAP_SESSION_STORE_CONFORMANCE_TESTS("broken store",
                                      [] { return std::make_shared<HostStore>(true); })
