// Fuzz target for the importers of `recap import` (src/cli/import.cc): the input's first byte
// picks the format (openai-chat with or without --run, anthropic, claude-code, swe-agent,
// openhands, recap, openai-responses) and the rest is the file. Any file must end in a
// conversation or a message saying what is wrong; a conversation must pass the core's
// invariants (fuzz_common.h).
#include <cstddef>
#include <cstdint>
#include <string>

#include "cli.h"
#include "fuzz_common.h"

namespace {

struct Choice {
  const char* format;
  const char* run;
};
constexpr Choice kChoices[] = {
    {"openai-chat", ""},
    {"openai-chat", "0"},
    {"anthropic", ""},
    {"claude-code", ""},
    {"swe-agent", ""},
    {"openhands", "0"},
    {"recap", ""},
    {"openhands", "1"},
    // Added last, so that the seeds' first bytes (0..7) still pick what they picked.
    {"openai-responses", ""}};
constexpr int kChoiceCount = sizeof kChoices / sizeof kChoices[0];

}  // namespace

// Every depth bomb is tried in every format (fuzz_depth_bombs.h).
extern "C" int RecapFuzzChoiceBytes() { return kChoiceCount; }

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size == 0) return 0;
  const Choice& choice = kChoices[data[0] % kChoiceCount];
  const std::string text(reinterpret_cast<const char*>(data) + 1, size - 1);
  recap::Result<recap::Conversation> conversation =
      recap_cli::DecodeTranscript(choice.format, text, choice.run);
  if (!conversation.ok()) {
    RECAP_FUZZ_REQUIRE(!conversation.status().message().empty(), "a refusal says what is wrong");
    return 0;
  }
  recap::Transcript transcript(std::move(conversation->messages));
  recap_fuzz::CheckTranscript(transcript);
  return 0;
}
