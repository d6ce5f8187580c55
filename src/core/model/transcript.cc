#include "recap/transcript.h"

#include <pthread.h>

#include <algorithm>
#include <atomic>
#include <cassert>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <random>
#include <string>
#include <thread>
#include <type_traits>
#include <utility>
#include <vector>

#include "recap/measure.h"

#include "model/encoded_forms.h"
#include "model/transcript_access.h"

namespace recap {
inline namespace v0 {

namespace {

// Calls `fn(is_call, id)` for each call and result of `m` in part order, as the cutter pairs
// them (safe_boundary.cc): tool calls, tool results, and opaque items linked as either side.
template <typename Fn>
void ForEachLink(const Message& m, Fn&& fn) {
  for (const auto& part : m.parts) {
    if (const auto* c = std::get_if<ToolCall>(&part)) {
      fn(true, c->id);
    } else if (const auto* r = std::get_if<ToolResult>(&part)) {
      fn(false, r->call_id);
    } else if (const auto* o = std::get_if<Opaque>(&part)) {
      if (o->link == OpaqueLink::kCall) fn(true, o->link_id);
      if (o->link == OpaqueLink::kResult) fn(false, o->link_id);
    }
  }
}

// Whether `a` and `b` have the same calls and results in the same order (so that replacing
// one by the other pairs every call and result of a transcript exactly as before).
bool SameLinks(const Message& a, const Message& b) {
  std::vector<std::pair<bool, const std::string*>> la;
  ForEachLink(a, [&](bool is_call, const std::string& id) { la.emplace_back(is_call, &id); });
  std::size_t k = 0;
  bool same = true;
  ForEachLink(b, [&](bool is_call, const std::string& id) {
    if (!same) return;
    if (k >= la.size() || la[k].first != is_call || *la[k].second != id) {
      same = false;
      return;
    }
    ++k;
  });
  return same && k == la.size();
}

std::uint8_t FlagsOf(const Message& m) noexcept {
  std::uint8_t flags = 0;
  if (IsTurnStart(m)) flags |= Transcript::kTurnStartFact;
  if (HasToolCalls(m)) flags |= Transcript::kCallsToolFact;
  if (m.summary) flags |= Transcript::kSummaryFact;
  return flags;
}

// Bumped in every child a fork() makes: a child inherits its parent's generators, state and
// all, and would otherwise draw the very ids its parent (or a sibling) draws next — a host
// that forks workers which append to one session had them refused as duplicates.
std::atomic<std::uint64_t> fork_generation{0};

std::mt19937_64 SeededGenerator() {
  // Seeded from the OS plus a process-wide counter, so that threads started in the same
  // instant still diverge.
  static std::atomic<std::uint64_t> counter{0};
  std::random_device rd;
  std::seed_seq seq{
      rd(),
      rd(),
      rd(),
      rd(),
      static_cast<unsigned>(counter.fetch_add(1, std::memory_order_relaxed)),
      static_cast<unsigned>(std::chrono::steady_clock::now().time_since_epoch().count())};
  return std::mt19937_64(seq);
}

}  // namespace

std::string NewMessageId() {
  static const bool kWatchingForks = [] {
    ::pthread_atfork(nullptr, nullptr,
                     [] { fork_generation.fetch_add(1, std::memory_order_relaxed); });
    return true;
  }();
  (void)kWatchingForks;
  // One generator per thread, drawn afresh after a fork.
  thread_local std::uint64_t generation = fork_generation.load(std::memory_order_relaxed);
  thread_local std::mt19937_64 gen = SeededGenerator();
  // The first 8 hex digits count up from a random start, so that the ids one thread makes
  // sort in the order it made them: a store's index of ids then grows at one end instead of
  // at a random place per message (a million-message import touched every index page). The
  // last 16 stay random.
  thread_local std::uint32_t next_hi = static_cast<std::uint32_t>(gen());
  if (const std::uint64_t now = fork_generation.load(std::memory_order_relaxed);
      now != generation) {
    generation = now;
    gen = SeededGenerator();
    next_hi = static_cast<std::uint32_t>(gen());
  }
  const std::uint32_t hi = next_hi++;
  const std::uint64_t lo = gen();
  // Written by hand: this runs once per stored message (a million for a big import), where
  // snprintf's format parsing was a tenth of the writing thread's own work.
  static constexpr char kHex[] = "0123456789abcdef";
  std::string id(2 + 8 + 16, '0');
  id[0] = 'm';
  id[1] = '_';
  for (int i = 0; i < 8; ++i) id[2 + i] = kHex[(hi >> (28 - 4 * i)) & 0xf];
  for (int i = 0; i < 16; ++i) id[10 + i] = kHex[(lo >> (60 - 4 * i)) & 0xf];
  return id;
}

Transcript::Transcript() = default;

Transcript::Transcript(std::vector<Message> messages) {
  for (auto& m : messages) Append(std::move(m));
}

Transcript::Transcript(const Transcript&) = default;
Transcript& Transcript::operator=(const Transcript&) = default;
Transcript::Transcript(Transcript&& other) noexcept
    : chunks_(std::move(other.chunks_)),
      base_(std::move(other.base_)),
      size_(other.size_),
      chars_(other.chars_),
      open_(std::move(other.open_)),
      pairing_exact_(other.pairing_exact_) {
  other.chunks_.clear();  // a moved-from transcript is a valid empty one
  other.base_.clear();
  other.size_ = 0;
  other.chars_ = 0;
  other.open_.reset();
  other.pairing_exact_ = true;
}
Transcript& Transcript::operator=(Transcript&& other) noexcept {
  if (this != &other) {
    chunks_ = std::move(other.chunks_);
    base_ = std::move(other.base_);
    size_ = other.size_;
    chars_ = other.chars_;
    open_ = std::move(other.open_);
    pairing_exact_ = other.pairing_exact_;
    other.chunks_.clear();
    other.base_.clear();
    other.size_ = 0;
    other.chars_ = 0;
    other.open_.reset();
    other.pairing_exact_ = true;
  }
  return *this;
}
Transcript::~Transcript() = default;

// Chunks are shared between copies; a writer clones the one it changes first.
namespace {

// Copy-on-write needs the sole owner to see everything the other owners did before they let
// go: a copy read on another thread, then dropped there, must not race with this write.
// use_count() is a relaxed load, which orders nothing; taking a reference and dropping it is an
// acquire-release update of the same count, which does (and ThreadSanitizer can see it).
template <class T>
bool SoleOwner(const std::shared_ptr<T>& p) {
  if (p.use_count() > 1) return false;
  std::shared_ptr<T> acquire = p;
  acquire.reset();
  return true;
}

}  // namespace

Transcript::Chunk& Transcript::MutableChunk(std::size_t k) {
  if (!SoleOwner(chunks_[k])) chunks_[k] = std::make_shared<Chunk>(*chunks_[k]);
  return *chunks_[k];
}

Transcript::OpenCalls& Transcript::MutableOpen() {
  if (open_ == nullptr) {
    open_ = std::make_shared<OpenCalls>();
  } else if (!SoleOwner(open_)) {
    open_ = std::make_shared<OpenCalls>(*open_);
  }
  return *open_;
}

const std::vector<Transcript::OpenCall>& Transcript::open_calls() const noexcept {
  static const std::vector<OpenCall> kNone;
  return pairing_exact_ && open_ != nullptr ? open_->calls : kNone;
}

void Transcript::LosePairing() noexcept {
  pairing_exact_ = false;
  open_.reset();  // no longer kept up to date
}

static_assert(std::is_same_v<std::variant_alternative_t<0, Part>, Text> &&
                  std::is_same_v<std::variant_alternative_t<1, Part>, ToolCall> &&
                  std::is_same_v<std::variant_alternative_t<2, Part>, ToolResult> &&
                  std::is_same_v<std::variant_alternative_t<3, Part>, Opaque>,
              "Pair switches on Part's alternatives in this order");

// Pairs the calls and results of `m` (to become message i) with the open calls, in part order,
// exactly as the cutter's scan does (ScanPairs in safe_boundary.cc): a call opens its id; a
// result answers the open call with its id. What the open calls alone cannot settle makes the
// pairing kUnknown, and the cutter scans instead.

Transcript::CutFacts Transcript::Pair(const Message& m, std::size_t i) {
  // One walk over the parts notes the flags (as IsTurnStart and HasToolCalls decide them) and
  // pairs the links (as ForEachLink lists them).
  bool person = false;  // a text or an unlinked opaque item
  bool calls_tool = false;
  std::size_t earliest = i;
  auto link = [&](bool is_call, const std::string& id) {
    if (!pairing_exact_) return;
    const std::vector<OpenCall>* calls = open_ != nullptr ? &open_->calls : nullptr;
    std::size_t k = 0;
    const std::size_t count = calls != nullptr ? calls->size() : 0;
    while (k < count && (*calls)[k].id != id) ++k;
    if (is_call) {
      // An id reused while its call is open: the older call can never be answered (it is
      // uncertain for good, and the scan lists it). Or too many open calls to search.
      if (k < count || count >= kMaxOpenCalls) {
        LosePairing();
        return;
      }
      MutableOpen().calls.push_back(OpenCall{id, i});
    } else {
      // A result whose id is not open: an orphan, or a second result for a call already
      // answered. Telling them apart needs every id ever called.
      if (k == count) {
        LosePairing();
        return;
      }
      earliest = std::min(earliest, (*calls)[k].message);
      auto& mutable_calls = MutableOpen().calls;
      if (k + 1 != mutable_calls.size()) mutable_calls[k] = std::move(mutable_calls.back());
      mutable_calls.pop_back();
    }
  };
  for (const auto& part : m.parts) {
    switch (part.index()) {
      case 0:  // Text
        person = true;
        break;
      case 1:  // ToolCall
        calls_tool = true;
        link(true, std::get_if<ToolCall>(&part)->id);
        break;
      case 2:  // ToolResult
        link(false, std::get_if<ToolResult>(&part)->call_id);
        break;
      default: {
        const auto& o = std::get<Opaque>(part);
        if (o.link == OpaqueLink::kNone) person = true;
        if (o.link == OpaqueLink::kCall) {
          calls_tool = true;
          link(true, o.link_id);
        }
        if (o.link == OpaqueLink::kResult) link(false, o.link_id);
        break;
      }
    }
  }
  CutFacts f;
  if (m.role == Role::kUser && !m.summary && person) f.flags |= kTurnStartFact;
  if (calls_tool) f.flags |= kCallsToolFact;
  if (m.summary) f.flags |= kSummaryFact;
  assert(f.flags == FlagsOf(m));
  if (!pairing_exact_) return f;
  if (earliest < i) {
    const std::size_t reach = i - earliest;
    if (reach > UINT32_MAX) {
      LosePairing();
      return f;
    }
    f.reach = static_cast<std::uint32_t>(reach);
  }
  return f;
}

void Transcript::PushMeasured(std::shared_ptr<const Message> m, std::size_t chars) {
  const CutFacts facts = Pair(*m, size_);
  Push(std::move(m), chars, facts);
}

void Transcript::Push(std::shared_ptr<const Message> m, std::size_t chars, const CutFacts& facts,
                      std::shared_ptr<internal::EncodedForms> forms) {
  if (size_ % kChunk == 0) {
    auto chunk = std::make_shared<Chunk>();
    chunk->messages.reserve(kChunk);
    chunk->prefix.reserve(kChunk);
    chunk->facts.reserve(kChunk);
    chunk->encoded.reserve(kChunk);
    chunks_.push_back(std::move(chunk));
    base_.push_back(chars_);
  }
  Chunk& c = MutableChunk(chunks_.size() - 1);
  c.prefix.push_back(chars_ - base_.back());
  c.facts.push_back(facts);
  c.encoded.push_back(forms != nullptr ? std::move(forms)
                                       : std::make_shared<internal::EncodedForms>());
  c.messages.push_back(std::move(m));
  ++size_;
  chars_ += chars;
}

// The facts are noted before the message is measured: measuring streams the message's texts
// through the cache, after which its parts would have to be fetched again.
void Transcript::Append(Message m) {
  internal::RepairUtf8(m);
  if (m.id.empty()) m.id = NewMessageId();
  CutFacts facts = Pair(m, size_);
  facts.flags |= kWellFormedFact;
  const std::size_t chars = MessageChars(m);
  Push(std::make_shared<const Message>(std::move(m)), chars, facts);
}

void Transcript::Append(std::shared_ptr<const Message> m) {
  assert(m && !m->id.empty());
  const CutFacts facts = Pair(*m, size_);
  const std::size_t chars = MessageChars(*m);
  Push(std::move(m), chars, facts);
}

void Transcript::AppendMeasured(std::shared_ptr<const Message> m, std::size_t chars) {
  assert(m && !m->id.empty());
  assert(MessageChars(*m) == chars);
  PushMeasured(std::move(m), chars);
}

void Transcript::Set(std::size_t i, Message m) {
  std::vector<std::pair<std::size_t, Message>> one;
  one.emplace_back(i, std::move(m));
  Set(std::move(one));
}

// NOLINTNEXTLINE(performance-unnecessary-value-param): each message is repaired and moved out.
void Transcript::Set(std::vector<std::pair<std::size_t, Message>> replacements) {
  if (replacements.empty()) return;
  for (auto& [i, m] : replacements) {
    assert(i < size_);
    internal::RepairUtf8(m);
    if (m.id.empty()) m.id = NewMessageId();
    const std::size_t k = i / kChunk;
    const std::size_t j = i % kChunk;
    const std::size_t old_chars = chars(i);
    const std::size_t new_chars = MessageChars(m);
    Chunk& c = MutableChunk(k);
    // Same calls and results in the same order: every pair, and so every message's reach and
    // the open calls, stay as they are. Otherwise the cutter scans (Pairing::kUnknown).
    if (pairing_exact_ && !SameLinks(*c.messages[j], m)) LosePairing();
    c.facts[j].flags = FlagsOf(m) | kWellFormedFact;
    c.messages[j] = std::make_shared<const Message>(std::move(m));
    c.encoded[j] = std::make_shared<internal::EncodedForms>();
    for (std::size_t q = j + 1; q < c.prefix.size(); ++q)
      c.prefix[q] = c.prefix[q] - old_chars + new_chars;
    // Later chunks' bases move by the same amount.
    for (std::size_t q = k + 1; q < base_.size(); ++q) base_[q] = base_[q] - old_chars + new_chars;
    chars_ = chars_ - old_chars + new_chars;
  }
}

// One pass over the chunks: a chunk holding a replacement is rebuilt (sharing its other
// messages, copying its facts, summing its prefix again); the others are shared as they are.
void Transcript::ReplaceContent(std::vector<ContentReplacement>& replacements) {
  if (replacements.empty()) return;
  std::size_t q = 0;
  std::size_t running = 0;  // characters of every message before chunk k, after the change
  for (std::size_t k = 0; k < chunks_.size(); ++k) {
    const std::size_t chunk_begin = k * kChunk;
    const std::size_t old_total = (k + 1 < chunks_.size() ? base_[k + 1] : chars_) - base_[k];
    const Chunk& old = *chunks_[k];
    const std::size_t count = old.messages.size();
    base_[k] = running;
    if (q == replacements.size() || replacements[q].position >= chunk_begin + count) {
      running += old_total;
      continue;
    }
    auto fresh = std::make_shared<Chunk>();
    fresh->messages.reserve(kChunk);
    fresh->prefix.reserve(kChunk);
    fresh->facts.reserve(kChunk);
    fresh->encoded.reserve(kChunk);
    fresh->facts = old.facts;
    std::size_t sum = 0;
    for (std::size_t j = 0; j < count; ++j) {
      fresh->prefix.push_back(sum);
      if (q < replacements.size() && replacements[q].position == chunk_begin + j) {
        ContentReplacement& r = replacements[q++];
        assert(r.message && r.message->id == old.messages[j]->id);
        assert(r.message->role == old.messages[j]->role);
        assert(FlagsOf(*r.message) == (old.facts[j].flags & ~kWellFormedFact));
        assert(SameLinks(*old.messages[j], *r.message));
        assert(MessageChars(*r.message) == r.chars);
        fresh->messages.push_back(std::move(r.message));
        fresh->encoded.push_back(std::make_shared<internal::EncodedForms>());
        sum += r.chars;
      } else {
        const std::size_t next = j + 1 < count ? old.prefix[j + 1] : old_total;
        fresh->messages.push_back(old.messages[j]);
        fresh->encoded.push_back(old.encoded[j]);
        sum += next - old.prefix[j];
      }
    }
    chunks_[k] = std::move(fresh);
    running += sum;
  }
  assert(q == replacements.size());
  chars_ = running;
}

std::size_t Transcript::tokens() const noexcept { return EstimateTokens(chars()); }

Transcript Transcript::Slice(std::size_t begin, std::size_t end) const {
  assert(begin <= end && end <= size_);
  Transcript out;
  if (begin % kChunk == 0 && end == size_) {
    // Whole chunks from `begin` on: share them.
    const std::size_t k0 = begin / kChunk;
    out.chunks_.assign(chunks_.begin() + static_cast<std::ptrdiff_t>(k0), chunks_.end());
    const std::size_t shift = begin == size_ ? chars_ : base_[k0];
    for (std::size_t k = k0; k < base_.size(); ++k) out.base_.push_back(base_[k] - shift);
    out.size_ = end - begin;
    out.chars_ = chars_ - shift;
    if (begin == 0) {
      out.open_ = open_;
      out.pairing_exact_ = pairing_exact_;
    } else if (out.size_ > 0) {
      // The shared facts were found with the messages before `begin` present: a result there
      // may answer a call that is not in the slice. Not re-derived here (that would walk every
      // message's parts, and Slice shares chunks to stay O(size() / kChunk)); the cutter scans
      // such a slice.
      out.pairing_exact_ = false;
    }
    return out;
  }
  for (std::size_t i = begin; i < end; ++i) out.AppendFrom(*this, i);
  return out;
}

void Transcript::AppendFrom(const Transcript& from, std::size_t i) {
  const std::shared_ptr<const Message>& m = from.shared(i);
  CutFacts facts = Pair(*m, size_);
  facts.flags =
      static_cast<std::uint8_t>(facts.flags | (from.cut_facts(i).flags & kWellFormedFact));
  Push(m, from.chars(i), facts, from.chunks_[i / kChunk]->encoded[i % kChunk]);
}

std::vector<Message> Transcript::ToVector() const {
  std::vector<Message> out;
  out.reserve(size_);
  for (const Message& m : *this) out.push_back(m);
  return out;
}

}  // namespace v0
}  // namespace recap
