// The OpenAI Responses item codec (issue 9; SPEC R4.5, R6.4): items -> recap -> items gives
// equal JSON values item by item; calls and outputs pair like the other formats' tool calls;
// reasoning travels with the call it precedes, is kept byte-exact when its call is kept and is
// gone with a summarized span.
//
// No openly licensed real transcript in this format exists, so the corpus is built from the
// real OpenAI chat transcripts of tests/data (tau-bench, SOURCES.md), converted item by item,
// with reasoning items carrying opaque `encrypted_content` interleaved before the model's
// turns, plus generated item lists with every item kind.
#include <cstdint>
#include <map>
#include <random>
#include <set>
#include <string>
#include <vector>

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include "recap/codec.h"
#include "recap/safe_boundary.h"
#include "recap/tail_reducer.h"
#include "recap/transcript.h"

#include "support/build_speed.h"
#include "support/test_data.h"

namespace {

using Json = nlohmann::ordered_json;
using recap::Conversation;
using recap::Message;
using recap::Opaque;
using recap::OpaqueLink;
using recap::Role;
using recap::ToolCall;
using recap::ToolResult;

std::uint64_t SeedFromEnv(std::uint64_t fallback) {
  if (const char* s = std::getenv("RECAP_SEED")) return std::strtoull(s, nullptr, 10);
  return fallback;
}

// Base64-looking bytes, as `encrypted_content` is.
std::string Opaque64(std::mt19937_64& rng, std::size_t n) {
  static const char kAlphabet[] =
      "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string out;
  for (std::size_t i = 0; i < n; ++i) out += kAlphabet[rng() % 64];
  return out + "==";
}

Json Reasoning(std::mt19937_64& rng, int k) {
  Json r = {{"type", "reasoning"},
            {"id", "rs_" + std::to_string(k)},
            {"summary", Json::array({{{"type", "summary_text"},
                                      {"text", "Thinking about step " + std::to_string(k)}}})},
            {"encrypted_content", Opaque64(rng, 40 + rng() % 400)}};
  return r;
}

// One OpenAI chat messages array as Responses input items, with reasoning before some of the
// assistant's turns.
Json FromChat(const std::string& chat_json, std::mt19937_64& rng) {
  const Json chat = Json::parse(chat_json);
  Json items = Json::array();
  int k = 0;
  for (const Json& m : chat) {
    const std::string role = m.at("role").get<std::string>();
    if (role == "system" || role == "user") {
      Json item = {{"role", role}};
      if (rng() % 2) item["type"] = "message";
      if (m.contains("content") && m["content"].is_string() && rng() % 3 == 0) {
        item["content"] = Json::array({{{"type", "input_text"}, {"text", m["content"]}}});
      } else {
        item["content"] = m.value("content", Json(""));
        if (item["content"].is_null()) item["content"] = "";
      }
      items.push_back(std::move(item));
    } else if (role == "assistant") {
      if (rng() % 3 != 0) items.push_back(Reasoning(rng, ++k));
      if (m.contains("content") && m["content"].is_string() &&
          !m["content"].get<std::string>().empty()) {
        items.push_back({{"type", "message"},
                         {"id", "msg_" + std::to_string(++k)},
                         {"role", "assistant"},
                         {"status", "completed"},
                         {"content", Json::array({{{"type", "output_text"},
                                                   {"text", m["content"]},
                                                   {"annotations", Json::array()}}})}});
      }
      if (m.contains("tool_calls") && m["tool_calls"].is_array()) {
        for (const Json& tc : m["tool_calls"]) {
          items.push_back({{"type", "function_call"},
                           {"id", "fc_" + std::to_string(++k)},
                           {"call_id", tc.at("id")},
                           {"name", tc.at("function").at("name")},
                           {"arguments", tc.at("function").at("arguments")},
                           {"status", "completed"}});
        }
      }
    } else if (role == "tool") {
      items.push_back({{"type", "function_call_output"},
                       {"call_id", m.at("tool_call_id")},
                       {"output", m.value("content", Json(""))}});
    }
  }
  return items;
}

// A generated item list with every item kind recap knows of, in a valid order.
Json Generated(std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  Json items = Json::array();
  if (rng() % 2) items.push_back({{"role", "developer"}, {"content", "Be brief."}});
  int k = 0;
  const int turns = 1 + static_cast<int>(rng() % 6);
  for (int t = 0; t < turns; ++t) {
    Json user = {{"type", "message"}, {"role", "user"}};
    if (rng() % 2) {
      user["content"] = "question " + std::to_string(t) + " \xC3\xA9\xE2\x82\xAC";
    } else {
      user["content"] = Json::array({{{"type", "input_text"}, {"text", "look at this"}},
                                     {{"type", "input_image"},
                                      {"image_url", "data:image/png;base64,AAAA"},
                                      {"detail", "auto"}}});
    }
    items.push_back(std::move(user));
    const int rounds = static_cast<int>(rng() % 4);
    for (int r = 0; r < rounds; ++r) {
      if (rng() % 2) items.push_back(Reasoning(rng, ++k));
      const int kind = static_cast<int>(rng() % 5);
      const std::string id = "call_" + std::to_string(++k);
      if (kind <= 1) {
        const int parallel = 1 + static_cast<int>(rng() % 3);
        std::vector<std::string> ids;
        for (int p = 0; p < parallel; ++p) {
          ids.push_back(id + "_" + std::to_string(p));
          items.push_back({{"type", "function_call"},
                           {"call_id", ids.back()},
                           {"name", "run"},
                           {"arguments", "{\"cmd\":\"" + std::string(rng() % 3000, 'x') + "\"}"}});
        }
        for (const std::string& c : ids) {
          if (rng() % 4 == 0) {
            items.push_back(
                {{"type", "function_call_output"},
                 {"call_id", c},
                 {"output", Json::array({{{"type", "input_text"},
                                          {"text", std::string(rng() % 20000, 'o')}}})}});
          } else {
            items.push_back({{"type", "function_call_output"},
                             {"id", "fco_" + c},
                             {"call_id", c},
                             {"output", std::string(rng() % 20000, 'o')},
                             {"status", "completed"}});
          }
        }
      } else if (kind == 2) {
        items.push_back({{"type", "computer_call"},
                         {"id", "cu_" + id},
                         {"call_id", id},
                         {"action", {{"type", "click"}, {"x", 10}, {"y", 20}}},
                         {"pending_safety_checks", Json::array()},
                         {"status", "completed"}});
        items.push_back(
            {{"type", "computer_call_output"},
             {"call_id", id},
             {"output",
              {{"type", "computer_screenshot"}, {"image_url", "data:image/png;base64,BBBB"}}}});
      } else if (kind == 3) {
        items.push_back({{"type", "custom_tool_call"},
                         {"call_id", id},
                         {"name", "patch"},
                         {"input", std::string(rng() % 500, 'p')}});
        items.push_back(
            {{"type", "custom_tool_call_output"}, {"call_id", id}, {"output", "applied"}});
      } else {
        items.push_back({{"type", "web_search_call"},
                         {"id", "ws_" + id},
                         {"status", "completed"},
                         {"action", {{"type", "search"}, {"query", "weather"}}}});
      }
    }
    if (rng() % 2) items.push_back(Reasoning(rng, ++k));
    items.push_back({{"type", "message"},
                     {"role", "assistant"},
                     {"id", "msg_" + std::to_string(++k)},
                     {"content", Json::array({{{"type", "output_text"},
                                               {"text", "answer " + std::string(rng() % 5000, 'a')},
                                               {"annotations", Json::array()}}})}});
  }
  if (rng() % 5 == 0) items.push_back({{"type", "item_reference"}, {"id", "msg_0"}});
  if (rng() % 5 == 0) {  // reasoning before an assistant message without content
    items.push_back(Reasoning(rng, ++k));
    items.push_back({{"type", "message"}, {"role", "assistant"}, {"content", Json::array()}});
  }
  return items;
}

// The same JSON value (key order aside, as the codecs promise).
bool SameValue(const Json& a, const Json& b) {
  return nlohmann::json::parse(a.dump()) == nlohmann::json::parse(b.dump());
}

// Decodes, encodes, and compares item by item.
void CheckRoundTrip(const Json& items, const std::string& what) {
  const std::string text = items.dump();
  auto conv = recap::openai_responses::DecodeMessages(text);
  REQUIRE(conv.ok());
  auto back = recap::openai_responses::EncodeMessages(*conv);
  REQUIRE(back.ok());
  const Json out = Json::parse(*back);
  REQUIRE(out.size() == items.size());
  for (std::size_t i = 0; i < items.size(); ++i) {
    if (!SameValue(items[i], out[i])) {
      FAIL(what << ": item " << i << " differs\nwant " << items[i].dump().substr(0, 400)
                << "\ngot  " << out[i].dump().substr(0, 400));
    }
  }
}

// The call ids of the function calls and outputs (and the paired opaque items) in an item list.
struct Links {
  std::vector<std::string> calls;
  std::vector<std::string> outputs;
};
Links LinksOf(const Json& items) {
  Links l;
  for (const Json& it : items) {
    const std::string type = it.value("type", std::string("message"));
    if (type == "function_call" || type == "computer_call" || type == "custom_tool_call") {
      l.calls.push_back(it.at("call_id"));
    } else if (type == "function_call_output" || type == "computer_call_output" ||
               type == "custom_tool_call_output") {
      l.outputs.push_back(it.at("call_id"));
    }
  }
  return l;
}

std::set<std::string> ReasoningIds(const Json& items) {
  std::set<std::string> ids;
  for (const Json& it : items) {
    if (it.value("type", std::string()) == "reasoning") ids.insert(it.at("id").get<std::string>());
  }
  return ids;
}

// Cuts (keeping `keep_turns` turns) and reduces the kept part, as a compaction would, and
// checks what would be sent: pairs whole, kept reasoning byte-exact, summarized reasoning gone.
void CheckCompacted(const Json& items, int keep_turns, const std::string& what) {
  auto conv = recap::openai_responses::DecodeMessages(items.dump());
  REQUIRE(conv.ok());
  const recap::Transcript t(conv->messages);
  // Whole turns, then a size limit that moves the cut inside the last turn (R3.8), between
  // the items of the model's work.
  for (const std::size_t limit : {std::size_t{0}, t.chars() / 10 + 1}) {
    recap::CutOptions options;
    options.keep_turns = keep_turns;
    options.kept_chars_limit = limit;
    const recap::CutDecision cut = recap::FindCut(t, options);
    if (!cut.ok()) continue;
    const recap::Transcript kept = t.Slice(cut.position, t.size());
    Conversation summarized;
    for (std::size_t i = 0; i < cut.position; ++i) summarized.messages.push_back(t[i]);
    auto gone = recap::openai_responses::EncodeMessages(summarized);
    REQUIRE(gone.ok());

    for (std::size_t target : {kept.chars(), kept.chars() / 3, std::size_t{0}}) {
      const recap::ReduceResult reduced = recap::ReduceTail(kept, target);
      Conversation send;  // without the instructions: the items after the cut alone
      send.messages = reduced.transcript.ToVector();
      auto encoded = recap::openai_responses::EncodeMessages(send);
      REQUIRE(encoded.ok());
      const Json out = Json::parse(*encoded);
      INFO(what << ", keep_turns " << keep_turns << ", size limit " << limit << ", cut at "
                << cut.position << (cut.inside_turn ? " (inside a turn)" : "") << ", target "
                << target);
      // Every output answers a call sent before it, and every call sent has its output.
      const Links links = LinksOf(out);
      std::multiset<std::string> open;
      for (const Json& it : out) {
        const std::string type = it.value("type", std::string("message"));
        if (type == "function_call" || type == "computer_call" || type == "custom_tool_call") {
          open.insert(it.at("call_id").get<std::string>());
        } else if (type == "function_call_output" || type == "computer_call_output" ||
                   type == "custom_tool_call_output") {
          auto found = open.find(it.at("call_id").get<std::string>());
          REQUIRE(found != open.end());
          open.erase(found);
        }
      }
      CHECK(open.empty());
      // Kept reasoning: byte-exact; summarized reasoning: gone.
      const std::set<std::string> sent = ReasoningIds(out);
      for (const std::string& id : ReasoningIds(Json::parse(*gone))) CHECK(sent.count(id) == 0);
      std::map<std::string, std::string> original;
      for (const Json& it : items) {
        if (it.value("type", std::string()) == "reasoning") original[it.at("id")] = it.dump();
      }
      for (std::size_t i = 0; i < out.size(); ++i) {
        if (out[i].value("type", std::string()) != "reasoning") continue;
        CHECK(out[i].dump() == original.at(out[i].at("id")));
        // Still right before the item it preceded.
        for (std::size_t j = 0; j + 1 < items.size(); ++j) {
          if (items[j].value("type", std::string()) == "reasoning" &&
              items[j].at("id") == out[i].at("id")) {
            REQUIRE(i + 1 < out.size());
            CHECK(out[i + 1].value("type", std::string("message")) ==
                  items[j + 1].value("type", std::string("message")));
          }
        }
      }
      // Unreduced, the kept part is the original's suffix, item for item.
      if (target == kept.chars()) {
        REQUIRE(out.size() <= items.size());
        const std::size_t offset = items.size() - out.size();
        for (std::size_t i = 0; i < out.size(); ++i) CHECK(SameValue(out[i], items[offset + i]));
        // The cut did not fall between a call (or answer) and the reasoning before it.
        if (offset > 0 && offset < items.size() &&
            items[offset - 1].value("type", std::string()) == "reasoning") {
          const Json& first = items[offset];
          const std::string type = first.value("type", std::string("message"));
          const bool model_item =
              type == "function_call" || type == "computer_call" || type == "custom_tool_call" ||
              (type == "message" && first.value("role", std::string()) == "assistant" &&
               !first.value("content", Json::array()).empty());
          CHECK_FALSE(model_item);
        }
      }
    }
  }
}

}  // namespace

