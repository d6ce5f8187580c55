// The store conformance checks of what belongs to one session (R8.4, R12.5): sessions are
// isolated, and what a Compactor learned is kept beside its session, outside its versions.
#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "recap/testing/store_conformance.h"

#include "conformance_helpers.h"

namespace recap {
namespace testing {
namespace conformance {

void Isolation(const SessionStoreFactory& make) {
  auto store = make();
  Ok(store->Append("b", User("in b", "x")));
  Ok(store->Append("a", User("in a", "x")));  // the same id in another session is fine
  const std::uint64_t v1 = Fill(*store, "s1", 6, "one-");
  const std::uint64_t v2 = Fill(*store, "s2", 4, "two-");
  CHECK(v1 == 6);
  CHECK(v2 == 4);  // versions are per session
  CHECK(Ok(store->ListSessions()) == std::vector<std::string>{"a", "b", "s1", "s2"});

  const Snapshot s2_before = Take(*store, "s2");
  const Snapshot a_before = Take(*store, "a");
  CompactionCommit c;
  c.expected_version = v1;
  c.replaced = {"one-0", "one-1"};
  c.checkpoint = Summary("s1 summary");
  Ok(store->CommitCompaction("s1", c));
  ReductionCommit r;
  r.expected_version = v1 + 1;
  r.replacements = {User("clipped", "one-2")};
  Ok(store->CommitReduction("s1", r));
  Ok(store->Append("s1", User("more")));
  RequireSame(s2_before, Take(*store, "s2"));
  RequireSame(a_before, Take(*store, "a"));
  SessionChanges ch = Ok(store->LoadChanges("s2", v2));
  CHECK(ch.appended_only);
  CHECK(ch.appended.empty());

  // Another session's ids are unknown here.
  const Snapshot s1_before = Take(*store, "s1");
  CompactionCommit wrong;
  wrong.expected_version = v2;
  wrong.replaced = {"one-3"};
  wrong.checkpoint = Summary("x");
  RequireCode(store->CommitCompaction("s2", wrong), StatusCode::kInvalidArgument);
  ReductionCommit wrong_r;
  wrong_r.expected_version = v2;
  wrong_r.replacements = {User("x", "one-4")};
  RequireCode(store->CommitReduction("s2", wrong_r), StatusCode::kInvalidArgument);
  RecoveryCommit wrong_rc;
  wrong_rc.expected_version = v2;
  wrong_rc.results.push_back({"one-4", Message::ToolOutput("c", "x")});
  RequireCode(store->CommitRecovery("s2", wrong_rc), StatusCode::kInvalidArgument);
  RequireSame(s2_before, Take(*store, "s2"));
  RequireSame(s1_before, Take(*store, "s1"));
}

void LearnedStateIsKept(const SessionStoreFactory& make) {
  auto store = make();
  const std::uint64_t v = Fill(*store, "s1", 4);
  Fill(*store, "s2", 2);
  // Nothing saved: empty.
  CHECK(Ok(store->Load("s1")).learned.empty());
  const std::string state = R"({"overflowWindow":5000,"paused":true,"charsAtPause":1200})";
  REQUIRE(store->SaveLearned("s1", state).ok());
  // Returned by Load and LoadChanges, the version unchanged, the other session untouched.
  SessionState loaded = Ok(store->Load("s1"));
  CHECK(loaded.learned == state);
  CHECK(loaded.version == v);
  CHECK(Ok(store->LoadChanges("s1", v)).learned == state);
  CHECK(Ok(store->LoadChanges("s1", 0)).learned == state);
  CHECK(Ok(store->Load("s2")).learned.empty());
  // Appends and commits leave it; a later save replaces it; an empty one clears it.
  std::uint64_t v2 = Ok(store->Append("s1", User("more", "m-more")));
  CHECK(Ok(store->LoadChanges("s1", v)).learned == state);
  CompactionCommit c;
  c.expected_version = v2;
  c.replaced = {"m0", "m1"};
  c.checkpoint = Summary("summary", "cp");
  REQUIRE(store->CommitCompaction("s1", c).ok());
  CHECK(Ok(store->Load("s1")).learned == state);
  REQUIRE(store->SaveLearned("s1", R"({"weakStreak":1})").ok());
  CHECK(Ok(store->Load("s1")).learned == R"({"weakStreak":1})");
  REQUIRE(store->SaveLearned("s1", "").ok());
  CHECK(Ok(store->Load("s1")).learned.empty());
  // A session never written keeps nothing (and is not created).
  REQUIRE(store->SaveLearned("never", state).ok());
  const SessionState never = Ok(store->Load("never"));
  CHECK(never.version == 0);
  CHECK(never.learned.empty());
  const std::vector<std::string> names = Ok(store->ListSessions());
  CHECK(std::find(names.begin(), names.end(), "never") == names.end());
  CHECK(store->SaveLearned("", state).code() == StatusCode::kInvalidArgument);
}

}  // namespace conformance
}  // namespace testing
}  // namespace recap
