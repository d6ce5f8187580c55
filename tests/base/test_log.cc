// Logging: silent by default, and the host can take the records.
#include <mutex>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include "recap/log.h"
#include "recap/safe_boundary.h"

using namespace recap;

namespace {
struct Captured {
  std::mutex mu;
  std::vector<std::pair<LogLevel, std::string>> records;
};
Transcript TwoTurns() {
  return Transcript({Message::UserText("a"), Message::AssistantText("b"), Message::UserText("c"),
                     Message::AssistantText("d")});
}
}  // namespace

TEST_CASE("log: silent by default, records reach the host's handler once a level is set") {
  auto captured = std::make_shared<Captured>();
  auto handler = [captured](LogLevel level, std::string_view msg) {
    std::lock_guard<std::mutex> lock(captured->mu);
    captured->records.emplace_back(level, std::string(msg));
  };
  // Default level: off. Install the handler with "off" to prove nothing arrives.
  CHECK(GetLogLevel() == LogLevel::kOff);
  SetLogHandler(LogLevel::kOff, handler);
  (void)FindCut(TwoTurns(), CutOptions{});
  CHECK(captured->records.empty());

  SetLogLevel(LogLevel::kDebug);
  CHECK(GetLogLevel() == LogLevel::kDebug);
  (void)FindCut(TwoTurns(), CutOptions{});
  REQUIRE(captured->records.size() == 1);
  CHECK(captured->records[0].first == LogLevel::kDebug);
  CHECK(captured->records[0].second.find("cut at message 2 of 4") != std::string::npos);

  // Records below the level are dropped.
  SetLogLevel(LogLevel::kInfo);
  (void)FindCut(TwoTurns(), CutOptions{});
  CHECK(captured->records.size() == 1);

  SetLogHandler(LogLevel::kOff, nullptr);
  CHECK(std::string(LogLevelName(LogLevel::kWarn)) == "warn");
}

TEST_CASE("log: a host's own component writes through Log, at the level the host set") {
  auto captured = std::make_shared<Captured>();
  SetLogHandler(LogLevel::kWarn, [captured](LogLevel level, std::string_view msg) {
    std::lock_guard<std::mutex> lock(captured->mu);
    captured->records.emplace_back(level, std::string(msg));
  });
  Log(LogLevel::kInfo, "below the level: dropped");
  Log(LogLevel::kError, "my store: disk full");
  Log(LogLevel::kOff, "kOff is not a record");
  REQUIRE(captured->records.size() == 1);
  CHECK(captured->records[0].first == LogLevel::kError);
  CHECK(captured->records[0].second == "my store: disk full");

  SetLogLevel(LogLevel::kOff);
  Log(LogLevel::kError, "off: dropped");
  CHECK(captured->records.size() == 1);
  SetLogHandler(LogLevel::kOff, nullptr);
}
