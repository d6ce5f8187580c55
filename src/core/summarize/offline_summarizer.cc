// The offline summarizer (no model) as a Provider: it answers a summarizer request with the
// checkpoint it builds from the structured span (offline_build.h), within max_output_tokens.
#include "recap/offline_summarizer.h"

#include <algorithm>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "recap/checkpoint.h"
#include "recap/measure.h"

#include "summarize/offline_build.h"
#include "summarize/summarize.h"

namespace recap {
inline namespace v0 {
namespace offline_build {

namespace {

// True when every section of `cp` is blank (blank items are dropped when a reply is read), so
// that as a reply it would carry no checkpoint (ParseCheckpoint).
bool NothingWritten(const Checkpoint& cp) {
  const auto blank = [](const std::string& s) { return Trim(s).empty(); };
  const auto all_blank = [&](const std::vector<std::string>& list) {
    return std::all_of(list.begin(), list.end(), blank);
  };
  return blank(cp.goal) && blank(cp.current_state) && blank(cp.text) &&
         all_blank(cp.instructions) && all_blank(cp.discoveries) && all_blank(cp.accomplished) &&
         all_blank(cp.next_steps) &&
         std::all_of(cp.relevant_files.begin(), cp.relevant_files.end(),
                     [&](const RelevantFile& f) { return blank(f.path); });
}

// Characters of reply per token of max_output_tokens, as the rest of recap estimates them.
constexpr std::size_t kCharsPerToken = 4;

class OfflineSummarizer final : public Provider {
 public:
  Result<Completion> Complete(const CompletionRequest& request,
                              const CancellationToken& cancel) override {
    if (cancel.IsCancelled()) return Status::Cancelled("the offline summarizer was cancelled");
    if (request.source == nullptr || request.source->span == nullptr) {
      return Status::InvalidArgument(
          "the offline summarizer needs the structured span that recap attaches to its "
          "summarizer requests (CompletionRequest::source); this request has none, and the "
          "offline summarizer cannot summarize rendered text. Use it as the Compactor's "
          "provider or as its fallback, not as a general-purpose model.");
    }
    Checkpoint cp = Build(*request.source);
    // R17: the ledger's artifacts in their sections, while the checkpoint stays within half
    // of what it replaces (a compaction frees room).
    if (request.source->ledger != nullptr) {
      KeepLedger(*request.source->ledger, request.source->span->chars() / 2, cp);
    }
    if (NothingWritten(cp)) {
      // A span of nothing recap can read (harness noise, empty turns; blank items are dropped
      // when read): said so, since a reply with every section empty is no checkpoint
      // (ParseCheckpoint) and would fail the compaction every time.
      cp.current_state = "The " + std::to_string(request.source->span->size()) +
                         " summarized messages held nothing to keep: no request, file, command "
                         "or result that recap could read.";
    }
    Completion c;
    c.finish_reason = FinishReason::kStop;
    // R5.1: the reply stays within max_output_tokens, as a model's would. The lists give way
    // first; a checkpoint that cannot fit even then is cut where a model's reply would be,
    // and reported so (the compactor keeps what it can recover, R5.2, or fails, R5.3).
    const std::size_t tokens = request.max_output_tokens;
    const bool limited = tokens != 0 && tokens <= SIZE_MAX / kCharsPerToken;
    const std::size_t max_chars = limited ? tokens * kCharsPerToken : SIZE_MAX;
    c.text = limited ? FitCheckpoint(cp, max_chars) : CheckpointToJson(cp);
    if (limited && CountCodePoints(c.text) > max_chars) {
      c.text.resize(PrefixBytesForCodePoints(c.text, max_chars));
      c.finish_reason = FinishReason::kLength;
    }
    return c;
  }

  std::string Name() const override { return "offline"; }
};

}  // namespace
}  // namespace offline_build

std::unique_ptr<Provider> NewOfflineSummarizer() {
  return std::make_unique<offline_build::OfflineSummarizer>();
}

namespace internal {
bool IsOfflineSummarizer(const Provider& provider) noexcept {
  return dynamic_cast<const offline_build::OfflineSummarizer*>(&provider) != nullptr;
}
}  // namespace internal

}  // namespace v0
}  // namespace recap
