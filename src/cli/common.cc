// recap CLI — option parsing and reporting: the options' values, the input's name, the usage
// and failure messages (a library Status in the command's words), the JSON and number output.
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

}  // namespace

std::string InCommandWords(const recap::Status& status) {
  return status.Rendered(StoreRemedyInCommandWords);
}

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

}  // namespace recap_cli
