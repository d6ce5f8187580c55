// SPEC R3.5, R4.5–R4.8, R5: one summary of a span through a Provider — the prompt, the span
// rendered as text, shortening and chunking of a span too big for one request, and the
// handling of cut, empty and failed replies.
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include "recap/checkpoint.h"
#include "recap/compactor.h"
#include "recap/measure.h"
#include "recap/offline_summarizer.h"
#include "recap/tail_reducer.h"

#include "summarize/summarize.h"
#include "support/fake_provider.h"

using namespace recap;
using recap::internal::ProgressFn;
using recap::internal::RenderSpanAsText;
using recap::internal::Summarize;
using recap::internal::SummarizeInput;
using recap::internal::SummarizeOutput;
using recap::internal::SummarizerSystemPrompt;
using Json = nlohmann::ordered_json;

namespace {

// A Provider that records every request and answers from a script.
class ScriptedProvider : public Provider {
 public:
  struct Seen {
    std::string system_prompt;
    std::vector<Message> messages;
    std::optional<std::string> json_schema;
    std::size_t max_output_tokens = 0;
    bool has_source = false;
    std::vector<std::string> span_ids;
    std::optional<Checkpoint> prior;
    std::string focus;

    const std::string& text() const { return std::get<Text>(messages.at(0).parts.at(0)).text; }
  };
  // Answers call i (0-based) from the request.
  using Script = std::function<Result<Completion>(std::size_t i, const CompletionRequest&)>;

  explicit ScriptedProvider(Script script) : script_(std::move(script)) {}
  // Always the same reply.
  static ScriptedProvider Replying(std::string text, FinishReason finish = FinishReason::kStop) {
    return ScriptedProvider([text, finish](std::size_t, const CompletionRequest&) {
      Completion c;
      c.text = text;
      c.finish_reason = finish;
      c.usage = {100, 10};
      return Result<Completion>(c);
    });
  }

  Result<Completion> Complete(const CompletionRequest& request, const CancellationToken&) override {
    Seen s;
    s.system_prompt = request.system_prompt;
    s.messages = request.messages;
    s.json_schema = request.json_schema;
    s.max_output_tokens = request.max_output_tokens;
    if (request.source != nullptr) {
      s.has_source = true;
      for (const Message& m : *request.source->span) s.span_ids.push_back(m.id);
      if (request.source->prior != nullptr) s.prior = *request.source->prior;
      s.focus = request.source->focus;
    }
    seen.push_back(std::move(s));
    return script_(seen.size() - 1, request);
  }
  std::string Name() const override { return "scripted"; }

  std::vector<Seen> seen;

 private:
  Script script_;
};

Completion Reply(std::string text, FinishReason finish = FinishReason::kStop) {
  Completion c;
  c.text = std::move(text);
  c.finish_reason = finish;
  c.usage = {100, 10};
  return c;
}

Message WithId(Message m, std::string id) {
  m.id = std::move(id);
  return m;
}

// A small session: a request, a tool round with thinking and an image, an error, an answer.
Transcript SmallSpan() {
  Transcript t;
  t.Append(WithId(Message::UserText("Fix the failing test in src/parser.cc"), "u1"));
  Message a;
  a.id = "a1";
  a.role = Role::kAssistant;
  a.parts.emplace_back(Opaque{"thinking", R"({"signature":"SECRET-SIGNATURE"})", {}, {}});
  a.parts.emplace_back(Text{"Looking at the parser.", {}});
  a.parts.emplace_back(ToolCall{"call_1", "read_file", R"({"path":"src/parser.cc"})", {}});
  a.parts.emplace_back(ToolCall{"call_2", "bash", R"({"command":"make test"})", {}});
  t.Append(a);
  t.Append(WithId(Message::ToolOutput("call_1", "int parse() { return 0; }"), "t1"));
  Message r;
  r.id = "r1";
  r.role = Role::kUser;
  ToolResult tr;
  tr.call_id = "call_2";
  tr.is_error = true;
  tr.content.emplace_back(Text{"error: expected ';'", {}});
  tr.content.emplace_back(Opaque{"image", R"({"data":"IMAGE-BYTES"})", {}, {}});
  r.parts.emplace_back(tr);
  t.Append(r);
  t.Append(WithId(Message::AssistantText("Found it: a missing semicolon."), "a2"));
  return t;
}

SummarizeInput Input(Transcript span) {
  SummarizeInput in;
  in.span = std::move(span);
  return in;
}

Result<SummarizeOutput> Run(Provider& p, const SummarizeInput& in,
                            const ProgressFn& progress = nullptr) {
  return Summarize(p, in, CancellationToken(), progress);
}

std::size_t Count(const std::string& haystack, std::string_view needle) {
  std::size_t n = 0;
  for (auto p = haystack.find(needle); p != std::string::npos; p = haystack.find(needle, p + 1))
    ++n;
  return n;
}

}  // namespace

