// recap CLI — the database: --db as a SQLite file or a PostgreSQL URL (its password never
// shown), opening it for reading or writing, a session's run (store, Compactor, config), session
// ids.
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iostream>
#include <sstream>
#include <string>
#include <system_error>
#include <utility>

#include <sys/stat.h>

#include "recap/sqlite/sqlite_store.h"

#include "cli.h"
#include "progress.h"
#include "recap_internal/printable.h"
#include "recap_internal/store_rules.h"
#if RECAP_CLI_HAVE_POSTGRES
#include "recap/postgres/postgres_store.h"
#endif
#if RECAP_CLI_HAVE_HTTP
#include "recap/http/http_provider.h"
#endif

namespace recap_cli {

bool IsPostgresUrl(const std::string& db) {
  return db.compare(0, 13, "postgresql://") == 0 || db.compare(0, 11, "postgres://") == 0;
}

namespace {

bool IsSecretKey(const std::string& key) {
  std::string lower;
  for (char c : key) lower += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return lower.find("password") != std::string::npos;  // password, sslpassword
}

// %XX sequences decoded (a password in a URL may be percent-encoded).
[[maybe_unused]] std::string PercentDecoded(const std::string& s) {
  std::string out;
  for (std::size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '%' && i + 2 < s.size() && std::isxdigit(static_cast<unsigned char>(s[i + 1])) &&
        std::isxdigit(static_cast<unsigned char>(s[i + 2]))) {
      out += static_cast<char>(std::stoi(s.substr(i + 1, 2), nullptr, 16));
      i += 2;
    } else {
      out += s[i];
    }
  }
  return out;
}

// The --db value with each password in it replaced by ***; `secrets` (when given) receives the
// passwords as written.
std::string Redacted(const std::string& db, std::vector<std::string>* secrets) {
  if (!IsPostgresUrl(db)) return db;
  std::string url = db;
  auto hide = [&](std::size_t from, std::size_t count) {
    if (secrets) secrets->push_back(url.substr(from, count));
    url.replace(from, count, "***");
  };
  const std::size_t authority = url.find("://") + 3;
  // The user info ends at an '@', its password after the first ':'. libpq takes the first
  // '@' before any '/'; the last '@' before the query also covers a password that holds an
  // unencoded '@' or '/'. Whichever reaches further is hidden.
  const std::size_t query = url.find_first_of("?#", authority);
  std::size_t at = url.rfind('@', query == std::string::npos ? std::string::npos : query);
  if (at != std::string::npos && at < authority) at = std::string::npos;
  const std::size_t libpq_at = url.find_first_of("@/", authority);
  if (libpq_at != std::string::npos && url[libpq_at] == '@' &&
      (at == std::string::npos || libpq_at > at)) {
    at = libpq_at;
  }
  if (at != std::string::npos) {
    const std::size_t colon = url.find(':', authority);
    if (colon != std::string::npos && colon < at) hide(colon + 1, at - colon - 1);
  }
  // password=... (and sslpassword=...) among the query parameters.
  const std::size_t q = url.find('?', authority);
  if (q == std::string::npos) return url;
  std::size_t start = q + 1;
  while (start < url.size()) {
    std::size_t stop = url.find_first_of("&#", start);
    if (stop == std::string::npos) stop = url.size();
    const std::size_t eq = url.find('=', start);
    if (eq != std::string::npos && eq < stop && stop > eq + 1 &&
        IsSecretKey(url.substr(start, eq - start))) {
      hide(eq + 1, stop - eq - 1);
      stop = eq + 4;
    }
    if (stop >= url.size() || url[stop] == '#') break;
    start = stop + 1;
  }
  return url;
}

}  // namespace

std::string ShownDb(const std::string& db) { return Redacted(db, nullptr); }

std::string Shown(const std::string& text) { return recap::internal::Printable(text); }

std::string QuotedForShell(const std::string& word) {
  const bool plain = !word.empty() && word.find_first_not_of(
                                          "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
                                          "0123456789_./:@%+=,-") == std::string::npos;
  if (plain) return word;
  // A word with control characters: bash's $'…', whose escapes are Printable's, so that the
  // line shown can be pasted as it is and the terminal sees no control.
  const std::string shown = Shown(word);
  if (shown != word) {
    std::string q = "$'";
    for (char c : shown) q += c == '\'' ? std::string("\\'") : std::string(1, c);
    return q + "'";
  }
  std::string q = "'";
  for (char c : word) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return q + "'";
}

bool CheckDb(const std::string& db, std::string* error) {
#if RECAP_CLI_HAVE_POSTGRES
  (void)db;
  (void)error;
  return true;
#else
  if (!IsPostgresUrl(db)) return true;
  *error = "--db " + ShownDb(db) +
           " is a PostgreSQL URL, but this build of recap has no PostgreSQL component. Build "
           "recap with it (-DRECAP_BUILD_POSTGRES=ON; needs libpq: Debian's libpq-dev), or "
           "pass the path of a SQLite database file";
  return false;
#endif
}

