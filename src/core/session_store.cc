// SessionStore's shared code and the in-memory reference store.
//
// The in-memory store keeps, per session, the active Transcript (shared immutable messages),
// the history (the same message objects, so a message is stored once however it is reached)
// and a log of the appends since the last rewrite. Every commit validates everything against
// the current state before it touches anything, so a rejected commit cannot leave half a
// change behind (R8.1).
#include "recap/session_store.h"

#include <algorithm>
#include <map>
#include <mutex>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <utility>

#include "recap/measure.h"
#include "transcript_access.h"

namespace recap {
inline namespace v0 {

SessionStore::~SessionStore() = default;

Result<std::uint64_t> SessionStore::Append(const std::string& session, Message message) {
  std::vector<Message> one;
  one.push_back(std::move(message));
  return AppendMessages(session, std::move(one));
}

Result<std::vector<UncertainCall>> SessionStore::UncertainToolCalls(const std::string& session) {
  Result<SessionState> state = Load(session);
  if (!state.ok()) return state.status();
  return FindUncertainToolCalls(state->transcript);
}

namespace {

std::string Quoted(const std::string& s) { return "\"" + ToValidUtf8(s) + "\""; }

struct Entry {
  std::uint64_t seq = 0;
  std::shared_ptr<const Message> message;
  HistoryState state = HistoryState::kActive;
  std::string replaced_by;
};

// A batch of appends: it produced `version`, and its first message sits at `first` in the
// transcript. Positions stay valid until the next rewrite, which clears the log.
struct AppendRecord {
  std::uint64_t version;
  std::size_t first;
};

struct Session {
  Transcript transcript;
  std::uint64_t version = 0;
  // The version produced by the last change that was not an append. LoadChanges(since) can
  // answer with appends alone exactly when since >= rewrite_version.
  std::uint64_t rewrite_version = 0;
  std::vector<AppendRecord> appends;
  std::vector<Entry> history;
  // Active message id -> its index in `history`. Ids are unique among active messages.
  std::unordered_map<std::string, std::size_t> active;
  std::uint64_t compactions = 0;
  std::uint64_t reductions = 0;
  std::uint64_t recoveries = 0;

  void AddToHistory(const std::shared_ptr<const Message>& m) {
    Entry e;
    e.seq = history.empty() ? 1 : history.back().seq + 1;
    e.message = m;
    active[m->id] = history.size();
    history.push_back(std::move(e));
  }

  void Retire(const std::string& id, const std::string& by) {
    auto it = active.find(id);
    Entry& e = history[it->second];
    e.state = HistoryState::kCompacted;
    e.replaced_by = by;
    active.erase(it);
  }

  // Called after each commit: the version moves on and positions recorded for appends no
  // longer hold.
  std::uint64_t MarkRewrite() {
    ++version;
    rewrite_version = version;
    appends.clear();
    return version;
  }
};

// Gives `m` a fresh id when it has none. Ids are repaired like the rest of the message is by
// Transcript, so that uniqueness is checked on the id that will actually be stored.
void AssignId(Message& m) {
  if (m.id.empty()) {
    m.id = NewMessageId();
  } else if (!IsValidUtf8(m.id)) {
    m.id = ToValidUtf8(m.id);
  }
}

// Assigns ids to `incoming` and checks that none collides with an id in `taken` or with
// another incoming message; adds the new ids to `taken`. `what` names the messages for the
// error ("the checkpoint", "injected message").
Status ClaimIds(std::vector<Message*> incoming, std::unordered_set<std::string>& taken,
                const std::string& session, const char* what) {
  for (std::size_t i = 0; i < incoming.size(); ++i) {
    Message& m = *incoming[i];
    AssignId(m);
    if (!taken.insert(m.id).second) {
      const std::string which =
          incoming.size() == 1 ? std::string(what) : std::string(what) + " " + std::to_string(i);
      return Status::InvalidArgument(
          which + " has id " + Quoted(m.id) + ", which an active message of session " +
          Quoted(session) + " or another message of the same commit already has; ids must be " +
          "unique. Leave the id empty to get a fresh one");
    }
  }
  return Status::OK();
}

class InMemorySessionStore final : public SessionStore {
 public:
  Result<SessionState> Load(const std::string& session) override {
    if (Status s = CheckName(session); !s.ok()) return s;
    std::lock_guard<std::mutex> lock(mu_);
    SessionState state;
    if (const Session* s = Find(session)) {
      state.transcript = s->transcript;  // copies pointers, not messages
      state.version = s->version;
    }
    return state;
  }

  Result<SessionChanges> LoadChanges(const std::string& session,
                                     std::uint64_t since_version) override {
    if (Status s = CheckName(session); !s.ok()) return s;
    std::lock_guard<std::mutex> lock(mu_);
    static const Session kEmpty;
    const Session* found = Find(session);
    const Session& s = found ? *found : kEmpty;
    if (since_version > s.version) {
      return Status::InvalidArgument("session " + Quoted(session) + " is at version " +
                                     std::to_string(s.version) + "; version " +
                                     std::to_string(since_version) +
                                     " is in its future (was it read from another store?)");
    }
    SessionChanges changes;
    changes.version = s.version;
    if (since_version >= s.rewrite_version) {
      changes.appended_only = true;
      // The first batch that produced a version after `since_version`.
      auto it =
          std::upper_bound(s.appends.begin(), s.appends.end(), since_version,
                           [](std::uint64_t v, const AppendRecord& r) { return v < r.version; });
      if (it != s.appends.end()) {
        changes.appended.reserve(s.transcript.size() - it->first);
        for (std::size_t i = it->first; i < s.transcript.size(); ++i) {
          changes.appended.push_back(s.transcript[i]);
        }
      }
    } else {
      changes.appended_only = false;
      changes.transcript = s.transcript;
    }
    return changes;
  }

  Result<std::uint64_t> AppendMessages(const std::string& session,
                                       std::vector<Message> messages) override {
    if (Status s = CheckName(session); !s.ok()) return s;
    std::lock_guard<std::mutex> lock(mu_);
    Session* existing = Find(session);
    if (messages.empty()) return existing ? existing->version : 0;

    // Validate the whole batch before anything is stored: an append is all-or-nothing too.
    std::unordered_set<std::string> batch;
    for (std::size_t i = 0; i < messages.size(); ++i) {
      Message& m = messages[i];
      AssignId(m);
      const bool in_session = existing && existing->active.count(m.id) != 0;
      if (in_session || !batch.insert(m.id).second) {
        return Status::InvalidArgument(
            "message " + std::to_string(i) + " of the append has id " + Quoted(m.id) + ", which " +
            (in_session ? "an active message of session " + Quoted(session) + " already has"
                        : std::string("an earlier message of the same append has")) +
            "; ids must be unique. Leave the id empty to get a fresh one");
      }
    }

    Session& s = existing ? *existing : sessions_[session];
    const std::size_t first = s.transcript.size();
    for (Message& m : messages) {
      s.transcript.Append(std::move(m));
      s.AddToHistory(s.transcript.shared(s.transcript.size() - 1));
    }
    ++s.version;
    s.appends.push_back({s.version, first});
    return s.version;
  }

  Result<std::uint64_t> CommitCompaction(const std::string& session,
                                         const CompactionCommit& commit) override {
    if (Status s = CheckName(session); !s.ok()) return s;
    std::lock_guard<std::mutex> lock(mu_);
    Session* found = Find(session);
    if (Status st = CheckVersion(session, found, commit.expected_version); !st.ok()) return st;
    static const Session kEmpty;
    const Session& cur = found ? *found : kEmpty;
    const Transcript& t = cur.transcript;

    if (commit.replaced.empty()) {
      return Status::InvalidArgument("a compaction of session " + Quoted(session) +
                                     " must replace at least one message; `replaced` is empty");
    }
    if (!commit.checkpoint.summary) {
      return Status::InvalidArgument(
          "the checkpoint of a compaction must be flagged summary (SPEC R4.4); the one given "
          "for session " +
          Quoted(session) + " is not");
    }
    // The version matched, so the caller saw this very transcript: a wrong prefix is a bug
    // in the caller, not a race.
    if (commit.replaced.size() > t.size()) {
      return Status::InvalidArgument("the compaction replaces " +
                                     std::to_string(commit.replaced.size()) +
                                     " messages but session " + Quoted(session) + " has only " +
                                     std::to_string(t.size()) + " active messages");
    }
    for (std::size_t i = 0; i < commit.replaced.size(); ++i) {
      const std::string& id = commit.replaced[i];
      if (t[i].id == id) continue;
      if (cur.active.count(id) == 0) {
        return Status::InvalidArgument("replaced[" + std::to_string(i) + "] is " + Quoted(id) +
                                       ", which is not an active message of session " +
                                       Quoted(session));
      }
      return Status::InvalidArgument(
          "replaced[" + std::to_string(i) + "] is " + Quoted(id) + " but active message " +
          std::to_string(i) + " of session " + Quoted(session) + " is " + Quoted(t[i].id) +
          "; a compaction replaces the leading messages of the transcript, in order");
    }

    Message checkpoint = commit.checkpoint;
    std::vector<Message> injected = commit.injected;
    std::unordered_set<std::string> taken;
    for (std::size_t i = commit.replaced.size(); i < t.size(); ++i) taken.insert(t[i].id);
    if (Status st = ClaimIds({&checkpoint}, taken, session, "the checkpoint"); !st.ok()) {
      return st;
    }
    std::vector<Message*> inj;
    for (Message& m : injected) inj.push_back(&m);
    if (Status st = ClaimIds(inj, taken, session, "injected message"); !st.ok()) return st;

    // Everything is valid: apply. (`found` is set: an unknown session has nothing to replace.)
    Session& s = *found;
    const std::string by = "compaction:" + std::to_string(++s.compactions);
    for (const std::string& id : commit.replaced) s.Retire(id, by);
    Transcript next;
    next.Append(std::move(checkpoint));
    for (Message& m : injected) next.Append(std::move(m));
    for (std::size_t i = 0; i < next.size(); ++i) s.AddToHistory(next.shared(i));
    for (std::size_t i = commit.replaced.size(); i < s.transcript.size(); ++i) {
      internal::TranscriptAccess::AppendFrom(next, s.transcript, i);
    }
    s.transcript = std::move(next);
    return s.MarkRewrite();
  }

  Result<std::uint64_t> CommitReduction(const std::string& session,
                                        const ReductionCommit& commit) override {
    if (Status s = CheckName(session); !s.ok()) return s;
    std::lock_guard<std::mutex> lock(mu_);
    Session* found = Find(session);
    if (Status st = CheckVersion(session, found, commit.expected_version); !st.ok()) return st;
    if (commit.replacements.empty()) {
      return Status::InvalidArgument("a reduction of session " + Quoted(session) +
                                     " must replace at least one message; `replacements` is "
                                     "empty");
    }
    std::unordered_set<std::string> seen;
    for (std::size_t i = 0; i < commit.replacements.size(); ++i) {
      const std::string& id = commit.replacements[i].id;
      if (!found || found->active.count(id) == 0) {
        return Status::InvalidArgument("replacement " + std::to_string(i) + " has id " +
                                       Quoted(id) + ", which is not an active message of session " +
                                       Quoted(session) +
                                       "; a replacement keeps the id of the message it replaces");
      }
      if (!seen.insert(id).second) {
        return Status::InvalidArgument("replacement " + std::to_string(i) + " replaces " +
                                       Quoted(id) + " a second time in the same reduction");
      }
    }

    Session& s = *found;
    std::unordered_map<std::string, std::size_t> position;
    for (std::size_t i = 0; i < s.transcript.size(); ++i) {
      if (seen.count(s.transcript[i].id) != 0) position.emplace(s.transcript[i].id, i);
    }
    std::vector<std::pair<std::size_t, Message>> changes;
    changes.reserve(commit.replacements.size());
    for (const Message& m : commit.replacements) changes.emplace_back(position.at(m.id), m);

    const std::string by = "reduction:" + std::to_string(++s.reductions);
    for (const Message& m : commit.replacements) s.Retire(m.id, by);
    s.transcript.Set(std::move(changes));
    for (const Message& m : commit.replacements) {
      s.AddToHistory(s.transcript.shared(position.at(m.id)));
    }
    return s.MarkRewrite();
  }

  Result<std::uint64_t> CommitRecovery(const std::string& session,
                                       const RecoveryCommit& commit) override {
    if (Status s = CheckName(session); !s.ok()) return s;
    std::lock_guard<std::mutex> lock(mu_);
    Session* found = Find(session);
    if (Status st = CheckVersion(session, found, commit.expected_version); !st.ok()) return st;
    if (commit.results.empty()) {
      return Status::InvalidArgument("a recovery of session " + Quoted(session) +
                                     " must record at least one result; `results` is empty");
    }
    std::vector<Message> results;
    results.reserve(commit.results.size());
    std::unordered_map<std::string, std::vector<std::size_t>> after;  // id -> results, in order
    for (std::size_t i = 0; i < commit.results.size(); ++i) {
      const std::string& anchor = commit.results[i].after;
      if (!found || found->active.count(anchor) == 0) {
        return Status::InvalidArgument(
            "recovered result " + std::to_string(i) + " goes after " + Quoted(anchor) +
            ", which is not an active message of session " + Quoted(session));
      }
      results.push_back(commit.results[i].result);
      after[anchor].push_back(i);
    }
    std::unordered_set<std::string> taken;
    for (const auto& kv : found->active) taken.insert(kv.first);
    std::vector<Message*> incoming;
    for (Message& m : results) incoming.push_back(&m);
    if (Status st = ClaimIds(incoming, taken, session, "recovered result"); !st.ok()) return st;

    Session& s = *found;
    ++s.recoveries;
    Transcript next;
    for (std::size_t i = 0; i < s.transcript.size(); ++i) {
      internal::TranscriptAccess::AppendFrom(next, s.transcript, i);
      auto it = after.find(s.transcript[i].id);
      if (it == after.end()) continue;
      for (std::size_t r : it->second) {
        next.Append(std::move(results[r]));
        s.AddToHistory(next.shared(next.size() - 1));
      }
    }
    s.transcript = std::move(next);
    return s.MarkRewrite();
  }

  Result<std::vector<HistoryEntry>> History(const std::string& session) override {
    if (Status s = CheckName(session); !s.ok()) return s;
    std::lock_guard<std::mutex> lock(mu_);
    std::vector<HistoryEntry> out;
    const Session* s = Find(session);
    if (!s) return out;
    out.reserve(s->history.size());
    for (const Entry& e : s->history) {
      HistoryEntry h;
      h.seq = e.seq;
      h.message = *e.message;
      h.state = e.state;
      h.replaced_by = e.replaced_by;
      out.push_back(std::move(h));
    }
    return out;
  }

  Result<std::vector<std::string>> ListSessions() override {
    std::lock_guard<std::mutex> lock(mu_);
    std::vector<std::string> out;
    out.reserve(sessions_.size());
    for (const auto& kv : sessions_) out.push_back(kv.first);  // std::map: already sorted
    return out;
  }

 private:
  static Status CheckName(const std::string& session) {
    if (session.empty()) {
      return Status::InvalidArgument("the session id is empty; give every session a name");
    }
    return Status::OK();
  }

  static Status CheckVersion(const std::string& session, const Session* s, std::uint64_t expected) {
    const std::uint64_t now = s ? s->version : 0;
    if (expected == now) return Status::OK();
    if (expected > now) {
      return Status::Conflict("session " + Quoted(session) + " is at version " +
                              std::to_string(now) + ", not " + std::to_string(expected) +
                              " (was that version read from another store?); reload and retry");
    }
    return Status::Conflict("session " + Quoted(session) + " changed since version " +
                            std::to_string(expected) + " (now " + std::to_string(now) +
                            "); reload and retry");
  }

  Session* Find(const std::string& session) {
    auto it = sessions_.find(session);
    return it == sessions_.end() ? nullptr : &it->second;
  }

  // One lock for the whole store: every operation is short (commits are linear in one
  // session's size, LoadChanges in what was appended), so finer locking would buy little.
  std::mutex mu_;
  std::map<std::string, Session> sessions_;
};

}  // namespace

std::shared_ptr<SessionStore> NewInMemorySessionStore() {
  return std::make_shared<InMemorySessionStore>();
}

}  // namespace v0
}  // namespace recap
