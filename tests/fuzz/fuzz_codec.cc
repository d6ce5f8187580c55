// Fuzz target for recap's four codecs — one binary per codec, chosen at compile time with
// RECAP_FUZZ_CODEC = 0 (recap's own JSON form), 1 (OpenAI chat completions), 2 (Anthropic
// Messages) or 3 (OpenAI Responses items). Any input must end in a result or a clear status; a
// decoded conversation must encode, decode again to the same encoding (a round trip is
// lossless), and pass the core's invariants (fuzz_common.h). The streaming decode (DecodeEach)
// must hand over the same messages as DecodeMessages, or fail with the same error.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "fuzz_common.h"

namespace {

#if RECAP_FUZZ_CODEC == 0
namespace codec = recap::native;
#elif RECAP_FUZZ_CODEC == 1
namespace codec = recap::openai_chat;
#elif RECAP_FUZZ_CODEC == 2
namespace codec = recap::anthropic;
#else
namespace codec = recap::openai_responses;
#endif

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view input(reinterpret_cast<const char*>(data), size);

  recap::Result<recap::Message> one = codec::DecodeMessage(input);
  if (one.ok()) {
    recap::Result<std::string> text = codec::EncodeMessage(*one);
    RECAP_FUZZ_REQUIRE(text.ok() || text.status().code() == recap::StatusCode::kInvalidArgument,
                       "a decoded message encodes, or says why not");
  } else {
    RECAP_FUZZ_REQUIRE(!one.status().message().empty(), "a refusal says what is wrong");
  }

  std::vector<recap::Message> streamed;
  std::vector<bool> flagged;
  const recap::Status each =
      codec::DecodeEach(input, {}, [&](recap::Message&& m, bool is_instructions) {
        streamed.push_back(std::move(m));
        flagged.push_back(is_instructions);
        return recap::Status::OK();
      });

  recap::Result<recap::Conversation> conversation = codec::DecodeMessages(input);
  if (!conversation.ok()) {
    RECAP_FUZZ_REQUIRE(!conversation.status().message().empty(), "a refusal says what is wrong");
    RECAP_FUZZ_REQUIRE(!each.ok() && each.message() == conversation.status().message(),
                       "DecodeEach fails with DecodeMessages' error");
    return 0;
  }
  RECAP_FUZZ_REQUIRE(each.ok(), "DecodeEach decodes what DecodeMessages decodes");
  {
    std::vector<const recap::Message*> want;
    if (conversation->instructions) want.push_back(&*conversation->instructions);
    for (const recap::Message& m : conversation->messages) want.push_back(&m);
    RECAP_FUZZ_REQUIRE(streamed.size() == want.size(), "DecodeEach hands over every message");
    for (std::size_t i = 0; i < want.size(); ++i) {
      RECAP_FUZZ_REQUIRE(flagged[i] == (i == 0 && conversation->instructions.has_value()),
                         "DecodeEach flags the instructions, and only them");
      const recap::Result<std::string> got = recap::native::EncodeMessage(streamed[i]);
      const recap::Result<std::string> expected = recap::native::EncodeMessage(*want[i]);
      RECAP_FUZZ_REQUIRE(got.ok() == expected.ok() && (!got.ok() || *got == *expected),
                         "DecodeEach hands over the messages DecodeMessages decodes");
    }
  }
  recap::Result<std::string> encoded = codec::EncodeMessages(*conversation);
  if (encoded.ok()) {
    recap::Result<recap::Conversation> again = codec::DecodeMessages(*encoded);
    RECAP_FUZZ_REQUIRE(again.ok(), "what recap encoded decodes again");
    recap::Result<std::string> reencoded = codec::EncodeMessages(*again);
    RECAP_FUZZ_REQUIRE(reencoded.ok() && *reencoded == *encoded,
                       "encode(decode(encode(x))) == encode(x)");
  }
  recap::Transcript transcript(std::move(conversation->messages));
  recap_fuzz::CheckTranscript(transcript);
  return 0;
}
