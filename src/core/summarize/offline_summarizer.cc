#include "recap/offline_summarizer.h"

#include <algorithm>
#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string_view>
#include <unordered_map>
#include <unordered_set>
#include <utility>

#include "recap/checkpoint.h"
#include "recap/measure.h"
#include "recap/tail_reducer.h"
#include "recap/transcript.h"

#include "json/json_util.h"
#include "recap_internal/json_depth.h"
#include "summarize/offline_reading.h"
#include "summarize/summarize.h"

namespace recap {
inline namespace v0 {

namespace {

using jsonutil::Json;

// Caps keep a checkpoint bounded however long the session: each compaction merges the prior
// and extends it, so without them the lists would grow for ever. The latest entries win.
constexpr std::size_t kMaxInstructions = 50;
constexpr std::size_t kMaxAccomplished = 50;
constexpr std::size_t kMaxDiscoveries = 30;
constexpr std::size_t kMaxFiles = 30;
constexpr std::size_t kMaxNextSteps = 20;          // the first unfinished items of the to-do list
constexpr std::size_t kInstructionChars = 300;     // an older request, once the budget is spent
constexpr std::size_t kInstructionsBudget = 6000;  // the newest requests are kept whole within
constexpr std::size_t kGoalChars = 1000;
constexpr std::size_t kStateChars = 1000;
constexpr std::size_t kLineChars = 200;        // a main argument or an error's first line
constexpr std::size_t kPriorTextChars = 2000;  // a text-only prior, kept as a discovery
constexpr std::size_t kMaxPathBytes = 260;

std::string_view Trim(std::string_view s) {
  const auto b = s.find_first_not_of(" \t\r\n");
  if (b == std::string_view::npos) return {};
  return s.substr(b, s.find_last_not_of(" \t\r\n") - b + 1);
}

// One line of at most `max` code points: runs of whitespace become one space, a longer text
// ends with "…". (The reducer's marker would be noise in a one-line entry.) Reads no more of
// `text` than the line needs: a code point is at most four bytes (an invalid byte counts as
// one), so 4 * max + 4 bytes of the flattened line settle whether it is longer than `max`.
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

// The line of a tool's error output that says what went wrong: a traceback's last line (the
// exception), else the first line that mentions an error or failure (test runners print
// banners first), else the first line.
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
      if (line.find(word) != std::string_view::npos) return OneLine(line, kLineChars);
    }
  }
  return OneLine(lines.front(), kLineChars);
}

// ---------------------------------------------------------------------------------------------
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

// True when `line` is a diff header ("diff --git a/x b/x", "--- a/x", "+++ b/x").
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

// Tool-call arguments as JSON; discarded when they are not JSON, or nest deeper than
// internal::kMaxJsonDepth (R13.1): ArgumentFiles recurses, so such arguments are read as text.
Json ParseArguments(std::string_view arguments) {
  if (internal::FindTooDeep(arguments) != std::string_view::npos) {
    return Json(Json::value_t::discarded);
  }
  return Json::parse(arguments.begin(), arguments.end(), nullptr, false);
}

// The argument that says what a call was about: a command, a path, a query — else the first
// string, else the JSON text. `doc` is ParseArguments(arguments).
std::string MainArgument(const Json& doc, std::string_view arguments) {
  if (doc.is_discarded()) return OneLine(arguments, kLineChars);
  if (doc.is_string()) return OneLine(doc.get_ref<const std::string&>(), kLineChars);
  if (!doc.is_object()) return OneLine(arguments, kLineChars);
  for (std::string_view key : {"command", "cmd", "path", "file_path", "filePath", "file",
                               "filename", "url", "query", "pattern", "name", "id"}) {
    auto it = doc.find(key);
    if (it == doc.end()) continue;
    if (it->is_string()) return OneLine(it->get_ref<const std::string&>(), kLineChars);
    if (it->is_number()) return it->dump();
  }
  for (const auto& [k, v] : doc.items()) {
    if (v.is_string()) return OneLine(v.get_ref<const std::string&>(), kLineChars);
  }
  return doc.empty() ? std::string() : OneLine(arguments, kLineChars);
}

// ---------------------------------------------------------------------------------------------

