// SPEC §12 (and R1.3's fallback): the offline summarizer writes a checkpoint from the
// transcript itself, with no model.
#include <string>
#include <vector>

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include "recap/checkpoint.h"
#include "recap/measure.h"
#include "recap/offline_summarizer.h"
#include "recap/tail_reducer.h"

#include "summarize/summarize.h"
#include "support/test_data.h"

using namespace recap;
using Json = nlohmann::ordered_json;

namespace {

// What the offline summarizer answers for `span` (and `prior`), parsed back.
Checkpoint Offline(const Transcript& span, const Checkpoint* prior = nullptr) {
  auto offline = NewOfflineSummarizer();
  SummarySource source{&span, prior, {}};
  CompletionRequest request;
  request.source = &source;
  auto reply = offline->Complete(request, CancellationToken());
  REQUIRE(reply.ok());
  CHECK(reply->finish_reason == FinishReason::kStop);
  CHECK(reply->usage.prompt_tokens == 0);
  CHECK(reply->usage.completion_tokens == 0);
  const ParsedCheckpoint p = ParseCheckpoint(reply->text, false);
  REQUIRE(p.usable);
  REQUIRE(p.checkpoint.structured);
  return p.checkpoint;
}

// A session: a request with a constraint, a read, a failed build, an edit, a passing build.
Transcript Session() {
  Transcript t;
  t.Append(Message::UserText("Fix the failing test in src/parser.cc"));
  t.Append(Message::AssistantCalls({ToolCall{"c1", "read_file", R"({"path":"src/parser.cc"})", {}}},
                                   "Reading the parser."));
  t.Append(Message::ToolOutput("c1", "#include \"parser.h\"\nint parse() { return 0 }"));
  t.Append(Message::AssistantCalls({ToolCall{"c2", "bash", R"({"command":"make test"})", {}}}));
  t.Append(Message::ToolOutput("c2",
                               "src/parser.cc:2:24: error: expected ';' before '}'\nmake: "
                               "*** [Makefile:12: test] Error 1",
                               /*is_error=*/true));
  t.Append(Message::UserText("Do not touch include/parser.h."));
  t.Append(Message::AssistantCalls({ToolCall{
      "c3", "edit_file", R"({"file_path":"src/parser.cc","old":"0 }","new":"0; }"})", {}}}));
  t.Append(Message::ToolOutput("c3", "Edited src/parser.cc"));
  t.Append(Message::AssistantCalls({ToolCall{"c4", "bash", R"({"command":"make test"})", {}}}));
  t.Append(Message::ToolOutput("c4", "All 12 tests passed."));
  t.Append(Message::AssistantText("The test passes now: a semicolon was missing."));
  return t;
}

bool Contains(const std::vector<std::string>& v, const std::string& s) {
  return std::find(v.begin(), v.end(), s) != v.end();
}

const RelevantFile* FindFile(const Checkpoint& c, const std::string& path) {
  for (const auto& f : c.relevant_files) {
    if (f.path == path) return &f;
  }
  return nullptr;
}

}  // namespace

TEST_CASE("§12 offline: each section comes from where the header says") {
  const Checkpoint c = Offline(Session());
  CHECK(c.goal == "Fix the failing test in src/parser.cc");
  CHECK(c.instructions == std::vector<std::string>{"Fix the failing test in src/parser.cc",
                                                   "Do not touch include/parser.h."});
  // Outcomes, not a tool log: the read is none (issue 21).
  CHECK(c.accomplished == std::vector<std::string>{"Edited src/parser.cc (edit_file)",
                                                   "bash: make test passed after failing"});
  REQUIRE(c.discoveries.size() == 1);
  CHECK(c.discoveries[0] ==
        "bash: make test failed: src/parser.cc:2:24: error: expected ';' before '}' (resolved: "
        "a later bash call on the same target succeeded)");
  CHECK(c.current_state == "The test passes now: a semicolon was missing.");
  CHECK(c.next_steps.empty());
  const RelevantFile* parser = FindFile(c, "src/parser.cc");
  REQUIRE(parser != nullptr);
  CHECK(parser->why == "used by read_file, edit_file");
  CHECK(c.relevant_files.front().path == "src/parser.cc");
  CHECK(FindFile(c, "include/parser.h") == nullptr);  // a user text, not a tool's
}