recap::Result<std::shared_ptr<recap::SessionStore>> OpenStore(const std::string& path,
                                                              Access access) {
  const bool create = access == Access::kCreate;
  if (path.empty()) {
    return recap::Status::InvalidArgument(
        "--db is empty; pass the path of the database file or a postgresql:// URL");
  }
  if (IsPostgresUrl(path)) {
    std::string error;
    if (!CheckDb(path, &error)) return recap::Status::InvalidArgument(error);
#if RECAP_CLI_HAVE_POSTGRES
    // A database without recap's schema gets it (and is then empty), whatever `create` says:
    // there is no file to look for, and a missing session says so by itself.
    recap::PostgresStoreOptions options;
    options.connection = path;
    options.schema = "recap";
    options.application_name = "recap-cli";
    options.read_only = access == Access::kRead;
    options.allow_reserved_sessions = true;  // the instructions' companion sessions
    recap::Result<std::shared_ptr<recap::SessionStore>> store =
        recap::OpenPostgresSessionStore(options);
    if (store.ok()) return store;
    // The store never writes the password; the CLI makes sure of it anyway.
    std::string message = InCommandWords(store.status());
    std::vector<std::string> secrets;
    Redacted(path, &secrets);
    for (const std::string& secret : secrets) {
      for (const std::string& s : {secret, PercentDecoded(secret)}) {
        if (s.size() < 3) continue;  // too short to tell from the rest of the text
        for (std::size_t p = message.find(s); p != std::string::npos; p = message.find(s, p + 3)) {
          message.replace(p, s.size(), "***");
        }
      }
    }
    if (store.status().code() == recap::StatusCode::kFailedPrecondition &&
        message.find("password") != std::string::npos) {
      message +=
          ". With the recap command, give the password in the URL "
          "(postgresql://USER:PASSWORD@HOST/DBNAME), in the PGPASSWORD environment "
          "variable or in ~/.pgpass";
    }
    return recap::Status(store.status().code(),
                         "cannot open the PostgreSQL database '" + ShownDb(path) + "': " + message);
#endif
  }
  const std::string import_hint =
      "`recap import --format F FILE --session ID --db " + QuotedForShell(path) + "` creates one";
  struct stat st {};
  const bool exists = ::stat(path.c_str(), &st) == 0;
  if (!create && !exists) {
    return recap::Status::NotFound("there is no database at '" + path +
                                   "'. Import a transcript first (" + import_hint +
                                   "), or pass --db with the path of an existing recap database");
  }
  if (exists && S_ISDIR(st.st_mode)) {
    return recap::Status::InvalidArgument("--db '" + path +
                                          "' is a folder; pass the path of a database file");
  }
  if (exists && !S_ISREG(st.st_mode)) {
    return recap::Status::InvalidArgument(
        "--db '" + path +
        "' is not a regular file (a device, a pipe or a socket); pass the path of a recap "
        "database file. Nothing was written to it");
  }
  if (!create && st.st_size == 0) {
    return recap::Status::NotFound("the database file '" + path +
                                   "' is empty: it holds no recap sessions yet (it was left as "
                                   "it is); " +
                                   import_hint + " in it");
  }
  recap::Result<recap::SqliteStoreOptions> options = SqliteOptions(access);
  RECAP_RETURN_IF_ERROR(options);
  return recap::OpenSqliteSessionStore(path, *options);
}

bool IsNewSqliteFile(const std::string& path) {
  struct stat st {};
  return !path.empty() && !IsPostgresUrl(path) && ::lstat(path.c_str(), &st) != 0 &&
         errno == ENOENT;
}

recap::Result<std::vector<std::uint64_t>> CreateInNewFile(const std::string& path,
                                                          std::vector<recap::NewSession> sessions) {
  recap::Result<recap::SqliteStoreOptions> options = SqliteOptions(Access::kCreate);
  RECAP_RETURN_IF_ERROR(options);
  return recap::CreateSqliteSessions(path, std::move(sessions), *options);
}

recap::Result<recap::SqliteStoreOptions> SqliteOptions(Access access) {
  const bool create = access == Access::kCreate;
  recap::SqliteStoreOptions options;
  options.create_if_missing = create;
  options.read_only = access == Access::kRead;
  options.check_integrity = create;
  options.allow_reserved_sessions = true;  // the instructions' companion sessions
  // Another recap command (or a host) may hold the write lock for a while, e.g. during a big
  // import: wait for it rather than fail at once.
  options.busy_timeout_ms = kDefaultBusyTimeoutMs;
  if (const char* wait = std::getenv("RECAP_BUSY_TIMEOUT_MS"); wait != nullptr && *wait != '\0') {
    char* end = nullptr;
    errno = 0;
    const unsigned long long ms = std::strtoull(wait, &end, 10);
    if (*end != '\0' || errno != 0 || ms > kMaxBusyTimeoutMs || wait[0] == '-') {
      return recap::Status::InvalidArgument(
          "RECAP_BUSY_TIMEOUT_MS is '" + std::string(wait).substr(0, 40) +
          "'; set it to the milliseconds to wait for a database another process holds, from 0 "
          "to " +
          std::to_string(kMaxBusyTimeoutMs) + " (unset: " + std::to_string(kDefaultBusyTimeoutMs) +
          ")");
    }
    options.busy_timeout_ms = static_cast<std::uint32_t>(ms);
  }
  return options;
}

