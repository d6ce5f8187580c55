// The PostgreSQL session store and memory store (recap/postgres/postgres_store.h).
//
// Every call takes a connection from the store's pool. Writes are one transaction each that
// locks the session's row (SELECT … FOR UPDATE), checks, writes and moves the version, so two
// processes writing one session serialize on that lock and the loser of a race sees the new
// version (R8.2). Reads are single statements, each a consistent snapshot by itself.
//
// Statements are prepared once per connection and sent with text parameters (message bodies
// as binary); results come back in binary form, so a message body is read as the bytes the
// body codec wrote, without escaping.
//
// This file holds the two stores. The client side lives beside it, one idea a file:
// pg_errors (failures mapped to a Status), pg_connection (parameters, results, the prepared
// statements, one connection), pg_pool (the connection spec with secrets scrubbed, the pool,
// Call with its retries), pg_schema (creation and migration under an advisory lock) and
// pg_search (what the recall index holds of a message, R18.1).
#include "recap/postgres/postgres_store.h"

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <condition_variable>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <exception>
#include <limits>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

#include <libpq-fe.h>

#include "recap/transcript.h"
#include "recap/version.h"

#include "pg_connection.h"
#include "pg_errors.h"
#include "pg_pool.h"
#include "pg_schema.h"
#include "pg_search.h"
#include "recap_internal/body_codec.h"
#include "recap_internal/history_search.h"
#include "recap_internal/store_rules.h"
#include "schema.h"