TEST_CASE(
    "§12 offline: errors are recognised by flag or a leading error report, and unresolved ones "
    "say so") {
  Transcript t;
  t.Append(Message::UserText("run it"));
  t.Append(Message::AssistantCalls({ToolCall{"c1", "python", R"j({"code":"f()"})j", {}}}));
  t.Append(
      Message::ToolOutput("c1", "Traceback (most recent call last):\n  File \"x.py\"\nNameError"));
  t.Append(Message::AssistantCalls({ToolCall{"c2", "search", R"({"query":"f"})", {}}}));
  t.Append(Message::ToolOutput("c2", "Error: rate limited"));
  t.Append(Message::AssistantCalls({ToolCall{"c3", "lookup", R"({"id":7})", {}}}));
  t.Append(Message::ToolOutput("c3", "No errors found"));
  t.Append(Message::AssistantCalls({ToolCall{"c4", "pending", "{}", {}}}));  // no result yet
  const Checkpoint c = Offline(t);
  REQUIRE(c.discoveries.size() == 2);
  CHECK(c.discoveries[0] == "python: f() failed: NameError (not resolved yet)");
  CHECK(c.discoveries[1] == "search: f failed: Error: rate limited (not resolved yet)");
  CHECK(c.accomplished.empty());  // a lookup is no outcome (issue 21)
}

TEST_CASE("§12 offline: the error line is the one that says what went wrong") {
  Transcript t;
  t.Append(Message::AssistantCalls({ToolCall{"c1", "bash", R"({"command":"pytest"})", {}}}));
  t.Append(Message::ToolOutput("c1",
                               "===== test session starts =====\ncollected 3 items\n"
                               "FAILED test/test_a.py::test_x - assert 1 == 2\n",
                               /*is_error=*/true));
  t.Append(Message::AssistantCalls({ToolCall{"c2", "bash", R"({"command":"git diff"})", {}}}));
  t.Append(Message::ToolOutput("c2",
                               "diff --git a/src/x.py b/src/x.py\n--- a/src/x.py\n"
                               "+++ b/src/x.py\n+see a/b.txt"));
  // A later call names the printed files (issue 21: a printed path counts when an argument
  // names it).
  t.Append(Message::AssistantCalls({ToolCall{
      "c3", "task", R"({"prompt":"look at src/x.py, a/b.txt and test/test_a.py"})", {}}}));
  const Checkpoint c = Offline(t);
  REQUIRE(c.discoveries.size() == 1);
  CHECK(c.discoveries[0] ==
        "bash: pytest failed: FAILED test/test_a.py::test_x - assert 1 == 2 (not resolved yet)");
  REQUIRE(c.relevant_files.size() == 3);
  CHECK(c.relevant_files[0].path == "test/test_a.py");
  CHECK(c.relevant_files[1].path == "src/x.py");  // git's a/ and b/ prefixes dropped
  CHECK(c.relevant_files[2].path == "a/b.txt");   // outside a diff header, kept as written
}

TEST_CASE("§12 offline: user texts are kept whole within the budget, the goal cut at 1,000") {
  Transcript t;
  const std::string long_text = std::string(1000, 'w') + " end";
  t.Append(Message::UserText(long_text));
  t.Append(Message::UserText("  short one  "));
  const Checkpoint c = Offline(t);
  REQUIRE(c.instructions.size() == 2);
  CHECK(c.instructions[0] == long_text);
  CHECK(c.instructions[1] == "short one");
  CHECK(c.goal.rfind(std::string(900, 'w'), 0) == 0);
  CHECK(CountCodePoints(c.goal) == 1000);
  // The summarizer's own marker (issue 21), not the reducer's.
  CHECK(c.goal.find("[cut by the summarizer]") != std::string::npos);
  CHECK(c.goal.find(kTruncationMarker) == std::string::npos);
}

