// The schema: created on first use and migrated under an advisory lock (EnsureSchema).
#ifndef RECAP_SRC_POSTGRES_PG_SCHEMA_H_
#define RECAP_SRC_POSTGRES_PG_SCHEMA_H_

#include <cstdint>
#include <deque>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include <libpq-fe.h>

#include "recap/postgres/postgres_store.h"
#include "recap/status.h"

#include "pg_pool.h"

namespace recap {
inline namespace v0 {
namespace postgres_internal {

// The schema: created or migrated under an advisory lock; refused when newer or foreign.
Status EnsureSchema(Pool& pool);

}  // namespace postgres_internal
}  // namespace v0
}  // namespace recap

#endif  // RECAP_SRC_POSTGRES_PG_SCHEMA_H_
