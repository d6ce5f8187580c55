// recap — the command-line program over the library: dispatch, usage and exit codes.
//
//   recap <command> [options]     (recap --help lists the commands)
//
// Exit codes: 0 done, 1 the work failed (the message says why and what to do), 2 usage error.
#include <fcntl.h>
#include <sqlite3.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <exception>
#include <iostream>
#include <new>
#include <string>
#include <system_error>
#include <vector>

#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/sysmacros.h>

#include "cli.h"

namespace {

const char* const kUsage =
    "usage: recap <command> [options]\n"
    "\n"
    "Keeps an agent's conversation inside its model's context window: imports transcripts into\n"
    "a session database, shows where a compaction would cut, compacts, and exports what a\n"
    "model would now receive.\n"
    "\n"
    "commands:\n"
    "  import     import a transcript file into a new session\n"
    "  append     add a turn's messages to a session (creating it when new)\n"
    "  prepare    run the per-turn `prepare` and print what to send to the model\n"
    "  export     write a session's active transcript (or its full history) as JSON\n"
    "  stats      sizes, turns and tool pairs of a session\n"
    "  plan       where a compaction would cut now and what it would free (changes nothing)\n"
    "  compact    compact a session now (or run the per-turn `prepare` with --auto)\n"
    "  uncompact  undo a session's newest compaction, clearing or reduction\n"
    "  recall     get back what was compacted, cleared or clipped, by words, id or turn\n"
    "  sessions   list, show, history, recover\n"
    "  report     a session's timeline as one HTML page: sizes, compactions, checkpoints\n"
    "  proxy      serve agents that cannot link recap: point their base URL here\n"
    "  version    print recap's version\n"
    "\n"
    "Every command takes --help, --json (machine-readable output on stdout) and --db DB:\n"
    "the database file (default ./recap.db) or a postgresql:// URL.\n"
    "Exit codes: 0 done, 1 the work failed (the message says why and what to do), 2 usage error.\n";

int Main(int argc, char** argv) {
  // Before SQLite's first use: no memory statistics, which take a global mutex on every
  // allocation SQLite makes (a million-message import makes tens of millions). The command
  // never reads them.
  sqlite3_config(SQLITE_CONFIG_MEMSTATUS, 0);
  std::vector<std::string> words(argv + 1, argv + argc);
  if (words.empty()) {
    std::cerr << kUsage;
    return recap_cli::kExitUsage;
  }
  const std::string command = words.front();
  words.erase(words.begin());
  if (command == "-h" || command == "--help" || command == "help") {
    std::cout << kUsage;
    return recap_cli::kExitOk;
  }
  if (command == "version" || command == "--version") {
    std::cout << "recap " << recap::Version() << "\n";
    return recap_cli::kExitOk;
  }
  if (command == "import") return recap_cli::RunImport(words);
  if (command == "append") return recap_cli::RunAppend(words);
  if (command == "prepare") return recap_cli::RunPrepare(words);
  if (command == "export") return recap_cli::RunExport(words);
  if (command == "stats") return recap_cli::RunStats(words);
  if (command == "plan") return recap_cli::RunPlan(words);
  if (command == "compact") return recap_cli::RunCompact(words);
  if (command == "uncompact") return recap_cli::RunUncompact(words);
  if (command == "recall") return recap_cli::RunRecall(words);
  if (command == "sessions") return recap_cli::RunSessions(words);
  if (command == "proxy") return recap_cli::RunProxy(words);
  if (command == "report") return recap_cli::RunReport(words);
  std::cerr << "recap: unknown command '" << command
            << "'. The commands are import, append, prepare, export, stats, plan, compact, "
               "uncompact, recall, sessions, report, proxy and version; run `recap --help`.\n";
  return recap_cli::kExitUsage;
}

bool stdout_was_closed = false;

// A closed stdout (`recap export >&-`) would let the next file the program opens take its
// descriptor and receive the output. A descriptor that reads /dev/null takes its place, so
// writes to stdout fail, as they should, and are reported.
void GuardStandardOutput() {
  if (::fcntl(STDOUT_FILENO, F_GETFD) == -1 && errno == EBADF) {
    stdout_was_closed = true;
    const int fd = ::open("/dev/null", O_RDONLY);
    if (fd >= 0 && fd != STDOUT_FILENO) {
      ::dup2(fd, STDOUT_FILENO);
      ::close(fd);
    }
  }
}

// Why writes to stdout failed, when errno no longer says: stdio reports only that they did.
std::string WhyOutputFailed(int error) {
  if (stdout_was_closed) return "standard output is closed";
  if (error == 0) {
    struct stat st {};
    struct statvfs fs {};
    if (::fstat(STDOUT_FILENO, &st) == 0) {
      const bool dev_full = S_ISCHR(st.st_mode) && major(st.st_rdev) == 1 && minor(st.st_rdev) == 7;
      const bool disk_full =
          S_ISREG(st.st_mode) && ::fstatvfs(STDOUT_FILENO, &fs) == 0 && fs.f_bavail == 0;
      if (dev_full || disk_full) error = ENOSPC;
    }
  }
  return error == 0 ? std::string() : std::generic_category().message(error);
}

// R13.5: a command whose output could not be written fails, whatever it did before.
int CheckedOutput(int rc, const char* command) {
  errno = 0;
  std::cout.flush();
  int error = errno;
  bool failed = !std::cout.good();
  if (std::fflush(stdout) != 0) {
    failed = true;
    error = errno;
  }
  failed = failed || std::ferror(stdout) != 0;
  if (!failed) return rc;
  const std::string why = WhyOutputFailed(error);
  std::cerr << "recap " << command << ": could not write its output to standard output"
            << (why.empty() ? std::string() : " (" + why + ")")
            << "; check where the output goes (a full disk, a closed pipe or file), then run the "
               "command again"
            << (rc == recap_cli::kExitOk ? "" : ". The command had failed as well, as said above")
            << ".\n";
  return recap_cli::kExitFailed;
}

}  // namespace

int main(int argc, char** argv) {
  GuardStandardOutput();
  recap_cli::GuardStandardInput();
  const char* command = argc > 1 ? argv[1] : "";
  try {
    return CheckedOutput(Main(argc, argv), command);
  } catch (const std::bad_alloc&) {
    std::cerr << "recap: out of memory\n";
    return recap_cli::kExitFailed;
  } catch (const std::exception& e) {
    std::cerr << "recap: unexpected error: " << e.what()
              << " (this is a bug in recap; please report it with the command you ran)\n";
    return recap_cli::kExitFailed;
  }
}
