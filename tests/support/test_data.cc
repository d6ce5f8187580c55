#include "support/test_data.h"

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <utility>

#include <nlohmann/json.hpp>

#include "recap/codec.h"

namespace recap::testing {

namespace {

using Json = nlohmann::ordered_json;

Json ParseFile(const std::string& path) {
  const std::string text = ReadFile(path);
  try {
    return Json::parse(text);
  } catch (const Json::exception& e) {
    throw std::runtime_error(path + ": " + e.what());
  }
}

std::string ResolvePath(const std::string& file) {
  return file.find('/') == std::string::npos ? DataPath(file) : file;
}

// Decodes OpenAI chat JSON built by the converters below; a failure is a bug in the test data
// or the converter, reported with the transcript's name.
Conversation DecodeOpenAiChat(const Json& messages, const std::string& name) {
  auto conv = openai_chat::DecodeMessages(messages.dump());
  if (!conv.ok()) {
    throw std::runtime_error(name + ": openai_chat decoding failed: " + conv.status().message());
  }
  return std::move(conv).value();
}

std::string ShortSessionName(const std::string& file) {
  const auto sep = file.find("__");
  return sep == std::string::npos ? file : file.substr(sep + 2, 8);
}

// One OpenHands run (its `history` of events) as OpenAI chat messages, the way OpenHands
// itself shows them to a model: the system action is the system message, the user's message
// action a user message, each tool-calling action the model's response message (once per
// response, even when it made several calls), each observation answering a call a `tool`
// message, and other observations (workspace recall, errors) user messages. The `recall`
// action only asks for that context and is left out. `finish` becomes the model's final text:
// OpenHands never sends a result for it, and leaving its call open would make the run look
// like it has an uncertain tool call.
Json OpenHandsToChat(const Json& history) {
  Json out = Json::array();
  std::string last_response_id;
  for (const Json& event : history) {
    const std::string source = event.value("source", "");
    const std::string message = event.value("message", "");
    if (event.contains("action")) {
      const std::string action = event["action"].get<std::string>();
      const Json& args = event.contains("args") ? event["args"] : Json::object();
      const Json* meta =
          event.contains("tool_call_metadata") ? &event["tool_call_metadata"] : nullptr;
      if (action == "system") {
        out.push_back({{"role", "system"}, {"content", args.value("content", message)}});
      } else if (action == "recall") {
        continue;
      } else if (action != "finish" && meta != nullptr && meta->contains("model_response")) {
        const Json& response = (*meta)["model_response"];
        const std::string response_id = response.value("id", "");
        if (!response_id.empty() && response_id == last_response_id) continue;
        last_response_id = response_id;
        out.push_back(response["choices"][0]["message"]);
      } else if (action == "message") {
        out.push_back({{"role", source == "user" ? "user" : "assistant"},
                       {"content", args.value("content", message)}});
      } else {  // `finish` and actions without a model response: the agent's text
        out.push_back({{"role", "assistant"}, {"content", message}});
      }
    } else if (event.contains("observation")) {
      const std::string content = event.value("content", message);
      if (event.contains("tool_call_metadata")) {
        out.push_back({{"role", "tool"},
                       {"tool_call_id", event["tool_call_metadata"]["tool_call_id"]},
                       {"content", content}});
      } else {
        out.push_back({{"role", "user"}, {"content", content}});
      }
    }
  }
  return out;
}

}  // namespace

std::string DataDir() { return RECAP_TEST_DATA_DIR; }

std::string DataPath(const std::string& name) { return DataDir() + "/" + name; }

std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error("cannot open " + path);
  std::ostringstream buffer;
  buffer << in.rdbuf();
  if (in.bad()) throw std::runtime_error("cannot read " + path);
  return std::move(buffer).str();
}

std::vector<std::string> ReadLines(const std::string& path) {
  const std::string text = ReadFile(path);
  std::vector<std::string> lines;
  std::size_t start = 0;
  while (start < text.size()) {
    std::size_t end = text.find('\n', start);
    if (end == std::string::npos) end = text.size();
    std::size_t stop = end;
    if (stop > start && text[stop - 1] == '\r') --stop;
    if (stop > start) lines.emplace_back(text, start, stop - start);
    start = end + 1;
  }
  return lines;
}

std::vector<std::string> TauBenchRuns() {
  const std::string path = DataPath(kTauBenchFile);
  const Json runs = ParseFile(path);
  std::vector<std::string> out;
  out.reserve(runs.size());
  for (const Json& run : runs) {
    if (!run.contains("traj")) throw std::runtime_error(path + ": a run has no `traj`");
    out.push_back(run["traj"].dump());
  }
  return out;
}

std::vector<std::string> ClaudeCodeFiles() {
  return {kClaudeCodeSampleFile, kClaudeCodeWorktreesFile};
}

