// SPEC R3 and R11.4: FindCut, which reads the facts a Transcript notes of each message when it
// is appended (Transcript::cut_facts, pairing()) from the end backwards, decides exactly what
// FindCutReference, the full scan, decides — for every transcript and every option.
//
// Differential property over generated transcripts (support/generator.h): clean ones (the
// fast path), messy ones (orphans, uncertain calls, reused ids, and mutations that duplicate,
// drop, move or rename messages and ids), multi-chunk ones (more than Transcript::kChunk
// messages), built through every Append path, then sliced, copied, appended to after a copy,
// and partly replaced with Set. Also every real transcript of tests/data.
//
// A failure prints its case seed; `RECAP_SEED=<case seed> ./core_tests "[cut_diff]"` replays
// exactly that case.
#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <iostream>
#include <iterator>
#include <map>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include <catch2/catch.hpp>

#include "recap/measure.h"
#include "recap/safe_boundary.h"
#include "recap/transcript.h"

#include "support/build_speed.h"
#include "support/generator.h"
#include "support/invariants.h"
#include "support/test_data.h"

namespace {

using namespace recap_test;
using recap::CutDecision;
using recap::CutMode;
using recap::CutOptions;
using recap::Message;
using recap::Transcript;

constexpr std::uint64_t kRunSeeds[] = {11, 0xD1FF, 20240917};
// 1,000 cases for each run seed, and one random run seed: 4,000 cases. The sanitizer builds
// run the first fixed run seed and the random one, 500 cases each: 1,000 cases.
constexpr std::size_t kCasesPerRunSeed = recap_test::kSlowBuild ? 500 : 1000;
constexpr std::size_t kFixedRunSeeds = recap_test::kSlowBuild ? 1 : std::size(kRunSeeds);

std::optional<std::uint64_t> ReplaySeed() {
  const char* s = std::getenv("RECAP_SEED");
  if (s == nullptr || *s == '\0') return std::nullopt;
  return std::strtoull(s, nullptr, 0);
}

std::uint64_t RandomRunSeed() {
  static const std::uint64_t seed = [] {
    std::random_device rd;
    const std::uint64_t s = (static_cast<std::uint64_t>(rd()) << 32) ^ rd();
    std::cerr << "[cut_diff] random run seed " << s << "\n";
    return s;
  }();
  return seed;
}

const char* PairingStr(Transcript::Pairing p) {
  switch (p) {
    case Transcript::Pairing::kClosed: return "closed";
    case Transcript::Pairing::kOpen: return "open";
    case Transcript::Pairing::kUnknown: return "unknown";
  }
  return "?";
}

std::string Differences(const CutDecision& a, const CutDecision& b) {
  std::string why;
  if (a.skip != b.skip) why += Str(" skip ", SkipStr(a.skip), " vs ", SkipStr(b.skip), ";");
  if (a.position != b.position) why += Str(" position ", a.position, " vs ", b.position, ";");
  if (a.summarized_chars != b.summarized_chars) why += " summarized_chars;";
  if (a.kept_chars != b.kept_chars) why += " kept_chars;";
  if (a.kept_turns != b.kept_turns)
    why += Str(" kept_turns ", a.kept_turns, " vs ", b.kept_turns, ";");
  if (a.inside_turn != b.inside_turn) why += " inside_turn;";
  if (a.moved_for_size != b.moved_for_size) why += " moved_for_size;";
  if (a.uncertain.size() != b.uncertain.size()) {
    why += Str(" uncertain ", a.uncertain.size(), " vs ", b.uncertain.size(), ";");
  } else {
    for (std::size_t k = 0; k < a.uncertain.size(); ++k) {
      const auto& x = a.uncertain[k];
      const auto& y = b.uncertain[k];
      if (x.message != y.message || x.call_id != y.call_id || x.name != y.name) {
        why += Str(" uncertain[", k, "];");
        break;
      }
    }
  }
  return why;
}

// What the cases exercised: pairing states of the transcripts checked, and decisions.
struct Stats {
  std::map<std::string, std::size_t> counts;
  std::size_t checks = 0;
  void Add(const std::string& what) { ++counts[what]; }
  void Print(const char* title) const {
    std::cerr << "[cut_diff] " << title << ": " << checks << " comparisons;";
    for (const auto& [what, n] : counts) std::cerr << " " << what << "=" << n;
    std::cerr << "\n";
  }
};

// Compares FindCut with FindCutReference on `t` over a spread of options.
void Compare(const Transcript& t, Rng& rng, const char* what, Failures& f, Stats& stats) {
  stats.Add(
      Str(what, ":", PairingStr(t.pairing()), t.size() > Transcript::kChunk ? "/multi_chunk" : ""));
  std::vector<CutOptions> options;
  for (int k : {0, 1, 2, 3, 4}) {
    for (CutMode mode : {CutMode::kNormal, CutMode::kBudget}) {
      if (mode == CutMode::kBudget && k > 1) continue;
      CutOptions o;
      o.keep_turns = k;
      o.mode = mode;
      options.push_back(o);
    }
  }
  for (int extra = 0; extra < 3; ++extra) {
    CutOptions o;
    const auto r = rng.Below(10);
    o.keep_turns = r < 6   ? static_cast<int>(rng.Between(0, 20))
                   : r < 8 ? -1 - static_cast<int>(rng.Below(3))
                           : 21 + static_cast<int>(rng.Below(10));
    o.mode = rng.OneIn(4) ? CutMode::kBudget : CutMode::kNormal;
    options.push_back(o);
  }
  const std::size_t base_count = options.size();
  for (std::size_t i = 0; i < base_count; ++i) {
    const CutDecision ref = recap::FindCutReference(t, options[i]);
    // Limits that matter: 1, exactly the kept size (must move) and one above (must not), a
    // random size, a fraction of the whole.
    std::vector<std::size_t> limits = {0, 1, rng.Size(1, t.chars() + 10),
                                       std::max<std::size_t>(1, t.chars() / rng.Size(1, 12))};
    if (ref.ok()) {
      limits.push_back(ref.kept_chars);
      limits.push_back(ref.kept_chars + 1);
      limits.push_back(std::max<std::size_t>(1, ref.kept_chars / 2));
    }
    for (std::size_t limit : limits) {
      CutOptions o = options[i];
      o.kept_chars_limit = limit;
      const CutDecision expected = limit == 0 ? ref : recap::FindCutReference(t, o);
      const CutDecision got = recap::FindCut(t, o);
      ++stats.checks;
      stats.Add(Str("decision:", SkipStr(expected.skip), expected.moved_for_size ? "/moved" : "",
                    expected.inside_turn ? "/inside" : ""));
      const std::string why = Differences(got, expected);
      if (!why.empty()) {
        f.Add(Str(what, " (", t.size(), " messages, pairing ", PairingStr(t.pairing()), ") ",
                  OptionsStr(o), ": FindCut ", DecisionStr(got), " but the reference ",
                  DecisionStr(expected), " —", why));
      }
    }
  }
}

// Changes that the generator does not make: a result duplicated later, a message dropped (its
// calls become uncertain or its results orphans), two neighbours swapped (a result before its
// call), a call or result added with an id already used, a call id renamed to another one of
// the transcript (reused while open, or answered).
void Mess(Rng& rng, std::vector<Message>& ms) {
  const std::size_t changes = rng.Size(1, 4);
  for (std::size_t c = 0; c < changes && ms.size() > 2; ++c) {
    const std::size_t i = rng.Size(0, ms.size() - 1);
    switch (rng.Below(5)) {
      case 0: {  // duplicate, somewhere at or after it
        const std::size_t at = rng.Size(i + 1, ms.size());
        Message copy = ms[i];
        ms.insert(ms.begin() + static_cast<std::ptrdiff_t>(at), std::move(copy));
        break;
      }
      case 1: ms.erase(ms.begin() + static_cast<std::ptrdiff_t>(i)); break;
      case 2:
        if (i + 1 < ms.size()) std::swap(ms[i], ms[i + 1]);
        break;
      case 3: {  // one more call or result, with an id of the transcript, anywhere in a message
        std::vector<std::string> ids;
        for (const Message& m : ms) {
          for (const auto& part : m.parts) {
            if (const auto* tc = std::get_if<recap::ToolCall>(&part)) ids.push_back(tc->id);
            if (const auto* tr = std::get_if<recap::ToolResult>(&part)) ids.push_back(tr->call_id);
          }
        }
        if (ids.empty()) break;
        const std::string id = ids[rng.Below(ids.size())];
        recap::Part part;
        switch (rng.Below(4)) {
          case 0: part = recap::ToolCall{id, "again", "{}", {}}; break;
          case 1: part = recap::ToolResult{id, {recap::Text{"again", {}}}, false, {}, {}}; break;
          case 2:
            part = recap::Opaque{"server_tool_use", "{}", recap::OpaqueLink::kCall, id};
            break;
          default:
            part = recap::Opaque{"server_tool_result", "{}", recap::OpaqueLink::kResult, id};
            break;
        }
        auto& parts = ms[i].parts;
        parts.insert(parts.begin() + static_cast<std::ptrdiff_t>(rng.Size(0, parts.size())),
                     std::move(part));
        break;
      }
      default: {  // rename one call or result id to another id of the transcript
        std::vector<std::string*> ids;
        for (Message& m : ms) {
          for (auto& part : m.parts) {
            if (auto* tc = std::get_if<recap::ToolCall>(&part)) ids.push_back(&tc->id);
            if (auto* tr = std::get_if<recap::ToolResult>(&part)) ids.push_back(&tr->call_id);
          }
        }
        if (ids.size() >= 2) *ids[rng.Below(ids.size())] = *ids[rng.Below(ids.size())];
        break;
      }
    }
  }
}

GeneratorOptions CaseOptions(Rng& rng, bool messy) {
  GeneratorOptions base;
  base.text_median = 30;
  base.result_median = 60;
  base.args_median = 30;
  base.max_item_chars = 1500;
  base.max_turns = rng.OneIn(6) ? 30 : 8;
  base.double_user = 0.06;
  base.mid_system = 0.05;
  base.interleaved_text = 0.06;
  base.leading_summary = 0.25;
  base.leading_assistant = 0.06;
  base.no_turns = 0.03;
  if (messy) {
    base.uncertain_call = 0.2;
    base.leading_orphan = 0.1;
    base.orphan_result = 0.08;
    base.reuse_call_ids = 0.2;
  } else {
    base.orphan_result = 0;
    base.leading_orphan = 0;
    base.reuse_call_ids = rng.OneIn(4) ? 0.5 : 0;  // reused ids of answered calls stay exact
  }
  return JitterOptions(rng, base);
}

// Builds a transcript of `ms` through one of the Append paths (or a mix).
Transcript Build(Rng& rng, const std::vector<Message>& ms, Stats& stats) {
  const auto path = rng.Below(5);
  stats.Add(Str("build:", path));
  if (path == 0) return Transcript(ms);
  Transcript measured;  // where shared messages come from, as a store holds them
  if (path >= 2) measured = Transcript(ms);
  Transcript t;
  for (std::size_t i = 0; i < ms.size(); ++i) {
    const auto how = path == 4 ? rng.Below(3) + 1 : path;
    if (how == 1) {
      t.Append(ms[i]);
    } else if (how == 2) {
      t.Append(measured.shared(i));
    } else {
      t.AppendMeasured(measured.shared(i), recap::MessageChars(*measured.shared(i)));
    }
  }
  return t;
}

// Results for some of the calls still open in `t`, in random order, and maybe a reply.
std::vector<Message> Answers(Rng& rng, const Transcript& t) {
  std::vector<Message> out;
  for (const auto& u : recap::FindUncertainToolCalls(t)) {
    if (!rng.OneIn(5)) out.push_back(Message::ToolOutput(u.call_id, "late result"));
  }
  rng.Shuffle(out);
  if (rng.OneIn(2)) out.push_back(Message::AssistantText("done"));
  if (rng.OneIn(3)) out.push_back(Message::UserText("next"));
  return out;
}

void DiffCase(std::uint64_t seed, Failures& f, Stats& stats) {
  Rng rng(MixSeed(seed, 0xC07D1FFULL));
  const bool messy = rng.OneIn(2);
  std::vector<Message> ms = GenerateMessages(seed, CaseOptions(rng, messy));
  // Multi-chunk: more transcripts after it, past one or several chunks.
  if (rng.OneIn(6)) {
    const std::size_t target = rng.OneIn(3)
                                   ? rng.Size(Transcript::kChunk + 1, 4 * Transcript::kChunk)
                                   : rng.Size(Transcript::kChunk - 20, Transcript::kChunk + 40);
    for (std::uint64_t k = 1; ms.size() < target; ++k) {
      std::vector<Message> more =
          GenerateMessages(MixSeed(seed, k), CaseOptions(rng, messy && rng.OneIn(3)));
      for (auto& m : more) ms.push_back(std::move(m));
    }
  }
  if (messy && rng.OneIn(2)) Mess(rng, ms);

  const Transcript t = Build(rng, ms, stats);
  Compare(t, rng, "built", f, stats);
  const std::size_t n = t.size();

  // Slices: a random range, a prefix (as a compaction summarizes), and chunk-aligned suffixes
  // (shared chunks).
  {
    const std::size_t b = rng.Size(0, n);
    const std::size_t e = rng.Size(b, n);
    Compare(t.Slice(b, e), rng, "slice", f, stats);
    Compare(t.Slice(0, rng.Size(0, n)), rng, "prefix", f, stats);
    Compare(t.Slice(0, n), rng, "whole_slice", f, stats);
    if (n > Transcript::kChunk) {
      const std::size_t k = rng.Size(1, n / Transcript::kChunk);
      Compare(t.Slice(k * Transcript::kChunk, n), rng, "chunk_slice", f, stats);
    }
  }

  // Copies: appending to a copy leaves the original as it was; the copy pairs the answers.
  std::vector<CutDecision> before;
  for (int k = 0; k <= 3; ++k) {
    CutOptions o;
    o.keep_turns = k;
    before.push_back(recap::FindCut(t, o));
  }
  Transcript copy = t;
  for (Message& m : Answers(rng, t)) copy.Append(std::move(m));
  Compare(copy, rng, "copy_appended", f, stats);
  {
    Transcript copy2 = copy;  // and a copy of that, appended to again
    Transcript moved = std::move(copy2);
    for (Message& m : Answers(rng, moved)) moved.Append(std::move(m));
    if (rng.OneIn(3)) moved.Append(Message::ToolOutput("never-called", "orphan"));
    Compare(moved, rng, "copy_of_copy", f, stats);
    Compare(copy, rng, "copy_after", f, stats);
  }
  // A slice of a copy that was appended to, then appended to itself.
  {
    const std::size_t b = rng.OneIn(2) ? 0 : rng.Size(0, copy.size());
    Transcript s = copy.Slice(b, copy.size());
    for (Message& m : Answers(rng, s)) s.Append(std::move(m));
    Compare(s, rng, "slice_appended", f, stats);
  }

  // Set: same calls and results with other content (as the reducer clips), a flag changed
  // (summary, role), or a call/result id changed.
  if (n > 0) {
    Transcript s = t;
    std::vector<std::pair<std::size_t, Message>> edits;
    std::vector<bool> taken(n, false);
    const std::size_t count = rng.Size(1, std::min<std::size_t>(4, n));
    for (std::size_t c = 0; c < count; ++c) {
      const std::size_t i = rng.Size(0, n - 1);
      if (taken[i]) continue;
      taken[i] = true;
      Message m = t[i];
      switch (rng.Below(4)) {
        case 0:  // clip texts, keep links
          for (auto& part : m.parts) {
            if (auto* tx = std::get_if<recap::Text>(&part))
              tx->text = tx->text.substr(0, tx->text.size() / 2);
            if (auto* tr = std::get_if<recap::ToolResult>(&part)) tr->content.clear();
          }
          break;
        case 1: m.summary = !m.summary; break;
        case 2:
          m.role = m.role == recap::Role::kUser ? recap::Role::kAssistant : recap::Role::kUser;
          m.parts.emplace_back(recap::Text{"typed", {}});
          break;
        default:
          for (auto& part : m.parts) {
            if (auto* tc = std::get_if<recap::ToolCall>(&part)) tc->id += "x";
            if (auto* tr = std::get_if<recap::ToolResult>(&part)) tr->call_id += "y";
          }
          break;
      }
      edits.emplace_back(i, std::move(m));
    }
    s.Set(std::move(edits));
    Compare(s, rng, "set", f, stats);
    for (Message& m : Answers(rng, s)) s.Append(std::move(m));
    Compare(s, rng, "set_appended", f, stats);
  }

  // The original is untouched by all of the above.
  for (int k = 0; k <= 3; ++k) {
    CutOptions o;
    o.keep_turns = k;
    const std::string why = Differences(recap::FindCut(t, o), before[static_cast<std::size_t>(k)]);
    if (!why.empty()) f.Add(Str("the original's cut changed after copies were appended to:", why));
  }
  Compare(t, rng, "original_after", f, stats);
}

}  // namespace

