// recap — Transcript: a session's active messages, in order, with their sizes cached.
//
// Appending a message measures that message once (O(its size)); the total and the size of any
// range of messages are then read in O(1) from cached prefix sums. This is what lets a host
// call Compactor::Prepare on every turn without recap re-reading the session.
//
// Messages are held as shared immutable objects: copying a Transcript copies pointers, never
// message bytes, and the transcripts that the cutter and the tail reducer produce share every
// message they did not change. A Message obtained from a Transcript never changes.
//
// Invalid UTF-8 entering through Append or Set is repaired, not rejected: each byte that is
// not part of a valid sequence becomes U+FFFD, so one bad tool output cannot make a session
// unusable. (The JSON codecs, by contrast, reject invalid UTF-8 with a Status: a JSON
// document with such bytes is malformed.)
//
// Thread safety: const methods may be called concurrently; mutation needs external
// synchronisation, like a standard container.
#ifndef RECAP_TRANSCRIPT_H_
#define RECAP_TRANSCRIPT_H_

#include <cstddef>
#include <iterator>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "recap/export.h"
#include "recap/message.h"

namespace recap {
inline namespace v0 {

class RECAP_EXPORT Transcript {
 public:
  Transcript();
  // Appends each message in order (see Append).
  explicit Transcript(std::vector<Message> messages);

  Transcript(const Transcript&);
  Transcript& operator=(const Transcript&);
  Transcript(Transcript&&) noexcept;
  Transcript& operator=(Transcript&&) noexcept;
  ~Transcript();

  // Adds `m` at the end. Invalid UTF-8 is replaced (see above); an empty id is replaced by a
  // fresh unique one. Cost: O(size of m).
  void Append(Message m);
  // Adds an already shared message, which must have been produced by a Transcript (valid
  // UTF-8, non-empty id). Cost: O(1) beyond measuring.
  void Append(std::shared_ptr<const Message> m);

  // Replaces message `i` (which must exist). Cost: O(size of m + (size() - i)).
  void Set(std::size_t i, Message m);
  // Replaces several messages at once (positions must exist and be distinct).
  // Cost: O(sizes of the new messages + size()).
  void Set(std::vector<std::pair<std::size_t, Message>> replacements);

  std::size_t size() const noexcept { return messages_.size(); }
  bool empty() const noexcept { return messages_.empty(); }
  const Message& operator[](std::size_t i) const noexcept { return *messages_[i]; }
  const Message& back() const noexcept { return *messages_.back(); }
  const std::shared_ptr<const Message>& shared(std::size_t i) const noexcept { return messages_[i]; }

  // Characters of all messages, of message i, and of messages [begin, end). O(1).
  std::size_t chars() const noexcept { return prefix_.back(); }
  std::size_t chars(std::size_t i) const noexcept { return prefix_[i + 1] - prefix_[i]; }
  std::size_t chars(std::size_t begin, std::size_t end) const noexcept {
    return prefix_[end] - prefix_[begin];
  }
  std::size_t tokens() const noexcept;

  // Messages [begin, end) as a new transcript sharing the same message objects.
  Transcript Slice(std::size_t begin, std::size_t end) const;

  // Copies of the messages, for handing to a codec.
  std::vector<Message> ToVector() const;

  class const_iterator {
   public:
    using value_type = Message;
    using difference_type = std::ptrdiff_t;
    using reference = const Message&;
    using pointer = const Message*;
    using iterator_category = std::random_access_iterator_tag;
    const_iterator() = default;
    reference operator*() const { return **it_; }
    pointer operator->() const { return it_->get(); }
    const_iterator& operator++() { ++it_; return *this; }
    const_iterator operator++(int) { auto c = *this; ++it_; return c; }
    const_iterator& operator--() { --it_; return *this; }
    const_iterator& operator+=(difference_type n) { it_ += n; return *this; }
    const_iterator operator+(difference_type n) const { auto c = *this; c.it_ += n; return c; }
    difference_type operator-(const const_iterator& o) const { return it_ - o.it_; }
    reference operator[](difference_type n) const { return *it_[n]; }
    bool operator==(const const_iterator& o) const { return it_ == o.it_; }
    bool operator!=(const const_iterator& o) const { return it_ != o.it_; }
    bool operator<(const const_iterator& o) const { return it_ < o.it_; }

   private:
    friend class Transcript;
    using Base = std::vector<std::shared_ptr<const Message>>::const_iterator;
    explicit const_iterator(Base it) : it_(it) {}
    Base it_;
  };
  const_iterator begin() const noexcept { return const_iterator(messages_.begin()); }
  const_iterator end() const noexcept { return const_iterator(messages_.end()); }

 private:
  void PushMeasured(std::shared_ptr<const Message> m, std::size_t chars);

  std::vector<std::shared_ptr<const Message>> messages_;
  std::vector<std::size_t> prefix_;  // prefix_[i] = chars of messages [0, i); size() + 1 entries
};

// A fresh message id ("m_" followed by 24 hex digits), unique with overwhelming probability.
RECAP_EXPORT std::string NewMessageId();

}  // namespace v0
}  // namespace recap

#endif  // RECAP_TRANSCRIPT_H_
