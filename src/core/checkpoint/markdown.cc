#include <algorithm>
#include <string>
#include <string_view>
#include <vector>

#include "recap/checkpoint.h"
#include "recap/measure.h"

#include "checkpoint/sections.h"

namespace recap {
inline namespace v0 {

using checkpoint_detail::AppendItem;
using checkpoint_detail::Kind;
using checkpoint_detail::kSections;
using checkpoint_detail::ListField;
using checkpoint_detail::Section;
using checkpoint_detail::StartsWith;
using checkpoint_detail::StringField;
using checkpoint_detail::Trim;

// ---------------------------------------------------------------------------------------------
// Rendering (R4.4) and reading the rendering back.
//
//   # Checkpoint
//                                  <- each section: a blank line, "## Title", its body
//   ## Goal
//   <text>                         <- paragraph lines starting with '#' or '\' get a '\' prefix
//
//   ## Discoveries
//   - item                         <- list items; further lines of an item are indented by two
//     continuation
//
//   ## Relevant files
//   - `path` — why

namespace {

constexpr std::string_view kHeader = "# Checkpoint";
constexpr std::string_view kDash = " \xE2\x80\x94 ";  // " — "
constexpr std::string_view kKeptHeading = "## Kept by recap\n";

void AppendParagraph(std::string_view text, std::string& out) {
  std::size_t pos = 0;
  while (true) {
    const std::size_t nl = text.find('\n', pos);
    const std::string_view line = text.substr(pos, nl == std::string_view::npos ? nl : nl - pos);
    // Escaped so that no line of a body can pass for a heading when it is read back.
    if (!line.empty() && (line.front() == '#' || line.front() == '\\')) out += '\\';
    out.append(line);
    if (nl == std::string_view::npos) break;
    out += '\n';
    pos = nl + 1;
  }
}

// A Markdown code span for `path`: fenced by one backtick more than its longest run, padded
// with a space where Markdown would otherwise eat or misread an edge.
std::string CodeSpan(std::string_view path) {
  std::size_t longest = 0;
  for (std::size_t i = 0, run = 0; i < path.size(); ++i) {
    run = path[i] == '`' ? run + 1 : 0;
    longest = std::max(longest, run);
  }
  const std::string fence(longest + 1, '`');
  const bool all_spaces = path.find_first_not_of(' ') == std::string_view::npos;
  const bool pad = path.front() == '`' || path.back() == '`' ||
                   (path.front() == ' ' && path.back() == ' ' && !all_spaces);
  std::string out = fence;
  if (pad) out += ' ';
  out.append(path);
  if (pad) out += ' ';
  out += fence;
  return out;
}

// R17.2: the guard's section, last: "## Kept by recap" and its body.
void AppendKeptByRecap(const Checkpoint& c, std::string& out) {
  if (c.kept_by_recap.empty()) return;
  // After the sections (each ends with its newline): one blank line, as between sections.
  // After a text: a line end and a blank line whatever the text ends with, so that the text
  // reads back exactly.
  out += c.structured ? "\n" : "\n\n";
  out += kKeptHeading;
  out += c.kept_by_recap;
  if (out.back() != '\n') out += '\n';
}

}  // namespace

std::string RenderCheckpoint(const Checkpoint& c) {
  std::string out(kHeader);
  out += '\n';
  if (!c.structured) {
    out += '\n';
    out += c.text;
    AppendKeptByRecap(c, out);
    return out;
  }
  for (std::size_t i = 0; i < kSections.size(); ++i) {
    const Section& s = kSections[i];
    std::string body;
    switch (s.kind) {
      case Kind::kString:
        if (StringField(c, i)->empty()) continue;
        AppendParagraph(*StringField(c, i), body);
        break;
      case Kind::kList:
        for (const auto& item : *ListField(c, i)) {
          if (!body.empty()) body += '\n';
          AppendItem(item, body);
        }
        break;
      case Kind::kFiles:
        for (const auto& f : c.relevant_files) {
          if (f.path.empty()) continue;  // nothing to point at
          if (!body.empty()) body += '\n';
          std::string item = CodeSpan(f.path);
          if (!f.why.empty()) {
            item += kDash;
            item += f.why;
          }
          AppendItem(item, body);
        }
        break;
    }
    if (body.empty()) continue;
    out += "\n## ";
    out += s.title;
    out += '\n';
    out += body;
    out += '\n';
  }
  AppendKeptByRecap(c, out);
  return out;
}

namespace {

std::vector<std::string_view> SplitLines(std::string_view text) {
  std::vector<std::string_view> lines;
  std::size_t pos = 0;
  while (true) {
    const std::size_t nl = text.find('\n', pos);
    lines.push_back(text.substr(pos, nl == std::string_view::npos ? nl : nl - pos));
    if (nl == std::string_view::npos) break;
    pos = nl + 1;
  }
  return lines;
}

bool ParseItems(std::string_view body, std::vector<std::string>* items) {
  for (std::string_view line : SplitLines(body)) {
    if (StartsWith(line, "- ") || line == "-") {
      items->emplace_back(line.substr(std::min<std::size_t>(2, line.size())));
    } else if (StartsWith(line, "  ") && !items->empty()) {
      items->back() += '\n';
      items->back().append(line.substr(2));
    } else {
      return false;
    }
  }
  return true;
}

bool ParseFile(std::string_view item, RelevantFile* f) {
  std::size_t n = 0;
  while (n < item.size() && item[n] == '`') ++n;
  if (n == 0) return false;
  // The closing fence is the first run of exactly n backticks.
  std::size_t close = std::string_view::npos;
  for (std::size_t i = n; i < item.size();) {
    if (item[i] != '`') {
      ++i;
      continue;
    }
    std::size_t run = 0;
    while (i + run < item.size() && item[i + run] == '`') ++run;
    if (run == n) {
      close = i;
      break;
    }
    i += run;
  }
  if (close == std::string_view::npos) return false;
  std::string_view path = item.substr(n, close - n);
  if (path.size() >= 2 && path.front() == ' ' && path.back() == ' ' &&
      path.find_first_not_of(' ') != std::string_view::npos) {
    path = path.substr(1, path.size() - 2);
  }
  const std::string_view rest = item.substr(close + n);
  if (!rest.empty() && !StartsWith(rest, kDash)) return false;
  f->path = std::string(path);
  f->why = std::string(rest.empty() ? rest : rest.substr(kDash.size()));
  return !f->path.empty();
}

std::string ParseParagraph(std::string_view body) {
  std::string out;
  bool first = true;
  for (std::string_view line : SplitLines(body)) {
    if (!first) out += '\n';
    first = false;
    if (!line.empty() && line.front() == '\\') line.remove_prefix(1);
    out.append(line);
  }
  return out;
}

// The index of the section titled `title`, or -1.
int SectionIndex(std::string_view title) {
  for (std::size_t i = 0; i < kSections.size(); ++i) {
    if (title == kSections[i].title) return static_cast<int>(i);
  }
  return -1;
}

// Reads the structured layout strictly: known headings in R4.1 order, bodies of their kind.
bool ParseStructured(std::string_view rest, Checkpoint* c) {
  int last = -1;
  while (!rest.empty()) {
    if (!StartsWith(rest, "\n## ")) return false;
    const std::size_t eol = rest.find('\n', 4);
    if (eol == std::string_view::npos) return false;
    const int index = SectionIndex(rest.substr(4, eol - 4));
    if (index <= last) return false;
    last = index;
    rest.remove_prefix(eol + 1);
    // The body ends where a blank line is followed by the next known heading. Bodies cannot
    // contain such a line themselves (paragraph lines are escaped, list lines are prefixed).
    std::size_t end = std::string_view::npos;
    for (std::size_t at = rest.find("\n\n## "); at != std::string_view::npos;
         at = rest.find("\n\n## ", at + 1)) {
      const std::size_t title_end = rest.find('\n', at + 5);
      const std::string_view title =
          rest.substr(at + 5, title_end == std::string_view::npos ? title_end : title_end - at - 5);
      if (SectionIndex(title) > index) {
        end = at + 1;
        break;
      }
    }
    std::string_view body = rest.substr(0, end);
    rest = end == std::string_view::npos ? std::string_view() : rest.substr(end);
    if (!body.empty() && body.back() == '\n') body.remove_suffix(1);
    if (body.empty()) return false;

    const auto i = static_cast<std::size_t>(index);
    switch (kSections[i].kind) {
      case Kind::kString: *StringField(*c, i) = ParseParagraph(body); break;
      case Kind::kList:
        if (!ParseItems(body, ListField(*c, i))) return false;
        break;
      case Kind::kFiles: {
        std::vector<std::string> items;
        if (!ParseItems(body, &items)) return false;
        for (const auto& item : items) {
          RelevantFile f;
          if (!ParseFile(item, &f)) return false;
          c->relevant_files.push_back(std::move(f));
        }
        break;
      }
    }
  }
  return true;
}

}  // namespace

Checkpoint ParseRenderedCheckpoint(std::string_view rendered) {
  Checkpoint c;
  if (StartsWith(rendered, kHeader) &&
      (rendered.size() == kHeader.size() || rendered[kHeader.size()] == '\n')) {
    std::string_view rest = rendered.substr(std::min(rendered.size(), kHeader.size() + 1));
    // R17.2: the guard's section is the last one, after the sections or the text.
    // After sections it follows the last one's line end and a blank line; after a text, a line
    // end and a blank line of its own: the sections read up to the first of the two, a text
    // up to before it.
    std::string kept;
    std::string_view text_rest = rest;
    if (const std::size_t at = rest.rfind(std::string("\n\n") + std::string(kKeptHeading));
        at != std::string_view::npos) {
      kept = std::string(rest.substr(at + 2 + kKeptHeading.size()));
      text_rest = rest.substr(0, at);
      rest = rest.substr(0, at + 1);
    } else if (StartsWith(rest, std::string("\n") + std::string(kKeptHeading))) {
      kept = std::string(rest.substr(1 + kKeptHeading.size()));
      rest = text_rest = std::string_view();
    }
    if (!kept.empty() && kept.back() == '\n') kept.pop_back();
    // Some transports drop a final newline; the layout does not depend on it.
    Checkpoint structured;
    std::string restored;
    if (!rest.empty() && rest.back() != '\n' && StartsWith(rest, "\n## ")) {
      restored = std::string(rest) + '\n';
      rest = restored;
    }
    if (ParseStructured(rest, &structured)) {
      structured.kept_by_recap = std::move(kept);
      return structured;
    }
    // Text-only: what follows the header and its blank line.
    rest = text_rest;
    if (StartsWith(rest, "\n")) rest.remove_prefix(1);
    c.structured = false;
    c.text = std::string(rest);
    c.kept_by_recap = std::move(kept);
    return c;
  }
  c.structured = false;
  c.text = std::string(Trim(rendered));
  return c;
}

Message CheckpointMessage(const Checkpoint& checkpoint) {
  Message m;
  m.role = Role::kUser;
  m.summary = true;
  m.parts.emplace_back(Text{RenderCheckpoint(checkpoint), {}});
  return m;
}

}  // namespace v0
}  // namespace recap
