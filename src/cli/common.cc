// recap CLI — option parsing, reporting, the database and the configuration.
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

bool ParseArgs(const std::vector<std::string>& words, const std::vector<OptionSpec>& specs,
               Args* out, std::string* error) {
  auto find = [&](const std::string& name) -> const OptionSpec* {
    for (const OptionSpec& s : specs) {
      if (s.name == name) return &s;
    }
    return nullptr;
  };
  // --json first, so that even a usage error found before it is reported as JSON.
  for (const std::string& w : words) {
    if (w == "--") break;
    if (w == "--json") out->flags.insert("json");
  }
  for (std::size_t i = 0; i < words.size(); ++i) {
    const std::string& w = words[i];
    if (w == "-h" || w == "--help") {
      out->flags.insert("help");
      continue;
    }
    if (w == "--json") {
      out->flags.insert("json");
      continue;
    }
    if (w == "--") {
      for (++i; i < words.size(); ++i) out->positional.push_back(words[i]);
      break;
    }
    if (w.size() > 2 && w.compare(0, 2, "--") == 0) {
      std::string name = w.substr(2);
      std::optional<std::string> value;
      const auto eq = name.find('=');
      if (eq != std::string::npos) {
        value = name.substr(eq + 1);
        name.resize(eq);
      }
      const OptionSpec* spec = find(name);
      if (spec == nullptr) {
        *error = "unknown option --" + name;
        return false;
      }
      if (!spec->takes_value) {
        if (value) {
          *error = "option --" + name + " takes no value";
          return false;
        }
        out->flags.insert(name);
        continue;
      }
      if (!value) {
        if (i + 1 >= words.size()) {
          *error = "option --" + name + " needs a value";
          return false;
        }
        value = words[++i];
      }
      if (auto given = out->values.find(name); given != out->values.end()) {
        *error = "--" + name + " is given twice ('" + given->second + "' and '" + *value +
                 "'); give it once";
        return false;
      }
      out->values[name] = *value;
      continue;
    }
    if (w.size() > 1 && w[0] == '-' && w != "-") {
      *error = "unknown option " + w;
      return false;
    }
    out->positional.push_back(w);
  }
  return true;
}

// The largest count an option takes: 18 digits, far past anything recap counts and within
// 64 bits.
constexpr std::size_t kMaxCount = 999999999999999999;

bool ParseCount(const Args& args, const std::string& name, std::size_t* out, std::string* error) {
  const std::string text = args.Get(name);
  if (text.empty() || text.find_first_not_of("0123456789") != std::string::npos) {
    *error = "--" + name + " wants a non-negative whole number, not '" + text + "'";
    return false;
  }
  const std::size_t digits = text.find_first_not_of('0') == std::string::npos
                                 ? 1
                                 : text.size() - text.find_first_not_of('0');
  if (digits > 18) {
    *error = "--" + name + " is at most " + std::to_string(kMaxCount) + ", not '" + text + "'";
    return false;
  }
  *out = static_cast<std::size_t>(std::strtoull(text.c_str(), nullptr, 10));
  return true;
}

bool ParseBytes(const Args& args, const std::string& name, std::size_t* out, std::string* error) {
  std::string text = args.Get(name);
  int shift = 0;
  if (!text.empty()) {
    const char unit = static_cast<char>(std::toupper(static_cast<unsigned char>(text.back())));
    if (unit == 'K' || unit == 'M' || unit == 'G') {
      shift = unit == 'K' ? 10 : unit == 'M' ? 20 : 30;
      text.pop_back();
    }
  }
  const auto refuse = [&](const std::string& why) {
    *error = "--" + name + " " + why + " (e.g. 1048576, 512M or 2G), not '" + args.Get(name) + "'";
    return false;
  };
  if (text.empty() || text.find_first_not_of("0123456789") != std::string::npos) {
    return refuse("wants a number of bytes greater than 0");
  }
  // What a byte count can hold: 2^64 - 1 bytes, so at most 17179869183G, 17592186044415M or
  // 18014398509481983K (named in the unit the user wrote).
  const std::size_t max_value = SIZE_MAX >> shift;
  const char* unit = shift == 30 ? "G" : shift == 20 ? "M" : shift == 10 ? "K" : " bytes";
  const std::string at_most = "is at most " + std::to_string(max_value) + unit +
                              (shift == 30 ? "" : ", " + std::to_string(SIZE_MAX >> 30) + "G");
  const std::size_t first = text.find_first_not_of('0');
  if (first != std::string::npos && text.size() - first > 20) return refuse(at_most);
  errno = 0;
  const unsigned long long value = std::strtoull(text.c_str(), nullptr, 10);
  if (errno == ERANGE || value > max_value) return refuse(at_most);
  if (value == 0) return refuse("wants a number of bytes greater than 0");
  *out = static_cast<std::size_t>(value) << shift;
  return true;
}

