// What every fuzz target checks once an input decoded into messages: the core's invariants
// on that transcript, whatever shape it has (SPEC R3, R6).
//
//  * FindCut (every mode, several keep_turns and size limits) either skips or cuts at a safe
//    boundary: no tool call before the cut loses its result after it, and the other way round.
//  * ReduceTail keeps every message, every id, every tool call and result; its texts are valid
//    UTF-8; it never grows the transcript; reducing the result again to the same target changes
//    nothing more (clipping is idempotent).
//
// A broken invariant prints what broke and aborts, which the fuzz driver (or libFuzzer) reports
// with the input that caused it.
#ifndef RECAP_TESTS_FUZZ_FUZZ_COMMON_H_
#define RECAP_TESTS_FUZZ_FUZZ_COMMON_H_

#include <cstdio>
#include <cstdlib>
#include <string>
#include <variant>
#include <vector>

#include "recap/recap.h"

#define RECAP_FUZZ_REQUIRE(condition, what)                                                    \
  do {                                                                                         \
    if (!(condition)) {                                                                        \
      std::fprintf(stderr, "fuzz invariant broken at %s:%d: %s\n  (%s)\n", __FILE__, __LINE__, \
                   what, #condition);                                                          \
      std::abort();                                                                            \
    }                                                                                          \
  } while (0)

namespace recap_fuzz {

// Every string of a message that the reducer may have clipped, for the UTF-8 check.
inline bool MessageIsValidUtf8(const recap::Message& m) {
  for (const recap::Part& part : m.parts) {
    if (const auto* t = std::get_if<recap::Text>(&part)) {
      if (!recap::IsValidUtf8(t->text)) return false;
    } else if (const auto* c = std::get_if<recap::ToolCall>(&part)) {
      if (!recap::IsValidUtf8(c->arguments)) return false;
    } else if (const auto* r = std::get_if<recap::ToolResult>(&part)) {
      for (const recap::ResultItem& item : r->content) {
        if (const auto* inner = std::get_if<recap::Text>(&item)) {
          if (!recap::IsValidUtf8(inner->text)) return false;
        }
      }
    }
  }
  return true;
}

// The ids of the tool calls and results of a message, in order: what the reducer must keep.
inline std::vector<std::string> PairIds(const recap::Message& m) {
  std::vector<std::string> ids;
  for (const recap::Part& part : m.parts) {
    if (const auto* c = std::get_if<recap::ToolCall>(&part)) ids.push_back("c:" + c->id);
    if (const auto* r = std::get_if<recap::ToolResult>(&part)) ids.push_back("r:" + r->call_id);
  }
  return ids;
}

inline void CheckTranscript(const recap::Transcript& t) {
  if (t.empty()) return;
  const std::vector<std::uint8_t> safe = recap::FindSafeBoundaries(t);
  RECAP_FUZZ_REQUIRE(safe.size() == t.size() + 1, "one safe flag per position");
  for (recap::CutMode mode : {recap::CutMode::kNormal, recap::CutMode::kBudget}) {
    for (int keep : {0, 1, 2, 5}) {
      for (std::size_t limit : {std::size_t{0}, std::size_t{64}, t.chars() / 2 + 1}) {
        recap::CutOptions options;
        options.keep_turns = keep;
        options.mode = mode;
        options.kept_chars_limit = limit;
        const recap::CutDecision cut = recap::FindCut(t, options);
        if (!cut.ok()) continue;
        RECAP_FUZZ_REQUIRE(cut.position > 0 && cut.position < t.size(),
                           "a cut summarizes something and keeps the last message");
        RECAP_FUZZ_REQUIRE(safe[cut.position] != 0, "the cut is at a safe boundary");
        RECAP_FUZZ_REQUIRE(cut.summarized_chars + cut.kept_chars == t.chars(),
                           "the cut's two parts add up to the transcript");
      }
    }
  }

  const recap::PairingReport pairing = recap::AnalyzePairing(t);
  for (std::size_t target : {std::size_t{0}, t.chars() / 3, t.chars()}) {
    const recap::ReduceResult reduced = recap::ReduceTail(t, target);
    const recap::Transcript& r = reduced.transcript;
    RECAP_FUZZ_REQUIRE(r.size() == t.size(), "the reducer keeps every message");
    RECAP_FUZZ_REQUIRE(r.chars() <= t.chars(), "the reducer never grows the transcript");
    RECAP_FUZZ_REQUIRE(reduced.after_chars == r.chars(), "the reported size is the real one");
    for (std::size_t i = 0; i < t.size(); ++i) {
      RECAP_FUZZ_REQUIRE(r[i].id == t[i].id && r[i].role == t[i].role,
                         "a reduced message keeps its id and role");
      RECAP_FUZZ_REQUIRE(PairIds(r[i]) == PairIds(t[i]),
                         "a reduced message keeps its tool calls and results");
      RECAP_FUZZ_REQUIRE(!recap::IsValidUtf8(recap::JoinedText(t[i])) || MessageIsValidUtf8(r[i]),
                         "clipping leaves valid UTF-8");
    }
    const recap::PairingReport after = recap::AnalyzePairing(r);
    RECAP_FUZZ_REQUIRE(after.pairs == pairing.pairs &&
                           after.uncertain.size() == pairing.uncertain.size() &&
                           after.orphans.size() == pairing.orphans.size(),
                       "the reducer changes no pairing");
    const recap::ReduceResult again = recap::ReduceTail(r, target);
    RECAP_FUZZ_REQUIRE(again.transcript.chars() == r.chars() || !reduced.fits,
                       "reducing a reduced transcript that fits changes nothing");
  }
}

}  // namespace recap_fuzz

#endif  // RECAP_TESTS_FUZZ_FUZZ_COMMON_H_
