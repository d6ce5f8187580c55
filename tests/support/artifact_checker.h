// The R17.4 measure's own reading of a session's must-keep artifacts, written apart from the
// ledger (src/core/checkpoint/ledger.cc) and sharing none of its code: it reads the messages the
// test-data converters make of the raw files (support/test_data.h) with rules of its own, and
// looks for each artifact in what is sent after a compaction. A ledger that missed an artifact
// kind, or a guard that dropped one, shows here as a survival rate below 95%.
#ifndef RECAP_TESTS_SUPPORT_ARTIFACT_CHECKER_H_
#define RECAP_TESTS_SUPPORT_ARTIFACT_CHECKER_H_

#include <array>
#include <cstddef>
#include <string>
#include <vector>

#include "recap/transcript.h"

namespace recap::testing {

// The kinds of SPEC R17.1, in the order of recap::LedgerKind.
enum class ArtifactKind { kRequest, kIdentifier, kFile, kTodo, kFailure };
inline constexpr std::size_t kArtifactKinds = 5;
const char* ArtifactKindName(ArtifactKind kind);

struct Artifact {
  ArtifactKind kind;
  std::string text;         // what must be found: a request's first words, a token, a path, …
  std::size_t message = 0;  // the index of the message it came from
};

// The artifacts of messages [0, end) of `t`, each once.
std::vector<Artifact> ReadArtifacts(const Transcript& t, std::size_t end);

// Everything a model is sent of `t`, as text to search: each message's texts, its tool calls'
// names and arguments, its tool results' texts.
std::string SentText(const Transcript& t);

// Whether `sent` (SentText) holds `a`: case, white space, Markdown marks and quotes aside; a
// path also by its last two components.
bool Survives(const std::string& sent, const Artifact& a);

struct SurvivalTally {
  std::array<std::size_t, kArtifactKinds> total{};
  std::array<std::size_t, kArtifactKinds> found{};
  std::vector<std::string> missing;  // "<kind>: <text>" of the first few not found
  void Add(const SurvivalTally& other);
  double Rate(ArtifactKind kind) const;  // 1 when there are none
};
SurvivalTally CountSurvivors(const std::vector<Artifact>& artifacts, const std::string& sent);

}  // namespace recap::testing

#endif  // RECAP_TESTS_SUPPORT_ARTIFACT_CHECKER_H_
