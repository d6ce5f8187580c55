// The SQLite store's connection (Connection): opening a file (created, migrated, switched to
// WAL, or read-only and immutable), the transactions every call runs in, the prepared
// statements it keeps, and SQLite's failures as recap's Statuses. Private to recap::sqlite;
// the session store (sqlite_store.cc) and the memory store (sqlite_memory_store.cc) each own
// one.
#ifndef RECAP_SRC_SQLITE_CONNECTION_H_
#define RECAP_SRC_SQLITE_CONNECTION_H_

#include <sqlite3.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <unordered_map>
#include <utility>
#include <vector>

#include <SQLiteCpp/Database.h>
#include <SQLiteCpp/Exception.h>
#include <SQLiteCpp/Statement.h>
#include <sys/stat.h>

#include "recap/sqlite/sqlite_store.h"
#include "recap/status.h"

#include "recall_index.h"
#include "recap_internal/remedy_text.h"
#include "recap_internal/store_rules.h"
#include "schema.h"

namespace recap {
namespace sqlite_internal {

inline std::string Quoted(const std::string& s) { return internal::QuotedName(s); }

inline std::string NowUtc() {
  const auto now = std::chrono::system_clock::now();
  const std::time_t secs = std::chrono::system_clock::to_time_t(now);
  const auto ms =
      std::chrono::duration_cast<std::chrono::milliseconds>(now.time_since_epoch()).count() % 1000;
  std::tm tm{};
  gmtime_r(&secs, &tm);
  char buf[64];
  std::snprintf(buf, sizeof buf, "%04d-%02d-%02dT%02d:%02d:%02d.%03dZ", tm.tm_year + 1900,
                tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec, static_cast<int>(ms));
  return buf;
}

// Thrown inside a transaction to abandon it with a Status of recap's own (not SQLite's).
struct Abort {
  Status status;
};

// Turns a SQLite failure into a Status that names the file, the problem and what to do (its
// remedies as data, docs/errors.md).
Status FromSqlite(const std::string& path, const std::string& doing, int code,
                  const std::string& detail, const SqliteStoreOptions& options);

// Runs `body` in a transaction; commits when it returns, rolls back when it throws. SQLite
// and recap failures become a Status.
class Connection {
 public:
  Connection(std::string path, SqliteStoreOptions options)
      : path_(std::move(path)), options_(options) {}

  // A connection to a new database built aside (aside_file.h) for `path_`: SQLite opens
  // `file` through `vfs`, keeps its rollback journal in memory (nobody else can see the file,
  // and a failed build is thrown away whole, so the journal only has to undo a statement) and
  // never syncs; AsideFile::Publish syncs the file once, when it is complete. Its messages
  // name `path_`. Call before Open.
  void BuildAside(std::string file, const char* vfs) {
    aside_file_ = std::move(file);
    aside_vfs_ = vfs;
  }

