/// @file
/// recap — the SQLite session store (component `recap::sqlite`; SPEC R6.5, R8).
///
/// ```text
///   find_package(recap CONFIG REQUIRED COMPONENTS sqlite)
///   target_link_libraries(my_agent PRIVATE recap::sqlite)
/// ```
///
/// ```cpp
///   recap::Result<std::shared_ptr<recap::SessionStore>> store =
///       recap::OpenSqliteSessionStore("/var/lib/my-agent/sessions.db");
/// ```
///
/// One database file holds every session, the full history of each (compacted and replaced
/// messages included, marked with what retired them), a log of every commit, and the memory
/// plugin's memories. docs/sqlite-store.md describes the schema, its versioning and what each
/// durability setting trades.
///
/// Guarantees (beyond session_store.h):
///
///   * Every write is one SQLite transaction in WAL mode. With the default
///     SqliteSynchronous::kFull a write that returned is on disk and survives a power loss; a crash
///     (of the process or the machine) at any instant leaves the state before or after the
///     write that was under way, never a mix (R8.1).
///   * Several processes may open the same file. Commits check the session version inside the
///     write transaction, so of two writers compacting one session at once exactly one wins and
///     the other gets StatusCode::kConflict (R8.2). A writer that finds the database locked
///     waits up to `busy_timeout_ms` before failing with StatusCode::kUnavailable.
///   * A file recap cannot use — not a database, damaged, written by a newer recap, not
///     writable, full — gives an error that names the file, says what is wrong and what to do.
///     recap never overwrites, truncates or "repairs" such a file.
///
/// Thread safety: a store may be used from any number of threads; calls are serialized on its
/// connection. Open one store per process and share it.
#ifndef RECAP_SQLITE_SQLITE_STORE_H_
#define RECAP_SQLITE_SQLITE_STORE_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "recap/export.h"
#include "recap/memory_plugin.h"
#include "recap/session_store.h"
#include "recap/status.h"

namespace recap {
inline namespace v0 {

/// SQLite's `PRAGMA synchronous` in WAL mode (docs/sqlite-store.md):
/// ```text
///   kFull    (default) every commit is fsynced: a returned write survives power loss.
///   kNormal  the WAL is fsynced at checkpoints only: much faster appends; after a power loss
///            the last commits may be missing, but the database is never damaged.
///   kOff     no fsync at all: an operating-system crash or power loss may damage the file.
///            Only for throwaway data.
/// ```
enum class SqliteSynchronous : std::uint8_t { kOff, kNormal, kFull };

/// How the SQLite store opens its file (OpenSqliteSessionStore, OpenSqliteMemoryStore,
/// CreateSqliteSessions).
struct SqliteStoreOptions {
  SqliteSynchronous synchronous = SqliteSynchronous::kFull;  ///< the durability of commits
  /// How long a write waits for another connection's transaction before giving up.
  std::uint32_t busy_timeout_ms = 5000;
  /// Create the file (and the schema) when it does not exist. When false, a missing file is
  /// StatusCode::kNotFound.
  bool create_if_missing = true;
  /// Cap on the database size, in pages (SQLite's `PRAGMA max_page_count`); 0 keeps SQLite's
  /// default. A write that would grow past it fails with StatusCode::kResourceExhausted and
  /// changes nothing.
  std::uint64_t max_page_count = 0;
  /// Open for reading only (the `recap` command's stats, plan, export and sessions): no byte of
  /// the file changes and no file is created beside it — not even SQLite's -wal and -shm files
  /// when no other connection has them open — so a database on a read-only disk, or one this
  /// process may not write, can be read. The file must exist and hold recap's current schema
  /// (kNotFound for a missing or empty file, kFailedPrecondition for an older schema, which a
  /// writing open migrates). Writes fail with kFailedPrecondition. create_if_missing is ignored.
  bool read_only = false;
  /// Sessions whose id starts with "recap-cli." are recap's command-line tool's (it keeps a
  /// session's instructions beside it there): writes to them are refused (kInvalidArgument)
  /// unless this is set, which only that tool does. Reading them is always allowed.
  bool allow_reserved_sessions = false;
  /// Run SQLite's `PRAGMA quick_check` when opening, and refuse a damaged file with kCorruption
  /// before anything is written to it (the `recap import` command sets it). Costs a read of the
  /// whole file.
  bool check_integrity = false;
};

/// The newest schema this library reads and writes (`PRAGMA user_version`). Opening an older
/// file migrates it forward in one transaction; a newer one is refused.
RECAP_EXPORT int SqliteSchemaVersion() noexcept;

/// Opens (or creates) the database at `path` and returns it as a SessionStore.
RECAP_EXPORT Result<std::shared_ptr<SessionStore>> OpenSqliteSessionStore(
    const std::string& path, const SqliteStoreOptions& options = {});

/// SessionStore::CreateSessions on the database at `path`, for a bulk load (the `recap import`
/// command uses it). When no file is at `path` yet, the new database is built aside — in an
/// unnamed file in the same folder, each page written once, without SQLite's journal on disk
/// — and takes the name `path` only when it is complete and (unless options.synchronous is
/// kOff) on disk: a new database of a million messages is written in about three quarters of
/// the time, and a call that fails or a process that is killed leaves no file at all. When a
/// file is at `path`, or another process creates one before the build is done, the sessions
/// are created in that file as CreateSessions does (kConflict for a session that exists). The
/// file is in WAL mode from its first opening by OpenSqliteSessionStore. Returns what
/// CreateSessions returns. `options` as for OpenSqliteSessionStore (read_only must be false;
/// create_if_missing false makes it CreateSessions on an existing file only). The unnamed file
/// needs Linux (O_TMPFILE, /proc); elsewhere the database is written at `path` directly.
RECAP_EXPORT Result<std::vector<std::uint64_t>> CreateSqliteSessions(
    const std::string& path, std::vector<NewSession> sessions,
    const SqliteStoreOptions& options = {});

/// The memory plugin's storage (memory_plugin.h) in the same kind of file — normally the same
/// file as the sessions, through its own connection.
RECAP_EXPORT Result<std::shared_ptr<MemoryStore>> OpenSqliteMemoryStore(
    const std::string& path, const SqliteStoreOptions& options = {});

}  // namespace v0
}  // namespace recap

#endif  // RECAP_SQLITE_SQLITE_STORE_H_
