// Getting it back (SPEC R18) through the Compactor: the recall tool's definition and arguments,
// Recall and AnswerRecall after a compaction whose summary names nothing, and Uncompact with its
// event — over the store support/test_store.h makes (in-memory, or SQLite with RECAP_TEST_STORE).
#include <memory>
#include <string>
#include <vector>

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include "recap/compactor.h"
#include "recap/measure.h"
#include "recap/recall.h"

#include "support/host.h"

using namespace recap;
using recap::testing::CompactorHost;
using recap::testing::Ok;
using recap::testing::ScriptedStep;
using Json = nlohmann::json;

namespace {

// Four turns; the first holds a fact nothing else holds (the code ZEBRA-42, in a tool result).
std::vector<Message> FourTurns() {
  std::vector<Message> ms;
  ms.push_back(Message::UserText("look up the launch code in vault.txt"));
  ms.push_back(
      Message::AssistantCalls({ToolCall{"call_1", "read", R"({"path":"vault.txt"})", {}}}));
  ms.push_back(Message::ToolOutput("call_1", "launch code: ZEBRA-42\nkeep it secret"));
  ms.push_back(Message::AssistantText("I have the code."));
  for (int turn = 2; turn <= 4; ++turn) {
    ms.push_back(Message::UserText("turn " + std::to_string(turn) + ": tell me about boats"));
    ms.push_back(Message::AssistantText(std::string(300, 'b')));
  }
  return ms;
}

// A summary that names nothing of the span.
constexpr const char* kGenericSummary =
    R"({"goal":"help the user","user_requests":["some things"],"current_state":"working"})";

std::string JoinedResult(const ToolResult& r) {
  std::string out;
  for (const ResultItem& item : r.content) {
    if (const auto* t = std::get_if<Text>(&item)) out += t->text;
  }
  return out;
}

bool SearchableTextHas(const Message& m, const std::string& what) {
  for (const Part& p : m.parts) {
    if (const auto* t = std::get_if<Text>(&p); t && t->text.find(what) != std::string::npos) {
      return true;
    }
    if (const auto* r = std::get_if<ToolResult>(&p);
        r && JoinedResult(*r).find(what) != std::string::npos) {
      return true;
    }
  }
  return false;
}

Config SmallConfig() {
  Config c;
  c.compaction.keep_turns = 1;
  c.compaction.ledger.enabled = false;  // the summary alone decides what is sent
  return c;
}

}  // namespace

TEST_CASE("R18.2 the recall tool is defined in each wire format with query, ids and max_chars") {
  const Json chat = Json::parse(RecallTool(ToolFormat::kOpenAIChat));
  CHECK(chat["type"] == "function");
  CHECK(chat["function"]["name"] == "recap_recall");
  CHECK(chat["function"]["description"].get<std::string>().find("summarized") != std::string::npos);
  const Json& chat_params = chat["function"]["parameters"];
  const Json anthropic = Json::parse(RecallTool(ToolFormat::kAnthropic));
  CHECK(anthropic["name"] == "recap_recall");
  CHECK(anthropic.count("type") == 0);
  const Json responses = Json::parse(RecallTool(ToolFormat::kOpenAIResponses));
  CHECK(responses["type"] == "function");
  CHECK(responses["name"] == "recap_recall");
  for (const Json* params : {&chat_params, &anthropic["input_schema"], &responses["parameters"]}) {
    CHECK((*params)["type"] == "object");
    CHECK((*params)["properties"]["query"]["type"] == "string");
    CHECK((*params)["properties"]["ids"]["type"] == "array");
    CHECK((*params)["properties"]["ids"]["items"]["type"] == "string");
    CHECK((*params)["properties"]["max_chars"]["type"] == "integer");
  }
}

