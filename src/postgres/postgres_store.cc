// The PostgreSQL session store and memory store (recap/postgres/postgres_store.h).
//
// Every call takes a connection from the store's pool. Writes are one transaction each that
// locks the session's row (SELECT … FOR UPDATE), checks, writes and moves the version, so two
// processes writing one session serialize on that lock and the loser of a race sees the new
// version (R8.2). Reads are single statements, each a consistent snapshot by itself.
//
// Statements are prepared once per connection and sent with text parameters (message bodies
// as binary); results come back in binary form, so a message body is read as the bytes the
// body codec wrote, without escaping.
#include "recap/postgres/postgres_store.h"

#include <algorithm>
#include <cctype>
#include <condition_variable>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <exception>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

#include <libpq-fe.h>

#include "recap/transcript.h"
#include "recap/version.h"

#include "recap_internal/body_codec.h"
#include "recap_internal/store_rules.h"
#include "schema.h"

namespace recap {
inline namespace v0 {
namespace {

using internal::DecodeBody;
using internal::EncodeBody;
using postgres_internal::kMigrations;
using postgres_internal::kSchemaVersion;
using postgres_internal::kTables;

std::string Quoted(const std::string& s) { return internal::QuotedName(s); }

std::string Lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

bool Contains(const std::string& haystack, const char* needle) {
  return haystack.find(needle) != std::string::npos;
}

// libpq's messages end with a newline and sometimes hold several lines.
std::string OneLine(std::string s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.pop_back();
  for (char& c : s) {
    if (c == '\n' || c == '\r' || c == '\t') c = ' ';
  }
  return s;
}

// Thrown inside a call to abandon it with a Status of recap's own.
struct Abort {
  Status status;
};

// A failed statement, as the server (or libpq) reported it.
struct PgFailure {
  std::string sqlstate;    // e.g. "40001"; empty when the connection failed
  std::string message;     // the primary message, one line
  std::string constraint;  // for integrity violations
  bool connection_lost = false;
};

// What was being done, for messages: "recap postgres store (host …, database …): loading
// session "s" failed: …".
class Describer {
 public:
  explicit Describer(std::string server) : server_(std::move(server)) {}
  std::string Where(const std::string& doing) const {
    return "recap postgres store (" + server_ + "): " + doing + " failed: ";
  }

 private:
  std::string server_;
};

// Maps a failed statement to a Status that says what is wrong and what to do.
Status FromFailure(const Describer& d, const std::string& doing, const PgFailure& f) {
  const std::string where = d.Where(doing);
  const std::string said =
      f.message.empty() ? std::string() : " (the server said: " + f.message + ")";
  if (f.connection_lost || f.sqlstate.rfind("08", 0) == 0 || f.sqlstate == "57P01" ||
      f.sqlstate == "57P02" || f.sqlstate == "57P03") {
    return Status::Unavailable(where + "the connection to the server was lost" + said +
                               ". Nothing was changed; retry: the next call connects again");
  }
  if (f.sqlstate == "57014") {
    return Status::DeadlineExceeded(
        where +
        "the statement ran longer than statement_timeout_ms and the server cancelled "
        "it" +
        said +
        ". Nothing was changed; retry, or raise "
        "PostgresStoreOptions.statement_timeout_ms");
  }
  if (f.sqlstate == "40001" || f.sqlstate == "40P01" || f.sqlstate == "55P03") {
    return Status::Unavailable(where +
                               "the server aborted the transaction to resolve a clash "
                               "with another one" +
                               said + ". Nothing was changed; retry");
  }
  if (f.sqlstate == "53100") {
    return Status::IOError(where + "the server's disk is full" + said +
                           ". Nothing was written; free space on the server, then retry");
  }
  if (f.sqlstate.rfind("53", 0) == 0) {
    return Status::ResourceExhausted(where + "the server ran out of a resource" + said +
                                     ". Nothing was changed; retry later");
  }
  if (f.sqlstate == "42501") {
    return Status::FailedPrecondition(where + "the database user lacks a privilege" + said +
                                      ". Grant it (recap needs to create and use its schema's "
                                      "tables), or connect as another user");
  }
  if (f.sqlstate == "25006") {
    return Status::FailedPrecondition(where + "the server accepts only reads" + said +
                                      "; connect to the primary, not a standby");
  }
  if (f.sqlstate == "42P01" || f.sqlstate == "3F000") {
    return Status::FailedPrecondition(where + "recap's tables are missing" + said +
                                      ". Was the schema dropped while the store was open? Open "
                                      "the store again to create them");
  }
  if (f.sqlstate == "22021" || f.sqlstate == "22P05") {
    return Status::InvalidArgument(where + "a value is not text PostgreSQL can store" + said +
                                   "; session ids must be valid UTF-8");
  }
  if (f.sqlstate.rfind("XX", 0) == 0) {
    return Status::Corruption(where + "the server reports damaged data" + said +
                              ". recap has changed nothing; see the server's log");
  }
  return Status::Internal(where + (f.message.empty() ? "an unexpected error" : f.message) +
                          (f.sqlstate.empty() ? "" : " (SQLSTATE " + f.sqlstate + ")"));
}

using ResultPtr = std::unique_ptr<PGresult, decltype(&PQclear)>;

// Statement parameters: text, except for message bodies (binary). Text values are copied;
// a body passed to Bytes() must stay alive until the statement ran.
class Params {
 public:
  Params& Int(std::int64_t v) {
    owned_.push_back(std::to_string(v));
    return Add(owned_.back().c_str(), 0, 0);
  }
  Params& Text(const std::string& s) {
    if (s.find('\0') != std::string::npos) {
      throw Abort{Status::InvalidArgument(
          "a value holds a NUL character, which PostgreSQL text cannot store (\"" +
          s.substr(0, std::min<std::size_t>(s.find('\0'), 60)) + "…\")")};
    }
    owned_.push_back(s);
    return Add(owned_.back().c_str(), 0, 0);
  }
  Params& Bool(bool b) { return Add(b ? "t" : "f", 0, 0); }
  Params& Bytes(std::string_view b) {
    return Add(b.empty() ? "" : b.data(), static_cast<int>(b.size()), 1);
  }
  Params& Null() { return Add(nullptr, 0, 0); }

  int size() const { return static_cast<int>(values_.size()); }
  const char* const* values() const { return values_.data(); }
  const int* lengths() const { return lengths_.data(); }
  const int* formats() const { return formats_.data(); }

 private:
  Params& Add(const char* v, int length, int format) {
    values_.push_back(v);
    lengths_.push_back(length);
    formats_.push_back(format);
    return *this;
  }
  std::deque<std::string> owned_;  // stable addresses
  std::vector<const char*> values_;
  std::vector<int> lengths_;
  std::vector<int> formats_;
};

// Binary result values.
std::int64_t GetInt(const PGresult* r, int row, int col) {
  const auto* p = reinterpret_cast<const unsigned char*>(PQgetvalue(r, row, col));
  const int len = PQgetlength(r, row, col);
  std::uint64_t v = 0;
  for (int i = 0; i < len; ++i) v = (v << 8) | p[i];
  switch (len) {
    case 8: return static_cast<std::int64_t>(v);
    case 4: return static_cast<std::int32_t>(static_cast<std::uint32_t>(v));
    case 2: return static_cast<std::int16_t>(static_cast<std::uint16_t>(v));
    case 1: return static_cast<std::int64_t>(v);  // bool
    default:
      throw Abort{Status::Internal("recap postgres store: an integer column came back with " +
                                   std::to_string(len) + " bytes")};
  }
}
std::string_view GetView(const PGresult* r, int row, int col) {
  return std::string_view(PQgetvalue(r, row, col),
                          static_cast<std::size_t>(PQgetlength(r, row, col)));
}
bool IsNull(const PGresult* r, int row, int col) { return PQgetisnull(r, row, col) != 0; }

// The statements, by index; "{S}" is replaced by the quoted schema.
enum Q : int {
  kLoad,
  kFindForUpdate,
  kCreateSession,
  kInsertMessage,
  kSetVersion,
  kMarkCompaction,
  kMarkReduction,
  kMarkRecovery,
  kLogCommit,
  kHead,
  kIsActiveId,
  kRetirePrefix,
  kFindActive,
  kRetireSeq,
  kActiveIds,
  kMovePositions,
  kHistory,
  kListSessions,
  kAddMemory,
  kListMemories,
  kVersion,
  kRestoreKept,
  kSaveLearned,
  kClearLearned,
  kStatementCount
};

constexpr const char* kStatementText[kStatementCount] = {
    // kLoad: $1 name, $2 since (-1: everything). One statement: one snapshot. Since a rewrite
    // after `since`, the whole active transcript comes back (appended_only false). The rows
    // come in any order, with their positions: the store sorts them itself, which costs
    // microseconds, where a server-side sort of a long session spills to disk under the
    // default work_mem.
    // The learned state (R12.5) rides on every row; it is NULL for most sessions, and small.
    "SELECT s.version, s.rewrite_version, m.seq, m.chars, m.body, m.position, l.state FROM "
    "{S}.sessions s LEFT JOIN {S}.learned l ON l.session_id = s.session_id "
    "LEFT JOIN {S}.messages m ON m.session_id = s.session_id AND m.position IS NOT NULL AND "
    "m.stored_version > (CASE WHEN $2::bigint >= s.rewrite_version THEN $2::bigint ELSE -1 END) "
    "WHERE s.name = $1",
    // kFindForUpdate: the session's row, locked. A writer that waited for the lock reads the
    // row as the previous writer left it (only the row: a subquery here would see the
    // statement's older snapshot, hence next_position lives in the row).
    "SELECT session_id, version, rewrite_version, compactions, reductions, recoveries, "
    "next_position FROM {S}.sessions WHERE name = $1 FOR UPDATE",
    "INSERT INTO {S}.sessions (name) VALUES ($1) ON CONFLICT (name) DO NOTHING",
    "INSERT INTO {S}.messages (session_id, message_id, position, stored_version, role, summary, "
    "chars, body) VALUES ($1, $2, $3, $4, $5, $6, $7, $8)",
    "UPDATE {S}.sessions SET version = $2, next_position = $3 WHERE session_id = $1",
    "UPDATE {S}.sessions SET version = $2, rewrite_version = $2, compactions = $3 WHERE "
    "session_id = $1",
    "UPDATE {S}.sessions SET version = $2, rewrite_version = $2, reductions = $3 WHERE "
    "session_id = $1",
    "UPDATE {S}.sessions SET version = $2, rewrite_version = $2, recoveries = $3, "
    "next_position = $4 WHERE session_id = $1",
    "INSERT INTO {S}.commits (session_id, version, kind, number, reason, retired, added) VALUES "
    "($1, $2, $3, $4, $5, $6, $7)",
    "SELECT message_id, position, seq FROM {S}.messages WHERE session_id = $1 AND position IS "
    "NOT NULL ORDER BY position LIMIT $2",
    "SELECT true FROM {S}.messages WHERE session_id = $1 AND message_id = $2 AND position IS NOT "
    "NULL",
    "UPDATE {S}.messages SET position = NULL, replaced_by = $2 WHERE session_id = $1 AND "
    "position IS NOT NULL AND position <= $3",
    "SELECT seq, position FROM {S}.messages WHERE session_id = $1 AND message_id = $2 AND "
    "position IS NOT NULL",
    "UPDATE {S}.messages SET position = NULL, replaced_by = $2 WHERE seq = $1",
    "SELECT seq, message_id FROM {S}.messages WHERE session_id = $1 AND position IS NOT NULL "
    "ORDER BY position",
    // kMovePositions: $1 seqs, $2 positions, as array literals.
    "UPDATE {S}.messages m SET position = v.position FROM unnest($1::bigint[], $2::bigint[]) AS "
    "v(seq, position) WHERE m.seq = v.seq",
    "SELECT m.seq, m.replaced_by, m.body FROM {S}.messages m JOIN {S}.sessions s ON "
    "s.session_id = m.session_id WHERE s.name = $1 ORDER BY m.seq",
    // Byte order, whatever the database's collation: the same order as every other store.
    "SELECT name FROM {S}.sessions ORDER BY name COLLATE \"C\"",
    "INSERT INTO {S}.memories (scope, text) VALUES ($1, $2) ON CONFLICT (scope, md5(text)) DO "
    "NOTHING",
    "SELECT text FROM {S}.memories WHERE scope = $1 ORDER BY memory_id",
    "SELECT version FROM {S}.sessions WHERE name = $1",
    // kRestoreKept: $1 seq, $2 position: a message a compaction keeps (R12.1) is active again.
    "UPDATE {S}.messages SET position = $2, replaced_by = NULL WHERE seq = $1",
    // kSaveLearned: $1 name, $2 state; nothing for a session never written.
    "INSERT INTO {S}.learned (session_id, state) SELECT session_id, $2 FROM {S}.sessions WHERE "
    "name = $1 ON CONFLICT (session_id) DO UPDATE SET state = excluded.state, updated_at = now()",
    // kClearLearned: $1 name.
    "DELETE FROM {S}.learned l USING {S}.sessions s WHERE l.session_id = s.session_id AND "
    "s.name = $1",
};

std::string WithSchema(std::string sql, const std::string& quoted_schema) {
  for (std::size_t at = sql.find("{S}"); at != std::string::npos; at = sql.find("{S}", at)) {
    sql.replace(at, 3, quoted_schema);
    at += quoted_schema.size();
  }
  return sql;
}

// One libpq connection and the statements prepared on it.
class Connection {
 public:
  explicit Connection(PGconn* conn) : conn_(conn) {}
  ~Connection() { PQfinish(conn_); }
  Connection(const Connection&) = delete;
  Connection& operator=(const Connection&) = delete;

  bool lost() const { return PQstatus(conn_) != CONNECTION_OK; }

  // A statement without parameters (BEGIN, COMMIT, DDL). Throws PgFailure.
  void Simple(const std::string& sql) {
    ResultPtr r(PQexec(conn_, sql.c_str()), &PQclear);
    Check(r.get());
  }

  // A statement of the store's, prepared on first use. Throws PgFailure.
  ResultPtr Run(int q, const std::vector<std::string>& texts, const Params& p) {
    const std::string name = Prepare(q, texts);
    ResultPtr r(PQexecPrepared(conn_, name.c_str(), p.size(), p.values(), p.lengths(), p.formats(),
                               /*resultFormat=*/1),
                &PQclear);
    Check(r.get());
    return r;
  }

  // Statement q once per parameter set, in one round trip: libpq's pipeline mode sends them
  // all, then a sync, then reads the answers (a statement's result is a few dozen bytes, so
  // the answers to a thousand fit the socket's buffer while the statements are still being
  // sent). Throws PgFailure for the first statement that failed, its index in *failed_at;
  // the ones after it are skipped by the server.
  void RunPipelined(int q, const std::vector<std::string>& texts, const std::vector<Params>& sets,
                    std::size_t* failed_at) {
    const std::string name = Prepare(q, texts);
    if (PQenterPipelineMode(conn_) != 1) {  // not idle: one statement at a time instead
      for (std::size_t k = 0; k < sets.size(); ++k) {
        *failed_at = k;
        Run(q, texts, sets[k]);
      }
      return;
    }
    for (const Params& p : sets) {
      if (PQsendQueryPrepared(conn_, name.c_str(), p.size(), p.values(), p.lengths(), p.formats(),
                              /*resultFormat=*/1) != 1) {
        ThrowLost();
      }
    }
    if (PQpipelineSync(conn_) != 1) ThrowLost();
    std::optional<PgFailure> failure;
    for (std::size_t k = 0; k < sets.size(); ++k) {
      // Statement k's result, then the null that ends it.
      while (PGresult* r = PQgetResult(conn_)) {
        const ResultPtr owned(r, &PQclear);
        const ExecStatusType st = PQresultStatus(r);
        if (st == PGRES_COMMAND_OK || st == PGRES_TUPLES_OK || st == PGRES_PIPELINE_ABORTED) {
          continue;
        }
        if (!failure) {
          failure = Describe(r);
          *failed_at = k;
        }
      }
      if (lost()) ThrowLost();
    }
    const ResultPtr sync(PQgetResult(conn_), &PQclear);
    if (!sync || PQresultStatus(sync.get()) != PGRES_PIPELINE_SYNC ||
        PQexitPipelineMode(conn_) != 1) {
      ThrowLost();
    }
    if (failure) throw *failure;
  }

  PGconn* raw() { return conn_; }

 private:
  // The statement's name on this connection, preparing it on first use.
  std::string Prepare(int q, const std::vector<std::string>& texts) {
    std::string name = "recap_" + std::to_string(q);
    if (prepared_.count(q) == 0) {
      ResultPtr made(
          PQprepare(conn_, name.c_str(), texts[static_cast<std::size_t>(q)].c_str(), 0, nullptr),
          &PQclear);
      Check(made.get());
      prepared_.insert(q);
    }
    return name;
  }

  void Check(const PGresult* r) {
    const ExecStatusType st = r ? PQresultStatus(r) : PGRES_FATAL_ERROR;
    if (st == PGRES_COMMAND_OK || st == PGRES_TUPLES_OK) return;
    throw Describe(r);
  }

  PgFailure Describe(const PGresult* r) {
    PgFailure f;
    if (r) {
      if (const char* s = PQresultErrorField(r, PG_DIAG_SQLSTATE)) f.sqlstate = s;
      if (const char* m = PQresultErrorField(r, PG_DIAG_MESSAGE_PRIMARY)) f.message = OneLine(m);
      if (const char* c = PQresultErrorField(r, PG_DIAG_CONSTRAINT_NAME)) f.constraint = c;
    }
    if (f.message.empty()) f.message = OneLine(PQerrorMessage(conn_));
    // libpq's own errors carry no SQLSTATE: the connection broke (or could not be used).
    f.connection_lost = lost() || f.sqlstate.empty();
    return f;
  }

  // A pipeline that broke off: the connection is not usable any more.
  [[noreturn]] void ThrowLost() {
    PgFailure f;
    f.message = OneLine(PQerrorMessage(conn_));
    f.connection_lost = true;
    throw f;
  }

  PGconn* conn_;
  std::unordered_set<int> prepared_;
};

// How to connect: libpq's keyword/value arrays, and the server as messages show it.
struct ConnectSpec {
  std::vector<std::string> keys;
  std::vector<std::string> values;
  std::string display;        // host, port, database and user; never the password
  std::string quoted_schema;  // "recap"
  std::string schema;
  std::uint32_t statement_timeout_ms = 0;
  std::size_t pool_size = 1;
  bool read_only = false;
};

// Removes what could be a password from a libpq parse error that quotes the string.
std::string ScrubSecrets(std::string text, const std::string& connection) {
  std::vector<std::string> secrets;
  if (auto scheme = connection.find("://"); scheme != std::string::npos) {
    const auto at = connection.find('@', scheme + 3);
    if (at != std::string::npos) secrets.push_back(connection.substr(scheme + 3, at - scheme - 3));
  }
  for (const char* key : {"password=", "password ="}) {
    if (auto p = connection.find(key); p != std::string::npos) {
      auto start = p + std::strlen(key);
      while (start < connection.size() && connection[start] == ' ') ++start;
      auto end = connection.find_first_of(" &", start);
      secrets.push_back(connection.substr(start, end == std::string::npos ? end : end - start));
    }
  }
  for (const std::string& s : secrets) {
    if (s.empty()) continue;
    for (auto p = text.find(s); p != std::string::npos; p = text.find(s, p + 10)) {
      text.replace(p, s.size(), "[redacted]");
    }
  }
  return text;
}

bool ValidSchemaName(const std::string& s) {
  if (s.empty() || s.size() > 63) return false;
  if (!(std::islower(static_cast<unsigned char>(s[0])) || s[0] == '_')) return false;
  return std::all_of(s.begin(), s.end(), [](char c) {
    return std::islower(static_cast<unsigned char>(c)) ||
           std::isdigit(static_cast<unsigned char>(c)) || c == '_';
  });
}

Result<ConnectSpec> MakeSpec(const PostgresStoreOptions& o) {
  const std::string bad = "PostgresStoreOptions.";
  if (!ValidSchemaName(o.schema)) {
    return Status::InvalidArgument(
        bad + "schema is \"" + o.schema.substr(0, 80) +
        "\": use a plain identifier of lower-case letters, digits and '_' (at most 63), "
        "starting with a letter or '_', e.g. \"recap\"");
  }
  if (o.pool_size == 0 || o.pool_size > 256) {
    return Status::InvalidArgument(bad + "pool_size is " + std::to_string(o.pool_size) +
                                   "; allowed: 1 to 256");
  }
  if (o.connect_timeout_s == 0) {
    return Status::InvalidArgument(bad +
                                   "connect_timeout_s is 0; give the seconds a connection "
                                   "may take (at least 2)");
  }
  if (!o.password.empty() && !o.password_env.empty()) {
    return Status::InvalidArgument(bad + "password and password_env are both set: set one");
  }
  std::string password = o.password;
  if (!o.password_env.empty()) {
    const char* v = std::getenv(o.password_env.c_str());
    if (!v || !*v) {
      return Status::FailedPrecondition(
          bad + "password_env names the environment variable \"" + o.password_env.substr(0, 100) +
          "\", which is not set or is empty: export the password in it, or leave password_env "
          "empty");
    }
    password = v;
  }

  // Parse the connection string now, so that a malformed one is a clear error here.
  std::vector<std::pair<std::string, std::string>> settings;
  {
    char* error = nullptr;
    PQconninfoOption* parsed = PQconninfoParse(o.connection.c_str(), &error);
    if (!parsed) {
      std::string why = error ? OneLine(error) : "libpq could not parse it";
      if (error) PQfreemem(error);
      return Status::InvalidArgument(
          bad +
          "connection is not a PostgreSQL connection string: " + ScrubSecrets(why, o.connection) +
          ". Use a URL like postgresql://user@host:5432/dbname or key=value pairs like "
          "\"host=db.internal dbname=agents user=recap\"");
    }
    for (PQconninfoOption* opt = parsed; opt->keyword; ++opt) {
      if (opt->val && *opt->val) settings.emplace_back(opt->keyword, opt->val);
    }
    PQconninfoFree(parsed);
  }
  auto set = [&settings](const std::string& key, const std::string& value) {
    if (value.empty()) return;
    for (auto& kv : settings) {
      if (kv.first == key) {
        kv.second = value;
        return;
      }
    }
    settings.emplace_back(key, value);
  };
  set("host", o.host);
  if (o.port != 0) set("port", std::to_string(o.port));
  set("dbname", o.dbname);
  set("user", o.user);
  set("password", password);
  set("connect_timeout", std::to_string(std::max<std::uint32_t>(o.connect_timeout_s, 2)));
  set("application_name", o.application_name);
  for (const auto& kv : settings) {
    if (kv.second.find('\0') != std::string::npos) {
      return Status::InvalidArgument(bad + kv.first + " holds a NUL character");
    }
  }

  ConnectSpec spec;
  for (auto& [k, v] : settings) {
    spec.keys.push_back(k);
    spec.values.push_back(v);
  }
  auto get = [&settings](const char* key) -> std::string {
    for (const auto& kv : settings) {
      if (kv.first == key) return kv.second;
    }
    return {};
  };
  const char* env_host = std::getenv("PGHOST");
  std::string host = get("host");
  if (host.empty()) host = env_host && *env_host ? env_host : "the default socket";
  spec.display = "host " + host;
  if (std::string port = get("port"); !port.empty()) spec.display += ", port " + port;
  if (std::string db = get("dbname"); !db.empty()) spec.display += ", database " + db;
  if (std::string user = get("user"); !user.empty()) spec.display += ", user " + user;
  spec.display += ", schema " + o.schema;
  spec.schema = o.schema;
  spec.quoted_schema = Quoted(o.schema);
  spec.statement_timeout_ms = o.statement_timeout_ms;
  spec.pool_size = o.pool_size;
  spec.read_only = o.read_only;
  return spec;
}

// A failed connection attempt, classified from libpq's message (it gives no SQLSTATE).
Status ConnectFailure(const std::string& server, const std::string& message) {
  const std::string m = OneLine(message);
  const std::string lower = Lower(m);
  const std::string where = "recap postgres store (" + server + "): connecting failed: " + m;
  if (Contains(lower, "password authentication failed") ||
      Contains(lower, "no password supplied") || Contains(lower, "authentication failed") ||
      (Contains(lower, "role \"") && Contains(lower, "does not exist"))) {
    return Status::FailedPrecondition(where +
                                      ". Check the user and password "
                                      "(PostgresStoreOptions.user, password or password_env)");
  }
  if (Contains(lower, "database \"") && Contains(lower, "does not exist")) {
    return Status::NotFound(where +
                            ". Create the database (CREATE DATABASE, or `createdb`), "
                            "or name an existing one with dbname");
  }
  if (Contains(lower, "no pg_hba.conf entry") || Contains(lower, "ssl") ||
      Contains(lower, "permission denied")) {
    return Status::FailedPrecondition(where +
                                      ". The server does not accept this connection; "
                                      "check its pg_hba.conf and the SSL settings");
  }
  if (Contains(lower, "too many connections") || Contains(lower, "remaining connection slots")) {
    return Status::Unavailable(where +
                               ". The server has no connection to spare; retry later "
                               "or lower PostgresStoreOptions.pool_size");
  }
  // libpq often asks the question itself ("Is the server running locally …?").
  if (Contains(lower, "is the server running")) {
    return Status::Unavailable(where + " Retry when it is");
  }
  return Status::Unavailable(where +
                             ". Is the server running and reachable at that address? "
                             "Retry when it is");
}

// The pool: connections are opened on demand, up to pool_size, and kept. A connection found
// broken is closed, and so is every idle one (they most likely lost the same server).
class Pool {
 public:
  explicit Pool(ConnectSpec spec) : spec_(std::move(spec)) {
    for (int q = 0; q < kStatementCount; ++q) {
      texts_.push_back(WithSchema(kStatementText[q], spec_.quoted_schema));
    }
  }

  const ConnectSpec& spec() const { return spec_; }
  const std::vector<std::string>& texts() const { return texts_; }
  Describer describer() const { return Describer(spec_.display); }

  Result<std::unique_ptr<Connection>> Acquire() {
    {
      std::unique_lock<std::mutex> lock(mu_);
      cv_.wait(lock, [this] { return !idle_.empty() || open_ < spec_.pool_size; });
      if (!idle_.empty()) {
        std::unique_ptr<Connection> c = std::move(idle_.back());
        idle_.pop_back();
        return c;
      }
      ++open_;
    }
    Result<std::unique_ptr<Connection>> c = Connect();
    if (!c.ok()) {
      std::lock_guard<std::mutex> lock(mu_);
      --open_;
      cv_.notify_one();
    }
    return c;
  }

  // `broken`: the call found the connection unusable, whatever libpq's status says yet.
  void Release(std::unique_ptr<Connection> c, bool broken) {
    std::lock_guard<std::mutex> lock(mu_);
    if (broken || c->lost()) {
      --open_;
      c.reset();
      open_ -= idle_.size();
      idle_.clear();
      cv_.notify_all();
      return;
    }
    idle_.push_back(std::move(c));
    cv_.notify_one();
  }

 private:
  Result<std::unique_ptr<Connection>> Connect() {
    std::vector<const char*> keys;
    std::vector<const char*> values;
    for (std::size_t i = 0; i < spec_.keys.size(); ++i) {
      keys.push_back(spec_.keys[i].c_str());
      values.push_back(spec_.values[i].c_str());
    }
    keys.push_back(nullptr);
    values.push_back(nullptr);
    PGconn* raw = PQconnectdbParams(keys.data(), values.data(), /*expand_dbname=*/0);
    if (!raw) {
      return Status::ResourceExhausted("recap postgres store (" + spec_.display +
                                       "): libpq could not allocate a connection");
    }
    auto c = std::make_unique<Connection>(raw);
    if (PQstatus(raw) != CONNECTION_OK) return ConnectFailure(spec_.display, PQerrorMessage(raw));
    PQsetNoticeProcessor(
        raw, [](void*, const char*) {}, nullptr);
    try {
      c->Simple("SET statement_timeout = " + std::to_string(spec_.statement_timeout_ms));
      c->Simple("SET client_min_messages = warning");
      if (spec_.read_only) c->Simple("SET default_transaction_read_only = on");
    } catch (const PgFailure& f) {
      return FromFailure(describer(), "setting up a new connection", f);
    }
    return c;
  }

  ConnectSpec spec_;
  std::vector<std::string> texts_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<std::unique_ptr<Connection>> idle_;
  std::size_t open_ = 0;
};

// Runs one call on a pooled connection: `fn(Connection&)` inside a transaction when `write`
// (BEGIN … COMMIT, rolled back on any failure), as it is otherwise. Maps what it throws.
template <typename Fn>
Status Call(Pool& pool, const std::string& doing, bool write, Fn&& fn) {
  const Describer d = pool.describer();
  Result<std::unique_ptr<Connection>> got = pool.Acquire();
  RECAP_RETURN_IF_ERROR(got);
  std::unique_ptr<Connection> c = std::move(got).value();
  bool in_transaction = false;
  bool committing = false;
  bool broken = false;
  Status status;
  try {
    if (write) {
      c->Simple("BEGIN");
      in_transaction = true;
    }
    fn(*c);
    if (write) {
      committing = true;
      c->Simple("COMMIT");
      in_transaction = false;
    }
  } catch (const Abort& a) {
    status = a.status;
  } catch (const PgFailure& f) {
    broken = f.connection_lost || c->lost();
    if (committing && broken) {
      // The COMMIT may have reached the server before the connection broke: nobody knows.
      status =
          Status::Unavailable(d.Where(doing) +
                              "the connection was lost while the commit was under way, so it is "
                              "not known whether the commit happened" +
                              (f.message.empty() ? std::string() : " (" + f.message + ")") +
                              ". Load the session again before deciding what to write again");
      in_transaction = false;
    } else {
      status = FromFailure(d, doing, f);
    }
  } catch (const std::bad_alloc&) {
    status = Status::ResourceExhausted(d.Where(doing) + "out of memory");
  } catch (const std::exception& e) {
    status = Status::Internal(d.Where(doing) + e.what());
  }
  // A pipeline left open by a call that failed half-way cannot be trusted: drop the connection.
  if (PQpipelineStatus(c->raw()) != PQ_PIPELINE_OFF) broken = true;
  if (in_transaction && !broken && !c->lost()) {
    ResultPtr r(PQexec(c->raw(), "ROLLBACK"), &PQclear);
  }
  pool.Release(std::move(c), broken);
  return status;
}

// The schema: created or migrated under an advisory lock; refused when newer or foreign.
Status EnsureSchema(Pool& pool) {
  const ConnectSpec& spec = pool.spec();
  const std::string q = spec.quoted_schema;
  return Call(pool, "preparing schema " + q, true, [&](Connection& c) {
    Params key;
    key.Text("recap schema " + spec.schema);
    // Hosts starting together wait here for the first to finish.
    ResultPtr locked(PQexecParams(c.raw(), "SELECT pg_advisory_xact_lock(hashtextextended($1, 0))",
                                  1, nullptr, key.values(), key.lengths(), key.formats(), 0),
                     &PQclear);
    if (PQresultStatus(locked.get()) != PGRES_TUPLES_OK) {
      PgFailure f;
      if (const char* s = PQresultErrorField(locked.get(), PG_DIAG_SQLSTATE)) f.sqlstate = s;
      f.message = OneLine(PQerrorMessage(c.raw()));
      f.connection_lost = c.lost() || f.sqlstate.empty();
      throw f;
    }
    // Which of recap's tables the schema already has.
    Params names;
    names.Text(spec.schema);
    ResultPtr tables(
        PQexecParams(c.raw(),
                     "SELECT c.relname::text FROM pg_class c JOIN pg_namespace n ON n.oid = "
                     "c.relnamespace WHERE n.nspname = $1 AND c.relkind IN ('r', 'p', 'v', 'm', "
                     "'f') ORDER BY 1",
                     1, nullptr, names.values(), names.lengths(), names.formats(), 0),
        &PQclear);
    if (PQresultStatus(tables.get()) != PGRES_TUPLES_OK) {
      PgFailure f;
      if (const char* s = PQresultErrorField(tables.get(), PG_DIAG_SQLSTATE)) f.sqlstate = s;
      f.message = OneLine(PQerrorMessage(c.raw()));
      f.connection_lost = c.lost() || f.sqlstate.empty();
      throw f;
    }
    std::unordered_set<std::string> present;
    for (int i = 0; i < PQntuples(tables.get()); ++i)
      present.insert(PQgetvalue(tables.get(), i, 0));
    int version = 0;
    if (present.count("recap_schema")) {
      ResultPtr v(PQexec(c.raw(), ("SELECT version FROM " + q + ".recap_schema").c_str()),
                  &PQclear);
      if (PQresultStatus(v.get()) != PGRES_TUPLES_OK || PQntuples(v.get()) != 1) {
        throw Abort{Status::InvalidArgument(
            "recap postgres store (" + spec.display + "): schema " + q +
            " has a recap_schema table that is not recap's (it does not hold one version). "
            "recap leaves it as it is; choose another PostgresStoreOptions.schema")};
      }
      version = std::atoi(PQgetvalue(v.get(), 0, 0));
      if (version > kSchemaVersion) {
        throw Abort{Status::Corruption("recap postgres store (" + spec.display + "): schema " + q +
                                       " has version " + std::to_string(version) +
                                       ", written by a newer recap; this recap reads versions "
                                       "up to " +
                                       std::to_string(kSchemaVersion) +
                                       ". Upgrade recap to use it (it was left as it is)")};
      }
    } else if (spec.read_only) {
      throw Abort{Status::NotFound(
          "recap postgres store (" + spec.display + "): schema " + q +
          " holds no recap sessions yet (it has no recap tables), and the store was opened "
          "read-only, so they were not created. Store a session first (open it without "
          "PostgresStoreOptions.read_only), or check PostgresStoreOptions.schema")};
    } else {
      std::string foreign;
      for (const char* t : kTables) {
        if (present.count(t)) foreign += (foreign.empty() ? "" : ", ") + std::string(t);
      }
      if (!foreign.empty()) {
        throw Abort{Status::InvalidArgument(
            "recap postgres store (" + spec.display + "): schema " + q + " already has tables " +
            "named " + foreign +
            " that are not recap's (there is no recap_schema table). recap "
            "leaves them as they are; set PostgresStoreOptions.schema to a schema of recap's "
            "own, e.g. \"recap\"")};
      }
      c.Simple("CREATE SCHEMA IF NOT EXISTS " + q);
      c.Simple("CREATE TABLE " + q +
               ".recap_schema (version integer NOT NULL, migrated_by text "
               "NOT NULL, migrated_at timestamptz NOT NULL DEFAULT now())");
      c.Simple("INSERT INTO " + q + ".recap_schema (version, migrated_by) VALUES (0, '')");
    }
    if (version == kSchemaVersion) return;
    if (spec.read_only) {
      throw Abort{Status::FailedPrecondition(
          "recap postgres store (" + spec.display + "): schema " + q + " has version " +
          std::to_string(version) +
          ", written by an older recap, and the store was opened "
          "read-only, so it was not migrated to version " +
          std::to_string(kSchemaVersion) +
          ". Open it once without PostgresStoreOptions.read_only to migrate it")};
    }
    for (int v = version; v < kSchemaVersion; ++v) c.Simple(WithSchema(kMigrations[v], q));
    c.Simple("UPDATE " + q + ".recap_schema SET version = " + std::to_string(kSchemaVersion) +
             ", migrated_by = 'recap " + std::string(LibraryVersion()) + "', migrated_at = now()");
  });
}

Status CheckName(const std::string& session) {
  RECAP_RETURN_IF_ERROR(internal::CheckSessionName(session));
  if (session.find('\0') != std::string::npos) {
    return Status::InvalidArgument(
        "the session id holds a NUL character, which PostgreSQL "
        "cannot store; use another name");
  }
  return Status::OK();
}

struct SessionRow {
  std::int64_t id = 0;
  std::uint64_t version = 0;
  std::uint64_t rewrite_version = 0;
  std::int64_t compactions = 0;
  std::int64_t reductions = 0;
  std::int64_t recoveries = 0;
  std::int64_t next_position = 0;
};

std::string ArrayLiteral(const std::vector<std::int64_t>& v) {
  std::string out = "{";
  for (std::size_t i = 0; i < v.size(); ++i) {
    if (i) out += ',';
    out += std::to_string(v[i]);
  }
  return out + "}";
}

class PostgresSessionStore final : public SessionStore {
 public:
  explicit PostgresSessionStore(std::unique_ptr<Pool> pool) : pool_(std::move(pool)) {}

  Result<SessionState> Load(const std::string& session) override {
    RECAP_RETURN_IF_ERROR(CheckName(session));
    SessionState state;
    Status s = Call(*pool_, "loading session " + Quoted(session), false, [&](Connection& c) {
      bool appended_only = false;
      state.transcript = ReadActive(c, session, -1, &state.version, &appended_only, &state.learned);
    });
    RECAP_RETURN_IF_ERROR(s);
    return state;
  }

  Result<SessionChanges> LoadChanges(const std::string& session,
                                     std::uint64_t since_version) override {
    RECAP_RETURN_IF_ERROR(CheckName(session));
    SessionChanges changes;
    Status s = Call(
        *pool_, "loading the changes of session " + Quoted(session), false, [&](Connection& c) {
          bool appended_only = true;
          Transcript t = ReadActive(c, session, static_cast<std::int64_t>(since_version),
                                    &changes.version, &appended_only, &changes.learned);
          if (Status future = internal::CheckSinceVersion(session, since_version, changes.version);
              !future.ok()) {
            throw Abort{future};
          }
          changes.appended_only = appended_only;
          if (appended_only) {
            changes.appended = t.ToVector();
          } else {
            changes.transcript = std::move(t);
          }
        });
    RECAP_RETURN_IF_ERROR(s);
    return changes;
  }

  Status SaveLearned(const std::string& session, const std::string& learned) override {
    RECAP_RETURN_IF_ERROR(CheckName(session));
    return Call(*pool_, "saving what was learned about session " + Quoted(session), true,
                [&](Connection& c) {
                  // Advice, not content: no wait for the disk (R12.5).
                  c.Simple("SET LOCAL synchronous_commit = off");
                  Params p;
                  p.Text(session);
                  if (learned.empty()) {
                    c.Run(kClearLearned, pool_->texts(), p);
                  } else {
                    p.Text(learned);
                    c.Run(kSaveLearned, pool_->texts(), p);
                  }
                });
  }

  Result<std::uint64_t> AppendMessages(const std::string& session,
                                       std::vector<Message> messages) override {
    RECAP_RETURN_IF_ERROR(CheckName(session));
    Result<Transcript> prepared = internal::PrepareAppend(std::move(messages));
    RECAP_RETURN_IF_ERROR(prepared);
    const Transcript& batch = *prepared;
    if (batch.empty()) {
      std::uint64_t version = 0;
      Status s = Call(*pool_, "reading the version of session " + Quoted(session), false,
                      [&](Connection& c) {
                        Params p;
                        p.Text(session);
                        ResultPtr r = c.Run(kVersion, pool_->texts(), p);
                        if (PQntuples(r.get()) > 0) {
                          version = static_cast<std::uint64_t>(GetInt(r.get(), 0, 0));
                        }
                      });
      RECAP_RETURN_IF_ERROR(s);
      return version;
    }
    std::uint64_t version = 0;
    Status s = Call(*pool_, "appending to session " + Quoted(session), true, [&](Connection& c) {
      std::optional<SessionRow> row = Lock(c, session);
      if (!row) {
        Params p;
        p.Text(session);
        c.Run(kCreateSession, pool_->texts(), p);
        row = Lock(c, session);
        if (!row) throw Abort{Status::Internal("session " + Quoted(session) + " vanished")};
      }
      version = row->version + 1;
      std::int64_t position = row->next_position;
      if (batch.size() == 1) {
        InsertMessage(c, row->id, batch[0], batch.chars(0), position++, version,
                      [&] { return internal::AppendIdTaken(session, 0, batch[0].id); });
      }
      // Several messages go in pipelined chunks: one round trip per chunk, not per message.
      constexpr std::size_t kChunk = 1000;
      for (std::size_t start = 0; batch.size() > 1 && start < batch.size(); start += kChunk) {
        const std::size_t end = std::min(batch.size(), start + kChunk);
        std::vector<std::string> bodies(end - start);
        std::vector<Params> sets(end - start);
        for (std::size_t i = start; i < end; ++i) {
          std::string& body = bodies[i - start];
          EncodeBody(batch[i], body);
          sets[i - start]
              .Int(row->id)
              .Text(batch[i].id)
              .Int(position++)
              .Int(static_cast<std::int64_t>(version))
              .Text(RoleName(batch[i].role))
              .Bool(batch[i].summary)
              .Int(static_cast<std::int64_t>(batch.chars(i)))
              .Bytes(body);
        }
        std::size_t failed = 0;
        try {
          c.RunPipelined(kInsertMessage, pool_->texts(), sets, &failed);
        } catch (const PgFailure& f) {
          if (f.sqlstate == "23505" && f.constraint == "messages_active_id") {
            throw Abort{internal::AppendIdTaken(session, start + failed, batch[start + failed].id)};
          }
          throw;
        }
      }
      Params p;
      p.Int(row->id).Int(static_cast<std::int64_t>(version)).Int(position);
      c.Run(kSetVersion, pool_->texts(), p);
    });
    RECAP_RETURN_IF_ERROR(s);
    return version;
  }

  Result<std::vector<std::uint64_t>> CreateSessions(std::vector<NewSession> sessions) override {
    RECAP_RETURN_IF_ERROR(internal::CheckNewSessions(sessions));
    std::vector<std::uint64_t> versions;
    const std::string doing = sessions.size() == 1
                                  ? "creating session " + Quoted(sessions[0].session)
                                  : "creating sessions " + Quoted(sessions[0].session) + " and " +
                                        std::to_string(sessions.size() - 1) + " more";
    Status s = Call(*pool_, doing, true, [&](Connection& c) {
      versions.clear();
      // Each row is inserted (or found) and locked first: a second host creating one of these
      // sessions at once waits on the row, then finds it written and gets kConflict.
      std::vector<SessionRow> rows;
      for (const NewSession& n : sessions) {
        Params p;
        p.Text(n.session);
        c.Run(kCreateSession, pool_->texts(), p);
        std::optional<SessionRow> row = Lock(c, n.session);
        if (!row) throw Abort{Status::Internal("session " + Quoted(n.session) + " vanished")};
        if (row->version != 0) throw Abort{internal::SessionExists(n.session, row->version)};
        rows.push_back(*row);
      }
      for (std::size_t k = 0; k < sessions.size(); ++k) {
        internal::NewSessionReader reader(sessions[k]);
        std::int64_t position = rows[k].next_position;
        // Pipelined chunks, as a batch append sends them.
        constexpr std::size_t kChunk = 1000;
        std::vector<Message> chunk;
        std::vector<std::size_t> chars;
        bool more = true;
        while (more) {
          chunk.clear();
          chars.clear();
          while (chunk.size() < kChunk) {
            Message m;
            std::size_t n = 0;
            Result<bool> next = reader.Next(&m, &n);
            if (!next.ok()) throw Abort{next.status()};
            if (!*next) {
              more = false;
              break;
            }
            chunk.push_back(std::move(m));
            chars.push_back(n);
          }
          if (chunk.empty()) break;
          std::vector<std::string> bodies(chunk.size());
          std::vector<Params> sets(chunk.size());
          for (std::size_t i = 0; i < chunk.size(); ++i) {
            EncodeBody(chunk[i], bodies[i]);
            sets[i]
                .Int(rows[k].id)
                .Text(chunk[i].id)
                .Int(position++)
                .Int(1)
                .Text(RoleName(chunk[i].role))
                .Bool(chunk[i].summary)
                .Int(static_cast<std::int64_t>(chars[i]))
                .Bytes(bodies[i]);
          }
          std::size_t failed = 0;
          c.RunPipelined(kInsertMessage, pool_->texts(), sets, &failed);
        }
        if (reader.count() == 0) throw Abort{internal::NewSessionEmpty(sessions[k].session)};
        Params p;
        p.Int(rows[k].id).Int(1).Int(position);
        c.Run(kSetVersion, pool_->texts(), p);
        versions.push_back(1);
      }
    });
    RECAP_RETURN_IF_ERROR(s);
    return versions;
  }

  Result<std::uint64_t> CommitCompaction(const std::string& session,
                                         const CompactionCommit& commit) override {
    RECAP_RETURN_IF_ERROR(CheckName(session));
    std::uint64_t version = 0;
    Status s = Call(
        *pool_, "committing a compaction of session " + Quoted(session), true, [&](Connection& c) {
          SessionRow row = CheckVersion(c, session, commit.expected_version);
          if (Status shape = internal::CheckCompactionShape(session, commit); !shape.ok()) {
            throw Abort{shape};
          }
          // The span: the leading active messages, which are the kept and the replaced ones.
          const std::size_t span = commit.kept.size() + commit.replaced.size();
          Params hp;
          hp.Int(row.id).Int(static_cast<std::int64_t>(span));
          ResultPtr head = c.Run(kHead, pool_->texts(), hp);
          const int n = PQntuples(head.get());
          std::vector<std::string> leading;
          std::vector<std::int64_t> seqs;
          std::int64_t last_position = 0;
          for (int i = 0; i < n; ++i) {
            leading.emplace_back(GetView(head.get(), i, 0));
            last_position = GetInt(head.get(), i, 1);
            seqs.push_back(GetInt(head.get(), i, 2));
          }
          if (Status st = internal::CheckCompactionSpan(
                  session, commit, leading, leading.size(),
                  [&](const std::string& id) { return IsActiveId(c, row.id, id); });
              !st.ok()) {
            throw Abort{st};
          }
          version = row.version + 1;
          const std::int64_t number = row.compactions + 1;
          const std::string by = "compaction:" + std::to_string(number);
          Params rp;
          rp.Int(row.id).Text(by).Int(last_position);
          c.Run(kRetirePrefix, pool_->texts(), rp);

          // The kept messages, then the checkpoint and the injected messages, take the places just
          // before the messages after the span.
          Transcript added;
          added.Append(commit.checkpoint);
          for (const Message& m : commit.injected) added.Append(m);
          std::int64_t position =
              last_position - static_cast<std::int64_t>(commit.kept.size() + added.size()) + 1;
          if (!commit.kept.empty()) {
            const std::unordered_set<std::string> kept(commit.kept.begin(), commit.kept.end());
            for (std::size_t j = 0; j < leading.size(); ++j) {
              if (kept.count(leading[j]) == 0) continue;
              Params kp;
              kp.Int(seqs[j]).Int(position++);
              c.Run(kRestoreKept, pool_->texts(), kp);
            }
          }
          std::unordered_set<std::string> ids(commit.kept.begin(), commit.kept.end());
          for (std::size_t k = 0; k < added.size(); ++k) {
            auto duplicate = [&] {
              return internal::CommitIdTaken(session, internal::CompactionAddedName(commit, k),
                                             added[k].id);
            };
            if (!ids.insert(added[k].id).second) throw Abort{duplicate()};
            InsertMessage(c, row.id, added[k], added.chars(k), position++, version, duplicate);
          }
          MarkRewrite(c, kMarkCompaction, row.id, version, number);
          LogCommit(c, row.id, version, "compaction", number, commit.reason, commit.replaced.size(),
                    added.size());
        });
    RECAP_RETURN_IF_ERROR(s);
    return version;
  }

  Result<std::uint64_t> CommitReduction(const std::string& session,
                                        const ReductionCommit& commit) override {
    RECAP_RETURN_IF_ERROR(CheckName(session));
    std::uint64_t version = 0;
    Status s = Call(
        *pool_, "committing a reduction of session " + Quoted(session), true, [&](Connection& c) {
          SessionRow row = CheckVersion(c, session, commit.expected_version);
          if (commit.replacements.empty()) {
            throw Abort{internal::NoReplacements(session)};
          }
          std::unordered_set<std::string> seen;
          std::vector<std::pair<std::int64_t, std::int64_t>> targets;  // seq, position
          for (std::size_t i = 0; i < commit.replacements.size(); ++i) {
            const std::string& id = commit.replacements[i].id;
            Params fp;
            fp.Int(row.id).Text(id);
            ResultPtr found = c.Run(kFindActive, pool_->texts(), fp);
            if (PQntuples(found.get()) == 0) {
              throw Abort{internal::ReplacementNotActive(session, i, id)};
            }
            targets.emplace_back(GetInt(found.get(), 0, 0), GetInt(found.get(), 0, 1));
            if (!seen.insert(id).second) {
              throw Abort{internal::ReplacedTwice(session, i, id)};
            }
          }
          version = row.version + 1;
          const std::int64_t number = row.reductions + 1;
          const std::string by = "reduction:" + std::to_string(number);
          Transcript added;
          for (const Message& m : commit.replacements) added.Append(m);
          for (std::size_t i = 0; i < targets.size(); ++i) {
            Params rp;
            rp.Int(targets[i].first).Text(by);
            c.Run(kRetireSeq, pool_->texts(), rp);
            InsertMessage(c, row.id, added[i], added.chars(i), targets[i].second, version, [&] {
              return Status::InvalidArgument("replacement " + std::to_string(i) +
                                             " collides with an active message");
            });
          }
          MarkRewrite(c, kMarkReduction, row.id, version, number);
          LogCommit(c, row.id, version, "reduction", number, "", targets.size(), targets.size());
        });
    RECAP_RETURN_IF_ERROR(s);
    return version;
  }

  Result<std::uint64_t> CommitRecovery(const std::string& session,
                                       const RecoveryCommit& commit) override {
    RECAP_RETURN_IF_ERROR(CheckName(session));
    std::uint64_t version = 0;
    Status s = Call(
        *pool_, "committing a recovery of session " + Quoted(session), true, [&](Connection& c) {
          SessionRow row = CheckVersion(c, session, commit.expected_version);
          std::vector<std::pair<std::int64_t, std::string>> active;  // seq, message_id
          std::vector<std::string> active_ids;
          {
            Params ap;
            ap.Int(row.id);
            ResultPtr all = c.Run(kActiveIds, pool_->texts(), ap);
            for (int i = 0; i < PQntuples(all.get()); ++i) {
              active_ids.emplace_back(GetView(all.get(), i, 1));
              active.emplace_back(GetInt(all.get(), i, 0), active_ids.back());
            }
          }
          Result<internal::RecoveryPlan> plan = internal::PlanRecovery(session, active_ids, commit);
          if (!plan.ok()) throw Abort{plan.status()};
          const Transcript& results = plan->results;
          const auto& after = plan->after;
          // New positions above every current one, so no two rows ever share one mid-update.
          std::int64_t position = row.next_position;
          version = row.version + 1;
          std::vector<std::int64_t> seqs;
          std::vector<std::int64_t> positions;
          std::vector<std::pair<std::size_t, std::int64_t>> inserts;  // result, position
          for (const auto& [seq, id] : active) {
            seqs.push_back(seq);
            positions.push_back(position++);
            auto it = after.find(id);
            if (it == after.end()) continue;
            for (std::size_t r : it->second) inserts.emplace_back(r, position++);
          }
          Params mp;
          const std::string seq_list = ArrayLiteral(seqs);
          const std::string position_list = ArrayLiteral(positions);
          mp.Text(seq_list).Text(position_list);
          c.Run(kMovePositions, pool_->texts(), mp);
          for (const auto& [r, at] : inserts) {
            InsertMessage(c, row.id, results[r], results.chars(r), at, version, [&] {
              return Status::InvalidArgument("recovered result collides with an active message");
            });
          }
          const std::int64_t number = row.recoveries + 1;
          MarkRewrite(c, kMarkRecovery, row.id, version, number, position);
          LogCommit(c, row.id, version, "recovery", number, "", 0, results.size());
        });
    RECAP_RETURN_IF_ERROR(s);
    return version;
  }

  Result<std::vector<HistoryEntry>> History(const std::string& session) override {
    RECAP_RETURN_IF_ERROR(CheckName(session));
    std::vector<HistoryEntry> out;
    Status s = Call(*pool_, "reading the history of session " + Quoted(session), false,
                    [&](Connection& c) {
                      Params p;
                      p.Text(session);
                      ResultPtr r = c.Run(kHistory, pool_->texts(), p);
                      const int n = PQntuples(r.get());
                      out.reserve(static_cast<std::size_t>(n));
                      for (int i = 0; i < n; ++i) {
                        HistoryEntry e;
                        e.seq = static_cast<std::uint64_t>(GetInt(r.get(), i, 0));
                        if (!IsNull(r.get(), i, 1)) {
                          e.state = HistoryState::kCompacted;
                          e.replaced_by = std::string(GetView(r.get(), i, 1));
                        }
                        e.message = Decode(GetView(r.get(), i, 2), e.seq);
                        out.push_back(std::move(e));
                      }
                    });
    RECAP_RETURN_IF_ERROR(s);
    return out;
  }

  Result<std::vector<std::string>> ListSessions() override {
    std::vector<std::string> out;
    Status s = Call(*pool_, "listing the sessions", false, [&](Connection& c) {
      ResultPtr r = c.Run(kListSessions, pool_->texts(), Params());
      for (int i = 0; i < PQntuples(r.get()); ++i) out.emplace_back(GetView(r.get(), i, 0));
    });
    RECAP_RETURN_IF_ERROR(s);
    return out;
  }

 private:
  // The active messages of `session` stored after `since` (-1: all); `appended_only` is
  // cleared when a rewrite happened after `since`, and then every active message comes back.
  Transcript ReadActive(Connection& c, const std::string& session, std::int64_t since,
                        std::uint64_t* version, bool* appended_only,
                        std::string* learned = nullptr) {
    Params p;
    p.Text(session).Int(since);
    ResultPtr r = c.Run(kLoad, pool_->texts(), p);
    Transcript t;
    const int n = PQntuples(r.get());
    if (n == 0) {
      *version = 0;  // never written
      return t;
    }
    *version = static_cast<std::uint64_t>(GetInt(r.get(), 0, 0));
    if (learned != nullptr && !IsNull(r.get(), 0, 6)) *learned = GetView(r.get(), 0, 6);
    const std::int64_t rewrite = GetInt(r.get(), 0, 1);
    *appended_only = since >= rewrite;
    std::vector<std::pair<std::int64_t, int>> order;  // position, row
    order.reserve(static_cast<std::size_t>(n));
    for (int i = 0; i < n; ++i) {
      if (IsNull(r.get(), i, 2)) continue;  // the session row without messages
      order.emplace_back(GetInt(r.get(), i, 5), i);
    }
    std::sort(order.begin(), order.end());
    for (const auto& [position, i] : order) {
      const auto seq = static_cast<std::uint64_t>(GetInt(r.get(), i, 2));
      const std::int64_t chars = GetInt(r.get(), i, 3);
      auto m = std::make_shared<const Message>(Decode(GetView(r.get(), i, 4), seq));
      if (chars < 0 || m->id.empty()) {
        throw Abort{Status::Corruption("recap postgres store (" + pool_->spec().display +
                                       "): message " + std::to_string(seq) +
                                       " has a damaged row (negative size or no id). recap has "
                                       "changed nothing; restore it from a backup")};
      }
      t.AppendMeasured(std::move(m), static_cast<std::size_t>(chars));
    }
    return t;
  }

  std::optional<SessionRow> Lock(Connection& c, const std::string& session) {
    Params p;
    p.Text(session);
    ResultPtr r = c.Run(kFindForUpdate, pool_->texts(), p);
    if (PQntuples(r.get()) == 0) return std::nullopt;
    SessionRow row;
    row.id = GetInt(r.get(), 0, 0);
    row.version = static_cast<std::uint64_t>(GetInt(r.get(), 0, 1));
    row.rewrite_version = static_cast<std::uint64_t>(GetInt(r.get(), 0, 2));
    row.compactions = GetInt(r.get(), 0, 3);
    row.reductions = GetInt(r.get(), 0, 4);
    row.recoveries = GetInt(r.get(), 0, 5);
    row.next_position = GetInt(r.get(), 0, 6);
    return row;
  }

  SessionRow CheckVersion(Connection& c, const std::string& session, std::uint64_t expected) {
    std::optional<SessionRow> row = Lock(c, session);
    if (Status s = internal::CheckExpectedVersion(session, expected, row ? row->version : 0);
        !s.ok()) {
      throw Abort{s};
    }
    if (!row) throw Abort{internal::NothingToCommitAgainst(session)};
    return *row;
  }

  bool IsActiveId(Connection& c, std::int64_t session_id, const std::string& id) {
    Params p;
    p.Int(session_id).Text(id);
    return PQntuples(c.Run(kIsActiveId, pool_->texts(), p).get()) > 0;
  }

  // Inserts one message; an id already active in the session fails with `duplicate()`.
  template <typename Describe>
  void InsertMessage(Connection& c, std::int64_t session_id, const Message& m, std::size_t chars,
                     std::int64_t position, std::uint64_t version, Describe&& duplicate) {
    scratch_.clear();
    EncodeBody(m, scratch_);
    Params p;
    p.Int(session_id)
        .Text(m.id)
        .Int(position)
        .Int(static_cast<std::int64_t>(version))
        .Text(RoleName(m.role))
        .Bool(m.summary)
        .Int(static_cast<std::int64_t>(chars))
        .Bytes(scratch_);
    try {
      c.Run(kInsertMessage, pool_->texts(), p);
    } catch (const PgFailure& f) {
      if (f.sqlstate == "23505" && f.constraint == "messages_active_id") {
        throw Abort{duplicate()};
      }
      throw;
    }
  }

  void MarkRewrite(Connection& c, int q, std::int64_t session_id, std::uint64_t version,
                   std::int64_t number, std::int64_t next_position = -1) {
    Params p;
    p.Int(session_id).Int(static_cast<std::int64_t>(version)).Int(number);
    if (q == kMarkRecovery) p.Int(next_position);
    c.Run(q, pool_->texts(), p);
  }

  void LogCommit(Connection& c, std::int64_t session_id, std::uint64_t version, const char* kind,
                 std::int64_t number, const std::string& reason, std::size_t retired,
                 std::size_t added) {
    Params p;
    const std::string k = kind;
    p.Int(session_id).Int(static_cast<std::int64_t>(version)).Text(k).Int(number);
    if (reason.empty()) {
      p.Null();
    } else {
      p.Text(reason);
    }
    p.Int(static_cast<std::int64_t>(retired)).Int(static_cast<std::int64_t>(added));
    c.Run(kLogCommit, pool_->texts(), p);
  }

  Message Decode(std::string_view body, std::uint64_t seq) {
    Result<Message> m = DecodeBody(body);
    if (!m.ok()) {
      throw Abort{Status::Corruption("recap postgres store (" + pool_->spec().display +
                                     "): message " + std::to_string(seq) +
                                     " is damaged: " + m.status().message() +
                                     ". recap has changed nothing; restore it from a backup")};
    }
    return std::move(m).value();
  }

  std::unique_ptr<Pool> pool_;
  // The body being written. Calls run on several threads at once, so each has its own.
  static thread_local std::string scratch_;
};

thread_local std::string PostgresSessionStore::scratch_;

class PostgresMemoryStore final : public MemoryStore {
 public:
  explicit PostgresMemoryStore(std::unique_ptr<Pool> pool) : pool_(std::move(pool)) {}

  Status Add(const std::string& scope, const std::vector<std::string>& memories) override {
    if (memories.empty()) return Status::OK();
    return Call(*pool_, "adding memories to scope " + Quoted(scope), true, [&](Connection& c) {
      for (const std::string& text : memories) {
        Params p;
        p.Text(scope).Text(text);
        c.Run(kAddMemory, pool_->texts(), p);
      }
    });
  }

  Result<std::vector<std::string>> List(const std::string& scope) override {
    std::vector<std::string> out;
    Status s =
        Call(*pool_, "listing the memories of scope " + Quoted(scope), false, [&](Connection& c) {
          Params p;
          p.Text(scope);
          ResultPtr r = c.Run(kListMemories, pool_->texts(), p);
          for (int i = 0; i < PQntuples(r.get()); ++i) {
            out.emplace_back(GetView(r.get(), i, 0));
          }
        });
    RECAP_RETURN_IF_ERROR(s);
    return out;
  }

 private:
  std::unique_ptr<Pool> pool_;
};

Result<std::unique_ptr<Pool>> OpenPool(const PostgresStoreOptions& options) {
  Result<ConnectSpec> spec = MakeSpec(options);
  RECAP_RETURN_IF_ERROR(spec);
  auto pool = std::make_unique<Pool>(std::move(spec).value());
  RECAP_RETURN_IF_ERROR(EnsureSchema(*pool));
  return pool;
}

}  // namespace

int PostgresSchemaVersion() noexcept { return kSchemaVersion; }

Result<std::shared_ptr<SessionStore>> OpenPostgresSessionStore(
    const PostgresStoreOptions& options) {
  Result<std::unique_ptr<Pool>> pool = OpenPool(options);
  RECAP_RETURN_IF_ERROR(pool);
  return std::shared_ptr<SessionStore>(
      std::make_shared<PostgresSessionStore>(std::move(pool).value()));
}

Result<std::shared_ptr<MemoryStore>> OpenPostgresMemoryStore(const PostgresStoreOptions& options) {
  Result<std::unique_ptr<Pool>> pool = OpenPool(options);
  RECAP_RETURN_IF_ERROR(pool);
  return std::shared_ptr<MemoryStore>(
      std::make_shared<PostgresMemoryStore>(std::move(pool).value()));
}

}  // namespace v0
}  // namespace recap
