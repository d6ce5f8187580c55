// recap_demo — what recap's core makes of a real agent transcript.
//
//   recap_demo [FILE] [--run N]
//
// FILE is one of
//   * a Claude Code session (.jsonl): one record a line; records with a `message` hold an
//     Anthropic Messages message, and the lines of one assistant response share `message.id`
//     (one content block a line), so they are joined back into one message;
//   * a tau-bench trajectory file: a JSON array of runs `{task_id, traj, …}` whose `traj` is an
//     OpenAI chat-completions `messages` array (--run picks the run, default 0);
//   * a plain OpenAI chat-completions `messages` array.
//
// It prints the transcript's size, then recap's main job: it replays the session the way a host
// runs it — every message appended to a SQLite session file, Compactor::Prepare before every
// model request, automatic compaction by the offline summarizer where the request reaches the
// trigger — and shows each request's size without recap and as sent, what recap did before it,
// the checkpoint and the events. Then the parts at work, on the whole transcript: where a
// compaction would cut with keepTurns 2, and what the tail reducer does at a limit that forces
// it to clip (a quarter of the transcript, at least 4,000 characters). recap itself never reads
// transcript files: the loading below is the host's part, done here with nlohmann/json; recap
// only sees messages through its codecs.
//
//   --db PATH                the session file (default: a new temporary file, removed after)
//   --max-chars N            limits.maxContextChars for the replay (default: the
//                            instructions, the tools and half the transcript, at least 4,000)
//   --instructions-chars N   a system prompt of N characters sent with every request (added
//                            to the transcript's own leading system message, if any)
//   --tools-chars N          tool definitions of N characters sent with every request
//
// Exit status: 0 on success, 1 when the file cannot be loaded, 2 when a result breaks one of
// recap's guarantees (so the examples test catches it).
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <fstream>
#include <iterator>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "recap/recap.h"
#if RECAP_DEMO_HAVE_SQLITE
#include "recap/sqlite/sqlite_store.h"
#endif
#include <unistd.h>

#include <mutex>

#ifndef RECAP_DEMO_DEFAULT_TRANSCRIPT
#define RECAP_DEMO_DEFAULT_TRANSCRIPT ""
#endif

namespace {

using nlohmann::ordered_json;

// --- loading (the host's side) ---------------------------------------------------------------

struct Loaded {
  std::string format;       // for the report
  std::string source_note;  // e.g. "346 lines -> 160 messages"
  recap::Conversation conversation;
};

recap::Result<std::string> ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return recap::Status::NotFound("cannot open '" + path + "'");
  std::ostringstream buffer;
  buffer << in.rdbuf();
  if (!in.good() && !in.eof()) return recap::Status::IOError("cannot read '" + path + "'");
  return buffer.str();
}

// Joins the lines of a Claude Code session into Anthropic messages.
recap::Result<Loaded> LoadClaudeCode(const std::string& text) {
  ordered_json messages = ordered_json::array();
  std::map<std::string, std::size_t> by_id;  // message.id -> index in `messages`
  std::size_t lines = 0;
  std::size_t joined = 0;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    ++lines;
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    ordered_json record = ordered_json::parse(line, nullptr, /*allow_exceptions=*/false);
    if (record.is_discarded()) {
      return recap::Status::InvalidArgument("line " + std::to_string(lines) + " is not JSON");
    }
    if (!record.is_object() || !record.contains("message") || !record["message"].is_object()) {
      continue;  // summaries, system notes, attachments: no message
    }
    ordered_json& message = record["message"];
    const auto id = message.find("id");
    if (id != message.end() && id->is_string()) {
      const auto seen = by_id.find(id->get<std::string>());
      if (seen != by_id.end()) {
        ordered_json& into = messages[seen->second]["content"];
        const ordered_json& more = message["content"];
        if (into.is_array() && more.is_array()) {
          for (const auto& block : more) into.push_back(block);
          ++joined;
          continue;
        }
      }
      by_id.emplace(id->get<std::string>(), messages.size());
    }
    messages.push_back(std::move(message));
  }

  recap::DecodeOptions options;
  options.keep_unknown_blocks = true;  // a newer Claude Code may write block types we don't know
  recap::Result<recap::Conversation> conversation =
      recap::anthropic::DecodeMessages(messages.dump(), options);
  if (!conversation.ok()) return conversation.status().WithContext("decoding the session");
  Loaded loaded;
  loaded.format = "Claude Code session (Anthropic Messages)";
  loaded.source_note = std::to_string(lines) + " lines, " + std::to_string(joined) +
                       " joined into the response they continue";
  loaded.conversation = std::move(conversation).value();
  return loaded;
}

