#include "recap/checkpoint.h"

#include <algorithm>
#include <array>
#include <cstdint>
#include <utility>

#include "recap/measure.h"

#include "checkpoint/sections.h"
#include "json/json_util.h"
#include "model/utf8.h"

namespace recap {
inline namespace v0 {

namespace {

using checkpoint_detail::IsBlank;
using checkpoint_detail::Kind;
using checkpoint_detail::kSections;
using checkpoint_detail::ListField;
using checkpoint_detail::Section;
using checkpoint_detail::StartsWith;
using checkpoint_detail::StringField;
using checkpoint_detail::Trim;
using jsonutil::Json;

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

bool IsSectionKey(const std::string& key) {
  return std::any_of(kSections.begin(), kSections.end(),
                     [&](const Section& s) { return key == s.key || key == s.alt_key; });
}

// True when `v` holds a string that is not blank, at any depth.
bool CarriesText(const Json& v) {
  if (v.is_string()) return !IsBlank(v.get_ref<const std::string&>());
  if (v.is_array() || v.is_object()) {
    return std::any_of(v.begin(), v.end(), [](const Json& e) { return CarriesText(e); });
  }
  return false;
}

// True when `v` is an object with a section holding text (whatever its shape), or an array
// holding such an object: a checkpoint, however badly written, whose text is worth keeping.
bool HasFilledSection(const Json& v) {
  if (v.is_array()) {
    return std::any_of(v.begin(), v.end(), [](const Json& e) { return HasFilledSection(e); });
  }
  if (!v.is_object()) return false;
  return std::any_of(kSections.begin(), kSections.end(), [&](const Section& s) {
    const Json* member = FindSection(v, s);
    return member != nullptr && CarriesText(*member);
  });
}

// The members of a checkpoint object that are neither sections nor plugin fields, as
// Discoveries: "name: text" for each string (of a list, each item), "name: <JSON>" for any
// other value with text in it; values without text (a confidence, a flag) carry nothing.
void KeepUnknownMembers(const Json& obj, const std::vector<OutputField>& plugin_fields,
                        std::vector<std::string>* into) {
  const auto keep = [&](const std::string& name, const Json& v) {
    if (!CarriesText(v)) return;
    into->push_back(name + ": " +
                    (v.is_string() ? v.get<std::string>()
                                   : v.dump(-1, ' ', false, Json::error_handler_t::replace)));
  };
  for (auto it = obj.begin(); it != obj.end(); ++it) {
    const std::string& name = it.key();
    if (IsSectionKey(name)) continue;
    if (std::any_of(plugin_fields.begin(), plugin_fields.end(),
                    [&](const OutputField& f) { return f.name == name; })) {
      continue;
    }
    if (it->is_array()) {
      for (const Json& e : *it) keep(name, e);
    } else {
      keep(name, *it);
    }
  }
}

// Fills `out` from `obj`. False when the object is not a checkpoint: a member of a shape with
// no clear meaning, or no section filled and no plugin field.
bool FromJson(const Json& obj, const std::vector<OutputField>& plugin_fields, bool salvaged,
              ParsedCheckpoint* out) {
  if (!obj.is_object()) return false;
  Checkpoint c;
  for (std::size_t i = 0; i < kSections.size(); ++i) {
    const Json* v = FindSection(obj, kSections[i]);
    if (v == nullptr) continue;
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
    }
  }
  // Sections all empty and no plugin field: nothing was written (an object of unknown
  // members only is no checkpoint either, however much text it holds).
  if (c.empty() && plugins.empty()) return false;
  KeepUnknownMembers(obj, plugin_fields, &c.discoveries);
  out->checkpoint = std::move(c);
  out->plugin_fields = std::move(plugins);
  return true;
}

// ---------------------------------------------------------------------------------------------
// A reply that carries no checkpoint (docs/checkpoint-format.md).

// `text` lowercased (ASCII), with the typographic apostrophe read as "'".
std::string Folded(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (std::size_t i = 0; i < text.size(); ++i) {
    if (text.compare(i, 3, "\xE2\x80\x99") == 0) {
      out += '\'';
      i += 2;
      continue;
    }
    const char ch = text[i];
    out += ch >= 'A' && ch <= 'Z' ? static_cast<char>(ch - 'A' + 'a') : ch;
  }
  return out;
}

// True when `region` (trimmed) opens as a JSON object or array would: a bracket followed by
// what JSON allows there. "[Summary] …" and "{'goal': …}" are prose, not broken JSON.
bool LooksLikeJson(std::string_view region) {
  if (region.empty() || (region.front() != '{' && region.front() != '[')) return false;
  const std::string_view rest = Trim(region.substr(1));
  if (rest.empty()) return true;
  const char ch = rest.front();
  if (region.front() == '{') return ch == '"' || ch == '}';
  return ch == '[' || ch == '{' || ch == ']' || ch == '"' || ch == '-' ||
         (ch >= '0' && ch <= '9') || StartsWith(rest, "true") || StartsWith(rest, "false") ||
         StartsWith(rest, "null");
}

// True when `region` (trimmed) may be a JSON scalar (the parse decides): a string, a number,
// true, false or null.
bool MayBeJsonScalar(std::string_view region) {
  if (region.empty()) return false;
  const char ch = region.front();
  return ch == '"' || ch == '-' || (ch >= '0' && ch <= '9') || region == "true" ||
         region == "false" || region == "null";
}

// What a parsed JSON reply is, when it is no checkpoint; empty when it holds a filled section
// (then its text is kept, R4.3).
std::string JsonNoCheckpoint(const Json& doc) {
  if (doc.is_null()) return "JSON null";
  if (doc.is_boolean()) return doc.get<bool>() ? "JSON true" : "JSON false";
  if (doc.is_number()) return "a JSON number";
  if (doc.is_string()) return "a JSON string, not an object";
  if (HasFilledSection(doc)) return {};
  if (doc.is_array())
    return doc.empty() ? "an empty JSON array" : "a JSON array with no checkpoint in it";
  if (doc.empty()) return "an empty JSON object";
  std::string members;
  std::size_t n = 0;
  for (auto it = doc.begin(); it != doc.end(); ++it, ++n) {
    if (n == 5) {
      members += ", …";
      break;
    }
    members += (n ? ", " : "") + ToValidUtf8(it.key());
  }
  return "a JSON object with none of the checkpoint's sections filled (its members: " + members +
         ")";
}

// What a reply that is prose, not JSON, is when it is plainly no summary; empty otherwise.
std::string ProseNoCheckpoint(std::string_view trimmed) {
  const std::string head = Folded(trimmed.substr(0, 1024));
  if (!head.empty() && head.front() == '<' &&
      (head.find("<html") != std::string::npos ||
       head.find("<!doctype html") != std::string::npos ||
       head.find("<body") != std::string::npos || head.find("<head") != std::string::npos)) {
    return "an HTML page, not a summary (an error page from a proxy or gateway?)";
  }
  // The short replies below are all a reply is; a summary that merely starts alike is longer.
  if (CountCodePoints(trimmed) > 400) return {};
  static constexpr std::string_view kStatuses[] = {
      "bad request", "unauthorized",        "forbidden",
      "not found",   "too many requests",   "internal server error",
      "bad gateway", "service unavailable", "gateway timeout"};
  if (head.size() > 4 && head[0] >= '1' && head[0] <= '5' && head[1] >= '0' && head[1] <= '9' &&
      head[2] >= '0' && head[2] <= '9' && head[3] == ' ') {
    for (std::string_view status : kStatuses) {
      if (StartsWith(std::string_view(head).substr(4), status)) {
        return "an HTTP error, not a summary";
      }
    }
  }
  static constexpr std::string_view kRefusals[] = {
      "i cannot",   "i can't",     "i can not",   "i'm sorry",       "i am sorry",    "sorry, i",
      "sorry, but", "i'm unable",  "i am unable", "i'm not able",    "i am not able", "i won't",
      "i will not", "i apologize", "as an ai",    "unfortunately, i"};
  for (std::string_view refusal : kRefusals) {
    if (!StartsWith(head, refusal)) continue;
    // "I can't find the config yet; …" in a short summary: a refusal says nothing more than
    // that it will not, so it names no file, command or step.
    return "a refusal, not a summary";
  }
  return {};
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
         current_state.empty() && next_steps.empty() && relevant_files.empty() && text.empty() &&
         kept_by_recap.empty();
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

  // Not blank, and no checkpoint in the JSON form: prose is a text-only checkpoint (R4.3),
  // unless the reply carries none at all.
  std::string problem;
  const bool bracketed =
      !region_trimmed.empty() && (region_trimmed.front() == '{' || region_trimmed.front() == '[');
  if (bracketed ? LooksLikeJson(region_trimmed) : MayBeJsonScalar(region_trimmed)) {
    Json whole;
    if (jsonutil::Parse(region_trimmed, "the summarizer's reply", &whole).ok()) {
      problem = JsonNoCheckpoint(whole);
    } else if (bracketed) {
      problem = "text that starts like JSON but is not valid JSON";
    } else {
      problem = ProseNoCheckpoint(trimmed);  // "502 Bad Gateway", "200 files were …"
    }
  } else if (!bracketed) {
    problem = ProseNoCheckpoint(trimmed);
  }
  if (!problem.empty()) {
    result = ParsedCheckpoint{};
    result.partial = truncated;
    result.problem = std::move(problem);
    return result;
  }

  result.checkpoint = Checkpoint{};
  result.checkpoint.structured = false;
  result.checkpoint.text = std::string(trimmed);
  result.plugin_fields.clear();
  result.usable = true;
  return result;
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
  if (!c.kept_by_recap.empty()) j["keptByRecap"] = c.kept_by_recap;  // R17.2
  return j.dump(-1, ' ', false, Json::error_handler_t::replace);
}

}  // namespace v0
}  // namespace recap
