// Access to the real agent transcripts under tests/data (see tests/data/SOURCES.md).
//
// Tests and benchmarks use these to run on input nobody on this project wrote. Every function
// throws std::runtime_error with the file and the reason when something is missing or
// malformed, so that a test fails with a readable message instead of crashing.
//
// The SWE-agent and OpenHands conversions here are test helpers, not importers: they turn
// those formats into recap messages simply and faithfully enough for tests (importers with
// their own contract come later).
#ifndef RECAP_TESTS_SUPPORT_TEST_DATA_H_
#define RECAP_TESTS_SUPPORT_TEST_DATA_H_

#include <string>
#include <vector>

#include "recap/conversation.h"

namespace recap::testing {

// File names inside tests/data.
inline constexpr const char* kTauBenchFile = "tau-bench_gpt-4o-airline.json";
inline constexpr const char* kClaudeCodeSampleFile =
    "Users-dain-workspace-claude-code-log-sample__37f83ec9-f2ea-42a9-925e-0d5c105cb6e8.jsonl";
inline constexpr const char* kClaudeCodeWorktreesFile =
    "experiments-worktrees__ef958aa1-0e93-49f0-bb71-150f63befcd1.jsonl";
inline constexpr const char* kSweAgentFile = "marshmallow-1867_function_calling.traj";
inline constexpr const char* kOpenHandsFile = "multi_swe_bench_llama4_output.jsonl";

// The absolute path of tests/data (from the RECAP_TEST_DATA_DIR macro) and of a file in it.
std::string DataDir();
std::string DataPath(const std::string& name);

// The whole content of a file, byte for byte.
std::string ReadFile(const std::string& path);

// A file's lines without their line ends, skipping empty lines.
std::vector<std::string> ReadLines(const std::string& path);

// tau-bench (OpenAI chat completions): each of the 200 runs' `traj`, as the JSON text of a
// messages array, in file order.
std::vector<std::string> TauBenchRuns();

// The two Claude Code session files, by name.
std::vector<std::string> ClaudeCodeFiles();

// The Anthropic messages of a Claude Code session file (a name in tests/data or a path): one
// JSON object text per message. Records without a `message` object are skipped. Consecutive
// records whose messages share `message.id` (one assistant response spread over several
// lines, one content block a line) are joined into one message: the content blocks
// concatenated, every other member from the first record.
std::vector<std::string> ClaudeCodeMessages(const std::string& file);

// The same messages as one JSON array text, ready for anthropic::DecodeMessages.
std::string ClaudeCodeMessagesArray(const std::string& file);

// Joins JSON texts into one JSON array text.
std::string JsonArray(const std::vector<std::string>& items);

// Compares two JSON texts as values (member order and whitespace ignored). Returns "" when
// they are equal; otherwise a description for a failure message: for two arrays the first
// differing index with both elements, else both documents (long ones shortened).
std::string JsonDifference(const std::string& expected, const std::string& actual);

struct NamedTranscript {
  std::string
      name;  // e.g. "tau-bench/run-017", "claude-code/37f83ec9", "openhands/ponylang__ponyc-4595"
  std::string format;         // "openai_chat", "anthropic", "swe_agent", "openhands"
  Conversation conversation;  // instructions split off where the source has them
};

// Every real transcript as recap messages: the 200 tau-bench runs, both Claude Code
// sessions, the SWE-agent trajectory and the 3 OpenHands runs (206 in all).
std::vector<NamedTranscript> AllRealTranscripts();

// The single transcripts (each converted as described in AllRealTranscripts).
Conversation SweAgentTranscript();
std::vector<NamedTranscript> OpenHandsTranscripts();

}  // namespace recap::testing

#endif  // RECAP_TESTS_SUPPORT_TEST_DATA_H_
