#include "aside_file.h"

#include <fcntl.h>
#include <sqlite3.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <utility>

#include <sys/stat.h>

namespace recap {
namespace sqlite_internal {
namespace {

// The folder part of `path` ("." when it has none).
std::string FolderOf(const std::string& path) {
  const std::size_t slash = path.find_last_of('/');
  if (slash == std::string::npos) return ".";
  if (slash == 0) return "/";
  return path.substr(0, slash);
}

// SQLite reads and writes the unnamed file through this VFS, by its descriptor: SQLite's unix
// VFS opens files by name only (and refuses /proc/self/fd/N, a symbolic link). The file is
// this process's alone, so its locks are no-ops, and its syncs too (Publish syncs it once).
// Everything else — temporary files, time, randomness — is the unix VFS's.
struct AsideHandle {
  sqlite3_file base;
  int fd;
};

int Fd(sqlite3_file* f) { return reinterpret_cast<AsideHandle*>(f)->fd; }

int AsideClose(sqlite3_file*) { return SQLITE_OK; }  // the descriptor is the AsideFile's

int AsideRead(sqlite3_file* f, void* buf, int amount, sqlite3_int64 offset) {
  auto* out = static_cast<char*>(buf);
  std::size_t done = 0;
  const auto want = static_cast<std::size_t>(amount);
  while (done < want) {
    const ssize_t n = ::pread(Fd(f), out + done, want - done, offset + static_cast<off_t>(done));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return SQLITE_IOERR_READ;
    if (n == 0) break;
    done += static_cast<std::size_t>(n);
  }
  if (done == want) return SQLITE_OK;
  std::memset(out + done, 0, want - done);  // SQLite requires the rest zeroed
  return SQLITE_IOERR_SHORT_READ;
}

int AsideWrite(sqlite3_file* f, const void* buf, int amount, sqlite3_int64 offset) {
  const auto* in = static_cast<const char*>(buf);
  std::size_t done = 0;
  const auto want = static_cast<std::size_t>(amount);
  while (done < want) {
    const ssize_t n = ::pwrite(Fd(f), in + done, want - done, offset + static_cast<off_t>(done));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == ENOSPC || errno == EDQUOT)) return SQLITE_FULL;
    if (n <= 0) return SQLITE_IOERR_WRITE;
    done += static_cast<std::size_t>(n);
  }
  return SQLITE_OK;
}

int AsideTruncate(sqlite3_file* f, sqlite3_int64 size) {
  return ::ftruncate(Fd(f), static_cast<off_t>(size)) == 0 ? SQLITE_OK : SQLITE_IOERR_TRUNCATE;
}

int AsideSync(sqlite3_file*, int) { return SQLITE_OK; }

int AsideFileSize(sqlite3_file* f, sqlite3_int64* size) {
  struct stat st {};
  if (::fstat(Fd(f), &st) != 0) return SQLITE_IOERR_FSTAT;
  *size = st.st_size;
  return SQLITE_OK;
}

int AsideLock(sqlite3_file*, int) { return SQLITE_OK; }

int AsideCheckReservedLock(sqlite3_file*, int* out) {
  *out = 0;
  return SQLITE_OK;
}

int AsideFileControl(sqlite3_file*, int, void*) { return SQLITE_NOTFOUND; }

int AsideSectorSize(sqlite3_file*) { return 4096; }

int AsideDeviceCharacteristics(sqlite3_file*) { return SQLITE_IOCAP_POWERSAFE_OVERWRITE; }

sqlite3_io_methods AsideIo() {
  sqlite3_io_methods io{};
  io.iVersion = 1;  // no shared memory, so no WAL: the build keeps its journal in memory
  io.xClose = AsideClose;
  io.xRead = AsideRead;
  io.xWrite = AsideWrite;
  io.xTruncate = AsideTruncate;
  io.xSync = AsideSync;
  io.xFileSize = AsideFileSize;
  io.xLock = AsideLock;
  io.xUnlock = AsideLock;
  io.xCheckReservedLock = AsideCheckReservedLock;
  io.xFileControl = AsideFileControl;
  io.xSectorSize = AsideSectorSize;
  io.xDeviceCharacteristics = AsideDeviceCharacteristics;
  return io;
}

const sqlite3_io_methods kAsideIo = AsideIo();

constexpr char kNamePrefix[] = "/proc/self/fd/";

sqlite3_vfs* UnixVfs() { return sqlite3_vfs_find("unix"); }

// The main database named kNamePrefix + a descriptor is that descriptor's; any other file is
// the unix VFS's.
int AsideOpen(sqlite3_vfs*, const char* name, sqlite3_file* file, int flags, int* out_flags) {
  const std::size_t prefix = sizeof kNamePrefix - 1;
  if (name != nullptr && (flags & SQLITE_OPEN_MAIN_DB) != 0 &&
      std::strncmp(name, kNamePrefix, prefix) == 0) {
    char* end = nullptr;
    const long fd = std::strtol(name + prefix, &end, 10);
    if (end == name + prefix || *end != '\0' || fd < 0 || fd > INT32_MAX ||
        ::fcntl(static_cast<int>(fd), F_GETFD) < 0) {
      return SQLITE_CANTOPEN;
    }
    auto* h = reinterpret_cast<AsideHandle*>(file);
    h->fd = static_cast<int>(fd);
    h->base.pMethods = &kAsideIo;
    if (out_flags != nullptr) *out_flags = flags;
    return SQLITE_OK;
  }
  sqlite3_vfs* unix_vfs = UnixVfs();
  return unix_vfs->xOpen(unix_vfs, name, file, flags, out_flags);
}

// A name as it is: the unix VFS would resolve the symbolic link /proc/self/fd/N to the folder
// entry the unnamed file does not have.
int NameAsGiven(sqlite3_vfs*, const char* name, int size, char* out) {
  const std::size_t n = std::strlen(name);
  if (size <= 0 || n >= static_cast<std::size_t>(size)) return SQLITE_CANTOPEN;
  std::memcpy(out, name, n + 1);
  return SQLITE_OK;
}

sqlite3_vfs* RegisteredVfs() {
  static sqlite3_vfs* const registered = []() -> sqlite3_vfs* {
    sqlite3_vfs* unix_vfs = UnixVfs();
    if (unix_vfs == nullptr) return nullptr;
    static sqlite3_vfs shim;
    shim = *unix_vfs;
    shim.zName = "recap-aside";
    shim.pNext = nullptr;
    shim.szOsFile = std::max<int>(unix_vfs->szOsFile, static_cast<int>(sizeof(AsideHandle)));
    shim.xOpen = AsideOpen;
    shim.xFullPathname = NameAsGiven;
    if (sqlite3_vfs_register(&shim, 0) != SQLITE_OK) return nullptr;
    return &shim;
  }();
  return registered;
}

}  // namespace

