// The command line serves a per-turn loop (issue 22, SPEC R16.3; label `cli`): `recap append`
// adds a turn's messages to a session from a file or standard input, in any message format, all
// or nothing; `recap prepare` runs the per-turn Prepare and prints what to send, the document
// `recap export` writes; `-` reads standard input wherever a file is read, under the same bounds;
// and the shell host loop of docs/cli.md (examples/cli/host_loop.sh) runs, with a stand-in for
// the model, over a real transcript.
//
// The program is run as a child process (RECAP_CLI_PATH); its output is parsed with nlohmann.
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <random>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>
#include <sys/stat.h>
#include <sys/wait.h>

#include "cli/cli_run.h"
#include "support/build_speed.h"
#include "support/temp_dir.h"

namespace {

using Json = nlohmann::json;
using recap::testing::TempDir;
using namespace recap::testing::cli;  // Run, Data, Slurp, Quote, LastJsonLine, ...

const char* const kTau = "tau-bench_gpt-4o-airline.json";
const char* const kResponses = "tau-bench_gpt-4o-airline_run5.responses.json";

void Write(const std::string& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary);
  out << text;
  REQUIRE(out.good());
}

// Runs the program with standard input read from `input` (a file).
Ran RunWithInput(const TempDir& dir, const std::vector<std::string>& args,
                 const std::string& input) {
  return Run(dir, args, {}, "< " + Quote(input));
}

// Runs `producer | recap args...` in the shell (stdout captured, stderr to a file).
Ran RunPiped(const TempDir& dir, const std::string& producer,
             const std::vector<std::string>& args) {
  std::string command = Quote(CliPath());
  for (const std::string& a : args) command += " " + Quote(a);
  const std::string err_path = dir.File("stderr.txt");
  command =
      "cd " + Quote(dir.path()) + " && " + producer + " | " + command + " 2>" + Quote(err_path);
  return RunShell(command, err_path);
}

// The tau-bench run `run`'s messages (OpenAI chat, a system message first).
Json TauRun(int run) { return Json::parse(Slurp(Data(kTau))).at(run).at("traj"); }

void Import(const TempDir& dir, const std::string& db, const std::vector<std::string>& more) {
  std::vector<std::string> args = {"import", "--db", db};
  args.insert(args.end(), more.begin(), more.end());
  const Ran r = Run(dir, args);
  INFO(r.err);
  REQUIRE(r.exit == 0);
}

std::string Export(const TempDir& dir, const std::string& db, const std::string& session,
                   const std::string& format) {
  const Ran r = Run(dir, {"export", "--session", session, "--format", format, "--db", db});
  INFO(r.err);
  REQUIRE(r.exit == 0);
  return r.out;
}

// Active messages and version of a session (stats --json).
Json Stats(const TempDir& dir, const std::string& db, const std::string& session) {
  const Ran r = Run(dir, {"stats", "--session", session, "--db", db, "--json"});
  INFO(r.err);
  REQUIRE(r.exit == 0);
  return LastJsonLine(r.out);
}

// Tool call ids without a result and result ids without a call, of an OpenAI chat messages array.
struct ChatPairing {
  std::vector<std::string> unanswered;  // in the order of their calls
  std::vector<std::string> orphans;
};
ChatPairing PairingOfChat(const Json& messages) {
  std::set<std::string> results, calls;
  for (const Json& m : messages) {
    if (m.value("role", "") == "tool") results.insert(m.at("tool_call_id").get<std::string>());
  }
  ChatPairing p;
  for (const Json& m : messages) {
    if (!m.contains("tool_calls") || !m["tool_calls"].is_array()) continue;
    for (const Json& c : m["tool_calls"]) {
      const std::string id = c.at("id").get<std::string>();
      calls.insert(id);
      if (!results.count(id)) p.unanswered.push_back(id);
    }
  }
  for (const std::string& r : results) {
    if (!calls.count(r)) p.orphans.push_back(r);
  }
  return p;
}

// A document's instructions part and its messages, for each format `export` writes.
struct Split {
  Json instructions;  // null when none
  Json messages = Json::array();
};
Split SplitDocument(const Json& doc, const std::string& format) {
  Split s;
  if (format == "openai-chat") {
    s.messages = doc;
    if (!doc.empty() && doc[0].value("role", "") == "system") {
      s.instructions = doc[0];
      s.messages.erase(s.messages.begin());
    }
  } else if (doc.is_array()) {
    s.messages = doc;
  } else {
    s.instructions = doc.at(format == "anthropic"          ? "system"
                            : format == "openai-responses" ? "instructions"
                                                           : "instructions");
    s.messages = doc.at(format == "openai-responses" ? "input" : "messages");
  }
  return s;
}

// The document of `format` holding `instructions` (may be null) and `messages`.
Json Document(const std::string& format, const Json& instructions, const Json& messages) {
  if (format == "openai-chat") {
    Json doc = Json::array();
    if (!instructions.is_null()) doc.push_back(instructions);
    for (const Json& m : messages) doc.push_back(m);
    return doc;
  }
  if (instructions.is_null()) return messages;
  if (format == "anthropic") return {{"system", instructions}, {"messages", messages}};
  if (format == "openai-responses") return {{"instructions", instructions}, {"input", messages}};
  return {{"instructions", instructions}, {"messages", messages}};
}

}  // namespace

