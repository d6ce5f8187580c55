// The `recap` command over every real transcript in tests/data (label `cli`):
//
//  * import, plan, compact (offline summarizer), export: the exported transcript keeps every
//    tool call with its result (no call loses its result, no result its call), `export
//    --history` still holds every imported message, and the recap format reads back;
//  * bad input — an unknown format, an unreadable, truncated or wrongly claimed file, a missing
//    session, a database that is not recap's — exits with 1 or 2, says what was wrong, and
//    leaves the database byte for byte as it was;
//  * OpenAI Responses items (issue 9): import and export give the items back item by item,
//    reasoning byte-exact, with or without a request body's `instructions`, and after a
//    compaction every function call still has its output.
//  * A PostgreSQL URL as --db (issue 10): every subcommand on a fresh database of the test
//    server (support/pg_server.h; tag [postgres], run with the `pg` ctest fixture), the URL's
//    password in no output, a wrong password refused without being repeated; and, with no
//    server at all, a URL's password is never shown.
//
// The program is run as a child process (RECAP_CLI_PATH); its output is parsed with nlohmann.
#include <fcntl.h>
#include <poll.h>
#include <pty.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>
#include <sys/wait.h>

#include "cli/cli_run.h"
#include "support/temp_dir.h"
#if RECAP_TEST_HAVE_POSTGRES
#include "support/pg_server.h"
#endif

namespace {

using Json = nlohmann::json;
using recap::testing::TempDir;
using namespace recap::testing::cli;  // Run, RunOnTerminal, Data, ...

// Tool call ids without a result, and result ids without a call, of an exported document.
struct Pairing {
  std::set<std::string> calls, results;
  std::set<std::string> Unanswered() const {
    std::set<std::string> out;
    for (const auto& c : calls) {
      if (!results.count(c)) out.insert(c);
    }
    return out;
  }
  std::set<std::string> Orphans() const {
    std::set<std::string> out;
    for (const auto& r : results) {
      if (!calls.count(r)) out.insert(r);
    }
    return out;
  }
};

Pairing PairingOf(const Json& doc, const std::string& format) {
  Pairing p;
  const Json& messages =
      doc.is_object() ? doc.at(format == "openai-responses" ? "input" : "messages") : doc;
  for (const Json& m : messages) {
    if (format == "openai-responses") {
      const std::string type = m.value("type", "");
      if (type == "function_call") p.calls.insert(m.at("call_id").get<std::string>());
      if (type == "function_call_output") p.results.insert(m.at("call_id").get<std::string>());
    } else if (format == "openai-chat") {
      if (m.contains("tool_calls") && m["tool_calls"].is_array()) {
        for (const Json& c : m["tool_calls"]) p.calls.insert(c.at("id").get<std::string>());
      }
      if (m.value("role", "") == "tool") p.results.insert(m.at("tool_call_id").get<std::string>());
    } else {  // anthropic
      if (!m.contains("content") || !m["content"].is_array()) continue;
      for (const Json& b : m["content"]) {
        const std::string type = b.value("type", "");
        if (type == "tool_use") p.calls.insert(b.at("id").get<std::string>());
        if (type == "tool_result") p.results.insert(b.at("tool_use_id").get<std::string>());
      }
    }
  }
  return p;
}

bool Subset(const std::set<std::string>& a, const std::set<std::string>& b) {
  for (const auto& x : a) {
    if (!b.count(x)) return false;
  }
  return true;
}

struct Source {
  std::string name;
  std::string format;
  std::string file;
  std::string run;            // empty: none
  std::string export_format;  // the foreign format to check pairing in
};

const std::vector<Source>& Sources() {
  static const std::vector<Source> sources = {
      {"tau-bench run 0", "openai-chat", "tau-bench_gpt-4o-airline.json", "0", "openai-chat"},
      {"tau-bench run 17", "openai-chat", "tau-bench_gpt-4o-airline.json", "17", "openai-chat"},
      {"tau-bench run 199", "openai-chat", "tau-bench_gpt-4o-airline.json", "199", "openai-chat"},
      {"claude-code sample", "claude-code",
       "Users-dain-workspace-claude-code-log-sample__37f83ec9-f2ea-42a9-925e-0d5c105cb6e8.jsonl",
       "", "anthropic"},
      {"claude-code worktrees", "claude-code",
       "experiments-worktrees__ef958aa1-0e93-49f0-bb71-150f63befcd1.jsonl", "", "anthropic"},
      {"swe-agent marshmallow", "swe-agent", "marshmallow-1867_function_calling.traj", "",
       "openai-chat"},
      {"openhands run 0", "openhands", "multi_swe_bench_llama4_output.jsonl", "0", "openai-chat"},
      {"openhands run 1", "openhands", "multi_swe_bench_llama4_output.jsonl", "1", "openai-chat"},
      {"openhands run 2", "openhands", "multi_swe_bench_llama4_output.jsonl", "2", "openai-chat"},
      {"responses tau-bench run 5", "openai-responses",
       "tau-bench_gpt-4o-airline_run5.responses.json", "", "openai-responses"},
  };
  return sources;
}

}  // namespace

TEST_CASE("import, plan, compact and export every real transcript", "[cli]") {
  for (const Source& s : Sources()) {
    DYNAMIC_SECTION(s.name) {
      TempDir dir("recap-cli");
      const std::string db = dir.File("s.db");
      std::vector<std::string> import = {"import", "--format", s.format, Data(s.file), "--session",
                                         "s",      "--db",     db,       "--json"};
      if (!s.run.empty()) {
        import.push_back("--run");
        import.push_back(s.run);
      }
      Ran r = Run(dir, import);
      INFO(r.err);
      REQUIRE(r.exit == 0);
      const Json imported = LastJsonLine(r.out);
      const std::size_t messages = imported.at("messages").get<std::size_t>();
      REQUIRE(messages > 0);

      r = Run(dir, {"export", "--session", "s", "--db", db, "--format", s.export_format, "--json"});
      REQUIRE(r.exit == 0);
      const Pairing before = PairingOf(Json::parse(r.out), s.export_format);

      r = Run(dir, {"plan", "--session", "s", "--db", db, "--json", "--keep-turns", "1"});
      REQUIRE(r.exit == 0);
      const Json plan = LastJsonLine(r.out);
      if (plan.at("cut").at("skip") == "uncertain_tool_results") {
        r = Run(dir, {"sessions", "recover", "s", "--db", db});
        CHECK(r.exit == 1);  // refused without --acknowledge
        r = Run(dir, {"sessions", "recover", "s", "--db", db, "--acknowledge", "--json"});
        REQUIRE(r.exit == 0);
      }
      r = Run(dir, {"compact", "--session", "s", "--db", db, "--provider", "offline",
                    "--keep-turns", "1", "--json"});
      REQUIRE(r.exit == 0);
      const Json result = LastJsonLine(r.out);
      CHECK(result.at("type") == "result");
      if (plan.at("cut").at("ok").get<bool>()) {
        CHECK(result.at("compacted").get<bool>());
        CHECK(result.at("after").at("messages").get<std::size_t>() <=
              result.at("before").at("messages").get<std::size_t>());
        CHECK(result.at("after").at("chars").get<std::size_t>() <
              result.at("before").at("chars").get<std::size_t>());
        CHECK(r.out.find("\"compaction_completed\"") != std::string::npos);
      }

      // Every tool call keeps its result, every result its call.
      r = Run(dir, {"export", "--session", "s", "--db", db, "--format", s.export_format, "--json"});
      REQUIRE(r.exit == 0);
      const Pairing after = PairingOf(Json::parse(r.out), s.export_format);
      CHECK(after.Unanswered().empty());
      CHECK(Subset(after.Orphans(), before.Orphans()));

      // The history still holds every imported message.
      r = Run(dir,
              {"export", "--session", "s", "--db", db, "--format", "recap", "--history", "--json"});
      REQUIRE(r.exit == 0);
      std::set<std::string> ids;
      const Json history = Json::parse(r.out);
      for (const Json& e : history.at("history")) {
        if (!e.at("summary").get<bool>()) ids.insert(e.at("id").get<std::string>());
      }
      CHECK(ids.size() == messages);
      // And the foreign format writes the history too.
      r = Run(dir, {"export", "--session", "s", "--db", db, "--format", s.export_format,
                    "--history", "--json"});
      CHECK(r.exit == 0);

      // recap's own format reads back.
      r = Run(dir, {"export", "--session", "s", "--db", db, "--format", "recap"});
      REQUIRE(r.exit == 0);
      { std::ofstream(dir.File("active.json")) << r.out; }
      r = Run(dir, {"import", "--format", "recap", dir.File("active.json"), "--session", "copy",
                    "--db", db, "--json"});
      REQUIRE(r.exit == 0);
      CHECK(LastJsonLine(r.out).at("messages").get<std::size_t>() ==
            result.at("after").at("messages").get<std::size_t>());

      r = Run(dir, {"stats", "--session", "s", "--db", db, "--json"});
      CHECK(r.exit == 0);
      r = Run(dir, {"sessions", "list", "--db", db, "--json"});
      REQUIRE(r.exit == 0);
      CHECK(LastJsonLine(r.out).at("sessions").size() == 2);
    }
  }
}

TEST_CASE("compact --auto brings a session under a small limit", "[cli]") {
  TempDir dir("recap-cli");
  const std::string db = dir.File("s.db");
  Ran r = Run(dir, {"import", "--format", "swe-agent",
                    Data("marshmallow-1867_function_calling.traj"), "--session", "s", "--db", db});
  REQUIRE(r.exit == 0);
  r = Run(dir, {"compact", "--auto", "--session", "s", "--db", db, "--max-context-chars", "20000",
                "--json"});
  INFO(r.err);
  REQUIRE(r.exit == 0);
  const Json result = LastJsonLine(r.out);
  CHECK(result.at("after").at("chars").get<std::size_t>() +
            result.at("instructions_chars").get<std::size_t>() <=
        20000);
}

