// The SessionStore that store-agnostic tests (the Compactor's, the long sessions') run against.
//
// By default the in-memory reference store. With the environment variable RECAP_TEST_STORE=sqlite
// — how tests/CMakeLists.txt registers the second run of those tests, label `sqlite` — a SQLite
// store on a new file in a fresh temporary directory, removed when the last reference to the
// store goes. That needs the test executable built with RECAP_TEST_HAVE_SQLITE (linking
// recap::sqlite); without it RECAP_TEST_STORE=sqlite aborts with a message instead of silently
// testing the in-memory store again. RECAP_TEST_STORE=postgres (label `postgres`) gives a
// PostgreSQL store in a schema of its own on the test server (support/pg_server.h), with
// RECAP_TEST_HAVE_POSTGRES.
#ifndef RECAP_TESTS_SUPPORT_TEST_STORE_H_
#define RECAP_TESTS_SUPPORT_TEST_STORE_H_

#include <memory>
#include <string>

#include "recap/session_store.h"

namespace recap::testing {

// "memory", "sqlite" or "postgres", from RECAP_TEST_STORE (unset or empty: "memory").
std::string TestStoreKind();

// A fresh, empty store of that kind.
std::shared_ptr<SessionStore> NewTestSessionStore();

}  // namespace recap::testing

#endif  // RECAP_TESTS_SUPPORT_TEST_STORE_H_