TEST_CASE("R11.4 FindCut decides exactly as the full-scan reference, generated transcripts",
          "[cut_diff][R3][R11.4]") {
  Stats stats;
  std::size_t cases = 0, failing = 0;
  auto one = [&](std::uint64_t case_seed, std::uint64_t run_seed, std::size_t index) {
    Failures f;
    try {
      DiffCase(case_seed, f, stats);
    } catch (const std::exception& e) {
      f.Add(Str("exception: ", e.what()));
    }
    ++cases;
    if (f.empty()) return;
    if (++failing > 10) return;
    const std::string msg =
        Str("FindCut != FindCutReference: RECAP_SEED=", case_seed, " (run seed ", run_seed,
            ", case ", index, "), ", f.count(), " finding(s):\n", f.str());
    std::cerr << msg;
    CAPTURE(case_seed, run_seed, index);
    FAIL_CHECK(msg);
  };
  if (auto seed = ReplaySeed()) {
    one(*seed, 0, 0);
  } else {
    std::vector<std::uint64_t> run_seeds(std::begin(kRunSeeds),
                                         std::begin(kRunSeeds) + kFixedRunSeeds);
    run_seeds.push_back(RandomRunSeed());
    for (std::uint64_t rs : run_seeds) {
      for (std::size_t i = 0; i < kCasesPerRunSeed; ++i) one(MixSeed(rs, i), rs, i);
    }
    CHECK(cases == (kFixedRunSeeds + 1) * kCasesPerRunSeed);
    // The fast path ran on a good share of them, and so did every fallback.
    std::size_t closed = 0, open = 0, unknown = 0;
    for (const auto& [what, count] : stats.counts) {
      if (what.find(":closed") != std::string::npos) closed += count;
      if (what.find(":open") != std::string::npos) open += count;
      if (what.find(":unknown") != std::string::npos) unknown += count;
    }
    CHECK(closed > cases * 3);
    CHECK(open > cases / 10);
    CHECK(unknown > cases / 10);
    std::size_t chunk_slices = 0;
    for (const auto& [what, count] : stats.counts) {
      if (what.rfind("chunk_slice:", 0) == 0) chunk_slices += count;
    }
    // (About 9 and 16 in every 100 cases.)
    CHECK(stats.counts["built:closed/multi_chunk"] > cases / 20);
    CHECK(chunk_slices > cases / 20);
  }
  CHECK(failing == 0);
  stats.Print("generated");
}

TEST_CASE("R11.4 FindCut decides exactly as the full-scan reference, real transcripts",
          "[cut_diff][R3][R11.4][realdata]") {
  Stats stats;
  Failures f;
  Rng rng(0x7EA1DA7AULL);
  for (const auto& nt : recap::testing::AllRealTranscripts()) {
    const Transcript t(nt.conversation.messages);
    Compare(t, rng, "real", f, stats);
    Transcript copy = t;
    for (Message& m : Answers(rng, t)) copy.Append(std::move(m));
    Compare(copy, rng, "real_appended", f, stats);
    if (t.size() > 2) Compare(t.Slice(1, t.size()), rng, "real_slice", f, stats);
  }
  stats.Print("real transcripts");
  INFO(f.str());
  CHECK(f.empty());
}
