// The SQLite session store (recap/sqlite/sqlite_store.h).
//
// Every public call takes the store's mutex, and every write is one IMMEDIATE transaction that
// reads the session row, checks, writes, and moves the version — so two processes on the same
// file serialize on SQLite's write lock and the loser of a race sees the new version (R8.2).
// The connection, its transactions and SQLite's errors are connection.h's. Over 800 lines as
// one idea: the eleven methods of SessionStore on SQLite's tables and the row helpers they share
// (finding, locking and versioning a session; inserting and retiring messages), and
// CreateSqliteSessions, which runs CreateSessions on a store built aside (aside_file.h).
#include "recap/sqlite/sqlite_store.h"

#include <algorithm>
#include <cstdint>
#include <limits>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

#include <sys/stat.h>

#include "recap/measure.h"
#include "recap/transcript.h"

#include "aside_file.h"
#include "connection.h"
#include "recall_index.h"
#include "recap_internal/body_codec.h"
#include "recap_internal/history_search.h"
#include "recap_internal/store_rules.h"

namespace recap {
inline namespace v0 {

namespace {

using internal::DecodeBody;
using internal::EncodeBody;
using internal::EncodeBodyPieces;
using internal::EncodedBodySize;
using sqlite_internal::Abort;
using sqlite_internal::AsideFile;
using sqlite_internal::Connection;
using sqlite_internal::kSchemaVersion;
using sqlite_internal::NowUtc;
using sqlite_internal::OpenConnection;
using sqlite_internal::Quoted;

Status CheckName(const std::string& session) { return internal::CheckSessionName(session); }

using internal::SessionRow;

class SqliteSessionStore final : public SessionStore {
 public:
  explicit SqliteSessionStore(std::unique_ptr<Connection> c) : c_(std::move(c)) {}

  bool AllowReserved() const { return c_->options().allow_reserved_sessions; }
  Status CheckWritten(const std::string& session) const {
    return internal::CheckWrittenSessionName(session, AllowReserved());
  }

  Result<SessionState> Load(const std::string& session) override {
    RECAP_RETURN_IF_ERROR(CheckName(session));
    std::lock_guard<std::mutex> lock(mu_);
    SessionState state;
    Status s = c_->Transaction("loading session " + Quoted(session), false, [&] {
      std::optional<SessionRow> row = FindSession(session);
      if (!row) return;
      state.version = row->version;
      state.transcript = ReadActive(row->id, std::nullopt);
      state.learned = ReadLearned(row->id);
    });
    RECAP_RETURN_IF_ERROR(s);
    return state;
  }

  Result<SessionChanges> LoadChanges(const std::string& session,
                                     std::uint64_t since_version) override {
    RECAP_RETURN_IF_ERROR(CheckName(session));
    std::lock_guard<std::mutex> lock(mu_);
    SessionChanges changes;
    Status s = c_->Transaction("loading the changes of session " + Quoted(session), false, [&] {
      std::optional<SessionRow> row = FindSession(session);
      const std::uint64_t version = row ? row->version : 0;
      if (Status future = internal::CheckSinceVersion(session, since_version, version);
          !future.ok()) {
        throw Abort{future};
      }
      changes.version = version;
      if (!row) return;
      changes.learned = ReadLearned(row->id);
      if (since_version >= row->rewrite_version) {
        changes.appended_only = true;
        Transcript appended = ReadActive(row->id, since_version);
        changes.appended = appended.ToVector();
      } else {
        changes.appended_only = false;
        changes.transcript = ReadActive(row->id, std::nullopt);
      }
    });
    RECAP_RETURN_IF_ERROR(s);
    return changes;
  }

  Result<std::uint64_t> AppendMessages(const std::string& session,
                                       std::vector<Message> messages) override {
    RECAP_RETURN_IF_ERROR(CheckWritten(session));
    // Ids, UTF-8 repair and sizes exactly as the in-memory store and Transcript do them.
    Result<Transcript> prepared = internal::PrepareAppend(std::move(messages));
    RECAP_RETURN_IF_ERROR(prepared);
    const Transcript& batch = *prepared;
    std::lock_guard<std::mutex> lock(mu_);
    std::uint64_t version = 0;
    Status s = c_->Transaction("appending to session " + Quoted(session), !batch.empty(), [&] {
      std::optional<SessionRow> row = FindSession(session);
      if (batch.empty()) {
        version = row ? row->version : 0;
        return;
      }
      const std::string now = NowUtc();
      if (!row) row = CreateSession(session, now);
      version = row->version + 1;
      std::int64_t position = NextPosition(row->id);
      std::uint64_t turns = row->turns;
      for (std::size_t i = 0; i < batch.size(); ++i) {
        if (IsActiveId(row->id, batch[i].id)) {
          throw Abort{internal::AppendIdTaken(session, i, batch[i].id)};
        }
        turns = internal::TurnOf(batch[i], turns);
        InsertMessage(row->id, batch[i], batch.chars(i), position++, version, now, turns);
      }
      SetVersion(row->id, version, row->rewrite_version, turns);
    });
    RECAP_RETURN_IF_ERROR(s);
    return version;
  }

  Result<std::vector<std::uint64_t>> CreateSessions(std::vector<NewSession> sessions) override {
    RECAP_RETURN_IF_ERROR(internal::CheckNewSessions(sessions, AllowReserved()));
    std::lock_guard<std::mutex> lock(mu_);
    std::vector<std::uint64_t> versions;
    const std::string doing = sessions.size() == 1
                                  ? "creating session " + Quoted(sessions[0].session)
                                  : "creating sessions " + Quoted(sessions[0].session) + " and " +
                                        std::to_string(sessions.size() - 1) + " more";
    // One IMMEDIATE transaction: the "never written" check and every message commit together,
    // and a second process creating the same session waits for this one, then sees it exists.
    // A long new session is one large transaction: with SQLite's default page cache (2 MB)
    // its index pages would be written to the WAL and read back again and again, so the cache
    // may grow for the call (it is a limit, not an allocation) and is set back after.
    //
    // Each multi-row INSERT in that transaction also keeps a statement journal (the pages it
    // changes, to undo the one statement if it fails), which SQLite spills to a temporary
    // file past 64 KiB: for 1,000,000 messages that was 190,000 extra small writes and a
    // sixth of the import's time. Kept in memory for the call instead; a statement of
    // kRows rows journals a few pages (new pages, such as a big body's, are not journaled).
    const std::int64_t cache_pages = c_->db().execAndGet("PRAGMA cache_size").getInt64();
    const std::int64_t temp_store = c_->db().execAndGet("PRAGMA temp_store").getInt64();
    c_->db().exec("PRAGMA cache_size = -65536");
    c_->db().exec("PRAGMA temp_store = MEMORY");
    Status s = c_->Transaction(doing, true, [&] {
      versions.clear();
      for (const NewSession& n : sessions) {
        if (std::optional<SessionRow> row = FindSession(n.session)) {
          throw Abort{internal::SessionExists(n.session, row->version)};
        }
      }
      const std::string now = NowUtc();
      for (NewSession& n : sessions) {
        SessionRow row = CreateSession(n.session, now);
        internal::NewSessionReader reader(n);
        BulkInsert bulk(*this, row.id, now);
        Message m;
        std::size_t chars = 0;
        for (;;) {
          Result<bool> more = reader.Next(&m, &chars);
          if (!more.ok()) throw Abort{more.status()};
          if (!*more) break;
          bulk.Add(m, chars);
        }
        bulk.Flush();
        if (reader.count() == 0) throw Abort{internal::NewSessionEmpty(n.session)};
        SetVersion(row.id, 1, 0, bulk.turns());
        versions.push_back(1);
      }
    });
    c_->db().exec("PRAGMA cache_size = " + std::to_string(cache_pages));
    c_->db().exec("PRAGMA temp_store = " + std::to_string(temp_store));
    RECAP_RETURN_IF_ERROR(s);
    return versions;
  }

  Result<std::uint64_t> CommitCompaction(const std::string& session,
                                         const CompactionCommit& commit) override {
    RECAP_RETURN_IF_ERROR(CheckWritten(session));
    std::lock_guard<std::mutex> lock(mu_);
    std::uint64_t version = 0;
    Status s = c_->Transaction("committing a compaction of session " + Quoted(session), true, [&] {
      SessionRow row = CheckVersion(session, commit.expected_version);
      if (Status shape = internal::CheckCompactionShape(session, commit); !shape.ok()) {
        throw Abort{shape};
      }
      // The span: the leading active messages, which are the kept and the replaced ones.
      const std::size_t span = commit.kept.size() + commit.replaced.size();
      SQLite::Statement& head = c_->Stmt(
          "SELECT message_id, position, seq FROM messages WHERE session_id = ? AND position IS "
          "NOT NULL ORDER BY position LIMIT ?");
      head.bind(1, row.id);
      head.bind(2, static_cast<std::int64_t>(span));
      std::vector<std::string> leading;
      std::vector<std::int64_t> seqs;
      std::int64_t last_position = 0;
      while (head.executeStep()) {
        leading.emplace_back(head.getColumn(0).getText());
        last_position = head.getColumn(1).getInt64();
        seqs.push_back(head.getColumn(2).getInt64());
      }
      head.reset();
      if (Status st = internal::CheckCompactionSpan(
              session, commit, leading, leading.size() < span ? leading.size() : span,
              [&](const std::string& id) { return IsActiveId(row.id, id); });
          !st.ok()) {
        throw Abort{st};
      }

      version = row.version + 1;
      const std::int64_t number = row.compactions + 1;
      const std::string by = "compaction:" + std::to_string(number);
      SQLite::Statement& retire = c_->Stmt(
          "UPDATE messages SET position = NULL, replaced_by = ? WHERE session_id = ? AND "
          "position IS NOT NULL AND position <= ?");
      retire.bind(1, by);
      retire.bind(2, row.id);
      retire.bind(3, last_position);
      retire.exec();

      // The kept messages, then the checkpoint and the injected messages, take the places just
      // before the messages after the span.
      const internal::CompactionPlacement placed = internal::PlaceCompaction(commit, last_position);
      const Transcript& added = placed.added;
      std::int64_t position = placed.first_position;
      if (!commit.kept.empty()) {
        const std::unordered_set<std::string> kept(commit.kept.begin(), commit.kept.end());
        SQLite::Statement& restore =
            c_->Stmt("UPDATE messages SET position = ?, replaced_by = NULL WHERE seq = ?");
        for (std::size_t j = 0; j < leading.size(); ++j) {
          if (kept.count(leading[j]) == 0) continue;
          restore.reset();
          restore.bind(1, position++);
          restore.bind(2, seqs[j]);
          restore.exec();
        }
      }
      std::unordered_set<std::string> ids;
      const std::string now = NowUtc();
      std::vector<std::int64_t> added_seqs;
      for (std::size_t k = 0; k < added.size(); ++k) {
        if (!ids.insert(added[k].id).second || IsActiveId(row.id, added[k].id)) {
          throw Abort{internal::CommitIdTaken(session, internal::CompactionAddedName(commit, k),
                                              added[k].id)};
        }
        added_seqs.push_back(
            InsertMessage(row.id, added[k], added.chars(k), position++, version, now, row.turns));
      }
      MarkRewrite(row.id, version, CommitKind::kCompaction, number);
      LogCommit(row.id, version, "compaction", number, commit.reason, commit.replaced.size(),
                added.size(), now, &seqs, &added_seqs);
    });
    RECAP_RETURN_IF_ERROR(s);
    return version;
  }

  Result<std::uint64_t> CommitReduction(const std::string& session,
                                        const ReductionCommit& commit) override {
    RECAP_RETURN_IF_ERROR(CheckWritten(session));
    std::lock_guard<std::mutex> lock(mu_);
    std::uint64_t version = 0;
    Status s = c_->Transaction("committing a reduction of session " + Quoted(session), true, [&] {
      SessionRow row = CheckVersion(session, commit.expected_version);
      if (commit.replacements.empty()) {
        throw Abort{internal::NoReplacements(session)};
      }
      std::unordered_set<std::string> seen;
      std::vector<std::pair<std::int64_t, std::int64_t>> targets;  // seq, position
      std::vector<std::uint64_t> turns;
      for (std::size_t i = 0; i < commit.replacements.size(); ++i) {
        const std::string& id = commit.replacements[i].id;
        SQLite::Statement& find = c_->Stmt(
            "SELECT seq, position, turn FROM messages WHERE session_id = ? AND message_id = ? AND "
            "position IS NOT NULL");
        find.bind(1, row.id);
        find.bind(2, id);
        if (!find.executeStep()) {
          throw Abort{internal::ReplacementNotActive(session, i, id)};
        }
        targets.emplace_back(find.getColumn(0).getInt64(), find.getColumn(1).getInt64());
        turns.push_back(static_cast<std::uint64_t>(find.getColumn(2).getInt64()));
        find.reset();
        if (!seen.insert(id).second) {
          throw Abort{internal::ReplacedTwice(session, i, id)};
        }
      }
      version = row.version + 1;
      const std::int64_t number = row.reductions + 1;
      const std::string by = "reduction:" + std::to_string(number);
      const std::string now = NowUtc();
      Transcript added;
      for (const Message& m : commit.replacements) added.Append(m);
      std::vector<std::int64_t> span_seqs;
      std::vector<std::int64_t> added_seqs;
      for (std::size_t i = 0; i < targets.size(); ++i) {
        SQLite::Statement& retire =
            c_->Stmt("UPDATE messages SET position = NULL, replaced_by = ? WHERE seq = ?");
        retire.bind(1, by);
        retire.bind(2, targets[i].first);
        retire.exec();
        span_seqs.push_back(targets[i].first);
        added_seqs.push_back(InsertMessage(row.id, added[i], added.chars(i), targets[i].second,
                                           version, now, turns[i]));
      }
      MarkRewrite(row.id, version, CommitKind::kReduction, number);
      LogCommit(row.id, version, "reduction", number, "", targets.size(), targets.size(), now,
                &span_seqs, &added_seqs);
    });
    RECAP_RETURN_IF_ERROR(s);
    return version;
  }

  Result<std::uint64_t> CommitRecovery(const std::string& session,
                                       const RecoveryCommit& commit) override {
    RECAP_RETURN_IF_ERROR(CheckWritten(session));
    std::lock_guard<std::mutex> lock(mu_);
    std::uint64_t version = 0;
    Status s = c_->Transaction("committing a recovery of session " + Quoted(session), true, [&] {
      SessionRow row = CheckVersion(session, commit.expected_version);
      // The active transcript's rows, in order.
      std::vector<std::pair<std::int64_t, std::string>> active;  // seq, message_id
      std::vector<std::string> active_ids;
      {
        SQLite::Statement& all = c_->Stmt(
            "SELECT seq, message_id FROM messages WHERE session_id = ? AND position IS NOT NULL "
            "ORDER BY position");
        all.bind(1, row.id);
        while (all.executeStep()) {
          active_ids.push_back(all.getColumn(1).getString());
          active.emplace_back(all.getColumn(0).getInt64(), active_ids.back());
        }
      }
      Result<internal::RecoveryPlan> plan = internal::PlanRecovery(session, active_ids, commit);
      if (!plan.ok()) throw Abort{plan.status()};
      const Transcript& results = plan->results;
      const auto& after = plan->after;
      // New positions above every current one, so no two rows ever share one mid-update.
      std::int64_t position = NextPosition(row.id);
      version = row.version + 1;
      const std::string now = NowUtc();
      for (const auto& [seq, id] : active) {
        SQLite::Statement& move = c_->Stmt("UPDATE messages SET position = ? WHERE seq = ?");
        move.bind(1, position++);
        move.bind(2, seq);
        move.exec();
        auto it = after.find(id);
        if (it == after.end()) continue;
        for (std::size_t r : it->second) {
          InsertMessage(row.id, results[r], results.chars(r), position++, version, now, row.turns);
        }
      }
      const std::int64_t number = row.recoveries + 1;
      MarkRewrite(row.id, version, CommitKind::kRecovery, number);
      LogCommit(row.id, version, "recovery", number, "", 0, results.size(), now);
    });
    RECAP_RETURN_IF_ERROR(s);
    return version;
  }

  Result<UndoOutcome> CommitUndo(const std::string& session, const UndoCommit& commit) override {
    RECAP_RETURN_IF_ERROR(CheckWritten(session));
    std::lock_guard<std::mutex> lock(mu_);
    UndoOutcome out;
    Status s =
        c_->Transaction("undoing the last compaction of session " + Quoted(session), true, [&] {
          out = UndoOutcome{};
          SessionRow row = CheckVersion(session, commit.expected_version);
          out.version = row.version;
          SQLite::Statement& last = c_->Stmt(
              "SELECT commit_id, kind, number, reason, span_seqs, added_seqs FROM commits WHERE "
              "session_id = ? AND kind IN ('compaction', 'reduction') AND undone_by IS NULL ORDER "
              "BY commit_id DESC LIMIT 1");
          last.bind(1, row.id);
          if (!last.executeStep()) {
            last.reset();
            return;
          }
          const std::int64_t commit_id = last.getColumn(0).getInt64();
          const bool compaction = last.getColumn(1).getString() == "compaction";
          const std::string name =
              last.getColumn(1).getString() + ":" + last.getColumn(2).getString();
          const std::string reason =
              last.getColumn(3).isNull() ? "" : last.getColumn(3).getString();
          const bool recorded = !last.getColumn(4).isNull() && !last.getColumn(5).isNull();
          const std::vector<std::int64_t> span =
              recorded ? ParseSeqList(last.getColumn(4).getString()) : std::vector<std::int64_t>{};
          const std::vector<std::int64_t> added =
              recorded ? ParseSeqList(last.getColumn(5).getString()) : std::vector<std::int64_t>{};
          last.reset();
          if (!recorded) {
            throw Abort{internal::UndoImpossible(session, name,
                                                 "it was committed by an older recap, which did "
                                                 "not record where its messages stood")};
          }
          // Where each message of the commit stands now: every added one must be active still (an
          // undo takes back the newest commit first, so they are).
          SQLite::Statement& at = c_->Stmt(
              "SELECT position, message_id FROM messages WHERE seq = ? AND session_id = ?");
          auto where = [&](std::int64_t seq) {
            at.bind(1, seq);
            at.bind(2, row.id);
            if (!at.executeStep()) {
              at.reset();
              throw Abort{internal::UndoImpossible(
                  session, name,
                  "a message it names (" + std::to_string(seq) + ") is not in the file")};
            }
            std::pair<std::optional<std::int64_t>, std::string> w;
            if (!at.getColumn(0).isNull()) w.first = at.getColumn(0).getInt64();
            w.second = at.getColumn(1).getString();
            at.reset();
            return w;
          };
          std::vector<std::int64_t> added_positions;
          for (std::int64_t seq : added) {
            auto [position, id] = where(seq);
            if (!position) {
              throw Abort{internal::UndoImpossible(session, name,
                                                   "a message it added is no longer active")};
            }
            added_positions.push_back(*position);
          }
          const std::unordered_set<std::int64_t> mine = [&] {
            std::unordered_set<std::int64_t> m(span.begin(), span.end());
            m.insert(added.begin(), added.end());
            return m;
          }();
          SQLite::Statement& holder = c_->Stmt(
              "SELECT seq FROM messages WHERE session_id = ? AND message_id = ? AND position IS "
              "NOT "
              "NULL");
          std::vector<bool> retired(span.size(), false);
          for (std::size_t k = 0; k < span.size(); ++k) {
            auto [position, id] = where(span[k]);
            if (position) continue;  // kept by the compaction
            retired[k] = true;
            holder.bind(1, row.id);
            holder.bind(2, id);
            const bool taken =
                holder.executeStep() && mine.count(holder.getColumn(0).getInt64()) == 0;
            holder.reset();
            if (taken) throw Abort{internal::UndoTaken(session, name, id)};
          }

          const std::int64_t number = row.undos + 1;
          const std::string by = "undo:" + std::to_string(number);
          const std::int64_t version = static_cast<std::int64_t>(row.version) + 1;
          SQLite::Statement& retire =
              c_->Stmt("UPDATE messages SET position = NULL, replaced_by = ? WHERE seq = ?");
          SQLite::Statement& place =
              c_->Stmt("UPDATE messages SET position = ?, replaced_by = NULL WHERE seq = ?");
          auto set = [&](SQLite::Statement& st, std::int64_t seq, auto value) {
            st.reset();
            st.bind(1, value);
            st.bind(2, seq);
            st.exec();
          };
          if (compaction) {
            // The span takes the places just before the first active message that is neither in
            // it nor added by it (those after the span, appended or recovered since).
            std::optional<std::int64_t> first;
            SQLite::Statement& active = c_->Stmt(
                "SELECT seq, position FROM messages WHERE session_id = ? AND position IS NOT NULL "
                "ORDER BY position");
            active.bind(1, row.id);
            while (active.executeStep()) {
              if (mine.count(active.getColumn(0).getInt64()) == 0) {
                first = active.getColumn(1).getInt64();
                break;
              }
            }
            active.reset();
            const std::int64_t end = first ? *first : NextPosition(row.id);
            for (std::int64_t seq : added) set(retire, seq, by);
            SQLite::Statement& unplace =
                c_->Stmt("UPDATE messages SET position = NULL WHERE seq = ?");
            for (std::size_t k = 0; k < span.size(); ++k) {
              if (retired[k]) continue;
              unplace.reset();
              unplace.bind(1, span[k]);
              unplace.exec();
            }
            std::int64_t position = end - static_cast<std::int64_t>(span.size());
            for (std::int64_t seq : span) set(place, seq, position++);
          } else {
            for (std::size_t k = 0; k < added.size(); ++k) {
              set(retire, added[k], by);
              set(place, span[k], added_positions[k]);
            }
          }
          SQLite::Statement& done =
              c_->Stmt("UPDATE commits SET undone_by = ? WHERE commit_id = ?");
          done.bind(1, number);
          done.bind(2, commit_id);
          done.exec();
          MarkRewrite(row.id, static_cast<std::uint64_t>(version), CommitKind::kUndo, number);
          std::size_t restored = 0;
          for (bool r : retired) restored += r ? 1 : 0;
          LogCommit(row.id, static_cast<std::uint64_t>(version), "undo", number, name, added.size(),
                    restored, NowUtc());
          out.undone = true;
          out.commit = name;
          out.reason = compaction ? reason : "";
          out.restored = restored;
          out.retired = added.size();
          out.version = static_cast<std::uint64_t>(version);
        });
    RECAP_RETURN_IF_ERROR(s);
    return out;
  }

  Result<std::vector<HistoryHit>> SearchHistory(const std::string& session,
                                                const HistorySearch& search) override {
    RECAP_RETURN_IF_ERROR(CheckName(session));
    if (c_->schema() < sqlite_internal::kRecallSchemaVersion) {
      // A file of an older schema, opened read-only: no index to ask.
      return internal::ScanHistory(*this, session, search);
    }
    const std::string match = internal::Fts5Query(search.terms);
    const bool ranged = search.last_turn != 0;
    std::vector<HistoryHit> hits;
    if (search.limit == 0 || (search.ids.empty() && match.empty() && !ranged)) return hits;
    if (!search.terms.empty() && match.empty() && search.ids.empty()) return hits;
    if (!match.empty()) {
      Result<bool> indexed = IndexForRecall(session);
      RECAP_RETURN_IF_ERROR(indexed);
      // A store opened read-only cannot write the index: while it lacks some of the
      // session, the history is walked instead.
      if (!*indexed) return internal::ScanHistory(*this, session, search);
    }
    std::lock_guard<std::mutex> lock(mu_);
    Status s = c_->Transaction("searching the history of session " + Quoted(session), false, [&] {
      hits.clear();
      std::optional<SessionRow> row = FindSession(session);
      if (!row) return;
      std::unordered_set<std::int64_t> seen;
      auto take = [&](SQLite::Statement& st, bool scored) {
        while (st.executeStep()) {
          const std::int64_t seq = st.getColumn(0).getInt64();
          if (!seen.insert(seq).second) continue;
          HistoryHit hit;
          hit.entry.seq = static_cast<std::uint64_t>(seq);
          const SQLite::Column by = st.getColumn(1);
          if (!by.isNull()) {
            hit.entry.state = HistoryState::kCompacted;
            hit.entry.replaced_by = by.getString();
          }
          hit.entry.message = Decode(st.getColumn(2), hit.entry.seq);
          hit.entry.turn = static_cast<std::uint64_t>(st.getColumn(3).getInt64());
          if (scored) hit.score = -st.getColumn(4).getDouble();  // bm25: smaller is better
          hits.push_back(std::move(hit));
        }
        st.reset();
      };
      const std::int64_t active = search.include_active ? 1 : 0;
      for (const std::string& id : search.ids) {
        SQLite::Statement& st = c_->Stmt(
            "SELECT m.seq, m.replaced_by, b.body, m.turn FROM messages m JOIN bodies b ON b.seq "
            "= m.seq WHERE m.session_id = ? AND m.message_id = ? AND (? OR m.position IS NULL) "
            "ORDER BY m.seq");
        st.bind(1, row->id);
        st.bind(2, id);
        st.bind(3, active);
        take(st, false);
      }
      // A turn range is given by last_turn; first_turn alone means nothing (session_store.h).
      // Turns beyond what SQLite's integers hold are the largest it holds.
      constexpr std::uint64_t kMax = std::numeric_limits<std::int64_t>::max();
      const std::int64_t first =
          ranged ? static_cast<std::int64_t>(std::min<std::uint64_t>(search.first_turn, kMax)) : 0;
      const std::int64_t last = static_cast<std::int64_t>(
          ranged ? std::min<std::uint64_t>(search.last_turn, kMax) : kMax);
      const std::int64_t limit =
          static_cast<std::int64_t>(std::min<std::uint64_t>(search.limit, kMax));
      if (!match.empty()) {
        // Ranked first, the bodies read after: of a common word's thousands of matches, only
        // the `limit` best are read and decoded.
        SQLite::Statement& st = c_->Stmt(
            "WITH best AS (SELECT m.seq AS seq, m.replaced_by AS replaced_by, m.turn AS turn, "
            "bm25(recall_index) AS rank FROM recall_index JOIN messages m ON m.seq = "
            "recall_index.rowid WHERE recall_index MATCH ? AND m.session_id = ? AND (? OR "
            "m.position IS NULL) AND m.turn BETWEEN ? AND ? ORDER BY rank, m.seq DESC LIMIT ?) "
            "SELECT best.seq, best.replaced_by, b.body, best.turn, best.rank FROM best JOIN bodies "
            "b ON b.seq = best.seq ORDER BY best.rank, best.seq DESC");
        st.bind(1, match);
        st.bind(2, row->id);
        st.bind(3, active);
        st.bind(4, first);
        st.bind(5, last);
        st.bind(6, limit);
        take(st, true);
      } else if (ranged && search.terms.empty()) {
        SQLite::Statement& st = c_->Stmt(
            "SELECT m.seq, m.replaced_by, b.body, m.turn FROM messages m JOIN bodies b ON b.seq "
            "= m.seq WHERE m.session_id = ? AND (? OR m.position IS NULL) AND m.turn BETWEEN ? "
            "AND ? ORDER BY m.seq LIMIT ?");
        st.bind(1, row->id);
        st.bind(2, active);
        st.bind(3, first);
        st.bind(4, last);
        st.bind(5, limit);
        take(st, false);
      }
    });
    RECAP_RETURN_IF_ERROR(s);
    internal::RankHits(hits, search);
    return hits;
  }

  Result<std::vector<HistoryEntry>> History(const std::string& session) override {
    std::vector<HistoryEntry> out;
    Status s = WalkHistory(
        session, [&] { out.clear(); },
        [&](HistoryEntry&& e) {
          out.push_back(std::move(e));
          return Status::OK();
        });
    RECAP_RETURN_IF_ERROR(s);
    return out;
  }

  Status ForEachHistoryEntry(const std::string& session,
                             const std::function<Status(HistoryEntry&&)>& visit) override {
    return WalkHistory(session, nullptr, visit);
  }

  Status SaveLearned(const std::string& session, const std::string& learned) override {
    RECAP_RETURN_IF_ERROR(CheckName(session));
    std::lock_guard<std::mutex> lock(mu_);
    // Advice, not content: not worth an fsync per turn. A power loss may lose the last of it,
    // never a message; it is restored by the next save.
    const char* relaxed = "PRAGMA synchronous = OFF";
    const std::string restore =
        std::string("PRAGMA synchronous = ") +
        (c_->options().synchronous == SqliteSynchronous::kFull     ? "FULL"
         : c_->options().synchronous == SqliteSynchronous::kNormal ? "NORMAL"
                                                                   : "OFF");
    if (!c_->options().read_only) c_->db().exec(relaxed);
    Status s =
        c_->Transaction("saving what was learned about session " + Quoted(session), true, [&] {
          std::optional<SessionRow> row = FindSession(session);
          if (!row) return;  // a session never written keeps nothing
          if (learned.empty()) {
            SQLite::Statement& st = c_->Stmt("DELETE FROM learned WHERE session_id = ?");
            st.bind(1, row->id);
            st.exec();
            return;
          }
          SQLite::Statement& st = c_->Stmt(
              "INSERT INTO learned (session_id, state, updated_at) VALUES (?, ?, ?) ON CONFLICT "
              "(session_id) DO UPDATE SET state = excluded.state, updated_at = "
              "excluded.updated_at");
          st.bind(1, row->id);
          st.bindNoCopy(2, learned);
          st.bind(3, NowUtc());
          st.exec();
        });
    if (!c_->options().read_only) c_->db().exec(restore);
    return s;
  }

  Result<std::vector<std::string>> ListSessions() override {
    std::lock_guard<std::mutex> lock(mu_);
    std::vector<std::string> out;
    Status s = c_->Transaction("listing the sessions", false, [&] {
      out.clear();
      SQLite::Statement& st = c_->Stmt("SELECT name FROM sessions ORDER BY name");
      while (st.executeStep()) out.push_back(st.getColumn(0).getString());
    });
    RECAP_RETURN_IF_ERROR(s);
    return out;
  }

 private:
  // Reads the session's history in store order, handing each entry to `visit`. A read-only
  // store reads again when a writer changed the file meanwhile: then `restart` forgets what
  // was handed over, or, without one (what `visit` has seen cannot be taken back), the walk
  // fails rather than mixing two states of the session.
  Status WalkHistory(const std::string& session, const std::function<void()>& restart,
                     const std::function<Status(HistoryEntry&&)>& visit) {
    RECAP_RETURN_IF_ERROR(CheckName(session));
    std::lock_guard<std::mutex> lock(mu_);
    std::size_t delivered = 0;
    return c_->Transaction("reading the history of session " + Quoted(session), false, [&] {
      if (delivered > 0 && restart) {
        restart();
        delivered = 0;
      } else if (delivered > 0) {
        throw Abort{Status::Unavailable("recap sqlite store " + Quoted(c_->path()) + ": session " +
                                        Quoted(session) +
                                        " changed while its history was read (after " +
                                        std::to_string(delivered) + " entries); read it again")};
      }
      std::optional<SessionRow> row = FindSession(session);
      if (!row) return;
      // A file of an older schema, opened read-only, has no turns: they are counted here.
      const bool turned = c_->schema() >= sqlite_internal::kRecallSchemaVersion;
      SQLite::Statement& st =
          turned ? c_->Stmt(
                       "SELECT m.seq, m.replaced_by, b.body, m.turn FROM messages m JOIN bodies b "
                       "ON b.seq = m.seq WHERE m.session_id = ? ORDER BY m.seq")
                 : c_->Stmt(
                       "SELECT m.seq, m.replaced_by, b.body FROM messages m JOIN bodies b ON "
                       "b.seq = m.seq WHERE m.session_id = ? ORDER BY m.seq");
      st.bind(1, row->id);
      std::uint64_t turns = 0;
      std::unordered_map<std::string, std::uint64_t> reduced;  // as recall_index.cc counts them
      while (st.executeStep()) {
        HistoryEntry e;
        e.seq = static_cast<std::uint64_t>(st.getColumn(0).getInt64());
        const SQLite::Column by = st.getColumn(1);
        if (!by.isNull()) {
          e.state = HistoryState::kCompacted;
          e.replaced_by = by.getString();
        }
        e.message = Decode(st.getColumn(2), e.seq);
        if (turned) {
          e.turn = static_cast<std::uint64_t>(st.getColumn(3).getInt64());
        } else if (auto copy_of = reduced.find(e.message.id); copy_of != reduced.end()) {
          e.turn = copy_of->second;  // a reduced copy: its original's turn
          reduced.erase(copy_of);
        } else {
          e.turn = turns = internal::TurnOf(e.message, turns);
        }
        if (!turned && e.replaced_by.rfind("reduction:", 0) == 0) reduced[e.message.id] = e.turn;
        ++delivered;
        if (Status v = visit(std::move(e)); !v.ok()) {
          st.tryReset();  // a statement left mid-way would keep the read open
          throw Abort{std::move(v)};
        }
      }
    });
  }

  // The session's learned state (R12.5), or empty: none saved, or a version-1 file read as
  // it is (no `learned` table).
  std::string ReadLearned(std::int64_t session_id) {
    SQLite::Statement* st = nullptr;
    try {
      st = &c_->Stmt("SELECT state FROM learned WHERE session_id = ?");
    } catch (const SQLite::Exception& e) {
      if (std::strstr(e.what(), "no such table") != nullptr) return {};
      throw;
    }
    st->bind(1, session_id);
    std::string state;
    if (st->executeStep()) state = st->getColumn(0).getString();
    st->reset();
    return state;
  }

  std::optional<SessionRow> FindSession(const std::string& name) {
    const bool v3 = c_->schema() >= sqlite_internal::kRecallSchemaVersion;
    SQLite::Statement& st =
        v3 ? c_->Stmt(
                 "SELECT session_id, version, rewrite_version, compactions, reductions, "
                 "recoveries, turns, undos FROM sessions WHERE name = ?")
           : c_->Stmt(
                 "SELECT session_id, version, rewrite_version, compactions, reductions, "
                 "recoveries FROM sessions WHERE name = ?");
    st.bind(1, name);
    if (!st.executeStep()) return std::nullopt;
    SessionRow row;
    row.id = st.getColumn(0).getInt64();
    row.version = static_cast<std::uint64_t>(st.getColumn(1).getInt64());
    row.rewrite_version = static_cast<std::uint64_t>(st.getColumn(2).getInt64());
    row.compactions = st.getColumn(3).getInt64();
    row.reductions = st.getColumn(4).getInt64();
    row.recoveries = st.getColumn(5).getInt64();
    if (v3) {
      row.turns = static_cast<std::uint64_t>(st.getColumn(6).getInt64());
      row.undos = st.getColumn(7).getInt64();
    }
    st.reset();
    return row;
  }

  SessionRow CreateSession(const std::string& name, const std::string& now) {
    SQLite::Statement& st = c_->Stmt("INSERT INTO sessions (name, created_at) VALUES (?, ?)");
    st.bind(1, name);
    st.bind(2, now);
    st.exec();
    SessionRow row;
    row.id = c_->db().getLastInsertRowid();
    return row;
  }

  SessionRow CheckVersion(const std::string& session, std::uint64_t expected) {
    Result<SessionRow> row = internal::CommitAgainst(session, expected, FindSession(session));
    if (!row.ok()) throw Abort{row.status()};
    return *row;
  }

  std::int64_t NextPosition(std::int64_t session_id) {
    SQLite::Statement& st = c_->Stmt(
        "SELECT MAX(position) FROM messages WHERE session_id = ? AND position IS NOT NULL");
    st.bind(1, session_id);
    st.executeStep();
    const SQLite::Column max = st.getColumn(0);
    const std::int64_t next = max.isNull() ? 0 : max.getInt64() + 1;
    st.reset();
    return next;
  }

  bool IsActiveId(std::int64_t session_id, const std::string& id) {
    SQLite::Statement& st = c_->Stmt(
        "SELECT 1 FROM messages WHERE session_id = ? AND message_id = ? AND position IS NOT NULL");
    st.bind(1, session_id);
    st.bind(2, id);
    const bool found = st.executeStep();
    st.reset();
    return found;
  }

  // Stores message `m` (its row, its body and its index entry) and returns its seq.
  std::int64_t InsertMessage(std::int64_t session_id, const Message& m, std::size_t chars,
                             std::int64_t position, std::uint64_t version, const std::string& now,
                             std::uint64_t turn) {
    SQLite::Statement& row = c_->Stmt(
        "INSERT INTO messages (session_id, message_id, position, stored_version, role, summary, "
        "chars, stored_at, turn) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)");
    row.bind(1, session_id);
    row.bindNoCopy(2, m.id);
    row.bind(3, position);
    row.bind(4, static_cast<std::int64_t>(version));
    row.bind(5, RoleName(m.role));
    row.bind(6, m.summary ? 1 : 0);
    row.bind(7, static_cast<std::int64_t>(chars));
    row.bindNoCopy(8, now);
    row.bind(9, static_cast<std::int64_t>(turn));
    row.exec();
    const std::int64_t seq = c_->db().getLastInsertRowid();
    WriteBody(seq, m);
    return seq;
  }

  // Brings the recall index up to the session's last message (schema.h, version 3): the
  // messages stored since the last search are indexed, in one transaction. False when the
  // index lacks some of them and this store, opened read-only, cannot write it.
  Result<bool> IndexForRecall(const std::string& session) {
    std::lock_guard<std::mutex> lock(mu_);
    auto behind = [&](std::int64_t* session_id, std::int64_t* from) {
      SQLite::Statement& st = c_->Stmt(
          "SELECT s.session_id, s.indexed_seq, (SELECT max(seq) FROM messages m WHERE "
          "m.session_id = s.session_id) FROM sessions s WHERE s.name = ?");
      st.bind(1, session);
      bool lagging = false;
      if (st.executeStep()) {
        *session_id = st.getColumn(0).getInt64();
        *from = st.getColumn(1).getInt64();
        lagging = !st.getColumn(2).isNull() && st.getColumn(2).getInt64() > *from;
      }
      st.reset();
      return lagging;
    };
    bool lagging = false;
    std::int64_t session_id = 0;
    std::int64_t from = 0;
    Status s = c_->Transaction("reading the recall index of session " + Quoted(session), false,
                               [&] { lagging = behind(&session_id, &from); });
    RECAP_RETURN_IF_ERROR(s);
    if (!lagging) return true;
    if (c_->options().read_only) return false;
    s = c_->Transaction(
        "indexing the history of session " + Quoted(session) + " for recall", true, [&] {
          // Another process may have indexed it meanwhile.
          if (!behind(&session_id, &from)) return;
          SQLite::Statement& rows = c_->Stmt(
              "SELECT m.seq, b.body FROM messages m JOIN bodies b ON b.seq = "
              "m.seq WHERE m.session_id = ? AND m.seq > ? ORDER BY m.seq");
          rows.bind(1, session_id);
          rows.bind(2, from);
          std::int64_t last = from;
          while (rows.executeStep()) {
            last = rows.getColumn(0).getInt64();
            Index(last, Decode(rows.getColumn(1), static_cast<std::uint64_t>(last)));
          }
          rows.reset();
          SQLite::Statement& done =
              c_->Stmt("UPDATE sessions SET indexed_seq = ? WHERE session_id = ?");
          done.bind(1, last);
          done.bind(2, session_id);
          done.exec();
        });
    RECAP_RETURN_IF_ERROR(s);
    return true;
  }

  // The message's searchable text into the recall index (recall_index.h).
  void Index(std::int64_t seq, const Message& m) {
    text_ = internal::SearchableText(m);
    if (text_.empty()) return;
    const std::string_view indexed = sqlite_internal::IndexedText(text_);
    SQLite::Statement& st = c_->Stmt("INSERT INTO recall_index (rowid, text) VALUES (?, ?)");
    st.bind(1, seq);
    st.bindNoCopy(2, indexed.data(), static_cast<int>(indexed.size()));
    st.exec();
  }

  void WriteBody(std::int64_t seq, const Message& m) {
    const std::size_t size = EncodedBodySize(m);
    if (size < kBlobStreamBytes) {
      scratch_.clear();
      EncodeBody(m, scratch_);
      SQLite::Statement& body = c_->Stmt("INSERT INTO bodies (seq, body) VALUES (?, ?)");
      body.bind(1, seq);
      body.bindNoCopy(2, scratch_.data(), static_cast<int>(scratch_.size()));
      body.exec();
      return;
    }
    // A large body (a 200 MB tool output): SQLite would copy a bound blob into the record it
    // builds, so the row gets a zeroblob of the right size and the encoding is written into it
    // piece by piece, its large strings straight from the message: no copy of the body is
    // made in memory.
    if (size > static_cast<std::size_t>(std::numeric_limits<int>::max())) {
      throw Abort{Status::ResourceExhausted(
          "recap sqlite store " + Quoted(c_->path()) + ": message " + Quoted(m.id) + " is " +
          std::to_string(size) +
          " bytes encoded; SQLite stores at most 2 GiB in one message. Nothing was written")};
    }
    SQLite::Statement& body = c_->Stmt("INSERT INTO bodies (seq, body) VALUES (?, zeroblob(?))");
    body.bind(1, seq);
    body.bind(2, static_cast<std::int64_t>(size));
    body.exec();
    sqlite3_blob* blob = nullptr;
    int rc = sqlite3_blob_open(c_->db().getHandle(), "main", "bodies", "body", seq, 1, &blob);
    std::size_t at = 0;
    EncodeBodyPieces(m, [&](std::string_view piece) {
      for (std::size_t done = 0; rc == SQLITE_OK && done < piece.size();) {
        const std::size_t n = std::min(kBlobStreamBytes, piece.size() - done);
        rc = sqlite3_blob_write(blob, piece.data() + done, static_cast<int>(n),
                                static_cast<int>(at + done));
        done += n;
      }
      at += piece.size();
    });
    const int closed = sqlite3_blob_close(blob);  // a null blob is a no-op
    if (rc == SQLITE_OK) rc = closed;
    if (rc != SQLITE_OK) throw SQLite::Exception(c_->db().getHandle(), rc);
  }

  // Bodies of this size and more are written through SQLite's incremental blob I/O.
  static constexpr std::size_t kBlobStreamBytes = std::size_t{1} << 20;

  // The messages of a new session (CreateSessions), written kRows at a time: one INSERT of
  // kRows rows into messages and one into bodies, instead of two statements per message. Within
  // one statement SQLite keeps its cursors open, so each row lands at the end of every index
  // without a search from the root (a new session's keys only grow), and the per-statement
  // work is paid once per kRows messages. The rows get consecutive seq numbers after the
  // largest in the file (the transaction holds the write lock). A message whose body is large
  // goes through InsertMessage alone (blob I/O). The message passed to Add is only read: what
  // a row needs is copied out of it, so the caller keeps (and reuses) it.
  class BulkInsert {
   public:
    static constexpr std::size_t kRows = 64;

    BulkInsert(SqliteSessionStore& store, std::int64_t session_id, const std::string& now)
        : store_(store), session_id_(session_id), now_(now) {
      rows_.reserve(kRows);
      next_seq_ = NextSeq();
    }

    void Add(const Message& m, std::size_t chars) {
      turns_ = internal::TurnOf(m, turns_);
      if (EncodedBodySize(m) >= kBlobStreamBytes) {
        Flush();
        store_.InsertMessage(session_id_, m, chars, position_++, 1, now_, turns_);
        next_seq_ = NextSeq();
        return;
      }
      const std::size_t id_at = ids_.size();
      ids_ += m.id;
      const std::size_t at = bodies_.size();
      EncodeBody(m, bodies_);
      rows_.push_back(
          Row{m.role, m.summary, chars, id_at, m.id.size(), at, bodies_.size() - at, turns_});
      if (rows_.size() == kRows) Flush();
    }

    // The turn starts of the messages added (HistoryEntry::turn).
    std::uint64_t turns() const { return turns_; }

    // Writes what is pending (the last rows one statement each).
    void Flush() {
      std::size_t done = 0;
      if (rows_.size() == kRows) {
        Write(store_.c_->RawStmt(MessagesSql()), store_.c_->RawStmt(BodiesSql()), 0, kRows);
        done = kRows;
      }
      for (; done < rows_.size(); ++done) {
        Write(store_.c_->RawStmt("INSERT INTO messages (seq, session_id, message_id, position, "
                                 "stored_version, role, summary, chars, stored_at, turn) VALUES "
                                 "(?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"),
              store_.c_->RawStmt("INSERT INTO bodies (seq, body) VALUES (?, ?)"), done, 1);
      }
      rows_.clear();
      ids_.clear();
      bodies_.clear();
    }

   private:
    struct Row {
      Role role;
      bool summary;
      std::size_t chars;
      std::size_t id_at, id_size;      // in ids_
      std::size_t body_at, body_size;  // in bodies_
      std::uint64_t turn;
    };

    std::int64_t NextSeq() {
      SQLite::Statement& st = store_.c_->Stmt("SELECT coalesce(max(seq), 0) + 1 FROM messages");
      st.executeStep();
      const std::int64_t seq = st.getColumn(0).getInt64();
      st.reset();
      return seq;
    }

    // A bind's result: SQLite's failure (a value too big, out of memory) as its exception.
    void Bound(int rc) {
      if (rc != SQLITE_OK) throw SQLite::Exception(store_.c_->db().getHandle(), rc);
    }

    // Rows [from, from + n) through `messages` and `bodies`, statements of n rows, bound with
    // SQLite's own calls (a million rows make eleven million binds).
    void Write(sqlite3_stmt* m, sqlite3_stmt* b, std::size_t from, std::size_t n) {
      for (std::size_t k = 0; k < n; ++k) {
        const Row& r = rows_[from + k];
        const int p = static_cast<int>(k) * 10;
        const std::int64_t seq = next_seq_ + static_cast<std::int64_t>(k);
        const char* const role = RoleName(r.role);
        Bound(sqlite3_bind_int64(m, p + 1, seq));
        Bound(sqlite3_bind_int64(m, p + 2, session_id_));
        Bound(sqlite3_bind_text(m, p + 3, ids_.data() + r.id_at, static_cast<int>(r.id_size),
                                SQLITE_STATIC));
        Bound(sqlite3_bind_int64(m, p + 4, position_ + static_cast<std::int64_t>(k)));
        Bound(sqlite3_bind_int64(m, p + 5, 1));
        Bound(sqlite3_bind_text(m, p + 6, role, -1, SQLITE_STATIC));
        Bound(sqlite3_bind_int64(m, p + 7, r.summary ? 1 : 0));
        Bound(sqlite3_bind_int64(m, p + 8, static_cast<sqlite3_int64>(r.chars)));
        Bound(
            sqlite3_bind_text(m, p + 9, now_.data(), static_cast<int>(now_.size()), SQLITE_STATIC));
        Bound(sqlite3_bind_int64(m, p + 10, static_cast<sqlite3_int64>(r.turn)));
        Bound(sqlite3_bind_int64(b, static_cast<int>(k) * 2 + 1, seq));
        Bound(sqlite3_bind_blob(b, static_cast<int>(k) * 2 + 2, bodies_.data() + r.body_at,
                                static_cast<int>(r.body_size), SQLITE_STATIC));
      }
      store_.c_->Step(m);
      store_.c_->Step(b);
      next_seq_ += static_cast<std::int64_t>(n);
      position_ += static_cast<std::int64_t>(n);
    }

    static const char* MessagesSql() {
      static const std::string kSql = [] {
        std::string q =
            "INSERT INTO messages (seq, session_id, message_id, position, stored_version, role, "
            "summary, chars, stored_at, turn) VALUES ";
        for (std::size_t k = 0; k < kRows; ++k)
          q += k ? ",(?,?,?,?,?,?,?,?,?,?)" : "(?,?,?,?,?,?,?,?,?,?)";
        return q;
      }();
      return kSql.c_str();
    }
    static const char* BodiesSql() {
      static const std::string kSql = [] {
        std::string q = "INSERT INTO bodies (seq, body) VALUES ";
        for (std::size_t k = 0; k < kRows; ++k) q += k ? ",(?,?)" : "(?,?)";
        return q;
      }();
      return kSql.c_str();
    }

    SqliteSessionStore& store_;
    const std::int64_t session_id_;
    const std::string& now_;
    std::vector<Row> rows_;
    std::string ids_;     // the pending rows' message ids, one after another
    std::string bodies_;  // the pending rows' bodies, one after another
    std::int64_t next_seq_ = 0;
    std::int64_t position_ = 0;
    std::uint64_t turns_ = 0;
  };

  enum class CommitKind { kCompaction, kReduction, kRecovery, kUndo };

  // A commit that rewrote the active transcript: the version moves on, appends before it no
  // longer count as "appended only" (LoadChanges), and the kind's counter becomes `number`.
  void MarkRewrite(std::int64_t session_id, std::uint64_t version, CommitKind kind,
                   std::int64_t number) {
    // The counter's column cannot be a parameter: one statement per kind.
    const char* sql =
        kind == CommitKind::kCompaction
            ? "UPDATE sessions SET version = ?1, rewrite_version = ?1, compactions = ?2 WHERE "
              "session_id = ?3"
        : kind == CommitKind::kReduction
            ? "UPDATE sessions SET version = ?1, rewrite_version = ?1, reductions = ?2 WHERE "
              "session_id = ?3"
        : kind == CommitKind::kUndo
            ? "UPDATE sessions SET version = ?1, rewrite_version = ?1, undos = ?2 WHERE "
              "session_id = ?3"
            : "UPDATE sessions SET version = ?1, rewrite_version = ?1, recoveries = ?2 WHERE "
              "session_id = ?3";
    SQLite::Statement& st = c_->Stmt(sql);
    st.bind(1, static_cast<std::int64_t>(version));
    st.bind(2, number);
    st.bind(3, session_id);
    st.exec();
  }

  void SetVersion(std::int64_t session_id, std::uint64_t version, std::uint64_t rewrite_version,
                  std::uint64_t turns) {
    SQLite::Statement& st = c_->Stmt(
        "UPDATE sessions SET version = ?, rewrite_version = ?, turns = ? WHERE session_id = ?");
    st.bind(1, static_cast<std::int64_t>(version));
    st.bind(2, static_cast<std::int64_t>(rewrite_version));
    st.bind(3, static_cast<std::int64_t>(turns));
    st.bind(4, session_id);
    st.exec();
  }

  static std::string SeqList(const std::vector<std::int64_t>& seqs) {
    std::string out;
    for (std::size_t k = 0; k < seqs.size(); ++k) {
      if (k) out += ',';
      out += std::to_string(seqs[k]);
    }
    return out;
  }

  static std::vector<std::int64_t> ParseSeqList(const std::string& text) {
    std::vector<std::int64_t> out;
    std::size_t at = 0;
    while (at < text.size()) {
      std::size_t end = text.find(',', at);
      if (end == std::string::npos) end = text.size();
      out.push_back(std::stoll(text.substr(at, end - at)));
      at = end + 1;
    }
    return out;
  }

  // `span_seqs`, `added_seqs`: what CommitUndo needs to take a compaction or reduction back.
  void LogCommit(std::int64_t session_id, std::uint64_t version, const char* kind,
                 std::int64_t number, const std::string& reason, std::size_t retired,
                 std::size_t added, const std::string& now,
                 const std::vector<std::int64_t>* span_seqs = nullptr,
                 const std::vector<std::int64_t>* added_seqs = nullptr) {
    SQLite::Statement& st = c_->Stmt(
        "INSERT INTO commits (session_id, version, kind, number, reason, retired, added, at, "
        "span_seqs, added_seqs) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)");
    st.bind(1, session_id);
    st.bind(2, static_cast<std::int64_t>(version));
    st.bind(3, kind);
    st.bind(4, number);
    if (reason.empty()) {
      st.bind(5);
    } else {
      st.bind(5, reason);
    }
    st.bind(6, static_cast<std::int64_t>(retired));
    st.bind(7, static_cast<std::int64_t>(added));
    st.bind(8, now);
    if (span_seqs) {
      st.bind(9, SeqList(*span_seqs));
      st.bind(10, SeqList(*added_seqs));
    } else {
      st.bind(9);
      st.bind(10);
    }
    st.exec();
  }

  // The active messages in order; with `since`, only those stored after that version. Each
  // message's size comes from its row (measured when it was stored), so loading costs reading
  // and decoding, not measuring again.
  Transcript ReadActive(std::int64_t session_id, std::optional<std::uint64_t> since) {
    SQLite::Statement& st =
        since ? c_->Stmt(
                    "SELECT m.seq, m.chars, b.body FROM messages m JOIN bodies b ON "
                    "b.seq = m.seq WHERE m.session_id = ? AND m.position IS NOT NULL AND "
                    "m.stored_version > ? ORDER BY m.position")
              : c_->Stmt(
                    "SELECT m.seq, m.chars, b.body FROM messages m JOIN bodies b ON "
                    "b.seq = m.seq WHERE m.session_id = ? AND m.position IS NOT NULL "
                    "ORDER BY m.position");
    st.bind(1, session_id);
    if (since) st.bind(2, static_cast<std::int64_t>(*since));
    Transcript t;
    while (st.executeStep()) {
      const auto seq = static_cast<std::uint64_t>(st.getColumn(0).getInt64());
      const std::int64_t chars = st.getColumn(1).getInt64();
      auto m = std::make_shared<const Message>(Decode(st.getColumn(2), seq));
      if (chars < 0 || m->id.empty()) {
        throw Abort{Status::Corruption("recap sqlite store " + Quoted(c_->path()) + ": message " +
                                       std::to_string(seq) +
                                       " has a damaged row (negative size or no id). recap has "
                                       "not changed the file; restore it from a backup")};
      }
      t.AppendMeasured(std::move(m), static_cast<std::size_t>(chars));
    }
    return t;
  }

  Message Decode(const SQLite::Column& column, std::uint64_t seq) {
    const auto* data = static_cast<const char*>(column.getBlob());
    const int size = column.getBytes();
    Result<Message> m = DecodeBody(std::string_view(data, static_cast<std::size_t>(size)));
    if (!m.ok()) {
      throw Abort{Status::Corruption("recap sqlite store " + Quoted(c_->path()) + ": message " +
                                     std::to_string(seq) + " is damaged: " + m.status().message() +
                                     ". recap has not changed the file; restore it from a "
                                     "backup")};
    }
    return std::move(m).value();
  }

  std::mutex mu_;
  std::unique_ptr<Connection> c_;
  std::string scratch_;  // the body being written
  std::string text_;     // the searchable text being indexed
};

}  // namespace

int SqliteSchemaVersion() noexcept { return kSchemaVersion; }

Result<std::shared_ptr<SessionStore>> OpenSqliteSessionStore(const std::string& path,
                                                             const SqliteStoreOptions& options) {
  Result<std::unique_ptr<Connection>> c = OpenConnection(path, options);
  RECAP_RETURN_IF_ERROR(c);
  return std::shared_ptr<SessionStore>(std::make_shared<SqliteSessionStore>(std::move(c).value()));
}

Result<std::vector<std::uint64_t>> CreateSqliteSessions(const std::string& path,
                                                        std::vector<NewSession> sessions,
                                                        const SqliteStoreOptions& options) {
  const auto in_place = [&](std::vector<NewSession> in) -> Result<std::vector<std::uint64_t>> {
    Result<std::shared_ptr<SessionStore>> store = OpenSqliteSessionStore(path, options);
    RECAP_RETURN_IF_ERROR(store);
    return (*store)->CreateSessions(std::move(in));
  };
  struct stat st {};
  if (options.read_only || !options.create_if_missing || path.empty() ||
      ::lstat(path.c_str(), &st) == 0) {
    return in_place(std::move(sessions));
  }
  AsideFile aside = AsideFile::Create(path);
  if (!aside.ok()) return in_place(std::move(sessions));
  auto c = std::make_unique<Connection>(path, options);
  c->BuildAside(aside.sqlite_name(), AsideFile::vfs());
  // Nothing is read from the sessions before the build's store is open: when it cannot be,
  // the database is written in place instead.
  if (!c->Open().ok()) return in_place(std::move(sessions));
  auto built = std::make_unique<SqliteSessionStore>(std::move(c));
  std::vector<std::string> names;
  for (const NewSession& n : sessions) names.push_back(n.session);
  Result<std::vector<std::uint64_t>> created = built->CreateSessions(std::move(sessions));
  if (!created.ok()) return created;  // the unnamed file is freed with `aside`
  if (aside.Publish(path, options.synchronous != SqliteSynchronous::kOff) == 0) return created;
  // Another process created a file at `path` meanwhile (or the new one could not be named):
  // the sessions go into that file, read back from the one built aside.
  std::vector<NewSession> again;
  for (const std::string& name : names) {
    Result<SessionState> state = built->Load(name);
    RECAP_RETURN_IF_ERROR(state);
    NewSession n;
    n.session = name;
    n.messages = state->transcript.ToVector();
    again.push_back(std::move(n));
  }
  built.reset();
  return in_place(std::move(again));
}

}  // namespace v0
}  // namespace recap