// The newest `cap` distinct entries of a list, gathered newest first: an entry met again
// counts at its newest place, and once `cap` are gathered the older ones need not be read at
// all. Memory and time stay bounded by the cap and what is read, however long the span (a
// search of the whole list for each entry made long spans quadratic).
class NewestDistinct {
 public:
  explicit NewestDistinct(std::size_t cap) : cap_(cap) {}
  bool full() const { return items_.size() >= cap_; }
  void Add(std::string item) {
    if (full() || item.empty() || seen_.count(item) != 0) return;
    seen_.insert(item);
    items_.push_back(std::move(item));
  }
  // The entries of `older` (oldest first) as if they came before everything added so far.
  void AddOlder(std::vector<std::string>& older) {
    for (auto it = older.rbegin(); it != older.rend() && !full(); ++it) Add(std::move(*it));
  }
  std::vector<std::string> OldestFirst() {
    std::reverse(items_.begin(), items_.end());
    return std::move(items_);
  }

 private:
  std::size_t cap_;
  std::vector<std::string> items_;  // newest first
  std::unordered_set<std::string> seen_;
};

struct PathSeen {
  std::string path;
  std::vector<std::string> used_by;     // the first few tools whose arguments named it
  std::vector<std::string> printed_by;  // the first few tools whose output named it
};

// Paths only printed by tools (a `find` may print millions) are tracked up to this many
// distinct ones; paths that calls name are always tracked. Keeps memory bounded: only 30
// files reach the checkpoint.
constexpr std::size_t kMaxPrintedPaths = 10000;

// The text items of a tool result joined by newlines: a view of the single text when there is
// one (the usual case), else joined into `scratch`.
std::string_view ResultText(const ToolResult& r, std::string& scratch) {
  const std::string* only = nullptr;
  std::size_t texts = 0;
  for (const auto& item : r.content) {
    if (const auto* t = std::get_if<Text>(&item)) {
      only = &t->text;
      ++texts;
    }
  }
  if (texts <= 1) return only == nullptr ? std::string_view() : std::string_view(*only);
  scratch.clear();
  for (const auto& item : r.content) {
    if (const auto* t = std::get_if<Text>(&item)) {
      if (!scratch.empty()) scratch += '\n';
      scratch += t->text;
    }
  }
  return scratch;
}

// A tool's name as the checkpoint shows it: one line, at most kLineChars.
std::string ToolName(std::string_view name) { return OneLine(name, kLineChars); }

// What a call's arguments say about files. `used`: the files it reads or writes (path-valued
// arguments, paths in a shell command, the files a patch names). `mentioned`: every path its
// arguments hold anywhere (a prompt, a file's new content), which makes a path that a tool
// printed worth keeping.
void ArgumentFiles(const Json& v, std::string_view key, std::vector<std::string>& used,
                   std::vector<std::string>& mentioned) {
  if (v.is_string()) {
    const std::string& s = v.get_ref<const std::string&>();
    const bool one_token =
        !s.empty() && s.size() <= kMaxPathBytes && std::all_of(s.begin(), s.end(), IsPathChar);
    if (IsPathKey(key) && one_token && HasLetter(s)) {
      used.push_back(s);
      mentioned.push_back(s);
      return;
    }
    const std::size_t before = mentioned.size();
    ScanPaths(s, mentioned);
    if (key == "command" || key == "cmd") {
      used.insert(used.end(), mentioned.begin() + static_cast<std::ptrdiff_t>(before),
                  mentioned.end());
    } else if (key == "patch" || key == "input" || key == "diff") {
      // A patch names its files on its header lines.
      for (std::size_t pos = 0; pos < s.size();) {
        const std::size_t nl = std::min(s.find('\n', pos), s.size());
        const std::string_view line(s.data() + pos, nl - pos);
        pos = nl + 1;
        if (line.substr(0, 4) == "*** " || IsDiffHeader(line)) ScanPaths(line, used);
      }
    }
  } else if (v.is_object()) {
    for (auto it = v.begin(); it != v.end(); ++it) {
      ArgumentFiles(it.value(), it.key(), used, mentioned);
    }
  } else if (v.is_array()) {
    for (const auto& e : v) ArgumentFiles(e, key, used, mentioned);
  }
}

