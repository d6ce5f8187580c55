// Unknown members (json_util.h): what the codecs carry beside what they model — taking the
// members a codec does not know out of an object, an `extra` as text and back, an opaque
// item's payload, and merging an extra back into the object it came from.
#include <algorithm>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>

#include "json/json_members.h"
#include "json/json_util.h"

namespace recap {
inline namespace v0 {
namespace jsonutil {

// ---- Unknown members ------------------------------------------------------------------------

Json TakeUnknown(Json& object, std::initializer_list<std::string_view> known) {
  auto is_known = [&](const std::string& key) {
    for (std::string_view k : known) {
      if (key == k) return true;
    }
    return false;
  };
  Json unknown = Json::object();
  Members& members = MembersOf(object);
  if (std::all_of(members.begin(), members.end(),
                  [&](const auto& member) { return is_known(member.first); })) {
    return unknown;
  }
  // Keys are unique already, so both halves are built by appending.
  Members kept;
  Members& taken = MembersOf(unknown);
  for (auto& member : members) {
    (is_known(member.first) ? kept : taken).emplace_back(member.first, std::move(member.second));
  }
  members.swap(kept);
  return unknown;
}

std::string TakeString(Json& value) { return std::move(value.get_ref<std::string&>()); }

std::string ExtraText(const Json& extra) {
  if (!extra.is_object() || extra.empty()) return {};
  return DumpValid(extra);
}

Status ParseExtra(std::string_view extra, std::string_view where, Json* out) {
  if (extra.empty()) {
    *out = Json::object();
    return Status::OK();
  }
  ParseOptions options;
  options.numbers = Numbers::kText;
  Status s = Parse(extra, "the `extra` of `" + std::string(where) + "`", out, options);
  RECAP_RETURN_IF_ERROR(s);
  if (!out->is_object()) {
    return Status::InvalidArgument("the `extra` of `" + std::string(where) + "` is " +
                                   TypeName(*out) +
                                   "; expected a JSON object text (or an empty string).");
  }
  return Status::OK();
}

Status MergeExtraText(std::string_view extra, std::string_view where, Json* target,
                      std::initializer_list<std::string_view> protect) {
  if (extra.empty()) return Status::OK();
  Json parsed;
  Status s = ParseExtra(extra, where, &parsed);
  RECAP_RETURN_IF_ERROR(s);
  MergeExtra(*target, std::move(parsed), protect);
  return Status::OK();
}

Status ParsePayload(std::string_view payload, std::string_view where, Json* out) {
  ParseOptions options;
  options.numbers = Numbers::kText;
  return Parse(payload, "the payload of the opaque item at `" + std::string(where) + "`", out,
               options);
}

void MergeExtra(Json& target, Json extra, std::initializer_list<std::string_view> protect) {
  if (!extra.is_object()) return;
  if (target.is_null()) target = Json::object();
  Members& into = MembersOf(target);
  Members& from = MembersOf(extra);
  const std::size_t original = into.size();
  // Only the target's own members can meet a key of extra (whose keys are unique), so new
  // members are appended without a search; the reserve keeps the index's keys in place.
  into.reserve(original + from.size());
  std::unordered_map<std::string_view, std::size_t> index;
  const bool indexed = original > kLinearKeys;
  if (indexed) {
    index.reserve(original);
    for (std::size_t i = 0; i < original; ++i) index.emplace(into[i].first, i);
  }
  auto find = [&](const std::string& key) -> Json* {
    if (indexed) {
      const auto it = index.find(key);
      return it == index.end() ? nullptr : &into[it->second].second;
    }
    for (std::size_t i = 0; i < original; ++i) {
      if (into[i].first == key) return &into[i].second;
    }
    return nullptr;
  };
  for (auto& member : from) {
    bool is_protected = false;
    for (std::string_view p : protect) is_protected = is_protected || member.first == p;
    if (is_protected) continue;
    Json* existing = find(member.first);
    if (existing == nullptr) {
      into.emplace_back(member.first, std::move(member.second));
    } else if (existing->is_object() && member.second.is_object()) {
      MergeExtra(*existing, std::move(member.second));
    } else {
      *existing = std::move(member.second);
    }
  }
}

}  // namespace jsonutil
}  // namespace v0
}  // namespace recap