TEST_CASE("§12 offline: paths are found in arguments and results, deduplicated and capped") {
  Transcript t;
  t.Append(Message::UserText("look around"));
  std::string listing;
  for (int i = 0; i < 100; ++i) listing += "src/module" + std::to_string(i) + "/file.cc\n";
  listing += "see https://example.com/docs/page.html and/or a/b, also /usr/lib and src/a.cc:12:3.";
  std::string prompt = "review";
  for (int i = 0; i < 100; ++i) prompt += " src/module" + std::to_string(i) + "/file.cc";
  t.Append(Message::AssistantCalls(
      {ToolCall{"c1", "bash", R"({"command":"cat README.md docs/x.md"})", {}},
       ToolCall{"c2", "read", R"({"path":"README.md"})", {}}}));
  t.Append(Message::ToolOutput("c1", listing));
  t.Append(Message::ToolOutput("c2", "# readme"));
  // The printed paths count because an argument names them (issue 21).
  t.Append(Message::AssistantCalls({ToolCall{"c3", "task", Json{{"prompt", prompt}}.dump(), {}}}));
  const Checkpoint c = Offline(t);
  CHECK(c.relevant_files.size() == 30);
  // Paths a call used come first, before those a tool only printed.
  CHECK(c.relevant_files[0].path == "docs/x.md");
  CHECK(c.relevant_files[0].why == "used by bash");
  CHECK(c.relevant_files[1].path == "README.md");  // a bare name under a path key
  CHECK(c.relevant_files[1].why == "used by read");
  CHECK(c.relevant_files[2].path == "src/module0/file.cc");
  CHECK(c.relevant_files[2].why == "seen in the output of bash");
  for (const auto& f : c.relevant_files) {
    CHECK(f.path.find("example.com") == std::string::npos);
    CHECK(f.path != "and/or");
    CHECK(f.path != "a/b");
  }

  Transcript u;
  u.Append(Message::AssistantCalls(
      {ToolCall{"c1", "bash", "not json: /usr/lib and src/a.cc:12:3.", {}}}));
  const Checkpoint d = Offline(u);
  REQUIRE(d.relevant_files.size() == 1);  // /usr/lib is a system folder (issue 21)
  CHECK(d.relevant_files[0].path == "src/a.cc");
}

TEST_CASE("§12 offline: a prior checkpoint is merged — goal kept, lists kept and extended") {
  Checkpoint prior;
  prior.goal = "Port the parser to C++17";
  prior.instructions = {"Keep the public API"};
  prior.accomplished = {"Read the old parser"};
  prior.next_steps = {"Run the benchmarks"};
  prior.current_state = "old state";
  prior.relevant_files = {{"src/parser.cc", "the parser"}, {"bench/b.cc", "benchmarks"}};
  const Checkpoint c = Offline(Session(), &prior);
  CHECK(c.goal == "Port the parser to C++17");
  CHECK(c.instructions.front() == "Keep the public API");
  CHECK(Contains(c.instructions, "Do not touch include/parser.h."));
  CHECK(c.accomplished.front() == "Read the old parser");
  CHECK(Contains(c.accomplished, "Edited src/parser.cc (edit_file)"));
  CHECK(c.next_steps == prior.next_steps);
  CHECK(c.current_state == "The test passes now: a semicolon was missing.");
  // The prior's files keep their place and their reasons.
  REQUIRE(c.relevant_files.size() >= 2);
  CHECK(c.relevant_files[0].path == "src/parser.cc");
  CHECK(c.relevant_files[0].why == "the parser");
  CHECK(c.relevant_files[1].path == "bench/b.cc");

  // A checkpoint message inside the span serves as the prior when none is given.
  Transcript with_message;
  with_message.Append(CheckpointMessage(prior));
  for (const Message& m : Session()) with_message.Append(m);
  CHECK(Offline(with_message).goal == "Port the parser to C++17");

  // A text-only prior is kept as a discovery.
  Checkpoint text_only;
  text_only.structured = false;
  text_only.text = "We were porting the parser.";
  const Checkpoint t = Offline(Session(), &text_only);
  CHECK(t.discoveries.front() == "Earlier summary: We were porting the parser.");
  CHECK(t.goal == "Fix the failing test in src/parser.cc");
}

TEST_CASE("§12 offline: deterministic") {
  auto offline = NewOfflineSummarizer();
  const Transcript span = Session();
  SummarySource source{&span, nullptr, {}};
  CompletionRequest request;
  request.source = &source;
  const auto a = offline->Complete(request, CancellationToken());
  const auto b = NewOfflineSummarizer()->Complete(request, CancellationToken());
  REQUIRE(a.ok());
  REQUIRE(b.ok());
  CHECK(a->text == b->text);
  CHECK(a->text == CheckpointToJson(ParseCheckpoint(a->text, false).checkpoint));
}

TEST_CASE("§12 offline: without the structured span it refuses, saying why") {
  auto offline = NewOfflineSummarizer();
  CHECK(offline->Name() == "offline");
  CompletionRequest request;
  request.messages.push_back(Message::UserText("please summarize this"));
  const auto r = offline->Complete(request, CancellationToken());
  REQUIRE_FALSE(r.ok());
  CHECK(r.status().code() == StatusCode::kInvalidArgument);
  CHECK(r.status().message().find("CompletionRequest::source") != std::string::npos);

  CancellationSource cancelled;
  cancelled.Cancel();
  const Transcript span = Session();
  SummarySource source{&span, nullptr, {}};
  request.source = &source;
  CHECK(offline->Complete(request, cancelled.Token()).status().code() == StatusCode::kCancelled);
}

