#include "recap/status.h"

#include <algorithm>
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
  if (code != StatusCode::kOk) {
    state_ = std::make_unique<State>(State{code, std::move(message), {}});
  }
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
  Status out(code(), context + ": " + state_->message);
  out.state_->remedies = state_->remedies;
  for (Remedy& r : out.state_->remedies) r.offset += context.size() + 2;
  return out;
}

const std::vector<Remedy>& Status::remedies() const noexcept {
  static const std::vector<Remedy> kNone;
  return state_ ? state_->remedies : kNone;
}

Status Status::WithRemedy(Remedy remedy) const {
  Status out(*this);
  if (ok()) return out;
  const std::size_t size = state_->message.size();
  if (remedy.offset > size || remedy.size > size - remedy.offset) return out;
  std::vector<Remedy>& all = out.state_->remedies;
  auto at = std::lower_bound(all.begin(), all.end(), remedy.offset,
                             [](const Remedy& r, std::size_t offset) { return r.offset < offset; });
  if (at != all.end() && at->offset < remedy.offset + remedy.size) return out;
  if (at != all.begin() && std::prev(at)->offset + std::prev(at)->size > remedy.offset) {
    return out;
  }
  all.insert(at, std::move(remedy));
  return out;
}

std::string Status::Rendered(
    const std::function<std::optional<std::string>(const Remedy&)>& words) const {
  if (ok()) return std::string();
  return InWords(words).message();
}

Status Status::InWords(
    const std::function<std::optional<std::string>(const Remedy&)>& words) const {
  if (ok()) return Status();
  const std::string& m = state_->message;
  std::string out;
  out.reserve(m.size());
  std::vector<Remedy> kept;
  kept.reserve(state_->remedies.size());
  std::size_t at = 0;
  for (const Remedy& r : state_->remedies) {
    std::optional<std::string> said = words ? words(r) : std::nullopt;
    out.append(m, at, r.offset - at);
    Remedy moved = r;
    moved.offset = out.size();
    if (said) {
      out += *said;
      moved.size = said->size();
    } else {
      out.append(m, r.offset, r.size);
    }
    at = r.offset + r.size;
    kept.push_back(std::move(moved));
  }
  out.append(m, at, std::string::npos);
  Status s(code(), std::move(out));
  s.state_->remedies = std::move(kept);  // in order, none overlapping, as they were
  return s;
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
