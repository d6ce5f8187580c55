// Events (SPEC R10): the JSONL sinks, the envelope every event shares, and the fields of each
// event type exactly as the R10 table and docs/events.md name them.
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <memory>
#include <mutex>
#include <regex>
#include <set>
#include <sstream>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include "recap/events.h"
#include "recap/log.h"

// The emitter is private to the library; the tests link the static recap_core.
#include "events/event_emitter.h"

using recap::Event;
using recap::EventSink;
using recap::StatusCode;
using recap::internal::EventEmitter;
using Json = nlohmann::ordered_json;

namespace {

const std::regex kRfc3339Millis(R"(^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$)");

class RecordingSink : public EventSink {
 public:
  void OnEvent(const Event& event) override {
    std::lock_guard<std::mutex> lock(mu_);
    events_.push_back(event);
  }
  std::vector<Event> events() {
    std::lock_guard<std::mutex> lock(mu_);
    return events_;
  }

 private:
  std::mutex mu_;
  std::vector<Event> events_;
};

class ThrowingSink : public EventSink {
 public:
  void OnEvent(const Event&) override {
    ++calls;
    throw std::runtime_error("sink is broken");
  }
  std::atomic<int> calls{0};
};

class ThrowingNonStdSink : public EventSink {
 public:
  void OnEvent(const Event&) override { throw 42; }
};

std::vector<std::string> Lines(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

std::vector<std::string> Keys(const Json& object) {
  std::vector<std::string> keys;
  for (auto it = object.begin(); it != object.end(); ++it) keys.push_back(it.key());
  return keys;
}

using Names = std::vector<std::string>;

// Emits one event through a fresh emitter and returns it parsed.
Json EmitOne(recap::EventType type, Json fields) {
  auto sink = std::make_shared<RecordingSink>();
  EventEmitter emitter({sink});
  emitter.Emit(type, "s-1", std::move(fields));
  const auto events = sink->events();
  REQUIRE(events.size() == 1);
  CHECK(events[0].type == recap::EventTypeName(type));
  CHECK(events[0].session == "s-1");
  Json j = Json::parse(events[0].json);
  REQUIRE(j.is_object());
  return j;
}

std::string TempPath(const std::string& name) {
  static std::atomic<int> counter{0};
  const auto dir = std::filesystem::temp_directory_path();
  return (dir / ("recap_test_events_" + std::to_string(::getpid()) + "_" +
                 std::to_string(counter++) + "_" + name))
      .string();
}

std::string ReadAll(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream out;
  out << in.rdbuf();
  return out.str();
}

}  // namespace

TEST_CASE(
    "R10 R12.2 R14.1 R15.2 the event types come from one table: EventTypeName of each is its "
    "documented "
    "type") {
  using recap::EventType;
  using recap::EventTypeName;
  const std::vector<std::pair<EventType, std::string>> expected = {
      {EventType::kCompactionStarted, "compaction_started"},
      {EventType::kCompactionProgress, "compaction_progress"},
      {EventType::kCompactionCompleted, "compaction_completed"},
      {EventType::kCompactionSkipped, "compaction_skipped"},
      {EventType::kContextReduced, "context_reduced"},
      {EventType::kCompactionFailed, "compaction_failed"},
      {EventType::kPluginHookFailed, "plugin_hook_failed"},
      {EventType::kWindowUnknown, "window_unknown"},
      {EventType::kProviderCheckpoint, "provider_checkpoint"},
      {EventType::kToolResultsCleared, "tool_results_cleared"},
      {EventType::kCompactionDiscarded, "compaction_discarded"},
  };
  std::set<std::string> names;
  for (const auto& [type, name] : expected) {
    CHECK(EventTypeName(type) == name);
    names.insert(EventTypeName(type));
    // What a sink receives: the envelope's "type" and Event::type are that name.
    auto sink = std::make_shared<RecordingSink>();
    EventEmitter({sink}).Emit(type, "s", Json::object());
    REQUIRE(sink->events().size() == 1);
    CHECK(sink->events()[0].type == name);
    CHECK(Json::parse(sink->events()[0].json)["type"] == name);
  }
  CHECK(names.size() == expected.size());
}

TEST_CASE("R10 JSONL sink: one JSON object a line, v/type/session/at first and in that order") {
  std::ostringstream out;
  EventEmitter emitter({recap::NewJsonlSink(out)});
  CHECK_FALSE(emitter.empty());
  emitter.Emit(recap::EventType::kCompactionStarted, "session-42",
               recap::internal::CompactionStartedFields("auto", 4000, 1000));
  emitter.Emit(recap::EventType::kCompactionSkipped, "session-42",
               recap::internal::CompactionSkippedFields("no_progress"));

  const auto lines = Lines(out.str());
  REQUIRE(lines.size() == 2);
  CHECK(out.str().back() == '\n');
  for (const auto& line : lines) {
    const Json j = Json::parse(line);
    const auto keys = Keys(j);
    REQUIRE(keys.size() >= 4);
    CHECK(Names(keys.begin(), keys.begin() + 4) == Names{"v", "type", "session", "at"});
    CHECK(j["v"] == 1);
    CHECK(j["session"] == "session-42");
    CHECK(std::regex_match(j["at"].get<std::string>(), kRfc3339Millis));
  }
  CHECK(Json::parse(lines[0])["type"] == "compaction_started");
  CHECK(Json::parse(lines[1])["type"] == "compaction_skipped");
  CHECK(lines[1].find("\"reason\":\"no_progress\"") != std::string::npos);
}

TEST_CASE("R10 at: UTC, RFC 3339 with milliseconds and Z") {
  using std::chrono::milliseconds;
  using std::chrono::system_clock;
  CHECK(recap::internal::FormatRfc3339Millis(system_clock::time_point{}) ==
        "1970-01-01T00:00:00.000Z");
  // 2026-12-02T10:34:52.123Z = 1796207692123 ms after the epoch.
  CHECK(recap::internal::FormatRfc3339Millis(
            system_clock::time_point{milliseconds(1796207692123)}) == "2026-12-02T10:34:52.123Z");
  // Rounded down, also before 1970.
  CHECK(recap::internal::FormatRfc3339Millis(system_clock::time_point{milliseconds(-1)}) ==
        "1969-12-31T23:59:59.999Z");
  CHECK(recap::internal::FormatRfc3339Millis(
            system_clock::time_point{milliseconds(951782400999)}) == "2000-02-29T00:00:00.999Z");

  const std::string now = recap::internal::NowRfc3339Millis();
  CHECK(std::regex_match(now, kRfc3339Millis));
  const auto year = std::stoi(now.substr(0, 4));
  CHECK(year >= 2024);
}

TEST_CASE("R10 compaction_started fields") {
  const Json j = EmitOne(recap::EventType::kCompactionStarted,
                         recap::internal::CompactionStartedFields("overflow", 12345, 3087));
  CHECK(Keys(j) == Names{"v", "type", "session", "at", "reason", "before"});
  CHECK(j["type"] == "compaction_started");
  CHECK(j["reason"] == "overflow");
  CHECK(Keys(j["before"]) == Names{"chars", "tokens"});
  CHECK(j["before"]["chars"] == 12345);
  CHECK(j["before"]["tokens"] == 3087);
}

TEST_CASE("R10 compaction_progress fields") {
  const Json j = EmitOne(recap::EventType::kCompactionProgress,
                         recap::internal::CompactionProgressFields(2, 5));
  CHECK(Keys(j) == Names{"v", "type", "session", "at", "chunk", "chunks"});
  CHECK(j["type"] == "compaction_progress");
  CHECK(j["chunk"] == 2);
  CHECK(j["chunks"] == 5);
}

TEST_CASE("R10 compaction_completed fields") {
  recap::internal::CompletedInfo info;
  info.reason = "budget";
  info.before_chars = 900000;
  info.before_tokens = 225000;
  info.after_chars = 120000;
  info.after_tokens = 30000;
  info.summarized_messages = 310;
  info.summarized_chars = 780000;
  info.checkpoint_chars = 4200;
  info.structured = true;
  info.partial = true;
  info.writer = "offline";
  info.prompt_tokens = 200000;
  info.completion_tokens = 1500;
  info.calls = 3;
  info.plugins = {{"memory", "stored 4 memories"}, {"audit", ""}};
  const Json j = EmitOne(recap::EventType::kCompactionCompleted,
                         recap::internal::CompactionCompletedFields(info));

  CHECK(Keys(j) == Names{"v", "type", "session", "at", "reason", "before", "after", "summarized",
                         "checkpoint", "usage", "plugins", "ledger"});
  CHECK(j["type"] == "compaction_completed");
  CHECK(j["reason"] == "budget");
  CHECK(Keys(j["before"]) == Names{"chars", "tokens"});
  CHECK(j["before"]["chars"] == 900000);
  CHECK(j["before"]["tokens"] == 225000);
  CHECK(Keys(j["after"]) == Names{"chars", "tokens"});
  CHECK(j["after"]["chars"] == 120000);
  CHECK(j["after"]["tokens"] == 30000);
  CHECK(Keys(j["summarized"]) == Names{"messages", "chars"});
  CHECK(j["summarized"]["messages"] == 310);
  CHECK(j["summarized"]["chars"] == 780000);
  CHECK(Keys(j["checkpoint"]) == Names{"chars", "structured", "partial", "writer"});
  CHECK(j["checkpoint"]["chars"] == 4200);
  CHECK(j["checkpoint"]["structured"] == true);
  CHECK(j["checkpoint"]["partial"] == true);
  CHECK(j["checkpoint"]["writer"] == "offline");
  CHECK(Keys(j["usage"]) == Names{"prompt_tokens", "completion_tokens", "calls"});
  CHECK(j["usage"]["prompt_tokens"] == 200000);
  CHECK(j["usage"]["completion_tokens"] == 1500);
  CHECK(j["usage"]["calls"] == 3);
  REQUIRE(j["plugins"].is_array());
  REQUIRE(j["plugins"].size() == 2);
  CHECK(Keys(j["plugins"][0]) == Names{"name", "report"});
  CHECK(j["plugins"][0]["name"] == "memory");
  CHECK(j["plugins"][0]["report"] == "stored 4 memories");
  CHECK(j["plugins"][1]["name"] == "audit");
  CHECK(j["plugins"][1]["report"] == "");

  // No plugins: an empty array, never a missing field.
  const Json none = EmitOne(recap::EventType::kCompactionCompleted,
                            recap::internal::CompactionCompletedFields({}));
  CHECK(none["plugins"] == Json::array());
  CHECK(none["ledger"].is_null());  // compaction.ledger off

  // R17.3: per kind, what the ledger had, kept, added and left out.
  info.ledger.emplace();
  (*info.ledger)[static_cast<std::size_t>(recap::LedgerKind::kFile)] = {5, 3, 1, 1};
  const Json guarded = EmitOne(recap::EventType::kCompactionCompleted,
                               recap::internal::CompactionCompletedFields(info));
  CHECK(Keys(guarded["ledger"]) == Names{"request", "identifier", "file", "todo", "failure"});
  CHECK(Keys(guarded["ledger"]["file"]) == Names{"total", "kept", "added", "left_out"});
  CHECK(guarded["ledger"]["file"]["total"] == 5);
  CHECK(guarded["ledger"]["file"]["kept"] == 3);
  CHECK(guarded["ledger"]["file"]["added"] == 1);
  CHECK(guarded["ledger"]["file"]["left_out"] == 1);
  CHECK(guarded["ledger"]["todo"]["total"] == 0);
  CHECK(none["checkpoint"]["partial"] == false);
}

TEST_CASE("R10 compaction_skipped fields") {
  const Json j = EmitOne(recap::EventType::kCompactionSkipped,
                         recap::internal::CompactionSkippedFields("uncertain_tool_results"));
  CHECK(Keys(j) == Names{"v", "type", "session", "at", "reason"});
  CHECK(j["type"] == "compaction_skipped");
  CHECK(j["reason"] == "uncertain_tool_results");
}

TEST_CASE("R10 context_reduced fields") {
  const Json j = EmitOne(recap::EventType::kContextReduced,
                         recap::internal::ContextReducedFields(7, 950000, 790000));
  CHECK(Keys(j) == Names{"v", "type", "session", "at", "messages", "before", "after"});
  CHECK(j["type"] == "context_reduced");
  CHECK(j["messages"] == 7);
  CHECK(Keys(j["before"]) == Names{"chars"});
  CHECK(j["before"]["chars"] == 950000);
  CHECK(Keys(j["after"]) == Names{"chars"});
  CHECK(j["after"]["chars"] == 790000);
}

TEST_CASE("R10 compaction_failed fields") {
  const Json j = EmitOne(recap::EventType::kCompactionFailed,
                         recap::internal::CompactionFailedFields("auto", "provider timed out"));
  CHECK(Keys(j) == Names{"v", "type", "session", "at", "reason", "error"});
  CHECK(j["type"] == "compaction_failed");
  CHECK(j["reason"] == "auto");
  CHECK(j["error"] == "provider timed out");
}

TEST_CASE("R10 plugin_hook_failed fields") {
  const Json j = EmitOne(
      recap::EventType::kPluginHookFailed,
      recap::internal::PluginHookFailedFields("memory", "afterCompact", "timed out after 5000 ms"));
  CHECK(Keys(j) == Names{"v", "type", "session", "at", "plugin", "hook", "error"});
  CHECK(j["type"] == "plugin_hook_failed");
  CHECK(j["plugin"] == "memory");
  CHECK(j["hook"] == "afterCompact");
  CHECK(j["error"] == "timed out after 5000 ms");
}

TEST_CASE("R10 a throwing sink is logged and the other sinks still get the event") {
  struct Captured {
    std::mutex mu;
    std::vector<std::string> warnings;
  };
  auto captured = std::make_shared<Captured>();
  recap::SetLogHandler(recap::LogLevel::kWarn,
                       [captured](recap::LogLevel level, std::string_view msg) {
                         std::lock_guard<std::mutex> lock(captured->mu);
                         if (level == recap::LogLevel::kWarn) captured->warnings.emplace_back(msg);
                       });

  auto before = std::make_shared<RecordingSink>();
  auto thrower = std::make_shared<ThrowingSink>();
  auto odd = std::make_shared<ThrowingNonStdSink>();
  auto after = std::make_shared<RecordingSink>();
  EventEmitter emitter({before, thrower, nullptr, odd, after});
  CHECK_NOTHROW(emitter.Emit(recap::EventType::kCompactionSkipped, "s",
                             recap::internal::CompactionSkippedFields("nothing_to_summarize")));
  CHECK_NOTHROW(emitter.Emit(recap::EventType::kCompactionSkipped, "s",
                             recap::internal::CompactionSkippedFields("no_safe_boundary")));
  CHECK(before->events().size() == 2);
  CHECK(thrower->calls == 2);
  CHECK(after->events().size() == 2);
  CHECK(before->events()[1].json == after->events()[1].json);

  recap::SetLogHandler(recap::LogLevel::kOff, nullptr);
  std::lock_guard<std::mutex> lock(captured->mu);
  REQUIRE(captured->warnings.size() == 4);
  CHECK(captured->warnings[0].find("sink is broken") != std::string::npos);
  CHECK(captured->warnings[0].find("compaction_skipped") != std::string::npos);
  CHECK(captured->warnings[1].find("non-standard exception") != std::string::npos);
}

TEST_CASE("R10 an emitter without sinks does nothing") {
  EventEmitter none({});
  CHECK(none.empty());
  CHECK_NOTHROW(none.Emit(recap::EventType::kCompactionSkipped, "s", Json::object()));
  EventEmitter only_null({nullptr});
  CHECK(only_null.empty());
}

TEST_CASE("R10 text that is not valid UTF-8 still yields one valid JSON line") {
  std::ostringstream out;
  EventEmitter emitter({recap::NewJsonlSink(out)});
  emitter.Emit(recap::EventType::kCompactionFailed,
               "bad\xFF"
               "id",
               recap::internal::CompactionFailedFields("auto", "reply\xC3 cut\nhere"));
  const auto lines = Lines(out.str());
  REQUIRE(lines.size() == 1);
  const Json j = Json::parse(lines[0]);
  CHECK(j["session"] == "bad\xEF\xBF\xBDid");
  CHECK(j["error"] == "reply\xEF\xBF\xBD cut\nhere");
}

TEST_CASE("R10 JSONL sink keeps a host's multi-line event on one line") {
  std::ostringstream out;
  auto sink = recap::NewJsonlSink(out);
  sink->OnEvent(Event{"custom", "s", "{\n  \"v\": 1,\r\n  \"type\": \"custom\"\n}"});
  const auto lines = Lines(out.str());
  REQUIRE(lines.size() == 1);
  CHECK(Json::parse(lines[0])["type"] == "custom");
}

TEST_CASE("R10 concurrent emits from 8 threads produce intact lines") {
  std::ostringstream out;
  const std::string path = TempPath("concurrent.jsonl");
  auto file_sink = recap::NewJsonlFileSink(path);
  REQUIRE(file_sink.ok());
  EventEmitter emitter({recap::NewJsonlSink(out), *file_sink});

  constexpr int kThreads = 8;
  constexpr int kPerThread = 200;
  // A long field makes a torn write likely if the sink did not lock.
  const std::string long_error(3000, 'x');
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < kPerThread; ++i) {
        emitter.Emit(recap::EventType::kCompactionFailed, "session-" + std::to_string(t),
                     recap::internal::CompactionFailedFields(std::to_string(i), long_error));
      }
    });
  }
  for (auto& th : threads) th.join();

  for (const std::string& text : {out.str(), ReadAll(path)}) {
    const auto lines = Lines(text);
    REQUIRE(lines.size() == kThreads * kPerThread);
    std::set<std::string> seen;
    for (const auto& line : lines) {
      const Json j = Json::parse(line);  // throws (fails the test) on a torn line
      CHECK(j["error"].get<std::string>().size() == long_error.size());
      seen.insert(j["session"].get<std::string>() + "/" + j["reason"].get<std::string>());
    }
    CHECK(seen.size() == static_cast<std::size_t>(kThreads * kPerThread));
  }
  std::filesystem::remove(path);
}

