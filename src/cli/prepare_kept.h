// recap CLI — what `recap prepare` keeps in a SQLite session file for the next prepare (issue
// 39). A prepare is a new process each turn: without this it would load and decode every
// message of the session and encode all of them again, to find that nothing is to be done and
// print what it printed last time plus the turn's new messages.
//
// After a prepare, the command keeps each message's encoded form in the format it printed, and
// a memo: the session's version, its size and open tool calls, the triggers' thresholds, and
// the document's text around the messages. The next prepare reads the memo and the messages
// appended since (nothing else is decoded), and when the memo still holds — same settings, same
// instructions, nothing rewritten since, no learned state, nothing that a prepare would act on
// (no trigger reached, nothing over the hard limit or the window, every new tool result paired
// with its call, no provider checkpoint, every new message writable in the format) — it prints
// the document from the kept encodings, the new messages' own and the memo's text: the same
// bytes the full prepare prints. Otherwise it runs the full prepare, which keeps anew.
//
// RECAP_PREPARE_CACHE=off turns both off (the full prepare every time, nothing kept);
// RECAP_PREPARE_CACHE=trace says on stderr when a prepare printed from what was kept.
#ifndef RECAP_CLI_PREPARE_KEPT_H_
#define RECAP_CLI_PREPARE_KEPT_H_

#include <cstdint>
#include <optional>
#include <string>

#include "cli.h"

namespace recap_cli {

struct PrepareCall {
  const Args* args = nullptr;
  std::string session;
  std::string format;
  recap::Config config;
  recap::RequestSizes sizes;
  bool instructions_given = false;  // --instructions-chars
  std::string key;                  // what else decides what prepare prints (PrepareKey)
};

// The kind of the first opaque part (thinking, reasoning, a provider's checkpoint) of a message
// decoded from another format than `format`, which cannot be written in it (R14.1): prepare
// refuses it. "" when there is none.
std::string ForeignOpaqueKind(const recap::Message& m, const std::string& format);

// The settings that decide what a prepare prints, besides the session: the format, the
// configuration's text and the options that override it, the sizes given, recap's version.
std::string PrepareKey(const Args& args, const std::string& config_text);

// Whether the call may use what a prepare kept (the offline summarizer, a SQLite file, no
// --json, not turned off).
bool MayKeep(const PrepareCall& call);

// Prints the document from what the last prepare kept when that is what a full prepare would
// print now, and returns true (*exit_code set); false when the full prepare must run (nothing
// was printed).
bool ServeKept(const PrepareCall& call, int* exit_code);

// After a full prepare printed `doc` for `prepared`, with the stored `instructions` read at
// their session's `instructions_version`: keeps the encodings and the memo for the next one,
// when it could serve from them. A failure to keep is not the prepare's: the next prepare
// runs in full.
void KeepForNext(const PrepareCall& call, const recap::Prepared& prepared,
                 const std::optional<recap::Message>& instructions,
                 std::uint64_t instructions_version, const std::string& doc);

}  // namespace recap_cli

#endif  // RECAP_CLI_PREPARE_KEPT_H_
