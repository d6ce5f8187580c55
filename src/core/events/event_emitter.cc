#include "events/event_emitter.h"

#include <cassert>
#include <cstdio>
#include <ctime>
#include <exception>
#include <utility>

#include "recap_internal/log_internal.h"

namespace recap {
inline namespace v0 {
namespace internal {

namespace {

using jsonutil::Json;

bool IsCommonField(const std::string& key) {
  return key == "v" || key == "type" || key == "session" || key == "at";
}

Json Figures(std::size_t chars, std::size_t tokens) {
  Json j = Json::object();
  j["chars"] = chars;
  j["tokens"] = tokens;
  return j;
}

Json Chars(std::size_t chars) {
  Json j = Json::object();
  j["chars"] = chars;
  return j;
}

}  // namespace

std::string FormatRfc3339Millis(std::chrono::system_clock::time_point t) {
  using std::chrono::milliseconds;
  using std::chrono::seconds;
  // floor, not duration_cast: before 1970 duration_cast would round toward zero and print the
  // wrong second.
  const milliseconds since_epoch = std::chrono::floor<milliseconds>(t.time_since_epoch());
  const seconds whole = std::chrono::floor<seconds>(since_epoch);
  const auto millis = static_cast<int>((since_epoch - whole).count());
  const auto secs = static_cast<std::time_t>(whole.count());
  std::tm tm{};
#if defined(_WIN32)
  gmtime_s(&tm, &secs);
#else
  gmtime_r(&secs, &tm);  // gmtime() shares a static buffer between threads
#endif
  char buf[96];  // room for any int the format could see, so it never truncates
  std::snprintf(buf, sizeof buf, "%04d-%02d-%02dT%02d:%02d:%02d.%03dZ", tm.tm_year + 1900,
                tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec, millis);
  return buf;
}

std::string NowRfc3339Millis() { return FormatRfc3339Millis(std::chrono::system_clock::now()); }

EventEmitter::EventEmitter(std::vector<std::shared_ptr<EventSink>> sinks) {
  for (auto& sink : sinks) {
    if (sink) sinks_.push_back(std::move(sink));
  }
}

void EventEmitter::Emit(EventType type, const std::string& session, Json fields) const {
  if (sinks_.empty()) return;
  Json event = Json::object();
  event["v"] = 1;
  const char* type_name = EventTypeName(type);
  event["type"] = type_name;
  event["session"] = session;
  event["at"] = NowRfc3339Millis();
  if (fields.is_object()) {
    for (auto it = fields.begin(); it != fields.end(); ++it) {
      // The common fields are the envelope every consumer relies on; a builder never sets them.
      assert(!IsCommonField(it.key()));
      if (IsCommonField(it.key())) continue;
      event[it.key()] = std::move(it.value());
    }
  }
  // Replace, not throw: an event about a session whose id or error text holds invalid UTF-8
  // is still worth delivering.
  const Event out{type_name, session,
                  event.dump(-1, ' ', /*ensure_ascii=*/false, Json::error_handler_t::replace)};
  for (const auto& sink : sinks_) {
    // A sink is the host's code; its failure must not stop recap's work or the other sinks.
    try {
      sink->OnEvent(out);
    } catch (const std::exception& e) {
      RECAP_LOG_WARN("an event sink threw while handling {} for session {}: {}", out.type, session,
                     e.what());
    } catch (...) {
      RECAP_LOG_WARN(
          "an event sink threw a non-standard exception while handling {} for "
          "session {}",
          out.type, session);
    }
  }
}

Json CompactionStartedFields(std::string_view reason, std::size_t before_chars,
                             std::size_t before_tokens) {
  Json j = Json::object();
  j["reason"] = std::string(reason);
  j["before"] = Figures(before_chars, before_tokens);
  return j;
}

Json CompactionProgressFields(int chunk, int chunks) {
  Json j = Json::object();
  j["chunk"] = chunk;
  j["chunks"] = chunks;
  return j;
}

Json CompactionCompletedFields(const CompletedInfo& info) {
  Json j = Json::object();
  j["reason"] = info.reason;
  j["before"] = Figures(info.before_chars, info.before_tokens);
  j["after"] = Figures(info.after_chars, info.after_tokens);
  Json summarized = Json::object();
  summarized["messages"] = info.summarized_messages;
  summarized["chars"] = info.summarized_chars;
  j["summarized"] = std::move(summarized);
  Json checkpoint = Json::object();
  checkpoint["chars"] = info.checkpoint_chars;
  checkpoint["structured"] = info.structured;
  checkpoint["partial"] = info.partial;
  checkpoint["writer"] = info.writer;
  j["checkpoint"] = std::move(checkpoint);
  Json usage = Json::object();
  usage["prompt_tokens"] = info.prompt_tokens;
  usage["completion_tokens"] = info.completion_tokens;
  usage["calls"] = info.calls;
  j["usage"] = std::move(usage);
  Json plugins = Json::array();
  for (const CompletedPlugin& p : info.plugins) {
    Json entry = Json::object();
    entry["name"] = p.name;
    entry["report"] = p.report;
    plugins.push_back(std::move(entry));
  }
  j["plugins"] = std::move(plugins);
  Json ledger(nullptr);
  if (info.ledger) {
    ledger = Json::object();
    for (std::size_t k = 0; k < kLedgerKinds; ++k) {
      const LedgerTally& t = (*info.ledger)[k];
      Json kind = Json::object();
      kind["total"] = t.total;
      kind["kept"] = t.kept;
      kind["added"] = t.added;
      kind["left_out"] = t.left_out;
      ledger[LedgerKindName(static_cast<LedgerKind>(k))] = std::move(kind);
    }
  }
  j["ledger"] = std::move(ledger);
  return j;
}

Json CompactionSkippedFields(std::string_view reason) {
  Json j = Json::object();
  j["reason"] = std::string(reason);
  return j;
}

Json WindowUnknownFields(std::string_view error, std::size_t fallback_tokens,
                         std::string_view fallback_rule) {
  Json j = Json::object();
  j["error"] = std::string(error);
  Json fallback = Json::object();
  fallback["tokens"] = fallback_tokens;
  fallback["rule"] = std::string(fallback_rule);
  j["fallback"] = std::move(fallback);
  return j;
}

Json ProviderCheckpointFields(std::string_view writer, std::size_t messages,
                              std::size_t before_chars, std::size_t after_chars) {
  Json j = Json::object();
  j["writer"] = std::string(writer);
  j["messages"] = messages;
  j["before"] = Chars(before_chars);
  j["after"] = Chars(after_chars);
  return j;
}

Json ToolResultsClearedFields(std::size_t messages, std::size_t results, std::size_t freed_chars) {
  Json j = Json::object();
  j["messages"] = messages;
  j["results"] = results;
  j["freed_chars"] = freed_chars;
  return j;
}

Json CompactionUndoneFields(std::string_view commit, std::string_view reason, std::size_t restored,
                            std::size_t retired, std::size_t before_chars,
                            std::size_t after_chars) {
  Json j = Json::object();
  j["undone"] = std::string(commit);
  if (reason.empty()) {
    j["reason"] = nullptr;
  } else {
    j["reason"] = std::string(reason);
  }
  j["restored_messages"] = restored;
  j["retired_messages"] = retired;
  j["before"] = Chars(before_chars);
  j["after"] = Chars(after_chars);
  return j;
}

Json ContextReducedFields(std::size_t messages, std::size_t before_chars, std::size_t after_chars) {
  Json j = Json::object();
  j["messages"] = messages;
  j["before"] = Chars(before_chars);
  j["after"] = Chars(after_chars);
  return j;
}

Json CompactionFailedFields(std::string_view reason, std::string_view error) {
  Json j = Json::object();
  j["reason"] = std::string(reason);
  j["error"] = std::string(error);
  return j;
}

Json CompactionDiscardedFields(std::string_view reason, std::size_t messages,
                               std::string_view why) {
  Json j = Json::object();
  j["reason"] = std::string(reason);
  j["messages"] = messages;
  j["why"] = std::string(why);
  return j;
}

Json InBackground(Json fields) {
  fields["background"] = true;
  return fields;
}

Json PluginHookFailedFields(std::string_view plugin, std::string_view hook,
                            std::string_view error) {
  Json j = Json::object();
  j["plugin"] = std::string(plugin);
  j["hook"] = std::string(hook);
  j["error"] = std::string(error);
  return j;
}

}  // namespace internal
}  // namespace v0
}  // namespace recap
