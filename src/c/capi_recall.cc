// The C API's calls for getting it back (SPEC R18): recap_recall (a query as JSON, the
// Recalled as JSON), recap_recall_tool, recap_answer_recall (the model's call in a message
// format, or {"id", "name", "arguments"}; the result as a message in that format) and
// recap_uncompact.
#include <cstdint>
#include <limits>
#include <string>
#include <string_view>
#include <utility>
#include <variant>

#include <nlohmann/json.hpp>

#include "recap/c/recap.h"
#include "recap/recap.h"

#include "capi_formats.h"
#include "capi_guard.h"
#include "capi_handles.h"
#include "recap_internal/json_depth.h"

using recap::capi::Fail;
using recap::capi::Format;
using recap::capi::Give;
using recap::capi::Guard;
using recap::capi::JsonString;
using recap::capi::Missing;
using recap::capi::ParseFormat;

namespace {

using Json = nlohmann::ordered_json;
using recap::Status;

std::string Dump(const Json& j) { return j.dump(-1, ' ', false, Json::error_handler_t::replace); }

// --- recap_recall's query --------------------------------------------------------------------

constexpr const char* kQueryMembers =
    "\"query\", \"ids\", \"first_turn\", \"last_turn\", \"max_chars\", \"max_messages\" and "
    "\"include_active\"";

recap::Result<recap::RecallQuery> ParseQuery(std::string_view text) {
  const std::string where = "recap_recall: `query_json`";
  if (recap::internal::FindTooDeep(text) != std::string_view::npos) {
    return Status::InvalidArgument(where + " nests too deep to be a query");
  }
  const Json doc = Json::parse(text, nullptr, false);
  if (doc.is_discarded() || !doc.is_object()) {
    return Status::InvalidArgument(
        where +
        " must be a JSON object such as {\"query\": \"parse_config\"}, {\"ids\": "
        "[\"m_1\"]} or {\"first_turn\": 3, \"last_turn\": 5}; its members are " +
        kQueryMembers);
  }
  recap::RecallQuery q;
  bool first_given = false;
  auto bad = [&](const std::string& key, const char* want) {
    return Status::InvalidArgument(where + ": `" + key + "` must be " + want);
  };
  // A whole number from `min`, within what the stores keep (a signed 64-bit integer).
  auto whole = [&](const std::string& key, const Json& v, std::uint64_t min,
                   std::uint64_t* out) -> Status {
    constexpr std::uint64_t kMax = std::numeric_limits<std::int64_t>::max();
    if (!v.is_number_unsigned() || v.get<std::uint64_t>() < min || v.get<std::uint64_t>() > kMax) {
      return bad(key, min == 0 ? "a whole number from 0" : "a whole number from 1");
    }
    *out = v.get<std::uint64_t>();
    return Status::OK();
  };
  for (auto it = doc.begin(); it != doc.end(); ++it) {
    const std::string& key = it.key();
    const Json& v = it.value();
    if (v.is_null()) continue;
    Status s;
    std::uint64_t n = 0;
    if (key == "query") {
      if (!v.is_string()) return bad(key, "a string: the words to look for");
      q.text = v.get<std::string>();
    } else if (key == "ids") {
      if (v.is_string()) {
        q.ids.push_back(v.get<std::string>());
      } else if (v.is_array()) {
        for (const Json& id : v) {
          if (!id.is_string()) return bad(key, "an array of message ids (strings)");
          q.ids.push_back(id.get<std::string>());
        }
      } else {
        return bad(key, "an array of message ids (strings)");
      }
    } else if (key == "first_turn") {
      s = whole(key, v, 0, &q.first_turn);
      first_given = true;
    } else if (key == "last_turn") {
      s = whole(key, v, 1, &q.last_turn);
    } else if (key == "max_chars") {
      s = whole(key, v, 1, &n);
      q.max_chars = static_cast<std::size_t>(n);
    } else if (key == "max_messages") {
      s = whole(key, v, 1, &n);
      q.max_messages = static_cast<std::size_t>(n);
    } else if (key == "include_active") {
      if (!v.is_boolean()) return bad(key, "true or false");
      q.include_active = v.get<bool>();
    } else {
      return Status::InvalidArgument(where + " has the member " + JsonString(key) +
                                     ", which is no member of a query; they are " + kQueryMembers);
    }
    if (!s.ok()) return s;
  }
  if (first_given && q.last_turn == 0) {
    return Status::InvalidArgument(where + ": `first_turn` needs `last_turn` (the range's end)");
  }
  if (q.last_turn != 0 && q.first_turn > q.last_turn) {
    return Status::InvalidArgument(where + ": `first_turn` (" + std::to_string(q.first_turn) +
                                   ") is after `last_turn` (" + std::to_string(q.last_turn) + ")");
  }
  if (q.text.find_first_not_of(" \t\r\n") == std::string::npos && q.ids.empty() &&
      q.last_turn == 0) {
    return Status::InvalidArgument(where +
                                   " asks for nothing: give \"query\" (words to look for), "
                                   "\"ids\" (message ids) or a turn range (\"first_turn\", "
                                   "\"last_turn\")");
  }
  return q;
}

Json RecalledJson(const recap::Recalled& r) {
  Json messages = Json::array();
  for (const recap::RecalledMessage& m : r.messages) {
    messages.push_back({{"id", m.id},
                        {"seq", m.seq},
                        {"turn", m.turn},
                        {"role", recap::RoleName(m.role)},
                        {"state", m.state},
                        {"replaced_by", m.replaced_by},
                        {"text", m.text},
                        {"clipped", m.clipped},
                        {"score", m.score}});
  }
  return Json{{"text", r.text},
              {"messages", std::move(messages)},
              {"left_out", r.left_out},
              {"left_out_ids", r.left_out_ids}};
}

// --- the recall tool's formats ---------------------------------------------------------------

const char* FormatName(Format f) {
  switch (f) {
    case Format::kOpenAiChat: return "openai-chat";
    case Format::kAnthropic: return "anthropic";
    case Format::kOpenAiResponses: return "openai-responses";
    case Format::kNative: break;
  }
  return "recap";
}

// The wire format the answer is shaped for: recap's own form takes a `tool` message, as OpenAI
// chat does.
recap::ToolFormat ToolFormatOf(Format f) {
  switch (f) {
    case Format::kAnthropic: return recap::ToolFormat::kAnthropic;
    case Format::kOpenAiResponses: return recap::ToolFormat::kOpenAIResponses;
    case Format::kOpenAiChat:
    case Format::kNative: break;
  }
  return recap::ToolFormat::kOpenAIChat;
}

// The model's call `call_json` holds: {"id", "name", "arguments"}, or the call as `format`
// writes it, decoded by the format's codec inside the message that would carry it.
recap::Result<recap::ToolCall> ParseCall(Format format, std::string_view text) {
  const std::string where = "recap_answer_recall: `call_json`";
  if (recap::internal::FindTooDeep(text) != std::string_view::npos) {
    return Status::InvalidArgument(where + " nests too deep to be a tool call");
  }
  const Json doc = Json::parse(text, nullptr, false);
  const std::string shapes = std::string(" must be a JSON object: the tool call as ") +
                             FormatName(format) +
                             " writes it, or {\"id\": \"call_1\", \"name\": \"recap_recall\", "
                             "\"arguments\": \"{\\\"query\\\": \\\"words\\\"}\"}";
  if (doc.is_discarded() || !doc.is_object()) return Status::InvalidArgument(where + shapes);
  if (!doc.contains("type") && !doc.contains("function")) {
    // The plain form, the same in every format.
    recap::ToolCall call;
    const auto id = doc.find("id");
    const auto name = doc.find("name");
    if (id == doc.end() || !id->is_string() || name == doc.end() || !name->is_string()) {
      return Status::InvalidArgument(where + " needs `id` and `name` (strings)" + ": it" + shapes);
    }
    call.id = id->get<std::string>();
    call.name = name->get<std::string>();
    const auto arguments = doc.find("arguments");
    if (arguments != doc.end() && !arguments->is_null()) {
      call.arguments = arguments->is_string() ? arguments->get<std::string>() : Dump(*arguments);
    }
    return call;
  }
  // The format's own form, inside the message that carries it (a Responses item is one).
  std::string message;
  switch (format) {
    case Format::kOpenAiChat:
      message =
          "{\"role\":\"assistant\",\"content\":null,\"tool_calls\":[" + std::string(text) + "]}";
      break;
    case Format::kAnthropic:
      message = "{\"role\":\"assistant\",\"content\":[" + std::string(text) + "]}";
      break;
    case Format::kOpenAiResponses: message = std::string(text); break;
    case Format::kNative:
      message = "{\"role\":\"assistant\",\"parts\":[" + std::string(text) + "]}";
      break;
  }
  recap::DecodeOptions options;
  options.split_instructions = false;
  recap::Result<recap::Message> m =
      format == Format::kOpenAiChat  ? recap::openai_chat::DecodeMessage(message, options)
      : format == Format::kAnthropic ? recap::anthropic::DecodeMessage(message, options)
      : format == Format::kNative    ? recap::native::DecodeMessage(message, options)
                                     : recap::openai_responses::DecodeMessage(message, options);
  if (!m.ok()) {
    return m.status().WithContext(where + " is no tool call as " + FormatName(format) +
                                  " writes it (nor {\"id\", \"name\", \"arguments\"})");
  }
  for (const recap::Part& part : m->parts) {
    if (const auto* call = std::get_if<recap::ToolCall>(&part)) return *call;
  }
  return Status::InvalidArgument(where + " is no tool call as " + FormatName(format) +
                                 " writes it (nor {\"id\", \"name\", \"arguments\"})");
}

recap::Result<std::string> EncodeOne(Format format, const recap::Message& m) {
  switch (format) {
    case Format::kOpenAiChat: return recap::openai_chat::EncodeMessage(m);
    case Format::kAnthropic: return recap::anthropic::EncodeMessage(m);
    case Format::kOpenAiResponses: return recap::openai_responses::EncodeMessage(m);
    case Format::kNative: break;
  }
  return recap::native::EncodeMessage(m);
}

}  // namespace

