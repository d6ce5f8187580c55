// The offline summarizer's reply fitted to the output budget (R5.1): the checkpoint's JSON made
// at most so many code points, giving up first what matters least.
#include <cstddef>
#include <string>
#include <vector>

#include "recap/checkpoint.h"
#include "recap/measure.h"

#include "summarize/offline_build.h"

namespace recap {
inline namespace v0 {
namespace offline_build {

namespace {

// Drops the older half of `list` (at least one entry); the newest entries stay.
template <class T>
void DropOlderHalf(std::vector<T>& list) {
  list.erase(list.begin(), list.begin() + static_cast<std::ptrdiff_t>((list.size() + 1) / 2));
}

}  // namespace

std::string FitCheckpoint(Checkpoint& cp, std::size_t max_chars) {
  std::string json = CheckpointToJson(cp);
  auto fits = [&] { return CountCodePoints(json) <= max_chars; };
  if (fits()) return json;
  auto shrink = [&](auto&& drop, auto&& nonempty) {
    while (!fits() && nonempty()) {
      drop();
      json = CheckpointToJson(cp);
    }
  };
  shrink([&] { DropOlderHalf(cp.accomplished); }, [&] { return !cp.accomplished.empty(); });
  shrink([&] { DropOlderHalf(cp.discoveries); }, [&] { return !cp.discoveries.empty(); });
  shrink([&] { DropOlderHalf(cp.relevant_files); }, [&] { return !cp.relevant_files.empty(); });
  shrink([&] { DropOlderHalf(cp.instructions); }, [&] { return !cp.instructions.empty(); });
  // The first next steps are the next ones: the later half goes.
  shrink([&] { cp.next_steps.resize(cp.next_steps.size() / 2); },
         [&] { return !cp.next_steps.empty(); });
  for (std::size_t chars : {500, 200, 80}) {
    if (fits()) break;
    cp.current_state = OneLine(cp.current_state, chars);
    cp.goal = OneLine(cp.goal, chars);
    json = CheckpointToJson(cp);
  }
  return json;
}

}  // namespace offline_build
}  // namespace v0
}  // namespace recap