TEST_CASE("R18.2 recall arguments: what the model may send, and what it is told when wrong") {
  RecallQuery q =
      Ok(ParseRecallArguments(R"({"query":"ZEBRA","ids":["m1","m2"],"max_chars":500})"));
  CHECK(q.text == "ZEBRA");
  CHECK(q.ids == std::vector<std::string>{"m1", "m2"});
  CHECK(q.max_chars == 500);
  CHECK(Ok(ParseRecallArguments(R"({"ids":"m1"})")).ids == std::vector<std::string>{"m1"});
  CHECK(Ok(ParseRecallArguments(R"({"query":"x","max_chars":5})")).max_chars == 200);
  CHECK(Ok(ParseRecallArguments(R"({"query":"x","max_chars":1e9})")).max_chars == 100000);
  CHECK(Ok(ParseRecallArguments(R"({"query":"x","extra":true})")).text == "x");
  for (const char* bad : {"", "   ", "not json", "[1]", "{}", R"({"query":"  "})", R"({"query":7})",
                          R"({"ids":[1]})", R"({"ids":{}})", R"({"query":"x","max_chars":"lots"})",
                          R"({"query":"x","max_chars":null,"ids":[null]})"}) {
    INFO(bad);
    Result<RecallQuery> r = ParseRecallArguments(bad);
    REQUIRE_FALSE(r.ok());
    CHECK(r.status().code() == StatusCode::kInvalidArgument);
    CHECK(r.status().message().find("recap_recall") == 0);
    CHECK(r.status().message().find(R"({"query": "words to look for"})") != std::string::npos);
  }
}

TEST_CASE("R18.1 after a compaction whose summary names nothing, Recall gets the fact back") {
  CompactorHost<> h(SmallConfig());
  h.provider->SetDefault(ScriptedStep::Reply(kGenericSummary));
  h.Append("s", FourTurns());
  const CompactOutcome done = Ok(h.compactor->Compact("s"));
  REQUIRE(done.compacted);
  const Prepared sent = h.Prepare("s");
  for (const Message& m : sent.messages) CHECK(SearchableTextHas(m, "ZEBRA-42") == false);

  RecallQuery q;
  q.text = "launch code zebra-42";
  const Recalled r = Ok(h.compactor->Recall("s", q));
  REQUIRE_FALSE(r.messages.empty());
  CHECK(r.messages[0].text.find("launch code: ZEBRA-42") != std::string::npos);
  CHECK(r.messages[0].state == "summarized");
  CHECK(r.messages[0].replaced_by == "compaction:1");
  CHECK(r.messages[0].turn == 1);
  CHECK(r.messages[0].role == Role::kTool);
  CHECK(r.text.find("launch code: ZEBRA-42") != std::string::npos);
  CHECK(r.text.find("--- message " + r.messages[0].id + " (turn 1, tool, summarized) ---") !=
        std::string::npos);

  // By id; the active ones only when asked.
  RecallQuery by_id;
  by_id.ids = {r.messages[0].id};
  CHECK(Ok(h.compactor->Recall("s", by_id)).messages.size() == 1);
  RecallQuery boats;
  boats.text = "boats";
  const Recalled summarized = Ok(h.compactor->Recall("s", boats));
  CHECK(summarized.messages.size() == 2);  // turns 2 and 3; turn 4 is still active
  for (const RecalledMessage& m : summarized.messages) CHECK(m.state == "summarized");
  boats.include_active = true;
  bool active = false;
  for (const RecalledMessage& m : Ok(h.compactor->Recall("s", boats)).messages) {
    active = active || m.state == "active";
  }
  CHECK(active);

  // Nothing found says so.
  RecallQuery none;
  none.text = "pelican";
  const Recalled nothing = Ok(h.compactor->Recall("s", none));
  CHECK(nothing.messages.empty());
  CHECK(nothing.text.find("nothing in this conversation's history matches \"pelican\"") !=
        std::string::npos);
}

TEST_CASE("R18.1 the budget: matches share it, each cut where it matched, the rest named by id") {
  CompactorHost<> h(SmallConfig());
  h.provider->SetDefault(ScriptedStep::Reply(kGenericSummary));
  std::vector<Message> ms;
  for (int i = 0; i < 6; ++i) {
    ms.push_back(
        Message::UserText("note " + std::to_string(i) + " about KESTREL " + std::string(900, 'k')));
    ms.push_back(Message::AssistantText("ok"));
  }
  h.Append("s", ms);
  REQUIRE(Ok(h.compactor->Compact("s")).compacted);  // notes 0-4 summarized, note 5 kept
  RecallQuery q;
  q.text = "kestrel";
  q.max_chars = 2500;
  const Recalled r = Ok(h.compactor->Recall("s", q));
  // Five matches, about 950 characters each: each gets a share of at least 600, four fit.
  REQUIRE(r.messages.size() == 4);
  std::size_t chars = 0;
  for (const RecalledMessage& m : r.messages) {
    CHECK(m.clipped);
    CHECK(m.text.find("about KESTREL") != std::string::npos);
    CHECK(m.text.find("[truncated by context budget]") != std::string::npos);
    CHECK(CountCodePoints(m.text) < 600);
    chars += CountCodePoints(m.text);
  }
  CHECK(chars <= 2500);
  CHECK(r.left_out == 1);
  REQUIRE(r.left_out_ids.size() == 1);
  CHECK(r.text.find("1 more matched but did not fit (max_chars 2500, at most 20 messages); ask "
                    "for them by id: " +
                    r.left_out_ids[0]) != std::string::npos);
  CHECK(r.text.find("There may be more") == std::string::npos);
  // Beyond max_messages: named too, and when the store may hold still more, the answer says so.
  q.max_messages = 2;
  q.max_chars = 100000;
  const Recalled two = Ok(h.compactor->Recall("s", q));
  CHECK(two.messages.size() == 2);
  CHECK(two.left_out_ids.size() == 3);
  CHECK(two.text.find("There may be more") == std::string::npos);
  // Asked by id, a message gets the whole budget.
  RecallQuery by_id;
  by_id.ids = r.left_out_ids;
  by_id.max_chars = 2500;
  const Recalled whole = Ok(h.compactor->Recall("s", by_id));
  REQUIRE(whole.messages.size() == 1);
  CHECK_FALSE(whole.messages[0].clipped);
  CHECK(CountCodePoints(whole.messages[0].text) > 900);
}