namespace recap {
inline namespace v0 {
namespace postgres_internal {
namespace {

using internal::DecodeBody;
using internal::EncodeBody;

Status CheckName(const std::string& session) {
  RECAP_RETURN_IF_ERROR(internal::CheckSessionName(session));
  if (session.find('\0') != std::string::npos) {
    return Status::InvalidArgument(
        "the session id holds a NUL character, which PostgreSQL "
        "cannot store; use another name");
  }
  return Status::OK();
}

using internal::SessionRow;

std::string SeqList(const std::vector<std::int64_t>& v) {
  std::string out;
  for (std::size_t i = 0; i < v.size(); ++i) {
    if (i) out += ',';
    out += std::to_string(v[i]);
  }
  return out;
}

std::string ArrayLiteral(const std::vector<std::int64_t>& v) { return "{" + SeqList(v) + "}"; }

// A commit's span_seqs or added_seqs (SeqList's form); nullopt when damaged.
std::optional<std::vector<std::int64_t>> ParseSeqList(std::string_view text) {
  std::vector<std::int64_t> out;
  std::size_t at = 0;
  while (at < text.size()) {
    std::size_t end = text.find(',', at);
    if (end == std::string_view::npos) end = text.size();
    const std::string item(text.substr(at, end - at));
    char* stop = nullptr;
    errno = 0;
    const long long v = std::strtoll(item.c_str(), &stop, 10);
    if (item.empty() || errno != 0 || *stop != '\0') return std::nullopt;
    out.push_back(v);
    at = end + 1;
  }
  return out;
}

// The message's searchable text (pg_search.h) as the last parameter of kInsertMessage or
// kBackfillWrite: NULL when it has none.
void AddSearchText(Params& p, const Message& m) {
  const std::string text = IndexedText(internal::SearchableText(m));
  if (text.empty()) {
    p.Null();
  } else {
    p.Text(text);
  }
}

class PostgresSessionStore final : public SessionStore {
 public:
  PostgresSessionStore(std::unique_ptr<Pool> pool, bool allow_reserved)
      : pool_(std::move(pool)), allow_reserved_(allow_reserved) {}

  bool AllowReserved() const { return allow_reserved_; }
  Status CheckWritten(const std::string& session) const {
    RECAP_RETURN_IF_ERROR(CheckName(session));
    return internal::CheckWrittenSessionName(session, allow_reserved_);
  }

  Result<SessionState> Load(const std::string& session) override {
    RECAP_RETURN_IF_ERROR(CheckName(session));
    SessionState state;
    Status s = Call(*pool_, "loading session " + Quoted(session), false, [&](Connection& c) {
      bool appended_only = false;
      state.transcript = ReadActive(c, session, -1, &state.version, &appended_only, &state.learned);
    });
    RECAP_RETURN_IF_ERROR(s);
    return state;
  }

  Result<SessionChanges> LoadChanges(const std::string& session,
                                     std::uint64_t since_version) override {
    RECAP_RETURN_IF_ERROR(CheckName(session));
    SessionChanges changes;
    Status s = Call(
        *pool_, "loading the changes of session " + Quoted(session), false, [&](Connection& c) {
          bool appended_only = true;
          Transcript t = ReadActive(c, session, static_cast<std::int64_t>(since_version),
                                    &changes.version, &appended_only, &changes.learned);
          if (Status future = internal::CheckSinceVersion(session, since_version, changes.version);
              !future.ok()) {
            throw Abort{future};
          }
          changes.appended_only = appended_only;
          if (appended_only) {
            changes.appended = t.ToVector();
          } else {
            changes.transcript = std::move(t);
          }
        });
    RECAP_RETURN_IF_ERROR(s);
    return changes;
  }

  Status SaveLearned(const std::string& session, const std::string& learned) override {
    RECAP_RETURN_IF_ERROR(CheckName(session));
    return Call(*pool_, "saving what was learned about session " + Quoted(session), true,
                [&](Connection& c) {
                  // Advice, not content: no wait for the disk (R12.5).
                  c.Simple("SET LOCAL synchronous_commit = off");
                  Params p;
                  p.Text(session);
                  if (learned.empty()) {
                    c.Run(kClearLearned, pool_->texts(), p);
                  } else {
                    p.Text(learned);
                    c.Run(kSaveLearned, pool_->texts(), p);
                  }
                });
  }

  Result<std::uint64_t> AppendMessages(const std::string& session,
                                       std::vector<Message> messages) override {
    RECAP_RETURN_IF_ERROR(CheckWritten(session));
    Result<Transcript> prepared = internal::PrepareAppend(std::move(messages));
    RECAP_RETURN_IF_ERROR(prepared);
    const Transcript& batch = *prepared;
    if (batch.empty()) {
      std::uint64_t version = 0;
      Status s = Call(*pool_, "reading the version of session " + Quoted(session), false,
                      [&](Connection& c) {
                        Params p;
                        p.Text(session);
                        ResultPtr r = c.Run(kVersion, pool_->texts(), p);
                        if (PQntuples(r.get()) > 0) {
                          version = static_cast<std::uint64_t>(GetInt(r.get(), 0, 0));
                        }
                      });
      RECAP_RETURN_IF_ERROR(s);
      return version;
    }
    std::uint64_t version = 0;
    Status s = Call(*pool_, "appending to session " + Quoted(session), true, [&](Connection& c) {
      std::optional<SessionRow> row = Lock(c, session);
      if (!row) {
        Params p;
        p.Text(session);
        c.Run(kCreateSession, pool_->texts(), p);
        row = Lock(c, session);
        if (!row) throw Abort{Status::Internal("session " + Quoted(session) + " vanished")};
      }
      version = row->version + 1;
      std::int64_t position = row->next_position;
      std::uint64_t turns = row->turns;
      if (batch.size() == 1) {
        turns = internal::TurnOf(batch[0], turns);
        InsertMessage(c, row->id, batch[0], batch.chars(0), position++, version, turns,
                      [&] { return internal::AppendIdTaken(session, 0, batch[0].id); });
      }
      // Several messages go in pipelined chunks: one round trip per chunk, not per message.
      constexpr std::size_t kChunk = 1000;
      for (std::size_t start = 0; batch.size() > 1 && start < batch.size(); start += kChunk) {
        const std::size_t end = std::min(batch.size(), start + kChunk);
        std::vector<std::string> bodies(end - start);
        std::vector<Params> sets(end - start);
        for (std::size_t i = start; i < end; ++i) {
          std::string& body = bodies[i - start];
          EncodeBody(batch[i], body);
          turns = internal::TurnOf(batch[i], turns);
          sets[i - start]
              .Int(row->id)
              .Text(batch[i].id)
              .Int(position++)
              .Int(static_cast<std::int64_t>(version))
              .Text(RoleName(batch[i].role))
              .Bool(batch[i].summary)
              .Int(static_cast<std::int64_t>(batch.chars(i)))
              .Bytes(body)
              .Int(static_cast<std::int64_t>(turns));
          AddSearchText(sets[i - start], batch[i]);
        }
        std::size_t failed = 0;
        try {
          c.RunPipelined(kInsertMessage, pool_->texts(), sets, &failed);
        } catch (const PgFailure& f) {
          if (f.sqlstate == "23505" && f.constraint == "messages_active_id") {
            throw Abort{internal::AppendIdTaken(session, start + failed, batch[start + failed].id)};
          }
          throw;
        }
      }
      Params p;
      p.Int(row->id)
          .Int(static_cast<std::int64_t>(version))
          .Int(position)
          .Int(static_cast<std::int64_t>(turns));
      c.Run(kSetVersion, pool_->texts(), p);
    });
    RECAP_RETURN_IF_ERROR(s);
    return version;
  }

  Result<std::vector<std::uint64_t>> CreateSessions(std::vector<NewSession> sessions) override {
    RECAP_RETURN_IF_ERROR(internal::CheckNewSessions(sessions, AllowReserved()));
    std::vector<std::uint64_t> versions;
    const std::string doing = sessions.size() == 1
                                  ? "creating session " + Quoted(sessions[0].session)
                                  : "creating sessions " + Quoted(sessions[0].session) + " and " +
                                        std::to_string(sessions.size() - 1) + " more";
    Status s = Call(*pool_, doing, true, [&](Connection& c) {
      versions.clear();
      // Each row is inserted (or found) and locked first: a second host creating one of these
      // sessions at once waits on the row, then finds it written and gets kConflict.
      std::vector<SessionRow> rows;
      for (const NewSession& n : sessions) {
        Params p;
        p.Text(n.session);
        c.Run(kCreateSession, pool_->texts(), p);
        std::optional<SessionRow> row = Lock(c, n.session);
        if (!row) throw Abort{Status::Internal("session " + Quoted(n.session) + " vanished")};
        if (row->version != 0) throw Abort{internal::SessionExists(n.session, row->version)};
        rows.push_back(*row);
      }
      for (std::size_t k = 0; k < sessions.size(); ++k) {
        internal::NewSessionReader reader(sessions[k]);
        std::int64_t position = rows[k].next_position;
        std::uint64_t turns = 0;
        // Pipelined chunks, as a batch append sends them.
        constexpr std::size_t kChunk = 1000;
        std::vector<Message> chunk;
        std::vector<std::size_t> chars;
        bool more = true;
        while (more) {
          chunk.clear();
          chars.clear();
          while (chunk.size() < kChunk) {
            Message m;
            std::size_t n = 0;
            Result<bool> next = reader.Next(&m, &n);
            if (!next.ok()) throw Abort{next.status()};
            if (!*next) {
              more = false;
              break;
            }
            chunk.push_back(std::move(m));
            chars.push_back(n);
          }
          if (chunk.empty()) break;
          std::vector<std::string> bodies(chunk.size());
          std::vector<Params> sets(chunk.size());
          for (std::size_t i = 0; i < chunk.size(); ++i) {
            EncodeBody(chunk[i], bodies[i]);
            turns = internal::TurnOf(chunk[i], turns);
            sets[i]
                .Int(rows[k].id)
                .Text(chunk[i].id)
                .Int(position++)
                .Int(1)
                .Text(RoleName(chunk[i].role))
                .Bool(chunk[i].summary)
                .Int(static_cast<std::int64_t>(chars[i]))
                .Bytes(bodies[i])
                .Int(static_cast<std::int64_t>(turns));
            AddSearchText(sets[i], chunk[i]);
          }
          std::size_t failed = 0;
          c.RunPipelined(kInsertMessage, pool_->texts(), sets, &failed);
        }
        if (reader.count() == 0) throw Abort{internal::NewSessionEmpty(sessions[k].session)};
        Params p;
        p.Int(rows[k].id).Int(1).Int(position).Int(static_cast<std::int64_t>(turns));
        c.Run(kSetVersion, pool_->texts(), p);
        versions.push_back(1);
      }
    });
    RECAP_RETURN_IF_ERROR(s);
    return versions;
  }

  Result<std::uint64_t> CommitCompaction(const std::string& session,
                                         const CompactionCommit& commit) override {
    RECAP_RETURN_IF_ERROR(CheckWritten(session));
    std::uint64_t version = 0;
    Status s = Call(
        *pool_, "committing a compaction of session " + Quoted(session), true, [&](Connection& c) {
          SessionRow row = CheckVersion(c, session, commit.expected_version);
          if (Status shape = internal::CheckCompactionShape(session, commit); !shape.ok()) {
            throw Abort{shape};
          }
          // The span: the leading active messages, which are the kept and the replaced ones.
          const std::size_t span = commit.kept.size() + commit.replaced.size();
          Params hp;
          hp.Int(row.id).Int(static_cast<std::int64_t>(span));
          ResultPtr head = c.Run(kHead, pool_->texts(), hp);
          const int n = PQntuples(head.get());
          std::vector<std::string> leading;
          std::vector<std::int64_t> seqs;
          std::int64_t last_position = 0;
          for (int i = 0; i < n; ++i) {
            leading.emplace_back(GetView(head.get(), i, 0));
            last_position = GetInt(head.get(), i, 1);
            seqs.push_back(GetInt(head.get(), i, 2));
          }
          if (Status st = internal::CheckCompactionSpan(
                  session, commit, leading, leading.size(),
                  [&](const std::string& id) { return IsActiveId(c, row.id, id); });
              !st.ok()) {
            throw Abort{st};
          }
          version = row.version + 1;
          const std::int64_t number = row.compactions + 1;
          const std::string by = "compaction:" + std::to_string(number);
          Params rp;
          rp.Int(row.id).Text(by).Int(last_position);
          c.Run(kRetirePrefix, pool_->texts(), rp);

          // The kept messages, then the checkpoint and the injected messages, take the places just
          // before the messages after the span.
          const internal::CompactionPlacement placed =
              internal::PlaceCompaction(commit, last_position);
          const Transcript& added = placed.added;
          std::int64_t position = placed.first_position;
          if (!commit.kept.empty()) {
            const std::unordered_set<std::string> kept(commit.kept.begin(), commit.kept.end());
            for (std::size_t j = 0; j < leading.size(); ++j) {
              if (kept.count(leading[j]) == 0) continue;
              Params kp;
              kp.Int(seqs[j]).Int(position++);
              c.Run(kRestoreKept, pool_->texts(), kp);
            }
          }
          std::unordered_set<std::string> ids(commit.kept.begin(), commit.kept.end());
          std::vector<std::int64_t> added_seqs;
          for (std::size_t k = 0; k < added.size(); ++k) {
            auto duplicate = [&] {
              return internal::CommitIdTaken(session, internal::CompactionAddedName(commit, k),
                                             added[k].id);
            };
            if (!ids.insert(added[k].id).second) throw Abort{duplicate()};
            added_seqs.push_back(InsertMessage(c, row.id, added[k], added.chars(k), position++,
                                               version, row.turns, duplicate));
          }
          MarkRewrite(c, kMarkCompaction, row.id, version, number);
          LogCommit(c, row.id, version, "compaction", number, commit.reason, commit.replaced.size(),
                    added.size(), &seqs, &added_seqs);
        });
    RECAP_RETURN_IF_ERROR(s);
    return version;
  }

  Result<std::uint64_t> CommitReduction(const std::string& session,
                                        const ReductionCommit& commit) override {
    RECAP_RETURN_IF_ERROR(CheckWritten(session));
    std::uint64_t version = 0;
    Status s = Call(
        *pool_, "committing a reduction of session " + Quoted(session), true, [&](Connection& c) {
          SessionRow row = CheckVersion(c, session, commit.expected_version);
          if (commit.replacements.empty()) {
            throw Abort{internal::NoReplacements(session)};
          }
          std::unordered_set<std::string> seen;
          std::vector<std::pair<std::int64_t, std::int64_t>> targets;  // seq, position
          std::vector<std::uint64_t> turns;
          for (std::size_t i = 0; i < commit.replacements.size(); ++i) {
            const std::string& id = commit.replacements[i].id;
            Params fp;
            fp.Int(row.id).Text(id);
            ResultPtr found = c.Run(kFindActive, pool_->texts(), fp);
            if (PQntuples(found.get()) == 0) {
              throw Abort{internal::ReplacementNotActive(session, i, id)};
            }
            targets.emplace_back(GetInt(found.get(), 0, 0), GetInt(found.get(), 0, 1));
            turns.push_back(static_cast<std::uint64_t>(GetInt(found.get(), 0, 2)));
            if (!seen.insert(id).second) {
              throw Abort{internal::ReplacedTwice(session, i, id)};
            }
          }
          version = row.version + 1;
          const std::int64_t number = row.reductions + 1;
          const std::string by = "reduction:" + std::to_string(number);
          Transcript added;
          for (const Message& m : commit.replacements) added.Append(m);
          std::vector<std::int64_t> span_seqs;
          std::vector<std::int64_t> added_seqs;
          for (std::size_t i = 0; i < targets.size(); ++i) {
            Params rp;
            rp.Int(targets[i].first).Text(by);
            c.Run(kRetireSeq, pool_->texts(), rp);
            span_seqs.push_back(targets[i].first);
            // A reduced copy belongs to its original's turn.
            added_seqs.push_back(InsertMessage(
                c, row.id, added[i], added.chars(i), targets[i].second, version, turns[i], [&] {
                  return Status::InvalidArgument("replacement " + std::to_string(i) +
                                                 " collides with an active message");
                }));
          }
          MarkRewrite(c, kMarkReduction, row.id, version, number);
          LogCommit(c, row.id, version, "reduction", number, "", targets.size(), targets.size(),
                    &span_seqs, &added_seqs);
        });
    RECAP_RETURN_IF_ERROR(s);
    return version;
  }

  Result<std::uint64_t> CommitRecovery(const std::string& session,
                                       const RecoveryCommit& commit) override {
    RECAP_RETURN_IF_ERROR(CheckWritten(session));
    std::uint64_t version = 0;
    Status s = Call(
        *pool_, "committing a recovery of session " + Quoted(session), true, [&](Connection& c) {
          SessionRow row = CheckVersion(c, session, commit.expected_version);
          std::vector<std::pair<std::int64_t, std::string>> active;  // seq, message_id
          std::vector<std::string> active_ids;
          {
            Params ap;
            ap.Int(row.id);
            ResultPtr all = c.Run(kActiveIds, pool_->texts(), ap);
            for (int i = 0; i < PQntuples(all.get()); ++i) {
              active_ids.emplace_back(GetView(all.get(), i, 1));
              active.emplace_back(GetInt(all.get(), i, 0), active_ids.back());
            }
          }
          Result<internal::RecoveryPlan> plan = internal::PlanRecovery(session, active_ids, commit);
          if (!plan.ok()) throw Abort{plan.status()};
          const Transcript& results = plan->results;
          const auto& after = plan->after;
          // New positions above every current one, so no two rows ever share one mid-update.
          std::int64_t position = row.next_position;
          version = row.version + 1;
          std::vector<std::int64_t> seqs;
          std::vector<std::int64_t> positions;
          std::vector<std::pair<std::size_t, std::int64_t>> inserts;  // result, position
          for (const auto& [seq, id] : active) {
            seqs.push_back(seq);
            positions.push_back(position++);
            auto it = after.find(id);
            if (it == after.end()) continue;
            for (std::size_t r : it->second) inserts.emplace_back(r, position++);
          }
          Params mp;
          const std::string seq_list = ArrayLiteral(seqs);
          const std::string position_list = ArrayLiteral(positions);
          mp.Text(seq_list).Text(position_list);
          c.Run(kMovePositions, pool_->texts(), mp);
          for (const auto& [r, at] : inserts) {
            InsertMessage(c, row.id, results[r], results.chars(r), at, version, row.turns, [&] {
              return Status::InvalidArgument("recovered result collides with an active message");
            });
          }
          const std::int64_t number = row.recoveries + 1;
          MarkRewrite(c, kMarkRecovery, row.id, version, number, position);
          LogCommit(c, row.id, version, "recovery", number, "", 0, results.size());
        });
    RECAP_RETURN_IF_ERROR(s);
    return version;
  }

  Result<UndoOutcome> CommitUndo(const std::string& session, const UndoCommit& commit) override {
    RECAP_RETURN_IF_ERROR(CheckWritten(session));
    UndoOutcome out;
    Status s = Call(
        *pool_, "undoing the last compaction of session " + Quoted(session), true,
        [&](Connection& c) {
          out = UndoOutcome{};
          SessionRow row = CheckVersion(c, session, commit.expected_version);
          out.version = row.version;
          Params lp;
          lp.Int(row.id);
          ResultPtr last = c.Run(kLastRewrite, pool_->texts(), lp);
          if (PQntuples(last.get()) == 0) return;
          const std::int64_t commit_id = GetInt(last.get(), 0, 0);
          const std::string kind(GetView(last.get(), 0, 1));
          const bool compaction = kind == "compaction";
          const std::string name = kind + ":" + std::to_string(GetInt(last.get(), 0, 2));
          const std::string reason =
              IsNull(last.get(), 0, 3) ? "" : std::string(GetView(last.get(), 0, 3));
          if (IsNull(last.get(), 0, 4) || IsNull(last.get(), 0, 5)) {
            throw Abort{internal::UndoImpossible(session, name,
                                                 "it was committed by an older recap, which did "
                                                 "not record where its messages stood")};
          }
          const std::optional<std::vector<std::int64_t>> span_list =
              ParseSeqList(GetView(last.get(), 0, 4));
          const std::optional<std::vector<std::int64_t>> added_list =
              ParseSeqList(GetView(last.get(), 0, 5));
          if (!span_list || !added_list ||
              (!compaction && span_list->size() != added_list->size())) {
            throw Abort{internal::UndoImpossible(
                session, name, "its record of where its messages stood is damaged")};
          }
          const std::vector<std::int64_t>& span = *span_list;
          const std::vector<std::int64_t>& added = *added_list;
          std::vector<std::int64_t> mine_list(span);
          mine_list.insert(mine_list.end(), added.begin(), added.end());
          const std::string mine_array = ArrayLiteral(mine_list);
          const std::unordered_set<std::int64_t> mine(mine_list.begin(), mine_list.end());

          // Where each message of the commit stands now: every added one must be active still
          // (an undo takes back the newest commit first, so they are).
          std::unordered_map<std::int64_t, std::pair<std::optional<std::int64_t>, std::string>>
              places;  // seq -> position, message_id
          {
            Params wp;
            wp.Int(row.id).Text(mine_array);
            ResultPtr w = c.Run(kSeqPlaces, pool_->texts(), wp);
            for (int i = 0; i < PQntuples(w.get()); ++i) {
              auto& place = places[GetInt(w.get(), i, 0)];
              if (!IsNull(w.get(), i, 1)) place.first = GetInt(w.get(), i, 1);
              place.second = std::string(GetView(w.get(), i, 2));
            }
          }
          auto where =
              [&](std::int64_t seq) -> const std::pair<std::optional<std::int64_t>, std::string>& {
            auto it = places.find(seq);
            if (it == places.end()) {
              throw Abort{internal::UndoImpossible(
                  session, name,
                  "a message it names (" + std::to_string(seq) + ") is not in the table")};
            }
            return it->second;
          };
          std::vector<std::int64_t> added_positions;
          for (std::int64_t seq : added) {
            const auto& [position, id] = where(seq);
            if (!position) {
              throw Abort{internal::UndoImpossible(session, name,
                                                   "a message it added is no longer active")};
            }
            added_positions.push_back(*position);
          }
          std::vector<bool> retired(span.size(), false);
          std::vector<std::int64_t> kept;
          for (std::size_t k = 0; k < span.size(); ++k) {
            const auto& [position, id] = where(span[k]);
            if (position) {  // kept by the compaction
              kept.push_back(span[k]);
              continue;
            }
            retired[k] = true;
            Params hp;
            hp.Int(row.id).Text(id);
            ResultPtr holder = c.Run(kFindActive, pool_->texts(), hp);
            if (PQntuples(holder.get()) > 0 && mine.count(GetInt(holder.get(), 0, 0)) == 0) {
              throw Abort{internal::UndoTaken(session, name, id)};
            }
          }

          const std::int64_t number = row.undos + 1;
          const std::string by = "undo:" + std::to_string(number);
          const std::uint64_t version = row.version + 1;
          // What it added leaves the transcript first, so that no two active rows ever share a
          // position or an id (the partial unique indexes).
          Params rp;
          rp.Text(ArrayLiteral(added)).Text(by);
          c.Run(kRetireSeqs, pool_->texts(), rp);
          std::vector<std::int64_t> positions;
          if (compaction) {
            // The span takes the places just before the first active message that is neither
            // in it nor added by it (those after the span, appended or recovered since); the
            // kept ones leave their places first.
            Params fp;
            fp.Int(row.id).Text(mine_array);
            ResultPtr first = c.Run(kFirstOther, pool_->texts(), fp);
            const std::int64_t end =
                PQntuples(first.get()) > 0 ? GetInt(first.get(), 0, 0) : row.next_position;
            if (!kept.empty()) {
              Params up;
              up.Text(ArrayLiteral(kept));
              c.Run(kUnplaceSeqs, pool_->texts(), up);
            }
            std::int64_t position = end - static_cast<std::int64_t>(span.size());
            for (std::size_t k = 0; k < span.size(); ++k) positions.push_back(position++);
          } else {
            positions = added_positions;  // each original back in its copy's place
          }
          Params pp;
          pp.Text(ArrayLiteral(span)).Text(ArrayLiteral(positions));
          c.Run(kPlaceSeqs, pool_->texts(), pp);
          Params dp;
          dp.Int(commit_id).Int(number);
          c.Run(kMarkUndone, pool_->texts(), dp);
          MarkRewrite(c, kMarkUndo, row.id, version, number);
          std::size_t restored = 0;
          for (bool r : retired) restored += r ? 1 : 0;
          LogCommit(c, row.id, version, "undo", number, name, added.size(), restored);
          out.undone = true;
          out.commit = name;
          out.reason = compaction ? reason : "";
          out.restored = restored;
          out.retired = added.size();
          out.version = version;
        });
    RECAP_RETURN_IF_ERROR(s);
    return out;
  }

  Result<std::vector<HistoryHit>> SearchHistory(const std::string& session,
                                                const HistorySearch& search) override {
    RECAP_RETURN_IF_ERROR(CheckName(session));
    const std::string query = QueryText(internal::WebSearchQuery(search.terms));
    const bool ranged = search.last_turn != 0;
    std::vector<HistoryHit> hits;
    if (search.limit == 0 || (search.ids.empty() && query.empty() && !ranged)) return hits;
    if (!search.terms.empty() && query.empty() && search.ids.empty()) return hits;
    Status s = Call(
        *pool_, "searching the history of session " + Quoted(session), false, [&](Connection& c) {
          hits.clear();
          Params sp;
          sp.Text(session);
          ResultPtr found = c.Run(kSessionId, pool_->texts(), sp);
          if (PQntuples(found.get()) == 0) return;
          const std::int64_t session_id = GetInt(found.get(), 0, 0);
          std::unordered_set<std::int64_t> seen;
          auto take = [&](const PGresult* r, bool scored) {
            for (int i = 0; i < PQntuples(r); ++i) {
              const std::int64_t seq = GetInt(r, i, 0);
              if (!seen.insert(seq).second) continue;
              HistoryHit hit;
              hit.entry.seq = static_cast<std::uint64_t>(seq);
              if (!IsNull(r, i, 1)) {
                hit.entry.state = HistoryState::kCompacted;
                hit.entry.replaced_by = std::string(GetView(r, i, 1));
              }
              hit.entry.message = Decode(GetView(r, i, 2), hit.entry.seq);
              hit.entry.turn = static_cast<std::uint64_t>(GetInt(r, i, 3));
              if (scored) hit.score = GetDouble(r, i, 4);
              hits.push_back(std::move(hit));
            }
          };
          for (const std::string& id : search.ids) {
            if (id.find('\0') != std::string::npos) continue;  // no stored id holds one
            Params ip;
            ip.Int(session_id).Text(id).Bool(search.include_active);
            take(c.Run(kSearchIds, pool_->texts(), ip).get(), false);
          }
          // A turn range is given by last_turn; first_turn alone means nothing (session_store.h).
          const std::int64_t first =
              ranged ? static_cast<std::int64_t>(std::min<std::uint64_t>(
                           search.first_turn, std::numeric_limits<std::int64_t>::max()))
                     : 0;
          const std::int64_t last =
              ranged ? static_cast<std::int64_t>(std::min<std::uint64_t>(
                           search.last_turn, std::numeric_limits<std::int64_t>::max()))
                     : std::numeric_limits<std::int64_t>::max();
          const std::int64_t limit = static_cast<std::int64_t>(
              std::min<std::size_t>(search.limit, std::numeric_limits<std::int64_t>::max()));
          if (!query.empty()) {
            Params tp;
            tp.Int(session_id)
                .Text(query)
                .Bool(search.include_active)
                .Int(first)
                .Int(last)
                .Int(limit);
            take(c.Run(kSearchText, pool_->texts(), tp).get(), true);
          } else if (ranged && search.terms.empty()) {
            Params rp;
            rp.Int(session_id).Bool(search.include_active).Int(first).Int(last).Int(limit);
            take(c.Run(kSearchTurns, pool_->texts(), rp).get(), false);
          }
        });
    RECAP_RETURN_IF_ERROR(s);
    internal::RankHits(hits, search);
    return hits;
  }

  Result<std::vector<HistoryEntry>> History(const std::string& session) override {
    RECAP_RETURN_IF_ERROR(CheckName(session));
    std::vector<HistoryEntry> out;
    Status s = Call(*pool_, "reading the history of session " + Quoted(session), false,
                    [&](Connection& c) {
                      Params p;
                      p.Text(session);
                      ResultPtr r = c.Run(kHistory, pool_->texts(), p);
                      const int n = PQntuples(r.get());
                      out.reserve(static_cast<std::size_t>(n));
                      for (int i = 0; i < n; ++i) {
                        HistoryEntry e;
                        e.seq = static_cast<std::uint64_t>(GetInt(r.get(), i, 0));
                        if (!IsNull(r.get(), i, 1)) {
                          e.state = HistoryState::kCompacted;
                          e.replaced_by = std::string(GetView(r.get(), i, 1));
                        }
                        e.message = Decode(GetView(r.get(), i, 2), e.seq);
                        e.turn = static_cast<std::uint64_t>(GetInt(r.get(), i, 3));
                        out.push_back(std::move(e));
                      }
                    });
    RECAP_RETURN_IF_ERROR(s);
    return out;
  }

  Result<std::vector<std::string>> ListSessions() override {
    std::vector<std::string> out;
    Status s = Call(*pool_, "listing the sessions", false, [&](Connection& c) {
      ResultPtr r = c.Run(kListSessions, pool_->texts(), Params());
      for (int i = 0; i < PQntuples(r.get()); ++i) out.emplace_back(GetView(r.get(), i, 0));
    });
    RECAP_RETURN_IF_ERROR(s);
    return out;
  }

 private:
  // The active messages of `session` stored after `since` (-1: all); `appended_only` is
  // cleared when a rewrite happened after `since`, and then every active message comes back.
  Transcript ReadActive(Connection& c, const std::string& session, std::int64_t since,
                        std::uint64_t* version, bool* appended_only,
                        std::string* learned = nullptr) {
    Params p;
    p.Text(session).Int(since);
    ResultPtr r = c.Run(kLoad, pool_->texts(), p);
    Transcript t;
    const int n = PQntuples(r.get());
    if (n == 0) {
      *version = 0;  // never written
      return t;
    }
    *version = static_cast<std::uint64_t>(GetInt(r.get(), 0, 0));
    if (learned != nullptr && !IsNull(r.get(), 0, 6)) *learned = GetView(r.get(), 0, 6);
    const std::int64_t rewrite = GetInt(r.get(), 0, 1);
    *appended_only = since >= rewrite;
    std::vector<std::pair<std::int64_t, int>> order;  // position, row
    order.reserve(static_cast<std::size_t>(n));
    for (int i = 0; i < n; ++i) {
      if (IsNull(r.get(), i, 2)) continue;  // the session row without messages
      order.emplace_back(GetInt(r.get(), i, 5), i);
    }
    std::sort(order.begin(), order.end());
    for (const auto& [position, i] : order) {
      const auto seq = static_cast<std::uint64_t>(GetInt(r.get(), i, 2));
      const std::int64_t chars = GetInt(r.get(), i, 3);
      auto m = std::make_shared<const Message>(Decode(GetView(r.get(), i, 4), seq));
      if (chars < 0 || m->id.empty()) {
        throw Abort{Status::Corruption("recap postgres store (" + pool_->spec().display +
                                       "): message " + std::to_string(seq) +
                                       " has a damaged row (negative size or no id). recap has "
                                       "changed nothing; restore it from a backup")};
      }
      t.AppendMeasured(std::move(m), static_cast<std::size_t>(chars));
    }
    return t;
  }

  std::optional<SessionRow> Lock(Connection& c, const std::string& session) {
    Params p;
    p.Text(session);
    ResultPtr r = c.Run(kFindForUpdate, pool_->texts(), p);
    if (PQntuples(r.get()) == 0) return std::nullopt;
    SessionRow row;
    row.id = GetInt(r.get(), 0, 0);
    row.version = static_cast<std::uint64_t>(GetInt(r.get(), 0, 1));
    row.rewrite_version = static_cast<std::uint64_t>(GetInt(r.get(), 0, 2));
    row.compactions = GetInt(r.get(), 0, 3);
    row.reductions = GetInt(r.get(), 0, 4);
    row.recoveries = GetInt(r.get(), 0, 5);
    row.next_position = GetInt(r.get(), 0, 6);
    row.turns = static_cast<std::uint64_t>(GetInt(r.get(), 0, 7));
    row.undos = GetInt(r.get(), 0, 8);
    return row;
  }

  SessionRow CheckVersion(Connection& c, const std::string& session, std::uint64_t expected) {
    Result<SessionRow> row = internal::CommitAgainst(session, expected, Lock(c, session));
    if (!row.ok()) throw Abort{row.status()};
    return *row;
  }

  bool IsActiveId(Connection& c, std::int64_t session_id, const std::string& id) {
    Params p;
    p.Int(session_id).Text(id);
    return PQntuples(c.Run(kIsActiveId, pool_->texts(), p).get()) > 0;
  }

  // Inserts one message (its row, its body and its searchable text) and returns its seq; an id
  // already active in the session fails with `duplicate()`.
  template <typename Describe>
  std::int64_t InsertMessage(Connection& c, std::int64_t session_id, const Message& m,
                             std::size_t chars, std::int64_t position, std::uint64_t version,
                             std::uint64_t turn, Describe&& duplicate) {
    scratch_.clear();
    EncodeBody(m, scratch_);
    Params p;
    p.Int(session_id)
        .Text(m.id)
        .Int(position)
        .Int(static_cast<std::int64_t>(version))
        .Text(RoleName(m.role))
        .Bool(m.summary)
        .Int(static_cast<std::int64_t>(chars))
        .Bytes(scratch_)
        .Int(static_cast<std::int64_t>(turn));
    AddSearchText(p, m);
    try {
      ResultPtr r = c.Run(kInsertMessage, pool_->texts(), p);
      return GetInt(r.get(), 0, 0);
    } catch (const PgFailure& f) {
      if (f.sqlstate == "23505" && f.constraint == "messages_active_id") {
        throw Abort{duplicate()};
      }
      throw;
    }
  }

  void MarkRewrite(Connection& c, int q, std::int64_t session_id, std::uint64_t version,
                   std::int64_t number, std::int64_t next_position = -1) {
    Params p;
    p.Int(session_id).Int(static_cast<std::int64_t>(version)).Int(number);
    // A recovery renumbers the positions; an undo places messages below next_position.
    if (q == kMarkRecovery) p.Int(next_position);
    c.Run(q, pool_->texts(), p);
  }

  // `span_seqs`, `added_seqs`: what CommitUndo needs to take a compaction or reduction back.
  void LogCommit(Connection& c, std::int64_t session_id, std::uint64_t version, const char* kind,
                 std::int64_t number, const std::string& reason, std::size_t retired,
                 std::size_t added, const std::vector<std::int64_t>* span_seqs = nullptr,
                 const std::vector<std::int64_t>* added_seqs = nullptr) {
    Params p;
    const std::string k = kind;
    p.Int(session_id).Int(static_cast<std::int64_t>(version)).Text(k).Int(number);
    if (reason.empty()) {
      p.Null();
    } else {
      p.Text(reason);
    }
    p.Int(static_cast<std::int64_t>(retired)).Int(static_cast<std::int64_t>(added));
    if (span_seqs) {
      p.Text(SeqList(*span_seqs)).Text(SeqList(*added_seqs));
    } else {
      p.Null().Null();
    }
    c.Run(kLogCommit, pool_->texts(), p);
  }

  Message Decode(std::string_view body, std::uint64_t seq) {
    Result<Message> m = DecodeBody(body);
    if (!m.ok()) {
      throw Abort{Status::Corruption("recap postgres store (" + pool_->spec().display +
                                     "): message " + std::to_string(seq) +
                                     " is damaged: " + m.status().message() +
                                     ". recap has changed nothing; restore it from a backup")};
    }
    return std::move(m).value();
  }

  std::unique_ptr<Pool> pool_;
  bool allow_reserved_ = false;
  // The body being written. Calls run on several threads at once, so each has its own.
  static thread_local std::string scratch_;
};

thread_local std::string PostgresSessionStore::scratch_;

class PostgresMemoryStore final : public MemoryStore {
 public:
  explicit PostgresMemoryStore(std::unique_ptr<Pool> pool) : pool_(std::move(pool)) {}

  Status Add(const std::string& scope, const std::vector<std::string>& memories) override {
    if (memories.empty()) return Status::OK();
    return Call(*pool_, "adding memories to scope " + Quoted(scope), true, [&](Connection& c) {
      for (const std::string& text : memories) {
        Params p;
        p.Text(scope).Text(text);
        c.Run(kAddMemory, pool_->texts(), p);
      }
    });
  }

  Result<std::vector<std::string>> List(const std::string& scope) override {
    std::vector<std::string> out;
    Status s =
        Call(*pool_, "listing the memories of scope " + Quoted(scope), false, [&](Connection& c) {
          Params p;
          p.Text(scope);
          ResultPtr r = c.Run(kListMemories, pool_->texts(), p);
          for (int i = 0; i < PQntuples(r.get()); ++i) {
            out.emplace_back(GetView(r.get(), i, 0));
          }
        });
    RECAP_RETURN_IF_ERROR(s);
    return out;
  }

 private:
  std::unique_ptr<Pool> pool_;
};

Result<std::unique_ptr<Pool>> OpenPool(const PostgresStoreOptions& options) {
  Result<ConnectSpec> spec = MakeSpec(options);
  RECAP_RETURN_IF_ERROR(spec);
  auto pool = std::make_unique<Pool>(std::move(spec).value());
  RECAP_RETURN_IF_ERROR(EnsureSchema(*pool));
  return pool;
}

}  // namespace
}  // namespace postgres_internal

using postgres_internal::OpenPool;
using postgres_internal::Pool;

int PostgresSchemaVersion() noexcept { return postgres_internal::kSchemaVersion; }

Result<std::shared_ptr<SessionStore>> OpenPostgresSessionStore(
    const PostgresStoreOptions& options) {
  Result<std::unique_ptr<Pool>> pool = OpenPool(options);
  RECAP_RETURN_IF_ERROR(pool);
  return std::shared_ptr<SessionStore>(std::make_shared<postgres_internal::PostgresSessionStore>(
      std::move(pool).value(), options.allow_reserved_sessions));
}

Result<std::shared_ptr<MemoryStore>> OpenPostgresMemoryStore(const PostgresStoreOptions& options) {
  Result<std::unique_ptr<Pool>> pool = OpenPool(options);
  RECAP_RETURN_IF_ERROR(pool);
  return std::shared_ptr<MemoryStore>(
      std::make_shared<postgres_internal::PostgresMemoryStore>(std::move(pool).value()));
}

}  // namespace v0
}  // namespace recap
