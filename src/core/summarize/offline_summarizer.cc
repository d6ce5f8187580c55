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
constexpr std::size_t kInstructionChars = 300;  // longer user texts are clipped
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

bool LooksLikeError(std::string_view text) {
  const std::string_view t = Trim(text);
  for (std::string_view p : {"Error", "error", "ERROR"}) {
    if (t.substr(0, p.size()) == p) return true;
  }
  for (std::string_view needle : {"Traceback", "error:", "Error:"}) {
    if (t.find(needle) != std::string_view::npos) return true;
  }
  return false;
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

void ArgumentPaths(const Json& v, std::string_view key, std::vector<std::string>& out) {
  if (v.is_string()) {
    const std::string& s = v.get_ref<const std::string&>();
    const bool one_token =
        !s.empty() && s.size() <= kMaxPathBytes && std::all_of(s.begin(), s.end(), IsPathChar);
    if (IsPathKey(key) && one_token && HasLetter(s)) {
      out.push_back(s);
    } else {
      ScanPaths(s, out);
    }
  } else if (v.is_object()) {
    for (auto it = v.begin(); it != v.end(); ++it) ArgumentPaths(it.value(), it.key(), out);
  } else if (v.is_array()) {
    for (const auto& e : v) ArgumentPaths(e, key, out);
  }
}

// Tool-call arguments as JSON; discarded when they are not JSON, or nest deeper than
// internal::kMaxJsonDepth (R13.1): ArgumentPaths recurses, so such arguments are read as text.
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

struct ResultInfo {
  bool failed = false;
  const ToolResult* result = nullptr;
};

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

// The checkpoint, in time linear in the span: one pass pairs results with calls and collects
// paths; the lists are then gathered newest first and stop at their caps.
Checkpoint Build(const SummarySource& source) {
  const Transcript& span = *source.span;

  // The prior: given by the caller, else the last checkpoint inside the span itself.
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
    cp.discoveries.push_back("Earlier summary: " + ClipText(Trim(prior->text), kPriorTextChars));
  }

  // Each call's result (the first one given for its id), and whether it failed.
  std::unordered_map<std::string_view, ResultInfo> results;
  std::string scratch;
  for (const Message& m : span) {
    for (const auto& part : m.parts) {
      const auto* r = std::get_if<ToolResult>(&part);
      if (r == nullptr || results.count(r->call_id) != 0) continue;
      results.emplace(r->call_id,
                      ResultInfo{r->is_error || LooksLikeError(ResultText(*r, scratch)), r});
    }
  }

  struct CallSeen {
    std::string_view name;
    std::string main;
    const ResultInfo* result;  // nullptr: its outcome is not in this span
  };
  std::vector<CallSeen> calls;
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
  for (const Message& m : span) {
    if (m.summary) continue;
    for (const auto& part : m.parts) {
      if (const auto* c = std::get_if<ToolCall>(&part)) {
        call_names[c->id] = c->name;
        auto it = results.find(c->id);
        const Json doc = ParseArguments(c->arguments);
        calls.push_back({c->name, MainArgument(doc, c->arguments),
                         it == results.end() ? nullptr : &it->second});
        found.clear();
        if (doc.is_discarded()) {
          ScanPaths(c->arguments, found);
        } else {
          ArgumentPaths(doc, "", found);
        }
        for (const auto& p : found) note_path(p, true, c->name);
      } else if (const auto* r = std::get_if<ToolResult>(&part)) {
        auto name = call_names.find(r->call_id);
        const std::string_view tool =
            name == call_names.end() ? std::string_view("a tool") : name->second;
        found.clear();
        for (const auto& item : r->content) {
          if (const auto* t = std::get_if<Text>(&item)) ScanPaths(t->text, found);
        }
        for (const auto& p : found) note_path(p, false, tool);
      }
    }
  }

  // The goal: the first request a person made, unless the prior has one.
  for (std::size_t i = 0; i < span.size() && cp.goal.empty(); ++i) {
    const Message& m = span[i];
    if (m.summary || !IsTurnStart(m)) continue;
    const std::string joined = JoinedText(m);
    if (!Trim(joined).empty()) cp.goal = ClipText(Trim(joined), kGoalChars);
  }

  // The user's instructions, newest first until the cap, then the prior's.
  NewestDistinct instructions(kMaxInstructions);
  for (std::size_t i = span.size(); i-- > 0 && !instructions.full();) {
    const Message& m = span[i];
    if (m.summary || !IsTurnStart(m)) continue;
    const std::string joined = JoinedText(m);
    if (!Trim(joined).empty()) instructions.Add(ClipText(Trim(joined), kInstructionChars));
  }
  instructions.AddOlder(cp.instructions);
  cp.instructions = instructions.OldestFirst();

  // Finished work and errors met, newest first. A failed call is resolved when a later call
  // of the same tool succeeded: the calls after it are the ones already read.
  NewestDistinct accomplished(kMaxAccomplished);
  NewestDistinct discoveries(kMaxDiscoveries);
  std::unordered_set<std::string_view> succeeded_later;
  for (std::size_t i = calls.size(); i-- > 0;) {
    if (accomplished.full() && discoveries.full()) break;
    const CallSeen& c = calls[i];
    if (c.result == nullptr) continue;
    const std::string name = ToolName(c.name);
    std::string what = c.main.empty() ? name : name + ": " + c.main;
    if (!c.result->failed) {
      succeeded_later.insert(c.name);
      accomplished.Add(std::move(what));
      continue;
    }
    if (discoveries.full()) continue;
    std::string entry = std::move(what) + " failed";
    const std::string first = ErrorLine(ResultText(*c.result->result, scratch));
    if (!first.empty()) entry += ": " + first;
    entry += succeeded_later.count(c.name) != 0 ? " (resolved: a later " + name + " call succeeded)"
                                                : std::string(" (not resolved yet)");
    discoveries.Add(std::move(entry));
  }
  accomplished.AddOlder(cp.accomplished);
  cp.accomplished = accomplished.OldestFirst();
  discoveries.AddOlder(cp.discoveries);
  cp.discoveries = discoveries.OldestFirst();

  // Where things stand: the latest assistant text.
  for (std::size_t i = span.size(); i-- > 0;) {
    const Message& m = span[i];
    if (m.summary || m.role != Role::kAssistant) continue;
    const std::string joined = JoinedText(m);
    if (Trim(joined).empty()) continue;
    cp.current_state = ClipText(Trim(joined), kStateChars);
    break;
  }

  // Files: the ones this span's calls touched come first, then the prior's, then those only
  // printed by tools, up to the cap; shown prior first, then in order of appearance.
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
  for (const auto& f : cp.relevant_files) choose(f.path);
  for (const auto& s : paths) choose(s.path);

  std::vector<RelevantFile> files;
  std::set<std::string> placed;
  for (auto& f : cp.relevant_files) {
    if (chosen.count(f.path) == 0 || !placed.insert(f.path).second) continue;
    files.push_back(std::move(f));
  }
  for (const auto& s : paths) {
    if (chosen.count(s.path) == 0) continue;
    const bool used = !s.used_by.empty();
    const auto& tools = used ? s.used_by : s.printed_by;
    std::string why = used ? "used by " : "seen in the output of ";
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
