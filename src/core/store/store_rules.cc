#include "recap_internal/store_rules.h"

#include <cassert>
#include <optional>
#include <unordered_set>
#include <utility>

#include "recap/measure.h"
#include "recap/transcript.h"

#include "model/transcript_access.h"
#include "recap_internal/printable.h"

namespace recap {
inline namespace v0 {
namespace internal {

std::string QuotedName(const std::string& s) { return "\"" + Printable(s) + "\""; }

Status CheckSessionName(const std::string& session) {
  if (session.empty()) {
    return Status::InvalidArgument("the session id is empty; give every session a name");
  }
  return Status::OK();
}

Status CheckWrittenSessionName(const std::string& session, bool allow_reserved) {
  RECAP_RETURN_IF_ERROR(CheckSessionName(session));
  if (!IsValidUtf8(session)) {
    return Status::InvalidArgument("the session id " + QuotedName(session) +
                                   " is not valid UTF-8; session ids are text. Nothing was stored");
  }
  if (!allow_reserved && session.rfind(kReservedSessionPrefix, 0) == 0) {
    return Status::InvalidArgument(
        "the session id " + QuotedName(session) + " starts with \"" + kReservedSessionPrefix +
        "\", which is reserved for what recap's command-line tool keeps beside a session (its "
        "instructions); choose another name. Nothing was stored");
  }
  return Status::OK();
}

Result<Transcript> PrepareAppend(std::vector<Message> messages) {
  Transcript batch;
  std::unordered_set<std::string> ids;
  for (std::size_t i = 0; i < messages.size(); ++i) {
    Message& m = messages[i];
    if (m.id.empty()) m.id = NewMessageId();
    if (std::optional<std::string> repeated = RepeatedCallId(m)) {
      return RepeatedCallIdStatus("the append", i, *repeated);
    }
    if (std::string problem = PinnedProblem(m); !problem.empty()) {
      return PinnedStatus("the append", i, problem);
    }
    batch.Append(std::move(m));
    if (!ids.insert(batch[i].id).second) {
      return Status::InvalidArgument(
          "message " + std::to_string(i) + " of the append has id " + QuotedName(batch[i].id) +
          ", which an earlier message of the same append has; ids must be unique. Leave the "
          "id empty to get a fresh one");
    }
  }
  return batch;
}

Status PinnedStatus(const std::string& what, std::size_t i, const std::string& problem) {
  return Status::InvalidArgument("message " + std::to_string(i) + " of " + what +
                                 " is pinned, but " + problem + " (R12.1)");
}

Status RepeatedCallIdStatus(const std::string& what, std::size_t i, const std::string& id) {
  return Status::InvalidArgument(
      "message " + std::to_string(i) + " of " + what + " holds two tool calls with the id " +
      QuotedName(id) +
      "; a result answers one call of an id, so one of them could never be "
      "answered. Give each call its own id");
}

Result<bool> NewSessionReader::Next(Message* out, std::size_t* chars) {
  // A prepared source's message comes measured and checked (recap_internal/prepared_source.h).
  std::optional<PreparedMessageSource::Facts> prepared;
  if (next_in_vector_ < session_.messages.size()) {
    *out = std::move(session_.messages[next_in_vector_++]);
  } else {
    if (session_.source == nullptr) return false;
    if (prepared_ == nullptr && !plain_) {
      prepared_ = dynamic_cast<PreparedMessageSource*>(session_.source);
      plain_ = prepared_ == nullptr;
    }
    Result<bool> more = true;
    if (prepared_ != nullptr) {
      prepared.emplace();
      more = prepared_->NextPrepared(out, &*prepared);
    } else {
      more = session_.source->Next(out);
    }
    RECAP_RETURN_IF_ERROR(more);
    if (!*more) {
      session_.source = nullptr;
      return false;
    }
  }
  const std::size_t i = count_++;
  // Named only when something is wrong: a million messages build no text here.
  const auto what = [&] { return "new session " + QuotedName(session_.session); };
  if (prepared) {
    assert(!RepeatedCallId(*out));
    assert(prepared->chars == MessageChars(*out));
    assert(AllValidUtf8(*out));
  } else if (std::optional<std::string> repeated = RepeatedCallId(*out)) {
    return RepeatedCallIdStatus(what(), i, *repeated);
  }
  if (out->pinned) {
    if (std::string problem = PinnedProblem(*out); !problem.empty()) {
      return PinnedStatus(what(), i, problem);
    }
  }
  if (prepared && prepared->fresh_id) {
    assert(!out->id.empty());
  } else if (out->id.empty()) {
    out->id = NewMessageId();
  } else if (!given_ids_.insert(out->id).second) {
    return Status::InvalidArgument("message " + std::to_string(i) + " of " + what() + " has id " +
                                   QuotedName(out->id) +
                                   ", which an earlier message of the session has; ids must be "
                                   "unique. Leave the id empty to get a fresh one");
  }
  if (prepared) {
    *chars = prepared->chars;
    return true;
  }
  RepairUtf8(*out);
  *chars = MessageChars(*out);
  return true;
}

Status CheckNewSessions(const std::vector<NewSession>& sessions, bool allow_reserved) {
  if (sessions.empty()) {
    return Status::InvalidArgument("CreateSessions was given no session; name at least one");
  }
  std::unordered_set<std::string> names;
  for (const NewSession& s : sessions) {
    RECAP_RETURN_IF_ERROR(CheckWrittenSessionName(s.session, allow_reserved));
    if (!names.insert(s.session).second) {
      return Status::InvalidArgument("CreateSessions was given session " + QuotedName(s.session) +
                                     " twice; give each new session once, with all its messages");
    }
  }
  return Status::OK();
}

Status SessionExists(const std::string& session, std::uint64_t version) {
  return Status::Conflict("session " + QuotedName(session) + " exists already (version " +
                          std::to_string(version) +
                          "); only sessions never written can be created. Nothing was stored");
}

Status NewSessionEmpty(const std::string& session) {
  return Status::InvalidArgument("new session " + QuotedName(session) +
                                 " got no message; a session is created with its messages. "
                                 "Nothing was stored");
}

Status AppendIdTaken(const std::string& session, std::size_t i, const std::string& id) {
  return Status::InvalidArgument("message " + std::to_string(i) + " of the append has id " +
                                 QuotedName(id) + ", which an active message of session " +
                                 QuotedName(session) +
                                 " already has; ids must be unique. Leave the id empty to get a "
                                 "fresh one");
}

Status CommitIdTaken(const std::string& session, const std::string& which, const std::string& id) {
  return Status::InvalidArgument(which + " has id " + QuotedName(id) +
                                 ", which an active message of session " + QuotedName(session) +
                                 " or another message of the same commit already has; ids must be "
                                 "unique. Leave the id empty to get a fresh one");
}

std::string CompactionAddedName(const CompactionCommit& commit, std::size_t k) {
  if (k == 0) return "the checkpoint";
  if (commit.injected.size() == 1) return "injected message";
  return "injected message " + std::to_string(k - 1);
}

Status CheckExpectedVersion(const std::string& session, std::uint64_t expected, std::uint64_t now) {
  if (expected > now) {
    return Status::Conflict("session " + QuotedName(session) + " is at version " +
                            std::to_string(now) + ", not " + std::to_string(expected) +
                            " (was that version read from another store?); reload and retry");
  }
  if (expected < now) {
    return Status::Conflict("session " + QuotedName(session) + " changed since version " +
                            std::to_string(expected) + " (now " + std::to_string(now) +
                            "); reload and retry");
  }
  return Status::OK();
}

Status CheckSinceVersion(const std::string& session, std::uint64_t since, std::uint64_t version) {
  if (since <= version) return Status::OK();
  return Status::InvalidArgument("session " + QuotedName(session) + " is at version " +
                                 std::to_string(version) + "; version " + std::to_string(since) +
                                 " is in its future (was it read from another store?)");
}

Status NothingToCommitAgainst(const std::string& session) {
  return Status::InvalidArgument("session " + QuotedName(session) +
                                 " has no messages; there is nothing to commit against");
}

Result<SessionRow> CommitAgainst(const std::string& session, std::uint64_t expected,
                                 const std::optional<SessionRow>& row) {
  RECAP_RETURN_IF_ERROR(CheckExpectedVersion(session, expected, row ? row->version : 0));
  if (!row) return NothingToCommitAgainst(session);
  return *row;
}

CompactionPlacement PlaceCompaction(const CompactionCommit& commit, std::int64_t last_position) {
  CompactionPlacement placed;
  placed.added.Append(commit.checkpoint);
  for (const Message& m : commit.injected) placed.added.Append(m);
  placed.first_position =
      last_position - static_cast<std::int64_t>(commit.kept.size() + placed.added.size()) + 1;
  return placed;
}

Status CheckCompactionShape(const std::string& session, const CompactionCommit& commit) {
  if (commit.replaced.empty()) {
    return Status::InvalidArgument("a compaction of session " + QuotedName(session) +
                                   " must replace at least one message; `replaced` is empty");
  }
  if (!commit.checkpoint.summary) {
    return Status::InvalidArgument(
        "the checkpoint of a compaction must be flagged summary (SPEC R4.4); the one given for "
        "session " +
        QuotedName(session) + " is not");
  }
  return Status::OK();
}

Status ReplacedNotActive(const std::string& session, std::size_t i, const std::string& id) {
  return Status::InvalidArgument("replaced[" + std::to_string(i) + "] is " + QuotedName(id) +
                                 ", which is not an active message of session " +
                                 QuotedName(session));
}

Status ReplacedOutOfOrder(const std::string& session, std::size_t i, const std::string& id,
                          const std::string& active_id) {
  return Status::InvalidArgument(
      "replaced[" + std::to_string(i) + "] is " + QuotedName(id) + " but active message " +
      std::to_string(i) + " of session " + QuotedName(session) + " is " + QuotedName(active_id) +
      "; a compaction replaces the leading messages of the transcript, in order");
}

Status ReplacesTooMany(const std::string& session, std::size_t replaced, std::size_t active) {
  return Status::InvalidArgument("the compaction replaces " + std::to_string(replaced) +
                                 " messages but session " + QuotedName(session) + " has only " +
                                 std::to_string(active) + " active messages");
}

Status CheckCompactionSpan(const std::string& session, const CompactionCommit& commit,
                           const std::vector<std::string>& leading, std::size_t active_count,
                           const std::function<bool(const std::string&)>& is_active) {
  const std::size_t span = commit.kept.size() + commit.replaced.size();
  {
    std::unordered_set<std::string> seen;
    for (std::size_t k = 0; k < commit.kept.size(); ++k) {
      if (!seen.insert(commit.kept[k]).second) {
        return Status::InvalidArgument("kept[" + std::to_string(k) + "] is " +
                                       QuotedName(commit.kept[k]) +
                                       ", which an earlier entry of `kept` names too");
      }
    }
    for (std::size_t i = 0; i < commit.replaced.size(); ++i) {
      if (seen.count(commit.replaced[i]) != 0) {
        return Status::InvalidArgument(
            "replaced[" + std::to_string(i) + "] is " + QuotedName(commit.replaced[i]) +
            ", which `kept` (or an earlier entry of `replaced`) names too; a message of the "
            "span is either kept or replaced");
      }
      seen.insert(commit.replaced[i]);
    }
  }
  std::size_t k = 0, r = 0;
  for (std::size_t j = 0; j < leading.size() && j < span; ++j) {
    const std::string& id = leading[j];
    if (k < commit.kept.size() && commit.kept[k] == id) {
      ++k;
      continue;
    }
    if (r < commit.replaced.size() && commit.replaced[r] == id) {
      ++r;
      continue;
    }
    // The first entry that does not fit: the next replaced one, or the next kept one.
    if (r < commit.replaced.size() && !is_active(commit.replaced[r])) {
      return ReplacedNotActive(session, r, commit.replaced[r]);
    }
    if (k < commit.kept.size() && !is_active(commit.kept[k])) {
      return Status::InvalidArgument(
          "kept[" + std::to_string(k) + "] is " + QuotedName(commit.kept[k]) +
          ", which is not an active message of session " + QuotedName(session));
    }
    if (commit.kept.empty()) return ReplacedOutOfOrder(session, r, commit.replaced[r], id);
    return Status::InvalidArgument(
        "active message " + std::to_string(j) + " of session " + QuotedName(session) + " is " +
        QuotedName(id) + ", but the compaction's next messages are " +
        (r < commit.replaced.size()
             ? "replaced[" + std::to_string(r) + "] " + QuotedName(commit.replaced[r])
             : std::string("none of `replaced`")) +
        (k < commit.kept.size()
             ? " and kept[" + std::to_string(k) + "] " + QuotedName(commit.kept[k])
             : std::string()) +
        "; a compaction covers the leading messages of the transcript, in order (those in "
        "`kept` stay, before the checkpoint)");
  }
  if (span > active_count) {
    if (commit.kept.empty()) return ReplacesTooMany(session, commit.replaced.size(), active_count);
    return Status::InvalidArgument("the compaction covers " + std::to_string(span) + " messages (" +
                                   std::to_string(commit.kept.size()) + " kept, " +
                                   std::to_string(commit.replaced.size()) +
                                   " replaced) but session " + QuotedName(session) + " has only " +
                                   std::to_string(active_count) + " active messages");
  }
  return Status::OK();
}

Status NoReplacements(const std::string& session) {
  return Status::InvalidArgument("a reduction of session " + QuotedName(session) +
                                 " must replace at least one message; `replacements` is empty");
}

Status UndoImpossible(const std::string& session, const std::string& commit,
                      const std::string& why) {
  return Status::FailedPrecondition("session " + QuotedName(session) + ": " + commit +
                                    " cannot be undone: " + why + ". Nothing was changed");
}

Status UndoTaken(const std::string& session, const std::string& commit, const std::string& id) {
  return UndoImpossible(session, commit,
                        "it would make message " + QuotedName(id) +
                            " active again, and a message appended since holds that id");
}

Status ReplacementNotActive(const std::string& session, std::size_t i, const std::string& id) {
  return Status::InvalidArgument("replacement " + std::to_string(i) + " has id " + QuotedName(id) +
                                 ", which is not an active message of session " +
                                 QuotedName(session) +
                                 "; a replacement keeps the id of the message it replaces");
}

Status ReplacedTwice(const std::string& session, std::size_t i, const std::string& id) {
  return Status::InvalidArgument("replacement " + std::to_string(i) + " replaces " +
                                 QuotedName(id) + " of session " + QuotedName(session) +
                                 " a second time in the same reduction");
}

Result<RecoveryPlan> PlanRecovery(const std::string& session,
                                  const std::vector<std::string>& active_ids,
                                  const RecoveryCommit& commit) {
  if (commit.results.empty()) {
    return Status::InvalidArgument("a recovery of session " + QuotedName(session) +
                                   " must record at least one result; `results` is empty");
  }
  const std::unordered_set<std::string> active(active_ids.begin(), active_ids.end());
  RecoveryPlan plan;
  std::unordered_set<std::string> ids;
  for (std::size_t i = 0; i < commit.results.size(); ++i) {
    const std::string& anchor = commit.results[i].after;
    if (active.count(anchor) == 0) {
      return Status::InvalidArgument(
          "recovered result " + std::to_string(i) + " goes after " + QuotedName(anchor) +
          ", which is not an active message of session " + QuotedName(session));
    }
    plan.results.Append(commit.results[i].result);
    const std::string& id = plan.results[i].id;
    if (active.count(id) != 0 || !ids.insert(id).second) {
      const std::string which = commit.results.size() == 1
                                    ? std::string("recovered result")
                                    : "recovered result " + std::to_string(i);
      return CommitIdTaken(session, which, id);
    }
    plan.after[anchor].push_back(i);
  }
  return plan;
}

}  // namespace internal
}  // namespace v0
}  // namespace recap
