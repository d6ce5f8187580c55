// The hard limit (R6, R7 steps 2 to 4): the reduction of the kept tail and, when nothing
// brought the request within the limit, the error that says what every attempt did.
#include "compactor/compactor_impl.h"
#include "recap_internal/remedy_text.h"

namespace recap {
inline namespace v0 {

// R6: clips the kept tail to the target and persists it. Returns false with `error` set
// when the store refused.
Status Compactor::Impl::RunReduction(const std::string& session, SessionCache& c,
                                     const RequestSizes& sizes, std::size_t* reduced_messages) {
  // R12.1: the session's own instructions count as instructions; the reducer leaves them
  // (and pinned messages) alone and brings the rest to the target.
  const std::size_t stored = StoredInstructionsChars(c.transcript());
  const std::size_t target =
      ReductionTarget(config.limits.max_context_chars, sizes.instructions_chars + stored) + stored;
  ReduceResult r = ReduceTail(c.transcript(), target);
  if (r.clipped.empty()) return Status::OK();
  ReductionCommit commit;
  commit.expected_version = c.version();
  for (std::size_t i : r.clipped) commit.replacements.push_back(r.transcript[i]);
  auto committed = store->CommitReduction(session, commit);
  if (!committed.ok()) {
    if (committed.status().code() == StatusCode::kConflict) c.Invalidate();
    return committed.status().WithContext("could not save the reduced transcript");
  }
  c.Committed(std::move(r.transcript), *committed);
  *reduced_messages += r.clipped.size();
  events.Emit(
      EventType::kContextReduced, session,
      internal::ContextReducedFields(r.clipped.size(), sizes.instructions_chars + r.before_chars,
                                     sizes.instructions_chars + r.after_chars));
  return Status::OK();
}

// R7 step 4, R12.8: what every attempt of this Prepare did, in order, and what to do.
// `attempts`: step 1's (or why it did not run), then step 3's budget compaction if it ran;
// `reduced_first` / `reduced_all`: messages the reducer clipped in step 2 / in all.
Status Compactor::Impl::BudgetError(std::size_t reducible, const RequestSizes& sizes,
                                    const std::vector<Attempt>& attempts, std::size_t reduced_first,
                                    std::size_t reduced_all, bool budget_tried_before,
                                    std::size_t stored_instructions) const {
  const std::size_t limit = config.limits.max_context_chars;
  // The failed attempts' errors keep their remedies (docs/errors.md) inside this message.
  internal::RemedyText msg("Context budget exceeded (approximately " + std::to_string(reducible) +
                           " characters of conversation; limit " + std::to_string(limit) + ").");
  const Attempt* first = nullptr;
  const Attempt* budget = nullptr;
  for (const Attempt& a : attempts) (a.budget_step ? budget : first) = &a;
  auto skipped_because = [](const Attempt& a) -> std::string {
    if (a.skip == SkipReason::kNoProgress) {
      return "it is paused: the last two freed less than a tenth of the request each (it "
             "resumes at a new turn, or once the conversation has grown by a tenth of the "
             "trigger)";
    }
    if (a.skip == SkipReason::kIrreducible) {
      return "the instructions and the tool catalog alone reach the compaction trigger, so "
             "summarizing the conversation cannot bring the request under it";
    }
    if (a.skip == SkipReason::kSummarizerUnavailable) {
      return "the summarizer failed three times in a row and is left alone for a while";
    }
    if (a.skip == SkipReason::kBackgroundRunning) {
      return "a compaction of this session still runs in the background and has not stopped "
             "within compaction.background.maxWaitMs of being cancelled (its summarizer does not "
             "answer)";
    }
    if (a.skip == SkipReason::kUncertainToolResults) {
      return "tool calls have no recorded result; recover the session first";
    }
    return "there is no safe boundary to summarize";
  };
  // What happened after step 1, in order.
  std::vector<internal::RemedyText> then;
  if (reduced_first > 0) {
    then.emplace_back("the reducer clipped " + std::to_string(reduced_first) +
                      (reduced_first == 1 ? " message" : " messages"));
  }
  if (budget != nullptr) {
    internal::RemedyText b("a budget compaction ");
    if (budget->kind == AttemptKind::kCommitted) {
      b << "summarized " + std::to_string(budget->outcome.summarized_messages) +
               " more messages inside the last turn";
      if (reduced_all > reduced_first) {
        b << " and the reducer clipped " + std::to_string(reduced_all - reduced_first) + " more";
      }
    } else if (budget->kind == AttemptKind::kFailed) {
      b << "failed (" << internal::RemedyText(budget->error) << ")";
    } else if (budget->skip != SkipReason::kNone &&
               budget->skip != SkipReason::kNothingToSummarize &&
               budget->skip != SkipReason::kNoSafeBoundary) {
      b << "was skipped because " + skipped_because(*budget);
    } else {
      b << "found nothing left to summarize";
    }
    then.push_back(std::move(b));
  }
  internal::RemedyText rest;
  for (const internal::RemedyText& t : then) rest << (rest.empty() ? "" : ", then ") << t;
  if (first != nullptr && first->kind == AttemptKind::kCommitted) {
    if (rest.empty()) {
      msg << " Automatic compaction ran but could not reduce it enough.";
    } else {
      msg << " Automatic compaction ran (" + std::to_string(first->outcome.summarized_messages) +
                 " messages summarized), then "
          << rest << ", but it is still over the limit.";
    }
  } else {
    if (first != nullptr && first->kind == AttemptKind::kDisabled) {
      msg << " Automatic compaction is disabled.";
    } else if (first != nullptr && first->kind == AttemptKind::kFailed) {
      msg << " Automatic compaction failed (" << internal::RemedyText(first->error) << ").";
    } else if (first != nullptr && first->kind == AttemptKind::kSkipped) {
      msg << " Automatic compaction was skipped because " + skipped_because(*first) + ".";
    }
    if (!rest.empty()) msg << " " << rest.UpperFirst() << ".";
  }
  if (budget_tried_before) {
    msg << " A budget compaction was already tried in this turn.";
  }
  const std::size_t instructions = sizes.instructions_chars + stored_instructions;
  if (instructions + kMinReductionTarget > limit) {
    // They go with every request: no compaction, clipping or new session makes room.
    msg << " The instructions alone are " + std::to_string(instructions) +
               " characters, more than the limit leaves room for (it keeps " +
               std::to_string(kMinReductionTarget) +
               " for the conversation). To continue: shorten the instructions, or raise "
               "limits.maxContextChars to at least " +
               std::to_string(instructions + kMinReductionTarget) + ".";
    return msg.ToStatus(StatusCode::kContextBudgetExceeded);
  }
  msg << " To continue: compact manually (with a focus), trim large tool outputs, start a new"
         " session, or raise limits.maxContextChars.";
  return msg.ToStatus(StatusCode::kContextBudgetExceeded);
}

}  // namespace v0
}  // namespace recap
