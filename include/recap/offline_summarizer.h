/// @file
/// recap — the offline summarizer: a checkpoint written from the transcript itself, no model
/// (SPEC §12).
///
/// It is a Provider, so it is selectable wherever a model provider is: as the Compactor's
/// provider (the embedded default: no network, no API key), and as the fallback of a model
/// provider (`compaction.fallback: "offline"`, R1.3). It reads the structured span that recap
/// attaches to every summarizer request (CompletionRequest::source) and answers with the
/// checkpoint JSON of R4.1:
///
/// ```text
///   goal           the first request a person made (from the prior checkpoint if there is one)
///   instructions   the user's messages, verbatim where short
///   relevantFiles  paths found in tool-call arguments and tool results
///   accomplished   successful tool calls, one line each (tool and its main argument)
///   discoveries    errors met (tool results flagged is_error or that read like errors), and
///                  whether a later call of the same tool succeeded
///   currentState   the latest assistant text
///   nextSteps      left empty: without a model it cannot know
/// ```
///
/// A prior checkpoint is merged: its lists are kept and extended, its goal kept.
/// The reply keeps within the request's max_output_tokens (about four characters a token): the
/// oldest entries of the lists give way first (docs/checkpoint-format.md).
/// Deterministic: the same span always gives the same checkpoint.
#ifndef RECAP_OFFLINE_SUMMARIZER_H_
#define RECAP_OFFLINE_SUMMARIZER_H_

#include <memory>

#include "recap/export.h"
#include "recap/provider.h"

namespace recap {
inline namespace v0 {

/// Name() is "offline". Complete() fails with kInvalidArgument when the request carries no
/// SummarySource (it cannot summarize rendered text).
RECAP_EXPORT std::unique_ptr<Provider> NewOfflineSummarizer();

}  // namespace v0
}  // namespace recap

#endif  // RECAP_OFFLINE_SUMMARIZER_H_