TEST_CASE("R16.3 append then export gives the messages back, in each format", "[cli]") {
  TempDir dir("recap-cli-append");
  const std::string db = dir.File("s.db");
  Import(dir, db, {"--format", "openai-chat", Data(kTau), "--run", "3", "--session", "tau"});
  Import(dir, db, {"--format", "openai-responses", Data(kResponses), "--session", "responses"});
  for (const std::string format : {"openai-chat", "anthropic", "openai-responses", "recap"}) {
    INFO(format);
    const std::string source = format == "openai-responses" ? "responses" : "tau";
    const std::string original = Export(dir, db, source, format);
    const Split split = SplitDocument(Json::parse(original), format);
    REQUIRE(!split.instructions.is_null());
    REQUIRE(split.messages.size() > 20);
    // The messages in groups of 2, 1 and 7 (never ending on a Responses reasoning item, which
    // travels with the item after it): the first group as the document with the instructions,
    // a group of one as one message object, the others as arrays.
    const std::string session = "copy-" + format;
    std::size_t at = 0;
    int group = 0;
    while (at < split.messages.size()) {
      std::size_t size = std::min<std::size_t>(group % 3 == 0   ? 2
                                               : group % 3 == 1 ? 1
                                                                : 7,
                                               split.messages.size() - at);
      while (at + size < split.messages.size() &&
             split.messages[at + size - 1].value("type", "") == "reasoning") {
        ++size;
      }
      Json part = Json::array();
      for (std::size_t i = at; i < at + size; ++i) part.push_back(split.messages[i]);
      const Json input = group == 0  ? Document(format, split.instructions, part)
                         : size == 1 ? part[0]
                                     : part;
      const std::string file = dir.File("part.json");
      Write(file, input.dump());
      const Ran r = Run(
          dir, {"append", "--session", session, "--format", format, file, "--db", db, "--json"});
      INFO("group " << group << ": " << input.dump().substr(0, 300) << "\n" << r.err);
      REQUIRE(r.exit == 0);
      const Json result = Json::parse(r.out);
      CHECK(result.at("messages").get<std::size_t>() >= 1);
      CHECK(result.at("created") == (group == 0));
      CHECK(result.at("instructions_set") == (group == 0));
      at += size;
      ++group;
    }
    CHECK(Json::parse(Export(dir, db, session, format)) == Json::parse(original));
  }
}

TEST_CASE("R16.3 append prints the new version, and --json one object", "[cli]") {
  TempDir dir("recap-cli-append");
  const std::string db = dir.File("s.db");
  const std::string file = dir.File("m.json");
  Write(file, R"({"role": "user", "content": "hello"})");
  Ran r = Run(dir, {"append", "--session", "s", "--format", "openai-chat", file, "--db", db});
  INFO(r.err);
  REQUIRE(r.exit == 0);
  CHECK(r.out == "1\n");
  CHECK(r.err.empty());
  r = Run(dir, {"append", "--session", "s", "--format", "openai-chat", file, "--db", db, "--json"});
  REQUIRE(r.exit == 0);
  const Json result = Json::parse(r.out);
  CHECK(result.at("version") == 2);
  CHECK(result.at("messages") == 1);
  CHECK(result.at("created") == false);
  CHECK(result.at("session") == "s");
  CHECK(Stats(dir, db, "s").at("messages") == 2);
}

TEST_CASE("R16.3 append is all or nothing: a bad message anywhere stores nothing and says where",
          "[cli]") {
  TempDir dir("recap-cli-append");
  const std::string db = dir.File("s.db");
  Import(dir, db, {"--format", "openai-chat", Data(kTau), "--run", "3", "--session", "s"});
  const std::string snapshot = Slurp(db);
  const std::string before = Export(dir, db, "s", "recap");
  Json messages = TauRun(4);
  messages.erase(messages.begin());  // its system message: not this session's instructions

  SECTION("a message that does not decode, late in the input") {
    messages[7] = {{"role", "wizard"}, {"content", "abracadabra"}};
    Write(dir.File("bad.json"), messages.dump());
    for (const std::string& session : {std::string("s"), std::string("new")}) {
      const Ran r = Run(dir, {"append", "--session", session, "--format", "openai-chat",
                              dir.File("bad.json"), "--db", db});
      INFO(r.err);
      CHECK(r.exit == 1);
      CHECK_THAT(r.err, Catch::Matchers::Contains("does not decode as openai-chat") &&
                            Catch::Matchers::Contains("[7]") &&
                            Catch::Matchers::Contains("Nothing was written"));
      CHECK(r.out.empty());
    }
  }
  SECTION("a message whose tool calls share an id") {
    for (Json& m : messages) {
      if (m.contains("tool_calls") && m["tool_calls"].is_array()) {
        m["tool_calls"].push_back(m["tool_calls"][0]);
        break;
      }
    }
    Write(dir.File("bad.json"), messages.dump());
    const Ran r = Run(dir, {"append", "--session", "s", "--format", "openai-chat",
                            dir.File("bad.json"), "--db", db});
    INFO(r.err);
    CHECK(r.exit == 1);
    CHECK_THAT(r.err, Catch::Matchers::Contains("holds two tool calls with the id") &&
                          Catch::Matchers::Contains("Nothing was written"));
  }
  SECTION("the wrong format is named") {
    // Responses items have no `role`, which every chat message has.
    Write(dir.File("bad.json"),
          Json::array(
              {{{"type", "function_call"}, {"call_id", "c1"}, {"name", "x"}, {"arguments", "{}"}}})
              .dump());
    const Ran r = Run(dir, {"append", "--session", "s", "--format", "openai-chat",
                            dir.File("bad.json"), "--db", db});
    INFO(r.err);
    CHECK(r.exit == 1);
    CHECK_THAT(r.err, Catch::Matchers::Contains("looks like --format openai-responses"));
  }
  SECTION("a recap message whose id the session holds already") {
    const Json doc = Json::parse(before);
    Write(dir.File("bad.json"), Json::array({doc.at("messages").back()}).dump());
    const Ran r = Run(
        dir, {"append", "--session", "s", "--format", "recap", dir.File("bad.json"), "--db", db});
    INFO(r.err);
    CHECK(r.exit == 1);
    CHECK_THAT(r.err, Catch::Matchers::Contains("Nothing was written"));
  }
  SECTION("an input without messages") {
    Write(dir.File("bad.json"), "[]");
    Ran r = Run(dir, {"append", "--session", "s", "--format", "openai-chat", dir.File("bad.json"),
                      "--db", db});
    CHECK(r.exit == 1);
    CHECK_THAT(r.err, Catch::Matchers::Contains("holds no messages"));
    Write(dir.File("bad.json"), "  \n");
    r = Run(dir, {"append", "--session", "s", "--format", "openai-chat", dir.File("bad.json"),
                  "--db", db});
    CHECK(r.exit == 1);
    CHECK_THAT(r.err, Catch::Matchers::Contains("is empty"));
  }
  CHECK(Slurp(db) == snapshot);
  CHECK(Export(dir, db, "s", "recap") == before);
  const Ran none = Run(dir, {"stats", "--session", "new", "--db", db});
  CHECK(none.exit == 1);
}

