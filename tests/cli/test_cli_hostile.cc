// The `recap` command against a hostile user, a full disk, a killed process and a second
// process (issue 16, SPEC R13; label `cli`):
//
//  * R13.6 an import is one transaction: two imports racing for one new session give one
//    success and one clear conflict, and an import killed at any instant leaves no session or
//    the whole one with its instructions;
//  * R13.5 a command whose output cannot be written fails; reading commands change no byte and
//    create no file, and work on a database they may not write; import refuses a damaged file;
//  * R13.1 depth bombs, endless streams and files over --max-input-bytes are refused with a
//    message, never a crash;
//  * messages say what is wrong and what to type, in the command's words.
#include <signal.h>
#include <sqlite3.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <random>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include "cli/cli_run.h"
#include "support/build_speed.h"
#include "support/temp_dir.h"

namespace {

using Json = nlohmann::json;
using recap::testing::TempDir;
using namespace recap::testing::cli;  // Run, Data, LastJsonLine, ...

void Write(const std::string& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary);
  out << text;
  REQUIRE(out.good());
}

// An OpenAI chat transcript: a system message, then `turns` turns of a user request, a tool
// call, its result and an answer. `tag` makes the texts of two files differ.
std::string ChatTranscript(int turns, const std::string& tag) {
  Json messages = Json::array();
  messages.push_back({{"role", "system"}, {"content", "Never refund. (" + tag + ")"}});
  for (int i = 0; i < turns; ++i) {
    const std::string id = "call_" + tag + "_" + std::to_string(i);
    messages.push_back({{"role", "user"}, {"content", tag + " request " + std::to_string(i)}});
    messages.push_back(
        {{"role", "assistant"},
         {"content", nullptr},
         {"tool_calls", Json::array({{{"id", id},
                                      {"type", "function"},
                                      {"function",
                                       {{"name", "read"},
                                        {"arguments", "{\"i\":" + std::to_string(i) + "}"}}}}})}});
    messages.push_back(
        {{"role", "tool"}, {"tool_call_id", id}, {"content", "result " + std::to_string(i)}});
    messages.push_back({{"role", "assistant"}, {"content", tag + " answer " + std::to_string(i)}});
  }
  return messages.dump();
}

// Every file under `dir` (recursively) with its size and a checksum of its bytes.
std::map<std::string, std::string> Listing(const std::string& dir) {
  std::map<std::string, std::string> out;
  for (const auto& e : std::filesystem::recursive_directory_iterator(dir)) {
    const std::string bytes = e.is_regular_file() ? Slurp(e.path().string()) : std::string();
    out[e.path().string()] =
        std::to_string(bytes.size()) + ":" + std::to_string(std::hash<std::string>{}(bytes));
  }
  return out;
}

// Imports `file` (openai-chat) as `session`; requires success.
void Import(const TempDir& dir, const std::string& db, const std::string& file,
            const std::string& session) {
  Ran r = Run(dir, {"import", "--format", "openai-chat", file, "--session", session, "--db", db});
  INFO(r.err);
  REQUIRE(r.exit == 0);
}

// Starts the program with `args` (stdout and stderr to files in `dir` named after `tag`),
// without waiting.
pid_t Start(const TempDir& dir, const std::vector<std::string>& args, const std::string& tag) {
  const pid_t pid = ::fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    const std::string out = dir.File(tag + ".out");
    const std::string err = dir.File(tag + ".err");
    if (!std::freopen(out.c_str(), "w", stdout) || !std::freopen(err.c_str(), "w", stderr)) {
      ::_exit(126);
    }
    std::vector<std::string> words = {CliPath()};
    words.insert(words.end(), args.begin(), args.end());
    std::vector<char*> argv;
    for (std::string& w : words) argv.push_back(&w[0]);
    argv.push_back(nullptr);
    ::execv(argv[0], argv.data());
    ::_exit(127);
  }
  return pid;
}

int Wait(pid_t pid) {
  int status = 0;
  REQUIRE(::waitpid(pid, &status, 0) == pid);
  if (WIFSIGNALED(status)) return -WTERMSIG(status);
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1000;
}

}  // namespace

TEST_CASE(
    "R13.6 two imports into one new session of an existing database: exactly one wins, 20 rounds",
    "[cli]") {
  TempDir dir("recap-cli-race");
  const std::string db = dir.File("s.db");
  const std::string a = dir.File("a.json");
  const std::string b = dir.File("b.json");
  Write(a, ChatTranscript(40, "A"));  // 1 + 160 messages
  Write(b, ChatTranscript(60, "B"));  // 1 + 240 messages
  Write(dir.File("base.json"), ChatTranscript(2, "base"));
  Import(dir, db, dir.File("base.json"), "base");

  int a_won = 0, b_won = 0;
  for (int round = 0; round < 20; ++round) {
    const std::string session = "race-" + std::to_string(round);
    INFO(session);
    const pid_t pa = Start(
        dir, {"import", "--format", "openai-chat", a, "--session", session, "--db", db, "--json"},
        "a");
    const pid_t pb = Start(
        dir, {"import", "--format", "openai-chat", b, "--session", session, "--db", db, "--json"},
        "b");
    const int ea = Wait(pa);
    const int eb = Wait(pb);
    const std::string err_a = Slurp(dir.File("a.err"));
    const std::string err_b = Slurp(dir.File("b.err"));
    INFO("A exit " << ea << ": " << err_a << "\nB exit " << eb << ": " << err_b);
    REQUIRE(((ea == 0 && eb == 1) || (ea == 1 && eb == 0)));
    const std::string& loser_err = ea == 0 ? err_b : err_a;
    CHECK_THAT(loser_err, Catch::Matchers::Contains("already has a session '" + session + "'") &&
                              Catch::Matchers::Contains("Nothing was written"));
    const bool a_wins = ea == 0;
    (a_wins ? a_won : b_won)++;

    // The session holds the winner's transcript and instructions, and nothing of the loser's.
    Ran r = Run(dir, {"export", "--session", session, "--db", db, "--format", "openai-chat",
                      "--history", "--json"});
    REQUIRE(r.exit == 0);
    const Json doc = Json::parse(r.out);
    const std::string text = r.out;
    CHECK(doc.at("history").size() == (a_wins ? 160u : 240u));
    CHECK(doc.at("instructions").at("content") ==
          (a_wins ? "Never refund. (A)" : "Never refund. (B)"));
    CHECK(text.find(a_wins ? "Never refund. (A)" : "Never refund. (B)") != std::string::npos);
    CHECK(text.find(a_wins ? "B request" : "A request") == std::string::npos);
    CHECK(text.find(a_wins ? "(B)" : "(A)") == std::string::npos);
  }
  // Which one wins is up to the race; both did at least once in most runs, but either may win
  // every round on a given machine, so this is reported, not required.
  WARN("A won " << a_won << " rounds, B " << b_won);
}

TEST_CASE(
    "R13.6 an import killed at any instant leaves no session or the whole one with its "
    "instructions",
    "[cli]") {
  TempDir dir("recap-cli-kill");
  const std::string db = dir.File("s.db");
  const std::string file = dir.File("t.json");
  Write(file, ChatTranscript(3000, "K"));  // 1 + 12,000 messages
  Write(dir.File("base.json"), ChatTranscript(2, "base"));
  Import(dir, db, dir.File("base.json"), "base");

  // How long one whole import takes here, to spread the kills over it (and a little after).
  const auto t0 = std::chrono::steady_clock::now();
  Import(dir, db, file, "timed");
  const double whole_ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();

  std::mt19937 rng(20261203);
  std::uniform_real_distribution<double> unit(0.0, 1.0);
  // The first 10 kills fall anywhere in the run (and a little after it); the other 40 close in
  // on the instant the import commits: between the latest kill that left nothing and the
  // earliest that left the session, where a write in two steps would show half its work.
  // The sanitizer builds, where each import takes several times as long, kill 5 + 20 times.
  const int kills = recap_test::kSlowBuild ? 25 : 50;
  const int spread = kills / 5;
  double lo = 0.0, hi = whole_ms * 1.2;
  int none = 0, whole = 0;
  for (int k = 0; k < kills; ++k) {
    const std::string session = "killed-" + std::to_string(k);
    INFO(session);
    const double at_ms =
        k < spread ? unit(rng) * whole_ms * 1.2 : lo + unit(rng) * std::max(hi - lo, 2.0);
    const pid_t pid = Start(
        dir, {"import", "--format", "openai-chat", file, "--session", session, "--db", db}, "k");
    std::this_thread::sleep_for(std::chrono::microseconds(static_cast<long>(at_ms * 1000)));
    ::kill(pid, SIGKILL);
    Wait(pid);

    Ran r = Run(dir, {"stats", "--session", session, "--db", db, "--json"});
    if (r.exit != 0) {
      INFO(r.err);
      REQUIRE_THAT(r.err, Catch::Matchers::Contains("has no session '" + session + "'"));
      ++none;
      lo = std::max(lo, at_ms);
      continue;
    }
    const Json stats = LastJsonLine(r.out);
    INFO(stats.dump() << " (killed after " << at_ms << " ms)");
    CHECK(stats.at("messages").get<int>() == 12000);
    CHECK(stats.at("instructions_chars").get<int>() > 0);
    ++whole;
    hi = std::min(hi, at_ms);
    if (lo > hi) lo = std::max(0.0, hi - 5.0);  // timing noise: keep a small window open
  }
  WARN(none << " kills left no session, " << whole << " the whole one (one import: " << whole_ms
            << " ms)");
  // The database is whole and still takes imports.
  Import(dir, db, dir.File("base.json"), "after-the-kills");
}

