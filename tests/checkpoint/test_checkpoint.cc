// SPEC R4.1–R4.4, R5.2: the checkpoint's schema, the forgiving parser, the salvage of a cut
// reply and the fixed rendering.
//
// The property tests print their seed on failure; RECAP_SEED=<seed> replays that one case.
#include <cstdlib>
#include <iostream>
#include <optional>
#include <random>
#include <sstream>
#include <string>

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include "recap/checkpoint.h"
#include "recap/measure.h"
#include "recap/provider.h"

#include "support/generator.h"

using namespace recap;
using Json = nlohmann::ordered_json;

namespace {

Checkpoint Sample() {
  Checkpoint c;
  c.goal = "Make `recap` compact sessions";
  c.instructions = {"Use C++17", "Never re-run a tool"};
  c.discoveries = {"ctest -L checkpoint runs these tests"};
  c.accomplished = {"Wrote src/core/checkpoint/checkpoint.cc"};
  c.current_state = "Tests pass except the salvage property";
  c.next_steps = {"Fix the salvage property", "Write docs/checkpoint-format.md"};
  c.relevant_files = {{"src/core/checkpoint/checkpoint.cc", "the parser"},
                      {"docs/checkpoint-format.md", ""}};
  return c;
}

std::string Describe(const Checkpoint& c) {
  std::ostringstream os;
  os << "structured=" << c.structured << " text=" << Json(c.text).dump()
     << " goal=" << Json(c.goal).dump() << " instructions=" << Json(c.instructions).dump()
     << " discoveries=" << Json(c.discoveries).dump()
     << " accomplished=" << Json(c.accomplished).dump()
     << " currentState=" << Json(c.current_state).dump()
     << " nextSteps=" << Json(c.next_steps).dump() << " files=[";
  for (const auto& f : c.relevant_files)
    os << Json(f.path).dump() << ":" << Json(f.why).dump() << ",";
  os << "]";
  return os.str();
}

bool Equal(const Checkpoint& a, const Checkpoint& b) {
  if (a.structured != b.structured || a.text != b.text || a.goal != b.goal ||
      a.instructions != b.instructions || a.discoveries != b.discoveries ||
      a.accomplished != b.accomplished || a.current_state != b.current_state ||
      a.next_steps != b.next_steps || a.relevant_files.size() != b.relevant_files.size()) {
    return false;
  }
  for (std::size_t i = 0; i < a.relevant_files.size(); ++i) {
    if (a.relevant_files[i].path != b.relevant_files[i].path ||
        a.relevant_files[i].why != b.relevant_files[i].why) {
      return false;
    }
  }
  return true;
}

ParsedCheckpoint Parse(const std::string& reply, bool truncated = false,
                       const std::vector<OutputField>& fields = {}) {
  return ParseCheckpoint(reply, truncated, fields);
}

// ---- seeds for the property tests ----

std::optional<std::uint64_t> ReplaySeed() {
  const char* s = std::getenv("RECAP_SEED");
  if (s == nullptr || *s == '\0') return std::nullopt;
  return std::strtoull(s, nullptr, 0);
}

std::vector<std::uint64_t> CaseSeeds(std::size_t cases) {
  if (auto s = ReplaySeed()) return {*s};
  static const std::uint64_t run = [] {
    std::random_device rd;
    const std::uint64_t s = (static_cast<std::uint64_t>(rd()) << 32) ^ rd();
    std::cerr << "[checkpoint property] random run seed " << s << "\n";
    return s;
  }();
  std::vector<std::uint64_t> seeds;
  for (std::size_t i = 0; i < cases; ++i) {
    seeds.push_back(recap_test::MixSeed(i < cases / 2 ? 20240601 : run, i));
  }
  return seeds;
}

std::string RandomString(recap_test::Rng& rng, std::size_t max_len) {
  using recap_test::TextStyle;
  static const std::vector<TextStyle> styles = {TextStyle::kAscii,      TextStyle::kMixed,
                                                TextStyle::kDense4Byte, TextStyle::kCjk,
                                                TextStyle::kCode,       TextStyle::kAnyMix};
  return recap_test::RandomText(rng, rng.Size(0, max_len), rng.Pick(styles));
}

// Any JSON value, for plugin fields and wrong shapes: numbers of every form, literals, nesting.
Json RandomValue(recap_test::Rng& rng, int depth) {
  switch (rng.Below(depth > 2 ? 6 : 8)) {
    case 0: return RandomString(rng, 30);
    case 1: return static_cast<std::int64_t>(rng.Between(-100000, 100000));
    case 2: return static_cast<double>(rng.Between(-1000000, 1000000)) / 1024.0 * 1e-3;
    case 3: return rng.OneIn(2);
    case 4: return nullptr;
    case 5: return 1.5e300 * (rng.OneIn(2) ? 1 : -1);
    case 6: {
      Json a = Json::array();
      for (std::size_t i = rng.Size(0, 4); i > 0; --i) a.push_back(RandomValue(rng, depth + 1));
      return a;
    }
    default: {
      Json o = Json::object();
      for (std::size_t i = rng.Size(0, 4); i > 0; --i) {
        o[RandomString(rng, 8) + std::to_string(i)] = RandomValue(rng, depth + 1);
      }
      return o;
    }
  }
}

std::vector<std::string> RandomList(recap_test::Rng& rng, std::size_t max_items) {
  std::vector<std::string> items;
  for (std::size_t i = rng.Size(0, max_items); i > 0; --i) {
    std::string s = RandomString(rng, 40);
    if (s.find_first_not_of(" \t\r\n") == std::string::npos) s = "x" + s;  // parsers drop blanks
    items.push_back(std::move(s));
  }
  return items;
}

Checkpoint RandomCheckpoint(recap_test::Rng& rng) {
  Checkpoint c;
  if (rng.OneIn(4) == false) c.goal = RandomString(rng, 80);
  c.instructions = RandomList(rng, 4);
  c.discoveries = RandomList(rng, 4);
  c.accomplished = RandomList(rng, 4);
  if (rng.OneIn(3) == false) c.current_state = RandomString(rng, 80);
  c.next_steps = RandomList(rng, 4);
  for (std::size_t i = rng.Size(0, 4); i > 0; --i) {
    RelevantFile f;
    f.path = RandomString(rng, 30);
    if (f.path.find_first_not_of(" \t\r\n") == std::string::npos) f.path = "p" + f.path;
    if (!rng.OneIn(3)) f.why = RandomString(rng, 30);
    c.relevant_files.push_back(std::move(f));
  }
  return c;
}

// A random checkpoint-like JSON text: the R4.1 members in random order, some with the other
// accepted spellings, plus plugin and unknown members of any shape.
std::string RandomCheckpointJson(recap_test::Rng& rng) {
  Json o = Json::object();
  const Checkpoint c = RandomCheckpoint(rng);
  std::vector<std::pair<std::string, Json>> members = {
      {"goal", c.goal},
      {"instructions", c.instructions},
      {"discoveries", c.discoveries},
      {"accomplished", c.accomplished},
      {rng.OneIn(3) ? "current_state" : "currentState", c.current_state},
      {rng.OneIn(3) ? "next_steps" : "nextSteps", c.next_steps},
  };
  Json files = Json::array();
  for (const auto& f : c.relevant_files) {
    if (rng.OneIn(4)) {
      files.push_back(f.path);
    } else {
      files.push_back({{"path", f.path}, {"why", f.why}});
    }
  }
  members.emplace_back("relevantFiles", std::move(files));
  members.emplace_back("memories", RandomValue(rng, 0));
  members.emplace_back("unknown" + std::to_string(rng.Below(100)), RandomValue(rng, 0));
  rng.Shuffle(members);
  for (auto& [k, v] : members) {
    if (!rng.OneIn(6)) o[k] = std::move(v);
  }
  const bool ascii = rng.OneIn(2);  // \uXXXX escapes, surrogate pairs included
  return o.dump(rng.OneIn(2) ? -1 : 2, ' ', ascii);
}

// `s` holds a prefix of `o`'s members (elements), all equal but the last, which is itself a
// prefix-subset; scalars are equal.
bool PrefixSubset(const Json& s, const Json& o, std::string* why) {
  if (s.type() != o.type()) {
    *why = "type differs: " + s.dump() + " vs " + o.dump();
    return false;
  }
  if (s.is_object() || s.is_array()) {
    if (s.size() > o.size()) {
      *why = "more members than the original: " + s.dump();
      return false;
    }
    auto si = s.begin();
    auto oi = o.begin();
    for (std::size_t k = 0; k < s.size(); ++k, ++si, ++oi) {
      if (s.is_object() && si.key() != oi.key()) {
        *why = "member " + si.key() + " where the original has " + oi.key();
        return false;
      }
      const bool last = k + 1 == s.size();
      if (last ? !PrefixSubset(*si, *oi, why) : *si != *oi) {
        if (!last) *why = "a complete member differs: " + si->dump() + " vs " + oi->dump();
        return false;
      }
    }
    return true;
  }
  if (s != o) {
    *why = "scalar differs: " + s.dump() + " vs " + o.dump();
    return false;
  }
  return true;
}

template <class T>
bool IsPrefixOf(const std::vector<T>& p, const std::vector<T>& whole) {
  return p.size() <= whole.size() && std::equal(p.begin(), p.end(), whole.begin());
}

}  // namespace