TEST_CASE(
    "R16.3 instructions: the first append sets them, a later one may repeat but not change "
    "them, and prepare counts them",
    "[cli]") {
  TempDir dir("recap-cli-append");
  const std::string db = dir.File("s.db");
  const std::string system = "You book flights. Never refund.";
  const auto turn = [&](const std::string& sys, const std::string& text) {
    Json doc = {{"messages", Json::array({{{"role", "user"}, {"content", text}}})}};
    if (!sys.empty()) doc["system"] = sys;
    Write(dir.File("turn.json"), doc.dump());
    return Run(dir, {"append", "--session", "s", "--format", "anthropic", dir.File("turn.json"),
                     "--db", db, "--json"});
  };
  Ran r = turn(system, "first");
  INFO(r.err);
  REQUIRE(r.exit == 0);
  CHECK(Json::parse(r.out).at("instructions_set") == true);
  r = turn(system, "second");  // Anthropic's `system` sent again with the turn
  REQUIRE(r.exit == 0);
  CHECK(Json::parse(r.out).at("instructions_repeated") == true);
  const std::string snapshot = Slurp(db);
  r = turn("Always refund.", "third");
  CHECK(r.exit == 1);
  CHECK_THAT(r.err, Catch::Matchers::Contains("has other instructions") &&
                        Catch::Matchers::Contains("Nothing was written"));
  CHECK(Slurp(db) == snapshot);
  // An instructions-only input for a new session keeps them for its first message (issue 35:
  // the library takes a system prompt sent first; so does the command now).
  Write(dir.File("sys.json"), Json({{"role", "system"}, {"content", system}}).dump());
  r = Run(dir, {"append", "--session", "t", "--format", "openai-chat", dir.File("sys.json"), "--db",
                db});
  CHECK(r.exit == 0);
  CHECK(r.out == "0\n");

  // export and prepare write them as the format carries them, and prepare counts them.
  const Json chat = Json::parse(Export(dir, db, "s", "openai-chat"));
  REQUIRE(chat.size() == 3);
  CHECK(chat[0] == Json({{"role", "system"}, {"content", system}}));
  r = Run(dir, {"prepare", "--session", "s", "--format", "anthropic", "--db", db, "--json"});
  REQUIRE(r.exit == 0);
  Json result = LastJsonLine(r.out);
  CHECK(result.at("document").at("system") == system);
  CHECK(result.at("instructions_chars") == system.size());
  r = Run(dir, {"prepare", "--session", "s", "--format", "anthropic", "--db", db, "--json",
                "--instructions-chars", "5000", "--tool-catalog-chars", "700"});
  REQUIRE(r.exit == 0);
  result = LastJsonLine(r.out);
  CHECK(result.at("instructions_chars") == 5000);
  CHECK(result.at("tool_catalog_chars") == 700);
  CHECK(result.at("document").at("system") == system);
}

