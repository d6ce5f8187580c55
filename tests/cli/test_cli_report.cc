// `recap report` (issue 41, docs/report.md): a session's timeline as one self-contained HTML
// page. What a browser shows of it is checked in a real browser (tests/report/); here, the page's
// content: the chart's points and marks against the session's history, the folds, what it does
// not load, and hostile text kept as text.
#include <fstream>
#include <string>
#include <vector>

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include "cli/cli_run.h"
#include "support/temp_dir.h"

namespace {

using recap::testing::TempDir;
using namespace recap::testing::cli;  // Run, Data, Slurp, ...

std::size_t Count(const std::string& text, const std::string& what) {
  std::size_t n = 0;
  for (std::size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) {
    ++n;
  }
  return n;
}

}  // namespace

TEST_CASE("issue 41 report: a real session's page charts every turn and marks each compaction",
          "[cli]") {
  TempDir dir("recap-cli-report");
  const std::string db = dir.File("r.db");
  Ran r = Run(dir, {"import", "--format", "claude-code",
                    Data("Users-dain-workspace-claude-code-log-sample__37f83ec9-f2ea-42a9-925e-"
                         "0d5c105cb6e8.jsonl"),
                    "--session", "real", "--db", db});
  INFO(r.err);
  REQUIRE(r.exit == 0);
  r = Run(dir, {"compact", "--session", "real", "--db", db, "--keep-turns", "3"});
  REQUIRE(r.exit == 0);
  const std::string more = dir.File("more.json");
  {
    std::ofstream f(more);
    f << R"([{"role":"user","content":"and now the tests, please"},)"
         R"({"role":"assistant","content":"Running them."}])";
  }
  r = Run(dir, {"append", "--session", "real", "--format", "openai-chat", more, "--db", db});
  REQUIRE(r.exit == 0);
  r = Run(dir, {"compact", "--session", "real", "--db", db, "--keep-turns", "1"});
  REQUIRE(r.exit == 0);

  r = Run(dir, {"report", "--session", "real", "--db", db, "-o", dir.File("real.html")});
  INFO(r.err);
  REQUIRE(r.exit == 0);
  const std::string page = Slurp(dir.File("real.html"));
  REQUIRE(page.rfind("<!DOCTYPE html>", 0) == 0);

  // One point per turn of the history, each compaction marked, each checkpoint a fold.
  r = Run(dir, {"export", "--session", "real", "--db", db, "--format", "recap", "--history"});
  REQUIRE(r.exit == 0);
  const nlohmann::json history = nlohmann::json::parse(r.out);
  std::size_t summaries = 0;
  for (const nlohmann::json& e : history.at("history")) {
    if (e.at("summary").get<bool>()) ++summaries;
  }
  CHECK(summaries == 2);
  CHECK(Count(page, "<circle class=\"point\"") > 5);
  CHECK(Count(page, "<g class=\"mark compaction\"") == 2);
  CHECK(Count(page, "data-kind=\"hard-limit\"") == 1);
  CHECK(Count(page, "data-kind=\"trigger\"") == 1);
  // The newest checkpoint is sent now and folds what it replaced (the first checkpoint among
  // them).
  CHECK(page.find("<details class=\"fold\" data-commit=\"compaction:2\"") != std::string::npos);
  CHECK(Count(page, "class=\"msg original") > 0);
  CHECK(page.find("class=\"checkpoint-sections\"") != std::string::npos);
  CHECK(page.find("Kept by recap") != std::string::npos);
  // Nothing is loaded from anywhere: no script, no external resource.
  CHECK(page.find("<script") == std::string::npos);
  CHECK(page.find(" src=") == std::string::npos);
  CHECK(page.find("href=\"http") == std::string::npos);
  CHECK(page.find("@import") == std::string::npos);
}

TEST_CASE("issue 41 report: hostile message text is shown and never run", "[cli]") {
  TempDir dir("recap-cli-report");
  const std::string db = dir.File("h.db");
  const std::string turn = dir.File("turn.json");
  const nlohmann::json messages = nlohmann::json::array(
      {{{"role", "user"}, {"content", "<script>alert(1)</script> and </style><style>*{}"}},
       {{"role", "assistant"},
        {"content", "\" onmouseover=\"alert(2)\" x=' </pre></li><img src=x>"}},
       {{"role", "user"}, {"content", "bell \x07 escape \x1b[31m red </details></ol>"}},
       {{"role", "assistant"}, {"content", "<!-- not a comment --> ]]> &amp; &lt;"}}});
  {
    std::ofstream f(turn);
    f << messages.dump();
  }
  Ran r = Run(dir, {"append", "--session", "h", "--format", "openai-chat", turn, "--db", db});
  REQUIRE(r.exit == 0);
  r = Run(dir, {"report", "--session", "h", "--db", db, "-o", "-"});
  INFO(r.err);
  REQUIRE(r.exit == 0);
  const std::string& page = r.out;
  CHECK(page.find("<script") == std::string::npos);
  CHECK(page.find("&lt;script&gt;alert(1)&lt;/script&gt;") != std::string::npos);
  CHECK(Count(page, "</style>") == 1);  // the page's own
  CHECK(Count(page, "<style") == 1);
  CHECK(page.find("onmouseover=\"") == std::string::npos);
  CHECK(page.find("&quot; onmouseover=&quot;alert(2)&quot;") != std::string::npos);
  CHECK(page.find("<img") == std::string::npos);
  CHECK(page.find("\x1b") == std::string::npos);
  CHECK(page.find("\x07") == std::string::npos);
  CHECK(page.find("\\x1b[31m") != std::string::npos);
  CHECK(page.find("<!-- not") == std::string::npos);
  CHECK(page.find("&amp;amp;") != std::string::npos);
  // The page's own structure is whole: as many list items closed as opened.
  CHECK(Count(page, "<li ") + Count(page, "<li>") == Count(page, "</li>"));
  CHECK(Count(page, "<pre") == Count(page, "</pre>"));
}

TEST_CASE("issue 41 report: what it needs, said in the command's words", "[cli]") {
  TempDir dir("recap-cli-report");
  Ran r = Run(dir, {"report", "--session", "x", "--db", dir.File("none.db"), "-o", "x.html"});
  CHECK(r.exit == 1);
  CHECK(r.err.find("none.db") != std::string::npos);
  r = Run(dir, {"report", "--session", "x"});
  CHECK(r.exit == 2);
  CHECK(r.err.find("-o FILE") != std::string::npos);
  r = Run(dir, {"report", "-o", "x.html"});
  CHECK(r.exit == 2);
  CHECK(r.err.find("--session") != std::string::npos);
}
