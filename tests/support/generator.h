// A seeded, deterministic generator of transcripts for recap's property tests.
//
// The same seed and options produce the same messages on every platform and standard library:
// the only source of randomness is std::mt19937_64 (whose output the standard fixes), and every
// derived quantity (ranges, probabilities, sizes) is computed here with integer arithmetic or
// exactly rounded double operations — never with std::uniform_*_distribution, whose output
// differs between standard libraries.
//
// What a transcript can contain (each shape switchable through GeneratorOptions):
//   * turns: a user message (text, sometimes an image, sometimes several texts), zero or more
//     tool-call rounds, usually an assistant reply;
//   * rounds: an assistant message with optional thinking (opaque, signed payload), optional
//     text and 1..N parallel tool calls, answered OpenAI-style (one `tool` message per result)
//     or Anthropic-style (one user message carrying several ToolResult parts, sometimes with a
//     text too, sometimes split over two messages), in shuffled order;
//   * server tools: a linked opaque call/result pair in one assistant message, or split over
//     two consecutive assistant messages;
//   * orphan results (a result whose call is absent), rarely at the very start;
//   * uncertain calls (a call with no result) — off by default;
//   * checkpoint (summary) messages at the start, system messages mid-conversation;
//   * multi-byte UTF-8 everywhere (2-, 3-, 4-byte characters, dense runs of 4-byte ones),
//     empty texts, JSON arguments with nesting, numbers, escapes and long strings, invalid
//     JSON arguments, tool results with several text and opaque items;
//   * sizes from tiny to large, log-normal-ish, with an occasional huge single item.
//
// Every string the generator produces is valid UTF-8 and no text contains the reducer's
// truncation marker, so Transcript::Append never alters a generated message.
#ifndef RECAP_TESTS_SUPPORT_GENERATOR_H_
#define RECAP_TESTS_SUPPORT_GENERATOR_H_

#include <cstddef>
#include <cstdint>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "recap/message.h"
#include "recap/transcript.h"

namespace recap_test {

// SplitMix64 of `a` combined with `b`: derives independent, well-spread seeds (per case, per
// sub-stream) from one run seed.
std::uint64_t MixSeed(std::uint64_t a, std::uint64_t b) noexcept;

// Portable random helpers over std::mt19937_64.
class Rng {
 public:
  explicit Rng(std::uint64_t seed) : engine_(seed) {}

  std::uint64_t Next() { return engine_(); }
  // Uniform in [0, n); n == 0 yields 0. Unbiased (rejection sampling).
  std::uint64_t Below(std::uint64_t n);
  // Uniform in [lo, hi] (inclusive); lo > hi yields lo.
  std::int64_t Between(std::int64_t lo, std::int64_t hi);
  std::size_t Size(std::size_t lo, std::size_t hi) {
    return static_cast<std::size_t>(
        Between(static_cast<std::int64_t>(lo), static_cast<std::int64_t>(hi)));
  }
  // Uniform double in [0, 1) with 53 random bits (exact, portable).
  double Unit();
  // True with probability p (p <= 0: never, p >= 1: always).
  bool Chance(double p);
  bool OneIn(std::uint64_t n) { return Below(n) == 0; }
  // A log-normal-ish size in [lo, hi] whose median is about `median`; `octaves` is roughly one
  // standard deviation in powers of two. Uses only exactly rounded arithmetic.
  std::size_t LogSize(std::size_t lo, std::size_t median, std::size_t hi, double octaves = 1.5);

  template <class T>
  const T& Pick(const std::vector<T>& v) {
    return v[static_cast<std::size_t>(Below(v.size()))];
  }
  template <class T>
  void Shuffle(std::vector<T>& v) {  // Fisher–Yates with Below(); std::shuffle is not portable
    for (std::size_t i = v.size(); i > 1; --i) {
      std::size_t j = static_cast<std::size_t>(Below(i));
      std::swap(v[i - 1], v[j]);
    }
  }

