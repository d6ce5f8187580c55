// One compaction between its decision and its commit (CompactionJob), in three phases run by
// Compactor::Impl (compaction.cc): BeginCompaction, under the session's lock, cuts and fills the
// job from the session's transcript; SummarizeJob runs the plugins and the summarizer on the
// job alone, so that a background worker may run it while Prepare serves the session (R15);
// FinishCompaction, under the lock again, commits it and brings the cache up to date. A job
// shares the snapshot's messages, never the SessionCache; whoever runs a phase owns the job
// for that phase.
#ifndef RECAP_SRC_CORE_COMPACTOR_COMPACTION_JOB_H_
#define RECAP_SRC_CORE_COMPACTOR_COMPACTION_JOB_H_

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "recap/compactor.h"
#include "recap/ledger.h"
#include "recap/safe_boundary.h"
#include "recap/transcript.h"

#include "events/event_emitter.h"
#include "plugins/plugin_runner.h"
#include "summarize/summarize.h"

namespace recap {
inline namespace v0 {
namespace compactor_detail {

struct CompactionJob {
  std::string session;
  CompactionReason reason = CompactionReason::kAuto;
  bool background = false;  // R15: its events say so
  bool automatic = true;    // a summarizer failure counts for R12.3
  bool offline_instead = false;
  bool native = false;  // a provider-native summarizer (R14.2)
  std::size_t before_full_chars = 0;
  std::size_t before_full_tokens = 0;
  std::size_t kept_limit = 0;
  std::size_t offline_output_tokens = 0;
  Transcript snapshot;  // the transcript it cut
  std::uint64_t version = 0;
  CutDecision cut;
  std::vector<bool> kept;  // per message before the cut: stays before the checkpoint
  std::vector<std::string> kept_ids;
  std::vector<std::string> replaced_ids;
  std::size_t summarized_chars = 0;
  internal::SummarizeInput in;
  // What SummarizeJob came to: the checkpoint, or the error (already reported).
  std::optional<internal::SummarizeOutput> summary;
  Status error;
  internal::AfterCompactRun after;
  std::size_t calls = 0;
  Usage usage;
  bool provider_failed = false;
  // R17: the span's ledger after what the replaced checkpoint carried (BeginCompaction finds
  // `carried`, SummarizeJob reads the span), the guard's budget, and what the guard did.
  bool ledger_on = false;
  std::size_t ledger_max_chars = 0;
  Ledger carried;
  Ledger ledger;
  LedgerGuard guard;
};

// The fields of an event about `job`, with "background": true when it ran in the background.
inline jsonutil::Json Fields(const CompactionJob& job, jsonutil::Json fields) {
  return job.background ? internal::InBackground(std::move(fields)) : fields;
}

}  // namespace compactor_detail
}  // namespace v0
}  // namespace recap

#endif  // RECAP_SRC_CORE_COMPACTOR_COMPACTION_JOB_H_