TEST_CASE("issue 9 Responses items map onto messages: calls, outputs, reasoning, opaque items") {
  const std::string input = R"([
    {"role": "developer", "content": "Be brief."},
    {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "hi"}, {"type": "input_image", "image_url": "data:x"}]},
    {"type": "reasoning", "id": "rs_1", "summary": [], "encrypted_content": "QUJD=="},
    {"type": "function_call", "id": "fc_1", "call_id": "c1", "name": "ls", "arguments": "{\"p\":1}", "status": "completed"},
    {"type": "function_call_output", "call_id": "c1", "output": "a b"},
    {"type": "computer_call", "call_id": "c2", "action": {"type": "wait"}},
    {"type": "computer_call_output", "call_id": "c2", "output": {"type": "computer_screenshot"}},
    {"type": "reasoning", "id": "rs_2", "summary": []},
    {"type": "message", "role": "assistant", "id": "m1", "content": [{"type": "output_text", "text": "done", "annotations": []}]}
  ])";
  auto conv = recap::openai_responses::DecodeMessages(input);
  REQUIRE(conv.ok());
  REQUIRE(conv->instructions.has_value());
  CHECK(conv->instructions->role == Role::kSystem);
  CHECK(conv->instructions->extra == R"({"role":"developer"})");
  const auto& ms = conv->messages;
  REQUIRE(ms.size() == 6);
  CHECK(ms[0].role == Role::kUser);
  REQUIRE(ms[0].parts.size() == 2);
  CHECK(std::get<Opaque>(ms[0].parts[1]).kind == "input_image");
  // The reasoning item travels with the call after it.
  CHECK(ms[1].role == Role::kAssistant);
  REQUIRE(ms[1].parts.size() == 2);
  CHECK(std::get<Opaque>(ms[1].parts[0]).kind == "reasoning");
  CHECK(std::get<ToolCall>(ms[1].parts[1]).id == "c1");
  CHECK(std::get<ToolCall>(ms[1].parts[1]).arguments == "{\"p\":1}");
  CHECK(ms[2].role == Role::kTool);
  CHECK(std::get<ToolResult>(ms[2].parts[0]).call_id == "c1");
  // Other tools' calls and outputs are opaque, linked as a pair.
  const auto& cc = std::get<Opaque>(ms[3].parts[0]);
  CHECK(cc.link == OpaqueLink::kCall);
  CHECK(cc.link_id == "c2");
  const auto& co = std::get<Opaque>(ms[4].parts[0]);
  CHECK(co.link == OpaqueLink::kResult);
  CHECK(co.link_id == "c2");
  CHECK(ms[5].parts.size() == 2);  // rs_2 with the answer
  const recap::Transcript t(ms);
  const recap::PairingReport pairing = recap::AnalyzePairing(t);
  CHECK(pairing.orphans.empty());
  CHECK(pairing.uncertain.empty());
  CHECK(pairing.pairs == 2);
  CheckRoundTrip(Json::parse(input), "the example");
}

