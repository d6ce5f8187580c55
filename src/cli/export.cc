// recap CLI — `recap export`: a session's active transcript as it would be sent, or its whole
// history with compacted messages marked.
#include <iostream>
#include <string>
#include <variant>
#include <vector>

#include "cli.h"
#include "json_skim.h"

namespace recap_cli {
namespace {

const char* const kHelp =
    "usage: recap export --session ID --format F [--history] [--db DB] [--json]\n"
    "\n"
    "Writes a session as JSON on stdout. Reads the database; changes nothing.\n"
    "\n"
    "options:\n"
    "  --session ID      the session (required)\n"
    "  --format F        openai-chat, anthropic, openai-responses or recap (required)\n"
    "                      openai-chat  a messages array; the instructions come first as the\n"
    "                                   system message\n"
    "                      anthropic    a messages array, or {\"system\": ..., \"messages\": "
    "[...]}\n"
    "                                   when the session has instructions\n"
    "                      openai-responses\n"
    "                                   an array of input items, or {\"instructions\": ...,\n"
    "                                   \"input\": [...]} when the session has instructions\n"
    "                      recap        recap's own JSON {\"instructions\": ..., \"messages\": "
    "[...]}\n"
    "                                   (keeps ids and the checkpoint flag; `recap import\n"
    "                                   --format recap` reads it back)\n"
    "  --history         the full history instead of the active transcript: an object\n"
    "                    {\"session\", \"instructions\", \"history\": [{\"seq\", \"id\", "
    "\"state\"\n"
    "                    (active|compacted), \"replaced_by\", \"summary\", \"messages\": "
    "[...]}]},\n"
    "                    each entry's message encoded in the format (one message may become\n"
    "                    several OpenAI `tool` messages or Responses items, hence a list)\n"
    "  --db DB           the database file (default ./recap.db) or a postgresql:// URL\n"
    "  --json            write the JSON on one line (default: indented)\n"
    "  --help            this text\n";

recap::Result<std::string> Encode(const std::string& format, const recap::Conversation& conv) {
  if (format == "openai-chat") return recap::openai_chat::EncodeMessages(conv);
  if (format == "recap") return recap::native::EncodeMessages(conv);
  // Anthropic carries the system prompt outside the messages, and so does a Responses request
  // (its `instructions`).
  recap::Conversation without = conv;
  without.instructions.reset();
  if (format == "openai-responses") return recap::openai_responses::EncodeMessages(without);
  return recap::anthropic::EncodeMessages(without);
}

// The instructions as the string the format carries them in beside the messages (anthropic's
// `system`, a Responses request's `instructions`). Their texts, joined; anything else in them
// (an image, say) has no place in a string and is refused rather than left out.
recap::Result<std::string> InstructionsText(const std::string& format,
                                            const recap::Message& instructions) {
  for (const recap::Part& part : instructions.parts) {
    if (!std::holds_alternative<recap::Text>(part)) {
      const auto* opaque = std::get_if<recap::Opaque>(&part);
      return recap::Status::InvalidArgument(
          "the instructions hold " +
          (opaque != nullptr ? "an opaque `" + opaque->kind + "` part"
                             : std::string("a tool part")) +
          ", and " + format + " carries the instructions as a string of text");
    }
  }
  return recap::JoinedText(instructions);
}

// A codec's message as a sentence of ours: one final period, whether or not it had one.
std::string Sentence(std::string message) {
  while (!message.empty() && (message.back() == '.' || message.back() == ' ')) message.pop_back();
  return message + ".";
}

// A string as a JSON value.
std::string JsonString(const std::string& text) {
  return Json(text).dump(-1, ' ', false, Json::error_handler_t::replace);
}

// The encoded conversation as a JSON text in the format's document shape. The codecs' text is
// written as it is, never parsed again: numbers stay as they were written (SPEC R13.2).
recap::Result<std::string> Document(const std::string& format, const recap::Conversation& conv) {
  recap::Result<std::string> text = Encode(format, conv);
  RECAP_RETURN_IF_ERROR(text);
  if ((format == "anthropic" || format == "openai-responses") && conv.instructions) {
    recap::Result<std::string> instructions = InstructionsText(format, *conv.instructions);
    RECAP_RETURN_IF_ERROR(instructions);
    std::string system = JsonString(*instructions);
    // Anthropic's `system` given as a list of blocks goes back as that list, with what its
    // blocks carry besides their text (`cache_control`): written by the codec, as content.
    if (format == "anthropic" && conv.instructions->origin == recap::Origin::kAnthropic &&
        conv.instructions->form == recap::ContentForm::kList) {
      recap::Message blocks = *conv.instructions;
      blocks.role = recap::Role::kUser;
      recap::Result<std::string> encoded = recap::anthropic::EncodeMessage(blocks);
      RECAP_RETURN_IF_ERROR(encoded);
      // The codec's text, not parsed again (numbers stay as written).
      if (std::optional<std::string_view> content = MemberText(*encoded, "content");
          content && IsArrayText(*content)) {
        system = std::string(*content);
      }
    }
    return (format == "anthropic" ? "{\"system\":" : "{\"instructions\":") + system +
           (format == "anthropic" ? ",\"messages\":" : ",\"input\":") + *text + "}";
  }
  return text;
}

// Writes compact JSON text to stdout, either as it is or indented by two spaces as people read
// it (the layout of nlohmann's dump(2): "key": value, one member or element a line, empty
// containers as {} and []). The text may come in any pieces; strings are copied untouched.
class JsonWriter {
 public:
  explicit JsonWriter(bool indent) : indent_(indent) {}
  JsonWriter(const JsonWriter&) = delete;
  JsonWriter& operator=(const JsonWriter&) = delete;
  ~JsonWriter() { Flush(); }

