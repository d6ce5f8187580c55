#include "checkpoint/ledger.h"

#include <algorithm>
#include <cctype>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <unordered_set>
#include <utility>

#include "recap/measure.h"

#include "checkpoint/sections.h"
#include "json/json_util.h"
#include "reading/transcript_reading.h"

namespace recap {
inline namespace v0 {

// Everything below is this file's own, in a namespace of its own rather than an anonymous one:
// recap_core may be built as one unity source, where other files' helpers of the same names
// (Folded, Between, Member, HasLetter) would meet these.
namespace ledger_build {

using jsonutil::Json;

constexpr std::size_t kFailureLineMaxBytes = 200;
constexpr std::size_t kCallWhatMaxBytes = 120;

std::string_view Trimmed(std::string_view s) {
  const auto space = [](char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; };
  while (!s.empty() && space(s.front())) s.remove_prefix(1);
  while (!s.empty() && space(s.back())) s.remove_suffix(1);
  return s;
}

// At most `max` bytes of `s`, never cutting a UTF-8 sequence.
std::string_view Utf8Prefix(std::string_view s, std::size_t max) {
  if (s.size() <= max) return s;
  std::size_t n = max;
  while (n > 0 && (static_cast<unsigned char>(s[n]) & 0xC0) == 0x80) --n;
  return s.substr(0, n);
}

std::string ClipRequest(std::string_view words) {
  const std::size_t chars = CountCodePoints(words);
  if (chars <= kLedgerRequestMaxChars) return std::string(words);
  return std::string(words.substr(0, PrefixBytesForCodePoints(words, kLedgerRequestMaxChars))) +
         " […" + std::to_string(chars - kLedgerRequestMaxChars) + " more characters]";
}

bool IsUrl(std::string_view t) { return t.rfind("http://", 0) == 0 || t.rfind("https://", 0) == 0; }

bool HasDigit(std::string_view t) {
  return std::any_of(t.begin(), t.end(), [](char c) { return c >= '0' && c <= '9'; });
}

bool HasLetter(std::string_view t) {
  return std::any_of(t.begin(), t.end(),
                     [](char c) { return std::isalpha(static_cast<unsigned char>(c)) != 0; });
}

// name.ext with a short alphanumeric extension and a name with a letter: "renderer.py".
bool LooksLikeFileName(std::string_view t) {
  const std::size_t dot = t.rfind('.');
  if (dot == std::string_view::npos || dot == 0 || dot + 1 >= t.size()) return false;
  const std::string_view ext = t.substr(dot + 1);
  if (ext.size() > 5 || !HasLetter(ext)) return false;
  for (char c : ext) {
    if (std::isalnum(static_cast<unsigned char>(c)) == 0) return false;
  }
  const std::string_view name = t.substr(0, dot);
  return HasLetter(name) && name.find_first_of(" ") == std::string_view::npos;
}

// A path a person typed: /x, ./x, ../x, ~/x, a folder (x/), two slashes or more, or a name
// with an extension after a slash ("lib/pay.py"); or a file name alone ("renderer.py"). One
// slash between two words is prose ("pros/cons", "and/or").
bool LooksLikePath(std::string_view t) {
  if (t.size() < 2) return false;
  const std::size_t slashes = static_cast<std::size_t>(std::count(t.begin(), t.end(), '/'));
  if (slashes == 0) return LooksLikeFileName(t);
  if (!HasLetter(t) && !HasDigit(t)) return false;
  if (t[0] == '/' || t.rfind("./", 0) == 0 || t.rfind("../", 0) == 0 || t.rfind("~/", 0) == 0) {
    return true;
  }
  if (t.back() == '/' || slashes >= 2) return true;
  const std::string_view last = t.substr(t.rfind('/') + 1);
  return LooksLikeFileName(last) || t.find_first_of("_0123456789") != std::string_view::npos;
}

// A JSON object's string member, or nothing.
std::optional<std::string> Member(const Json& object, const char* key) {
  if (!object.is_object()) return std::nullopt;
  const auto it = object.find(key);
  if (it == object.end() || !it->is_string()) return std::nullopt;
  return it->get<std::string>();
}

std::string Lowered(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

// The files an apply_patch text names: "*** Add File: p", "*** Update File: p",
// "*** Delete File: p", "*** Move to: p".
void PatchFiles(std::string_view patch, std::vector<std::string>* out) {
  static constexpr std::string_view kHeads[] = {
      "*** Add File: ", "*** Update File: ", "*** Delete File: ", "*** Move to: "};
  std::size_t at = 0;
  while (at < patch.size()) {
    std::size_t end = patch.find('\n', at);
    if (end == std::string_view::npos) end = patch.size();
    const std::string_view line = patch.substr(at, end - at);
    for (std::string_view head : kHeads) {
      if (line.rfind(head, 0) == 0) {
        const std::string_view path = Trimmed(line.substr(head.size()));
        if (!path.empty()) out->emplace_back(path);
      }
    }
    at = end + 1;
  }
}

// The files a plain shell command writes: `> path`, `>> path`, `tee [-a] path`, outside
// quotes (a `>` inside a quoted script is the script's).
void ShellWrites(std::string_view command, std::vector<std::string>* out) {
  struct Word {
    std::string text;
    bool quoted_start = false;
  };
  std::vector<Word> words;
  char quote = 0;
  bool in_word = false;
  for (std::size_t i = 0; i < command.size(); ++i) {
    const char c = command[i];
    if (quote != 0) {
      if (c == quote) quote = 0;
      words.back().text += c;
      continue;
    }
    if (c == ' ' || c == '\t' || c == '\n' || c == ';' || c == '|' || c == '&') {
      in_word = false;
      if (c == '&' && !words.empty() && !words.back().text.empty() &&
          words.back().text.back() == '>') {
        words.back().text += c;  // >&2 stays one word
        in_word = true;
      }
      continue;
    }
    if (!in_word) {
      words.push_back(Word{std::string(), c == '"' || c == '\''});
      in_word = true;
    }
    if (c == '"' || c == '\'') quote = c;
    words.back().text += c;
  }
  const auto add = [&](const Word& word) {
    std::string_view w = word.text;
    if (w.size() >= 2 && (w[0] == '"' || w[0] == '\'') && w.back() == w[0]) {
      w = w.substr(1, w.size() - 2);
    }
    if (w.empty() || w[0] == '&' || w[0] == '$' || w[0] == '(' || w.rfind("/dev/", 0) == 0) return;
    if (!HasLetter(w) && !HasDigit(w)) return;
    out->emplace_back(w);
  };
  for (std::size_t i = 0; i < words.size(); ++i) {
    const std::string& w = words[i].text;
    if (words[i].quoted_start) continue;
    if (w == ">" || w == ">>" || w == "1>" || w == "1>>") {
      if (i + 1 < words.size()) add(words[i + 1]);
    } else if (w.size() > 1 && w[0] == '>' && w[1] != '&' && w[1] != '(') {
      add(Word{w.substr(w[1] == '>' ? 2 : 1), false});
    } else if (w == "tee") {
      std::size_t j = i + 1;
      while (j < words.size() && !words[j].text.empty() && words[j].text[0] == '-') ++j;
      if (j < words.size()) add(words[j]);
    }
  }
}

// A 64-bit FNV-1a hash of an entry's kind and lower-cased text: what deduplication remembers
// of every entry, pruned ones included, without a second copy of its text.
std::uint64_t EntryHash(LedgerKind kind, std::string_view text) {
  std::uint64_t h = 14695981039346656037ull ^ static_cast<std::uint64_t>(kind);
  for (char c : text) {
    const auto u = static_cast<unsigned char>(c);
    h ^= u >= 'A' && u <= 'Z' ? u + ('a' - 'A') : u;  // ASCII lower case, no locale call
    h *= 1099511628211ull;
  }
  return h;
}

class Builder {
 public:
  Builder(const Ledger& carried, std::size_t max_chars) : max_chars_(max_chars) {
    ledger_.pruned = carried.pruned;
    ledger_.pruned_from = carried.pruned_from;
    ledger_.pruned_to = carried.pruned_to;
    for (const LedgerEntry& e : carried.entries) Add(e.kind, e.text, e.message_id);
  }

  void Add(LedgerKind kind, std::string text, const std::string& message_id) {
    if (text.empty()) return;
    if (!seen_.insert(EntryHash(kind, text)).second) return;
    chars_ += text.size();
    ledger_.entries.push_back(LedgerEntry{kind, std::move(text), message_id});
    if (max_chars_ > 0 && chars_ > max_chars_) Prune(max_chars_ - max_chars_ / 4);
  }

  // Lets go of the oldest entries of the least important kinds until the text is within
  // `target` bytes (a quarter below the bound, so that pruning is rare).
  void Prune(std::size_t target) {
    static constexpr LedgerKind kOrder[] = {LedgerKind::kIdentifier, LedgerKind::kFailure,
                                            LedgerKind::kTodo, LedgerKind::kFile,
                                            LedgerKind::kRequest};
    std::vector<LedgerEntry>& entries = ledger_.entries;
    std::vector<bool> drop(entries.size(), false);
    std::size_t first = entries.size();
    std::size_t last = 0;
    for (LedgerKind kind : kOrder) {
      for (std::size_t i = 0; i < entries.size() && chars_ > target; ++i) {
        if (drop[i] || entries[i].kind != kind) continue;
        drop[i] = true;
        chars_ -= entries[i].text.size();
        ++ledger_.pruned[static_cast<std::size_t>(kind)];
        first = std::min(first, i);
        last = std::max(last, i);
      }
    }
    if (first == entries.size()) return;
    if (ledger_.pruned_from.empty()) ledger_.pruned_from = entries[first].message_id;
    ledger_.pruned_to = entries[last].message_id;
    std::size_t kept = 0;
    for (std::size_t i = 0; i < entries.size(); ++i) {
      if (drop[i]) continue;
      if (kept != i) entries[kept] = std::move(entries[i]);
      ++kept;
    }
    entries.resize(kept);
  }

  void Read(const Message& m) {
    if (m.summary) return;  // a checkpoint, or context recap made: what it holds is carried
    if (m.role == Role::kUser) ReadPerson(m);
    for (const Part& part : m.parts) {
      if (const auto* call = std::get_if<ToolCall>(&part)) {
        ReadCall(m, *call);
      } else if (const auto* result = std::get_if<ToolResult>(&part)) {
        ReadResult(m, *result);
      }
    }
  }

  Ledger Finish() {
    ApplyTodos(std::string(), std::string_view());  // the calls whose results the span lacks
    for (const reading::TodoItem& item : todos_) {
      if (reading::TodoFinished(item.status)) continue;
      std::string text(Trimmed(item.text));
      if (!item.status.empty()) text += " (" + Lowered(item.status) + ")";
      Add(LedgerKind::kTodo, std::move(text), todos_from_);
    }
    for (const auto& [signature, failure] : failures_) {
      (void)signature;
      pending_failures_.push_back(failure);
    }
    std::sort(pending_failures_.begin(), pending_failures_.end(),
              [](const Failure& a, const Failure& b) { return a.order < b.order; });
    for (const Failure& f : pending_failures_) Add(LedgerKind::kFailure, f.text, f.message_id);
    return std::move(ledger_);
  }

 private:
  struct Call {
    std::string name;
    std::string signature;  // the name and what it acted on: a retry has the same
    std::string what;       // shown in a failure: the command, the path …
    bool todo = false;      // a to-do tool's call, applied when its result comes
  };
  struct Failure {
    std::size_t order = 0;
    std::string text;
    std::string message_id;
  };

  void ReadPerson(const Message& m) {
    for (const Part& part : m.parts) {
      const auto* text = std::get_if<Text>(&part);
      if (text == nullptr) continue;
      const std::string words = reading::PersonText(text->text);
      if (words.empty()) continue;
      Add(LedgerKind::kRequest, ClipRequest(words), m.id);
      for (std::string& id : ledger_internal::Identifiers(words)) {
        Add(LedgerKind::kIdentifier, std::move(id), m.id);
      }
    }
  }

  void ReadCall(const Message& m, const ToolCall& call) {
    Json args;
    if (!jsonutil::Parse(call.arguments, "arguments", &args).ok()) args = Json();
    const std::string name = Lowered(call.name);
    // The shell's command: a string, or an argument vector (Codex's shell).
    std::optional<std::string> command = Member(args, "command");
    if (!command) command = Member(args, "cmd");
    if (!command && args.is_object()) {
      const auto it = args.find("command");
      if (it != args.end() && it->is_array()) {
        std::string joined;
        for (const Json& w : *it) {
          if (w.is_string()) joined += (joined.empty() ? "" : " ") + w.get<std::string>();
        }
        command = joined;
      }
    }
    const reading::ToolKind kind = reading::KindOf(call.name, command.value_or(""));
    const auto path = [&]() -> std::optional<std::string> {
      for (const char* key :
           {"file_path", "filePath", "notebook_path", "path", "filename", "file"}) {
        if (auto p = Member(args, key)) return p;
      }
      return std::nullopt;
    };
    std::vector<std::string> written;
    if (kind == reading::ToolKind::kEdit) {
      // The editors of the harnesses and wire formats: a path argument, the files a patch
      // names, or the file SWE-agent has open.
      if (name.find("patch") != std::string::npos && !path()) {
        if (auto input = Member(args, "input")) {
          PatchFiles(*input, &written);
        } else if (auto patch = Member(args, "patch")) {
          PatchFiles(*patch, &written);
        } else if (args.is_string()) {
          PatchFiles(args.get<std::string>(), &written);
        } else {
          PatchFiles(call.arguments, &written);
        }
      } else if (auto p = path()) {
        written.push_back(*p);
      } else if (!open_file_.empty()) {
        written.push_back(open_file_);
      }
    }
    if (name == "open" || name == "create") {
      if (auto p = path()) open_file_ = *p;
    }
    // A shell's plain redirections.
    const bool shell = kind == reading::ToolKind::kCommand;
    if (shell && command) ShellWrites(*command, &written);
    for (std::string& w : written) {
      if (!reading::IsJunkPath(w)) Add(LedgerKind::kFile, std::move(w), m.id);
    }

    // What a failure of this call would be called, and what a retry of it has in common.
    std::string what;
    if (shell && command) {
      what = *command;
    } else if (auto p = path()) {
      what = *p;
    } else {
      what = call.arguments;
    }
    // Its first line: a script given inline is named by how it starts.
    what = std::string(Trimmed(what));
    if (const std::size_t nl = what.find('\n'); nl != std::string::npos) {
      what = std::string(Trimmed(std::string_view(what).substr(0, nl))) + " \u2026";
    }
    what = std::string(Utf8Prefix(what, kCallWhatMaxBytes));
    calls_[call.id] =
        Call{call.name, call.name + '\0' + what, what, kind == reading::ToolKind::kTodo};
    // A to-do tool's call changes the list once its result says how (TaskCreate's number).
    if (kind == reading::ToolKind::kTodo) {
      todo_calls_.push_back(TodoCall{call.id, call.name, std::move(args), m.id, false});
    }
  }

  // Applies the to-do calls not applied yet: the one of `call_id` with its result's text, or
  // (`call_id` empty) every one left, in order, without a result.
  void ApplyTodos(const std::string& call_id, std::string_view result) {
    for (TodoCall& t : todo_calls_) {
      if (t.applied) continue;
      const bool this_one = t.call_id == call_id;
      if (!call_id.empty() && !this_one) continue;
      t.applied = true;
      if (reading::ApplyTodoCall(t.tool, t.args, this_one ? result : std::string_view(), todos_)) {
        todos_from_ = t.message_id;
      }
    }
  }

  void ReadResult(const Message& m, const ToolResult& result) {
    const auto call = calls_.find(result.call_id);
    if (call == calls_.end()) return;  // its call is not in the span
    const std::string& signature = call->second.signature;
    if (call->second.todo) {  // only a to-do call's result is read for the list
      std::string said;
      for (const ResultItem& item : result.content) {
        if (const auto* t = std::get_if<Text>(&item)) said += t->text;
      }
      ApplyTodos(result.call_id, said);
    }
    // Failed: flagged, or (tools without the flag: SWE-agent's, OpenHands') its output reports
    // a non-zero exit code or starts by saying it failed. A call the person refused is their
    // choice, not a failure.
    std::string scratch;
    std::string_view output;
    for (const ResultItem& item : result.content) {
      if (const auto* t = std::get_if<Text>(&item)) {
        if (output.empty()) {
          output = t->text;
        } else {
          scratch = std::string(output) + "\n" + t->text;
          output = scratch;
        }
      }
    }
    const std::optional<long> exit_code = reading::ReportedExitCode(output);
    const bool failed =
        !reading::IsRejection(output) &&
        (result.is_error || (exit_code && *exit_code != 0) || reading::StartsWithFailure(output));
    if (!failed) {
      failures_.erase(signature);  // retried, and it worked
      calls_.erase(call);
      return;
    }
    const std::string said = reading::TellingLine(output, kFailureLineMaxBytes);
    std::string text = call->second.name;
    if (!call->second.what.empty()) text += " " + call->second.what;
    if (!said.empty()) text += ": " + said;
    // A later failure of the same call is the one to keep: it says how it failed last.
    failures_[signature] = Failure{order_++, std::move(text), m.id};
    calls_.erase(call);
  }

  Ledger ledger_;
  std::size_t max_chars_ = 0;
  std::size_t chars_ = 0;                    // bytes of the entries' text
  std::unordered_set<std::uint64_t> seen_;   // EntryHash of every entry ever added
  std::map<std::string, Call> calls_;        // by call id
  std::map<std::string, Failure> failures_;  // by signature, not retried successfully yet
  std::vector<Failure> pending_failures_;
  struct TodoCall {
    std::string call_id;
    std::string tool;
    Json args;
    std::string message_id;
    bool applied = false;
  };
  std::vector<TodoCall> todo_calls_;
  std::vector<reading::TodoItem> todos_;  // the newest list
  std::string todos_from_;                // the message of the call that last changed it
  std::string open_file_;                 // SWE-agent's open file
  std::size_t order_ = 0;
};

}  // namespace ledger_build

namespace ledger_build {

// Text as the guard compares it: lower case, no Markdown emphasis or code marks, no quotes,
// one space for each run of white space.
std::string Folded(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  bool space = false;
  for (char c : text) {
    if (c == '*' || c == '`' || c == '"' || c == '\\') continue;
    if (c == ' ' || c == '\t' || c == '\n' || c == '\r') {
      space = !out.empty();
      continue;
    }
    if (space) out += ' ';
    space = false;
    out += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  }
  return out;
}

// Importance, least first: what goes first when the section is over its budget.
constexpr LedgerKind kLeastImportantFirst[] = {LedgerKind::kIdentifier, LedgerKind::kFailure,
                                               LedgerKind::kTodo, LedgerKind::kFile,
                                               LedgerKind::kRequest};

const char* KindTitle(LedgerKind kind) {
  switch (kind) {
    case LedgerKind::kRequest: return "Requests";
    case LedgerKind::kIdentifier: return "Identifiers";
    case LedgerKind::kFile: return "Files written";
    case LedgerKind::kTodo: return "Open to-dos";
    case LedgerKind::kFailure: return "Failures not resolved";
  }
  return "Requests";
}

// What an entry costs in the section: "- ", its text, two spaces per further line, "\n".
std::size_t EntryChars(const LedgerEntry& e) {
  return CountCodePoints(e.text) + 3 +
         2 * static_cast<std::size_t>(std::count(e.text.begin(), e.text.end(), '\n'));
}

}  // namespace ledger_build

namespace ledger_build {
bool Carries(const std::string& hay, const LedgerEntry& entry);
}  // namespace ledger_build

bool LedgerCarries(std::string_view checkpoint, const LedgerEntry& entry) {
  return ledger_build::Carries(ledger_build::Folded(checkpoint), entry);
}

namespace ledger_build {

// LedgerCarries with the checkpoint folded once for all entries.
bool Carries(const std::string& hay, const LedgerEntry& entry) {
  const auto has = [&](std::string_view needle) {
    const std::string n = ledger_build::Folded(needle);
    return !n.empty() && hay.find(n) != std::string::npos;
  };
  if (has(entry.text)) return true;
  const std::string_view text = entry.text;
  switch (entry.kind) {
    case LedgerKind::kFile:
    case LedgerKind::kIdentifier: {
      // By its last two components: "/home/a/repo/src/x.py" as "src/x.py".
      const std::size_t last = text.rfind('/');
      if (last == std::string_view::npos || last + 1 >= text.size()) return false;
      const std::size_t before = last == 0 ? std::string_view::npos : text.rfind('/', last - 1);
      if (before == std::string_view::npos) return false;
      return has(text.substr(before + 1));
    }
    case LedgerKind::kFailure: {
      // By what failed: "<tool> <what>: <how>" as "<what>".
      const std::size_t space = text.find(' ');
      const std::size_t colon = text.find(": ");
      if (space == std::string_view::npos || colon == std::string_view::npos || colon < space) {
        return false;
      }
      return has(text.substr(space + 1, colon - space - 1));
    }
    case LedgerKind::kTodo: {
      const std::size_t status = text.rfind(" (");
      return status != std::string_view::npos && has(text.substr(0, status));
    }
    case LedgerKind::kRequest: return false;
  }
  return false;
}

}  // namespace ledger_build

LedgerGuard GuardCheckpoint(std::string_view checkpoint, const Ledger& ledger,
                            std::size_t max_chars, bool recall_tool) {
  LedgerGuard guard;
  const std::vector<LedgerEntry>& entries = ledger.entries;
  std::vector<bool> missing(entries.size(), false);
  std::size_t chars = 0;  // of the missing entries' items
  std::size_t added_in[kLedgerKinds] = {};
  const std::string hay = ledger_build::Folded(checkpoint);
  for (std::size_t i = 0; i < entries.size(); ++i) {
    const LedgerEntry& e = entries[i];
    LedgerTally& t = guard.tally[static_cast<std::size_t>(e.kind)];
    ++t.total;
    if (ledger_build::Carries(hay, e)) {
      ++t.kept;
    } else {
      missing[i] = true;
      chars += ledger_build::EntryChars(e);
      ++added_in[static_cast<std::size_t>(e.kind)];
    }
  }
  // What the ledger let go of before (Ledger::pruned) is left out too.
  std::size_t left_in[kLedgerKinds] = {};
  std::size_t left_total = 0;
  for (std::size_t k = 0; k < kLedgerKinds; ++k) {
    left_in[k] = ledger.pruned[k];
    left_total += ledger.pruned[k];
    guard.tally[k].total += ledger.pruned[k];
  }
  const bool pruned = left_total > 0;
  std::size_t first_left = entries.size();
  std::size_t last_left = 0;
  // The section's last line: how many of each kind were left out, and from which messages.
  const auto left_line = [&] {
    std::string line = "Left out for room: ";
    bool first = true;
    for (LedgerKind kind : ledger_build::kLeastImportantFirst) {
      const std::size_t n = left_in[static_cast<std::size_t>(kind)];
      if (n == 0) continue;
      line += std::string(first ? "" : ", ") + std::to_string(n) + " " + LedgerKindName(kind) +
              (n == 1 ? "" : "s");
      first = false;
    }
    const std::string& from = pruned ? ledger.pruned_from : entries[first_left].message_id;
    const std::string& to =
        first_left < entries.size() ? entries[last_left].message_id : ledger.pruned_to;
    line += " (from messages " + from;
    if (left_total > 1 && to != from) line += " to " + to;
    line += ")";
    if (recall_tool) line += "; recap_recall with a query, or with these ids, shows them";
    line += ".\n";
    return line;
  };
  const auto section_chars = [&] {
    std::size_t n = chars;
    std::size_t blocks = 0;
    for (std::size_t k = 0; k < kLedgerKinds; ++k) {
      if (added_in[k] == 0) continue;
      n += 5 + std::string_view(ledger_build::KindTitle(static_cast<LedgerKind>(k))).size();
      ++blocks;
    }
    if (blocks > 1) n += blocks - 1;
    if (left_total == 0) return n;
    return n + (blocks > 0 ? 1 : 0) + CountCodePoints(left_line());
  };
  // Over the budget: the oldest entries of the least important kinds go first, until the whole
  // section — its headings and the line saying what was left out included — fits.
  std::vector<bool> dropped(entries.size(), false);
  for (LedgerKind kind : ledger_build::kLeastImportantFirst) {
    const auto k = static_cast<std::size_t>(kind);
    for (std::size_t i = 0; i < entries.size() && added_in[k] > 0 && section_chars() > max_chars;
         ++i) {
      if (!missing[i] || dropped[i] || entries[i].kind != kind) continue;
      dropped[i] = true;
      chars -= ledger_build::EntryChars(entries[i]);
      --added_in[k];
      ++left_in[k];
      ++left_total;
      first_left = std::min(first_left, i);
      last_left = std::max(last_left, i);
    }
  }
  for (std::size_t i = 0; i < entries.size(); ++i) {
    if (!missing[i]) continue;
    const LedgerEntry& e = entries[i];
    LedgerTally& t = guard.tally[static_cast<std::size_t>(e.kind)];
    if (dropped[i]) {
      ++t.left_out;
      guard.left_out.push_back(e);
    } else {
      ++t.added;
      guard.added.push_back(e);
    }
  }
  for (std::size_t k = 0; k < kLedgerKinds; ++k) guard.tally[k].left_out += ledger.pruned[k];
  if (guard.added.empty() && left_total == 0) return guard;
  std::string& out = guard.section;
  for (LedgerKind kind : {LedgerKind::kRequest, LedgerKind::kFile, LedgerKind::kTodo,
                          LedgerKind::kFailure, LedgerKind::kIdentifier}) {
    bool headed = false;
    for (const LedgerEntry& e : guard.added) {
      if (e.kind != kind) continue;
      if (!headed) {
        if (!out.empty()) out += '\n';
        out += std::string("### ") + ledger_build::KindTitle(kind) + "\n";
      }
      headed = true;
      checkpoint_detail::AppendItem(e.text, out);
      out += '\n';
    }
  }
  if (left_total > 0) {
    if (!out.empty()) out += '\n';
    out += left_line();
  }
  return guard;
}

const char* LedgerKindName(LedgerKind kind) noexcept {
  switch (kind) {
    case LedgerKind::kRequest: return "request";
    case LedgerKind::kIdentifier: return "identifier";
    case LedgerKind::kFile: return "file";
    case LedgerKind::kTodo: return "todo";
    case LedgerKind::kFailure: return "failure";
  }
  return "request";
}

std::size_t Ledger::Count(LedgerKind kind) const noexcept {
  return static_cast<std::size_t>(std::count_if(
      entries.begin(), entries.end(), [kind](const LedgerEntry& e) { return e.kind == kind; }));
}

Ledger BuildLedger(const Transcript& transcript, std::size_t begin, std::size_t end,
                   const Ledger& carried, std::size_t max_chars) {
  ledger_build::Builder builder(carried, max_chars);
  end = std::min(end, transcript.size());
  for (std::size_t i = begin; i < end; ++i) builder.Read(transcript[i]);
  return builder.Finish();
}

LedgerBuilder::LedgerBuilder(const Ledger& carried, std::size_t max_chars)
    : builder_(std::make_unique<ledger_build::Builder>(carried, max_chars)) {}
LedgerBuilder::~LedgerBuilder() = default;
void LedgerBuilder::Read(const Message& m) { builder_->Read(m); }
Ledger LedgerBuilder::Finish() { return builder_->Finish(); }

namespace ledger_internal {

std::vector<std::string> Identifiers(std::string_view words) {
  std::vector<std::string> out;
  std::set<std::string> seen;
  std::size_t at = 0;
  const auto space = [](char c) {
    return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '`';
  };
  while (at < words.size()) {
    while (at < words.size() && space(words[at])) ++at;
    std::size_t end = at;
    while (end < words.size() && !space(words[end])) ++end;
    std::string_view t = words.substr(at, end - at);
    at = end;
    // Punctuation around a token is the sentence's, not the token's.
    static constexpr std::string_view kOpen = "([{<\"'@";
    static constexpr std::string_view kClose = ")]}>\"',;:!?.";
    while (!t.empty() && kOpen.find(t.front()) != std::string_view::npos) t.remove_prefix(1);
    while (!t.empty() && kClose.find(t.back()) != std::string_view::npos) t.remove_suffix(1);
    if (t.empty()) continue;
    const bool keep = ledger_build::IsUrl(t) || ledger_build::LooksLikePath(t) ||
                      (ledger_build::HasDigit(t) && t.size() >= 2);
    if (keep && seen.insert(std::string(t)).second) out.emplace_back(t);
  }
  return out;
}

}  // namespace ledger_internal

}  // namespace v0
}  // namespace recap