TEST_CASE("R16.3 - reads standard input in import, append and --config, under the same bounds",
          "[cli]") {
  TempDir dir("recap-cli-stdin");
  const std::string db = dir.File("s.db");
  // `recap import --format openai-chat - --session x < file` imports what the file would.
  const Json run = TauRun(3);
  Write(dir.File("run.json"), run.dump());
  Ran r =
      RunWithInput(dir, {"import", "--format", "openai-chat", "-", "--session", "x", "--db", db},
                   dir.File("run.json"));
  INFO(r.err);
  REQUIRE(r.exit == 0);
  Import(dir, db, {"--format", "openai-chat", dir.File("run.json"), "--session", "y"});
  CHECK(Export(dir, db, "x", "openai-chat") == Export(dir, db, "y", "openai-chat"));
  CHECK(Json::parse(Export(dir, db, "x", "openai-chat")) == run);

  // append: `-`, and no FILE at all; from a file redirected and from a pipe.
  Write(dir.File("m.json"), R"([{"role": "user", "content": "from stdin"}])");
  r = RunWithInput(dir, {"append", "--session", "x", "--format", "openai-chat", "-", "--db", db},
                   dir.File("m.json"));
  REQUIRE(r.exit == 0);
  r = RunPiped(dir, "cat " + Quote(dir.File("m.json")),
               {"append", "--session", "x", "--format", "openai-chat", "--db", db});
  REQUIRE(r.exit == 0);
  const Json doc = Json::parse(Export(dir, db, "x", "openai-chat"));
  REQUIRE(doc.size() == run.size() + 2);
  CHECK(doc[run.size()].at("content") == "from stdin");
  CHECK(doc[run.size() + 1].at("content") == "from stdin");

  // --config -: a configuration on standard input (here one that makes prepare compact).
  Write(dir.File("config.json"), R"({"limits": {"maxContextChars": 12000}})");
  r = RunWithInput(dir,
                   {"prepare", "--session", "x", "--format", "openai-chat", "--db", db, "--config",
                    "-", "--json"},
                   dir.File("config.json"));
  INFO(r.err);
  REQUIRE(r.exit == 0);
  CHECK(!LastJsonLine(r.out).at("compactions").empty());

  // Standard input is bounded as a file is: a pipe over --max-input-bytes is refused.
  const std::string snapshot = Slurp(db);
  r = RunPiped(dir, "cat " + Quote(dir.File("run.json")),
               {"append", "--session", "x", "--format", "openai-chat", "-", "--db", db,
                "--max-input-bytes", "1K"});
  CHECK(r.exit == 1);
  CHECK_THAT(r.err, Catch::Matchers::Contains("standard input is larger than --max-input-bytes") &&
                        Catch::Matchers::Contains("Nothing was written"));
  r = RunWithInput(dir,
                   {"import", "--format", "openai-chat", "-", "--session", "z", "--db", db,
                    "--max-input-bytes", "1K"},
                   dir.File("run.json"));
  CHECK(r.exit == 1);
  CHECK_THAT(r.err, Catch::Matchers::Contains("standard input is larger than --max-input-bytes"));
  CHECK(Slurp(db) == snapshot);
}

TEST_CASE("R16.3 hostile standard input: endless, deep, not JSON, closed, empty", "[cli]") {
  TempDir dir("recap-cli-stdin");
  const std::string db = dir.File("s.db");
  Write(dir.File("m.json"), R"({"role": "user", "content": "hello"})");
  REQUIRE(RunWithInput(dir, {"append", "--session", "s", "--format", "openai-chat", "--db", db},
                       dir.File("m.json"))
              .exit == 0);
  const std::string snapshot = Slurp(db);
  const std::vector<std::string> append = {"append",      "--session", "s", "--format",
                                           "openai-chat", "--db",      db};

  // An endless stream: refused once --max-input-bytes were read, never held whole.
  Ran r = RunPiped(dir, "yes '[[[[' 2>/dev/null", [&] {
    auto a = append;
    a.insert(a.end(), {"-", "--max-input-bytes", "4M"});
    return a;
  }());
  CHECK(r.exit == 1);
  CHECK_THAT(r.err, Catch::Matchers::Contains("standard input is larger than --max-input-bytes "
                                              "(4 MiB)") &&
                        Catch::Matchers::Contains("an endless stream?"));
  // Nested deeper than recap reads: refused before any parse, not a crash.
  Write(dir.File("deep.json"), std::string(100000, '[') + std::string(100000, ']'));
  r = RunWithInput(dir, append, dir.File("deep.json"));
  CHECK(r.exit == 1);
  CHECK_THAT(r.err, Catch::Matchers::Contains("nested deeper than"));
  Write(dir.File("deep.json"),
        "{\"role\":\"user\",\"content\":" + std::string(5000, '[') + std::string(5000, ']') + "}");
  r = RunWithInput(dir, append, dir.File("deep.json"));
  CHECK(r.exit == 1);
  CHECK_THAT(r.err, Catch::Matchers::Contains("nested deeper than"));
  // Not JSON, and JSON cut short.
  Write(dir.File("not.json"), "hello, model");
  r = RunWithInput(dir, append, dir.File("not.json"));
  CHECK(r.exit == 1);
  CHECK_THAT(r.err, Catch::Matchers::Contains("standard input does not decode as openai-chat"));
  Write(dir.File("cut.json"), R"([{"role": "user", "content": "hel)");
  r = RunWithInput(dir, append, dir.File("cut.json"));
  CHECK(r.exit == 1);
  CHECK_THAT(r.err, Catch::Matchers::Contains("does not decode"));
  // Closed, and empty.
  r = Run(dir, append, {}, "<&-");
  CHECK(r.exit == 1);
  CHECK_THAT(r.err, Catch::Matchers::Contains("standard input is closed"));
  r = Run(dir, append, {}, "< /dev/null");
  CHECK(r.exit == 1);
  CHECK_THAT(r.err, Catch::Matchers::Contains("standard input is empty"));
  CHECK(Slurp(db) == snapshot);
}