TEST_CASE("R10 file sink appends to an existing file and to itself across sinks") {
  const std::string path = TempPath("append.jsonl");
  {
    std::ofstream pre(path, std::ios::binary);
    pre << "{\"earlier\":true}\n";
  }
  {
    auto sink = recap::NewJsonlFileSink(path);
    REQUIRE(sink.ok());
    EventEmitter emitter({*sink});
    emitter.Emit(recap::EventType::kCompactionProgress, "s",
                 recap::internal::CompactionProgressFields(1, 2));
    // Flushed after each event: visible before the sink is gone.
    CHECK(Lines(ReadAll(path)).size() == 2);
  }
  {
    auto sink = recap::NewJsonlFileSink(path);
    REQUIRE(sink.ok());
    EventEmitter emitter({*sink});
    emitter.Emit(recap::EventType::kCompactionProgress, "s",
                 recap::internal::CompactionProgressFields(2, 2));
  }
  const auto lines = Lines(ReadAll(path));
  REQUIRE(lines.size() == 3);
  CHECK(lines[0] == "{\"earlier\":true}");
  CHECK(Json::parse(lines[1])["chunk"] == 1);
  CHECK(Json::parse(lines[2])["chunk"] == 2);
  std::filesystem::remove(path);

  // A file that does not exist yet is created.
  const std::string fresh = TempPath("fresh.jsonl");
  {
    auto sink = recap::NewJsonlFileSink(fresh);
    REQUIRE(sink.ok());
  }
  CHECK(std::filesystem::exists(fresh));
  std::filesystem::remove(fresh);
}

