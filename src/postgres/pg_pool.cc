#include "pg_pool.h"

#include <algorithm>
#include <cctype>
#include <condition_variable>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <mutex>
#include <unordered_set>

#include "recap/transcript.h"
#include "recap/version.h"

#include "recap_internal/remedy_text.h"
#include "recap_internal/store_rules.h"
#include "schema.h"

namespace recap {
inline namespace v0 {
namespace postgres_internal {

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

Status ConnectFailure(const std::string& server, const std::string& message) {
  const std::string m = OneLine(message);
  const std::string lower = Lower(m);
  const std::string where = "recap postgres store (" + server + "): connecting failed: " + m;
  if (Contains(lower, "password authentication failed") ||
      Contains(lower, "no password supplied") || Contains(lower, "authentication failed") ||
      (Contains(lower, "role \"") && Contains(lower, "does not exist"))) {
    internal::RemedyText said(where + ". Check the user and password ");
    said.Remedy("postgres.credentials", "(PostgresStoreOptions.user, password or password_env)");
    return said.ToStatus(StatusCode::kFailedPrecondition);
  }
  if (Contains(lower, "database \"") && Contains(lower, "does not exist")) {
    internal::RemedyText said(where +
                              ". Create the database (CREATE DATABASE, or `createdb`), "
                              "or name an existing one ");
    said.Remedy("postgres.dbname", "with dbname");
    return said.ToStatus(StatusCode::kNotFound);
  }
  if (Contains(lower, "no pg_hba.conf entry") || Contains(lower, "ssl") ||
      Contains(lower, "permission denied")) {
    return Status::FailedPrecondition(where +
                                      ". The server does not accept this connection; "
                                      "check its pg_hba.conf and the SSL settings");
  }
  if (Contains(lower, "too many connections") || Contains(lower, "remaining connection slots")) {
    internal::RemedyText said(where + ". The server has no connection to spare; retry later");
    said.Remedy("postgres.lower_pool_size", " or lower PostgresStoreOptions.pool_size");
    return said.ToStatus(StatusCode::kUnavailable);
  }
  // libpq often asks the question itself ("Is the server running locally …?").
  if (Contains(lower, "is the server running")) {
    return Status::Unavailable(where + " Retry when it is");
  }
  return Status::Unavailable(where +
                             ". Is the server running and reachable at that address? "
                             "Retry when it is");
}

}  // namespace postgres_internal
}  // namespace v0
}  // namespace recap
