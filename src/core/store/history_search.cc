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

// The code point at text[i] and its length in bytes (1 for a byte that starts no valid
// sequence, read as U+FFFD).
std::size_t DecodeAt(std::string_view text, std::size_t i, char32_t* cp) {
  const auto b = [&](std::size_t k) { return static_cast<unsigned char>(text[i + k]); };
  const unsigned char lead = b(0);
  if (lead < 0x80) {
    *cp = lead;
    return 1;
  }
  std::size_t n = lead >= 0xF0 && lead <= 0xF4 ? 4 : lead >= 0xE0 ? 3 : lead >= 0xC2 ? 2 : 0;
  if (lead > 0xF4) n = 0;
  if (n == 0 || i + n > text.size()) {
    *cp = 0xFFFD;
    return 1;
  }
  char32_t c = lead & (n == 2 ? 0x1F : n == 3 ? 0x0F : 0x07);
  for (std::size_t k = 1; k < n; ++k) {
    if ((b(k) & 0xC0) != 0x80) {
      *cp = 0xFFFD;
      return 1;
    }
    c = (c << 6) | (b(k) & 0x3F);
  }
  *cp = c;
  return n;
}

// Whether a code point belongs to a word: letters and digits, as SQLite's unicode61 tokenizer
// reads them for the scripts people write in — ASCII letters and digits, and everything beyond
// ASCII except the blocks of punctuation, symbols, arrows, shapes and emoji.
bool IsWordCodePoint(char32_t c) {
  if (c < 0x80) {
    return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
  }
  if (c < 0xC0) {  // Latin-1's punctuation and symbols; ª ² ³ µ ¹ º ¼ ½ ¾ are letters or digits
    return c == 0xAA || c == 0xB2 || c == 0xB3 || c == 0xB5 || c == 0xB9 || c == 0xBA ||
           (c >= 0xBC && c <= 0xBE);
  }
  if (c == 0xD7 || c == 0xF7) return false;      // × ÷
  if (c >= 0x2000 && c <= 0x206F) return false;  // general punctuation
  if (c >= 0x20A0 && c <= 0x20CF) return false;  // currency
  if (c >= 0x2190 && c <= 0x2BFF) return false;  // arrows, math, shapes, dingbats
  if (c >= 0x2E00 && c <= 0x2E7F) return false;  // supplemental punctuation
  if (c >= 0x3000 && c <= 0x3004) return false;  // CJK spaces and marks
  if (c >= 0x3008 && c <= 0x3020) return false;  // CJK brackets
  if (c >= 0xFE30 && c <= 0xFE4F) return false;  // compatibility forms
  if (c >= 0xFF01 && c <= 0xFF0F) return false;  // fullwidth punctuation
  if (c >= 0xFF1A && c <= 0xFF20) return false;
  if (c >= 0xFF3B && c <= 0xFF40) return false;
  if (c >= 0xFF5B && c <= 0xFF65) return false;
  if (c == 0xFFFD || c == 0xFEFF) return false;    // replacement, byte order mark
  if (c >= 0x1F000 && c <= 0x1FAFF) return false;  // emoji and pictographs
  return true;
}

// A word's code point as it is compared: lower case, and Latin letters without their
// diacritics (as unicode61 remove_diacritics reads them); Greek and Cyrillic lower-cased.
char32_t Fold(char32_t c) {
  if (c < 0x80) return (c >= 'A' && c <= 'Z') ? c + ('a' - 'A') : c;
  if (c >= 0xC0 && c <= 0x17F) {
    // U+00C0..U+017F: the letter its canonical decomposition starts with, lower-cased ('*': a
    // letter of its own, lower-cased below).
    static const char kLatin[] =
        "aaaaaa*ceeeeiiii*nooooo**uuuuy**aaaaaa*ceeeeiiii*nooooo**uuuuy*y"
        "aaaaaaccccccccdd**eeeeeeeeeegggggggghh**iiiiiiiii***jjkk*llllll****nnnnnn***oooooo**"
        "rrrrrrsssssssstttt**uuuuuuuuuuuuwwyyyzzzzzz*";
    const char f = kLatin[c - 0xC0];
    if (f != '*') return static_cast<char32_t>(f);
    if (c <= 0xDE && c != 0xD7) return c + 0x20;  // Æ Ð Ø Þ
    switch (c) {
      case 0x110:
      case 0x126:
      case 0x132:
      case 0x13F:
      case 0x141:
      case 0x14A:
      case 0x152:
      case 0x166: return c + 1;  // Đ Ħ Ĳ Ŀ Ł Ŋ Œ Ŧ
      default: return c;
    }
  }
  if (c >= 0x391 && c <= 0x3A9 && c != 0x3A2) return c + 0x20;  // Greek capitals
  if (c >= 0x410 && c <= 0x42F) return c + 0x20;                // Cyrillic capitals
  if (c >= 0x400 && c <= 0x40F) return c + 0x50;
  return c;
}

