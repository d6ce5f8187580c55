// Status and Result<T>: the error type every later component reports through.
#include <optional>
#include <random>
#include <set>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include "recap/status.h"
#include "recap/version.h"

using recap::Remedy;
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
  CHECK(std::string(recap::Version()) == RECAP_VERSION_STRING);
}

TEST_CASE("issue 42 version: RECAP_VERSION and the string say the numbers of the parts") {
  static_assert(RECAP_VERSION ==
                    RECAP_VERSION_MAJOR * 10000 + RECAP_VERSION_MINOR * 100 + RECAP_VERSION_PATCH,
                "RECAP_VERSION is MAJOR * 10000 + MINOR * 100 + PATCH");
  CHECK(std::string(RECAP_VERSION_STRING) == std::to_string(RECAP_VERSION_MAJOR) + "." +
                                                 std::to_string(RECAP_VERSION_MINOR) + "." +
                                                 std::to_string(RECAP_VERSION_PATCH));
#if RECAP_VERSION < 100
  FAIL("RECAP_VERSION is usable in #if and at least 0.1.0");
#endif
}

TEST_CASE("R16 Status: a remedy is recorded as data, moved by WithContext, said in other words") {
  const std::string text = "the database stayed locked for longer than busy_timeout_ms (200 ms)";
  const std::size_t at = text.find("busy_timeout_ms");
  Status s = Status::Unavailable(text).WithRemedy(
      Remedy{"sqlite.busy_timeout_ms", "200", at, text.size() - at});
  REQUIRE(s.remedies().size() == 1);
  CHECK(s.message() == text);  // the C++ words stay in the message
  CHECK(s.remedies()[0].value == "200");
  // Said in another interface's words, without matching the sentence.
  const auto words = [](const Remedy& r) -> std::optional<std::string> {
    if (r.id == "sqlite.busy_timeout_ms") return "the command waits (" + r.value + " ms)";
    return std::nullopt;
  };
  CHECK(s.Rendered(words) ==
        "the database stayed locked for longer than the command waits (200 ms)");
  // An interface without words for it keeps the C++ ones.
  CHECK(s.Rendered([](const Remedy&) { return std::optional<std::string>(); }) == text);
  // Context moves the remedy along; copies are deep.
  const Status c = s.WithContext("appending to session \"a\"");
  REQUIRE(c.remedies().size() == 1);
  CHECK(c.message().substr(c.remedies()[0].offset, c.remedies()[0].size) ==
        "busy_timeout_ms (200 ms)");
  CHECK(c.Rendered(words) ==
        "appending to session \"a\": the database stayed locked for longer than the command "
        "waits (200 ms)");
  CHECK(s.remedies()[0].offset == at);
  // Outside the message, or over one already recorded: ignored.
  CHECK(s.WithRemedy(Remedy{"x", "", text.size() - 2, 5}).remedies().size() == 1);
  CHECK(s.WithRemedy(Remedy{"x", "", at + 3, 2}).remedies().size() == 1);
  CHECK(s.WithRemedy(Remedy{"x", "", 0, 3}).remedies().size() == 2);
  CHECK(Status().WithRemedy(Remedy{"x", "", 0, 0}).remedies().empty());
  CHECK(Status().Rendered(words).empty());
}

