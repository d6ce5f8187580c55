// The store conformance checks of concurrent writers and readers (R8, R8.2, R13.6): two
// commits against one version, appends with incremental reads, two creators of one session.
#include <atomic>
#include <cstdint>
#include <map>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "recap/testing/store_conformance.h"

#include "conformance_helpers.h"

namespace recap {
namespace testing {
namespace conformance {

void ConcurrentCommitsOneWins(const SessionStoreFactory& make) {
  auto store = make();
  for (int round = 0; round < 20; ++round) {
    const std::string session = "race-" + std::to_string(round);
    INFO(session);
    const std::uint64_t v = Fill(*store, session, 6);

    // Two compactions (or, in odd rounds, a compaction and a reduction) based on version v.
    CompactionCommit a;
    a.expected_version = v;
    a.replaced = {"m0", "m1", "m2"};
    a.checkpoint = Summary("by writer A", "cp-a");
    CompactionCommit b = a;
    b.checkpoint = Summary("by writer B", "cp-b");
    ReductionCommit rb;
    rb.expected_version = v;
    rb.replacements = {Assistant("clipped by B", "m5")};
    const bool mixed = round % 2 == 1;

    std::atomic<int> ready{0};
    Status sa, sb;
    auto start = [&] {
      ready.fetch_add(1);
      while (ready.load() < 2) std::this_thread::yield();
    };
    std::thread ta([&] {
      start();
      sa = store->CommitCompaction(session, a).status();
    });
    std::thread tb([&] {
      start();
      sb = mixed ? store->CommitReduction(session, rb).status()
                 : store->CommitCompaction(session, b).status();
    });
    ta.join();
    tb.join();

    INFO("A: " << sa.ToString() << "; B: " << sb.ToString());
    REQUIRE(sa.ok() != sb.ok());
    const Status& loser = sa.ok() ? sb : sa;
    CHECK(loser.code() == StatusCode::kConflict);

    SessionState state = Ok(store->Load(session));
    CHECK(state.version == v + 1);
    std::vector<HistoryEntry> h = Ok(store->History(session));
    if (sa.ok() || !mixed) {
      const std::string winner = sa.ok() ? "cp-a" : "cp-b";
      CHECK(Ids(state.transcript) == std::vector<std::string>{winner, "m3", "m4", "m5"});
      CHECK(h.size() == 7);
      int summaries = 0;
      for (const HistoryEntry& e : h) summaries += e.message.summary ? 1 : 0;
      CHECK(summaries == 1);
    } else {
      CHECK(JoinedText(state.transcript[5]) == "clipped by B");
      CHECK(h.size() == 7);
    }
  }
}

void ConcurrentAppendsAndReads(const SessionStoreFactory& make) {
  auto store = make();
  constexpr int kWriters = 4;
  constexpr int kPerWriter = 50;
  std::atomic<int> writers_done{0};

  // The reader follows the session with LoadChanges alone, as Compactor::Prepare does.
  // Catch2's assertions are not thread-safe, so threads only record what they saw.
  std::vector<std::string> followed;
  std::uint64_t since = 0;
  std::string reader_error;
  auto follow = [&] {
    Result<SessionChanges> ch = store->LoadChanges("s1", since);
    if (!ch.ok()) {
      reader_error = ch.status().ToString();
    } else if (ch->version < since) {
      reader_error = "the version went back from " + std::to_string(since);
    } else if (!ch->appended_only) {
      reader_error = "appended_only is false though only appends happened";
    } else {
      for (const Message& m : ch->appended) followed.push_back(m.id);
      since = ch->version;
    }
    return reader_error.empty();
  };
  std::thread reader([&] {
    while (writers_done.load() < kWriters && follow()) {
    }
  });
  std::vector<std::thread> writers;
  writers.reserve(kWriters);
  for (int w = 0; w < kWriters; ++w) {
    writers.emplace_back([&, w] {
      for (int i = 0; i < kPerWriter; ++i) {
        const std::string id = "w" + std::to_string(w) + "-" + std::to_string(i);
        if (!store->Append("s1", User(id, id)).ok()) break;
      }
      writers_done.fetch_add(1);
    });
  }
  for (auto& t : writers) t.join();
  reader.join();
  follow();
  INFO(reader_error);
  CHECK(reader_error.empty());

  SessionState state = Ok(store->Load("s1"));
  CHECK(state.version == static_cast<std::uint64_t>(kWriters) * kPerWriter);
  REQUIRE(state.transcript.size() == static_cast<std::size_t>(kWriters * kPerWriter));
  CHECK(followed == Ids(state.transcript));
  // Each writer's messages keep that writer's order.
  std::map<std::string, int> next;
  for (const std::string& id : Ids(state.transcript)) {
    const std::string writer = id.substr(0, id.find('-'));
    CHECK(std::stoi(id.substr(id.find('-') + 1)) == next[writer]++);
  }
  CHECK(Ok(store->History("s1")).size() == state.transcript.size());
}

void ConcurrentCreatesOneWins(const SessionStoreFactory& make) {
  auto store = make();
  Fill(*store, "old", 2);
  for (int round = 0; round < 20; ++round) {
    const std::string session = "new-" + std::to_string(round);
    INFO(session);
    std::atomic<int> ready{0};
    Result<std::vector<std::uint64_t>> ra = Status::Internal("not run");
    Result<std::vector<std::uint64_t>> rb = Status::Internal("not run");
    auto create = [&](const std::string& prefix, Result<std::vector<std::uint64_t>>* out) {
      CountingSource src(prefix, 300);
      std::vector<NewSession> v(2);
      v[0].session = session;
      v[0].source = &src;
      v[1].session = session + ".companion-" + prefix;
      v[1].messages.push_back(User("companion of " + prefix));
      ready.fetch_add(1);
      while (ready.load() < 2) std::this_thread::yield();
      *out = store->CreateSessions(std::move(v));
    };
    std::thread ta([&] { create("a", &ra); });
    std::thread tb([&] { create("b", &rb); });
    ta.join();
    tb.join();
    INFO("A: " << ra.status().ToString() << "; B: " << rb.status().ToString());
    REQUIRE(ra.ok() != rb.ok());
    const auto& loser = ra.ok() ? rb : ra;
    CHECK(loser.status().code() == StatusCode::kConflict);
    const std::string winner = ra.ok() ? "a" : "b";
    const std::string other = ra.ok() ? "b" : "a";
    SessionState state = Ok(store->Load(session));
    REQUIRE(state.transcript.size() == 300);
    for (const Message& m : state.transcript) REQUIRE(m.id.rfind(winner, 0) == 0);
    CHECK(Ok(store->Load(session + ".companion-" + winner)).version == 1);
    CHECK(Ok(store->Load(session + ".companion-" + other)).version == 0);
  }
}

}  // namespace conformance
}  // namespace testing
}  // namespace recap