// A string member of a JSON object, or "".
std::string_view Member(const Json& doc, std::string_view key) {
  if (!doc.is_object()) return {};
  auto it = doc.find(key);
  if (it == doc.end() || !it->is_string()) return {};
  return it->get_ref<const std::string&>();
}

// The to-do list after one call of a to-do tool: TodoWrite, update_plan and task_tracker state
// the whole list; TaskCreate adds an item (numbered as its result says, else in order),
// TaskUpdate changes one.
// Returns false when the call stated nothing about the list (TaskList, TaskGet).
bool ApplyTodoCall(std::string_view tool, const Json& doc, std::string_view result,
                   std::vector<offline::TodoItem>& list) {
  auto whole = [&](std::string_view member, std::initializer_list<std::string_view> text_keys) {
    if (!doc.is_object()) return false;
    auto it = doc.find(member);
    if (it == doc.end() || !it->is_array()) return false;
    std::vector<offline::TodoItem> items;
    for (const auto& e : *it) {
      offline::TodoItem item;
      for (std::string_view k : text_keys) {
        if (item.text.empty()) item.text = std::string(Member(e, k));
      }
      item.status = std::string(Member(e, "status"));
      item.id = std::string(Member(e, "id"));
      if (!Trim(item.text).empty()) items.push_back(std::move(item));
    }
    list = std::move(items);
    return true;
  };
  if (whole("todos", {"content", "activeForm"}) || whole("plan", {"step"}) ||
      whole("task_list", {"title", "notes"})) {
    return true;
  }
  if (tool == "TaskCreate") {
    offline::TodoItem item;
    item.text = std::string(Member(doc, "subject"));
    if (item.text.empty()) item.text = std::string(Member(doc, "description"));
    item.status = "pending";
    // "Task #3 created successfully: …"
    const std::size_t hash = result.find('#');
    if (hash != std::string_view::npos) {
      std::size_t end = hash + 1;
      while (end < result.size() && result[end] >= '0' && result[end] <= '9') ++end;
      item.id = std::string(result.substr(hash + 1, end - hash - 1));
    }
    if (item.id.empty()) item.id = std::to_string(list.size() + 1);
    if (!Trim(item.text).empty()) list.push_back(std::move(item));
    return true;
  }
  if (tool == "TaskUpdate") {
    std::string id(Member(doc, "taskId"));
    if (id.empty() && doc.is_object() && doc.contains("taskId") && doc["taskId"].is_number()) {
      id = doc["taskId"].dump();
    }
    for (auto& item : list) {
      if (item.id != id) continue;
      const std::string_view status = Member(doc, "status");
      if (!status.empty()) item.status = std::string(status);
      const std::string_view subject = Member(doc, "subject");
      if (!subject.empty()) item.text = std::string(subject);
    }
    return true;
  }
  return false;
}

// The checkpoint, in time linear in the span: one pass pairs results with calls and collects
// paths; the lists are then gathered newest first and stop at their caps.
// True when every section of `cp` is blank (blank items are dropped when a reply is read), so
// that as a reply it would carry no checkpoint (ParseCheckpoint).
bool NothingWritten(const Checkpoint& cp) {
  const auto blank = [](const std::string& s) { return Trim(s).empty(); };
  const auto all_blank = [&](const std::vector<std::string>& list) {
    return std::all_of(list.begin(), list.end(), blank);
  };
  return blank(cp.goal) && blank(cp.current_state) && blank(cp.text) &&
         all_blank(cp.instructions) && all_blank(cp.discoveries) && all_blank(cp.accomplished) &&
         all_blank(cp.next_steps) &&
         std::all_of(cp.relevant_files.begin(), cp.relevant_files.end(),
                     [&](const RelevantFile& f) { return blank(f.path); });
}

// A tool call of the span, with what its arguments and its result state.
struct CallSeen {
  std::string_view name;
  std::string main;
  std::string target;  // the file it works on, else its main argument: "the same call"
  offline::ToolKind kind;
  bool writes = false;
  std::vector<std::string> files;      // the files it reads or writes
  const ToolResult* result = nullptr;  // nullptr: its outcome is not in this span
  bool flagged = false;                // the result says it failed (flag, exit code, leading error)
  bool mentions = false;               // the result mentions an error
  bool rejected = false;               // the person refused it
  bool failed = false;                 // flagged, or mentions an error and the next call retried it
  Json doc;                            // the parsed arguments of a to-do call (kept for those only)
};

