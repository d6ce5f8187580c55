// recap CLI — progress lines on stderr (progress.h).
#include "progress.h"

#include <unistd.h>

#include <cstdio>
#include <cstdlib>

#include <nlohmann/json.hpp>

namespace recap_cli {
namespace {

std::mutex g_active_mu;
Progress* g_active = nullptr;

std::chrono::milliseconds DelayFromEnvironment() {
  const char* text = std::getenv("RECAP_PROGRESS_DELAY_MS");
  if (text != nullptr && *text != '\0') {
    char* end = nullptr;
    const long long ms = std::strtoll(text, &end, 10);
    if (end != nullptr && *end == '\0' && ms >= 0) return std::chrono::milliseconds(ms);
  }
  return std::chrono::milliseconds(1000);
}

class ProgressSink : public recap::EventSink {
 public:
  ProgressSink(Progress* progress, std::shared_ptr<recap::EventSink> next)
      : progress_(progress), next_(std::move(next)) {}

  void OnEvent(const recap::Event& event) override {
    if (event.type == recap::EventTypeName(recap::EventType::kCompactionStarted)) {
      progress_->Update("summarizing");
    } else if (event.type == recap::EventTypeName(recap::EventType::kCompactionProgress)) {
      const auto doc = nlohmann::json::parse(event.json, nullptr, false);
      if (doc.is_object() && doc.contains("chunk") && doc.contains("chunks")) {
        progress_->Update("summarizing: chunk " + doc["chunk"].dump() + " of " +
                          doc["chunks"].dump() + " done");
      }
    } else if (event.type == recap::EventTypeName(recap::EventType::kCompactionCompleted) ||
               event.type == recap::EventTypeName(recap::EventType::kCompactionFailed)) {
      progress_->Update("writing the checkpoint");
    }
    if (next_) next_->OnEvent(event);
  }

 private:
  Progress* progress_;
  std::shared_ptr<recap::EventSink> next_;
};

}  // namespace

bool Progress::Enabled() { return ::isatty(STDERR_FILENO) == 1; }

Progress::Progress(std::string what)
    : what_(std::move(what)),
      start_(std::chrono::steady_clock::now()),
      delay_(DelayFromEnvironment()),
      enabled_(Enabled()) {
  if (enabled_) thread_ = std::thread([this] { Run(); });
  std::lock_guard<std::mutex> lock(g_active_mu);
  g_active = this;
}

Progress::~Progress() {
  Finish();
  std::lock_guard<std::mutex> lock(g_active_mu);
  if (g_active == this) g_active = nullptr;
}

void FinishActiveProgress() {
  std::lock_guard<std::mutex> lock(g_active_mu);
  if (g_active != nullptr) g_active->Finish();
}

void SetActiveProgressStep(const std::string& step) {
  std::lock_guard<std::mutex> lock(g_active_mu);
  if (g_active != nullptr) g_active->Update(step);
}

void Progress::Update(const std::string& step) {
  std::lock_guard<std::mutex> lock(mu_);
  step_ = step;
  if (enabled_ && !done_ && std::chrono::steady_clock::now() - start_ >= delay_) DrawLocked();
}

void Progress::Run() {
  std::unique_lock<std::mutex> lock(mu_);
  while (!done_) {
    const auto now = std::chrono::steady_clock::now();
    if (now - start_ >= delay_) {
      DrawLocked();
      wake_.wait_for(lock, std::chrono::milliseconds(250));
    } else {
      wake_.wait_until(lock, start_ + delay_);
    }
  }
}

void Progress::DrawLocked() {
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  std::fprintf(stderr, "\r\033[Krecap: %s%s%s (%.0f s)", what_.c_str(), step_.empty() ? "" : ": ",
               step_.c_str(), seconds);
  std::fflush(stderr);
  shown_ = true;
}

void Progress::Finish() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    done_ = true;
  }
  wake_.notify_all();
  if (thread_.joinable()) thread_.join();
  std::lock_guard<std::mutex> lock(mu_);
  if (!shown_) return;
  std::fputs("\r\033[K", stderr);
  std::fflush(stderr);
  shown_ = false;
}

std::shared_ptr<recap::EventSink> NewProgressSink(Progress* progress,
                                                  std::shared_ptr<recap::EventSink> next) {
  return std::make_shared<ProgressSink>(progress, std::move(next));
}

}  // namespace recap_cli