TEST_CASE("bad input fails with a message and changes nothing", "[cli]") {
  TempDir dir("recap-cli");
  const std::string db = dir.File("s.db");
  Ran r = Run(dir, {"import", "--format", "openai-chat", Data("tau-bench_gpt-4o-airline.json"),
                    "--run", "3", "--session", "s", "--db", db});
  REQUIRE(r.exit == 0);
  const std::string snapshot = Slurp(db);
  REQUIRE(!snapshot.empty());

  // Truncated copies of real files.
  const std::string traj = Slurp(Data("marshmallow-1867_function_calling.traj"));
  std::ofstream(dir.File("cut.traj")) << traj.substr(0, traj.size() / 2);
  const std::string jsonl = Slurp(Data(
      "Users-dain-workspace-claude-code-log-sample__37f83ec9-f2ea-42a9-925e-0d5c105cb6e8.jsonl"));
  std::ofstream(dir.File("cut.jsonl")) << jsonl.substr(0, jsonl.size() / 2);
  std::ofstream(dir.File("empty.json")) << "";
  // Valid JSON syntax, but a number no double holds (found by the importers' fuzz target).

  struct Case {
    const char* what;
    std::vector<std::string> args;
    int exit;
    const char* says;  // a piece of the message
  };
  const std::vector<Case> cases = {
      {"unknown format",
       {"import", "--format", "xml", Data("tau-bench_gpt-4o-airline.json"), "--session", "x"},
       2,
       "unknown format"},
      {"unknown command", {"frobnicate"}, 2, "unknown command"},
      {"unknown option", {"plan", "--session", "s", "--frob"}, 2, "unknown option"},
      {"missing session option", {"export", "--format", "recap"}, 2, "--session"},
      {"run out of range",
       {"import", "--format", "openai-chat", Data("tau-bench_gpt-4o-airline.json"), "--run", "500",
        "--session", "x"},
       2,
       "out of range"},
      {"run missing for many runs",
       {"import", "--format", "openai-chat", Data("tau-bench_gpt-4o-airline.json"), "--session",
        "x"},
       2,
       "--run N"},
      {"unreadable file",
       {"import", "--format", "anthropic", dir.File("no-such-file.json"), "--session", "x"},
       1,
       "cannot open"},
      {"empty file",
       {"import", "--format", "recap", dir.File("empty.json"), "--session", "x"},
       1,
       "empty"},
      {"truncated json",
       {"import", "--format", "swe-agent", dir.File("cut.traj"), "--session", "x"},
       1,
       "not"},
      {"truncated jsonl",
       {"import", "--format", "claude-code", dir.File("cut.jsonl"), "--session", "x"},
       1,
       "truncated"},
      {"jsonl claimed as openai-chat",
       {"import", "--format", "openai-chat",
        Data("experiments-worktrees__ef958aa1-0e93-49f0-bb71-150f63befcd1.jsonl"), "--session",
        "x"},
       1,
       "--format claude-code"},
      {"traj claimed as anthropic",
       {"import", "--format", "anthropic", Data("marshmallow-1867_function_calling.traj"),
        "--session", "x"},
       1,
       "--format swe-agent"},
      {"tau-bench claimed as anthropic",
       {"import", "--format", "anthropic", Data("tau-bench_gpt-4o-airline.json"), "--session", "x"},
       1,
       "--format openai-chat"},
      {"openhands claimed as claude-code",
       {"import", "--format", "claude-code", Data("multi_swe_bench_llama4_output.jsonl"),
        "--session", "x"},
       1,
       "openhands"},
      {"session exists",
       {"import", "--format", "openai-chat", Data("tau-bench_gpt-4o-airline.json"), "--run", "4",
        "--session", "s"},
       1,
       "already has a session"},
      {"missing session: export",
       {"export", "--session", "nope", "--format", "recap"},
       1,
       "no session 'nope'"},
      {"missing session: compact", {"compact", "--session", "nope"}, 1, "no session 'nope'"},
      {"missing session: plan", {"plan", "--session", "nope"}, 1, "no session 'nope'"},
      {"missing session: show", {"sessions", "show", "nope"}, 1, "no session 'nope'"},
      {"unknown provider", {"compact", "--session", "s", "--provider", "magic"}, 2, "provider"},
      {"keep-turns out of range",
       {"compact", "--session", "s", "--keep-turns", "99"},
       2,
       "keep-turns"},
      {"config file missing",
       {"plan", "--session", "s", "--config", dir.File("nope.json")},
       1,
       "configuration file"},
  };
  for (const Case& c : cases) {
    DYNAMIC_SECTION(c.what) {
      std::vector<std::string> args = c.args;
      if (c.args[0] != "frobnicate") {
        args.push_back("--db");
        args.push_back(db);
      }
      r = Run(dir, args);
      INFO(r.err);
      CHECK(r.exit == c.exit);
      CHECK(r.err.find(c.says) != std::string::npos);
      CHECK(Slurp(db) == snapshot);
      // --json adds a machine-readable error on stdout.
      args.push_back("--json");
      r = Run(dir, args);
      CHECK(r.exit == c.exit);
      if (c.args[0] != "frobnicate") {
        CHECK(LastJsonLine(r.out).contains("error"));
      }
      CHECK(Slurp(db) == snapshot);
    }
  }

  SECTION("a database that is not recap's") {
    const std::string foreign = dir.File("foreign.db");
    // A minimal SQLite database with one table of someone else's, written by sqlite3 itself.
    {
      const std::string make = "python3 -c \"import sqlite3; c = sqlite3.connect('" + foreign +
                               "'); c.execute('create table t(x)'); c.commit()\" 2>/dev/null || "
                               "sqlite3 " +
                               Quote(foreign) + " 'create table t(x);'";
      REQUIRE(std::system(make.c_str()) == 0);
    }
    const std::string before = Slurp(foreign);
    REQUIRE(!before.empty());
    for (const std::vector<std::string>& args : std::vector<std::vector<std::string>>{
             {"import", "--format", "swe-agent", Data("marshmallow-1867_function_calling.traj"),
              "--session", "x", "--db", foreign},
             {"sessions", "list", "--db", foreign},
             {"export", "--session", "x", "--format", "recap", "--db", foreign}}) {
      r = Run(dir, args);
      CHECK(r.exit == 1);
      CHECK(r.err.find("not recap's") != std::string::npos);
      CHECK(Slurp(foreign) == before);
    }
  }

  SECTION("a database that does not exist is not created by reading commands") {
    r = Run(dir, {"sessions", "list", "--db", dir.File("missing.db")});
    CHECK(r.exit == 1);
    CHECK(r.err.find("no database") != std::string::npos);
    std::ifstream in(dir.File("missing.db"));
    CHECK(!in.good());
  }
}

TEST_CASE("progress shows on a terminal's stderr only, and is erased at the end", "[cli]") {
  TempDir dir("recap-cli");
  const std::string file = Data(Sources()[3].file);  // the larger Claude Code session
  const std::string db = dir.File("p.db");

  // On a terminal: a progress line for the import and for the compaction, erased afterwards.
  Ran r =
      RunOnTerminal(dir, {"import", "--format", "claude-code", file, "--db", db, "--session", "t"});
  REQUIRE(r.exit == 0);
  CHECK(r.out.find("imported 214 messages") != std::string::npos);
  CHECK(r.err.find("recap: importing ") != std::string::npos);
  const std::string erase = "\r\033[K";
  REQUIRE(r.err.size() >= erase.size());
  CHECK(r.err.compare(r.err.size() - erase.size(), erase.size(), erase) == 0);

  r = RunOnTerminal(dir, {"compact", "--db", db, "--session", "t", "--keep-turns", "1"});
  REQUIRE(r.exit == 0);
  CHECK(r.out.find("the checkpoint") != std::string::npos);
  CHECK(r.err.find("recap: compacting session 't'") != std::string::npos);
  CHECK(r.err.compare(r.err.size() - erase.size(), erase.size(), erase) == 0);

  // A failure erases the line before its message, which then stands on a line of its own.
  r = RunOnTerminal(dir, {"import", "--format", "anthropic", file, "--db", db, "--session", "u"});
  CHECK(r.exit == 1);
  const std::size_t message = r.err.find("recap import: ");
  REQUIRE(message != std::string::npos);
  CHECK(r.err.compare(message - erase.size(), erase.size(), erase) == 0);

  // Piped (stderr a file), even with the delay at 0: nothing but the command's output.
  Ran piped = Run(dir, {"import", "--format", "claude-code", file, "--db", db, "--session", "v"});
  REQUIRE(piped.exit == 0);
  CHECK(piped.err.empty());
}

TEST_CASE("every subcommand has --help", "[cli]") {
  TempDir dir("recap-cli");
  for (const std::vector<std::string>& args :
       std::vector<std::vector<std::string>>{{"--help"},
                                             {"import", "--help"},
                                             {"export", "--help"},
                                             {"stats", "--help"},
                                             {"plan", "--help"},
                                             {"compact", "--help"},
                                             {"uncompact", "--help"},
                                             {"recall", "--help"},
                                             {"sessions", "--help"},
                                             {"proxy", "--help"},
                                             {"report", "--help"}}) {
    const Ran r = Run(dir, args);
    CHECK(r.exit == 0);
    CHECK(r.out.find("usage: recap") != std::string::npos);
  }
}