TEST_CASE(
    "R16 Status: Rendered splices each remedy's words and keeps the rest, on generated messages") {
  // Property: for random messages and random non-overlapping remedies, rendering with the
  // remedies' own text gives the message back, and rendering some of them as "<id>" gives the
  // splice done by hand.
  const unsigned seed = std::random_device{}();
  INFO("seed " << seed);
  std::mt19937 gen(seed);
  for (int round = 0; round < 2000; ++round) {
    const std::size_t size = gen() % 60;
    std::string text;
    for (std::size_t i = 0; i < size; ++i) text += static_cast<char>('a' + gen() % 26);
    Status s = Status::Internal(text);
    if (text.empty()) s = Status::Internal("");
    std::vector<Remedy> given;
    std::size_t at = 0;
    while (at < text.size() && gen() % 3 != 0) {
      const std::size_t offset = at + gen() % (text.size() - at);
      const std::size_t len = gen() % (text.size() - offset + 1);
      given.push_back(Remedy{"r" + std::to_string(given.size()), "", offset, len});
      at = offset + len + (len == 0 ? 1 : 0);
    }
    for (const Remedy& r : given) s = s.WithRemedy(r);
    REQUIRE(s.remedies().size() == given.size());
    CHECK(s.Rendered([&](const Remedy& r) -> std::optional<std::string> {
      return text.substr(r.offset, r.size);
    }) == text);
    std::string expected;
    std::size_t from = 0;
    for (const Remedy& r : given) {
      const bool said = (r.id.back() - '0') % 2 == 0;
      if (!said) continue;
      expected += text.substr(from, r.offset - from) + "<" + r.id + ">";
      from = r.offset + r.size;
    }
    expected += text.substr(from);
    CHECK(s.Rendered([](const Remedy& r) -> std::optional<std::string> {
      if ((r.id.back() - '0') % 2 != 0) return std::nullopt;
      return "<" + r.id + ">";
    }) == expected);
  }
}

TEST_CASE(
    "R16 Status: InWords keeps each remedy where the new words say it, on generated messages") {
  // Property: InWords(words) says what Rendered(words) says, keeps every remedy with its id
  // and value, each spanning the words it was said in (or its old text); rendered again, the
  // words of a second interface replace the first's exactly.
  const unsigned seed = std::random_device{}();
  INFO("seed " << seed);
  std::mt19937 gen(seed);
  for (int round = 0; round < 2000; ++round) {
    std::string text;
    const std::size_t size = 1 + gen() % 60;
    for (std::size_t i = 0; i < size; ++i) text += static_cast<char>('a' + gen() % 26);
    Status s = Status::Unavailable(text);
    std::size_t at = 0;
    int n = 0;
    while (at < text.size() && gen() % 3 != 0) {
      const std::size_t offset = at + gen() % (text.size() - at);
      const std::size_t len = gen() % (text.size() - offset + 1);
      s = s.WithRemedy(Remedy{"r" + std::to_string(n++), std::to_string(gen() % 100), offset, len});
      at = offset + len + (len == 0 ? 1 : 0);
    }
    // The first interface says the even ones as "<id=value>" and the multiples of 3 as nothing.
    const auto first = [](const Remedy& r) -> std::optional<std::string> {
      const int k = std::stoi(r.id.substr(1));
      if (k % 3 == 0) return std::string();
      if (k % 2 == 0) return "<" + r.id + "=" + r.value + ">";
      return std::nullopt;
    };
    const Status said = s.InWords(first);
    CHECK(said.code() == s.code());
    CHECK(said.message() == s.Rendered(first));
    REQUIRE(said.remedies().size() == s.remedies().size());
    for (std::size_t i = 0; i < said.remedies().size(); ++i) {
      const Remedy& was = s.remedies()[i];
      const Remedy& now = said.remedies()[i];
      CHECK(now.id == was.id);
      CHECK(now.value == was.value);
      const std::string spanned = said.message().substr(now.offset, now.size);
      CHECK(spanned == first(was).value_or(text.substr(was.offset, was.size)));
    }
    // A second interface, from the first's message and remedies alone.
    const auto second = [](const Remedy& r) -> std::optional<std::string> {
      return "[" + r.id + "]";
    };
    std::string expected;
    std::size_t from = 0;
    for (const Remedy& r : s.remedies()) {
      expected += text.substr(from, r.offset - from) + "[" + r.id + "]";
      from = r.offset + r.size;
    }
    expected += text.substr(from);
    CHECK(said.Rendered(second) == expected);
  }
  CHECK(Status().InWords(nullptr).ok());
}
