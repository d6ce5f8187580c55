#include "recap/safe_boundary.h"

#include <algorithm>
#include <cstdint>
#include <string_view>
#include <utility>
#include <vector>

#include "recap_internal/log_internal.h"

namespace recap {
inline namespace v0 {

namespace {

// One pass over the transcript that pairs results with calls and records, for every matched
// pair (c, r), that positions c+1..r are unsafe. `cover` is a difference array over
// positions 0..n; `report` receives counts, orphans and uncertain calls.
struct PairScan {
  PairingReport report;
  std::vector<int> cover;  // difference array, n + 2 entries
};

struct Open {
  std::size_t message;
  std::string_view name;
  bool answered;
};

// Call ids to their latest call: a flat open-addressing table keyed by views into the
// transcript's messages (which outlive the scan). One probe sequence per lookup and no
// allocation per call keeps the scan near the cost of walking the parts (SPEC R11.4).
class CallTable {
 public:
  CallTable() : slots_(64) {}

  // The entry for `id`, or null.
  Open* Find(std::string_view id) {
    const std::uint64_t h = Hash(id);
    for (std::size_t k = h & mask_;; k = (k + 1) & mask_) {
      Slot& slot = slots_[k];
      if (!slot.used) return nullptr;
      if (slot.hash == h && slot.id == id) return &slot.value;
    }
  }

  // Inserts `value` for `id` unless present; returns the entry and whether it was inserted.
  std::pair<Open*, bool> TryInsert(std::string_view id, const Open& value) {
    if ((size_ + 1) * 2 > slots_.size()) Grow();
    const std::uint64_t h = Hash(id);
    for (std::size_t k = h & mask_;; k = (k + 1) & mask_) {
      Slot& slot = slots_[k];
      if (!slot.used) {
        slot = Slot{id, h, value, true};
        ++size_;
        return {&slot.value, true};
      }
      if (slot.hash == h && slot.id == id) return {&slot.value, false};
    }
  }

  template <typename Fn>
  void ForEach(Fn&& fn) const {
    for (const Slot& slot : slots_) {
      if (slot.used) fn(slot.id, slot.value);
    }
  }

 private:
  struct Slot {
    std::string_view id;
    std::uint64_t hash = 0;
    Open value{};
    bool used = false;
  };

  static std::uint64_t Hash(std::string_view id) {
    std::uint64_t h = 14695981039346656037ULL;  // FNV-1a, then a final mix for the low bits
    for (unsigned char ch : id) h = (h ^ ch) * 1099511628211ULL;
    h ^= h >> 29;
    h *= 0xbf58476d1ce4e5b9ULL;
    h ^= h >> 32;
    return h;
  }

  void Grow() {
    std::vector<Slot> old(slots_.size() * 2);
    old.swap(slots_);
    mask_ = slots_.size() - 1;
    for (const Slot& slot : old) {
      if (!slot.used) continue;
      std::size_t k = slot.hash & mask_;
      while (slots_[k].used) k = (k + 1) & mask_;
      slots_[k] = slot;
    }
  }

  std::vector<Slot> slots_;
  std::size_t mask_ = 63;  // slots_.size() - 1
  std::size_t size_ = 0;
};

PairScan ScanPairs(const Transcript& t) {
  const std::size_t n = t.size();
  PairScan s;
  s.cover.assign(n + 2, 0);
  CallTable open;

  auto call = [&](std::size_t i, std::string_view id, std::string_view name) {
    auto [entry, inserted] = open.TryInsert(id, Open{i, name, false});
    if (!inserted) {
      // A second call reusing an id: results from now on answer the newer call. The older
      // one, if it never got a result, stays uncertain.
      if (!entry->answered) {
        s.report.uncertain.push_back({entry->message, std::string(id), std::string(entry->name)});
      }
      *entry = Open{i, name, false};
    }
  };
  auto result = [&](std::size_t i, std::string_view id) {
    Open* entry = open.Find(id);
    if (entry == nullptr) {
      s.report.orphans.push_back({i, std::string(id)});
      return;
    }
    const std::size_t c = entry->message;
    if (!entry->answered) ++s.report.pairs;
    entry->answered = true;
    if (c < i) {  // a pair inside one message constrains nothing
      ++s.cover[c + 1];
      --s.cover[i + 1];
    }
  };

  for (std::size_t i = 0; i < n; ++i) {
    for (const auto& part : t[i].parts) {
      if (const auto* c = std::get_if<ToolCall>(&part)) {
        call(i, c->id, c->name);
      } else if (const auto* r = std::get_if<ToolResult>(&part)) {
        result(i, r->call_id);
      } else if (const auto* o = std::get_if<Opaque>(&part)) {
        if (o->link == OpaqueLink::kCall) call(i, o->link_id, {});
        if (o->link == OpaqueLink::kResult) result(i, o->link_id);
      }
    }
  }
  open.ForEach([&](std::string_view id, const Open& o) {
    if (!o.answered) {
      s.report.uncertain.push_back({o.message, std::string(id), std::string(o.name)});
      // No result before any later position: everything after the call is unsafe.
      ++s.cover[o.message + 1];
      --s.cover[n + 1];
    }
  });
  std::sort(s.report.uncertain.begin(), s.report.uncertain.end(),
            [](const UncertainCall& a, const UncertainCall& b) {
              return a.message != b.message ? a.message < b.message : a.call_id < b.call_id;
            });
  return s;
}

std::vector<std::uint8_t> SafeFromCover(const std::vector<int>& cover, std::size_t n) {
  std::vector<std::uint8_t> safe(n + 1);
  int depth = 0;
  for (std::size_t p = 0; p <= n; ++p) {
    depth += cover[p];
    safe[p] = depth == 0 ? 1 : 0;
  }
  return safe;
}

}  // namespace

PairingReport AnalyzePairing(const Transcript& t) { return ScanPairs(t).report; }

std::vector<UncertainCall> FindUncertainToolCalls(const Transcript& t) {
  return ScanPairs(t).report.uncertain;
}

std::vector<std::uint8_t> FindSafeBoundaries(const Transcript& t) {
  return SafeFromCover(ScanPairs(t).cover, t.size());
}

std::vector<std::size_t> FindTurnStarts(const Transcript& t) {
  std::vector<std::size_t> turns;
  for (std::size_t i = 0; i < t.size(); ++i) {
    if (IsTurnStart(t[i])) turns.push_back(i);
  }
  return turns;
}

const char* SkipReasonName(SkipReason reason) noexcept {
  switch (reason) {
    case SkipReason::kNone: return "none";
    case SkipReason::kNothingToSummarize: return "nothing_to_summarize";
    case SkipReason::kNoSafeBoundary: return "no_safe_boundary";
    case SkipReason::kUncertainToolResults: return "uncertain_tool_results";
    case SkipReason::kNoProgress: return "no_progress";
    case SkipReason::kIrreducible: return "irreducible";
    case SkipReason::kSummarizerUnavailable: return "summarizer_unavailable";
    case SkipReason::kBackgroundRunning: return "background_running";
  }
  return "none";
}

CutDecision FindCutReference(const Transcript& t, const CutOptions& options) {
  CutDecision d;
  const std::size_t n = t.size();
  if (n == 0) {
    d.skip = SkipReason::kNothingToSummarize;
    return d;
  }
  PairScan scan = ScanPairs(t);
  if (!scan.report.uncertain.empty()) {
    d.skip = SkipReason::kUncertainToolResults;
    d.uncertain = std::move(scan.report.uncertain);
    return d;
  }
  const std::vector<std::uint8_t> safe = SafeFromCover(scan.cover, n);
  const std::vector<std::size_t> turns = FindTurnStarts(t);
  const std::size_t turn_count = turns.size();
  const std::size_t keep = static_cast<std::size_t>(std::clamp(options.keep_turns, 0, 20));
  // The last turn starts here; a transcript without any turn start is one turn from 0.
  const std::size_t last_turn = turn_count > 0 ? turns.back() : 0;

  // first_real[p]: whether [0, p) holds a message that is not a checkpoint. Re-summarizing
  // checkpoints alone would only churn (R3.5, R3.6).
  std::size_t first_non_summary = n;
  for (std::size_t i = 0; i < n; ++i) {
    if (!t[i].summary) {
      first_non_summary = i;
      break;
    }
  }
  auto usable = [&](std::size_t p) { return p > first_non_summary && p < n && safe[p]; };

  // R3.3: inside the last turn, the last safe boundary at or before its newest tool-call
  // round (the last message that calls a tool), so that round and everything after it is
  // kept. A last turn without a tool-call round is kept whole.
  // The nearest usable position at or before `target`. Never after it: a later cut would keep
  // fewer turns than asked (R3.1); only R3.8 moves a cut forward.
  auto at_or_before = [&](std::size_t target) -> std::size_t {
    for (std::size_t q = target; q > 0; --q) {
      if (usable(q)) return q;
    }
    return 0;
  };
  // When the last turn is kept whole but its start is not a safe boundary (its first message
  // also answers the previous round's calls), the cut snaps back to the nearest one before it,
  // as R3.1 and R3.2 do: R3.6 skips only when no safe boundary leaves anything to summarize.
  auto inside_last_turn = [&]() -> std::size_t {
    std::size_t round = 0;
    for (std::size_t q = n - 1; q > last_turn; --q) {
      if (HasToolCalls(t[q])) {
        round = q;
        break;
      }
    }
    for (std::size_t q = round; q > last_turn; --q) {
      if (usable(q)) return q;
    }
    return at_or_before(last_turn);
  };

  std::size_t p = 0;
  if (options.mode == CutMode::kBudget || keep == 0 || turn_count <= 1) {
    p = inside_last_turn();  // R3.3
  } else if (turn_count > keep) {
    p = at_or_before(turns[turn_count - keep]);  // R3.1
  } else {
    p = at_or_before(last_turn);  // R3.2: the last turn alone is kept
  }

  // R3.8: keep the kept part below the limit by moving forward — to later turn starts, then
  // to safe boundaries inside the last turn — as little as needed, or as far as possible.
  // With no usable cut at all (p == 0) the whole transcript would be kept, so it moves too.
  if (options.kept_chars_limit > 0 && t.chars(p, n) >= options.kept_chars_limit) {
    std::size_t best = p;
    auto consider = [&](std::size_t q) {
      if (q <= best || !usable(q)) return false;
      best = q;
      return t.chars(q, n) < options.kept_chars_limit;
    };
    // Later turn starts first (each snapped back to the nearest safe boundary, as R3.1 does),
    // then the safe boundaries inside the last turn.
    bool done = false;
    for (std::size_t k = 0; k < turn_count && !done; ++k) {
      if (turns[k] <= p) continue;
      std::size_t q = turns[k];
      while (q > p && !usable(q)) --q;
      if (q > p) done = consider(q);
    }
    for (std::size_t q = last_turn + 1; q < n && !done; ++q) done = consider(q);
    d.moved_for_size = best != p;
    p = best;
  }

  if (p == 0) {
    // Distinguish "there is nothing but the newest message and checkpoints" from "there is
    // history, but every boundary would split a call from its result".
    // A last turn kept whole with only checkpoints before it also leaves nothing.
    d.skip = (first_non_summary + 1 >= n || first_non_summary >= last_turn)
                 ? SkipReason::kNothingToSummarize
                 : SkipReason::kNoSafeBoundary;
    d.moved_for_size = false;
    RECAP_LOG_DEBUG("cut skipped: {} ({} messages, {} turns)", SkipReasonName(d.skip), n,
                    turn_count);
    return d;
  }
  d.position = p;
  d.summarized_chars = t.chars(0, p);
  d.kept_chars = t.chars(p, n);
  d.kept_turns =
      static_cast<std::size_t>(turns.end() - std::lower_bound(turns.begin(), turns.end(), p));
  d.inside_turn = p > last_turn || turn_count == 0;
  RECAP_LOG_DEBUG("cut at message {} of {}: summarize {} chars, keep {} chars in {} turns{}", p, n,
                  d.summarized_chars, d.kept_chars, d.kept_turns,
                  d.moved_for_size ? " (moved forward for size)" : "");
  return d;
}

namespace {

// The transcript seen from its end backwards, through the facts it noted of each message
// (Transcript::cut_facts), computed only as far down as asked. Valid while t.pairing() is
// kClosed: then position p (0 < p < n) is safe exactly when no message at or after p answers
// a call before p (a pair (c, r) makes c+1..r unsafe, and the pairs of message r together
// cover exactly (r - reach)+1..r).
class Tail {
 public:
  explicit Tail(const Transcript& t) : t_(t), n_(t.size()), safe_lo_(n_), turn_lo_(n_) {
    safe_.reserve(64);
  }

  // Whether position p (0 < p < n) is a safe boundary.
  bool Safe(std::size_t p) {
    while (safe_lo_ > p) {
      --safe_lo_;
      const std::uint32_t reach = t_.cut_facts(safe_lo_).reach;
      if (reach != 0) min_call_ = std::min<std::size_t>(min_call_, safe_lo_ - reach);
      safe_.push_back(min_call_ >= safe_lo_ ? 1 : 0);
    }
    return safe_[n_ - 1 - p] != 0;
  }

  // Finds turn starts from the end until `count` are known or none is left.
  void FindTurns(std::size_t count) {
    while (turns_.size() < count && turn_lo_ > 0) ScanTurn();
  }
  // Finds every turn start at or after `p`.
  void FindTurnsFrom(std::size_t p) {
    while (turn_lo_ > p) ScanTurn();
  }
  // Turn starts found so far, newest first; all of them once complete().
  const std::vector<std::size_t>& turns() const { return turns_; }
  bool complete() const { return turn_lo_ == 0; }

 private:
  void ScanTurn() {
    --turn_lo_;
    if (t_.cut_facts(turn_lo_).flags & Transcript::kTurnStartFact) turns_.push_back(turn_lo_);
  }

  const Transcript& t_;
  const std::size_t n_;
  std::size_t safe_lo_;              // Safe is known for [safe_lo_, n)
  std::size_t min_call_ = SIZE_MAX;  // earliest call answered at or after safe_lo_
  std::vector<std::uint8_t> safe_;   // safe_[n - 1 - p] for p in [safe_lo_, n)
  std::size_t turn_lo_;              // [turn_lo_, n) scanned for turn starts
  std::vector<std::size_t> turns_;   // newest first
};

// R3.7 when the transcript knows its open calls exactly (Pairing::kOpen): they are the
// uncertain calls ScanPairs would list — each the latest call with its id, never answered —
// in the same order, with the tool's name from the call itself.
CutDecision UncertainFromOpenCalls(const Transcript& t) {
  CutDecision d;
  d.skip = SkipReason::kUncertainToolResults;
  for (const Transcript::OpenCall& open : t.open_calls()) {
    UncertainCall u{open.message, open.id, {}};
    // The open call is the last call with its id in its message; an opaque call has no name.
    for (const auto& part : t[open.message].parts) {
      if (const auto* c = std::get_if<ToolCall>(&part); c && c->id == open.id) {
        u.name = c->name;
      } else if (const auto* o = std::get_if<Opaque>(&part);
                 o && o->link == OpaqueLink::kCall && o->link_id == open.id) {
        u.name.clear();
      }
    }
    d.uncertain.push_back(std::move(u));
  }
  std::sort(d.uncertain.begin(), d.uncertain.end(),
            [](const UncertainCall& a, const UncertainCall& b) {
              return a.message != b.message ? a.message < b.message : a.call_id < b.call_id;
            });
  RECAP_LOG_DEBUG("cut skipped: {} ({} uncertain calls)", SkipReasonName(d.skip),
                  d.uncertain.size());
  return d;
}

}  // namespace

// The same decisions as FindCutReference, step by step, but reading the noted facts from the
// end instead of scanning: `turns` below is the reference's turn list seen from its end.
CutDecision FindCut(const Transcript& t, const CutOptions& options) {
  switch (t.pairing()) {
    case Transcript::Pairing::kClosed: break;
    case Transcript::Pairing::kOpen: return UncertainFromOpenCalls(t);
    case Transcript::Pairing::kUnknown: return FindCutReference(t, options);
  }
  CutDecision d;
  const std::size_t n = t.size();
  if (n == 0) {
    d.skip = SkipReason::kNothingToSummarize;
    return d;
  }
  Tail tail(t);
  const std::size_t keep = static_cast<std::size_t>(std::clamp(options.keep_turns, 0, 20));
  // Enough turn starts to tell turn_count <= 1, turn_count > keep and the keep-th last turn.
  tail.FindTurns(std::max<std::size_t>(keep + 1, 2));
  const std::vector<std::size_t>& turns = tail.turns();  // newest first
  // Known exactly when the scan reached the start; otherwise at least turns.size().
  const bool all_turns = tail.complete();
  const std::size_t last_turn = turns.empty() ? 0 : turns.front();
  const bool no_turns = all_turns && turns.empty();

  std::size_t first_non_summary = n;
  for (std::size_t i = 0; i < n; ++i) {
    if (!(t.cut_facts(i).flags & Transcript::kSummaryFact)) {
      first_non_summary = i;
      break;
    }
  }
  auto usable = [&](std::size_t p) { return p > first_non_summary && p < n && tail.Safe(p); };

  auto at_or_before = [&](std::size_t target) -> std::size_t {
    for (std::size_t q = target; q > 0; --q) {
      if (usable(q)) return q;
    }
    return 0;
  };
  auto inside_last_turn = [&]() -> std::size_t {  // R3.3, as in FindCutReference
    std::size_t round = 0;
    for (std::size_t q = n - 1; q > last_turn; --q) {
      if (t.cut_facts(q).flags & Transcript::kCallsToolFact) {
        round = q;
        break;
      }
    }
    for (std::size_t q = round; q > last_turn; --q) {
      if (usable(q)) return q;
    }
    return at_or_before(last_turn);
  };

  std::size_t p = 0;
  if (options.mode == CutMode::kBudget || keep == 0 || (all_turns && turns.size() <= 1)) {
    p = inside_last_turn();  // R3.3
  } else if (turns.size() > keep) {
    p = at_or_before(turns[keep - 1]);  // R3.1: the keep-th last turn start
  } else {
    p = at_or_before(last_turn);  // R3.2: the last turn alone is kept
  }

  // R3.8, as in FindCutReference: later turn starts first, oldest first, then the safe
  // boundaries inside the last turn.
  if (options.kept_chars_limit > 0 && t.chars(p, n) >= options.kept_chars_limit) {
    std::size_t best = p;
    auto consider = [&](std::size_t q) {
      if (q <= best || !usable(q)) return false;
      best = q;
      return t.chars(q, n) < options.kept_chars_limit;
    };
    tail.FindTurnsFrom(p + 1);
    bool done = false;
    for (std::size_t k = turns.size(); k-- > 0 && !done;) {
      if (turns[k] <= p) continue;
      std::size_t q = turns[k];
      while (q > p && !usable(q)) --q;
      if (q > p) done = consider(q);
    }
    for (std::size_t q = last_turn + 1; q < n && !done; ++q) done = consider(q);
    d.moved_for_size = best != p;
    p = best;
  }

  if (p == 0) {
    d.skip = (first_non_summary + 1 >= n || first_non_summary >= last_turn)
                 ? SkipReason::kNothingToSummarize
                 : SkipReason::kNoSafeBoundary;
    d.moved_for_size = false;
    RECAP_LOG_DEBUG("cut skipped: {} ({} messages)", SkipReasonName(d.skip), n);
    return d;
  }
  d.position = p;
  d.summarized_chars = t.chars(0, p);
  d.kept_chars = t.chars(p, n);
  tail.FindTurnsFrom(p);
  d.kept_turns = static_cast<std::size_t>(
      std::count_if(turns.begin(), turns.end(), [p](std::size_t q) { return q >= p; }));
  d.inside_turn = p > last_turn || no_turns;
  RECAP_LOG_DEBUG("cut at message {} of {}: summarize {} chars, keep {} chars in {} turns{}", p, n,
                  d.summarized_chars, d.kept_chars, d.kept_turns,
                  d.moved_for_size ? " (moved forward for size)" : "");
  return d;
}

}  // namespace v0
}  // namespace recap
