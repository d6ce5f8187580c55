// Workload W1 of SPEC §13 (R11), "a long session", for recap's benchmarks.
//
// A deterministic transcript of `messages` messages, about 2.5 KB each on average (20,000
// messages ≈ 50 MB), shaped as R11 describes:
//
//   * turns: a user text, zero to three tool-call rounds, an assistant reply;
//   * user and assistant texts of 200–2,000 characters;
//   * each round an assistant message with 1 call, or 2–4 parallel calls in one turn in five,
//     with JSON arguments of 100–2,000 characters, each answered by a `tool` message;
//   * tool results log-normally sized from 100 bytes to 200 KB (median about 1.5 KB);
//   * one message in ten written with multi-byte UTF-8 (2-, 3- and 4-byte characters).
//
// The last two messages are a plain user text and an assistant reply, so cutting before them
// (the compaction benchmark replaces all but the last two) splits no call from its result.
// Message ids are "w1-000000", "w1-000001", … . The same options give the same messages on
// every run; the only randomness is std::mt19937_64 with fixed seeds.
#ifndef RECAP_BENCH_W1_WORKLOAD_H_
#define RECAP_BENCH_W1_WORKLOAD_H_

#include <cstddef>
#include <cstdint>
#include <vector>

#include "recap/message.h"

namespace recap_bench {

struct W1Options {
  std::size_t messages = 20000;
  std::uint64_t seed = 20240611;
};

std::vector<recap::Message> GenerateW1(const W1Options& options);

// Bytes of every string a message carries (texts, arguments, results, ids, names): what
// "about 50 MB" counts.
std::size_t MessageBytes(const recap::Message& m);

}  // namespace recap_bench

#endif  // RECAP_BENCH_W1_WORKLOAD_H_
