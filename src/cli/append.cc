// recap CLI — `recap append`: adds the messages of a turn to a session, as a host does after
// each model reply or tool run (SPEC R16.3). The input — a file, or standard input — is read
// whole (under --max-input-bytes) and decoded the way `recap import` decodes a file before the
// database is opened, then stored in one write: a bad message anywhere stores nothing.
//
// A session's instructions live in a companion session (kInstructionsPrefix), as import keeps
// them. The first append of a new session creates both in one CreateSessions call, which also
// checks that the session is new; a later append may carry the same instructions again (a host
// that sends Anthropic's `system` with every turn) but cannot change them.
#include <iostream>
#include <string>
#include <utility>
#include <variant>
#include <vector>

#include <sys/stat.h>

#include "cli.h"

namespace recap_cli {
namespace {

const char* const kHelp =
    "usage: recap append --session ID --format F [FILE|-] [--db DB]\n"
    "                    [--max-input-bytes N] [--json]\n"
    "\n"
    "Appends messages to a session, creating the session when it is new: a JSON array of\n"
    "messages, or one message, in the format, read from FILE or from standard input (`-`,\n"
    "or no FILE). All or nothing: a message anywhere that does not decode, or whose tool\n"
    "calls share an id, and nothing is stored. Prints the session's new version. The first\n"
    "append of a new session makes a leading system message (or the input's `system` or\n"
    "`instructions`) the session's instructions, as import does; a later append may repeat\n"
    "those instructions (they are skipped) but not change them. An input of the instructions\n"
    "alone (a system prompt sent before the first message) keeps them for the session, which\n"
    "begins with its next append (prints version 0).\n"
    "\n"
    "options:\n"
    "  --session ID      the session (required); its first append creates it\n"
    "  --format F        the messages' format (required), one of:\n"
    "                      openai-chat  chat-completions messages: an array, one message,\n"
    "                                   or an object {\"messages\": [...]}\n"
    "                      anthropic    Messages API messages: an array, one message, or\n"
    "                                   an object {\"system\": ..., \"messages\": [...]}\n"
    "                      openai-responses\n"
    "                                   Responses input items: an array, one item, or a\n"
    "                                   request body {\"instructions\": ..., \"input\": [...]}\n"
    "                      recap        recap's own JSON (ids kept: an id the session\n"
    "                                   holds already is refused)\n"
    "  FILE              the file to read; `-` or none: standard input\n"
    "  --db DB           the database file (default ./recap.db; created if missing) or a\n"
    "                    postgresql:// URL\n"
    "  --max-input-bytes N\n"
    "                    refuse an input larger than N bytes (default 1G; K, M and G\n"
    "                    suffixes), before reading past it\n"
    "  --json            print the result as one JSON object\n"
    "  --help            this text\n";

bool TextOnly(const recap::Message& m) {
  for (const recap::Part& part : m.parts) {
    if (!std::holds_alternative<recap::Text>(part)) return false;
  }
  return true;
}

// Whether the input's instructions are the session's: the same text (however each format wrote
// it: Anthropic's `system` string, a chat system message), or, when they hold more than text,
// the same message apart from the id the store gave it.
bool SameInstructions(const recap::Message& given, const recap::Message& stored) {
  if (TextOnly(given) && TextOnly(stored)) {
    return recap::JoinedText(given) == recap::JoinedText(stored);
  }
  recap::Message a = given;
  recap::Message b = stored;
  a.id.clear();
  b.id.clear();
  recap::Result<std::string> ea = recap::native::EncodeMessage(a);
  recap::Result<std::string> eb = recap::native::EncodeMessage(b);
  return ea.ok() && eb.ok() && *ea == *eb;
}

}  // namespace

int RunAppend(const std::vector<std::string>& words) {
  Args args;
  args.command = "append";
  std::string error;
  if (!ParseArgs(words,
                 {{"format", true}, {"db", true}, {"session", true}, {"max-input-bytes", true}},
                 &args, &error)) {
    return UsageError(args, error);
  }
  if (args.flags.count("help")) {
    std::cout << kHelp;
    return kExitOk;
  }
  if (!args.Has("session")) {
    return UsageError(args, "--session ID is required: name the session to append to");
  }
  const std::string session = args.Get("session");
  if (!ValidSessionId(session, &error)) return UsageError(args, error);
  if (!args.Has("format")) {
    return UsageError(args,
                      "--format F is required: the messages' format (openai-chat, anthropic, "
                      "openai-responses or recap)");
  }
  const std::string format = args.Get("format");
  if (!MessageFormat(format)) {
    return UsageError(args, "unknown format '" + format +
                                "' for --format; use openai-chat, anthropic, openai-responses or "
                                "recap (import reads the others)");
  }
  if (args.positional.size() > 1) {
    return UsageError(args, "give one input at most (got " +
                                std::to_string(args.positional.size()) +
                                "); append them one after the other, or join their messages");
  }
  const std::string path = args.positional.empty() ? "-" : args.positional.front();
  const std::string db = args.Get("db", kDefaultDb);
  if (!CheckDb(db, &error)) return UsageError(args, error);
  const std::string shown_db = ShownDb(db);
  std::size_t max_bytes = kDefaultMaxInputBytes;
  if (args.Has("max-input-bytes") && !ParseBytes(args, "max-input-bytes", &max_bytes, &error)) {
    return UsageError(args, error);
  }

  // 1. Read and decode everything; the database is not opened yet.
  std::string text;
  if (!ReadBounded(path, max_bytes, InputName(path), "--max-input-bytes",
                   "If the input is right, raise the limit (--max-input-bytes N, e.g. 4G). "
                   "Nothing was written",
                   &text, &error)) {
    if (error.find("is a folder") != std::string::npos) {
      error += "; name the file of messages to append";
    }
    return Failure(args, error);
  }
  if (text.find_first_not_of(" \t\r\n") == std::string::npos) {
    return Failure(args, InputName(path) +
                             " is empty: there is nothing to append. Nothing was "
                             "written");
  }
  bool usage = false;
  recap::Result<recap::Conversation> decoded = DecodeInput(format, text, path, args, &usage);
  if (!decoded.ok()) {
    return usage ? UsageError(args, decoded.status().message())
                 : Failure(args, decoded.status().message());
  }
  text.clear();
  text.shrink_to_fit();
  recap::Conversation& input = *decoded;
  if (input.messages.empty() && !input.instructions) {
    return Failure(args, InputName(path) + " holds no messages. Nothing was written");
  }
  std::size_t chars = 0;
  for (const recap::Message& m : input.messages) chars += recap::MessageChars(m);
  const std::size_t count = input.messages.size();

  // 2. Open the database (created when missing, as import creates it).
  // A file that holds something is opened as compact and prepare open it: SQLite's
  // quick_check (a read of the whole file, import's check) would cost each turn about as much
  // as the file is large. A missing or empty one (another append may be creating it) is
  // created as import creates it.
  struct stat st {};
  const bool holds = !IsPostgresUrl(db) && ::stat(db.c_str(), &st) == 0 && st.st_size > 0;
  recap::Result<std::shared_ptr<recap::SessionStore>> store =
      OpenStore(db, holds ? Access::kWrite : Access::kCreate);
  if (!store.ok()) return Failure(args, NothingWritten(store.status()));

  // 3. One write. A new session with instructions is created with its companion in one
  // CreateSessions call; when another writer creates the session first (kConflict), the append
  // is made again against the session it made, whose instructions then decide.
  bool created = false;
  bool instructions_set = false;
  bool instructions_repeated = false;
  std::uint64_t version = 0;
  for (int attempt = 0;; ++attempt) {
    if (!input.instructions) {
      // The common turn: messages alone. Nothing of the session is read first (loading a
      // 20,000-message session to learn whether it exists cost 130 ms a turn); the append
      // creates it when it is new (its first version is 1).
      recap::Result<std::uint64_t> appended = (*store)->AppendMessages(session, input.messages);
      if (!appended.ok()) {
        return Failure(
            args,
            NothingWritten(appended.status().WithContext("cannot append " + InputName(path) +
                                                         " to session '" + Shown(session) + "'")));
      }
      created = *appended == 1;
      version = *appended;
      break;
    }
    recap::Result<recap::SessionState> state = (*store)->Load(session);
    if (!state.ok()) return Failure(args, NothingWritten(state.status()));
    recap::Result<std::optional<recap::Message>> stored = LoadInstructions(**store, session);
    if (!stored.ok()) return Failure(args, NothingWritten(stored.status()));
    if (input.messages.empty()) {
      // Only the instructions (a host that sends its system prompt before the first message,
      // as the library accepts it): kept for the session, which begins with its first message.
      // Repeated exactly, they change nothing; other instructions are refused below.
      if (!*stored && state->version == 0) {
        std::vector<recap::NewSession> companion(1);
        companion[0].session = kInstructionsPrefix + session;
        companion[0].messages.push_back(*input.instructions);
        recap::Result<std::vector<std::uint64_t>> made =
            (*store)->CreateSessions(std::move(companion));
        if (made.status().code() == recap::StatusCode::kConflict && attempt < 3) continue;
        if (!made.ok()) return Failure(args, NothingWritten(made.status()));
        instructions_set = true;
        break;
      }
      if (*stored && SameInstructions(*input.instructions, **stored)) {
        instructions_repeated = true;
        version = state->version;
        break;
      }
    }
    if (state->version == 0 && input.instructions && !*stored && attempt < 3) {
      std::vector<recap::NewSession> sessions(2);
      sessions[0].session = session;
      sessions[0].messages = input.messages;
      sessions[1].session = kInstructionsPrefix + session;
      sessions[1].messages.push_back(*input.instructions);
      recap::Result<std::vector<std::uint64_t>> made =
          (*store)->CreateSessions(std::move(sessions));
      if (made.ok()) {
        version = made->front();
        created = true;
        instructions_set = true;
        break;
      }
      if (made.status().code() == recap::StatusCode::kConflict) continue;
      return Failure(args, NothingWritten(made.status()));
    }
    if (input.instructions) {
      if (!*stored || !SameInstructions(*input.instructions, **stored)) {
        return Failure(
            args,
            InputName(path) + " begins with instructions (a leading system message, or " +
                "the input's `system` or `instructions`), and session '" + Shown(session) + "' " +
                (*stored ? "has other instructions" : "exists without instructions") +
                ". A session's instructions are set when it is created (by its first append or "
                "its import) and do not change: leave them out of this input (or repeat them "
                "exactly), or start a new session. Nothing was written");
      }
      instructions_repeated = true;
    }
    recap::Result<std::uint64_t> appended = (*store)->AppendMessages(session, input.messages);
    if (!appended.ok()) {
      return Failure(
          args, NothingWritten(appended.status().WithContext(
                    "cannot append " + InputName(path) + " to session '" + Shown(session) + "'")));
    }
    created = state->version == 0;
    version = *appended;
    break;
  }

  if (args.json()) {
    PrintJson(Json{{"session", session},
                   {"db", shown_db},
                   {"input", path},
                   {"format", format},
                   {"messages", count},
                   {"chars", chars},
                   {"created", created},
                   {"instructions_set", instructions_set},
                   {"instructions_repeated", instructions_repeated},
                   {"version", version}});
  } else {
    std::cout << version << "\n";
  }
  return kExitOk;
}

}  // namespace recap_cli
