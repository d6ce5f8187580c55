// One-line text as the offline summarizer's checkpoint shows it: text trimmed, flattened to one
// line of at most so many code points, and the line of a tool's error output that says what
// went wrong.
#include <algorithm>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "recap/measure.h"

#include "reading/transcript_reading.h"
#include "summarize/offline_build.h"

namespace recap {
inline namespace v0 {
namespace offline_build {

std::string_view Trim(std::string_view s) {
  const auto b = s.find_first_not_of(" \t\r\n");
  if (b == std::string_view::npos) return {};
  return s.substr(b, s.find_last_not_of(" \t\r\n") - b + 1);
}

std::string OneLine(std::string_view text, std::size_t max) {
  const std::size_t enough = max > (SIZE_MAX - 4) / 4 ? SIZE_MAX : 4 * max + 4;
  std::string flat;
  bool space = false;
  bool more = false;
  for (char ch : Trim(text)) {
    if (ch == ' ' || ch == '\t' || ch == '\r' || ch == '\n') {
      space = true;
      continue;
    }
    if (flat.size() >= enough) {
      more = true;
      break;
    }
    if (space) flat += ' ';
    space = false;
    flat += ch;
  }
  if (!more && CountCodePoints(flat) <= max) return flat;
  if (max == 0) return {};
  flat.resize(PrefixBytesForCodePoints(flat, max - 1));
  return flat + "\xE2\x80\xA6";
}

std::string ErrorLine(std::string_view text) {
  std::vector<std::string_view> lines;
  for (std::size_t pos = 0; pos <= text.size();) {
    const std::size_t nl = std::min(text.find('\n', pos), text.size());
    const std::string_view line = Trim(text.substr(pos, nl - pos));
    if (!line.empty()) lines.push_back(line);
    pos = nl + 1;
  }
  if (lines.empty()) return {};
  if (text.find("Traceback") != std::string_view::npos) return OneLine(lines.back(), kLineChars);
  for (std::string_view line : lines) {
    for (std::string_view word : {"error", "Error", "ERROR", "fail", "FAIL", "Fail"}) {
      if (line.find(word) != std::string_view::npos) {
        return OneLine(reading::WithoutBanner(line), kLineChars);
      }
    }
  }
  // No line says error: the first line, unless it is a banner (a test run's "=== test session
  // starts ==="): then the line that says how it ended (its tally).
  const std::string_view first = lines.front();
  const bool banner = first.size() >= 3 && first[0] == first[1] && first[1] == first[2] &&
                      (first[0] == '=' || first[0] == '-' || first[0] == '*' || first[0] == '_');
  if (banner) {
    const std::string telling = reading::TellingLine(text, 4 * kLineChars);
    if (!telling.empty()) return OneLine(telling, kLineChars);
  }
  return OneLine(lines.front(), kLineChars);
}

}  // namespace offline_build
}  // namespace v0
}  // namespace recap
