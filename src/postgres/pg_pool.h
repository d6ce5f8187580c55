// Connecting: the connection spec taken from PostgresStoreOptions (secrets scrubbed from every
// message), the pool of connections, and Call, which runs one unit of work on a pooled
// connection with the retries and the error mapping every store method shares.
#ifndef RECAP_SRC_POSTGRES_PG_POOL_H_
#define RECAP_SRC_POSTGRES_PG_POOL_H_

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include <libpq-fe.h>

#include "recap/postgres/postgres_store.h"
#include "recap/status.h"

#include "pg_connection.h"
#include "pg_errors.h"

namespace recap {
inline namespace v0 {
namespace postgres_internal {

// How to connect: libpq's keyword/value arrays, and the server as messages show it.
struct ConnectSpec {
  std::vector<std::string> keys;
  std::vector<std::string> values;
  std::string display;        // host, port, database and user; never the password
  std::string quoted_schema;  // "recap"
  std::string schema;
  std::uint32_t statement_timeout_ms = 0;
  std::size_t pool_size = 1;
  bool read_only = false;
};

// Removes what could be a password from a libpq parse error that quotes the string.
std::string ScrubSecrets(std::string text, const std::string& connection);

bool ValidSchemaName(const std::string& s);

Result<ConnectSpec> MakeSpec(const PostgresStoreOptions& o);

// A failed connection attempt, classified from libpq's message (it gives no SQLSTATE).
Status ConnectFailure(const std::string& server, const std::string& message);

// The pool: connections are opened on demand, up to pool_size, and kept. A connection found
// broken is closed, and so is every idle one (they most likely lost the same server).
class Pool {
 public:
  explicit Pool(ConnectSpec spec) : spec_(std::move(spec)) {
    for (const char* text : kStatementText) texts_.push_back(WithSchema(text, spec_.quoted_schema));
  }

  const ConnectSpec& spec() const { return spec_; }
  const std::vector<std::string>& texts() const { return texts_; }
  Describer describer() const { return Describer(spec_.display); }

  Result<std::unique_ptr<Connection>> Acquire() {
    {
      std::unique_lock<std::mutex> lock(mu_);
      cv_.wait(lock, [this] { return !idle_.empty() || open_ < spec_.pool_size; });
      if (!idle_.empty()) {
        std::unique_ptr<Connection> c = std::move(idle_.back());
        idle_.pop_back();
        return c;
      }
      ++open_;
    }
    Result<std::unique_ptr<Connection>> c = Connect();
    if (!c.ok()) {
      std::lock_guard<std::mutex> lock(mu_);
      --open_;
      cv_.notify_one();
    }
    return c;
  }

  // `broken`: the call found the connection unusable, whatever libpq's status says yet.
  void Release(std::unique_ptr<Connection> c, bool broken) {
    std::lock_guard<std::mutex> lock(mu_);
    if (broken || c->lost()) {
      --open_;
      c.reset();
      open_ -= idle_.size();
      idle_.clear();
      cv_.notify_all();
      return;
    }
    idle_.push_back(std::move(c));
    cv_.notify_one();
  }

 private:
  Result<std::unique_ptr<Connection>> Connect() {
    std::vector<const char*> keys;
    std::vector<const char*> values;
    for (std::size_t i = 0; i < spec_.keys.size(); ++i) {
      keys.push_back(spec_.keys[i].c_str());
      values.push_back(spec_.values[i].c_str());
    }
    keys.push_back(nullptr);
    values.push_back(nullptr);
    PGconn* raw = PQconnectdbParams(keys.data(), values.data(), /*expand_dbname=*/0);
    if (!raw) {
      return Status::ResourceExhausted("recap postgres store (" + spec_.display +
                                       "): libpq could not allocate a connection");
    }
    auto c = std::make_unique<Connection>(raw);
    if (PQstatus(raw) != CONNECTION_OK) return ConnectFailure(spec_.display, PQerrorMessage(raw));
    PQsetNoticeProcessor(
        raw, [](void*, const char*) {}, nullptr);
    try {
      c->Simple("SET statement_timeout = " + std::to_string(spec_.statement_timeout_ms));
      c->Simple("SET client_min_messages = warning");
      if (spec_.read_only) c->Simple("SET default_transaction_read_only = on");
    } catch (const PgFailure& f) {
      return FromFailure(describer(), "setting up a new connection", f);
    }
    return c;
  }

  ConnectSpec spec_;
  std::vector<std::string> texts_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<std::unique_ptr<Connection>> idle_;
  std::size_t open_ = 0;
};

// Runs one call on a pooled connection: `fn(Connection&)` inside a transaction when `write`
// (BEGIN … COMMIT, rolled back on any failure), as it is otherwise. Maps what it throws.
template <typename Fn>
Status Call(Pool& pool, const std::string& doing, bool write, Fn&& fn) {
  const Describer d = pool.describer();
  Result<std::unique_ptr<Connection>> got = pool.Acquire();
  RECAP_RETURN_IF_ERROR(got);
  std::unique_ptr<Connection> c = std::move(got).value();
  bool in_transaction = false;
  bool committing = false;
  bool broken = false;
  Status status;
  try {
    if (write) {
      c->Simple("BEGIN");
      in_transaction = true;
    }
    fn(*c);
    if (write) {
      committing = true;
      c->Simple("COMMIT");
      in_transaction = false;
    }
  } catch (const Abort& a) {
    status = a.status;
  } catch (const PgFailure& f) {
    broken = f.connection_lost || c->lost();
    if (committing && broken) {
      // The COMMIT may have reached the server before the connection broke: nobody knows.
      status =
          Status::Unavailable(d.Where(doing) +
                              "the connection was lost while the commit was under way, so it is "
                              "not known whether the commit happened" +
                              (f.message.empty() ? std::string() : " (" + f.message + ")") +
                              ". Load the session again before deciding what to write again");
      in_transaction = false;
    } else {
      status = FromFailure(d, doing, f);
    }
  } catch (const std::bad_alloc&) {
    status = Status::ResourceExhausted(d.Where(doing) + "out of memory");
  } catch (const std::exception& e) {
    status = Status::Internal(d.Where(doing) + e.what());
  }
  // A pipeline left open by a call that failed half-way cannot be trusted: drop the connection.
  if (PQpipelineStatus(c->raw()) != PQ_PIPELINE_OFF) broken = true;
  if (in_transaction && !broken && !c->lost()) {
    ResultPtr r(PQexec(c->raw(), "ROLLBACK"), &PQclear);
  }
  pool.Release(std::move(c), broken);
  return status;
}

}  // namespace postgres_internal
}  // namespace v0
}  // namespace recap

#endif  // RECAP_SRC_POSTGRES_PG_POOL_H_
