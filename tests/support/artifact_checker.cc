#include "support/artifact_checker.h"

#include <algorithm>
#include <cctype>
#include <map>
#include <optional>
#include <set>
#include <utility>
#include <variant>

#include <nlohmann/json.hpp>

namespace recap::testing {

namespace {

using nlohmann::json;

std::string Trim(std::string s) {
  const auto b = s.find_first_not_of(" \t\r\n");
  if (b == std::string::npos) return std::string();
  return s.substr(b, s.find_last_not_of(" \t\r\n") - b + 1);
}

// Lower case, no Markdown or quote marks, one space for each run of white space.
std::string Fold(const std::string& s) {
  std::string out;
  bool space = false;
  for (char c : s) {
    if (c == '*' || c == '`' || c == '"' || c == '\\') continue;
    if (std::isspace(static_cast<unsigned char>(c)) != 0) {
      space = !out.empty();
      continue;
    }
    if (space) out += ' ';
    space = false;
    out += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  }
  return out;
}

// The first `n` bytes of `s`, not cutting a UTF-8 character.
std::string Head(const std::string& s, std::size_t n) {
  if (s.size() <= n) return s;
  while (n > 0 && (static_cast<unsigned char>(s[n]) & 0xC0) == 0x80) --n;
  return s.substr(0, n);
}

// Removes each <tag …>…</tag> of the named tags; the content of <command-args> stays.
std::string WithoutHarnessTags(std::string s) {
  static const char* kTags[] = {
      "system-reminder",        "command-name",         "command-message", "local-command-stdout",
      "local-command-stderr",   "local-command-caveat", "ide_selection",   "ide_opened_file",
      "ide_diagnostics",        "bash-input",           "bash-stdout",     "bash-stderr",
      "user-prompt-submit-hook"};
  for (const char* tag : kTags) {
    const std::string open = std::string("<") + tag;
    const std::string close = std::string("</") + tag + ">";
    for (std::size_t at = s.find(open); at != std::string::npos; at = s.find(open, at)) {
      const std::size_t end = s.find(close, at);
      s.erase(at, end == std::string::npos ? std::string::npos : end + close.size() - at);
    }
  }
  for (const char* tag : {"<command-args>", "</command-args>"}) {
    for (std::size_t at = s.find(tag); at != std::string::npos; at = s.find(tag)) {
      s.erase(at, std::string(tag).size());
    }
  }
  return s;
}

// A person's request in a user message's text, or "".
std::string RequestOf(const std::string& text) {
  std::string s = text;
  for (const auto& [open, close] : std::vector<std::pair<std::string, std::string>>{
           {"<issue_description>", "</issue_description>"},
           {"<pr_description>", "</pr_description>"},
           {"ISSUE:\n", "\nINSTRUCTIONS:"}}) {
    const std::size_t a = s.find(open);
    const std::size_t b = a == std::string::npos ? a : s.find(close, a + open.size());
    if (b != std::string::npos) {
      s = s.substr(a + open.size(), b - a - open.size());
      break;
    }
  }
  s = WithoutHarnessTags(std::move(s));
  std::string kept;
  std::size_t at = 0;
  while (at <= s.size()) {
    std::size_t nl = s.find('\n', at);
    if (nl == std::string::npos) nl = s.size();
    const std::string line = Trim(s.substr(at, nl - at));
    at = nl + 1;
    if (line.rfind("Caveat:", 0) == 0 || line.rfind("[Request interrupted", 0) == 0) continue;
    std::string clean;
    for (std::size_t i = 0; i < line.size(); ++i) {
      const auto c = static_cast<unsigned char>(line[i]);
      if (c == 0x1B) {  // an escape sequence: ESC [ … letter
        if (i + 1 < line.size() && line[i + 1] == '[') {
          i += 2;
          while (i < line.size() && std::isalpha(static_cast<unsigned char>(line[i])) == 0) ++i;
        }
        continue;
      }
      if (c < 0x20 && c != '\t') continue;
      clean += line[i];
    }
    if (!clean.empty()) kept += clean + "\n";
  }
  return Trim(kept);
}

bool HasDigit(const std::string& t) {
  return std::any_of(t.begin(), t.end(), [](char c) { return c >= '0' && c <= '9'; });
}

std::vector<std::string> TokensOf(const std::string& request) {
  std::vector<std::string> out;
  std::string token;
  const auto flush = [&] {
    static const std::string kLead = "([{<\"'@";
    static const std::string kTrail = ")]}>\"',;:!?.";
    std::string t = token;
    token.clear();
    while (!t.empty() && kLead.find(t.front()) != std::string::npos) t.erase(0, 1);
    while (!t.empty() && kTrail.find(t.back()) != std::string::npos) t.pop_back();
    if (t.size() < 2) return;
    const long slashes = std::count(t.begin(), t.end(), '/');
    const bool url = t.rfind("http://", 0) == 0 || t.rfind("https://", 0) == 0;
    const bool rooted = t[0] == '/' || t.rfind("./", 0) == 0 || t.rfind("~/", 0) == 0;
    // A file name: "renderer.py", "session_nav.html" (a short extension with a letter).
    const std::size_t dot = t.rfind('.');
    const std::string ext = dot == std::string::npos ? std::string() : t.substr(dot + 1);
    const bool file_name =
        dot != std::string::npos && dot > 0 && !ext.empty() && ext.size() <= 5 &&
        std::all_of(ext.begin(), ext.end(),
                    [](char c) { return std::isalnum(static_cast<unsigned char>(c)) != 0; }) &&
        std::any_of(ext.begin(), ext.end(),
                    [](char c) { return std::isalpha(static_cast<unsigned char>(c)) != 0; }) &&
        std::any_of(t.begin(), t.begin() + static_cast<std::ptrdiff_t>(dot),
                    [](char c) { return std::isalpha(static_cast<unsigned char>(c)) != 0; });
    if (url || HasDigit(t) || file_name || (slashes > 0 && (rooted || slashes >= 2))) {
      out.push_back(t);
    }
  };
  for (char c : request) {
    if (std::isspace(static_cast<unsigned char>(c)) != 0 || c == '`') {
      flush();
    } else {
      token += c;
    }
  }
  flush();
  return out;
}

std::optional<std::string> StringArg(const json& args, std::initializer_list<const char*> keys) {
  if (!args.is_object()) return std::nullopt;
  for (const char* k : keys) {
    const auto it = args.find(k);
    if (it != args.end() && it->is_string() && !it->get<std::string>().empty()) {
      return it->get<std::string>();
    }
  }
  return std::nullopt;
}

std::string FirstLine(const std::string& s) { return Trim(s.substr(0, s.find('\n'))); }

std::string ResultTextOf(const ToolResult& r) {
  std::string out;
  for (const ResultItem& item : r.content) {
    if (const auto* t = std::get_if<Text>(&item)) out += t->text;
  }
  return out;
}

bool JunkPath(const std::string& p) {
  for (const char* prefix : {"/tmp/", "/dev/", "/usr/", "/proc/", "/var/"}) {
    if (p.rfind(prefix, 0) == 0) return true;
  }
  return false;
}

}  // namespace

const char* ArtifactKindName(ArtifactKind kind) {
  static const char* kNames[] = {"request", "identifier", "file", "todo", "failure"};
  return kNames[static_cast<std::size_t>(kind)];
}

std::vector<Artifact> ReadArtifacts(const Transcript& t, std::size_t end) {
  std::vector<Artifact> out;
  std::set<std::pair<int, std::string>> seen;
  const auto add = [&](ArtifactKind kind, std::string text, std::size_t message) {
    if (text.empty() || !seen.insert({static_cast<int>(kind), Fold(text)}).second) return;
    out.push_back(Artifact{kind, std::move(text), message});
  };
  struct CallInfo {
    std::string name, target;
    std::size_t message;
  };
  std::map<std::string, CallInfo> calls;                              // by call id
  std::map<std::pair<std::string, std::string>, std::size_t> failed;  // (name, target) -> msg
  std::vector<std::pair<std::string, std::size_t>> todos;
  struct Task {
    std::string id, subject;
    std::size_t message;
  };
  std::map<std::string, std::string> task_subjects;  // TaskCreate's call id -> subject
  std::vector<Task> tasks;
  std::map<std::string, std::string> task_status;  // task number -> newest status
  end = std::min(end, t.size());
  for (std::size_t i = 0; i < end; ++i) {
    const Message& m = t[i];
    if (m.summary) continue;
    for (const Part& part : m.parts) {
      if (const auto* text = std::get_if<Text>(&part)) {
        if (m.role != Role::kUser) continue;
        const std::string request = RequestOf(text->text);
        if (request.empty()) continue;
        add(ArtifactKind::kRequest, Head(request, 80), i);
        for (std::string& token : TokensOf(request)) add(ArtifactKind::kIdentifier, token, i);
      } else if (const auto* call = std::get_if<ToolCall>(&part)) {
        const json args = json::parse(call->arguments, nullptr, false);
        std::string name = call->name;
        std::transform(name.begin(), name.end(), name.begin(),
                       [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
        const std::optional<std::string> path =
            StringArg(args, {"file_path", "path", "notebook_path", "filename"});
        const std::string sub = StringArg(args, {"command"}).value_or("");
        const bool writes =
            name == "write" || name == "edit" || name == "multiedit" || name == "notebookedit" ||
            name == "write_file" || name == "edit_file" || name == "create_file" ||
            ((name == "str_replace_editor" || name == "str_replace_based_edit_tool") &&
             (sub == "create" || sub == "str_replace" || sub == "insert"));
        if (writes && path && !JunkPath(*path)) add(ArtifactKind::kFile, *path, i);
        if (name == "todowrite" && args.is_object() && args.contains("todos") &&
            args["todos"].is_array()) {
          todos.clear();
          for (const json& item : args["todos"]) {
            const std::string status = StringArg(item, {"status"}).value_or("");
            const std::string content = StringArg(item, {"content"}).value_or("");
            if (status != "completed" && !Trim(content).empty()) todos.emplace_back(content, i);
          }
        }
        // Claude Code's task tools: TaskCreate opens one (its number is in the result), and
        // TaskUpdate changes its status.
        if (name == "taskcreate") {
          const std::string subject = StringArg(args, {"subject", "description"}).value_or("");
          task_subjects[call->id] = subject;
        } else if (name == "taskupdate" && args.is_object()) {
          std::string id = StringArg(args, {"taskId"}).value_or("");
          if (id.empty() && args.contains("taskId") && args["taskId"].is_number()) {
            id = args["taskId"].dump();
          }
          const std::string status = StringArg(args, {"status"}).value_or("");
          if (!status.empty()) task_status[id] = status;
        }
        std::string target = StringArg(args, {"command", "cmd"}).value_or("");
        if (target.empty() && path) target = *path;
        if (target.empty() && args.is_object()) {
          for (const auto& [k, v] : args.items()) {
            if (v.is_string() && !v.get<std::string>().empty()) {
              target = v.get<std::string>();
              break;
            }
          }
        }
        calls[call->id] = CallInfo{call->name, Head(FirstLine(target), 60), i};
      } else if (const auto* result = std::get_if<ToolResult>(&part)) {
        const std::string said = Trim(ResultTextOf(*result));
        if (const auto task = task_subjects.find(result->call_id); task != task_subjects.end()) {
          // "Task #3 created successfully: …"
          const std::size_t hash = said.find('#');
          std::size_t end = hash == std::string::npos ? hash : hash + 1;
          while (end != std::string::npos && end < said.size() &&
                 std::isdigit(static_cast<unsigned char>(said[end])) != 0)
            ++end;
          if (hash != std::string::npos && end > hash + 1) {
            tasks.push_back({said.substr(hash + 1, end - hash - 1), task->second, i});
          }
        }
        const auto c = calls.find(result->call_id);
        if (c == calls.end() || c->second.target.empty()) continue;
        const bool refused = said.rfind("The user doesn't want to proceed", 0) == 0;
        const bool bad =
            !refused && (result->is_error || said.rfind("Error", 0) == 0 ||
                         said.rfind("ERROR", 0) == 0 || said.rfind("Traceback", 0) == 0);
        const auto key = std::make_pair(c->second.name, c->second.target);
        if (bad) {
          failed[key] = i;
        } else {
          failed.erase(key);
        }
      }
    }
  }
  for (auto& [text, at] : todos) add(ArtifactKind::kTodo, text, at);
  for (const Task& task : tasks) {
    const auto st = task_status.find(task.id);
    const std::string status = st == task_status.end() ? "pending" : st->second;
    if (status != "completed" && status != "deleted")
      add(ArtifactKind::kTodo, task.subject, task.message);
  }
  for (const auto& [key, at] : failed) add(ArtifactKind::kFailure, key.second, at);
  return out;
}

std::string SentText(const Transcript& t) {
  std::string out;
  for (const Message& m : t) {
    for (const Part& part : m.parts) {
      if (const auto* text = std::get_if<Text>(&part)) {
        out += text->text;
      } else if (const auto* call = std::get_if<ToolCall>(&part)) {
        out += call->name + " " + call->arguments;
        // Arguments are JSON: what they hold is also searched unescaped.
        const json args = json::parse(call->arguments, nullptr, false);
        if (args.is_object()) {
          for (const auto& [k, v] : args.items()) {
            if (v.is_string()) out += "\n" + v.get<std::string>();
          }
        }
      } else if (const auto* result = std::get_if<ToolResult>(&part)) {
        out += ResultTextOf(*result);
      }
      out += '\n';
    }
  }
  return Fold(out);
}

bool Survives(const std::string& sent, const Artifact& a) {
  const std::string needle = Fold(a.text);
  if (needle.empty() || sent.find(needle) != std::string::npos) return true;
  if (a.kind == ArtifactKind::kFile || a.kind == ArtifactKind::kIdentifier) {
    const std::size_t last = a.text.rfind('/');
    if (last == std::string::npos || last == 0) return false;
    const std::size_t before = a.text.rfind('/', last - 1);
    if (before == std::string::npos) return false;
    return sent.find(Fold(a.text.substr(before + 1))) != std::string::npos;
  }
  return false;
}

void SurvivalTally::Add(const SurvivalTally& other) {
  for (std::size_t k = 0; k < kArtifactKinds; ++k) {
    total[k] += other.total[k];
    found[k] += other.found[k];
  }
  for (const std::string& m : other.missing) {
    if (missing.size() < 20) missing.push_back(m);
  }
}

double SurvivalTally::Rate(ArtifactKind kind) const {
  const auto k = static_cast<std::size_t>(kind);
  return total[k] == 0 ? 1.0 : static_cast<double>(found[k]) / static_cast<double>(total[k]);
}

SurvivalTally CountSurvivors(const std::vector<Artifact>& artifacts, const std::string& sent) {
  SurvivalTally tally;
  for (const Artifact& a : artifacts) {
    const auto k = static_cast<std::size_t>(a.kind);
    ++tally.total[k];
    if (Survives(sent, a)) {
      ++tally.found[k];
    } else if (tally.missing.size() < 20) {
      tally.missing.push_back(std::string(ArtifactKindName(a.kind)) + ": " + a.text);
    }
  }
  return tally;
}

}  // namespace recap::testing
