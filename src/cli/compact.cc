// recap CLI — `recap compact`: a manual compaction (Compactor::Compact) or, with --auto, the
// per-turn Compactor::Prepare; prints a before/after table, the checkpoint and the events.
#include <cstdio>
#include <iostream>
#include <mutex>
#include <sstream>
#include <string>
#include <vector>

#include "cli.h"
#include "progress.h"

namespace recap_cli {
namespace {

std::string Help() {
  return std::string(
             "usage: recap compact --session ID [--db DB] [--focus TEXT] [--auto]\n"
#if RECAP_CLI_HAVE_HTTP
             "                     [--provider P [--base-url URL --model M --api-key-env VAR]]\n"
#else
             "                     [--provider P]\n"
#endif
             "                     [--config FILE] [--max-context-chars N] [--keep-turns N]\n"
             "                     [--json]\n"
             "\n"
             "Compacts a session now: the older part of the transcript is summarized into a\n"
             "checkpoint and the recent turns are kept verbatim, in one transaction. With --auto\n"
             "it runs what a host runs before each model request (`prepare`): it compacts only\n"
             "when a trigger fires, and clips oversized content when the conversation is over\n"
             "maxContextChars. Prints a before/after table, the checkpoint and the events. A\n"
             "failed compaction changes nothing.\n"
             "\n"
             "options:\n"
             "  --session ID              the session (required)\n"
             "  --db DB                   the database file (default ./recap.db) or a\n"
             "                            postgresql:// URL\n"
             "  --focus TEXT              what the summary should pay attention to (manual\n"
             "                            compaction only)\n"
             "  --auto                    run `prepare` instead of a manual compaction\n") +
         kProviderHelp + kConfigHelp +
         "  --json                    events as JSON lines on stdout, then one result object\n"
         "                            {\"type\": \"result\", ...}\n"
         "  --help                    this text\n";
}

class CollectingSink : public recap::EventSink {
 public:
  void OnEvent(const recap::Event& event) override {
    std::lock_guard<std::mutex> lock(mu_);
    events_.push_back(event);
  }
  std::vector<recap::Event> events() {
    std::lock_guard<std::mutex> lock(mu_);
    return events_;
  }