void AppendUtf8(std::string& out, char32_t c) {
  if (c < 0x80) {
    out += static_cast<char>(c);
  } else if (c < 0x800) {
    out += static_cast<char>(0xC0 | (c >> 6));
    out += static_cast<char>(0x80 | (c & 0x3F));
  } else if (c < 0x10000) {
    out += static_cast<char>(0xE0 | (c >> 12));
    out += static_cast<char>(0x80 | ((c >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (c & 0x3F));
  } else {
    out += static_cast<char>(0xF0 | (c >> 18));
    out += static_cast<char>(0x80 | ((c >> 12) & 0x3F));
    out += static_cast<char>(0x80 | ((c >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (c & 0x3F));
  }
}

// Calls `word(begin, end)` for each word of `text` (byte offsets), in order.
template <typename F>
void ForEachWord(std::string_view text, F&& word) {
  std::size_t i = 0;
  std::size_t begin = std::string_view::npos;
  while (i < text.size()) {
    char32_t c = 0;
    const std::size_t n = DecodeAt(text, i, &c);
    if (IsWordCodePoint(c)) {
      if (begin == std::string_view::npos) begin = i;
    } else if (begin != std::string_view::npos) {
      word(begin, i);
      begin = std::string_view::npos;
    }
    i += n;
  }
  if (begin != std::string_view::npos) word(begin, text.size());
}

// text[begin, end) folded (Fold) into `out`.
void FoldInto(std::string_view text, std::size_t begin, std::size_t end, std::string& out) {
  out.clear();
  for (std::size_t i = begin; i < end;) {
    char32_t c = 0;
    i += DecodeAt(text, i, &c);
    AppendUtf8(out, Fold(c));
  }
}

bool HasWord(std::string_view text) {
  bool found = false;
  ForEachWord(text, [&](std::size_t, std::size_t) { found = true; });
  return found;
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
  const auto space = [](char c) {
    return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v';
  };
  std::size_t i = 0;
  while (i < text.size() && terms.size() < kMaxQueryTerms) {
    while (i < text.size() && space(text[i])) ++i;
    std::string term;
    while (i < text.size() && !space(text[i])) {
      if (text[i] != '"') term += text[i];
      ++i;
    }
    if (term.size() > kMaxTermBytes) {
      // Cut at the end of the last word that fits; a single word longer than the limit is cut
      // at a sequence's first byte.
      std::size_t cut = 0;
      ForEachWord(term, [&](std::size_t, std::size_t end) {
        if (end <= kMaxTermBytes) cut = end;
      });
      if (cut == 0) {
        cut = kMaxTermBytes;
        while (cut > 0 && (static_cast<unsigned char>(term[cut]) & 0xC0) == 0x80) --cut;
      }
      term.resize(cut);
    }
    if (!HasWord(term)) continue;
    std::string key;
    for (const std::string& w : TermWords(term)) key += w + ' ';
    if (seen.insert(key).second) terms.push_back(std::move(term));
  }
  return terms;
}

std::vector<std::string> TermWords(std::string_view term) {
  std::vector<std::string> words;
  std::string w;
  ForEachWord(term, [&](std::size_t b, std::size_t e) {
    FoldInto(term, b, e, w);
    words.push_back(w);
  });
  return words;
}

double ScoreText(std::string_view text, const std::vector<std::vector<std::string>>& terms) {
  if (terms.empty()) return 0;
  // How far each term has got at the current word: a term of n words matches where its words
  // follow one another, so each term keeps the starts that still match.
  std::vector<std::vector<std::size_t>> partial(terms.size());
  std::vector<std::size_t> count(terms.size(), 0);
  std::string folded;
  ForEachWord(text, [&](std::size_t b, std::size_t e) {
    FoldInto(text, b, e, folded);
    for (std::size_t t = 0; t < terms.size(); ++t) {
      const std::vector<std::string>& words = terms[t];
      std::vector<std::size_t>& at = partial[t];
      std::size_t kept = 0;
      for (std::size_t k = 0; k < at.size(); ++k) {
        if (folded == words[at[k]]) {
          if (at[k] + 1 == words.size()) {
            ++count[t];
          } else {
            at[kept++] = at[k] + 1;
          }
        }
      }
      at.resize(kept);
      if (folded == words[0]) {
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
    // Only the best are kept as the walk goes: a common word in a long history holds at most
    // twice the limit (plus the messages asked for by id) at any time.
    if (hits.size() >= 2 * search.limit + ids.size() + 64) RankHits(hits, search);
    return Status::OK();
  });
  RECAP_RETURN_IF_ERROR(s);
  RankHits(hits, search);
  return hits;
}

std::string Fts5Query(const std::vector<std::string>& terms) {
  std::string q;
  for (const std::string& t : terms) {
    if (!HasWord(t)) continue;
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
    // The words alone, as written (the server lower-cases them as it did the messages'):
    // websearch_to_tsquery reads punctuation and "-" as operators.
    std::string words;
    ForEachWord(t, [&](std::size_t b, std::size_t e) {
      if (!words.empty()) words += ' ';
      words.append(t, b, e - b);
    });
    if (words.empty()) continue;
    if (!q.empty()) q += " or ";
    q += '"' + words + '"';
  }
  return q;
}

}  // namespace internal
}  // namespace v0
}  // namespace recap