recap::Result<Loaded> LoadOpenAiJson(const std::string& text, std::size_t run) {
  ordered_json document = ordered_json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (document.is_discarded()) return recap::Status::InvalidArgument("the file is not JSON");
  Loaded loaded;
  const ordered_json* messages = &document;
  if (document.is_array() && !document.empty() && document[0].is_object() &&
      document[0].contains("traj")) {
    if (run >= document.size()) {
      return recap::Status::InvalidArgument("--run " + std::to_string(run) + ": the file has " +
                                            std::to_string(document.size()) + " runs");
    }
    messages = &document[run]["traj"];
    loaded.format = "tau-bench trajectory (OpenAI chat completions)";
    loaded.source_note = "run " + std::to_string(run) + " of " + std::to_string(document.size());
  } else {
    loaded.format = "OpenAI chat-completions messages";
  }
  recap::Result<recap::Conversation> conversation =
      recap::openai_chat::DecodeMessages(messages->dump());
  if (!conversation.ok()) return conversation.status().WithContext("decoding the messages");
  loaded.conversation = std::move(conversation).value();
  return loaded;
}

recap::Result<Loaded> Load(const std::string& path, std::size_t run) {
  recap::Result<std::string> text = ReadFile(path);
  if (!text.ok()) return text.status();
  const bool jsonl = path.size() >= 6 && path.compare(path.size() - 6, 6, ".jsonl") == 0;
  return jsonl ? LoadClaudeCode(*text) : LoadOpenAiJson(*text, run);
}

// --- the report ----------------------------------------------------------------------------------

std::string Num(std::size_t n) {
  std::string digits = std::to_string(n);
  std::string out;
  for (std::size_t i = 0; i < digits.size(); ++i) {
    if (i != 0 && (digits.size() - i) % 3 == 0) out += ',';
    out += digits[i];
  }
  return out;
}

// One aligned row: a label, a right-aligned figure and an optional note.
void Row(const char* label, const std::string& value, const std::string& note = {}) {
  std::printf("  %-22s %12s  %s\n", label, value.c_str(), note.c_str());
}

// "  225,516 chars   56,379 tokens", padded so that rows line up.
std::string CharsAndTokens(std::size_t chars) {
  char buffer[80];
  std::snprintf(buffer, sizeof buffer, "%11s chars %10s tokens", Num(chars).c_str(),
                Num(recap::EstimateTokens(chars)).c_str());
  return buffer;
}

std::string Plural(std::size_t n, const char* one, const char* many) {
  return Num(n) + " " + (n == 1 ? one : many);
}

std::string SkipInWords(const recap::CutDecision& cut, const recap::Transcript& t) {
  switch (cut.skip) {
    case recap::SkipReason::kNone: return "none";
    case recap::SkipReason::kNothingToSummarize:
      return "nothing to summarize: only the kept turns (or an earlier checkpoint) are there";
    case recap::SkipReason::kNoSafeBoundary:
      return "no safe boundary: every cut would separate a tool call from its result";
    case recap::SkipReason::kUncertainToolResults: {
      std::string words = Plural(cut.uncertain.size(), "tool call has", "tool calls have") +
                          " no result, so the session must be recovered before compacting";
      if (!cut.uncertain.empty()) {
        const recap::UncertainCall& first = cut.uncertain.front();
        words += " (first: " + (first.name.empty() ? std::string("an opaque call") : first.name) +
                 " in message #" + std::to_string(first.message) + " of " +
                 std::to_string(t.size()) + ")";
      }
      return words;
    }
    // The Compactor's own reasons; a cut decision never carries them.
    case recap::SkipReason::kNoProgress:
    case recap::SkipReason::kIrreducible:
    case recap::SkipReason::kSummarizerUnavailable:
    case recap::SkipReason::kBackgroundRunning: return recap::SkipReasonName(cut.skip);
  }
  return "unknown";
}