  Status Open() {
    if (options_.read_only) return OpenReadOnly();
    if (!aside_file_.empty()) return OpenAside();
    struct stat st {};
    const bool exists = ::stat(path_.c_str(), &st) == 0;
    if (!exists && !options_.create_if_missing) {
      return Status::NotFound("recap sqlite store " + Quoted(path_) +
                              ": the file does not exist and create_if_missing is off; check "
                              "the path, or turn create_if_missing on to start a new store");
    }
    if (exists && S_ISDIR(st.st_mode)) {
      return Status::InvalidArgument("recap sqlite store " + Quoted(path_) +
                                     ": this is a folder; pass the path of a database file");
    }
    return Guard("opening the database", [&] {
      // No mutex of SQLite's own: every use of the connection holds the store's mutex.
      const int flags = SQLite::OPEN_READWRITE | SQLITE_OPEN_NOMUTEX |
                        (options_.create_if_missing ? SQLite::OPEN_CREATE : 0);
      db_ = std::make_unique<SQLite::Database>(path_, flags,
                                               static_cast<int>(options_.busy_timeout_ms));
      // Read before anything writes: a file that is not ours, or is newer, stays untouched.
      // The version and the tables are read in one read transaction: another process creating
      // the same new file commits its whole schema and its version at once (Migrate), so this
      // one sees both or neither — never its tables without its version, which would be
      // refused as a file of someone else's (two hosts whose first writes race).
      db_->exec("BEGIN");
      int version = 0;
      try {
        version = db_->execAndGet("PRAGMA user_version").getInt();
        if (version == 0) RefuseForeign();
        db_->exec("COMMIT");
      } catch (...) {
        sqlite3_exec(db_->getHandle(), "ROLLBACK", nullptr, nullptr, nullptr);
        throw;
      }
      if (version > kSchemaVersion) {
        // status.h: kCorruption covers data written by a newer recap.
        throw Abort{Status::Corruption("recap sqlite store " + Quoted(path_) +
                                       ": the database has schema version " +
                                       std::to_string(version) +
                                       ", written by a newer recap; this recap reads versions up "
                                       "to " +
                                       std::to_string(kSchemaVersion) +
                                       ". Upgrade recap to open it (the file was left as it is)")};
      }
      const std::string mode = SwitchToWal();
      if (mode != "wal") {
        throw Abort{Status::IOError("recap sqlite store " + Quoted(path_) +
                                    ": SQLite could not switch the database to WAL mode (it is "
                                    "in mode " +
                                    Quoted(mode) +
                                    "); the folder must allow creating files beside it")};
      }
      const char* sync = options_.synchronous == SqliteSynchronous::kFull     ? "FULL"
                         : options_.synchronous == SqliteSynchronous::kNormal ? "NORMAL"
                                                                              : "OFF";
      db_->exec(std::string("PRAGMA synchronous = ") + sync);
      if (options_.max_page_count != 0) {
        db_->exec("PRAGMA max_page_count = " + std::to_string(options_.max_page_count));
      }
      if (version < kSchemaVersion) Migrate();
      if (options_.check_integrity) CheckIntegrity();
    });
  }

  Status OpenAside() {
    return Guard("creating the database", [&] {
      db_ = std::make_unique<SQLite::Database>(
          aside_file_.c_str(), SQLite::OPEN_READWRITE | SQLITE_OPEN_NOMUTEX,
          static_cast<int>(options_.busy_timeout_ms), aside_vfs_);
      db_->exec("PRAGMA journal_mode = MEMORY");
      db_->exec("PRAGMA synchronous = OFF");
      if (options_.max_page_count != 0) {
        db_->exec("PRAGMA max_page_count = " + std::to_string(options_.max_page_count));
      }
      Migrate();
    });
  }

  // Read-only (SqliteStoreOptions::read_only). A WAL database normally gets -wal and -shm files
  // from every connection, readers included, and a reader cannot remove them. When no writer
  // has them (no -wal file), the database file is complete by itself and is read as immutable:
  // SQLite then creates nothing and takes no lock. Each read checks afterwards that no writer
  // came meanwhile (the file unchanged, still no -wal); if one did, the connection becomes an
  // ordinary read-only one — the writer's -wal and -shm exist by then — and the read is done
  // again.
  Status OpenReadOnly() {
    struct stat st {};
    if (::stat(path_.c_str(), &st) != 0) {
      return Status::NotFound("recap sqlite store " + Quoted(path_) +
                              ": the file does not exist (opened read-only, so it was not "
                              "created); check the path");
    }
    if (S_ISDIR(st.st_mode)) {
      return Status::InvalidArgument("recap sqlite store " + Quoted(path_) +
                                     ": this is a folder; pass the path of a database file");
    }
    if (!S_ISREG(st.st_mode)) {
      return Status::InvalidArgument("recap sqlite store " + Quoted(path_) +
                                     ": this is not a regular file (a device, a pipe or a "
                                     "socket); pass the path of a database file");
    }
    if (st.st_size == 0) {
      return Status::NotFound("recap sqlite store " + Quoted(path_) +
                              ": the file is empty, so it holds no sessions yet (opened "
                              "read-only, so it was left as it is); store a session first, or "
                              "check the path");
    }
    immutable_ = !Exists(path_ + "-wal");
    Status s = OpenReader();
    RECAP_RETURN_IF_ERROR(s);
    return Guard("opening the database", [&] {
      const int version = db_->execAndGet("PRAGMA user_version").getInt();
      if (version > kSchemaVersion) {
        throw Abort{Status::Corruption("recap sqlite store " + Quoted(path_) +
                                       ": the database has schema version " +
                                       std::to_string(version) +
                                       ", written by a newer recap; this recap reads versions up "
                                       "to " +
                                       std::to_string(kSchemaVersion) +
                                       ". Upgrade recap to open it (the file was left as it is)")};
      }
      if (version == 0) {
        RefuseForeign();
        throw Abort{Status::NotFound(
            "recap sqlite store " + Quoted(path_) +
            ": the file is a SQLite database that holds no recap sessions yet (it has no "
            "recap schema; opened read-only, so it was left as it is); store a session first, "
            "or check the path")};
      }
      // An older version is read as it is: version 2 only added the `learned` table, which
      // such a file simply lacks (ReadLearned); version 3 the turns and the recall index, which
      // are then counted and scanned instead. Opened read-only, it is not migrated.
      schema_ = version;
    });
  }