TEST_CASE("R13.5 a command whose output cannot be written fails with a message", "[cli]") {
  TempDir dir("recap-cli-full");
  const std::string db = dir.File("s.db");
  Write(dir.File("t.json"), ChatTranscript(30, "W"));
  Import(dir, db, dir.File("t.json"), "s");
  const std::vector<std::vector<std::string>> commands = {
      {"export", "--session", "s", "--db", db, "--format", "recap"},
      {"export", "--session", "s", "--db", db, "--history", "--format", "openai-chat"},
      {"sessions", "list", "--db", db, "--json"},
      {"sessions", "show", "s", "--db", db},
      {"stats", "--session", "s", "--db", db, "--json"},
      {"plan", "--session", "s", "--db", db},
      {"compact", "--session", "s", "--db", db, "--json", "--keep-turns", "1"},
  };
  for (const auto& args : commands) {
    std::string shown;
    for (const auto& a : args) shown += a + " ";
    for (const std::string& redirect : {std::string("> /dev/full"), std::string(">&-")}) {
      INFO(shown << redirect);
      Ran r = Run(dir, args, {}, redirect);
      INFO(r.err);
      CHECK(r.exit == 1);
      CHECK_THAT(r.err,
                 Catch::Matchers::Contains("could not write its output") &&
                     Catch::Matchers::Contains(redirect == ">&-" ? "standard output is closed"
                                                                 : "No space left on device"));
    }
  }
  // A full disk where the output goes: a small file system of its own.
  if (::geteuid() == 0) {
    const std::string mnt = dir.File("small");
    std::filesystem::create_directory(mnt);
    REQUIRE(::mount("tmpfs", mnt.c_str(), "tmpfs", 0, "size=64k") == 0);
    Ran r = Run(dir, {"export", "--session", "s", "--db", db, "--history", "--format", "recap"}, {},
                "> " + Quote(mnt + "/out.json"));
    ::umount(mnt.c_str());
    INFO(r.err);
    CHECK(r.exit == 1);
    CHECK_THAT(r.err, Catch::Matchers::Contains("could not write its output") &&
                          Catch::Matchers::Contains("No space left on device"));
  } else {
    WARN("not root: the full-disk case needs a small tmpfs mount and was not run");
  }
}

TEST_CASE(
    "R13.5 reading commands change no byte and create no file, and read a database they may not "
    "write",
    "[cli]") {
  TempDir dir("recap-cli-ro");
  ::chmod(dir.path().c_str(), 0755);
  const std::string data = dir.File("data");
  std::filesystem::create_directory(data);
  const std::string db = data + "/s.db";
  Write(dir.File("t.json"), ChatTranscript(30, "R"));
  Import(dir, db, dir.File("t.json"), "s");
  Ran compacted = Run(dir, {"compact", "--session", "s", "--db", db, "--keep-turns", "1"});
  REQUIRE(compacted.exit == 0);

  const std::vector<std::vector<std::string>> readers = {
      {"stats", "--session", "s", "--db", db},
      {"stats", "--session", "s", "--db", db, "--json"},
      {"plan", "--session", "s", "--db", db, "--keep-turns", "1"},
      {"export", "--session", "s", "--db", db, "--format", "recap"},
      {"export", "--session", "s", "--db", db, "--history", "--format", "openai-chat"},
      {"sessions", "list", "--db", db},
      {"sessions", "show", "s", "--db", db},
  };
  const auto before = Listing(data);
  for (const auto& args : readers) {
    Ran r = Run(dir, args);
    INFO(args[0] << ": " << r.err);
    CHECK(r.exit == 0);
    CHECK(Listing(data) == before);
  }

  // The same with the file and its folder read-only for the user running the command.
  std::filesystem::permissions(db, std::filesystem::perms::owner_read |
                                       std::filesystem::perms::group_read |
                                       std::filesystem::perms::others_read);
  ::chmod(data.c_str(), 0555);
  std::vector<std::string> as_other;
  if (::geteuid() == 0) {  // root may write anything: run the command as nobody
    as_other = {"setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", "--"};
  }
  for (const auto& args : readers) {
    std::string command;
    for (const auto& w : as_other) command += Quote(w) + " ";
    command += Quote(CliPath());
    for (const auto& a : args) command += " " + Quote(a);
    command += " > /dev/null 2> " + Quote(dir.File("ro.err"));
    const int status = std::system(command.c_str());
    INFO(args[0] << ": " << Slurp(dir.File("ro.err")));
    CHECK(WIFEXITED(status));
    CHECK(WEXITSTATUS(status) == 0);
  }
  ::chmod(data.c_str(), 0755);
  CHECK(Listing(data) == before);
  // Writing commands say why they cannot.
}

TEST_CASE("R13.5 reading commands refuse a file that is not a recap database without writing to it",
          "[cli]") {
  TempDir dir("recap-cli-empty");
  const std::string empty = dir.File("empty.db");
  Write(empty, "");
  for (const std::vector<std::string>& args :
       {std::vector<std::string>{"stats", "--session", "s", "--db", empty},
        std::vector<std::string>{"sessions", "list", "--db", empty},
        std::vector<std::string>{"export", "--session", "s", "--db", empty, "--format", "recap"}}) {
    Ran r = Run(dir, args);
    INFO(r.err);
    CHECK(r.exit == 1);
    CHECK_THAT(r.err,
               Catch::Matchers::Contains("is empty") && Catch::Matchers::Contains("recap import"));
  }
  CHECK(std::filesystem::file_size(empty) == 0);
  CHECK_FALSE(std::filesystem::exists(empty + "-wal"));
  CHECK_FALSE(std::filesystem::exists(empty + "-journal"));
  CHECK_FALSE(std::filesystem::exists(empty + "-shm"));

  // (an older recap created /dev/null-journal here; start without it)
  std::error_code ignored;
  std::filesystem::remove("/dev/null-journal", ignored);
  Ran r = Run(dir, {"stats", "--session", "s", "--db", "/dev/null"});
  INFO(r.err);
  CHECK(r.exit == 1);
  CHECK_THAT(r.err, Catch::Matchers::Contains("not a regular file"));
  CHECK_FALSE(std::filesystem::exists("/dev/null-journal"));
  CHECK_FALSE(std::filesystem::exists("/dev/null-wal"));
}

