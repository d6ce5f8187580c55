#include "pg_errors.h"

#include <algorithm>
#include <cctype>
#include <condition_variable>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <mutex>
#include <unordered_set>

#include "recap/transcript.h"
#include "recap/version.h"

#include "recap_internal/remedy_text.h"
#include "recap_internal/store_rules.h"
#include "schema.h"

namespace recap {
inline namespace v0 {
namespace postgres_internal {

std::string Quoted(const std::string& s) { return internal::QuotedName(s); }

std::string Lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

bool Contains(const std::string& haystack, const char* needle) {
  return haystack.find(needle) != std::string::npos;
}

std::string OneLine(std::string s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.pop_back();
  for (char& c : s) {
    if (c == '\n' || c == '\r' || c == '\t') c = ' ';
  }
  return s;
}

Status FromFailure(const Describer& d, const std::string& doing, const PgFailure& f) {
  const std::string where = d.Where(doing);
  const std::string said =
      f.message.empty() ? std::string() : " (the server said: " + f.message + ")";
  if (f.connection_lost || f.sqlstate.rfind("08", 0) == 0 || f.sqlstate == "57P01" ||
      f.sqlstate == "57P02" || f.sqlstate == "57P03") {
    return Status::Unavailable(where + "the connection to the server was lost" + said +
                               ". Nothing was changed; retry: the next call connects again");
  }
  if (f.sqlstate == "57014") {
    internal::RemedyText m(where + "the statement ran longer than ");
    m.Remedy("PostgresStoreOptions.statement_timeout_ms", "statement_timeout_ms");
    m << " and the server cancelled it" + said + ". Nothing was changed; retry";
    m.Remedy("postgres.raise_statement_timeout",
             ", or raise PostgresStoreOptions.statement_timeout_ms");
    return m.ToStatus(StatusCode::kDeadlineExceeded);
  }
  if (f.sqlstate == "40001" || f.sqlstate == "40P01" || f.sqlstate == "55P03") {
    return Status::Unavailable(where +
                               "the server aborted the transaction to resolve a clash "
                               "with another one" +
                               said + ". Nothing was changed; retry");
  }
  if (f.sqlstate == "53100") {
    return Status::IOError(where + "the server's disk is full" + said +
                           ". Nothing was written; free space on the server, then retry");
  }
  if (f.sqlstate.rfind("53", 0) == 0) {
    return Status::ResourceExhausted(where + "the server ran out of a resource" + said +
                                     ". Nothing was changed; retry later");
  }
  if (f.sqlstate == "42501") {
    return Status::FailedPrecondition(where + "the database user lacks a privilege" + said +
                                      ". Grant it (recap needs to create and use its schema's "
                                      "tables), or connect as another user");
  }
  if (f.sqlstate == "25006") {
    return Status::FailedPrecondition(where + "the server accepts only reads" + said +
                                      "; connect to the primary, not a standby");
  }
  if (f.sqlstate == "42P01" || f.sqlstate == "3F000") {
    return Status::FailedPrecondition(where + "recap's tables are missing" + said +
                                      ". Was the schema dropped while the store was open? Open "
                                      "the store again to create them");
  }
  if (f.sqlstate == "22021" || f.sqlstate == "22P05") {
    return Status::InvalidArgument(where + "a value is not text PostgreSQL can store" + said +
                                   "; session ids must be valid UTF-8");
  }
  if (f.sqlstate.rfind("XX", 0) == 0) {
    return Status::Corruption(where + "the server reports damaged data" + said +
                              ". recap has changed nothing; see the server's log");
  }
  return Status::Internal(where + (f.message.empty() ? "an unexpected error" : f.message) +
                          (f.sqlstate.empty() ? "" : " (SQLSTATE " + f.sqlstate + ")"));
}

}  // namespace postgres_internal
}  // namespace v0
}  // namespace recap