TEST_CASE("R18.1 more matches than a recall fetches: the answer says there may be more") {
  CompactorHost<> h(SmallConfig());
  h.provider->SetDefault(ScriptedStep::Reply(kGenericSummary));
  std::vector<Message> ms;
  for (int i = 0; i < 45; ++i) {
    ms.push_back(Message::UserText("heron sighting " + std::to_string(i)));
    ms.push_back(Message::AssistantText("ok"));
  }
  h.Append("s", ms);
  REQUIRE(Ok(h.compactor->Compact("s")).compacted);
  RecallQuery q;
  q.text = "heron";
  q.max_messages = 2;
  const Recalled r = Ok(h.compactor->Recall("s", q));
  CHECK(r.messages.size() == 2);
  CHECK(r.left_out_ids.size() == 30);  // the next ones, named
  CHECK(r.text.find("There may be more matches than these") != std::string::npos);
}

TEST_CASE("R18.1 a long original is shown where it matched, not only its beginning") {
  CompactorHost<> h(SmallConfig());
  h.provider->SetDefault(ScriptedStep::Reply(kGenericSummary));
  std::string output;
  for (int i = 0; i < 400; ++i) output += "line " + std::to_string(i) + " \xC3\xA9t\xC3\xA9 ok\n";
  output += "the signing key is OSPREY-99\n";
  for (int i = 400; i < 800; ++i) output += "line " + std::to_string(i) + " ok\n";
  h.Append("s", {Message::UserText("dump the config"),
                 Message::AssistantCalls({ToolCall{"c1", "cat", R"({"path":"cfg"})", {}}}),
                 Message::ToolOutput("c1", output), Message::AssistantText("done"),
                 Message::UserText("next"), Message::AssistantText("ok")});
  REQUIRE(Ok(h.compactor->Compact("s")).compacted);
  RecallQuery q;
  q.text = "signing key";
  q.max_chars = 1000;
  const Recalled r = Ok(h.compactor->Recall("s", q));
  REQUIRE(r.messages.size() == 1);
  const std::string& text = r.messages[0].text;
  CHECK(r.messages[0].clipped);
  CHECK(text.find("the signing key is OSPREY-99") != std::string::npos);
  CHECK(text.rfind("\xE2\x80\xA6 ", 0) == 0);  // "… ": it starts inside the original
  CHECK(text.find("[truncated by context budget]") != std::string::npos);
  CHECK(CountCodePoints(text) <= 1000);
  CHECK(IsValidUtf8(text));
}

