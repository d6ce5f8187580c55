#include "support/test_store.h"

#include <cstdio>
#include <cstdlib>
#include <string>

#ifdef RECAP_TEST_HAVE_SQLITE
#include "recap/sqlite/sqlite_store.h"

#include "support/temp_dir.h"
#endif
#ifdef RECAP_TEST_HAVE_POSTGRES
#include "recap/postgres/postgres_store.h"

#include "support/pg_server.h"
#endif

namespace recap::testing {

std::string TestStoreKind() {
  const char* v = std::getenv("RECAP_TEST_STORE");
  if (v == nullptr || *v == '\0' || std::string(v) == "memory") return "memory";
  if (std::string(v) == "sqlite") return "sqlite";
  if (std::string(v) == "postgres") return "postgres";
  std::fprintf(stderr,
               "RECAP_TEST_STORE=%s: unknown store (use \"memory\", \"sqlite\" or \"postgres\")\n",
               v);
  std::abort();
}

std::shared_ptr<SessionStore> NewTestSessionStore() {
  if (TestStoreKind() == "memory") return NewInMemorySessionStore();
  if (TestStoreKind() == "postgres") {
#ifdef RECAP_TEST_HAVE_POSTGRES
    // A schema of its own in the shared test server's database.
    PostgresTestServer& server = PostgresTestServer::Shared();
    static const bool created = (server.CreateDatabase("recap_compactor_tests"), true);
    (void)created;
    PostgresStoreOptions options;
    options.connection = server.ConnInfo("recap_compactor_tests");
    options.schema = PostgresTestServer::UniqueName("compactor");
    auto opened = OpenPostgresSessionStore(options);
    if (!opened.ok()) {
      std::fprintf(stderr, "RECAP_TEST_STORE=postgres: %s\n", opened.status().ToString().c_str());
      std::abort();
    }
    return std::move(opened).value();
#else
    std::fprintf(stderr,
                 "RECAP_TEST_STORE=postgres, but this test executable was built without "
                 "recap::postgres\n");
    std::abort();
#endif
  }
#ifdef RECAP_TEST_HAVE_SQLITE
  // The directory must outlive the store: the holder owns both and destroys the store (its
  // later member) first; the returned pointer shares the holder's lifetime.
  struct Holder {
    TempDir dir{"recap-test-store"};
    std::shared_ptr<SessionStore> store;
  };
  auto holder = std::make_shared<Holder>();
  SqliteStoreOptions options;
  options.synchronous = SqliteSynchronous::kOff;  // these tests check behaviour, not durability
  auto opened = OpenSqliteSessionStore(holder->dir.File("sessions.db"), options);
  if (!opened.ok()) {
    std::fprintf(stderr, "RECAP_TEST_STORE=sqlite: %s\n", opened.status().ToString().c_str());
    std::abort();
  }
  holder->store = std::move(opened).value();
  SessionStore* raw = holder->store.get();
  return std::shared_ptr<SessionStore>(std::move(holder), raw);
#else
  std::fprintf(
      stderr,
      "RECAP_TEST_STORE=sqlite, but this test executable was built without recap::sqlite\n");
  std::abort();
#endif
}

}  // namespace recap::testing