// "The same call": the same tool on the same target.
std::string SameCall(const CallSeen& c) { return std::string(c.name) + '\x1f' + c.target; }

// The checkpoint a build starts from: its prior's sections (the caller's prior, else the last
// checkpoint inside the span itself), or the text of a prior that had none.
Checkpoint StartFromPrior(const SummarySource& source) {
  const Transcript& span = *source.span;
  std::optional<Checkpoint> own_prior;
  const Checkpoint* prior = source.prior;
  if (prior == nullptr) {
    for (std::size_t i = span.size(); i-- > 0;) {
      if (!span[i].summary) continue;
      const std::string text = JoinedText(span[i]);
      if (internal::IsRenderedCheckpoint(text)) {
        own_prior = ParseRenderedCheckpoint(text);
        break;
      }
    }
    if (own_prior) prior = &*own_prior;
  }

  Checkpoint cp;
  if (prior != nullptr && prior->structured) {
    cp = *prior;
  } else if (prior != nullptr && !Trim(prior->text).empty()) {
    cp.discoveries.push_back("Earlier summary: " +
                             offline::CutText(Trim(prior->text), kPriorTextChars));
  }
  return cp;
}

// The calls of the span in order, each with its result when the span holds it; `mentioned`
// gets every path any call's arguments hold.
std::vector<CallSeen> ReadCalls(const Transcript& span,
                                std::unordered_set<std::string>& mentioned) {
  // Each call's result (the first one given for its id).
  std::unordered_map<std::string_view, const ToolResult*> results;
  for (const Message& m : span) {
    for (const auto& part : m.parts) {
      const auto* r = std::get_if<ToolResult>(&part);
      if (r != nullptr && results.count(r->call_id) == 0) results.emplace(r->call_id, r);
    }
  }

  // The calls, in order, with what their arguments and results state.
  std::vector<CallSeen> calls;
  std::string scratch;
  std::vector<std::string> used, mentions;
  for (const Message& m : span) {
    if (m.summary) continue;
    for (const auto& part : m.parts) {
      const auto* c = std::get_if<ToolCall>(&part);
      if (c == nullptr) continue;
      CallSeen seen;
      seen.name = c->name;
      seen.doc = ParseArguments(c->arguments);
      seen.main = MainArgument(seen.doc, c->arguments);
      const std::string_view sub = Member(seen.doc, "command");
      seen.kind = offline::KindOf(c->name, sub);
      seen.writes = offline::Writes(c->name, sub);
      used.clear();
      mentions.clear();
      if (seen.doc.is_discarded()) {
        ScanPaths(c->arguments, mentions);
        if (seen.kind == offline::ToolKind::kCommand) used = mentions;
      } else {
        ArgumentFiles(seen.doc, "", used, mentions);
      }
      for (auto& p : mentions) mentioned.insert(std::move(p));
      for (auto& p : used) {
        if (!offline::IsJunkPath(p)) seen.files.push_back(std::move(p));
      }
      seen.target = seen.kind == offline::ToolKind::kEdit && !seen.files.empty()
                        ? seen.files.front()
                        : seen.main;
      auto it = results.find(c->id);
      if (it != results.end()) {
        seen.result = it->second;
        const std::string_view text = ResultText(*seen.result, scratch);
        const auto code = offline::ReportedExitCode(text);
        seen.rejected = offline::IsRejection(text);
        seen.flagged =
            seen.result->is_error || (code && *code != 0) || offline::StartsWithFailure(text);
        seen.mentions = offline::MentionsError(text);
      }
      if (seen.kind != offline::ToolKind::kTodo) seen.doc = Json();
      calls.push_back(std::move(seen));
    }
  }
  // A failure the next call visibly retried: the same tool on the same target.
  for (std::size_t i = 0; i < calls.size(); ++i) {
    CallSeen& c = calls[i];
    if (c.result == nullptr) continue;
    c.failed = c.flagged || (c.mentions && i + 1 < calls.size() && calls[i + 1].name == c.name &&
                             calls[i + 1].target == c.target);
  }
  return calls;
}