extern "C" {

int recap_recall(recap_compactor* compactor, const char* session, const char* query_json,
                 char** out_json, char** error) {
  return Guard("recap_recall", error, [&]() -> int {
    if (compactor == nullptr) return Fail(error, Missing("recap_recall", "compactor"));
    if (session == nullptr) return Fail(error, Missing("recap_recall", "session"));
    if (query_json == nullptr) return Fail(error, Missing("recap_recall", "query_json"));
    if (out_json == nullptr) return Fail(error, Missing("recap_recall", "out_json"));
    recap::Result<recap::RecallQuery> query = ParseQuery(query_json);
    if (!query.ok()) return Fail(error, query.status());
    recap::Result<recap::Recalled> recalled = compactor->compactor->Recall(session, *query);
    if (!recalled.ok()) return Fail(error, recalled.status());
    return Give(Dump(RecalledJson(*recalled)), out_json, error);
  });
}

int recap_recall_tool(const char* format, char** out_json, char** error) {
  return Guard("recap_recall_tool", error, [&]() -> int {
    if (out_json == nullptr) return Fail(error, Missing("recap_recall_tool", "out_json"));
    recap::Result<Format> f = ParseFormat("recap_recall_tool", format);
    if (!f.ok()) return Fail(error, f.status());
    if (*f == Format::kNative) {
      return Fail(error, Status::InvalidArgument(
                             "recap_recall_tool: \"recap\" is recap's own message form, not a "
                             "model's wire format; the recall tool is defined for "
                             "\"openai-chat\", \"anthropic\" and \"openai-responses\""));
    }
    return Give(recap::RecallTool(ToolFormatOf(*f)), out_json, error);
  });
}

int recap_answer_recall(recap_compactor* compactor, const char* session, const char* format,
                        const char* call_json, char** out_message_json, char** error) {
  return Guard("recap_answer_recall", error, [&]() -> int {
    if (compactor == nullptr) return Fail(error, Missing("recap_answer_recall", "compactor"));
    if (session == nullptr) return Fail(error, Missing("recap_answer_recall", "session"));
    if (call_json == nullptr) return Fail(error, Missing("recap_answer_recall", "call_json"));
    if (out_message_json == nullptr) {
      return Fail(error, Missing("recap_answer_recall", "out_message_json"));
    }
    recap::Result<Format> f = ParseFormat("recap_answer_recall", format);
    if (!f.ok()) return Fail(error, f.status());
    recap::Result<recap::ToolCall> call = ParseCall(*f, call_json);
    if (!call.ok()) return Fail(error, call.status());
    if (call->name != recap::kRecallToolName) {
      return Fail(error, Status::InvalidArgument(
                             "recap_answer_recall answers calls of the recall tool (" +
                             JsonString(recap::kRecallToolName) + "); this call (id " +
                             JsonString(call->id) + ") is to " + JsonString(call->name) +
                             ", which the host answers itself"));
    }
    recap::Result<recap::Message> answer =
        compactor->compactor->AnswerRecall(session, *call, ToolFormatOf(*f));
    if (!answer.ok()) return Fail(error, answer.status());
    recap::Result<std::string> encoded = EncodeOne(*f, *answer);
    if (!encoded.ok()) return Fail(error, encoded.status().WithContext("recap_answer_recall"));
    return Give(*encoded, out_message_json, error);
  });
}

int recap_uncompact(recap_compactor* compactor, const char* session, char** out_json,
                    char** error) {
  return Guard("recap_uncompact", error, [&]() -> int {
    if (compactor == nullptr) return Fail(error, Missing("recap_uncompact", "compactor"));
    if (session == nullptr) return Fail(error, Missing("recap_uncompact", "session"));
    if (out_json == nullptr) return Fail(error, Missing("recap_uncompact", "out_json"));
    recap::Result<recap::UncompactOutcome> o = compactor->compactor->Uncompact(session);
    if (!o.ok()) return Fail(error, o.status());
    const Json out{{"undone", o->undone},
                   {"commit", o->commit},
                   {"reason", o->reason},
                   {"restored_messages", o->restored_messages},
                   {"retired_messages", o->retired_messages},
                   {"before_chars", o->before_chars},
                   {"after_chars", o->after_chars},
                   {"version", o->version}};
    return Give(Dump(out), out_json, error);
  });
}

}  // extern "C"