TEST_CASE("R10 file sink: an unwritable path is a clear kIOError") {
  const std::string path = TempPath("no-such-dir") + "/events.jsonl";
  auto sink = recap::NewJsonlFileSink(path);
  REQUIRE_FALSE(sink.ok());
  CHECK(sink.status().code() == StatusCode::kIOError);
  CHECK(sink.status().message() ==
        "cannot open the event log \"" + path +
            "\" for appending: No such file or directory. Check that its directory exists and "
            "is writable.");

  // A directory is not a file.
  auto dir = recap::NewJsonlFileSink(std::filesystem::temp_directory_path().string());
  REQUIRE_FALSE(dir.ok());
  CHECK(dir.status().code() == StatusCode::kIOError);
  CHECK(dir.status().message().find("Is a directory") != std::string::npos);
}

TEST_CASE("R15.2 R15.5 compaction_discarded, and background work says \"background\": true last") {
  auto sink = std::make_shared<RecordingSink>();
  EventEmitter emitter({sink});
  emitter.Emit(recap::EventType::kCompactionDiscarded, "s",
               recap::internal::InBackground(
                   recap::internal::CompactionDiscardedFields("auto", 12, "a call was recovered")));
  emitter.Emit(
      recap::EventType::kCompactionStarted, "s",
      recap::internal::InBackground(recap::internal::CompactionStartedFields("auto", 4000, 1000)));
  REQUIRE(sink->events().size() == 2);
  const Json discarded = Json::parse(sink->events()[0].json);
  CHECK(discarded["type"] == "compaction_discarded");
  CHECK(discarded["reason"] == "auto");
  CHECK(discarded["messages"] == 12);
  CHECK(discarded["why"] == "a call was recovered");
  CHECK(discarded.back() == true);  // "background", the last member
  const Json started = Json::parse(sink->events()[1].json);
  CHECK(started["background"] == true);
  CHECK(std::prev(started.end()).key() == "background");
}
