// The messages `recap import` hands the store (SessionStore::CreateSessions reads a
// MessageSource): those of a file decoded on a thread of its own while the store writes them
// (StreamedMessages), or of one decoded whole (DecodedMessages), each refusing a message whose
// calls share an id in the file's words. Private to import.cc.
#ifndef RECAP_CLI_IMPORT_SOURCES_H_
#define RECAP_CLI_IMPORT_SOURCES_H_

#include <condition_variable>
#include <cstddef>
#include <functional>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "recap/recap.h"

#include "cli.h"
#include "progress.h"
#include "recap_internal/prepared_source.h"

namespace recap_cli {

// A message asking twice under one id could never have both calls answered; the store would
// refuse it too, but here it can be named by its place in the file.
inline std::string RepeatedCallIdError(const std::string& path, std::size_t index,
                                       const std::string& id) {
  return InputName(path) + ": message " + std::to_string(index) +
         " holds two tool calls with the id \"" + id +
         "\"; a result answers one call of an id, so one of them could never be answered. "
         "Give each call its own id in the file. Nothing was written";
}

// The messages of a streamed file, decoded on a thread of its own and handed to the store as
// it asks for them (SessionStore::CreateSessions reads a MessageSource). At most kQueued
// messages (or, past the first, kQueuedBytes of text) wait between the two, so the codec
// never runs far ahead of the store. Besides the codec's errors, it refuses a message whose
// calls share an id and a file without messages, naming them in the file's words. The store
// sees a failure as a failed Next and rolls its transaction back.
//
// The messages reach the store prepared (recap_internal/prepared_source.h): the decoding thread
// measures each one, checks its call ids and gives it its fresh id, and the store, whose thread
// is the one an import waits for, does none of it again. Their UTF-8 needs no repair: the
// codec's reader refuses a file with a byte that is not (codec.h), so every string it makes is
// valid, and the store does not walk them again to see.
class StreamedMessages : public recap::internal::PreparedMessageSource {
 public:
  StreamedMessages(std::function<recap::Status(const recap::MessageSink&)> decode, std::string path,
                   Progress* progress)
      : path_(std::move(path)), progress_(progress) {
    thread_ = std::thread([this, decode = std::move(decode)] {
      recap::Status status;
      try {
        status = decode([this](recap::Message&& m, bool is_instructions) {
          return Push(std::move(m), is_instructions);
        });
      } catch (const std::bad_alloc&) {
        status = recap::Status::ResourceExhausted("out of memory while decoding the file");
      } catch (const std::exception& e) {
        status = recap::Status::Internal(std::string("decoding failed: ") + e.what());
      }
      std::lock_guard<std::mutex> lock(mu_);
      decode_status_ = std::move(status);
      decoded_ = true;
      changed_.notify_all();
    });
  }
  ~StreamedMessages() override { Stop(); }
  StreamedMessages(const StreamedMessages&) = delete;
  StreamedMessages& operator=(const StreamedMessages&) = delete;

  // The leading message the codec gave as the instructions, taken out of the stream (waits
  // for the first message). Nothing when there is none or decoding failed before it.
  std::optional<recap::Message> TakeInstructions() {
    if (!Refill() || !batch_[taken_].is_instructions) return std::nullopt;
    recap::Message m = std::move(batch_[taken_].message);
    ++taken_;
    first_index_ = 1;
    return m;
  }

  recap::Result<bool> NextPrepared(recap::Message* out, Facts* facts) override {
    if (!Refill()) {
      if (!decode_status_.ok()) {
        decode_failed_ = true;
        return decode_status_;
      }
      if (count_ == 0) {
        input_error_ = InputName(path_) +
                       " holds no messages (after the instructions); nothing "
                       "was written";
        return recap::Status::InvalidArgument(input_error_);
      }
      return false;
    }
    Queued& q = batch_[taken_];
    // A message asking twice under one id could never have both calls answered; the store
    // would refuse it too, but here it can be named by its place in the file.
    if (q.repeated_call_id) {
      input_error_ = RepeatedCallIdError(path_, count_ + first_index_, *q.repeated_call_id);
      return recap::Status::InvalidArgument(input_error_);
    }
    recap::Message& m = q.message;
    chars_ += q.chars;
    facts->chars = q.chars;
    facts->fresh_id = q.fresh_id;
    if (++count_ % 65536 == 0 && progress_ != nullptr) {
      progress_->Update("writing: " + Num(count_) + " messages so far");
    }
    // The message `out` held (the store's previous one) goes back to the decoding thread to be
    // freed there: its memory came from that thread's malloc arena, and freeing it here would
    // take that arena's lock against every allocation the decoder makes.
    spent_.push_back(std::move(*out));
    *out = std::move(m);
    ++taken_;
    return true;
  }

