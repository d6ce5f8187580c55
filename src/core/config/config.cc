// Configuration from JSON (SPEC R1).
//
// Every key is one entry of Keys(): where it lives, how it is read from JSON, how a value built
// in C++ is checked, and how it is written back. FromJson, Validate and ToJson all walk that one
// table, so a key added later (an adapter's `provider.baseUrl`, `store.path`) is a single line
// and can never be parsed without also being validated, documented in error messages and
// written by ToJson.
//
// Strictness is deliberate: a typo in a config file ("keepturns", "treshold") would otherwise
// silently run with the default, and the operator would only find out when a session overflows.

#include "recap/config.h"

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <exception>
#include <filesystem>
#include <functional>
#include <limits>
#include <memory>
#include <new>
#include <optional>
#include <string>
#include <string_view>
#include <system_error>
#include <type_traits>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "json/json_util.h"

namespace recap {
inline namespace v0 {

namespace {

using jsonutil::Json;

// The largest integer every JSON reader holds exactly (2^53 - 1). Integer keys without an upper
// bound in R1.1 stop here, so that every accepted value survives ToJson and a round trip through
// any other JSON tool (JavaScript, Python's float) unchanged.
constexpr std::int64_t kMaxJsonInteger = 9007199254740991;

struct Key {
  std::string_view section;
  std::string_view name;
  // Reads a JSON value into `config`, or says why it cannot.
  std::function<Status(const Json& value, Config& config)> read;
  // Checks the value already in `config` (Validate, for configs built in C++).
  std::function<Status(const Config& config)> check;
  // The value in `config` as JSON (ToJson).
  std::function<Json(const Config& config)> write;

  std::string Path() const { return std::string(section) + "." + std::string(name); }
};

// A JSON value as the user wrote it, near enough to recognise: strings quoted and escaped,
// numbers as written, everything else as compact ASCII JSON, long values cut.
std::string Shown(const Json& value) {
  if (value.is_string()) return jsonutil::Quote(value.get_ref<const std::string&>());
  std::string text = jsonutil::DumpAscii(value);
  constexpr std::size_t kMax = 60;
  if (text.size() > kMax) text = text.substr(0, kMax - 3) + "...";
  return text;
}

// A double as a person would write it ("0.85", "1.5"), including values JSON cannot hold.
std::string ShownDouble(double d) {
  if (std::isnan(d)) return "nan";
  if (std::isinf(d)) return d > 0 ? "inf" : "-inf";
  return Json(d).dump();
}

Status Problem(const std::string& path, const std::string& shown, const std::string& allowed) {
  return Status::InvalidArgument(path + " is " + shown + "; it must be " + allowed + ".");
}

// The value of a JSON number that is a whole number (16000 or 16000.0), as a double; nullopt
// for anything else. A double holds every integer up to 2^53 exactly, which covers every range
// these keys allow, so comparing bounds in double is exact where it matters.
std::optional<double> WholeNumber(const Json& value) {
  const std::optional<double> d = jsonutil::NumberValue(value);
  if (!d || !std::isfinite(*d) || std::floor(*d) != *d) return std::nullopt;
  return d;
}

// "an integer from 0 to 20", or "an integer of at least 4000" for a key with no upper bound of
// its own, unless the value broke the hidden bound of kMaxJsonInteger: "at least 4000" would be
// a baffling answer to 1e30.
std::string IntegerRange(std::int64_t min, std::int64_t max, bool too_big) {
  if (max == kMaxJsonInteger && !too_big) return "an integer of at least " + std::to_string(min);
  return "an integer from " + std::to_string(min) + " to " + std::to_string(max);
}

// Where a key's value lives: `config.*section.*field`, for a Config and a const Config alike.
template <typename Section, typename T>
struct Slot {
  Section Config::*section;
  T Section::*field;
  T& operator()(Config& c) const { return c.*section.*field; }
  const T& operator()(const Config& c) const { return c.*section.*field; }
};
template <typename Section, typename T>
Slot(Section Config::*, T Section::*) -> Slot<Section, T>;

// The type of the field a Slot names.
template <typename Ref>
using FieldType = std::remove_reference_t<decltype(std::declval<Ref>()(std::declval<Config&>()))>;

template <typename Ref>
Key Bool(std::string_view section, std::string_view name, Ref ref) {
  Key key{section, name, {}, {}, {}};
  const std::string path = key.Path();
  key.read = [=](const Json& value, Config& config) {
    if (!value.is_boolean()) return Problem(path, Shown(value), "true or false");
    ref(config) = value.get<bool>();
    return Status::OK();
  };
  key.check = [](const Config&) { return Status::OK(); };
  key.write = [=](const Config& config) { return Json(ref(config)); };
  return key;
}

template <typename Ref>
Key Number(std::string_view section, std::string_view name, double min, double max, Ref ref) {
  Key key{section, name, {}, {}, {}};
  const std::string path = key.Path();
  const std::string allowed = "a number from " + ShownDouble(min) + " to " + ShownDouble(max);
  // Written so that NaN fails too.
  auto in_range = [=](double d) { return d >= min && d <= max; };
  key.read = [=](const Json& value, Config& config) {
    const std::optional<double> d = jsonutil::NumberValue(value);
    if (!d || !in_range(*d)) return Problem(path, Shown(value), allowed);
    ref(config) = *d;
    return Status::OK();
  };
  key.check = [=](const Config& config) {
    const double d = ref(config);
    return in_range(d) ? Status::OK() : Problem(path, ShownDouble(d), allowed);
  };
  key.write = [=](const Config& config) { return Json(ref(config)); };
  return key;
}

// An integer key. When the field is a std::optional, JSON null clears it.
template <typename Ref>
Key Integer(std::string_view section, std::string_view name, std::int64_t min, std::int64_t max,
            Ref ref) {
  using Field = FieldType<Ref>;
  constexpr bool kNullable = !std::is_arithmetic<Field>::value;
  Key key{section, name, {}, {}, {}};
  const std::string path = key.Path();
  auto in_range = [=](double d) {
    return d >= static_cast<double>(min) && d <= static_cast<double>(max);
  };
  // What to say about `d` (NaN for a value that is not a number).
  auto problem = [=](double d, const std::string& shown) {
    const bool too_big = d > static_cast<double>(max);
    return Problem(path, shown, (kNullable ? "null or " : "") + IntegerRange(min, max, too_big));
  };
  key.read = [=](const Json& value, Config& config) {
    if constexpr (kNullable) {
      if (value.is_null()) {
        ref(config).reset();
        return Status::OK();
      }
    }
    const std::optional<double> d = WholeNumber(value);
    if (!d || !in_range(*d)) {
      // Any number's value (infinite beyond a double's range) decides whether it was too big.
      return problem(
          jsonutil::NumberValue(value).value_or(std::numeric_limits<double>::quiet_NaN()),
          Shown(value));
    }
    if constexpr (kNullable) {
      ref(config) = static_cast<typename Field::value_type>(*d);
    } else {
      ref(config) = static_cast<Field>(*d);
    }
    return Status::OK();
  };
  key.check = [=](const Config& config) {
    const auto& field = ref(config);
    if constexpr (kNullable) {
      if (!field.has_value()) return Status::OK();
      const auto d = static_cast<double>(*field);
      return in_range(d) ? Status::OK() : problem(d, std::to_string(*field));
    } else {
      const auto d = static_cast<double>(field);
      return in_range(d) ? Status::OK() : problem(d, std::to_string(field));
    }
  };
  key.write = [=](const Config& config) {
    const auto& field = ref(config);
    if constexpr (kNullable) {
      return field.has_value() ? Json(*field) : Json(nullptr);
    } else {
      return Json(field);
    }
  };
  return key;
}

// Lower case with '_', '-' and ' ' dropped: "keep_turns", "KeepTurns" and "keepturns" all
// become "keepturns", which is how a near miss is recognised for "did you mean".
std::string Folded(std::string_view s) {
  std::string out;
  for (char c : s) {
    if (c == '_' || c == '-' || c == ' ') continue;
    out += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  }
  return out;
}

template <typename Enum>
struct Choice {
  std::string_view name;
  Enum value;
};

template <typename Enum, typename Ref>
Key OneOf(std::string_view section, std::string_view name, std::vector<Choice<Enum>> choices,
          Ref ref) {
  Key key{section, name, {}, {}, {}};
  const std::string path = key.Path();
  std::string allowed = "one of ";
  for (std::size_t i = 0; i < choices.size(); ++i) {
    if (i > 0) allowed += ", ";
    allowed += "\"" + std::string(choices[i].name) + "\"";
  }
  key.read = [=](const Json& value, Config& config) {
    if (value.is_string()) {
      const auto& text = value.get_ref<const std::string&>();
      for (const auto& choice : choices) {
        if (text == choice.name) {
          ref(config) = choice.value;
          return Status::OK();
        }
      }
      for (const auto& choice : choices) {
        if (Folded(text) == Folded(choice.name)) {
          return Problem(path, Shown(value),
                         allowed + " (did you mean \"" + std::string(choice.name) + "\"?)");
        }
      }
    }
    return Problem(path, Shown(value), allowed);
  };
  key.check = [=](const Config& config) {
    for (const auto& choice : choices) {
      if (ref(config) == choice.value) return Status::OK();
    }
    return Problem(path, std::to_string(static_cast<long long>(ref(config))), allowed);
  };
  key.write = [=](const Config& config) {
    for (const auto& choice : choices) {
      if (ref(config) == choice.value) return Json(std::string(choice.name));
    }
    return Json(nullptr);  // unreachable for a config that passes Validate
  };
  return key;
}

// The shape of compaction.clearToolResults and compaction.background: true or false, or an
// object of its own keys (`known`, "enabled" first) that turns it on unless it says
// "enabled": false. `field` reads one key other than "enabled" into `out`; nullopt: a key it
// does not know. `current` changes only when the whole value reads.
template <class T>
Status ReadSwitchable(
    const Json& value, const std::string& path, const std::vector<std::string_view>& known,
    const std::string& example, T& current,
    const std::function<std::optional<Status>(const std::string& name, const Json& v,
                                              const std::string& at, T& out)>& field) {
  std::string keys;
  for (std::string_view k : known) keys += (keys.empty() ? "" : ", ") + std::string(k);
  if (value.is_boolean()) {
    current.enabled = value.get<bool>();
    return Status::OK();
  }
  if (!value.is_object()) {
    return Problem(
        path, Shown(value),
        "true, false or an object with some of the keys " + keys + " (e.g. " + example + ")");
  }
  T out;
  out.enabled = true;
  for (const auto& [name, v] : value.items()) {
    const std::string at = path + "." + name;
    if (name == "enabled") {
      if (!v.is_boolean()) return Problem(at, Shown(v), "true or false");
      out.enabled = v.template get<bool>();
      continue;
    }
    if (std::optional<Status> read = field(name, v, at, out)) {
      RECAP_RETURN_IF_ERROR(*read);
      continue;
    }
    std::string msg = "unknown key " + jsonutil::Quote(at) + "; known keys in \"" + path +
                      "\" are: " + keys + ".";
    for (std::string_view k : known) {
      if (Folded(name) == Folded(k))
        msg += " Did you mean \"" + path + "." + std::string(k) + "\"?";
    }
    return Status::InvalidArgument(msg);
  }
  current = std::move(out);
  return Status::OK();
}

// compaction.clearToolResults (R14.3): true / false, or an object of its own keys.
Key ClearToolResults() {
  Key key{"compaction", "clearToolResults", {}, {}, {}};
  const std::string path = key.Path();
  constexpr std::int64_t kMaxKeep = 100000;
  key.read = [=](const Json& value, Config& config) -> Status {
    return ReadSwitchable<ClearToolResultsConfig>(
        value, path, {"enabled", "keepRecent", "excludeTools", "minFreeChars"},
        "{\"keepRecent\": 3, \"excludeTools\": [\"read_file\"], \"minFreeChars\": 20000}",
        config.compaction.clear_tool_results,
        [&](const std::string& name, const Json& v, const std::string& at,
            ClearToolResultsConfig& out) -> std::optional<Status> {
          if (name == "keepRecent") {
            const std::optional<double> d = WholeNumber(v);
            if (!d || *d < 0 || *d > static_cast<double>(kMaxKeep)) {
              return Problem(at, Shown(v), IntegerRange(0, kMaxKeep, true));
            }
            out.keep_recent = static_cast<int>(*d);
          } else if (name == "minFreeChars") {
            const std::optional<double> d = WholeNumber(v);
            if (!d || *d < 0 || *d > static_cast<double>(kMaxJsonInteger)) {
              return Problem(at, Shown(v), IntegerRange(0, kMaxJsonInteger, d && *d > 0));
            }
            out.min_free_chars = static_cast<std::size_t>(*d);
          } else if (name == "excludeTools") {
            if (!v.is_array()) return Problem(at, Shown(v), "an array of tool names (strings)");
            for (std::size_t i = 0; i < v.size(); ++i) {
              if (!v[i].is_string() || v[i].get_ref<const std::string&>().empty()) {
                return Problem(at + "[" + std::to_string(i) + "]", Shown(v[i]),
                               "a tool name: a non-empty string");
              }
              out.exclude_tools.push_back(v[i].get<std::string>());
            }
          } else {
            return std::nullopt;
          }
          return Status::OK();
        });
  };
  key.check = [=](const Config& config) {
    const ClearToolResultsConfig& c = config.compaction.clear_tool_results;
    if (c.keep_recent < 0 || c.keep_recent > kMaxKeep) {
      return Problem(path + ".keepRecent", std::to_string(c.keep_recent),
                     IntegerRange(0, kMaxKeep, true));
    }
    for (std::size_t i = 0; i < c.exclude_tools.size(); ++i) {
      if (c.exclude_tools[i].empty()) {
        return Problem(path + ".excludeTools[" + std::to_string(i) + "]", "\"\"",
                       "a tool name: a non-empty string");
      }
    }
    return Status::OK();
  };
  key.write = [](const Config& config) {
    const ClearToolResultsConfig& c = config.compaction.clear_tool_results;
    Json j = Json::object();
    j["enabled"] = c.enabled;
    j["keepRecent"] = c.keep_recent;
    j["excludeTools"] = c.exclude_tools;
    j["minFreeChars"] = c.min_free_chars;
    return j;
  };
  return key;
}

// compaction.background (R15): true / false, or an object of its own keys.
Key Background() {
  Key key{"compaction", "background", {}, {}, {}};
  const std::string path = key.Path();
  constexpr std::int64_t kMaxWorkers = 64;
  auto start_at_ok = [](double d) { return d >= 0.1 && d <= 1.0; };
  key.read = [=](const Json& value, Config& config) -> Status {
    return ReadSwitchable<BackgroundConfig>(
        value, path, {"enabled", "startAt", "maxWaitMs", "workers"},
        "{\"startAt\": 0.7, \"maxWaitMs\": 600000}", config.compaction.background,
        [&](const std::string& name, const Json& v, const std::string& at,
            BackgroundConfig& out) -> std::optional<Status> {
          if (name == "startAt") {
            const std::optional<double> d = jsonutil::NumberValue(v);
            if (!d || !start_at_ok(*d)) {
              return Problem(at, Shown(v), "a number from 0.1 to 1 (a fraction of the trigger)");
            }
            out.start_at = *d;
          } else if (name == "maxWaitMs") {
            const std::optional<double> d = WholeNumber(v);
            if (!d || *d < 1 || *d > static_cast<double>(kMaxJsonInteger)) {
              return Problem(at, Shown(v), IntegerRange(1, kMaxJsonInteger, d && *d > 1));
            }
            out.max_wait_ms = static_cast<std::size_t>(*d);
          } else if (name == "workers") {
            const std::optional<double> d = WholeNumber(v);
            if (!d || *d < 1 || *d > static_cast<double>(kMaxWorkers)) {
              return Problem(at, Shown(v), IntegerRange(1, kMaxWorkers, true));
            }
            out.workers = static_cast<int>(*d);
          } else {
            return std::nullopt;
          }
          return Status::OK();
        });
  };
  key.check = [=](const Config& config) {
    const BackgroundConfig& c = config.compaction.background;
    if (!start_at_ok(c.start_at)) {
      return Problem(path + ".startAt", std::to_string(c.start_at),
                     "a number from 0.1 to 1 (a fraction of the trigger)");
    }
    if (c.max_wait_ms < 1 || c.max_wait_ms > static_cast<std::size_t>(kMaxJsonInteger)) {
      return Problem(path + ".maxWaitMs", std::to_string(c.max_wait_ms),
                     IntegerRange(1, kMaxJsonInteger, c.max_wait_ms > 1));
    }
    if (c.workers < 1 || c.workers > kMaxWorkers) {
      return Problem(path + ".workers", std::to_string(c.workers),
                     IntegerRange(1, kMaxWorkers, true));
    }
    return Status::OK();
  };
  key.write = [](const Config& config) {
    const BackgroundConfig& c = config.compaction.background;
    Json j = Json::object();
    j["enabled"] = c.enabled;
    j["startAt"] = c.start_at;
    j["maxWaitMs"] = c.max_wait_ms;
    j["workers"] = c.workers;
    return j;
  };
  return key;
}

// compaction.ledger (R17): true / false, or an object of its own keys.
Key LedgerKey() {
  Key key{"compaction", "ledger", {}, {}, {}};
  const std::string path = key.Path();
  constexpr std::int64_t kMinChars = 200;
  key.read = [=](const Json& value, Config& config) -> Status {
    return ReadSwitchable<LedgerConfig>(
        value, path, {"enabled", "maxChars"}, "{\"maxChars\": 8000}", config.compaction.ledger,
        [&](const std::string& name, const Json& v, const std::string& at,
            LedgerConfig& out) -> std::optional<Status> {
          if (name != "maxChars") return std::nullopt;
          const std::optional<double> d = WholeNumber(v);
          if (!d || *d < kMinChars || *d > static_cast<double>(kMaxJsonInteger)) {
            return Problem(at, Shown(v),
                           IntegerRange(kMinChars, kMaxJsonInteger, d && *d > kMinChars));
          }
          out.max_chars = static_cast<std::size_t>(*d);
          return Status::OK();
        });
  };
  key.check = [=](const Config& config) {
    const LedgerConfig& c = config.compaction.ledger;
    if (c.max_chars < static_cast<std::size_t>(kMinChars) ||
        c.max_chars > static_cast<std::size_t>(kMaxJsonInteger)) {
      return Problem(path + ".maxChars", std::to_string(c.max_chars),
                     IntegerRange(kMinChars, kMaxJsonInteger,
                                  c.max_chars > static_cast<std::size_t>(kMinChars)));
    }
    return Status::OK();
  };
  key.write = [](const Config& config) {
    const LedgerConfig& c = config.compaction.ledger;
    Json j = Json::object();
    j["enabled"] = c.enabled;
    j["maxChars"] = c.max_chars;
    return j;
  };
  return key;
}

// Every key, in the order ToJson writes them and error messages list them. Sections appear in
// the order of their first key.
const std::vector<Key>& Keys() {
  static const std::vector<Key> kKeys = {
      Bool("compaction", "auto", Slot{&Config::compaction, &CompactionConfig::auto_compact}),
      Number("compaction", "threshold", 0.1, 0.99,
             Slot{&Config::compaction, &CompactionConfig::threshold}),
      Integer("compaction", "keepTurns", 0, 20,
              Slot{&Config::compaction, &CompactionConfig::keep_turns}),
      Integer("compaction", "maxOutputTokens", 1, kMaxJsonInteger,
              Slot{&Config::compaction, &CompactionConfig::max_output_tokens}),
      Bool("compaction", "calibrate", Slot{&Config::compaction, &CompactionConfig::calibrate}),
      OneOf<Fallback>("compaction", "fallback",
                      {{"none", Fallback::kNone}, {"offline", Fallback::kOffline}},
                      Slot{&Config::compaction, &CompactionConfig::fallback}),
      Integer("compaction", "instructionsForSummarizerChars", 0, kMaxJsonInteger,
              Slot{&Config::compaction, &CompactionConfig::instructions_for_summarizer_chars}),
      Integer("compaction", "maxSummarizerInputTokens", 1000, kMaxJsonInteger,
              Slot{&Config::compaction, &CompactionConfig::max_summarizer_input_tokens}),
      ClearToolResults(),
      Background(),
      LedgerKey(),
      Bool("compaction", "recallTool", Slot{&Config::compaction, &CompactionConfig::recall_tool}),
      Integer("limits", "maxContextChars", 4000, kMaxJsonInteger,
              Slot{&Config::limits, &LimitsConfig::max_context_chars}),
      Integer("pluginHooks", "timeoutMs", 1, kMaxJsonInteger,
              Slot{&Config::plugin_hooks, &PluginHooksConfig::timeout_ms}),
      // A window above kMaxTrustedContextWindow is accepted here on purpose: R1.2 makes the
      // Compactor treat it as unknown, and a config file should not stop loading because a
      // model's advertised window grew.
      Integer("provider", "contextWindow", 1, kMaxJsonInteger,
              Slot{&Config::provider, &ProviderConfig::context_window}),
      Integer("cache", "maxBytes", 0, kMaxJsonInteger,
              Slot{&Config::cache, &CacheConfig::max_bytes}),
  };
  return kKeys;
}

std::vector<std::string_view> Sections() {
  std::vector<std::string_view> sections;
  for (const Key& key : Keys()) {
    if (std::find(sections.begin(), sections.end(), key.section) == sections.end()) {
      sections.push_back(key.section);
    }
  }
  return sections;
}

std::string KeyList(std::string_view section) {
  std::string list;
  for (const Key& key : Keys()) {
    if (key.section != section) continue;
    if (!list.empty()) list += ", ";
    list += key.name;
  }
  return list;
}

const Key* FindKey(std::string_view section, std::string_view name) {
  for (const Key& key : Keys()) {
    if (key.section == section && key.name == name) return &key;
  }
  return nullptr;
}

// A known path the user probably meant by `name` (inside `section`, or at the top level when
// `section` is empty): the same key spelled differently, or the key under another section.
std::optional<std::string> Suggest(std::string_view section, std::string_view name) {
  const std::string folded = Folded(name);
  if (section.empty()) {
    for (std::string_view s : Sections()) {
      if (Folded(s) == folded) return std::string(s);
    }
  } else {
    for (const Key& key : Keys()) {
      if (key.section == section && Folded(key.name) == folded) return key.Path();
    }
  }
  for (const Key& key : Keys()) {
    if (Folded(key.name) == folded) return key.Path();
  }
  return std::nullopt;
}

Status UnknownKey(std::string_view section, const std::string& name) {
  std::string msg;
  if (section.empty()) {
    msg = "unknown key " + jsonutil::Quote(name) + "; known top-level keys are: ";
    const auto sections = Sections();
    for (std::size_t i = 0; i < sections.size(); ++i) {
      if (i > 0) msg += ", ";
      msg += sections[i];
    }
    msg += ".";
  } else {
    msg = "unknown key " + jsonutil::Quote(std::string(section) + "." + name) +
          "; known keys in \"" + std::string(section) + "\" are: " + KeyList(section) + ".";
  }
  if (auto suggestion = Suggest(section, name)) msg += " Did you mean \"" + *suggestion + "\"?";
  return Status::InvalidArgument(std::move(msg));
}

Result<Config> Parse(std::string_view text) {
  // Numbers as written, so that a message shows the value the way the file has it (and a
  // number beyond a double's range is a value out of range, not a broken file). A key twice in
  // one object is refused: nlohmann kept the last copy silently, other JSON tools keep the
  // first, so a duplicate means the file says two things at once.
  jsonutil::ParseOptions options;
  options.numbers = jsonutil::Numbers::kText;
  options.reject_duplicate_keys = true;
  Json doc;
  Status s = jsonutil::Parse(text, "the configuration", &doc, options);
  RECAP_RETURN_IF_ERROR(s);
  if (!doc.is_object()) {
    return Status::InvalidArgument(
        "the configuration is " + Shown(doc) +
        "; it must be a JSON object such as {\"compaction\": {\"threshold\": 0.8}} (an empty "
        "object {} gives the defaults).");
  }

  Config config;
  for (const auto& [section, members] : doc.items()) {
    const std::string& section_name = section;
    bool known = false;
    for (std::string_view name : Sections()) known = known || name == section_name;
    if (!known) return UnknownKey({}, section_name);
    if (!members.is_object()) {
      return Problem(section_name, Shown(members),
                     "an object with some of the keys " + KeyList(section_name));
    }
    for (const auto& [name, value] : members.items()) {
      const Key* key = FindKey(section_name, name);
      if (key == nullptr) return UnknownKey(section_name, name);
      RECAP_RETURN_IF_ERROR(key->read(value, config));
    }
  }
  return config;
}

}  // namespace

Result<Config> Config::FromJson(std::string_view json) {
  try {
    return Parse(json);
  } catch (const std::bad_alloc&) {
    throw;
  } catch (const std::exception& e) {
    // Nothing above throws by design; if nlohmann ever does, it must not cross the API.
    return Status::Internal("reading the configuration failed unexpectedly: " +
                            jsonutil::Quote(e.what(), 300));
  }
}

namespace {

// "1 MiB (1048576 bytes)", "64 KiB (65536 bytes)", "10 bytes".
std::string SizeText(std::size_t bytes) {
  std::string exact = std::to_string(bytes) + " bytes";
  if (bytes >= (std::size_t{1} << 20) && bytes % (std::size_t{1} << 20) == 0) {
    return std::to_string(bytes >> 20) + " MiB (" + exact + ")";
  }
  if (bytes >= 1024 && bytes % 1024 == 0)
    return std::to_string(bytes >> 10) + " KiB (" + exact + ")";
  return exact;
}

// Closes the file on every way out.
struct FileCloser {
  void operator()(std::FILE* f) const noexcept { std::fclose(f); }
};

}  // namespace

Result<Config> Config::FromFile(const std::string& path, std::size_t max_bytes) {
  const std::string named = "the configuration file '" + jsonutil::Printable(path, 300) + "'";
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec)) {
    return Status::InvalidArgument(named + " is a directory; name the JSON file in it.");
  }
  errno = 0;
  std::unique_ptr<std::FILE, FileCloser> file(std::fopen(path.c_str(), "rb"));
  if (!file) {
    const int err = errno;
    const std::string why = err != 0 ? std::generic_category().message(err) : "unknown error";
    if (err == ENOENT || err == ENOTDIR) {
      return Status::NotFound("cannot open " + named + ": " + why + ".");
    }
    return Status::IOError("cannot open " + named + ": " + why + ".");
  }
  // Read in pieces up to one byte past the limit: enough to tell "too large" without ever
  // holding more than the limit (a device or a pipe may never end).
  std::string text;
  const std::size_t want = max_bytes == SIZE_MAX ? max_bytes : max_bytes + 1;
  char buffer[64 * 1024];
  while (text.size() < want) {
    const std::size_t n =
        std::fread(buffer, 1, std::min(sizeof buffer, want - text.size()), file.get());
    text.append(buffer, n);
    if (n == 0) break;
  }
  if (std::ferror(file.get())) {
    return Status::IOError("reading " + named +
                           " failed: " + std::generic_category().message(errno) + ".");
  }
  if (text.size() > max_bytes) {
    return Status::InvalidArgument(
        named + " is larger than " + SizeText(max_bytes) +
        ", the most Config::FromFile reads: a configuration is a few hundred bytes, so this is "
        "probably another file (or a stream that does not end). Name the JSON configuration "
        "file, or pass a larger max_bytes to Config::FromFile.");
  }
  Result<Config> config = FromJson(text);
  if (!config.ok()) return config.status().WithContext(named);
  return config;
}

Status Config::Validate() const {
  for (const Key& key : Keys()) {
    RECAP_RETURN_IF_ERROR(key.check(*this));
  }
  return Status::OK();
}

std::string Config::ToJson() const {
  Json doc = Json::object();
  for (const Key& key : Keys()) {
    doc[std::string(key.section)][std::string(key.name)] = key.write(*this);
  }
  // Pretty, because the usual reader is a person starting a config file from the defaults.
  return doc.dump(2);
}

}  // namespace v0
}  // namespace recap