TEST_CASE("issue 42 recap --version and recap version print the version CMake built", "[cli]") {
  TempDir dir("recap-cli");
  for (const char* flag : {"--version", "version"}) {
    const Ran r = Run(dir, {flag});
    CHECK(r.exit == 0);
    CHECK(r.out == std::string("recap ") + RECAP_TEST_PROJECT_VERSION + "\n");
  }
}

TEST_CASE("docs/cli.md holds every --help text verbatim", "[cli]") {
  TempDir dir("recap-cli");
  const std::string doc = Slurp(std::string(RECAP_TEST_DATA_DIR) + "/../../docs/cli.md");
  REQUIRE(!doc.empty());
  for (const std::vector<std::string>& args :
       std::vector<std::vector<std::string>>{{"--help"},
                                             {"import", "--help"},
                                             {"export", "--help"},
                                             {"stats", "--help"},
                                             {"plan", "--help"},
                                             {"compact", "--help"},
                                             {"uncompact", "--help"},
                                             {"recall", "--help"},
                                             {"sessions", "--help"},
                                             {"proxy", "--help"},
                                             {"report", "--help"}}) {
    const Ran r = Run(dir, args);
    REQUIRE(r.exit == 0);
    // The doc is written from a build with the http component; without it, compact's
    // --provider text differs (it says openai and anthropic are not available).
    if (args[0] == "compact" && r.out.find("--base-url") == std::string::npos) continue;
    // Without the proxy (no cpp-httplib, or a shared http component), `proxy --help` is the
    // same text; the top-level --help too.
    INFO("recap " << args[0] << " --help is not in docs/cli.md as printed:\n" << r.out);
    CHECK(doc.find(r.out) != std::string::npos);
  }
}

// --- OpenAI Responses items (issue 9) ----------------------------------------------------------

namespace {

// tau-bench run 5 as Responses input items, with reasoning before each of the model's turns
// (tests/data/SOURCES.md): a leading system message, then 38 items.
const char* const kResponsesFile = "tau-bench_gpt-4o-airline_run5.responses.json";

using OrderedJson = nlohmann::ordered_json;

// The fixture's items after its leading system message, in the file's member order (files the
// tests write from them keep the reasoning items byte for byte).
OrderedJson OrderedResponsesItems() {
  const OrderedJson items = OrderedJson::parse(Slurp(Data(kResponsesFile)));
  REQUIRE(items.size() > 2);
  REQUIRE(items[0].at("role") == "system");
  return OrderedJson(items.begin() + 1, items.end());
}

// The same, as values to compare.
Json ResponsesItems() { return Json::parse(OrderedResponsesItems().dump()); }

std::string ResponsesInstructions() {
  return Json::parse(Slurp(Data(kResponsesFile)))[0].at("content").get<std::string>();
}

// The same items, each the same JSON value (member order aside).
void CheckSameItems(const Json& got, const Json& want, const std::string& what) {
  REQUIRE(got.is_array());
  CHECK(got.size() == want.size());
  for (std::size_t i = 0; i < got.size() && i < want.size(); ++i) {
    INFO(what << ": item " << i << "\nwant " << want[i].dump().substr(0, 300) << "\ngot  "
              << got[i].dump().substr(0, 300));
    CHECK(got[i] == want[i]);
  }
}

// Each reasoning item of `exported` (the CLI's output, member order as written) exactly as in
// the fixture, byte for byte in its compact form, and followed by the item it preceded there.
// Returns how many there were.
std::size_t CheckReasoningExact(const std::string& exported) {
  const OrderedJson file = OrderedJson::parse(Slurp(Data(kResponsesFile)));
  std::map<std::string, std::size_t> at;
  for (std::size_t i = 0; i < file.size(); ++i) {
    if (file[i].value("type", "") == "reasoning") at[file[i].at("id").get<std::string>()] = i;
  }
  REQUIRE(!at.empty());
  const OrderedJson doc = OrderedJson::parse(exported);
  const OrderedJson& items = doc.is_object() ? doc.at("input") : doc;
  std::size_t seen = 0;
  for (std::size_t i = 0; i < items.size(); ++i) {
    if (items[i].value("type", "") != "reasoning") continue;
    ++seen;
    const std::string id = items[i].at("id").get<std::string>();
    REQUIRE(at.count(id) == 1);
    const OrderedJson& original = file[at[id]];
    INFO("reasoning item " << id);
    CHECK(items[i].dump() == original.dump());
    CHECK(items[i].at("encrypted_content") == original.at("encrypted_content"));
    REQUIRE(i + 1 < items.size());
    CHECK(Json::parse(items[i + 1].dump()) == Json::parse(file[at[id] + 1].dump()));
  }
  return seen;
}

}  // namespace

TEST_CASE(
    "issue 9 R4.5 R6.4 import and export --format openai-responses give the items back, reasoning "
    "byte-exact",
    "[cli]") {
  TempDir dir("recap-cli");
  const std::string db = dir.File("r.db");
  const Json items = ResponsesItems();
  std::size_t reasoning = 0;
  for (const Json& it : items) reasoning += it.value("type", "") == "reasoning" ? 1 : 0;
  REQUIRE(reasoning > 0);

  Ran r = Run(dir, {"import", "--format", "openai-responses", Data(kResponsesFile), "--session",
                    "r", "--db", db, "--json"});
  INFO(r.err);
  REQUIRE(r.exit == 0);
  const Json imported = LastJsonLine(r.out);
  CHECK(imported.at("format") == "openai-responses");
  CHECK(imported.at("instructions") == true);  // the leading system message
  // One message an item, except that reasoning goes into the message of the item after it.
  CHECK(imported.at("messages").get<std::size_t>() == items.size() - reasoning);

  // The instructions as the request's `instructions`, the items as its `input`.
  r = Run(dir, {"export", "--session", "r", "--db", db, "--format", "openai-responses", "--json"});
  REQUIRE(r.exit == 0);
  const Json doc = Json::parse(r.out);
  REQUIRE(doc.is_object());
  CHECK(doc.size() == 2);
  CHECK(doc.at("instructions") == ResponsesInstructions());
  CheckSameItems(doc.at("input"), items, "export");
  CHECK(CheckReasoningExact(r.out) == reasoning);
  // Indented (without --json), the same value.
  r = Run(dir, {"export", "--session", "r", "--db", db, "--format", "openai-responses"});
  REQUIRE(r.exit == 0);
  CHECK(Json::parse(r.out) == doc);

  // --history: each entry's message as its items (a call with its reasoning is two), which
  // joined are the transcript's items.
  r = Run(dir, {"export", "--session", "r", "--db", db, "--format", "openai-responses", "--history",
                "--json"});
  REQUIRE(r.exit == 0);
  const Json history = Json::parse(r.out);
  CHECK(history.at("format") == "openai-responses");
  CHECK(history.at("instructions") == ResponsesInstructions());
  Json joined = Json::array();
  bool several = false;
  for (const Json& e : history.at("history")) {
    CHECK(e.at("state") == "active");
    several = several || e.at("messages").size() > 1;
    for (const Json& it : e.at("messages")) joined.push_back(it);
  }
  CHECK(several);
  CheckSameItems(joined, items, "history");

  // Exported as items, imported again: the same items once more.
  r = Run(dir, {"export", "--session", "r", "--db", db, "--format", "openai-responses"});
  REQUIRE(r.exit == 0);
  { std::ofstream(dir.File("again.json")) << r.out; }
  r = Run(dir, {"import", "--format", "openai-responses", dir.File("again.json"), "--session",
                "again", "--db", db});
  REQUIRE(r.exit == 0);
  r = Run(dir, {"export", "--session", "again", "--db", db, "--format", "openai-responses"});
  REQUIRE(r.exit == 0);
  CHECK(Json::parse(r.out) == doc);
}