 private:
  std::mt19937_64 engine_;
};

// How text is drawn.
enum class TextStyle {
  kAscii,       // words, punctuation, newlines
  kMixed,       // mostly ASCII with 2-, 3- and 4-byte characters sprinkled in
  kDense4Byte,  // long runs of 4-byte characters (emoji, musical symbols) — clip points land inside
  kCjk,         // 3-byte characters with some ASCII
  kCode,        // source-code-like: quotes, backslashes, tabs, braces, some non-ASCII
  kAnyMix,      // every class at once, including combining marks, ZWJ sequences and NUL
};

// Exactly `code_points` code points of valid UTF-8 in the given style (never containing the
// truncation marker).
std::string RandomText(Rng& rng, std::size_t code_points, TextStyle style);
// A style drawn by the options' multibyte probabilities.
TextStyle RandomStyle(Rng& rng, double multibyte, double dense_4byte);

// A valid JSON text, normally an object, of roughly `approx_code_points` code points: nested
// objects and arrays, numbers (integers, negatives, fractions, exponents), booleans, null and
// string values with escapes (\n, \", \\, \t, \/, \u00e9, surrogate pairs) and raw multi-byte
// characters; most of the size sits in a few long string values. `pretty` adds newlines and
// indentation. `top_level_non_object` allows a bare string, array or number at the top.
std::string RandomJsonArguments(Rng& rng, std::size_t approx_code_points, bool pretty,
                                bool top_level_non_object = false);
// A text that is not valid JSON (a truncated object, single quotes, trailing commas, prose,
// empty), about `approx_code_points` long.
std::string RandomInvalidJson(Rng& rng, std::size_t approx_code_points);

struct GeneratorOptions {
  // ---- shape ----
  int min_turns = 1;
  int max_turns = 6;
  int max_rounds_per_turn = 4;  // tool-call rounds in one turn (0..this, small ones likelier)
  int max_parallel_calls = 4;   // calls in one assistant message (1..this, 1 likeliest)

  // ---- probabilities in [0, 1] ----
  double anthropic_results = 0.4;   // per round: results as one user message of ToolResult parts
  double text_with_results = 0.2;   // Anthropic results message also carries a user text
  double split_results = 0.1;       // Anthropic results split over two user messages
  double orphan_result = 0.05;      // per round: add a result whose call is absent
  double leading_orphan = 0.03;     // per transcript: start with an orphan result
  double uncertain_call = 0.0;      // per transcript: leave one call (or a whole round) unanswered
  double thinking = 0.25;           // per round: signed thinking before the calls
  double redacted_thinking = 0.05;  // per round: redacted thinking
  double assistant_text_with_calls = 0.4;
  double image = 0.08;              // per user message: an image
  double image_only_user = 0.02;    // per turn: the user message is only an image
  double server_tool = 0.06;        // per round: a linked opaque server tool pair
  double split_server_tool = 0.3;   // ... whose result comes in the next assistant message
  double leading_summary = 0.1;     // per transcript: one or two checkpoint messages first
  double leading_assistant = 0.03;  // per transcript: an assistant message before the first turn
  double mid_system = 0.03;         // per turn: a system message before it
  double assistant_reply = 0.8;     // per turn: a final assistant text
  double double_user = 0.03;        // per turn: two consecutive user messages
  double interleaved_text = 0.02;   // per round: an assistant text between calls and results
  double empty_text = 0.05;         // per text: empty
  double multibyte = 0.4;           // per text: a multi-byte style
  double dense_4byte = 0.1;         // per text: dense 4-byte runs
  double invalid_json_arguments = 0.05;
  double non_object_arguments = 0.02;  // valid JSON that is a string, array or number
  double pretty_arguments = 0.2;
  double result_extra_items = 0.1;  // several text and opaque items in one result
  double is_error = 0.1;
  double reuse_call_ids = 0.0;  // per transcript: sequential call ids reused across rounds
  double no_turns = 0.0;        // per transcript: no user text at all (only rounds)

  // ---- sizes, in code points ----
  std::size_t text_median = 120;       // user and assistant texts
  std::size_t result_median = 400;     // tool result texts
  std::size_t args_median = 120;       // tool-call arguments
  std::size_t max_item_chars = 30000;  // upper bound of an ordinary item
  double huge_item = 0.0;              // per transcript: one item of huge_min..huge_max
  std::size_t huge_min = 100000;
  std::size_t huge_max = 2000000;
  // Draw many items over the reducer caps (tool results over 8000, texts over 16000, arguments
  // with long strings), as a session with big tool outputs has; they reach up to
  // max(max_item_chars, cap + 4000).
  bool exceed_caps = false;

  // Message ids are id_prefix + index; empty means "g<seed in hex>-".
  std::string id_prefix;
};

// Randomises the probabilities and sizes of `base` a little (each case a different mix), keeping
// base's switches that are 0 at 0 (uncertain calls, huge items, id reuse stay off when off).
GeneratorOptions JitterOptions(Rng& rng, const GeneratorOptions& base);

// The generated messages, in order. Deterministic in (seed, options).
std::vector<recap::Message> GenerateMessages(std::uint64_t seed, const GeneratorOptions& options);
// The same, appended to a Transcript.
recap::Transcript GenerateTranscript(std::uint64_t seed, const GeneratorOptions& options);

}  // namespace recap_test

#endif  // RECAP_TESTS_SUPPORT_GENERATOR_H_
