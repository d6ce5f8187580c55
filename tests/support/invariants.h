// Independent checks of the cutter's and the tail reducer's contracts (safe_boundary.h,
// tail_reducer.h, SPEC R3 and R6), shared by the property tests over generated transcripts and
// the invariant tests over the real ones.
//
// Nothing here trusts the library for what it checks: UTF-8 validity and code point counts come
// from a reference decoder below, call/result pairing and safe boundaries from an own scan,
// turn starts from SPEC §1's definition, JSON structure from nlohmann. The library is only
// called as the function under test.
//
// Each check appends what it found wrong to a Failures list instead of asserting, so a test can
// run thousands of cases fast and report the seed of each failing one with all its findings.
#ifndef RECAP_TESTS_SUPPORT_INVARIANTS_H_
#define RECAP_TESTS_SUPPORT_INVARIANTS_H_

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <sstream>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <variant>
#include <vector>

#include <nlohmann/json.hpp>

#include "recap/measure.h"
#include "recap/message.h"
#include "recap/safe_boundary.h"
#include "recap/tail_reducer.h"
#include "recap/transcript.h"

namespace recap_test {

// ---------------------------------------------------------------------------------------------
// Failure collection

template <class... Args>
std::string Str(const Args&... args) {
  std::ostringstream os;
  (os << ... << args);
  return os.str();
}

class Failures {
 public:
  void Add(std::string what) {
    kinds_.push_back(Kind(what));
    if (list_.size() < kMaxKept) list_.push_back(std::move(what));
    ++count_;
  }
  // The findings' kinds: each text up to its first digit or parenthesis, for summaries.
  const std::vector<std::string>& kinds() const { return kinds_; }
  static std::string Kind(const std::string& what) {
    std::string k;
    int depth = 0;
    for (std::size_t i = 0; i < what.size() && k.size() < 120; ++i) {
      const char ch = what[i];
      if (ch == '[' || ch == '"') break;
      if (ch == '(') ++depth;
      if (depth == 0) {
        const bool digit = ch >= '0' && ch <= '9';
        const bool tag = i < 6;  // keep "R3.3", "R6.2"
        if (digit && !tag) {
          if (k.empty() || k.back() != '#') k += '#';
        } else {
          k += ch;
        }
      }
      if (ch == ')' && depth > 0) --depth;
    }
    while (!k.empty() && k.back() == ' ') k.pop_back();
    return k;
  }
  bool empty() const { return count_ == 0; }
  std::size_t count() const { return count_; }
  std::string str() const {
    std::string s;
    for (const auto& w : list_) s += "  - " + w + "\n";
    if (count_ > list_.size()) s += Str("  ... and ", count_ - list_.size(), " more\n");
    return s;
  }