TEST_CASE(
    "issue 9 R4.5 a Responses request body imports, and its instructions and items export back",
    "[cli]") {
  TempDir dir("recap-cli");
  const std::string db = dir.File("b.db");
  const OrderedJson ordered = OrderedResponsesItems();
  const Json items = ResponsesItems();

  SECTION("instructions and input, with members recap does not keep") {
    const OrderedJson body = {
        {"model", "gpt-5"},
        {"instructions", ResponsesInstructions()},
        {"input", ordered},
        {"tools", OrderedJson::array({{{"type", "function"}, {"name", "calculate"}}})},
        {"store", false}};
    std::ofstream(dir.File("body.json")) << body.dump(2);
    Ran r = Run(dir, {"import", "--format", "openai-responses", dir.File("body.json"), "--session",
                      "b", "--db", db, "--json"});
    INFO(r.err);
    REQUIRE(r.exit == 0);
    CHECK(LastJsonLine(r.out).at("instructions") == true);
    r = Run(dir, {"export", "--session", "b", "--db", db, "--format", "openai-responses"});
    REQUIRE(r.exit == 0);
    const Json doc = Json::parse(r.out);
    CHECK(doc == Json({{"instructions", ResponsesInstructions()}, {"input", items}}));
    CHECK(CheckReasoningExact(r.out) > 0);
  }

  SECTION("with `instructions`, a developer message at the start of input stays an item") {
    OrderedJson input = OrderedJson::array(
        {{{"type", "message"},
          {"role", "developer"},
          {"content",
           OrderedJson::array({{{"type", "input_text"}, {"text", "Answer in English."}}})}}});
    for (const OrderedJson& it : ordered) input.push_back(it);
    const OrderedJson body = {{"instructions", "Be brief."}, {"input", input}};
    std::ofstream(dir.File("body.json")) << body.dump();
    Ran r = Run(dir, {"import", "--format", "openai-responses", dir.File("body.json"), "--session",
                      "b", "--db", db, "--json"});
    INFO(r.err);
    REQUIRE(r.exit == 0);
    CHECK(LastJsonLine(r.out).at("instructions_chars") == 9);
    r = Run(dir, {"export", "--session", "b", "--db", db, "--format", "openai-responses"});
    REQUIRE(r.exit == 0);
    CHECK(Json::parse(r.out) == Json::parse(body.dump()));
    CHECK(CheckReasoningExact(r.out) > 0);
  }

  SECTION("without `instructions`, a leading developer message becomes them") {
    OrderedJson input = OrderedJson::array({{{"role", "developer"}, {"content", "Be brief."}}});
    for (const OrderedJson& it : ordered) input.push_back(it);
    std::ofstream(dir.File("items.json")) << input.dump();
    Ran r = Run(dir, {"import", "--format", "openai-responses", dir.File("items.json"), "--session",
                      "b", "--db", db, "--json"});
    INFO(r.err);
    REQUIRE(r.exit == 0);
    CHECK(LastJsonLine(r.out).at("instructions") == true);
    r = Run(dir, {"export", "--session", "b", "--db", db, "--format", "openai-responses"});
    REQUIRE(r.exit == 0);
    CHECK(Json::parse(r.out) == Json({{"instructions", "Be brief."}, {"input", items}}));
  }

  SECTION("no instructions: an array out, as it came in") {
    std::ofstream(dir.File("items.json")) << ordered.dump();
    Ran r = Run(dir, {"import", "--format", "openai-responses", dir.File("items.json"), "--session",
                      "b", "--db", db, "--json"});
    REQUIRE(r.exit == 0);
    CHECK(LastJsonLine(r.out).at("instructions") == false);
    r = Run(dir, {"export", "--session", "b", "--db", db, "--format", "openai-responses"});
    REQUIRE(r.exit == 0);
    CheckSameItems(Json::parse(r.out), items, "export");
  }

  SECTION("`input` as a string is one user message") {
    std::ofstream(dir.File("body.json")) << R"({"model": "gpt-5", "input": "Hello there"})";
    Ran r = Run(dir, {"import", "--format", "openai-responses", dir.File("body.json"), "--session",
                      "b", "--db", db, "--json"});
    INFO(r.err);
    REQUIRE(r.exit == 0);
    CHECK(LastJsonLine(r.out).at("messages") == 1);
    r = Run(dir, {"export", "--session", "b", "--db", db, "--format", "openai-responses"});
    REQUIRE(r.exit == 0);
    CHECK(Json::parse(r.out) == Json::parse(R"([{"role": "user", "content": "Hello there"}])"));
  }
}

TEST_CASE(
    "issue 9 R3.4 R4.5 compact then export as Responses items: every call keeps its output, kept "
    "reasoning unchanged",
    "[cli]") {
  TempDir dir("recap-cli");
  const std::string db = dir.File("c.db");
  const Json items = ResponsesItems();
  Ran r = Run(dir, {"import", "--format", "openai-responses", Data(kResponsesFile), "--session",
                    "c", "--db", db});
  INFO(r.err);
  REQUIRE(r.exit == 0);

  for (const char* keep_turns : {"2", "1", "0"}) {
    INFO("--keep-turns " << keep_turns);
    r = Run(dir, {"compact", "--session", "c", "--db", db, "--provider", "offline", "--keep-turns",
                  keep_turns, "--json"});
    REQUIRE(r.exit == 0);
    r = Run(dir,
            {"export", "--session", "c", "--db", db, "--format", "openai-responses", "--json"});
    REQUIRE(r.exit == 0);
    const Json doc = Json::parse(r.out);
    CHECK(doc.at("instructions") == ResponsesInstructions());
    const Json& input = doc.at("input");
    CHECK(input.size() < items.size());
    // In order: every output answers a call before it, and every call is answered.
    std::multiset<std::string> open;
    std::set<std::string> calls, outputs;
    for (const Json& it : input) {
      const std::string type = it.value("type", "");
      if (type == "function_call") {
        open.insert(it.at("call_id").get<std::string>());
        calls.insert(it.at("call_id").get<std::string>());
      } else if (type == "function_call_output") {
        const std::string id = it.at("call_id").get<std::string>();
        outputs.insert(id);
        const auto found = open.find(id);
        CHECK(found != open.end());  // no output without its call
        if (found != open.end()) open.erase(found);
      }
    }
    CHECK(open.empty());  // no call without its output
    CHECK(calls == outputs);
    // The kept items are the fixture's last ones (after the checkpoint), reasoning included.
    CheckReasoningExact(r.out);
    const std::size_t kept = input.size() - 1;
    REQUIRE(kept <= items.size());
    CheckSameItems(Json(input.begin() + 1, input.end()), Json(items.end() - kept, items.end()),
                   "kept");
    // The history still has every item, the compacted ones marked.
    r = Run(dir, {"export", "--session", "c", "--db", db, "--format", "openai-responses",
                  "--history", "--json"});
    REQUIRE(r.exit == 0);
    std::size_t compacted = 0;
    const Json history = Json::parse(r.out);
    for (const Json& e : history.at("history")) {
      compacted += e.at("state") == "compacted" ? 1 : 0;
    }
    CHECK(compacted > 0);
  }
}

TEST_CASE(
    "issue 9 R8.1 a Responses file under another --format is told to use openai-responses, and the "
    "reverse",
    "[cli]") {
  TempDir dir("recap-cli");
  const std::string db = dir.File("s.db");
  Ran r = Run(dir, {"import", "--format", "openai-responses", Data(kResponsesFile), "--session",
                    "s", "--db", db});
  REQUIRE(r.exit == 0);
  const std::string snapshot = Slurp(db);

  std::ofstream(dir.File("body.json"))
      << Json({{"model", "gpt-5"}, {"input", ResponsesItems()}}).dump();
  std::ofstream(dir.File("bad-instructions.json"))
      << R"({"instructions": ["Be brief."], "input": []})";
  std::ofstream(dir.File("bad-input.json")) << R"({"input": {"role": "user", "content": "hi"}})";
  std::ofstream(dir.File("chat-tool.json")) << R"([
      {"role": "user", "content": "hi"},
      {"role": "tool", "tool_call_id": "c", "content": "x"}])";

  struct Case {
    const char* what;
    std::vector<std::string> args;
    int exit;
    const char* says;
  };
  const std::string items = Data(kResponsesFile);
  const std::vector<Case> cases = {
      {"items as openai-chat",
       {"import", "--format", "openai-chat", items, "--session", "x"},
       1,
       "--format openai-responses"},
      {"items as anthropic",
       {"import", "--format", "anthropic", items, "--session", "x"},
       1,
       "--format openai-responses"},
      {"items as recap",
       {"import", "--format", "recap", items, "--session", "x"},
       1,
       "--format openai-responses"},
      {"request body as openai-chat",
       {"import", "--format", "openai-chat", dir.File("body.json"), "--session", "x"},
       1,
       "--format openai-responses"},
      {"request body as anthropic",
       {"import", "--format", "anthropic", dir.File("body.json"), "--session", "x"},
       1,
       "--format openai-responses"},
      {"tau-bench as openai-responses",
       {"import", "--format", "openai-responses", Data("tau-bench_gpt-4o-airline.json"),
        "--session", "x"},
       1,
       "--format openai-chat"},
      {"chat with a tool message as openai-responses",
       {"import", "--format", "openai-responses", dir.File("chat-tool.json"), "--session", "x"},
       1,
       "input[1].role"},
      {"swe-agent as openai-responses",
       {"import", "--format", "openai-responses", Data("marshmallow-1867_function_calling.traj"),
        "--session", "x"},
       1,
       "--format swe-agent"},
      {"instructions not a string",
       {"import", "--format", "openai-responses", dir.File("bad-instructions.json"), "--session",
        "x"},
       1,
       "`instructions` must be a string"},
      {"input not an array",
       {"import", "--format", "openai-responses", dir.File("bad-input.json"), "--session", "x"},
       1,
       "`input` must be an array"},
      {"--run with openai-responses",
       {"import", "--format", "openai-responses", items, "--run", "1", "--session", "x"},
       2,
       "--run is for"},
      {"unknown import format lists it",
       {"import", "--format", "responses", items, "--session", "x"},
       2,
       "openai-responses"},
      {"unknown export format lists it",
       {"export", "--format", "responses", "--session", "s"},
       2,
       "openai-responses"},
  };
  for (const Case& c : cases) {
    DYNAMIC_SECTION(c.what) {
      std::vector<std::string> args = c.args;
      args.push_back("--db");
      args.push_back(db);
      r = Run(dir, args);
      INFO(r.err);
      CHECK(r.exit == c.exit);
      CHECK(r.err.find(c.says) != std::string::npos);
      CHECK(Slurp(db) == snapshot);
      args.push_back("--json");
      r = Run(dir, args);
      CHECK(r.exit == c.exit);
      CHECK(LastJsonLine(r.out).contains("error"));
      CHECK(Slurp(db) == snapshot);
    }
  }

  SECTION("a session with Anthropic thinking cannot be written as items, and says what to use") {
    std::ofstream(dir.File("thinking.json")) << R"([
      {"role": "user", "content": "hi"},
      {"role": "assistant", "content": [{"type": "thinking", "thinking": "hm", "signature": "c2ln"},
                                        {"type": "text", "text": "hello"}]}])";
    r = Run(dir, {"import", "--format", "anthropic", dir.File("thinking.json"), "--session", "t",
                  "--db", db});
    REQUIRE(r.exit == 0);
    r = Run(dir, {"export", "--format", "openai-responses", "--session", "t", "--db", db});
    INFO(r.err);
    CHECK(r.exit == 1);
    CHECK(r.err.find("thinking") != std::string::npos);
    CHECK(r.err.find("--format recap") != std::string::npos);
  }
}