TEST_CASE("R16.3 append and prepare usage errors exit 2 and name the flag to type", "[cli]") {
  TempDir dir("recap-cli-usage");
  const std::string db = dir.File("s.db");
  Write(dir.File("m.json"), R"({"role": "user", "content": "hello"})");
  const std::string m = dir.File("m.json");
  struct Case {
    std::vector<std::string> args;
    std::string says;
  };
  const std::vector<Case> cases = {
      {{"append", "--format", "openai-chat", m, "--db", db}, "--session ID is required"},
      {{"append", "--session", "s", m, "--db", db}, "--format F is required"},
      {{"append", "--session", "s", "--format", "claude-code", m, "--db", db},
       "unknown format 'claude-code' for --format; use openai-chat, anthropic"},
      {{"append", "--session", "s", "--format", "openai-chat", m, m, "--db", db},
       "give one input at most"},
      {{"append", "--session", "s", "--format", "openai-chat", m, "--max-input-bytes", "lots"},
       "--max-input-bytes wants a number of bytes"},
      {{"append", "--session", "recap-cli.instructions:s", "--format", "openai-chat", m},
       "reserved"},
      {{"prepare", "--format", "openai-chat", "--db", db}, "--session ID is required"},
      {{"prepare", "--session", "s", "--db", db}, "--format F is required"},
      {{"prepare", "--session", "s", "--format", "openai", "--db", db},
       "unknown format 'openai' for --format"},
      {{"prepare", "--session", "s", "--format", "openai-chat", "--instructions-chars", "-3"},
       "--instructions-chars wants a non-negative whole number"},
      {{"prepare", "--session", "s", "--format", "openai-chat", "--tool-catalog-chars", "x"},
       "--tool-catalog-chars wants a non-negative whole number"},
      {{"prepare", "--session", "s", "--format", "openai-chat", "--keep-turns", "99"},
       "--keep-turns"},
      {{"prepare", "--session", "s", "--format", "openai-chat", m}, "unexpected argument"},
      {{"prepare", "--session", "s", "--format", "openai-chat", "--focus", "x"},
       "unknown option --focus"},
  };
  for (const Case& c : cases) {
    const Ran r = Run(dir, c.args);
    INFO(c.args[0] << " " << c.args[1] << ": " << r.err);
    CHECK(r.exit == 2);
    CHECK_THAT(r.err, Catch::Matchers::Contains(c.says) &&
                          Catch::Matchers::Contains("--help` for the options"));
  }
  // --json: the usage error as an object on stdout too.
  const Ran r = Run(dir, {"prepare", "--session", "s", "--json"});
  CHECK(r.exit == 2);
  CHECK(LastJsonLine(r.out).at("error").at("kind") == "usage");
  // Nothing was created.
  std::ifstream none(db);
  CHECK(!none.good());
  // A prepare of a session that does not exist is a failure that says what to do.
  REQUIRE(Run(dir, {"append", "--session", "s", "--format", "openai-chat", m, "--db", db}).exit ==
          0);
  const Ran missing =
      Run(dir, {"prepare", "--session", "nope", "--format", "openai-chat", "--db", db});
  CHECK(missing.exit == 1);
  CHECK_THAT(missing.err, Catch::Matchers::Contains("has no session 'nope'") &&
                              Catch::Matchers::Contains("recap sessions list"));
}

TEST_CASE("R16.3 prepare prints export's document, compact, when there is nothing to do", "[cli]") {
  TempDir dir("recap-cli-prepare");
  const std::string db = dir.File("s.db");
  Import(dir, db, {"--format", "openai-chat", Data(kTau), "--run", "3", "--session", "tau"});
  Import(dir, db, {"--format", "openai-responses", Data(kResponses), "--session", "responses"});
  for (const std::string format : {"openai-chat", "anthropic", "openai-responses", "recap"}) {
    INFO(format);
    const std::string session = format == "openai-responses" ? "responses" : "tau";
    const std::string history =
        Run(dir, {"export", "--session", session, "--format", "recap", "--history", "--db", db})
            .out;
    const Json stats = Stats(dir, db, session);
    const Ran r = Run(dir, {"prepare", "--session", session, "--format", format, "--db", db});
    INFO(r.err);
    REQUIRE(r.exit == 0);
    CHECK(r.err.empty());
    // On a pipe, the document as the codecs wrote it, on one line: export's (which indents it
    // for people), byte for byte as `export --json` writes it.
    const Ran compact =
        Run(dir, {"export", "--session", session, "--format", format, "--db", db, "--json"});
    REQUIRE(compact.exit == 0);
    CHECK(r.out == compact.out);
    CHECK(std::count(r.out.begin(), r.out.end(), '\n') == 1);
    CHECK(Json::parse(r.out) == Json::parse(Export(dir, db, session, format)));
    // Nothing of the session changed (what prepare keeps for the next one aside).
    CHECK(Stats(dir, db, session) == stats);
    CHECK(Run(dir, {"export", "--session", session, "--format", "recap", "--history", "--db", db})
              .out == history);
    // The next prepare prints the same, from what this one kept.
    const Ran again = Run(dir, {"prepare", "--session", session, "--format", format, "--db", db});
    CHECK(again.exit == 0);
    CHECK(again.out == r.out);
    // --json: the same document, inside the result.
    const Ran j =
        Run(dir, {"prepare", "--session", session, "--format", format, "--db", db, "--json"});
    REQUIRE(j.exit == 0);
    const Json result = LastJsonLine(j.out);
    CHECK(result.at("type") == "result");
    CHECK(result.at("compactions").empty());
    CHECK(result.at("before") == result.at("after"));
    CHECK(result.at("document") == Json::parse(r.out));
  }
}