// ---------------------------------------------------------------------------------------------
// R4.8 the span as plain text

TEST_CASE("R4.8 the span is rendered as plain text with roles, calls and results labelled") {
  const std::string text = RenderSpanAsText(SmallSpan(), 0);
  CHECK(text ==
        "[user]\n"
        "Fix the failing test in src/parser.cc\n"
        "\n"
        "[assistant]\n"
        "Looking at the parser.\n"
        "[tool call call_1: read_file] {\"path\":\"src/parser.cc\"}\n"
        "[tool call call_2: bash] {\"command\":\"make test\"}\n"
        "\n"
        "[tool]\n"
        "[tool result call_1: read_file]\n"
        "int parse() { return 0; }\n"
        "\n"
        "[user]\n"
        "[tool result call_2: bash, error]\n"
        "error: expected ';'\n"
        "\n"
        "[assistant]\n"
        "Found it: a missing semicolon.");
}

TEST_CASE("R4.8 a result whose call is not in the span is labelled with its id alone") {
  Transcript t;
  t.Append(Message::ToolOutput("call_9", ""));
  CHECK(RenderSpanAsText(t, 0) == "[tool]\n[tool result call_9]\n(no text output)");
}

TEST_CASE("R4.5 opaque items are not in what the summarizer reads") {
  auto p = ScriptedProvider::Replying(R"({"goal": "g"})");
  REQUIRE(Run(p, Input(SmallSpan())).ok());
  REQUIRE(p.seen.size() == 1);
  const std::string& text = p.seen[0].text();
  CHECK(text.find("SECRET-SIGNATURE") == std::string::npos);
  CHECK(text.find("IMAGE-BYTES") == std::string::npos);
  CHECK(text.find("thinking") == std::string::npos);
  // A message that carries only opaque items is left out entirely.
  Transcript t;
  Message only;
  only.role = Role::kAssistant;
  only.parts.emplace_back(Opaque{"reasoning", R"({"encrypted":"E"})", {}, {}});
  t.Append(only);
  t.Append(Message::UserText("hi"));
  CHECK(RenderSpanAsText(t, 0) == "[user]\nhi");
}

TEST_CASE("R4.8 the request is one user text, never native tool structure") {
  auto p = ScriptedProvider::Replying(R"({"goal": "g"})");
  SummarizeInput in = Input(SmallSpan());
  in.max_output_tokens = 777;
  REQUIRE(Run(p, in).ok());
  const auto& s = p.seen.at(0);
  REQUIRE(s.messages.size() == 1);
  CHECK(s.messages[0].role == Role::kUser);
  REQUIRE(s.messages[0].parts.size() == 1);
  CHECK(std::holds_alternative<Text>(s.messages[0].parts[0]));
  CHECK(s.text().find("Conversation to summarize:\n\n[user]\nFix the failing test") !=
        std::string::npos);
  CHECK(s.max_output_tokens == 777);
  CHECK(s.json_schema == CheckpointJsonSchema());
  // The structured span rides along for the offline summarizer.
  CHECK(s.has_source);
  CHECK(s.span_ids == std::vector<std::string>{"u1", "a1", "t1", "r1", "a2"});
  CHECK_FALSE(s.prior.has_value());
}

TEST_CASE("R4.8 the prompt asks for the R4.1 object and exact paths, commands, errors, status") {
  const std::string p = SummarizerSystemPrompt(SummarizeInput{});
  CHECK(p.find("ONE JSON object") != std::string::npos);
  CHECK(p.find("file paths, commands, error messages") != std::string::npos);
  CHECK(p.find("user's instructions") != std::string::npos);
  CHECK(p.find("done") != std::string::npos);
  CHECK(p.find("pending") != std::string::npos);
  std::size_t last = 0;
  for (const char* key : {"\"goal\"", "\"instructions\"", "\"discoveries\"", "\"accomplished\"",
                          "\"currentState\"", "\"nextSteps\"", "\"relevantFiles\""}) {
    const std::size_t at = p.find(key);
    INFO(key);
    REQUIRE(at != std::string::npos);
    CHECK(at > last);
    last = at;
  }
  CHECK(SummarizerSystemPrompt(SummarizeInput{}) == p);  // stable bytes, cache-friendly
}

