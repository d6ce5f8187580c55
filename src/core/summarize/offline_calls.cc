// What the span's tool calls state, for the offline summarizer: each call's main argument,
// the files it reads or writes, its result and whether it failed (ReadCalls).
#include <algorithm>
#include <initializer_list>
#include <string>
#include <string_view>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

#include "recap/transcript.h"

#include "reading/transcript_reading.h"
#include "recap_internal/json_depth.h"
#include "summarize/offline_build.h"

namespace recap {
inline namespace v0 {
namespace offline_build {

namespace {

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
    // "source" and "destination" name places too (an airport, a queue): a path among them
    // has a slash or an extension ("SEA" is no file).
    const bool loose_key = key == "source" || key == "destination";
    const bool path_shaped = s.find('/') != std::string::npos || s.find('.') != std::string::npos;
    if (IsPathKey(key) && one_token && HasLetter(s) && (!loose_key || path_shaped)) {
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

}  // namespace

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
      const std::string_view sub = reading::StringMember(seen.doc, "command");
      seen.kind = reading::KindOf(c->name, sub);
      seen.writes = reading::Writes(c->name, sub);
      used.clear();
      mentions.clear();
      if (seen.doc.is_discarded()) {
        ScanPaths(c->arguments, mentions);
        if (seen.kind == reading::ToolKind::kCommand) used = mentions;
      } else {
        ArgumentFiles(seen.doc, "", used, mentions);
      }
      for (auto& p : mentions) mentioned.insert(std::move(p));
      for (auto& p : used) {
        if (!reading::IsJunkPath(p)) seen.files.push_back(std::move(p));
      }
      seen.target = seen.kind == reading::ToolKind::kEdit && !seen.files.empty()
                        ? seen.files.front()
                        : seen.main;
      auto it = results.find(c->id);
      if (it != results.end()) {
        seen.result = it->second;
        const std::string_view text = ResultText(*seen.result, scratch);
        const auto code = reading::ReportedExitCode(text);
        seen.rejected = reading::IsRejection(text);
        seen.flagged =
            seen.result->is_error || (code && *code != 0) || reading::StartsWithFailure(text);
        seen.mentions = reading::MentionsError(text);
      }
      if (seen.kind != reading::ToolKind::kTodo) seen.doc = Json();
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

}  // namespace offline_build
}  // namespace v0
}  // namespace recap