TEST_CASE("R16.3 prepare compacts a session over its trigger and prints the reduced document",
          "[cli]") {
  TempDir dir("recap-cli-prepare");
  const std::string db = dir.File("s.db");
  Import(dir, db, {"--format", "openai-chat", Data(kTau), "--run", "3", "--session", "s"});
  const Json before = Stats(dir, db, "s");
  SECTION("plain: the document on stdout, one line on stderr") {
    const Ran r = Run(dir, {"prepare", "--session", "s", "--format", "openai-chat", "--db", db,
                            "--max-context-chars", "12000"});
    INFO(r.err);
    REQUIRE(r.exit == 0);
    CHECK_THAT(r.err, Catch::Matchers::StartsWith("recap prepare: session 's': compacted (auto)"));
    CHECK(std::count(r.err.begin(), r.err.end(), '\n') == 1);
    const Json doc = Json::parse(r.out);
    CHECK(doc[0].at("role") == "system");  // the instructions, first
    CHECK(doc[1].at("content").get<std::string>().rfind("# Checkpoint", 0) == 0);
    CHECK(doc.size() < before.at("messages").get<std::size_t>());
    const ChatPairing p = PairingOfChat(doc);
    CHECK(p.unanswered.empty());
    CHECK(p.orphans.empty());
    // What it printed is what the session now holds.
    CHECK(doc == Json::parse(Export(dir, db, "s", "openai-chat")));
    CHECK(Stats(dir, db, "s").at("version").get<int>() > before.at("version").get<int>());
  }
  SECTION("--json: the events as they happen, then the result with the document") {
    const Ran r = Run(dir, {"prepare", "--session", "s", "--format", "anthropic", "--db", db,
                            "--max-context-chars", "12000", "--json"});
    INFO(r.err);
    REQUIRE(r.exit == 0);
    std::vector<Json> lines;
    std::istringstream in(r.out);
    std::string line;
    while (std::getline(in, line)) lines.push_back(Json::parse(line));
    REQUIRE(lines.size() >= 3);
    std::vector<std::string> events;
    for (std::size_t i = 0; i + 1 < lines.size(); ++i) {
      events.push_back(lines[i].at("type").get<std::string>());
    }
    CHECK(std::find(events.begin(), events.end(), "compaction_started") != events.end());
    CHECK(std::find(events.begin(), events.end(), "compaction_completed") != events.end());
    const Json& result = lines.back();
    CHECK(result.at("type") == "result");
    CHECK(result.at("compactions") == Json::array({"auto"}));
    CHECK(result.at("summarized_messages").get<int>() > 0);
    CHECK(result.at("after").at("chars") < result.at("before").at("chars"));
    CHECK(result.at("after").at("tokens") < result.at("before").at("tokens"));
    CHECK(result.at("version") == Stats(dir, db, "s").at("version"));
    CHECK(result.at("document") == Json::parse(Export(dir, db, "s", "anthropic")));
    CHECK(result.at("document").at("system").get<std::string>().size() ==
          result.at("instructions_chars").get<std::size_t>());
  }
}

TEST_CASE(
    "R16.3 a real transcript appended message by message, with a prepare each turn, never "
    "separates a tool call from its result",
    "[cli]") {
  TempDir dir("recap-cli-loop");
  const std::string db = dir.File("s.db");
  const Json run = TauRun(3);
  // The system message with the first user message, then one message an append; a prepare
  // after each, under a limit that makes it compact several times.
  const std::size_t count = std::min<std::size_t>(run.size(), recap_test::kSlowBuild ? 30 : 45);
  int compactions = 0;
  Json last_appended;
  for (std::size_t i = 1; i < count; ++i) {
    INFO("message " << i);
    const Json input = i == 1 ? Json::array({run[0], run[1]}) : run[i];
    last_appended = run[i];
    Write(dir.File("m.json"), input.dump());
    Ran r = Run(dir, {"append", "--session", "s", "--format", "openai-chat", dir.File("m.json"),
                      "--db", db});
    INFO(r.err);
    REQUIRE(r.exit == 0);
    r = Run(dir, {"prepare", "--session", "s", "--format", "openai-chat", "--db", db,
                  "--max-context-chars", "12000"});
    INFO(r.err);
    REQUIRE(r.exit == 0);
    if (!r.err.empty()) ++compactions;
    const Json doc = Json::parse(r.out);
    CHECK(doc[0] == run[0]);  // the instructions, first, every turn
    CHECK(doc.back() == last_appended);
    const ChatPairing p = PairingOfChat(doc);
    CHECK(p.orphans.empty());
    // A call may wait for its result only at the end: the newest assistant message's calls.
    for (const std::string& id : p.unanswered) {
      bool in_last = false;
      for (const Json& c : doc.back().value("tool_calls", Json::array())) {
        in_last = in_last || c.at("id") == id;
      }
      CHECK(in_last);
    }
  }
  CHECK(compactions >= 2);
}