TEST_CASE("R13.5 import refuses a database whose pages are damaged, and changes nothing", "[cli]") {
  TempDir dir("recap-cli-damaged");
  const std::string db = dir.File("s.db");
  Write(dir.File("t.json"), ChatTranscript(200, "D"));
  Import(dir, db, dir.File("t.json"), "s");
  // Overwrite pages 3 to 6 of the file: the header (page 1) stays readable.
  REQUIRE(std::filesystem::file_size(db) > 4096 * 8);
  {
    std::fstream f(db, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(4096 * 2);
    const std::string junk(4096 * 4, '\x5a');
    f.write(junk.data(), static_cast<std::streamsize>(junk.size()));
  }
  const auto before = Listing(dir.path());
  Write(dir.File("small.json"), ChatTranscript(1, "new"));
  const auto with_small = Listing(dir.path());
  Ran r = Run(dir, {"import", "--format", "openai-chat", dir.File("small.json"), "--session",
                    "other", "--db", db});
  INFO(r.err);
  CHECK(r.exit == 1);
  CHECK_THAT(r.err, Catch::Matchers::Contains("damaged") && Catch::Matchers::Contains(".recover"));
  auto after = Listing(dir.path());
  CHECK(after[db] == before.at(db));
  std::set<std::string> names_before, names_after;
  for (const auto& [name, sum] : with_small) names_before.insert(name);
  for (const auto& [name, sum] : after) names_after.insert(name);
  CHECK(names_after == names_before);  // no -wal, -shm or -journal left beside it
}

TEST_CASE("R13 a message with two tool calls of one id is refused at import, naming the id",
          "[cli]") {
  TempDir dir("recap-cli-dupid");
  const std::string db = dir.File("s.db");
  const Json doc = Json::array(
      {{{"role", "user"}, {"content", "read both"}},
       {{"role", "assistant"},
        {"content",
         Json::array(
             {{{"type", "tool_use"}, {"id", "toolu_1"}, {"name", "read"}, {"input", {{"p", "a"}}}},
              {{"type", "tool_use"},
               {"id", "toolu_1"},
               {"name", "read"},
               {"input", {{"p", "b"}}}}})}},
       {{"role", "user"},
        {"content",
         Json::array({{{"type", "tool_result"}, {"tool_use_id", "toolu_1"}, {"content", "a"}}})}}});
  Write(dir.File("dup.json"), doc.dump());
  Ran r = Run(
      dir, {"import", "--format", "anthropic", dir.File("dup.json"), "--session", "s", "--db", db});
  INFO(r.err);
  CHECK(r.exit == 1);
  CHECK_THAT(r.err,
             Catch::Matchers::Contains("message 1 holds two tool calls with the id \"toolu_1\"") &&
                 Catch::Matchers::Contains("Nothing was written"));
  r = Run(dir, {"sessions", "list", "--db", db, "--json"});
  if (r.exit == 0) CHECK(LastJsonLine(r.out).at("sessions").empty());
}

// The numbers the codecs carry (in fields recap does not model) come back as they were
// written, through import, the store and export, in each of the four formats, both in the
// active transcript and in --history, indented or on one line.
TEST_CASE("R13.2 numbers come back byte for byte through import, store and export, in every format",
          "[cli]") {
  TempDir dir("recap-cli-numbers");
  const std::vector<std::string> numbers = {"123456789012345678901234567890",
                                            "3.141592653589793238462643383279",
                                            "1E5",
                                            "1e309",
                                            "-0",
                                            "1.50",
                                            "-98765432109876543210987654321"};
  std::string fields;
  for (std::size_t i = 0; i < numbers.size(); ++i) {
    fields += ", \"n" + std::to_string(i) + "\": " + numbers[i];
  }
  struct Case {
    std::string format, file;
  };
  const std::vector<Case> cases = {
      {"openai-chat", R"([{"role": "user", "content": "hi")" + fields +
                          R"(}, {"role": "assistant", "content": "ok"}])"},
      {"anthropic", R"({"system": "be brief", "messages": [{"role": "user", "content": "hi")" +
                        fields + R"(}, {"role": "assistant", "content": "ok"}]})"},
      {"openai-responses", R"([{"type": "message", "role": "user", "content": "hi")" + fields +
                               R"(}, {"type": "message", "role": "assistant", "content": "ok"}])"},
  };
  for (const Case& c : cases) {
    SECTION(c.format) {
      const std::string db = dir.File("n.db");
      Write(dir.File("in.json"), c.file);
      Ran r = Run(
          dir, {"import", "--format", c.format, dir.File("in.json"), "--session", "s", "--db", db});
      INFO(c.format << ": " << r.err);
      REQUIRE(r.exit == 0);
      // In the same format, and through recap's own (imported back and exported again).
      for (const std::vector<std::string>& extra :
           {std::vector<std::string>{}, {"--json"}, {"--history"}, {"--history", "--json"}}) {
        std::vector<std::string> args = {"export", "--session", "s",     "--db",
                                         db,       "--format",  c.format};
        args.insert(args.end(), extra.begin(), extra.end());
        r = Run(dir, args);
        REQUIRE(r.exit == 0);
        for (const std::string& n : numbers) {
          INFO("export " << (extra.empty() ? "" : extra[0]) << " lost " << n);
          CHECK_THAT(r.out, Catch::Matchers::Contains(": " + n + ",") ||
                                Catch::Matchers::Contains(":" + n + ",") ||
                                Catch::Matchers::Contains(": " + n + "\n") ||
                                Catch::Matchers::Contains(":" + n + "}"));
        }
      }
      r = Run(dir, {"export", "--session", "s", "--db", db, "--format", "recap"});
      REQUIRE(r.exit == 0);
      Write(dir.File("native.json"), r.out);
      r = Run(dir, {"import", "--format", "recap", dir.File("native.json"), "--session", "t",
                    "--db", db});
      REQUIRE(r.exit == 0);
      r = Run(dir, {"export", "--session", "t", "--db", db, "--format", c.format, "--json"});
      REQUIRE(r.exit == 0);
      for (const std::string& n : numbers) {
        INFO("through --format recap lost " << n);
        CHECK_THAT(r.out, Catch::Matchers::Contains(":" + n + ",") ||
                              Catch::Matchers::Contains(":" + n + "}"));
      }
    }
  }
}

// Big files are decoded while the store writes them (one message at a time): a message that
// does not decode after thousands were written, or a file cut off at its end, still leaves no
// session behind, and the message names the place in the file.
TEST_CASE("R13.6 a streamed import that fails late writes nothing", "[cli]") {
  TempDir dir("recap-cli-late");
  const std::string db = dir.File("s.db");
  Ran r = Run(dir, {"import", "--format", "openai-chat", Data("tau-bench_gpt-4o-airline.json"),
                    "--run", "0", "--session", "kept", "--db", db});
  REQUIRE(r.exit == 0);
  std::string good;
  for (int i = 0; i < 5000; ++i) {
    good += std::string(i == 0 ? "" : ",") + R"({"role": "user", "content": "message )" +
            std::to_string(i) + R"("})";
  }
  struct Case {
    std::string name, format, text, says;
  };
  const std::vector<Case> cases = {
      {"a bad role", "openai-chat", "[" + good + R"(, {"role": "robot", "content": "x"}])",
       "messages[5000].role"},
      {"cut off", "openai-chat", "[" + good + R"(, {"role": "user", "content": "x)", "cut off"},
      {"anthropic object", "anthropic",
       R"({"system": "s", "messages": [)" + good + R"(, {"role": "user", "content": 7}]})",
       "messages[5000].content"},
      {"responses body", "openai-responses",
       R"({"instructions": "s", "input": [)" + good + R"(, {"type": "message"}]})", "input[5000]"},
  };
  for (const Case& c : cases) {
    INFO(c.name);
    Write(dir.File("late.json"), c.text);
    r = Run(dir, {"import", "--format", c.format, dir.File("late.json"), "--session", "late",
                  "--db", db});
    INFO(r.err);
    CHECK(r.exit == 1);
    CHECK_THAT(r.err, Catch::Matchers::Contains(c.says) &&
                          Catch::Matchers::Contains("Nothing was written"));
    r = Run(dir, {"sessions", "list", "--db", db, "--json"});
    REQUIRE(r.exit == 0);
    CHECK(LastJsonLine(r.out).at("sessions").size() == 1);  // only "kept"
  }
  // And a good one of the same size goes in whole.
  Write(dir.File("good.json"), "[" + good + "]");
  r = Run(dir, {"import", "--format", "openai-chat", dir.File("good.json"), "--session", "good",
                "--db", db, "--json"});
  INFO(r.err);
  REQUIRE(r.exit == 0);
  CHECK(LastJsonLine(r.out).at("messages") == 5000);
}

