// The recall tool's definition and arguments (recap/recall.h).
#include <algorithm>
#include <cstdint>
#include <string>
#include <utility>

#include "recap/recall.h"

#include "json/json_util.h"

namespace recap {
inline namespace v0 {

namespace {

using jsonutil::Json;

constexpr const char* kDescription =
    "Get back the exact text of earlier parts of this conversation that were summarized or "
    "cleared to save context. Use it when you need a detail the summary or a cleared tool result "
    "no longer shows (a number, a path, an error message, code): search with `query`, or ask for "
    "the message ids the summary names.";

Json Parameters() {
  Json query = Json::object();
  query["type"] = "string";
  query["description"] = "Words to look for: a file name, an identifier, an error, a phrase.";
  Json items = Json::object();
  items["type"] = "string";
  Json ids = Json::object();
  ids["type"] = "array";
  ids["items"] = items;
  ids["description"] = "Message ids to get back, as the summary or a cleared result names them.";
  Json max_chars = Json::object();
  max_chars["type"] = "integer";
  max_chars["description"] = "How long the answer may be, in characters (default 8000).";
  Json properties = Json::object();
  properties["query"] = query;
  properties["ids"] = ids;
  properties["max_chars"] = max_chars;
  Json p = Json::object();
  p["type"] = "object";
  p["properties"] = properties;
  p["additionalProperties"] = false;
  return p;
}

Status Wrong(const std::string& what) {
  return Status::InvalidArgument(
      std::string(kRecallToolName) + ": " + what +
      R"(. Call it with {"query": "words to look for"} or {"ids": ["message id"]}, and optionally "max_chars": 8000)");
}

}  // namespace

std::string RecallTool(ToolFormat format) {
  Json tool = Json::object();
  switch (format) {
    case ToolFormat::kOpenAIChat: {
      Json function = Json::object();
      function["name"] = kRecallToolName;
      function["description"] = kDescription;
      function["parameters"] = Parameters();
      tool["type"] = "function";
      tool["function"] = std::move(function);
      break;
    }
    case ToolFormat::kAnthropic:
      tool["name"] = kRecallToolName;
      tool["description"] = kDescription;
      tool["input_schema"] = Parameters();
      break;
    case ToolFormat::kOpenAIResponses:
      tool["type"] = "function";
      tool["name"] = kRecallToolName;
      tool["description"] = kDescription;
      tool["parameters"] = Parameters();
      break;
  }
  return jsonutil::DumpValid(tool);
}

Result<RecallQuery> ParseRecallArguments(std::string_view arguments) {
  Json args;
  if (arguments.find_first_not_of(" \t\r\n") == std::string_view::npos) {
    return Wrong("its arguments are empty");
  }
  if (Status s = jsonutil::Parse(arguments, "the arguments", &args); !s.ok()) {
    return Wrong("its arguments are not JSON (" + s.message() + ")");
  }
  if (!args.is_object()) {
    return Wrong(std::string("its arguments are ") + jsonutil::TypeName(args) + ", not an object");
  }
  RecallQuery q;
  if (auto it = args.find("query"); it != args.end() && !it->is_null()) {
    if (!it->is_string()) {
      return Wrong(std::string("`query` is ") + jsonutil::TypeName(*it) + ", not a string");
    }
    q.text = it->get<std::string>();
  }
  if (auto it = args.find("ids"); it != args.end() && !it->is_null()) {
    if (it->is_string()) {
      q.ids.push_back(it->get<std::string>());
    } else if (it->is_array()) {
      for (const Json& id : *it) {
        if (!id.is_string()) {
          return Wrong(std::string("`ids` holds ") + jsonutil::TypeName(id) +
                       "; each id is a string");
        }
        if (q.ids.size() < 100) q.ids.push_back(id.get<std::string>());
      }
    } else {
      return Wrong(std::string("`ids` is ") + jsonutil::TypeName(*it) +
                   ", not an array of strings");
    }
  }
  if (auto it = args.find("max_chars"); it != args.end() && !it->is_null()) {
    const std::optional<double> n = jsonutil::NumberValue(*it);
    if (!n || !(*n == *n)) {
      return Wrong(std::string("`max_chars` is ") + jsonutil::TypeName(*it) + ", not a number");
    }
    q.max_chars = static_cast<std::size_t>(std::clamp(*n, 200.0, 100000.0));
  }
  if (q.text.find_first_not_of(" \t\r\n") == std::string::npos && q.ids.empty()) {
    return Wrong("it needs `query` (words to look for) or `ids`");
  }
  return q;
}

}  // namespace v0
}  // namespace recap
