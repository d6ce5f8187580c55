// Fuzz target for the checkpoint reader (SPEC R4, R5): a summarizer's reply parsed as a
// checkpoint object (whole, or cut by the output limit), the salvage of truncated JSON, and a
// rendered checkpoint read back. Checks: the salvage's output is JSON; what is parsed renders,
// and a rendered checkpoint read back renders the same again.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "fuzz_common.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view input(reinterpret_cast<const char*>(data), size);
  const std::vector<recap::OutputField> fields = {
      {"memories", "facts to remember", R"({"type":"array","items":{"type":"string"}})"},
      {"open_tasks", "unfinished tasks", R"({"type":"array"})"}};

  for (bool truncated : {false, true}) {
    const recap::ParsedCheckpoint parsed = recap::ParseCheckpoint(input, truncated, fields);
    if (!parsed.usable) continue;
    const std::string rendered = recap::RenderCheckpoint(parsed.checkpoint);
    RECAP_FUZZ_REQUIRE(recap::IsValidUtf8(rendered), "a rendered checkpoint is valid UTF-8");
    // Read back (as the next compaction reads its prior checkpoint), it settles after one
    // round: what is read back renders to a text that reads back to itself.
    const std::string once = recap::RenderCheckpoint(recap::ParseRenderedCheckpoint(rendered));
    RECAP_FUZZ_REQUIRE(recap::RenderCheckpoint(recap::ParseRenderedCheckpoint(once)) == once,
                       "a rendered checkpoint settles after one reading back");
    const std::string json = recap::CheckpointToJson(parsed.checkpoint);
    RECAP_FUZZ_REQUIRE(nlohmann::json::accept(json), "CheckpointToJson writes JSON");
    for (const auto& [name, text] : parsed.plugin_fields) {
      RECAP_FUZZ_REQUIRE(nlohmann::json::accept(text), "a plugin field is JSON text");
    }
  }

  const std::optional<std::string> salvaged = recap::SalvageTruncatedJson(input);
  if (salvaged) {
    // JSON syntax is what the salvage promises; a number beyond a double's range (1e309) is
    // JSON that nlohmann refuses to hold as a value, which the checkpoint parser handles.
    // Checked without building the value first (a salvaged depth bomb is a million levels);
    // only text that is refused is parsed, to tell a syntax error from such a number.
    bool syntax = true;
    if (!nlohmann::json::accept(*salvaged)) {
      try {
        const nlohmann::json parsed_back = nlohmann::json::parse(*salvaged);
        (void)parsed_back;
      } catch (const nlohmann::json::parse_error&) {
        syntax = false;
      } catch (const nlohmann::json::exception&) {
      }
    }
    RECAP_FUZZ_REQUIRE(syntax, "salvaged JSON is JSON");
  }

  // The input as a rendered checkpoint (what a previous compaction left in the transcript).
  const std::string rendered = recap::RenderCheckpoint(recap::ParseRenderedCheckpoint(input));
  const std::string once = recap::RenderCheckpoint(recap::ParseRenderedCheckpoint(rendered));
  RECAP_FUZZ_REQUIRE(recap::RenderCheckpoint(recap::ParseRenderedCheckpoint(once)) == once,
                     "reading back a rendered checkpoint settles after one round");
  return 0;
}