TEST_CASE(
    "issue 9 R1 compact --provider openai-responses without --base-url or --model is a usage error "
    "naming what is missing",
    "[cli]") {
  TempDir dir("recap-cli");
  const std::string db = dir.File("p.db");
  Ran r = Run(dir, {"import", "--format", "openai-responses", Data(kResponsesFile), "--session",
                    "p", "--db", db});
  REQUIRE(r.exit == 0);
  const std::string snapshot = Slurp(db);
  r = Run(dir, {"compact", "--help"});
  REQUIRE(r.exit == 0);
  CHECK(r.out.find("openai-responses") != std::string::npos);
  const bool http = r.out.find("--base-url") != std::string::npos;

  struct Case {
    std::vector<std::string> options;
    std::vector<std::string> says;
    std::vector<std::string> not_says;
  };
  const std::vector<Case> cases = {
      {{"--model", "gpt-5"}, {"--provider openai-responses needs --base-url URL"}, {"--model M"}},
      {{"--base-url", "https://api.openai.com/v1"},
       {"--provider openai-responses needs --model M"},
       {"--base-url URL"}},
      {{}, {"--base-url URL", "--model M"}, {}},
  };
  for (const Case& c : cases) {
    std::vector<std::string> args = {"compact",    "--session",       "p", "--db", db,
                                     "--provider", "openai-responses"};
    args.insert(args.end(), c.options.begin(), c.options.end());
    r = Run(dir, args);
    INFO(r.err);
    CHECK(r.exit == 2);
    if (http) {
      for (const std::string& s : c.says) CHECK(r.err.find(s) != std::string::npos);
      for (const std::string& s : c.not_says) CHECK(r.err.find(s) == std::string::npos);
    } else {
      CHECK(r.err.find("HTTP component") != std::string::npos);
    }
    args.push_back("--json");
    r = Run(dir, args);
    CHECK(r.exit == 2);
    CHECK(LastJsonLine(r.out).at("error").at("kind") == "usage");
    CHECK(Slurp(db) == snapshot);
  }
  // The offline summarizer's refusal of the HTTP options names it too.
  r = Run(dir, {"compact", "--session", "p", "--db", db, "--model", "gpt-5"});
  CHECK(r.exit == 2);
  CHECK(r.err.find("openai-responses") != std::string::npos);
  CHECK(Slurp(db) == snapshot);
}

// --- a PostgreSQL URL as --db (issue 10) --------------------------------------------------------

namespace {

// `url` with its user info's password taken out ("postgresql://user:pw@..." -> "user@").
std::string WithoutPassword(const std::string& url, const std::string& password) {
  std::string out = url;
  const std::string pw = ":" + password + "@";
  const std::size_t at = out.find(pw);
  REQUIRE(at != std::string::npos);
  out.replace(at, pw.size(), "@");
  return out;
}

}  // namespace

TEST_CASE("issue 10 R8 a --db URL is shown without its password, even when no server answers",
          "[cli]") {
  TempDir dir("recap-cli");
  // Nothing listens on a socket in a directory that does not exist: connecting fails at once.
  const std::string where = "host=" + dir.File("no-server") + "&port=1";
  struct Case {
    std::string url;
    std::string secret;
    std::string shown;  // how the message shows the URL
  };
  const std::vector<Case> cases = {
      {"postgresql://agent:s3cret-in-userinfo@/agents?" + where, "s3cret-in-userinfo",
       "postgresql://agent:***@/agents?"},
      {"postgres://agent:p%40ss%2Fword-x@/agents?" + where, "p%40ss%2Fword-x",
       "postgres://agent:***@/agents?"},
      {"postgresql:///agents?user=agent&password=s3cret-in-query&" + where, "s3cret-in-query",
       "&password=***&"},
  };
  for (const Case& c : cases) {
    for (const std::vector<std::string>& args : std::vector<std::vector<std::string>>{
             {"sessions", "list", "--db", c.url},
             {"stats", "--session", "s", "--db", c.url, "--json"},
             {"import", "--format", "swe-agent", Data("marshmallow-1867_function_calling.traj"),
              "--session", "s", "--db", c.url, "--json"}}) {
      const Ran r = Run(dir, args);
      INFO(args[0] << " on " << c.url << "\nstderr: " << r.err << "\nstdout: " << r.out);
#if RECAP_TEST_HAVE_POSTGRES
      CHECK(r.exit == 1);
      CHECK(r.err.find("cannot open the PostgreSQL database") != std::string::npos);
#else
      // Built without the component: a usage error that says how to build it.
      CHECK(r.exit == 2);
      CHECK(r.err.find("RECAP_BUILD_POSTGRES=ON") != std::string::npos);
#endif
      CHECK(r.err.find(c.shown) != std::string::npos);
      CHECK(r.err.find(c.secret) == std::string::npos);
      CHECK(r.out.find(c.secret) == std::string::npos);
      CHECK(r.err.find("p@ss/word-x") == std::string::npos);
    }
  }
  // Nothing was created in the working directory: a URL is no file name.
  CHECK(!std::ifstream(dir.File("recap.db")).good());
}

#if RECAP_TEST_HAVE_POSTGRES