std::string Bytes(std::size_t n) {
  for (const auto& [shift, unit] :
       {std::pair<int, const char*>{30, "GiB"}, {20, "MiB"}, {10, "KiB"}}) {
    if (n >= (std::size_t{1} << shift) && n % (std::size_t{1} << shift) == 0) {
      return Num(n >> shift) + " " + unit;
    }
  }
  return Num(n) + " bytes";
}

namespace {
bool stdin_was_closed = false;
}  // namespace

void GuardStandardInput() {
  // A closed stdin (`recap append - <&-`) would let the next file the program opens (the
  // database) take descriptor 0, and `-` would then read that file. /dev/null takes its place;
  // reading `-` says that stdin was closed.
  if (::fcntl(STDIN_FILENO, F_GETFD) == -1 && errno == EBADF) {
    stdin_was_closed = true;
    const int fd = ::open("/dev/null", O_RDONLY);
    if (fd >= 0 && fd != STDIN_FILENO) {
      ::dup2(fd, STDIN_FILENO);
      ::close(fd);
    }
  }
}

std::string InputName(const std::string& path) {
  return path == "-" ? std::string("standard input") : "'" + path + "'";
}

bool ReadBounded(const std::string& path, std::size_t max_bytes, const std::string& what,
                 const std::string& limit_name, const std::string& advice, std::string* out,
                 std::string* error) {
  const bool from_stdin = path == "-";
  if (from_stdin && stdin_was_closed) {
    *error = "cannot read " + what +
             ": standard input is closed; give the input on it (`< FILE`, a pipe) or name a file";
    return false;
  }
  struct stat st {};
  if (!from_stdin && ::stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode)) {
    *error = what + " is a folder";
    return false;
  }
  // Standard input is read as it is (a file redirected with `<`, a pipe, a terminal) and is
  // left open: it is not ours to close.
  std::FILE* f = from_stdin ? stdin : std::fopen(path.c_str(), "rb");
  if (f == nullptr) {
    *error = "cannot open " + what + ": " + std::generic_category().message(errno) +
             "; check the path and that the file is readable";
    return false;
  }
  const auto close = [&] {
    if (!from_stdin) std::fclose(f);
  };
  if (from_stdin && ::fstat(fileno(f), &st) == 0 && S_ISDIR(st.st_mode)) {
    *error = what + " is a folder";
    return false;
  }
  out->clear();
  // A regular file's size is known: one allocation, and a file over the limit is refused
  // before anything is read.
  if (::fstat(fileno(f), &st) == 0 && S_ISREG(st.st_mode)) {
    if (static_cast<std::size_t>(st.st_size) > max_bytes) {
      close();
      *error = what + " is larger than " + limit_name + " (" + Bytes(max_bytes) + "): it has " +
               Bytes(static_cast<std::size_t>(st.st_size)) + ". " + advice;
      return false;
    }
    out->reserve(static_cast<std::size_t>(st.st_size));
  }
  char buffer[1 << 16];
  for (;;) {
    const std::size_t n = std::fread(buffer, 1, sizeof buffer, f);
    if (n > 0) {
      if (out->size() + n > max_bytes) {
        close();
        out->clear();
        out->shrink_to_fit();
        *error = what + " is larger than " + limit_name + " (" + Bytes(max_bytes) +
                 "): more than that was there to read (an endless stream?). " + advice;
        return false;
      }
      out->append(buffer, n);
    }
    if (n < sizeof buffer) {
      const bool failed = std::ferror(f) != 0;
      const int saved = errno;
      close();
      if (failed) {
        *error = "cannot read " + what + ": " + std::generic_category().message(saved);
        return false;
      }
      // A UTF-8 byte order mark (which some editors write first) is no part of the JSON: it
      // is skipped, by every format (JSON's RFC 8259 lets a reader ignore it). It becomes
      // three spaces, so that the byte offsets an error names stay those of the file.
      if (out->compare(0, 3, "\xEF\xBB\xBF") == 0) out->replace(0, 3, "   ");
      return true;
    }
  }
}

