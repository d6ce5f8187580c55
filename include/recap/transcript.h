/// @file
/// recap — Transcript: a session's active messages, in order, with their sizes cached.
///
/// Appending a message measures that message once (O(its size)); the total and the size of any
/// range of messages are then read in O(1) from cached prefix sums. This is what lets a host
/// call Compactor::Prepare on every turn without recap re-reading the session. Appending also
/// notes what the cutter needs of the message (cut_facts, below), so that FindCut looks only
/// at the end of a long session.
///
/// Messages are held as shared immutable objects: copying a Transcript copies pointers, never
/// message bytes, and the transcripts that the cutter and the tail reducer produce share every
/// message they did not change. A Message obtained from a Transcript never changes. With each
/// message goes its encoded form in each wire format once a codec's EncodeTranscript wrote it
/// (recap/codec.h), shared the same way: the request body of the next turn is assembled from
/// kept text plus the new messages.
///
/// Invalid UTF-8 entering through Append or Set is repaired, not rejected: each byte that is
/// not part of a valid sequence becomes U+FFFD, so one bad tool output cannot make a session
/// unusable. (The JSON codecs, by contrast, reject invalid UTF-8 with a Status: a JSON
/// document with such bytes is malformed.)
///
/// Thread safety: const methods may be called concurrently; mutation needs external
/// synchronisation, like a standard container.
#ifndef RECAP_TRANSCRIPT_H_
#define RECAP_TRANSCRIPT_H_

#include <cstddef>
#include <cstdint>
#include <iterator>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "recap/export.h"
#include "recap/message.h"