TEST_CASE("R4.6 the focus is added to the summarizer's prompt") {
  SummarizeInput in = Input(SmallSpan());
  in.focus = "  the parser bug only  ";
  const std::string p = SummarizerSystemPrompt(in);
  CHECK(p.find("the parser bug only\n") != std::string::npos);
  auto provider = ScriptedProvider::Replying(R"({"goal": "g"})");
  REQUIRE(Run(provider, in).ok());
  CHECK(provider.seen.at(0).system_prompt == p);
  CHECK(provider.seen.at(0).focus == in.focus);
  CHECK(SummarizerSystemPrompt(SummarizeInput{}).find("Focus") == std::string::npos);
}

TEST_CASE("R9.1 plugin instructions and output fields reach the same summarizer call") {
  SummarizeInput in = Input(SmallSpan());
  in.plugin_instructions = {"List durable memories about the user.", "  "};
  in.plugin_fields = {{"memories", "Facts worth keeping across sessions",
                       R"({"type":"array","items":{"type":"string"}})"}};
  const std::string prompt = SummarizerSystemPrompt(in);
  CHECK(prompt.find("- List durable memories about the user.\n") != std::string::npos);
  CHECK(prompt.find("\"memories\": \"Facts worth keeping across sessions\"") != std::string::npos);
  CHECK(Count(prompt, "Additional instructions") == 1);
  auto p = ScriptedProvider::Replying(R"({"goal": "g", "memories": ["uses vim"]})");
  auto out = Run(p, in);
  REQUIRE(out.ok());
  CHECK(p.seen.at(0).json_schema == CheckpointJsonSchema(in.plugin_fields));
  CHECK(out->parsed.plugin_fields.at("memories") == R"(["uses vim"])");
  CHECK(out->calls == 1);
  CHECK(out->usage.prompt_tokens == 100);
  CHECK(out->writer == "scripted");
}

// ---------------------------------------------------------------------------------------------
// R3.5 earlier checkpoints are prior state

TEST_CASE("R3.5 a checkpoint inside the span is passed as prior state, not as a message") {
  Checkpoint prior;
  prior.goal = "Port the parser";
  prior.next_steps = {"run the tests"};
  Transcript span;
  span.Append(CheckpointMessage(prior));
  for (const Message& m : SmallSpan()) span.Append(m);

  auto p = ScriptedProvider::Replying(R"({"goal": "Port the parser", "accomplished": ["x"]})");
  auto out = Run(p, Input(span));
  REQUIRE(out.ok());
  const auto& s = p.seen.at(0);
  const std::string& text = s.text();
  CHECK(text.rfind("Previous checkpoint \xE2\x80\x94 merge it into the new one; keep what is still "
                   "true:\n\n" +
                       RenderCheckpoint(prior),
                   0) == 0);
  CHECK(text.find("[user]\n# Checkpoint") == std::string::npos);
  CHECK(Count(text, "# Checkpoint") == 1);
  REQUIRE(s.prior.has_value());
  CHECK(s.prior->goal == "Port the parser");
  CHECK(s.prior->next_steps == prior.next_steps);
  CHECK(s.span_ids.size() == 5);  // the checkpoint is not part of the span to summarize
}

TEST_CASE("R3.5 with several checkpoints the last is the prior, earlier ones are prior text") {
  Checkpoint older;
  older.goal = "older goal";
  Checkpoint newer;
  newer.goal = "newer goal";
  Transcript span;
  span.Append(CheckpointMessage(older));
  span.Append(CheckpointMessage(newer));
  span.Append(Message::UserText("continue"));
  auto p = ScriptedProvider::Replying(R"({"goal": "g"})");
  REQUIRE(Run(p, Input(span)).ok());
  const std::string& text = p.seen.at(0).text();
  const auto earlier = text.find("Earlier checkpoint");
  const auto previous = text.find("Previous checkpoint");
  REQUIRE(earlier != std::string::npos);
  REQUIRE(previous != std::string::npos);
  CHECK(earlier < text.find("older goal"));
  CHECK(text.find("older goal") < previous);
  CHECK(previous < text.find("newer goal"));
  CHECK(p.seen.at(0).prior->goal == "newer goal");
}

