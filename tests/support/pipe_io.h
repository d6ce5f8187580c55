// Whole writes and reads on pipes, for the tests that talk to processes they fork (the crash
// and race tests of the SQLite and PostgreSQL stores).
#ifndef RECAP_TESTS_SUPPORT_PIPE_IO_H_
#define RECAP_TESTS_SUPPORT_PIPE_IO_H_

#include <unistd.h>

#include <cerrno>
#include <cstddef>
#include <string>

namespace recap::testing {

// Writes all of `s` (retrying interrupted and partial writes); stops when the reader is gone.
inline void WriteAll(int fd, const std::string& s) {
  std::size_t done = 0;
  while (done < s.size()) {
    const ssize_t n = ::write(fd, s.data() + done, s.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return;
    done += static_cast<std::size_t>(n);
  }
}

// Reads until end of file (every writer closed its end) or an error.
inline std::string ReadAllFd(int fd) {
  std::string text;
  char buf[4096];
  for (;;) {
    const ssize_t n = ::read(fd, buf, sizeof buf);
    if (n > 0) {
      text.append(buf, static_cast<std::size_t>(n));
    } else if (n == 0 || errno != EINTR) {
      return text;
    }
  }
}

}  // namespace recap::testing

#endif  // RECAP_TESTS_SUPPORT_PIPE_IO_H_