 private:
  static constexpr std::size_t kMaxKept = 25;
  std::vector<std::string> list_;
  std::vector<std::string> kinds_;
  std::size_t count_ = 0;
};

#define RECAP_EXPECT(failures, cond, ...)                                         \
  do {                                                                            \
    if (!(cond)) (failures).Add(::recap_test::Str(__VA_ARGS__, "  [" #cond "]")); \
  } while (0)

// ---------------------------------------------------------------------------------------------
// Reference UTF-8 (Unicode 15, table 3-7: no overlongs, no surrogates, nothing above U+10FFFF)

// Byte length of the well-formed sequence starting at s[i], or 0 when none starts there.
inline std::size_t RefSeqLen(std::string_view s, std::size_t i) {
  auto at = [&](std::size_t k) { return static_cast<unsigned>(static_cast<unsigned char>(s[k])); };
  auto cont = [&](std::size_t k, unsigned lo = 0x80, unsigned hi = 0xBF) {
    return k < s.size() && at(k) >= lo && at(k) <= hi;
  };
  const unsigned c = at(i);
  if (c <= 0x7F) return 1;
  if (c >= 0xC2 && c <= 0xDF) return cont(i + 1) ? 2 : 0;
  if (c == 0xE0) return cont(i + 1, 0xA0, 0xBF) && cont(i + 2) ? 3 : 0;
  if ((c >= 0xE1 && c <= 0xEC) || c == 0xEE || c == 0xEF) return cont(i + 1) && cont(i + 2) ? 3 : 0;
  if (c == 0xED) return cont(i + 1, 0x80, 0x9F) && cont(i + 2) ? 3 : 0;
  if (c == 0xF0) return cont(i + 1, 0x90, 0xBF) && cont(i + 2) && cont(i + 3) ? 4 : 0;
  if (c >= 0xF1 && c <= 0xF3) return cont(i + 1) && cont(i + 2) && cont(i + 3) ? 4 : 0;
  if (c == 0xF4) return cont(i + 1, 0x80, 0x8F) && cont(i + 2) && cont(i + 3) ? 4 : 0;
  return 0;
}

inline bool RefIsValidUtf8(std::string_view s) {
  for (std::size_t i = 0; i < s.size();) {
    const std::size_t n = RefSeqLen(s, i);
    if (n == 0) return false;
    i += n;
  }
  return true;
}

// Code points, each byte outside a well-formed sequence counting one (measure.h).
inline std::size_t RefCountCodePoints(std::string_view s) {
  std::size_t count = 0;
  for (std::size_t i = 0; i < s.size(); ++count) {
    const std::size_t n = RefSeqLen(s, i);
    i += n == 0 ? 1 : n;
  }
  return count;
}

// Every byte outside a well-formed sequence replaced by U+FFFD.
inline std::string RefToValidUtf8(std::string_view s) {
  std::string out;
  for (std::size_t i = 0; i < s.size();) {
    const std::size_t n = RefSeqLen(s, i);
    if (n == 0) {
      out += "\xEF\xBF\xBD";
      ++i;
    } else {
      out.append(s.substr(i, n));
      i += n;
    }
  }
  return out;
}

// Bytes of the longest prefix with at most k code points (units as RefCountCodePoints counts
// them) that does not end inside a well-formed sequence.
inline std::size_t RefPrefixBytes(std::string_view s, std::size_t k) {
  std::size_t i = 0;
  for (std::size_t count = 0; i < s.size() && count < k; ++count) {
    const std::size_t n = RefSeqLen(s, i);
    i += n == 0 ? 1 : n;
  }
  return i;
}

inline std::size_t CountOccurrences(std::string_view s, std::string_view what) {
  std::size_t n = 0;
  for (std::size_t at = s.find(what); at != std::string_view::npos; at = s.find(what, at + 1)) ++n;
  return n;
}

inline bool EndsWith(std::string_view s, std::string_view suffix) {
  return s.size() >= suffix.size() && s.substr(s.size() - suffix.size()) == suffix;
}

inline std::string Preview(std::string_view s, std::size_t max = 60) {
  std::string p(s.substr(0, RefPrefixBytes(s, max)));
  if (p.size() < s.size()) p += "...";
  return Str("\"", p, "\" (", s.size(), " bytes, ", RefCountCodePoints(s), " cps)");
}

// ---------------------------------------------------------------------------------------------
// Messages

inline const char* RoleStr(recap::Role r) {
  switch (r) {
    case recap::Role::kSystem: return "system";
    case recap::Role::kUser: return "user";
    case recap::Role::kAssistant: return "assistant";
    case recap::Role::kTool: return "tool";
  }
  return "?";
}

inline bool OpaqueEqual(const recap::Opaque& a, const recap::Opaque& b) {
  return a.kind == b.kind && a.payload == b.payload && a.link == b.link && a.link_id == b.link_id;
}

// The first difference between two messages, or "" when they are equal in every field.
inline std::string DiffMessages(const recap::Message& a, const recap::Message& b) {
  using namespace recap;
  if (a.id != b.id) return Str("id ", a.id, " vs ", b.id);
  if (a.role != b.role) return Str("role ", RoleStr(a.role), " vs ", RoleStr(b.role));
  if (a.summary != b.summary) return "summary flag";
  if (a.form != b.form) return "message form";
  if (a.extra != b.extra) return "message extra";
  if (a.parts.size() != b.parts.size())
    return Str("part count ", a.parts.size(), " vs ", b.parts.size());
  for (std::size_t k = 0; k < a.parts.size(); ++k) {
    const Part& pa = a.parts[k];
    const Part& pb = b.parts[k];
    if (pa.index() != pb.index()) return Str("part ", k, " kind");
    if (const auto* x = std::get_if<Text>(&pa)) {
      const auto& y = std::get<Text>(pb);
      if (x->text != y.text)
        return Str("part ", k, " text ", Preview(x->text), " vs ", Preview(y.text));
      if (x->extra != y.extra) return Str("part ", k, " text extra");
    } else if (const auto* x = std::get_if<ToolCall>(&pa)) {
      const auto& y = std::get<ToolCall>(pb);
      if (x->id != y.id) return Str("part ", k, " call id ", x->id, " vs ", y.id);
      if (x->name != y.name) return Str("part ", k, " call name");
      if (x->arguments != y.arguments)
        return Str("part ", k, " arguments ", Preview(x->arguments), " vs ", Preview(y.arguments));
      if (x->extra != y.extra) return Str("part ", k, " call extra");
    } else if (const auto* x = std::get_if<ToolResult>(&pa)) {
      const auto& y = std::get<ToolResult>(pb);
      if (x->call_id != y.call_id)
        return Str("part ", k, " result call_id ", x->call_id, " vs ", y.call_id);
      if (x->is_error != y.is_error) return Str("part ", k, " is_error");
      if (x->form != y.form) return Str("part ", k, " result form");
      if (x->extra != y.extra) return Str("part ", k, " result extra");
      if (x->content.size() != y.content.size()) return Str("part ", k, " result item count");
      for (std::size_t j = 0; j < x->content.size(); ++j) {
        if (x->content[j].index() != y.content[j].index())
          return Str("part ", k, " item ", j, " kind");
        if (const auto* tx = std::get_if<Text>(&x->content[j])) {
          const auto& ty = std::get<Text>(y.content[j]);
          if (tx->text != ty.text)
            return Str("part ", k, " item ", j, " text ", Preview(tx->text), " vs ",
                       Preview(ty.text));
          if (tx->extra != ty.extra) return Str("part ", k, " item ", j, " extra");
        } else if (!OpaqueEqual(std::get<Opaque>(x->content[j]), std::get<Opaque>(y.content[j]))) {
          return Str("part ", k, " item ", j, " opaque");
        }
      }
    } else if (!OpaqueEqual(std::get<Opaque>(pa), std::get<Opaque>(pb))) {
      return Str("part ", k, " opaque");
    }
  }
  return {};
}

inline bool SameMessage(const recap::Transcript& a, std::size_t i, const recap::Transcript& b,
                        std::size_t j) {
  return a.shared(i).get() == b.shared(j).get() || DiffMessages(a[i], b[j]).empty();
}

// Positions where two transcripts of equal size differ.
inline std::vector<std::size_t> ChangedMessages(const recap::Transcript& a,
                                                const recap::Transcript& b) {
  std::vector<std::size_t> out;
  for (std::size_t i = 0; i < a.size() && i < b.size(); ++i) {
    if (!SameMessage(a, i, b, i)) out.push_back(i);
  }
  return out;
}

inline std::string DiffTranscripts(const recap::Transcript& a, const recap::Transcript& b) {
  if (a.size() != b.size()) return Str("size ", a.size(), " vs ", b.size());
  for (std::size_t i = 0; i < a.size(); ++i) {
    if (a.shared(i).get() == b.shared(i).get()) continue;
    std::string d = DiffMessages(a[i], b[i]);
    if (!d.empty()) return Str("message ", i, ": ", d);
  }
  return {};
}

// SPEC §1 / message.h: a non-summary user message carrying a text or an unlinked opaque item.
inline bool RefIsTurnStart(const recap::Message& m) {
  if (m.role != recap::Role::kUser || m.summary) return false;
  for (const auto& p : m.parts) {
    if (std::holds_alternative<recap::Text>(p)) return true;
    if (const auto* o = std::get_if<recap::Opaque>(&p); o && o->link == recap::OpaqueLink::kNone)
      return true;
  }
  return false;
}

inline std::vector<std::size_t> RefTurnStarts(const recap::Transcript& t) {
  std::vector<std::size_t> out;
  for (std::size_t i = 0; i < t.size(); ++i) {
    if (RefIsTurnStart(t[i])) out.push_back(i);
  }
  return out;
}

inline bool RefHasToolCalls(const recap::Message& m) {
  for (const auto& p : m.parts) {
    if (std::holds_alternative<recap::ToolCall>(p)) return true;
    if (const auto* o = std::get_if<recap::Opaque>(&p); o && o->link == recap::OpaqueLink::kCall)
      return true;
  }
  return false;
}

// SPEC §1: code points of texts, tool names, arguments, result contents and opaque payloads.
inline std::size_t RefMessageChars(const recap::Message& m) {
  std::size_t n = 0;
  for (const auto& p : m.parts) {
    if (const auto* t = std::get_if<recap::Text>(&p)) {
      n += RefCountCodePoints(t->text);
    } else if (const auto* c = std::get_if<recap::ToolCall>(&p)) {
      n += RefCountCodePoints(c->name) + RefCountCodePoints(c->arguments);
    } else if (const auto* r = std::get_if<recap::ToolResult>(&p)) {
      for (const auto& item : r->content) {
        if (const auto* t = std::get_if<recap::Text>(&item))
          n += RefCountCodePoints(t->text);
        else
          n += RefCountCodePoints(std::get<recap::Opaque>(item).payload);
      }
    } else {
      n += RefCountCodePoints(std::get<recap::Opaque>(p).payload);
    }
  }
  return n;
}

// One line per message: position, role, flags and parts (T text, C call, R result, O opaque,
// with sizes in code points), for failure reports and replays.
inline std::string DescribeTranscript(const recap::Transcript& t) {
  std::string out;
  for (std::size_t i = 0; i < t.size(); ++i) {
    const recap::Message& m = t[i];
    out += Str("  [", i, "] ", RoleStr(m.role), m.summary ? " SUMMARY" : "",
               RefIsTurnStart(m) ? " TURN" : "", " ", m.id, " (", RefMessageChars(m), "):");
    for (const auto& p : m.parts) {
      if (const auto* x = std::get_if<recap::Text>(&p)) {
        out += Str(" T(", RefCountCodePoints(x->text), ")");
      } else if (const auto* c = std::get_if<recap::ToolCall>(&p)) {
        out += Str(" C(", c->id, " ", c->name, " ", RefCountCodePoints(c->arguments), ")");
      } else if (const auto* r = std::get_if<recap::ToolResult>(&p)) {
        out += Str(" R(", r->call_id, " items=", r->content.size(), ")");
      } else {
        const auto& o = std::get<recap::Opaque>(p);
        out += Str(" O(", o.kind,
                   o.link == recap::OpaqueLink::kCall     ? " call "
                   : o.link == recap::OpaqueLink::kResult ? " result "
                                                          : " ",
                   o.link_id, ")");
      }
    }
    out += "\n";
  }
  return out;
}

// ---------------------------------------------------------------------------------------------
// Reference pairing and safe boundaries (safe_boundary.h: a result answers the nearest earlier
// call with the same id; orphans constrain nothing)

struct RefCall {
  std::size_t message = 0;
  std::string id;
  std::string name;  // empty for opaque calls
  bool opaque = false;
  std::size_t results = 0;
};

struct RefPairing {
  std::vector<RefCall> calls;
  std::vector<std::pair<std::size_t, std::size_t>> pairs;  // (call message, result message)
  std::vector<std::pair<std::size_t, std::string>> orphans;
  std::vector<RefCall> Uncertain() const {
    std::vector<RefCall> out;
    for (const auto& c : calls) {
      if (c.results == 0) out.push_back(c);
    }
    return out;
  }
};

inline RefPairing RefPair(const recap::Transcript& t) {
  RefPairing p;
  std::unordered_map<std::string, std::size_t> last;  // id -> index in p.calls
  auto call = [&](std::size_t i, const std::string& id, const std::string& name, bool opaque) {
    last[id] = p.calls.size();
    p.calls.push_back(RefCall{i, id, name, opaque, 0});
  };
  auto result = [&](std::size_t i, const std::string& id) {
    auto it = last.find(id);
    if (it == last.end()) {
      p.orphans.emplace_back(i, id);
      return;
    }
    RefCall& c = p.calls[it->second];
    ++c.results;
    p.pairs.emplace_back(c.message, i);
  };
  for (std::size_t i = 0; i < t.size(); ++i) {
    for (const auto& part : t[i].parts) {
      if (const auto* c = std::get_if<recap::ToolCall>(&part)) {
        call(i, c->id, c->name, false);
      } else if (const auto* r = std::get_if<recap::ToolResult>(&part)) {
        result(i, r->call_id);
      } else if (const auto* o = std::get_if<recap::Opaque>(&part)) {
        if (o->link == recap::OpaqueLink::kCall)
          call(i, o->link_id, "", true);
        else if (o->link == recap::OpaqueLink::kResult)
          result(i, o->link_id);
      }
    }
  }
  return p;
}

// safe[p] for p in 0..n: no pair has its call before p and its result at or after p.
inline std::vector<bool> RefSafeBoundaries(std::size_t n, const RefPairing& pairing) {
  std::vector<int> delta(n + 2, 0);
  for (const auto& [c, r] : pairing.pairs) {
    if (c < r) {  // positions c+1 .. r are unsafe
      ++delta[c + 1];
      --delta[r + 1];
    }
  }
  std::vector<bool> safe(n + 1);
  int open = 0;
  for (std::size_t p = 0; p <= n; ++p) {
    open += delta[p];
    safe[p] = open == 0;
  }
  return safe;
}

// The greatest safe position <= x.
inline std::size_t MaxSafeAtMost(const std::vector<bool>& safe, std::size_t x) {
  while (x > 0 && !safe[x]) --x;
  return x;
}

// ---------------------------------------------------------------------------------------------
// Cutter

inline const char* SkipStr(recap::SkipReason r) {
  switch (r) {
    case recap::SkipReason::kNone: return "none";
    case recap::SkipReason::kNothingToSummarize: return "nothing_to_summarize";
    case recap::SkipReason::kNoSafeBoundary: return "no_safe_boundary";
    case recap::SkipReason::kUncertainToolResults: return "uncertain_tool_results";
  }
  return "?";
}

inline std::string OptionsStr(const recap::CutOptions& o) {
  return Str("{keep_turns=", o.keep_turns,
             ", mode=", o.mode == recap::CutMode::kBudget ? "budget" : "normal",
             ", kept_chars_limit=", o.kept_chars_limit, "}");
}

inline std::string DecisionStr(const recap::CutDecision& d) {
  return Str("{skip=", SkipStr(d.skip), ", position=", d.position,
             ", summarized=", d.summarized_chars, ", kept=", d.kept_chars,
             ", kept_turns=", d.kept_turns, ", inside_turn=", d.inside_turn,
             ", moved_for_size=", d.moved_for_size, ", uncertain=", d.uncertain.size(), "}");
}

// What is known about a transcript, computed once for all the cut options tried on it.
struct CutContext {
  explicit CutContext(const recap::Transcript& transcript)
      : t(transcript),
        pairing(RefPair(transcript)),
        safe(RefSafeBoundaries(transcript.size(), pairing)),
        turns(RefTurnStarts(transcript)),
        uncertain(pairing.Uncertain()) {}

  bool HasNonSummaryBefore(std::size_t p) const {
    for (std::size_t i = 0; i < p && i < t.size(); ++i) {
      if (!t[i].summary) return true;
    }
    return false;
  }
  std::size_t TurnsFrom(std::size_t p) const {
    return static_cast<std::size_t>(turns.end() - std::lower_bound(turns.begin(), turns.end(), p));
  }

  const recap::Transcript& t;
  RefPairing pairing;
  std::vector<bool> safe;
  std::vector<std::size_t> turns;
  std::vector<RefCall> uncertain;
};

// The cutter's building blocks against the reference scans: turn starts, tool calls, sizes,
// pairing, safe boundaries (compared where no call is uncertain, as the header's "0 and size()
// are always safe" and an unanswered call cannot both hold otherwise).
inline void CheckBuildingBlocks(const CutContext& c, Failures& f) {
  const recap::Transcript& t = c.t;
  const std::size_t n = t.size();
  std::vector<std::size_t> lib_turns = recap::FindTurnStarts(t);
  RECAP_EXPECT(f, lib_turns == c.turns, "FindTurnStarts differs from SPEC §1's turn definition (",
               lib_turns.size(), " vs ", c.turns.size(), " turn starts)");
  for (std::size_t i = 0; i < n; ++i) {
    if (recap::IsTurnStart(t[i]) != RefIsTurnStart(t[i])) {
      f.Add(Str("IsTurnStart(message ", i, ") disagrees with SPEC §1 (role ", RoleStr(t[i].role),
                ", summary ", t[i].summary, ")"));
      break;
    }
    if (recap::HasToolCalls(t[i]) != RefHasToolCalls(t[i])) {
      f.Add(Str("HasToolCalls(message ", i, ") wrong"));
      break;
    }
    if (recap::MessageChars(t[i]) != RefMessageChars(t[i]) || t.chars(i) != RefMessageChars(t[i])) {
      f.Add(Str("MessageChars(message ", i, ") = ", recap::MessageChars(t[i]),
                ", t.chars(i) = ", t.chars(i), ", reference ", RefMessageChars(t[i])));
      break;
    }
  }
  const recap::PairingReport report = recap::AnalyzePairing(t);
  RECAP_EXPECT(f, report.pairs == c.pairing.pairs.size(), "AnalyzePairing pairs ", report.pairs,
               " vs reference ", c.pairing.pairs.size());
  RECAP_EXPECT(f, report.uncertain.size() == c.uncertain.size(), "AnalyzePairing uncertain count ",
               report.uncertain.size(), " vs reference ", c.uncertain.size());
  RECAP_EXPECT(f, recap::FindUncertainToolCalls(t).size() == c.uncertain.size(),
               "FindUncertainToolCalls count");
  std::vector<std::pair<std::size_t, std::string>> orphans;
  for (const auto& o : report.orphans) orphans.emplace_back(o.message, o.call_id);
  auto ref_orphans = c.pairing.orphans;
  std::sort(orphans.begin(), orphans.end());
  std::sort(ref_orphans.begin(), ref_orphans.end());
  RECAP_EXPECT(f, orphans == ref_orphans, "AnalyzePairing orphans differ (", orphans.size(),
               " vs reference ", ref_orphans.size(), ")");
  if (c.uncertain.empty()) {
    const auto lib_safe = recap::FindSafeBoundaries(t);
    bool same = lib_safe.size() == n + 1;
    std::size_t at = 0;
    for (std::size_t p = 0; same && p <= n; ++p) {
      if ((lib_safe[p] != 0) != c.safe[p]) {
        same = false;
        at = p;
      }
    }
    RECAP_EXPECT(f, same, "FindSafeBoundaries differs from the reference at position ", at,
                 " (n=", n, ")");
  }
}

// Checks that hold for every decision (R3.4, R3.6, R3.7, R3.9 and the CutDecision fields).
inline void CheckCutGeneral(const CutContext& c, const recap::CutOptions& o,
                            const recap::CutDecision& d, Failures& f) {
  const recap::Transcript& t = c.t;
  const std::size_t n = t.size();
  const std::string ctx =
      Str(" (options ", OptionsStr(o), ", decision ", DecisionStr(d), ", n=", n, ")");

  // R3.7: uncertain tool calls, and only they, block the cut.
  if (!c.uncertain.empty()) {
    RECAP_EXPECT(f, d.skip == recap::SkipReason::kUncertainToolResults, "R3.7: transcript has ",
                 c.uncertain.size(), " uncertain call(s) (first ", c.uncertain[0].id,
                 " in message ", c.uncertain[0].message, ") but skip is ", SkipStr(d.skip), ctx);
    using Key = std::tuple<std::size_t, std::string, std::string>;
    std::vector<Key> want, got;
    for (const auto& u : c.uncertain) want.emplace_back(u.message, u.id, u.name);
    for (const auto& u : d.uncertain) got.emplace_back(u.message, u.call_id, u.name);
    std::sort(want.begin(), want.end());
    std::sort(got.begin(), got.end());
    if (d.skip == recap::SkipReason::kUncertainToolResults && want != got) {
      std::string w, g;
      for (const auto& [m, id, name] : want) w += Str("(", m, ",", id, ",", name, ") ");
      for (const auto& [m, id, name] : got) g += Str("(", m, ",", id, ",", name, ") ");
      f.Add(Str("R3.7: uncertain list differs: want ", w, "got ", g, ctx));
    }
    return;
  }
  RECAP_EXPECT(f, d.skip != recap::SkipReason::kUncertainToolResults,
               "R3.7: skip is uncertain_tool_results but every call has a result", ctx);
  RECAP_EXPECT(f, d.uncertain.empty(), "uncertain filled without kUncertainToolResults", ctx);
  RECAP_EXPECT(f, d.ok() == (d.skip == recap::SkipReason::kNone), "ok() mismatch", ctx);
  if (!d.ok()) return;

  const std::size_t p = d.position;
  RECAP_EXPECT(f, p > 0 && p < n, "R3.6/last message kept: position out of (0, n)", ctx);
  if (p == 0 || p >= n) return;
  const auto lib_safe = recap::FindSafeBoundaries(t);
  RECAP_EXPECT(f, lib_safe.size() == n + 1 && lib_safe[p],
               "FindSafeBoundaries(t)[position] is false", ctx);
  // R3.4 by the own pairing scan: no call/result pair on different sides.
  for (const auto& [cm, rm] : c.pairing.pairs) {
    if (cm < p && rm >= p) {
      f.Add(Str("R3.4: call in message ", cm, " summarized but its result in message ", rm, " kept",
                ctx));
      break;
    }
  }
  RECAP_EXPECT(f, c.safe[p], "R3.4: position is not a safe boundary by the reference scan", ctx);
  // Sizes.
  std::size_t ref_summarized = 0, ref_kept = 0;
  for (std::size_t i = 0; i < n; ++i) (i < p ? ref_summarized : ref_kept) += RefMessageChars(t[i]);
  RECAP_EXPECT(f, d.summarized_chars + d.kept_chars == t.chars(), "summarized + kept != t.chars()",
               ctx);
  RECAP_EXPECT(f, d.kept_chars == t.chars(p, n), "kept_chars != t.chars(position, n)", ctx);
  RECAP_EXPECT(f, d.summarized_chars == ref_summarized, "summarized_chars != reference count ",
               ref_summarized, ctx);
  RECAP_EXPECT(f, d.kept_chars == ref_kept, "kept_chars != reference count ", ref_kept, ctx);
  RECAP_EXPECT(f, d.kept_turns == c.TurnsFrom(p),
               "kept_turns != turn starts in [position, n) = ", c.TurnsFrom(p), ctx);
  // R3.5/R3.6: something other than checkpoints is summarized.
  RECAP_EXPECT(f, c.HasNonSummaryBefore(p), "R3.6: [0, position) holds only checkpoints", ctx);
  if (!c.turns.empty()) {
    RECAP_EXPECT(f, d.inside_turn == (p > c.turns.back()),
                 "inside_turn disagrees with position vs last turn start ", c.turns.back(), ctx);
  }
  // R3.4: the kept part is an exact suffix sharing the message objects.
  recap::Transcript kept = t.Slice(p, n);
  RECAP_EXPECT(f, kept.size() == n - p, "Slice size", ctx);
  if (kept.size() == n - p) {
    for (std::size_t i = 0; i < kept.size(); ++i) {
      if (kept.shared(i).get() != t.shared(p + i).get()) {
        f.Add(Str("R3.4: kept message ", i, " is not the transcript's message ", p + i, ctx));
        break;
      }
    }
    RECAP_EXPECT(f, kept.chars() == d.kept_chars, "Slice chars != kept_chars", ctx);
  }
}

// The last message of the last turn that carries tool calls (the newest tool-call round), if
// any after the turn's start.
inline std::optional<std::size_t> NewestRound(const CutContext& c) {
  if (c.turns.empty()) return std::nullopt;
  const std::size_t last = c.turns.back();
  for (std::size_t i = c.t.size(); i-- > last + 1;) {
    if (RefHasToolCalls(c.t[i])) return i;
  }
  return std::nullopt;
}

// The position that safe_boundary.h's comment for FindCut prescribes without a size limit, or
// nullopt where it leaves the answer open (no turns at all). A returned 0, or a position with
// only checkpoints before it, means the cut must be skipped.
inline std::optional<std::size_t> ExpectedBasePosition(const CutContext& c,
                                                       const recap::CutOptions& o,
                                                       const char** rule = nullptr,
                                                       std::size_t* anchor = nullptr) {
  const char* unused_rule;
  std::size_t unused_anchor;
  if (rule == nullptr) rule = &unused_rule;
  if (anchor == nullptr) anchor = &unused_anchor;
  const std::size_t T = c.turns.size();
  if (T == 0) return std::nullopt;
  const int k = std::clamp(o.keep_turns, 0, 20);
  if (o.mode == recap::CutMode::kNormal && k >= 1 && T > static_cast<std::size_t>(k)) {
    *rule = "R3.1 (start of the keep_turns-th last turn, or the nearest safe boundary before it)";
    *anchor = c.turns[T - static_cast<std::size_t>(k)];
    return MaxSafeAtMost(c.safe, *anchor);
  }
  if (o.mode == recap::CutMode::kNormal && k >= 1 && T >= 2) {
    *rule = "R3.2 (the last turn alone)";
    *anchor = c.turns[T - 1];
    return MaxSafeAtMost(c.safe, *anchor);
  }
  *rule = "R3.3 (inside the last turn, at or before its newest tool-call round)";
  // R3.3: inside the last turn, at the last safe boundary at or before its newest tool-call
  // round (the last message of the turn that calls a tool); none inside: the last turn whole.
  const std::size_t last = c.turns[T - 1];
  const std::size_t round = NewestRound(c).value_or(last);
  const std::size_t p = MaxSafeAtMost(c.safe, round);
  *anchor = p > last ? p : last;
  // "Kept whole" when the turn's own start is not a safe boundary: snapping back or skipping
  // are both readings of the header; leave it open.
  if (p <= last && !c.safe[last]) return std::nullopt;
  return p;
}

// Checks a decision made with kept_chars_limit == 0 against the position the header prescribes.
inline void CheckCutBase(const CutContext& c, const recap::CutOptions& o,
                         const recap::CutDecision& d, Failures& f) {
  if (!c.uncertain.empty()) return;
  const std::string ctx = Str(" (options ", OptionsStr(o), ", decision ", DecisionStr(d),
                              ", n=", c.t.size(), ", turn starts=", c.turns.size(), ")");
  RECAP_EXPECT(f, !d.moved_for_size, "moved_for_size without a size limit", ctx);
  const std::size_t T = c.turns.size();
  const int k = std::clamp(o.keep_turns, 0, 20);
  // R3.1 (the brief's form): enough turns are kept.
  if (d.ok() && o.mode == recap::CutMode::kNormal && k >= 1 && T > static_cast<std::size_t>(k)) {
    RECAP_EXPECT(f, c.TurnsFrom(d.position) >= static_cast<std::size_t>(k),
                 "R3.1: kept part holds ", c.TurnsFrom(d.position),
                 " turn starts, fewer than keep_turns", ctx);
  }
  // R3.3 (the header's "so that round is kept"): a cut inside the last turn keeps its newest
  // tool-call round.
  const bool inside_rule = o.mode == recap::CutMode::kBudget || k == 0 || T == 1;
  if (d.ok() && inside_rule && T >= 1) {
    if (const auto round = NewestRound(c); round && d.position > *round) {
      f.Add(Str("R3.3: the newest tool-call round (message ", *round,
                ") is summarized; the cut inside the last turn must keep it", ctx));
      return;  // the exact position below would only repeat this
    }
  }
  const char* rule = "";
  std::size_t anchor = 0;
  const auto expected = ExpectedBasePosition(c, o, &rule, &anchor);
  if (!expected) return;
  const std::size_t e = *expected;
  if (e > 0 && c.HasNonSummaryBefore(e)) {
    RECAP_EXPECT(f, d.ok() && d.position == e, rule, ": expected the cut at ", e, ctx);
  } else if (!c.HasNonSummaryBefore(anchor)) {
    // Nothing but checkpoints precedes where the cut should go.
    RECAP_EXPECT(f, d.skip == recap::SkipReason::kNothingToSummarize, rule,
                 " then R3.6: only checkpoints precede the cut at ", anchor,
                 "; expected nothing_to_summarize", ctx);
  } else {
    // There is history before the cut's place, but no safe boundary leaves any of it.
    RECAP_EXPECT(f, d.skip == recap::SkipReason::kNoSafeBoundary, rule,
                 " then R3.6: history precedes ", anchor,
                 " but the nearest safe boundary at or before it (", e,
                 ") leaves only checkpoints; expected no_safe_boundary", ctx);
  }
}

// Checks a decision made with a size limit against the one made without it (R3.8).
inline void CheckCutLimited(const CutContext& c, const recap::CutOptions& o,
                            const recap::CutDecision& d, const recap::CutDecision& base,
                            Failures& f) {
  if (!c.uncertain.empty() || !base.ok() || o.kept_chars_limit == 0) return;
  const std::size_t n = c.t.size();
  const std::size_t limit = o.kept_chars_limit;
  const std::string ctx = Str(" (options ", OptionsStr(o), ", decision ", DecisionStr(d),
                              ", unlimited decision ", DecisionStr(base), ", n=", n, ")");
  if (base.kept_chars < limit) {
    RECAP_EXPECT(
        f, d.ok() && d.position == base.position && !d.moved_for_size,
        "R3.8: the unlimited cut already keeps less than the limit, the limited one differs", ctx);
    return;
  }
  RECAP_EXPECT(f, d.ok(), "R3.8: moving the cut forward cannot make it fail", ctx);
  if (!d.ok()) return;
  RECAP_EXPECT(f, d.position >= base.position, "R3.8: the cut moved backwards", ctx);
  RECAP_EXPECT(f, d.moved_for_size == (d.position != base.position),
               "moved_for_size disagrees with the move", ctx);
  if (d.kept_chars >= limit) {
    for (std::size_t q = d.position + 1; q < n; ++q) {
      if (c.safe[q]) {
        f.Add(Str("R3.8: kept part (", d.kept_chars, ") still reaches the limit but safe boundary ",
                  q, " (kept ", c.t.chars(q, n), ") is left", ctx));
        break;
      }
    }
  }
  // The cut goes no further than the first candidate (a turn start that is a safe boundary,
  // then any safe boundary inside the last turn) that brings the kept part under. A moved cut
  // is such a candidate or a turn start snapped back to the nearest safe boundary.
  if (!c.turns.empty()) {
    std::vector<std::size_t> candidates, allowed;
    for (std::size_t s : c.turns) {
      if (c.safe[s]) candidates.push_back(s);
      allowed.push_back(MaxSafeAtMost(c.safe, s));
    }
    for (std::size_t q = c.turns.back() + 1; q < n; ++q) {
      if (c.safe[q]) candidates.push_back(q);
    }
    allowed.insert(allowed.end(), candidates.begin(), candidates.end());
    std::sort(candidates.begin(), candidates.end());
    std::sort(allowed.begin(), allowed.end());
    for (std::size_t q : candidates) {
      if (q > base.position && q < d.position && c.t.chars(q, n) < limit) {
        f.Add(Str("R3.8: moved past candidate ", q, " whose kept part (", c.t.chars(q, n),
                  ") is already under the limit", ctx));
        break;
      }
    }
    if (d.position != base.position) {
      RECAP_EXPECT(f, std::binary_search(allowed.begin(), allowed.end(), d.position),
                   "R3.8: the moved cut is neither a (snapped) turn start nor inside the last turn",
                   ctx);
    }
  }
}

// ---------------------------------------------------------------------------------------------
// Reducer

enum class ItemKind { kContent, kToolResultText, kArguments };

// The strings the reducer may clip in one message, in order, with the caps they obey.
struct ItemRef {
  ItemKind kind;
  std::size_t part;
  std::size_t item;  // index inside a ToolResult, else 0
  const std::string* text;
};

inline std::vector<ItemRef> ClippableItems(const recap::Message& m) {
  std::vector<ItemRef> out;
  for (std::size_t k = 0; k < m.parts.size(); ++k) {
    const auto& p = m.parts[k];
    if (const auto* t = std::get_if<recap::Text>(&p)) {
      out.push_back({ItemKind::kContent, k, 0, &t->text});
    } else if (const auto* c = std::get_if<recap::ToolCall>(&p)) {
      out.push_back({ItemKind::kArguments, k, 0, &c->arguments});
    } else if (const auto* r = std::get_if<recap::ToolResult>(&p)) {
      for (std::size_t j = 0; j < r->content.size(); ++j) {
        if (const auto* t = std::get_if<recap::Text>(&r->content[j])) {
          out.push_back({ItemKind::kToolResultText, k, j, &t->text});
        }
      }
    }
  }
  return out;
}

inline std::size_t CapOf(ItemKind kind, int round /* 1..5 */) {
  const auto i = static_cast<std::size_t>(round - 1);
  return kind == ItemKind::kToolResultText ? recap::kToolResultCaps[i] : recap::kContentCaps[i];
}

inline bool JsonValid(const std::string& s) { return nlohmann::json::accept(s); }

// Code points a valid JSON text can be shrunk to by clipping its string values (keys and
// non-string values stay), generously: every string value is counted at min(its dumped size,
// 40) — a clipped value is at least the marker (31) plus quotes — and the larger of the compact
// and the indented form is taken, plus slack.
inline std::size_t ArgumentsFloor(const nlohmann::json& j) {
  std::size_t strings_full = 0, strings_min = 0;
  std::vector<const nlohmann::json*> stack{&j};
  while (!stack.empty()) {
    const nlohmann::json* v = stack.back();
    stack.pop_back();
    if (v->is_string()) {
      const std::size_t len = RefCountCodePoints(v->dump());
      strings_full += len;
      strings_min += std::min<std::size_t>(len, 40);
    } else if (v->is_structured()) {
      for (const auto& x : *v) stack.push_back(&x);
    }
  }
  const std::size_t compact = RefCountCodePoints(j.dump());
  const std::size_t indented = RefCountCodePoints(j.dump(2));
  return std::max(compact, indented) - strings_full + strings_min + 16;
}

inline std::optional<std::size_t> ArgumentsFloor(const std::string& arguments) {
  nlohmann::json j = nlohmann::json::parse(arguments, nullptr, false);
  if (j.is_discarded()) return std::nullopt;
  // A string value is clipped only when it is longer than the marker plus one code point
  // (tail_reducer.h: "until no string can be shortened further"). Arguments without such a
  // string cannot shrink, however their text is laid out (indentation, \u escapes): their
  // floor is their own size.
  std::size_t longest = 0;
  std::vector<const nlohmann::json*> stack{&j};
  while (!stack.empty()) {
    const nlohmann::json* v = stack.back();
    stack.pop_back();
    if (v->is_string()) {
      longest = std::max(longest, RefCountCodePoints(v->get_ref<const std::string&>()));
    } else if (v->is_structured()) {
      for (const auto& x : *v) stack.push_back(&x);
    }
  }
  if (longest <= RefCountCodePoints(recap::kTruncationMarker) + 1) {
    return RefCountCodePoints(arguments);
  }
  return ArgumentsFloor(j);
}

// `now` is `before` clipped: a prefix of it (at a code point boundary) followed by the marker.
inline void CheckClippedText(std::string_view before, std::string_view now, std::size_t cap,
                             const std::string& what, Failures& f) {
  RECAP_EXPECT(f, RefIsValidUtf8(now), "R6.3: ", what, " is not valid UTF-8 after clipping");
  RECAP_EXPECT(f, RefCountCodePoints(now) <= cap, "R6.3: ", what, " has ", RefCountCodePoints(now),
               " code points, over its cap ", cap);
  const std::string_view marker = recap::kTruncationMarker;
  if (CountOccurrences(before, marker) == 0) {
    RECAP_EXPECT(f, EndsWith(now, marker) && CountOccurrences(now, marker) == 1,
                 "R6.3/R6.4: ", what, " does not end with the marker exactly once: ",
                 Preview(now.substr(now.size() > 80 ? now.size() - 80 : 0)));
  }
  if (EndsWith(now, marker)) {
    const std::string_view prefix = now.substr(0, now.size() - marker.size());
    RECAP_EXPECT(f, before.substr(0, prefix.size()) == prefix, "R6.3: ", what,
                 " is not a prefix of the original plus the marker");
    RECAP_EXPECT(f, RefIsValidUtf8(prefix), "R6.3: ", what, " kept prefix splits a UTF-8 sequence");
  }
}

// Compares clipped JSON arguments to the original: same structure, strings equal or clipped.
inline void CheckJsonStructure(const nlohmann::json& a, const nlohmann::json& b,
                               const std::string& path, const std::string& what, Failures& f) {
  if (a.is_number() && b.is_number()) {
    RECAP_EXPECT(f, a == b, "R6.3: ", what, " number changed at ", path, ": ", a.dump(), " -> ",
                 b.dump());
    return;
  }
  if (a.type() != b.type()) {
    f.Add(Str("R6.3: ", what, " JSON type changed at ", path, ": ", a.type_name(), " -> ",
              b.type_name()));
    return;
  }
  if (a.is_object()) {
    RECAP_EXPECT(f, a.size() == b.size(), "R6.3: ", what, " object size changed at ", path);
    for (auto it = a.begin(); it != a.end(); ++it) {
      auto jt = b.find(it.key());
      if (jt == b.end()) {
        f.Add(Str("R6.3: ", what, " lost key ", it.key(), " at ", path));
        continue;
      }
      CheckJsonStructure(it.value(), *jt, path + "/" + it.key(), what, f);
    }
  } else if (a.is_array()) {
    RECAP_EXPECT(f, a.size() == b.size(), "R6.3: ", what, " array length changed at ", path);
    for (std::size_t i = 0; i < a.size() && i < b.size(); ++i) {
      CheckJsonStructure(a[i], b[i], path + "/" + std::to_string(i), what, f);
    }
  } else if (a.is_string()) {
    const auto& sa = a.get_ref<const std::string&>();
    const auto& sb = b.get_ref<const std::string&>();
    if (sa != sb) {
      const std::string_view marker = recap::kTruncationMarker;
      RECAP_EXPECT(f,
                   EndsWith(sb, marker) &&
                       (CountOccurrences(sa, marker) > 0 || CountOccurrences(sb, marker) == 1),
                   "R6.3: ", what, " string at ", path,
                   " changed without ending in the marker once: ", Preview(sb));
      if (EndsWith(sb, marker)) {
        const std::string_view prefix = std::string_view(sb).substr(0, sb.size() - marker.size());
        RECAP_EXPECT(f, std::string_view(sa).substr(0, prefix.size()) == prefix, "R6.3: ", what,
                     " string at ", path, " is not a prefix of the original plus the marker");
      }
    }
  } else {
    RECAP_EXPECT(f, a == b, "R6.3: ", what, " value changed at ", path);
  }
}

// `now` is `before` after ClipArguments or the reducer: valid JSON stays valid with the same
// structure, invalid JSON is clipped like a text.
inline void CheckClippedArguments(const std::string& before, const std::string& now,
                                  std::size_t cap, const std::string& what, Failures& f) {
  RECAP_EXPECT(f, RefIsValidUtf8(now), "R6.3: ", what, " is not valid UTF-8 after clipping");
  nlohmann::json a = nlohmann::json::parse(before, nullptr, false);
  if (a.is_discarded()) {
    CheckClippedText(before, now, cap, what + " (invalid JSON)", f);
    return;
  }
  nlohmann::json b = nlohmann::json::parse(now, nullptr, false);
  if (b.is_discarded()) {
    f.Add(Str("R6.3: ", what, " was valid JSON and is not after clipping: ", Preview(now)));
    return;
  }
  CheckJsonStructure(a, b, "", what, f);
  const std::size_t floor = ArgumentsFloor(a);
  if (floor <= cap) {
    RECAP_EXPECT(f, RefCountCodePoints(now) <= cap, "R6.3: ", what, " has ",
                 RefCountCodePoints(now), " code points, over its cap ", cap,
                 " though clipping strings could reach ", floor);
  }
}

// True when `text` (an item of kind `kind`) is within `cap`, or is JSON arguments that clipping
// strings cannot bring under it.
inline bool WithinCap(ItemKind kind, const std::string& text, std::size_t cap) {
  if (RefCountCodePoints(text) <= cap) return true;
  if (kind != ItemKind::kArguments) return false;
  const auto floor = ArgumentsFloor(text);
  return floor && *floor > cap;
}

// Every non-summary item of `t` is within the caps of `round` (all rounds up to it completed).
inline void CheckRoundComplete(const recap::Transcript& t, int round, const std::string& why,
                               Failures& f) {
  for (std::size_t i = 0; i < t.size(); ++i) {
    if (t[i].summary) continue;
    for (const auto& item : ClippableItems(t[i])) {
      const std::size_t cap = CapOf(item.kind, round);
      if (!WithinCap(item.kind, *item.text, cap)) {
        f.Add(Str("R6.2: ", why, ": round ", round, " completed but message ", i, " part ",
                  item.part, " item ", item.item, " still has ", RefCountCodePoints(*item.text),
                  " code points (cap ", cap, ")"));
        return;
      }
    }
  }
}

inline std::string ResultStr(const recap::ReduceResult& r) {
  return Str("{clipped=", r.clipped.size(), ", clips=", r.clips, ", before=", r.before_chars,
             ", after=", r.after_chars, ", rounds=", r.rounds, ", fits=", r.fits, "}");
}

// Checks one ReduceTail(t, target) result against the contract (R6.2-R6.4).
inline void CheckReduce(const recap::Transcript& t, std::size_t target,
                        const recap::ReduceResult& r, Failures& f) {
  const std::string ctx =
      Str(" (target ", target, ", result ", ResultStr(r), ", n=", t.size(), ")");
  const recap::Transcript& out = r.transcript;
  RECAP_EXPECT(f, out.size() == t.size(), "R6.4: message count changed", ctx);
  if (out.size() != t.size()) return;
  RECAP_EXPECT(f, r.before_chars == t.chars(), "before_chars != t.chars()", ctx);
  RECAP_EXPECT(f, r.after_chars == out.chars(), "after_chars != result.transcript.chars()", ctx);
  // Reference size: unchanged messages as the input measured them, changed ones recounted.
  std::size_t ref_after = t.chars();
  for (std::size_t i = 0; i < t.size(); ++i) {
    if (out.shared(i).get() != t.shared(i).get())
      ref_after = ref_after - t.chars(i) + RefMessageChars(out[i]);
  }
  RECAP_EXPECT(f, r.after_chars == ref_after, "after_chars != reference count ", ref_after, ctx);
  RECAP_EXPECT(f, r.fits == (r.after_chars <= target), "fits != (after_chars <= target)", ctx);
  RECAP_EXPECT(f, r.after_chars <= r.before_chars, "the reducer grew the transcript", ctx);
  RECAP_EXPECT(f, r.rounds >= 0 && r.rounds <= 5, "rounds out of 0..5", ctx);
  if (r.before_chars <= target) {
    RECAP_EXPECT(f, r.rounds == 0 && r.clipped.empty() && r.clips == 0 && r.fits,
                 "already fitting, yet reduced", ctx);
  } else {
    RECAP_EXPECT(f, r.rounds >= 1, "over target but no round ran", ctx);
  }
  if (!r.fits) {
    RECAP_EXPECT(f, r.rounds == 5, "R6.2: does not fit but stopped before the last round", ctx);
  }
  RECAP_EXPECT(f,
               std::is_sorted(r.clipped.begin(), r.clipped.end()) &&
                   std::adjacent_find(r.clipped.begin(), r.clipped.end()) == r.clipped.end(),
               "clipped is not strictly ascending", ctx);
  RECAP_EXPECT(f, r.clips >= r.clipped.size() && (r.clips == 0) == r.clipped.empty(),
               "clips inconsistent with clipped", ctx);

  const int rounds = std::clamp(r.rounds, 1, 5);
  std::vector<std::size_t> changed;
  for (std::size_t i = 0; i < t.size(); ++i) {
    const recap::Message& a = t[i];
    const recap::Message& b = out[i];
    if (out.shared(i).get() == t.shared(i).get()) continue;
    const std::string diff = DiffMessages(a, b);
    if (diff.empty()) {
      f.Add(Str("message ", i, " is unchanged but not shared with the input", ctx));
      continue;
    }
    changed.push_back(i);
    const std::string where = Str("message ", i);
    // R6.4: only content changes.
    if (a.id != b.id || a.role != b.role || a.summary != b.summary || a.form != b.form ||
        a.extra != b.extra || a.parts.size() != b.parts.size()) {
      f.Add(Str("R6.4: ", where, " changed beyond content: ", diff, ctx));
      continue;
    }
    if (a.summary) {
      f.Add(Str("R4.4/R6.4: checkpoint ", where, " was altered: ", diff, ctx));
      continue;
    }
    for (std::size_t k = 0; k < a.parts.size(); ++k) {
      const auto& pa = a.parts[k];
      const auto& pb = b.parts[k];
      const std::string wp = Str(where, " part ", k);
      if (pa.index() != pb.index()) {
        f.Add(Str("R6.4: ", wp, " changed kind", ctx));
        continue;
      }
      if (const auto* x = std::get_if<recap::Text>(&pa)) {
        const auto& y = std::get<recap::Text>(pb);
        RECAP_EXPECT(f, x->extra == y.extra, "R6.4: ", wp, " text extra changed", ctx);
        if (x->text != y.text) {
          CheckClippedText(x->text, y.text, CapOf(ItemKind::kContent, 1), wp + " text", f);
          // Clipped only if over a cap that ran (for tool messages allow the smaller tool caps).
          const std::size_t lowest = a.role == recap::Role::kTool
                                         ? CapOf(ItemKind::kToolResultText, rounds)
                                         : CapOf(ItemKind::kContent, rounds);
          RECAP_EXPECT(f, RefCountCodePoints(x->text) > lowest, "R6.4: ", wp,
                       " text was within every cap that ran yet changed", ctx);
        }
      } else if (const auto* x = std::get_if<recap::ToolCall>(&pa)) {
        const auto& y = std::get<recap::ToolCall>(pb);
        RECAP_EXPECT(f, x->id == y.id && x->name == y.name && x->extra == y.extra, "R6.4: ", wp,
                     " tool call id/name/extra changed", ctx);
        if (x->arguments != y.arguments) {
          CheckClippedArguments(x->arguments, y.arguments, CapOf(ItemKind::kArguments, 1),
                                wp + " arguments", f);
          RECAP_EXPECT(f, RefCountCodePoints(x->arguments) > CapOf(ItemKind::kArguments, rounds),
                       "R6.4: ", wp, " arguments were within every cap that ran yet changed", ctx);
        }
      } else if (const auto* x = std::get_if<recap::ToolResult>(&pa)) {
        const auto& y = std::get<recap::ToolResult>(pb);
        RECAP_EXPECT(f,
                     x->call_id == y.call_id && x->is_error == y.is_error && x->form == y.form &&
                         x->extra == y.extra,
                     "R6.4: ", wp, " result call_id/is_error/form/extra changed", ctx);
        if (x->content.size() != y.content.size()) {
          f.Add(Str("R6.4: ", wp, " result item count changed", ctx));
          continue;
        }
        for (std::size_t j = 0; j < x->content.size(); ++j) {
          const std::string wi = Str(wp, " item ", j);
          if (x->content[j].index() != y.content[j].index()) {
            f.Add(Str("R6.4: ", wi, " changed kind", ctx));
          } else if (const auto* tx = std::get_if<recap::Text>(&x->content[j])) {
            const auto& ty = std::get<recap::Text>(y.content[j]);
            RECAP_EXPECT(f, tx->extra == ty.extra, "R6.4: ", wi, " extra changed", ctx);
            if (tx->text != ty.text) {
              CheckClippedText(tx->text, ty.text, CapOf(ItemKind::kToolResultText, 1), wi + " text",
                               f);
              RECAP_EXPECT(f,
                           RefCountCodePoints(tx->text) > CapOf(ItemKind::kToolResultText, rounds),
                           "R6.4: ", wi, " was within every cap that ran yet changed", ctx);
            }
          } else {
            RECAP_EXPECT(f,
                         OpaqueEqual(std::get<recap::Opaque>(x->content[j]),
                                     std::get<recap::Opaque>(y.content[j])),
                         "R6.4: opaque ", wi, " altered", ctx);
          }
        }
      } else {
        RECAP_EXPECT(f, OpaqueEqual(std::get<recap::Opaque>(pa), std::get<recap::Opaque>(pb)),
                     "R6.4: opaque ", wp, " altered", ctx);
      }
    }
  }
  RECAP_EXPECT(f, changed == r.clipped, "clipped does not list exactly the changed messages (",
               changed.size(), " changed, ", r.clipped.size(), " listed)", ctx);
  // Rounds before the last one completed: nothing over their caps is left.
  if (r.rounds >= 2) CheckRoundComplete(out, r.rounds - 1, "earlier rounds", f);
  if (!r.fits) CheckRoundComplete(out, 5, "does not fit", f);
}

// R6.4 idempotence: reducing the result again to the same target changes nothing.
inline void CheckReduceIdempotent(const recap::ReduceResult& r, std::size_t target, Failures& f) {
  recap::ReduceResult again = recap::ReduceTail(r.transcript, target);
  const std::string d = DiffTranscripts(r.transcript, again.transcript);
  RECAP_EXPECT(f, d.empty() && again.clipped.empty(), "R6.4: reducing the result again to ", target,
               " changed it: ", d, " (second result ", ResultStr(again), ")");
  RECAP_EXPECT(f, again.after_chars == r.after_chars, "R6.4: second reduction changed the size");
}

// The reduction sequence, one clip at a time: ReduceTail(t, s - 1) for the current size s must
// change exactly one more message than the previous state (the reducer stops the moment the
// transcript fits: no clip is made after the target was reached), rounds never go back, each
// round clips its messages largest first (size at the start of the round; ties: earlier first),
// a round ends only when nothing is over its cap, and ReduceTail at any target lands on the
// first state of the sequence that fits. Returns the states (index 0 = t) when the walk
// completed within max_steps.
struct WalkResult {
  bool complete = false;
  std::vector<recap::Transcript> states;
  std::vector<std::size_t> chars;
};

inline WalkResult WalkReduction(const recap::Transcript& t, std::size_t max_steps, Failures& f) {
  WalkResult w;
  w.states.push_back(t);
  w.chars.push_back(t.chars());
  int round = 0;
  recap::Transcript round_start = t;
  std::size_t last_size = 0, last_msg = 0;  // previous clip in this round
  for (std::size_t step = 1; step <= max_steps; ++step) {
    const recap::Transcript& prev = w.states.back();
    const std::size_t prev_chars = w.chars.back();
    if (prev_chars == 0) {
      w.complete = true;
      break;
    }
    const std::size_t x = prev_chars - 1;
    recap::ReduceResult r = recap::ReduceTail(t, x);
    const std::string ctx =
        Str(" (walk step ", step, ", target ", x, ", result ", ResultStr(r), ")");
    if (r.after_chars >= prev_chars) {  // nothing more can be clipped
      RECAP_EXPECT(f, !r.fits && r.rounds == 5,
                   "R6.2: no further clip possible, expected all rounds run", ctx);
      const std::string d = DiffTranscripts(prev, r.transcript);
      RECAP_EXPECT(f, d.empty(), "R6.2: the final state differs from the last clip's state: ", d,
                   ctx);
      CheckRoundComplete(r.transcript, 5, "walk end", f);
      w.complete = true;
      break;
    }
    RECAP_EXPECT(f, r.fits, "R6.2: one clip brought it under, yet fits is false", ctx);
    const auto changed = ChangedMessages(prev, r.transcript);
    if (changed.size() != 1) {
      std::string list;
      for (auto i : changed) list += Str(i, " ");
      f.Add(Str("R6.2: the reducer must stop the moment the transcript fits: ", changed.size(),
                " messages changed since the previous state (", list, ")", ctx));
      return w;
    }
    RECAP_EXPECT(f, r.clips == step, "clips should count one operation per step: expected ", step,
                 ctx);
    RECAP_EXPECT(f, r.rounds >= round, "R6.2: rounds went back from ", round, ctx);
    const std::size_t m = changed[0];
    if (r.rounds > round) {
      if (r.rounds >= 2) CheckRoundComplete(prev, r.rounds - 1, Str("walk step ", step), f);
      round = r.rounds;
      round_start = prev;
      last_size = 0;
    }
    // The clipped message had something over this round's cap; after the clip nothing is.
    bool over = false;
    for (const auto& item : ClippableItems(prev[m]))
      over |= RefCountCodePoints(*item.text) > CapOf(item.kind, round);
    RECAP_EXPECT(f, over, "R6.2: message ", m, " clipped in round ", round,
                 " had nothing over the round's cap", ctx);
    for (const auto& item : ClippableItems(r.transcript[m])) {
      RECAP_EXPECT(f, WithinCap(item.kind, *item.text, CapOf(item.kind, round)), "R6.2: message ",
                   m, " still over the cap of round ", round, " after its clip", ctx);
    }
    RECAP_EXPECT(f, !prev[m].summary, "R4.4: checkpoint message ", m, " clipped", ctx);
    // Largest first, ties earlier first.
    const std::size_t size = round_start.chars(m);
    if (last_size != 0) {
      RECAP_EXPECT(f, size < last_size || (size == last_size && m > last_msg),
                   "R6.2: largest first violated in round ", round, ": message ", m, " (", size,
                   " chars at round start) clipped after message ", last_msg, " (", last_size, ")",
                   ctx);
    }
    last_size = size;
    last_msg = m;
    w.states.push_back(r.transcript);
    w.chars.push_back(r.after_chars);
  }
  if (w.complete) {
    recap::ReduceResult all = recap::ReduceTail(t, 0);
    const std::string d = DiffTranscripts(all.transcript, w.states.back());
    RECAP_EXPECT(f, d.empty(), "ReduceTail(t, 0) differs from the walk's last state: ", d);
  }
  return w;
}

// The first step of the clip sequence, cheap enough for every case: reducing to one character
// below the size changes exactly one message (the reducer stops the moment it fits), and that
// message is the largest (ties: the earliest) of those with something over the cap of the first
// round that had any.
inline void CheckFirstClip(const recap::Transcript& t, Failures& f) {
  if (t.chars() == 0) return;
  const std::size_t x = t.chars() - 1;
  const recap::ReduceResult r = recap::ReduceTail(t, x);
  const std::string ctx = Str(" (first clip: target ", x, ", result ", ResultStr(r), ")");
  if (r.after_chars >= t.chars()) {  // nothing clippable at all
    RECAP_EXPECT(f, r.clipped.empty() && r.rounds == 5 && !r.fits,
                 "R6.2: nothing clipped yet not all rounds ran", ctx);
    return;
  }
  const auto changed = ChangedMessages(t, r.transcript);
  RECAP_EXPECT(f, changed.size() == 1 && r.clips == 1 && r.fits,
               "R6.2: reducing to one below the size must clip exactly one message, ",
               changed.size(), " changed", ctx);
  if (changed.size() != 1 || r.rounds < 1) return;
  std::optional<std::size_t> largest;
  for (std::size_t i = 0; i < t.size(); ++i) {
    if (t[i].summary) continue;
    bool over = false;
    for (const auto& item : ClippableItems(t[i])) {
      const std::size_t cap = CapOf(item.kind, r.rounds);
      const std::size_t cps = RefCountCodePoints(*item.text);
      // Arguments whose structure alone is over the cap may not shrink; clipping such a
      // message changes nothing and is not a clip.
      over |= cps > cap && (item.kind != ItemKind::kArguments ||
                            RefCountCodePoints(recap::ClipArguments(*item.text, cap)) < cps);
    }
    if (over && (!largest || t.chars(i) > t.chars(*largest))) largest = i;
  }
  RECAP_EXPECT(f, largest && changed[0] == *largest, "R6.2: the first clip (round ", r.rounds,
               ") went to message ", changed[0], " (", t.chars(changed[0]),
               " chars), not to the largest over-cap message ", largest.value_or(SIZE_MAX), " (",
               largest ? t.chars(*largest) : 0, " chars)", ctx);
}

// ReduceTail(t, target) must land on the first state of the walk whose size fits.
inline void CheckAgainstWalk(const WalkResult& w, std::size_t target, const recap::ReduceResult& r,
                             Failures& f) {
  if (!w.complete) return;
  std::size_t j = 0;
  while (j + 1 < w.states.size() && w.chars[j] > target) ++j;
  const std::string d = DiffTranscripts(w.states[j], r.transcript);
  RECAP_EXPECT(f, d.empty(), "R6.2: ReduceTail at target ", target,
               " is not the first state of the clip sequence that fits (state ", j, " of ",
               w.states.size() - 1, "): ", d);
}

}  // namespace recap_test

#endif  // RECAP_TESTS_SUPPORT_INVARIANTS_H_