TEST_CASE("R3.5 context a plugin injected after the checkpoint is not taken for the prior") {
  Checkpoint prior;
  prior.goal = "the real goal";
  Message injected = Message::UserText("Memories: the user prefers tabs.");
  injected.summary = true;  // how the Compactor stores injected context
  Transcript span;
  span.Append(CheckpointMessage(prior));
  span.Append(injected);
  span.Append(Message::UserText("continue"));
  auto p = ScriptedProvider::Replying(R"({"goal": "g"})");
  REQUIRE(Run(p, Input(span)).ok());
  const auto& s = p.seen.at(0);
  REQUIRE(s.prior.has_value());
  CHECK(s.prior->structured);
  CHECK(s.prior->goal == "the real goal");
  const std::string& text = s.text();
  const auto context = text.find("Context added with an earlier checkpoint");
  REQUIRE(context != std::string::npos);
  CHECK(context < text.find("Memories: the user prefers tabs."));
  CHECK(text.find("Memories: the user prefers tabs.") < text.find("Previous checkpoint"));
  CHECK(text.find("[user]\nMemories") == std::string::npos);
  CHECK(s.span_ids.size() == 1);

  // The offline summarizer finds the same prior on its own.
  auto offline = NewOfflineSummarizer();
  SummarySource source{&span, nullptr, {}};
  CompletionRequest request;
  request.source = &source;
  auto reply = offline->Complete(request, CancellationToken());
  REQUIRE(reply.ok());
  CHECK(ParseCheckpoint(reply->text, false).checkpoint.goal == "the real goal");
}

// ---------------------------------------------------------------------------------------------
// R4.7 a span too big for one request

TEST_CASE("R4.7 large tool outputs are shortened for the summarizer's eyes first") {
  Transcript span;
  span.Append(Message::UserText("grep the repo"));
  span.Append(
      Message::AssistantCalls({ToolCall{"c1", "bash", R"({"command":"grep -r x ."})", {}}}));
  span.Append(Message::ToolOutput("c1", std::string(100000, 'x')));
  span.Append(Message::AssistantText("done"));
  SummarizeInput in = Input(span);
  const std::size_t prompt = CountCodePoints(SummarizerSystemPrompt(in));
  in.max_request_chars = prompt + 30000;

  auto p = ScriptedProvider::Replying(R"({"goal": "g"})");
  std::vector<std::pair<int, int>> progress;
  auto out = Run(p, in, [&](int k, int n) { progress.emplace_back(k, n); });
  REQUIRE(out.ok());
  REQUIRE(p.seen.size() == 1);  // shortening was enough: no chunks
  CHECK(progress.empty());
  const std::string& text = p.seen[0].text();
  CHECK(Count(text, kTruncationMarker) == 1);
  CHECK(CountCodePoints(text) + prompt <= in.max_request_chars);
  CHECK(CountCodePoints(text) > 10000);  // shortened only as far as needed
  CHECK(text.find("grep -r x .") != std::string::npos);
  // Only the summarizer's view changes: the span itself is untouched.
  CHECK(JoinedText(span[0]) == "grep the repo");
  CHECK(std::get<Text>(std::get<ToolResult>(span[2].parts[0]).content[0]).text.size() == 100000);
}

