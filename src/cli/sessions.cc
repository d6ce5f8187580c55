// recap CLI — `recap sessions list|show|history|recover`.
#include <cstdio>
#include <iostream>
#include <string>
#include <vector>

#include "cli.h"

namespace recap_cli {
namespace {

const char* const kHelp =
    "usage: recap sessions list [--db DB] [--json]\n"
    "       recap sessions show ID [--db DB] [--json]\n"
    "       recap sessions history ID [--db DB] [--json]\n"
    "       recap sessions recover ID --acknowledge [--db DB] [--json]\n"
    "\n"
    "  list      the sessions of the database, with their size and version\n"
    "  show      a session's figures (as `recap stats`) and its active messages, one a line\n"
    "  history   every message ever stored for the session, in store order, with its state\n"
    "            (active, or compacted and what retired it)\n"
    "  recover   records, for each tool call without a result, that its outcome is unknown\n"
    "            and that it was not repeated, so that the session can be compacted again.\n"
    "            recap never re-runs a tool. Without --acknowledge it only lists those calls\n"
    "            and exits with 1.\n"
    "\n"
    "Session ids and texts are printed with their control characters escaped (\\x1b, \\n);\n"
    "--json gives them exactly.\n"
    "\n"
    "options:\n"
    "  --db DB           the database file (default ./recap.db) or a postgresql:// URL\n"
    "  --session ID      the session, as the other commands take it (instead of ID)\n"
    "  --acknowledge     (recover) confirm that the calls' results are to be recorded as unknown\n"
    "  --json            machine-readable output: one JSON object\n"
    "  --help            this text\n";

int List(const Args& args, recap::SessionStore& store) {
  recap::Result<std::vector<std::string>> ids = store.ListSessions();
  if (!ids.ok()) return Failure(args, ids.status());
  Json sessions = Json::array();
  for (const std::string& id : *ids) {
    // What the command keeps beside sessions (their instructions, the proxy's salt).
    if (id.rfind("recap-cli.", 0) == 0) continue;
    recap::Result<recap::SessionState> state = store.Load(id);
    if (!state.ok()) return Failure(args, state.status());
    Json s = {{"session", id},
              {"messages", state->transcript.size()},
              {"chars", state->transcript.chars()},
              {"tokens", state->transcript.tokens()},
              {"version", state->version}};
    recap::Result<std::vector<recap::HistoryEntry>> history = store.History(id);
    if (history.ok()) s["history_entries"] = history->size();
    sessions.push_back(std::move(s));
  }
  if (args.json()) {
    PrintJson(Json{{"sessions", sessions}});
    return kExitOk;
  }
  if (sessions.empty()) {
    std::printf("no sessions yet; import one with `recap import`\n");
    return kExitOk;
  }
  std::printf("%-40s %10s %14s %10s %10s\n", "session", "messages", "chars", "history", "version");
  for (const Json& s : sessions) {
    std::printf(
        "%-40s %10s %14s %10s %10s\n", Shown(s["session"].get<std::string>()).c_str(),
        Num(s["messages"].get<std::size_t>()).c_str(), Num(s["chars"].get<std::size_t>()).c_str(),
        s.contains("history_entries") ? Num(s["history_entries"].get<std::size_t>()).c_str() : "?",
        Num(s["version"].get<std::size_t>()).c_str());
  }
  return kExitOk;
}

int Show(const Args& args, recap::SessionStore& store, const std::string& db,
         const std::string& session) {
  recap::Result<recap::SessionState> state = LoadExisting(store, db, session);
  if (!state.ok()) return Failure(args, state.status());
  Json stats = SessionStatsJson(store, session, *state);
  const recap::Transcript& t = state->transcript;
  Json messages = Json::array();
  for (std::size_t i = 0; i < t.size(); ++i) {
    messages.push_back({{"index", i},
                        {"id", t[i].id},
                        {"role", recap::RoleName(t[i].role)},
                        {"chars", t.chars(i)},
                        {"summary", t[i].summary},
                        {"preview", Preview(t[i], 80)}});
  }
  if (args.json()) {
    stats["active"] = std::move(messages);
    PrintJson(stats);
    return kExitOk;
  }
  PrintSessionStats(stats);
  std::printf("\n%6s  %-9s %10s  %s\n", "#", "role", "chars", "text");
  for (const Json& m : messages) {
    std::printf("%6zu  %-9s %10s  %s%s\n", m["index"].get<std::size_t>(),
                m["role"].get<std::string>().c_str(), Num(m["chars"].get<std::size_t>()).c_str(),
                m["summary"].get<bool>() ? "[checkpoint] " : "",
                m["preview"].get<std::string>().c_str());
  }
  return kExitOk;
}

int History(const Args& args, recap::SessionStore& store, const std::string& db,
            const std::string& session) {
  recap::Result<recap::SessionState> state = LoadExisting(store, db, session);
  if (!state.ok()) return Failure(args, state.status());
  recap::Result<std::vector<recap::HistoryEntry>> history = store.History(session);
  if (!history.ok()) return Failure(args, history.status());
  Json entries = Json::array();
  for (const recap::HistoryEntry& e : *history) {
    entries.push_back({{"seq", e.seq},
                       {"id", e.message.id},
                       {"role", recap::RoleName(e.message.role)},
                       {"chars", recap::MessageChars(e.message)},
                       {"summary", e.message.summary},
                       {"state", e.state == recap::HistoryState::kActive ? "active" : "compacted"},
                       {"replaced_by", e.replaced_by},
                       {"preview", Preview(e.message, 60)}});
  }
  if (args.json()) {
    PrintJson(Json{{"session", session}, {"history", entries}});
    return kExitOk;
  }
  std::printf("%6s  %-9s %-10s %-14s %10s  %s\n", "seq", "role", "state", "replaced by", "chars",
              "text");
  for (const Json& e : entries) {
    std::printf(
        "%6s  %-9s %-10s %-14s %10s  %s%s\n", std::to_string(e["seq"].get<std::uint64_t>()).c_str(),
        e["role"].get<std::string>().c_str(), e["state"].get<std::string>().c_str(),
        e["replaced_by"].get<std::string>().c_str(), Num(e["chars"].get<std::size_t>()).c_str(),
        e["summary"].get<bool>() ? "[checkpoint] " : "", e["preview"].get<std::string>().c_str());
  }
  return kExitOk;
}

int Recover(const Args& args, std::shared_ptr<recap::SessionStore> store, const std::string& db,
            const std::string& session) {
  recap::Result<recap::SessionState> state = LoadExisting(*store, db, session);
  if (!state.ok()) return Failure(args, state.status());
  recap::Result<std::unique_ptr<recap::Compactor>> compactor =
      recap::Compactor::Create(recap::Config{}, nullptr, store);
  if (!compactor.ok()) return Failure(args, compactor.status());
  const bool acknowledge = args.flags.count("acknowledge") != 0;
  if (!acknowledge) {
    // Said in the command's words (the library's message names its C++ call).
    const std::vector<recap::UncertainCall> open = recap::FindUncertainToolCalls(state->transcript);
    if (!open.empty()) {
      std::string list;
      for (std::size_t k = 0; k < open.size() && k < 5; ++k) {
        list += (k ? ", " : "") + Shown(open[k].call_id) +
                (open[k].name.empty() ? "" : " (" + open[k].name + ")");
      }
      if (open.size() > 5) list += ", and " + std::to_string(open.size() - 5) + " more";
      return Failure(args, "session '" + Shown(session) + "' has " + std::to_string(open.size()) +
                               " tool call(s) with no recorded result: " + list +
                               ". recap never re-runs a tool. Check what these calls did, then "
                               "record each missing result as unknown with `recap sessions "
                               "recover " +
                               QuotedForShell(session) + " --acknowledge --db " +
                               QuotedForShell(ShownDb(db)) + "`. Nothing was changed");
    }
  }
  recap::Result<recap::RecoveryOutcome> outcome = (*compactor)->Recover(session, acknowledge);
  if (!outcome.ok()) return Failure(args, outcome.status());
  Json recovered = Json::array();
  for (const recap::UncertainCall& u : outcome->recovered) {
    recovered.push_back({{"message", u.message}, {"call_id", u.call_id}, {"name", u.name}});
  }
  if (args.json()) {
    PrintJson(Json{{"session", session}, {"recovered", recovered}, {"version", outcome->version}});
    return kExitOk;
  }
  if (outcome->recovered.empty()) {
    std::printf("session '%s' has no tool call without a result; nothing to recover\n",
                Shown(session).c_str());
    return kExitOk;
  }
  std::printf(
      "recorded %zu tool call(s) of session '%s' as not repeated, outcome unknown "
      "(version %s):\n",
      outcome->recovered.size(), Shown(session).c_str(), Num(outcome->version).c_str());
  for (const recap::UncertainCall& u : outcome->recovered) {
    std::printf("  message #%zu: %s (%s)\n", u.message,
                u.name.empty() ? "an opaque call" : Shown(u.name).c_str(),
                Shown(u.call_id).c_str());
  }
  return kExitOk;
}

}  // namespace

int RunSessions(const std::vector<std::string>& words) {
  Args args;
  args.command = "sessions";
  std::string error;
  if (!ParseArgs(words, {{"db", true}, {"acknowledge", false}, {"session", true}}, &args, &error)) {
    return UsageError(args, error);
  }
  if (args.flags.count("help")) {
    std::cout << kHelp;
    return kExitOk;
  }
  if (args.positional.empty()) {
    return UsageError(args, "name what to do: list, show ID, history ID or recover ID");
  }
  const std::string what = args.positional[0];
  args.command = "sessions " + what;
  const std::string db = args.Get("db", kDefaultDb);
  const bool takes_id = what == "show" || what == "history" || what == "recover";
  if (what != "list" && !takes_id) {
    args.command = "sessions";
    return UsageError(args, "unknown sessions command '" + what +
                                "'; use list, show ID, history ID or recover ID");
  }
  // The id as every other command takes it (--session ID) or after the subcommand.
  if (takes_id && args.Has("session")) {
    if (args.positional.size() != 1) {
      return UsageError(args, "give the session id once: recap sessions " + what +
                                  " ID, or recap sessions " + what + " --session ID");
    }
    args.positional.push_back(args.Get("session", ""));
  }
  if (takes_id && args.positional.size() != 2) {
    return UsageError(args,
                      "give the session id: recap sessions " + what + " ID (or --session ID)");
  }
  if (!takes_id && args.positional.size() != 1) {
    return UsageError(args, "`sessions list` takes no argument");
  }
  if (!takes_id && args.Has("session")) {
    return UsageError(args,
                      "`sessions list` lists every session; --session is for show, "
                      "history and recover");
  }
  if (what != "recover" && args.flags.count("acknowledge")) {
    return UsageError(args, "--acknowledge is for `recap sessions recover`");
  }
  if (!CheckDb(db, &error)) return UsageError(args, error);
  recap::Result<std::shared_ptr<recap::SessionStore>> store = OpenStore(
      db, what == "recover" && args.flags.count("acknowledge") ? Access::kWrite : Access::kRead);
  if (!store.ok()) return Failure(args, store.status());
  if (what == "list") return List(args, **store);
  const std::string session = args.positional[1];
  if (what == "show") return Show(args, **store, db, session);
  if (what == "history") return History(args, **store, db, session);
  return Recover(args, *store, db, session);
}

}  // namespace recap_cli
