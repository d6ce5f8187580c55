// The C API's store calls: recap_store_open ("memory", "sqlite:PATH" or a postgresql:// URL,
// each store of a component left out failing with how to build recap with it) and
// recap_store_free.
#include <algorithm>
#include <memory>
#include <string>
#include <string_view>
#include <utility>

#include "recap/c/recap.h"
#include "recap/recap.h"

#include "capi_guard.h"
#include "capi_handles.h"

#if RECAP_C_HAVE_SQLITE
#include "recap/sqlite/sqlite_store.h"
#endif
#if RECAP_C_HAVE_POSTGRES
#include "recap/postgres/postgres_store.h"
#endif

using recap::capi::Fail;
using recap::capi::Guard;
using recap::capi::JsonString;
using recap::capi::Missing;

namespace {

recap::Result<std::shared_ptr<recap::SessionStore>> OpenStore(std::string_view where) {
  const char* const kWhere = "recap_store_open";
  if (where == "memory") return recap::NewInMemorySessionStore();
  if (where.rfind("sqlite:", 0) == 0) {
    const std::string path(where.substr(7));
    if (path.empty()) {
      return recap::Status::InvalidArgument(std::string(kWhere) +
                                            ": \"sqlite:\" names no file; write \"sqlite:PATH\"");
    }
#if RECAP_C_HAVE_SQLITE
    return recap::OpenSqliteSessionStore(path);
#else
    return recap::Status::FailedPrecondition(
        std::string(kWhere) +
        ": this recap was built without its SQLite store; rebuild it with "
        "-DRECAP_BUILD_SQLITE=ON");
#endif
  }
  if (where.rfind("postgresql://", 0) == 0 || where.rfind("postgres://", 0) == 0) {
#if RECAP_C_HAVE_POSTGRES
    recap::PostgresStoreOptions options;
    options.connection = std::string(where);
    return recap::OpenPostgresSessionStore(options);
#else
    return recap::Status::FailedPrecondition(
        std::string(kWhere) +
        ": this recap was built without its PostgreSQL store; rebuild it with "
        "-DRECAP_BUILD_POSTGRES=ON");
#endif
  }
  // Only what comes before a ':' is shown: whatever follows may be a password.
  const std::string_view shown = where.substr(0, std::min(where.find(':'), std::size_t{32}));
  return recap::Status::InvalidArgument(
      std::string(kWhere) + ": " + JsonString(shown) +
      (where.find(':') != std::string_view::npos ? " (before ':')" : "") +
      " names no kind of store; use \"memory\", \"sqlite:PATH\" or a postgresql:// URL");
}

}  // namespace

extern "C" {

int recap_store_open(const char* where, recap_store** out, char** error) {
  return Guard("recap_store_open", error, [&]() -> int {
    if (where == nullptr) return Fail(error, Missing("recap_store_open", "where"));
    if (out == nullptr) return Fail(error, Missing("recap_store_open", "out"));
    recap::Result<std::shared_ptr<recap::SessionStore>> store = OpenStore(where);
    if (!store.ok()) return Fail(error, store.status());
    *out = new recap_store{std::move(*store)};
    return RECAP_OK;
  });
}

void recap_store_free(recap_store* store) { delete store; }

}  // extern "C"