TEST_CASE("R4.7 when shortening is not enough the span is summarized in folding chunks") {
  Transcript span;
  for (int i = 0; i < 40; ++i) {
    span.Append(WithId(Message::UserText("MSG-" + std::to_string(i) + "-" + std::string(3000, 'u')),
                       "m" + std::to_string(i)));
  }
  SummarizeInput in = Input(span);
  in.plugin_fields = {{"memories", "facts", R"({"type":"array"})"}};
  const std::size_t prompt = CountCodePoints(SummarizerSystemPrompt(in));
  in.max_request_chars = prompt + 20000;

  ScriptedProvider p([](std::size_t i, const CompletionRequest&) {
    Json reply = {{"goal", "chunk " + std::to_string(i + 1)},
                  {"accomplished", Json::array({"step " + std::to_string(i + 1)})},
                  {"memories", Json::array({"m" + std::to_string(i % 2)})}};
    return Result<Completion>(Reply(reply.dump()));
  });
  std::vector<std::pair<int, int>> progress;
  auto out = Run(p, in, [&](int k, int n) { progress.emplace_back(k, n); });
  REQUIRE(out.ok());
  const int n = static_cast<int>(p.seen.size());
  REQUIRE(n > 2);
  CHECK(out->calls == n);
  CHECK(out->usage.prompt_tokens == 100u * static_cast<unsigned>(n));
  CHECK(out->usage.completion_tokens == 10u * static_cast<unsigned>(n));
  REQUIRE(progress.size() == static_cast<std::size_t>(n));
  for (int k = 0; k < n; ++k) CHECK(progress[k] == std::make_pair(k + 1, n));

  std::vector<std::string> ids;
  for (int k = 0; k < n; ++k) {
    const auto& s = p.seen[k];
    INFO("chunk " << k + 1);
    CHECK(s.system_prompt == p.seen[0].system_prompt);
    CHECK(CountCodePoints(s.system_prompt) + CountCodePoints(s.text()) <= in.max_request_chars);
    CHECK(s.text().find("part " + std::to_string(k + 1) + " of " + std::to_string(n)) !=
          std::string::npos);
    if (k > 0) {
      // Each chunk folds into the previous result.
      CHECK(s.text().find("Previous checkpoint") != std::string::npos);
      CHECK(s.text().find("chunk " + std::to_string(k) + "\n") != std::string::npos);
      REQUIRE(s.prior.has_value());
      CHECK(s.prior->goal == "chunk " + std::to_string(k));
    } else {
      CHECK_FALSE(s.prior.has_value());
    }
    ids.insert(ids.end(), s.span_ids.begin(), s.span_ids.end());
  }
  // Every message is read exactly once, in order, at message boundaries.
  REQUIRE(ids.size() == 40);
  for (int i = 0; i < 40; ++i) CHECK(ids[i] == "m" + std::to_string(i));
  for (int i = 0; i < 40; ++i) {
    std::size_t seen_in = 0;
    for (const auto& s : p.seen) seen_in += Count(s.text(), "MSG-" + std::to_string(i) + "-");
    CHECK(seen_in == 1);
  }
  CHECK(out->parsed.checkpoint.goal == "chunk " + std::to_string(n));
  CHECK_FALSE(out->parsed.partial);
  // Plugin lists from every chunk are kept.
  CHECK(Json::parse(out->parsed.plugin_fields.at("memories")) == Json::array({"m0", "m1"}));
}

TEST_CASE("R4.7 a single message bigger than a request is read clipped") {
  Transcript span;
  span.Append(Message::UserText(std::string(200000, 'q')));
  SummarizeInput in = Input(span);
  const std::size_t prompt = CountCodePoints(SummarizerSystemPrompt(in));
  in.max_request_chars = prompt + 10000;
  auto p = ScriptedProvider::Replying(R"({"goal": "g"})");
  auto out = Run(p, in);
  REQUIRE(out.ok());
  REQUIRE(p.seen.size() == 1);
  CHECK(Count(p.seen[0].text(), kTruncationMarker) == 1);
  CHECK(prompt + CountCodePoints(p.seen[0].text()) <= in.max_request_chars);
}

// A long session with big tool outputs, for the tests of R4.7's limits.
Transcript LongSession() {
  Transcript span;
  for (int i = 0; i < 200; ++i) {
    span.Append(Message::UserText("request " + std::to_string(i) + " " + std::string(500, 'r')));
    span.Append(Message::AssistantCalls(
        {ToolCall{"c" + std::to_string(i), "bash", R"({"command":"cat src/f.cc"})", {}}}));
    span.Append(Message::ToolOutput("c" + std::to_string(i), std::string(20000, 'o')));
  }
  return span;
}

TEST_CASE("R4.7 compaction never fails because the history was too big") {
  SummarizeInput in = Input(LongSession());
  in.max_request_chars = 1000;  // smaller than the system prompt itself
  ScriptedProvider p([](std::size_t i, const CompletionRequest&) {
    return Result<Completion>(Reply(R"({"goal": "g)" + std::to_string(i) + "\"}"));
  });
  int last_progress = 0;
  auto out = Summarize(p, in, CancellationToken(), [&](int k, int) { last_progress = k; });
  REQUIRE(out.ok());
  CHECK(out->calls > 1);
  CHECK(last_progress == out->calls);
  CHECK(out->parsed.checkpoint.goal == "g" + std::to_string(out->calls - 1));
  // Even so, each chunk still sees the result it folds into.
  CHECK(p.seen.back().text().find("## Goal\ng" + std::to_string(out->calls - 2) + "\n") !=
        std::string::npos);
  // Every message was read, each at least in part.
  std::size_t requests = 0;
  for (const auto& s : p.seen) requests += Count(s.text(), "request ");
  CHECK(requests == 200);
}