 private:
  std::mutex mu_;
  std::vector<recap::Event> events_;
};

void TableRow(const char* label, std::size_t before, std::size_t after) {
  std::printf("  %-14s %14s %14s\n", label, Num(before).c_str(), Num(after).c_str());
}

}  // namespace

int RunCompact(const std::vector<std::string>& words) {
  Args args;
  args.command = "compact";
  std::vector<OptionSpec> specs = {
      {"db", true}, {"session", true}, {"focus", true}, {"auto", false}};
  for (const OptionSpec& s : ConfigOptions()) specs.push_back(s);
  for (const OptionSpec& s : ProviderOptions()) specs.push_back(s);
  std::string error;
  if (!ParseArgs(words, specs, &args, &error)) return UsageError(args, error);
  if (args.flags.count("help")) {
    std::cout << Help();
    return kExitOk;
  }
  if (!args.positional.empty())
    return UsageError(args, "unexpected argument '" + args.positional[0] + "'");
  if (!args.Has("session")) return UsageError(args, "--session ID is required");
  const bool automatic = args.flags.count("auto") != 0;
  if (automatic && args.Has("focus")) {
    return UsageError(args, "--focus is for a manual compaction; leave out --auto to use it");
  }
  const std::string session = args.Get("session");
  const std::string db = args.Get("db", kDefaultDb);
  SessionRun run;
  int exit_code = kExitOk;
  if (!OpenSessionRun(args, session, &run, &exit_code)) return exit_code;
  recap::RequestSizes sizes;
  if (run.instructions) sizes.instructions_chars = recap::MessageChars(*run.instructions);

  auto collecting = std::make_shared<CollectingSink>();
  Progress progress((automatic ? "preparing session '" : "compacting session '") + session + "'");
  std::shared_ptr<recap::EventSink> sink =
      NewProgressSink(&progress, args.json() ? recap::NewJsonlSink(std::cout)
                                             : std::shared_ptr<recap::EventSink>(collecting));
  // A command lives for one call: a compaction handed to a worker (compaction.background)
  // would be cancelled as it exits. It compacts in Prepare; the setting is a host's.
  recap::Config run_config = run.config;
  run_config.compaction.background.enabled = false;
  recap::Result<std::unique_ptr<recap::Compactor>> created =
      recap::Compactor::Create(run_config, run.provider, run.store, {}, {sink});
  if (!created.ok()) return Failure(args, created.status());
  recap::Compactor& compactor = **created;

  Json result = {{"type", "result"}, {"session", session}, {"mode", automatic ? "auto" : "manual"}};
  bool compacted = false;
  std::string writer;
  recap::Checkpoint checkpoint;
  bool have_checkpoint = false;
  std::string skipped;
  if (automatic) {
    recap::Result<recap::Prepared> prepared = compactor.Prepare(session, sizes);
    if (!prepared.ok()) {
      return Failure(args, prepared.status().WithContext(
                               "prepare failed (only what it committed before failing, if "
                               "anything, was kept)"));
    }
    compacted = !prepared->compactions.empty();
    result["compactions"] = Json::array();
    for (recap::CompactionReason r : prepared->compactions) {
      result["compactions"].push_back(recap::CompactionReasonName(r));
    }
    result["reduced_messages"] = prepared->reduced_messages;
    result["provider_retired_messages"] = prepared->provider_retired_messages;
    result["before_tokens"] = prepared->before_tokens;
    result["after_tokens"] = prepared->after_tokens;
    if (compacted && !prepared->messages.empty() && prepared->messages[0].summary) {
      checkpoint = recap::ParseRenderedCheckpoint(recap::JoinedText(prepared->messages[0]));
      have_checkpoint = true;
    }
  } else {
    recap::CompactOptions options;
    options.focus = args.Get("focus");
    options.sizes = sizes;
    recap::Result<recap::CompactOutcome> outcome = compactor.Compact(session, options);
    if (!outcome.ok()) {
      // A checkpoint the provider wrote may have retired the messages before it first (R14.1):
      // that commit stays, so "changed nothing" is said only when nothing did.
      recap::Result<recap::SessionState> now = run.store->Load(session);
      const bool changed = !now.ok() || now->version != run.state.version;
      return Failure(args, outcome.status().WithContext(
                               changed ? "the compaction failed; the messages before a "
                                         "checkpoint the provider wrote were retired first, and "
                                         "that stays"
                                       : "the compaction failed and changed nothing"));
    }
    compacted = outcome->compacted;
    result["provider_retired_messages"] = outcome->provider_retired_messages;
    if (!compacted) {
      skipped = recap::SkipReasonName(outcome->skipped);
      result["skipped"] = skipped;
      if (outcome->skipped == recap::SkipReason::kUncertainToolResults) {
        return Failure(args, "session '" + Shown(session) +
                                 "' has tool calls without a result, so it cannot be compacted "
                                 "(recap never separates a call from its result). Record them "
                                 "as not repeated with `recap sessions recover " +
                                 session + " --acknowledge --db " + QuotedForShell(ShownDb(db)) +
                                 "`, then compact again. Nothing "
                                 "was changed");
      }
    } else {
      checkpoint = outcome->checkpoint;
      have_checkpoint = true;
      writer = outcome->writer;
      result["summarized_messages"] = outcome->summarized_messages;
      result["partial"] = outcome->partial;
      result["writer"] = writer;
    }
  }
  result["compacted"] = compacted;
  progress.Finish();

  recap::Result<recap::SessionState> after = run.store->Load(session);
  if (!after.ok()) return Failure(args, after.status());
  result["before"] = {{"messages", run.state.transcript.size()},
                      {"chars", run.state.transcript.chars()},
                      {"tokens", run.state.transcript.tokens()},
                      {"version", run.state.version}};
  result["after"] = {{"messages", after->transcript.size()},
                     {"chars", after->transcript.chars()},
                     {"tokens", after->transcript.tokens()},
                     {"version", after->version}};
  result["instructions_chars"] = sizes.instructions_chars;
  if (have_checkpoint) {
    result["checkpoint"] = Json::parse(recap::CheckpointToJson(checkpoint), nullptr, false);
  }
  if (args.json()) {
    PrintJson(result);
    return kExitOk;
  }

  std::printf("%s of session '%s' in %s\n", automatic ? "prepare" : "compaction",
              Shown(session).c_str(), ShownDb(db).c_str());
  if (!compacted && !automatic) {
    std::printf("  nothing compacted: %s\n", skipped.c_str());
    if (skipped == "nothing_to_summarize") {
      std::printf(
          "  only the kept turns (or an earlier checkpoint) are there; a smaller "
          "--keep-turns would summarize more\n");
    }
  }
  std::printf("\n  %-14s %14s %14s\n", "", "before", "after");
  TableRow("messages", run.state.transcript.size(), after->transcript.size());
  TableRow("characters", run.state.transcript.chars(), after->transcript.chars());
  TableRow("tokens (est.)", run.state.transcript.tokens(), after->transcript.tokens());
  TableRow("version", run.state.version, after->version);
  if (automatic) {
    std::printf("  compactions: %s; messages clipped by the reducer: %s\n",
                result["compactions"].empty() ? "none" : result["compactions"].dump().c_str(),
                Num(result["reduced_messages"].get<std::size_t>()).c_str());
  } else if (compacted) {
    std::printf("  %s messages summarized by the %s summarizer%s\n",
                Num(result["summarized_messages"].get<std::size_t>()).c_str(),
                Shown(writer).c_str(),
                result["partial"].get<bool>() ? " (partial: the reply was cut)" : "");
  }
  if (result.value("provider_retired_messages", std::size_t{0}) > 0) {
    std::printf("  %s messages retired first: a checkpoint the provider wrote came after them\n",
                Num(result["provider_retired_messages"].get<std::size_t>()).c_str());
  }
  if (have_checkpoint) {
    std::printf("\nthe checkpoint\n");
    std::istringstream lines(recap::RenderCheckpoint(checkpoint));
    std::string line;
    while (std::getline(lines, line)) std::printf("  | %s\n", Shown(line).c_str());
  }
  const std::vector<recap::Event> events = collecting->events();
  std::printf("\nevents (%zu)\n", events.size());
  for (const recap::Event& e : events) std::printf("  %s\n", Shown(e.json).c_str());
  return kExitOk;
}

}  // namespace recap_cli
