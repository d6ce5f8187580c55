#include "recap/tail_reducer.h"

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <deque>
#include <memory>

#include "recap/measure.h"

#include "model/transcript_access.h"
#include "model/utf8.h"
#include "recap_internal/log_internal.h"
#include "reduce/clip_arguments.h"
#include "reduce/clip_text.h"

namespace recap {
inline namespace v0 {

namespace {

using reduce_detail::ArgScanner;
using reduce_detail::ClipOverArguments;
using reduce_detail::ClippedArgs;
using reduce_detail::kMarkerChars;
using reduce_detail::Prefetch;

// ---- The reducer ----------------------------------------------------------------------------

constexpr std::size_t kRounds = kToolResultCaps.size();
constexpr std::size_t kUnknown = SIZE_MAX;
constexpr std::uint8_t kNotClipped = 0xFF;

static_assert(kContentCaps.size() == kRounds, "one content cap per round");
static_assert(kToolResultCaps.back() > kMarkerChars && kContentCaps.back() > kMarkerChars,
              "the reducer's caps leave room for the marker");

// One text the reducer may clip: a text part, a tool call's arguments or a text item of a tool
// result, of one message. The rounds decide from these records alone, reading a text only when
// its size in bytes does not settle a question: a text of b bytes has between ceil(b / 4) and
// b code points, so it is within a cap when b <= cap and over it when ceil(b / 4) > cap; in
// between it is read up to cap + 1 code points. Caps only shrink, so what is learnt holds for
// the later rounds. A clipped text is "its first cap_q - marker code points, then the marker"
// for the round q it was last clipped in; it is built once, at the end.
struct Slot {
  enum Kind : std::uint8_t { kContent, kArguments, kResult };
  const std::string* text = nullptr;  // the original text; for arguments, the current one
  std::size_t lo = 0;                 // bounds of the current text's code points
  std::size_t hi = 0;
  Kind kind = kContent;
  std::uint8_t clipped = kNotClipped;  // texts: the round it was last clipped in
  bool valid = true;                   // arguments, and texts counted whole: well-formed UTF-8
  bool counted = true;       // exact bounds came from reading the whole text (so `valid` holds)
  bool replaced = false;     // arguments: `text` is a clipped version, in the reducer's store
  bool well_formed = false;  // its message is Transcript::kWellFormedFact: nothing to check

  std::size_t Cap(std::size_t round) const noexcept {
    return kind == kResult ? kToolResultCaps[round] : kContentCaps[round];
  }
  void Reset(std::size_t bytes) noexcept {
    lo = (bytes + 3) / 4;
    hi = bytes;
    counted = bytes == 0;  // one byte is one code point, but not necessarily a valid one
  }
  // Whether the current text is over `cap`, reading it only if its bounds do not tell.
  bool Over(std::size_t cap) noexcept {
    if (hi <= cap) return false;
    if (lo > cap) return true;
    const Utf8Scan s = Scan(cap + 1);
    if (s.code_points <= cap) {  // read whole
      lo = hi = s.code_points;
      valid = s.valid;
      counted = true;
      return false;
    }
    lo = cap + 1;
    return true;
  }
  // The current text read from its start up to `max` code points.
  Utf8Scan Scan(std::size_t max) const noexcept {
    return well_formed ? utf8::ScanWellFormed(*text, max) : ScanCodePoints(*text, 0, max);
  }
  // The current text's code points, known to be within a cap.
  std::size_t Exact() noexcept {
    if (lo != hi) {
      const Utf8Scan s = Scan(SIZE_MAX);
      lo = hi = s.code_points;
      valid = s.valid;
      counted = true;
    }
    return lo;
  }
};

// What the reducer knows about one message.
struct Item {
  std::size_t chars = 0;              // MessageChars of its current version, exact
  std::size_t fixed = kUnknown;       // characters of what is never clipped: names, opaques
  std::size_t slot_begin = kUnknown;  // its texts: slots [slot_begin, slot_end)
  std::size_t slot_end = 0;
  bool summary = false;
  bool well_formed = false;  // Transcript::kWellFormedFact
  bool fixed_valid = true;
  bool edited = false;
};

template <class M, class F>
void ForEachClippable(M& m, F&& f) {
  for (auto& part : m.parts) {
    if (auto* t = std::get_if<Text>(&part)) {
      f(t->text, Slot::kContent);
    } else if (auto* c = std::get_if<ToolCall>(&part)) {
      f(c->arguments, Slot::kArguments);
    } else if (auto* r = std::get_if<ToolResult>(&part)) {
      for (auto& item : r->content) {
        if (auto* it = std::get_if<Text>(&item)) f(it->text, Slot::kResult);
      }
    }
  }
}

// Counts what is never clipped (tool names, opaque payloads), unless it is more than
// `max_bytes` long: most messages are never clipped, and then it is left for when one is.
void CountFixed(const Message& m, Item& item, std::size_t max_bytes) {
  std::size_t bytes = 0;
  std::size_t chars = 0;
  bool valid = true;
  auto count = [&](const std::string& s) {
    bytes += s.size();
    if (bytes > max_bytes) return false;
    const Utf8Scan scan =
        item.well_formed ? utf8::ScanWellFormed(s, SIZE_MAX) : ScanCodePoints(s, 0, SIZE_MAX);
    chars += scan.code_points;
    valid = valid && scan.valid;
    return true;
  };
  for (const auto& part : m.parts) {
    if (const auto* c = std::get_if<ToolCall>(&part)) {
      if (!count(c->name)) return;
    } else if (const auto* r = std::get_if<ToolResult>(&part)) {
      for (const auto& it : r->content) {
        if (const auto* o = std::get_if<Opaque>(&it)) {
          if (!count(o->payload)) return;
        }
      }
    } else if (const auto* o = std::get_if<Opaque>(&part)) {
      if (!count(o->payload)) return;
    }
  }
  item.fixed = chars;
  item.fixed_valid = valid;
}

// The message's size is known exactly (the transcript's, then the reducer's own figure), and
// so is what is never clipped: when all its texts but one are counted, that one is the rest.
void Resolve(const Item& item, Slot* begin, Slot* end) {
  if (item.fixed == kUnknown) return;
  Slot* unknown = nullptr;
  std::size_t known = item.fixed;
  for (Slot* s = begin; s != end; ++s) {
    if (s->lo == s->hi) {
      known += s->lo;
    } else if (unknown == nullptr) {
      unknown = s;
    } else {
      return;  // two or more
    }
  }
  if (unknown != nullptr) {
    unknown->lo = unknown->hi = item.chars - known;
    unknown->counted = false;
  }
}

// Bytes of what is never clipped (tool names, opaque payloads): with the texts' bytes, every
// byte MessageChars reads.
std::size_t FixedBytes(const Message& m) noexcept {
  std::size_t bytes = 0;
  for (const auto& part : m.parts) {
    if (const auto* c = std::get_if<ToolCall>(&part)) {
      bytes += c->name.size();
    } else if (const auto* r = std::get_if<ToolResult>(&part)) {
      for (const auto& it : r->content) {
        if (const auto* o = std::get_if<Opaque>(&it)) bytes += o->payload.size();
      }
    } else if (const auto* o = std::get_if<Opaque>(&part)) {
      bytes += o->payload.size();
    }
  }
  return bytes;
}

void InitSlots(const Message& m, Item& item, std::vector<Slot>& slots) {
  // Never clipped: checkpoints (bounded by design, R4.4) and pinned messages (R12.1).
  item.summary = m.summary || m.pinned;
  item.slot_begin = slots.size();
  std::size_t bytes = 0;
  ForEachClippable(m, [&](const std::string& s, Slot::Kind kind) {
    Slot slot;
    slot.text = &s;
    slot.kind = kind;
    slot.well_formed = item.well_formed;
    slot.Reset(s.size());
    slots.push_back(slot);
    bytes += s.size();
  });
  item.slot_end = slots.size();
  // A string has at most as many code points as bytes, so a message with as many characters
  // as bytes has that many in every string: each text's size is known without reading it (as
  // most messages are, in ASCII). Whether it is well-formed is not (counted stays false).
  if (item.chars == bytes + FixedBytes(m)) {
    for (std::size_t j = item.slot_begin; j < item.slot_end; ++j) {
      Slot& slot = slots[j];
      slot.lo = slot.hi = slot.text->size();
    }
  }
  CountFixed(m, item, 1024);
  Resolve(item, slots.data() + item.slot_begin, slots.data() + item.slot_end);
}

// Whether a text of the message is over its cap in round `round`, and if so, at most how many
// characters clipping it in that round can save (`saving`): a text over its cap comes down to
// the cap; arguments, at most to nothing.
bool OverCaps(Slot* begin, Slot* end, std::size_t round, std::size_t& saving) {
  bool over = false;
  saving = 0;
  for (Slot* s = begin; s != end; ++s) {
    const std::size_t cap = s->Cap(round);
    if (s->Over(cap)) {
      over = true;
      saving += s->kind == Slot::kArguments ? s->hi : s->hi - cap;
    }
  }
  return over;
}

// How one text of a message changes in a round.
struct Step {
  enum Kind : std::uint8_t { kKeep, kClip, kReplace } kind = kKeep;
  std::size_t chars = 0;  // its code points afterwards
  bool valid = true;      // kReplace: the new arguments are well-formed UTF-8
  std::string replacement;
};

// Decides how each text of the message is clipped in round `round` (ClipText, ClipArguments)
// and returns the message's size afterwards, from the slots: a text within the cap is counted
// (it is at most cap bytes, or was read whole), a text over it will have exactly the cap, and
// only arguments over the cap are read whole, to be clipped.
std::size_t MakePlan(const Item& item, Slot* begin, Slot* end, std::size_t round,
                     ArgScanner& scanner, std::vector<Step>& steps) {
  steps.resize(static_cast<std::size_t>(end - begin));
  std::size_t chars = item.fixed;
  Resolve(item, begin, end);
  for (Slot* s = begin; s != end; ++s) {
    const std::size_t cap = s->Cap(round);
    Step& step = steps[static_cast<std::size_t>(s - begin)];
    if (!s->Over(cap)) {
      step.kind = Step::kKeep;
      step.chars = s->Exact();
    } else if (s->kind != Slot::kArguments) {
      step.kind = Step::kClip;
      step.chars = cap;
    } else {
      ClippedArgs clipped = ClipOverArguments(*s->text, cap, scanner, s->well_formed);
      step.kind = Step::kReplace;
      step.chars = clipped.chars;
      step.valid = clipped.valid;
      step.replacement = std::move(clipped.text);
    }
    chars += step.chars;
  }
  return chars;
}

// Records the steps of round `round` in the slots.
void CommitSlots(Slot* begin, std::vector<Step>& steps, std::size_t round,
                 std::deque<std::string>& store) {
  for (std::size_t k = 0; k < steps.size(); ++k) {
    Step& step = steps[k];
    Slot& s = begin[k];
    if (step.kind == Step::kKeep) continue;
    s.lo = s.hi = step.chars;  // exact: this round's cap (or the clipped arguments' size)
    if (step.kind == Step::kClip) {
      s.clipped = static_cast<std::uint8_t>(round);
    } else {
      store.push_back(std::move(step.replacement));
      s.text = &store.back();
      s.replaced = true;
      s.valid = step.valid;
    }
  }
}

// Walks over messages spread over memory are a few dependent loads each (the message, its
// parts, a result's items); fetching them ahead, in stages, overlaps those of the next
// messages with the work on this one. `positions[k]` is being worked on.
void PrefetchAhead(const Transcript& t, const std::vector<std::size_t>& positions, std::size_t k) {
  const std::size_t n = positions.size();
  if (k + 24 < n) {  // the message, and its parts vector (often on the next cache line)
    const Message* m = t.shared(positions[k + 24]).get();
    Prefetch(m);
    Prefetch(&m->parts);
  }
  if (k + 12 < n) {
    const Message& m = t[positions[k + 12]];
    const char* parts = reinterpret_cast<const char*>(m.parts.data());
    const std::size_t bytes = std::min<std::size_t>(m.parts.size() * sizeof(Part), 1024);
    for (std::size_t b = 0; b < bytes; b += 64) Prefetch(parts + b);
  }
  if (k + 5 < n) {
    for (const Part& part : t[positions[k + 5]].parts) {
      if (const auto* r = std::get_if<ToolResult>(&part)) {
        const char* items = reinterpret_cast<const char*>(r->content.data());
        const std::size_t bytes =
            std::min<std::size_t>(r->content.size() * sizeof(ResultItem), 512);
        for (std::size_t b = 0; b < bytes; b += 64) Prefetch(items + b);
      }
    }
  }
}

// True when no byte of `s` is above 0x7F.
inline bool AllAscii(std::string_view s) noexcept {
  const auto* p = reinterpret_cast<const unsigned char*>(s.data());
  std::size_t i = 0;
  std::uint64_t any = 0;
  for (; i + 8 <= s.size(); i += 8) {
    std::uint64_t w;
    std::memcpy(&w, p + i, sizeof w);
    any |= w;
  }
  for (; i < s.size(); ++i) any |= p[i];
  return (any & 0x8080808080808080ULL) == 0;
}

// IsValidUtf8, answered inline for the short ASCII strings (ids, extras) that most are.
inline bool ValidUtf8(const std::string& s) noexcept {
  if (s.size() <= 32) {
    unsigned char any = 0;
    for (char c : s) any = static_cast<unsigned char>(any | static_cast<unsigned char>(c));
    if (any < 0x80) return true;
  }
  return IsValidUtf8(s);
}

// Builds the clipped copy of `src` its slots describe, copying only what is kept. `valid`
// is cleared unless every string in it is known to be well-formed UTF-8.
std::shared_ptr<Message> BuildClipped(const Message& src, Slot* slots, bool well_formed,
                                      bool& valid) {
  auto out = std::make_shared<Message>();
  Message& m = *out;
  // A message the transcript checked needs no check; the copy of any other is checked as it
  // is made (the copies of what was read before take what that read found).
  auto copy = [&](std::string& to, const std::string& from) {
    valid = valid && (well_formed || ValidUtf8(from));
    to = from;
  };
  copy(m.id, src.id);
  m.role = src.role;
  m.summary = src.summary;
  m.pinned = src.pinned;
  m.form = src.form;
  copy(m.extra, src.extra);
  m.parts.reserve(src.parts.size());
  Slot* s = slots;
  auto text_of = [&](const Text& t) {
    Text out_text;
    const Slot& slot = *s++;
    if (slot.clipped == kNotClipped) {
      out_text.text = t.text;
      valid = valid && (well_formed || (slot.counted ? slot.valid : ValidUtf8(out_text.text)));
    } else {
      // The first cap - marker code points. Mostly ASCII: then they are as many bytes, which
      // a check of the copy (in cache) confirms; otherwise the text is read for the cut.
      const std::size_t kept = slot.Cap(slot.clipped) - kMarkerChars;  // < the text's size
      std::string& out_str = out_text.text;
      out_str.reserve(kept + kTruncationMarker.size());
      out_str.append(t.text.data(), kept);
      if (!AllAscii(out_str)) {
        if (well_formed || (slot.counted && slot.valid)) {  // well-formed
          out_str.assign(t.text.data(), utf8::ScanWellFormed(t.text, kept).end);
        } else {
          const Utf8Scan keep = ScanCodePoints(t.text, 0, kept);
          valid = valid && keep.valid;
          out_str.assign(t.text.data(), keep.end);
        }
      }
      out_str.append(kTruncationMarker);
    }
    copy(out_text.extra, t.extra);
    return out_text;
  };
  auto opaque_valid = [&](const Opaque& o) {
    valid = valid && (well_formed || (ValidUtf8(o.kind) && ValidUtf8(o.link_id)));
  };
  for (const auto& part : src.parts) {
    if (const auto* t = std::get_if<Text>(&part)) {
      m.parts.emplace_back(text_of(*t));
    } else if (const auto* c = std::get_if<ToolCall>(&part)) {
      const Slot& slot = *s++;
      valid = valid && (well_formed ||
                        (slot.counted || slot.replaced ? slot.valid : ValidUtf8(c->arguments)));
      ToolCall call;
      copy(call.id, c->id);
      call.name = c->name;  // counted and checked with the fixed characters
      // A clipped version is the reducer's own (its store), moved from here on.
      if (slot.replaced) {
        call.arguments = std::move(*const_cast<std::string*>(slot.text));
      } else {
        call.arguments = c->arguments;
      }
      copy(call.extra, c->extra);
      m.parts.emplace_back(std::move(call));
    } else if (const auto* r = std::get_if<ToolResult>(&part)) {
      ToolResult res;
      copy(res.call_id, r->call_id);
      res.is_error = r->is_error;
      res.form = r->form;
      copy(res.extra, r->extra);
      res.content.reserve(r->content.size());
      for (const auto& item : r->content) {
        if (const auto* it = std::get_if<Text>(&item)) {
          res.content.emplace_back(text_of(*it));
        } else {
          opaque_valid(std::get<Opaque>(item));
          res.content.push_back(item);
        }
      }
      m.parts.emplace_back(std::move(res));
    } else {
      opaque_valid(std::get<Opaque>(part));
      m.parts.push_back(part);
    }
  }
  return out;
}

// Builds the clipped messages and the result's transcript.
void CommitClipped(const Transcript& t, const std::vector<Item>& items, std::vector<Slot>& slots,
                   ReduceResult& result) {
  const std::vector<std::size_t>& clipped = result.clipped;  // ascending
  std::vector<std::shared_ptr<Message>> built(clipped.size());
  // Whether every clipped copy is known to be well-formed UTF-8 with an id, so that it can
  // join the result as measured here (else Transcript::Set checks, repairs and measures it,
  // as it would for any message: a transcript's messages are well-formed, so this is for
  // messages handed over with Append(shared_ptr) that were not).
  bool checked = true;
  for (std::size_t k = 0; k < built.size(); ++k) {
    PrefetchAhead(t, clipped, k);
    const Item& item = items[clipped[k]];
    built[k] =
        BuildClipped(t[clipped[k]], slots.data() + item.slot_begin, item.well_formed, checked);
    checked = checked && item.fixed_valid && !built[k]->id.empty();
  }
  if (checked) {
    // Clipping changes content only (R6.4): the transcript keeps what the cutter noted of
    // every message, and takes the clipped copies at the sizes computed here.
    std::vector<internal::TranscriptAccess::ContentReplacement> replacements(built.size());
    for (std::size_t k = 0; k < built.size(); ++k) {
      replacements[k].position = clipped[k];
      replacements[k].message = std::move(built[k]);
      replacements[k].chars = items[clipped[k]].chars;
    }
    internal::TranscriptAccess::ReplaceContent(result.transcript, replacements);
  } else {
    std::vector<std::pair<std::size_t, Message>> replacements;
    replacements.reserve(built.size());
    for (std::size_t k = 0; k < built.size(); ++k) {
      replacements.emplace_back(clipped[k], std::move(*built[k]));
    }
    result.transcript.Set(std::move(replacements));
  }
}

}  // namespace

std::size_t ReductionTarget(std::size_t max_context_chars, std::size_t instruction_chars) noexcept {
  const std::size_t room =
      max_context_chars > instruction_chars ? max_context_chars - instruction_chars : 0;
  return std::max(kMinReductionTarget, room);
}

// The reducer works as SPEC R6.2 says, but reads as little as it can: the rounds decide from
// records of the messages' texts (Slot), which read a text only when its size in bytes does
// not settle whether it is over a cap, and then only to cap + 1 code points; sizes are
// computed from the parts; and a clipped message is built once, at the end, copying only what
// it keeps. The results are exactly those of clipping a whole copy of the message with
// ClipText and ClipArguments in each round and measuring it with MessageChars
// (tests/reduce/test_tail_reducer_diff.cc compares the two).
ReduceResult ReduceTail(const Transcript& t, std::size_t target_chars) {
  ReduceResult result;
  result.transcript = t;
  result.before_chars = t.chars();
  result.after_chars = result.before_chars;
  result.fits = result.before_chars <= target_chars;
  if (result.fits) return result;

  const std::size_t n = t.size();
  std::vector<Item> items(n);
  for (std::size_t i = 0; i < n; ++i) {
    items[i].chars = t.chars(i);
    items[i].well_formed = (t.cut_facts(i).flags & Transcript::kWellFormedFact) != 0;
  }
  std::vector<Slot> slots;
  std::deque<std::string> store;  // clipped arguments (stable addresses)
  std::size_t total = result.before_chars;
  std::vector<Step> steps;
  ArgScanner scanner;
  std::vector<std::size_t> over;
  std::vector<std::size_t> first;
  std::vector<std::pair<std::size_t, std::size_t>> order;  // (size, position)

  for (std::size_t round = 0; round < kRounds && total > target_chars; ++round) {
    const std::size_t smallest_cap = std::min(kToolResultCaps[round], kContentCaps[round]);
    result.rounds = static_cast<int>(round) + 1;

    // The messages looked at for the first time: those now larger than the round's smallest
    // cap (smaller ones cannot have a text over a cap). Their parts are listed into slots.
    first.clear();
    for (std::size_t i = 0; i < n; ++i) {
      if (items[i].slot_begin == kUnknown && items[i].chars > smallest_cap) first.push_back(i);
    }
    for (std::size_t k = 0; k < first.size(); ++k) {
      PrefetchAhead(t, first, k);
      InitSlots(t[first[k]], items[first[k]], slots);
      // The session's instructions, when they come first, are never clipped either (R12.1).
      if (first[k] == 0 && IsInstructions(t[0])) items[0].summary = true;
    }
    // Which messages have a text over this round's cap.
    over.clear();
    std::size_t most_saved = 0;  // at most this many characters fewer after the round
    for (std::size_t i = 0; i < n; ++i) {
      const Item& item = items[i];
      if (item.chars <= smallest_cap) continue;  // no part of it can be over a cap
      if (item.summary) continue;                // checkpoints, pinned messages, the instructions
      std::size_t saving = 0;
      if (OverCaps(slots.data() + item.slot_begin, slots.data() + item.slot_end, round, saving)) {
        over.push_back(i);
        most_saved += std::min(saving, item.chars);
      }
    }
    // Largest first; ties keep the earlier position first. The order matters only when the
    // transcript may come to fit during the round: otherwise every message listed is clipped,
    // each as it would be in any order, and they are taken as they come.
    if (total - std::min(total, most_saved) <= target_chars) {
      order.clear();
      for (std::size_t i : over) order.emplace_back(items[i].chars, i);
      std::sort(order.begin(), order.end(), [](const auto& a, const auto& b) {
        return a.first != b.first ? a.first > b.first : a.second < b.second;
      });
      for (std::size_t k = 0; k < order.size(); ++k) over[k] = order[k].second;
    }

    for (std::size_t k = 0; k < over.size(); ++k) {
      if (total <= target_chars) break;
      // Arguments to clip are read whole, from anywhere in memory: fetch them ahead.
      auto ahead = [&](std::size_t d, bool data) {
        if (k + d >= over.size()) return;
        const Item& a = items[over[k + d]];
        for (std::size_t j = a.slot_begin; j < a.slot_end; ++j) {
          const Slot& s = slots[j];
          if (s.kind != Slot::kArguments || s.hi <= s.Cap(round)) continue;
          if (!data) {
            Prefetch(s.text);
          } else {
            const char* p = s.text->data();
            for (std::size_t b = 0; b < s.hi && b < 1024; b += 64) Prefetch(p + b);
          }
        }
      };
      ahead(8, false);
      ahead(4, true);
      const std::size_t i = over[k];
      Item& item = items[i];
      if (item.fixed == kUnknown) CountFixed(t[i], item, SIZE_MAX);
      Slot* const begin = slots.data() + item.slot_begin;
      const std::size_t new_chars =
          MakePlan(item, begin, slots.data() + item.slot_end, round, scanner, steps);
      // Arguments whose JSON structure alone is over the cap cannot shrink; such a message
      // is left as it is rather than reported as cut.
      if (new_chars >= item.chars) continue;
      CommitSlots(begin, steps, round, store);
      item.edited = true;
      total = total - item.chars + new_chars;
      item.chars = new_chars;
      ++result.clips;
    }
  }

  for (std::size_t i = 0; i < n; ++i) {
    if (items[i].edited) result.clipped.push_back(i);
  }
  if (!result.clipped.empty()) CommitClipped(t, items, slots, result);  // else `t`, shared
  result.after_chars = result.transcript.chars();
  result.fits = result.after_chars <= target_chars;
  RECAP_LOG_DEBUG("reduced {} messages in {} rounds: {} -> {} chars (target {}){}",
                  result.clipped.size(), result.rounds, result.before_chars, result.after_chars,
                  target_chars, result.fits ? "" : ", still over");
  return result;
}

}  // namespace v0
}  // namespace recap