TEST_CASE("R16.3 two appends racing on one session both land, in either order", "[cli]") {
  TempDir dir("recap-cli-race");
  const int rounds = recap_test::kSlowBuild ? 4 : 10;
  for (int round = 0; round < rounds; ++round) {
    // A new database and session each round, both inputs with the same instructions: one
    // creates the session with them, the other finds it made and appends after. (Both create
    // the database file too: one used to see the other's tables before its schema version and
    // refuse the file as not recap's.)
    const std::string db = dir.File("s-" + std::to_string(round) + ".db");
    const std::string session = "race-" + std::to_string(round);
    for (const std::string tag : {"a", "b"}) {
      Write(dir.File(tag + ".json"),
            Json::array({{{"role", "system"}, {"content", "Be brief."}},
                         {{"role", "user"}, {"content", tag + " asks"}},
                         {{"role", "assistant"}, {"content", tag + " answers"}}})
                .dump());
    }
    std::vector<FILE*> pipes;
    for (const std::string tag : {"a", "b"}) {
      const std::string command =
          "cd " + Quote(dir.path()) + " && " + Quote(CliPath()) + " append --session " + session +
          " --format openai-chat --db " + Quote(db) + " " + Quote(dir.File(tag + ".json")) + " >" +
          Quote(dir.File(tag + ".out")) + " 2>" + Quote(dir.File(tag + ".err"));
      pipes.push_back(::popen(command.c_str(), "r"));
      REQUIRE(pipes.back() != nullptr);
    }
    for (std::size_t i = 0; i < pipes.size(); ++i) {
      const int status = ::pclose(pipes[i]);
      INFO("status " << status << ": " << Slurp(dir.File(i == 0 ? "a.err" : "b.err")));
      CHECK((WIFEXITED(status) && WEXITSTATUS(status) == 0));
    }
    const Json doc = Json::parse(Export(dir, db, session, "openai-chat"));
    REQUIRE(doc.size() == 5);
    CHECK(doc[0].at("content") == "Be brief.");
    std::multiset<std::string> texts;
    for (std::size_t i = 1; i < doc.size(); ++i) texts.insert(doc[i].at("content"));
    CHECK(texts == std::multiset<std::string>{"a asks", "a answers", "b asks", "b answers"});
    // Each append's messages stay together: one after the other, never interleaved.
    const std::string first = doc[1].at("content").get<std::string>().substr(0, 1);
    CHECK(doc[2].at("content") == first + " answers");
  }
}

TEST_CASE("R16.3 an append killed at any instant stores all of its messages or none", "[cli]") {
  TempDir dir("recap-cli-kill");
  const std::string db = dir.File("s.db");
  Write(dir.File("first.json"), R"({"role": "user", "content": "start"})");
  REQUIRE(Run(dir, {"append", "--session", "s", "--format", "openai-chat", dir.File("first.json"),
                    "--db", db})
              .exit == 0);
  Json big = Json::array();
  for (int i = 0; i < 8000; ++i) {
    big.push_back(
        {{"role", i % 2 == 0 ? "assistant" : "user"}, {"content", "message " + std::to_string(i)}});
  }
  Write(dir.File("big.json"), big.dump());
  const auto t0 = std::chrono::steady_clock::now();
  REQUIRE(Run(dir, {"append", "--session", "timed", "--format", "openai-chat", dir.File("big.json"),
                    "--db", db})
              .exit == 0);
  const double whole_ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  std::mt19937 rng(22);
  std::uniform_real_distribution<double> unit(0.0, 1.2);
  std::size_t expected = 1;
  int none = 0, all = 0;
  const int kills = recap_test::kSlowBuild ? 6 : 12;
  for (int k = 0; k < kills; ++k) {
    const pid_t pid = ::fork();
    REQUIRE(pid >= 0);
    if (pid == 0) {
      if (!std::freopen("/dev/null", "w", stdout) || !std::freopen("/dev/null", "w", stderr)) {
        ::_exit(126);
      }
      const std::string cli = CliPath();
      const std::string file = dir.File("big.json");
      ::execl(cli.c_str(), cli.c_str(), "append", "--session", "s", "--format", "openai-chat",
              file.c_str(), "--db", db.c_str(), static_cast<char*>(nullptr));
      ::_exit(127);
    }
    std::this_thread::sleep_for(
        std::chrono::microseconds(static_cast<long>(unit(rng) * whole_ms * 1000)));
    ::kill(pid, SIGKILL);
    int status = 0;
    ::waitpid(pid, &status, 0);
    const std::size_t messages = Stats(dir, db, "s").at("messages").get<std::size_t>();
    INFO("kill " << k << ": " << messages << " messages, expected " << expected << " or "
                 << expected + big.size());
    REQUIRE((messages == expected || messages == expected + big.size()));
    if (messages == expected) {
      ++none;
    } else {
      ++all;
    }
    expected = messages;
  }
  WARN(none << " kills left the session as it was, " << all << " with all the messages (one "
            << "append: " << whole_ms << " ms)");
}