TEST_CASE("R4.7 the offline summarizer reads the whole span in one call, whatever the budget") {
  SummarizeInput in = Input(LongSession());
  in.max_request_chars = 1000;
  auto offline = NewOfflineSummarizer();
  CHECK(internal::IsOfflineSummarizer(*offline));
  auto out = Run(*offline, in);
  REQUIRE(out.ok());
  CHECK(out->calls == 1);
  CHECK(out->parsed.checkpoint.structured);
  CHECK(out->parsed.checkpoint.goal.rfind("request 0 ", 0) == 0);
  CHECK(out->writer == "offline");
  auto scripted = ScriptedProvider::Replying("{}");
  CHECK_FALSE(internal::IsOfflineSummarizer(scripted));
}

TEST_CASE("R4.7 a chunk cut by the output limit makes the whole summary partial") {
  Transcript span;
  for (int i = 0; i < 10; ++i) span.Append(Message::UserText(std::string(3000, 'a')));
  SummarizeInput in = Input(span);
  in.max_request_chars = CountCodePoints(SummarizerSystemPrompt(in)) + 12000;
  ScriptedProvider p([](std::size_t i, const CompletionRequest&) {
    if (i == 0)
      return Result<Completion>(
          Reply(R"({"goal": "g", "nextSteps": ["a", "b)", FinishReason::kLength));
    return Result<Completion>(Reply(R"({"goal": "g2"})"));
  });
  auto out = Run(p, in);
  REQUIRE(out.ok());
  CHECK(p.seen.size() > 1);
  CHECK(out->parsed.partial);
  CHECK(out->parsed.checkpoint.goal == "g2");
}

// ---------------------------------------------------------------------------------------------
// R5 cut, empty and failed replies

TEST_CASE("R5.2 a cut reply with complete members is kept as partial") {
  auto p =
      ScriptedProvider::Replying(R"({"goal": "g", "nextSteps": ["a", "b)", FinishReason::kLength);
  auto out = Run(p, Input(SmallSpan()));
  REQUIRE(out.ok());
  CHECK(out->parsed.usable);
  CHECK(out->parsed.partial);
  CHECK(out->parsed.checkpoint.goal == "g");
  CHECK(out->parsed.checkpoint.next_steps == std::vector<std::string>{"a"});
}

TEST_CASE("R5.3 a cut reply with nothing usable fails with the exact error") {
  for (const std::string reply : {"", "{\"goal\": \"Fix the", "```json\n{"}) {
    INFO(reply);
    auto p = ScriptedProvider::Replying(reply, FinishReason::kLength);
    SummarizeInput in = Input(SmallSpan());
    in.max_output_tokens = 1234;
    auto out = Run(p, in);
    REQUIRE_FALSE(out.ok());
    CHECK(out.status().code() == StatusCode::kResourceExhausted);
    CHECK(out.status().message() ==
          "The summary was cut off by compaction.maxOutputTokens (1234) before anything usable "
          "was written. Raise compaction.maxOutputTokens and compact again.");
  }
}

TEST_CASE("R5.3 an empty reply is an unavailable summarizer") {
  for (FinishReason f : {FinishReason::kStop, FinishReason::kOther}) {
    auto p = ScriptedProvider::Replying("  \n ", f);
    auto out = Run(p, Input(SmallSpan()));
    REQUIRE_FALSE(out.ok());
    CHECK(out.status().code() == StatusCode::kUnavailable);
    CHECK(out.status().message() == "the summarizer returned an empty reply");
  }
}

TEST_CASE("R4.3 a reply that is not a checkpoint becomes a text-only one") {
  auto p = ScriptedProvider::Replying("We fixed the parser.");
  auto out = Run(p, Input(SmallSpan()));
  REQUIRE(out.ok());
  CHECK_FALSE(out->parsed.checkpoint.structured);
  CHECK(out->parsed.checkpoint.text == "We fixed the parser.");
}

TEST_CASE("R7.1 a provider error comes back with the summarizer named") {
  ScriptedProvider p([](std::size_t, const CompletionRequest&) {
    return Result<Completion>(Status::Unavailable("HTTP 503 from the server"));
  });
  auto out = Run(p, Input(SmallSpan()));
  REQUIRE_FALSE(out.ok());
  CHECK(out.status().code() == StatusCode::kUnavailable);
  CHECK(out.status().message() == "summarizer (scripted): HTTP 503 from the server");
}

TEST_CASE("R7.1 a provider that throws is a failed call, not a crash") {
  ScriptedProvider p([](std::size_t, const CompletionRequest&) -> Result<Completion> {
    throw std::runtime_error("socket closed");
  });
  auto out = Run(p, Input(SmallSpan()));
  REQUIRE_FALSE(out.ok());
  CHECK(out.status().code() == StatusCode::kUnavailable);
  CHECK(out.status().message().find("socket closed") != std::string::npos);
}

TEST_CASE("R4.7 cancellation stops before the next call") {
  CancellationSource source;
  source.Cancel();
  auto p = ScriptedProvider::Replying(R"({"goal": "g"})");
  auto out = Summarize(p, Input(SmallSpan()), source.Token(), nullptr);
  REQUIRE_FALSE(out.ok());
  CHECK(out.status().code() == StatusCode::kCancelled);
  CHECK(p.seen.empty());

  // Cancelled between chunks: the remaining chunks are not sent.
  Transcript span;
  for (int i = 0; i < 10; ++i) span.Append(Message::UserText(std::string(3000, 'a')));
  SummarizeInput in = Input(span);
  in.max_request_chars = CountCodePoints(SummarizerSystemPrompt(in)) + 12000;
  CancellationSource mid;
  ScriptedProvider q([&mid](std::size_t, const CompletionRequest&) {
    mid.Cancel();
    return Result<Completion>(Reply(R"({"goal": "g"})"));
  });
  out = Summarize(q, in, mid.Token(), nullptr);
  CHECK(out.status().code() == StatusCode::kCancelled);
  CHECK(q.seen.size() == 1);
}

// Issue 18: the checkpoint is kept as its struct. The Compactor hands the checkpoint it
// committed to the next compaction as the prior without reading its Markdown back; only a
// Compactor that loaded the session from the store (a new process) parses it, once.
TEST_CASE(
    "R3.5 the committed checkpoint is the next prior as its struct, parsed back only after a "
    "reload") {
  const std::string session = "kept-struct";
  std::shared_ptr<SessionStore> store = NewInMemorySessionStore();
  auto provider = std::make_shared<recap::testing::ScriptedProvider>();
  provider->SetDefault(
      recap::testing::ScriptedStep::Reply(recap::testing::ValidCheckpointJson("Ship the fix")));
  Config config;
  config.limits.max_context_chars = 10000;
  auto make = [&] {
    auto made = Compactor::Create(config, provider, store);
    REQUIRE(made.ok());
    return std::move(made).value();
  };
  int turn = 0;
  auto turns = [&](int n) {
    for (int k = 0; k < n; ++k, ++turn) {
      const std::string id = "call_" + std::to_string(turn);
      REQUIRE(store->Append(session, Message::UserText("request " + std::to_string(turn))).ok());
      REQUIRE(store
                  ->Append(session, Message::AssistantCalls(
                                        {ToolCall{id, "read_file", R"({"path":"a.cc"})", {}}}))
                  .ok());
      REQUIRE(store->Append(session, Message::ToolOutput(id, std::string(1500, 'o'))).ok());
      REQUIRE(
          store->Append(session, Message::AssistantText("answer " + std::to_string(turn))).ok());
    }
  };
  auto compact = [&](Compactor& compactor) {
    auto prepared = compactor.Prepare(session, {});
    REQUIRE(prepared.ok());
    REQUIRE(prepared->compactions.size() == 1);
  };

  std::unique_ptr<Compactor> first = make();
  turns(7);
  compact(*first);
  const std::size_t parsed = internal::PriorCheckpointsParsed();

  // The same Compactor again: the prior is the struct it committed, not read back.
  turns(7);
  compact(*first);
  CHECK(internal::PriorCheckpointsParsed() == parsed);
  std::vector<recap::testing::RecordedRequest> requests = provider->Requests();
  REQUIRE(requests.size() == 2);
  REQUIRE(requests[1].prior.has_value());
  CHECK(requests[1].prior->goal == "Ship the fix");
  CHECK(requests[1].prior->structured);

  // The struct counts toward the cache's budget (R12.6): the Compactor that keeps it reports
  // at least the checkpoint's size more than one that only loaded the session.
  std::unique_ptr<Compactor> fresh = make();
  auto loaded = fresh->Prepare(session, {});
  REQUIRE(loaded.ok());
  REQUIRE(loaded->compactions.empty());
  REQUIRE(loaded->messages[0].summary);
  const std::size_t checkpoint_bytes = JoinedText(loaded->messages[0]).size();
  CHECK(first->cache_stats().bytes >= fresh->cache_stats().bytes + checkpoint_bytes);

  // A new Compactor loads the session from the store: the stored Markdown is all there is,
  // and it is parsed once, to the same struct.
  std::unique_ptr<Compactor> second = make();
  turns(7);
  compact(*second);
  CHECK(internal::PriorCheckpointsParsed() == parsed + 1);
  requests = provider->Requests();
  REQUIRE(requests.size() == 3);
  REQUIRE(requests[2].prior.has_value());
  CHECK(requests[2].prior->goal == "Ship the fix");
  CHECK(requests[2].prior->next_steps == requests[1].prior->next_steps);
}

// --- The summarizer input budget (compaction.maxSummarizerInputTokens, issue 19) -------------

namespace {

// 200 messages of 2,000 characters, each starting with its own tag.
Transcript LongSpan() {
  Transcript span;
  for (int i = 0; i < 200; ++i) {
    const std::string tag = "MSG-" + std::to_string(i) + "-";
    span.Append(WithId(i % 2 == 0 ? Message::UserText(tag + std::string(2000, 'u'))
                                  : Message::AssistantText(tag + std::string(2000, 'a')),
                       "m" + std::to_string(i)));
  }
  return span;
}

std::size_t Sent(const ScriptedProvider& p) {
  std::size_t n = 0;
  for (const auto& s : p.seen) n += CountCodePoints(s.system_prompt) + CountCodePoints(s.text());
  return n;
}

std::string AllText(const ScriptedProvider& p) {
  std::string all;
  for (const auto& s : p.seen) all += s.text();
  return all;
}

}  // namespace

TEST_CASE("issue 19 the summarizer input budget caps what one summary sends, newest in full",
          "[R4.7]") {
  const std::string reply = R"({"goal":"g","accomplished":["a"]})";
  for (const std::size_t request_limit : {std::size_t{0}, std::size_t{60000}}) {
    DYNAMIC_SECTION("max_request_chars " << request_limit) {
      // Without a budget: everything, about 400,000 characters.
      ScriptedProvider all = ScriptedProvider::Replying(reply);
      SummarizeInput in = Input(LongSpan());
      in.max_request_chars = request_limit;
      REQUIRE(Run(all, in).ok());
      CHECK(Sent(all) > 400000);

      in.max_input_chars = 80000;
      ScriptedProvider capped = ScriptedProvider::Replying(reply);
      auto out = Run(capped, in);
      REQUIRE(out.ok());
      INFO("calls " << capped.seen.size() << ", sent " << Sent(capped));
      CHECK(Sent(capped) <= in.max_input_chars);
      // The budget is used, not wasted (one request, or as much as one request holds when a
      // second one's repeated prompt and prior would not fit).
      const std::size_t usable =
          request_limit == 0 ? in.max_input_chars : std::min(in.max_input_chars, request_limit);
      CHECK(Sent(capped) > usable * 8 / 10);
      const std::string text = AllText(capped);
      // Every message leaves a trace: its label and its tag.
      for (int i = 0; i < 200; ++i) CHECK(Count(text, "MSG-" + std::to_string(i) + "-") == 1);
      // The newest message is sent whole; the oldest is shortened.
      CHECK(text.find("MSG-199-" + std::string(2000, 'a')) != std::string::npos);
      CHECK(text.find("MSG-0-" + std::string(2000, 'u')) == std::string::npos);
      if (request_limit > 0) {
        CHECK(capped.seen.size() < all.seen.size());
        for (const auto& s : capped.seen) {
          CHECK(CountCodePoints(s.system_prompt) + CountCodePoints(s.text()) <= request_limit);
        }
      }
    }
  }
}

TEST_CASE("issue 19 a budget below every message's trace: the oldest go, one note says so",
          "[R4.7]") {
  ScriptedProvider p = ScriptedProvider::Replying(R"({"goal":"g"})");
  SummarizeInput in = Input(LongSpan());
  in.max_input_chars = 12000;  // the system prompt and about 50 traces
  REQUIRE(Run(p, in).ok());
  REQUIRE(p.seen.size() == 1);
  CHECK(Sent(p) <= in.max_input_chars);
  const std::string text = AllText(p);
  const auto note = text.find(" older messages are not shown: compaction.maxSummarizerInputTokens");
  REQUIRE(note != std::string::npos);
  const std::size_t start = text.rfind('[', note) + 1;
  const int omitted = std::stoi(text.substr(start, note - start));
  CHECK(omitted > 100);
  // The note stands for exactly the oldest messages; every later one leaves its trace.
  for (int i = 0; i < 200; ++i) {
    CHECK(Count(text, "MSG-" + std::to_string(i) + "-") == (i < omitted ? 0u : 1u));
  }
  CHECK(note < text.find("MSG-" + std::to_string(omitted) + "-"));
}
