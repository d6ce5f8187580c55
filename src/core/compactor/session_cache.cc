#include "compactor/session_cache.h"

#include <variant>

#include "recap/measure.h"

#include "json/json_util.h"
#include "recap_internal/json_depth.h"

namespace recap {
inline namespace v0 {
namespace compactor_detail {

void SessionCache::Rederive() {
  pinned_chars_ = PinnedChars(transcript_);
  provider_checkpoint_pending_ = HoldsProviderCheckpoint(transcript_);
  bytes = CachedBytes(*this);
}

void SessionCache::Reload(Transcript transcript, std::uint64_t version) {
  transcript_ = std::move(transcript);
  checkpoint_message_.reset();  // no message of a fresh load is the one it was made for
  checkpoint_.reset();
  version_ = version;
  Rederive();
  turn_serial_ = CountTurnStarts(transcript_);
  loaded_ = true;
}

void SessionCache::AppendStored(Message m) {
  if (IsTurnStart(m)) {
    ++turn_serial_;
    LiftPause();  // R2.5: a new turn lifts the no-progress pause
  }
  const bool pinned = m.pinned;
  if (!provider_checkpoint_pending_ && FindProviderCheckpoint(m)) {
    provider_checkpoint_pending_ = true;
  }
  bytes += MessageBytes(m);
  transcript_.Append(std::move(m));
  if (pinned) pinned_chars_ += transcript_.chars(transcript_.size() - 1);
}

void SessionCache::RewrittenElsewhere(Transcript transcript) {
  transcript_ = std::move(transcript);
  checkpoint_message_.reset();
  checkpoint_.reset();
  Rederive();
  turn_serial_ += 1;
  LiftPause();
  ForgetReportedCount();
}

void SessionCache::Committed(Transcript next, std::uint64_t version) {
  transcript_ = std::move(next);
  pinned_chars_ = PinnedChars(transcript_);
  bytes = CachedBytes(*this);
  version_ = version;
  ForgetReportedCount();
}

void SessionCache::CommittedReplacements(std::vector<std::pair<std::size_t, Message>> replacements,
                                         std::uint64_t version) {
  transcript_.Set(std::move(replacements));
  bytes = CachedBytes(*this);
  version_ = version;
  ForgetReportedCount();
}

void SessionCache::KeepCheckpoint(std::size_t at, Checkpoint checkpoint) {
  const std::size_t old = checkpoint_ ? CheckpointBytes(*checkpoint_) : 0;
  checkpoint_message_ = transcript_.shared(at);
  checkpoint_ = std::make_shared<const Checkpoint>(std::move(checkpoint));
  bytes = bytes - old + CheckpointBytes(*checkpoint_);
}

void SessionCache::ForgetCheckpoint() {
  if (checkpoint_) bytes -= CheckpointBytes(*checkpoint_);
  checkpoint_message_.reset();
  checkpoint_.reset();
}

Transcript SessionCache::Substitute(Transcript t) {
  std::swap(t, transcript_);
  return t;
}

std::size_t CountTurnStarts(const Transcript& t) {
  std::size_t n = 0;
  for (const Message& m : t) n += IsTurnStart(m) ? 1 : 0;
  return n;
}

std::string LearnedText(const SessionCache& c) {
  jsonutil::Json j = jsonutil::Json::object();
  if (c.overflow_pending) j["overflowPending"] = true;
  if (c.overflow_window) j["overflowWindow"] = *c.overflow_window;
  if (c.reported_prompt_tokens) {
    j["promptTokens"] = *c.reported_prompt_tokens;
    j["charsAtReport"] = c.chars_at_report;
  }
  if (c.weak_streak != 0) j["weakStreak"] = c.weak_streak;
  if (c.paused) {
    j["paused"] = true;
    j["charsAtPause"] = c.chars_at_pause;
  }
  return j.empty() ? std::string() : j.dump();
}

void ApplyLearned(SessionCache& c, const std::string& text) {
  c.learned_text = text;
  c.overflow_pending = false;
  c.overflow_window.reset();
  c.reported_prompt_tokens.reset();
  c.chars_at_report = 0;
  c.weak_streak = 0;
  c.paused = false;
  c.chars_at_pause = 0;
  // Written by recap, but read from a file anyone may have touched: a few hundred bytes, one
  // level deep; anything else is not parsed at all (R13.1).
  if (text.empty() || text.size() > 4096 ||
      internal::FindTooDeep(text, 2) != std::string_view::npos)
    return;
  const jsonutil::Json j = jsonutil::Json::parse(text, nullptr, false);
  if (!j.is_object()) return;
  auto count = [&](const char* key) -> std::optional<std::size_t> {
    auto it = j.find(key);
    if (it == j.end() || !it->is_number_unsigned()) return std::nullopt;
    return it->get<std::size_t>();
  };
  auto flag = [&](const char* key) {
    auto it = j.find(key);
    return it != j.end() && it->is_boolean() && it->get<bool>();
  };
  c.overflow_pending = flag("overflowPending");
  c.overflow_window = count("overflowWindow");
  if (c.overflow_window && *c.overflow_window == 0) c.overflow_window.reset();
  c.reported_prompt_tokens = count("promptTokens");
  c.chars_at_report = count("charsAtReport").value_or(0);
  c.weak_streak = static_cast<int>(std::min<std::size_t>(count("weakStreak").value_or(0), 2));
  c.paused = flag("paused");
  c.chars_at_pause = count("charsAtPause").value_or(0);
}

std::size_t MessageBytes(const Message& m) {
  constexpr std::size_t kPerMessage = sizeof(Message) + 96;  // + its Transcript entry
  std::size_t n = kPerMessage + m.id.size() + m.extra.size();
  auto opaque = [](const Opaque& o) { return o.kind.size() + o.payload.size() + o.link_id.size(); };
  for (const Part& p : m.parts) {
    n += sizeof(Part);
    if (const auto* t = std::get_if<Text>(&p)) {
      n += t->text.size() + t->extra.size();
    } else if (const auto* c = std::get_if<ToolCall>(&p)) {
      n += c->id.size() + c->name.size() + c->arguments.size() + c->extra.size();
    } else if (const auto* r = std::get_if<ToolResult>(&p)) {
      n += r->call_id.size() + r->extra.size();
      for (const ResultItem& item : r->content) {
        n += sizeof(ResultItem);
        if (const auto* it = std::get_if<Text>(&item)) {
          n += it->text.size() + it->extra.size();
        } else {
          n += opaque(std::get<Opaque>(item));
        }
      }
    } else {
      n += opaque(std::get<Opaque>(p));
    }
  }
  return n;
}

std::size_t TranscriptBytes(const Transcript& t) {
  std::size_t n = 0;
  for (const Message& m : t) n += MessageBytes(m);
  return n;
}

std::size_t CheckpointBytes(const Checkpoint& c) {
  std::size_t n = sizeof(Checkpoint) + c.goal.size() + c.current_state.size() + c.text.size();
  for (const auto* list : {&c.instructions, &c.discoveries, &c.accomplished, &c.next_steps}) {
    for (const std::string& item : *list) n += sizeof(std::string) + item.size();
  }
  for (const RelevantFile& f : c.relevant_files)
    n += sizeof(RelevantFile) + f.path.size() + f.why.size();
  return n;
}

std::size_t CachedBytes(const SessionCache& c) {
  return TranscriptBytes(c.transcript()) + (c.checkpoint() ? CheckpointBytes(*c.checkpoint()) : 0);
}

std::size_t StoredInstructionsChars(const Transcript& t) {
  return !t.empty() && IsInstructions(t[0]) ? t.chars(0) : 0;
}

std::size_t PinnedChars(const Transcript& t) {
  std::size_t n = 0;
  for (std::size_t i = 0; i < t.size(); ++i) n += t[i].pinned ? t.chars(i) : 0;
  return n;
}

bool KeptByCompaction(const Transcript& t, std::size_t i) {
  return t[i].pinned || (i == 0 && IsInstructions(t[0]));
}

bool IsResultOnly(const Message& m) {
  if (m.parts.empty()) return false;
  for (const auto& p : m.parts) {
    if (!std::holds_alternative<ToolResult>(p)) return false;
  }
  return true;
}

std::optional<std::size_t> RetirableProviderCheckpoint(const Transcript& t) {
  for (std::size_t i = t.size(); i-- > 0;) {
    if (t[i].pinned || !FindProviderCheckpoint(t[i])) continue;
    if (!t[i].summary) return i;
    for (std::size_t j = 0; j < i; ++j) {
      if (!KeptByCompaction(t, j)) return i;
    }
    return std::nullopt;
  }
  return std::nullopt;
}

bool HoldsProviderCheckpoint(const Transcript& t) {
  for (const Message& m : t) {
    if (FindProviderCheckpoint(m)) return true;
  }
  return false;
}

bool IsUnreadableProviderCheckpoint(const Message& m) {
  if (!m.summary) return false;
  const auto found = FindProviderCheckpoint(m);
  return found && !found->readable();
}

}  // namespace compactor_detail
}  // namespace v0
}  // namespace recap