int failures = 0;
void Expect(bool ok, const char* what) {
  if (!ok) {
    std::fprintf(stderr, "recap_demo: a guarantee does not hold: %s\n", what);
    ++failures;
  }
}

// --- the session, replayed as a host runs it -------------------------------------------------

// Keeps every event (a host would log or export them).
class CollectingSink : public recap::EventSink {
 public:
  void OnEvent(const recap::Event& event) override {
    std::lock_guard<std::mutex> lock(mu_);
    events_.push_back(event);
  }
  std::vector<recap::Event> events() {
    std::lock_guard<std::mutex> lock(mu_);
    return events_;
  }

 private:
  std::mutex mu_;
  std::vector<recap::Event> events_;
};

struct ReplayOptions {
  std::string db_path;  // empty: a temporary file
  std::size_t max_chars = 0;
  // What the host sends with every request besides the messages: its system prompt and its
  // tools' definitions (a Claude Code transcript records neither).
  std::size_t instructions_chars = 0;
  std::size_t tools_chars = 0;
};

// One model request of the replay, as the table shows it.
struct RequestRow {
  std::size_t request = 0;   // 1-based
  std::size_t messages = 0;  // messages in the conversation so far
  std::size_t without = 0;   // the request without recap: instructions, tools, every message
  std::size_t sent = 0;      // the request recap prepared: instructions, tools, its messages
  std::string what;          // what recap did before this request, if anything
};

// The replay's table: every request when there are few, else the first and last three, every
// step-th, and each one where recap did something.
void PrintRequests(const std::vector<RequestRow>& rows) {
  const std::size_t step = rows.size() <= 40 ? 1 : (rows.size() + 29) / 30;
  std::printf("  %7s %9s %14s %14s  %s\n", "request", "messages", "without recap", "sent",
              "what recap did before the request");
  for (std::size_t i = 0; i < rows.size(); ++i) {
    const RequestRow& r = rows[i];
    const bool show =
        step == 1 || i < 3 || i + 3 >= rows.size() || i % step == 0 || !r.what.empty();
    if (!show) continue;
    std::printf("  %7zu %9s %14s %14s  %s\n", r.request, Num(r.messages).c_str(),
                Num(r.without).c_str(), Num(r.sent).c_str(), r.what.c_str());
  }
  if (step != 1) {
    std::printf("  (the first and last three, every %zuth, and each where recap did something)\n",
                step);
  }
}

