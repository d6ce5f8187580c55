/// @file
/// recap — Provider: the model that writes checkpoints.
///
/// A Provider completes one request: a system prompt and messages in, text out. The Compactor
/// uses it only to summarize (SPEC R4); the agent's own model calls never pass through recap.
/// Implementations: the HTTP providers of the `recap::http` component (OpenAI-compatible chat
/// completions, the Responses API, Anthropic Messages), recap's offline summarizer
/// (offline_summarizer.h), and whatever a host writes — a host that already has an LLM client
/// wraps it in a Provider of a few dozen lines (see docs/adapters.md).
///
/// Contract for implementers:
///  * Complete() returns the model's text and why it stopped. A reply cut by
///    max_output_tokens must say FinishReason::kLength — recap then salvages what it can
///    (R5.2) instead of trusting a half checkpoint.
///  * Failures are Statuses, never exceptions. Use kUnavailable for errors that may pass
///    (network, 429, 5xx), kDeadlineExceeded for time-outs, kCancelled when the token was
///    cancelled, kInvalidArgument for a rejected request, kResourceExhausted when the request
///    was too long for the model (context overflow). The message must never contain secrets.
///  * Complete() must return promptly (within about 100 ms) once `cancel` is cancelled.
///  * `json_schema`, when set, is a JSON Schema text the reply should follow. A provider that
///    cannot ask its model for structured output ignores it: recap's parser is forgiving.
///  * Usage figures may be zero when unknown.
///
/// Thread safety: a Compactor may call one Provider from several threads at once (different
/// sessions); implementations must be thread-safe.
#ifndef RECAP_PROVIDER_H_
#define RECAP_PROVIDER_H_

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "recap/cancellation.h"
#include "recap/export.h"
#include "recap/message.h"
#include "recap/status.h"

namespace recap {
inline namespace v0 {

class Transcript;
struct Checkpoint;
struct Ledger;

/// The structured form of what a summarizer request asks about. Model providers ignore it
/// (they read the rendered text in `messages`); recap's offline summarizer, which has no
/// model, reads it instead. Pointers are valid for the duration of Complete() only.
struct SummarySource {
  const Transcript* span = nullptr;   ///< the messages being summarized (this chunk)
  const Checkpoint* prior = nullptr;  ///< the checkpoint they fold into, if any (R3.5, R4.7)
  std::string focus;                  ///< manual focus instructions (R4.6)
  /// R17: the must-keep artifacts of the whole span being compacted (all chunks), with what
  /// the replaced checkpoint carried; null when compaction.ledger is off.
  const Ledger* ledger = nullptr;
};

/// One completion request: what the Compactor asks a summarizer.
struct CompletionRequest {
  std::string system_prompt;      ///< the summarizer's instructions
  std::vector<Message> messages;  ///< recap sends one user message holding the rendered span
  std::size_t max_output_tokens = 16000;   ///< the most the reply may take (compaction's budget)
  std::optional<std::string> json_schema;  ///< the JSON Schema the reply should follow, if any
  const SummarySource* source = nullptr;   ///< see SummarySource
};

/// Why the model stopped: a natural end (kStop), the output limit (kLength: the reply is cut),
/// or anything else (kOther).
enum class FinishReason : std::uint8_t { kStop, kLength, kOther };

/// "stop", "length", "other".
RECAP_EXPORT const char* FinishReasonName(FinishReason reason) noexcept;

/// The tokens a provider reported for a request; zero when unknown.
struct Usage {
  std::uint64_t prompt_tokens = 0;      ///< tokens of the request
  std::uint64_t completion_tokens = 0;  ///< tokens of the reply
};

/// What Provider::Complete returns.
struct Completion {
  std::string text;                                  ///< the model's reply
  FinishReason finish_reason = FinishReason::kStop;  ///< why it stopped
  Usage usage;                                       ///< the tokens it reported
};

/// R14.2: what a provider-native summarizer is asked to compact (Provider::CompactNative). recap
/// has chosen the cut: `span` is exactly the messages the checkpoint will replace (the
/// session's instructions and pinned messages are not among them; they stay).
struct NativeCompactionRequest {
  const Transcript* span = nullptr;       ///< valid for the duration of the call
  std::string instructions;               ///< the session's instructions (its system prompt), or ""
  std::string focus;                      ///< manual focus instructions (R4.6), or ""
  std::size_t max_output_tokens = 16000;  ///< the most the checkpoint may take
};

/// What it returns: the message holding the provider's artifact (Anthropic's `compaction`
/// block, OpenAI's `compaction` item), which recap commits as the checkpoint, flagged summary
/// under a new id; and the usage the provider reported.
struct NativeCompaction {
  Message checkpoint;  ///< the message holding the provider's artifact
  Usage usage;         ///< the tokens the provider reported
};

/// The model that writes checkpoints (see above for the contract of an implementation).
class RECAP_EXPORT Provider {
 public:
  virtual ~Provider();

  /// Runs one completion. See the contract above.
  virtual Result<Completion> Complete(const CompletionRequest& request,
                                      const CancellationToken& cancel) = 0;

  /// The model's context window in tokens, when the provider knows it (from the server's model
  /// list, for instance). recap distrusts values above 2,000,000 (R1.2). Default: unknown.
  virtual std::optional<std::size_t> ContextWindow() { return std::nullopt; }

  /// The same, saying why when it is unknown: the window, kNotFound when the provider does not
  /// report one, or the error that kept it from being read (the model list did not answer, its
  /// reply named no window for the model). The Compactor asks this, reports an unknown window
  /// with the message (event `window_unknown`, R12.2) and asks again later. The default calls
  /// ContextWindow(); a provider that can fail to read its window overrides this one.
  virtual Result<std::size_t> QueryContextWindow();

  /// A short name for events and logs: "offline", "openai", "anthropic", "my-client".
  virtual std::string Name() const = 0;

  /// R14.2: true for a provider that writes checkpoints with its provider's own compaction
  /// (recap::http's `openai_compact` and `anthropic_compact` protocols). The Compactor then calls
  /// CompactNative instead of Complete: it still chooses the cut, keeps the tail, commits,
  /// reduces and reports; only the checkpoint's writer changes. Default: false.
  virtual bool WritesNativeCheckpoints() const { return false; }
  /// Compacts `request.span` on the provider's servers. The reply must hold the provider's
  /// artifact (FindProviderCheckpoint finds it); errors follow Complete's contract. Default:
  /// kFailedPrecondition (the provider has no native compaction).
  virtual Result<NativeCompaction> CompactNative(const NativeCompactionRequest& request,
                                                 const CancellationToken& cancel);
};

}  // namespace v0
}  // namespace recap

#endif  // RECAP_PROVIDER_H_