  Status OpenReader() {
    return Guard("opening the database", [&] {
      statements_.clear();
      raw_statements_.clear();
      db_.reset();
      if (immutable_) {
        db_ = std::make_unique<SQLite::Database>(
            "file:" + UriPath(path_) + "?mode=ro&immutable=1",
            SQLite::OPEN_READONLY | SQLite::OPEN_URI | SQLITE_OPEN_NOMUTEX,
            static_cast<int>(options_.busy_timeout_ms));
        before_ = Stat(path_);
      } else {
        db_ = std::make_unique<SQLite::Database>(path_, SQLite::OPEN_READONLY | SQLITE_OPEN_NOMUTEX,
                                                 static_cast<int>(options_.busy_timeout_ms));
      }
    });
  }

  // Puts the database in WAL mode and returns the mode it is in. On a new file the switch writes
  // the file's header with an exclusive lock, taken while this connection already reads it; when
  // another connection holds a read lock then (another host opening the same new file), SQLite
  // reports "database is locked" at once instead of waiting, since waiting while holding a lock
  // could deadlock. The switch is tried again, a little later each time, for as long as
  // busy_timeout_ms allows any lock to be waited for.
  std::string SwitchToWal() {
    const auto deadline =
        std::chrono::steady_clock::now() + std::chrono::milliseconds(options_.busy_timeout_ms);
    auto pause = std::chrono::microseconds(500);
    for (;;) {
      try {
        return db_->execAndGet("PRAGMA journal_mode = WAL").getString();
      } catch (const SQLite::Exception& e) {
        if ((e.getErrorCode() & 0xFF) != SQLITE_BUSY ||
            std::chrono::steady_clock::now() + pause > deadline) {
          throw;
        }
      }
      std::this_thread::sleep_for(pause);
      pause = std::min<std::chrono::microseconds>(pause * 2, std::chrono::milliseconds(50));
    }
  }

  // A database of someone else's (tables, no recap schema) is refused and left as it is.
  void RefuseForeign() {
    SQLite::Statement tables(*db_,
                             "SELECT name FROM sqlite_master WHERE type = 'table' AND name "
                             "NOT LIKE 'sqlite_%' ORDER BY name LIMIT 5");
    std::string names;
    while (tables.executeStep()) {
      names += (names.empty() ? "" : ", ") + tables.getColumn(0).getString();
    }
    if (!names.empty()) {
      throw Abort{Status::InvalidArgument(
          "recap sqlite store " + Quoted(path_) +
          ": the file is a SQLite database but not recap's (it has tables " + names +
          " and no recap schema). recap leaves it as it is; pass the path of a recap "
          "database, or of a file that does not exist yet")};
    }
  }

  void CheckIntegrity() {
    SQLite::Statement check(*db_, "PRAGMA quick_check");
    std::string problems;
    int shown = 0;
    while (check.executeStep()) {
      const std::string line = check.getColumn(0).getString();
      if (line == "ok") continue;
      if (shown++ < 3) problems += (problems.empty() ? "" : "; ") + line;
    }
    if (!problems.empty()) {
      throw Abort{Status::Corruption(
          "recap sqlite store " + Quoted(path_) +
          ": the database is damaged (PRAGMA quick_check: " + problems + (shown > 3 ? "; …" : "") +
          "). recap has not changed it; restore it from a backup, or salvage what is readable "
          "with `sqlite3 " +
          path_ + " .recover`, and open a new file")};
    }
  }