TEST_CASE("issue 10 R8 every subcommand works on a PostgreSQL URL given as --db",
          "[cli][postgres]") {
  recap::testing::PostgresTestServer& server = recap::testing::PostgresTestServer::Shared();
  const std::string database = recap::testing::PostgresTestServer::UniqueName("cli");
  server.CreateDatabase(database);
  const std::string password = server.password();
  const std::string url = server.Url(database);  // postgresql://recap:PASSWORD@/DB?host=...
  REQUIRE(url.find(password) != std::string::npos);
  TempDir dir("recap-cli");

  // Every run's output, to look for the password in at the end.
  std::vector<std::pair<std::string, Ran>> runs;
  auto run = [&](const std::vector<std::string>& args,
                 const std::vector<std::string>& env = {}) -> Ran {
    Ran r = Run(dir, args, env);
    std::string what;
    for (const std::string& a : args) what += (a == url ? std::string("URL") : a) + " ";
    runs.emplace_back(what, r);
    return r;
  };

  struct Imported {
    const Source* source;
    std::string session;
    std::size_t messages = 0;
  };
  std::vector<Imported> imported;
  // Two sessions in the same database: tau-bench (OpenAI chat, with tool calls and
  // instructions) and a Claude Code session (Anthropic blocks).
  for (const Source& s : Sources()) {
    if (s.name != "tau-bench run 17" && s.name != "claude-code sample") continue;
    const std::string session = s.format + "-session";
    std::vector<std::string> import = {"import", "--format", s.format, Data(s.file), "--session",
                                       session,  "--db",     url,      "--json"};
    if (!s.run.empty()) {
      import.push_back("--run");
      import.push_back(s.run);
    }
    Ran r = run(import);
    INFO(r.err);
    REQUIRE(r.exit == 0);
    const Json out = LastJsonLine(r.out);
    CHECK(out.at("session") == session);
    CHECK(out.at("db").get<std::string>().find("postgresql://recap:***@/" + database) == 0);
    imported.push_back({&s, session, out.at("messages").get<std::size_t>()});
    REQUIRE(imported.back().messages > 0);
  }
  REQUIRE(imported.size() == 2);
  // recap's tables are in the schema `recap` of that database.
  CHECK_NOTHROW(server.Exec(database,
                            "DO $$ BEGIN IF NOT EXISTS (SELECT 1 FROM information_schema.tables "
                            "WHERE table_schema = 'recap' AND table_name = 'sessions') THEN "
                            "RAISE EXCEPTION 'no recap.sessions'; END IF; END $$"));

  // The same session again: refused, naming the database without its password.
  {
    const Imported& first = imported[0];
    std::vector<std::string> again = {"import",
                                      "--format",
                                      first.source->format,
                                      Data(first.source->file),
                                      "--session",
                                      first.session,
                                      "--db",
                                      url,
                                      "--run",
                                      "3"};
    Ran r = run(again);
    CHECK(r.exit == 1);
    CHECK(r.err.find("already has a session") != std::string::npos);
    CHECK(r.err.find("postgresql://recap:***@") != std::string::npos);
  }

  Ran r = run({"sessions", "list", "--db", url, "--json"});
  REQUIRE(r.exit == 0);
  {
    const Json sessions = LastJsonLine(r.out).at("sessions");
    REQUIRE(sessions.size() == 2);  // the instructions' companion session hidden
    std::map<std::string, std::size_t> counts;
    for (const Json& s : sessions) {
      counts[s.at("session").get<std::string>()] = s.at("messages").get<std::size_t>();
    }
    for (const Imported& i : imported) CHECK(counts[i.session] == i.messages);
  }
  r = run({"sessions", "list", "--db", url});
  REQUIRE(r.exit == 0);
  for (const Imported& i : imported) CHECK(r.out.find(i.session) != std::string::npos);

  for (const Imported& i : imported) {
    INFO(i.source->name);
    const std::string& format = i.source->export_format;
    r = run({"stats", "--session", i.session, "--db", url, "--json"});
    REQUIRE(r.exit == 0);
    Json stats = LastJsonLine(r.out);
    CHECK(stats.at("messages").get<std::size_t>() == i.messages);
    CHECK(stats.at("history_entries").get<std::size_t>() == i.messages);
    CHECK(stats.at("version").get<std::uint64_t>() == 1);
    CHECK(stats.at("tool_pairs").get<std::size_t>() > 0);
    // tau-bench's leading system message was kept apart, as the instructions.
    CHECK((stats.at("instructions_chars").get<std::size_t>() > 0) ==
          (i.source->format == "openai-chat"));
    r = run({"sessions", "show", i.session, "--db", url, "--json"});
    REQUIRE(r.exit == 0);
    CHECK(LastJsonLine(r.out).at("active").size() == i.messages);

    r = run({"export", "--session", i.session, "--db", url, "--format", format, "--json"});
    REQUIRE(r.exit == 0);
    const Pairing before = PairingOf(Json::parse(r.out), format);

    r = run({"plan", "--session", i.session, "--db", url, "--json", "--keep-turns", "1"});
    REQUIRE(r.exit == 0);
    const Json plan = LastJsonLine(r.out);
    if (plan.at("cut").at("skip") == "uncertain_tool_results") {
      r = run({"sessions", "recover", i.session, "--db", url, "--acknowledge", "--json"});
      REQUIRE(r.exit == 0);
    }
    r = run({"compact", "--session", i.session, "--db", url, "--provider", "offline",
             "--keep-turns", "1", "--json"});
    INFO(r.err);
    REQUIRE(r.exit == 0);
    const Json result = LastJsonLine(r.out);
    CHECK(result.at("type") == "result");
    REQUIRE(plan.at("cut").at("ok").get<bool>());
    CHECK(result.at("compacted").get<bool>());
    CHECK(result.at("before").at("messages").get<std::size_t>() == i.messages);
    CHECK(result.at("after").at("messages").get<std::size_t>() < i.messages);
    CHECK(result.at("after").at("chars").get<std::size_t>() <
          result.at("before").at("chars").get<std::size_t>());
    CHECK(result.at("after").at("version").get<std::uint64_t>() >
          result.at("before").at("version").get<std::uint64_t>());

    // Every tool call keeps its result, every result its call.
    r = run({"export", "--session", i.session, "--db", url, "--format", format, "--json"});
    REQUIRE(r.exit == 0);
    const Pairing after = PairingOf(Json::parse(r.out), format);
    CHECK(after.Unanswered().empty());
    CHECK(Subset(after.Orphans(), before.Orphans()));

    // The history still holds every imported message, and the checkpoint.
    r = run({"export", "--session", i.session, "--db", url, "--format", "recap", "--history",
             "--json"});
    REQUIRE(r.exit == 0);
    std::set<std::string> ids;
    std::size_t checkpoints = 0;
    const Json history = Json::parse(r.out);
    for (const Json& e : history.at("history")) {
      if (e.at("summary").get<bool>()) {
        ++checkpoints;
      } else {
        ids.insert(e.at("id").get<std::string>());
      }
    }
    CHECK(ids.size() == i.messages);
    CHECK(checkpoints == 1);
    r = run({"stats", "--session", i.session, "--db", url, "--json"});
    REQUIRE(r.exit == 0);
    stats = LastJsonLine(r.out);
    CHECK(stats.at("checkpoints").get<std::size_t>() == 1);
    CHECK(stats.at("messages").get<std::size_t>() ==
          result.at("after").at("messages").get<std::size_t>());
    CHECK(stats.at("history_compacted").get<std::size_t>() ==
          result.at("summarized_messages").get<std::size_t>());
    r = run({"sessions", "history", i.session, "--db", url});
    CHECK(r.exit == 0);
    CHECK(r.out.find("compacted") != std::string::npos);

    // What the compaction summarized is found again, and the compaction undone (R18).
    r = run({"recall", "--session", i.session, "--db", url, "--turns", "0-1", "--json"});
    INFO(r.err);
    REQUIRE(r.exit == 0);
    const Json recalled = LastJsonLine(r.out);
    REQUIRE(!recalled.at("messages").empty());
    CHECK(recalled.at("messages")[0].at("state") == "summarized");
    r = run({"uncompact", "--session", i.session, "--db", url});
    INFO(r.err);
    REQUIRE(r.exit == 0);
    CHECK(r.out.find("undid compaction:") != std::string::npos);
    CHECK(r.out.find(" in postgresql://recap:***@/" + database) != std::string::npos);
    r = run({"stats", "--session", i.session, "--db", url, "--json"});
    REQUIRE(r.exit == 0);
    CHECK(LastJsonLine(r.out).at("messages") == result.at("before").at("messages"));
    r = run({"uncompact", "--session", i.session, "--db", url, "--json"});
    REQUIRE(r.exit == 0);
    CHECK(LastJsonLine(r.out).at("undone") == false);
  }

  // Text output names the database, without the password.
  r = run({"compact", "--session", imported[0].session, "--db", url, "--keep-turns", "0"});
  CHECK(r.exit == 0);
  CHECK(r.out.find(" in postgresql://recap:***@/" + database) != std::string::npos);

  // A session that is not there: the usual message, nothing about a file.
  for (const std::vector<std::string>& args : std::vector<std::vector<std::string>>{
           {"export", "--session", "nope", "--format", "recap", "--db", url},
           {"plan", "--session", "nope", "--db", url},
           {"compact", "--session", "nope", "--db", url},
           {"recall", "--session", "nope", "--db", url, "x"},
           {"uncompact", "--session", "nope", "--db", url},
           {"sessions", "show", "nope", "--db", url}}) {
    r = run(args);
    INFO(r.err);
    CHECK(r.exit == 1);
    CHECK(r.err.find("no session 'nope'") != std::string::npos);
    CHECK(r.err.find("no database") == std::string::npos);
    CHECK(r.err.find("recap sessions list --db 'postgresql://recap:***@") != std::string::npos);
  }

  // The password from PGPASSWORD instead of the URL, or in a password= parameter.
  const std::string bare = WithoutPassword(url, password);
  r = run({"sessions", "list", "--db", bare, "--json"}, {"PGPASSWORD=" + password});
  INFO(r.err);
  CHECK(r.exit == 0);
  CHECK(LastJsonLine(r.out).at("sessions").size() == 2);
  r = run({"stats", "--session", imported[1].session, "--db", bare + "&password=" + password,
           "--json"});
  CHECK(r.exit == 0);
  r = run({"import", "--format", "swe-agent", Data("marshmallow-1867_function_calling.traj"),
           "--session", "swe", "--db", bare + "&password=" + password, "--json"});
  REQUIRE(r.exit == 0);
  CHECK(LastJsonLine(r.out).at("db").get<std::string>().find("&password=***") != std::string::npos);
  r = run({"sessions", "list", "--db", url, "--json"});
  CHECK(LastJsonLine(r.out).at("sessions").size() == 3);

  // A wrong password: refused, saying so, and the wrong password is not repeated either.
  const std::string wrong = "wrong-" + recap::testing::PostgresTestServer::UniqueName("pw");
  std::string bad_url = url;
  bad_url.replace(bad_url.find(password), password.size(), wrong);
  for (const std::vector<std::string>& args : std::vector<std::vector<std::string>>{
           {"sessions", "list", "--db", bad_url},
           {"stats", "--session", imported[0].session, "--db", bad_url, "--json"},
           {"import", "--format", "swe-agent", Data("marshmallow-1867_function_calling.traj"),
            "--session", "other", "--db", bad_url}}) {
    r = run(args);
    INFO(r.err);
    CHECK(r.exit == 1);
    CHECK(r.err.find("password authentication failed") != std::string::npos);
    CHECK(r.err.find("PGPASSWORD") != std::string::npos);
    CHECK(r.err.find("postgresql://recap:***@/" + database) != std::string::npos);
    CHECK(r.err.find(wrong) == std::string::npos);
    CHECK(r.out.find(wrong) == std::string::npos);
  }
  // Nothing was imported by the refused import.
  r = run({"sessions", "list", "--db", url, "--json"});
  CHECK(LastJsonLine(r.out).at("sessions").size() == 3);

  // A reading command on a database that has no recap tables yet creates none, and says what
  // to type in the command's words.
  const std::string empty_database = recap::testing::PostgresTestServer::UniqueName("cli_empty");
  server.CreateDatabase(empty_database);
  for (const std::vector<std::string>& args : std::vector<std::vector<std::string>>{
           {"sessions", "list", "--db", server.Url(empty_database)},
           {"stats", "--session", "s", "--db", server.Url(empty_database)}}) {
    r = run(args);
    INFO(r.err);
    CHECK(r.exit == 1);
    CHECK(r.err.find("holds no recap sessions yet") != std::string::npos);
    CHECK(r.err.find("Import a session first (`recap import") != std::string::npos);
  }
  CHECK_THROWS(server.Exec(empty_database, "SELECT 1 FROM recap.sessions"));
  server.DropDatabase(empty_database);

  // The password appears in no output of any run.
  for (const auto& [what, ran] : runs) {
    INFO("recap " << what);
    CHECK(ran.out.find(password) == std::string::npos);
    CHECK(ran.err.find(password) == std::string::npos);
    // The command's words: none of the store's C++ options.
    CHECK(ran.err.find("StoreOptions") == std::string::npos);
    CHECK(ran.out.find("StoreOptions") == std::string::npos);
  }
  // A URL is no file name: nothing was created in the working directory.
  CHECK(!std::ifstream(dir.File("recap.db")).good());
  server.DropDatabase(database);
}

#endif  // RECAP_TEST_HAVE_POSTGRES

// --- Provider checkpoints (issue 19, R14.1) ----------------------------------------------------