TEST_CASE("R18.2 AnswerRecall answers the call as a tool result of the call's format") {
  CompactorHost<> h(SmallConfig());
  h.provider->SetDefault(ScriptedStep::Reply(kGenericSummary));
  h.Append("s", FourTurns());
  REQUIRE(Ok(h.compactor->Compact("s")).compacted);
  const ToolCall call{"call_9", "recap_recall", R"({"query":"launch code"})", {}};
  for (const ToolFormat f :
       {ToolFormat::kOpenAIChat, ToolFormat::kAnthropic, ToolFormat::kOpenAIResponses}) {
    const Message m = Ok(h.compactor->AnswerRecall("s", call, f));
    CHECK(m.role == (f == ToolFormat::kAnthropic ? Role::kUser : Role::kTool));
    CHECK_FALSE(m.id.empty());
    REQUIRE(m.parts.size() == 1);
    const auto* result = std::get_if<ToolResult>(&m.parts[0]);
    REQUIRE(result != nullptr);
    CHECK(result->call_id == "call_9");
    CHECK_FALSE(result->is_error);
    CHECK(JoinedResult(*result).find("ZEBRA-42") != std::string::npos);
  }
  // Wrong arguments: an error result that says how to call it; the model can try again.
  const Message wrong =
      Ok(h.compactor->AnswerRecall("s", ToolCall{"call_10", "recap_recall", "{}", {}}));
  const auto* result = std::get_if<ToolResult>(&wrong.parts[0]);
  REQUIRE(result != nullptr);
  CHECK(result->is_error);
  CHECK(JoinedResult(*result).find("needs `query`") != std::string::npos);
  // Not a recall call: the host's mistake.
  Result<Message> other = h.compactor->AnswerRecall("s", ToolCall{"c", "read", "{}", {}});
  CHECK(other.status().code() == StatusCode::kInvalidArgument);
}

TEST_CASE("R18.3 Uncompact restores the transcript as it was, says so, and undoes the one before") {
  CompactorHost<> h(SmallConfig());
  h.provider->SetDefault(ScriptedStep::Reply(kGenericSummary));
  h.Append("s", FourTurns());
  const Prepared original = h.Prepare("s");
  REQUIRE(original.compactions.empty());
  REQUIRE(Ok(h.compactor->Compact("s")).compacted);
  h.Append("s", Message::UserText("after the first compaction"));
  REQUIRE(Ok(h.compactor->Compact("s")).compacted);
  const std::size_t compacted_chars = h.Prepare("s").messages.chars();

  const UncompactOutcome u2 = Ok(h.compactor->Uncompact("s"));
  CHECK(u2.undone);
  CHECK(u2.commit == "compaction:2");
  CHECK(u2.reason == "manual");
  CHECK(u2.before_chars == compacted_chars);
  CHECK(u2.after_chars > u2.before_chars);
  const auto events = h.sink->OfType("compaction_undone");
  REQUIRE(events.size() == 1);
  const Json e = events[0];
  CHECK(e["undone"] == "compaction:2");
  CHECK(e["reason"] == "manual");
  CHECK(e["restored_messages"] == u2.restored_messages);
  CHECK(e["retired_messages"] == u2.retired_messages);
  CHECK(e["before"]["chars"] == u2.before_chars);
  CHECK(e["after"]["chars"] == u2.after_chars);

  const UncompactOutcome u1 = Ok(h.compactor->Uncompact("s"));
  CHECK(u1.commit == "compaction:1");
  const Prepared back = Ok(h.compactor->Prepare("s", {}));
  REQUIRE(back.messages.size() == original.messages.size() + 1);
  for (std::size_t i = 0; i < original.messages.size(); ++i) {
    CHECK(back.messages[i].id == original.messages[i].id);
  }
  CHECK(JoinedText(back.messages[back.messages.size() - 1]) == "after the first compaction");

  const UncompactOutcome none = Ok(h.compactor->Uncompact("s"));
  CHECK_FALSE(none.undone);
  CHECK(h.sink->OfType("compaction_undone").size() == 2);
  CHECK(h.compactor->Uncompact("").status().code() == StatusCode::kInvalidArgument);
  CHECK(h.compactor->Uncompact("never-written").status().code() == StatusCode::kNotFound);
}

