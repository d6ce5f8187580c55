// What a host pays its summarizer (issue 19: SPEC R14.3 and compaction.maxSummarizerInputTokens):
// sessions replayed turn by turn through a Compactor at a small window, the host calling Prepare
// before every model request (before each assistant message), in four configurations:
//
//   summarizer     the defaults: every trigger calls the summarizer
//   clear          compaction.clearToolResults on (keepRecent 3, minFreeChars 20,000): old tool
//                  results are cleared first, and the summarizer is called only when that is
//                  not enough
//   budget         compaction.maxSummarizerInputTokens = 8,000 (32,000 characters a compaction)
//   clear+budget   both
//
// Printed per workload and configuration: turns, summarizer calls and summarizer input
// characters (system prompts and user texts of every request) per 1,000 turns, compactions and
// tool-result clearings, and the characters against `summarizer`, measured in one run. The
// summarizer is recap's offline one behind a counting wrapper: recap then renders, shortens and
// chunks the span exactly as for a model, and the wrapper counts what would be sent.
//
// Workloads: the real transcripts of tests/data (all 206 sessions, summed; window 8,000 tokens)
// and W1 (bench/w1_workload.h, 20,000 messages; window 32,000 tokens). Then W1's first
// compaction: all 20,000 messages appended at once and one Prepare (window 200,000 tokens), with
// and without the budget — the one Prepare whose summarizer calls the budget exists for.
//
// Flags:
//   --recap_smoke          W1 of 2,000 messages and the first 20 real sessions (the ctest
//                          `bench.tiers_smoke`)
//   --recap_json=FILE      also write the figures as JSON comparisons, one object a line
//   --recap_dir=DIR, --recap_repetitions=N, --benchmark_*
//                          accepted for scripts/bench.sh's sake (nothing is written, counts
//                          need no repetitions)
// Exit status: 0, or 2 when an operation failed.
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "recap/compactor.h"
#include "recap/config.h"
#include "recap/measure.h"
#include "recap/offline_summarizer.h"

#include "bench_support.h"
#include "support/test_data.h"
#include "w1_workload.h"

namespace {

using recap_bench::Grouped;

// Forwards to recap's offline summarizer and counts what a model would have been sent.
class CountingSummarizer : public recap::Provider {
 public:
  recap::Result<recap::Completion> Complete(const recap::CompletionRequest& request,
                                            const recap::CancellationToken& cancel) override {
    ++calls;
    chars += recap::CountCodePoints(request.system_prompt);
    for (const recap::Message& m : request.messages) {
      chars += recap::CountCodePoints(recap::JoinedText(m));
    }
    return offline_->Complete(request, cancel);
  }
  std::string Name() const override { return "counting"; }
  std::size_t calls = 0;
  std::size_t chars = 0;