const char* AsideFile::vfs() { return "recap-aside"; }

AsideFile AsideFile::Create(const std::string& path) {
  AsideFile f;
#if defined(__linux__) && defined(O_TMPFILE)
  if (RegisteredVfs() == nullptr) return f;
  const int fd = ::open(FolderOf(path).c_str(), O_TMPFILE | O_RDWR | O_CLOEXEC, 0644);
  if (fd < 0) return f;
  f.fd_ = fd;
  f.sqlite_name_ = kNamePrefix + std::to_string(fd);
#else
  (void)path;
#endif
  return f;
}

AsideFile::AsideFile(AsideFile&& other) noexcept
    : fd_(std::exchange(other.fd_, -1)), sqlite_name_(std::move(other.sqlite_name_)) {}

AsideFile& AsideFile::operator=(AsideFile&& other) noexcept {
  if (this != &other) {
    if (fd_ >= 0) ::close(fd_);
    fd_ = std::exchange(other.fd_, -1);
    sqlite_name_ = std::move(other.sqlite_name_);
  }
  return *this;
}

AsideFile::~AsideFile() {
  if (fd_ >= 0) ::close(fd_);
}

int AsideFile::Publish(const std::string& path, bool sync) {
  if (fd_ < 0) return EBADF;
  // In WAL mode from the start, as a file the store creates in place is: SQLite keeps the
  // journal mode in the header's bytes 18 and 19 (the file format's write and read versions,
  // 1 for a rollback journal, 2 for WAL), and a file that says 2 opens in WAL mode. Were it
  // switched at its first opening instead, that opening would change the file's bytes.
  char header[20] = {};
  if (::pread(fd_, header, sizeof header, 0) != static_cast<ssize_t>(sizeof header)) return EIO;
  if (std::memcmp(header, "SQLite format 3", 16) != 0 || header[18] != 1 || header[19] != 1) {
    return EINVAL;
  }
  const auto set_versions = [this](char v) {
    const char versions[2] = {v, v};
    return ::pwrite(fd_, versions, 2, 18) == 2;
  };
  if (!set_versions(2)) return EIO;
  const int failed = Link(path, sync);
  if (failed != 0) {
    // Back to what the builder's connection knows, so that it can still read the file.
    set_versions(1);
    return failed;
  }
  return 0;
}

int AsideFile::Link(const std::string& path, bool sync) {
  if (sync && ::fdatasync(fd_) != 0) return errno;
  // linkat never replaces: a file another process put at `path` meanwhile stays, and this one
  // stays unnamed (EEXIST). By the descriptor itself when the process may (CAP_DAC_READ_SEARCH),
  // else by its /proc name.
  if (::linkat(fd_, "", AT_FDCWD, path.c_str(), AT_EMPTY_PATH) != 0) {
    const int by_fd = errno;
    if (by_fd == EEXIST) return EEXIST;
    if (::linkat(AT_FDCWD, sqlite_name_.c_str(), AT_FDCWD, path.c_str(), AT_SYMLINK_FOLLOW) != 0) {
      return errno;
    }
  }
  ::close(std::exchange(fd_, -1));
  if (sync) {
    const int dir = ::open(FolderOf(path).c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dir >= 0) {
      ::fsync(dir);
      ::close(dir);
    }
  }
  return 0;
}

}  // namespace sqlite_internal
}  // namespace recap
