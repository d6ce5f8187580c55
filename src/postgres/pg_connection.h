// One libpq connection: statement parameters (Params) and binary results, the statements the
// store prepares on every connection (kStatementText, "{S}" for the schema), and Connection.
#ifndef RECAP_SRC_POSTGRES_PG_CONNECTION_H_
#define RECAP_SRC_POSTGRES_PG_CONNECTION_H_

#include <cstdint>
#include <deque>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

#include <libpq-fe.h>

#include "recap/postgres/postgres_store.h"
#include "recap/status.h"

#include "pg_errors.h"

namespace recap {
inline namespace v0 {
namespace postgres_internal {

// Statement parameters: text, except for message bodies (binary). Text values are copied;
// a body passed to Bytes() must stay alive until the statement ran.
class Params {
 public:
  Params& Int(std::int64_t v) {
    owned_.push_back(std::to_string(v));
    return Add(owned_.back().c_str(), 0, 0);
  }
  Params& Text(const std::string& s) {
    if (s.find('\0') != std::string::npos) {
      throw Abort{Status::InvalidArgument(
          "a value holds a NUL character, which PostgreSQL text cannot store (\"" +
          s.substr(0, std::min<std::size_t>(s.find('\0'), 60)) + "…\")")};
    }
    owned_.push_back(s);
    return Add(owned_.back().c_str(), 0, 0);
  }
  Params& Bool(bool b) { return Add(b ? "t" : "f", 0, 0); }
  Params& Bytes(std::string_view b) {
    return Add(b.empty() ? "" : b.data(), static_cast<int>(b.size()), 1);
  }
  Params& Null() { return Add(nullptr, 0, 0); }

  int size() const { return static_cast<int>(values_.size()); }
  const char* const* values() const { return values_.data(); }
  const int* lengths() const { return lengths_.data(); }
  const int* formats() const { return formats_.data(); }

 private:
  Params& Add(const char* v, int length, int format) {
    values_.push_back(v);
    lengths_.push_back(length);
    formats_.push_back(format);
    return *this;
  }
  std::deque<std::string> owned_;  // stable addresses
  std::vector<const char*> values_;
  std::vector<int> lengths_;
  std::vector<int> formats_;
};

// Binary result values.
std::int64_t GetInt(const PGresult* r, int row, int col);

std::string_view GetView(const PGresult* r, int row, int col);

// A float8 column.
double GetDouble(const PGresult* r, int row, int col);

bool IsNull(const PGresult* r, int row, int col);

// The statements, by index; "{S}" is replaced by the quoted schema.
enum Q : int {
  kLoad,
  kFindForUpdate,
  kCreateSession,
  kInsertMessage,
  kSetVersion,
  kMarkCompaction,
  kMarkReduction,
  kMarkRecovery,
  kLogCommit,
  kHead,
  kIsActiveId,
  kRetirePrefix,
  kFindActive,
  kRetireSeq,
  kActiveIds,
  kMovePositions,
  kHistory,
  kListSessions,
  kAddMemory,
  kListMemories,
  kVersion,
  kRestoreKept,
  kSaveLearned,
  kClearLearned,
  kMarkUndo,
  kLastRewrite,
  kSeqPlaces,
  kFirstOther,
  kRetireSeqs,
  kUnplaceSeqs,
  kPlaceSeqs,
  kMarkUndone,
  kSessionId,
  kSearchIds,
  kSearchText,
  kSearchTurns,
  kBackfillRead,
  kBackfillWrite,
  kBackfillTurns,
  kStatementCount
};

extern const char* const kStatementText[kStatementCount];

std::string WithSchema(std::string sql, const std::string& quoted_schema);

// One libpq connection and the statements prepared on it.
class Connection {
 public:
  explicit Connection(PGconn* conn) : conn_(conn) {}
  ~Connection() { PQfinish(conn_); }
  Connection(const Connection&) = delete;
  Connection& operator=(const Connection&) = delete;

  bool lost() const { return PQstatus(conn_) != CONNECTION_OK; }

  // A statement without parameters (BEGIN, COMMIT, DDL). Throws PgFailure.
  void Simple(const std::string& sql) {
    ResultPtr r(PQexec(conn_, sql.c_str()), &PQclear);
    Check(r.get());
  }

  // A statement of the store's, prepared on first use. Throws PgFailure.
  ResultPtr Run(int q, const std::vector<std::string>& texts, const Params& p) {
    const std::string name = Prepare(q, texts);
    ResultPtr r(PQexecPrepared(conn_, name.c_str(), p.size(), p.values(), p.lengths(), p.formats(),
                               /*resultFormat=*/1),
                &PQclear);
    Check(r.get());
    return r;
  }

  // Statement q once per parameter set, in one round trip: libpq's pipeline mode sends them
  // all, then a sync, then reads the answers (a statement's result is a few dozen bytes, so
  // the answers to a thousand fit the socket's buffer while the statements are still being
  // sent). Throws PgFailure for the first statement that failed, its index in *failed_at;
  // the ones after it are skipped by the server.
  void RunPipelined(int q, const std::vector<std::string>& texts, const std::vector<Params>& sets,
                    std::size_t* failed_at) {
    const std::string name = Prepare(q, texts);
    if (PQenterPipelineMode(conn_) != 1) {  // not idle: one statement at a time instead
      for (std::size_t k = 0; k < sets.size(); ++k) {
        *failed_at = k;
        Run(q, texts, sets[k]);
      }
      return;
    }
    for (const Params& p : sets) {
      if (PQsendQueryPrepared(conn_, name.c_str(), p.size(), p.values(), p.lengths(), p.formats(),
                              /*resultFormat=*/1) != 1) {
        ThrowLost();
      }
    }
    if (PQpipelineSync(conn_) != 1) ThrowLost();
    std::optional<PgFailure> failure;
    for (std::size_t k = 0; k < sets.size(); ++k) {
      // Statement k's result, then the null that ends it.
      while (PGresult* r = PQgetResult(conn_)) {
        const ResultPtr owned(r, &PQclear);
        const ExecStatusType st = PQresultStatus(r);
        if (st == PGRES_COMMAND_OK || st == PGRES_TUPLES_OK || st == PGRES_PIPELINE_ABORTED) {
          continue;
        }
        if (!failure) {
          failure = Describe(r);
          *failed_at = k;
        }
      }
      if (lost()) ThrowLost();
    }
    const ResultPtr sync(PQgetResult(conn_), &PQclear);
    if (!sync || PQresultStatus(sync.get()) != PGRES_PIPELINE_SYNC ||
        PQexitPipelineMode(conn_) != 1) {
      ThrowLost();
    }
    if (failure) throw *failure;
  }

  // Throws the PgFailure `r` describes unless it succeeded (a command or rows).
  void Check(const PGresult* r) {
    const ExecStatusType st = r ? PQresultStatus(r) : PGRES_FATAL_ERROR;
    if (st == PGRES_COMMAND_OK || st == PGRES_TUPLES_OK) return;
    throw Describe(r);
  }

  PGconn* raw() { return conn_; }

 private:
  // The statement's name on this connection, preparing it on first use.
  std::string Prepare(int q, const std::vector<std::string>& texts) {
    std::string name = "recap_" + std::to_string(q);
    if (prepared_.count(q) == 0) {
      ResultPtr made(
          PQprepare(conn_, name.c_str(), texts[static_cast<std::size_t>(q)].c_str(), 0, nullptr),
          &PQclear);
      Check(made.get());
      prepared_.insert(q);
    }
    return name;
  }

  PgFailure Describe(const PGresult* r) {
    PgFailure f;
    if (r) {
      if (const char* s = PQresultErrorField(r, PG_DIAG_SQLSTATE)) f.sqlstate = s;
      if (const char* m = PQresultErrorField(r, PG_DIAG_MESSAGE_PRIMARY)) f.message = OneLine(m);
      if (const char* c = PQresultErrorField(r, PG_DIAG_CONSTRAINT_NAME)) f.constraint = c;
    }
    if (f.message.empty()) f.message = OneLine(PQerrorMessage(conn_));
    // libpq's own errors carry no SQLSTATE: the connection broke (or could not be used).
    f.connection_lost = lost() || f.sqlstate.empty();
    return f;
  }

  // A pipeline that broke off: the connection is not usable any more.
  [[noreturn]] void ThrowLost() {
    PgFailure f;
    f.message = OneLine(PQerrorMessage(conn_));
    f.connection_lost = true;
    throw f;
  }

  PGconn* conn_;
  std::unordered_set<int> prepared_;
};

}  // namespace postgres_internal
}  // namespace v0
}  // namespace recap

#endif  // RECAP_SRC_POSTGRES_PG_CONNECTION_H_