TEST_CASE("issue 9 Responses decoding errors name the item and what is expected") {
  auto not_array = recap::openai_responses::DecodeMessages(R"({"input": []})");
  REQUIRE_FALSE(not_array.ok());
  CHECK_THAT(not_array.status().message(), Catch::Contains("`input` member"));
  auto no_call_id = recap::openai_responses::DecodeMessages(
      R"([{"role":"user","content":"x"},{"type":"function_call","name":"ls","arguments":"{}"}])");
  REQUIRE_FALSE(no_call_id.ok());
  CHECK_THAT(no_call_id.status().message(), Catch::Contains("input[1]"));
  CHECK_THAT(no_call_id.status().message(), Catch::Contains("call_id"));
  auto bad_role = recap::openai_responses::DecodeMessages(R"([{"role":"robot","content":"x"}])");
  REQUIRE_FALSE(bad_role.ok());
  CHECK_THAT(bad_role.status().message(), Catch::Contains("\"robot\""));
  auto bad_part = recap::openai_responses::DecodeMessages(
      R"([{"role":"user","content":[{"type":"hologram"}]}])");
  REQUIRE_FALSE(bad_part.ok());
  CHECK_THAT(bad_part.status().message(), Catch::Contains("keep_unknown_blocks"));
  // A content part where an item belongs (found by fuzzing: carried as an opaque item, it came
  // back as a message's content and did not decode again).
  auto part_as_item =
      recap::openai_responses::DecodeMessages(R"([{"type":"output_text","text":"x"}])");
  REQUIRE_FALSE(part_as_item.ok());
  CHECK_THAT(part_as_item.status().message(),
             Catch::Contains("a content part type, not an item type"));
  // A thinking block of the Anthropic format has no Responses equivalent.
  Message m;
  m.role = Role::kAssistant;
  m.parts.emplace_back(Opaque{
      "thinking", R"({"type":"thinking","thinking":"x","signature":"s"})", OpaqueLink::kNone, {}});
  Conversation c;
  c.messages.push_back(m);
  auto enc = recap::openai_responses::EncodeMessages(c);
  REQUIRE_FALSE(enc.ok());
  CHECK_THAT(enc.status().message(), Catch::Contains("no OpenAI Responses equivalent"));
}