// The store does not check a streamed import's UTF-8 again (its messages come prepared,
// recap_internal/prepared_source.h): the codec's reader is what refuses a bad byte, wherever it
// stands in the file and however late, and nothing is written. Valid multi-byte text goes in
// and comes back as it was.
TEST_CASE("R13 a streamed import refuses invalid UTF-8 anywhere in the file and writes nothing",
          "[cli]") {
  TempDir dir("recap-cli-utf8");
  const std::string db = dir.File("s.db");
  // 5,000 good messages first, in the chat form the three providers' formats read alike, or
  // in recap's own.
  std::string chat, native;
  for (int i = 0; i < 5000; ++i) {
    const std::string sep = i == 0 ? "" : ",";
    chat += sep + R"({"role": "user", "content": "message )" + std::to_string(i) + R"("})";
    native += sep + R"({"role": "user", "parts": [{"type": "text", "text": "message )" +
              std::to_string(i) + R"("}]})";
  }
  // BAD stands for the bytes under test: first a lone Latin-1 byte, an overlong '/', a UTF-8
  // encoded surrogate and a sequence cut short; then, as a control, valid text.
  struct Case {
    std::string name, format, last;
  };
  const std::vector<Case> cases = {
      {"a content string", "openai-chat", R"({"role": "user", "content": "caf BAD"})"},
      {"a key", "openai-chat", R"({"role": "user", "content": "x", "kBAD": 1})"},
      {"an unknown member's value", "openai-chat",
       R"({"role": "user", "content": "x", "meta": {"note": ["BAD"]}})"},
      {"a call's arguments", "openai-chat",
       R"({"role": "assistant", "content": null, "tool_calls": [{"id": "c1", "type": )"
       R"("function", "function": {"name": "read", "arguments": "{\"p\": \"BAD\"}"}}]})"},
      {"a tool_use input", "anthropic",
       R"({"role": "assistant", "content": [{"type": "tool_use", "id": "t1", "name": "read", )"
       R"("input": {"p": "BAD"}}]})"},
      {"an unknown block", "anthropic",
       R"({"role": "user", "content": [{"type": "future_block", "data": "BAD"}]})"},
      {"a reasoning item", "openai-responses",
       R"({"type": "reasoning", "id": "rs_1", "summary": [], "encrypted_content": "BAD"})"},
      {"a recap text part", "recap",
       R"({"role": "user", "parts": [{"type": "text", "text": "BAD"}]})"},
  };
  const std::vector<std::string> bad = {"\xE9", "\xC0\xAF", "\xED\xA0\x80", "\xE2\x9C"};
  const std::string valid = "caf\xC3\xA9 \xE2\x9C\x93 \xF0\x9F\x99\x82";
  int n = 0;
  std::size_t imported = 0;  // the valid files, each a session
  for (const Case& c : cases) {
    const std::string& good = c.format == "recap" ? native : chat;
    for (const std::string& bytes : bad) {
      std::string last = c.last;
      last.replace(last.find("BAD"), 3, bytes);
      INFO(c.name << ", bytes of " << bytes.size());
      Write(dir.File("bad.json"), "[" + good + ", " + last + "]");
      Ran r = Run(dir, {"import", "--format", c.format, dir.File("bad.json"), "--session",
                        "s" + std::to_string(n++), "--db", db});
      INFO(r.err);
      CHECK(r.exit == 1);
      CHECK_THAT(r.err, Catch::Matchers::Contains("must be UTF-8") &&
                            Catch::Matchers::Contains("Nothing was written"));
      r = Run(dir, {"sessions", "list", "--db", db, "--json"});
      if (r.exit == 0) CHECK(LastJsonLine(r.out).at("sessions").size() == imported);
    }
    // The same message with valid text goes in, and its bytes come back unchanged.
    std::string last = c.last;
    last.replace(last.find("BAD"), 3, valid);
    Write(dir.File("good.json"), "[" + good + ", " + last + "]");
    const std::string session = "good" + std::to_string(n++);
    Ran r = Run(dir, {"import", "--format", c.format, dir.File("good.json"), "--session", session,
                      "--db", db});
    INFO(c.name << ": " << r.err);
    REQUIRE(r.exit == 0);
    ++imported;
    r = Run(dir, {"export", "--session", session, "--db", db, "--format", c.format});
    REQUIRE(r.exit == 0);
    CHECK(r.out.find(valid) != std::string::npos);
  }
}

TEST_CASE(
    "R13.1 export --history streams: an entry it cannot write fails the command, early with "
    "nothing on stdout, late with the output called incomplete",
    "[cli]") {
  TempDir dir("recap-cli-history");
  const std::string db = dir.File("s.db");
  // Anthropic thinking has no OpenAI Responses equivalent: that entry cannot be written.
  const std::string thinking =
      R"({"role": "assistant", "content": [{"type": "thinking", "thinking": "hmm", )"
      R"("signature": "c2ln"}, {"type": "text", "text": "ok"}]})";
  Write(dir.File("early.json"), R"([{"role": "user", "content": "hi"}, )" + thinking + "]");
  // Before it, more than the 64 MiB the command holds back.
  Write(dir.File("late.json"), R"([{"role": "user", "content": ")" + std::string(70u << 20, 'x') +
                                   R"("}, )" + thinking + "]");
  for (const char* name : {"early", "late"}) {
    Ran r = Run(dir, {"import", "--format", "anthropic", dir.File(std::string(name) + ".json"),
                      "--session", name, "--db", db});
    INFO(r.err);
    REQUIRE(r.exit == 0);
  }
  Ran r = Run(dir, {"export", "--session", "early", "--db", db, "--history", "--format",
                    "openai-responses"});
  INFO(r.err);
  CHECK(r.exit == 1);
  CHECK(r.out.empty());
  CHECK_THAT(r.err, Catch::Matchers::Contains("of session 'early' cannot be written as "
                                              "openai-responses") &&
                        Catch::Matchers::Contains("Export with --format recap"));
  CHECK(r.err.find("incomplete") == std::string::npos);

  r = Run(dir, {"export", "--session", "late", "--db", db, "--history", "--format",
                "openai-responses", "--json"});
  INFO(r.err);
  CHECK(r.exit == 1);
  // The history as far as it went, then, on a line of its own, --json's error object.
  const std::size_t cut = r.out.find('\n');
  REQUIRE(cut != std::string::npos);
  CHECK(cut > (64u << 20));
  CHECK(r.out.rfind(R"({"session":"late","format":"openai-responses")", 0) == 0);
  CHECK_THAT(r.err, Catch::Matchers::Contains("cannot be written as openai-responses") &&
                        Catch::Matchers::Contains("The history on standard output is "
                                                  "incomplete: it stops after 1 entry (" +
                                                  std::to_string(cut) + " bytes"));
  CHECK_THAT(LastJsonLine(r.out).at("error").at("message").get<std::string>(),
             Catch::Matchers::Contains("incomplete"));
  // In the recap format the same history is written whole, and reads as JSON.
  r = Run(dir,
          {"export", "--session", "late", "--db", db, "--history", "--format", "recap", "--json"});
  REQUIRE(r.exit == 0);
  const Json history = Json::parse(r.out);
  REQUIRE(history.at("history").size() == 2);
  CHECK(history.at("history")[0].at("messages").dump().size() > (70u << 20));
  CHECK(history.at("history")[1].at("state") == "active");
}

TEST_CASE("R13.1 a depth bomb is refused by every import format, never a crash", "[cli]") {
  TempDir dir("recap-cli-deep");
  const std::string db = dir.File("s.db");
  for (const std::size_t levels : {std::size_t{100000}, std::size_t{1000000}}) {
    const std::string bomb = std::string(levels, '[') + std::string(levels, ']');
    const std::string object_bomb = [&] {
      std::string s;
      for (std::size_t i = 0; i < levels / 4; ++i) s += "{\"a\":";
      s += "1";
      s += std::string(levels / 4, '}');
      return s;
    }();
    const std::vector<std::pair<std::string, std::string>> cases = {
        {"openai-chat", bomb},
        {"openai-chat", "[{\"role\":\"user\",\"content\":\"x\",\"extra\":" + bomb + "}]"},
        {"anthropic", bomb},
        {"anthropic", "{\"system\":" + object_bomb + ",\"messages\":[]}"},
        {"openai-responses", bomb},
        {"openai-responses", "{\"instructions\":\"x\",\"input\":" + bomb + "}"},
        {"claude-code", "{\"message\":" + bomb + "}\n"},
        {"swe-agent", "{\"history\":" + bomb + ",\"info\":{}}"},
        {"openhands", "{\"instance_id\":\"x\",\"history\":" + bomb + "}\n"},
        {"recap", bomb},
        {"recap", "{\"instructions\":null,\"messages\":[" + object_bomb + "]}"},
    };
    for (const auto& [format, text] : cases) {
      INFO(format << " " << levels << " levels, " << text.substr(0, 24));
      Write(dir.File("deep.json"), text);
      Ran r = Run(
          dir, {"import", "--format", format, dir.File("deep.json"), "--session", "s", "--db", db});
      INFO(r.err.substr(0, 2000));
      CHECK(r.exit == 1);
      CHECK_THAT(r.err, Catch::Matchers::Contains("nested deeper than"));
    }
  }
}