  // Runs `fn` and maps what it throws. Does not open a transaction.
  template <typename Fn>
  Status Guard(const std::string& doing, Fn&& fn) {
    try {
      fn();
      return Status::OK();
    } catch (const Abort& a) {
      return a.status;
    } catch (const SQLite::Exception& e) {
      return FromSqlite(path_, doing, e.getExtendedErrorCode(), e.getErrorStr(), options_);
    } catch (const std::bad_alloc&) {
      return Status::ResourceExhausted("recap sqlite store " + Quoted(path_) + ": " + doing +
                                       " ran out of memory");
    } catch (const std::exception& e) {
      return Status::Internal("recap sqlite store " + Quoted(path_) + ": " + doing +
                              " failed: " + e.what());
    }
  }

  // Runs `fn` inside BEGIN IMMEDIATE (write) or BEGIN (read) ... COMMIT; rolls back on any
  // failure, so a failed call changes nothing.
  template <typename Fn>
  Status Transaction(const std::string& doing, bool write, Fn&& fn) {
    if (options_.read_only) {
      if (write) {
        return internal::RemedyText("recap sqlite store " + Quoted(path_) + ": " + doing +
                                    " refused: ")
            .Remedy("store.read_only",
                    "the store was opened read-only "
                    "(SqliteStoreOptions::read_only)")
            .ToStatus(StatusCode::kFailedPrecondition);
      }
      if (immutable_) {
        for (int attempt = 0; attempt < 3 && !Exists(path_ + "-wal"); ++attempt) {
          Status s = RawTransaction(doing, false, fn);
          if (Exists(path_ + "-wal")) break;
          if (Stat(path_) == before_) return s;
          // A writer came and went, and changed the file: read the new file afresh.
          RECAP_RETURN_IF_ERROR(OpenReader());
        }
        // A writer is there: read through its -wal, as an ordinary reader (its -wal and -shm
        // files exist already, so this reader creates none).
        immutable_ = false;
        RECAP_RETURN_IF_ERROR(OpenReader());
      }
    }
    return RawTransaction(doing, write, fn);
  }

  template <typename Fn>
  Status RawTransaction(const std::string& doing, bool write, Fn&& fn) {
    bool open = false;
    Status s = Guard(doing, [&] {
      db_->exec(write ? "BEGIN IMMEDIATE" : "BEGIN");
      open = true;
      fn();
      db_->exec("COMMIT");
      open = false;
    });
    if (open) {
      // The transaction may already be gone (SQLite rolls back on some errors by itself).
      if (!sqlite3_get_autocommit(db_->getHandle()))
        sqlite3_exec(db_->getHandle(), "ROLLBACK", nullptr, nullptr, nullptr);
    }
    return s;
  }

  // A cached prepared statement, reset and ready to bind.
  SQLite::Statement& Stmt(const char* sql) {
    auto it = statements_.find(sql);
    if (it == statements_.end()) {
      it = statements_.emplace(sql, std::make_unique<SQLite::Statement>(*db_, sql)).first;
    }
    SQLite::Statement& st = *it->second;
    st.reset();
    st.clearBindings();
    return st;
  }

  // The same as SQLite's own handle, for a loop that binds many values (BulkInsert), where
  // the checks of each SQLiteCpp call would cost more than SQLite's bind. Run it with Step.
  sqlite3_stmt* RawStmt(const char* sql) {
    auto it = raw_statements_.find(sql);
    if (it == raw_statements_.end()) {
      sqlite3_stmt* st = nullptr;
      const int rc =
          sqlite3_prepare_v3(db_->getHandle(), sql, -1, SQLITE_PREPARE_PERSISTENT, &st, nullptr);
      if (rc != SQLITE_OK) throw SQLite::Exception(db_->getHandle(), rc);
      it = raw_statements_.emplace(sql, RawStatement(st)).first;
    }
    sqlite3_reset(it->second.get());
    return it->second.get();
  }