 private:
  std::shared_ptr<recap::Provider> offline_ = recap::NewOfflineSummarizer();
};

struct Figures {
  std::size_t turns = 0;
  std::size_t calls = 0;
  std::size_t chars = 0;
  std::size_t compactions = 0;
  std::size_t clearings = 0;
  std::size_t budget_errors = 0;  // Prepares that ended with kContextBudgetExceeded
};

struct Setup {
  const char* name;
  bool clear;
  bool budget;
};
constexpr Setup kSetups[] = {{"summarizer", false, false},
                             {"clear", true, false},
                             {"budget", false, true},
                             {"clear+budget", true, true}};

recap::Config ConfigFor(const Setup& setup, std::size_t window) {
  recap::Config c;
  c.provider.context_window = window;
  c.limits.max_context_chars = window * 4;
  c.compaction.clear_tool_results.enabled = setup.clear;
  if (setup.budget) c.compaction.max_summarizer_input_tokens = 8000;
  return c;
}

[[noreturn]] void Fail(const recap::Status& s, const char* what) {
  std::fprintf(stderr, "recap_bench_tiers: %s failed: %s\n", what, s.ToString().c_str());
  std::exit(2);
}

// Replays `sessions` one message at a time, Prepare before each assistant message.
Figures Replay(const std::vector<std::vector<recap::Message>>& sessions, const Setup& setup,
               std::size_t window) {
  auto counter = std::make_shared<CountingSummarizer>();
  auto store = recap::NewInMemorySessionStore();
  auto made = recap::Compactor::Create(ConfigFor(setup, window), counter, store);
  if (!made.ok()) Fail(made.status(), "Compactor::Create");
  recap::Compactor& compactor = **made;
  Figures f;
  for (std::size_t s = 0; s < sessions.size(); ++s) {
    const std::string id = "s" + std::to_string(s);
    for (const recap::Message& m : sessions[s]) {
      if (recap::IsTurnStart(m)) ++f.turns;
      if (m.role == recap::Role::kAssistant) {
        auto prepared = compactor.Prepare(id, {});
        if (prepared.ok()) {
          f.compactions += prepared->compactions.size();
          f.clearings += prepared->cleared_tool_result_messages > 0 ? 1 : 0;
        } else if (prepared.status().code() == recap::StatusCode::kContextBudgetExceeded) {
          ++f.budget_errors;
        } else {
          Fail(prepared.status(), "Prepare");
        }
      }
      recap::Status appended = store->Append(id, m).status();
      if (!appended.ok()) Fail(appended, "Append");
    }
  }
  f.calls = counter->calls;
  f.chars = counter->chars;
  return f;
}

double Per1000(std::size_t value, std::size_t turns) {
  return turns == 0 ? 0.0 : static_cast<double>(value) * 1000.0 / static_cast<double>(turns);
}

std::vector<std::string> json_lines;

void Json(const std::string& id, double value, double baseline) {
  json_lines.push_back(
      "  {\"id\": " + recap_bench::JsonString(id) + ", \"value\": " + std::to_string(value) +
      ", \"baseline\": " + std::to_string(baseline) +
      ", \"ratio\": " + std::to_string(baseline > 0 ? value / baseline : 0.0) + "}");
}

void PrintRows(const std::string& workload, const std::vector<Figures>& rows) {
  std::printf("\n%s\n", workload.c_str());
  std::printf("  %-13s %8s %16s %22s %12s %10s %8s %9s\n", "config", "turns", "calls/1k turns",
              "input chars/1k turns", "compactions", "clearings", "errors", "vs first");
  const double base = Per1000(rows[0].chars, rows[0].turns);
  for (std::size_t i = 0; i < rows.size(); ++i) {
    const Figures& f = rows[i];
    const double chars = Per1000(f.chars, f.turns);
    std::printf("  %-13s %8s %16.1f %22s %12s %10s %8s %8.2fx\n", kSetups[i].name,
                Grouped(static_cast<double>(f.turns)).c_str(), Per1000(f.calls, f.turns),
                Grouped(chars).c_str(), Grouped(static_cast<double>(f.compactions)).c_str(),
                Grouped(static_cast<double>(f.clearings)).c_str(),
                Grouped(static_cast<double>(f.budget_errors)).c_str(),
                base > 0 ? chars / base : 0.0);
    Json("tiers/" + workload.substr(0, workload.find(' ')) + "/" + kSetups[i].name +
             "/chars_per_1000_turns",
         chars, base);
    Json("tiers/" + workload.substr(0, workload.find(' ')) + "/" + kSetups[i].name +
             "/calls_per_1000_turns",
         Per1000(f.calls, f.turns), Per1000(rows[0].calls, rows[0].turns));
  }
}

}  // namespace