TEST_CASE("R13.1 a size or count past what recap can hold is a usage error naming the maximum",
          "[cli]") {
  // issue 35: 17179869184G was 2^64 bytes, which wrapped to 0 ("larger than --max-input-bytes
  // (0 bytes)"); one more G wrapped to 1 GiB, a limit the user never gave.
  TempDir dir("recap-cli-sizes");
  const std::string db = dir.File("s.db");
  const std::string file = dir.File("t.json");
  Write(file, ChatTranscript(4, "Z"));
  int session = 0;
  for (const std::string& too_big :
       {"17179869184G", "17179869185G", "18014398509481984K", "99999999999999999999",
        "18446744073709551616", "999999999999999999999999G"}) {
    const Ran r =
        Run(dir, {"import", "--format", "openai-chat", file, "--session",
                  "s" + std::to_string(session++), "--db", db, "--max-input-bytes", too_big});
    INFO(too_big << ": " << r.err);
    CHECK(r.exit == 2);
    CHECK_THAT(r.err, Catch::Matchers::Contains("--max-input-bytes is at most") &&
                          Catch::Matchers::Contains("17179869183G"));
  }
  // The largest is taken as given.
  Ran r = Run(dir, {"import", "--format", "openai-chat", file, "--session", "big", "--db", db,
                    "--max-input-bytes", "17179869183G"});
  INFO(r.err);
  CHECK(r.exit == 0);
  // A count past its maximum names the maximum too.
  r = Run(dir, {"prepare", "--session", "big", "--db", db, "--format", "openai-chat",
                "--max-context-chars", "800000", "--instructions-chars", "18446744073709551615"});
  INFO(r.err);
  CHECK(r.exit == 2);
  CHECK_THAT(r.err, Catch::Matchers::Contains("--instructions-chars") &&
                        Catch::Matchers::Contains("at most 999999999999999999"));
}

TEST_CASE(
    "R13.1 input over --max-input-bytes, an endless stream and a folder are refused with a message",
    "[cli]") {
  TempDir dir("recap-cli-big");
  const std::string db = dir.File("s.db");
  const std::string file = dir.File("t.json");
  Write(file, ChatTranscript(40, "M"));
  const std::size_t size = std::filesystem::file_size(file);

  Ran r = Run(dir, {"import", "--format", "openai-chat", file, "--session", "s", "--db", db,
                    "--max-input-bytes", std::to_string(size - 1)});
  INFO(r.err);
  CHECK(r.exit == 1);
  CHECK_THAT(r.err, Catch::Matchers::Contains("larger than --max-input-bytes") &&
                        Catch::Matchers::Contains("Nothing was written"));
  r = Run(dir, {"import", "--format", "openai-chat", file, "--session", "s", "--db", db,
                "--max-input-bytes", std::to_string(size)});
  CHECK(r.exit == 0);

  // /dev/urandom never ends: refused once the limit is read.
  r = Run(dir, {"import", "--format", "openai-chat", "/dev/urandom", "--session", "u", "--db", db,
                "--max-input-bytes", "1048576"});
  INFO(r.err);
  CHECK(r.exit == 1);
  CHECK_THAT(r.err, Catch::Matchers::Contains("larger than --max-input-bytes (1 MiB)") &&
                        Catch::Matchers::Contains("an endless stream?"));

  r = Run(dir, {"import", "--format", "openai-chat", "--max-input-bytes", "lots", file, "--session",
                "v", "--db", db});
  CHECK(r.exit == 2);
  CHECK_THAT(r.err, Catch::Matchers::Contains("--max-input-bytes"));

  r = Run(dir, {"import", "--format", "openai-chat", dir.path(), "--session", "d", "--db", db});
  INFO(r.err);
  CHECK(r.exit == 1);
  CHECK_THAT(r.err, Catch::Matchers::Contains("is a folder") &&
                        Catch::Matchers::Contains("name the transcript file"));

  // --config: a folder, and an endless stream.
  r = Run(dir, {"plan", "--session", "s", "--db", db, "--config", dir.path()});
  INFO(r.err);
  CHECK(r.exit == 1);
  CHECK_THAT(r.err,
             Catch::Matchers::Contains("is a folder") && Catch::Matchers::Contains("--config"));
  r = Run(dir, {"plan", "--session", "s", "--db", db, "--config", "/dev/urandom"});
  INFO(r.err);
  CHECK(r.exit == 1);
  CHECK_THAT(r.err,
             Catch::Matchers::Contains("--config") && Catch::Matchers::Contains("larger than"));
}

TEST_CASE("R13 a database another process holds is waited for, then refused in the command's words",
          "[cli]") {
  TempDir dir("recap-cli-busy");
  const std::string db = dir.File("s.db");
  Write(dir.File("t.json"), ChatTranscript(3, "T"));
  Ran r = Run(
      dir, {"import", "--format", "openai-chat", dir.File("t.json"), "--session", "a", "--db", db});
  REQUIRE(r.exit == 0);
  // Another program holds the write lock (as a host's long transaction would).
  sqlite3* other = nullptr;
  REQUIRE(sqlite3_open(db.c_str(), &other) == SQLITE_OK);
  REQUIRE(sqlite3_exec(other, "BEGIN IMMEDIATE", nullptr, nullptr, nullptr) == SQLITE_OK);

  const auto started = std::chrono::steady_clock::now();
  r = Run(dir,
          {"import", "--format", "openai-chat", dir.File("t.json"), "--session", "b", "--db", db},
          {"RECAP_BUSY_TIMEOUT_MS=300"});
  const auto waited = std::chrono::steady_clock::now() - started;
  INFO(r.err);
  CHECK(r.exit == 1);
  CHECK(waited >= std::chrono::milliseconds(300));
  CHECK_THAT(r.err, Catch::Matchers::Contains("locked by another connection for longer than the "
                                              "command waits (300 ms)") &&
                        Catch::Matchers::Contains("run the command again when the other writer "
                                                  "is done, or wait longer with "
                                                  "RECAP_BUSY_TIMEOUT_MS=60000") &&
                        Catch::Matchers::Contains("Nothing was written"));
  CHECK(r.err.find("busy_timeout_ms") == std::string::npos);
  // A reading command is not held up by a writer.
  r = Run(dir, {"stats", "--session", "a", "--db", db}, {"RECAP_BUSY_TIMEOUT_MS=300"});
  CHECK(r.exit == 0);
  // A bad value is refused, saying what to set.
  for (const char* bad : {"soon", "-5", "99999999999"}) {
    r = Run(dir,
            {"import", "--format", "openai-chat", dir.File("t.json"), "--session", "c", "--db", db},
            {std::string("RECAP_BUSY_TIMEOUT_MS=") + bad});
    INFO(r.err);
    CHECK(r.exit == 1);
    CHECK_THAT(r.err, Catch::Matchers::Contains(std::string("RECAP_BUSY_TIMEOUT_MS is '") + bad +
                                                "'; set it to the milliseconds"));
  }
  REQUIRE(sqlite3_exec(other, "ROLLBACK", nullptr, nullptr, nullptr) == SQLITE_OK);
  sqlite3_close(other);
  // Once the other writer is done, the same command works.
  r = Run(dir,
          {"import", "--format", "openai-chat", dir.File("t.json"), "--session", "b", "--db", db},
          {"RECAP_BUSY_TIMEOUT_MS=300"});
  INFO(r.err);
  CHECK(r.exit == 0);
  r = Run(dir, {"sessions", "list", "--db", db, "--json"});
  CHECK(LastJsonLine(r.out).at("sessions").size() == 2);
}