int Replay(const recap::Transcript& t, std::size_t instruction_chars,
           const ReplayOptions& options) {
  instruction_chars += options.instructions_chars;
  const std::size_t fixed_chars = instruction_chars + options.tools_chars;
  const std::size_t max_chars = options.max_chars != 0
                                    ? options.max_chars
                                    : std::max<std::size_t>(4000, fixed_chars + t.chars() / 2);
  std::string db_path = options.db_path;
  std::string temp_dir;
  if (db_path.empty()) {
    char dir[] = "/tmp/recap-demo-XXXXXX";
    if (mkdtemp(dir) == nullptr) {
      std::fprintf(stderr, "recap_demo: cannot create a temporary folder in /tmp\n");
      return 1;
    }
    temp_dir = dir;
    db_path = temp_dir + "/session.db";
  }
  const std::string session = "demo";

#if RECAP_DEMO_HAVE_SQLITE
  recap::Result<std::shared_ptr<recap::SessionStore>> opened =
      recap::OpenSqliteSessionStore(db_path);
  if (!opened.ok()) {
    std::fprintf(stderr, "recap_demo: %s\n", opened.status().ToString().c_str());
    return 1;
  }
  std::shared_ptr<recap::SessionStore> store = *opened;
  const std::string store_name = "SQLite session file " + db_path;
#else
  std::shared_ptr<recap::SessionStore> store = recap::NewInMemorySessionStore();
  const std::string store_name = "in-memory store (this build has no SQLite component)";
#endif
  // Start from an empty session even when --db names a file used before.
  const std::string run_session =
      session + "-" + std::to_string(static_cast<long long>(::getpid()));

  recap::Config config;
  config.limits.max_context_chars = max_chars;
  config.compaction.keep_turns = 2;
  auto sink = std::make_shared<CollectingSink>();
  recap::Result<std::unique_ptr<recap::Compactor>> created =
      recap::Compactor::Create(config, /*provider=*/nullptr, store, {}, {sink});
  if (!created.ok()) {
    std::fprintf(stderr, "recap_demo: %s\n", created.status().ToString().c_str());
    return 1;
  }
  recap::Compactor& compactor = **created;

  recap::RequestSizes sizes;
  sizes.instructions_chars = instruction_chars;
  sizes.tool_catalog_chars = options.tools_chars;
  std::vector<RequestRow> rows;
  std::size_t requests = 0, budget_errors = 0, largest_sent = 0, clipped = 0;
  std::map<std::string, std::size_t> compactions;
  std::string first_budget_error;
  recap::Prepared last;
  for (std::size_t i = 0; i < t.size(); ++i) {
    recap::Result<std::uint64_t> appended = store->Append(run_session, t[i]);
    if (!appended.ok()) {
      std::fprintf(stderr, "recap_demo: %s\n", appended.status().ToString().c_str());
      return 1;
    }
    // A model request follows unless the next message is not the model's.
    const bool request = i + 1 == t.size() || t[i + 1].role == recap::Role::kAssistant;
    if (!request) continue;
    ++requests;
    RequestRow row;
    row.request = requests;
    row.messages = i + 1;
    row.without = fixed_chars + t.chars(0, i + 1);
    const std::size_t events_seen = sink->events().size();
    recap::Result<recap::Prepared> prepared = compactor.Prepare(run_session, sizes);
    if (!prepared.ok()) {
      if (prepared.status().code() != recap::StatusCode::kContextBudgetExceeded) {
        std::fprintf(stderr, "recap_demo: %s\n", prepared.status().ToString().c_str());
        return 1;
      }
      if (budget_errors++ == 0) first_budget_error = prepared.status().message();
      row.what = "not sent: " + prepared.status().message();
      rows.push_back(std::move(row));
      continue;
    }
    row.sent = fixed_chars + prepared->messages.chars();
    Expect(row.sent <= max_chars, "the request recap prepared fits maxContextChars");
    if (!prepared->compactions.empty()) {
      row.what =
          std::string("compacted (") + recap::CompactionReasonName(prepared->compactions.front()) +
          "): " + Plural(prepared->summarized_messages, "message", "messages") + " summarized";
      // The event says the same in its own figures: the full request before and after.
      const std::vector<recap::Event> events = sink->events();
      for (std::size_t e = events_seen; e < events.size(); ++e) {
        if (events[e].type != "compaction_completed") continue;
        const ordered_json event = ordered_json::parse(events[e].json);
        const std::size_t before = event["before"]["chars"].get<std::size_t>();
        const std::size_t after = event["after"]["chars"].get<std::size_t>();
        row.what += "; the event: " + Num(before) + " -> " + Num(after);
        if (prepared->reduced_messages == 0 && prepared->compactions.size() == 1) {
          Expect(after == row.sent, "the event's after.chars is the request sent");
        }
      }
    }
    if (prepared->reduced_messages != 0) {
      row.what += std::string(row.what.empty() ? "" : "; ") + "clipped " +
                  Plural(prepared->reduced_messages, "message", "messages");
    }
    if (prepared->cleared_tool_result_messages != 0) {
      row.what += std::string(row.what.empty() ? "" : "; ") + "cleared old tool results in " +
                  Plural(prepared->cleared_tool_result_messages, "message", "messages");
    }
    rows.push_back(std::move(row));
    const recap::PairingReport pairing = recap::AnalyzePairing(prepared->messages);
    // A call without its result in what is sent can only be one the transcript itself lacks.
    Expect(pairing.uncertain.size() <= recap::AnalyzePairing(t.Slice(0, i + 1)).uncertain.size(),
           "no tool call is separated from its result in what is sent");
    for (recap::CompactionReason reason : prepared->compactions) {
      ++compactions[recap::CompactionReasonName(reason)];
    }
    clipped += prepared->reduced_messages;
    largest_sent = std::max(largest_sent, fixed_chars + prepared->messages.chars());
    last = std::move(prepared).value();
  }

  std::size_t total_compactions = 0;
  std::string by_reason;
  for (const auto& [reason, n] : compactions) {
    total_compactions += n;
    by_reason += (by_reason.empty() ? "" : ", ") + reason + " " + Num(n);
  }
  std::printf("\nThe session replayed as a host runs it\n");
  std::printf("  %s, offline summarizer (no network)\n", store_name.c_str());
  std::printf(
      "  Every message is appended as it happens; before each model request, Prepare. The\n"
      "  request's size in characters, without recap (the whole conversation) and as sent:\n\n");
  PrintRequests(rows);
  std::printf(
      "\n  Sizes count the whole request as the model receives it: the instructions sent with\n"
      "  every request (%s chars: system prompt %s, tool definitions %s) plus the messages.\n"
      "  The events below count the same way: a compaction's after.chars is the request sent,\n"
      "  its before.chars the request recap would have sent without it (with the checkpoints\n"
      "  of earlier compactions, so below 'without recap' after the first). A stored session\n"
      "  knows nothing of a host's instructions, so `recap compact`, `recap plan` and\n"
      "  `recap stats` count the messages alone: their figures are smaller by those %s.\n\n",
      Num(fixed_chars).c_str(), Num(instruction_chars).c_str(), Num(options.tools_chars).c_str(),
      Num(fixed_chars).c_str());
  Row("maxContextChars", Num(max_chars), "keepTurns 2, threshold 0.85");
  Row("model requests", Num(requests), "a Prepare call before each");
  Row("compactions", Num(total_compactions), by_reason.empty() ? "" : "(" + by_reason + ")");
  Row("messages clipped", Num(clipped), "by the tail reducer, over the whole replay");
  Row("budget errors", Num(budget_errors),
      budget_errors == 0 ? "" : "requests that could not be brought within the limit");
  Row("largest request", Num(largest_sent), "chars sent (instructions, tools and messages)");
  Row("before", Num(fixed_chars + t.chars()),
      "chars: the whole conversation, " + Plural(t.size(), "message", "messages"));
  Row("after", Num(fixed_chars + last.messages.chars()),
      "chars: what the last request sent, " + Plural(last.messages.size(), "message", "messages"));
  if (!first_budget_error.empty())
    std::printf("  first budget error: %s\n", first_budget_error.c_str());

  recap::Result<std::vector<recap::HistoryEntry>> history = store->History(run_session);
  if (history.ok()) {
    std::size_t retired = 0;
    for (const auto& e : *history) retired += e.state == recap::HistoryState::kCompacted ? 1 : 0;
    Row("store history", Num(history->size()),
        "messages kept in the file, " + Num(retired) + " of them compacted or replaced");
  }

  if (!last.messages.empty() && last.messages[0].summary) {
    std::printf("\nThe checkpoint (the first message of the last request)\n");
    std::istringstream lines(recap::JoinedText(last.messages[0]));
    std::string line;
    int shown = 0;
    while (std::getline(lines, line)) {
      if (++shown > 40) {
        std::printf("  ...\n");
        break;
      }
      if (line.size() > 110) line = line.substr(0, 107) + "...";
      std::printf("  | %s\n", line.c_str());
    }
  }

  const std::vector<recap::Event> events = sink->events();
  std::map<std::string, std::size_t> by_type;
  for (const recap::Event& e : events) ++by_type[e.type];
  std::printf("\nEvents (%s)\n", Plural(events.size(), "event", "events").c_str());
  for (const auto& [type, n] : by_type) Row(type.c_str(), Num(n));
  std::printf("  each compaction_completed, as a JSON line (cut at 300 characters):\n");
  for (const recap::Event& e : events) {
    if (e.type != "compaction_completed") continue;
    std::string line = e.json;
    if (line.size() > 300) line = line.substr(0, 297) + "...";
    std::printf("  %s\n", line.c_str());
  }

  if (!temp_dir.empty()) {
    store.reset();
    created->reset();  // the Compactor holds the store too
    for (const char* suffix : {"", "-wal", "-shm"}) std::remove((db_path + suffix).c_str());
    ::rmdir(temp_dir.c_str());
  } else {
    std::printf("\n  the session is in %s as \"%s\"\n", db_path.c_str(), run_session.c_str());
  }
  Expect(total_compactions >= 1, "the replay compacted at least once");
  return 0;
}

