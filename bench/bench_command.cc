// Issue 39: `recap prepare` per turn, a new process each time, against the floor of any
// command that prints the same bytes: `recap --help` (starting the program) plus `cat` of the
// document into a file (writing it).
//
// Sessions of W1 (w1_workload.h): its first 2,000 messages and all 20,000, imported with
// `recap import` into a SQLite file each, limits.maxContextChars 10^9 (nothing to compact: the
// whole session is printed every turn). Before each timed prepare one user message is appended
// with `recap append` (timed as a figure of its own). Timed per turn, in an order shuffled each
// round:
//
//   help           recap --help > /dev/null
//   cat            cat of the last document printed > a file
//   prepare        recap prepare ... > a file: from what the last prepare kept
//   prepare full   the same with RECAP_PREPARE_CACHE=off: loads and encodes the whole session
//                  (what runs when the kept path cannot; the build before issue 39 also
//                  indented the document: run it with --recap_cli=<that build's recap> for the
//                  figures before)
//   append         recap append of one message
//
// Also once: the first prepare after the import (the full one, which keeps each message's
// encoding: the file grows by about the document's size). Medians; ratios within this run. No
// budget: comparisons only (the issue's goal: prepare within 2x of help + cat).
//
// Flags:
//   --recap_smoke         40 and 400 messages, few turns (the `bench.command_smoke` ctest)
//   --recap_turns=N       timed turns per figure and size (default 15)
//   --recap_cli=PATH      the `recap` program (default: the one built beside this bench)
//   --recap_dir=DIR       where the files go (default: a new folder under $TMPDIR)
//   --recap_json=FILE     also write the figures as JSON comparisons, one object a line
// Exit status: 0, or 2 when a command failed.
#include <fcntl.h>
#include <spawn.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include <sys/stat.h>
#include <sys/wait.h>

#include "recap/codec.h"
#include "recap/conversation.h"

#include "bench_support.h"
#include "w1_workload.h"

extern char** environ;

namespace {

using Clock = std::chrono::steady_clock;

double Median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

// Runs `args` with stdout to `out` (a path), stderr to `err`, `env` added; its wall time in
// seconds. Throws when it does not exit 0.
double Spawn(const std::vector<std::string>& args, const std::string& out, const std::string& err,
             const std::vector<std::string>& env = {}) {
  std::vector<char*> argv;
  for (const std::string& a : args) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  std::vector<std::string> env_text(env);
  for (char** e = environ; *e != nullptr; ++e) env_text.emplace_back(*e);
  std::vector<char*> envp;
  for (std::string& e : env_text) envp.push_back(&e[0]);
  envp.push_back(nullptr);
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 1, out.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  posix_spawn_file_actions_addopen(&actions, 2, err.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  pid_t pid = 0;
  const auto t0 = Clock::now();
  const int rc = posix_spawn(&pid, argv[0], &actions, nullptr, argv.data(), envp.data());
  posix_spawn_file_actions_destroy(&actions);
  if (rc != 0) throw std::runtime_error("could not start " + args[0]);
  int status = 0;
  waitpid(pid, &status, 0);
  const double seconds = std::chrono::duration<double>(Clock::now() - t0).count();
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    std::ifstream in(err);
    std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    std::string line;
    for (const std::string& a : args) line += a + " ";
    throw std::runtime_error(line + "failed: " + text);
  }
  return seconds;
}

long long FileSize(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0 ? static_cast<long long>(st.st_size) : -1;
}

struct Row {
  std::string session;
  std::size_t messages = 0;
  long long document_bytes = 0;
  long long file_before = 0, file_after = 0;  // the database around the first prepare
  double first = 0, help = 0, cat = 0, kept = 0, full = 0, append = 0;
};

Row Measure(const std::string& cli, const std::string& dir, const std::vector<recap::Message>& w1,
            std::size_t messages, int turns, std::mt19937_64& rng) {
  Row row;
  row.session = "W1 " + recap_bench::Grouped(static_cast<double>(messages));
  row.messages = messages;
  const std::string tag = std::to_string(messages);
  const std::string db = dir + "/w1-" + tag + ".db";
  const std::string doc = dir + "/prepared-" + tag + ".json";
  const std::string copy = dir + "/cat-" + tag + ".json";
  const std::string err = dir + "/stderr.txt";
  const std::string turn = dir + "/turn.json";
  std::remove(db.c_str());
  {
    recap::Conversation all;
    all.messages.assign(w1.begin(), w1.begin() + static_cast<std::ptrdiff_t>(messages));
    recap::Result<std::string> json = recap::native::EncodeMessages(all);
    if (!json.ok()) throw std::runtime_error(json.status().ToString());
    std::ofstream out(dir + "/w1-" + tag + ".json", std::ios::binary);
    out << *json;
  }
  Spawn({cli, "import", "--format", "recap", dir + "/w1-" + tag + ".json", "--session", "w1",
         "--db", db},
        "/dev/null", err);
  {
    std::ofstream out(turn, std::ios::binary);
    out << R"([{"role":"user","content":"one more turn: )" << std::string(400, 'x') << R"("}])";
  }
  const std::vector<std::string> prepare = {
      cli,    "prepare", "--session",           "w1",        "--format", "openai-chat",
      "--db", db,        "--max-context-chars", "1000000000"};
  row.file_before = FileSize(db);
  row.first = Spawn(prepare, doc, err);
  row.file_after = FileSize(db);
  row.document_bytes = FileSize(doc);

  std::vector<double> help, cat, kept, full, append;
  const auto append_one = [&] {
    append.push_back(
        Spawn({cli, "append", "--session", "w1", "--format", "openai-chat", turn, "--db", db},
              "/dev/null", err));
  };
  std::vector<int> order = {0, 1, 2, 3};
  for (int round = 0; round < turns; ++round) {
    std::shuffle(order.begin(), order.end(), rng);
    for (int figure : order) {
      switch (figure) {
        case 0: help.push_back(Spawn({cli, "--help"}, "/dev/null", err)); break;
        case 1: cat.push_back(Spawn({"/bin/cat", doc}, copy, err)); break;
        case 2:
          append_one();
          kept.push_back(Spawn(prepare, doc, err));
          break;
        default:
          append_one();
          full.push_back(Spawn(prepare, doc, err, {"RECAP_PREPARE_CACHE=off"}));
          break;
      }
    }
  }
  row.help = Median(help);
  row.cat = Median(cat);
  row.kept = Median(kept);
  row.full = Median(full);
  row.append = Median(append);
  row.document_bytes = FileSize(doc);
  return row;
}

std::string Ms(double s) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f ms", s * 1e3);
  return buf;
}

}  // namespace

