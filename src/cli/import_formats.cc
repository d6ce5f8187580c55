// recap CLI — the formats `recap import` and `recap append` read (import_formats.h).
#include "import_formats.h"

#include <algorithm>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <fstream>
#include <functional>
#include <iostream>
#include <map>
#include <mutex>
#include <sstream>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "cli.h"
#include "import_sources.h"
#include "json_skim.h"
#include "progress.h"
#include "recap_internal/json_depth.h"

namespace recap_cli {
namespace {

// Content part and block types newer than this recap are kept as opaque parts, written back
// as they came (every format imports them; none is refused for one).
recap::DecodeOptions KeepUnknown() {
  recap::DecodeOptions options;
  options.keep_unknown_blocks = true;
  return options;
}

DecodeResult Fail(std::string message, bool usage = false) {
  return {std::nullopt, DecodeError{std::move(message), usage}};
}

// A parse error at byte `byte` (1-based, the parser's count) of `text`, described for the
// user in recap's words: where, and what byte is there (truncation says so).
std::string DescribeParseError(const std::string& text, std::size_t byte) {
  if (byte == 0 || byte > text.size()) {
    return "the file is not complete JSON: it ends in the middle of a value (is it truncated?)";
  }
  const std::size_t at = byte - 1;
  std::size_t line = 1;
  std::size_t column = 1;
  for (std::size_t i = 0; i < at; ++i) {
    if (text[i] == '\n') {
      ++line;
      column = 1;
    } else {
      ++column;
    }
  }
  const auto c = static_cast<unsigned char>(text[at]);
  static constexpr char kHex[] = "0123456789ABCDEF";
  const std::string shown = c >= 0x21 && c < 0x7F
                                ? "'" + std::string(1, static_cast<char>(c)) + "'"
                                : std::string("byte 0x") + kHex[c >> 4] + kHex[c & 0xF];
  std::string described = "the file is not JSON: at byte offset " + Num(at) + " (line " +
                          Num(line) + ", column " + Num(column) + ") there is " + shown +
                          ", where JSON was expected";
  if (at == 0 && c >= 0x80) described += " (is it a binary or compressed file?)";
  return described;
}

// Parses one JSON document; on failure describes it (truncation says so).
bool ParseJson(const std::string& text, Json* out, std::string* error) {
  try {
    *out = Json::parse(text);
    return true;
  } catch (const Json::parse_error& e) {
    *error = DescribeParseError(text, e.byte);
    return false;
  } catch (const Json::exception& e) {
    // Syntactically JSON, but not readable as a value (e.g. a number beyond a double's range).
    std::string what = e.what();
    const auto id_end = what.find("] ");
    if (id_end != std::string::npos) what.erase(0, id_end + 2);
    *error = "the file is JSON that cannot be read as a value — " + what;
    return false;
  }
}

// The lines of a .jsonl text, as (line number, text), skipping blank lines.
std::vector<std::pair<std::size_t, std::string>> Lines(const std::string& text) {
  std::vector<std::pair<std::size_t, std::string>> out;
  std::istringstream in(text);
  std::string line;
  std::size_t n = 0;
  while (std::getline(in, line)) {
    ++n;
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line.find_first_not_of(" \t") == std::string::npos) continue;
    out.emplace_back(n, std::move(line));
  }
  return out;
}

// What the file looks like, to tell a user who named the wrong format. Empty when unsure.
std::string GuessFormat(const std::string& text) {
  Json doc = Json::parse(text, nullptr, false);
  if (!doc.is_discarded()) {
    if (doc.is_array()) {
      if (doc.empty() || !doc[0].is_object()) return "";
      if (doc[0].contains("traj")) return "openai-chat";
      if (doc[0].contains("parts")) return "recap";
      std::string guess;  // from what does not decide alone
      for (const Json& m : doc) {
        if (!m.is_object()) return "";
        const std::string item_type = m.value("type", "");
        if (item_type == "function_call" || item_type == "function_call_output" ||
            item_type == "reasoning") {
          return "openai-responses";
        }
        if (m.contains("tool_calls") || m.value("role", "") == "tool") return "openai-chat";
        const auto content = m.find("content");
        if (content != m.end() && content->is_array()) {
          for (const Json& block : *content) {
            const std::string type = block.is_object() ? block.value("type", "") : "";
            if (type == "tool_use" || type == "tool_result" || type == "thinking") {
              return "anthropic";
            }
            if (type == "input_text" || type == "output_text") return "openai-responses";
          }
        }
        // An Anthropic response kept as a message also has `type: "message"`, and a system
        // message starts chat and Responses transcripts alike.
        if (guess.empty() && item_type == "message") guess = "openai-responses";
        if (guess.empty() && m.value("role", "") == "system") guess = "openai-chat";
      }
      return guess;
    }
    if (doc.is_object()) {
      if (doc.contains("history") && (doc.contains("trajectory") || doc.contains("info"))) {
        return "swe-agent";
      }
      if (doc.contains("instructions") && doc.contains("messages")) return "recap";
      if (doc.contains("history") && doc.contains("instance_id")) return "openhands";
      if (doc.contains("system") && doc.contains("messages")) return "anthropic";
      if (doc.contains("input") && (doc["input"].is_array() || doc["input"].is_string())) {
        return "openai-responses";
      }
    }
    return "";
  }
  const auto lines = Lines(text);
  if (lines.empty()) return "";
  Json first = Json::parse(lines.front().second, nullptr, false);
  if (first.is_discarded() || !first.is_object()) return "";
  if (first.contains("instance_id") && first.contains("history")) return "openhands";
  if (first.contains("sessionId") || first.contains("message") || first.contains("leafUuid") ||
      first.contains("parentUuid")) {
    return "claude-code";
  }
  return "";
}

// Picks run N of `count` runs.
bool PickRun(const Args& args, std::size_t count, const char* what, std::size_t* run,
             std::string* error, bool* usage) {
  if (!args.Has("run")) {
    if (count == 1) {
      *run = 0;
      return true;
    }
    *usage = true;
    *error = "the file holds " + std::to_string(count) + " " + what +
             "; choose one with --run N (0.." + std::to_string(count - 1) + ")";
    return false;
  }
  if (!ParseCount(args, "run", run, error)) {
    *usage = true;
    return false;
  }
  if (*run >= count) {
    *usage = true;
    *error = "--run " + std::to_string(*run) + " is out of range: the file holds " +
             std::to_string(count) + " " + what + " (0.." + std::to_string(count - 1) + ")";
    return false;
  }
  return true;
}

DecodeResult FromCodec(recap::Result<recap::Conversation> conv, const std::string& what,
                       std::string note = {}) {
  if (!conv.ok()) return Fail(what + ": " + conv.status().message());
  Decoded d;
  d.conversation = std::move(conv).value();
  d.note = std::move(note);
  return {std::move(d), {}};
}

// A plan that streams the messages through a codec's DecodeEach.
DecodeResult Streamed(std::function<recap::Status(const recap::MessageSink&)> stream,
                      std::string what, std::optional<recap::Message> instructions = {}) {
  Decoded d;
  d.stream = std::move(stream);
  d.what = std::move(what);
  d.conversation.instructions = std::move(instructions);
  return {std::move(d), {}};
}

DecodeResult DecodeOpenAiChat(const std::string& text, const Args& args) {
  // A messages array, or an object with one, is streamed; tau-bench's runs are transformed.
  std::optional<std::string_view> messages_text;
  std::string error;
  if (IsArrayText(text) && !FirstElementHas(text, "traj")) {
    messages_text = text;
  } else if (IsObjectText(text)) {
    messages_text = MemberText(text, "messages");
  }
  if (messages_text) {
    if (args.Has("run")) {
      return Fail("--run is for files holding several runs; this file holds one messages array",
                  true);
    }
    const std::string_view json = *messages_text;
    return Streamed(
        [json](const recap::MessageSink& sink) {
          return recap::openai_chat::DecodeEach(json, KeepUnknown(), sink);
        },
        "the messages are not OpenAI chat messages");
  }
  Json doc;
  if (!ParseJson(text, &doc, &error)) return Fail(error);
  const Json* messages = &doc;
  std::string note;
  if (doc.is_array() && !doc.empty() && doc[0].is_object() && doc[0].contains("traj")) {
    std::size_t run = 0;
    bool usage = false;
    if (!PickRun(args, doc.size(), "tau-bench runs", &run, &error, &usage)) {
      return Fail(error, usage);
    }
    messages = &doc[run]["traj"];
    note = "tau-bench run " + std::to_string(run) + " of " + std::to_string(doc.size());
  } else if (doc.is_object() && doc.contains("messages")) {
    messages = &doc["messages"];
  }
  if (!doc.is_array() && messages == &doc) {
    return Fail(
        "an openai-chat file holds a JSON array of messages, an object with "
        "\"messages\", or tau-bench's array of runs; this file holds a JSON " +
        std::string(doc.type_name()));
  }
  if (args.Has("run") && note.empty()) {
    return Fail("--run is for files holding several runs; this file holds one messages array",
                true);
  }
  return FromCodec(recap::openai_chat::DecodeMessages(messages->dump(), KeepUnknown()),
                   "the messages are not OpenAI chat messages", note);
}

DecodeResult DecodeAnthropic(const std::string& text) {
  recap::DecodeOptions options;
  options.keep_unknown_blocks = true;
  std::string error;
  const auto stream = [options](std::string_view json) {
    return [json, options](const recap::MessageSink& sink) {
      return recap::anthropic::DecodeEach(json, options, sink);
    };
  };
  const char* const what = "the messages are not Anthropic messages";
  if (IsArrayText(text)) return Streamed(stream(text), what);
  // An object: its `system` read as a tree (it is small), its `messages` streamed.
  Json doc = Json::object();
  std::optional<std::string_view> messages_text;
  if (IsObjectText(text)) {
    messages_text = MemberText(text, "messages");
    if (messages_text) {
      if (std::optional<std::string_view> system = MemberText(text, "system")) {
        doc["system"] = Json::parse(*system, nullptr, false);
        if (doc["system"].is_discarded()) return Fail("`system` is not JSON");
      }
    }
  }
  if (!messages_text && !ParseJson(text, &doc, &error)) return Fail(error);
  std::optional<recap::Message> system;
  const Json* messages = &doc;
  if (messages_text || (doc.is_object() && doc.contains("messages"))) {
    if (!messages_text) messages = &doc["messages"];
    const auto s = doc.find("system");
    if (s != doc.end() && !s->is_null()) {
      if (s->is_string()) {
        system = recap::Message::SystemText(s->get<std::string>());
      } else if (s->is_array()) {
        // The blocks as the codec reads a message's content, so that what they carry besides
        // their text (`cache_control`, `citations`) travels on byte for byte (R13.2).
        // From the file's own text where it can be found (numbers stay as written).
        const std::optional<std::string_view> raw = MemberText(text, "system");
        const std::string wrapped =
            "{\"role\":\"user\",\"content\":" + (raw ? std::string(*raw) : s->dump()) + "}";
        recap::Result<recap::Message> blocks = recap::anthropic::DecodeMessage(wrapped, options);
        if (!blocks.ok()) return Fail("`system`: " + blocks.status().message());
        for (const recap::Part& part : blocks->parts) {
          if (!std::holds_alternative<recap::Text>(part)) {
            return Fail("`system` must be a string or a list of text blocks");
          }
        }
        system = std::move(*blocks);
        system->role = recap::Role::kSystem;
      } else {
        return Fail("`system` must be a string or a list of text blocks");
      }
    }
  } else if (!doc.is_array()) {
    return Fail(
        "an anthropic file holds a JSON array of messages or an object with "
        "\"messages\"; this file holds a JSON " +
        std::string(doc.type_name()));
  }
  if (messages_text) return Streamed(stream(*messages_text), what, std::move(system));
  DecodeResult r = FromCodec(recap::anthropic::DecodeMessages(messages->dump(), options), what);
  if (r.first && system) r.first->conversation.instructions = std::move(system);
  return r;
}

// OpenAI Responses: the items array, or a request body whose `input` holds it (a string
// `input` is one user message, as the API reads it) and whose `instructions` string becomes
// the session's instructions. Without `instructions`, a leading system or developer message
// becomes them, as in a chat transcript; with it, the items are kept as they are.
DecodeResult DecodeOpenAiResponses(const std::string& text) {
  recap::DecodeOptions options;
  options.keep_unknown_blocks = true;  // content part types newer than this recap
  const auto stream = [](std::string_view json, recap::DecodeOptions o) {
    return [json, o](const recap::MessageSink& sink) {
      return recap::openai_responses::DecodeEach(json, o, sink);
    };
  };
  const char* const what = "the items are not OpenAI Responses input items";
  if (IsArrayText(text)) return Streamed(stream(text, options), what);
  // A request body whose `input` is an array: `instructions` read as a tree, `input` streamed.
  std::string error;
  Json doc = Json::object();
  std::optional<std::string_view> items_text;
  if (IsObjectText(text)) {
    items_text = MemberText(text, "input");
    if (items_text && IsArrayText(*items_text)) {
      doc["input"] = Json::array();
      if (std::optional<std::string_view> s = MemberText(text, "instructions")) {
        doc["instructions"] = Json::parse(*s, nullptr, false);
        if (doc["instructions"].is_discarded()) return Fail("`instructions` is not JSON");
      }
    } else {
      items_text.reset();
    }
  }
  if (!items_text && !ParseJson(text, &doc, &error)) return Fail(error);
  std::optional<recap::Message> instructions;
  const Json* items = &doc;
  Json one_message;
  if (doc.is_object() && doc.contains("input")) {
    items = &doc["input"];
    if (items->is_string()) {
      one_message = Json::array({{{"role", "user"}, {"content", *items}}});
      items = &one_message;
    } else if (!items->is_array()) {
      return Fail(
          "`input` must be an array of input items (or a string, one user message); it "
          "is a JSON " +
          std::string(items->type_name()));
    }
    const auto s = doc.find("instructions");
    if (s != doc.end() && !s->is_null()) {
      if (!s->is_string()) {
        return Fail("`instructions` must be a string (the system prompt); it is a JSON " +
                    std::string(s->type_name()));
      }
      instructions = recap::Message::SystemText(s->get<std::string>());
    }
  } else if (!doc.is_array()) {
    const std::string held =
        doc.is_object() ? std::string("object without \"input\"") : std::string(doc.type_name());
    return Fail(
        "an openai-responses file holds a JSON array of input items or an object with "
        "\"input\" (a request body); this file holds a JSON " +
        held);
  }
  options.split_instructions = !instructions.has_value();
  if (items_text) return Streamed(stream(*items_text, options), what, std::move(instructions));
  DecodeResult r = FromCodec(recap::openai_responses::DecodeMessages(items->dump(), options), what);
  if (r.first && instructions) r.first->conversation.instructions = std::move(instructions);
  return r;
}

// Claude Code: one record a line; the lines of one response share message.id (one content
// block a line) and are joined back into one message. The message's own tool_result blocks are
// used; the record's `toolUseResult` copy is ignored.
DecodeResult DecodeClaudeCode(const std::string& text) {
  Json messages = Json::array();
  std::map<std::string, std::size_t> by_id;
  std::size_t joined = 0;
  const auto lines = Lines(text);
  for (const auto& [number, line] : lines) {
    Json record = Json::parse(line, nullptr, false);
    if (record.is_discarded()) {
      const bool last = number == lines.back().first;
      return Fail("line " + std::to_string(number) + " is not JSON" +
                  (last ? " (the file may be truncated: it is the last line)" : "") +
                  "; a Claude Code session has one JSON record a line");
    }
    if (!record.is_object() || !record.contains("message") || !record["message"].is_object()) {
      continue;  // summaries, system notes, attachments: no message
    }
    Json& message = record["message"];
    const auto id = message.find("id");
    if (id != message.end() && id->is_string()) {
      // A copy: the lookups below may insert into `message` and move its members.
      const std::string key = id->get<std::string>();
      const auto seen = by_id.find(key);
      if (seen != by_id.end()) {
        Json& into = messages[seen->second]["content"];
        const auto more = message.find("content");
        if (into.is_array() && more != message.end() && more->is_array()) {
          for (const auto& block : *more) into.push_back(block);
          ++joined;
          continue;
        }
      }
      by_id.emplace(key, messages.size());
    }
    messages.push_back(std::move(message));
  }
  if (messages.empty()) {
    return Fail("no line holds a record with a `message`; is this a Claude Code session?");
  }
  recap::DecodeOptions options;
  options.keep_unknown_blocks = true;  // a newer Claude Code may write block types we don't know
  return FromCodec(recap::anthropic::DecodeMessages(messages.dump(), options),
                   "the session's messages are not Anthropic messages",
                   std::to_string(lines.size()) + " records, " + std::to_string(joined) +
                       " joined into the response they continue");
}

// SWE-agent: `history` is chat messages whose tool replies name their calls in a
// `tool_call_ids` list; each id gets its own `tool` message, as SWE-agent sends it.
DecodeResult DecodeSweAgent(const std::string& text) {
  Json doc;
  std::string error;
  if (!ParseJson(text, &doc, &error)) return Fail(error);
  if (!doc.is_object() || !doc.contains("history") || !doc["history"].is_array()) {
    return Fail("a SWE-agent .traj is a JSON object with a `history` array; this file has none");
  }
  Json chat = Json::array();
  for (const Json& m : doc["history"]) {
    if (m.is_object() && m.value("role", "") == "tool" && m.contains("tool_call_ids") &&
        m["tool_call_ids"].is_array()) {
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
  return FromCodec(recap::openai_chat::DecodeMessages(chat.dump(), KeepUnknown()),
                   "the trajectory's history is not chat messages");
}

// One OpenHands run's `history` of events as OpenAI chat messages, the way OpenHands shows
// them to a model: the system action is the system message; each tool-calling action is the
// model's response message (once per response); each observation answering a call a `tool`
// message; other observations user messages; `recall` is left out; `finish` and actions
// without a model response become the agent's text.
Json OpenHandsToChat(const Json& history) {
  Json out = Json::array();
  std::string last_response_id;
  for (const Json& event : history) {
    if (!event.is_object()) continue;
    const std::string source = event.value("source", "");
    const std::string message = event.contains("message") && event["message"].is_string()
                                    ? event["message"].get<std::string>()
                                    : "";
    if (event.contains("action") && event["action"].is_string()) {
      const std::string action = event["action"].get<std::string>();
      const Json args =
          event.contains("args") && event["args"].is_object() ? event["args"] : Json::object();
      const Json* meta =
          event.contains("tool_call_metadata") && event["tool_call_metadata"].is_object()
              ? &event["tool_call_metadata"]
              : nullptr;
      const std::string content = args.contains("content") && args["content"].is_string()
                                      ? args["content"].get<std::string>()
                                      : message;
      if (action == "system") {
        out.push_back({{"role", "system"}, {"content", content}});
      } else if (action == "recall") {
        continue;
      } else if (action != "finish" && meta != nullptr && meta->contains("model_response")) {
        const Json& response = (*meta)["model_response"];
        const std::string response_id = response.value("id", "");
        if (!response_id.empty() && response_id == last_response_id) continue;
        last_response_id = response_id;
        out.push_back(response.at("choices").at(0).at("message"));
      } else if (action == "message") {
        out.push_back({{"role", source == "user" ? "user" : "assistant"}, {"content", content}});
      } else {
        out.push_back({{"role", "assistant"}, {"content", message}});
      }
    } else if (event.contains("observation")) {
      const std::string content = event.contains("content") && event["content"].is_string()
                                      ? event["content"].get<std::string>()
                                      : message;
      if (event.contains("tool_call_metadata") && event["tool_call_metadata"].is_object()) {
        out.push_back({{"role", "tool"},
                       {"tool_call_id", event["tool_call_metadata"].at("tool_call_id")},
                       {"content", content}});
      } else {
        out.push_back({{"role", "user"}, {"content", content}});
      }
    }
  }
  return out;
}

DecodeResult DecodeOpenHands(const std::string& text, const Args& args) {
  const auto lines = Lines(text);
  if (lines.empty()) return Fail("the file is empty; an OpenHands output.jsonl has one run a line");
  std::size_t run = 0;
  std::string error;
  bool usage = false;
  // Only the chosen line is parsed as a run, but every line must be JSON (a truncated file
  // is refused whichever run is asked for).
  for (const auto& [number, line] : lines) {
    if (!Json::accept(line)) {
      const bool last = number == lines.back().first;
      return Fail("line " + std::to_string(number) + " is not JSON" +
                  (last ? " (the file may be truncated: it is the last line)" : "") +
                  "; an OpenHands output.jsonl has one JSON run a line");
    }
  }
  // A file of other records (a Claude Code session, say) is not a file of runs: say so before
  // asking which run, so that the format can be guessed.
  {
    const Json first = Json::parse(lines.front().second, nullptr, false);
    if (!first.is_object() || !first.contains("history")) {
      return Fail("its first line (line " + std::to_string(lines.front().first) +
                  ") is not an OpenHands run: it has no `history`");
    }
  }
  if (!PickRun(args, lines.size(), "runs", &run, &error, &usage)) return Fail(error, usage);
  const Json doc = Json::parse(lines[run].second);
  if (!doc.is_object() || !doc.contains("history") || !doc["history"].is_array()) {
    return Fail("run " + std::to_string(run) + " (line " + std::to_string(lines[run].first) +
                ") has no `history` array; is this an OpenHands evaluation output?");
  }
  Json chat;
  try {
    chat = OpenHandsToChat(doc["history"]);
  } catch (const Json::exception& e) {
    return Fail("run " + std::to_string(run) + ": an event is not in OpenHands' shape (" +
                e.what() + ")");
  }
  std::string note = "run " + std::to_string(run) + " of " + std::to_string(lines.size());
  if (doc.contains("instance_id") && doc["instance_id"].is_string()) {
    note += " (" + doc["instance_id"].get<std::string>() + ")";
  }
  return FromCodec(recap::openai_chat::DecodeMessages(chat.dump(), KeepUnknown()),
                   "the run's events did not convert into chat messages", note);
}

DecodeResult DecodeNative(const std::string& text) {
  const std::string_view json = text;
  return Streamed(
      [json](const recap::MessageSink& sink) { return recap::native::DecodeEach(json, {}, sink); },
      "the file is not recap's JSON");
}

// R13.1: nlohmann parses without recursion but dumps, copies and compares recursively, so a
// document nested deep enough exhausts the stack in any of those. The importers transform
// documents (and the codecs dump parts of them), so a file is refused before anything parses
// it when a container inside it is nested deeper than the codecs accept. Brackets inside
// strings do not count; a .jsonl file is scanned as a whole (a record cannot go deeper than
// the file). Empty when the nesting is fine. recap's one depth bound and scan
// (recap_internal/json_depth.h).
std::string NestingError(const std::string& text) {
  const std::size_t at = recap::internal::FindTooDeep(text);
  if (at == std::string_view::npos) return {};
  const std::size_t line_start = text.rfind('\n', at) + 1;  // npos + 1 == 0
  const auto line =
      1 + std::count(text.begin(), text.begin() + static_cast<std::ptrdiff_t>(at), '\n');
  return "the JSON is nested deeper than " + std::to_string(recap::internal::kMaxJsonDepth) +
         " levels at byte offset " + std::to_string(at) + " (line " + std::to_string(line) +
         ", column " + std::to_string(at - line_start + 1) +
         "); recap refuses such documents (no real transcript nests so deep)";
}

// Reads a streamed file's messages (`decoded.stream`) into `conversation` (whose
// instructions a leading system message the codec gives replaces). Returns the stream's
// Status, unprefixed.
recap::Status DrainInto(const Decoded& decoded, recap::Conversation* conversation) {
  return decoded.stream([conversation](recap::Message&& m, bool is_instructions) {
    if (is_instructions) {
      conversation->instructions = std::move(m);
    } else {
      conversation->messages.push_back(std::move(m));
    }
    return recap::Status::OK();
  });
}

}  // namespace

DecodeResult Decode(const std::string& format, const std::string& text, const Args& args) {
  if (std::string deep = NestingError(text); !deep.empty()) return Fail(deep);
  if (args.Has("run") && format != "openai-chat" && format != "openhands") {
    return Fail("--run is for openai-chat (tau-bench) and openhands files", true);
  }
  if (format == "openai-chat") return DecodeOpenAiChat(text, args);
  if (format == "anthropic") return DecodeAnthropic(text);
  if (format == "openai-responses") return DecodeOpenAiResponses(text);
  if (format == "claude-code") return DecodeClaudeCode(text);
  if (format == "swe-agent") return DecodeSweAgent(text);
  if (format == "openhands") return DecodeOpenHands(text, args);
  return DecodeNative(text);
}

// The message for an input that does not decode: what is wrong, and which format it looks like
// when it looks like another. `command` is the one whose --help describes the formats.
std::string NotDecoded(const std::string& path, const std::string& format, const std::string& text,
                       std::string detail, const std::string& command) {
  while (!detail.empty() && (detail.back() == '.' || detail.back() == ' ')) detail.pop_back();
  std::string message = InputName(path) + " does not decode as " + format + ": " + detail + ".";
  // (not parsed at all when too deep: even parsing copies deep objects recursively)
  const std::string guess = NestingError(text).empty() ? GuessFormat(text) : std::string();
  const std::string noun = path == "-" ? "input" : "file";
  if (!guess.empty() && guess != format) {
    message +=
        " The " + noun + " looks like --format " + guess + "; run the command again with it.";
  } else {
    message += " Check that the " + noun +
               " is complete and in the format given with --format (`recap " + command +
               " --help` describes each).";
  }
  return message + " Nothing was written.";
}

recap::Result<recap::Conversation> DecodeTranscript(const std::string& format,
                                                    const std::string& text,
                                                    const std::string& run) {
  bool known = false;
  for (const char* f : kFormats) known = known || format == f;
  if (!known) return recap::Status::InvalidArgument("unknown format '" + format + "'");
  Args args;
  args.command = "import";
  if (!run.empty()) args.values["run"] = run;
  DecodeResult decoded = Decode(format, text, args);
  if (!decoded.first) return recap::Status::InvalidArgument(decoded.second.message);
  recap::Conversation& conversation = decoded.first->conversation;
  if (decoded.first->stream) {
    recap::Status status = DrainInto(*decoded.first, &conversation);
    if (!status.ok()) {
      return recap::Status::InvalidArgument(decoded.first->what + ": " + status.message());
    }
  }
  return std::move(conversation);
}

recap::Result<recap::Conversation> DecodeInput(const std::string& format, const std::string& text,
                                               const std::string& path, const Args& args,
                                               bool* usage) {
  *usage = false;
  // One message object (a chat or Anthropic message, a Responses item, a recap message: each has
  // a `role` or a `type`, which no document form has) is read as an array of one. Whether it
  // has one is found without parsing it, so a depth bomb still meets the depth scan first.
  std::string wrapped;
  const std::string* input = &text;
  if (IsObjectText(text) && (MemberText(text, "role") || MemberText(text, "type"))) {
    wrapped = "[" + text + "]";
    input = &wrapped;
  }
  DecodeResult decoded = Decode(format, *input, args);
  if (!decoded.first) {
    *usage = decoded.second.usage;
    return recap::Status::InvalidArgument(
        decoded.second.usage ? decoded.second.message
                             : NotDecoded(path, format, text, decoded.second.message, "append"));
  }
  recap::Conversation conversation = std::move(decoded.first->conversation);
  if (decoded.first->stream) {
    recap::Status status = DrainInto(*decoded.first, &conversation);
    if (!status.ok()) {
      return recap::Status::InvalidArgument(
          NotDecoded(path, format, text, decoded.first->what + ": " + status.message(), "append"));
    }
  }
  // Named by its place in the input, as import names it (the store would refuse it too).
  for (std::size_t i = 0; i < conversation.messages.size(); ++i) {
    if (std::optional<std::string> id = recap::RepeatedCallId(conversation.messages[i])) {
      return recap::Status::InvalidArgument(
          RepeatedCallIdError(path, i + (conversation.instructions ? 1 : 0), *id));
    }
  }
  return conversation;
}

}  // namespace recap_cli
