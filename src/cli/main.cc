// recap — the command-line program over the library: dispatch, usage and exit codes.
//
//   recap <command> [options]     (recap --help lists the commands)
//
// Exit codes: 0 done, 1 the work failed (the message says why and what to do), 2 usage error.
#include <exception>
#include <iostream>
#include <new>
#include <string>
#include <vector>

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
    "  export     write a session's active transcript (or its full history) as JSON\n"
    "  stats      sizes, turns and tool pairs of a session\n"
    "  plan       where a compaction would cut now and what it would free (changes nothing)\n"
    "  compact    compact a session now (or run the per-turn `prepare` with --auto)\n"
    "  sessions   list, show, history, recover\n"
    "  version    print recap's version\n"
    "\n"
    "Every command takes --help, --json (machine-readable output on stdout) and --db DB:\n"
    "the database file (default ./recap.db) or a postgresql:// URL.\n"
    "Exit codes: 0 done, 1 the work failed (the message says why and what to do), 2 usage error.\n";

int Main(int argc, char** argv) {
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
    std::cout << "recap " << recap::LibraryVersion() << "\n";
    return recap_cli::kExitOk;
  }
  if (command == "import") return recap_cli::RunImport(words);
  if (command == "export") return recap_cli::RunExport(words);
  if (command == "stats") return recap_cli::RunStats(words);
  if (command == "plan") return recap_cli::RunPlan(words);
  if (command == "compact") return recap_cli::RunCompact(words);
  if (command == "sessions") return recap_cli::RunSessions(words);
  std::cerr << "recap: unknown command '" << command
            << "'. The commands are import, export, stats, plan, compact, sessions and "
               "version; run `recap --help`.\n";
  return recap_cli::kExitUsage;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    return Main(argc, argv);
  } catch (const std::bad_alloc&) {
    std::cerr << "recap: out of memory\n";
    return recap_cli::kExitFailed;
  } catch (const std::exception& e) {
    std::cerr << "recap: unexpected error: " << e.what()
              << " (this is a bug in recap; please report it with the command you ran)\n";
    return recap_cli::kExitFailed;
  }
}
