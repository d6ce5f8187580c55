#include "recap/checkpoint.h"

#include <algorithm>
#include <array>
#include <cstdint>
#include <utility>

#include "recap/measure.h"

#include "json/json_escape.h"
#include "json/json_util.h"
#include "model/utf8.h"
#include "recap_internal/json_depth.h"

namespace recap {
inline namespace v0 {

namespace {

using jsonutil::Json;

// ---------------------------------------------------------------------------------------------
// The sections of R4.1, in order. One table drives parsing, rendering, the schema and the JSON
// form, so the four can never disagree about names or order.

enum class Kind : std::uint8_t { kString, kList, kFiles };

struct Section {
  const char* key;          // camelCase, as the summarizer is asked to write it
  const char* alt_key;      // snake_case spelling some models use instead
  const char* title;        // the rendered heading
  const char* description;  // for the schema
  Kind kind;
};

constexpr std::array<Section, 7> kSections = {{
    {"goal", "goal", "Goal", "What the session is trying to achieve.", Kind::kString},
    {"instructions", "user_instructions", "User instructions and constraints",
     "The user's instructions and constraints, verbatim where short.", Kind::kList},
    {"discoveries", "discoveries", "Discoveries", "Facts learned along the way.", Kind::kList},
    {"accomplished", "accomplished", "Accomplished", "Work already done.", Kind::kList},
    {"currentState", "current_state", "Current state", "Where things stand now.", Kind::kString},
    {"nextSteps", "next_steps", "Next steps", "What remains to be done.", Kind::kList},
    {"relevantFiles", "relevant_files", "Relevant files",
     "Files that matter, each with why it matters.", Kind::kFiles},
}};

std::string* StringField(Checkpoint& c, std::size_t i) {
  return i == 0 ? &c.goal : i == 4 ? &c.current_state : nullptr;
}
const std::string* StringField(const Checkpoint& c, std::size_t i) {
  return StringField(const_cast<Checkpoint&>(c), i);
}
std::vector<std::string>* ListField(Checkpoint& c, std::size_t i) {
  switch (i) {
    case 1: return &c.instructions;
    case 2: return &c.discoveries;
    case 3: return &c.accomplished;
    case 5: return &c.next_steps;
    default: return nullptr;
  }
}
const std::vector<std::string>* ListField(const Checkpoint& c, std::size_t i) {
  return ListField(const_cast<Checkpoint&>(c), i);
}

constexpr std::string_view kWhitespace = " \t\r\n";

std::string_view Trim(std::string_view s) {
  const auto b = s.find_first_not_of(kWhitespace);
  if (b == std::string_view::npos) return {};
  const auto e = s.find_last_not_of(kWhitespace);
  return s.substr(b, e - b + 1);
}

bool IsBlank(std::string_view s) { return Trim(s).empty(); }

bool StartsWith(std::string_view s, std::string_view prefix) {
  return s.size() >= prefix.size() && s.compare(0, prefix.size(), prefix) == 0;
}

// ---------------------------------------------------------------------------------------------
// JSON object -> Checkpoint. Forgiving only where the meaning is unambiguous (R4.2); anything
// else makes the whole reply "not a checkpoint" so it is kept as text instead (R4.3).

// A goal or currentState written as a list of lines is still one text.
bool ToText(const Json& v, std::string* out) {
  if (v.is_null()) {
    out->clear();
    return true;
  }
  if (v.is_string()) {
    *out = v.get<std::string>();
    return true;
  }
  if (!v.is_array()) return false;
  std::string joined;
  bool first = true;
  for (const auto& e : v) {
    if (!e.is_string()) return false;
    if (!first) joined += '\n';
    joined += e.get_ref<const std::string&>();
    first = false;
  }
  *out = std::move(joined);
  return true;
}

// A single string where a list is expected is a one-item list. Blank items carry nothing and
// would render as empty bullets, so they are dropped.
bool ToList(const Json& v, std::vector<std::string>* out) {
  out->clear();
  if (v.is_null()) return true;
  if (v.is_string()) {
    if (!IsBlank(v.get_ref<const std::string&>())) out->push_back(v.get<std::string>());
    return true;
  }
  if (!v.is_array()) return false;
  for (const auto& e : v) {
    if (!e.is_string()) return false;
    if (!IsBlank(e.get_ref<const std::string&>())) out->push_back(e.get<std::string>());
  }
  return true;
}

// `salvaged`: the object came out of SalvageTruncatedJson, whose last list element may be an
// object cut before its `path`; that element is dropped instead of failing the whole reply.
bool ToFile(const Json& v, bool salvaged, std::vector<RelevantFile>* out) {
  if (v.is_string()) {
    if (!IsBlank(v.get_ref<const std::string&>())) out->push_back({v.get<std::string>(), {}});
    return true;
  }
  if (!v.is_object()) return false;
  const auto path = v.find("path");
  if (path == v.end()) return salvaged;
  if (!path->is_string()) return false;
  RelevantFile f;
  f.path = path->get<std::string>();
  if (const auto why = v.find("why"); why != v.end() && !ToText(*why, &f.why)) return false;
  if (!IsBlank(f.path)) out->push_back(std::move(f));
  return true;
}

bool ToFiles(const Json& v, bool salvaged, std::vector<RelevantFile>* out) {
  out->clear();
  if (v.is_null()) return true;
  if (!v.is_array()) return ToFile(v, salvaged, out);
  for (const auto& e : v) {
    if (!ToFile(e, salvaged, out)) return false;
  }
  return true;
}

const Json* FindSection(const Json& obj, const Section& s) {
  if (auto it = obj.find(s.key); it != obj.end()) return &*it;
  if (auto it = obj.find(s.alt_key); it != obj.end()) return &*it;
  return nullptr;
}

// Fills `out` from `obj`. False when the object is not a checkpoint: a member of a shape with
// no clear meaning, or not a single member the summarizer was asked for.
bool FromJson(const Json& obj, const std::vector<OutputField>& plugin_fields, bool salvaged,
              ParsedCheckpoint* out) {
  if (!obj.is_object()) return false;
  bool any = false;
  Checkpoint c;
  for (std::size_t i = 0; i < kSections.size(); ++i) {
    const Json* v = FindSection(obj, kSections[i]);
    if (v == nullptr) continue;
    any = true;
    bool ok = false;
    switch (kSections[i].kind) {
      case Kind::kString: ok = ToText(*v, StringField(c, i)); break;
      case Kind::kList: ok = ToList(*v, ListField(c, i)); break;
      case Kind::kFiles: ok = ToFiles(*v, salvaged, &c.relevant_files); break;
    }
    if (!ok) return false;
  }
  std::map<std::string, std::string> plugins;
  for (const auto& f : plugin_fields) {
    if (auto it = obj.find(f.name); it != obj.end()) {
      plugins[f.name] = it->dump(-1, ' ', false, Json::error_handler_t::replace);
      any = true;
    }
  }
  if (!any) return false;
  out->checkpoint = std::move(c);
  out->plugin_fields = std::move(plugins);
  return true;
}

// ---------------------------------------------------------------------------------------------
// Locating the JSON inside a reply.

// Offset one past the '}' that closes the object opening at text[open], or npos when the text
// ends first. Strings are skipped so braces inside them do not count.
std::size_t MatchingBrace(std::string_view text, std::size_t open) {
  int depth = 0;
  bool in_string = false;
  for (std::size_t i = open; i < text.size(); ++i) {
    const char ch = text[i];
    if (in_string) {
      if (ch == '\\') {
        ++i;
      } else if (ch == '"') {
        in_string = false;
      }
    } else if (ch == '"') {
      in_string = true;
    } else if (ch == '{' || ch == '[') {
      ++depth;
    } else if (ch == '}' || ch == ']') {
      if (--depth == 0) return i + 1;
    }
  }
  return std::string_view::npos;
}

// Where the JSON is expected: inside the first ``` fence whose content opens with '{' or '['
// (a fence cut by the output limit runs to the end), else the whole reply.
std::string_view JsonRegion(std::string_view reply) {
  std::size_t from = 0;
  while (true) {
    const std::size_t fence = reply.find("```", from);
    if (fence == std::string_view::npos) return reply;
    // The opening fence's line may name a language ("```json"); the content starts after it.
    const std::size_t eol = reply.find('\n', fence);
    if (eol == std::string_view::npos) return reply;
    const std::size_t close = reply.find("```", eol + 1);
    std::string_view content = reply.substr(
        eol + 1, close == std::string_view::npos ? std::string_view::npos : close - eol - 1);
    const std::string_view t = Trim(content);
    if (!t.empty() && (t.front() == '{' || t.front() == '[')) return t;
    if (close == std::string_view::npos) return reply;
    from = close + 3;
  }
}

}  // namespace

bool Checkpoint::empty() const noexcept {
  return goal.empty() && instructions.empty() && discoveries.empty() && accomplished.empty() &&
         current_state.empty() && next_steps.empty() && relevant_files.empty() && text.empty();
}

// ---------------------------------------------------------------------------------------------
// SalvageTruncatedJson: a validating scanner that remembers the last position where the text
// read so far, with its open containers closed, is valid JSON. Such a "safe point" follows an
// opening bracket or a complete value in array-element or member-value position; it never
// falls inside a string, so the result cannot split a UTF-8 sequence or an escape.
//
// Every push and every pop of a container creates a safe point, so after the last safe point
// the container stack no longer changes: the stack at the end of the scan is the one to close.

namespace {

enum class Scan : std::uint8_t { kComplete, kIncomplete, kInvalid };

// A string starting at text[i] == '"'. On kComplete, *end is one past the closing quote.
Scan ScanString(std::string_view text, std::size_t i, std::size_t* end) {
  const auto* bytes = reinterpret_cast<const unsigned char*>(text.data());
  for (++i; i < text.size();) {
    const unsigned char b = bytes[i];
    if (b == '"') {
      *end = i + 1;
      return Scan::kComplete;
    }
    if (b < 0x20) return Scan::kInvalid;
    if (b == '\\') {
      const jsonutil::Escape e = jsonutil::DecodeEscape(bytes + i, text.size() - i);
      if (e.status != jsonutil::EscapeStatus::kOk) {
        return e.ended() ? Scan::kIncomplete : Scan::kInvalid;
      }
      i += e.length;
      continue;
    }
    if (b < 0x80) {
      ++i;
      continue;
    }
    // A sequence cut by the end of the text and a malformed one end the scan alike.
    const int len = utf8::SequenceLength(bytes + i, text.size() - i);
    if (len == 0) return Scan::kInvalid;
    i += static_cast<std::size_t>(len);
  }
  return Scan::kIncomplete;
}

bool IsDelimiter(char ch) {
  return ch == ',' || ch == '}' || ch == ']' || ch == ' ' || ch == '\t' || ch == '\n' || ch == '\r';
}

// A number at text[i]. It is complete only when a delimiter follows: "12" at the very end may
// have been "123".
Scan ScanNumber(std::string_view text, std::size_t i, std::size_t* end) {
  const std::size_t n = text.size();
  auto digit = [&](std::size_t k) { return k < n && text[k] >= '0' && text[k] <= '9'; };
  if (i < n && text[i] == '-') ++i;
  if (i >= n) return Scan::kIncomplete;
  if (text[i] == '0') {
    ++i;
  } else if (digit(i)) {
    while (digit(i)) ++i;
  } else {
    return Scan::kInvalid;
  }
  if (i < n && text[i] == '.') {
    ++i;
    if (i >= n) return Scan::kIncomplete;
    if (!digit(i)) return Scan::kInvalid;
    while (digit(i)) ++i;
  }
  if (i < n && (text[i] == 'e' || text[i] == 'E')) {
    ++i;
    if (i < n && (text[i] == '+' || text[i] == '-')) ++i;
    if (i >= n) return Scan::kIncomplete;
    if (!digit(i)) return Scan::kInvalid;
    while (digit(i)) ++i;
  }
  if (i >= n) return Scan::kIncomplete;
  if (!IsDelimiter(text[i])) return Scan::kInvalid;
  *end = i;
  return Scan::kComplete;
}

Scan ScanLiteral(std::string_view text, std::size_t i, std::size_t* end) {
  for (std::string_view lit : {"true", "false", "null"}) {
    if (text[i] != lit[0]) continue;
    const std::string_view have = text.substr(i, lit.size());
    if (have == lit) {
      *end = i + lit.size();
      return Scan::kComplete;
    }
    return StartsWith(lit, have) ? Scan::kIncomplete : Scan::kInvalid;
  }
  return Scan::kInvalid;
}

}  // namespace

std::optional<std::string> SalvageTruncatedJson(std::string_view text) {
  const std::size_t start = text.find_first_not_of(kWhitespace);
  if (start == std::string_view::npos || text[start] != '{') return std::nullopt;

  enum class State : std::uint8_t { kFirstKey, kKey, kColon, kValue, kFirstElement, kCommaOrEnd };
  struct Frame {
    bool object;
    State state;
  };
  std::vector<Frame> stack;
  stack.push_back({true, State::kFirstKey});
  std::size_t safe = start + 1;
  std::size_t i = start + 1;

  auto close_container = [&](char ch) -> bool {  // true when the root closed
    const bool object = stack.back().object;
    if (ch != (object ? '}' : ']')) return false;
    stack.pop_back();
    safe = i + 1;
    return true;
  };

  bool stop = false;
  while (!stop && !stack.empty()) {
    while (i < text.size() && kWhitespace.find(text[i]) != std::string_view::npos) ++i;
    if (i >= text.size()) break;
    Frame& top = stack.back();
    const char ch = text[i];
    std::size_t end = 0;
    switch (top.state) {
      case State::kFirstKey:
      case State::kKey:
        if (top.state == State::kFirstKey && ch == '}') {
          close_container(ch);
          ++i;
          break;
        }
        if (ch != '"' || ScanString(text, i, &end) != Scan::kComplete) {
          stop = true;
          break;
        }
        top.state = State::kColon;
        i = end;
        break;
      case State::kColon:
        if (ch != ':') {
          stop = true;
          break;
        }
        top.state = State::kValue;
        ++i;
        break;
      case State::kFirstElement:
      case State::kValue: {
        if (top.state == State::kFirstElement && ch == ']') {
          close_container(ch);
          ++i;
          break;
        }
        if (ch == '{' || ch == '[') {
          if (stack.size() >= static_cast<std::size_t>(internal::kMaxJsonDepth)) {
            stop = true;
            break;
          }
          top.state = State::kCommaOrEnd;  // where the parent stands once the child completes
          stack.push_back({ch == '{', ch == '{' ? State::kFirstKey : State::kFirstElement});
          safe = ++i;
          break;
        }
        Scan s;
        if (ch == '"') {
          s = ScanString(text, i, &end);
        } else if (ch == '-' || (ch >= '0' && ch <= '9')) {
          s = ScanNumber(text, i, &end);
        } else {
          s = ScanLiteral(text, i, &end);
        }
        if (s != Scan::kComplete) {
          stop = true;
          break;
        }
        top.state = State::kCommaOrEnd;
        safe = i = end;
        break;
      }
      case State::kCommaOrEnd:
        if (ch == ',') {
          top.state = top.object ? State::kKey : State::kValue;
          ++i;
        } else if (close_container(ch)) {
          ++i;
        } else {
          stop = true;
        }
        break;
    }
  }

  std::string out(text.substr(start, safe - start));
  for (auto it = stack.rbegin(); it != stack.rend(); ++it) out += it->object ? '}' : ']';
  return out;
}

ParsedCheckpoint ParseCheckpoint(std::string_view reply, bool truncated,
                                 const std::vector<OutputField>& plugin_fields) {
  ParsedCheckpoint result;
  result.partial = truncated;
  // A reply with broken UTF-8 still carries a summary; the parser and the transcript want
  // valid text, so repair first.
  const std::string valid = ToValidUtf8(reply);
  const std::string_view trimmed = Trim(valid);
  if (trimmed.empty()) return result;  // nothing usable (R5.3)

  const std::string_view region = JsonRegion(trimmed);
  const std::string_view region_trimmed = Trim(region);
  const bool array_reply = !region_trimmed.empty() && region_trimmed.front() == '[';

  // Complete objects: each top-level {...} group of the region in turn, so that prose with a
  // stray brace before the JSON does not hide it.
  std::size_t cut_open = std::string_view::npos;  // where the object that runs to the end opens
  if (!array_reply) {
    cut_open = region.find('{');
    for (std::size_t open = cut_open; open != std::string_view::npos;) {
      const std::size_t close = MatchingBrace(region, open);
      if (close == std::string_view::npos) break;  // maybe cut (below)
      Json doc;
      if (jsonutil::Parse(region.substr(open, close - open), "the summarizer's reply", &doc).ok() &&
          FromJson(doc, plugin_fields, /*salvaged=*/false, &result)) {
        result.usable = true;
        result.partial = false;  // the object is whole; only what followed it was cut
        return result;
      }
      open = cut_open = region.find('{', close);
    }
  }

  if (truncated) {
    if (cut_open != std::string_view::npos) {
      if (auto salvaged = SalvageTruncatedJson(region.substr(cut_open))) {
        Json doc;
        // A cut reply whose complete members are all empty wrote nothing usable either.
        if (jsonutil::Parse(*salvaged, "the salvaged reply", &doc).ok() &&
            FromJson(doc, plugin_fields, /*salvaged=*/true, &result) &&
            (!result.checkpoint.empty() || !result.plugin_fields.empty())) {
          result.usable = true;
          return result;
        }
        result = ParsedCheckpoint{};
        result.partial = true;
      }
    }
    // A reply that is nothing but an unfinished JSON object has no prose to fall back on;
    // keeping its fragment as a "summary" would hide the real problem (R5.3).
    if (trimmed.front() == '{' || StartsWith(trimmed, "```") || StartsWith("```", trimmed)) {
      return result;
    }
  }

  result.checkpoint = Checkpoint{};
  result.checkpoint.structured = false;
  result.checkpoint.text = std::string(trimmed);
  result.plugin_fields.clear();
  result.usable = true;
  return result;
}

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

void AppendItem(std::string_view item, std::string& out) {
  out += "- ";
  std::size_t pos = 0;
  while (true) {
    const std::size_t nl = item.find('\n', pos);
    out.append(item.substr(pos, nl == std::string_view::npos ? nl : nl - pos));
    if (nl == std::string_view::npos) break;
    out += "\n  ";
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

}  // namespace

std::string RenderCheckpoint(const Checkpoint& c) {
  std::string out(kHeader);
  out += '\n';
  if (!c.structured) {
    out += '\n';
    out += c.text;
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
    // Some transports drop a final newline; the layout does not depend on it.
    Checkpoint structured;
    std::string restored;
    if (!rest.empty() && rest.back() != '\n' && StartsWith(rest, "\n## ")) {
      restored = std::string(rest) + '\n';
      rest = restored;
    }
    if (ParseStructured(rest, &structured)) return structured;
    // Text-only: what follows the header and its blank line.
    if (StartsWith(rest, "\n")) rest.remove_prefix(1);
    c.structured = false;
    c.text = std::string(rest);
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

std::string CheckpointJsonSchema(const std::vector<OutputField>& plugin_fields) {
  Json properties = Json::object();
  Json required = Json::array();
  for (const Section& s : kSections) {
    Json p;
    switch (s.kind) {
      case Kind::kString: p = {{"type", "string"}}; break;
      case Kind::kList: p = {{"type", "array"}, {"items", {{"type", "string"}}}}; break;
      case Kind::kFiles:
        p = {{"type", "array"},
             {"items",
              {{"type", "object"},
               {"properties", {{"path", {{"type", "string"}}}, {"why", {{"type", "string"}}}}},
               {"required", Json::array({"path", "why"})},
               {"additionalProperties", false}}}};
        break;
    }
    p["description"] = s.description;
    properties[s.key] = std::move(p);
    required.push_back(s.key);
  }
  for (const auto& f : plugin_fields) {
    Json p;
    // A plugin's schema that is not a JSON object cannot be embedded; the description alone
    // still tells the model what to write.
    if (!jsonutil::Parse(f.json_schema, "a plugin field's schema", &p).ok() || !p.is_object()) {
      p = Json::object();
    }
    if (!f.description.empty() && !p.contains("description")) p["description"] = f.description;
    properties[f.name] = std::move(p);
    // Required too: strict structured-output modes insist that every property be listed.
    required.push_back(f.name);
  }
  Json schema = {{"type", "object"},
                 {"properties", std::move(properties)},
                 {"required", std::move(required)},
                 {"additionalProperties", false}};
  return schema.dump(-1, ' ', false, Json::error_handler_t::replace);
}

std::string CheckpointToJson(const Checkpoint& c) {
  Json j = Json::object();
  // A text-only checkpoint has no sections; its text is where things stand.
  j["goal"] = c.structured ? c.goal : std::string();
  j["instructions"] = c.instructions;
  j["discoveries"] = c.discoveries;
  j["accomplished"] = c.accomplished;
  j["currentState"] = c.structured ? c.current_state : c.text;
  j["nextSteps"] = c.next_steps;
  Json files = Json::array();
  for (const auto& f : c.relevant_files) files.push_back({{"path", f.path}, {"why", f.why}});
  j["relevantFiles"] = std::move(files);
  return j.dump(-1, ' ', false, Json::error_handler_t::replace);
}

}  // namespace v0
}  // namespace recap
