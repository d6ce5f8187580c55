// recap CLI — what the subcommands share: exit codes, option parsing, opening the database,
// the configuration, output helpers. One file per subcommand (import.cc, append.cc,
// prepare.cc, export.cc, stats.cc, compact.cc, sessions.cc, recall.cc, uncompact.cc); main.cc
// dispatches. Shared:
// common.cc (options' values, reporting, a library Status in the command's words),
// database.cc (--db, opening it, a session's run), configuration.cc (--config and the
// limits' flags, --provider and the HTTP provider's failures in the command's words),
// import_formats.{h,cc} (the formats import and append read), import_sources.h and
// json_skim.{h,cc} (the import's streamed messages and its skimmer), progress.{h,cc}.
#ifndef RECAP_CLI_CLI_H_
#define RECAP_CLI_CLI_H_

#include <cstddef>
#include <cstdint>
#include <iosfwd>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "recap/recap.h"
#include "recap/sqlite/sqlite_store.h"

namespace recap_cli {

using Json = nlohmann::ordered_json;

// Exit codes: 0 done, 1 the work failed, 2 usage error.
inline constexpr int kExitOk = 0;
inline constexpr int kExitFailed = 1;
inline constexpr int kExitUsage = 2;

inline constexpr const char* kDefaultDb = "./recap.db";

// The instructions (leading system message) of session ID are kept in a companion session
// with this prefix, so that they never enter the session's transcript (SPEC §1) but can be
// exported and counted. `recap sessions list` hides these sessions.
inline constexpr const char* kInstructionsPrefix = "recap-cli.instructions:";

// --- option parsing ------------------------------------------------------------------------

struct OptionSpec {
  std::string name;  // without the leading "--"
  bool takes_value = false;
};

struct Args {
  std::string command;  // e.g. "import", "sessions list"
  std::map<std::string, std::string> values;
  std::set<std::string> flags;
  std::vector<std::string> positional;

