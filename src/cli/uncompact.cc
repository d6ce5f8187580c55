// recap CLI — `recap uncompact`: takes back the session's newest compaction, clearing or
// reduction (Compactor::Uncompact, SPEC R18.3) in one transaction, and says what it undid.
#include <cstdio>
#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include "cli.h"

namespace recap_cli {
namespace {

const char* const kHelp =
    "usage: recap uncompact --session ID [--db DB] [--json]\n"
    "\n"
    "Undoes the session's newest compaction, clearing or reduction, in one transaction:\n"
    "the messages it summarized, cleared or clipped are active again in their places, the\n"
    "checkpoint (or the reduced copies) is retired to the history, and messages appended\n"
    "since stay after the restored ones. Run it again to undo the one before. When nothing\n"
    "is left to undo it says so and changes nothing (exit 0 either way). The next `prepare`\n"
    "or `compact --auto` compacts again if the restored session is over its trigger.\n"
    "\n"
    "options:\n"
    "  --session ID      the session (required)\n"
    "  --db DB           the database file (default ./recap.db) or a postgresql:// URL\n"
    "  --json            one JSON object: undone, commit, reason, restored_messages,\n"
    "                    retired_messages, before_chars, after_chars, version\n"
    "  --help            this text\n";

}  // namespace

int RunUncompact(const std::vector<std::string>& words) {
  Args args;
  args.command = "uncompact";
  std::string error;
  if (!ParseArgs(words, {{"db", true}, {"session", true}}, &args, &error)) {
    return UsageError(args, error);
  }
  if (args.flags.count("help")) {
    std::cout << kHelp;
    return kExitOk;
  }
  if (!args.positional.empty()) {
    return UsageError(args, "unexpected argument '" + args.positional[0] +
                                "'; name the session with --session ID");
  }
  if (!args.Has("session")) return UsageError(args, "--session ID is required");
  const std::string session = args.Get("session");
  if (!ValidSessionId(session, &error)) return UsageError(args, error);
  const std::string db = args.Get("db", kDefaultDb);
  if (!CheckDb(db, &error)) return UsageError(args, error);
  recap::Result<std::shared_ptr<recap::SessionStore>> store = OpenStore(db, Access::kWrite);
  if (!store.ok()) return Failure(args, store.status());
  recap::Result<recap::SessionState> state = LoadExisting(**store, db, session);
  if (!state.ok()) return Failure(args, state.status());
  // The command lives for one call: no background compaction to run or to cancel.
  recap::Config config;
  config.compaction.background.enabled = false;
  recap::Result<std::unique_ptr<recap::Compactor>> compactor =
      recap::Compactor::Create(config, nullptr, *store);
  if (!compactor.ok()) return Failure(args, compactor.status());
  recap::Result<recap::UncompactOutcome> outcome = (*compactor)->Uncompact(session);
  if (!outcome.ok()) return Failure(args, outcome.status());

  if (args.json()) {
    PrintJson(Json{{"session", session},
                   {"undone", outcome->undone},
                   {"commit", outcome->commit},
                   {"reason", outcome->reason},
                   {"restored_messages", outcome->restored_messages},
                   {"retired_messages", outcome->retired_messages},
                   {"before_chars", outcome->before_chars},
                   {"after_chars", outcome->after_chars},
                   {"version", outcome->version}});
    return kExitOk;
  }
  if (!outcome->undone) {
    std::printf(
        "nothing to undo: session '%s' has no compaction, clearing or reduction left to undo; "
        "nothing changed\n",
        Shown(session).c_str());
    return kExitOk;
  }
  const bool compaction = outcome->commit.rfind("compaction:", 0) == 0;
  const std::string reason = outcome->reason.empty() ? "" : " (" + Shown(outcome->reason) + ")";
  std::printf("undid %s%s of session '%s' in %s\n", Shown(outcome->commit).c_str(), reason.c_str(),
              Shown(session).c_str(), ShownDb(db).c_str());
  std::printf("  %s active again; %s (%s) retired to the history\n",
              Counted(outcome->restored_messages, "message").c_str(),
              Counted(outcome->retired_messages, "message").c_str(),
              compaction ? "the checkpoint and what it added" : "the reduced copies");
  std::printf("  characters %s -> %s; version %s\n", Num(outcome->before_chars).c_str(),
              Num(outcome->after_chars).c_str(), Num(outcome->version).c_str());
  std::printf(
      "  run it again to undo the one before; the next `prepare` or `compact --auto`\n"
      "  compacts again if the session is over its trigger\n");
  return kExitOk;
}

}  // namespace recap_cli