std::vector<std::string> ClaudeCodeMessages(const std::string& file) {
  const std::string path = ResolvePath(file);
  std::vector<Json> joined;
  std::string last_id;
  std::size_t line_number = 0;
  for (const std::string& line : ReadLines(path)) {
    ++line_number;
    Json record;
    try {
      record = Json::parse(line);
    } catch (const Json::exception& e) {
      throw std::runtime_error(path + ":" + std::to_string(line_number) + ": " + e.what());
    }
    if (!record.is_object() || !record.contains("message") || !record["message"].is_object()) {
      continue;
    }
    Json message = std::move(record["message"]);
    const std::string id =
        message.contains("id") && message["id"].is_string() ? message["id"].get<std::string>() : "";
    if (!id.empty() && id == last_id && joined.back()["content"].is_array() &&
        message["content"].is_array()) {
      for (Json& block : message["content"]) joined.back()["content"].push_back(std::move(block));
      continue;
    }
    last_id = id;
    joined.push_back(std::move(message));
  }
  std::vector<std::string> out;
  out.reserve(joined.size());
  for (const Json& m : joined) out.push_back(m.dump());
  return out;
}

std::string ClaudeCodeMessagesArray(const std::string& file) {
  return JsonArray(ClaudeCodeMessages(file));
}

std::string JsonArray(const std::vector<std::string>& items) {
  std::string out = "[";
  for (std::size_t i = 0; i < items.size(); ++i) {
    if (i > 0) out += ',';
    out += items[i];
  }
  out += ']';
  return out;
}

std::string JsonDifference(const std::string& expected, const std::string& actual) {
  nlohmann::json a;
  nlohmann::json b;
  try {
    a = nlohmann::json::parse(expected);
  } catch (const nlohmann::json::exception& e) {
    return std::string("the expected text is not JSON: ") + e.what();
  }
  try {
    b = nlohmann::json::parse(actual);
  } catch (const nlohmann::json::exception& e) {
    return std::string("the actual text is not JSON: ") + e.what();
  }
  if (a == b) return {};
  auto shorten = [](std::string s) {
    constexpr std::size_t kMax = 4000;
    if (s.size() > kMax) s = s.substr(0, kMax) + "... (" + std::to_string(s.size()) + " bytes)";
    return s;
  };
  if (a.is_array() && b.is_array()) {
    const std::size_t n = std::min(a.size(), b.size());
    for (std::size_t i = 0; i < n; ++i) {
      if (a[i] != b[i]) {
        return "first difference at index " + std::to_string(i) +
               "\nexpected: " + shorten(a[i].dump()) + "\nactual:   " + shorten(b[i].dump());
      }
    }
    return "arrays differ in length: expected " + std::to_string(a.size()) + ", actual " +
           std::to_string(b.size());
  }
  return "expected: " + shorten(a.dump()) + "\nactual:   " + shorten(b.dump());
}

Conversation SweAgentTranscript() {
  const std::string path = DataPath(kSweAgentFile);
  const Json traj = ParseFile(path);
  // SWE-agent's tool replies name their calls in a `tool_call_ids` list; as OpenAI chat, each
  // id gets its own `tool` message (with the same output, as SWE-agent sends it).
  Json chat = Json::array();
  for (const Json& m : traj.at("history")) {
    if (m.value("role", "") == "tool" && m.contains("tool_call_ids")) {
      for (const Json& id : m["tool_call_ids"]) {
        Json copy = m;
        copy.erase("tool_call_ids");
        copy["tool_call_id"] = id;
        chat.push_back(std::move(copy));
      }
    } else {
      chat.push_back(m);
    }
  }
  return DecodeOpenAiChat(chat, "swe-agent/marshmallow-1867");
}

std::vector<NamedTranscript> OpenHandsTranscripts() {
  const std::string path = DataPath(kOpenHandsFile);
  std::vector<NamedTranscript> out;
  for (const std::string& line : ReadLines(path)) {
    const Json run = Json::parse(line);
    NamedTranscript t;
    t.name = "openhands/" + run.value("instance_id", std::to_string(out.size()));
    t.format = "openhands";
    t.conversation = DecodeOpenAiChat(OpenHandsToChat(run.at("history")), t.name);
    out.push_back(std::move(t));
  }
  return out;
}

std::vector<NamedTranscript> AllRealTranscripts() {
  std::vector<NamedTranscript> out;
  const std::vector<std::string> runs = TauBenchRuns();
  for (std::size_t i = 0; i < runs.size(); ++i) {
    char name[32];
    std::snprintf(name, sizeof name, "tau-bench/run-%03zu", i);
    auto conv = openai_chat::DecodeMessages(runs[i]);
    if (!conv.ok()) throw std::runtime_error(std::string(name) + ": " + conv.status().message());
    out.push_back({name, "openai_chat", std::move(conv).value()});
  }
  for (const std::string& file : ClaudeCodeFiles()) {
    const std::string name = "claude-code/" + ShortSessionName(file);
    auto conv = anthropic::DecodeMessages(ClaudeCodeMessagesArray(file));
    if (!conv.ok()) throw std::runtime_error(name + ": " + conv.status().message());
    out.push_back({name, "anthropic", std::move(conv).value()});
  }
  out.push_back({"swe-agent/marshmallow-1867", "swe_agent", SweAgentTranscript()});
  for (NamedTranscript& t : OpenHandsTranscripts()) out.push_back(std::move(t));
  return out;
}

}  // namespace recap::testing