TEST_CASE(
    "R13.2 an openai-chat content part type recap does not know is imported and exported back as "
    "it came",
    "[cli]") {
  TempDir dir("recap-cli-unknown");
  const std::string db = dir.File("s.db");
  const std::string part =
      R"({"type": "video_url", "video_url": {"url": "https://x/v.mp4", "fps": 2.50}})";
  Write(dir.File("u.json"), R"([{"role": "user", "content": [{"type": "text", "text": "look"}, )" +
                                part + R"(]}, {"role": "assistant", "content": "seen"}])");
  Ran r = Run(
      dir, {"import", "--format", "openai-chat", dir.File("u.json"), "--session", "u", "--db", db});
  INFO(r.err);
  REQUIRE(r.exit == 0);
  CHECK(r.err.find("DecodeOptions") == std::string::npos);
  r = Run(dir, {"export", "--session", "u", "--db", db, "--format", "openai-chat", "--json"});
  REQUIRE(r.exit == 0);
  CHECK(r.out.find(R"({"type":"video_url","video_url":{"url":"https://x/v.mp4","fps":2.50}})") !=
        std::string::npos);
}

TEST_CASE("R13 messages say what is wrong and what to type", "[cli]") {
  TempDir dir("recap-cli-words");
  const std::string db = dir.File("s.db");
  Write(dir.File("t.json"), ChatTranscript(3, "T"));

  SECTION("a Claude Code file given as --format openhands is named as claude-code") {
    Ran r = Run(dir, {"import", "--format", "openhands",
                      Data("Users-dain-workspace-claude-code-log-sample__37f83ec9-f2ea-42a9-925e-"
                           "0d5c105cb6e8.jsonl"),
                      "--session", "s", "--db", db});
    INFO(r.err);
    CHECK(r.exit == 1);
    CHECK_THAT(r.err, Catch::Matchers::Contains("--format claude-code"));
    CHECK_THAT(r.err, !Catch::Matchers::Contains("choose one with --run"));
  }
  SECTION("an option given twice is a usage error") {
    Ran r = Run(dir, {"import", "--format", "openai-chat", dir.File("t.json"), "--session", "a",
                      "--session", "b", "--db", db});
    INFO(r.err);
    CHECK(r.exit == 2);
    CHECK_THAT(r.err, Catch::Matchers::Contains("--session is given twice ('a' and 'b')"));
    r = Run(dir, {"stats", "--session", "a", "--db", db, "--db", dir.File("other.db")});
    CHECK(r.exit == 2);
    CHECK_THAT(r.err, Catch::Matchers::Contains("--db is given twice"));
  }
  SECTION("the next: hint quotes an odd session id for the shell") {
    Ran r = Run(dir, {"import", "--format", "openai-chat", dir.File("t.json"), "--session",
                      "a b;$(c)", "--db", db});
    INFO(r.err);
    REQUIRE(r.exit == 0);
    CHECK_THAT(r.out, Catch::Matchers::Contains("--session 'a b;$(c)'"));
  }
  SECTION("a full disk says the disk is full, once") {
    if (::geteuid() != 0) {
      WARN("not root: the full-disk case needs a small tmpfs mount and was not run");
      return;
    }
    const std::string mnt = dir.File("small");
    std::filesystem::create_directory(mnt);
    REQUIRE(::mount("tmpfs", mnt.c_str(), "tmpfs", 0, "size=64k") == 0);
    Write(dir.File("big.json"), ChatTranscript(2000, "F"));
    Ran r = Run(dir, {"import", "--format", "openai-chat", dir.File("big.json"), "--session", "s",
                      "--db", mnt + "/s.db"});
    ::umount(mnt.c_str());
    INFO(r.err);
    CHECK(r.exit == 1);
    CHECK_THAT(r.err, Catch::Matchers::Contains("disk is full"));
    const std::string lower = [&] {
      std::string s = r.err;
      for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
      return s;
    }();
    const std::size_t first = lower.find("nothing was written");
    CHECK(first != std::string::npos);
    CHECK(lower.find("nothing was written", first + 1) == std::string::npos);
  }
}

TEST_CASE("R13.1 a session id or stored text with terminal controls is printed escaped, never raw",
          "[cli]") {
  // Issue 35 (7): `sessions list`, `sessions show` and prepare's stderr line printed ESC, CR
  // and LF of a session id as they were: a title change, a cleared screen, a forged line.
  TempDir dir("recap-cli-controls");
  const std::string db = dir.File("s.db");
  // (and, found by the hostile round after: U+202E, which shows what follows reversed, and
  // U+2028, a line break to some terminals and log viewers)
  const std::string evil =
      "evil\x1b]0;pwned\x07\x1b[2J\rfake\nline\xc2\x9b"
      "31m\xe2\x80\xae"
      "desrever\xe2\x80\xa8"
      "next";
  Json messages = Json::parse(ChatTranscript(120, "\x1b[31mred\x1b[0m"));
  Write(dir.File("t.json"), messages.dump());
  Import(dir, db, dir.File("t.json"), evil);
  const std::vector<std::vector<std::string>> commands = {
      {"sessions", "list", "--db", db},
      {"sessions", "show", evil, "--db", db},
      {"sessions", "history", evil, "--db", db},
      {"sessions", "recover", evil, "--db", db},
      {"stats", "--session", evil, "--db", db},
      {"plan", "--session", evil, "--db", db, "--max-context-chars", "4000"},
      {"prepare", "--session", evil, "--db", db, "--max-context-chars", "4000", "--format",
       "openai-chat"},
      {"compact", "--session", evil, "--db", db},
      {"export", "--session", evil, "--db", db, "--format", "anthropic"},
      {"export", "--session", evil + "x", "--db", db},
      {"import", "--format", "openai-chat", dir.File("t.json"), "--session", evil, "--db", db},
  };
  for (const auto& args : commands) {
    Ran r = Run(dir, args);
    INFO(args[0] << " " << args[1] << " exit " << r.exit << "\nout: " << r.out.substr(0, 2000)
                 << "\nerr: " << r.err);
    // (what prepare and export print on stdout is the JSON of the request, escaped as JSON)
    const std::string shown = args[0] == "prepare" || args[0] == "export" ? r.err : r.out + r.err;
    if (args[0] == "prepare") CHECK(r.err.find("compacted") != std::string::npos);
    CHECK(shown.find('\x1b') == std::string::npos);
    CHECK(shown.find('\r') == std::string::npos);
    CHECK(shown.find('\x07') == std::string::npos);
    CHECK(shown.find("\xc2\x9b") == std::string::npos);
    CHECK(shown.find("fake\nline") == std::string::npos);
    CHECK(shown.find("\xe2\x80\xae") == std::string::npos);
    CHECK(shown.find("\xe2\x80\xa8") == std::string::npos);
  }
  // Where the id is shown, it is shown escaped.
  const Ran list = Run(dir, {"sessions", "list", "--db", db});
  CHECK(list.out.find("evil\\x1b]0;pwned\\x07\\x1b[2J\\rfake\\nline\\u009b31m\\u202edesrever"
                      "\\u2028next") != std::string::npos);
  // Every sessions subcommand that takes an id takes it as --session too (issue 35's rough
  // edge: only the positional form was accepted), with the same output.
  for (const std::string what : {"show", "history"}) {
    const Ran positional = Run(dir, {"sessions", what, evil, "--db", db, "--json"});
    const Ran option = Run(dir, {"sessions", what, "--session", evil, "--db", db, "--json"});
    INFO(what << ": " << option.err);
    CHECK(option.exit == 0);
    CHECK(option.out == positional.out);
  }
  CHECK(Run(dir, {"sessions", "show", evil, "--session", evil, "--db", db}).exit == 2);
  // JSON output carries the id exactly (JSON escapes it).
  const Ran json = Run(dir, {"sessions", "list", "--db", db, "--json"});
  REQUIRE(json.exit == 0);
  CHECK(json.out.find(Json(evil).dump()) != std::string::npos);
}

TEST_CASE("R12.4 a request over the model's known window is said on stderr, not sent silently",
          "[cli]") {
  // Issue 35 (8): contextWindow 8000 and a 40,000-character tool catalog: prepare exited 0,
  // printed nothing and the host sent ~10,000 tokens to a model that takes 8,000.
  TempDir dir("recap-cli-over-window");
  const std::string db = dir.File("s.db");
  Write(dir.File("t.json"), ChatTranscript(3, "w"));
  Write(dir.File("config.json"), R"({"provider": {"contextWindow": 8000}})");
  Import(dir, db, dir.File("t.json"), "s");
  const std::vector<std::string> base = {
      "prepare",  "--session",  "s", "--db", db, "--config", dir.File("config.json"),
      "--format", "openai-chat"};
  std::vector<std::string> over = base;
  over.insert(over.end(), {"--tool-catalog-chars", "40000"});
  Ran r = Run(dir, over);
  INFO(r.err);
  CHECK(r.exit == 0);
  CHECK(r.err.find("over the model's window of 8,000 tokens (config)") != std::string::npos);
  CHECK(r.err.find("tool catalog") != std::string::npos);
  over.push_back("--json");
  Ran json = Run(dir, over);
  REQUIRE(json.exit == 0);
  CHECK(LastJsonLine(json.out).at("over_window") == true);
  // Under the window: nothing said.
  Ran fine = Run(dir, base);
  CHECK(fine.exit == 0);
  CHECK(fine.err.find("window") == std::string::npos);
  // Over it because nothing compacted (here: compaction off): the advice is not about the
  // instructions, which are small.
  Write(dir.File("long.json"), ChatTranscript(150, "long"));
  Import(dir, db, dir.File("long.json"), "long");
  Write(dir.File("off.json"),
        R"({"provider": {"contextWindow": 1000}, "compaction": {"auto": false}})");
  Ran off = Run(dir, {"prepare", "--session", "long", "--db", db, "--config", dir.File("off.json"),
                      "--max-context-chars", "100000", "--format", "openai-chat"});
  INFO(off.err);
  CHECK(off.exit == 0);
  CHECK(off.err.find("over the model's window of 1,000 tokens (config)") != std::string::npos);
  CHECK(off.err.find("Compaction could not bring it under") != std::string::npos);
}

TEST_CASE("R13.1 counts are written for a person: one message, two messages", "[cli]") {
  // Issue 35's rough edge: "imported 1 messages", "1 messages clipped".
  TempDir dir("recap-cli-plural");
  const std::string db = dir.File("s.db");
  Write(dir.File("one.json"), R"([{"role": "user", "content": "hi"}])");
  Ran one = Run(dir, {"import", "--format", "openai-chat", dir.File("one.json"), "--session", "one",
                      "--db", db});
  INFO(one.err);
  REQUIRE(one.exit == 0);
  CHECK(one.out.find("imported 1 message (") != std::string::npos);
  Write(dir.File("two.json"),
        R"([{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"}])");
  Ran two = Run(dir, {"import", "--format", "openai-chat", dir.File("two.json"), "--session", "two",
                      "--db", db});
  REQUIRE(two.exit == 0);
  CHECK(two.out.find("imported 2 messages (") != std::string::npos);
  // One oversized tool result, clipped by prepare.
  Json t = Json::parse(ChatTranscript(1, "p"));
  t[3]["content"] = std::string(30000, 'o');
  Write(dir.File("big.json"), t.dump());
  Import(dir, db, dir.File("big.json"), "big");
  Write(dir.File("no-auto.json"), R"({"compaction": {"auto": false}})");
  Ran prepared = Run(dir, {"prepare", "--session", "big", "--db", db, "--format", "openai-chat",
                           "--max-context-chars", "8000", "--config", dir.File("no-auto.json")});
  INFO(prepared.err);
  REQUIRE(prepared.exit == 0);
  CHECK(prepared.err.find("1 message clipped") != std::string::npos);
}

