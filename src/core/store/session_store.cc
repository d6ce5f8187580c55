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
#include <optional>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <utility>

#include "recap/measure.h"

#include "model/transcript_access.h"
#include "recap_internal/history_search.h"
#include "recap_internal/store_rules.h"

namespace recap {
inline namespace v0 {

SessionStore::~SessionStore() = default;
MessageSource::~MessageSource() = default;

Result<std::uint64_t> SessionStore::Append(const std::string& session, Message message) {
  std::vector<Message> one;
  one.push_back(std::move(message));
  return AppendMessages(session, std::move(one));
}

Result<std::vector<UncertainCall>> SessionStore::UncertainToolCalls(const std::string& session) {
  Result<SessionState> state = Load(session);
  RECAP_RETURN_IF_ERROR(state);
  return FindUncertainToolCalls(state->transcript);
}

Status SessionStore::SaveLearned(const std::string&, const std::string&) { return Status::OK(); }

Status SessionStore::ForEachHistoryEntry(const std::string& session,
                                         const std::function<Status(HistoryEntry&&)>& visit) {
  Result<std::vector<HistoryEntry>> history = History(session);
  RECAP_RETURN_IF_ERROR(history);
  for (HistoryEntry& e : *history) {
    RECAP_RETURN_IF_ERROR(visit(std::move(e)));
  }
  return Status::OK();
}

Result<UndoOutcome> SessionStore::CommitUndo(const std::string& session, const UndoCommit&) {
  return Status::FailedPrecondition(
      "session " + internal::QuotedName(session) +
      ": this session store cannot undo a compaction (SessionStore::CommitUndo is not "
      "implemented by it); recap's in-memory, SQLite and PostgreSQL stores can");
}

Result<std::vector<HistoryHit>> SessionStore::SearchHistory(const std::string& session,
                                                            const HistorySearch& search) {
  RECAP_RETURN_IF_ERROR(internal::CheckSessionName(session));
  return internal::ScanHistory(*this, session, search);
}

namespace {

struct Entry {
  std::uint64_t seq = 0;
  std::shared_ptr<const Message> message;
  HistoryState state = HistoryState::kActive;
  std::string replaced_by;
  std::uint64_t turn = 0;
};

// A compaction or reduction, as CommitUndo takes it back: the history indexes of what it
// retired or kept (`span`, in their places' order) and of what it added.
struct RewriteRecord {
  bool compaction = true;
  std::uint64_t number = 0;
  std::string reason;
  std::vector<std::size_t> span;
  std::vector<std::size_t> added;
  bool undone = false;
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
  std::uint64_t undos = 0;
  std::uint64_t turns = 0;  // turn starts stored
  std::vector<RewriteRecord> rewrites;
  std::string learned;  // SaveLearned (R12.5)

  // `turn`: the turn a reduced copy inherits; none: counted from the message.
  std::size_t AddToHistory(const std::shared_ptr<const Message>& m,
                           std::optional<std::uint64_t> turn = std::nullopt) {
    Entry e;
    e.seq = history.empty() ? 1 : history.back().seq + 1;
    e.message = m;
    if (turn) {
      e.turn = *turn;
    } else {
      e.turn = internal::TurnOf(*m, turns);
      turns = std::max(turns, e.turn);
    }
    active[m->id] = history.size();
    history.push_back(std::move(e));
    return history.size() - 1;
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

class InMemorySessionStore final : public SessionStore {
 public:
  Result<SessionState> Load(const std::string& session) override {
    RECAP_RETURN_IF_ERROR(internal::CheckSessionName(session));
    std::lock_guard<std::mutex> lock(mu_);
    SessionState state;
    if (const Session* s = Find(session)) {
      state.transcript = s->transcript;  // copies pointers, not messages
      state.version = s->version;
      state.learned = s->learned;
    }
    return state;
  }

  Status SaveLearned(const std::string& session, const std::string& learned) override {
    RECAP_RETURN_IF_ERROR(internal::CheckSessionName(session));
    std::lock_guard<std::mutex> lock(mu_);
    if (Session* s = Find(session)) s->learned = learned;  // never written: nothing kept
    return Status::OK();
  }

  Result<SessionChanges> LoadChanges(const std::string& session,
                                     std::uint64_t since_version) override {
    RECAP_RETURN_IF_ERROR(internal::CheckSessionName(session));
    std::lock_guard<std::mutex> lock(mu_);
    static const Session kEmpty;
    const Session* found = Find(session);
    const Session& s = found ? *found : kEmpty;
    if (Status st = internal::CheckSinceVersion(session, since_version, s.version); !st.ok()) {
      return st;
    }
    SessionChanges changes;
    changes.version = s.version;
    changes.learned = s.learned;
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
    RECAP_RETURN_IF_ERROR(internal::CheckWrittenSessionName(session, false));
    std::lock_guard<std::mutex> lock(mu_);
    Session* existing = Find(session);
    if (messages.empty()) return existing ? existing->version : 0;

    // Validate the whole batch before anything is stored: an append is all-or-nothing too.
    Result<Transcript> prepared = internal::PrepareAppend(std::move(messages));
    RECAP_RETURN_IF_ERROR(prepared);
    const Transcript& batch = *prepared;
    for (std::size_t i = 0; existing && i < batch.size(); ++i) {
      if (existing->active.count(batch[i].id) != 0) {
        return internal::AppendIdTaken(session, i, batch[i].id);
      }
    }

    Session& s = existing ? *existing : sessions_[session];
    const std::size_t first = s.transcript.size();
    for (std::size_t i = 0; i < batch.size(); ++i) {
      internal::TranscriptAccess::AppendFrom(s.transcript, batch, i);
      s.AddToHistory(s.transcript.shared(s.transcript.size() - 1));
    }
    ++s.version;
    s.appends.push_back({s.version, first});
    return s.version;
  }

  Result<std::vector<std::uint64_t>> CreateSessions(std::vector<NewSession> sessions) override {
    RECAP_RETURN_IF_ERROR(internal::CheckNewSessions(sessions, false));
    std::lock_guard<std::mutex> lock(mu_);
    for (const NewSession& n : sessions) {
      if (const Session* s = Find(n.session)) return internal::SessionExists(n.session, s->version);
    }
    // Everything is read and checked into sessions of their own before any is stored.
    std::vector<Session> built(sessions.size());
    for (std::size_t k = 0; k < sessions.size(); ++k) {
      internal::NewSessionReader reader(sessions[k]);
      Message m;
      std::size_t chars = 0;
      for (;;) {
        Result<bool> more = reader.Next(&m, &chars);
        RECAP_RETURN_IF_ERROR(more);
        if (!*more) break;
        built[k].transcript.Append(std::move(m));
        built[k].AddToHistory(built[k].transcript.shared(built[k].transcript.size() - 1));
      }
      if (reader.count() == 0) return internal::NewSessionEmpty(sessions[k].session);
      built[k].version = 1;
      built[k].appends.push_back({1, 0});
    }
    std::vector<std::uint64_t> versions;
    for (std::size_t k = 0; k < sessions.size(); ++k) {
      sessions_[sessions[k].session] = std::move(built[k]);
      versions.push_back(1);
    }
    return versions;
  }

  Result<std::uint64_t> CommitCompaction(const std::string& session,
                                         const CompactionCommit& commit) override {
    RECAP_RETURN_IF_ERROR(internal::CheckWrittenSessionName(session, false));
    std::lock_guard<std::mutex> lock(mu_);
    Session* found = Find(session);
    RECAP_RETURN_IF_ERROR(CheckVersion(session, found, commit.expected_version));
    RECAP_RETURN_IF_ERROR(internal::CheckCompactionShape(session, commit));
    const Transcript& t = found->transcript;
    // The version matched, so the caller saw this very transcript: a wrong prefix is a bug
    // in the caller, not a race.
    const std::size_t span = commit.kept.size() + commit.replaced.size();
    std::vector<std::string> leading;
    for (std::size_t i = 0; i < span && i < t.size(); ++i) leading.push_back(t[i].id);
    if (Status st = internal::CheckCompactionSpan(
            session, commit, leading, t.size(),
            [&](const std::string& id) { return found->active.count(id) != 0; });
        !st.ok()) {
      return st;
    }

    // The checkpoint and the injected messages, with ids unique among what stays active.
    Transcript added;
    added.Append(commit.checkpoint);
    for (const Message& m : commit.injected) added.Append(m);
    std::unordered_set<std::string> taken(commit.kept.begin(), commit.kept.end());
    for (std::size_t i = span; i < t.size(); ++i) taken.insert(t[i].id);
    for (std::size_t k = 0; k < added.size(); ++k) {
      if (!taken.insert(added[k].id).second) {
        return internal::CommitIdTaken(session, internal::CompactionAddedName(commit, k),
                                       added[k].id);
      }
    }

    // Everything is valid: apply. The kept messages stay as they are (same entries of the
    // history), first.
    Session& s = *found;
    RewriteRecord record;
    record.number = ++s.compactions;
    record.reason = commit.reason;
    const std::string by = "compaction:" + std::to_string(record.number);
    const std::unordered_set<std::string> kept(commit.kept.begin(), commit.kept.end());
    Transcript next;
    for (std::size_t i = 0; i < span; ++i) {
      record.span.push_back(s.active.at(s.transcript[i].id));
      if (kept.count(s.transcript[i].id) != 0) {
        internal::TranscriptAccess::AppendFrom(next, s.transcript, i);
      }
    }
    for (const std::string& id : commit.replaced) s.Retire(id, by);
    for (std::size_t i = 0; i < added.size(); ++i) {
      record.added.push_back(s.AddToHistory(added.shared(i)));
      internal::TranscriptAccess::AppendFrom(next, added, i);
    }
    s.rewrites.push_back(std::move(record));
    for (std::size_t i = span; i < s.transcript.size(); ++i) {
      internal::TranscriptAccess::AppendFrom(next, s.transcript, i);
    }
    s.transcript = std::move(next);
    return s.MarkRewrite();
  }

  Result<std::uint64_t> CommitReduction(const std::string& session,
                                        const ReductionCommit& commit) override {
    RECAP_RETURN_IF_ERROR(internal::CheckWrittenSessionName(session, false));
    std::lock_guard<std::mutex> lock(mu_);
    Session* found = Find(session);
    RECAP_RETURN_IF_ERROR(CheckVersion(session, found, commit.expected_version));
    if (commit.replacements.empty()) return internal::NoReplacements(session);
    std::unordered_set<std::string> seen;
    for (std::size_t i = 0; i < commit.replacements.size(); ++i) {
      const std::string& id = commit.replacements[i].id;
      if (found->active.count(id) == 0) return internal::ReplacementNotActive(session, i, id);
      if (!seen.insert(id).second) return internal::ReplacedTwice(session, i, id);
    }

    Session& s = *found;
    std::unordered_map<std::string, std::size_t> position;
    for (std::size_t i = 0; i < s.transcript.size(); ++i) {
      if (seen.count(s.transcript[i].id) != 0) position.emplace(s.transcript[i].id, i);
    }
    std::vector<std::pair<std::size_t, Message>> changes;
    changes.reserve(commit.replacements.size());
    for (const Message& m : commit.replacements) changes.emplace_back(position.at(m.id), m);

    RewriteRecord record;
    record.compaction = false;
    record.number = ++s.reductions;
    const std::string by = "reduction:" + std::to_string(record.number);
    std::vector<std::uint64_t> turns;
    for (const Message& m : commit.replacements) {
      record.span.push_back(s.active.at(m.id));
      turns.push_back(s.history[record.span.back()].turn);
      s.Retire(m.id, by);
    }
    s.transcript.Set(std::move(changes));
    for (std::size_t k = 0; k < commit.replacements.size(); ++k) {
      record.added.push_back(
          s.AddToHistory(s.transcript.shared(position.at(commit.replacements[k].id)), turns[k]));
    }
    s.rewrites.push_back(std::move(record));
    return s.MarkRewrite();
  }

  Result<std::uint64_t> CommitRecovery(const std::string& session,
                                       const RecoveryCommit& commit) override {
    RECAP_RETURN_IF_ERROR(internal::CheckWrittenSessionName(session, false));
    std::lock_guard<std::mutex> lock(mu_);
    Session* found = Find(session);
    RECAP_RETURN_IF_ERROR(CheckVersion(session, found, commit.expected_version));
    std::vector<std::string> active_ids;
    active_ids.reserve(found->transcript.size());
    for (const Message& m : found->transcript) active_ids.push_back(m.id);
    Result<internal::RecoveryPlan> plan = internal::PlanRecovery(session, active_ids, commit);
    RECAP_RETURN_IF_ERROR(plan);

    Session& s = *found;
    ++s.recoveries;
    Transcript next;
    for (std::size_t i = 0; i < s.transcript.size(); ++i) {
      internal::TranscriptAccess::AppendFrom(next, s.transcript, i);
      auto it = plan->after.find(s.transcript[i].id);
      if (it == plan->after.end()) continue;
      for (std::size_t r : it->second) {
        internal::TranscriptAccess::AppendFrom(next, plan->results, r);
        s.AddToHistory(next.shared(next.size() - 1));
      }
    }
    s.transcript = std::move(next);
    return s.MarkRewrite();
  }

  Result<std::vector<HistoryEntry>> History(const std::string& session) override {
    RECAP_RETURN_IF_ERROR(internal::CheckSessionName(session));
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
      h.turn = e.turn;
      out.push_back(std::move(h));
    }
    return out;
  }

  Result<UndoOutcome> CommitUndo(const std::string& session, const UndoCommit& commit) override {
    RECAP_RETURN_IF_ERROR(internal::CheckWrittenSessionName(session, false));
    std::lock_guard<std::mutex> lock(mu_);
    Session* found = Find(session);
    RECAP_RETURN_IF_ERROR(CheckVersion(session, found, commit.expected_version));
    Session& s = *found;
    UndoOutcome out;
    out.version = s.version;
    RewriteRecord* last = nullptr;
    for (auto it = s.rewrites.rbegin(); it != s.rewrites.rend(); ++it) {
      if (!it->undone) {
        last = &*it;
        break;
      }
    }
    if (!last) return out;
    const std::string name =
        std::string(last->compaction ? "compaction:" : "reduction:") + std::to_string(last->number);
    // Every message it added must be active still (an undo takes back the newest first, so they
    // are), and no message appended since may hold the id of one it restores.
    std::unordered_set<std::size_t> added(last->added.begin(), last->added.end());
    std::unordered_set<std::size_t> span(last->span.begin(), last->span.end());
    for (std::size_t h : last->added) {
      if (s.history[h].state != HistoryState::kActive) {
        return internal::UndoImpossible(session, name, "a message it added is no longer active");
      }
    }
    for (std::size_t h : last->span) {
      const Entry& e = s.history[h];
      if (e.state == HistoryState::kActive) continue;  // a kept one
      auto it = s.active.find(e.message->id);
      if (it != s.active.end() && added.count(it->second) == 0 && span.count(it->second) == 0) {
        return internal::UndoTaken(session, name, e.message->id);
      }
    }
    const std::string by = "undo:" + std::to_string(++s.undos);
    Transcript next;
    if (last->compaction) {
      // The span in its places, then what is active and was neither in it nor added by it.
      for (std::size_t h : last->span) next.Append(s.history[h].message);
      for (std::size_t i = 0; i < s.transcript.size(); ++i) {
        const std::size_t h = s.active.at(s.transcript[i].id);
        if (added.count(h) == 0 && span.count(h) == 0) {
          internal::TranscriptAccess::AppendFrom(next, s.transcript, i);
        }
      }
    } else {
      std::unordered_map<std::size_t, std::size_t> original;  // added -> span
      for (std::size_t k = 0; k < last->added.size(); ++k) {
        original.emplace(last->added[k], last->span[k]);
      }
      for (std::size_t i = 0; i < s.transcript.size(); ++i) {
        auto it = original.find(s.active.at(s.transcript[i].id));
        if (it == original.end()) {
          internal::TranscriptAccess::AppendFrom(next, s.transcript, i);
        } else {
          next.Append(s.history[it->second].message);
        }
      }
    }
    for (std::size_t h : last->added) {
      Entry& e = s.history[h];
      s.active.erase(e.message->id);
      e.state = HistoryState::kCompacted;
      e.replaced_by = by;
    }
    for (std::size_t h : last->span) {
      Entry& e = s.history[h];
      if (e.state == HistoryState::kActive) continue;
      e.state = HistoryState::kActive;
      e.replaced_by.clear();
      s.active[e.message->id] = h;
      ++out.restored;
    }
    out.retired = last->added.size();
    out.undone = true;
    out.commit = name;
    out.reason = last->reason;
    last->undone = true;
    s.transcript = std::move(next);
    out.version = s.MarkRewrite();
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
  // kConflict unless `expected` is the session's version; a session never written has
  // nothing to commit against.
  static Status CheckVersion(const std::string& session, const Session* s, std::uint64_t expected) {
    if (Status st = internal::CheckExpectedVersion(session, expected, s ? s->version : 0);
        !st.ok()) {
      return st;
    }
    if (!s) return internal::NothingToCommitAgainst(session);
    return Status::OK();
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
