// recap CLI — `recap recall`: the originals a compaction summarized, a clearing cleared or the
// reducer clipped, found in the session's history (Compactor::Recall, SPEC R18.1) and printed
// as the model would read them from the recall tool.
#include <cstdint>
#include <cstdlib>
#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include "cli.h"

namespace recap_cli {
namespace {

const char* const kHelp =
    "usage: recap recall --session ID [QUERY] [--ids ID,ID...] [--turns A-B]\n"
    "                    [--max-chars N] [--max-messages N] [--include-active]\n"
    "                    [--db DB] [--json]\n"
    "\n"
    "Gets back what a compaction summarized, a clearing cleared or the reducer clipped:\n"
    "every original stays in the session's history, and this finds them by words (QUERY:\n"
    "each word or run of words such as parse_config or src/app.py; messages holding more of\n"
    "them come first), by message id (--ids, as checkpoints, the ledger and `recap sessions\n"
    "history` name them) or by turn (--turns). Prints them as the model reads them from the\n"
    "recall tool, best first, cut to --max-chars. Changes nothing.\n"
    "\n"
    "options:\n"
    "  --session ID        the session (required)\n"
    "  QUERY               words to look for (several words: one query)\n"
    "  --ids ID,ID...      messages to get back by id\n"
    "  --turns A-B         the person's turns A to B (or one turn, N); with QUERY, only\n"
    "                      these turns are searched\n"
    "  --max-chars N       the answer's size in characters (default 8000)\n"
    "  --max-messages N    at most N messages (default 20)\n"
    "  --include-active    messages still in the transcript too (by default only what was\n"
    "                      compacted, cleared, clipped or undone)\n"
    "  --db DB             the database file (default ./recap.db) or a postgresql:// URL\n"
    "  --json              one JSON object: the messages (id, seq, turn, role, state,\n"
    "                      replaced_by, text, clipped), left_out_ids and the text\n"
    "  --help              this text\n";

// "4", "2-7": a turn range; false (and *error in the flag's words) when it is not one.
bool ParseTurns(const std::string& text, std::uint64_t* first, std::uint64_t* last,
                std::string* error) {
  const auto digits = [](const std::string& s) {
    return !s.empty() && s.size() <= 18 && s.find_first_not_of("0123456789") == std::string::npos;
  };
  const std::string::size_type dash = text.find('-');
  const std::string a = dash == std::string::npos ? text : text.substr(0, dash);
  const std::string b = dash == std::string::npos ? text : text.substr(dash + 1);
  if (!digits(a) || !digits(b)) {
    *error = "--turns wants a turn range A-B (e.g. 3-5) or one turn N, not '" + text + "'";
    return false;
  }
  *first = std::strtoull(a.c_str(), nullptr, 10);
  *last = std::strtoull(b.c_str(), nullptr, 10);
  if (*last == 0) {
    *error = "--turns " + text +
             " names no turn: the person's turns are counted from 1 (turn 0 is what came "
             "before the first); give e.g. --turns 1-3";
    return false;
  }
  if (*first > *last) {
    *error = "--turns " + text +
             " ends before it starts; give the first turn first, e.g. --turns " + b + "-" + a;
    return false;
  }
  return true;
}

}  // namespace

int RunRecall(const std::vector<std::string>& words) {
  Args args;
  args.command = "recall";
  std::string error;
  if (!ParseArgs(words,
                 {{"db", true},
                  {"session", true},
                  {"ids", true},
                  {"turns", true},
                  {"max-chars", true},
                  {"max-messages", true},
                  {"include-active", false}},
                 &args, &error)) {
    return UsageError(args, error);
  }
  if (args.flags.count("help")) {
    std::cout << kHelp;
    return kExitOk;
  }
  if (!args.Has("session")) {
    return UsageError(args, "--session ID is required: recap recall --session ID QUERY");
  }
  const std::string session = args.Get("session");
  if (!ValidSessionId(session, &error)) return UsageError(args, error);

  recap::RecallQuery query;
  for (const std::string& w : args.positional) {
    if (!query.text.empty()) query.text += ' ';
    query.text += w;
  }
  if (args.Has("ids")) {
    const std::string list = args.Get("ids");
    std::string::size_type at = 0;
    while (at <= list.size()) {
      std::string::size_type comma = list.find(',', at);
      if (comma == std::string::npos) comma = list.size();
      std::string id = list.substr(at, comma - at);
      const auto begin = id.find_first_not_of(" \t");
      id = begin == std::string::npos ? std::string() : id.substr(begin);
      while (!id.empty() && (id.back() == ' ' || id.back() == '\t')) id.pop_back();
      if (!id.empty()) query.ids.push_back(id);
      at = comma + 1;
    }
    if (query.ids.empty()) {
      return UsageError(args,
                        "--ids wants message ids separated by commas (as `recap sessions "
                        "history` shows them), e.g. --ids m_1,m_2");
    }
  }
  if (args.Has("turns") &&
      !ParseTurns(args.Get("turns"), &query.first_turn, &query.last_turn, &error)) {
    return UsageError(args, error);
  }
  if (args.Has("max-chars")) {
    if (!ParseCount(args, "max-chars", &query.max_chars, &error)) return UsageError(args, error);
    if (query.max_chars == 0) {
      return UsageError(args, "--max-chars 0 leaves no room for an answer; give e.g. 8000");
    }
  }
  if (args.Has("max-messages")) {
    if (!ParseCount(args, "max-messages", &query.max_messages, &error)) {
      return UsageError(args, error);
    }
    if (query.max_messages == 0) {
      return UsageError(args, "--max-messages 0 asks for nothing; give e.g. 20");
    }
  }
  query.include_active = args.flags.count("include-active") != 0;
  if (query.text.find_first_not_of(" \t\r\n") == std::string::npos && query.ids.empty() &&
      query.last_turn == 0) {
    return UsageError(args,
                      "say what to get back: words to look for (recap recall --session " +
                          QuotedForShell(session) +
                          " 'parse_config'), message ids (--ids ID,ID) or turns (--turns A-B)");
  }

  const std::string db = args.Get("db", kDefaultDb);
  if (!CheckDb(db, &error)) return UsageError(args, error);
  // A reading command: the database is opened read-only and nothing in it changes (a SQLite
  // store that cannot write its search index then scans what the index lacks).
  recap::Result<std::shared_ptr<recap::SessionStore>> store = OpenStore(db, Access::kRead);
  if (!store.ok()) return Failure(args, store.status());
  recap::Result<recap::SessionState> state = LoadExisting(**store, db, session);
  if (!state.ok()) return Failure(args, state.status());
  recap::Result<std::unique_ptr<recap::Compactor>> compactor =
      recap::Compactor::Create(recap::Config{}, nullptr, *store);
  if (!compactor.ok()) return Failure(args, compactor.status());
  recap::Result<recap::Recalled> recalled = (*compactor)->Recall(session, query);
  if (!recalled.ok()) return Failure(args, recalled.status());

  if (args.json()) {
    Json messages = Json::array();
    for (const recap::RecalledMessage& m : recalled->messages) {
      messages.push_back({{"id", m.id},
                          {"seq", m.seq},
                          {"turn", m.turn},
                          {"role", recap::RoleName(m.role)},
                          {"state", m.state},
                          {"replaced_by", m.replaced_by},
                          {"text", m.text},
                          {"clipped", m.clipped},
                          {"score", m.score}});
    }
    PrintJson(Json{{"session", session},
                   {"messages", std::move(messages)},
                   {"left_out", recalled->left_out},
                   {"left_out_ids", recalled->left_out_ids},
                   {"text", recalled->text}});
    return kExitOk;
  }
  // The text as the model reads it, each line printable (stored text may hold control
  // characters; --json gives it exactly).
  std::string line;
  std::string shown;
  for (char c : recalled->text) {
    if (c == '\n') {
      shown += Shown(line) + "\n";
      line.clear();
    } else {
      line += c;
    }
  }
  if (!line.empty()) shown += Shown(line) + "\n";
  std::cout << shown;
  return kExitOk;
}

}  // namespace recap_cli
