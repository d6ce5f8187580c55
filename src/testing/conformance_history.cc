// The store conformance checks of the history (R6.5, R13.1): every stored message exactly once,
// and ForEachHistoryEntry as History() one entry at a time.
#include <cstdint>
#include <map>
#include <random>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "recap/testing/store_conformance.h"

#include "conformance_helpers.h"

namespace recap {
namespace testing {
namespace conformance {

void HistoryKeepsEverything(const SessionStoreFactory& make) {
  const std::uint64_t seed = std::random_device{}();
  INFO("seed " << seed << " (the sequence of operations is drawn from it)");
  std::mt19937_64 rng(seed);
  auto below = [&](std::uint64_t n) { return rng() % n; };

  auto store = make();
  const std::string s = "s1";
  std::vector<Message> model;          // the expected active transcript
  std::multiset<std::string> stored;   // every message ever stored, printed
  std::set<std::string> appended_ids;  // what the host appended
  std::uint64_t version = 0;
  int next_id = 0;
  auto fresh = [&](const char* prefix) { return prefix + std::to_string(next_id++); };

  for (int step = 0; step < 200; ++step) {
    INFO("step " << step);
    const std::uint64_t op = below(100);
    if (op < 65 || model.size() < 3) {
      std::vector<Message> batch;
      const std::uint64_t n = 1 + below(3);
      for (std::uint64_t i = 0; i < n; ++i) {
        const std::string id = fresh("h");
        batch.push_back(i % 2 ? Assistant("reply " + id, id) : User("ask " + id, id));
        appended_ids.insert(id);
      }
      version = Ok(store->AppendMessages(s, batch));
      for (Message& m : batch) {
        stored.insert(Print(m));
        model.push_back(std::move(m));
      }
    } else if (op < 80) {
      CompactionCommit c;
      c.expected_version = version;
      const std::size_t k = 1 + below(model.size() - 1);
      for (std::size_t i = 0; i < k; ++i) c.replaced.push_back(model[i].id);
      c.checkpoint = Summary("summary " + std::to_string(step), fresh("cp"));
      if (below(2)) c.injected.push_back(Summary("memories", fresh("inj")));
      version = Ok(store->CommitCompaction(s, c));
      std::vector<Message> next = {c.checkpoint};
      next.insert(next.end(), c.injected.begin(), c.injected.end());
      next.insert(next.end(), model.begin() + static_cast<std::ptrdiff_t>(k), model.end());
      for (const Message& m : c.injected) stored.insert(Print(m));
      stored.insert(Print(c.checkpoint));
      model = std::move(next);
    } else if (op < 95) {
      ReductionCommit r;
      r.expected_version = version;
      std::set<std::size_t> picked;
      const std::uint64_t n = 1 + below(2);
      for (std::uint64_t i = 0; i < n; ++i) picked.insert(below(model.size()));
      for (std::size_t p : picked) {
        Message m = model[p];
        m.parts = {Text{"clipped at step " + std::to_string(step), ""}};
        r.replacements.push_back(m);
      }
      version = Ok(store->CommitReduction(s, r));
      for (const Message& m : r.replacements) {
        stored.insert(Print(m));
        for (Message& cur : model) {
          if (cur.id == m.id) cur = m;
        }
      }
    } else {
      RecoveryCommit rc;
      rc.expected_version = version;
      const std::size_t p = below(model.size());
      Message m = Message::ToolOutput("call-" + std::to_string(step), "outcome unknown");
      m.id = fresh("rec");
      rc.results.push_back({model[p].id, m});
      version = Ok(store->CommitRecovery(s, rc));
      stored.insert(Print(m));
      model.insert(model.begin() + static_cast<std::ptrdiff_t>(p + 1), m);
    }
    SessionState state = Ok(store->Load(s));
    REQUIRE(state.version == static_cast<std::uint64_t>(step + 1));
    std::vector<std::string> expected;
    expected.reserve(model.size());
    for (const Message& m : model) expected.push_back(Print(m));
    REQUIRE(Printed(state.transcript) == expected);
  }

  std::vector<HistoryEntry> h = Ok(store->History(s));
  RequireIncreasingSeq(h);
  std::multiset<std::string> in_history;
  std::multiset<std::string> active_in_history;
  std::map<std::string, int> originals_seen;
  for (const HistoryEntry& e : h) {
    const std::string printed = Print(e.message);
    in_history.insert(printed);
    if (e.state == HistoryState::kActive) {
      CHECK(e.replaced_by.empty());
      active_in_history.insert(printed);
    } else {
      const std::string& by = e.replaced_by;
      const bool compaction = by.rfind("compaction:", 0) == 0;
      const bool reduction = by.rfind("reduction:", 0) == 0;
      INFO("replaced_by " << by);
      CHECK((compaction || reduction));
    }
    if (appended_ids.count(e.message.id) && JoinedText(e.message).rfind("clipped", 0) != 0) {
      ++originals_seen[e.message.id];
    }
  }
  // Every message ever stored is there exactly once, and nothing else is.
  CHECK(in_history == stored);
  // Every message the host appended is there exactly once in its original form.
  CHECK(originals_seen.size() == appended_ids.size());
  for (const auto& kv : originals_seen) {
    INFO(kv.first);
    CHECK(kv.second == 1);
  }
  // The active entries are exactly the active transcript.
  std::multiset<std::string> active;
  for (const Message& m : model) active.insert(Print(m));
  CHECK(active_in_history == active);
}

void ForEachHistoryEntryIsHistory(const SessionStoreFactory& make) {
  auto store = make();
  const std::string s = "s1";
  CHECK(store
            ->ForEachHistoryEntry("never",
                                  [](HistoryEntry&&) {
                                    FAIL("a session never written has no entries");
                                    return Status::OK();
                                  })
            .ok());
  // A history with compacted, reduced and active entries.
  std::vector<Message> batch;
  for (int i = 0; i < 40; ++i) {
    const std::string id = "m" + std::to_string(i);
    batch.push_back(i % 2 ? Assistant("reply " + id, id) : User("ask " + id, id));
  }
  std::uint64_t version = Ok(store->AppendMessages(s, batch));
  CompactionCommit c;
  c.expected_version = version;
  for (int i = 0; i < 10; ++i) c.replaced.push_back(batch[static_cast<std::size_t>(i)].id);
  c.checkpoint = Summary("summary", "cp1");
  version = Ok(store->CommitCompaction(s, c));
  ReductionCommit r;
  r.expected_version = version;
  Message clipped = batch[20];
  clipped.parts = {Text{"clipped", ""}};
  r.replacements.push_back(clipped);
  version = Ok(store->CommitReduction(s, r));
  REQUIRE(Ok(store->AppendMessages(s, {User("last", "m40")})) == version + 1);

  const std::vector<HistoryEntry> whole = Ok(store->History(s));
  REQUIRE(whole.size() == 43);
  std::vector<HistoryEntry> walked;
  REQUIRE(store
              ->ForEachHistoryEntry(s,
                                    [&](HistoryEntry&& e) {
                                      walked.push_back(std::move(e));
                                      return Status::OK();
                                    })
              .ok());
  REQUIRE(walked.size() == whole.size());
  for (std::size_t i = 0; i < whole.size(); ++i) {
    INFO("entry " << i);
    CHECK(walked[i].seq == whole[i].seq);
    CHECK(walked[i].state == whole[i].state);
    CHECK(walked[i].replaced_by == whole[i].replaced_by);
    CHECK(Print(walked[i].message) == Print(whole[i].message));
  }
  // The visitor's Status stops the walk and comes back as is.
  std::size_t seen = 0;
  const Status stopped = store->ForEachHistoryEntry(s, [&](HistoryEntry&&) {
    return ++seen == 5 ? Status::Cancelled("enough after five") : Status::OK();
  });
  CHECK(stopped.code() == StatusCode::kCancelled);
  CHECK(stopped.message() == "enough after five");
  CHECK(seen == 5);
  // The store works as before after a walk that stopped half-way: reads and a write.
  CHECK(Ok(store->History(s)).size() == 43);
  CHECK(Ok(store->AppendMessages(s, {User("after", "m41")})) == version + 2);
  CHECK(store->ForEachHistoryEntry("", [](HistoryEntry&&) { return Status::OK(); }).code() ==
        StatusCode::kInvalidArgument);
}

}  // namespace conformance
}  // namespace testing
}  // namespace recap