// The goal: the first request a person made, unless the prior has one. Returns where it is.
std::optional<std::size_t> WriteGoal(const Transcript& span, Checkpoint& cp) {
  std::optional<std::size_t> goal_at;
  for (std::size_t i = 0; i < span.size() && cp.goal.empty(); ++i) {
    const Message& m = span[i];
    if (m.summary || !IsTurnStart(m)) continue;
    cp.goal = offline::CutText(offline::PersonText(JoinedText(m)), kGoalChars);
    if (!cp.goal.empty()) goal_at = i;
  }

  return goal_at;
}

// The person's requests and constraints, newest first: kept whole while the budget lasts,
// then cut; then the prior's. Returns where the span's newest request is.
std::optional<std::size_t> WriteInstructions(const Transcript& span, Checkpoint& cp) {
  NewestDistinct instructions(kMaxInstructions);
  std::size_t budget = kInstructionsBudget;
  std::optional<std::size_t> last_request;  // the span's newest request, by message
  for (std::size_t i = span.size(); i-- > 0 && !instructions.full();) {
    const Message& m = span[i];
    if (m.summary || !IsTurnStart(m)) continue;
    const std::string text = offline::PersonText(JoinedText(m));
    if (text.empty()) continue;
    if (!last_request) last_request = i;
    const std::size_t n = CountCodePoints(text);
    if (n <= budget) {
      budget -= n;
      instructions.Add(text);
    } else {
      instructions.Add(offline::CutText(text, std::max(budget, kInstructionChars)));
      budget = 0;
    }
  }
  instructions.AddOlder(cp.instructions);
  cp.instructions = instructions.OldestFirst();

  return last_request;
}

// Failures met, newest first, each saying whether a later call of the same tool on the same
// target succeeded.
void WriteDiscoveries(const std::vector<CallSeen>& calls, Checkpoint& cp) {
  std::string scratch;
  NewestDistinct discoveries(kMaxDiscoveries);
  std::unordered_set<std::string> succeeded_later;
  for (std::size_t i = calls.size(); i-- > 0 && !discoveries.full();) {
    const CallSeen& c = calls[i];
    if (c.result == nullptr) continue;
    if (!c.failed) {
      succeeded_later.insert(SameCall(c));
      continue;
    }
    const std::string name = ToolName(c.name);
    const std::string what = c.main.empty() ? name : name + ": " + c.main;
    if (c.rejected) {
      discoveries.Add(what + " was refused by the user");
      continue;
    }
    std::string entry = what + " failed";
    // Read only for the failures listed, not for every result that mentions an error.
    const std::string first = ErrorLine(ResultText(*c.result, scratch));
    if (!first.empty()) entry += ": " + first;
    entry += succeeded_later.count(SameCall(c)) != 0
                 ? " (resolved: a later " + name + " call on the same target succeeded)"
                 : std::string(" (not resolved yet)");
    discoveries.Add(std::move(entry));
  }
  discoveries.AddOlder(cp.discoveries);
  cp.discoveries = discoveries.OldestFirst();
}