TEST_CASE("§12 offline: long lists stay bounded across many compactions") {
  Checkpoint prior;
  for (int i = 0; i < 200; ++i) {
    prior.accomplished.push_back("old " + std::to_string(i));
    prior.instructions.push_back("rule " + std::to_string(i));
    prior.discoveries.push_back("fact " + std::to_string(i));
  }
  const Checkpoint c = Offline(Session(), &prior);
  CHECK(c.accomplished.size() == 50);
  CHECK(c.instructions.size() == 50);
  CHECK(c.discoveries.size() == 30);
  CHECK(c.accomplished.back() == "bash: make test passed after failing");  // the newest are kept
}

TEST_CASE("§12 offline: every real transcript summarizes, whole and in chunks") {
  const auto all = recap::testing::AllRealTranscripts();
  REQUIRE(all.size() > 200);
  auto offline = NewOfflineSummarizer();
  for (const auto& named : all) {
    INFO(named.name);
    internal::SummarizeInput in;
    in.span = Transcript(named.conversation.messages);
    for (std::size_t limit : {std::size_t{0}, std::size_t{20000}}) {
      in.max_request_chars = limit;
      auto out = internal::Summarize(*offline, in, CancellationToken(), nullptr);
      REQUIRE(out.ok());
      const Checkpoint& c = out->parsed.checkpoint;
      CHECK(out->parsed.usable);
      CHECK(c.structured);
      CHECK_FALSE(out->parsed.partial);
      CHECK(c.relevant_files.size() <= 30);
      CHECK(c.accomplished.size() <= 50);
      CHECK(CountCodePoints(c.current_state) <= 1000);
      bool has_request = false;
      for (const Message& m : in.span) {
        has_request =
            has_request ||
            (IsTurnStart(m) && JoinedText(m).find_first_not_of(" \t\r\n") != std::string::npos);
      }
      if (has_request) CHECK_FALSE(c.goal.empty());
      CHECK(IsValidUtf8(RenderCheckpoint(c)));
      CHECK(ParseRenderedCheckpoint(RenderCheckpoint(c)).goal == c.goal);
      if (limit == 0) CHECK(out->calls == 1);
    }
  }
}

namespace {

// The offline summarizer's raw reply for `span` with `prior`, under `max_output_tokens`.
Completion OfflineReply(const Transcript& span, const Checkpoint* prior,
                        std::size_t max_output_tokens) {
  auto offline = NewOfflineSummarizer();
  SummarySource source{&span, prior, {}};
  CompletionRequest request;
  request.source = &source;
  request.max_output_tokens = max_output_tokens;
  auto reply = offline->Complete(request, CancellationToken());
  REQUIRE(reply.ok());
  return *reply;
}

// A prior as a long session leaves it: every list full of long entries.
Checkpoint FullPrior() {
  Checkpoint prior;
  prior.goal = "Migrate the billing service to the new ledger";
  for (int i = 0; i < 60; ++i) {
    const std::string n = std::to_string(i);
    prior.instructions.push_back("rule " + n + ": " + std::string(250, 'i'));
    prior.accomplished.push_back("bash: step " + n + " " + std::string(150, 'a'));
    prior.discoveries.push_back("fact " + n + ": " + std::string(150, 'd'));
    prior.relevant_files.push_back({"src/file" + n + ".cc", "used by edit_file"});
  }
  prior.current_state = std::string(900, 's');
  return prior;
}

}  // namespace