// ---------------------------------------------------------------------------------------------
// R4.1 the reply's shape

TEST_CASE("R4.1 the schema lists the fields in order, requires them and allows nothing else") {
  const Json schema = Json::parse(CheckpointJsonSchema());
  CHECK(schema["type"] == "object");
  CHECK(schema["additionalProperties"] == false);
  std::vector<std::string> keys;
  for (const auto& [k, v] : schema["properties"].items()) keys.push_back(k);
  const std::vector<std::string> expected = {"goal",         "instructions", "discoveries",
                                             "accomplished", "currentState", "nextSteps",
                                             "relevantFiles"};
  CHECK(keys == expected);
  CHECK(schema["required"] == Json(expected));
  CHECK(schema["properties"]["goal"]["type"] == "string");
  CHECK(schema["properties"]["instructions"]["type"] == "array");
  CHECK(schema["properties"]["instructions"]["items"]["type"] == "string");
  const Json& file = schema["properties"]["relevantFiles"]["items"];
  CHECK(file["type"] == "object");
  CHECK(file["properties"].contains("path"));
  CHECK(file["properties"].contains("why"));
  CHECK(file["additionalProperties"] == false);
}

TEST_CASE("R4.1 the schema carries each plugin field's schema and description") {
  const std::vector<OutputField> fields = {
      {"memories", "Durable facts about the user", R"({"type":"array","items":{"type":"string"}})"},
      {"broken", "A field whose schema is not JSON", "{not json"}};
  const Json schema = Json::parse(CheckpointJsonSchema(fields));
  CHECK(schema["properties"]["memories"]["type"] == "array");
  CHECK(schema["properties"]["memories"]["description"] == "Durable facts about the user");
  CHECK(schema["properties"]["broken"]["description"] == "A field whose schema is not JSON");
  CHECK(schema["properties"].size() == 9);
  CHECK(schema["required"].back() == "broken");
}

