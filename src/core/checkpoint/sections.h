// The checkpoint room's one table of the sections of R4.1 and the small text helpers its files
// share: the forgiving reader (checkpoint.cc), the rendering and its reading back
// (markdown.cc) and the salvager (salvage.cc).
#ifndef RECAP_SRC_CORE_CHECKPOINT_SECTIONS_H_
#define RECAP_SRC_CORE_CHECKPOINT_SECTIONS_H_

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "recap/checkpoint.h"

namespace recap {
inline namespace v0 {
namespace checkpoint_detail {

// The sections of R4.1, in order. One table drives parsing, rendering, the schema and the JSON
// form, so the four can never disagree about names or order.

enum class Kind : std::uint8_t { kString, kList, kFiles };

struct Section {
  const char* key;          // camelCase, as the summarizer is asked to write it
  const char* alt_key;      // snake_case spelling some models use instead
  const char* title;        // the rendered heading
  const char* description;  // for the schema
  Kind kind;
};

inline constexpr std::array<Section, 7> kSections = {{
    {"goal", "goal", "Goal", "What the session is trying to achieve.", Kind::kString},
    {"instructions", "user_instructions", "User instructions and constraints",
     "The user's instructions and constraints, verbatim where short.", Kind::kList},
    {"discoveries", "discoveries", "Discoveries", "Facts learned along the way.", Kind::kList},
    {"accomplished", "accomplished", "Accomplished", "Work already done.", Kind::kList},
    {"currentState", "current_state", "Current state", "Where things stand now.", Kind::kString},
    {"nextSteps", "next_steps", "Next steps", "What remains to be done.", Kind::kList},
    {"relevantFiles", "relevant_files", "Relevant files",
     "Files that matter, each with why it matters.", Kind::kFiles},
}};

inline std::string* StringField(Checkpoint& c, std::size_t i) {
  return i == 0 ? &c.goal : i == 4 ? &c.current_state : nullptr;
}
inline const std::string* StringField(const Checkpoint& c, std::size_t i) {
  return StringField(const_cast<Checkpoint&>(c), i);
}
inline std::vector<std::string>* ListField(Checkpoint& c, std::size_t i) {
  switch (i) {
    case 1: return &c.instructions;
    case 2: return &c.discoveries;
    case 3: return &c.accomplished;
    case 5: return &c.next_steps;
    default: return nullptr;
  }
}
inline const std::vector<std::string>* ListField(const Checkpoint& c, std::size_t i) {
  return ListField(const_cast<Checkpoint&>(c), i);
}

inline constexpr std::string_view kWhitespace = " \t\r\n";

inline std::string_view Trim(std::string_view s) {
  const auto b = s.find_first_not_of(kWhitespace);
  if (b == std::string_view::npos) return {};
  const auto e = s.find_last_not_of(kWhitespace);
  return s.substr(b, e - b + 1);
}

inline bool IsBlank(std::string_view s) { return Trim(s).empty(); }

// A list item: "- " and the item, each further line of it indented by two spaces, so that no
// line of a list can pass for a heading (the rendering, R4.4, and the guard's section, R17.2).
inline void AppendItem(std::string_view item, std::string& out) {
  out += "- ";
  std::size_t pos = 0;
  while (true) {
    const std::size_t nl = item.find('\n', pos);
    out.append(item.substr(pos, nl == std::string_view::npos ? nl : nl - pos));
    if (nl == std::string_view::npos) break;
    out += "\n  ";
    pos = nl + 1;
  }
}

inline bool StartsWith(std::string_view s, std::string_view prefix) {
  return s.size() >= prefix.size() && s.compare(0, prefix.size(), prefix) == 0;
}

}  // namespace checkpoint_detail
}  // namespace v0
}  // namespace recap

#endif  // RECAP_SRC_CORE_CHECKPOINT_SECTIONS_H_