int UsageError(const Args& args, const std::string& message) {
  FinishActiveProgress();
  std::cerr << "recap " << args.command << ": " << recap::internal::Printable(message, true) << "\n"
            << "Run `recap " << args.command << " --help` for the options.\n";
  if (args.json()) {
    PrintJson(Json{{"error", {{"kind", "usage"}, {"message", message}}}});
  }
  return kExitUsage;
}

namespace {

// The remedies the stores name (recap::Remedy; docs/errors.md) in the command's words: the
// command sets the stores' options itself, or takes them from --db and RECAP_BUSY_TIMEOUT_MS.
std::optional<std::string> StoreRemedyInCommandWords(const recap::Remedy& r) {
  const std::string own_schema =
      "give --db another database (the command keeps its tables in schema \"recap\")";
  if (r.id == "sqlite.busy_timeout_ms") {
    const long long ms = std::atoll(r.value.c_str());
    return "the command waits (" + r.value +
           " ms); run the command again when the other writer is done, or wait longer with "
           "RECAP_BUSY_TIMEOUT_MS=" +
           std::to_string(std::max<long long>(2 * ms, 60000));
  }
  if (r.id == "store.read_only") return std::string("this command only reads");
  if (r.id == "PostgresStoreOptions.statement_timeout_ms") return std::string("the server allows");
  if (r.id == "postgres.raise_statement_timeout") return std::string();
  if (r.id == "postgres.credentials" || r.id == "postgres.dbname") {
    return std::string("in the --db URL");
  }
  if (r.id == "postgres.lower_pool_size") return std::string();
  if (r.id == "postgres.other_schema") return own_schema;
  if (r.id == "postgres.store_first") {
    return std::string(
        "Import a session first (`recap import … --db URL`), or check the database the URL "
        "names");
  }
  if (r.id == "postgres.migrate") {
    return std::string("Run `recap import` or `recap compact` on it once to migrate it");
  }
  return std::nullopt;
}

// A library Status in the command's words (its stores' remedies).
std::string InCommandWords(const recap::Status& status) {
  return status.Rendered(StoreRemedyInCommandWords);
}

}  // namespace

int Failure(const Args& args, const std::string& text) {
  FinishActiveProgress();
  const std::string& message = text;
  std::cerr << "recap " << args.command << ": " << recap::internal::Printable(message, true)
            << "\n";
  if (args.json()) {
    PrintJson(Json{{"error", {{"kind", "failed"}, {"message", message}}}});
  }
  return kExitFailed;
}

int Failure(const Args& args, const recap::Status& status) {
  FinishActiveProgress();
  const std::string message = InCommandWords(status);
  std::cerr << "recap " << args.command << ": " << recap::internal::Printable(message, true)
            << "\n";
  if (args.json()) {
    PrintJson(Json{{"error",
                    {{"kind", "failed"},
                     {"code", recap::StatusCodeName(status.code())},
                     {"message", message}}}});
  }
  return kExitFailed;
}

recap::Status NothingWritten(const recap::Status& status) {
  std::string lower = status.message();
  for (char& c : lower) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  if (lower.find("nothing was written") != std::string::npos) return status;
  std::string message = InCommandWords(status);
  while (!message.empty() && (message.back() == '.' || message.back() == ' ')) message.pop_back();
  return recap::Status(status.code(), message + ". Nothing was written");
}

void PrintJson(const Json& value) {
  std::cout << value.dump(-1, ' ', false, Json::error_handler_t::replace) << "\n";
  std::cout.flush();
}

