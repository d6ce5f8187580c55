#include "compactor/session_cache.h"

#include <algorithm>
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
  bytes_ = CachedBytes(*this);
}

void SessionCache::Reload(Transcript transcript, std::uint64_t version) {
  transcript_ = std::move(transcript);
  checkpoint_message_.reset();  // no message of a fresh load is the one it was made for
  checkpoint_.reset();
  ledger_message_.reset();
  ledger_.reset();
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
  bytes_ += MessageBytes(m);
  transcript_.Append(std::move(m));
  if (pinned) pinned_chars_ += transcript_.chars(transcript_.size() - 1);
}

void SessionCache::RewrittenElsewhere(Transcript transcript) {
  transcript_ = std::move(transcript);
  checkpoint_message_.reset();
  checkpoint_.reset();
  ledger_message_.reset();
  ledger_.reset();
  Rederive();
  turn_serial_ += 1;
  LiftPause();
  ForgetReportedCount();
}

void SessionCache::Committed(Transcript next, std::uint64_t version) {
  transcript_ = std::move(next);
  pinned_chars_ = PinnedChars(transcript_);
  bytes_ = CachedBytes(*this);
  version_ = version;
  ForgetReportedCount();
}

void SessionCache::CommittedReplacements(std::vector<std::pair<std::size_t, Message>> replacements,
                                         std::uint64_t version) {
  transcript_.Set(std::move(replacements));
  bytes_ = CachedBytes(*this);
  version_ = version;
  ForgetReportedCount();
}

void SessionCache::KeepCheckpoint(std::size_t at, Checkpoint checkpoint) {
  const std::size_t old = checkpoint_ ? CheckpointBytes(*checkpoint_) : 0;
  checkpoint_message_ = transcript_.shared(at);
  checkpoint_ = std::make_shared<const Checkpoint>(std::move(checkpoint));
  bytes_ = bytes_ - old + CheckpointBytes(*checkpoint_);
}

void SessionCache::KeepLedger(std::size_t at, Ledger ledger) {
  const std::size_t old = ledger_ ? LedgerBytes(*ledger_) : 0;
  ledger_message_ = transcript_.shared(at);
  ledger_ = std::make_shared<const Ledger>(std::move(ledger));
  bytes_ = bytes_ - old + LedgerBytes(*ledger_);
}

void SessionCache::ForgetCheckpoint() {
  if (checkpoint_) bytes_ -= CheckpointBytes(*checkpoint_);
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

void SessionCache::OverflowReported(std::optional<std::size_t> rejected_tokens) {
  overflow_pending_ = true;
  const std::size_t rejected = rejected_tokens ? *rejected_tokens : last_full_tokens_;
  if (rejected > 0) {
    overflow_window_ = overflow_window_ ? std::min(*overflow_window_, rejected) : rejected;
  }
}

bool SessionCache::PromptTokensReported(std::size_t tokens) {
  if (rewritten_since_prepare_) return false;
  reported_prompt_tokens_ = tokens;
  chars_at_report_ = chars_at_last_prepare_;
  return true;
}

void SessionCache::Handed(std::size_t after_tokens) {
  last_full_tokens_ = after_tokens;
  chars_at_last_prepare_ = transcript_.chars();
  rewritten_since_prepare_ = false;
}

void SessionCache::CountProgress(std::size_t before_full, std::size_t after_full) {
  const bool weak = after_full * 10 > before_full * 9;  // freed < 10%
  weak_streak_ = weak ? weak_streak_ + 1 : 0;
  if (weak_streak_ >= 2 && !paused_) {
    paused_ = true;
    chars_at_pause_ = transcript_.chars();
  }
}

void SessionCache::LiftPauseAfterGrowth(std::size_t trigger_chars) {
  if (paused_ && transcript_.chars() >= chars_at_pause_ + trigger_chars / 10) LiftPause();
}

bool SessionCache::SayIrreducibleFor(std::pair<std::size_t, std::size_t> fixed) {
  if (irreducible_said_for_ == fixed) return false;
  irreducible_said_for_ = fixed;
  return true;
}

bool SessionCache::SayWindowUnknownOnce() {
  if (window_unknown_said_) return false;
  window_unknown_said_ = true;
  return true;
}

std::optional<SessionCache::BackgroundReport> SessionCache::TakeBackgroundReport() {
  std::optional<BackgroundReport> report = std::move(background_report_);
  background_report_.reset();
  return report;
}

bool SessionCache::TryBudgetThisTurn() {
  if (budget_tried_at_ == turn_serial_) return false;
  budget_tried_at_ = turn_serial_;
  return true;
}

std::string SessionCache::LearnedText() const {
  jsonutil::Json j = jsonutil::Json::object();
  if (overflow_pending_) j["overflowPending"] = true;
  if (overflow_window_) j["overflowWindow"] = *overflow_window_;
  if (reported_prompt_tokens_) {
    j["promptTokens"] = *reported_prompt_tokens_;
    j["charsAtReport"] = chars_at_report_;
  }
  if (weak_streak_ != 0) j["weakStreak"] = weak_streak_;
  if (paused_) {
    j["paused"] = true;
    j["charsAtPause"] = chars_at_pause_;
  }
  return j.empty() ? std::string() : j.dump();
}

void SessionCache::ApplyLearned(const std::string& text) {
  learned_text_ = text;
  overflow_pending_ = false;
  overflow_window_.reset();
  reported_prompt_tokens_.reset();
  chars_at_report_ = 0;
  weak_streak_ = 0;
  paused_ = false;
  chars_at_pause_ = 0;
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
  overflow_pending_ = flag("overflowPending");
  overflow_window_ = count("overflowWindow");
  if (overflow_window_ && *overflow_window_ == 0) overflow_window_.reset();
  reported_prompt_tokens_ = count("promptTokens");
  chars_at_report_ = count("charsAtReport").value_or(0);
  weak_streak_ = static_cast<int>(std::min<std::size_t>(count("weakStreak").value_or(0), 2));
  paused_ = flag("paused");
  chars_at_pause_ = count("charsAtPause").value_or(0);
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
  return n + c.kept_by_recap.size();
}

std::size_t LedgerBytes(const Ledger& l) {
  std::size_t n = sizeof(Ledger);
  for (const LedgerEntry& e : l.entries) {
    n += sizeof(LedgerEntry) + e.text.size() + e.message_id.size();
  }
  return n;
}

std::size_t CachedBytes(const SessionCache& c) {
  return TranscriptBytes(c.transcript()) + (c.checkpoint() ? CheckpointBytes(*c.checkpoint()) : 0) +
         (c.ledger() ? LedgerBytes(*c.ledger()) : 0);
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