TEST_CASE(
    "issue 19 R14.1 sessions holding the providers' compaction artifacts import, export "
    "and compact without losing them",
    "[cli]") {
  struct Case {
    const char* file;
    const char* format;
    bool readable;  // Anthropic's summary shows as text; OpenAI's is encrypted
  };
  for (const Case& c : {Case{"claude-code-sample.compaction.anthropic.json", "anthropic", true},
                        Case{"tau-bench_gpt-4o-airline_run5.compaction.responses.json",
                             "openai-responses", false}}) {
    DYNAMIC_SECTION(c.format) {
      TempDir dir("recap-cli");
      const std::string db = dir.File("p.db");
      const Json file = Json::parse(Slurp(Data(c.file)));
      Json artifact;
      for (const Json& m : file) {
        if (m.value("type", "") == "compaction") artifact = m;
        if (m.contains("content") && m.at("content").is_array()) {
          for (const Json& b : m.at("content")) {
            if (b.value("type", "") == "compaction" && b.at("content").is_string()) artifact = b;
          }
        }
      }
      REQUIRE(artifact.is_object());
      Ran r = Run(dir, {"import", "--format", c.format, Data(c.file), "--session", "p", "--db", db,
                        "--json"});
      INFO(r.err);
      REQUIRE(r.exit == 0);

      // Stored and exported: the same document, artifacts included.
      r = Run(dir, {"export", "--session", "p", "--db", db, "--format", c.format, "--json"});
      REQUIRE(r.exit == 0);
      Json exported = Json::parse(r.out);
      if (exported.is_object()) {  // Responses: {"instructions", "input"}
        Json items = Json::array({{{"role", "system"}, {"content", exported.at("instructions")}}});
        for (const Json& it : exported.at("input")) items.push_back(it);
        exported = items;
      }
      CHECK(exported == file);

      // The plan counts from the artifact on and says what goes before it.
      r = Run(dir, {"plan", "--session", "p", "--db", db, "--json"});
      REQUIRE(r.exit == 0);
      const Json plan = LastJsonLine(r.out);
      CHECK(plan.at("provider_retired_messages").get<std::size_t>() > 0);

      r = Run(dir, {"compact", "--session", "p", "--db", db, "--provider", "offline",
                    "--keep-turns", "1", "--json"});
      REQUIRE(r.exit == 0);
      CHECK(r.out.find("\"provider_checkpoint\"") != std::string::npos);
      r = Run(dir, {"export", "--session", "p", "--db", db, "--format", c.format, "--json"});
      REQUIRE(r.exit == 0);
      // An encrypted artifact stays, byte for byte; a readable one went into recap's checkpoint.
      const std::string encrypted = artifact.value("encrypted_content", "");
      CHECK((r.out.find(encrypted) != std::string::npos) == !c.readable);

      // Nothing is lost: the history holds every artifact as it came.
      r = Run(dir, {"export", "--session", "p", "--db", db, "--format", c.format, "--history",
                    "--json"});
      REQUIRE(r.exit == 0);
      CHECK(r.out.find(encrypted) != std::string::npos);
    }
  }
}

TEST_CASE(
    "issue 20 R15 with compaction.background on, compact --auto still compacts and plan "
    "says where a host would start",
    "[cli]") {
  TempDir dir("recap-cli");
  const std::string db = dir.File("s.db");
  Ran r = Run(dir, {"import", "--format", "claude-code",
                    Data("experiments-worktrees__ef958aa1-0e93-49f0-bb71-150f63befcd1.jsonl"),
                    "--session", "s", "--db", db});
  REQUIRE(r.exit == 0);
  // The session (about 22,600 tokens) past the trigger of a 25,000-token window (21,250), under
  // the window and the hard limit: where a host's Prepare would hand it to a worker.
  {
    std::ofstream(dir.File("recap.json"))
        << R"({"compaction": {"background": true}, "provider": {"contextWindow": 25000}})";
  }
  r = Run(dir,
          {"plan", "--session", "s", "--db", db, "--config", dir.File("recap.json"), "--json"});
  INFO(r.err);
  REQUIRE(r.exit == 0);
  const Json plan = LastJsonLine(r.out).at("background");
  CHECK(plan.at("enabled") == true);
  CHECK(plan.at("reached") == true);
  CHECK(plan.at("in_flight") == false);  // a command is never a host with one running
  CHECK(LastJsonLine(r.out).at("trigger") == true);
  r = Run(dir, {"plan", "--session", "s", "--db", db, "--config", dir.File("recap.json")});
  CHECK(r.out.find("background at") != std::string::npos);
  // A command lives for one call: it compacts in Prepare, not on a worker that dies with it.
  r = Run(dir, {"compact", "--auto", "--session", "s", "--db", db, "--config",
                dir.File("recap.json"), "--json"});
  INFO(r.out);
  REQUIRE(r.exit == 0);
  CHECK(r.out.find("\"compaction_completed\"") != std::string::npos);
  CHECK(r.out.find("\"background\"") == std::string::npos);
}

TEST_CASE("issue 19 R14.3 plan says what clearing would do, and compact --auto clears first",
          "[cli]") {
  TempDir dir("recap-cli");
  const std::string db = dir.File("s.db");
  Ran r = Run(dir, {"import", "--format", "claude-code",
                    Data("experiments-worktrees__ef958aa1-0e93-49f0-bb71-150f63befcd1.jsonl"),
                    "--session", "s", "--db", db});
  REQUIRE(r.exit == 0);
  {
    std::ofstream(dir.File("recap.json"))
        << R"({"compaction": {"clearToolResults": {"keepRecent": 3, "minFreeChars": 1000}}})";
  }
  r = Run(dir, {"plan", "--session", "s", "--db", db, "--config", dir.File("recap.json"),
                "--max-context-chars", "40000", "--json"});
  INFO(r.err);
  REQUIRE(r.exit == 0);
  const Json plan = LastJsonLine(r.out).at("clear_tool_results");
  CHECK(plan.at("enabled") == true);
  CHECK(plan.at("results").get<std::size_t>() > 0);
  CHECK(plan.at("would_clear") == true);
  r = Run(dir, {"plan", "--session", "s", "--db", db, "--config", dir.File("recap.json"),
                "--max-context-chars", "40000"});
  CHECK(r.out.find("clearable results") != std::string::npos);

  r = Run(dir, {"compact", "--auto", "--session", "s", "--db", db, "--config",
                dir.File("recap.json"), "--max-context-chars", "40000", "--json"});
  REQUIRE(r.exit == 0);
  CHECK(r.out.find("\"tool_results_cleared\"") != std::string::npos);
  // The originals are all in the history.
  r = Run(dir,
          {"export", "--session", "s", "--db", db, "--format", "recap", "--history", "--json"});
  REQUIRE(r.exit == 0);
  CHECK(r.out.find("[tool result cleared to save context; the original is in the session "
                   "history]") != std::string::npos);
  std::size_t compacted = 0;
  const Json history = Json::parse(r.out);
  for (const Json& e : history.at("history")) {
    compacted += e.value("state", "") == "compacted" ? 1 : 0;
  }
  CHECK(compacted >= plan.at("messages").get<std::size_t>());
}

// --- recall and uncompact (SPEC R18) ------------------------------------------------------------

namespace {

// A conversation in OpenAI chat form: instructions, then `turns` turns, the first naming a fact
// (ZEBRA-4471, in a tool result: eu-west-3) that a compaction summarizes.
Json RecallConversation(int first, int turns) {
  Json messages = Json::array();
  if (first == 0) {
    messages.push_back({{"role", "system"}, {"content", "You deploy services."}});
    messages.push_back({{"role", "user"}, {"content", "Deploy with the key ZEBRA-4471."}});
    messages.push_back(
        {{"role", "assistant"},
         {"content", nullptr},
         {"tool_calls",
          {{{"id", "d1"},
            {"type", "function"},
            {"function", {{"name", "read"}, {"arguments", "{\"path\":\"config/prod.yaml\"}"}}}}}}});
    messages.push_back(
        {{"role", "tool"}, {"tool_call_id", "d1"}, {"content", "region: eu-west-3\nreplicas: 7"}});
    messages.push_back({{"role", "assistant"}, {"content", "Read it."}});
    ++first;
  }
  for (int i = first; i < turns; ++i) {
    messages.push_back(
        {{"role", "user"}, {"content", "step " + std::to_string(i) + " " + std::string(800, 'x')}});
    messages.push_back({{"role", "assistant"}, {"content", "done " + std::to_string(i)}});
  }
  return messages;
}

}  // namespace