TEST_CASE("R16.3 append and prepare whose output cannot be written fail, exit 1", "[cli]") {
  TempDir dir("recap-cli-full");
  const std::string db = dir.File("s.db");
  Write(dir.File("m.json"), R"({"role": "user", "content": "hello"})");
  for (const std::vector<std::string>& args : std::vector<std::vector<std::string>>{
           {"append", "--session", "s", "--format", "openai-chat", dir.File("m.json"), "--db", db},
           {"prepare", "--session", "s", "--format", "openai-chat", "--db", db},
           {"prepare", "--session", "s", "--format", "anthropic", "--db", db, "--json"}}) {
    const Ran r = Run(dir, args, {}, "> /dev/full");
    INFO(args[0] << ": " << r.err);
    CHECK(r.exit == 1);
    CHECK_THAT(r.err, Catch::Matchers::Contains("could not write its output") &&
                          Catch::Matchers::Contains("No space left on device"));
  }
  // The append itself was made (its output is what failed), as the conventions say.
  CHECK(Stats(dir, db, "s").at("messages") == 1);
}

TEST_CASE("R16.3 docs/cli.md shows examples/cli/host_loop.sh verbatim", "[cli]") {
  const std::string root = std::string(RECAP_TEST_DATA_DIR) + "/../..";
  const std::string doc = Slurp(root + "/docs/cli.md");
  const std::string script = Slurp(root + "/examples/cli/host_loop.sh");
  REQUIRE(!script.empty());
  CHECK(doc.find("```sh\n" + script + "```\n") != std::string::npos);
}

TEST_CASE(
    "R16.3 the shell host loop of docs/cli.md runs with a stand-in model over a real "
    "transcript, and compacts",
    "[cli]") {
  TempDir dir("recap-cli-host");
  const std::string db = dir.File("s.db");
  const std::string root = std::string(RECAP_TEST_DATA_DIR) + "/../..";
  Import(dir, db, {"--format", "openai-chat", Data(kTau), "--run", "3", "--session", "trip"});
  const std::size_t imported = Stats(dir, db, "trip").at("messages").get<std::size_t>();
  // The stand-in model keeps each request it is sent and answers with the request's size.
  Write(dir.File("model.sh"),
        "#!/bin/sh\n"
        "n=$(ls " +
            Quote(dir.File("requests")) +
            " | wc -l)\n"
            "cat > " +
            Quote(dir.File("requests")) +
            "/$n.json\n"
            "printf '{\"role\": \"assistant\", \"content\": \"answer %s\"}\\n' \"$n\"\n");
  REQUIRE(::mkdir(dir.File("requests").c_str(), 0700) == 0);
  REQUIRE(::chmod(dir.File("model.sh").c_str(), 0700) == 0);
  Write(dir.File("config.json"), R"({"limits": {"maxContextChars": 12000}})");
  Write(dir.File("lines.txt"),
        "I want to change my flight.\nThe one to \"Denver\", please.\nThank you!\n");
  const std::string command = "cd " + Quote(dir.path()) + " && RECAP=" + Quote(CliPath()) +
                              " SESSION=trip DB=" + Quote(db) +
                              " CONFIG=" + Quote(dir.File("config.json")) +
                              " ASK_MODEL=" + Quote(dir.File("model.sh")) + " sh " +
                              Quote(root + "/examples/cli/host_loop.sh") + " < " +
                              Quote(dir.File("lines.txt")) + " 2>" + Quote(dir.File("loop.err"));
  const recap::testing::ShellRun run = recap::testing::RunShellCommand(command);
  const std::string& out = run.out;
  const std::string err = Slurp(dir.File("loop.err"));
  INFO(err);
  REQUIRE(run.exit == 0);
  CHECK(out == "answer 0\nanswer 1\nanswer 2\n");
  // prepare compacted (its line on stderr) the first turn at least.
  CHECK_THAT(err, Catch::Matchers::Contains("recap prepare: session 'trip': compacted (auto)"));
  // Each request was an OpenAI chat messages array: the instructions first, the user's line
  // last, every tool call with its result.
  const std::vector<std::string> lines = {"I want to change my flight.",
                                          "The one to \"Denver\", please.", "Thank you!"};
  for (std::size_t i = 0; i < lines.size(); ++i) {
    INFO("request " << i);
    const Json request = Json::parse(Slurp(dir.File("requests/" + std::to_string(i) + ".json")));
    REQUIRE(request.is_array());
    CHECK(request[0].at("role") == "system");
    CHECK(request.back() == Json({{"role", "user"}, {"content", lines[i]}}));
    if (i > 0) {
      CHECK(request[request.size() - 2] ==
            Json({{"role", "assistant"}, {"content", "answer " + std::to_string(i - 1)}}));
    }
    const ChatPairing p = PairingOfChat(request);
    CHECK(p.unanswered.empty());
    CHECK(p.orphans.empty());
  }
  // The session grew by each turn's two messages (on top of what the compaction left).
  const Ran history = Run(
      dir, {"export", "--session", "trip", "--format", "recap", "--history", "--db", db, "--json"});
  REQUIRE(history.exit == 0);
  const Json entries = Json::parse(history.out).at("history");
  std::size_t compacted = 0;
  for (const Json& e : entries) compacted += e.at("state") == "compacted" ? 1 : 0;
  CHECK(compacted > 0);
  CHECK(entries.size() >= imported + 6);
  const Json now = Json::parse(Export(dir, db, "trip", "openai-chat"));
  CHECK(now.back() == Json({{"role", "assistant"}, {"content", "answer 2"}}));
}
