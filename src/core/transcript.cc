#include "recap/transcript.h"

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

Transcript::Transcript() : prefix_{0} {}

Transcript::Transcript(std::vector<Message> messages) : prefix_{0} {
  messages_.reserve(messages.size());
  prefix_.reserve(messages.size() + 1);
  for (auto& m : messages) Append(std::move(m));
}

Transcript::Transcript(const Transcript&) = default;
Transcript& Transcript::operator=(const Transcript&) = default;
Transcript::Transcript(Transcript&& other) noexcept
    : messages_(std::move(other.messages_)), prefix_(std::move(other.prefix_)) {
  other.prefix_.assign(1, 0);  // a moved-from transcript is a valid empty one
}
Transcript& Transcript::operator=(Transcript&& other) noexcept {
  if (this != &other) {
    messages_ = std::move(other.messages_);
    prefix_ = std::move(other.prefix_);
    other.messages_.clear();
    other.prefix_.assign(1, 0);
  }
  return *this;
}
Transcript::~Transcript() = default;

void Transcript::PushMeasured(std::shared_ptr<const Message> m, std::size_t chars) {
  messages_.push_back(std::move(m));
  prefix_.push_back(prefix_.back() + chars);
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

void Transcript::Set(std::size_t i, Message m) {
  assert(i < messages_.size());
  RepairUtf8(m);
  if (m.id.empty()) m.id = NewMessageId();
  const std::size_t old_chars = chars(i);
  const std::size_t new_chars = MessageChars(m);
  messages_[i] = std::make_shared<const Message>(std::move(m));
  for (std::size_t k = i + 1; k < prefix_.size(); ++k) prefix_[k] = prefix_[k] - old_chars + new_chars;
}

void Transcript::Set(std::vector<std::pair<std::size_t, Message>> replacements) {
  if (replacements.empty()) return;
  std::vector<std::size_t> sizes(messages_.size());
  for (std::size_t i = 0; i < messages_.size(); ++i) sizes[i] = chars(i);
  for (auto& [i, m] : replacements) {
    assert(i < messages_.size());
    RepairUtf8(m);
    if (m.id.empty()) m.id = NewMessageId();
    sizes[i] = MessageChars(m);
    messages_[i] = std::make_shared<const Message>(std::move(m));
  }
  for (std::size_t i = 0; i < messages_.size(); ++i) prefix_[i + 1] = prefix_[i] + sizes[i];
}

std::size_t Transcript::tokens() const noexcept { return EstimateTokens(chars()); }

Transcript Transcript::Slice(std::size_t begin, std::size_t end) const {
  assert(begin <= end && end <= messages_.size());
  Transcript out;
  out.messages_.assign(messages_.begin() + static_cast<std::ptrdiff_t>(begin),
                       messages_.begin() + static_cast<std::ptrdiff_t>(end));
  out.prefix_.reserve(end - begin + 1);
  for (std::size_t i = begin; i < end; ++i) out.prefix_.push_back(out.prefix_.back() + chars(i));
  return out;
}

std::vector<Message> Transcript::ToVector() const {
  std::vector<Message> out;
  out.reserve(messages_.size());
  for (const auto& m : messages_) out.push_back(*m);
  return out;
}

}  // namespace v0
}  // namespace recap
