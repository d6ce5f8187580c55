// Finding messages in a session's history (recap_internal/history_search.h).
#include "recap_internal/history_search.h"

#include <algorithm>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <variant>

namespace recap {
inline namespace v0 {
namespace internal {

namespace {

bool IsWordByte(unsigned char c) {
  return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c >= 0x80;
}

unsigned char Lower(unsigned char c) { return (c >= 'A' && c <= 'Z') ? c + ('a' - 'A') : c; }

// Calls `word(begin, end)` for each word of `text`, in order.
template <typename F>
void ForEachWord(std::string_view text, F&& word) {
  std::size_t i = 0;
  while (i < text.size()) {
    while (i < text.size() && !IsWordByte(static_cast<unsigned char>(text[i]))) ++i;
    const std::size_t begin = i;
    while (i < text.size() && IsWordByte(static_cast<unsigned char>(text[i]))) ++i;
    if (i > begin) word(begin, i);
  }
}

bool SameWord(std::string_view text, std::size_t begin, std::size_t end, const std::string& w) {
  if (end - begin != w.size()) return false;
  for (std::size_t k = 0; k < w.size(); ++k) {
    if (Lower(static_cast<unsigned char>(text[begin + k])) != static_cast<unsigned char>(w[k])) {
      return false;
    }
  }
  return true;
}

void AppendLine(std::string& out, std::string_view line) {
  if (line.empty()) return;
  if (!out.empty()) out += '\n';
  out.append(line.data(), line.size());
}

}  // namespace

std::string SearchableText(const Message& m) {
  std::string out;
  for (const Part& p : m.parts) {
    if (const auto* t = std::get_if<Text>(&p)) {
      AppendLine(out, t->text);
    } else if (const auto* c = std::get_if<ToolCall>(&p)) {
      AppendLine(out, c->name);
      AppendLine(out, c->arguments);
    } else if (const auto* r = std::get_if<ToolResult>(&p)) {
      for (const ResultItem& item : r->content) {
        if (const auto* rt = std::get_if<Text>(&item)) AppendLine(out, rt->text);
      }
    }
  }
  return out;
}

std::vector<std::string> SplitQuery(std::string_view text) {
  std::vector<std::string> terms;
  std::unordered_set<std::string> seen;
  std::size_t i = 0;
  while (i < text.size() && terms.size() < kMaxQueryTerms) {
    while (i < text.size() && (text[i] == ' ' || text[i] == '\t' || text[i] == '\n' ||
                               text[i] == '\r' || text[i] == '\f' || text[i] == '\v')) {
      ++i;
    }
    std::string term;
    bool has_word = false;
    while (i < text.size() && text[i] != ' ' && text[i] != '\t' && text[i] != '\n' &&
           text[i] != '\r' && text[i] != '\f' && text[i] != '\v') {
      const unsigned char c = static_cast<unsigned char>(text[i++]);
      if (c == '"' || term.size() >= kMaxTermBytes) continue;
      term += static_cast<char>(c);
      has_word = has_word || IsWordByte(c);
    }
    // A term cut inside a UTF-8 sequence loses the broken end.
    while (!term.empty() && (static_cast<unsigned char>(term.back()) & 0xC0) == 0x80) {
      std::size_t lead = term.size() - 1;
      while (lead > 0 && (static_cast<unsigned char>(term[lead]) & 0xC0) == 0x80) --lead;
      const unsigned char b = static_cast<unsigned char>(term[lead]);
      const std::size_t need = b >= 0xF0 ? 4 : b >= 0xE0 ? 3 : b >= 0xC0 ? 2 : 1;
      if (term.size() - lead >= need) break;
      term.resize(lead);
    }
    if (!has_word || TermWords(term).empty()) continue;
    std::string key;
    for (char c : term) key += static_cast<char>(Lower(static_cast<unsigned char>(c)));
    if (seen.insert(key).second) terms.push_back(std::move(term));
  }
  return terms;
}

std::vector<std::string> TermWords(std::string_view term) {
  std::vector<std::string> words;
  ForEachWord(term, [&](std::size_t b, std::size_t e) {
    std::string w;
    w.reserve(e - b);
    for (std::size_t k = b; k < e; ++k) w += static_cast<char>(Lower(term[k]));
    words.push_back(std::move(w));
  });
  return words;
}

double ScoreText(std::string_view text, const std::vector<std::vector<std::string>>& terms) {
  if (terms.empty()) return 0;
  // How far each term has got at the current word: a term of n words matches where its words
  // follow one another, so each term keeps the starts that still match.
  std::vector<std::vector<std::size_t>> partial(terms.size());
  std::vector<std::size_t> count(terms.size(), 0);
  ForEachWord(text, [&](std::size_t b, std::size_t e) {
    for (std::size_t t = 0; t < terms.size(); ++t) {
      const std::vector<std::string>& words = terms[t];
      std::vector<std::size_t>& at = partial[t];
      std::size_t kept = 0;
      for (std::size_t k = 0; k < at.size(); ++k) {
        if (SameWord(text, b, e, words[at[k]])) {
          if (at[k] + 1 == words.size()) {
            ++count[t];
          } else {
            at[kept++] = at[k] + 1;
          }
        }
      }
      at.resize(kept);
      if (SameWord(text, b, e, words[0])) {
        if (words.size() == 1) {
          ++count[t];
        } else {
          at.push_back(1);
        }
      }
    }
  });
  std::size_t held = 0;
  std::size_t total = 0;
  for (std::size_t c : count) {
    if (c > 0) ++held;
    total += c;
  }
  if (held == 0) return 0;
  return 1000.0 * static_cast<double>(held) +
         static_cast<double>(std::min<std::size_t>(total, 999));
}

void RankHits(std::vector<HistoryHit>& hits, const HistorySearch& search) {
  std::unordered_map<std::string, std::size_t> asked;
  for (std::size_t k = 0; k < search.ids.size(); ++k) asked.emplace(search.ids[k], k);
  const bool by_score = !search.terms.empty();
  auto rank = [&](const HistoryHit& h) {
    auto it = asked.find(h.entry.message.id);
    return it == asked.end() ? search.ids.size() : it->second;
  };
  std::stable_sort(hits.begin(), hits.end(), [&](const HistoryHit& a, const HistoryHit& b) {
    const std::size_t ra = rank(a);
    const std::size_t rb = rank(b);
    if (ra != rb) return ra < rb;
    if (ra < search.ids.size() || !by_score) return a.entry.seq < b.entry.seq;
    if (a.score != b.score) return a.score > b.score;
    return a.entry.seq > b.entry.seq;
  });
  if (hits.size() > search.limit) hits.resize(search.limit);
}

Result<std::vector<HistoryHit>> ScanHistory(SessionStore& store, const std::string& session,
                                            const HistorySearch& search) {
  std::vector<HistoryHit> hits;
  const std::unordered_set<std::string> ids(search.ids.begin(), search.ids.end());
  std::vector<std::vector<std::string>> terms;
  for (const std::string& t : search.terms) {
    std::vector<std::string> words = TermWords(t);
    if (!words.empty()) terms.push_back(std::move(words));
  }
  const bool ranged = search.last_turn != 0;
  const bool by_text = !terms.empty();
  if (search.limit == 0 || (ids.empty() && !by_text && !ranged)) return hits;
  Status s = store.ForEachHistoryEntry(session, [&](HistoryEntry&& e) {
    if (e.state == HistoryState::kActive && !search.include_active) return Status::OK();
    HistoryHit hit;
    bool match = ids.count(e.message.id) != 0;
    if (!match && (by_text || ranged) && !(search.terms.size() > 0 && !by_text)) {
      const bool in_range = !ranged || (e.turn >= search.first_turn && e.turn <= search.last_turn);
      if (in_range) {
        if (by_text) {
          hit.score = ScoreText(SearchableText(e.message), terms);
          match = hit.score > 0;
        } else {
          match = true;
        }
      }
    }
    if (!match) return Status::OK();
    hit.entry = std::move(e);
    hits.push_back(std::move(hit));
    return Status::OK();
  });
  RECAP_RETURN_IF_ERROR(s);
  RankHits(hits, search);
  return hits;
}

std::string Fts5Query(const std::vector<std::string>& terms) {
  std::string q;
  for (const std::string& t : terms) {
    if (TermWords(t).empty()) continue;
    if (!q.empty()) q += " OR ";
    q += '"';
    for (char c : t) {
      // Quotes are dropped (SplitQuery drops them; a caller's own terms too), and so are
      // control characters: SQLite reads a query only up to a NUL.
      if (c == '"') continue;
      q += static_cast<unsigned char>(c) < 0x20 ? ' ' : c;
    }
    q += '"';
  }
  return q;
}

std::string WebSearchQuery(const std::vector<std::string>& terms) {
  std::string q;
  for (const std::string& t : terms) {
    const std::vector<std::string> words = TermWords(t);
    if (words.empty()) continue;
    if (!q.empty()) q += " or ";
    // The words alone: websearch_to_tsquery reads punctuation and "-" as operators.
    q += '"';
    for (std::size_t k = 0; k < words.size(); ++k) q += (k ? " " : "") + words[k];
    q += '"';
  }
  return q;
}

}  // namespace internal
}  // namespace v0
}  // namespace recap