TEST_CASE("R4.1 CheckpointToJson writes the R4.1 object that ParseCheckpoint reads back") {
  const Checkpoint c = Sample();
  const std::string json = CheckpointToJson(c);
  const Json j = Json::parse(json);
  CHECK(j["goal"] == c.goal);
  CHECK(j["relevantFiles"][0]["path"] == "src/core/checkpoint/checkpoint.cc");
  CHECK(j["relevantFiles"][1]["why"] == "");
  std::vector<std::string> keys;
  for (const auto& [k, v] : j.items()) keys.push_back(k);
  CHECK(keys.front() == "goal");
  CHECK(keys.back() == "relevantFiles");
  const ParsedCheckpoint p = Parse(json);
  CHECK(p.usable);
  CHECK_FALSE(p.partial);
  CHECK(Equal(p.checkpoint, c));
}

TEST_CASE("R4.1 an empty checkpoint is empty, and any field makes it non-empty") {
  CHECK(Checkpoint{}.empty());
  Checkpoint c;
  c.next_steps = {"x"};
  CHECK_FALSE(c.empty());
  Checkpoint t;
  t.structured = false;
  t.text = "plain";
  CHECK_FALSE(t.empty());
}

// ---------------------------------------------------------------------------------------------
// R4.2 forgiving where the meaning is clear

TEST_CASE("R4.2 a code fence around the JSON is removed") {
  for (const std::string fence : {"```json\n", "```\n", "```JSON\n"}) {
    const auto p = Parse(fence + R"({"goal": "ship it", "nextSteps": ["test"]})" + "\n```");
    INFO(fence);
    CHECK(p.usable);
    CHECK(p.checkpoint.structured);
    CHECK(p.checkpoint.goal == "ship it");
    CHECK(p.checkpoint.next_steps == std::vector<std::string>{"test"});
  }
}

TEST_CASE("R4.2 prose before and after the object is ignored") {
  auto p = Parse(
      "Here is the checkpoint you asked for:\n\n{\"goal\": \"g\", \"accomplished\": "
      "[\"a {brace} inside\"]}\n\nLet me know if you need more.");
  CHECK(p.checkpoint.structured);
  CHECK(p.checkpoint.goal == "g");
  CHECK(p.checkpoint.accomplished == std::vector<std::string>{"a {brace} inside"});

  // A balanced brace group in the prose that is not JSON does not hide the object after it.
  p = Parse("I used {curly} notes. ```json\n{\"goal\": \"g2\"}\n``` done");
  CHECK(p.checkpoint.structured);
  CHECK(p.checkpoint.goal == "g2");
  p = Parse("Notes {not json} then {\"goal\": \"g3\"}");
  CHECK(p.checkpoint.goal == "g3");
}

TEST_CASE("R4.2 a string where a list is expected is a one-item list") {
  const auto p = Parse(R"({"instructions": "use tabs", "nextSteps": "", "discoveries": null})");
  REQUIRE(p.checkpoint.structured);
  CHECK(p.checkpoint.instructions == std::vector<std::string>{"use tabs"});
  CHECK(p.checkpoint.next_steps.empty());
  CHECK(p.checkpoint.discoveries.empty());
}

TEST_CASE("R4.2 a list where a text is expected is joined with newlines") {
  const auto p = Parse(R"({"goal": ["line one", "line two"], "currentState": []})");
  REQUIRE(p.checkpoint.structured);
  CHECK(p.checkpoint.goal == "line one\nline two");
  CHECK(p.checkpoint.current_state.empty());
}

