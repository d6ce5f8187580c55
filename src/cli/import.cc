// recap CLI — `recap import`: reads a transcript file in one of seven formats and writes it
// into a new session in one transaction (SessionStore::CreateSessions). The array and object
// forms of the four codec formats are streamed: a codec decodes the file's text one message
// at a time on a thread of its own while the store writes them, so that neither a tree of the
// file nor all its messages are ever held at once (SPEC R13.1; a million messages import in a
// few seconds at about twice the file's size in memory). The other formats are transformed
// as a tree first. Either way a file that does not decode, found however late, rolls the
// transaction back: a bad file changes nothing.
#include <algorithm>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <fstream>
#include <functional>
#include <iostream>
#include <map>
#include <mutex>
#include <sstream>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "cli.h"
#include "import_formats.h"
#include "import_sources.h"
#include "json_skim.h"
#include "progress.h"
#include "recap_internal/json_depth.h"

namespace recap_cli {
namespace {

const char* const kHelp =
    "usage: recap import --format F FILE --session ID [--run N] [--db DB]\n"
    "                    [--max-input-bytes N] [--json]\n"
    "\n"
    "Imports a transcript file into a new session of the database. The whole file is decoded\n"
    "before anything is written, then the session and its instructions are written in one\n"
    "transaction that checks the session is new: a file that does not decode, a session\n"
    "that exists (another import may have won the race) or an import killed half way\n"
    "changes nothing. A database file that does not exist yet is built aside and appears\n"
    "only when it is complete. A leading system message (or the file's `system` or\n"
    "`instructions`) becomes the session's instructions: kept apart from the transcript,\n"
    "never summarized, counted as instructions.\n"
    "\n"
    "options:\n"
    "  --format F        the file's format (required), one of:\n"
    "                      openai-chat  an OpenAI chat-completions messages array, an object\n"
    "                                   {\"messages\": [...]}, or tau-bench's array of runs\n"
    "                                   {\"traj\": [...]} (pick one with --run N)\n"
    "                      anthropic    an Anthropic Messages messages array, or an object\n"
    "                                   {\"system\": ..., \"messages\": [...]}\n"
    "                      openai-responses\n"
    "                                   OpenAI Responses input items: an array of items, or\n"
    "                                   a request body {\"instructions\": ..., \"input\": [...]}\n"
    "                                   (its other members, such as tools, are not imported)\n"
    "                      claude-code  a Claude Code session .jsonl (lines sharing message.id\n"
    "                                   are joined; records without a message are skipped)\n"
    "                      swe-agent    a SWE-agent .traj (its `history`)\n"
    "                      openhands    an OpenHands evaluation .jsonl, one run a line\n"
    "                                   (pick one with --run N)\n"
    "                      recap        recap's own JSON (what `recap export --format recap`\n"
    "                                   writes)\n"
    "  FILE              the transcript file (required); `-`: standard input\n"
    "  --session ID      the new session's id (required; it must not exist yet)\n"
    "  --run N           which run of a file holding several (tau-bench, openhands), from 0\n"
    "  --db DB           the database file (default ./recap.db; created if missing) or a\n"
    "                    postgresql:// URL (recap's tables are created in its schema `recap`)\n"
    "  --max-input-bytes N\n"
    "                    refuse a file (or standard input) larger than N bytes (default 1G;\n"
    "                    K, M and G suffixes), before reading past it\n"
    "  --json            print the result as one JSON object\n"
    "  --help            this text\n";

}  // namespace

int RunImport(const std::vector<std::string>& words) {
  Args args;
  args.command = "import";
  std::string error;
  if (!ParseArgs(words,
                 {{"format", true},
                  {"run", true},
                  {"db", true},
                  {"session", true},
                  {"max-input-bytes", true}},
                 &args, &error)) {
    return UsageError(args, error);
  }
  if (args.flags.count("help")) {
    std::cout << kHelp;
    return kExitOk;
  }
  if (!args.Has("format")) {
    return UsageError(args,
                      "--format is required (openai-chat, anthropic, openai-responses, "
                      "claude-code, swe-agent, openhands or recap)");
  }
  const std::string format = args.Get("format");
  bool known = false;
  for (const char* f : kFormats) known = known || format == f;
  if (!known) {
    return UsageError(args, "unknown format '" + format +
                                "'; use one of openai-chat, anthropic, openai-responses, "
                                "claude-code, swe-agent, openhands, recap");
  }
  if (args.positional.size() != 1) {
    return UsageError(
        args, args.positional.empty()
                  ? "name the transcript file to import"
                  : "give exactly one file (got " + std::to_string(args.positional.size()) + ")");
  }
  if (!args.Has("session"))
    return UsageError(args, "--session ID is required: name the new session");
  const std::string session = args.Get("session");
  if (!ValidSessionId(session, &error)) return UsageError(args, error);
  const std::string path = args.positional.front();
  const std::string db = args.Get("db", kDefaultDb);
  if (!CheckDb(db, &error)) return UsageError(args, error);
  const std::string shown_db = ShownDb(db);  // what messages and output show: no password

  std::size_t max_bytes = kDefaultMaxInputBytes;
  if (args.Has("max-input-bytes") && !ParseBytes(args, "max-input-bytes", &max_bytes, &error)) {
    return UsageError(args, error);
  }

  // 1. Read and decode (a file the codec streams is decoded in step 3, as the store writes it).
  Progress progress("importing " +
                    (path == "-" ? "standard input" : path.substr(path.find_last_of('/') + 1)));
  progress.Update("reading");
  std::string text;
  if (!ReadBounded(path, max_bytes, InputName(path), "--max-input-bytes",
                   "If the file is right, raise the limit (--max-input-bytes N, e.g. 4G). Nothing "
                   "was written",
                   &text, &error)) {
    if (error.find("is a folder") != std::string::npos) {
      error += "; name the transcript file to import";
    }
    return Failure(args, error);
  }
  if (text.find_first_not_of(" \t\r\n") == std::string::npos) {
    return Failure(args, InputName(path) + " is empty; nothing to import");
  }
  progress.Update("decoding " + Num(text.size()) + " bytes as " + format);
  DecodeResult decoded = Decode(format, text, args);
  // The message for a file that does not decode: what is wrong, and which format it looks like.
  const auto not_decoded = [&](const std::string& detail) {
    progress.Finish();
    return Failure(args, NotDecoded(path, format, text, detail, "import"));
  };
  if (!decoded.first) {
    if (decoded.second.usage) {
      progress.Finish();
      return UsageError(args,
                        (path == "-" ? "standard input" : path) + ": " + decoded.second.message);
    }
    return not_decoded(decoded.second.message);
  }
  recap::Conversation& conversation = decoded.first->conversation;
  if (!decoded.first->stream) {
    if (conversation.messages.empty()) {
      return Failure(args, InputName(path) +
                               " holds no messages (after the instructions); nothing "
                               "was written");
    }
    text.clear();
    text.shrink_to_fit();
  }

  // 2. Open the database. A SQLite file that does not exist yet is not opened: step 3 builds
  // it aside and gives it its name when it is complete (recap::CreateSqliteSessions).
  const bool new_file = IsNewSqliteFile(db);
  recap::Result<std::shared_ptr<recap::SessionStore>> store =
      std::shared_ptr<recap::SessionStore>();
  if (!new_file) store = OpenStore(db, Access::kCreate);
  if (!store.ok()) return Failure(args, NothingWritten(store.status()));
  // Instructions that `recap append` keeps for a session not yet written belong to that
  // session's appends: an import under its id would take them over (or, with its own, clash).
  if (!new_file) {
    recap::Result<recap::SessionState> kept =
        (*store)->Load(std::string(kInstructionsPrefix) + session);
    if (!kept.ok()) return Failure(args, NothingWritten(kept.status()));
    recap::Result<recap::SessionState> main = (*store)->Load(session);
    if (!main.ok()) return Failure(args, NothingWritten(main.status()));
    if (kept->version != 0 && main->version == 0) {
      progress.Finish();
      return Failure(args, "session '" + Shown(session) +
                               "' has instructions kept by `recap append` and no message yet; "
                               "append its messages to it (recap append --session " +
                               QuotedForShell(session) +
                               "), or import into another --session ID. Nothing was written");
    }
  }

  // 3. The transcript and its instructions in one write, which also checks that the session
  // is new (R13.6): of two imports racing for one id, one wins and the other writes nothing.
  // A streamed file is decoded while the store writes it; its leading system message, when the
  // codec makes it the instructions, arrives first and is taken out before the write.
  std::optional<StreamedMessages> streamed;
  std::optional<DecodedMessages> whole;
  recap::MessageSource* source = nullptr;
  if (decoded.first->stream) {
    streamed.emplace(std::move(decoded.first->stream), path, &progress);
    if (!conversation.instructions) conversation.instructions = streamed->TakeInstructions();
    source = &*streamed;
    progress.Update("decoding and writing to " + shown_db);
  } else {
    const std::size_t count = conversation.messages.size();
    whole.emplace(std::move(conversation.messages), path, conversation.instructions ? 1 : 0);
    source = &*whole;
    progress.Update("writing " + Num(count) + " messages to " + shown_db);
  }
  std::size_t instruction_chars = 0;
  std::vector<recap::NewSession> sessions(1);
  sessions[0].session = session;
  sessions[0].source = source;
  if (conversation.instructions) {
    instruction_chars = recap::MessageChars(*conversation.instructions);
    recap::NewSession instructions;
    instructions.session = std::string(kInstructionsPrefix) + session;
    instructions.messages.push_back(*conversation.instructions);
    sessions.push_back(std::move(instructions));
  }
  recap::Result<std::vector<std::uint64_t>> created =
      new_file ? CreateInNewFile(db, std::move(sessions))
               : (*store)->CreateSessions(std::move(sessions));
  if (streamed) streamed->Stop();
  if (!created.ok()) {
    if (streamed && streamed->decode_failed()) {
      return not_decoded(decoded.first->what + ": " + streamed->decode_status().message());
    }
    const std::string& input_error = streamed ? streamed->input_error() : whole->input_error();
    if (!input_error.empty()) return Failure(args, input_error);
    if (created.status().code() == recap::StatusCode::kConflict) {
      return Failure(args, "the database '" + shown_db + "' already has a session '" +
                               Shown(session) +
                               "'; import into a new session (another --session ID). "
                               "Nothing was written");
    }
    return Failure(args, NothingWritten(created.status()));
  }
  const std::size_t message_count = streamed ? streamed->count() : whole->count();
  const std::size_t chars = streamed ? streamed->chars() : whole->chars();
  const std::uint64_t version = created->front();
  const std::size_t tokens = (chars + 3) / 4;

  progress.Finish();
  if (args.json()) {
    Json out = {{"session", session},
                {"db", shown_db},
                {"file", path},
                {"format", format},
                {"messages", message_count},
                {"chars", chars},
                {"tokens", tokens},
                {"instructions", conversation.instructions.has_value()},
                {"instructions_chars", instruction_chars},
                {"version", version}};
    if (!decoded.first->note.empty()) out["note"] = decoded.first->note;
    PrintJson(out);
  } else {
    std::cout << "imported " << Counted(message_count, "message") << " (" << Num(chars)
              << " chars, ~" << Num(tokens) << " tokens) into session '" << Shown(session)
              << "' of " << shown_db << "\n";
    if (!decoded.first->note.empty())
      std::cout << "  source        " << decoded.first->note << "\n";
    if (conversation.instructions) {
      std::cout << "  instructions  " << Num(instruction_chars)
                << " chars (kept apart from the transcript)\n";
    }
    std::cout << "next: recap plan --db " << QuotedForShell(shown_db) << " --session "
              << QuotedForShell(session) << "\n";
  }
  return kExitOk;
}

}  // namespace recap_cli