int Run(int argc, char** argv) {
  std::string path = RECAP_DEMO_DEFAULT_TRANSCRIPT;
  std::size_t run = 0;
  ReplayOptions replay;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--run" && i + 1 < argc) {
      run = static_cast<std::size_t>(std::strtoul(argv[++i], nullptr, 10));
    } else if (arg == "--db" && i + 1 < argc) {
      replay.db_path = argv[++i];
    } else if (arg == "--max-chars" && i + 1 < argc) {
      replay.max_chars = static_cast<std::size_t>(std::strtoul(argv[++i], nullptr, 10));
    } else if (arg == "--instructions-chars" && i + 1 < argc) {
      replay.instructions_chars = static_cast<std::size_t>(std::strtoul(argv[++i], nullptr, 10));
    } else if (arg == "--tools-chars" && i + 1 < argc) {
      replay.tools_chars = static_cast<std::size_t>(std::strtoul(argv[++i], nullptr, 10));
    } else if (arg == "-h" || arg == "--help") {
      std::printf(
          "usage: %s [FILE] [--run N] [--db PATH] [--max-chars N] [--instructions-chars N] "
          "[--tools-chars N]\n",
          argv[0]);
      return 0;
    } else {
      path = arg;
    }
  }
  if (path.empty()) {
    std::fprintf(stderr, "usage: %s FILE [--run N]\n", argv[0]);
    return 1;
  }

  recap::Result<Loaded> loaded = Load(path, run);
  if (!loaded.ok()) {
    std::fprintf(stderr, "recap_demo: %s: %s\n", path.c_str(), loaded.status().ToString().c_str());
    return 1;
  }
  const std::size_t instruction_chars =
      loaded->conversation.instructions ? recap::MessageChars(*loaded->conversation.instructions)
                                        : 0;
  const recap::Transcript t(std::move(loaded->conversation.messages));

  std::printf("recap %s: what recap makes of a real transcript\n\n", recap::Version());
  std::printf("  file    %s\n", path.c_str());
  std::printf("  format  %s%s%s\n\n", loaded->format.c_str(),
              loaded->source_note.empty() ? "" : "; ", loaded->source_note.c_str());

  // Size.
  const recap::PairingReport pairing = recap::AnalyzePairing(t);
  const std::vector<std::size_t> turns = recap::FindTurnStarts(t);
  std::size_t largest = 0;
  for (std::size_t i = 1; i < t.size(); ++i) {
    if (t.chars(i) > t.chars(largest)) largest = i;
  }
  std::printf("Transcript\n");
  Row("messages", Num(t.size()));
  Row("characters", Num(t.chars()), "Unicode code points");
  Row("estimated tokens", Num(t.tokens()), "characters / 4, rounded up");
  if (instruction_chars != 0) {
    Row("instructions", Num(instruction_chars), "chars, the leading system message, kept apart");
  }
  Row("turns", Num(turns.size()), "user messages a person wrote");
  Row("tool pairs", Num(pairing.pairs),
      Plural(pairing.uncertain.size(), "call", "calls") + " without a result, " +
          Plural(pairing.orphans.size(), "result", "results") + " without a call");
  if (!t.empty()) {
    Row("largest message", Num(t.chars(largest)),
        std::string("chars, #") + std::to_string(largest) + " (" +
            recap::RoleName(t[largest].role) + ")");
  }

  // recap's main job first: the session as a host runs it.
  if (const int rc = Replay(t, instruction_chars, replay); rc != 0) return rc;

  // Then the parts at work in it, on the whole transcript: where a compaction would cut.
  recap::CutOptions cut_options;
  cut_options.keep_turns = 2;
  const recap::CutDecision cut = recap::FindCut(t, cut_options);
  std::printf("\nWhere a compaction of the whole transcript would cut (keepTurns 2)\n");
  if (cut.ok()) {
    const std::vector<std::uint8_t> safe = recap::FindSafeBoundaries(t);
    Expect(cut.position < t.size(), "the cut keeps the last message");
    Expect(cut.position < safe.size() && safe[cut.position] != 0, "the cut is a safe boundary");
    Expect(cut.summarized_chars == t.chars(0, cut.position), "summarized characters add up");
    Expect(cut.kept_chars == t.chars(cut.position, t.size()), "kept characters add up");
    Row("cut before message", "#" + std::to_string(cut.position),
        "of " + Num(t.size()) + (cut.inside_turn ? ", inside the last turn" : ""));
    Row("summarized", Plural(cut.position, "message", "messages"),
        CharsAndTokens(cut.summarized_chars));
    Row("kept verbatim", Plural(t.size() - cut.position, "message", "messages"),
        CharsAndTokens(cut.kept_chars) + "  (" + Plural(cut.kept_turns, "turn", "turns") + ")");
  } else {
    Row("skipped", recap::SkipReasonName(cut.skip));
    std::printf("  %s\n", SkipInWords(cut, t).c_str());
  }

  // What the reducer does at a limit that forces it.
  const std::size_t target = std::max(recap::kMinReductionTarget, t.chars() / 4);
  const recap::ReduceResult reduced = recap::ReduceTail(t, target);
  Expect(reduced.transcript.size() == t.size(), "the reducer keeps every message");
  Expect(reduced.before_chars == t.chars(), "the reducer measured the transcript");
  Expect(reduced.after_chars == reduced.transcript.chars(), "the reducer's figures add up");
  Expect(reduced.fits == (reduced.after_chars <= target), "fits means within the target");
  for (std::size_t i = 0; i < t.size() && i < reduced.transcript.size(); ++i) {
    if (reduced.transcript[i].id != t[i].id || reduced.transcript[i].role != t[i].role) {
      Expect(false, "ids and roles are unchanged");
      break;
    }
  }
  std::printf("\nThe tail reducer at a limit that forces it\n");
  Row("target", Num(target), "chars: a quarter of the transcript, at least 4,000");
  Row("before", Num(reduced.before_chars), "chars");
  Row("after", Num(reduced.after_chars),
      "chars (" +
          std::to_string(
              reduced.before_chars == 0 ? 100 : reduced.after_chars * 100 / reduced.before_chars) +
          "% of before)");
  Row("messages cut", Num(reduced.clipped.size()),
      "of " + Num(t.size()) + "  (" + Plural(reduced.clips, "clip", "clips") + " in " +
          Plural(static_cast<std::size_t>(reduced.rounds), "round", "rounds") + ")");
  Row("fits", reduced.fits ? "yes" : "no",
      reduced.fits ? "" : "even the smallest caps leave too much; compaction has to summarize");

  if (failures != 0) return 2;
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    return Run(argc, argv);
  } catch (const std::exception& e) {  // recap does not throw; the JSON handling above may
    std::fprintf(stderr, "recap_demo: %s\n", e.what());
    return 1;
  }
}