TEST_CASE("R4.2 relevantFiles accepts bare paths, a path without why, and a single entry") {
  auto p = Parse(R"({"relevantFiles": ["src/a.cc", {"path": "b.h"}, {"path": "c.md", "why": "docs"},
                     {"path": "d", "why": null, "extra": 1}, "  "]})");
  REQUIRE(p.checkpoint.structured);
  REQUIRE(p.checkpoint.relevant_files.size() == 4);
  CHECK(p.checkpoint.relevant_files[0].path == "src/a.cc");
  CHECK(p.checkpoint.relevant_files[0].why.empty());
  CHECK(p.checkpoint.relevant_files[1].path == "b.h");
  CHECK(p.checkpoint.relevant_files[2].why == "docs");
  CHECK(p.checkpoint.relevant_files[3].path == "d");
  p = Parse(R"({"relevantFiles": "only.txt"})");
  REQUIRE(p.checkpoint.relevant_files.size() == 1);
  CHECK(p.checkpoint.relevant_files[0].path == "only.txt");
  p = Parse(R"({"relevant_files": {"path": "one.txt", "why": "w"}})");
  REQUIRE(p.checkpoint.relevant_files.size() == 1);
  CHECK(p.checkpoint.relevant_files[0].why == "w");
}

TEST_CASE("R4.2 snake_case spellings are accepted and camelCase wins when both appear") {
  auto p = Parse(R"({"current_state": "s", "next_steps": ["n"], "relevant_files": ["f.c"]})");
  REQUIRE(p.checkpoint.structured);
  CHECK(p.checkpoint.current_state == "s");
  CHECK(p.checkpoint.next_steps == std::vector<std::string>{"n"});
  CHECK(p.checkpoint.relevant_files.at(0).path == "f.c");
  p = Parse(R"({"current_state": "snake", "currentState": "camel"})");
  CHECK(p.checkpoint.current_state == "camel");
}

TEST_CASE("R4.2 unknown members that carry text are kept under Discoveries, blank items dropped") {
  // Issue 35 (3): {"goal": …, "summary": …} lost its summary without a word.
  const auto p = Parse(R"({"goal": "g", "summary": "The build passes; two tests fail.",
                           "confidence": 0.9, "notes": {"a": 1}, "risks": ["disk", " "],
                           "accomplished": ["x", "", "  ", "y"], "discoveries": ["d"]})");
  REQUIRE(p.usable);
  REQUIRE(p.checkpoint.structured);
  CHECK(p.checkpoint.accomplished == std::vector<std::string>{"x", "y"});
  // In the reply's order, after the summarizer's own discoveries; numbers and objects without
  // text (confidence, notes) carry nothing to keep.
  CHECK(p.checkpoint.discoveries ==
        std::vector<std::string>{"d", "summary: The build passes; two tests fail.", "risks: disk"});
  CHECK(p.plugin_fields.empty());
  CHECK(RenderCheckpoint(p.checkpoint).find("summary: The build passes") != std::string::npos);
}

TEST_CASE("R4.2 plugin fields are extracted as JSON text and never rendered") {
  const std::vector<OutputField> fields = {{"memories", "facts", R"({"type":"array"})"},
                                           {"score", "a number", R"({"type":"number"})"},
                                           {"absent", "not in the reply", "{}"}};
  const auto p =
      Parse(R"({"goal": "g", "memories": ["likes tabs", {"k": "é"}], "score": 3})", false, fields);
  REQUIRE(p.checkpoint.structured);
  REQUIRE(p.plugin_fields.size() == 2);
  CHECK(Json::parse(p.plugin_fields.at("memories")) ==
        Json::parse(R"(["likes tabs", {"k": "é"}])"));
  CHECK(p.plugin_fields.at("score") == "3");
  const std::string rendered = RenderCheckpoint(p.checkpoint);
  CHECK(rendered.find("likes tabs") == std::string::npos);
  // Without the plugin asking, the same member is an unknown one.
  CHECK(Parse(R"({"goal": "g", "memories": ["x"]})").plugin_fields.empty());
  // An object holding only plugin fields is still the reply the plugins asked for.
  const auto only = Parse(R"({"memories": []})", false, fields);
  CHECK(only.checkpoint.structured);
  CHECK(only.plugin_fields.at("memories") == "[]");
}

TEST_CASE("R4.2 invalid UTF-8 in a reply is repaired, not fatal") {
  const auto p = Parse("{\"goal\": \"bad \xFF byte\"}");
  CHECK(p.usable);
  CHECK(IsValidUtf8(p.checkpoint.structured ? p.checkpoint.goal : p.checkpoint.text));
}

// ---------------------------------------------------------------------------------------------
// R4.2 strict otherwise, R4.3 text-only

TEST_CASE("R4.3 shapes with no clear meaning make a text-only checkpoint of the whole reply") {
  const std::vector<std::string> replies = {
      R"({"goal": {"text": "g"}})",
      R"({"goal": "g", "instructions": [1, 2]})",
      R"({"goal": "g", "instructions": [["nested"]]})",
      R"({"goal": "g", "nextSteps": true})",
      R"({"goal": "g", "relevantFiles": [{"why": "no path"}]})",
      R"({"goal": "g", "relevantFiles": [{"path": 7}]})",
      R"({"goal": "g", "relevantFiles": [3]})",
      R"({"goal": ["a", 1]})",
      R"([{"goal": "top-level array"}])",
      "```json\n[{\"goal\": \"array in a fence\"}]\n```",
      "{'goal': 'single quotes'}",
      "The session set up the build and fixed two tests.",
      // Prose that only looks like what is refused below.
      "<summary>The user asked for a parser; it is written and tested.</summary>",
      "[Summary] The parser is written; two tests fail.",
      "200 files were converted; the build passes.",
      "I can't find the config file yet; the parser is written and its tests pass. " +
          std::string(400, 'x'),
  };
  for (const auto& r : replies) {
    INFO(r);
    const auto p = Parse(r);
    CHECK(p.usable);
    CHECK_FALSE(p.partial);
    CHECK_FALSE(p.checkpoint.structured);
    CHECK(p.checkpoint.text == r);
    CHECK(p.plugin_fields.empty());
  }
}

