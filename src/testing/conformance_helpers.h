// Private to the conformance suite: what its checks share — Catch2 checks of a Result, the
// messages they write (User, Assistant, Summary, TwoCallsOneId) and read back (Print, Ids,
// Printed), a store's whole state for one session (Snapshot, Take, RequireSame), filling a
// session (Fill, CountingSource) and reading a history (FindEntry, RequireIncreasingSeq).
#ifndef RECAP_SRC_TESTING_CONFORMANCE_HELPERS_H_
#define RECAP_SRC_TESTING_CONFORMANCE_HELPERS_H_

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include <catch2/catch.hpp>

#include "recap/session_store.h"

namespace recap {
namespace testing {
namespace conformance {

template <class T>
T Ok(Result<T> r) {
  INFO("status: " << r.status().ToString());
  REQUIRE(r.ok());
  return std::move(r).value();
}

template <class T>
void RequireCode(const Result<T>& r, StatusCode code) {
  INFO("status: " << r.status().ToString());
  REQUIRE(r.status().code() == code);
  CHECK_FALSE(r.status().message().empty());
}

// A message's whole content (ids, roles, parts, flags) as one comparable string.
std::string Print(const Message& m);

Message User(const std::string& text, const std::string& id = {});
Message Assistant(const std::string& text, const std::string& id = {});
Message Summary(const std::string& text, const std::string& id = {});

std::vector<std::string> Ids(const Transcript& t);
std::vector<std::string> Ids(const std::vector<Message>& v);

std::vector<std::string> Printed(const Transcript& t);

// Everything a store holds for one session, in comparable form.
struct Snapshot {
  std::uint64_t version = 0;
  std::vector<std::string> active;   // printed messages
  std::vector<std::string> history;  // "seq state replaced_by message"
};

Snapshot Take(SessionStore& store, const std::string& session);

void RequireSame(const Snapshot& before, const Snapshot& after);

// Appends `texts` one message at a time with ids "<prefix>0", "<prefix>1", …, alternating
// user and assistant; returns the version after the last.
std::uint64_t Fill(SessionStore& store, const std::string& session, int count,
                   const std::string& prefix = "m");

const HistoryEntry* FindEntry(const std::vector<HistoryEntry>& h, const std::string& id,
                              HistoryState state);

void RequireIncreasingSeq(const std::vector<HistoryEntry>& h);

// Hands out `count` messages "<prefix>i" (user and assistant in turn), then fails with `fail`
// instead of ending when it is set.
class CountingSource : public MessageSource {
 public:
  CountingSource(std::string prefix, int count, Status fail = Status::OK())
      : prefix_(std::move(prefix)), count_(count), fail_(std::move(fail)) {}
  Result<bool> Next(Message* out) override {
    if (given_ == count_) {
      if (!fail_.ok()) return fail_;
      return false;
    }
    const std::string id = prefix_ + std::to_string(given_);
    *out = given_ % 2 == 0 ? User("text of " + id, id) : Assistant("text of " + id, id);
    ++given_;
    return true;
  }
  int given() const { return given_; }

 private:
  std::string prefix_;
  int count_;
  Status fail_;
  int given_ = 0;
};

Message TwoCallsOneId();

}  // namespace conformance
}  // namespace testing
}  // namespace recap

#endif  // RECAP_SRC_TESTING_CONFORMANCE_HELPERS_H_
