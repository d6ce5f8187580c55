#include "connection.h"

#include "recap_internal/remedy_text.h"

namespace recap {
namespace sqlite_internal {

// Turns a SQLite failure into a Status that names the file, the problem and what to do.
Status FromSqlite(const std::string& path, const std::string& doing, int code,
                  const std::string& detail, const SqliteStoreOptions& options) {
  const std::string where = "recap sqlite store " + Quoted(path) + ": " + doing + " failed: ";
  switch (code & 0xFF) {
    case SQLITE_BUSY:
    case SQLITE_LOCKED: {
      // The remedy as data (docs/errors.md): the command says it in its own words.
      const std::string ms = std::to_string(options.busy_timeout_ms);
      internal::RemedyText m(where);
      m << "the database stayed locked by another connection for longer than ";
      m.Remedy("sqlite.busy_timeout_ms",
               "busy_timeout_ms (" + ms + " ms); retry, or raise busy_timeout_ms", ms);
      return m.ToStatus(StatusCode::kUnavailable);
    }
    case SQLITE_READONLY:
      return Status::IOError(where + "the file or its folder is not writable by this process (" +
                             detail + "); SQLite in WAL mode also creates " +
                             Quoted(path + "-wal") + " and " + Quoted(path + "-shm") +
                             " beside it. Fix the permissions, or open another file");
    case SQLITE_CORRUPT:
      return Status::Corruption(where + "the database is damaged (" + detail +
                                "). recap has not changed it; restore it from a backup, or "
                                "salvage what is readable with `sqlite3 " +
                                path + " .recover`, and open a new file");
    case SQLITE_NOTADB:
      return Status::InvalidArgument(where + "the file is not a SQLite database (" + detail +
                                     "). recap leaves it as it is; pass the path of a recap "
                                     "database, or of a file that does not exist yet");
    case SQLITE_FULL:
      // With a size cap configured the cap is the likely limit (kResourceExhausted, a
      // configured limit); without one it is the disk (kIOError, see status.h).
      if (options.max_page_count != 0) {
        return Status::ResourceExhausted(
            where + "the database is full (" + detail + "): it reached max_page_count (" +
            std::to_string(options.max_page_count) +
            " pages) or the disk is out of space. Nothing was written; raise max_page_count or "
            "free space, then retry");
      }
      return Status::IOError(where + "the disk is full (" + detail +
                             "). Nothing was written; free space, then retry");
    case SQLITE_CANTOPEN:
      return Status::IOError(where + "the file cannot be opened (" + detail +
                             "); check that its folder exists and is readable and writable");
    case SQLITE_IOERR:
      return Status::IOError(where + "the operating system reported an I/O error (" + detail +
                             "); check the disk, then retry");
    default: return Status::Internal(where + detail);
  }
}

Result<std::unique_ptr<Connection>> OpenConnection(const std::string& path,
                                                   const SqliteStoreOptions& options) {
  if (path.empty()) {
    return Status::InvalidArgument("the SQLite store's path is empty; pass a file path");
  }
  auto c = std::make_unique<Connection>(path, options);
  RECAP_RETURN_IF_ERROR(c->Open());
  return c;
}

}  // namespace sqlite_internal
}  // namespace recap
