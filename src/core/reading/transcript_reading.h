// What a transcript states exactly, read alike by the offline summarizer (issue 21) and the
// ledger (R17.1): what a person wrote once the harness's wrappers are gone, whether a tool
// reported a failure, what kind of work a tool does, and the to-do lists agents keep. No
// understanding of text: only what the transcript states.
#ifndef RECAP_SRC_CORE_READING_TRANSCRIPT_READING_H_
#define RECAP_SRC_CORE_READING_TRANSCRIPT_READING_H_

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "json/json_util.h"

namespace recap {
inline namespace v0 {
namespace reading {

// The request a person wrote in a user message's text, without what agent harnesses wrap
// around it or put in its place: Claude Code's local-command caveat, slash-command tags (a
// command's arguments are kept: "/review PR 482" keeps "PR 482") and their output, IDE selections
// and opened files, system reminders, interruption notices; SWE-agent's and OpenHands' task
// templates (the issue or PR text is kept); terminal control sequences and other control
// characters. Empty when the message is only a wrapper.
std::string PersonText(std::string_view text);

// `text` whole when it has at most `max` code points, else its first code points and the
// summarizer's own marker (kCutMarker): `max` code points in all, the marker included.
std::string CutText(std::string_view text, std::size_t max);
inline constexpr std::string_view kCutMarker = "\xE2\x80\xA6 [cut by the summarizer]";

// The exit code a tool's output reports in its last lines ("exit code 2", "Exit code: 1",
// "exited with code 127", "[The command completed with exit code 1.]"), if any.
std::optional<long> ReportedExitCode(std::string_view output);

// The output starts by saying the call failed ("Error: …", "ERROR: …", "error: …", a Python
// traceback): how tools without an error flag report their failures.
bool StartsWithFailure(std::string_view output);

// The output mentions an error anywhere (the old guess, too loose on its own: a file that was
// read may hold "except ValueError"); it counts only when the next call retried the same one.
bool MentionsError(std::string_view output);

// A line without a banner's padding: "===== 2 failed in 0.3s =====" is "2 failed in 0.3s".
std::string_view WithoutBanner(std::string_view line);

// The line of a tool's output that says most about how it ended: the last one with a letter in
// it once banner padding is taken off (a traceback ends with the exception, a test run with its
// tally), at most `max_bytes` bytes of it (never cutting a UTF-8 character). Empty when no line
// has a letter.
std::string TellingLine(std::string_view output, std::size_t max_bytes);

// Claude Code's answer when the person refused a tool call.
bool IsRejection(std::string_view output);

enum class ToolKind {
  kRead,     // reads, searches, lookups, thinking: never an accomplishment
  kEdit,     // writes or edits files
  kCommand,  // runs a shell command
  kTodo,     // keeps the agent's to-do list
  kOther,    // any other action (book a flight, send a message, submit)
};
// `subcommand`: the call's "command" argument, for editor tools that take one (view, create,
// str_replace, insert).
ToolKind KindOf(std::string_view tool, std::string_view subcommand);
// An edit tool that creates or overwrites whole files (Write, create, write_file).
bool Writes(std::string_view tool, std::string_view subcommand);

// A path that names no file of the work: interpreters and system folders (/usr/bin/env,
// .venv/bin/python, /dev/null), placeholders (/path/to/dir, folder/file.txt), temporary files
// and caches (/tmp, __pycache__, node_modules), mangled tokens ("-experiments/…").
bool IsJunkPath(std::string_view path);

// A JSON object's string member, or "" (not an object, no such member, not a string).
std::string_view StringMember(const jsonutil::Json& doc, std::string_view key);

// One to-do item as a to-do tool's arguments state it.
struct TodoItem {
  std::string id;  // TaskCreate's number, when known
  std::string text;
  std::string status;  // lower case: pending, in_progress, completed, …
};
// True for a status that means the item is finished (completed, done, deleted, cancelled).
bool TodoFinished(std::string_view status);

// The to-do list after one call of a to-do tool: TodoWrite, update_plan and task_tracker state
// the whole list; TaskCreate adds an item (numbered as its result says, else in order),
// TaskUpdate changes one. `doc`: the call's parsed arguments; `result`: its result's text.
// Returns false when the call stated nothing about the list (TaskList, TaskGet).
bool ApplyTodoCall(std::string_view tool, const jsonutil::Json& doc, std::string_view result,
                   std::vector<TodoItem>& list);

}  // namespace reading
}  // namespace v0
}  // namespace recap

#endif  // RECAP_SRC_CORE_READING_TRANSCRIPT_READING_H_
