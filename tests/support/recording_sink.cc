#include "support/recording_sink.h"

#include <stdexcept>

namespace recap {
namespace testing {

void RecordingSink::OnEvent(const Event& event) {
  std::lock_guard<std::mutex> lock(mu_);
  events_.push_back(event);
}

std::vector<Event> RecordingSink::events() const {
  std::lock_guard<std::mutex> lock(mu_);
  return events_;
}

std::size_t RecordingSink::size() const {
  std::lock_guard<std::mutex> lock(mu_);
  return events_.size();
}

std::vector<std::string> RecordingSink::types() const {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<std::string> out;
  out.reserve(events_.size());
  for (const Event& e : events_) out.push_back(e.type);
  return out;
}

nlohmann::json RecordingSink::Parsed(std::size_t i) const {
  std::lock_guard<std::mutex> lock(mu_);
  if (i >= events_.size()) {
    throw std::out_of_range("RecordingSink::Parsed(" + std::to_string(i) + "): only " +
                            std::to_string(events_.size()) + " events were recorded");
  }
  return nlohmann::json::parse(events_[i].json);
}

std::vector<nlohmann::json> RecordingSink::OfType(const std::string& type) const {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<nlohmann::json> out;
  for (const Event& e : events_) {
    if (e.type == type) out.push_back(nlohmann::json::parse(e.json));
  }
  return out;
}

void RecordingSink::Clear() {
  std::lock_guard<std::mutex> lock(mu_);
  events_.clear();
}

}  // namespace testing
}  // namespace recap
