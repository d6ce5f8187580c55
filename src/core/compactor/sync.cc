// The session's cache and the store: Sync brings the cached transcript up to date (R8, R12.6),
// SaveLearned keeps what was learned about the session (R12.5).
#include "compactor/compactor_impl.h"

namespace recap {
inline namespace v0 {

Status Compactor::Impl::Sync(const std::string& session, SessionCache& c) {
  if (!c.loaded()) {
    auto state = store->Load(session);
    RECAP_RETURN_IF_ERROR(state);
    c.Reload(std::move(state->transcript), state->version);
    c.ApplyLearned(state->learned);
    return Status::OK();
  }
  auto changes = store->LoadChanges(session, c.version());
  RECAP_RETURN_IF_ERROR(changes);
  // Another host of the fleet (or another Compactor) learned something: take it (R12.5).
  if (changes->learned != c.learned_text()) c.ApplyLearned(changes->learned);
  if (changes->appended_only) {
    for (auto& m : changes->appended) c.AppendStored(std::move(m));
  } else {
    // Another writer rewrote the session: start over from what it holds now.
    c.RewrittenElsewhere(std::move(changes->transcript));
  }
  c.SetVersion(changes->version);
  return Status::OK();
}

void Compactor::Impl::SaveLearned(const std::string& session, SessionCache& c) {
  if (!c.loaded()) return;  // nothing read yet: what the store has must not be overwritten
  std::string text = c.LearnedText();
  if (text == c.learned_text()) return;
  Status saved = store->SaveLearned(session, text);
  if (!saved.ok()) {
    RECAP_LOG_DEBUG(
        "session {}: what was learned could not be saved ({}); trying again at "
        "the next call",
        session, saved.message());
    return;
  }
  c.LearnedSaved(std::move(text));
}

}  // namespace v0
}  // namespace recap
