// The paths the offline summarizer finds in text: tool-call arguments, shell commands, patches
// and tool output.
#include <algorithm>
#include <string>
#include <string_view>
#include <vector>

#include "summarize/offline_build.h"

namespace recap {
inline namespace v0 {
namespace offline_build {

// Paths. A simple scan, not a parser: tokens of path characters that either name a file with
// an extension inside a directory (rel/dir/file.ext, /abs/file.ext) or are absolute with at
// least two components (/usr/lib). Bare words with a slash ("and/or") and URLs are not paths.

bool IsPathChar(char ch) {
  return (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') ||
         ch == '.' || ch == '_' || ch == '-' || ch == '/' || ch == '~' || ch == '+' || ch == '@';
}

bool HasLetter(std::string_view s) {
  return std::any_of(s.begin(), s.end(),
                     [](char ch) { return (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z'); });
}

namespace {

// A file name with an extension ("a.cc", ".gitignore"): a dot followed by 1-10 alphanumerics
// holding a letter.
bool HasExtension(std::string_view name) {
  const auto dot = name.rfind('.');
  if (dot == std::string_view::npos || dot + 1 >= name.size()) return false;
  const std::string_view ext = name.substr(dot + 1);
  if (ext.size() > 10 || !HasLetter(ext)) return false;
  return std::all_of(ext.begin(), ext.end(), [](char ch) {
    return (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9');
  });
}

bool IsPathLike(std::string_view tok) {
  if (tok.size() < 3 || tok.size() > kMaxPathBytes) return false;
  if (tok.find('/') == std::string_view::npos || tok.find("//") != std::string_view::npos) {
    return false;
  }
  std::string_view t = tok;
  while (!t.empty() && t.back() == '/') t.remove_suffix(1);
  const std::string_view last = t.substr(t.rfind('/') + 1);
  if (!last.empty() && HasExtension(last) && t.find('/') != std::string_view::npos) return true;
  if (t.front() != '/' && t.substr(0, 2) != "~/") return false;
  // Absolute: every component must look like a name.
  std::size_t components = 0;
  std::size_t pos = t.front() == '/' ? 1 : 2;
  while (pos <= t.size()) {
    const std::size_t slash = std::min(t.find('/', pos), t.size());
    if (!HasLetter(t.substr(pos, slash - pos))) return false;
    ++components;
    pos = slash + 1;
  }
  return components >= 2;
}

}  // namespace

bool IsDiffHeader(std::string_view line) {
  for (std::string_view p : {"diff --git ", "--- ", "+++ "}) {
    if (line.substr(0, p.size()) == p) return true;
  }
  return false;
}

// One pass: the start of the current line is carried along, so that a text of one long line
// full of "a/..." tokens costs no more than any other (each token used to look back for it).
void ScanPaths(std::string_view text, std::vector<std::string>& out) {
  std::size_t i = 0;
  std::size_t line_start = 0;
  int diff_line = -1;  // IsDiffHeader of the current line once asked (0/1), else -1
  while (i < text.size()) {
    if (!IsPathChar(text[i])) {
      if (text[i] == '\n') {
        line_start = i + 1;
        diff_line = -1;
      }
      ++i;
      continue;
    }
    std::size_t j = i;
    while (j < text.size() && IsPathChar(text[j])) ++j;
    std::string_view tok = text.substr(i, j - i);
    // A token glued to non-ASCII text is part of a word, not a path.
    auto non_ascii = [&text](std::size_t k) { return static_cast<unsigned char>(text[k]) >= 0x80; };
    const bool glued = (j < text.size() && non_ascii(j)) || (i > 0 && non_ascii(i - 1));
    while (!tok.empty() && (tok.back() == '.' || tok.back() == '-')) tok.remove_suffix(1);
    if (tok.size() > 2 && (tok[0] == 'a' || tok[0] == 'b') && tok[1] == '/') {
      if (diff_line < 0) diff_line = IsDiffHeader(text.substr(line_start)) ? 1 : 0;
      if (diff_line == 1)
        tok.remove_prefix(2);  // git's a/ and b/ name the same file as the bare path
    }
    if (!glued && IsPathLike(tok)) out.emplace_back(tok);
    i = j;
  }
}

bool IsPathKey(std::string_view key) {
  for (std::string_view k : {"path", "file_path", "filePath", "file", "filename", "notebook_path",
                             "target_file", "source", "destination"}) {
    if (key == k) return true;
  }
  return false;
}

}  // namespace offline_build
}  // namespace v0
}  // namespace recap
