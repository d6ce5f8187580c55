// Errors of the PostgreSQL store: what libpq and the server report, mapped to a Status that
// says what is wrong and what to do (FromFailure), and the small text helpers that go with it.
#ifndef RECAP_SRC_POSTGRES_PG_ERRORS_H_
#define RECAP_SRC_POSTGRES_PG_ERRORS_H_

#include <cstdint>
#include <deque>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include <libpq-fe.h>

#include "recap/postgres/postgres_store.h"
#include "recap/status.h"

namespace recap {
inline namespace v0 {
namespace postgres_internal {

// `"<s>"`, as every store quotes names and ids in its messages.
std::string Quoted(const std::string& s);

// ASCII lower case, for matching libpq's and the server's words.
std::string Lower(std::string s);

bool Contains(const std::string& haystack, const char* needle);

// libpq's messages end with a newline and sometimes hold several lines.
std::string OneLine(std::string s);

// Thrown inside a call to abandon it with a Status of recap's own.
struct Abort {
  Status status;
};

// A failed statement, as the server (or libpq) reported it.
struct PgFailure {
  std::string sqlstate;    // e.g. "40001"; empty when the connection failed
  std::string message;     // the primary message, one line
  std::string constraint;  // for integrity violations
  bool connection_lost = false;
};

// What was being done, for messages: "recap postgres store (host …, database …): loading
// session "s" failed: …".
class Describer {
 public:
  explicit Describer(std::string server) : server_(std::move(server)) {}
  std::string Where(const std::string& doing) const {
    return "recap postgres store (" + server_ + "): " + doing + " failed: ";
  }

 private:
  std::string server_;
};

// Maps a failed statement to a Status that says what is wrong and what to do.
Status FromFailure(const Describer& d, const std::string& doing, const PgFailure& f);

// A statement's result, cleared when it goes.
using ResultPtr = std::unique_ptr<PGresult, decltype(&PQclear)>;

}  // namespace postgres_internal
}  // namespace v0
}  // namespace recap

#endif  // RECAP_SRC_POSTGRES_PG_ERRORS_H_
