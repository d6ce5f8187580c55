#include "recap/status.h"

#include <cstdio>

namespace recap {
inline namespace v0 {

const char* StatusCodeName(StatusCode code) noexcept {
  switch (code) {
    case StatusCode::kOk: return "ok";
    case StatusCode::kInvalidArgument: return "invalid_argument";
    case StatusCode::kNotFound: return "not_found";
    case StatusCode::kConflict: return "conflict";
    case StatusCode::kCorruption: return "corruption";
    case StatusCode::kIOError: return "io_error";
    case StatusCode::kUnavailable: return "unavailable";
    case StatusCode::kDeadlineExceeded: return "deadline_exceeded";
    case StatusCode::kCancelled: return "cancelled";
    case StatusCode::kContextBudgetExceeded: return "context_budget_exceeded";
    case StatusCode::kFailedPrecondition: return "failed_precondition";
    case StatusCode::kResourceExhausted: return "resource_exhausted";
    case StatusCode::kInternal: return "internal";
  }
  return "unknown";
}

Status::Status(StatusCode code, std::string message) {
  // An "OK with a message" would be ambiguous; OK never allocates and never has a message.
  if (code != StatusCode::kOk) state_ = std::make_unique<State>(State{code, std::move(message)});
}

Status::Status(const Status& other)
    : state_(other.state_ ? std::make_unique<State>(*other.state_) : nullptr) {}

Status& Status::operator=(const Status& other) {
  if (this != &other) state_ = other.state_ ? std::make_unique<State>(*other.state_) : nullptr;
  return *this;
}

const std::string& Status::message() const noexcept {
  static const std::string kEmpty;
  return state_ ? state_->message : kEmpty;
}

std::string Status::ToString() const {
  if (ok()) return "ok";
  std::string s = StatusCodeName(code());
  s += ": ";
  s += state_->message;
  return s;
}

Status Status::WithContext(const std::string& context) const {
  if (ok()) return Status();
  return Status(code(), context + ": " + state_->message);
}

std::ostream& operator<<(std::ostream& os, const Status& s) { return os << s.ToString(); }

namespace internal {
void DieOnBadResultAccess(const Status& s) noexcept {
  std::fprintf(stderr, "recap: value() called on a failed Result: %s\n", s.ToString().c_str());
  std::abort();
}
}  // namespace internal

}  // namespace v0
}  // namespace recap