namespace recap {
inline namespace v0 {

namespace internal {
struct TranscriptAccess;  // recap's own code (src/core/model/transcript_access.h)
class EncodedForms;       // recap's own code (src/core/model/encoded_forms.h)
}  // namespace internal

/// A session's active messages, in order, with their sizes cached (see above).
class RECAP_EXPORT Transcript {
 public:
  /// An empty transcript.
  Transcript();
  /// Appends each message in order (see Append).
  explicit Transcript(std::vector<Message> messages);

  /// A copy sharing the messages. Cost: O(size() / kChunk).
  Transcript(const Transcript&);
  /// Becomes a copy sharing the messages. Cost: O(size() / kChunk).
  Transcript& operator=(const Transcript&);
  /// Takes the other's messages; it is left empty.
  Transcript(Transcript&&) noexcept;
  /// Takes the other's messages; it is left empty.
  Transcript& operator=(Transcript&&) noexcept;
  ~Transcript();

  /// Adds `m` at the end. Invalid UTF-8 is replaced (see above); an empty id is replaced by a
  /// fresh unique one. Cost: O(size of m).
  void Append(Message m);
  /// Adds an already shared message, which must have been produced by a Transcript (valid
  /// UTF-8, non-empty id). Cost: O(size of m) to measure it; no copy.
  void Append(std::shared_ptr<const Message> m);
  /// Adds a message measured earlier, as a store that keeps MessageChars() beside each message
  /// does when it reads the message back: no UTF-8 check and no measuring. The caller vouches
  /// that `m` came out of a Transcript (valid UTF-8, non-empty id) and that
  /// `chars == MessageChars(*m)`; builds without NDEBUG check both. Cost: O(number of parts of
  /// m) to note what the cutter needs (cut_facts); no text is read.
  void AppendMeasured(std::shared_ptr<const Message> m, std::size_t chars);

  /// Replaces message `i` (which must exist). Cost: O(size of m + size() / kChunk).
  void Set(std::size_t i, Message m);
  /// Replaces several messages at once (positions must exist and be distinct).
  /// Cost: O(sizes of the new messages + size() / kChunk + replacements).
  void Set(std::vector<std::pair<std::size_t, Message>> replacements);

  /// The number of messages.
  std::size_t size() const noexcept { return size_; }
  /// True when there is no message.
  bool empty() const noexcept { return size_ == 0; }
  /// Message `i` (which must exist).
  const Message& operator[](std::size_t i) const noexcept { return *shared(i); }
  /// The last message (there must be one).
  const Message& back() const noexcept { return *shared(size_ - 1); }
  /// Message `i` (which must exist) as the shared object the transcript holds.
  const std::shared_ptr<const Message>& shared(std::size_t i) const noexcept {
    return chunks_[i / kChunk]->messages[i % kChunk];
  }

  /// Characters of all messages (MessageChars, summed). O(1).
  std::size_t chars() const noexcept { return chars_; }
  /// Characters of message `i`. O(1).
  std::size_t chars(std::size_t i) const noexcept { return Prefix(i + 1) - Prefix(i); }
  /// Characters of messages [begin, end). O(1).
  std::size_t chars(std::size_t begin, std::size_t end) const noexcept {
    return Prefix(end) - Prefix(begin);
  }
  /// Estimated tokens of all messages: EstimateTokens(chars()).
  std::size_t tokens() const noexcept;

  /// Messages [begin, end) as a new transcript sharing the same message objects.
  Transcript Slice(std::size_t begin, std::size_t end) const;

  /// Copies of the messages, for handing to a codec.
  std::vector<Message> ToVector() const;

  /// A random-access iterator over the messages, in order (begin(), end()).
  class const_iterator {
   public:
    /// @name A random-access iterator's types and operations
    /// @{

    /// What a random-access iterator over const messages has, as a pointer into them would.
    using value_type = Message;
    using difference_type = std::ptrdiff_t;
    using reference = const Message&;
    using pointer = const Message*;
    using iterator_category = std::random_access_iterator_tag;
    const_iterator() = default;
    reference operator*() const { return (*t_)[i_]; }
    pointer operator->() const { return &(*t_)[i_]; }
    const_iterator& operator++() {
      ++i_;
      return *this;
    }
    const_iterator operator++(int) {
      auto c = *this;
      ++i_;
      return c;
    }
    const_iterator& operator--() {
      --i_;
      return *this;
    }
    const_iterator& operator+=(difference_type n) {
      i_ = static_cast<std::size_t>(static_cast<difference_type>(i_) + n);
      return *this;
    }
    const_iterator operator+(difference_type n) const {
      auto c = *this;
      c += n;
      return c;
    }
    difference_type operator-(const const_iterator& o) const {
      return static_cast<difference_type>(i_) - static_cast<difference_type>(o.i_);
    }
    reference operator[](difference_type n) const { return *(*this + n); }
    bool operator==(const const_iterator& o) const { return i_ == o.i_ && t_ == o.t_; }
    bool operator!=(const const_iterator& o) const { return !(*this == o); }
    bool operator<(const const_iterator& o) const { return i_ < o.i_; }
    /// @}

   private:
    friend class Transcript;
    const_iterator(const Transcript* t, std::size_t i) : t_(t), i_(i) {}
    const Transcript* t_ = nullptr;
    std::size_t i_ = 0;
  };
  /// An iterator at the first message.
  const_iterator begin() const noexcept { return const_iterator(this, 0); }
  /// An iterator past the last message.
  const_iterator end() const noexcept { return const_iterator(this, size_); }

  /// Messages are stored in chunks of this many. Copying a transcript copies one pointer per
  /// chunk, and appending to a copy clones at most the last chunk (copy-on-write), so handing
  /// a snapshot to the host every turn costs O(size() / kChunk), not O(size()).
  static constexpr std::size_t kChunk = 256;

  /// @name What the cutter needs (SPEC R3, R11.4)
  ///
  /// Found once per message when it enters the transcript (every Append, the constructor,
  /// Slice, Set), so that FindCut (safe_boundary.h) can decide from the end backwards without
  /// pairing every call of the session again. Calls and results pair as safe_boundary.h says
  /// (a result answers the nearest earlier call with its id); the transcript carries the ids of
  /// its *open* calls (those without a result yet: usually none, a few while tools run), shared
  /// between copies until one of them changes it.
  /// @{

  /// What the cutter needs of one message (cut_facts).
  struct CutFacts {
    /// i - c for the earliest message c < i holding a call that a result in message i answers;
    /// 0 when message i answers no call of an earlier message. Positions c+1..i are therefore
    /// not safe boundaries. Meaningful only while pairing() != Pairing::kUnknown.
    std::uint32_t reach = 0;
    std::uint8_t flags = 0;  ///< kTurnStartFact | kCallsToolFact | kSummaryFact | kWellFormedFact
  };
  static constexpr std::uint8_t kTurnStartFact = 1;  ///< IsTurnStart(message)
  static constexpr std::uint8_t kCallsToolFact = 2;  ///< HasToolCalls(message)
  static constexpr std::uint8_t kSummaryFact = 4;    ///< message.summary
  /// Every string of the message was checked (and if need be repaired) to be well-formed UTF-8
  /// by the transcript itself: set by Append(Message), the constructor and Set; not by
  /// Append(shared_ptr) and AppendMeasured, whose callers vouch for it. The tail reducer reads
  /// such a message without checking it again.
  static constexpr std::uint8_t kWellFormedFact = 8;
  /// The facts of message `i` (which must exist).
  const CutFacts& cut_facts(std::size_t i) const noexcept {
    return chunks_[i / kChunk]->facts[i % kChunk];
  }

  /// Whether the facts settle how the transcript's calls and results pair.
  enum class Pairing : std::uint8_t {
    kClosed,   ///< every call has its result, and CutFacts::reach settles every pair
    kOpen,     ///< as kClosed, but some calls have no result yet (uncertain calls, R3.7)
    kUnknown,  ///< the facts cannot settle some pair: a result whose call is not open (an
               ///< orphan, or a second result for an answered call), a call id reused while
               ///< its call is open, many open calls, a message replaced by Set whose calls or
               ///< results differ, a Slice that shares chunks but does not start at 0. The
               ///< cutter then pairs by scanning the whole transcript, as AnalyzePairing does.
  };
  /// Whether the facts settle the pairing now (see Pairing).
  Pairing pairing() const noexcept {
    if (!pairing_exact_) return Pairing::kUnknown;
    return open_ != nullptr && !open_->calls.empty() ? Pairing::kOpen : Pairing::kClosed;
  }

  /// A call without a result (yet): its id and the position of its message.
  struct OpenCall {
    std::string id;           ///< the call's id
    std::size_t message = 0;  ///< the position of the message holding the call
  };
  /// The open calls, in no particular order, while pairing() is kOpen; empty otherwise.
  const std::vector<OpenCall>& open_calls() const noexcept;
  /// @}

 private:
  friend struct internal::TranscriptAccess;

  struct Chunk {
    std::vector<std::shared_ptr<const Message>> messages;  // at most kChunk
    std::vector<std::size_t> prefix;  // prefix[j] = chars of messages [0, j) of this chunk
    std::vector<CutFacts> facts;      // facts[j] = the cutter's facts of message j
    // encoded[j] = message j's encoded forms in the wire formats, kept once a codec's
    // EncodeTranscript wrote them (recap/codec.h); shared by every transcript holding it.
    std::vector<std::shared_ptr<internal::EncodedForms>> encoded;
  };
  // The calls that have no result yet (ids owned: a message may be replaced).
  struct OpenCalls {
    std::vector<OpenCall> calls;
  };
  // At most this many open calls are tracked; with more, pairing becomes kUnknown.
  static constexpr std::size_t kMaxOpenCalls = 64;
  std::size_t Prefix(std::size_t i) const noexcept {
    if (i == size_) return chars_;
    return base_[i / kChunk] + chunks_[i / kChunk]->prefix[i % kChunk];
  }
  Chunk& MutableChunk(std::size_t k);
  void PushMeasured(std::shared_ptr<const Message> m, std::size_t chars);
  // `forms`: the message's kept encoded forms when it comes from another transcript; null for
  // a message new to every transcript (it gets forms of its own).
  void Push(std::shared_ptr<const Message> m, std::size_t chars, const CutFacts& facts,
            std::shared_ptr<internal::EncodedForms> forms = nullptr);
  // The facts of `m` about to be message `i` (= size_); updates the open calls.
  CutFacts Pair(const Message& m, std::size_t i);
  OpenCalls& MutableOpen();
  void LosePairing() noexcept;
  // See TranscriptAccess::AppendFrom.
  void AppendFrom(const Transcript& from, std::size_t i);
  // See TranscriptAccess::ReplaceContent.
  struct ContentReplacement {
    std::size_t position = 0;
    std::shared_ptr<const Message> message;
    std::size_t chars = 0;
  };
  void ReplaceContent(std::vector<ContentReplacement>& replacements);

  std::vector<std::shared_ptr<Chunk>> chunks_;
  std::vector<std::size_t> base_;  // base_[k] = chars of every message before chunk k
  std::size_t size_ = 0;
  std::size_t chars_ = 0;
  std::shared_ptr<OpenCalls> open_;  // null when none; copy-on-write like the chunks
  bool pairing_exact_ = true;        // false: Pairing::kUnknown
};

/// A fresh message id ("m_" followed by 24 hex digits), unique with overwhelming probability.
RECAP_EXPORT std::string NewMessageId();

}  // namespace v0
}  // namespace recap

#endif  // RECAP_TRANSCRIPT_H_