std::string Num(std::size_t n) {
  const std::string digits = std::to_string(n);
  std::string out;
  for (std::size_t i = 0; i < digits.size(); ++i) {
    if (i != 0 && (digits.size() - i) % 3 == 0) out += ',';
    out += digits[i];
  }
  return out;
}

std::string Counted(std::size_t n, const std::string& noun) {
  return Num(n) + " " + noun + (n == 1 ? "" : "s");
}

std::string Preview(const recap::Message& m, std::size_t width) {
  std::string text = recap::JoinedText(m);
  if (text.empty()) {
    for (const recap::Part& part : m.parts) {
      if (const auto* call = std::get_if<recap::ToolCall>(&part)) {
        text += (text.empty() ? "" : " ") + ("[call " + call->name + "]");
      } else if (const auto* result = std::get_if<recap::ToolResult>(&part)) {
        std::string inner;
        for (const recap::ResultItem& item : result->content) {
          if (const auto* t = std::get_if<recap::Text>(&item)) inner += t->text + " ";
        }
        text += (text.empty() ? "" : " ") + ("[result] " + inner);
      } else if (const auto* opaque = std::get_if<recap::Opaque>(&part)) {
        text += (text.empty() ? "" : " ") + ("[" + opaque->kind + "]");
      }
    }
  }
  for (char& c : text) {
    if (c == '\n' || c == '\r' || c == '\t') c = ' ';
  }
  text = Shown(text);  // other controls escaped
  const std::size_t bytes = recap::PrefixBytesForCodePoints(text, width);
  if (bytes < text.size())
    text = text.substr(0, recap::PrefixBytesForCodePoints(text, width - 3)) + "...";
  return text;
}

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
  return recap::OpenSqliteSessionStore(path, options);
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

