// Private: one summary of a span of messages through a Provider (SPEC R3.5, R4, R5).
//
// Summarize turns the messages a compaction removes into a checkpoint:
//  * checkpoints already inside the span (summary messages) are given to the model as the
//    prior state to merge (R3.5), never as ordinary messages: the struct the Compactor kept
//    when it committed the prior (SummarizeInput::known_prior), else the message read back
//    with ParseRenderedCheckpoint (after a reload: the store keeps only the Markdown);
//  * the rest is rendered as plain text with roles, tool calls and tool results labelled and
//    opaque items left out (R4.5, R4.8), so the request can never be rejected for pairing;
//  * when the system prompt and that text exceed `max_request_chars`, large tool outputs are
//    shortened for the summarizer's eyes, and if that is not enough the span is summarized in
//    consecutive chunks, each folding into the previous result (R4.7);
//  * the reply is parsed forgivingly; a reply cut by the output limit is salvaged (R5.2) or
//    fails with the exact text of R5.3.
//
// The Compactor owns events and persistence; this file only talks to the provider.
#ifndef RECAP_SRC_CORE_SUMMARIZE_SUMMARIZE_H_
#define RECAP_SRC_CORE_SUMMARIZE_SUMMARIZE_H_

#include <cstddef>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "recap/cancellation.h"
#include "recap/checkpoint.h"
#include "recap/ledger.h"
#include "recap/provider.h"
#include "recap/status.h"
#include "recap/transcript.h"

namespace recap {
inline namespace v0 {
namespace internal {

struct SummarizeInput {
  Transcript span;    // messages to summarize; may contain earlier checkpoints (summary == true)
  std::string focus;  // manual focus instructions (R4.6)
  // The session's instructions (R12.1), already clipped for the summarizer's eyes: shown as
  // context, never summarized.
  std::string instructions;
  std::vector<std::string> plugin_instructions;
  std::vector<OutputField> plugin_fields;
  std::size_t max_output_tokens = 16000;  // R5.1
  // Budget in characters for one request's system prompt plus user text (R4.7); 0: unlimited.
  std::size_t max_request_chars = 0;
  // Budget in characters for everything one summary sends, over all its requests (system
  // prompts, prior state, conversation; compaction.maxSummarizerInputTokens x 4); 0: none.
  // Over it, the newest messages are sent in full up to half of it and older ones are clipped
  // to a shared size, each keeping its label and its beginning (never dropped without a trace).
  std::size_t max_input_chars = 0;
  // A checkpoint message whose struct is known (the one the Compactor last committed): when
  // the span's prior is that very message, `known_prior` is the prior, and its Markdown is
  // not parsed back.
  std::shared_ptr<const Message> known_prior_message;
  std::shared_ptr<const Checkpoint> known_prior;
  // For a provider-native summarizer (R14.2): the session's instructions in full, sent as the
  // provider's system prompt.
  std::string native_instructions;
  // R17: the span's ledger (null when compaction.ledger is off), handed to the offline
  // summarizer through SummarySource, and its compact listing for a model's system prompt
  // (MustKeepListing), so that a good model keeps the artifacts itself and the guard adds
  // little.
  const Ledger* ledger = nullptr;
  std::string must_keep;
};

// The ledger as a model is asked to keep it: one line per entry ("- file: src/a.py"), newest
// first kept when over `max_chars`, with a count of what was not listed.
std::string MustKeepListing(const Ledger& ledger, std::size_t max_chars);

struct SummarizeOutput {
  ParsedCheckpoint parsed;  // usable is always true on success
  Usage usage;              // summed over calls
  int calls = 0;
  std::string writer;  // provider.Name()
  // R14.2: the message a provider-native summarizer returned, holding its artifact; `parsed`
  // then holds what recap could read of it (Anthropic's summary text), unstructured.
  std::optional<Message> native_checkpoint;
};

// Called after each chunk (1-based) when the span was split into more than one.
using ProgressFn = std::function<void(int chunk, int chunks)>;

// Errors: the provider's own Status with the context "summarizer (<name>)"; kCancelled when
// `cancel` fired; kUnavailable when the model replied with nothing; kResourceExhausted with
// the text of R5.3 when a reply cut by max_output_tokens held nothing usable. A provider that
// throws (against its contract) is reported as kUnavailable.
Result<SummarizeOutput> Summarize(Provider& provider, const SummarizeInput& in,
                                  const CancellationToken& cancel, const ProgressFn& progress);

// The system prompt of every request for `in` (the same for every chunk, so provider-side
// prompt caches keep working).
// `with_must_keep`: the ledger's listing (SummarizeInput::must_keep) is in it, if any.
std::string SummarizerSystemPrompt(const SummarizeInput& in, bool with_must_keep = true);

// How many prior checkpoints Summarize has read back from their Markdown in this process
// (none when the prior is the known one). For tests.
std::size_t PriorCheckpointsParsed() noexcept;

// True for the Provider NewOfflineSummarizer returns. It reads SummarySource instead of text,
// so Summarize hands it the whole span in one call and renders nothing (R4.7 is about what a
// model can read; the offline summarizer has no such limit).
bool IsOfflineSummarizer(const Provider& provider) noexcept;

// True when `text` is in the layout of RenderCheckpoint (it starts with the "# Checkpoint"
// line). Summary messages that are not — context a plugin injected after a checkpoint — are
// never taken for the prior checkpoint.
bool IsRenderedCheckpoint(std::string_view text);

// A summarizer reply's budget in characters: max_output_tokens x 4 (R12.7), saturating.
std::size_t ReplyBudgetChars(std::size_t max_output_tokens) noexcept;

// Makes `cp` fit (`fits` says when), giving up first what matters least: the older half of the
// finished work, as often as it takes, then of the errors met and of the files; then the goal
// and the current state are cut to shorter lines, the pending steps and instructions to one
// line each, and only then their older halves are dropped; a text-only checkpoint keeps a
// shorter and shorter beginning. `fits` is called on the final state last. False when even
// the smallest form does not fit (R12.7: no checkpoint above half the trigger).
bool ShrinkCheckpoint(Checkpoint& cp, const std::function<bool(const Checkpoint&)>& fits);

// The span as the summarizer reads it (R4.8). Tool-result texts and tool-call arguments over
// `max_tool_output_chars` code points are clipped (0: nothing is clipped).
std::string RenderSpanAsText(const Transcript& span, std::size_t max_tool_output_chars);

}  // namespace internal
}  // namespace v0
}  // namespace recap

#endif  // RECAP_SRC_CORE_SUMMARIZE_SUMMARIZE_H_