TEST_CASE("R14.1 prepare never writes one format's artifacts or fields into another", "[cli]") {
  // Issue 35 (4): an OpenAI compaction item prepared as openai-chat or anthropic came out as an
  // assistant message {"type":"compaction",…}; a Responses item's `type`, `id` and `status`
  // were carried into the chat and Anthropic messages; Anthropic thinking reached OpenAI chat.
  TempDir dir("recap-cli-cross-format");
  const std::string db = dir.File("s.db");
  Write(dir.File("r.json"), R"([{"type":"message","role":"user","content":"hi there"},)"
                            R"({"type":"compaction","id":"cmp_1","encrypted_content":"abc"},)"
                            R"({"type":"message","role":"user","content":"next"}])");
  REQUIRE(Run(dir, {"append", "--db", db, "--session", "r", "--format", "openai-responses",
                    dir.File("r.json")})
              .exit == 0);
  const auto prepare = [&](const std::string& session, const std::string& format) {
    return Run(dir, {"prepare", "--db", db, "--session", session, "--format", format,
                     "--max-context-chars", "100000"});
  };
  for (const std::string format : {"openai-chat", "anthropic"}) {
    Ran r = prepare("r", format);
    INFO(format << ": " << r.out << r.err);
    CHECK(r.exit != 0);
    CHECK(r.out.find("compaction") == std::string::npos);
    CHECK(r.err.find("holds an opaque 'compaction' part decoded from openai-responses") !=
          std::string::npos);
    CHECK(r.err.find("message 1 ('m_") != std::string::npos);
    CHECK(r.err.find("Nothing was changed; prepare it with --format openai-responses") !=
          std::string::npos);
  }
  // In its own format it is what it was.
  Ran own = prepare("r", "openai-responses");
  REQUIRE(own.exit == 0);
  CHECK(own.out.find(R"("encrypted_content":"abc")") != std::string::npos);

  // A Responses message item's own members stay out of the other formats.
  Write(dir.File("r2.json"),
        R"([{"type":"message","role":"user","content":"hi"},)"
        R"({"type":"message","role":"assistant","id":"msg_1","status":"completed",)"
        R"("content":[{"type":"output_text","text":"yo","annotations":[]}]}])");
  REQUIRE(Run(dir, {"append", "--db", db, "--session", "r2", "--format", "openai-responses",
                    dir.File("r2.json")})
              .exit == 0);
  for (const std::string format : {"openai-chat", "anthropic"}) {
    Ran r = prepare("r2", format);
    INFO(format << ": " << r.out << r.err);
    REQUIRE(r.exit == 0);
    for (const char* member : {"\"message\"", "\"status\"", "msg_1", "annotations"}) {
      CHECK(r.out.find(member) == std::string::npos);
    }
    CHECK(r.out.find("\"yo\"") != std::string::npos);
  }
  Ran back = prepare("r2", "openai-responses");
  REQUIRE(back.exit == 0);
  CHECK(back.out.find("\"status\":\"completed\"") != std::string::npos);

  // Anthropic's thinking is refused in OpenAI chat, as it already was in OpenAI Responses.
  Write(dir.File("a.json"),
        R"([{"role":"user","content":"q"},{"role":"assistant","content":[)"
        R"({"type":"thinking","thinking":"hm","signature":"x"},{"type":"text","text":"a"}]},)"
        R"({"role":"user","content":"q2"}])");
  REQUIRE(Run(dir,
              {"append", "--db", db, "--session", "a", "--format", "anthropic", dir.File("a.json")})
              .exit == 0);
  Ran chat = prepare("a", "openai-chat");
  INFO(chat.out << chat.err);
  CHECK(chat.exit != 0);
  CHECK(chat.out.find("thinking") == std::string::npos);
  CHECK(chat.err.find("holds an opaque 'thinking' part decoded from anthropic") !=
        std::string::npos);
  // Nothing is committed before the refusal: on a long session, the compaction a small limit
  // asks for does not run (it did, and then the document could not be written).
  Json turns = Json::array();
  turns.push_back({{"role", "user"}, {"content", "start"}});
  turns.push_back(
      {{"role", "assistant"},
       {"content", Json::array({{{"type", "thinking"}, {"thinking", "hm"}, {"signature", "x"}},
                                {{"type", "text"}, {"text", "ok"}}})}});
  for (int i = 0; i < 60; ++i) {
    turns.push_back({{"role", "user"},
                     {"content", "question " + std::to_string(i) + " " + std::string(200, 'q')}});
    turns.push_back({{"role", "assistant"}, {"content", "answer " + std::string(200, 'a')}});
  }
  Write(dir.File("long.json"), turns.dump());
  REQUIRE(Run(dir, {"append", "--db", db, "--session", "long", "--format", "anthropic",
                    dir.File("long.json")})
              .exit == 0);
  Ran small = Run(dir, {"prepare", "--db", db, "--session", "long", "--format", "openai-chat",
                        "--max-context-chars", "4000"});
  CHECK(small.exit != 0);
  CHECK(small.err.find("Nothing was changed") != std::string::npos);
  Ran version = Run(dir, {"prepare", "--db", db, "--session", "long", "--format", "anthropic",
                          "--max-context-chars", "100000", "--json"});
  REQUIRE(version.exit == 0);
  CHECK(LastJsonLine(version.out).at("version") == 1);
}

TEST_CASE("R3 prepare says on stderr when a tool result goes out without its call", "[cli]") {
  // Issue 35's rough edge: the result was sent, exit 0, and the model API refused the request.
  TempDir dir("recap-cli-orphan");
  const std::string db = dir.File("s.db");
  Write(dir.File("t.json"), R"([{"role":"user","content":"hi"},)"
                            R"({"role":"tool","tool_call_id":"call_never","content":"out"}])");
  REQUIRE(Run(dir, {"append", "--db", db, "--session", "s", "--format", "openai-chat",
                    dir.File("t.json")})
              .exit == 0);
  const std::vector<std::string> prepare = {
      "prepare", "--db", db, "--session", "s", "--format", "openai-chat", "--max-context-chars",
      "100000"};
  Ran r = Run(dir, prepare);
  INFO(r.err);
  CHECK(r.exit == 0);
  CHECK(r.err.find("1 tool result answers no call before it (call id 'call_never')") !=
        std::string::npos);
  std::vector<std::string> json = prepare;
  json.push_back("--json");
  Ran j = Run(dir, json);
  REQUIRE(j.exit == 0);
  CHECK(LastJsonLine(j.out).at("orphan_results") == Json::array({"call_never"}));
}

