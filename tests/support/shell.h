// Running a shell command line from a test, its standard output captured: the examples and the
// `recap` command run as child processes this way (tests/cli/cli_run.h builds on it).
#ifndef RECAP_TESTS_SUPPORT_SHELL_H_
#define RECAP_TESTS_SUPPORT_SHELL_H_

#include <cstdio>
#include <string>

#include <catch2/catch.hpp>
#include <sys/wait.h>

namespace recap::testing {

struct ShellRun {
  int exit = -1;    // the exit code; -1 when a signal ended it
  std::string out;  // everything it wrote on standard output
};

// Runs `command` with /bin/sh and waits for it.
inline ShellRun RunShellCommand(const std::string& command) {
  ShellRun r;
  FILE* pipe = ::popen(command.c_str(), "r");
  REQUIRE(pipe != nullptr);
  char buffer[65536];
  std::size_t n = 0;
  while ((n = std::fread(buffer, 1, sizeof buffer, pipe)) > 0) r.out.append(buffer, n);
  const int status = ::pclose(pipe);
  r.exit = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return r;
}

}  // namespace recap::testing

#endif  // RECAP_TESTS_SUPPORT_SHELL_H_
