// Recalled messages as the model reads them (recall_render.h).
#include "recall/recall_render.h"

#include <algorithm>
#include <string>
#include <string_view>
#include <unordered_set>
#include <utility>
#include <variant>

#include "recap/measure.h"
#include "recap/tail_reducer.h"

#include "recap_internal/history_search.h"

namespace recap {
inline namespace v0 {
namespace recall_internal {

namespace {

constexpr std::size_t kMinClipped = 200;
// A message found by words gets at least this much of the budget when it cannot have it all.
constexpr std::size_t kMinShare = 600;

// Where in `text` one of `words` first occurs, ASCII case ignored; npos when none does.
std::size_t FirstOccurrence(const std::string& text, const std::vector<std::string>& words) {
  std::string lower = text;
  for (char& c : lower) {
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
  }
  std::size_t first = std::string::npos;
  for (const std::string& w : words) {
    const std::size_t at = lower.find(w);
    if (at < first) first = at;
  }
  return first;
}

// At most `cap` code points of `text` around where one of `words` first occurs: "… " before when
// it does not start at the beginning, the truncation marker after when it does not reach the
// end. Without an occurrence, `text` clipped from its start.
std::string Excerpt(const std::string& text, const std::vector<std::string>& words,
                    std::size_t cap) {
  const std::size_t at = FirstOccurrence(text, words);
  if (at == std::string::npos || at == 0) return ClipText(text, cap);
  // Start a third of the cap before the occurrence (counted in code points), at a sequence's
  // first byte.
  std::size_t begin = at;
  for (std::size_t back = 0; begin > 0 && back < cap / 3;) {
    --begin;
    if ((static_cast<unsigned char>(text[begin]) & 0xC0) != 0x80) ++back;
  }
  if (begin == 0) return ClipText(text, cap);
  static const std::string kBefore = "\xE2\x80\xA6 ";  // "… "
  return kBefore + ClipText(std::string_view(text).substr(begin), cap - 2);
}

void Line(std::string& out, const std::string& text) {
  if (!out.empty()) out += '\n';
  out += text;
}

std::string Header(const RecalledMessage& r) {
  return "--- message " + r.id + " (turn " + std::to_string(r.turn) + ", " + RoleName(r.role) +
         ", " + r.state + ") ---\n";
}

std::string Asked(const RecallQuery& q) {
  std::string what;
  if (!q.text.empty()) what = "\"" + ClipText(q.text, 200) + "\"";
  if (!q.ids.empty()) {
    if (!what.empty()) what += " or ";
    what += "the ids ";
    for (std::size_t k = 0; k < q.ids.size() && k < 10; ++k) {
      what += (k ? ", " : "") + ClipText(q.ids[k], 100);
    }
    if (q.ids.size() > 10) what += ", …";
  }
  if (q.last_turn != 0) {
    if (!what.empty()) what += " in ";
    what += "turns " + std::to_string(q.first_turn) + " to " + std::to_string(q.last_turn);
  }
  return what;
}

}  // namespace

std::string StateOf(const HistoryEntry& e) {
  if (e.state == HistoryState::kActive) return "active";
  const std::string& by = e.replaced_by;
  if (by.rfind("compaction:", 0) == 0) return "summarized";
  if (by.rfind("reduction:", 0) == 0) return "reduced";
  if (by.rfind("undo:", 0) == 0) return "undone";
  return "retired";
}

std::string ContentText(const Message& m) {
  std::string out;
  for (const Part& p : m.parts) {
    if (const auto* t = std::get_if<Text>(&p)) {
      Line(out, t->text);
    } else if (const auto* c = std::get_if<ToolCall>(&p)) {
      Line(out, "call " + c->name + " " + c->arguments);
    } else if (const auto* r = std::get_if<ToolResult>(&p)) {
      std::string text;
      for (const ResultItem& item : r->content) {
        if (const auto* rt = std::get_if<Text>(&item)) {
          Line(text, rt->text);
        } else if (const auto* o = std::get_if<Opaque>(&item)) {
          Line(text, "[" + o->kind + "]");
        }
      }
      Line(out, "result of " + r->call_id + (r->is_error ? " (error): " : ": ") + text);
    } else if (const auto* o = std::get_if<Opaque>(&p)) {
      Line(out, "[" + o->kind + "]");
    }
  }
  return out;
}

Recalled Render(std::vector<HistoryHit> hits, const RecallQuery& query, bool maybe_more) {
  Recalled out;
  std::size_t room = query.max_chars;
  // The first word of each term, to show a long message where it matched.
  std::vector<std::string> words;
  for (const std::string& term : internal::SplitQuery(query.text)) {
    std::vector<std::string> w = internal::TermWords(term);
    if (!w.empty()) words.push_back(std::move(w.front()));
  }
  const std::unordered_set<std::string> asked(query.ids.begin(), query.ids.end());
  const std::size_t shown = std::min(hits.size(), query.max_messages);
  for (std::size_t k = 0; k < hits.size(); ++k) {
    HistoryHit& hit = hits[k];
    if (k >= shown) {
      ++out.left_out;
      out.left_out_ids.push_back(hit.entry.message.id);
      continue;
    }
    RecalledMessage r;
    r.id = hit.entry.message.id;
    r.seq = hit.entry.seq;
    r.turn = hit.entry.turn;
    r.role = hit.entry.message.role;
    r.state = StateOf(hit.entry);
    r.replaced_by = hit.entry.replaced_by;
    r.score = hit.score;
    const std::size_t header = CountCodePoints(Header(r));
    std::string text = ContentText(hit.entry.message);
    const std::size_t chars = CountCodePoints(text);
    // A message asked for by id gets what remains; one found by words shares it with the rest,
    // and when it is too long, shows where it matched.
    const std::size_t share =
        asked.count(r.id) != 0 ? room : std::min(room, std::max(room / (shown - k), kMinShare));
    if (header + chars <= share) {
      r.text = std::move(text);
      room -= header + chars;
    } else if (share < room && share >= header + kMinClipped) {
      r.text = Excerpt(text, words, share - header);
      r.clipped = true;
      room -= header + CountCodePoints(r.text);
    } else if (room >= header + kMinClipped) {
      r.text = asked.count(r.id) != 0 ? ClipText(text, room - header)
                                      : Excerpt(text, words, room - header);
      r.clipped = true;
      room = 0;
    } else {
      ++out.left_out;
      out.left_out_ids.push_back(r.id);
      continue;
    }
    out.messages.push_back(std::move(r));
  }
  if (out.messages.empty() && out.left_out == 0) {
    out.text =
        std::string(kRecallToolName) + ": nothing in this conversation's history matches " +
        Asked(query) +
        (query.include_active ? "." : " (messages still in the conversation are not searched).");
    return out;
  }
  out.text = std::string(kRecallToolName) + ": " + std::to_string(out.messages.size()) +
             " message(s) from this conversation's history";
  if (!query.text.empty()) out.text += ", best match first";
  out.text += ".\n";
  for (const RecalledMessage& r : out.messages) {
    out.text += "\n" + Header(r) + r.text + "\n";
  }
  if (out.left_out > 0) {
    out.text += "\n" + std::to_string(out.left_out) + " more matched but did not fit (max_chars " +
                std::to_string(query.max_chars) + ", at most " +
                std::to_string(query.max_messages) + " messages); ask for them by id: ";
    for (std::size_t k = 0; k < out.left_out_ids.size(); ++k) {
      out.text += (k ? ", " : "") + out.left_out_ids[k];
    }
    out.text += "\n";
  }
  if (maybe_more) {
    out.text +=
        "There may be more matches than these: ask with more specific words to narrow "
        "them.\n";
  }
  return out;
}

std::string RecallNote(const std::vector<std::string>& replaced_ids) {
  std::string note = "[recap: the summary above replaced " + std::to_string(replaced_ids.size()) +
                     (replaced_ids.size() == 1 ? " message (" : " messages (from ") +
                     replaced_ids.front();
  if (replaced_ids.size() > 1) note += " to " + replaced_ids.back();
  note += "), kept in full in this conversation's history. To see their exact text again, call " +
          std::string(kRecallToolName) + " with a query, or with their ids.]";
  return note;
}

}  // namespace recall_internal
}  // namespace v0
}  // namespace recap