  // Stops the decoding thread (if still running) and waits for it.
  void Stop() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      stop_ = true;
      changed_.notify_all();
    }
    if (thread_.joinable()) thread_.join();
  }

  std::size_t count() const { return count_; }
  std::size_t chars() const { return chars_; }
  // Why the import failed, when the file was at fault: the codec's error (DecodeStatus) or a
  // message of this command's (InputError).
  bool decode_failed() const { return decode_failed_; }
  const recap::Status& decode_status() const { return decode_status_; }
  const std::string& input_error() const { return input_error_; }

 private:
  static constexpr std::size_t kQueued = 4096;
  static constexpr std::size_t kQueuedBytes = std::size_t{16} << 20;
  // The store's thread, when it has caught up with the decoder, sleeps until this many
  // messages (or bytes of text) are queued or the decoding has ended: woken for every message,
  // both threads would spend their time in the kernel handing messages over one by one.
  static constexpr std::size_t kWake = 256;
  static constexpr std::size_t kWakeBytes = std::size_t{1} << 20;

  // Whether the store's thread, waiting, should wake (under mu_). Never false while the
  // decoder waits for room: kWake <= kQueued and kWakeBytes <= kQueuedBytes.
  bool Ready() const { return decoded_ || queue_.size() >= kWake || queued_bytes_ >= kWakeBytes; }

  // The decoding thread: queues a message, waiting while the queue is full.
  recap::Status Push(recap::Message&& m, bool is_instructions) {
    // Measured and checked here, on the decoding thread, which has time to spare: the store's
    // thread is the one an import waits for.
    const std::size_t size = recap::MessageChars(m);
    std::optional<std::string> repeated = recap::RepeatedCallId(m);
    // The instructions go to the store in a session of their own, which gives them their id.
    const bool fresh_id = !is_instructions && m.id.empty();
    if (fresh_id) m.id = recap::NewMessageId();
    std::unique_lock<std::mutex> lock(mu_);
    if (!(stop_ || queue_.empty() || (queue_.size() < kQueued && queued_bytes_ < kQueuedBytes))) {
      producer_waiting_ = true;
      changed_.wait(lock, [this] {
        return stop_ || queue_.empty() || (queue_.size() < kQueued && queued_bytes_ < kQueuedBytes);
      });
      producer_waiting_ = false;
    }
    if (stop_) return recap::Status::Cancelled("the import stopped");
    queued_bytes_ += size;
    queue_.push_back(Queued{std::move(m), is_instructions, size, fresh_id, std::move(repeated)});
    if (consumer_waiting_ && Ready()) changed_.notify_all();
    // The store's spent messages are freed here, outside the lock. The three vectors that carry
    // them (spent_, returned_, freeing_) trade buffers, so none grows more than once.
    freeing_.swap(returned_);
    lock.unlock();
    freeing_.clear();
    return recap::Status::OK();
  }

  // The store's thread: when its batch is used up, takes all that is queued (waiting for the
  // decoder when nothing is). False at the end of the decoding (or of its failure).
  bool Refill() {
    if (taken_ < batch_.size()) return true;
    // Every message of the batch was moved out: clearing it frees nothing, and its buffer goes
    // back to the decoder to be filled again. No message, and no piece of the queue, is
    // allocated on one thread and freed on the other.
    batch_.clear();
    taken_ = 0;
    std::unique_lock<std::mutex> lock(mu_);
    if (!Ready()) {
      consumer_waiting_ = true;
      changed_.wait(lock, [this] { return Ready(); });
      consumer_waiting_ = false;
    }
    batch_.swap(queue_);
    queued_bytes_ = 0;
    // What the store is done with, for the decoder to free (once it has taken the last lot);
    // after the decoding there is no arena to contend for.
    if (decoded_) {
      spent_.clear();
    } else if (returned_.empty()) {
      returned_.swap(spent_);
    }
    if (producer_waiting_) changed_.notify_all();
    return !batch_.empty();
  }

  const std::string path_;
  Progress* const progress_;
  std::mutex mu_;
  std::condition_variable changed_;
  struct Queued {
    recap::Message message;
    bool is_instructions = false;
    std::size_t chars = 0;                        // recap::MessageChars
    bool fresh_id = false;                        // its id is a recap::NewMessageId of ours
    std::optional<std::string> repeated_call_id;  // recap::RepeatedCallId
  };
  std::vector<Queued> queue_;
  std::size_t queued_bytes_ = 0;
  bool decoded_ = false;
  bool stop_ = false;
  bool producer_waiting_ = false;
  bool consumer_waiting_ = false;
  recap::Status decode_status_;
  std::vector<recap::Message> returned_;  // spent messages given to the decoder to free
  std::vector<recap::Message> freeing_;   // the decoding thread's: what it frees
  std::thread thread_;                    // last: it starts using the members above at once
  // The store's thread only:
  std::vector<Queued> batch_;          // taken from queue_, being handed over
  std::size_t taken_ = 0;              // batch_'s messages handed over (moved out)
  std::vector<recap::Message> spent_;  // handed over and replaced since
  std::size_t first_index_ = 0;
  std::size_t count_ = 0;
  std::size_t chars_ = 0;
  bool decode_failed_ = false;
  std::string input_error_;
};

// A decoded conversation's messages as a MessageSource, with the same checks.
class DecodedMessages : public recap::MessageSource {
 public:
  DecodedMessages(std::vector<recap::Message> messages, std::string path, std::size_t first_index)
      : messages_(std::move(messages)), path_(std::move(path)), first_index_(first_index) {}
  recap::Result<bool> Next(recap::Message* out) override {
    if (next_ == messages_.size()) return false;
    recap::Message& m = messages_[next_];
    if (std::optional<std::string> id = recap::RepeatedCallId(m)) {
      input_error_ = RepeatedCallIdError(path_, next_ + first_index_, *id);
      return recap::Status::InvalidArgument(input_error_);
    }
    chars_ += recap::MessageChars(m);
    *out = std::move(m);
    ++next_;
    return true;
  }
  std::size_t count() const { return next_; }
  std::size_t chars() const { return chars_; }
  const std::string& input_error() const { return input_error_; }

 private:
  std::vector<recap::Message> messages_;
  const std::string path_;
  const std::size_t first_index_;
  std::size_t next_ = 0;
  std::size_t chars_ = 0;
  std::string input_error_;
};

}  // namespace recap_cli

#endif  // RECAP_CLI_IMPORT_SOURCES_H_
