// A checkpoint a provider wrote on its servers (R14.1): Anthropic's `compaction` block, OpenAI's
// `compaction` item. What precedes it is no longer part of the conversation the model sees, so
// the Compactor retires it, as after a compaction of its own: the history keeps it, compacted.
#include "compactor/compactor_impl.h"

namespace recap {
inline namespace v0 {

namespace {

Message AsCheckpoint(const Message& m) {
  Message out = m;
  out.summary = true;
  out.id = NewMessageId();  // the original stays in the history under its own id
  return out;
}

}  // namespace

Transcript Compactor::Impl::AfterProviderCheckpoint(const Transcript& t, std::size_t at,
                                                    std::optional<Message> checkpoint) {
  Transcript next;
  for (std::size_t i = 0; i < at; ++i) {
    if (KeptByCompaction(t, i)) internal::TranscriptAccess::AppendFrom(next, t, i);
  }
  next.Append(checkpoint ? std::move(*checkpoint) : AsCheckpoint(t[at]));
  for (std::size_t i = at + 1; i < t.size(); ++i) {
    internal::TranscriptAccess::AppendFrom(next, t, i);
  }
  return next;
}

std::size_t Compactor::Impl::AdoptProviderCheckpoint(const std::string& session, SessionCache& c) {
  if (!c.provider_checkpoint_pending()) return 0;
  const Transcript& t = c.transcript();
  const std::optional<std::size_t> at = RetirableProviderCheckpoint(t);
  if (!at) {
    c.ProviderCheckpointSettled();
    return 0;
  }
  const std::string writer = FindProviderCheckpoint(t[*at])->writer;

  CompactionCommit commit;
  commit.expected_version = c.version();
  commit.reason = "provider";
  bool retires_kept_checkpoint = false;
  for (std::size_t i = 0; i < *at; ++i) {
    if (KeptByCompaction(t, i)) {
      commit.kept.push_back(t[i].id);
    } else {
      commit.replaced.push_back(t[i].id);
      retires_kept_checkpoint = retires_kept_checkpoint || t.shared(i) == c.checkpoint_message();
    }
  }
  commit.replaced.push_back(t[*at].id);
  commit.checkpoint = AsCheckpoint(t[*at]);

  auto committed = store->CommitCompaction(session, commit);
  if (!committed.ok()) {
    RECAP_LOG_WARN(
        "session {}: the messages before {}'s checkpoint could not be retired ({}); they are "
        "sent once more and retired at the next call",
        session, writer, committed.status().message());
    if (committed.status().code() == StatusCode::kConflict) c.Invalidate();  // reload next
    return 0;
  }

  Transcript next = AfterProviderCheckpoint(t, *at, commit.checkpoint);
  const std::size_t before = t.chars();
  const std::size_t retired = commit.replaced.size() - 1;  // the checkpoint's own message aside
  c.Committed(std::move(next), *committed);                // the count reported for it is forgotten
  if (retires_kept_checkpoint) c.ForgetCheckpoint();
  c.ProviderCheckpointSettled();
  events.Emit(EventType::kProviderCheckpoint, session,
              internal::ProviderCheckpointFields(writer, retired, before, c.transcript().chars()));
  RECAP_LOG_INFO("session {}: {} wrote a checkpoint; {} messages before it retired", session,
                 writer, retired);
  return retired;
}

}  // namespace v0
}  // namespace recap