TEST_CASE(
    "issue 9 R4.5 Responses round trip and compaction on the real chat transcripts, converted") {
  const std::uint64_t seed = SeedFromEnv(9009);
  INFO("RECAP_SEED=" << seed);
  std::mt19937_64 rng(seed);
  const std::vector<std::string> runs = recap::testing::TauBenchRuns();
  REQUIRE(runs.size() == 200);
  std::size_t reasoning = 0;
  for (std::size_t r = 0; r < runs.size(); ++r) {
    const Json items = FromChat(runs[r], rng);
    reasoning += ReasoningIds(items).size();
    const std::string what = "tau-bench run " + std::to_string(r);
    CheckRoundTrip(items, what);
    if (r % 10 == 0) {
      for (int keep : {1, 2}) CheckCompacted(items, keep, what);
    }
  }
  CHECK(reasoning > 1000);
}

TEST_CASE("issue 9 R4.5 R6.4 Responses round trip and compaction on generated item lists") {
  const std::uint64_t base = SeedFromEnv(0x9E59);
  // 600 generated lists; 300 in the sanitizer builds (support/build_speed.h).
  const std::uint64_t lists = recap_test::kSlowBuild ? 300 : 600;
  for (std::uint64_t k = 0; k < lists; ++k) {
    const std::uint64_t seed = base + k;
    INFO("RECAP_SEED=" << seed);
    const Json items = Generated(seed);
    const std::string what = "generated seed " + std::to_string(seed);
    CheckRoundTrip(items, what);
    CheckCompacted(items, 1 + static_cast<int>(seed % 2), what);
  }
}

TEST_CASE("R14.1 openai_responses refuses a tool call or result as a content part, even kept",
          "[openai_responses][R14.1]") {
  // Issue 35 (4): kept opaque, it would reach another format as a call no result answers.
  recap::DecodeOptions keep;
  keep.keep_unknown_blocks = true;
  for (const std::string part : {R"({"type":"tool_use","id":"t1","name":"ls","input":{}})",
                                 R"({"type":"function_call","call_id":"c1","name":"ls"})"}) {
    const std::string json = R"([{"type":"message","role":"assistant","content":[)" + part + "]}]";
    INFO(json);
    auto conv = recap::openai_responses::DecodeMessages(json, keep);
    REQUIRE_FALSE(conv.ok());
    CHECK_THAT(conv.status().message(), Catch::Contains("an input item of its own"));
    CHECK_THAT(conv.status().message(), Catch::Contains("`input[0].content[0].type`"));
  }
}
