// The depth bombs every fuzz target starts from (SPEC R13.1: "every parser has a fuzz target
// with a depth bomb among its seeds"): containers nested 100,000 and 1,000,000 levels deep, in
// every shape — arrays, objects, both mixed, never closed — alone and in the places a parser
// of recap meets JSON (a message's unknown field, a configuration section, a checkpoint
// section, a content block, a string of tool-call arguments, an SSE event, a line of a JSONL
// file). A 1,000,000-level bomb is several megabytes, so they are built here rather than kept
// as corpus files: the stand-alone driver (fuzz_driver.cc) runs them before the corpus, and a
// libFuzzer build runs them at start-up (fuzz_depth_bombs_init.cc).
#ifndef RECAP_TESTS_FUZZ_FUZZ_DEPTH_BOMBS_H_
#define RECAP_TESTS_FUZZ_FUZZ_DEPTH_BOMBS_H_

#include <cstddef>
#include <string>
#include <vector>

// A target whose first input byte chooses what the rest of the input is (fuzz_import: the
// format) defines this and returns how many choices there are; each bomb is then run behind
// every choice's byte, so that every reader the target reaches meets it.
extern "C" int RecapFuzzChoiceBytes() __attribute__((weak));

namespace recap_fuzz {

inline std::string NestedBomb(int shape, std::size_t levels) {
  std::string s;
  switch (shape) {
    case 0:  // [[[ ... ]]]
      s.assign(levels, '[');
      s.append(levels, ']');
      break;
    case 1:  // {"a":{"a": ... }}
      s.reserve(levels * 6 + 4);
      for (std::size_t i = 0; i < levels; ++i) s += "{\"a\":";
      s += "null";
      s.append(levels, '}');
      break;
    case 2:  // [{"a":[{"a": ... }]}]
      s.reserve(levels * 6);
      for (std::size_t i = 0; i < levels; ++i) s += i % 2 == 0 ? "[" : "{\"a\":";
      s += "0";
      for (std::size_t i = levels; i-- > 0;) s += i % 2 == 0 ? "]" : "}";
      break;
    default:  // [[[ never closed
      s.assign(levels, '[');
      break;
  }
  return s;
}

// Calls `each(bomb)` for every bomb `levels` deep: every shape, bare and wrapped. One at a
// time, since those a million levels deep are megabytes each.
template <class Each>
void ForEachDepthBomb(std::size_t levels, Each&& raw_each) {
  const int choices = RecapFuzzChoiceBytes != nullptr ? RecapFuzzChoiceBytes() : 0;
  auto each = [&](const std::string& bomb) {
    if (choices == 0) {
      raw_each(bomb);
      return;
    }
    for (int c = 0; c < choices; ++c) raw_each(std::string(1, static_cast<char>(c)) + bomb);
  };
  for (int shape = 0; shape < 4; ++shape) {
    const std::string b = NestedBomb(shape, levels);
    each(b);
    if (shape == 3) continue;
    std::string quoted;  // as the text of a JSON string
    quoted.reserve(b.size() + b.size() / 2);
    for (char c : b) {
      if (c == '"') quoted += '\\';
      quoted += c;
    }
    each("[{\"role\":\"user\",\"content\":\"x\",\"deep\":" + b + "}]");
    each("[{\"role\":\"user\",\"content\":[{\"type\":\"image\",\"source\":" + b + "}]}]");
    each(
        "[{\"role\":\"assistant\",\"content\":null,\"tool_calls\":[{\"id\":\"c\",\"type\":"
        "\"function\",\"function\":{\"name\":\"f\",\"arguments\":\"" +
        quoted + "\"}}]},{\"role\":\"tool\",\"tool_call_id\":\"c\",\"content\":\"ok\"}]");
    each("{\"compaction\":" + b + "}");
    each("{\"goal\":" + b + "}");
    each("data: " + b + "\n\n");
    each("{\"type\":\"user\",\"message\":{\"role\":\"user\",\"content\":" + b + "}}\n");
  }
}

}  // namespace recap_fuzz

#endif  // RECAP_TESTS_FUZZ_FUZZ_DEPTH_BOMBS_H_