int main(int argc, char** argv) {
  bool smoke = std::getenv("RECAP_BENCH_SMOKE") != nullptr;
  std::string json_path;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    std::string value;
    if (arg == "--recap_smoke") {
      smoke = true;
    } else if (recap_bench::TakeFlag(arg, "recap_json", &value)) {
      json_path = value;
    } else if (recap_bench::TakeFlag(arg, "recap_dir", &value) ||
               recap_bench::TakeFlag(arg, "recap_repetitions", &value)) {
      // nothing is written, and counts need no repetitions
    } else if (arg.rfind("--benchmark_", 0) == 0) {
      // scripts/bench.sh may pass Google Benchmark's flags to every program; none apply here
    } else {
      std::fprintf(stderr, "recap_bench_tiers: unknown flag %s (see the top of bench_tiers.cc)\n",
                   arg.c_str());
      return 2;
    }
  }

  // The real transcripts, each a session with its instructions first.
  std::vector<std::vector<recap::Message>> real;
  for (const auto& nt : recap::testing::AllRealTranscripts()) {
    std::vector<recap::Message> messages;
    if (nt.conversation.instructions) messages.push_back(*nt.conversation.instructions);
    messages.insert(messages.end(), nt.conversation.messages.begin(),
                    nt.conversation.messages.end());
    real.push_back(std::move(messages));
    if (smoke && real.size() == 20) break;
  }
  recap_bench::W1Options w1_options;
  if (smoke) w1_options.messages = 2000;
  const std::vector<recap::Message> w1 = recap_bench::GenerateW1(w1_options);

  std::printf(
      "summarizer cost per 1,000 turns (issue 19; the offline summarizer behind a counter)\n");
  std::vector<Figures> rows;
  for (const Setup& setup : kSetups) rows.push_back(Replay(real, setup, 8000));
  PrintRows(
      "real (" + std::to_string(real.size()) + " sessions of tests/data, window 8,000 tokens)",
      rows);
  rows.clear();
  for (const Setup& setup : kSetups) rows.push_back(Replay({w1}, setup, 32000));
  PrintRows("W1 (" + Grouped(static_cast<double>(w1.size())) + " messages, window 32,000 tokens)",
            rows);

  // W1's first compaction: one Prepare over the whole session.
  std::printf(
      "\nW1's first compaction (%s messages appended at once, one Prepare, window "
      "200,000 tokens)\n",
      Grouped(static_cast<double>(w1.size())).c_str());
  std::printf("  %-13s %8s %14s\n", "config", "calls", "input chars");
  std::size_t first_chars = 0;
  std::size_t first_calls = 0;
  for (const bool budget : {false, true}) {
    auto counter = std::make_shared<CountingSummarizer>();
    auto store = recap::NewInMemorySessionStore();
    recap::Config config;
    config.provider.context_window = 200000;
    config.limits.max_context_chars = 60000000;
    if (budget) config.compaction.max_summarizer_input_tokens = 100000;
    auto made = recap::Compactor::Create(config, counter, store);
    if (!made.ok()) Fail(made.status(), "Compactor::Create");
    recap::Status s = store->AppendMessages("w1", w1).status();
    if (!s.ok()) Fail(s, "AppendMessages");
    auto prepared = (*made)->Prepare("w1", {});
    if (!prepared.ok()) Fail(prepared.status(), "Prepare (W1, first)");
    const char* name = budget ? "budget 100k" : "summarizer";
    std::printf("  %-13s %8zu %14s\n", name, counter->calls,
                Grouped(static_cast<double>(counter->chars)).c_str());
    if (!budget) {
      first_chars = counter->chars;
      first_calls = counter->calls;
    }
    Json(std::string("tiers/W1-first/") + (budget ? "budget" : "summarizer") + "/input_chars",
         static_cast<double>(counter->chars), static_cast<double>(first_chars));
    Json(std::string("tiers/W1-first/") + (budget ? "budget" : "summarizer") + "/calls",
         static_cast<double>(counter->calls), static_cast<double>(first_calls));
  }

  if (!json_path.empty()) {
    std::ofstream out(json_path);
    out << "{\"comparisons\": [\n";
    for (std::size_t i = 0; i < json_lines.size(); ++i) {
      out << json_lines[i] << (i + 1 < json_lines.size() ? ",\n" : "\n");
    }
    out << "]}\n";
    if (!out) {
      std::fprintf(stderr, "recap_bench_tiers: could not write %s\n", json_path.c_str());
      return 2;
    }
  }
  return 0;
}