TEST_CASE("R4.3 a reply that carries no checkpoint is not usable, and says what it is") {
  // Issue 35 (3): each of these replaced the summarized span as a text-only checkpoint.
  const std::vector<std::pair<std::string, std::string>> replies = {
      {"null", "JSON null"},
      {"true", "JSON true"},
      {"5", "a JSON number"},
      {R"("x")", "a JSON string"},
      {"{}", "an empty JSON object"},
      {"[]", "an empty JSON array"},
      {"```json\n{}\n```", "an empty JSON object"},
      {R"({"goal": 5})", "none of the checkpoint's sections"},
      {R"({"goal": "", "nextSteps": []})", "none of the checkpoint's sections"},
      {R"({"answer": "no checkpoint member at all"})", "none of the checkpoint's sections"},
      {R"([1, 2, {"a": "b"}])", "a JSON array"},
      {R"({"goal": "unterminated)", "not valid JSON"},
      {std::string(200000, '['), "not valid JSON"},
      {"<html><head><title>502 Bad Gateway</title></head><body><h1>502 Bad Gateway</h1>"
       "</body></html>",
       "an HTML page"},
      {"<!DOCTYPE html>\n<html lang=\"en\"><body>Service Unavailable</body></html>",
       "an HTML page"},
      {"502 Bad Gateway", "an HTTP error"},
      {"I cannot help with that.", "a refusal"},
      {"I'm sorry, but I can't assist with that request.", "a refusal"},
      {"I\u2019m sorry, I can\u2019t summarize this conversation.", "a refusal"},
      {"Sorry, I am unable to comply.", "a refusal"},
      {"As an AI language model, I cannot do that.", "a refusal"},
  };
  for (const auto& [reply, what] : replies) {
    INFO(reply.substr(0, 200));
    const auto p = Parse(reply);
    CHECK_FALSE(p.usable);
    CHECK(p.problem.find(what) != std::string::npos);
    CHECK(p.checkpoint.empty());
  }
  // The same, cut by the output limit: still not a checkpoint (never a partial one).
  CHECK_FALSE(Parse("<html><body><h1>502 Bad Gate", true).usable);
  CHECK_FALSE(Parse("I'm sorry, but I can", true).usable);
}

TEST_CASE("R4.3 the text of a text-only checkpoint is the trimmed reply") {
  const auto p = Parse("\n\n  Plain summary.\n\n");
  CHECK_FALSE(p.checkpoint.structured);
  CHECK(p.checkpoint.text == "Plain summary.");
  CHECK(RenderCheckpoint(p.checkpoint) == "# Checkpoint\n\nPlain summary.");
}

TEST_CASE("R5.3 an empty or blank reply is not usable") {
  for (const std::string r : {"", "   ", "\n\t\n"}) {
    CHECK_FALSE(Parse(r).usable);
    CHECK_FALSE(Parse(r, true).usable);
  }
}

// ---------------------------------------------------------------------------------------------
// R5.2 a reply cut by the output limit

TEST_CASE("R5.2 a cut JSON reply keeps its complete members and is partial") {
  const auto p =
      Parse(R"({"goal": "g", "instructions": ["a", "b"], "discoveries": ["half a sen)", true);
  CHECK(p.usable);
  CHECK(p.partial);
  REQUIRE(p.checkpoint.structured);
  CHECK(p.checkpoint.goal == "g");
  CHECK(p.checkpoint.instructions == std::vector<std::string>{"a", "b"});
  CHECK(p.checkpoint.discoveries.empty());
}

TEST_CASE("R5.2 a cut reply inside a fence or after prose is salvaged too") {
  auto p = Parse("```json\n{\"goal\": \"g\", \"nextSteps\": [\"x\", \"y", true);
  REQUIRE(p.checkpoint.structured);
  CHECK(p.partial);
  CHECK(p.checkpoint.next_steps == std::vector<std::string>{"x"});
  p = Parse(
      "Sure, here it is: {\"goal\": \"g\", \"relevantFiles\": [{\"path\": \"a\", "
      "\"why\": \"b\"}, {\"pa",
      true);
  REQUIRE(p.checkpoint.structured);
  REQUIRE(p.checkpoint.relevant_files.size() == 1);  // the cut entry without a path is dropped
  CHECK(p.checkpoint.relevant_files[0].why == "b");
}

