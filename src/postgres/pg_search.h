// The PostgreSQL store's recall index (SPEC R18.1): what of a message's searchable text
// (internal::SearchableText) goes into `messages.search`, to_tsvector('simple', …) written by
// the INSERT that stores the message (schema.h, version 3), and the query text that
// websearch_to_tsquery('simple', …) is given. Private to recap::postgres.
#ifndef RECAP_SRC_POSTGRES_PG_SEARCH_H_
#define RECAP_SRC_POSTGRES_PG_SEARCH_H_

#include <cstddef>
#include <string>
#include <string_view>

namespace recap {
inline namespace v0 {
namespace postgres_internal {

// What is indexed of one message: at most the first this many bytes of its searchable text (a
// 200 MB tool output is found by its first 4 MiB), as the SQLite store indexes.
inline constexpr std::size_t kMaxIndexedBytes = std::size_t{4} << 20;

// PostgreSQL refuses a tsvector whose lexemes and positions take more than 1 MB ("string is
// too long for tsvector"), which 4 MiB of distinct words would: the text is cut earlier, before
// the word at which an estimate of that size (each distinct word's bytes, plus 5, plus 2 for
// each repeat up to 255) passes this budget. The estimate is never below what PostgreSQL
// counts for the words of IndexedText's result, and the budget leaves room for a database whose
// locale splits words at non-ASCII punctuation or lengthens them when lower-casing.
inline constexpr std::size_t kMaxVectorBytes = std::size_t{400} << 10;

// The text to_tsvector('simple', …) is given for a message's searchable text: `text` cut to
// kMaxIndexedBytes at the start of a UTF-8 sequence, every ASCII byte that is not a letter or a
// digit (and every byte of an invalid UTF-8 sequence, and NUL) made a space — so that
// PostgreSQL's parser finds exactly the words internal::TermWords finds ("src/app.py" is
// "src app py", "ERR-4471" is "err 4471", never a path, a host or a negative number) — and cut
// further, at a word's start, to keep within kMaxVectorBytes. Empty when nothing is left.
std::string IndexedText(std::string_view text);

// `query` (internal::WebSearchQuery's) with every byte of an invalid UTF-8 sequence made a
// space: PostgreSQL refuses text that is not valid in the database's encoding (UTF-8).
std::string QueryText(std::string_view query);

}  // namespace postgres_internal
}  // namespace v0
}  // namespace recap

#endif  // RECAP_SRC_POSTGRES_PG_SEARCH_H_