TEST_CASE("R18 recap recall finds what a compaction summarized, recap uncompact takes it back",
          "[cli][R18]") {
  TempDir dir("recap-cli");
  const std::string db = dir.File("s.db");
  {
    std::ofstream(dir.File("first.json")) << RecallConversation(0, 6).dump();
    std::ofstream(dir.File("more.json")) << RecallConversation(6, 9).dump();
  }
  Ran r = Run(dir, {"import", "--format", "openai-chat", dir.File("first.json"), "--session", "s",
                    "--db", db});
  INFO(r.err);
  REQUIRE(r.exit == 0);
  auto exported = [&]() {
    const Ran e = Run(dir, {"export", "--session", "s", "--db", db, "--format", "openai-chat"});
    INFO(e.err);
    REQUIRE(e.exit == 0);
    return Json::parse(e.out);
  };
  const Json original = exported();
  REQUIRE(original.size() == 15);  // the instructions and 14 messages

  // Nothing to undo yet: said, exit 0, nothing changed.
  r = Run(dir, {"uncompact", "--session", "s", "--db", db});
  INFO(r.err);
  CHECK(r.exit == 0);
  CHECK(r.out.find("nothing to undo") != std::string::npos);
  r = Run(dir, {"uncompact", "--session", "s", "--db", db, "--json"});
  CHECK(r.exit == 0);
  CHECK(Json::parse(r.out)["undone"] == false);
  // Nothing compacted yet: nothing to recall either (active messages are not searched).
  r = Run(dir, {"recall", "--session", "s", "--db", db, "eu-west-3"});
  CHECK(r.exit == 0);
  CHECK(r.out.find("nothing in this conversation's history matches") != std::string::npos);

  r = Run(dir, {"compact", "--session", "s", "--db", db, "--keep-turns", "1", "--json"});
  INFO(r.err);
  REQUIRE(r.exit == 0);
  REQUIRE(LastJsonLine(r.out)["compacted"] == true);
  const Json compacted = exported();
  CHECK(compacted.size() < original.size());
  CHECK(compacted.dump().find("eu-west-3") == std::string::npos);

  // By words, as the model reads it; the database is only read.
  const std::string snapshot = Slurp(db);
  r = Run(dir, {"recall", "--session", "s", "--db", db, "eu-west-3"});
  INFO(r.err);
  REQUIRE(r.exit == 0);
  CHECK(r.out.find("region: eu-west-3") != std::string::npos);
  CHECK(r.out.find("summarized") != std::string::npos);
  // Several words are one query; --json gives each message.
  r = Run(dir, {"recall", "--session", "s", "--db", db, "--json", "ZEBRA-4471", "deploy"});
  INFO(r.err);
  REQUIRE(r.exit == 0);
  Json found = Json::parse(r.out);
  REQUIRE(found["messages"].size() >= 1);
  const Json& first = found["messages"][0];
  CHECK(first["role"] == "user");
  CHECK(first["state"] == "summarized");
  CHECK(first["turn"] == 1);
  CHECK(first["text"] == "Deploy with the key ZEBRA-4471.");
  CHECK(first["clipped"] == false);
  CHECK(first["replaced_by"].get<std::string>().rfind("compaction:", 0) == 0);
  CHECK(first["seq"].is_number());
  CHECK(found["left_out_ids"].is_array());
  CHECK(found["text"].get<std::string>().find("ZEBRA-4471") != std::string::npos);
  // By id and by turns; a small budget leaves some out, by id.
  const std::string id = first["id"].get<std::string>();
  r = Run(dir, {"recall", "--session", "s", "--db", db, "--ids", " nope ," + id, "--json"});
  REQUIRE(r.exit == 0);
  found = Json::parse(r.out);
  REQUIRE(found["messages"].size() == 1);
  CHECK(found["messages"][0]["id"] == id);
  r = Run(dir, {"recall", "--session", "s", "--db", db, "--turns", "1", "--json"});
  REQUIRE(r.exit == 0);
  found = Json::parse(r.out);
  CHECK(found["messages"].size() == 4);
  r = Run(dir, {"recall", "--session", "s", "--db", db, "--turns", "1-5", "--max-chars", "400",
                "--json"});
  REQUIRE(r.exit == 0);
  found = Json::parse(r.out);
  CHECK(found["left_out"].get<std::size_t>() > 0);
  CHECK(found["left_out_ids"].size() == found["left_out"].get<std::size_t>());
  r = Run(dir, {"recall", "--session", "s", "--db", db, "--turns", "1-5", "--max-chars", "400"});
  CHECK(r.out.find("ask for them by id") != std::string::npos);
  // Active messages only when asked.
  r = Run(dir, {"recall", "--session", "s", "--db", db, "done 5", "--include-active", "--json"});
  REQUIRE(r.exit == 0);
  CHECK(Json::parse(r.out)["messages"][0]["state"] == "active");

  CHECK(Slurp(db) == snapshot);

  // A second compaction after more turns; each uncompact takes back one, newest first.
  r = Run(dir, {"append", "--session", "s", "--db", db, "--format", "openai-chat",
                dir.File("more.json")});
  INFO(r.err);
  REQUIRE(r.exit == 0);
  const Json between = exported();
  r = Run(dir, {"compact", "--session", "s", "--db", db, "--keep-turns", "1"});
  REQUIRE(r.exit == 0);
  CHECK(exported().size() < between.size());

  r = Run(dir, {"uncompact", "--session", "s", "--db", db});
  INFO(r.err);
  REQUIRE(r.exit == 0);
  CHECK(r.out.find("undid compaction:") != std::string::npos);
  CHECK(r.out.find("(manual)") != std::string::npos);
  CHECK(r.out.find("active again") != std::string::npos);
  CHECK(exported() == between);

  r = Run(dir, {"uncompact", "--session", "s", "--db", db, "--json"});
  INFO(r.err);
  REQUIRE(r.exit == 0);
  const Json outcome = Json::parse(r.out);
  CHECK(outcome["session"] == "s");
  CHECK(outcome["undone"] == true);
  CHECK(outcome["commit"].get<std::string>().rfind("compaction:", 0) == 0);
  CHECK(outcome["reason"] == "manual");
  CHECK(outcome["restored_messages"] == 12);
  CHECK(outcome["retired_messages"].get<std::size_t>() >= 1);
  CHECK(outcome["after_chars"].get<std::size_t>() != outcome["before_chars"].get<std::size_t>());
  CHECK(outcome["version"].is_number());
  // The original messages active again, the instructions first, those appended since after.
  Json expected = original;
  for (const Json& m : RecallConversation(6, 9)) expected.push_back(m);
  CHECK(exported() == expected);
  r = Run(dir, {"sessions", "show", "s", "--db", db, "--json"});
  REQUIRE(r.exit == 0);
  const Json shown = Json::parse(r.out);
  CHECK(shown["active"].size() == expected.size() - 1);
  for (const Json& m : shown["active"]) CHECK(m["summary"] == false);
  // What the undo retired is in the history, and can be recalled too.
  r = Run(dir, {"recall", "--session", "s", "--db", db, "--json", "--turns", "1-9"});
  REQUIRE(r.exit == 0);
  const Json retired = Json::parse(r.out);
  bool undone = false;
  for (const Json& m : retired["messages"]) undone = undone || m["state"] == "undone";
  CHECK(undone);

  r = Run(dir, {"uncompact", "--session", "s", "--db", db});
  CHECK(r.exit == 0);
  CHECK(r.out.find("nothing to undo") != std::string::npos);
  CHECK(exported() == expected);
}

TEST_CASE("R18 recap recall and uncompact: usage errors in the flags' words", "[cli][R18]") {
  TempDir dir("recap-cli");
  const std::string db = dir.File("s.db");
  { std::ofstream(dir.File("first.json")) << RecallConversation(0, 3).dump(); }
  Ran r = Run(dir, {"import", "--format", "openai-chat", dir.File("first.json"), "--session", "s",
                    "--db", db});
  REQUIRE(r.exit == 0);
  const std::string snapshot = Slurp(db);
  struct Case {
    std::vector<std::string> args;
    int exit;
    std::string says;
  };
  for (const Case& c : std::vector<Case>{
           {{"recall", "--session", "s"}, 2, "say what to get back: words to look for"},
           {{"recall", "--session", "s", "  "}, 2, "--ids ID,ID"},
           {{"recall", "x"}, 2, "--session ID is required"},
           {{"recall", "--session", "s", "x", "--max-chars", "abc"},
            2,
            "--max-chars wants a non-negative whole number, not 'abc'"},
           {{"recall", "--session", "s", "x", "--max-chars", "0"}, 2, "--max-chars 0"},
           {{"recall", "--session", "s", "x", "--max-messages", "-1"},
            2,
            "--max-messages wants a non-negative whole number, not '-1'"},
           {{"recall", "--session", "s", "--turns", "5-2"}, 2, "--turns 5-2 ends before it starts"},
           {{"recall", "--session", "s", "--turns", "0"}, 2, "--turns 0 names no turn"},
           {{"recall", "--session", "s", "--turns", "a-b"}, 2, "--turns wants a turn range A-B"},
           {{"recall", "--session", "s", "--turns", "1-"}, 2, "--turns wants a turn range A-B"},
           {{"recall", "--session", "s", "--ids", " , "}, 2, "--ids wants message ids"},
           {{"recall", "--session", "recap-cli.instructions:s", "x"}, 2, "reserved"},
           {{"recall", "--session", "nope", "x"}, 1, "has no session 'nope'"},
           {{"recall", "--session", "s", "x", "--db", dir.File("missing.db")}, 1, "missing.db"},
           {{"recall", "--session", "s", "x", "--bogus"}, 2, "unknown option --bogus"},
           {{"uncompact"}, 2, "--session ID is required"},
           {{"uncompact", "s"}, 2, "unexpected argument 's'; name the session with --session ID"},
           {{"uncompact", "--session", "s", "--keep-turns", "1"}, 2, "unknown option --keep-turns"},
           {{"uncompact", "--session", "recap-cli.x"}, 2, "reserved"},
           {{"uncompact", "--session", "nope"}, 1, "has no session 'nope'"},
       }) {
    std::vector<std::string> args = c.args;
    const bool has_db = std::find(args.begin(), args.end(), "--db") != args.end();
    if (!has_db) {
      args.push_back("--db");
      args.push_back(db);
    }
    std::string shown;
    for (const std::string& a : args) shown += a + " ";
    INFO(shown);
    r = Run(dir, args);
    INFO(r.err);
    CHECK(r.exit == c.exit);
    CHECK(r.err.find(c.says) != std::string::npos);
    // --json: the error as one object.
    args.push_back("--json");
    r = Run(dir, args);
    CHECK(r.exit == c.exit);
    CHECK(Json::parse(r.out).contains("error"));
  }
  CHECK(Slurp(db) == snapshot);
}
