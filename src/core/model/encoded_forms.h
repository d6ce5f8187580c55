// Private: each message's encoded form in the wire formats, kept with the message by every
// Transcript that holds it (Transcript::Chunk::encoded), so that encoding a transcript again
// on the next turn costs its new messages plus one copy of the kept text (the codecs'
// EncodeTranscript, recap/codec.h).
#ifndef RECAP_SRC_CORE_MODEL_ENCODED_FORMS_H_
#define RECAP_SRC_CORE_MODEL_ENCODED_FORMS_H_

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <utility>

#include "recap/transcript.h"

namespace recap {
inline namespace v0 {
namespace internal {

enum class WireFormat : std::uint8_t { kNative, kOpenAiChat, kAnthropic, kOpenAiResponses };
inline constexpr std::size_t kWireFormats = 4;

// The encoded forms of one message: set at most once per format, never changed after, and read
// without a lock once set. A message that failed to encode in a format keeps nothing for it.
// Thread-safe: a message is shared by transcripts that different threads encode at once.
class EncodedForms {
 public:
  // The kept form in `format`, or null when it was not encoded yet.
  const std::string* Find(WireFormat format) const noexcept {
    const auto bit = Bit(format);
    if ((ready_.load(std::memory_order_acquire) & bit) == 0) return nullptr;
    return &text_[static_cast<std::size_t>(format)];
  }

  // Keeps `text` as the form in `format` unless another thread kept one first (the same
  // text: encoding is a pure function of the message); returns the kept form.
  const std::string& Keep(WireFormat format, std::string text) {
    const auto bit = Bit(format);
    std::lock_guard<std::mutex> lock(mu_);
    std::string& kept = text_[static_cast<std::size_t>(format)];
    if ((ready_.load(std::memory_order_relaxed) & bit) == 0) {
      kept = std::move(text);
      ready_.fetch_or(bit, std::memory_order_release);
    }
    return kept;
  }

 private:
  static std::uint8_t Bit(WireFormat format) noexcept {
    return static_cast<std::uint8_t>(1u << static_cast<unsigned>(format));
  }

  std::mutex mu_;
  std::atomic<std::uint8_t> ready_{0};
  std::string text_[kWireFormats];
};

}  // namespace internal
}  // namespace v0
}  // namespace recap

#endif  // RECAP_SRC_CORE_MODEL_ENCODED_FORMS_H_
