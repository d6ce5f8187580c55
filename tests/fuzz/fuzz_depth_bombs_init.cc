// In a libFuzzer build (scripts/fuzz.sh), every target runs the depth bombs of
// fuzz_depth_bombs.h once at start-up, before fuzzing its corpus: libFuzzer cuts corpus files
// at its input size limit (1 MiB by default), and these are up to several megabytes.
#include <cstdint>
#include <cstdio>
#include <string>

#include "fuzz_depth_bombs.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size);

extern "C" int LLVMFuzzerInitialize(int* /*argc*/, char*** /*argv*/) {
  std::size_t n = 0;
  for (std::size_t levels : {std::size_t{100000}, std::size_t{1000000}}) {
    recap_fuzz::ForEachDepthBomb(levels, [&](const std::string& bomb) {
      LLVMFuzzerTestOneInput(reinterpret_cast<const std::uint8_t*>(bomb.data()), bomb.size());
      ++n;
    });
  }
  std::fprintf(stderr, "fuzz: %zu depth bombs (100,000 and 1,000,000 levels) passed\n", n);
  return 0;
}
