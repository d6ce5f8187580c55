// The built-in memory plugin (R9.3) and the in-memory MemoryStore.
#include "recap/memory_plugin.h"

#include <algorithm>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <utility>

#include "recap/measure.h"

#include "json/json_util.h"
#include "plugins/plugin_runner.h"

namespace recap {
inline namespace v0 {

MemoryStore::~MemoryStore() = default;

namespace {

class InMemoryMemoryStore final : public MemoryStore {
 public:
  Status Add(const std::string& scope, const std::vector<std::string>& memories) override {
    std::lock_guard<std::mutex> lock(mu_);
    Scope& s = scopes_[scope];
    for (const std::string& m : memories) {
      if (s.known.insert(m).second) s.ordered.push_back(m);
    }
    return Status::OK();
  }

  Result<std::vector<std::string>> List(const std::string& scope) override {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = scopes_.find(scope);
    if (it == scopes_.end()) return std::vector<std::string>{};
    return it->second.ordered;
  }

 private:
  struct Scope {
    std::vector<std::string> ordered;  // oldest first
    std::set<std::string> known;
  };
  std::mutex mu_;
  std::map<std::string, Scope> scopes_;
};

constexpr const char* kField = "memories";
// A memory is meant to be one short fact; anything longer is a dump of task state and would
// crowd the injected context, so it is not kept.
constexpr std::size_t kMaxMemoryChars = 2000;

// Trims a memory and folds its whitespace runs (newlines included) into single spaces, so
// that each memory stays one list item when injected.
std::string Normalize(const std::string& text) {
  std::string out;
  out.reserve(text.size());
  bool pending_space = false;
  for (char c : text) {
    if (c == ' ' || c == '\n' || c == '\r' || c == '\t' || c == '\f' || c == '\v') {
      pending_space = !out.empty();
      continue;
    }
    if (pending_space) out.push_back(' ');
    pending_space = false;
    out.push_back(c);
  }
  return out;
}

class MemoryPlugin final : public PluginHook {
 public:
  MemoryPlugin(std::shared_ptr<MemoryStore> store, MemoryPluginOptions options)
      : store_(std::move(store)), options_(std::move(options)) {}

  std::string Name() const override { return "memory"; }

  Result<BeforeCompactResult> BeforeCompact(const BeforeCompactContext& /*context*/,
                                            const CancellationToken& /*cancel*/) override {
    BeforeCompactResult r;
    r.instructions =
        "Also fill \"memories\": durable facts about the user and the project that are worth "
        "keeping across sessions, such as the user's preferences and conventions, where things "
        "live in the project, and how to build, test or run it. Write each as one short, "
        "self-contained sentence. Leave out task progress and anything that only matters to "
        "the current task; that belongs in the checkpoint. Use an empty list when there is "
        "nothing durable to keep.";
    OutputField f;
    f.name = kField;
    f.description =
        "durable facts about the user and the project worth keeping across sessions; not task "
        "progress";
    f.json_schema = R"({"type":"array","items":{"type":"string"}})";
    r.output_fields.push_back(std::move(f));
    return r;
  }

  Result<AfterCompactResult> AfterCompact(const AfterCompactContext& context,
                                          const CancellationToken& /*cancel*/) override {
    std::vector<std::string> found;
    if (auto it = context.fields.find(kField); it != context.fields.end()) {
      Status s = Extract(it->second, &found);
      RECAP_RETURN_IF_ERROR(s);
    }
    const std::string scope = options_.scope.empty() ? context.session : options_.scope;

    Result<std::vector<std::string>> before = store_->List(scope);
    if (!before.ok()) return before.status().WithContext("could not read memories");
    std::set<std::string> known(before->begin(), before->end());
    std::vector<std::string> fresh;
    for (std::string& m : found) {
      if (known.insert(m).second) fresh.push_back(std::move(m));
    }
    if (!fresh.empty()) {
      if (Status s = store_->Add(scope, fresh); !s.ok()) {
        return s.WithContext("could not store memories");
      }
    }
    Result<std::vector<std::string>> all = store_->List(scope);
    if (!all.ok()) return all.status().WithContext("could not read memories");

    AfterCompactResult r;
    // The newest max_memories, fewer if they would not fit the plugin text limit, shown
    // oldest first.
    const std::string heading = "## Memories\n";
    std::size_t budget = internal::kMaxPluginTextChars - heading.size();
    std::size_t first = all->size();
    while (first > 0 && all->size() - first < options_.max_memories) {
      const std::size_t cost = CountCodePoints((*all)[first - 1]) + 3;  // "- " and "\n"
      if (cost > budget) break;
      budget -= cost;
      --first;
    }
    if (first < all->size()) {
      r.inject_context = heading;
      for (std::size_t i = first; i < all->size(); ++i) r.inject_context += "- " + (*all)[i] + "\n";
    }
    r.report = std::to_string(fresh.size()) +
               (fresh.size() == 1 ? " new memory, " : " new memories, ") +
               std::to_string(all->size()) + " total";
    return r;
  }

 private:
  // Reads the field's JSON text: a list of strings (other items are skipped), or forgivingly
  // a single string, or null. Memories are normalized; empty and over-long ones dropped.
  static Status Extract(const std::string& json, std::vector<std::string>* out) {
    jsonutil::Json value;
    RECAP_RETURN_IF_ERROR(jsonutil::Parse(json, "the \"memories\" field", &value));
    auto take = [&](const jsonutil::Json& item) {
      if (!item.is_string()) return;
      std::string m = Normalize(item.get<std::string>());
      if (!m.empty() && CountCodePoints(m) <= kMaxMemoryChars) out->push_back(std::move(m));
    };
    if (value.is_array()) {
      for (const auto& item : value) take(item);
    } else if (value.is_string()) {
      take(value);
    } else if (!value.is_null()) {
      return Status::InvalidArgument(std::string("the \"memories\" field is ") +
                                     jsonutil::TypeName(value) + "; expected a list of strings");
    }
    return Status::OK();
  }

  const std::shared_ptr<MemoryStore> store_;
  const MemoryPluginOptions options_;
};

}  // namespace

std::shared_ptr<MemoryStore> NewInMemoryMemoryStore() {
  return std::make_shared<InMemoryMemoryStore>();
}

std::shared_ptr<PluginHook> NewMemoryPlugin(std::shared_ptr<MemoryStore> store,
                                            MemoryPluginOptions options) {
  if (!store) store = NewInMemoryMemoryStore();
  return std::make_shared<MemoryPlugin>(std::move(store), std::move(options));
}

}  // namespace v0
}  // namespace recap