// Outcomes: files written or edited (one entry a file, with its tools), commands that passed
// after failing, other actions that succeeded. Reads, searches and to-do lists are not.
void WriteAccomplished(const std::vector<CallSeen>& calls, Checkpoint& cp) {
  struct FileChange {
    std::vector<std::pair<std::string, std::size_t>> tools;  // tool, times
    bool wrote = false, edited = false;
    std::size_t last = 0;
  };
  std::map<std::string, FileChange> changes;
  std::vector<std::pair<std::size_t, std::string>> outcomes;  // call index, entry
  std::unordered_set<std::string> failed_before;
  for (std::size_t i = 0; i < calls.size(); ++i) {
    const CallSeen& c = calls[i];
    if (c.result == nullptr) continue;
    if (c.failed) {
      failed_before.insert(SameCall(c));
      continue;
    }
    const std::string name = ToolName(c.name);
    switch (c.kind) {
      case offline::ToolKind::kEdit:
        if (c.files.empty()) {
          outcomes.emplace_back(i, c.main.empty() ? name : name + ": " + c.main);
        }
        for (const std::string& f : c.files) {
          FileChange& fc = changes[f];
          auto t = std::find_if(fc.tools.begin(), fc.tools.end(),
                                [&](const auto& e) { return e.first == name; });
          if (t == fc.tools.end()) {
            fc.tools.emplace_back(name, 1);
          } else {
            ++t->second;
          }
          (c.writes ? fc.wrote : fc.edited) = true;
          fc.last = i;
        }
        break;
      case offline::ToolKind::kCommand:
        if (failed_before.count(SameCall(c)) != 0) {
          outcomes.emplace_back(i, name + ": " + c.main + " passed after failing");
        }
        break;
      case offline::ToolKind::kOther:
        outcomes.emplace_back(i, c.main.empty() ? name : name + ": " + c.main);
        break;
      case offline::ToolKind::kRead:
      case offline::ToolKind::kTodo: break;
    }
  }
  for (const auto& [path, fc] : changes) {
    std::string entry = fc.wrote && fc.edited ? "Wrote and edited "
                        : fc.wrote            ? "Wrote "
                                              : "Edited ";
    entry += path + " (";
    for (std::size_t k = 0; k < fc.tools.size(); ++k) {
      if (k) entry += ", ";
      entry += fc.tools[k].first;
      if (fc.tools[k].second > 1) entry += " \xC3\x97" + std::to_string(fc.tools[k].second);
    }
    outcomes.emplace_back(fc.last, entry + ")");
  }
  std::stable_sort(outcomes.begin(), outcomes.end(),
                   [](const auto& x, const auto& y) { return x.first > y.first; });
  NewestDistinct accomplished(kMaxAccomplished);
  for (auto& o : outcomes) accomplished.Add(std::move(o.second));
  accomplished.AddOlder(cp.accomplished);
  cp.accomplished = accomplished.OldestFirst();
}

// Where things stand: the latest assistant text.
void WriteCurrentState(const Transcript& span, Checkpoint& cp) {
  for (std::size_t i = span.size(); i-- > 0;) {
    const Message& m = span[i];
    if (m.summary || m.role != Role::kAssistant) continue;
    const std::string joined = JoinedText(m);
    if (Trim(joined).empty()) continue;
    cp.current_state = offline::CutText(Trim(joined), kStateChars);
    break;
  }
}

// Next steps: the newest to-do list's unfinished items, and the last request when nothing
// answered it.
void WriteNextSteps(const Transcript& span, const std::vector<CallSeen>& calls,
                    std::optional<std::size_t> last_request, std::optional<std::size_t> goal_at,
                    Checkpoint& cp) {
  std::string scratch;
  std::vector<offline::TodoItem> todo;
  bool have_todo = false;
  for (const CallSeen& c : calls) {
    if (c.kind != offline::ToolKind::kTodo || (c.result != nullptr && c.failed)) continue;
    const std::string_view result =
        c.result == nullptr ? std::string_view() : ResultText(*c.result, scratch);
    if (ApplyTodoCall(c.name, c.doc, result, todo)) have_todo = true;
  }
  std::vector<std::string> next;
  for (const auto& item : todo) {
    if (next.size() >= kMaxNextSteps) break;
    if (offline::TodoFinished(item.status)) continue;
    std::string step = offline::CutText(offline::PersonText(item.text), kLineChars);
    if (item.status == "in_progress") step += " (in progress)";
    next.push_back(std::move(step));
  }
  // (Not the goal's own request: a span cut inside its first turn ends with the request, and
  // its answer is in what the compaction keeps.)
  if (last_request && last_request != goal_at) {
    bool answered = false;
    for (std::size_t i = *last_request + 1; i < span.size() && !answered; ++i) {
      answered = span[i].role == Role::kAssistant && !Trim(JoinedText(span[i])).empty();
    }
    if (!answered) {
      next.push_back("Answer the user's last request: " +
                     offline::CutText(offline::PersonText(JoinedText(span[*last_request])),
                                      kInstructionChars));
    }
  }
  if (have_todo || !next.empty()) cp.next_steps = std::move(next);
}