  bool Has(const std::string& name) const { return values.count(name) || flags.count(name); }
  std::string Get(const std::string& name, const std::string& fallback = {}) const {
    auto it = values.find(name);
    return it == values.end() ? fallback : it->second;
  }
  bool json() const { return flags.count("json") != 0; }
};

// Parses argv-style words against `specs` (--help, -h and --json are always accepted).
// Returns false and sets `error` on an unknown option or a missing value.
bool ParseArgs(const std::vector<std::string>& words, const std::vector<OptionSpec>& specs,
               Args* out, std::string* error);

// Parses a non-negative integer option; false (and an error text) when it is not one.
bool ParseCount(const Args& args, const std::string& name, std::size_t* out, std::string* error);

// Parses a byte count option (digits, or with a K, M or G suffix: 1024-based); false (and an
// error text) when it is not one.
bool ParseBytes(const Args& args, const std::string& name, std::size_t* out, std::string* error);

// --- reading input -----------------------------------------------------------------------------

// The default of --max-input-bytes: no transcript file is read past it.
inline constexpr std::size_t kDefaultMaxInputBytes = std::size_t{1} << 30;  // 1 GiB
// No configuration file is read past this.
inline constexpr std::size_t kMaxConfigBytes = std::size_t{16} << 20;  // 16 MiB

// How long a command waits for a SQLite database that another process holds locked
// ($RECAP_BUSY_TIMEOUT_MS changes it, up to kMaxBusyTimeoutMs).
inline constexpr std::uint32_t kDefaultBusyTimeoutMs = 30000;
inline constexpr std::uint32_t kMaxBusyTimeoutMs = 3600000;

// Reads the whole file at `path` into *out, but never more than `max_bytes` (an endless stream
// such as /dev/urandom is refused once that much was read). `path` "-" reads standard input,
// under the same bound. On failure *error says what was wrong: `what` names the file
// ("'t.json'", InputName), `limit_name` the limit ("--max-input-bytes") and `advice` what to
// do when the file is over it.
bool ReadBounded(const std::string& path, std::size_t max_bytes, const std::string& what,
                 const std::string& limit_name, const std::string& advice, std::string* out,
                 std::string* error);

// How messages name an input given on the command line: "'t.json'", or "standard input" for
// "-".
std::string InputName(const std::string& path);

// Puts /dev/null in place of a closed standard input (main calls it first), so that no file the
// command opens takes its descriptor; ReadBounded then refuses "-", saying stdin is closed.
void GuardStandardInput();

// "1,048,576 bytes" / "1 GiB" for messages.
std::string Bytes(std::size_t n);

// --- reporting -------------------------------------------------------------------------------

// A usage error: prints "recap <command>: <message>" and a pointer to --help; returns 2.
int UsageError(const Args& args, const std::string& message);
// A failure of the work: prints the text (and, with --json, {"error": ...} on stdout);
// returns 1.
int Failure(const Args& args, const std::string& text);
// The same for a library Status, in the command's words (InCommandWords).
int Failure(const Args& args, const recap::Status& status);
// A library Status's message in the command's words: each remedy of the stores it names
// (recap::Remedy, docs/errors.md) said as a user of the command can act on it.
std::string InCommandWords(const recap::Status& status);
// `status` with "Nothing was written" added, unless its message says so already.
recap::Status NothingWritten(const recap::Status& status);

// Writes one JSON value as one line on stdout.
void PrintJson(const Json& value);

// 1234567 -> "1,234,567".
std::string Num(std::size_t n);
// `n` and the noun, plural unless n is 1: Counted(1, "message") == "1 message",
// Counted(1200, "message") == "1,200 messages".
std::string Counted(std::size_t n, const std::string& noun);
// A one-line preview of a message's text, at most `width` characters (code points).
std::string Preview(const recap::Message& m, std::size_t width);

// --- the database ------------------------------------------------------------------------------

// --db names either a SQLite database file or, as a postgresql:// or postgres:// URL, a
// PostgreSQL database (recap's tables in its schema `recap`; docs/cli.md, "A shared PostgreSQL
// store").
bool IsPostgresUrl(const std::string& db);

// The --db value as messages and output show it: a URL's password (in its user info, or a
// password= parameter) replaced by ***. A file path is returned as it is.
std::string ShownDb(const std::string& db);

// `word` as one shell word, single-quoted when it holds anything but plain characters (for
// the commands that messages suggest).
std::string QuotedForShell(const std::string& word);

// `text` (a session id, a call id, stored text) as it may be printed for a person: valid UTF-8
// with every control character written as an escape ("\x1b", "\n", "\u009b"), so that no id
// or message can drive the terminal or forge a line (recap::internal::Printable).
std::string Shown(const std::string& text);

// Whether this build can open `db`: false (and `error`, a usage error) for a PostgreSQL URL
// when recap was built without its PostgreSQL component.
bool CheckDb(const std::string& db, std::string* error);

// How a command uses the database.
enum class Access {
  kRead,    // stats, plan, export, sessions list/show/history: opened read-only — no byte of
            // the file changes and no file is created (R13.5); it must exist
  kWrite,   // compact, sessions recover: it must exist
  kCreate,  // import: created when missing; a damaged file is refused before any write
};

// Opens the database --db names. A SQLite file: missing, empty (for kRead), not a regular file,
// or damaged (for kCreate) is an error that says what to do. A PostgreSQL URL: with kWrite or
// kCreate the store creates its schema in a database that has none yet; with kRead it changes
// nothing. Messages name the database (never its password) and what to do.
recap::Result<std::shared_ptr<recap::SessionStore>> OpenStore(const std::string& path,
                                                              Access access);

// The SQLite store's options for `access` (and the RECAP_BUSY_TIMEOUT_MS variable).
recap::Result<recap::SqliteStoreOptions> SqliteOptions(Access access);

// Whether --db names a SQLite file that does not exist yet (`recap import` then builds it
// aside with CreateInNewFile).
bool IsNewSqliteFile(const std::string& path);

// The import's CreateSessions into a SQLite file that does not exist yet: built aside and
// put at `path` whole (recap::CreateSqliteSessions). Into the file that is there, should
// another process create one meanwhile.
recap::Result<std::vector<std::uint64_t>> CreateInNewFile(const std::string& path,
                                                          std::vector<recap::NewSession> sessions);

// Loads a session that must exist (version > 0); `db` is the --db value, as given.
recap::Result<recap::SessionState> LoadExisting(recap::SessionStore& store, const std::string& db,
                                                const std::string& session);

// The session's instructions, if it was imported with a leading system message.
recap::Result<std::optional<recap::Message>> LoadInstructions(recap::SessionStore& store,
                                                              const std::string& session,
                                                              std::uint64_t* version = nullptr);

// Checks a session id given with --session (non-empty, not a reserved name).
bool ValidSessionId(const std::string& id, std::string* error);

// --- configuration and provider -------------------------------------------------------------

// Config from --config FILE, then --max-context-chars and --keep-turns. `usage` tells whether a
// failure is a usage error (bad option value) or a failed read of the file. `source`, when
// given, receives the configuration's text as read (the file's, or standard input's), "" for
// the defaults.
recap::Result<recap::Config> BuildConfig(const Args& args, bool* usage,
                                         std::string* source = nullptr);

// The summarizer named by --provider (default offline; null means offline).
recap::Result<std::shared_ptr<recap::Provider>> BuildProvider(const Args& args, bool* usage);

// What `compact` and `prepare` open before they run a Compactor on a session: the
// configuration (--config …), the summarizer (--provider …), the database (--db, for writing)
// and the session, which must exist, with its stored instructions.
struct SessionRun {
  recap::Config config;
  std::shared_ptr<recap::Provider> provider;
  std::shared_ptr<recap::SessionStore> store;
  recap::SessionState state;  // the session as it was opened
  std::optional<recap::Message> instructions;
  std::uint64_t instructions_version = 0;  // the version of the session keeping them (0: none)
};
// Opens them for `session`, or prints why not (a usage error or a failure, in the command's
// words) and sets *exit_code to the command's exit code.
// `config`, when given, is used instead of building it again (a command that built it already,
// e.g. from standard input, which reads only once).
bool OpenSessionRun(const Args& args, const std::string& session, SessionRun* out, int* exit_code,
                    const recap::Config* config = nullptr);

// Options every subcommand that reads a session's configuration accepts.
std::vector<OptionSpec> ConfigOptions();
std::vector<OptionSpec> ProviderOptions();
// The help text for those options (one block, shared by plan and compact).
extern const char* const kConfigHelp;
extern const char* const kProviderHelp;

// --- subcommands (one file each) ---------------------------------------------------------------

int RunImport(const std::vector<std::string>& words);
int RunExport(const std::vector<std::string>& words);
int RunStats(const std::vector<std::string>& words);
int RunPlan(const std::vector<std::string>& words);
int RunCompact(const std::vector<std::string>& words);
int RunSessions(const std::vector<std::string>& words);
int RunAppend(const std::vector<std::string>& words);
int RunPrepare(const std::vector<std::string>& words);
int RunRecall(const std::vector<std::string>& words);
int RunUncompact(const std::vector<std::string>& words);
int RunProxy(const std::vector<std::string>& words);
int RunReport(const std::vector<std::string>& words);

// Decodes a transcript file's text the way `recap import --format FORMAT [--run RUN]` does,
// without touching a database (the importers' fuzz target uses it). `run` empty: no --run.
recap::Result<recap::Conversation> DecodeTranscript(const std::string& format,
                                                    const std::string& text,
                                                    const std::string& run);

// Decodes an input's text the way `recap import --format FORMAT` decodes a file (the same
// instructions, the same checks: nesting depth, a message whose tool calls share an id), for
// `recap append`. `path` is the input as given ("-": standard input). On failure the status's
// message says what is wrong and where, which --format the text looks like when it looks like
// another, and that nothing was written; *usage tells a usage error (a wrong --run).
recap::Result<recap::Conversation> DecodeInput(const std::string& format, const std::string& text,
                                               const std::string& path, const Args& args,
                                               bool* usage);

// The formats `export` writes and `append` and `prepare` take: openai-chat, anthropic,
// openai-responses, recap.
bool MessageFormat(const std::string& format);

// A conversation as the JSON document a model receives in `format` (what `recap export --format
// FORMAT` writes): openai-chat's messages array with the instructions first as its system
// message, anthropic's {"system", "messages"}, a Responses request's {"instructions", "input"}
// (a bare array without instructions), recap's {"instructions", "messages"}. The codecs' text
// is not parsed again: numbers stay as written (SPEC R13.2). Fails when the conversation holds
// what the format cannot carry.
recap::Result<std::string> EncodeDocument(const std::string& format,
                                          const recap::Conversation& conv);

// Writes a compact JSON text to stdout, indented by two spaces when `indent` (as `export` does
// without --json), then a newline.
void WriteJsonText(std::string_view json, bool indent);

// Session statistics, shared by `stats` and `sessions show`.
Json SessionStatsJson(recap::SessionStore& store, const std::string& session,
                      const recap::SessionState& state);
void PrintSessionStats(const Json& stats);

}  // namespace recap_cli

#endif  // RECAP_CLI_CLI_H_
