// What the `recap` command's tests share: running the built program (RECAP_CLI_PATH) as a
// child process, with its output captured, on a pipe or a pseudo-terminal.
#ifndef RECAP_TESTS_CLI_CLI_RUN_H_
#define RECAP_TESTS_CLI_CLI_RUN_H_

#include <fcntl.h>
#include <poll.h>
#include <pty.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <sstream>
#include <string>
#include <vector>

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>
#include <sys/wait.h>

#include "support/shell.h"
#include "support/temp_dir.h"

namespace recap::testing::cli {

using Json = nlohmann::json;

struct Ran {
  int exit = -1;
  std::string out;
  std::string err;
};

// The program under test: RECAP_CLI_PATH, or $RECAP_TEST_CLI when set (to run these tests
// against another build, e.g. an older one to see a regression test fail).
inline std::string CliPath() {
  const char* other = std::getenv("RECAP_TEST_CLI");
  return other != nullptr && *other != '\0' ? other : RECAP_CLI_PATH;
}

inline std::string Quote(const std::string& s) {
  std::string q = "'";
  for (char c : s) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return q + "'";
}

inline std::string Slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

// Runs the shell command line `command`, whose stderr it sends to `err_path`: its stdout, its
// exit code (-1 when a signal ended it) and that file's text.
inline Ran RunShell(const std::string& command, const std::string& err_path) {
  const ShellRun run = RunShellCommand(command);
  Ran r;
  r.exit = run.exit;
  r.out = run.out;
  r.err = Slurp(err_path);
  return r;
}

// `env`: more NAME=VALUE settings for the program's environment.
// `redirect`: shell redirections for the program's stdout (e.g. "> /dev/full"); when given,
// `out` stays empty.
inline Ran Run(const TempDir& dir, const std::vector<std::string>& args,
               const std::vector<std::string>& env = {}, const std::string& redirect = {}) {
  std::string command = Quote(CliPath());
  for (const std::string& a : args) command += " " + Quote(a);
  for (const std::string& e : env) command = Quote(e) + " " + command;
  const std::string err_path = dir.File("stderr.txt");
  command = "cd " + Quote(dir.path()) + " && env RECAP_PROGRESS_DELAY_MS=0 " + command + " 2>" +
            Quote(err_path) + (redirect.empty() ? "" : " " + redirect);
  return RunShell(command, err_path);
}

// Runs the program with stderr on a pseudo-terminal (as in an interactive shell) and stdout on
// a pipe, with RECAP_PROGRESS_DELAY_MS=0 so that progress shows at once. `err` is what the
// terminal received.
inline Ran RunOnTerminal(const TempDir& dir, const std::vector<std::string>& args) {
  int master = -1;
  int slave = -1;
  REQUIRE(::openpty(&master, &slave, nullptr, nullptr, nullptr) == 0);
  int out[2];
  REQUIRE(::pipe(out) == 0);
  std::vector<std::string> words = {CliPath()};
  words.insert(words.end(), args.begin(), args.end());
  std::vector<char*> argv;
  for (std::string& w : words) argv.push_back(&w[0]);
  argv.push_back(nullptr);
  const pid_t pid = ::fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    if (::chdir(dir.path().c_str()) != 0) ::_exit(126);
    ::dup2(out[1], 1);
    ::dup2(slave, 2);
    ::close(out[0]);
    ::close(out[1]);
    ::close(master);
    ::close(slave);
    ::setenv("RECAP_PROGRESS_DELAY_MS", "0", 1);
    ::execv(argv[0], argv.data());
    ::_exit(127);
  }
  ::close(out[1]);
  ::close(slave);
  Ran r;
  pollfd fds[2] = {{out[0], POLLIN, 0}, {master, POLLIN, 0}};
  int open_fds = 2;
  char buffer[65536];
  while (open_fds > 0) {
    if (::poll(fds, 2, 30000) <= 0) break;
    for (int i = 0; i < 2; ++i) {
      if (fds[i].fd < 0 || fds[i].revents == 0) continue;
      const ssize_t n = ::read(fds[i].fd, buffer, sizeof buffer);
      if (n > 0) {
        (i == 0 ? r.out : r.err).append(buffer, static_cast<std::size_t>(n));
      } else {  // EOF, or EIO once the child closed the terminal
        ::close(fds[i].fd);
        fds[i].fd = -1;
        --open_fds;
      }
    }
  }
  for (pollfd& f : fds) {
    if (f.fd >= 0) ::close(f.fd);
  }
  int status = 0;
  ::waitpid(pid, &status, 0);
  r.exit = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return r;
}

inline std::string Data(const std::string& name) {
  return std::string(RECAP_TEST_DATA_DIR) + "/" + name;
}

inline Json LastJsonLine(const std::string& out) {
  std::istringstream in(out);
  std::string line, last;
  while (std::getline(in, line)) {
    if (!line.empty()) last = line;
  }
  return Json::parse(last);
}

}  // namespace recap::testing::cli

#endif  // RECAP_TESTS_CLI_CLI_RUN_H_
