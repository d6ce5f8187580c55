// recap CLI — `recap stats` and `recap plan`: what a session holds and what a compaction would
// do now. Both only read the database.
#include <cstdio>
#include <iostream>
#include <string>
#include <vector>

#include "cli.h"

namespace recap_cli {
namespace {

const char* const kStatsHelp =
    "usage: recap stats --session ID [--db DB] [--json]\n"
    "\n"
    "Sizes, turns and tool pairs of a session's active transcript, and what its history holds.\n"
    "Reads the database; changes nothing.\n"
    "\n"
    "options:\n"
    "  --session ID      the session (required)\n"
    "  --db DB           the database file (default ./recap.db) or a postgresql:// URL\n"
    "  --json            print the figures as one JSON object\n"
    "  --help            this text\n";

std::string PlanHelp() {
  return std::string(
             "usage: recap plan --session ID [--db DB] [--config FILE] [--max-context-chars N]\n"
             "                  [--keep-turns N] [--json]\n"
             "\n"
             "What the per-turn `prepare` would do now: whether a trigger fires, where a\n"
             "compaction would cut with the configured keepTurns, what it would summarize, keep\n"
             "and free, and whether the tail reducer would still have to clip. Reads the\n"
             "database; calls no model and changes nothing.\n"
             "\n"
             "options:\n"
             "  --session ID              the session (required)\n"
             "  --db DB                   the database file (default ./recap.db) or a\n"
             "                            postgresql:// URL\n") +
         kConfigHelp +
         "  --json                    print the plan as one JSON object\n"
         "  --help                    this text\n";
}

void Row(const std::string& label, const std::string& value, const std::string& note = {}) {
  std::printf("  %-20s %14s  %s\n", label.c_str(), value.c_str(), note.c_str());
}

// R17.3: the ledger a compaction now would guard, a line per entry (the newest 30 of each
// kind are shown; --json lists all).
void PrintLedger(const recap::Plan& plan, const recap::Config& config) {
  if (!config.compaction.ledger.enabled) {
    std::printf("\nthe ledger (compaction.ledger) is off: nothing is guarded\n");
    return;
  }
  const recap::Ledger& ledger = plan.ledger;
  std::printf(
      "\nwhat the checkpoint must keep (the ledger; recap adds what the summarizer leaves out)\n");
  for (std::size_t k = 0; k < recap::kLedgerKinds; ++k) {
    const auto kind = static_cast<recap::LedgerKind>(k);
    const std::size_t n = ledger.Count(kind);
    std::string note;
    if (ledger.pruned[k] > 0) note = "and " + Num(ledger.pruned[k]) + " older ones let go";
    Row(std::string(recap::LedgerKindName(kind)) + "s", Num(n), note);
  }
  constexpr std::size_t kShown = 30;
  for (std::size_t k = 0; k < recap::kLedgerKinds; ++k) {
    const auto kind = static_cast<recap::LedgerKind>(k);
    std::vector<const recap::LedgerEntry*> of;
    for (const recap::LedgerEntry& e : ledger.entries) {
      if (e.kind == kind) of.push_back(&e);
    }
    const std::size_t from = of.size() > kShown ? of.size() - kShown : 0;
    if (from > 0)
      std::printf("    %s: %s older ones not shown\n", recap::LedgerKindName(kind),
                  Num(from).c_str());
    for (std::size_t i = from; i < of.size(); ++i) {
      std::string line = of[i]->text.substr(0, of[i]->text.find('\n'));
      if (line.size() > 100) {
        std::size_t cut = 100;
        while (cut > 0 && (static_cast<unsigned char>(line[cut]) & 0xC0) == 0x80) --cut;
        line = line.substr(0, cut) + "\xE2\x80\xA6";
      } else if (line.size() < of[i]->text.size()) {
        line += " \xE2\x80\xA6";
      }
      std::printf("    %-10s %s  (message %s)\n", recap::LedgerKindName(kind), Shown(line).c_str(),
                  Shown(of[i]->message_id).c_str());
    }
  }
}

std::string Chars(std::size_t chars) {
  return Num(chars) + " chars (~" + Num(recap::EstimateTokens(chars)) + " tokens)";
}

// Common opening of both commands: parse, open, load. Returns -1 to go on.
int Open(const std::vector<std::string>& words, const char* command, std::vector<OptionSpec> specs,
         const std::string& help, Args* args, std::shared_ptr<recap::SessionStore>* store,
         recap::SessionState* state) {
  args->command = command;
  std::string error;
  specs.push_back({"db", true});
  specs.push_back({"session", true});
  if (!ParseArgs(words, specs, args, &error)) return UsageError(*args, error);
  if (args->flags.count("help")) {
    std::cout << help;
    return kExitOk;
  }
  if (!args->positional.empty()) {
    return UsageError(*args, "unexpected argument '" + args->positional[0] + "'");
  }
  if (!args->Has("session")) return UsageError(*args, "--session ID is required");
  const std::string db = args->Get("db", kDefaultDb);
  if (!CheckDb(db, &error)) return UsageError(*args, error);
  recap::Result<std::shared_ptr<recap::SessionStore>> opened = OpenStore(db, Access::kRead);
  if (!opened.ok()) return Failure(*args, opened.status());
  *store = *opened;
  recap::Result<recap::SessionState> loaded = LoadExisting(**store, db, args->Get("session"));
  if (!loaded.ok()) return Failure(*args, loaded.status());
  *state = std::move(loaded).value();
  return -1;
}

}  // namespace

Json SessionStatsJson(recap::SessionStore& store, const std::string& session,
                      const recap::SessionState& state) {
  const recap::Transcript& t = state.transcript;
  const recap::PairingReport pairing = recap::AnalyzePairing(t);
  std::size_t largest = 0, checkpoints = 0;
  for (std::size_t i = 0; i < t.size(); ++i) {
    if (t.chars(i) > t.chars(largest)) largest = i;
    if (t[i].summary) ++checkpoints;
  }
  Json out = {{"session", session},
              {"version", state.version},
              {"messages", t.size()},
              {"chars", t.chars()},
              {"tokens", t.tokens()},
              {"instructions_chars", 0},
              {"turns", recap::FindTurnStarts(t).size()},
              {"tool_pairs", pairing.pairs},
              {"uncertain_tool_calls", pairing.uncertain.size()},
              {"orphan_tool_results", pairing.orphans.size()},
              {"checkpoints", checkpoints}};
  if (!t.empty()) {
    out["largest_message"] = {{"index", largest},
                              {"chars", t.chars(largest)},
                              {"role", recap::RoleName(t[largest].role)}};
  }
  recap::Result<std::optional<recap::Message>> instructions = LoadInstructions(store, session);
  if (instructions.ok() && *instructions) {
    out["instructions_chars"] = recap::MessageChars(**instructions);
  }
  recap::Result<std::vector<recap::HistoryEntry>> history = store.History(session);
  if (history.ok()) {
    std::size_t compacted = 0;
    for (const recap::HistoryEntry& e : *history) {
      compacted += e.state == recap::HistoryState::kCompacted ? 1 : 0;
    }
    out["history_entries"] = history->size();
    out["history_compacted"] = compacted;
  }
  return out;
}

void PrintSessionStats(const Json& s) {
  std::printf("session '%s' (version %s)\n", Shown(s["session"].get<std::string>()).c_str(),
              Num(s["version"].get<std::size_t>()).c_str());
  Row("messages", Num(s["messages"].get<std::size_t>()));
  Row("characters", Num(s["chars"].get<std::size_t>()), "Unicode code points");
  Row("estimated tokens", Num(s["tokens"].get<std::size_t>()), "characters / 4");
  Row("instructions", Num(s["instructions_chars"].get<std::size_t>()),
      "chars, the leading system message, kept apart");
  Row("turns", Num(s["turns"].get<std::size_t>()), "user messages a person wrote");
  Row("tool pairs", Num(s["tool_pairs"].get<std::size_t>()),
      Counted(s["uncertain_tool_calls"].get<std::size_t>(), "call") + " without a result, " +
          Counted(s["orphan_tool_results"].get<std::size_t>(), "result") + " without a call");
  Row("checkpoints", Num(s["checkpoints"].get<std::size_t>()), "in the active transcript");
  if (s.contains("largest_message")) {
    const Json& l = s["largest_message"];
    Row("largest message", Num(l["chars"].get<std::size_t>()),
        "chars, #" + std::to_string(l["index"].get<std::size_t>()) + " (" +
            l["role"].get<std::string>() + ")");
  }
  if (s.contains("history_entries")) {
    Row("history", Num(s["history_entries"].get<std::size_t>()),
        "messages stored, " + Num(s["history_compacted"].get<std::size_t>()) +
            " of them compacted or replaced");
  }
}

int RunStats(const std::vector<std::string>& words) {
  Args args;
  std::shared_ptr<recap::SessionStore> store;
  recap::SessionState state;
  const int rc = Open(words, "stats", {}, kStatsHelp, &args, &store, &state);
  if (rc >= 0) return rc;
  const Json stats = SessionStatsJson(*store, args.Get("session"), state);
  if (args.json()) {
    PrintJson(stats);
  } else {
    PrintSessionStats(stats);
  }
  return kExitOk;
}

int RunPlan(const std::vector<std::string>& words) {
  Args args;
  std::shared_ptr<recap::SessionStore> store;
  recap::SessionState state;
  const int rc = Open(words, "plan", ConfigOptions(), PlanHelp(), &args, &store, &state);
  if (rc >= 0) return rc;
  bool usage = false;
  recap::Result<recap::Config> config = BuildConfig(args, &usage);
  if (!config.ok()) {
    return usage ? UsageError(args, config.status().message()) : Failure(args, config.status());
  }
  const std::string session = args.Get("session");
  recap::RequestSizes sizes;
  recap::Result<std::optional<recap::Message>> instructions = LoadInstructions(*store, session);
  if (!instructions.ok()) return Failure(args, instructions.status());
  if (*instructions) sizes.instructions_chars = recap::MessageChars(**instructions);

  recap::Result<std::unique_ptr<recap::Compactor>> compactor =
      recap::Compactor::Create(*config, nullptr, store);
  if (!compactor.ok()) return Failure(args, compactor.status());
  recap::Result<recap::Plan> plan = (*compactor)->PlanFor(session, sizes);
  if (!plan.ok()) return Failure(args, plan.status());

  // The transcript the plan judged: once a provider's checkpoint arrived (R14.1), what precedes
  // it goes at the next prepare, the instructions and pinned messages aside.
  recap::Transcript t = state.transcript;
  if (plan->provider_retired_messages > 0) {
    std::size_t at = 0;  // the newest message holding a provider checkpoint
    for (std::size_t i = t.size(); i-- > 0;) {
      if (recap::FindProviderCheckpoint(t[i])) {
        at = i;
        break;
      }
    }
    std::vector<recap::Message> view;
    for (std::size_t i = 0; i < at; ++i) {
      if (t[i].pinned || (i == 0 && recap::IsInstructions(t[i]))) view.push_back(t[i]);
    }
    for (std::size_t i = at; i < t.size(); ++i) view.push_back(t[i]);
    view[view.size() - (t.size() - at)].summary = true;
    t = recap::Transcript(view);
  }
  // The cut keepTurns alone asks for (before R3.8 may move it for size).
  recap::CutOptions options;
  options.keep_turns = config->compaction.keep_turns;
  const recap::CutDecision plain = recap::FindCut(t, options);
  const recap::CutDecision& cut = plan->cut;
  const std::size_t frees = plan->reducible_chars > plan->estimated_after_chars
                                ? plan->reducible_chars - plan->estimated_after_chars
                                : 0;

  if (args.json()) {
    auto cut_json = [&](const recap::CutDecision& c) {
      Json j = {{"ok", c.ok()}, {"skip", recap::SkipReasonName(c.skip)}};
      if (c.ok()) {
        j["position"] = c.position;
        j["summarized_messages"] = c.position;
        j["summarized_chars"] = c.summarized_chars;
        j["kept_messages"] = t.size() - c.position;
        j["kept_chars"] = c.kept_chars;
        j["kept_turns"] = c.kept_turns;
        j["inside_turn"] = c.inside_turn;
        j["moved_for_size"] = c.moved_for_size;
      }
      Json uncertain = Json::array();
      for (const recap::UncertainCall& u : c.uncertain) {
        uncertain.push_back({{"message", u.message}, {"call_id", u.call_id}, {"name", u.name}});
      }
      j["uncertain"] = std::move(uncertain);
      return j;
    };
    // R17.3: the ledger a compaction now would guard.
    auto ledger_json = [&]() {
      Json entries = Json::array();
      for (const recap::LedgerEntry& e : plan->ledger.entries) {
        entries.push_back(
            {{"kind", recap::LedgerKindName(e.kind)}, {"text", e.text}, {"message", e.message_id}});
      }
      Json pruned = Json::object();
      for (std::size_t k = 0; k < recap::kLedgerKinds; ++k) {
        pruned[recap::LedgerKindName(static_cast<recap::LedgerKind>(k))] = plan->ledger.pruned[k];
      }
      return Json{{"enabled", config->compaction.ledger.enabled},
                  {"max_chars", config->compaction.ledger.max_chars},
                  {"entries", std::move(entries)},
                  {"pruned", std::move(pruned)}};
    };
    Json out = {{"session", session},
                {"messages", t.size()},
                {"keep_turns", config->compaction.keep_turns},
                {"max_context_chars", config->limits.max_context_chars},
                {"trigger", plan->trigger},
                {"reason", plan->reason ? recap::CompactionReasonName(*plan->reason) : ""},
                {"rule", plan->rule},
                {"paused", plan->paused},
                {"auto", plan->auto_enabled},
                {"window_tokens", plan->window_tokens ? Json(*plan->window_tokens) : Json(nullptr)},
                {"full_chars", plan->full_chars},
                {"full_tokens", plan->full_tokens},
                {"reducible_chars", plan->reducible_chars},
                {"trigger_tokens", plan->trigger_tokens},
                {"trigger_chars", plan->trigger_chars},
                {"cut", cut_json(cut)},
                {"cut_keep_turns", cut_json(plain)},
                {"provider_retired_messages", plan->provider_retired_messages},
                {"clear_tool_results",
                 {{"enabled", config->compaction.clear_tool_results.enabled},
                  {"results", plan->clearable_results},
                  {"messages", plan->clearable_messages},
                  {"chars", plan->clearable_chars},
                  {"would_clear", plan->would_clear},
                  {"enough", plan->clearing_suffices}}},
                {"background",
                 {{"enabled", config->compaction.background.enabled},
                  {"start_tokens", plan->background_start_tokens},
                  {"start_chars", plan->background_start_chars},
                  {"reached", plan->background_reached},
                  {"in_flight", plan->background_in_flight},
                  {"ready", plan->background_ready}}},
                {"ledger", ledger_json()},
                {"estimated_after_chars", plan->estimated_after_chars},
                {"frees_chars", frees},
                {"would_reduce", plan->would_reduce}};
    PrintJson(out);
    return kExitOk;
  }

  std::printf("plan for session '%s' (%s messages; keepTurns %d, maxContextChars %s)\n",
              Shown(session).c_str(), Num(t.size()).c_str(), config->compaction.keep_turns,
              Num(config->limits.max_context_chars).c_str());
  Row("conversation", Num(plan->reducible_chars), "chars: instructions + transcript");
  if (config->compaction.clear_tool_results.enabled) {
    Row("clearable results", Counted(plan->clearable_results, "result"),
        Num(plan->clearable_chars) + " chars in " + Counted(plan->clearable_messages, "message") +
            " (compaction.clearToolResults)");
    if (plan->would_clear) {
      Row("clearing", "yes",
          plan->clearing_suffices
              ? "the next prepare clears them instead of summarizing: that is enough"
              : "the next prepare clears them, then still summarizes");
    }
  }
  if (plan->provider_retired_messages > 0) {
    Row("provider checkpoint", Num(plan->provider_retired_messages) + " msgs",
        "before a checkpoint the provider wrote: retired at the next prepare, not counted");
  }
  Row("trigger at", Num(plan->trigger_chars),
      "chars (threshold x maxContextChars); ~" + Num(plan->trigger_tokens) + " tokens");
  if (config->compaction.background.enabled) {
    // R15: a host's own process compacts in the background; this command is never one.
    Row("background at", Num(plan->background_start_chars),
        "chars (startAt x the trigger); ~" + Num(plan->background_start_tokens) + " tokens" +
            (plan->background_reached ? ": reached, a host's prepare starts one in the background"
                                      : ""));
  }
  Row("trigger", plan->trigger ? "yes" : "no",
      plan->trigger ? "rule " + plan->rule + ": the next prepare compacts (" +
                          (plan->reason ? recap::CompactionReasonName(*plan->reason) : "") + ")"
                    : (plan->paused ? "auto compaction is paused (no progress)"
                                    : "the next prepare would not compact"));
  std::printf("\nwhere a compaction would cut now\n");
  if (cut.ok()) {
    Row("cut before message", "#" + std::to_string(cut.position),
        "of " + Num(t.size()) + (cut.inside_turn ? ", inside the last turn" : "") +
            (cut.moved_for_size ? ", moved forward to keep the kept part small (R3.8)" : ""));
    Row("summarized", Num(cut.position) + " msgs", Chars(cut.summarized_chars));
    Row("kept verbatim", Num(t.size() - cut.position) + " msgs",
        Chars(cut.kept_chars) + ", " + Counted(cut.kept_turns, "turn"));
    Row("after (estimated)", Num(plan->estimated_after_chars), "chars, checkpoint estimated");
    Row("frees", Num(frees), "chars (~" + Num(recap::EstimateTokens(frees)) + " tokens)");
    Row("reducer needed", plan->would_reduce ? "yes" : "no",
        plan->would_reduce ? "still over maxContextChars after the compaction" : "");
    if (plain.ok() && plain.position != cut.position) {
      Row("keepTurns alone", "#" + std::to_string(plain.position),
          "where keepTurns " + std::to_string(config->compaction.keep_turns) + " alone would cut");
    }
    PrintLedger(*plan, *config);
  } else {
    Row("no compaction", recap::SkipReasonName(cut.skip));
    switch (cut.skip) {
      case recap::SkipReason::kNothingToSummarize:
        std::printf(
            "  only the kept turns (or an earlier checkpoint) are there; try --keep-turns "
            "with a smaller number\n");
        break;
      case recap::SkipReason::kNoSafeBoundary:
        std::printf("  every cut would separate a tool call from its result\n");
        break;
      case recap::SkipReason::kUncertainToolResults:
        std::printf(
            "  %s tool call(s) have no result; run `recap sessions recover %s "
            "--acknowledge` first\n",
            Num(cut.uncertain.size()).c_str(), Shown(session).c_str());
        for (const recap::UncertainCall& u : cut.uncertain) {
          std::printf("    message #%zu: %s (%s)\n", u.message,
                      u.name.empty() ? "an opaque call" : Shown(u.name).c_str(),
                      Shown(u.call_id).c_str());
        }
        break;
      default: break;
    }
  }
  return kExitOk;
}

}  // namespace recap_cli