// Files: the ones this span's calls read or wrote come first, then the prior's, then those
// tools printed that a call's arguments also name, up to the cap; shown prior first, then in
// order of appearance.
void WriteFiles(const Transcript& span, const std::vector<CallSeen>& calls,
                const std::unordered_set<std::string>& mentioned, Checkpoint& cp) {
  std::vector<PathSeen> paths;
  std::unordered_map<std::string, std::size_t> path_index;
  auto note_path = [&](const std::string& p, bool in_arguments, std::string_view tool) {
    auto at = path_index.find(p);
    if (at == path_index.end()) {
      if (!in_arguments && path_index.size() >= kMaxPrintedPaths) return;
      at = path_index.emplace(p, paths.size()).first;
      paths.push_back(PathSeen{p, {}, {}});
    }
    auto& tools = in_arguments ? paths[at->second].used_by : paths[at->second].printed_by;
    if (tools.size() >= 3) return;
    std::string shown = ToolName(tool);
    if (std::find(tools.begin(), tools.end(), shown) == tools.end())
      tools.push_back(std::move(shown));
  };
  std::unordered_map<std::string_view, std::string_view> call_names;
  std::vector<std::string> found;
  std::size_t next_call = 0;
  for (const Message& m : span) {
    if (m.summary) continue;
    for (const auto& part : m.parts) {
      if (const auto* c = std::get_if<ToolCall>(&part)) {
        call_names[c->id] = c->name;
        for (const auto& p : calls[next_call].files) note_path(p, true, c->name);
        ++next_call;
      } else if (const auto* r = std::get_if<ToolResult>(&part)) {
        auto name = call_names.find(r->call_id);
        const std::string_view tool =
            name == call_names.end() ? std::string_view("a tool") : name->second;
        found.clear();
        for (const auto& item : r->content) {
          if (const auto* t = std::get_if<Text>(&item)) ScanPaths(t->text, found);
        }
        for (const auto& p : found) {
          if (mentioned.count(p) != 0 && !offline::IsJunkPath(p)) note_path(p, false, tool);
        }
      }
    }
  }

  std::set<std::string> chosen;
  std::size_t room = kMaxFiles;
  auto choose = [&](const std::string& p) {
    if (room == 0 || chosen.count(p) != 0) return;
    chosen.insert(p);
    --room;
  };
  for (const auto& s : paths) {
    if (!s.used_by.empty()) choose(s.path);
  }
  for (const auto& f : cp.relevant_files) {
    if (!offline::IsJunkPath(f.path)) choose(f.path);
  }
  for (const auto& s : paths) choose(s.path);

  std::vector<RelevantFile> files;
  std::set<std::string> placed;
  for (auto& f : cp.relevant_files) {
    if (chosen.count(f.path) == 0 || !placed.insert(f.path).second) continue;
    files.push_back(std::move(f));
  }
  for (const auto& s : paths) {
    if (chosen.count(s.path) == 0) continue;
    const bool used_by_call = !s.used_by.empty();
    const auto& tools = used_by_call ? s.used_by : s.printed_by;
    std::string why = used_by_call ? "used by " : "seen in the output of ";
    for (std::size_t k = 0; k < tools.size(); ++k) why += (k ? ", " : "") + tools[k];
    if (!placed.insert(s.path).second) {
      auto it = std::find_if(files.begin(), files.end(),
                             [&s](const RelevantFile& f) { return f.path == s.path; });
      if (it != files.end() && it->why.empty()) it->why = std::move(why);
      continue;
    }
    files.push_back({s.path, std::move(why)});
  }
  cp.relevant_files = std::move(files);
}

// The checkpoint of a span, section by section (SPEC §5's order).
Checkpoint Build(const SummarySource& source) {
  const Transcript& span = *source.span;
  Checkpoint cp = StartFromPrior(source);
  std::unordered_set<std::string> mentioned;
  const std::vector<CallSeen> calls = ReadCalls(span, mentioned);
  const std::optional<std::size_t> goal_at = WriteGoal(span, cp);
  const std::optional<std::size_t> last_request = WriteInstructions(span, cp);
  WriteDiscoveries(calls, cp);
  WriteAccomplished(calls, cp);
  WriteCurrentState(span, cp);
  WriteNextSteps(span, calls, last_request, goal_at, cp);
  WriteFiles(span, calls, mentioned, cp);
  cp.structured = true;
  cp.text.clear();
  return cp;
}

// Characters of reply per token of max_output_tokens, as the rest of recap estimates them.
constexpr std::size_t kCharsPerToken = 4;

// Drops the older half of `list` (at least one entry); the newest entries stay.
template <class T>
void DropOlderHalf(std::vector<T>& list) {
  list.erase(list.begin(), list.begin() + static_cast<std::ptrdiff_t>((list.size() + 1) / 2));
}