TEST_CASE("R5.2 the salvaged object is the one the cut fell in") {
  const auto p =
      Parse("Example: {\"note\": 1}. Checkpoint: {\"goal\": \"g\", \"nextSteps\": [\"a", true);
  REQUIRE(p.usable);
  REQUIRE(p.checkpoint.structured);
  CHECK(p.checkpoint.goal == "g");
  CHECK(p.partial);
}

TEST_CASE("R5.2 a cut plain-text reply is kept as a partial text-only checkpoint") {
  const auto p = Parse("The session fixed the parser and then started on", true);
  CHECK(p.usable);
  CHECK(p.partial);
  CHECK_FALSE(p.checkpoint.structured);
  CHECK(p.checkpoint.text == "The session fixed the parser and then started on");
}

TEST_CASE("R5.2 a complete object followed by cut prose is whole, not partial") {
  const auto p = Parse("{\"goal\": \"g\"}\n\nAnd some trailing rema", true);
  CHECK(p.usable);
  CHECK_FALSE(p.partial);
  CHECK(p.checkpoint.goal == "g");
}

TEST_CASE("R5.3 a cut reply with no complete member is not usable") {
  for (const std::string r :
       {"{", "{\"goal\": \"Fix the bu", "```json\n{\"go", "```json\n",
        "{\"goal\": \"\", \"instructions\": [\"unfinish", "{\"unknown\": 1, \"goal"}) {
    INFO(r);
    const auto p = Parse(r, true);
    CHECK_FALSE(p.usable);
    CHECK(p.partial);
  }
}

// ---------------------------------------------------------------------------------------------
// SalvageTruncatedJson

TEST_CASE("R5.2 salvage: where the text was cut decides what survives") {
  struct Case {
    const char* in;
    const char* out;  // nullptr: nullopt
  };
  const Case cases[] = {
      {"", nullptr},
      {"   ", nullptr},
      {"[1, 2", nullptr},
      {"prose {\"a\": 1}", nullptr},
      {"{", "{}"},
      {"  {", "{}"},
      {"{\"a", "{}"},
      {"{\"a\"", "{}"},
      {"{\"a\":", "{}"},
      {"{\"a\": ", "{}"},
      {"{\"a\": \"x", "{}"},
      {"{\"a\": \"x\"", "{\"a\": \"x\"}"},
      {"{\"a\": \"x\",", "{\"a\": \"x\"}"},
      {"{\"a\": \"x\", \"b\": [", "{\"a\": \"x\", \"b\": []}"},
      {"{\"a\": \"x\", \"b\": [\"1\", \"2", "{\"a\": \"x\", \"b\": [\"1\"]}"},
      {"{\"a\": \"x\", \"b\": [\"1\", {\"c\": [true, nu",
       "{\"a\": \"x\", \"b\": [\"1\", {\"c\": [true]}]}"},
      {"{\"a\": 12", "{}"},  // "12" may have been "123"
      {"{\"a\": 12,", "{\"a\": 12}"},
      {"{\"a\": 12 ", "{\"a\": 12}"},
      {"{\"a\": -1.5e", "{}"},
      {"{\"a\": [1.5e3]", "{\"a\": [1.5e3]}"},
      {"{\"a\": tr", "{}"},
      {"{\"a\": true", "{\"a\": true}"},
      {"{\"a\": \"\\u00", "{}"},
      {"{\"a\": \"\\u00e9\", \"b\": \"\\", "{\"a\": \"\\u00e9\"}"},
      {"{\"a\": \"\\ud83d", "{}"},
      {"{\"a\": \"\\ud83d\\ude00\"", "{\"a\": \"\\ud83d\\ude00\"}"},
      {"{\"a\": \"\xF0\x9F\x98", "{}"},  // cut inside a 4-byte sequence
      {"{\"a\": \"\xF0\x9F\x98\x80\"}", "{\"a\": \"\xF0\x9F\x98\x80\"}"},
      {"{\"a\": 1} trailing prose {", "{\"a\": 1}"},
      {"{\"a\": {}, \"b\": {\"c\": 1}, \"d", "{\"a\": {}, \"b\": {\"c\": 1}}"},
      {"{\"a\": [[], [[", "{\"a\": [[], [[]]]}"},
      // Invalid JSON stops the scan at the last valid point.
      {"{\"a\": 1 2}", "{\"a\": 1}"},
      {"{\"a\": 1, 'b': 2}", "{\"a\": 1}"},
      {"{\"a\": \"bad \\q escape\"}", "{}"},
      {"{\"a\": \"raw\ncontrol\"}", "{}"},
      {"{\"a\": \"\\udc00 lone low\"}", "{}"},
      {"{\"a\": [1}", "{\"a\": [1]}"},
      {"{\"a\": 01}", "{}"},
  };
  for (const auto& c : cases) {
    INFO("input: " << c.in);
    const auto got = SalvageTruncatedJson(c.in);
    if (c.out == nullptr) {
      CHECK_FALSE(got.has_value());
    } else {
      REQUIRE(got.has_value());
      CHECK(*got == c.out);
      CHECK_NOTHROW(Json::parse(*got));
    }
  }
}

