/// @file
/// recap — the PostgreSQL session store (component `recap::postgres`; SPEC R6.5, R8).
///
/// ```text
///   find_package(recap CONFIG REQUIRED COMPONENTS postgres)
///   target_link_libraries(my_agent PRIVATE recap::postgres)
/// ```
///
/// ```cpp
///   recap::PostgresStoreOptions options;
///   options.connection = "postgresql://agent@db.internal/agents?sslmode=require";
///   options.password_env = "RECAP_PG_PASSWORD";
///   recap::Result<std::shared_ptr<recap::SessionStore>> store =
///       recap::OpenPostgresSessionStore(options);
/// ```
///
/// For a fleet of agent hosts that share sessions: a session may move from one machine to the
/// next between turns, and several workers may touch it at once. One PostgreSQL schema (by
/// default `recap`) holds every session, the full history of each, a log of every commit and
/// the memory plugin's memories. docs/postgres.md describes the tables, the connection options
/// and what happens when the connection is lost.
///
/// Guarantees (beyond session_store.h, and the same as the SQLite store's):
///
///   * Every write is one transaction. A write that returned OK is committed; a write that
///     failed changed nothing — except when the connection broke while COMMIT was under way,
///     where nobody can know: that call fails with kUnavailable saying the outcome is unknown
///     and to reload the session before deciding what to write again. It is never reported
///     as done (R8.1).
///   * Commits lock the session's row and check its version inside the transaction, so of
///     several processes committing against one version exactly one wins and the others get
///     StatusCode::kConflict (R8.2). Reads see one consistent snapshot.
///   * A lost connection (the server restarted, the network cut, the statement took longer
///     than statement_timeout_ms) fails the call with a retryable status — kUnavailable, or
///     kDeadlineExceeded for the time-out — and the next call connects again by itself.
///   * The tables are created, and migrated to a newer layout, by the store itself when it
///     opens, under an advisory lock so that hosts starting together do it once. A schema
///     written by a newer recap is refused (kCorruption, as status.h documents), and so is a
///     schema that holds tables of the same names that are not recap's (kInvalidArgument);
///     neither is changed.
///
/// Thread safety: a store may be used from any number of threads; each call takes a connection
/// from the store's pool for its duration. Open one store per process and share it. libpq
/// appears only in the component's sources: no public header includes it.
#ifndef RECAP_POSTGRES_POSTGRES_STORE_H_
#define RECAP_POSTGRES_POSTGRES_STORE_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "recap/export.h"
#include "recap/memory_plugin.h"
#include "recap/session_store.h"
#include "recap/status.h"

namespace recap {
inline namespace v0 {

/// Where the PostgreSQL store connects and how (OpenPostgresSessionStore,
/// OpenPostgresMemoryStore).
struct PostgresStoreOptions {
  /// A libpq connection string: a URL ("postgresql://user@host:5432/dbname?sslmode=require")
  /// or key=value pairs ("host=/run/postgresql dbname=agents user=recap"). Empty: libpq's
  /// defaults and its PG* environment variables (PGHOST, PGDATABASE, …).
  std::string connection;

  /// @name Parts of the connection
  /// Parts, each replacing the same setting of `connection` when set.
  /// @{

  std::string host;        ///< a host name, an address, or the directory of a Unix socket
  std::uint16_t port = 0;  ///< the server's port; 0: not set
  std::string dbname;      ///< the database's name
  std::string user;        ///< the user to connect as
  /// @}

  /// The password, or the name of an environment variable holding it (read when the store is
  /// opened). Set at most one; neither when the server needs none or libpq finds it in
  /// ~/.pgpass. The password is never written to a Status or a log record.
  std::string password;
  std::string password_env;  ///< the name of an environment variable holding the password

  /// The PostgreSQL schema that holds recap's tables; created when missing. Several
  /// independent recap stores may share one database in different schemas. A plain
  /// identifier: lower-case letters, digits and '_', starting with a letter or '_'.
  std::string schema = "recap";

  /// Time allowed to connect, in seconds (libpq's connect_timeout; at least 2).
  std::uint32_t connect_timeout_s = 10;
  /// The server cancels a statement that runs longer (PostgreSQL's statement_timeout); the
  /// call fails with kDeadlineExceeded and changes nothing. 0: no limit.
  std::uint32_t statement_timeout_ms = 30000;
  /// Connections kept open at most. A call waits for a free one when all are busy.
  std::size_t pool_size = 4;
  /// Shown in pg_stat_activity.
  std::string application_name = "recap";
  /// For readers (the `recap` command's stats, plan, export, sessions): the schema is neither
  /// created nor migrated — a database without recap's tables is kNotFound, an older schema
  /// kFailedPrecondition — and every transaction is read-only, so the store changes nothing.
  bool read_only = false;
  /// Sessions whose id starts with "recap-cli." are recap's command-line tool's (it keeps a
  /// session's instructions beside it there): writes to them are refused (kInvalidArgument)
  /// unless this is set, which only that tool does. Reading them is always allowed.
  bool allow_reserved_sessions = false;
};

/// The newest schema this library reads and writes. Opening an older one migrates it forward
/// in one transaction; a newer one is refused.
RECAP_EXPORT int PostgresSchemaVersion() noexcept;

/// Connects, creates or checks the schema, and returns the store. Fails with
/// kInvalidArgument for a malformed option or connection string, kFailedPrecondition when the
/// server refuses the credentials or the user lacks a privilege, kNotFound when the database
/// does not exist, kUnavailable when the server cannot be reached — each message naming the
/// server (never the password), the problem and what to do.
RECAP_EXPORT Result<std::shared_ptr<SessionStore>> OpenPostgresSessionStore(
    const PostgresStoreOptions& options);

/// The memory plugin's storage (memory_plugin.h) in the same schema, with its own connections.
RECAP_EXPORT Result<std::shared_ptr<MemoryStore>> OpenPostgresMemoryStore(
    const PostgresStoreOptions& options);

}  // namespace v0
}  // namespace recap

#endif  // RECAP_POSTGRES_POSTGRES_STORE_H_