  void Write(std::string_view json) {
    if (!indent_ && hold_ == 0 && json.size() >= kChunk) {
      Flush();  // a big piece goes out as it is, not through a copy
      std::cout.write(json.data(), static_cast<std::streamsize>(json.size()));
      written_ += json.size();
      return;
    }
    if (!indent_) {
      out_.append(json);
    } else {
      std::size_t i = 0;
      while (i < json.size()) {
        if (in_string_ && !escaped_) {
          // The rest of the string up to its closing quote or an escape, in one piece.
          std::size_t end = i;
          while (end < json.size() && json[end] != '"' && json[end] != '\\') ++end;
          out_.append(json.data() + i, end - i);
          i = end;
          if (i == json.size()) break;
        }
        Indent(json[i++]);
      }
    }
    if (out_.size() >= std::max(kChunk, hold_)) Flush();
  }
  // Until `bytes` are there, nothing is written (0: write in chunks from the start).
  void HoldUpTo(std::size_t bytes) { hold_ = bytes; }
  // Forgets what is held; nothing of it is written.
  void Discard() {
    out_.clear();
    pending_ = 0;
  }
  // How many bytes went to stdout so far.
  std::size_t written() const { return written_; }
  // Text written as it is, whatever the mode (the final newline).
  void Raw(std::string_view text) { out_.append(text); }
  void Flush() {
    if (pending_ != 0) {  // a container left open: not ours to close
      out_ += pending_;
      pending_ = 0;
    }
    std::cout.write(out_.data(), static_cast<std::streamsize>(out_.size()));
    written_ += out_.size();
    out_.clear();
    hold_ = 0;
  }

 private:
  static constexpr std::size_t kChunk = std::size_t{1} << 20;