TEST_CASE(
    "R18.2 with compaction.recallTool, a checkpoint and a cleared result name what to ask for, "
    "and asking gets it back") {
  Config config = SmallConfig();
  config.compaction.recall_tool = true;
  {
    CompactorHost<> h(config);
    h.provider->SetDefault(ScriptedStep::Reply(kGenericSummary));
    h.Append("s", FourTurns());
    const std::vector<Message> before = Ok(h.store->Load("s")).transcript.ToVector();
    REQUIRE(Ok(h.compactor->Compact("s")).compacted);
    const Prepared p = h.Prepare("s");
    REQUIRE(p.messages.size() >= 2);
    REQUIRE(p.messages[1].summary);
    const std::string note = JoinedText(p.messages[1]);
    CHECK(note.find("call recap_recall with a query, or with their ids") != std::string::npos);
    CHECK(note.find("(from " + before.front().id + " to ") != std::string::npos);
    RecallQuery q;
    q.ids = {before.front().id};
    const Recalled r = Ok(h.compactor->Recall("s", q));
    REQUIRE(r.messages.size() == 1);
    CHECK(r.messages[0].text == "look up the launch code in vault.txt");
  }
  {
    config.limits.max_context_chars = 4000;
    config.compaction.clear_tool_results.enabled = true;
    config.compaction.clear_tool_results.keep_recent = 0;
    config.compaction.clear_tool_results.min_free_chars = 0;
    CompactorHost<> h(config);
    // A host's own id with a quote and a backslash: the marker writes it as JSON would.
    Message output = Message::ToolOutput("call_1", "OSPREY-7 " + std::string(4000, 'l'));
    output.id = "out\"1\\x";
    h.Append("s", {Message::UserText("read the log"),
                   Message::AssistantCalls({ToolCall{"call_1", "read", R"({"path":"a.log"})", {}}}),
                   output, Message::AssistantText("read it")});
    const Prepared p = h.Prepare("s");
    REQUIRE(p.cleared_tool_result_messages == 1);
    CHECK(h.provider->calls() == 0);
    const Message& cleared = p.messages[2];
    const std::string marker = JoinedResult(std::get<ToolResult>(cleared.parts[0]));
    CHECK(marker == std::string(kClearedToolResultRecallMarker) + "out\\\"1\\\\x\"]}]");
    // The call as the marker spells it gets the original back.
    const std::string args =
        marker.substr(marker.find('{'), marker.rfind('}') - marker.find('{') + 1);
    const Message answer =
        Ok(h.compactor->AnswerRecall("s", ToolCall{"call_2", "recap_recall", args, {}}));
    const std::string text = JoinedResult(std::get<ToolResult>(answer.parts[0]));
    CHECK(text.find("reduced) ---\nresult of call_1: OSPREY-7 llll") != std::string::npos);
    // Cleared once is cleared: the next turn does not clear it again.
    h.Append("s", Message::UserText("next"));
    CHECK(h.Prepare("s").cleared_tool_result_messages == 0);
  }
}

TEST_CASE("R18.1 hostile queries: search syntax, 10 MB, another session's ids") {
  CompactorHost<> h(SmallConfig());
  h.provider->SetDefault(ScriptedStep::Reply(kGenericSummary));
  h.Append("s", FourTurns());
  h.Append("other", FourTurns());
  REQUIRE(Ok(h.compactor->Compact("s")).compacted);
  REQUIRE(Ok(h.compactor->Compact("other")).compacted);
  const std::vector<HistoryEntry> others = Ok(h.store->History("other"));

  // Search syntax of SQLite FTS5, PostgreSQL and the shells is plain text.
  for (const char* text : {"\"ZEBRA-42", "ZEBRA*", "NEAR(launch code)", "-launch", "launch AND",
                           "code OR", "(launch", "launch:code", "' OR 1=1 --", "\\", "%", "_"}) {
    INFO(text);
    RecallQuery q;
    q.text = text;
    Result<Recalled> r = h.compactor->Recall("s", q);
    INFO(r.status().ToString());
    REQUIRE(r.ok());
  }
  RecallQuery q;
  q.text = "ZEBRA*";  // the word ZEBRA, not a prefix search
  CHECK(Ok(h.compactor->Recall("s", q)).messages.size() == 1);

  // 10 MB of words: only the first 32 terms are asked.
  std::string huge;
  while (huge.size() < 10'000'000) huge += "pelican" + std::to_string(huge.size()) + " ";
  q.text = huge + " ZEBRA-42";
  const Recalled big = Ok(h.compactor->Recall("s", q));
  CHECK(big.messages.empty());  // ZEBRA-42 came after the first 32 terms
  q.text = "ZEBRA-42 " + huge;
  CHECK(Ok(h.compactor->Recall("s", q)).messages.size() == 1);
  CHECK(Ok(h.compactor->Recall("s", q)).text.size() < 20000);

  // Another session's ids find nothing here, and its messages never show up by words.
  RecallQuery by_id;
  for (const HistoryEntry& e : others) by_id.ids.push_back(e.message.id);
  by_id.include_active = true;
  CHECK(Ok(h.compactor->Recall("s", by_id)).messages.empty());
  q.text = "launch code";
  q.include_active = true;
  for (const RecalledMessage& m : Ok(h.compactor->Recall("s", q)).messages) {
    for (const HistoryEntry& e : others) CHECK(m.id != e.message.id);
  }
}
