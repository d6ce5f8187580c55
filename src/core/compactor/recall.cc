// Getting it back (SPEC R18): Compactor::Recall and AnswerRecall ask the store's history
// (SessionStore::SearchHistory) and write the answer (recall/); Compactor::Uncompact takes back
// the newest rewrite (SessionStore::CommitUndo).
#include "compactor/compactor_impl.h"
#include "recall/recall_render.h"
#include "recap_internal/history_search.h"
#include "recap_internal/store_rules.h"

namespace recap {
inline namespace v0 {

namespace recall_compactor {
// Matches beyond RecallQuery::max_messages that the answer names by id.
constexpr std::size_t kRecallNamedBeyond = 30;
}  // namespace recall_compactor
using recall_compactor::kRecallNamedBeyond;

Result<Recalled> Compactor::Recall(const std::string& session, const RecallQuery& query) {
  RECAP_RETURN_IF_ERROR(internal::CheckSessionName(session));
  HistorySearch search;
  search.terms = internal::SplitQuery(query.text);
  search.ids = query.ids;
  search.first_turn = query.first_turn;
  search.last_turn = query.last_turn;
  search.include_active = query.include_active;
  // A few more than are shown, to name the next ones by id (Render); a full answer from the
  // store may have had still more.
  search.limit = query.max_messages + kRecallNamedBeyond;
  Result<std::vector<HistoryHit>> hits = impl_->store->SearchHistory(session, search);
  if (!hits.ok()) {
    return hits.status().WithContext("could not search the history of session " +
                                     internal::QuotedName(session));
  }
  const bool maybe_more = hits->size() >= search.limit;
  return recall_internal::Render(std::move(hits).value(), query, maybe_more);
}

Result<Message> Compactor::AnswerRecall(const std::string& session, const ToolCall& call,
                                        ToolFormat format) {
  if (call.name != kRecallToolName) {
    return Status::InvalidArgument("AnswerRecall answers " + std::string(kRecallToolName) +
                                   " calls; this call is to " + internal::QuotedName(call.name) +
                                   " (id " + internal::QuotedName(call.id) + ")");
  }
  ToolResult result;
  result.call_id = call.id;
  Result<RecallQuery> query = ParseRecallArguments(call.arguments);
  if (!query.ok()) {
    result.is_error = true;
    result.content.emplace_back(Text{query.status().message(), {}});
  } else {
    Result<Recalled> recalled = Recall(session, *query);
    RECAP_RETURN_IF_ERROR(recalled);
    result.content.emplace_back(Text{std::move(recalled->text), {}});
  }
  Message m;
  m.id = NewMessageId();
  m.role = format == ToolFormat::kAnthropic ? Role::kUser : Role::kTool;
  m.parts.emplace_back(std::move(result));
  return m;
}

Result<UncompactOutcome> Compactor::Uncompact(const std::string& session) {
  if (internal::CallScope::Inside(impl_.get())) return Impl::Reentered("Uncompact", session);
  internal::CallScope scope(impl_.get());
  RECAP_RETURN_IF_ERROR(internal::CheckWrittenSessionName(session, false));
  SessionTable::Use cache = impl_->sessions.Get(session);
  SessionCache& c = *cache;
  std::lock_guard<std::mutex> lock(c.mu);
  // R15.2: a compaction running in the background was based on what is undone now; its result
  // would be refused by the store anyway (the version moves), so it is dropped at once.
  if (impl_->config.compaction.background.enabled) {
    impl_->AbandonTask(session, "the session's last compaction was undone");
  }
  Result<UndoOutcome> undone = Status::OK();
  std::size_t before_chars = 0;
  // Another writer may move the session between the read and the undo: read again, once.
  for (int attempt = 0; attempt < 2; ++attempt) {
    RECAP_RETURN_IF_ERROR(impl_->Sync(session, c));
    if (c.version() == 0) {
      return Status::NotFound("session " + internal::QuotedName(session) +
                              " has no messages (it was never written): there is nothing to undo");
    }
    before_chars = c.transcript().chars();
    undone = impl_->store->CommitUndo(session, UndoCommit{c.version()});
    if (undone.ok() || undone.status().code() != StatusCode::kConflict) break;
    c.Invalidate();
  }
  if (!undone.ok()) {
    if (undone.status().code() == StatusCode::kConflict) c.Invalidate();
    return undone.status().WithContext("could not undo the last compaction");
  }
  UncompactOutcome out;
  out.version = undone->version;
  out.before_chars = out.after_chars = before_chars;
  if (!undone->undone) return out;
  c.Invalidate();  // the whole transcript changed: read it again once
  RECAP_RETURN_IF_ERROR(impl_->Sync(session, c));
  out.undone = true;
  out.commit = undone->commit;
  out.reason = undone->reason;
  out.restored_messages = undone->restored;
  out.retired_messages = undone->retired;
  out.after_chars = c.transcript().chars();
  out.version = c.version();
  impl_->events.Emit(
      EventType::kCompactionUndone, session,
      internal::CompactionUndoneFields(out.commit, out.reason, out.restored_messages,
                                       out.retired_messages, out.before_chars, out.after_chars));
  RECAP_LOG_INFO("session {}: {} undone, {} messages restored, {} retired", session, out.commit,
                 out.restored_messages, out.retired_messages);
  return out;
}

}  // namespace v0
}  // namespace recap