int main(int argc, char** argv) {
  bool smoke = std::getenv("RECAP_BENCH_SMOKE") != nullptr;
  int turns = -1;
  std::string cli = RECAP_BENCH_CLI_PATH;
  std::string dir;
  std::string json_path;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    std::string value;
    if (arg == "--recap_smoke") {
      smoke = true;
    } else if (recap_bench::TakeFlag(arg, "recap_turns", &value)) {
      turns = static_cast<int>(std::strtol(value.c_str(), nullptr, 10));
    } else if (recap_bench::TakeFlag(arg, "recap_cli", &value)) {
      cli = value;
    } else if (recap_bench::TakeFlag(arg, "recap_dir", &value)) {
      dir = value;
    } else if (recap_bench::TakeFlag(arg, "recap_json", &value)) {
      json_path = value;
    } else if (recap_bench::TakeFlag(arg, "recap_repetitions", &value) ||
               arg.rfind("--benchmark_", 0) == 0) {
      // one run: the figures are compared within it
    } else {
      std::fprintf(stderr,
                   "recap_bench_command: unknown flag %s (see the top of bench_command.cc)\n",
                   arg.c_str());
      return 2;
    }
  }
  if (turns <= 0) turns = smoke ? 3 : 15;
  try {
    if (dir.empty()) {
      const char* tmp = std::getenv("TMPDIR");
      std::string pattern = std::string(tmp != nullptr && *tmp != '\0' ? tmp : "/tmp") +
                            "/recap-bench-command-XXXXXX";
      if (::mkdtemp(&pattern[0]) == nullptr) throw std::runtime_error("mkdtemp failed");
      dir = pattern;
    } else {
      dir += "/command";
      ::mkdir(dir.c_str(), 0755);
    }
    recap_bench::W1Options w1o;
    w1o.messages = smoke ? 400 : 20000;
    const std::vector<recap::Message> w1 = recap_bench::GenerateW1(w1o);
    std::mt19937_64 rng(20261207);
    std::vector<Row> rows;
    rows.push_back(Measure(cli, dir, w1, smoke ? 40 : 2000, turns, rng));
    rows.push_back(Measure(cli, dir, w1, smoke ? 400 : 20000, turns, rng));

    std::printf(
        "\nrecap_bench_command: `recap prepare` per turn (openai-chat, nothing to compact), a "
        "new process each, medians of %d turns; one message appended before each\n",
        turns);
    std::printf("  %-10s %12s %10s %10s %12s %14s %12s %10s %12s %12s\n", "session", "document",
                "help", "cat", "prepare", "prepare full", "append", "first", "prepare/", "full/");
    std::printf("  %-10s %12s %10s %10s %12s %14s %12s %10s %12s %12s\n", "", "bytes", "", "", "",
                "", "", "prepare", "(help+cat)", "(help+cat)");
    for (const Row& r : rows) {
      const double floor = r.help + r.cat;
      std::printf("  %-10s %12s %10s %10s %12s %14s %12s %10s %11.2fx %11.2fx\n", r.session.c_str(),
                  recap_bench::Grouped(static_cast<double>(r.document_bytes)).c_str(),
                  Ms(r.help).c_str(), Ms(r.cat).c_str(), Ms(r.kept).c_str(), Ms(r.full).c_str(),
                  Ms(r.append).c_str(), Ms(r.first).c_str(), r.kept / floor, r.full / floor);
    }
    for (const Row& r : rows) {
      std::printf(
          "  %s: the file was %s bytes after the import and %s after the first prepare (each "
          "message's kept encoding)\n",
          r.session.c_str(), recap_bench::Grouped(static_cast<double>(r.file_before)).c_str(),
          recap_bench::Grouped(static_cast<double>(r.file_after)).c_str());
    }
    if (!json_path.empty()) {
      std::ofstream out(json_path);
      out << "{\"comparisons\": [\n";
      for (std::size_t i = 0; i < rows.size(); ++i) {
        const Row& r = rows[i];
        out << "  {\"id\": " << recap_bench::JsonString("command/" + r.session)
            << ", \"messages\": " << r.messages << ", \"document_bytes\": " << r.document_bytes
            << ", \"help_s\": " << r.help << ", \"cat_s\": " << r.cat
            << ", \"prepare_s\": " << r.kept << ", \"prepare_full_s\": " << r.full
            << ", \"append_s\": " << r.append << ", \"first_prepare_s\": " << r.first
            << ", \"file_bytes_before\": " << r.file_before
            << ", \"file_bytes_after\": " << r.file_after << "}" << (i + 1 < rows.size() ? "," : "")
            << "\n";
      }
      out << "]}\n";
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "recap_bench_command: %s\n", e.what());
    return 2;
  }
  return 0;
}
