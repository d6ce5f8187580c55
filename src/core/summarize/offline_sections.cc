// The offline summarizer's checkpoint, section by section (SPEC §5's order): it starts from the
// prior, then the goal, the instructions, the discoveries, what was accomplished, the current
// state, the next steps and the files (Build).
#include <algorithm>
#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

#include "recap/checkpoint.h"
#include "recap/measure.h"
#include "recap/transcript.h"

#include "reading/transcript_reading.h"
#include "summarize/offline_build.h"
#include "summarize/summarize.h"

namespace recap {
inline namespace v0 {
namespace offline_build {

// The checkpoint, in time linear in the span: one pass pairs results with calls and collects
// paths; the lists are then gathered newest first and stop at their caps.

namespace {

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

// A tool's name as the checkpoint shows it: one line, at most kLineChars.
std::string ToolName(std::string_view name) { return OneLine(name, kLineChars); }

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
                             reading::CutText(Trim(prior->text), kPriorTextChars));
  }
  return cp;
}

// The goal: the first request a person made, unless the prior has one. Returns where it is.
std::optional<std::size_t> WriteGoal(const Transcript& span, Checkpoint& cp) {
  std::optional<std::size_t> goal_at;
  for (std::size_t i = 0; i < span.size() && cp.goal.empty(); ++i) {
    const Message& m = span[i];
    if (m.summary || !IsTurnStart(m)) continue;
    cp.goal = reading::CutText(reading::PersonText(JoinedText(m)), kGoalChars);
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
    const std::string text = reading::PersonText(JoinedText(m));
    if (text.empty()) continue;
    if (!last_request) last_request = i;
    const std::size_t n = CountCodePoints(text);
    if (n <= budget) {
      budget -= n;
      instructions.Add(text);
    } else {
      instructions.Add(reading::CutText(text, std::max(budget, kInstructionChars)));
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
      case reading::ToolKind::kEdit:
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
      case reading::ToolKind::kCommand:
        if (failed_before.count(SameCall(c)) != 0) {
          outcomes.emplace_back(i, name + ": " + c.main + " passed after failing");
        }
        break;
      case reading::ToolKind::kOther:
        outcomes.emplace_back(i, c.main.empty() ? name : name + ": " + c.main);
        break;
      case reading::ToolKind::kRead:
      case reading::ToolKind::kTodo: break;
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
// The agent's Markdown headings as plain lines ("## Summary" is "Summary"): inside a section of
// the checkpoint they would read as its own headings, and be shown escaped.
std::string WithoutHeadingMarks(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  std::size_t at = 0;
  while (at <= text.size()) {
    std::size_t nl = text.find('\n', at);
    if (nl == std::string_view::npos) nl = text.size();
    std::string_view line = text.substr(at, nl - at);
    std::size_t hashes = 0;
    while (hashes < line.size() && hashes < 6 && line[hashes] == '#') ++hashes;
    if (hashes > 0 && hashes < line.size() && line[hashes] == ' ') line.remove_prefix(hashes + 1);
    out.append(line);
    if (nl < text.size()) out += '\n';
    at = nl + 1;
  }
  return out;
}

void WriteCurrentState(const Transcript& span, Checkpoint& cp) {
  for (std::size_t i = span.size(); i-- > 0;) {
    const Message& m = span[i];
    if (m.summary || m.role != Role::kAssistant) continue;
    const std::string joined = JoinedText(m);
    if (Trim(joined).empty()) continue;
    cp.current_state = reading::CutText(Trim(WithoutHeadingMarks(joined)), kStateChars);
    break;
  }
}

// Next steps: the newest to-do list's unfinished items, and the last request when nothing
// answered it.
void WriteNextSteps(const Transcript& span, const std::vector<CallSeen>& calls,
                    std::optional<std::size_t> last_request, std::optional<std::size_t> goal_at,
                    Checkpoint& cp) {
  std::string scratch;
  std::vector<reading::TodoItem> todo;
  bool have_todo = false;
  for (const CallSeen& c : calls) {
    if (c.kind != reading::ToolKind::kTodo || (c.result != nullptr && c.failed)) continue;
    const std::string_view result =
        c.result == nullptr ? std::string_view() : ResultText(*c.result, scratch);
    if (ApplyTodoCall(c.name, c.doc, result, todo)) have_todo = true;
  }
  std::vector<std::string> next;
  for (const auto& item : todo) {
    if (next.size() >= kMaxNextSteps) break;
    if (reading::TodoFinished(item.status)) continue;
    std::string step = reading::CutText(reading::PersonText(item.text), kLineChars);
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
                     reading::CutText(reading::PersonText(JoinedText(span[*last_request])),
                                      kInstructionChars));
    }
  }
  if (have_todo || !next.empty()) cp.next_steps = std::move(next);
}

// Files: the ones this span's calls read or wrote come first, then the prior's, then those
// tools printed that a call's arguments also name, up to the cap; shown prior first, then in
// order of appearance.
// Adds `from`'s tools to `into`'s, each once, at most three.
void JoinTools(const std::vector<std::string>& from, std::vector<std::string>& into) {
  for (const std::string& t : from) {
    if (into.size() >= 3) break;
    if (std::find(into.begin(), into.end(), t) == into.end()) into.push_back(t);
  }
}

// A relative path that ends a full one the span also names ("src/a.py" of "/repo/src/a.py")
// is that file: listed once, by its full path, with the tools of both.
void MergeRelativeIntoFull(std::vector<PathSeen>& paths) {
  std::vector<bool> gone(paths.size(), false);
  for (std::size_t i = 0; i < paths.size(); ++i) {
    const std::string& rel = paths[i].path;
    if (rel.empty() || rel[0] == '/' || rel[0] == '~') continue;
    const std::string tail = "/" + (rel.rfind("./", 0) == 0 ? rel.substr(2) : rel);
    for (std::size_t j = 0; j < paths.size(); ++j) {
      const std::string& full = paths[j].path;
      if (j == i || gone[j] || full.empty() || full[0] != '/' || full.size() <= tail.size() ||
          full.compare(full.size() - tail.size(), tail.size(), tail) != 0) {
        continue;
      }
      JoinTools(paths[i].used_by, paths[j].used_by);
      JoinTools(paths[i].printed_by, paths[j].printed_by);
      gone[i] = true;
      break;
    }
  }
  std::size_t kept = 0;
  for (std::size_t i = 0; i < paths.size(); ++i) {
    if (gone[i]) continue;
    if (kept != i) paths[kept] = std::move(paths[i]);
    ++kept;
  }
  paths.resize(kept);
}

// A path that another one lies under is a folder ("/repo" of "/repo/src/a.py", "src" of
// "/repo/src/a.py"): no file to list.
void DropFolders(std::vector<PathSeen>& paths) {
  std::vector<bool> folder(paths.size(), false);
  for (std::size_t i = 0; i < paths.size(); ++i) {
    std::string p = paths[i].path;
    while (p.size() > 1 && p.back() == '/') p.pop_back();
    if (p.empty() || p == "/" || p == "." || p == "~") {
      folder[i] = true;
      continue;
    }
    const bool rooted = p[0] == '/' || p[0] == '~';
    const std::string under = p + "/";
    const std::string inside = "/" + p + "/";
    for (std::size_t j = 0; j < paths.size() && !folder[i]; ++j) {
      const std::string& q = paths[j].path;
      if (j == i) continue;
      folder[i] = q.rfind(under, 0) == 0 || (!rooted && q.find(inside) != std::string::npos);
    }
  }
  std::size_t kept = 0;
  for (std::size_t i = 0; i < paths.size(); ++i) {
    if (folder[i]) continue;
    if (kept != i) paths[kept] = std::move(paths[i]);
    ++kept;
  }
  paths.resize(kept);
}

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
          if (mentioned.count(p) != 0 && !reading::IsJunkPath(p)) note_path(p, false, tool);
        }
      }
    }
  }

  MergeRelativeIntoFull(paths);
  DropFolders(paths);

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
    if (!reading::IsJunkPath(f.path)) choose(f.path);
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

}  // namespace

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

void KeepLedger(const Ledger& ledger, std::size_t max_chars, Checkpoint& cp) {
  const std::string rendered = RenderCheckpoint(cp);
  std::size_t chars = CountCodePoints(rendered);
  // What the checkpoint lacks: the guard's answer with no budget (the text folded once).
  const LedgerGuard missing = GuardCheckpoint(rendered, ledger, SIZE_MAX);
  for (const LedgerEntry& e : missing.added) {
    chars += CountCodePoints(e.text) + 24;  // its list item, and a note
    if (chars > max_chars) break;
    switch (e.kind) {
      case LedgerKind::kRequest: break;  // WriteInstructions keeps them, clipped to its lines
      case LedgerKind::kFile: cp.relevant_files.push_back({e.text, "written or edited"}); break;
      case LedgerKind::kTodo: cp.next_steps.push_back(e.text); break;
      case LedgerKind::kFailure: cp.discoveries.push_back(e.text + " (not resolved yet)"); break;
      case LedgerKind::kIdentifier: break;
    }
  }
}

}  // namespace offline_build
}  // namespace v0
}  // namespace recap