recap::Result<recap::SessionState> LoadExisting(recap::SessionStore& store, const std::string& db,
                                                const std::string& session) {
  std::string error;
  if (!ValidSessionId(session, &error)) return recap::Status::InvalidArgument(error);
  recap::Result<recap::SessionState> state = store.Load(session);
  RECAP_RETURN_IF_ERROR(state);
  if (state->version == 0) {
    const std::string shown = ShownDb(db);
    // A first append that held only the instructions keeps them for the session's first
    // message: the session begins with that message.
    recap::Result<recap::SessionState> companion = store.Load(kInstructionsPrefix + session);
    if (companion.ok() && companion->version != 0) {
      return recap::Status::NotFound("session '" + Shown(session) +
                                     "' has its instructions but no message yet: append its "
                                     "first message with `recap append --session " +
                                     QuotedForShell(session) + "`");
    }
    return recap::Status::NotFound(
        std::string(IsPostgresUrl(db) ? "the PostgreSQL database " : "the database ") + "'" +
        shown + "' has no session '" + Shown(session) + "'. `recap sessions list --db " +
        QuotedForShell(shown) + "` lists the sessions it holds");
  }
  return state;
}

bool OpenSessionRun(const Args& args, const std::string& session, SessionRun* out, int* exit_code,
                    const recap::Config* given) {
  bool usage = false;
  recap::Result<recap::Config> config = given != nullptr ? *given : BuildConfig(args, &usage);
  if (!config.ok()) {
    *exit_code =
        usage ? UsageError(args, config.status().message()) : Failure(args, config.status());
    return false;
  }
  recap::Result<std::shared_ptr<recap::Provider>> provider = BuildProvider(args, &usage);
  if (!provider.ok()) {
    *exit_code =
        usage ? UsageError(args, provider.status().message()) : Failure(args, provider.status());
    return false;
  }
  const std::string db = args.Get("db", kDefaultDb);
  std::string error;
  if (!CheckDb(db, &error)) {
    *exit_code = UsageError(args, error);
    return false;
  }
  recap::Result<std::shared_ptr<recap::SessionStore>> store = OpenStore(db, Access::kWrite);
  if (!store.ok()) {
    *exit_code = Failure(args, store.status());
    return false;
  }
  // A session that was never written says so in the command's words (and names `sessions
  // list`), rather than running on an empty one.
  recap::Result<recap::SessionState> state = LoadExisting(**store, db, session);
  if (!state.ok()) {
    *exit_code = Failure(args, state.status());
    return false;
  }
  recap::Result<std::optional<recap::Message>> instructions =
      LoadInstructions(**store, session, &out->instructions_version);
  if (!instructions.ok()) {
    *exit_code = Failure(args, instructions.status());
    return false;
  }
  out->config = std::move(*config);
  out->provider = std::move(*provider);
  out->store = std::move(*store);
  out->state = std::move(*state);
  out->instructions = std::move(*instructions);
  return true;
}

recap::Result<std::optional<recap::Message>> LoadInstructions(recap::SessionStore& store,
                                                              const std::string& session,
                                                              std::uint64_t* version) {
  recap::Result<recap::SessionState> state = store.Load(kInstructionsPrefix + session);
  RECAP_RETURN_IF_ERROR(state);
  if (version != nullptr) *version = state->version;
  if (state->transcript.empty()) return std::optional<recap::Message>();
  return std::optional<recap::Message>(state->transcript.back());
}

bool ValidSessionId(const std::string& id, std::string* error) {
  if (id.empty()) {
    *error = "the session id is empty; name the session with --session ID";
    return false;
  }
  if (id.rfind(recap::internal::kReservedSessionPrefix, 0) == 0) {
    *error = "session ids starting with '" + std::string(recap::internal::kReservedSessionPrefix) +
             "' are reserved for what the command keeps beside a session (its instructions); "
             "choose another name";
    return false;
  }
  return true;
}

const char* const kConfigHelp =
    "  --config FILE             recap's JSON configuration (docs/configuration.md;\n"
    "                            `-`: standard input); default: $RECAP_CONFIG when\n"
    "                            set, else recap's defaults\n"
    "  --max-context-chars N     limits.maxContextChars (overrides --config)\n"
    "  --keep-turns N            compaction.keepTurns, 0..20 (overrides --config)\n";

}  // namespace recap_cli