TEST_CASE("R12.1 append takes a system prompt sent before the first message, as the library does",
          "[cli]") {
  // Issue 35's rough edge: `recap append` refused a first input holding only the system prompt
  // ("only the instructions: append them with the first message") where C and Python took it.
  TempDir dir("recap-cli-system-first");
  const std::string db = dir.File("s.db");
  Write(dir.File("sys.json"), R"([{"role":"system","content":"be brief"}])");
  Write(dir.File("other.json"), R"([{"role":"system","content":"be long"}])");
  Write(dir.File("u.json"), R"([{"role":"user","content":"hi"}])");
  const auto append = [&](const std::string& file) {
    return Run(dir,
               {"append", "--db", db, "--session", "s", "--format", "openai-chat", dir.File(file)});
  };
  Ran first = append("sys.json");
  INFO(first.err);
  REQUIRE(first.exit == 0);
  CHECK(first.out == "0\n");
  // Before the first message, reading commands say what the session lacks.
  Ran early = Run(dir, {"prepare", "--db", db, "--session", "s", "--format", "openai-chat",
                        "--max-context-chars", "10000"});
  CHECK(early.exit != 0);
  CHECK(early.err.find("has its instructions but no message yet") != std::string::npos);
  CHECK(append("sys.json").exit == 0);  // the same again changes nothing
  // An import under the id would take the kept instructions over (a hostile round found it
  // did): refused, naming the way on.
  Ran import = Run(
      dir, {"import", "--db", db, "--session", "s", "--format", "openai-chat", dir.File("u.json")});
  CHECK(import.exit != 0);
  CHECK(import.err.find("has instructions kept by `recap append` and no message yet") !=
        std::string::npos);
  Ran changed = append("other.json");
  CHECK(changed.exit != 0);
  CHECK(changed.err.find("has other instructions") != std::string::npos);
  REQUIRE(append("u.json").exit == 0);
  Ran p = Run(dir, {"prepare", "--db", db, "--session", "s", "--format", "openai-chat",
                    "--max-context-chars", "10000"});
  INFO(p.err);
  REQUIRE(p.exit == 0);
  const Json doc = Json::parse(p.out);
  REQUIRE(doc.size() == 2);
  CHECK(doc[0]["role"] == "system");
  CHECK(doc[0]["content"] == "be brief");
  CHECK(doc[1]["content"] == "hi");
}

TEST_CASE("R13.1 a binary file or a byte order mark gets recap's words, not the parser's",
          "[cli]") {
  // Issue 35's rough edge: binary input was described as "[json.exception.parse_error.101] …",
  // and a UTF-8 byte order mark was read by some formats and refused by recap's own.
  TempDir dir("recap-cli-binary");
  const std::string db = dir.File("s.db");
  Write(dir.File("bin.json"), std::string("\x7F"
                                          "ELF\x02\x01\x01",
                                          7));
  for (const std::string format : {"openai-chat", "anthropic", "openai-responses", "recap"}) {
    Ran r = Run(dir,
                {"append", "--db", db, "--session", "b", "--format", format, dir.File("bin.json")});
    INFO(format << ": " << r.err);
    CHECK(r.exit != 0);
    CHECK(r.err.find("json.exception") == std::string::npos);
    CHECK(r.err.find("0x7F") != std::string::npos);
    CHECK(r.err.find("Nothing was written") != std::string::npos);
  }
  const std::string bom = "\xEF\xBB\xBF";
  Write(dir.File("chat.json"), bom + R"([{"role":"user","content":"hi"}])");
  Write(dir.File("native.json"),
        bom + R"([{"role":"user","parts":[{"type":"text","text":"hi"}]}])");
  CHECK(Run(dir, {"append", "--db", db, "--session", "c", "--format", "openai-chat",
                  dir.File("chat.json")})
            .exit == 0);
  Ran native = Run(
      dir, {"append", "--db", db, "--session", "n", "--format", "recap", dir.File("native.json")});
  INFO(native.err);
  CHECK(native.exit == 0);
  // Offsets are the file's own, the mark counted; only one leading mark is skipped.
  Write(dir.File("bad.json"), bom + "[garbage]");
  Ran bad = Run(dir, {"append", "--db", db, "--session", "x", "--format", "openai-chat",
                      dir.File("bad.json")});
  CHECK(bad.err.find("byte offset 4 (line 1, column 5)") != std::string::npos);
  Write(dir.File("two.json"), bom + bom + R"([{"role":"user","content":"hi"}])");
  Ran two = Run(dir, {"append", "--db", db, "--session", "x", "--format", "openai-chat",
                      dir.File("two.json")});
  CHECK(two.exit != 0);
  CHECK(two.err.find("at byte offset 3") != std::string::npos);
}

TEST_CASE("R1 a shell host sets its settings once in $RECAP_CONFIG", "[cli]") {
  // Issue 35's rough edge: `recap prepare` needed --max-context-chars or --config on every call.
  TempDir dir("recap-cli-config-env");
  const std::string db = dir.File("s.db");
  Write(dir.File("long.json"), ChatTranscript(150, "long"));
  Import(dir, db, dir.File("long.json"), "s");
  Write(dir.File("small.json"),
        R"({"limits": {"maxContextChars": 100000},)"
        R"( "provider": {"contextWindow": 1000}, "compaction": {"auto": false}})");
  Write(dir.File("big.json"),
        R"({"limits": {"maxContextChars": 100000},)"
        R"( "provider": {"contextWindow": 900000}, "compaction": {"auto": false}})");
  Write(dir.File("bad.json"), R"({"limits": {"maxContextChars": "lots"}})");
  const std::vector<std::string> prepare = {"prepare", "--db",     db,           "--session",
                                            "s",       "--format", "openai-chat"};
  Ran r = Run(dir, prepare, {"RECAP_CONFIG=" + dir.File("small.json")});
  INFO(r.err);
  CHECK(r.exit == 0);
  CHECK(r.err.find("over the model's window of 1,000 tokens (config)") != std::string::npos);
  // --config wins over the variable.
  std::vector<std::string> given = prepare;
  given.insert(given.end(), {"--config", dir.File("big.json")});
  Ran g = Run(dir, given, {"RECAP_CONFIG=" + dir.File("small.json")});
  CHECK(g.exit == 0);
  CHECK(g.err.find("window") == std::string::npos);
  // A file the variable names that is not valid, or not there, is refused naming it.
  Ran bad = Run(dir, prepare, {"RECAP_CONFIG=" + dir.File("bad.json")});
  CHECK(bad.exit != 0);
  CHECK(bad.err.find("named by $RECAP_CONFIG is not valid") != std::string::npos);
  Ran missing = Run(dir, prepare, {"RECAP_CONFIG=" + dir.File("nowhere.json")});
  CHECK(missing.exit != 0);
  CHECK(missing.err.find("($RECAP_CONFIG)") != std::string::npos);
}

TEST_CASE("R13.2 Anthropic's system blocks come back as blocks, with what they carry", "[cli]") {
  // Found by this issue's hostile round: `system` given as a list of blocks was joined into
  // one string at import, losing `cache_control` (and a number's text) even on the way back
  // to Anthropic.
  TempDir dir("recap-cli-system-blocks");
  const std::string db = dir.File("s.db");
  const std::string system =
      R"([{"type":"text","text":"S","cache_control":{"type":"ephemeral","ttl":1.50}},)"
      R"({"type":"text","text":"T"}])";
  Write(dir.File("a.json"),
        R"({"system":)" + system + R"(,"messages":[{"role":"user","content":"hi"}]})");
  Ran imported = Run(
      dir, {"import", "--format", "anthropic", dir.File("a.json"), "--session", "s", "--db", db});
  REQUIRE(imported.exit == 0);
  Ran out = Run(dir, {"export", "--session", "s", "--db", db, "--format", "anthropic"});
  REQUIRE(out.exit == 0);
  INFO(out.out);
  CHECK(Json::parse(out.out)["system"] == Json::parse(system));
  CHECK(out.out.find("1.50") != std::string::npos);
  // Written as a string where a format takes only that; the text is both blocks'.
  Ran chat = Run(dir, {"export", "--session", "s", "--db", db, "--format", "openai-responses"});
  REQUIRE(chat.exit == 0);
  CHECK(Json::parse(chat.out)["instructions"] == "S\nT");
}
