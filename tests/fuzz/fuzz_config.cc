// Fuzz target for the configuration reader (SPEC R1): Config::FromJson on any text ends in a
// configuration that validates, or a status that names the problem; an accepted configuration
// written back with ToJson reads back to the same.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "fuzz_common.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view input(reinterpret_cast<const char*>(data), size);
  recap::Result<recap::Config> config = recap::Config::FromJson(input);
  if (!config.ok()) {
    RECAP_FUZZ_REQUIRE(!config.status().message().empty(), "a refusal says what is wrong");
    return 0;
  }
  RECAP_FUZZ_REQUIRE(config->Validate().ok(), "an accepted configuration is in range");
  const std::string written = config->ToJson();
  recap::Result<recap::Config> again = recap::Config::FromJson(written);
  RECAP_FUZZ_REQUIRE(again.ok(), "what ToJson wrote is accepted");
  RECAP_FUZZ_REQUIRE(again->ToJson() == written, "ToJson(FromJson(ToJson(c))) == ToJson(c)");
  return 0;
}
