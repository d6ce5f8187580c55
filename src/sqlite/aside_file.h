// A new database built aside (CreateSqliteSessions): an unnamed file in the folder of the path
// it is for, which SQLite writes without a journal of its own, and which gets that path only
// when it is complete and on disk. Until then no other process can find it, and when the
// process fails or is killed the kernel frees it: nothing is left behind. Private to
// recap::sqlite.
//
// Linux only (an O_TMPFILE file, named for SQLite as /proc/self/fd/N through a VFS that takes
// the name as it is); elsewhere, or on a file system without unnamed files, Create says so and
// the caller writes the database in place instead.
#ifndef RECAP_SRC_SQLITE_ASIDE_FILE_H_
#define RECAP_SRC_SQLITE_ASIDE_FILE_H_

#include <string>

namespace recap {
namespace sqlite_internal {

class AsideFile {
 public:
  // An unnamed file in the folder of `path`, or an empty AsideFile (ok() false) when this
  // system or that folder cannot have one: the caller then writes at `path` itself.
  static AsideFile Create(const std::string& path);

  AsideFile() = default;
  AsideFile(AsideFile&& other) noexcept;
  AsideFile& operator=(AsideFile&& other) noexcept;
  AsideFile(const AsideFile&) = delete;
  AsideFile& operator=(const AsideFile&) = delete;
  ~AsideFile();  // an unpublished file is freed

  bool ok() const { return fd_ >= 0; }
  // What SQLite opens, with vfs(): the file's own name while it has none.
  const std::string& sqlite_name() const { return sqlite_name_; }
  static const char* vfs();

  // Marks the file as a WAL database, writes it to disk (when `sync`), gives it `path` unless
  // something is there already, and writes the folder's entry to disk (when `sync`). 0 when
  // published; otherwise the errno of what failed (EEXIST: another process created `path`
  // meanwhile), and the file is as it was, readable by the connection that built it. Once
  // published, the file is no longer this object's. Call when SQLite has committed all it
  // writes (the builder's connection may stay open, without writing again).
  int Publish(const std::string& path, bool sync);

 private:
  int Link(const std::string& path, bool sync);

  int fd_ = -1;
  std::string sqlite_name_;
};

}  // namespace sqlite_internal
}  // namespace recap

#endif  // RECAP_SRC_SQLITE_ASIDE_FILE_H_