bool OpenSessionRun(const Args& args, const std::string& session, SessionRun* out, int* exit_code) {
  bool usage = false;
  recap::Result<recap::Config> config = BuildConfig(args, &usage);
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
  recap::Result<std::optional<recap::Message>> instructions = LoadInstructions(**store, session);
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
                                                              const std::string& session) {
  recap::Result<recap::SessionState> state = store.Load(kInstructionsPrefix + session);
  RECAP_RETURN_IF_ERROR(state);
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

std::vector<OptionSpec> ConfigOptions() {
  return {{"config", true}, {"max-context-chars", true}, {"keep-turns", true}};
}

recap::Result<recap::Config> BuildConfig(const Args& args, bool* usage) {
  *usage = false;
  recap::Config config;
  // Without --config, $RECAP_CONFIG names the file: a shell host sets it once instead of
  // repeating its settings on every call.
  const char* from_env = std::getenv("RECAP_CONFIG");
  const bool env = !args.Has("config") && from_env != nullptr && *from_env != '\0';
  if (args.Has("config") || env) {
    const std::string path = env ? std::string(from_env) : args.Get("config");
    const std::string named_by = env ? "$RECAP_CONFIG" : "--config";
    std::string text;
    std::string error;
    const std::string what =
        path == "-" ? "the configuration on standard input (" + named_by + " -)"
                    : "the configuration file '" + Shown(path) + "' (" + named_by + ")";
    if (!ReadBounded(path, kMaxConfigBytes, what, "the limit for a configuration file",
                     "Check the path given with " + named_by, &text, &error)) {
      if (error.find("is a folder") != std::string::npos) {
        error += env ? "; set RECAP_CONFIG to the configuration file"
                     : "; name the configuration file with --config FILE";
      }
      return recap::Status::NotFound(error);
    }
    recap::Result<recap::Config> parsed = recap::Config::FromJson(text);
    if (!parsed.ok()) {
      return parsed.status().WithContext(
          (path == "-" ? "the configuration on standard input"
                       : "the configuration file '" + Shown(path) + "'") +
          (env ? " named by $RECAP_CONFIG is not valid (fix it, or unset RECAP_CONFIG for the "
                 "defaults)"
               : " is not valid (fix it, or leave --config out for the defaults)"));
    }
    config = *parsed;
  }
  std::string error;
  std::size_t n = 0;
  if (args.Has("max-context-chars")) {
    if (!ParseCount(args, "max-context-chars", &n, &error)) {
      *usage = true;
      return recap::Status::InvalidArgument(error);
    }
    config.limits.max_context_chars = n;
  }
  if (args.Has("keep-turns")) {
    if (!ParseCount(args, "keep-turns", &n, &error) || n > 20) {
      *usage = true;
      return recap::Status::InvalidArgument(error.empty() ? "--keep-turns must be between 0 and 20"
                                                          : error);
    }
    config.compaction.keep_turns = static_cast<int>(n);
  }
  recap::Status valid = config.Validate();
  if (!valid.ok()) {
    *usage = args.Has("max-context-chars") || args.Has("keep-turns");
    return valid.WithContext("the configuration is out of range");
  }
  return config;
}

#if RECAP_CLI_HAVE_HTTP
const char* const kProviderHelp =
    "  --provider P              who writes the checkpoint: offline (default; no network),\n"
    "                            openai (OpenAI-compatible chat completions),\n"
    "                            openai-responses (the OpenAI Responses API), anthropic,\n"
    "                            or the providers' own compaction: openai-compact\n"
    "                            (POST /responses/compact) or anthropic-compact\n"
    "                            (Anthropic's on-demand compaction)\n"
    "  --base-url URL            the API's base URL (not for offline), e.g.\n"
    "                            https://api.openai.com/v1 or http://127.0.0.1:8080/v1\n"
    "  --model M                 the model to ask (not for offline)\n"
    "  --api-key-env VAR         the environment variable holding the API key (optional\n"
    "                            for servers that need none)\n"
    "  --timeout-ms N            time allowed for one request to the model, in ms\n"
    "                            (default 120000)\n"
    "  --connect-timeout-ms N    time allowed to connect, in ms (default 10000)\n"
    "  --ca-path PATH            a CA bundle (PEM) or a directory of hashed certificates\n"
    "                            to verify the server with; default: $CURL_CA_BUNDLE,\n"
    "                            then $SSL_CERT_FILE, then the system's\n"
    "  --allow-insecure-http     send the API key over plain http:// to a host that is\n"
    "                            not loopback (refused otherwise)\n";
std::vector<OptionSpec> ProviderOptions() {
  return {{"provider", true},   {"base-url", true},
          {"model", true},      {"api-key-env", true},
          {"timeout-ms", true}, {"connect-timeout-ms", true},
          {"ca-path", true},    {"allow-insecure-http", false}};
}
#else
const char* const kProviderHelp =
    "  --provider P              who writes the checkpoint: offline (default; no network).\n"
    "                            This build has no HTTP component, so openai,\n"
    "                            openai-responses and anthropic are not available (build\n"
    "                            recap with RECAP_BUILD_HTTP=ON)\n";
std::vector<OptionSpec> ProviderOptions() { return {{"provider", true}}; }
#endif

#if RECAP_CLI_HAVE_HTTP
namespace {

// The command's time-outs (HttpProviderOptions' default of 600 s is for hosts whose spans
// are long; at a terminal, two minutes without an answer is a server that is not coming).
constexpr std::uint32_t kCommandTimeoutMs = 120000;
constexpr std::uint32_t kCommandConnectTimeoutMs = 10000;
constexpr std::size_t kMaxTimeoutMs = 3600000;

// The options of the HTTP provider that its messages name (recap::Remedy; docs/errors.md), in
// the command's words: the flags that set them (`ca_source`: the flag or variable --ca-path's
// value came from), or plain words for what the command keeps as the library has it.
std::optional<std::string> HttpRemedyInCommandWords(const recap::Remedy& r,
                                                    const std::string& ca_source) {
  static const char* const kFlags[][2] = {
      {"HttpProviderOptions.connect_timeout_ms", "--connect-timeout-ms"},
      {"HttpProviderOptions.timeout_ms", "--timeout-ms"},
      {"HttpProviderOptions.allow_insecure_http", "--allow-insecure-http"},
      {"http.allow_insecure_http", "--allow-insecure-http"},
      {"HttpProviderOptions.base_url", "--base-url"},
      {"HttpProviderOptions.api_key_env", "--api-key-env"},
      {"HttpProviderOptions.model", "--model"},
      {"HttpProviderOptions.structured_output", "structured output"},
      {"http.api_key", "(the variable named by --api-key-env)"},
  };
  for (const auto& f : kFlags) {
    if (r.id == f[0]) return std::string(f[1]);
  }
  if (r.id == "HttpProviderOptions.ca_path") return ca_source;
  // The retry settings have no flag: the command keeps the library's (2 retries, at most 30 s
  // apart), so its messages say what happened in plain words.
  if (r.id == "HttpProviderOptions.max_retries")
    return std::string(", the most the command retries");
  if (r.id == "HttpProviderOptions.max_retry_delay_ms") {
    return "the command waits between tries (" + r.value + " ms)";
  }
  // Any other option the command sets itself: its bare name.
  const std::string prefix = "HttpProviderOptions.";
  if (r.id.rfind(prefix, 0) == 0) return r.id.substr(prefix.size());
  return std::nullopt;
}

std::string InCommandWords(const recap::Status& status, const std::string& ca_source) {
  return status.Rendered(
      [&](const recap::Remedy& r) { return HttpRemedyInCommandWords(r, ca_source); });
}

// The HTTP provider with every failure it reports in the command's words, which also tells
// the progress line what the command is waiting for.
class CommandProvider final : public recap::Provider {
 public:
  CommandProvider(std::shared_ptr<recap::Provider> inner, std::string ca_source,
                  std::string waiting)
      : inner_(std::move(inner)), ca_source_(std::move(ca_source)), waiting_(std::move(waiting)) {}

  recap::Result<recap::Completion> Complete(const recap::CompletionRequest& request,
                                            const recap::CancellationToken& cancel) override {
    SetActiveProgressStep(waiting_);
    recap::Result<recap::Completion> r = inner_->Complete(request, cancel);
    if (r.ok()) return r;
    return recap::Status(r.status().code(), InCommandWords(r.status(), ca_source_));
  }
  std::optional<std::size_t> ContextWindow() override { return inner_->ContextWindow(); }
  std::string Name() const override { return inner_->Name(); }
  bool WritesNativeCheckpoints() const override { return inner_->WritesNativeCheckpoints(); }
  recap::Result<recap::NativeCompaction> CompactNative(
      const recap::NativeCompactionRequest& request,
      const recap::CancellationToken& cancel) override {
    SetActiveProgressStep(waiting_);
    recap::Result<recap::NativeCompaction> r = inner_->CompactNative(request, cancel);
    if (r.ok()) return r;
    return recap::Status(r.status().code(), InCommandWords(r.status(), ca_source_));
  }

 private:
  std::shared_ptr<recap::Provider> inner_;
  std::string ca_source_;
  std::string waiting_;
};

bool ParseMs(const Args& args, const std::string& name, std::uint32_t* out, std::string* error) {
  std::size_t n = 0;
  if (!ParseCount(args, name, &n, error) || n == 0 || n > kMaxTimeoutMs) {
    *error = "--" + name + " wants a number of milliseconds from 1 to " +
             std::to_string(kMaxTimeoutMs) + " (one hour), not '" + args.Get(name) + "'";
    return false;
  }
  *out = static_cast<std::uint32_t>(n);
  return true;
}

}  // namespace
#endif

recap::Result<std::shared_ptr<recap::Provider>> BuildProvider(const Args& args, bool* usage) {
  *usage = false;
  const std::string name = args.Get("provider", "offline");
  if (name == "offline") {
    for (const char* flag : {"base-url", "model", "api-key-env", "timeout-ms", "connect-timeout-ms",
                             "ca-path", "allow-insecure-http"}) {
      if (args.Has(flag)) {
        *usage = true;
        return recap::Status::InvalidArgument(
            std::string("--") + flag +
            " is for --provider openai, openai-responses, anthropic, openai-compact or "
            "anthropic-compact (as are --base-url, "
            "--model, --api-key-env, --timeout-ms, --connect-timeout-ms, --ca-path and "
            "--allow-insecure-http); the offline summarizer needs none of them");
      }
    }
    return std::shared_ptr<recap::Provider>();
  }
#if RECAP_CLI_HAVE_HTTP
  if (name == "openai" || name == "openai-responses" || name == "anthropic" ||
      name == "openai-compact" || name == "anthropic-compact") {
    recap::HttpProviderOptions options;
    options.protocol = name == "openai"             ? recap::HttpProtocol::kOpenAiChat
                       : name == "openai-responses" ? recap::HttpProtocol::kOpenAiResponses
                       : name == "openai-compact"   ? recap::HttpProtocol::kOpenAiCompact
                       : name == "anthropic"        ? recap::HttpProtocol::kAnthropic
                                                    : recap::HttpProtocol::kAnthropicCompact;
    options.base_url = args.Get("base-url");
    options.model = args.Get("model");
    options.api_key_env = args.Get("api-key-env");
    if (options.base_url.empty() || options.model.empty()) {
      *usage = true;
      std::string missing;
      if (options.base_url.empty()) {
        missing = std::string("--base-url URL (where the API lives, e.g. ") +
                  (name.rfind("anthropic", 0) == 0 ? "https://api.anthropic.com"
                                                   : "https://api.openai.com/v1") +
                  ")";
      }
      if (options.model.empty()) {
        missing += (missing.empty() ? "" : " and ") + std::string("--model M (the model to ask)");
      }
      return recap::Status::InvalidArgument("--provider " + name + " needs " + missing);
    }
    std::string error;
    options.timeout_ms = kCommandTimeoutMs;
    options.connect_timeout_ms = kCommandConnectTimeoutMs;
    if ((args.Has("timeout-ms") && !ParseMs(args, "timeout-ms", &options.timeout_ms, &error)) ||
        (args.Has("connect-timeout-ms") &&
         !ParseMs(args, "connect-timeout-ms", &options.connect_timeout_ms, &error))) {
      *usage = true;
      return recap::Status::InvalidArgument(error);
    }
    options.allow_insecure_http = args.Has("allow-insecure-http");
    // The CA: --ca-path, else the variables curl's own tool and OpenSSL read.
    std::string ca_source = "--ca-path";
    if (args.Has("ca-path")) {
      options.ca_path = args.Get("ca-path");
    } else {
      for (const char* variable : {"CURL_CA_BUNDLE", "SSL_CERT_FILE"}) {
        const char* value = std::getenv(variable);
        if (value != nullptr && *value != '\0') {
          options.ca_path = value;
          ca_source = std::string("$") + variable + " (or --ca-path)";
          break;
        }
      }
    }
    const std::string shown_url = options.base_url;
    const std::uint32_t timeout_s = (options.timeout_ms + 999) / 1000;
    recap::Result<std::shared_ptr<recap::Provider>> provider =
        recap::NewHttpProvider(std::move(options));
    if (!provider.ok()) {
      // A flag's value that the provider refuses (a malformed --base-url, a missing
      // --ca-path, cleartext without --allow-insecure-http) is a usage error; an unset
      // --api-key-env variable is not.
      *usage = provider.status().code() == recap::StatusCode::kInvalidArgument;
      return recap::Status(
          provider.status().code(),
          "--provider " + name + ": " + InCommandWords(provider.status(), ca_source));
    }
    std::string waiting = "waiting for " + (*provider)->Name() + " (up to " +
                          std::to_string(timeout_s) + " s a request; --timeout-ms)";
    return std::shared_ptr<recap::Provider>(
        std::make_shared<CommandProvider>(*provider, ca_source, std::move(waiting)));
  }
  *usage = true;
  return recap::Status::InvalidArgument("unknown provider '" + name +
                                        "'; use offline, openai, openai-responses, anthropic, "
                                        "openai-compact or anthropic-compact");
#else
  *usage = true;
  return recap::Status::InvalidArgument(
      "unknown provider '" + name +
      "'; this build only has the offline summarizer (--provider offline). openai, "
      "openai-responses, anthropic, openai-compact and anthropic-compact need recap built with "
      "its HTTP component "
      "(RECAP_BUILD_HTTP=ON, libcurl)");
#endif
}

}  // namespace recap_cli
