// Finding messages in a session's history (SPEC R18.1; SessionStore::SearchHistory): the text a
// message is found by, a person's query as terms, the scan every store without an index uses,
// and the queries the SQLite and PostgreSQL full-text indexes are asked. Private to recap, in
// the seam (store_rules.h says how it is linked).
#ifndef RECAP_SRC_CORE_RECAP_INTERNAL_HISTORY_SEARCH_H_
#define RECAP_SRC_CORE_RECAP_INTERNAL_HISTORY_SEARCH_H_

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

#include "recap/message.h"
#include "recap/session_store.h"
#include "recap/status.h"

namespace recap {
inline namespace v0 {
namespace internal {

// What is indexed and searched of a message: its text parts, each tool call's name and
// arguments, each result's text, one per line.
std::string SearchableText(const Message& m);

// A query beyond these is cut: its first kMaxQueryTerms terms, each cut to kMaxTermBytes bytes
// (after the last word that fits whole; a single longer word at a UTF-8 sequence's start) — a
// 10 MB query costs what its first terms cost.
inline constexpr std::size_t kMaxQueryTerms = 32;
inline constexpr std::size_t kMaxTermBytes = 200;

// `text` as terms: split at white space, double quotes dropped, terms without a letter or digit
// left out, repeated terms (ignoring case) once, within the limits above.
std::vector<std::string> SplitQuery(std::string_view text);

// A term's words as the scan compares them: runs of letters and digits (ASCII's, and every code
// point beyond ASCII outside the blocks of punctuation, symbols, arrows, shapes and emoji, as
// SQLite's unicode61 tokenizer splits them), lower-cased, Latin letters without their accents.
std::vector<std::string> TermWords(std::string_view term);

// How well `text` matches terms already split into words (TermWords): 0 when it holds none of
// them (a term matches where its words follow one another), else 1,000 for each term it holds
// plus how often it holds them (at most 999).
double ScoreText(std::string_view text, const std::vector<std::vector<std::string>>& terms);

// SessionStore::SearchHistory by a walk of the history (ForEachHistoryEntry), with
// ScoreText's ranking: the default, and the in-memory store's.
Result<std::vector<HistoryHit>> ScanHistory(SessionStore& store, const std::string& session,
                                            const HistorySearch& search);

// Orders hits as SearchHistory promises: those named by id first (in the order of `ids`, each
// id's copies in store order), then by score (ties: newer first) — or, without terms, in store
// order — and keeps the first search.limit.
void RankHits(std::vector<HistoryHit>& hits, const HistorySearch& search);

// The terms as an SQLite FTS5 query: each term a phrase in double quotes, joined by OR. Empty
// when no term has a word (then nothing matches). No term can break out of its quotes.
std::string Fts5Query(const std::vector<std::string>& terms);

// The terms as PostgreSQL websearch_to_tsquery text: each term in double quotes, joined by
// " or ". Empty when no term has a word.
std::string WebSearchQuery(const std::vector<std::string>& terms);

// The turn a message stored after `turns` turn starts belongs to (HistoryEntry::turn).
inline std::uint64_t TurnOf(const Message& m, std::uint64_t turns) {
  return IsTurnStart(m) ? turns + 1 : turns;
}

}  // namespace internal
}  // namespace v0
}  // namespace recap

#endif  // RECAP_SRC_CORE_RECAP_INTERNAL_HISTORY_SEARCH_H_
