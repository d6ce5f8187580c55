// Status and Result<T>: the error type every later component reports through.
#include <set>
#include <string>

#include <catch2/catch.hpp>

#include "recap/status.h"
#include "recap/version.h"

using recap::Result;
using recap::Status;
using recap::StatusCode;

TEST_CASE("Status: OK carries no message and prints as ok") {
  Status s;
  CHECK(s.ok());
  CHECK(s.code() == StatusCode::kOk);
  CHECK(s.message().empty());
  CHECK(s.ToString() == "ok");
  CHECK(Status::OK() == s);
}

TEST_CASE("Status: a failure keeps its code and message and adds context") {
  Status s = Status::InvalidArgument("compaction.threshold is 2; allowed range 0.1-0.99");
  CHECK_FALSE(s.ok());
  CHECK(s.code() == StatusCode::kInvalidArgument);
  CHECK(s.ToString() == "invalid_argument: compaction.threshold is 2; allowed range 0.1-0.99");
  Status c = s.WithContext("config.json");
  CHECK(c.code() == StatusCode::kInvalidArgument);
  CHECK(c.message() == "config.json: compaction.threshold is 2; allowed range 0.1-0.99");
  CHECK(Status().WithContext("x").ok());
  // Copies are deep: changing the copy's context leaves the original alone.
  Status copy = s;
  copy = copy.WithContext("more");
  CHECK(s.message() == "compaction.threshold is 2; allowed range 0.1-0.99");
}

TEST_CASE("Status: constructing with kOk never yields a message") {
  Status s(StatusCode::kOk, "ignored");
  CHECK(s.ok());
  CHECK(s.message().empty());
}

TEST_CASE("Status: every code has a distinct name") {
  const StatusCode codes[] = {StatusCode::kOk,
                              StatusCode::kInvalidArgument,
                              StatusCode::kNotFound,
                              StatusCode::kConflict,
                              StatusCode::kCorruption,
                              StatusCode::kIOError,
                              StatusCode::kUnavailable,
                              StatusCode::kDeadlineExceeded,
                              StatusCode::kCancelled,
                              StatusCode::kContextBudgetExceeded,
                              StatusCode::kFailedPrecondition,
                              StatusCode::kResourceExhausted,
                              StatusCode::kInternal};
  std::set<std::string> names;
  for (auto c : codes) names.insert(recap::StatusCodeName(c));
  CHECK(names.size() == sizeof(codes) / sizeof(codes[0]));
  CHECK(std::string(recap::StatusCodeName(StatusCode::kConflict)) == "conflict");
}

TEST_CASE("Result: holds a value or the reason there is none") {
  Result<int> good(42);
  REQUIRE(good.ok());
  CHECK(*good == 42);
  CHECK(good.value() == 42);

  Result<std::string> bad(Status::NotFound("session 'abc' does not exist"));
  CHECK_FALSE(bad.ok());
  CHECK(bad.status().code() == StatusCode::kNotFound);

  // A Result built from an OK status without a value is a bug, reported as kInternal.
  Result<int> odd{Status::OK()};
  CHECK_FALSE(odd.ok());
  CHECK(odd.status().code() == StatusCode::kInternal);

  Result<std::string> moved(std::string("payload"));
  std::string out = std::move(moved).value();
  CHECK(out == "payload");
}

TEST_CASE("version: the library reports the version of its headers") {
  CHECK(std::string(recap::LibraryVersion()) == RECAP_VERSION_STRING);
}
