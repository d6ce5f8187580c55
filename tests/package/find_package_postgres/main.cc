// A consumer of the installed recap::postgres: links it, checks that options are validated, and
// that a server that is not there is reported as unavailable, naming where it looked. (The
// store against a real server is tested by tests/test_postgres_store.cpp.)
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <string>

#include "recap/postgres/postgres_store.h"

namespace {
int failures = 0;
void Check(bool ok, const char* what, int line) {
  if (!ok) {
    std::fprintf(stderr, "postgres consumer: check failed (line %d): %s\n", line, what);
    ++failures;
  }
}
#define CHECK(cond) Check((cond), #cond, __LINE__)
}  // namespace

int main() {
  recap::PostgresStoreOptions bad;
  bad.schema = "Not A Schema";
  auto refused = recap::OpenPostgresSessionStore(bad);
  CHECK(!refused.ok() && refused.status().code() == recap::StatusCode::kInvalidArgument);

  char dir[] = "/tmp/recap-postgres-consumer-XXXXXX";
  if (!mkdtemp(dir)) return 2;
  recap::PostgresStoreOptions nobody;
  nobody.host = dir;  // a socket folder where no server listens
  nobody.port = 5999;
  nobody.dbname = "agents";
  nobody.user = "agent";
  auto down = recap::OpenPostgresSessionStore(nobody);
  CHECK(!down.ok());
  if (!down.ok()) {
    CHECK(down.status().code() == recap::StatusCode::kUnavailable);
    CHECK(down.status().message().find(dir) != std::string::npos);
  }
  rmdir(dir);
  if (failures) return 1;
  std::printf("postgres consumer: ok (schema version %d)\n", recap::PostgresSchemaVersion());
  return 0;
}
