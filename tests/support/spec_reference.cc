// The reference cutter and reducer of spec_reference.h. Read that header first: it lists the
// interpretation of every open detail. The code below is written for obviousness, not speed.
#include "support/spec_reference.h"

#include <algorithm>
#include <sstream>
#include <string_view>
#include <variant>

#include "recap/measure.h"

namespace recap_spec {

using recap::Message;
using recap::Opaque;
using recap::OpaqueLink;
using recap::Part;
using recap::Text;
using recap::ToolCall;
using recap::ToolResult;

namespace {

std::size_t Cp(std::string_view s) { return recap::CountCodePoints(s); }

// One call or one result, in transcript order (message, then part).
struct Event {
  std::size_t message = 0;
  bool is_call = false;
  std::string id;
  std::string name;  // calls: the tool's name (empty for opaque calls)
  bool answered = false;
};

std::vector<Event> Events(const recap::Transcript& t) {
  std::vector<Event> events;
  for (std::size_t i = 0; i < t.size(); ++i) {
    for (const Part& part : t[i].parts) {
      if (const auto* c = std::get_if<ToolCall>(&part)) {
        events.push_back(Event{i, true, c->id, c->name, false});
      } else if (const auto* r = std::get_if<ToolResult>(&part)) {
        events.push_back(Event{i, false, r->call_id, {}, false});
      } else if (const auto* o = std::get_if<Opaque>(&part)) {
        if (o->link == OpaqueLink::kCall) events.push_back(Event{i, true, o->link_id, {}, false});
        if (o->link == OpaqueLink::kResult)
          events.push_back(Event{i, false, o->link_id, {}, false});
      }
    }
  }
  return events;
}

bool CallsTool(const Message& m) {
  for (const Part& part : m.parts) {
    if (std::holds_alternative<ToolCall>(part)) return true;
    if (const auto* o = std::get_if<Opaque>(&part); o != nullptr && o->link == OpaqueLink::kCall)
      return true;
  }
  return false;
}

const char* RoleLetter(recap::Role r) {
  switch (r) {
    case recap::Role::kSystem: return "sys";
    case recap::Role::kUser: return "usr";
    case recap::Role::kAssistant: return "ast";
    case recap::Role::kTool: return "tool";
  }
  return "?";
}

const char* SkipName(recap::SkipReason r) {
  switch (r) {
    case recap::SkipReason::kNone: return "none";
    case recap::SkipReason::kNothingToSummarize: return "nothing_to_summarize";
    case recap::SkipReason::kNoSafeBoundary: return "no_safe_boundary";
    case recap::SkipReason::kUncertainToolResults: return "uncertain_tool_results";
  }
  return "?";
}

}  // namespace

std::size_t Chars(const Message& m) {
  std::size_t n = 0;
  for (const Part& part : m.parts) {
    if (const auto* x = std::get_if<Text>(&part)) {
      n += Cp(x->text);
    } else if (const auto* c = std::get_if<ToolCall>(&part)) {
      n += Cp(c->name) + Cp(c->arguments);
    } else if (const auto* r = std::get_if<ToolResult>(&part)) {
      for (const auto& item : r->content) {
        if (const auto* it = std::get_if<Text>(&item)) {
          n += Cp(it->text);
        } else {
          n += Cp(std::get<Opaque>(item).payload);
        }
      }
    } else {
      n += Cp(std::get<Opaque>(part).payload);
    }
  }
  return n;
}

// ---------------------------------------------------------------------------------------------
// Cutter

ReferenceCutter::ReferenceCutter(const recap::Transcript& t) : n_(t.size()) {
  for (std::size_t i = 0; i < n_; ++i) {
    chars_.push_back(Chars(t[i]));
    summary_.push_back(t[i].summary);
    calls_tool_.push_back(CallsTool(t[i]));
    if (recap::IsTurnStart(t[i])) turns_.push_back(i);
  }
  // Pairing: each result answers the nearest earlier call with its id (quadratic scan back).
  std::vector<Event> events = Events(t);
  for (std::size_t e = 0; e < events.size(); ++e) {
    if (events[e].is_call) continue;
    for (std::size_t k = e; k-- > 0;) {
      if (events[k].is_call && events[k].id == events[e].id) {
        events[k].answered = true;
        pairs_.push_back(Pair{events[k].message, events[e].message});
        break;
      }
    }
  }
  for (const Event& ev : events) {
    if (ev.is_call && !ev.answered)
      uncertain_.push_back(recap::UncertainCall{ev.message, ev.id, ev.name});
  }
  // Safe boundaries straight from the definition, position by position.
  for (std::size_t p = 0; p <= n_; ++p) {
    bool safe = true;
    for (const Pair& pr : pairs_) {
      if (pr.call < p && p <= pr.result) safe = false;  // the call before p, its result not
    }
    for (const auto& u : uncertain_) {
      if (u.message < p) safe = false;  // a call before p without a result before p
    }
    safe_.push_back(p == 0 || safe);
    bool summarizes_something = false;
    for (std::size_t i = 0; i < p; ++i) summarizes_something = summarizes_something || !summary_[i];
    usable_.push_back(p > 0 && p < n_ && safe && summarizes_something);
  }
}

bool ReferenceCutter::Safe(std::size_t p) const { return safe_[p]; }

std::size_t ReferenceCutter::KeptChars(std::size_t p) const {
  std::size_t s = 0;
  for (std::size_t i = p; i < n_; ++i) s += chars_[i];
  return s;
}

recap::CutDecision ReferenceCutter::Decide(const recap::CutOptions& options,
                                           KeptWholeStart kept_whole,
                                           bool* unusable_turn_start) const {
  if (unusable_turn_start != nullptr) *unusable_turn_start = false;
  recap::CutDecision d;
  if (n_ == 0) {
    d.skip = recap::SkipReason::kNothingToSummarize;
    return d;
  }
  if (!uncertain_.empty()) {  // R3.7
    d.skip = recap::SkipReason::kUncertainToolResults;
    d.uncertain = uncertain_;
    return d;
  }
  const std::size_t keep = static_cast<std::size_t>(std::min(20, std::max(0, options.keep_turns)));
  const std::size_t turn_count = turns_.size();
  const std::size_t last = turn_count == 0 ? 0 : turns_.back();

  std::size_t p = 0;  // 0: no cut found
  if (options.mode == recap::CutMode::kBudget || keep == 0 || turn_count <= 1) {
    // R3.3: inside the last turn, keeping its newest tool-call round.
    std::size_t round = last;
    for (std::size_t q = last + 1; q < n_; ++q) {
      if (calls_tool_[q]) round = q;
    }
    for (std::size_t q = last; q <= round; ++q) {
      if (Usable(q)) p = q;
    }
    if (p == 0 && last > 0) {
      // The turn is kept whole, but its start is no usable cut.
      if (unusable_turn_start != nullptr) *unusable_turn_start = true;
      if (kept_whole == KeptWholeStart::kSnapBack) {
        for (std::size_t q = 1; q < last; ++q) {
          if (Usable(q)) p = q;
        }
      }
    }
  } else {
    // R3.1 / R3.2: at the start of the keep-th last turn (or the last turn), or before it.
    const std::size_t target = turn_count > keep ? turns_[turn_count - keep] : last;
    for (std::size_t q = 1; q <= target; ++q) {
      if (Usable(q)) p = q;
    }
  }

  // R3.8
  if (options.kept_chars_limit > 0 && KeptChars(p) >= options.kept_chars_limit) {
    std::vector<std::size_t> candidates;
    for (std::size_t s : turns_) {
      if (s <= p) continue;
      std::size_t q = 0;
      for (std::size_t x = p + 1; x <= s; ++x) {
        if (Usable(x)) q = x;
      }
      if (q != 0) candidates.push_back(q);
    }
    for (std::size_t x = last + 1; x < n_; ++x) {
      if (x > p && Usable(x)) candidates.push_back(x);
    }
    if (!candidates.empty()) {
      std::size_t choice = 0;
      bool below = false;
      for (std::size_t c : candidates) {
        if (KeptChars(c) < options.kept_chars_limit && (!below || c < choice)) {
          choice = c;
          below = true;
        }
      }
      if (!below) choice = *std::max_element(candidates.begin(), candidates.end());
      if (choice != p) {
        p = choice;
        d.moved_for_size = true;
      }
    }
  }

  if (p == 0) {
    bool history = false;  // a message before the last turn that is not a checkpoint
    for (std::size_t i = 0; i < last; ++i) history = history || !summary_[i];
    d.skip = history ? recap::SkipReason::kNoSafeBoundary : recap::SkipReason::kNothingToSummarize;
    d.moved_for_size = false;
    return d;
  }
  d.position = p;
  for (std::size_t i = 0; i < n_; ++i) (i < p ? d.summarized_chars : d.kept_chars) += chars_[i];
  for (std::size_t s : turns_) d.kept_turns += s >= p ? 1 : 0;
  d.inside_turn = turn_count == 0 || p > last;
  return d;
}

// ---------------------------------------------------------------------------------------------
// Reducer

namespace {

struct Caps {
  std::size_t tool = 0;     // tool-result text items
  std::size_t content = 0;  // text parts and tool-call arguments
};

bool OverCap(const Message& m, const Caps& caps) {
  for (const Part& part : m.parts) {
    if (const auto* x = std::get_if<Text>(&part)) {
      if (Cp(x->text) > caps.content) return true;
    } else if (const auto* c = std::get_if<ToolCall>(&part)) {
      if (Cp(c->arguments) > caps.content) return true;
    } else if (const auto* r = std::get_if<ToolResult>(&part)) {
      for (const auto& item : r->content) {
        if (const auto* it = std::get_if<Text>(&item); it != nullptr && Cp(it->text) > caps.tool)
          return true;
      }
    }
  }
  return false;
}

Message Clip(const Message& m, const Caps& caps) {
  Message out = m;
  for (Part& part : out.parts) {
    if (auto* x = std::get_if<Text>(&part)) {
      if (Cp(x->text) > caps.content) x->text = recap::ClipText(x->text, caps.content);
    } else if (auto* c = std::get_if<ToolCall>(&part)) {
      if (Cp(c->arguments) > caps.content)
        c->arguments = recap::ClipArguments(c->arguments, caps.content);
    } else if (auto* r = std::get_if<ToolResult>(&part)) {
      for (auto& item : r->content) {
        if (auto* it = std::get_if<Text>(&item); it != nullptr && Cp(it->text) > caps.tool) {
          it->text = recap::ClipText(it->text, caps.tool);
        }
      }
    }
  }
  return out;
}

}  // namespace

ReferenceReduction ReferenceReduce(const recap::Transcript& t, std::size_t target_chars) {
  ReferenceReduction r;
  const std::size_t n = t.size();
  std::vector<std::size_t> size(n);
  std::vector<bool> cut(n, false);
  std::size_t total = 0;
  for (std::size_t i = 0; i < n; ++i) {
    r.messages.push_back(t[i]);
    size[i] = Chars(t[i]);
    total += size[i];
  }
  r.before_chars = total;

  for (std::size_t round = 0; round < recap::kToolResultCaps.size(); ++round) {
    if (total <= target_chars) break;
    r.rounds = static_cast<int>(round) + 1;
    const Caps caps{recap::kToolResultCaps[round], recap::kContentCaps[round]};
    // The round's candidates: checkpoints never; others with a text over its cap. Only a
    // message handled in this round changes, so this holds for the whole round.
    std::vector<bool> candidate(n, false);
    // Never clipped: checkpoints, pinned messages, and the instructions when they come first
    // (R4.4, R12.1).
    for (std::size_t i = 0; i < n; ++i) {
      const recap::Message& m = r.messages[i];
      candidate[i] =
          !m.summary && !m.pinned && !(i == 0 && recap::IsInstructions(m)) && OverCap(m, caps);
    }
    while (total > target_chars) {
      // The largest candidate not handled yet in this round (ties: the earlier position).
      std::size_t best = n;
      for (std::size_t i = 0; i < n; ++i) {
        if (!candidate[i]) continue;
        if (best == n || size[i] > size[best]) best = i;
      }
      if (best == n) break;
      candidate[best] = false;
      Message clipped = Clip(r.messages[best], caps);
      const std::size_t after = Chars(clipped);
      if (after >= size[best]) continue;  // cannot shrink: left as it is
      total = total - size[best] + after;
      size[best] = after;
      r.messages[best] = std::move(clipped);
      cut[best] = true;
      ++r.clips;
    }
  }
  for (std::size_t i = 0; i < n; ++i) {
    if (cut[i]) r.clipped.push_back(i);
  }
  r.after_chars = total;
  r.fits = total <= target_chars;
  return r;
}

// ---------------------------------------------------------------------------------------------
// Reporting

namespace {

std::string Short(std::string_view s, std::size_t max = 48) {
  std::string out;
  const std::size_t keep = std::min(s.size(), recap::PrefixBytesForCodePoints(s, max));
  for (char ch : s.substr(0, keep)) {
    if (ch == '\n') {
      out += "\\n";
    } else if (static_cast<unsigned char>(ch) < 0x20) {
      out += '?';
    } else {
      out += ch;
    }
  }
  if (keep < s.size()) out += "...";
  return "\"" + out + "\" (" + std::to_string(Cp(s)) + " cp, " + std::to_string(s.size()) + " B)";
}

std::string OpaqueDifference(const Opaque& a, const Opaque& b) {
  if (a.kind != b.kind) return "opaque kind " + a.kind + " vs " + b.kind;
  if (a.payload != b.payload)
    return "opaque payload " + Short(a.payload) + " vs " + Short(b.payload);
  if (a.link != b.link) return "opaque link";
  if (a.link_id != b.link_id) return "opaque link_id " + a.link_id + " vs " + b.link_id;
  return {};
}

std::string TextDifference(const Text& a, const Text& b) {
  if (a.text != b.text) return "text " + Short(a.text) + " vs " + Short(b.text);
  if (a.extra != b.extra) return "text extra";
  return {};
}

}  // namespace

std::string MessageDifference(const Message& a, const Message& b) {
  if (a.id != b.id) return "id " + a.id + " vs " + b.id;
  if (a.role != b.role)
    return std::string("role ") + RoleLetter(a.role) + " vs " + RoleLetter(b.role);
  if (a.summary != b.summary) return "summary flag";
  if (a.pinned != b.pinned) return "pinned flag";
  if (a.form != b.form) return "message form";
  if (a.extra != b.extra) return "message extra";
  if (a.parts.size() != b.parts.size()) {
    return "part count " + std::to_string(a.parts.size()) + " vs " + std::to_string(b.parts.size());
  }
  for (std::size_t k = 0; k < a.parts.size(); ++k) {
    const std::string where = "part " + std::to_string(k) + ": ";
    const Part& pa = a.parts[k];
    const Part& pb = b.parts[k];
    if (pa.index() != pb.index()) return where + "kind";
    std::string d;
    if (const auto* x = std::get_if<Text>(&pa)) {
      d = TextDifference(*x, std::get<Text>(pb));
    } else if (const auto* c = std::get_if<ToolCall>(&pa)) {
      const auto& y = std::get<ToolCall>(pb);
      if (c->id != y.id)
        d = "call id " + c->id + " vs " + y.id;
      else if (c->name != y.name)
        d = "call name";
      else if (c->arguments != y.arguments)
        d = "arguments " + Short(c->arguments) + " vs " + Short(y.arguments);
      else if (c->extra != y.extra)
        d = "call extra";
    } else if (const auto* r = std::get_if<ToolResult>(&pa)) {
      const auto& y = std::get<ToolResult>(pb);
      if (r->call_id != y.call_id)
        d = "result call_id " + r->call_id + " vs " + y.call_id;
      else if (r->is_error != y.is_error)
        d = "is_error";
      else if (r->form != y.form)
        d = "result form";
      else if (r->extra != y.extra)
        d = "result extra";
      else if (r->content.size() != y.content.size())
        d = "result item count";
      for (std::size_t j = 0; d.empty() && j < r->content.size(); ++j) {
        if (r->content[j].index() != y.content[j].index()) {
          d = "item " + std::to_string(j) + " kind";
        } else if (const auto* tx = std::get_if<Text>(&r->content[j])) {
          d = TextDifference(*tx, std::get<Text>(y.content[j]));
          if (!d.empty()) d = "item " + std::to_string(j) + " " + d;
        } else {
          d = OpaqueDifference(std::get<Opaque>(r->content[j]), std::get<Opaque>(y.content[j]));
          if (!d.empty()) d = "item " + std::to_string(j) + " " + d;
        }
      }
    } else {
      d = OpaqueDifference(std::get<Opaque>(pa), std::get<Opaque>(pb));
    }
    if (!d.empty()) return where + d;
  }
  return {};
}

std::string DumpTranscript(const recap::Transcript& t, std::size_t max_messages) {
  std::ostringstream out;
  const std::size_t n = t.size();
  out << n << " messages, " << t.chars() << " chars\n";
  for (std::size_t i = 0; i < n; ++i) {
    if (n > max_messages && i == max_messages / 2) {
      out << "  ... " << (n - max_messages) << " messages left out ...\n";
      i = n - max_messages / 2;
    }
    const Message& m = t[i];
    out << "  [" << i << "] " << RoleLetter(m.role) << (m.summary ? " S" : "")
        << (recap::IsTurnStart(m) ? " T" : "") << " " << m.id << " (" << Chars(m) << "):";
    for (const Part& part : m.parts) {
      if (const auto* x = std::get_if<Text>(&part)) {
        out << " T" << Cp(x->text);
      } else if (const auto* c = std::get_if<ToolCall>(&part)) {
        out << " C(" << c->id << "," << c->name << "," << Cp(c->arguments) << ")";
      } else if (const auto* r = std::get_if<ToolResult>(&part)) {
        out << " R(" << r->call_id << ",[";
        for (std::size_t j = 0; j < r->content.size(); ++j) {
          if (j > 0) out << " ";
          if (const auto* it = std::get_if<Text>(&r->content[j])) {
            out << "T" << Cp(it->text);
          } else {
            out << "O" << Cp(std::get<Opaque>(r->content[j]).payload);
          }
        }
        out << "])";
      } else {
        const auto& o = std::get<Opaque>(part);
        out << " O(" << o.kind;
        if (o.link == OpaqueLink::kCall) out << ",call " << o.link_id;
        if (o.link == OpaqueLink::kResult) out << ",result " << o.link_id;
        out << "," << Cp(o.payload) << ")";
      }
    }
    out << "\n";
  }
  return out.str();
}

std::string DescribeDecision(const recap::CutDecision& d) {
  std::ostringstream out;
  out << "{skip=" << SkipName(d.skip) << " position=" << d.position
      << " summarized_chars=" << d.summarized_chars << " kept_chars=" << d.kept_chars
      << " kept_turns=" << d.kept_turns << " inside_turn=" << d.inside_turn
      << " moved_for_size=" << d.moved_for_size << " uncertain=[";
  for (std::size_t k = 0; k < d.uncertain.size(); ++k) {
    out << (k ? " " : "") << d.uncertain[k].message << ":" << d.uncertain[k].call_id << ":"
        << d.uncertain[k].name;
  }
  out << "]}";
  return out.str();
}

std::string DescribeOptions(const recap::CutOptions& o) {
  std::ostringstream out;
  out << "{keep_turns=" << o.keep_turns
      << " mode=" << (o.mode == recap::CutMode::kBudget ? "budget" : "normal")
      << " kept_chars_limit=" << o.kept_chars_limit << "}";
  return out.str();
}

}  // namespace recap_spec
