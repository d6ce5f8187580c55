// Private to the json room: an object's members as the vector they are, shared by the reader,
// the writer and the unknown-member helpers (TakeUnknown, MergeExtra) of json_util.h.
#ifndef RECAP_SRC_CORE_JSON_JSON_MEMBERS_H_
#define RECAP_SRC_CORE_JSON_JSON_MEMBERS_H_

#include <cstddef>

#include "json/json_util.h"

namespace recap {
inline namespace v0 {
namespace jsonutil {

// An object's members as the vector they are: appending to it directly is how an object is
// built in linear time (ordered_map's own insertion searches every member first).
using Members = Json::object_t::Container;

inline Members& MembersOf(Json& object) {
  return static_cast<Members&>(object.get_ref<Json::object_t&>());
}
inline const Members& MembersOf(const Json& object) {
  return static_cast<const Members&>(object.get_ref<const Json::object_t&>());
}

// Objects up to this many members are checked for a duplicate key at each insertion; larger
// ones once, when they close (sorted, so a million members cost n log n, not n^2).
inline constexpr std::size_t kLinearKeys = 16;

// The members the reader makes room for when it opens an object (most objects of a transcript
// have two to four).
inline constexpr std::size_t kMembersReserved = 4;

}  // namespace jsonutil
}  // namespace v0
}  // namespace recap

#endif  // RECAP_SRC_CORE_JSON_JSON_MEMBERS_H_