  void Newline() {
    out_ += '\n';
    out_.append(2 * static_cast<std::size_t>(depth_), ' ');
  }
  void Indent(char c) {
    if (in_string_) {
      out_ += c;
      if (escaped_) {
        escaped_ = false;
      } else if (c == '\\') {
        escaped_ = true;
      } else if (c == '"') {
        in_string_ = false;
      }
      return;
    }
    if (pending_ != 0) {
      const char close = pending_ == '{' ? '}' : ']';
      out_ += pending_;
      pending_ = 0;
      if (c == close) {
        out_ += c;
        return;
      }
      ++depth_;
      Newline();
    }
    switch (c) {
      case '"':
        in_string_ = true;
        out_ += c;
        break;
      case '{':
      case '[': pending_ = c; break;
      case '}':
      case ']':
        --depth_;
        Newline();
        out_ += c;
        break;
      case ',':
        out_ += c;
        Newline();
        break;
      case ':': out_ += ": "; break;
      case ' ':
      case '\n':
      case '\r':
      case '\t': break;
      default: out_ += c;
    }
  }

  const bool indent_;
  std::string out_;
  std::size_t hold_ = 0;
  std::size_t written_ = 0;
  int depth_ = 0;
  bool in_string_ = false;
  bool escaped_ = false;
  char pending_ = 0;  // an opening bracket not yet written: {} and [] stay on one line
};

}  // namespace

bool MessageFormat(const std::string& format) {
  return format == "openai-chat" || format == "anthropic" || format == "openai-responses" ||
         format == "recap";
}

recap::Result<std::string> EncodeDocument(const std::string& format,
                                          const recap::Conversation& conv) {
  return Document(format, conv);
}

void WriteJsonText(std::string_view json, bool indent) {
  JsonWriter writer(indent);
  writer.Write(json);
  writer.Raw("\n");
  writer.Flush();
  std::cout.flush();
}

int RunExport(const std::vector<std::string>& words) {
  Args args;
  args.command = "export";
  std::string error;
  if (!ParseArgs(words, {{"format", true}, {"db", true}, {"session", true}, {"history", false}},
                 &args, &error)) {
    return UsageError(args, error);
  }
  if (args.flags.count("help")) {
    std::cout << kHelp;
    return kExitOk;
  }
  if (!args.positional.empty())
    return UsageError(args, "unexpected argument '" + args.positional[0] + "'");
  const std::string format = args.Get("format");
  if (format.empty()) {
    return UsageError(args,
                      "--format is required (openai-chat, anthropic, openai-responses or recap)");
  }
  if (!MessageFormat(format)) {
    return UsageError(args, "unknown format '" + format +
                                "'; use openai-chat, anthropic, openai-responses or recap");
  }
  if (!args.Has("session")) return UsageError(args, "--session ID is required");
  const std::string session = args.Get("session");
  const std::string db = args.Get("db", kDefaultDb);
  if (!CheckDb(db, &error)) return UsageError(args, error);

  recap::Result<std::shared_ptr<recap::SessionStore>> store = OpenStore(db, Access::kRead);
  if (!store.ok()) return Failure(args, store.status());
  const bool history = args.flags.count("history") != 0;
  recap::Result<recap::SessionState> state = recap::SessionState{};
  if (!history) {  // the history is checked by its walk, without loading the transcript
    state = LoadExisting(**store, db, session);
    if (!state.ok()) return Failure(args, state.status());
  }
  recap::Result<std::optional<recap::Message>> instructions = LoadInstructions(**store, session);
  if (!instructions.ok()) return Failure(args, instructions.status());

  const std::string hint =
      format == "recap" ? "" : " Export with --format recap, which keeps everything.";
  if (!history) {
    // The whole document is made before a byte is written, so that a session that cannot be
    // written in the format fails with nothing on stdout.
    recap::Conversation conv;
    conv.instructions = *instructions;
    conv.messages = state->transcript.ToVector();
    recap::Result<std::string> doc = Document(format, conv);
    if (!doc.ok()) {
      return Failure(args, "session '" + Shown(session) + "' cannot be written as " + format +
                               ": " + Sentence(doc.status().message()) + hint);
    }
    WriteJsonText(*doc, !args.json());
    return kExitOk;
  }

  // The history is read, encoded and written one entry at a time, so that a session of
  // millions of messages is never held at once. Its first kHeldBytes are held back: a history
  // that cannot be written in the format, found within them, leaves stdout empty as the
  // transcript does; past them a failure says how much was written.
  std::string instructions_json = "null";
  if (*instructions) {
    if (format == "anthropic" || format == "openai-responses") {
      recap::Result<std::string> text = InstructionsText(format, **instructions);
      if (!text.ok()) {
        return Failure(args, "session '" + Shown(session) + "' cannot be written as " + format +
                                 ": " + Sentence(text.status().message()) + hint);
      }
      instructions_json = JsonString(*text);
    } else {
      recap::Result<std::string> text = format == "openai-chat"
                                            ? recap::openai_chat::EncodeMessage(**instructions)
                                            : recap::native::EncodeMessage(**instructions);
      if (!text.ok()) return Failure(args, text.status());
      instructions_json = std::move(text).value();
    }
  }
  constexpr std::size_t kHeldBytes = std::size_t{64} << 20;
  JsonWriter writer(!args.json());
  writer.HoldUpTo(kHeldBytes);
  writer.Write("{\"session\":" + JsonString(session) + ",\"format\":" + JsonString(format) +
               ",\"instructions\":" + instructions_json + ",\"history\":[");
  std::size_t entries = 0;
  std::string failed;  // why an entry could not be written
  std::string piece;
  const recap::Status walked =
      (*store)->ForEachHistoryEntry(session, [&](recap::HistoryEntry&& e) -> recap::Status {
        const std::string id = e.message.id;
        const bool summary = e.message.summary;
        recap::Conversation one;
        one.messages.push_back(std::move(e.message));
        recap::Result<std::string> text = Encode(format, one);
        if (!text.ok()) {
          failed = "history entry " + std::to_string(e.seq) + " of session '" + Shown(session) +
                   "' cannot be written as " + format + ": " + Sentence(text.status().message()) +
                   hint;
          return recap::Status::Cancelled(failed);
        }
        piece.clear();
        if (entries++ != 0) piece += ',';
        piece += "{\"seq\":" + std::to_string(e.seq) + ",\"id\":" + JsonString(id) + ",\"state\":" +
                 (e.state == recap::HistoryState::kActive ? "\"active\"" : "\"compacted\"") +
                 ",\"replaced_by\":" + JsonString(e.replaced_by) +
                 ",\"summary\":" + (summary ? "true" : "false") + ",\"messages\":";
        writer.Write(piece);
        writer.Write(*text);
        writer.Write("}");
        // A full disk or a closed pipe: stop reading (main reports the failed write).
        if (!std::cout.good()) return recap::Status::Cancelled("standard output failed");
        return recap::Status::OK();
      });
  if (!walked.ok() || entries == 0) {
    const bool cut = writer.written() != 0;
    writer.Discard();
    if (walked.ok()) {  // no entry: the session was never written
      recap::Result<recap::SessionState> none = LoadExisting(**store, db, session);
      return Failure(args, none.ok() ? recap::Status::NotFound("session '" + Shown(session) +
                                                               "' has no history")
                                     : none.status());
    }
    if (!std::cout.good()) return kExitOk;  // main reports the failed write, and fails
    std::string why = failed.empty() ? walked.message() : failed;
    if (cut) {
      // What follows (the --json error object) starts a line of its own.
      std::cout << '\n';
      why += " The history on standard output is incomplete: it stops after " +
             std::to_string(entries) + (entries == 1 ? " entry (" : " entries (") +
             std::to_string(writer.written()) + " bytes were written before the failure).";
    }
    return Failure(
        args,
        recap::Status(failed.empty() ? walked.code() : recap::StatusCode::kInvalidArgument, why));
  }
  writer.Write("]}");
  writer.Raw("\n");
  writer.Flush();
  std::cout.flush();
  return kExitOk;
}

}  // namespace recap_cli
