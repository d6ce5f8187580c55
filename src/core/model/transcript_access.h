// recap's own access to Transcript internals, for the parts of the core that build
// transcripts in bulk. Not installed; not part of the API.
#ifndef RECAP_SRC_CORE_MODEL_TRANSCRIPT_ACCESS_H_
#define RECAP_SRC_CORE_MODEL_TRANSCRIPT_ACCESS_H_

#include <memory>
#include <vector>

#include "recap/transcript.h"

#include "model/encoded_forms.h"

namespace recap {
inline namespace v0 {
namespace internal {

// Makes every string of the message valid UTF-8 in place, as Transcript::Append does (SPEC:
// never crash on bad bytes; a session must stay usable after one binary tool output).
void RepairUtf8(Message& m);

// Whether every string of the message is valid UTF-8 (what RepairUtf8 would leave as it is).
bool AllValidUtf8(const Message& m);

struct TranscriptAccess {
  using ContentReplacement = Transcript::ContentReplacement;

  // Appends message `i` of `from` to `to`, shared, with what `from` knows of it: its size (not
  // measured again) and whether `from` checked it well-formed (Transcript::kWellFormedFact).
  // Its pairing is noted for `to`, as any append does.
  static void AppendFrom(Transcript& to, const Transcript& from, std::size_t i) {
    to.AppendFrom(from, i);
  }

  // Replaces messages of `t` by versions that differ from them only in content: the same id,
  // role and summary flag, and the same parts in the same order, with the same call ids and
  // links (texts, arguments and results' contents may differ), each measured by the caller
  // (`chars` == MessageChars) and well-formed UTF-8. What the cutter noted of each message
  // (Transcript::CutFacts, the open calls, the pairing) therefore stays as it is, and no
  // message is read. Positions ascending and distinct. Builds without NDEBUG check all of it.
  // Cost: O(size() / kChunk + kChunk per chunk holding a replacement). The tail reducer
  // (tail_reducer.cc) uses it: clipping changes content only (SPEC R6.4).
  static void ReplaceContent(Transcript& t, std::vector<ContentReplacement>& replacements) {
    t.ReplaceContent(replacements);
  }

  // Message `i`'s kept encoded forms (model/encoded_forms.h), shared with every transcript
  // that holds the message. Never null.
  static EncodedForms& Encoded(const Transcript& t, std::size_t i) {
    return *t.chunks_[i / Transcript::kChunk]->encoded[i % Transcript::kChunk];
  }
};

}  // namespace internal
}  // namespace v0
}  // namespace recap

#endif  // RECAP_SRC_CORE_MODEL_TRANSCRIPT_ACCESS_H_