TEST_CASE("R5.2 salvage of a very deep document stops instead of recursing") {
  std::string deep = "{\"a\": ";
  for (int i = 0; i < 100000; ++i) deep += '[';
  const auto got = SalvageTruncatedJson(deep);
  REQUIRE(got.has_value());
  CHECK_NOTHROW(Json::parse(*got));
}

TEST_CASE(
    "R5.2 property: every cut of a JSON reply salvages to valid JSON holding a prefix of "
    "its members") {
  std::size_t cuts = 0;
  for (const std::uint64_t seed : CaseSeeds(300)) {
    recap_test::Rng rng(seed);
    const std::string text = RandomCheckpointJson(rng);
    const Json original = Json::parse(text);
    for (std::size_t cut = 0; cut <= text.size(); ++cut) {
      const std::string prefix = text.substr(0, cut);
      const auto got = SalvageTruncatedJson(prefix);
      ++cuts;
      if (!got) {
        if (cut > 0)
          FAIL("RECAP_SEED=" << seed << " cut " << cut << ": nullopt for a prefix of an object");
        continue;
      }
      Json salvaged = Json::parse(*got, nullptr, false);
      if (salvaged.is_discarded()) {
        FAIL("RECAP_SEED=" << seed << " cut " << cut << ": invalid JSON: " << *got);
      }
      std::string why;
      if (!PrefixSubset(salvaged, original, &why)) {
        FAIL("RECAP_SEED=" << seed << " cut " << cut << ": " << why << "\nsalvaged: " << *got);
      }
      // The text itself is a prefix of the reply plus closing brackets.
      const std::size_t body = got->find_last_not_of("}]") + 1;
      if (prefix.compare(0, body, *got, 0, body) != 0) {
        FAIL("RECAP_SEED=" << seed << " cut " << cut << ": not a prefix: " << *got);
      }
    }
  }
  CHECK(cuts > 10000);
}

TEST_CASE("R5.2 property: a cut checkpoint parses to prefixes of its sections or is unusable") {
  for (const std::uint64_t seed : CaseSeeds(200)) {
    recap_test::Rng rng(seed);
    const Checkpoint c = RandomCheckpoint(rng);
    std::string text = CheckpointToJson(c);
    if (rng.OneIn(3)) text = "```json\n" + text + "\n```";
    for (std::size_t cut = 0; cut <= text.size(); ++cut) {
      const ParsedCheckpoint p = ParseCheckpoint(text.substr(0, cut), true);
      INFO("RECAP_SEED=" << seed << " cut " << cut);
      if (!p.usable) continue;
      if (!p.checkpoint.structured)
        FAIL("a JSON reply became text-only: " << Describe(p.checkpoint));
      const Checkpoint& g = p.checkpoint;
      const bool ok =
          (g.goal.empty() || g.goal == c.goal) && IsPrefixOf(g.instructions, c.instructions) &&
          IsPrefixOf(g.discoveries, c.discoveries) && IsPrefixOf(g.accomplished, c.accomplished) &&
          (g.current_state.empty() || g.current_state == c.current_state) &&
          IsPrefixOf(g.next_steps, c.next_steps) &&
          g.relevant_files.size() <= c.relevant_files.size();
      if (!ok) FAIL("not a prefix: " << Describe(g) << "\noriginal: " << Describe(c));
      for (std::size_t i = 0; i < g.relevant_files.size(); ++i) {
        const bool last = i + 1 == g.relevant_files.size();
        if (g.relevant_files[i].path != c.relevant_files[i].path ||
            (g.relevant_files[i].why != c.relevant_files[i].why &&
             !(last && g.relevant_files[i].why.empty()))) {
          FAIL("file " << i << " differs: " << Describe(g) << "\noriginal: " << Describe(c));
        }
      }
    }
  }
}

TEST_CASE("R4.3 property: the parser never throws and always says something on garbage") {
  for (const std::uint64_t seed : CaseSeeds(300)) {
    recap_test::Rng rng(seed);
    const std::string text = rng.OneIn(2) ? recap_test::RandomInvalidJson(rng, rng.Size(0, 300))
                                          : RandomValue(rng, 0).dump();
    INFO("RECAP_SEED=" << seed << " reply: " << text);
    ParsedCheckpoint p;
    REQUIRE_NOTHROW(p = ParseCheckpoint(text, rng.OneIn(2)));
    const bool blank = text.find_first_not_of(" \t\r\n") == std::string::npos;
    // Not usable only when blank, cut, or with the reason said.
    if (!p.usable) CHECK((blank || p.partial || !p.problem.empty()));
    if (p.usable && !p.checkpoint.structured) CHECK(!p.checkpoint.text.empty());
  }
}

// ---------------------------------------------------------------------------------------------
// R4.4 the rendering

