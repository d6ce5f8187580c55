/// @file
/// recap — Status and Result<T>: how every fallible call reports what went wrong.
///
/// A Status is either OK or carries a code (what kind of failure, for programs to branch on)
/// and a message (what went wrong and what to do about it, for people to read). Messages are
/// written as whole sentences that name the offending input — a JSON path, a key and its
/// allowed range, a file — and, where there is one, the next step.
///
/// `Result<T>` holds either a T or a non-OK Status. Accessing the value of a failed Result is a
/// programming error and aborts in every build mode (it never returns garbage).
///
/// recap never throws across its API for expected failures (bad input, I/O, conflicts); the
/// only exceptions that can escape are std::bad_alloc and those thrown by host callbacks.
///
/// Both are [[nodiscard]]: a call whose Status is dropped is a warning. To ignore one on purpose,
/// say so: `(void)store.Append(...);  // best effort: ...`.
///
/// A message may name what the caller can change to succeed — an option of the C++ API, or a
/// remedy said in a few words — as a Remedy recorded beside the text (Status::remedies): the
/// message says it in the C++ API's words, and another interface (the recap command, the
/// proxy) says it in its own with Status::Rendered instead of editing the sentence.
/// docs/errors.md lists the remedies recap names.
///
/// RECAP_RETURN_IF_ERROR(expr) returns the Status of `expr` (a Status or a `Result<T>`) from the
/// enclosing function when it is not OK; that function returns a Status or a `Result<U>`.
///
/// Thread safety: Status and Result are values; distinct objects may be used concurrently.
#ifndef RECAP_STATUS_H_
#define RECAP_STATUS_H_

#include <cstddef>
#include <cstdlib>
#include <functional>
#include <memory>
#include <optional>
#include <ostream>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "recap/export.h"

