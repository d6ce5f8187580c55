#include "recap/transcript.h"

#include <algorithm>
#include <atomic>
#include <cassert>
#include <chrono>
#include <cstdio>
#include <random>
#include <thread>

#include "recap/measure.h"

namespace recap {
inline namespace v0 {

namespace {

void Repair(std::string& s) {
  if (!IsValidUtf8(s)) s = ToValidUtf8(s);
}

// Makes every string of the message valid UTF-8 in place (SPEC: never crash on bad bytes;
// a session must stay usable after one binary tool output).
void RepairUtf8(Message& m) {
  Repair(m.id);
  Repair(m.extra);
  for (auto& part : m.parts) {
    if (auto* t = std::get_if<Text>(&part)) {
      Repair(t->text);
      Repair(t->extra);
    } else if (auto* c = std::get_if<ToolCall>(&part)) {
      Repair(c->id);
      Repair(c->name);
      Repair(c->arguments);
      Repair(c->extra);
    } else if (auto* r = std::get_if<ToolResult>(&part)) {
      Repair(r->call_id);
      Repair(r->extra);
      for (auto& item : r->content) {
        if (auto* it = std::get_if<Text>(&item)) {
          Repair(it->text);
          Repair(it->extra);
        } else {
          auto& o = std::get<Opaque>(item);
          Repair(o.kind);
          Repair(o.payload);
          Repair(o.link_id);
        }
      }
    } else {
      auto& o = std::get<Opaque>(part);
      Repair(o.kind);
      Repair(o.payload);
      Repair(o.link_id);
    }
  }
}

}  // namespace

std::string NewMessageId() {
  // One generator per thread, seeded from the OS plus a process-wide counter so that threads
  // started in the same instant still diverge.
  static std::atomic<std::uint64_t> counter{0};
  thread_local std::mt19937_64 gen([] {
    std::random_device rd;
    std::seed_seq seq{rd(), rd(), rd(), rd(),
                      static_cast<unsigned>(counter.fetch_add(1, std::memory_order_relaxed)),
                      static_cast<unsigned>(
                          std::chrono::steady_clock::now().time_since_epoch().count())};
    return std::mt19937_64(seq);
  }());
  const std::uint64_t hi = gen();
  const std::uint64_t lo = gen();
  char buf[2 + 24 + 1];
  std::snprintf(buf, sizeof buf, "m_%08llx%016llx",
                static_cast<unsigned long long>(hi & 0xffffffffULL),
                static_cast<unsigned long long>(lo));
  return buf;
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
      chars_(other.chars_) {
  other.chunks_.clear();  // a moved-from transcript is a valid empty one
  other.base_.clear();
  other.size_ = 0;
  other.chars_ = 0;
}
Transcript& Transcript::operator=(Transcript&& other) noexcept {
  if (this != &other) {
    chunks_ = std::move(other.chunks_);
    base_ = std::move(other.base_);
    size_ = other.size_;
    chars_ = other.chars_;
    other.chunks_.clear();
    other.base_.clear();
    other.size_ = 0;
    other.chars_ = 0;
  }
  return *this;
}
Transcript::~Transcript() = default;

// Chunks are shared between copies; a writer clones the one it changes first.
Transcript::Chunk& Transcript::MutableChunk(std::size_t k) {
  if (chunks_[k].use_count() > 1) chunks_[k] = std::make_shared<Chunk>(*chunks_[k]);
  return *chunks_[k];
}

void Transcript::PushMeasured(std::shared_ptr<const Message> m, std::size_t chars) {
  if (size_ % kChunk == 0) {
    auto chunk = std::make_shared<Chunk>();
    chunk->messages.reserve(kChunk);
    chunk->prefix.reserve(kChunk);
    chunks_.push_back(std::move(chunk));
    base_.push_back(chars_);
  }
  Chunk& c = MutableChunk(chunks_.size() - 1);
  c.prefix.push_back(chars_ - base_.back());
  c.messages.push_back(std::move(m));
  ++size_;
  chars_ += chars;
}

void Transcript::Append(Message m) {
  RepairUtf8(m);
  if (m.id.empty()) m.id = NewMessageId();
  const std::size_t chars = MessageChars(m);
  PushMeasured(std::make_shared<const Message>(std::move(m)), chars);
}

void Transcript::Append(std::shared_ptr<const Message> m) {
  assert(m && !m->id.empty());
  const std::size_t chars = MessageChars(*m);
  PushMeasured(std::move(m), chars);
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

void Transcript::Set(std::vector<std::pair<std::size_t, Message>> replacements) {
  if (replacements.empty()) return;
  for (auto& [i, m] : replacements) {
    assert(i < size_);
    RepairUtf8(m);
    if (m.id.empty()) m.id = NewMessageId();
    const std::size_t k = i / kChunk;
    const std::size_t j = i % kChunk;
    const std::size_t old_chars = chars(i);
    const std::size_t new_chars = MessageChars(m);
    Chunk& c = MutableChunk(k);
    c.messages[j] = std::make_shared<const Message>(std::move(m));
    for (std::size_t q = j + 1; q < c.prefix.size(); ++q) c.prefix[q] = c.prefix[q] - old_chars + new_chars;
    // Later chunks' bases move by the same amount.
    for (std::size_t q = k + 1; q < base_.size(); ++q) base_[q] = base_[q] - old_chars + new_chars;
    chars_ = chars_ - old_chars + new_chars;
  }
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
    return out;
  }
  for (std::size_t i = begin; i < end; ++i) out.PushMeasured(shared(i), chars(i));
  return out;
}

std::vector<Message> Transcript::ToVector() const {
  std::vector<Message> out;
  out.reserve(size_);
  for (const Message& m : *this) out.push_back(m);
  return out;
}

}  // namespace v0
}  // namespace recap