TEST_CASE("R4.4 the rendering is the fixed layout, sections in R4.1 order") {
  const std::string expected =
      "# Checkpoint\n"
      "\n"
      "## Goal\n"
      "Make `recap` compact sessions\n"
      "\n"
      "## User instructions and constraints\n"
      "- Use C++17\n"
      "- Never re-run a tool\n"
      "\n"
      "## Discoveries\n"
      "- ctest -L checkpoint runs these tests\n"
      "\n"
      "## Accomplished\n"
      "- Wrote src/core/checkpoint/checkpoint.cc\n"
      "\n"
      "## Current state\n"
      "Tests pass except the salvage property\n"
      "\n"
      "## Next steps\n"
      "- Fix the salvage property\n"
      "- Write docs/checkpoint-format.md\n"
      "\n"
      "## Relevant files\n"
      "- `src/core/checkpoint/checkpoint.cc` \xE2\x80\x94 the parser\n"
      "- `docs/checkpoint-format.md`\n";
  CHECK(RenderCheckpoint(Sample()) == expected);
  CHECK(RenderCheckpoint(Sample()) == RenderCheckpoint(Sample()));  // deterministic
}

TEST_CASE("R4.4 empty sections are left out") {
  Checkpoint c;
  c.goal = "g";
  c.next_steps = {"n"};
  CHECK(RenderCheckpoint(c) == "# Checkpoint\n\n## Goal\ng\n\n## Next steps\n- n\n");
  CHECK(RenderCheckpoint(Checkpoint{}) == "# Checkpoint\n");
}

TEST_CASE("R4.4 multi-line items are indented and heading-like lines escaped") {
  Checkpoint c;
  c.goal = "first\n## Discoveries\n\\path";
  c.discoveries = {"line one\n\n## Next steps"};
  c.relevant_files = {{"a`b", "why\nmore"}, {"`x`", ""}};
  const std::string r = RenderCheckpoint(c);
  CHECK(r ==
        "# Checkpoint\n\n## Goal\nfirst\n\\## Discoveries\n\\\\path\n\n## Discoveries\n"
        "- line one\n  \n  ## Next steps\n\n## Relevant files\n"
        "- ``a`b`` \xE2\x80\x94 why\n  more\n- `` `x` ``\n");
  CHECK(Equal(ParseRenderedCheckpoint(r), c));
}

TEST_CASE("R4.4 the checkpoint message is a user message flagged summary") {
  const Message m = CheckpointMessage(Sample());
  CHECK(m.role == Role::kUser);
  CHECK(m.summary);
  REQUIRE(m.parts.size() == 1);
  CHECK(std::get<Text>(m.parts[0]).text == RenderCheckpoint(Sample()));
  CHECK_FALSE(IsTurnStart(m));
}

TEST_CASE("R4.4 a rendered checkpoint reads back") {
  CHECK(Equal(ParseRenderedCheckpoint(RenderCheckpoint(Sample())), Sample()));
  // A transport that dropped the final newline changes nothing.
  std::string r = RenderCheckpoint(Sample());
  r.pop_back();
  CHECK(Equal(ParseRenderedCheckpoint(r), Sample()));
  // Text-only checkpoints come back as text.
  Checkpoint t;
  t.structured = false;
  t.text = "Did things.\n\n## Not a known heading\n- x";
  CHECK(Equal(ParseRenderedCheckpoint(RenderCheckpoint(t)), t));
  // Text that is not in the layout at all is a text-only checkpoint.
  const Checkpoint other = ParseRenderedCheckpoint("  Some summary written elsewhere.\n");
  CHECK_FALSE(other.structured);
  CHECK(other.text == "Some summary written elsewhere.");
  // Out-of-order or unknown sections are not the layout.
  const Checkpoint wrong =
      ParseRenderedCheckpoint("# Checkpoint\n\n## Next steps\n- a\n\n## Goal\ng\n");
  CHECK_FALSE(wrong.structured);
}

TEST_CASE("R4.4 property: Render then ParseRendered gives the checkpoint back") {
  for (const std::uint64_t seed : CaseSeeds(2000)) {
    recap_test::Rng rng(seed);
    Checkpoint c = RandomCheckpoint(rng);
    // Line breaks, heading-like lines, escapes and backticks where they hurt most.
    if (rng.OneIn(3)) c.goal += "\n## Goal\n\\x\n#";
    if (rng.OneIn(3) && !c.next_steps.empty()) c.next_steps[0] += "\n\n## Relevant files\n- `";
    if (rng.OneIn(3) && !c.relevant_files.empty()) c.relevant_files[0].path += "``` `";
    if (rng.OneIn(4) && !c.relevant_files.empty()) c.relevant_files.back().why += "\n\nmore";
    if (rng.OneIn(5)) c.current_state = "\n" + c.current_state + "\n\n";
    const std::string rendered = RenderCheckpoint(c);
    const Checkpoint back = ParseRenderedCheckpoint(rendered);
    if (!Equal(back, c)) {
      FAIL("RECAP_SEED=" << seed << "\nrendered:\n"
                         << rendered << "\nback: " << Describe(back) << "\nwant: " << Describe(c));
    }
  }
}

TEST_CASE("FinishReasonName names every reason") {
  CHECK(std::string(FinishReasonName(FinishReason::kStop)) == "stop");
  CHECK(std::string(FinishReasonName(FinishReason::kLength)) == "length");
  CHECK(std::string(FinishReasonName(FinishReason::kOther)) == "other");
}