TEST_CASE("R5.1 §12 offline: the reply stays within max_output_tokens, the newest entries kept") {
  const Checkpoint prior = FullPrior();
  // Roomy: nothing but the usual caps.
  const Completion roomy = OfflineReply(Session(), &prior, 16000);
  CHECK(roomy.finish_reason == FinishReason::kStop);
  const Checkpoint all = ParseCheckpoint(roomy.text, false).checkpoint;
  CHECK(all.instructions.size() == 50);
  CHECK(all.discoveries.size() == 30);
  REQUIRE(CountCodePoints(roomy.text) > 4000);

  for (std::size_t tokens : {std::size_t{3000}, std::size_t{1000}, std::size_t{500}}) {
    INFO("max_output_tokens " << tokens);
    const Completion fit = OfflineReply(Session(), &prior, tokens);
    CHECK(fit.finish_reason == FinishReason::kStop);
    CHECK(CountCodePoints(fit.text) <= tokens * 4);
    const ParsedCheckpoint parsed = ParseCheckpoint(fit.text, false);
    REQUIRE(parsed.usable);
    const Checkpoint& c = parsed.checkpoint;
    CHECK(c.goal == prior.goal);  // the goal is the last thing to give way
    // Lists gave way from their old end: what is left is the newest.
    REQUIRE_FALSE(c.instructions.empty());
    CHECK(c.instructions.back() == "Do not touch include/parser.h.");
    CHECK(c.instructions.size() < all.instructions.size());
    if (!c.accomplished.empty()) CHECK(c.accomplished.back() == "bash: make test");
    if (!c.relevant_files.empty()) {
      CHECK(c.relevant_files.back().path == all.relevant_files.back().path);
    }
  }
  // The discoveries go before the user's instructions do.
  const Checkpoint mid =
      ParseCheckpoint(OfflineReply(Session(), &prior, 3000).text, false).checkpoint;
  CHECK(mid.discoveries.size() < all.discoveries.size());
  CHECK(mid.instructions.size() > mid.discoveries.size());
}

TEST_CASE("R5.1 R5.3 §12 offline: a budget too small for any checkpoint gives a cut reply") {
  Transcript span;
  span.Append(
      Message::UserText("Réécris l'analyseur — sans toucher à l'en-tête " + std::string(300, 'x')));
  span.Append(Message::AssistantText("D'accord ✓"));
  for (std::size_t tokens : {std::size_t{1}, std::size_t{10}, std::size_t{30}}) {
    INFO("max_output_tokens " << tokens);
    const Completion cut = OfflineReply(span, nullptr, tokens);
    CHECK(cut.finish_reason == FinishReason::kLength);
    CHECK(CountCodePoints(cut.text) <= tokens * 4);
    CHECK(IsValidUtf8(cut.text));
  }
}

namespace {

// Tool-call arguments nested `depth` levels deep: valid JSON, arrays in arrays, with a path at
// the bottom ([[...["src/deep.cc"]...]]), or objects in objects ({"a":{"a":...{}...}}).
std::string DeepArguments(std::size_t depth, bool objects) {
  std::string s;
  s.reserve(depth * 6 + 16);
  for (std::size_t i = 0; i < depth; ++i) s += objects ? "{\"a\":" : "[";
  s += objects ? "{}" : "\"src/deep.cc\"";
  for (std::size_t i = 0; i < depth; ++i) s += objects ? '}' : ']';
  return s;
}

}  // namespace

TEST_CASE("R13.1 §12 offline: tool-call arguments nested 100,000 and 1,000,000 levels deep") {
  for (std::size_t depth : {std::size_t{100000}, std::size_t{1000000}}) {
    for (bool objects : {false, true}) {
      INFO("depth " << depth << (objects ? ", objects" : ", arrays"));
      Transcript t;
      t.Append(Message::UserText("Parse the nested data"));
      t.Append(
          Message::AssistantCalls({ToolCall{"c1", "deep_tool", DeepArguments(depth, objects), {}},
                                   ToolCall{"c2", "read_file", R"({"path":"src/ok.cc"})", {}}}));
      t.Append(Message::ToolOutput("c1", "done"));
      t.Append(Message::ToolOutput("c2", "int main() {}"));
      t.Append(Message::AssistantText("Both calls finished."));
      // The whole compaction path (Summarize), then the summarizer on its own.
      internal::SummarizeInput in;
      in.span = t;
      auto out = internal::Summarize(*NewOfflineSummarizer(), in, CancellationToken(), nullptr);
      REQUIRE(out.ok());
      const Checkpoint c = Offline(t);
      CHECK(c.goal == "Parse the nested data");
      // The deep call is named; its arguments are read as text (one line, clipped). The read is
      // no outcome (issue 21).
      REQUIRE(c.accomplished.size() == 1);
      CHECK(c.accomplished[0].rfind("deep_tool: ", 0) == 0);
      CHECK(CountCodePoints(c.accomplished[0]) < 300);
      CHECK(FindFile(c, "src/ok.cc") != nullptr);
      CHECK(out->parsed.checkpoint.accomplished == c.accomplished);
    }
  }
}