namespace recap {
inline namespace v0 {

/// What kind of failure a Status reports, for programs to branch on. The numbers are stable:
/// the C API's RECAP_* codes are the same.
enum class StatusCode : int {
  /// Success: no failure.
  kOk = 0,
  /// The caller passed something malformed: bad JSON, an unknown role, a value out of range.
  kInvalidArgument = 1,
  /// A named thing (a session, a message, a file) does not exist.
  kNotFound = 2,
  /// Another writer changed the session first (optimistic concurrency); reload and retry.
  kConflict = 3,
  /// Stored data is damaged or was written by a newer version of recap.
  kCorruption = 4,
  /// The operating system refused an operation (open, write, fsync, a full disk).
  kIOError = 5,
  /// A remote service could not be reached or answered with an error that may pass.
  kUnavailable = 6,
  /// A deadline passed before the work finished.
  kDeadlineExceeded = 7,
  /// The caller cancelled the work.
  kCancelled = 8,
  /// The conversation cannot be made to fit the configured limits (SPEC R7).
  kContextBudgetExceeded = 9,
  /// The session is not in a state that allows the operation (e.g. uncertain tool results).
  kFailedPrecondition = 10,
  /// A configured limit was hit (e.g. the summarizer's output budget).
  kResourceExhausted = 11,
  /// A bug in recap. Please report it with the message.
  kInternal = 12,
};

/// A short lower-case name for a code, e.g. "invalid_argument".
RECAP_EXPORT const char* StatusCodeName(StatusCode code) noexcept;

/// A part of a Status's message that names what the caller may change: `id` says what (an
/// option, e.g. "HttpProviderOptions.timeout_ms", or a remedy, e.g. "sqlite.wait_longer";
/// docs/errors.md lists them), `value` a figure it carries when it has one (e.g. the
/// milliseconds waited), and [offset, offset + size) where message() says it, in bytes.
struct Remedy {
  std::string id;          ///< what the caller may change: an option or a remedy's name
  std::string value;       ///< the figure it carries, or empty
  std::size_t offset = 0;  ///< where message() says it: its first byte
  std::size_t size = 0;    ///< and its length in bytes
};

/// OK, or a code and a message saying what went wrong and what to do (see above).
// (Exported member by member: RECAP_EXPORT cannot stand beside [[nodiscard]] on the class.)
class [[nodiscard]] Status {
 public:
  /// An OK status. Cheap: no allocation.
  Status() noexcept = default;
  /// A status with `code` and `message`; kOk makes an OK status (its message dropped).
  RECAP_EXPORT Status(StatusCode code, std::string message);

  /// A copy: the code, the message and the remedies.
  RECAP_EXPORT Status(const Status& other);
  /// Copies `other`'s code, message and remedies.
  RECAP_EXPORT Status& operator=(const Status& other);
  /// Takes `other`'s state; `other` is left OK.
  Status(Status&& other) noexcept = default;
  /// Takes `other`'s state; `other` is left OK.
  Status& operator=(Status&& other) noexcept = default;
  ~Status() = default;

  /// An OK status, as Status() makes it.
  static Status OK() noexcept { return Status(); }
  /// A status with StatusCode::kInvalidArgument and the message `msg`.
  static Status InvalidArgument(std::string msg) {
    return {StatusCode::kInvalidArgument, std::move(msg)};
  }
  /// A status with StatusCode::kNotFound and the message `msg`.
  static Status NotFound(std::string msg) { return {StatusCode::kNotFound, std::move(msg)}; }
  /// A status with StatusCode::kConflict and the message `msg`.
  static Status Conflict(std::string msg) { return {StatusCode::kConflict, std::move(msg)}; }
  /// A status with StatusCode::kCorruption and the message `msg`.
  static Status Corruption(std::string msg) { return {StatusCode::kCorruption, std::move(msg)}; }
  /// A status with StatusCode::kIOError and the message `msg`.
  static Status IOError(std::string msg) { return {StatusCode::kIOError, std::move(msg)}; }
  /// A status with StatusCode::kUnavailable and the message `msg`.
  static Status Unavailable(std::string msg) { return {StatusCode::kUnavailable, std::move(msg)}; }
  /// A status with StatusCode::kDeadlineExceeded and the message `msg`.
  static Status DeadlineExceeded(std::string msg) {
    return {StatusCode::kDeadlineExceeded, std::move(msg)};
  }
  /// A status with StatusCode::kCancelled and the message `msg`.
  static Status Cancelled(std::string msg) { return {StatusCode::kCancelled, std::move(msg)}; }
  /// A status with StatusCode::kContextBudgetExceeded and the message `msg`.
  static Status ContextBudgetExceeded(std::string msg) {
    return {StatusCode::kContextBudgetExceeded, std::move(msg)};
  }
  /// A status with StatusCode::kFailedPrecondition and the message `msg`.
  static Status FailedPrecondition(std::string msg) {
    return {StatusCode::kFailedPrecondition, std::move(msg)};
  }
  /// A status with StatusCode::kResourceExhausted and the message `msg`.
  static Status ResourceExhausted(std::string msg) {
    return {StatusCode::kResourceExhausted, std::move(msg)};
  }
  /// A status with StatusCode::kInternal and the message `msg`.
  static Status Internal(std::string msg) { return {StatusCode::kInternal, std::move(msg)}; }

  /// True for an OK status.
  bool ok() const noexcept { return state_ == nullptr; }
  /// The code; kOk for an OK status.
  StatusCode code() const noexcept { return state_ ? state_->code : StatusCode::kOk; }
  /// The message for people; empty for OK.
  RECAP_EXPORT const std::string& message() const noexcept;

  /// "invalid_argument: <message>", or "ok".
  RECAP_EXPORT std::string ToString() const;

  /// Returns a copy whose message is "<context>: <message>" (its remedies moved along); OK
  /// stays OK.
  RECAP_EXPORT Status WithContext(const std::string& context) const;

  /// The remedies message() names, in the order it says them (none overlap).
  RECAP_EXPORT const std::vector<Remedy>& remedies() const noexcept;

  /// A copy that also records `remedy`. Ignored (the copy is returned as it is) when OK, when
  /// the part lies outside the message, or when it overlaps a remedy recorded already.
  RECAP_EXPORT Status WithRemedy(Remedy remedy) const;

  /// message() with each remedy for which `words` returns a text said in that text instead;
  /// the rest as it is. How an interface other than C++ states recap's errors in its own words.
  RECAP_EXPORT std::string Rendered(
      const std::function<std::optional<std::string>(const Remedy&)>& words) const;

  /// The same as a Status: the code, the Rendered message, and every remedy kept, each where
  /// the new message says it (in the words given, or as it was). An interface that hands the
  /// remedies on (the C API does, to the languages built on it) renders with this, so that the
  /// next one can say them in its own words again.
  RECAP_EXPORT Status
  InWords(const std::function<std::optional<std::string>(const Remedy&)>& words) const;

  /// Equal when the codes and the messages are (the remedies are not compared).
  friend bool operator==(const Status& a, const Status& b) noexcept {
    return a.code() == b.code() && a.message() == b.message();
  }
  /// Not operator==.
  friend bool operator!=(const Status& a, const Status& b) noexcept { return !(a == b); }

 private:
  struct State {
    StatusCode code;
    std::string message;
    std::vector<Remedy> remedies;  // by offset
  };
  // nullptr means OK, so the success path never allocates.
  std::unique_ptr<State> state_;
};

/// Writes s.ToString() to `os`.
RECAP_EXPORT std::ostream& operator<<(std::ostream& os, const Status& s);

namespace internal {
[[noreturn]] RECAP_EXPORT void DieOnBadResultAccess(const Status& s) noexcept;
}  // namespace internal

/// Either a value of type T or the Status that explains why there is none.
template <typename T>
class [[nodiscard]] Result {
  static_assert(!std::is_same<std::decay_t<T>, Status>::value, "Result<Status> is meaningless");

 public:
  /// A failed result. Passing an OK status is a programming error: it becomes kInternal.
  Result(Status status) : status_(std::move(status)) {  // NOLINT(google-explicit-constructor)
    if (status_.ok())
      status_ = Status::Internal("Result constructed from an OK Status without a value");
  }
  /// A successful result holding `value`.
  Result(T value) : value_(std::move(value)) {}  // NOLINT(google-explicit-constructor)

  /// True when the result holds a value.
  bool ok() const noexcept { return status_.ok(); }
  /// Why there is no value; OK when there is one.
  const Status& status() const noexcept { return status_; }

  /// The value. On a failed result: prints the status and aborts, in every build mode.
  T& value() & {
    Check();
    return *value_;
  }
  /// The value. On a failed result: prints the status and aborts, in every build mode.
  const T& value() const& {
    Check();
    return *value_;
  }
  /// The value, moved out. On a failed result: prints the status and aborts.
  T&& value() && {
    Check();
    return std::move(*value_);
  }

  /// value().
  T& operator*() & { return value(); }
  /// value().
  const T& operator*() const& { return value(); }
  /// The value, moved out, as std::move(*this).value().
  T&& operator*() && { return std::move(*this).value(); }
  /// &value().
  T* operator->() { return &value(); }
  /// &value().
  const T* operator->() const { return &value(); }

 private:
  void Check() const {
    if (!status_.ok()) internal::DieOnBadResultAccess(status_);
  }
  Status status_;
  std::optional<T> value_;
};

namespace internal {
inline const Status& StatusOf(const Status& s) noexcept { return s; }
template <typename T>
const Status& StatusOf(const Result<T>& r) noexcept {
  return r.status();
}
}  // namespace internal

}  // namespace v0
}  // namespace recap

/// Returns the Status of `expr` (a Status or a `Result<T>`, evaluated once) when it is not OK.
#define RECAP_RETURN_IF_ERROR(expr)                                \
  do {                                                             \
    const auto& recap_status_or_result_ = (expr);                  \
    if (!recap_status_or_result_.ok()) {                           \
      return ::recap::internal::StatusOf(recap_status_or_result_); \
    }                                                              \
  } while (false)

#endif  // RECAP_STATUS_H_