// Makes the checkpoint's JSON at most `max_chars` code points, giving up first what matters
// least: the older half of the finished work, as often as it takes, then of the errors met,
// of the files (the prior's come first) and of the user's instructions; then the current
// state and the goal are cut to one shorter line. The newest entries of every list stay
// longest. Returns the JSON, which is still longer than `max_chars` only when even the
// smallest checkpoint is.
std::string FitCheckpoint(Checkpoint& cp, std::size_t max_chars) {
  std::string json = CheckpointToJson(cp);
  auto fits = [&] { return CountCodePoints(json) <= max_chars; };
  if (fits()) return json;
  auto shrink = [&](auto&& drop, auto&& nonempty) {
    while (!fits() && nonempty()) {
      drop();
      json = CheckpointToJson(cp);
    }
  };
  shrink([&] { DropOlderHalf(cp.accomplished); }, [&] { return !cp.accomplished.empty(); });
  shrink([&] { DropOlderHalf(cp.discoveries); }, [&] { return !cp.discoveries.empty(); });
  shrink([&] { DropOlderHalf(cp.relevant_files); }, [&] { return !cp.relevant_files.empty(); });
  shrink([&] { DropOlderHalf(cp.instructions); }, [&] { return !cp.instructions.empty(); });
  // The first next steps are the next ones: the later half goes.
  shrink([&] { cp.next_steps.resize(cp.next_steps.size() / 2); },
         [&] { return !cp.next_steps.empty(); });
  for (std::size_t chars : {500, 200, 80}) {
    if (fits()) break;
    cp.current_state = OneLine(cp.current_state, chars);
    cp.goal = OneLine(cp.goal, chars);
    json = CheckpointToJson(cp);
  }
  return json;
}

class OfflineSummarizer final : public Provider {
 public:
  Result<Completion> Complete(const CompletionRequest& request,
                              const CancellationToken& cancel) override {
    if (cancel.IsCancelled()) return Status::Cancelled("the offline summarizer was cancelled");
    if (request.source == nullptr || request.source->span == nullptr) {
      return Status::InvalidArgument(
          "the offline summarizer needs the structured span that recap attaches to its "
          "summarizer requests (CompletionRequest::source); this request has none, and the "
          "offline summarizer cannot summarize rendered text. Use it as the Compactor's "
          "provider or as its fallback, not as a general-purpose model.");
    }
    Checkpoint cp = Build(*request.source);
    if (NothingWritten(cp)) {
      // A span of nothing recap can read (harness noise, empty turns; blank items are dropped
      // when read): said so, since a reply with every section empty is no checkpoint
      // (ParseCheckpoint) and would fail the compaction every time.
      cp.current_state = "The " + std::to_string(request.source->span->size()) +
                         " summarized messages held nothing to keep: no request, file, command "
                         "or result that recap could read.";
    }
    Completion c;
    c.finish_reason = FinishReason::kStop;
    // R5.1: the reply stays within max_output_tokens, as a model's would. The lists give way
    // first; a checkpoint that cannot fit even then is cut where a model's reply would be,
    // and reported so (the compactor keeps what it can recover, R5.2, or fails, R5.3).
    const std::size_t tokens = request.max_output_tokens;
    const bool limited = tokens != 0 && tokens <= SIZE_MAX / kCharsPerToken;
    const std::size_t max_chars = limited ? tokens * kCharsPerToken : SIZE_MAX;
    c.text = limited ? FitCheckpoint(cp, max_chars) : CheckpointToJson(cp);
    if (limited && CountCodePoints(c.text) > max_chars) {
      c.text.resize(PrefixBytesForCodePoints(c.text, max_chars));
      c.finish_reason = FinishReason::kLength;
    }
    return c;
  }

  std::string Name() const override { return "offline"; }
};

}  // namespace

std::unique_ptr<Provider> NewOfflineSummarizer() { return std::make_unique<OfflineSummarizer>(); }

namespace internal {
bool IsOfflineSummarizer(const Provider& provider) noexcept {
  return dynamic_cast<const OfflineSummarizer*>(&provider) != nullptr;
}
}  // namespace internal

}  // namespace v0
}  // namespace recap