  // Runs a RawStmt that returns no row; SQLite's failure as its exception.
  void Step(sqlite3_stmt* st) {
    const int rc = sqlite3_step(st);
    if (rc != SQLITE_DONE) {
      const int code = sqlite3_reset(st);  // the error of the step, extended
      throw SQLite::Exception(db_->getHandle(), code != SQLITE_OK ? code : rc);
    }
  }

  SQLite::Database& db() { return *db_; }
  // The schema version of the open file: kSchemaVersion, or an older one opened read-only.
  int schema() const { return schema_; }
  const std::string& path() const { return path_; }
  const SqliteStoreOptions& options() const { return options_; }

 private:
  void Migrate() {
    db_->exec("BEGIN IMMEDIATE");
    try {
      // Another process may have migrated while this one waited for the lock.
      int version = db_->execAndGet("PRAGMA user_version").getInt();
      for (; version < kSchemaVersion; ++version) {
        db_->exec(kMigrations[version]);
        // Version 3's turns and index are filled from the messages already stored.
        if (version + 1 == kRecallSchemaVersion) BackfillRecall(*db_);
      }
      db_->exec("PRAGMA user_version = " + std::to_string(kSchemaVersion));
      db_->exec("COMMIT");
    } catch (...) {
      sqlite3_exec(db_->getHandle(), "ROLLBACK", nullptr, nullptr, nullptr);
      throw;
    }
  }

  static bool Exists(const std::string& path) {
    struct stat st {};
    return ::stat(path.c_str(), &st) == 0;
  }

  // What tells a file changed: its identity, size and change times.
  struct FileStamp {
    dev_t dev = 0;
    ino_t ino = 0;
    off_t size = 0;
    timespec mtime{};
    timespec ctime{};
    bool operator==(const FileStamp& o) const {
      return dev == o.dev && ino == o.ino && size == o.size && mtime.tv_sec == o.mtime.tv_sec &&
             mtime.tv_nsec == o.mtime.tv_nsec && ctime.tv_sec == o.ctime.tv_sec &&
             ctime.tv_nsec == o.ctime.tv_nsec;
    }
  };
  static FileStamp Stat(const std::string& path) {
    struct stat st {};
    FileStamp f;
    if (::stat(path.c_str(), &st) != 0) return f;
    f.dev = st.st_dev;
    f.ino = st.st_ino;
    f.size = st.st_size;
    f.mtime = st.st_mtim;
    f.ctime = st.st_ctim;
    return f;
  }

  // A path as the path part of a file: URI (RFC 3986 percent-encoding of what would end it).
  static std::string UriPath(const std::string& path) {
    std::string out;
    for (unsigned char c : path) {
      if (c == '%' || c == '?' || c == '#' || c < 0x21 || c >= 0x7F) {
        char buf[4];
        std::snprintf(buf, sizeof buf, "%%%02X", c);
        out += buf;
      } else {
        out += static_cast<char>(c);
      }
    }
    return out;
  }

  std::string path_;
  int schema_ = kSchemaVersion;
  SqliteStoreOptions options_;
  std::string aside_file_;           // BuildAside
  const char* aside_vfs_ = nullptr;  // BuildAside
  bool immutable_ = false;           // read-only and no writer seen: the file is read as immutable
  FileStamp before_;                 // the file when it was opened immutable
  std::unique_ptr<SQLite::Database> db_;
  std::unordered_map<const char*, std::unique_ptr<SQLite::Statement>> statements_;
  struct Finalize {
    void operator()(sqlite3_stmt* st) const { sqlite3_finalize(st); }
  };
  using RawStatement = std::unique_ptr<sqlite3_stmt, Finalize>;
  std::unordered_map<const char*, RawStatement> raw_statements_;  // RawStmt
};

// A connection to `path` opened as `options` say, ready for transactions; or why not.
Result<std::unique_ptr<Connection>> OpenConnection(const std::string& path,
                                                   const SqliteStoreOptions& options);

}  // namespace sqlite_internal
}  // namespace recap

#endif  // RECAP_SRC_SQLITE_CONNECTION_H_
