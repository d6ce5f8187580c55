// RecordingSink: an EventSink that keeps every event it receives, for tests to inspect
// (spdlog's test_sink as model). Thread-safe: recap may emit from several threads.
//
//   auto sink = std::make_shared<recap::testing::RecordingSink>();
//   ... run recap with {sink} ...
//   CHECK(sink->types() == std::vector<std::string>{"compaction_started", "compaction_completed"});
//   CHECK(sink->Parsed(1)["summarized"]["messages"] == 12);
#ifndef RECAP_TESTS_SUPPORT_RECORDING_SINK_H_
#define RECAP_TESTS_SUPPORT_RECORDING_SINK_H_

#include <cstddef>
#include <mutex>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "recap/events.h"

namespace recap {
namespace testing {

class RecordingSink : public EventSink {
 public:
  void OnEvent(const Event& event) override;

  std::vector<Event> events() const;
  std::size_t size() const;
  // The types in order, e.g. {"compaction_started", "compaction_completed"}.
  std::vector<std::string> types() const;
  // Event i's JSON, parsed; throws std::out_of_range for a missing event and nlohmann's
  // parse_error for one that is not JSON (both fail the test with a message).
  nlohmann::json Parsed(std::size_t i) const;
  // Every event of one type, parsed, in order.
  std::vector<nlohmann::json> OfType(const std::string& type) const;
  void Clear();

 private:
  mutable std::mutex mu_;
  std::vector<Event> events_;
};

}  // namespace testing
}  // namespace recap

#endif  // RECAP_TESTS_SUPPORT_RECORDING_SINK_H_
