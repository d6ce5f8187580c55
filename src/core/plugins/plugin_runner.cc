#include "plugins/plugin_runner.h"

#include <condition_variable>
#include <exception>
#include <mutex>
#include <optional>
#include <set>
#include <system_error>
#include <thread>
#include <utility>

#include "recap/measure.h"

#include "json/json_util.h"
#include "recap_internal/call_scope.h"

namespace recap {
inline namespace v0 {
namespace internal {

namespace {

constexpr const char* kBefore = "beforeCompact";
constexpr const char* kAfter = "afterCompact";

// Everything one hook call needs, owned jointly by the caller and the hook's thread. The
// thread never refers to anything outside this block, which is what makes abandoning it safe:
// the block lives until the last of the two lets go.
template <class Context, class R>
struct HookCall {
  using Hook = Result<R> (PluginHook::*)(const Context&, const CancellationToken&);

  HookCall(std::shared_ptr<PluginHook> p, Context c, Hook h)
      : plugin(std::move(p)), context(std::move(c)), hook(h) {}

  const std::shared_ptr<PluginHook> plugin;
  const Context context;
  const Hook hook;
  CancellationSource cancel;

  std::mutex mu;
  std::condition_variable cv;
  bool done = false;                // guarded by mu
  std::optional<Result<R>> result;  // guarded by mu; empty when the hook threw
  std::string thrown;               // guarded by mu
};

template <class R>
struct HookOutcome {
  std::optional<R> value;
  std::string problem;  // what went wrong, e.g. "threw: boom"; empty on success
};

template <class Context, class R>
void RunOnThisThread(const std::shared_ptr<HookCall<Context, R>>& call) {
  std::optional<Result<R>> result;
  std::string thrown;
  try {
    result.emplace((call->plugin.get()->*(call->hook))(call->context, call->cancel.Token()));
  } catch (const std::exception& e) {
    thrown = std::string("threw: ") + ToValidUtf8(e.what());
  } catch (...) {
    thrown = "threw an exception that is not a std::exception";
  }
  std::lock_guard<std::mutex> lock(call->mu);
  call->result = std::move(result);
  call->thrown = std::move(thrown);
  call->done = true;
  call->cv.notify_all();
}

template <class Context, class R>
HookOutcome<R> CallWithTimeout(std::shared_ptr<PluginHook> plugin, Context context,
                               typename HookCall<Context, R>::Hook hook,
                               std::chrono::milliseconds timeout) {
  auto call = std::make_shared<HookCall<Context, R>>(std::move(plugin), std::move(context), hook);
  HookOutcome<R> out;
  std::thread thread;
  try {
    // The hook runs for the calls this thread is inside: it may not call them back either.
    thread = std::thread([call, owners = CallScope::Current()] {
      CallScope::Adopted adopted(owners);
      RunOnThisThread(call);
    });
  } catch (const std::system_error& e) {
    out.problem = std::string("could not be started on a thread of its own (") + e.what() + ")";
    return out;
  }

  std::unique_lock<std::mutex> lock(call->mu);
  const bool finished = call->cv.wait_for(lock, timeout, [&] { return call->done; });
  if (!finished) {
    lock.unlock();
    // Abandon it: the thread holds `call` and nothing else of ours.
    call->cancel.Cancel();
    thread.detach();
    out.problem = "timed out after " + std::to_string(timeout.count()) + " ms";
    return out;
  }
  std::optional<Result<R>> result = std::move(call->result);
  std::string thrown = std::move(call->thrown);
  lock.unlock();
  thread.join();  // it has only its return left to do

  if (!result) {
    out.problem = std::move(thrown);
  } else if (!result->ok()) {
    const Status& s = result->status();
    out.problem = s.message().empty()
                      ? std::string("failed with status ") + StatusCodeName(s.code())
                      : "failed: " + ToValidUtf8(s.message());
  } else {
    out.value = std::move(**result);
  }
  return out;
}

std::string Quote(const std::string& s) { return "\"" + s + "\""; }

HookFailure Failure(const std::string& plugin, const char* hook, const std::string& problem) {
  HookFailure f;
  f.plugin = plugin;
  f.hook = hook;
  f.error =
      "plugin " + Quote(plugin) + " " + hook + " " + problem + "; compaction continues without it";
  return f;
}

// The plugin's name, or an empty optional with `problem` set when the plugin cannot give one.
// Name() runs on the caller's thread: it is meant to return a constant.
std::optional<std::string> NameOf(const std::shared_ptr<PluginHook>& plugin, std::size_t index,
                                  std::string* label, std::string* problem) {
  *label = "#" + std::to_string(index + 1);
  if (!plugin) {
    *problem = "is a null pointer and was skipped";
    return std::nullopt;
  }
  try {
    std::string name = ToValidUtf8(plugin->Name());
    *label = name;
    return name;
  } catch (const std::exception& e) {
    *problem = std::string("threw from Name(): ") + ToValidUtf8(e.what());
  } catch (...) {
    *problem = "threw from Name() an exception that is not a std::exception";
  }
  return std::nullopt;
}

// Empty when `text` is acceptable, else what is wrong with it. `what` is a noun phrase.
std::string CheckText(const std::string& text, const std::string& what) {
  if (!IsValidUtf8(text)) return "invalid UTF-8 in " + what;
  const std::size_t chars = CountCodePoints(text);
  if (chars > kMaxPluginTextChars) {
    return std::to_string(chars) + " characters in " + what + ", over the limit of " +
           std::to_string(kMaxPluginTextChars);
  }
  return {};
}

bool IsCheckpointField(const std::string& name) {
  static const std::set<std::string> kFields = {"goal",         "instructions", "discoveries",
                                                "accomplished", "currentState", "nextSteps",
                                                "relevantFiles"};
  return kFields.count(name) != 0;
}

// Empty when the request is acceptable. `claimed` maps the fields of plugins accepted so far
// to their plugin.
std::string CheckRequest(const BeforeCompactResult& r,
                         const std::map<std::string, std::string>& claimed) {
  if (std::string p = CheckText(r.instructions, "the instructions"); !p.empty()) return p;
  if (r.output_fields.size() > kMaxPluginOutputFields) {
    return "asks for " + std::to_string(r.output_fields.size()) + " output fields; the limit is " +
           std::to_string(kMaxPluginOutputFields);
  }
  std::set<std::string> mine;
  for (const OutputField& f : r.output_fields) {
    if (!IsValidUtf8(f.name)) return "invalid UTF-8 in an output field name";
    const std::string field = "output field " + Quote(f.name);
    if (!IsPlainFieldName(f.name)) {
      return field + " is not a plain name (letters, digits and _, not starting with a digit, " +
             "at most " + std::to_string(kMaxFieldNameLength) + " characters)";
    }
    if (IsCheckpointField(f.name)) return field + " is a checkpoint field and cannot be claimed";
    if (!mine.insert(f.name).second) return field + " is asked for twice";
    if (auto it = claimed.find(f.name); it != claimed.end()) {
      return field + " is already asked for by plugin " + Quote(it->second);
    }
    if (std::string p = CheckText(f.description, "the description of " + field); !p.empty()) {
      return p;
    }
    if (std::string p = CheckText(f.json_schema, "the JSON schema of " + field); !p.empty()) {
      return p;
    }
    if (!f.json_schema.empty()) {
      jsonutil::Json schema;
      Status s = jsonutil::Parse(f.json_schema, "the JSON schema of " + field, &schema);
      if (!s.ok()) return "the JSON schema of " + field + " is not JSON";
      if (!schema.is_object()) {
        return "the JSON schema of " + field + " is " + jsonutil::TypeName(schema) +
               ", not an object";
      }
    }
  }
  return {};
}

std::string CheckReport(const AfterCompactResult& r) {
  if (std::string p = CheckText(r.inject_context, "the context to inject"); !p.empty()) return p;
  return CheckText(r.report, "the report");
}

}  // namespace

bool IsPlainFieldName(const std::string& name) noexcept {
  if (name.empty() || name.size() > kMaxFieldNameLength) return false;
  auto letter = [](char c) { return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || c == '_'; };
  if (!letter(name[0])) return false;
  for (char c : name) {
    if (!letter(c) && !(c >= '0' && c <= '9')) return false;
  }
  return true;
}

BeforeCompactRun RunBeforeCompact(const std::vector<std::shared_ptr<PluginHook>>& plugins,
                                  const BeforeCompactContext& context,
                                  std::chrono::milliseconds timeout) {
  BeforeCompactRun run;
  std::set<std::string> names;
  std::map<std::string, std::string> claimed;  // field -> plugin
  for (std::size_t i = 0; i < plugins.size(); ++i) {
    std::string label;
    std::string problem;
    std::optional<std::string> name = NameOf(plugins[i], i, &label, &problem);
    if (!name) {
      run.failures.push_back(Failure(label, kBefore, problem));
      continue;
    }
    if (!names.insert(*name).second) {
      run.failures.push_back(
          Failure(*name, kBefore,
                  "was not run: an earlier plugin has the same name, and names must be unique"));
      continue;
    }
    HookOutcome<BeforeCompactResult> outcome =
        CallWithTimeout<BeforeCompactContext, BeforeCompactResult>(
            plugins[i], context, &PluginHook::BeforeCompact, timeout);
    if (!outcome.value) {
      run.failures.push_back(Failure(*name, kBefore, outcome.problem));
      continue;
    }
    if (std::string p = CheckRequest(*outcome.value, claimed); !p.empty()) {
      run.failures.push_back(Failure(*name, kBefore, "returned garbage: " + p));
      continue;
    }
    for (const OutputField& f : outcome.value->output_fields) claimed.emplace(f.name, *name);
    run.ok.push_back({*name, std::move(*outcome.value)});
  }
  return run;
}

AfterCompactRun RunAfterCompact(
    const std::vector<std::shared_ptr<PluginHook>>& plugins,
    const std::vector<std::string>& participating, const AfterCompactContext& base_context,
    const std::map<std::string, std::map<std::string, std::string>>& fields_by_plugin,
    std::chrono::milliseconds timeout) {
  AfterCompactRun run;
  const std::set<std::string> wanted(participating.begin(), participating.end());
  std::set<std::string> done;
  for (std::size_t i = 0; i < plugins.size(); ++i) {
    std::string label;
    std::string problem;
    std::optional<std::string> name = NameOf(plugins[i], i, &label, &problem);
    // A plugin without a usable name failed BeforeCompact already and does not take part; a
    // second plugin with a taken name was not run then either.
    if (!name || wanted.count(*name) == 0 || !done.insert(*name).second) continue;

    AfterCompactContext context = base_context;
    auto fields = fields_by_plugin.find(*name);
    if (fields != fields_by_plugin.end()) {
      context.fields = fields->second;
    } else {
      context.fields.clear();
    }
    HookOutcome<AfterCompactResult> outcome =
        CallWithTimeout<AfterCompactContext, AfterCompactResult>(
            plugins[i], std::move(context), &PluginHook::AfterCompact, timeout);
    if (!outcome.value) {
      run.failures.push_back(Failure(*name, kAfter, outcome.problem));
      continue;
    }
    if (std::string p = CheckReport(*outcome.value); !p.empty()) {
      run.failures.push_back(Failure(*name, kAfter, "returned garbage: " + p));
      continue;
    }
    run.ok.push_back({*name, std::move(*outcome.value)});
  }
  return run;
}

}  // namespace internal
}  // namespace v0
}  // namespace recap
