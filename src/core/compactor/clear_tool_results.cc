// The cheap tier before summarizing (R14.3): the content of older tool results is replaced by a
// marker, without a model call. The originals stay in the session's history (a reduction
// commit), so `recap export --history` still has every byte.
#include <unordered_map>
#include <unordered_set>

#include "compactor/compactor_impl.h"

namespace recap {
inline namespace v0 {

namespace {

bool IsCleared(const ToolResult& r) {
  if (r.content.size() != 1) return false;
  const auto* t = std::get_if<Text>(&r.content[0]);
  if (t == nullptr || !t->extra.empty()) return false;
  return t->text == kClearedToolResultMarker ||
         t->text.rfind(kClearedToolResultRecallMarker, 0) == 0;
}

// The marker a result of message `id` is cleared with (R14.3; with the recall tool, R18.2).
std::string Marker(bool recall_tool, const std::string& id) {
  if (!recall_tool) return kClearedToolResultMarker;
  // The id as a JSON string's content, so that the model can copy the call as it reads it.
  std::string escaped;
  for (const char c : id) {
    if (c == '"' || c == '\\') {
      escaped += '\\';
      escaped += c;
    } else if (static_cast<unsigned char>(c) < 0x20) {
      static const char kHex[] = "0123456789abcdef";
      escaped += "\\u00";
      escaped += kHex[(c >> 4) & 0xF];
      escaped += kHex[c & 0xF];
    } else {
      escaped += c;
    }
  }
  return kClearedToolResultRecallMarker + escaped + "\"]}]";
}

}  // namespace

Compactor::Impl::Clearing Compactor::Impl::PlanClearing(const Transcript& t) const {
  const ClearToolResultsConfig& cfg = config.compaction.clear_tool_results;
  Clearing out;
  // Each result, newest last: (message, part).
  std::vector<std::pair<std::size_t, std::size_t>> results;
  std::unordered_map<std::string_view, std::string_view> names;  // call id -> tool name
  const bool excluding = !cfg.exclude_tools.empty();
  for (std::size_t i = 0; i < t.size(); ++i) {
    const Message& m = t[i];
    for (std::size_t k = 0; k < m.parts.size(); ++k) {
      if (std::holds_alternative<ToolResult>(m.parts[k])) {
        results.emplace_back(i, k);
      } else if (excluding) {
        if (const auto* c = std::get_if<ToolCall>(&m.parts[k])) names[c->id] = c->name;
      }
    }
  }
  const std::size_t keep = static_cast<std::size_t>(std::max(cfg.keep_recent, 0));
  if (results.size() <= keep) return out;
  const std::unordered_set<std::string_view> excluded(cfg.exclude_tools.begin(),
                                                      cfg.exclude_tools.end());
  const bool recall_tool = config.compaction.recall_tool;
  Message copy;  // the message being cleared, when `copying`
  bool copying = false;
  std::size_t copy_at = 0;
  auto flush = [&] {
    if (!copying) return;
    const std::size_t after = MessageChars(copy);
    const std::size_t before = t.chars(copy_at);
    if (after < before) {
      out.freed_chars += before - after;
      out.replacements.emplace_back(copy_at, std::move(copy));
    }
    copy = Message();
    copying = false;
  };
  for (std::size_t n = 0; n + keep < results.size(); ++n) {
    const auto [i, k] = results[n];
    const Message& m = t[i];
    if (m.summary || m.pinned) continue;
    const auto& r = std::get<ToolResult>(m.parts[k]);
    if (IsCleared(r)) continue;
    if (excluding) {
      auto name = names.find(r.call_id);
      if (name != names.end() && excluded.count(name->second) != 0) continue;
    }
    // Only a result longer than the marker is worth clearing.
    std::size_t chars = 0;
    for (const auto& item : r.content) {
      if (const auto* text = std::get_if<Text>(&item)) chars += CountCodePoints(text->text);
    }
    const bool has_opaque = std::any_of(r.content.begin(), r.content.end(), [](const auto& item) {
      return std::holds_alternative<Opaque>(item);
    });
    if (chars <= CountCodePoints(Marker(recall_tool, m.id)) && !has_opaque) continue;
    if (copying && copy_at != i) flush();
    if (!copying) {
      copy = m;
      copy_at = i;
      copying = true;
    }
    auto& cleared = std::get<ToolResult>(copy.parts[k]);
    cleared.content.clear();
    cleared.content.emplace_back(Text{Marker(recall_tool, m.id), {}});
    if (cleared.form == ContentForm::kNull || cleared.form == ContentForm::kAbsent) {
      cleared.form = ContentForm::kDefault;
    }
    ++out.results;
  }
  flush();
  return out;
}

std::size_t Compactor::Impl::ClearToolResults(const std::string& session, SessionCache& c) {
  Clearing plan = PlanClearing(c.transcript());
  if (plan.replacements.empty() ||
      plan.freed_chars < config.compaction.clear_tool_results.min_free_chars) {
    return 0;
  }
  ReductionCommit commit;
  commit.expected_version = c.version();
  for (const auto& [i, m] : plan.replacements) commit.replacements.push_back(m);
  auto committed = store->CommitReduction(session, commit);
  if (!committed.ok()) {
    RECAP_LOG_WARN("session {}: old tool results could not be cleared ({}); summarizing instead",
                   session, committed.status().message());
    if (committed.status().code() == StatusCode::kConflict) c.Invalidate();  // reload next
    return 0;
  }
  const std::size_t messages = plan.replacements.size();
  const std::size_t before = c.transcript().chars();
  c.CommittedReplacements(std::move(plan.replacements), *committed);
  events.Emit(
      EventType::kToolResultsCleared, session,
      internal::ToolResultsClearedFields(messages, plan.results, before - c.transcript().chars()));
  RECAP_LOG_INFO("session {}: cleared {} old tool results in {} messages, {} chars freed", session,
                 plan.results, messages, before - c.transcript().chars());
  return messages;
}

}  // namespace v0
}  // namespace recap
