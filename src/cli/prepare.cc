// recap CLI — `recap prepare`: the per-turn Compactor::Prepare of a host, from a shell (SPEC
// R16.3, R7). It compacts when a trigger fires and clips what is over the hard limit, as `compact
// --auto` does, and then prints what to send: the document `recap export --format F` writes of
// the session afterwards, so that a script can put it into its model request as it is.
//
// Standard output carries that document and nothing else (with --json: the events, then one
// result object holding it). A compaction or a clipping changes what the model will see, so it
// is also said in one line on stderr; a prepare that changed nothing says nothing there.
#include <unistd.h>

#include <iostream>
#include <mutex>
#include <string>
#include <vector>

#include "cli.h"
#include "prepare_kept.h"
#include "progress.h"

namespace recap_cli {
namespace {

std::string Help() {
  return std::string(
             "usage: recap prepare --session ID --format F [--db DB]\n"
             "                     [--instructions-chars N] [--tool-catalog-chars N]\n"
#if RECAP_CLI_HAVE_HTTP
             "                     [--provider P [--base-url URL --model M --api-key-env VAR]]\n"
#else
             "                     [--provider P]\n"
#endif
             "                     [--config FILE] [--max-context-chars N] [--keep-turns N]\n"
             "                     [--json]\n"
             "\n"
             "Runs what a host runs before each model request (`prepare`, as `compact --auto`\n"
             "does): compacts the session when a trigger fires, clips oversized content when\n"
             "the conversation is over maxContextChars, then prints what to send on standard\n"
             "output and nothing else: the document `recap export --format F` writes, the\n"
             "session's instructions included (on one line; indented on a terminal). A\n"
             "failed compaction changes nothing; what is sent is then the session as it is.\n"
             "A compaction or a clipping is said in one line on stderr. What it keeps in the\n"
             "file lets the next prepare print without loading the session.\n"
             "\n"
             "options:\n"
             "  --session ID              the session (required)\n"
             "  --format F                what to print (required): openai-chat, anthropic,\n"
             "                            openai-responses or recap, as `recap export` writes\n"
             "                            them\n"
             "  --db DB                   the database file (default ./recap.db) or a\n"
             "                            postgresql:// URL\n"
             "  --instructions-chars N    the size of the instructions the request carries\n"
             "                            (default: the session's own, set by its import or\n"
             "                            first append; give it when the host sends\n"
             "                            instructions of its own)\n"
             "  --tool-catalog-chars N    the size of the tool definitions the request\n"
             "                            carries (default 0)\n") +
         kProviderHelp + kConfigHelp +
         "  --json                    events as JSON lines on stdout, then one result object\n"
         "                            {\"type\": \"result\", ..., \"document\": ...}\n"
         "  --help                    this text\n";
}

}  // namespace

int RunPrepare(const std::vector<std::string>& words) {
  Args args;
  args.command = "prepare";
  std::vector<OptionSpec> specs = {{"db", true},
                                   {"session", true},
                                   {"format", true},
                                   {"instructions-chars", true},
                                   {"tool-catalog-chars", true}};
  for (const OptionSpec& s : ConfigOptions()) specs.push_back(s);
  for (const OptionSpec& s : ProviderOptions()) specs.push_back(s);
  std::string error;
  if (!ParseArgs(words, specs, &args, &error)) return UsageError(args, error);
  if (args.flags.count("help")) {
    std::cout << Help();
    return kExitOk;
  }
  if (!args.positional.empty()) {
    return UsageError(args, "unexpected argument '" + args.positional[0] +
                                "'; prepare reads the session from the database (add messages "
                                "with `recap append`)");
  }
  if (!args.Has("session")) {
    return UsageError(args, "--session ID is required: name the session to prepare");
  }
  const std::string session = args.Get("session");
  if (!ValidSessionId(session, &error)) return UsageError(args, error);
  if (!args.Has("format")) {
    return UsageError(args,
                      "--format F is required: what to print (openai-chat, anthropic, "
                      "openai-responses or recap)");
  }
  const std::string format = args.Get("format");
  if (!MessageFormat(format)) {
    return UsageError(args, "unknown format '" + format +
                                "' for --format; use openai-chat, anthropic, openai-responses or "
                                "recap");
  }
  // Built once: --config - reads standard input, which a second read would find empty.
  bool usage = false;
  std::string config_text;
  recap::Result<recap::Config> config = BuildConfig(args, &usage, &config_text);
  if (!config.ok()) {
    return usage ? UsageError(args, config.status().message()) : Failure(args, config.status());
  }
  recap::RequestSizes sizes;
  std::size_t n = 0;
  if (args.Has("instructions-chars")) {
    if (!ParseCount(args, "instructions-chars", &n, &error)) return UsageError(args, error);
    sizes.instructions_chars = n;
  }
  if (args.Has("tool-catalog-chars")) {
    if (!ParseCount(args, "tool-catalog-chars", &n, &error)) return UsageError(args, error);
    sizes.tool_catalog_chars = n;
  }
  PrepareCall call;
  call.args = &args;
  call.session = session;
  call.format = format;
  call.config = *config;
  call.sizes = sizes;
  call.instructions_given = args.Has("instructions-chars");
  call.key = PrepareKey(args, config_text);
  const bool keep = MayKeep(call);
  int exit_code = kExitOk;
  // What the last prepare kept, when a prepare now would print just that and the new messages
  // (prepare_kept.h): the session is not loaded.
  if (keep && ServeKept(call, &exit_code)) return exit_code;

  SessionRun run;
  if (!OpenSessionRun(args, session, &run, &exit_code, &call.config)) return exit_code;
  // A message of another format holding an opaque part (thinking, reasoning, a provider's
  // checkpoint) cannot be written in this one (R14.1): said before Prepare commits anything,
  // rather than after a compaction the host could not send.
  const recap::Transcript& t = run.state.transcript;
  for (std::size_t i = 0; i < t.size(); ++i) {
    const recap::Message& m = t[i];
    const std::string kind = ForeignOpaqueKind(m, format);
    if (kind.empty()) continue;
    return Failure(args, "session '" + Shown(session) + "' cannot be written as " + format +
                             ": message " + std::to_string(i) + " ('" + Shown(m.id) +
                             "') holds an opaque '" + Shown(kind) + "' part decoded from " +
                             recap::OriginName(m.origin) + ", with no equivalent in " + format +
                             ". Nothing was changed; prepare it with --format " +
                             recap::OriginName(m.origin) + ", the format it came in");
  }
  // The stored instructions are sent, so they count as instructions (as compact counts them),
  // unless the host says how large its request's instructions are.
  if (!args.Has("instructions-chars") && run.instructions) {
    sizes.instructions_chars = recap::MessageChars(*run.instructions);
  }

  Progress progress("preparing session '" + Shown(session) + "'");
  // Without --json the events are not printed: the progress sink still reads them.
  std::shared_ptr<recap::EventSink> sink =
      NewProgressSink(&progress, args.json() ? recap::NewJsonlSink(std::cout)
                                             : std::shared_ptr<recap::EventSink>());
  // A command lives for one call: a compaction handed to a worker would be cancelled as it
  // exits, so it compacts in Prepare whatever compaction.background says (as compact --auto).
  recap::Config run_config = run.config;
  run_config.compaction.background.enabled = false;
  recap::Result<std::unique_ptr<recap::Compactor>> created =
      recap::Compactor::Create(run_config, run.provider, run.store, {}, {sink});
  if (!created.ok()) return Failure(args, created.status());
  recap::Result<recap::Prepared> prepared = (*created)->Prepare(session, sizes);
  progress.Finish();
  if (!prepared.ok()) {
    return Failure(args, prepared.status().WithContext(
                             "prepare failed (only what it committed before failing, if "
                             "anything, was kept); there is nothing to send"));
  }

  // The whole document is made before a byte of it is written: a session the format cannot
  // carry fails with no document on stdout.
  recap::Conversation conv;
  conv.instructions = run.instructions;
  conv.messages = prepared->messages.ToVector();
  recap::Result<std::string> doc = EncodeDocument(format, conv);
  const bool compacted = !prepared->compactions.empty();
  const bool changed = compacted || prepared->reduced_messages > 0 ||
                       prepared->cleared_tool_result_messages > 0 ||
                       prepared->provider_retired_messages > 0;
  if (!doc.ok()) {
    std::string why = doc.status().message();
    while (!why.empty() && why.back() == '.') why.pop_back();
    return Failure(args, "session '" + Shown(session) + "' cannot be written as " + format + ": " +
                             why + (changed ? " (what prepare committed stays)" : "") +
                             "; prepare it in the format its messages came in, or see it whole "
                             "with --format recap");
  }

  Json compactions = Json::array();
  for (recap::CompactionReason r : prepared->compactions) {
    compactions.push_back(recap::CompactionReasonName(r));
  }
  std::string reasons;  // "auto", "auto, budget"
  for (const Json& r : compactions) reasons += (reasons.empty() ? "" : ", ") + r.get<std::string>();
  if (changed) {
    // One line on stderr: the request differs from the transcript the host appended. It says
    // only what happened: "compacted (auto), 3 messages clipped".
    std::string what = compacted ? "compacted (" + reasons + ")" : "";
    const auto add = [&what](std::size_t count, const std::string& text) {
      if (count > 0) what += (what.empty() ? "" : ", ") + Counted(count, "message") + text;
    };
    add(prepared->reduced_messages, " clipped");
    add(prepared->cleared_tool_result_messages, " with old tool results cleared");
    add(prepared->provider_retired_messages, " retired before a provider's checkpoint");
    std::cerr << "recap prepare: session '" << Shown(session) << "': " << what << "; ~"
              << Num(prepared->before_tokens) << " -> ~" << Num(prepared->after_tokens)
              << " tokens; version " << prepared->version << "\n";
  }
  if (prepared->over_window) {
    // Said even when nothing changed: the host is about to send what the model will refuse.
    const std::size_t fixed_tokens =
        recap::EstimateTokens(sizes.instructions_chars + sizes.tool_catalog_chars);
    std::cerr << "recap prepare: session '" << Shown(session) << "': the request is ~"
              << Num(prepared->after_tokens) << " tokens, over the model's window of "
              << Num(*prepared->window_tokens) << " tokens (" << prepared->window_source
              << "); the model will likely refuse it. ";
    if (fixed_tokens >= *prepared->window_tokens) {
      std::cerr << "The instructions (" << Num(sizes.instructions_chars)
                << " characters) and the tool catalog (" << Num(sizes.tool_catalog_chars)
                << ") alone are ~" << Num(fixed_tokens)
                << " tokens: shorten them, or use a model with a larger window\n";
    } else {
      std::cerr << "Compaction could not bring it under (--json shows its events; `recap plan` "
                   "what it would do): check the summarizer, or lower --max-context-chars\n";
    }
  }
  if (!prepared->orphan_results.empty()) {
    const std::size_t orphans = prepared->orphan_results.size();
    std::cerr << "recap prepare: session '" << Shown(session)
              << "': " << Counted(orphans, "tool result") << (orphans == 1 ? " answers" : " answer")
              << " no call before " << (orphans == 1 ? "it" : "them") << " (call id '"
              << Shown(prepared->orphan_results[0]) << "'" << (orphans > 1 ? " and more" : "")
              << "); the model API will refuse the request. Append each result after the "
                 "message with its call (`recap sessions history` shows what was appended)\n";
  }
  if (!args.json()) {
    // As the codecs wrote it, on one line, for the request a script makes of it; indented as
    // `recap export` writes it when a person reads it on a terminal.
    WriteJsonText(*doc, ::isatty(STDOUT_FILENO) == 1);
    if (keep) KeepForNext(call, *prepared, run.instructions, run.instructions_version, *doc);
    return kExitOk;
  }
  Json result = {
      {"type", "result"},
      {"session", session},
      {"format", format},
      {"version", prepared->version},
      {"messages", prepared->messages.size()},
      {"instructions", run.instructions.has_value()},
      {"instructions_chars", sizes.instructions_chars},
      {"tool_catalog_chars", sizes.tool_catalog_chars},
      {"trigger_rule", prepared->trigger_rule},
      {"compactions", compactions},
      {"summarized_messages", prepared->summarized_messages},
      {"reduced_messages", prepared->reduced_messages},
      {"cleared_tool_result_messages", prepared->cleared_tool_result_messages},
      {"provider_retired_messages", prepared->provider_retired_messages},
      {"before", {{"chars", prepared->before_chars}, {"tokens", prepared->before_tokens}}},
      {"after", {{"chars", prepared->after_chars}, {"tokens", prepared->after_tokens}}},
      {"over_window", prepared->over_window},
      {"orphan_results", prepared->orphan_results}};
  // The document goes in as the codecs wrote it, not parsed again (numbers stay as written,
  // R13.2): the result's text without its closing brace, then the document.
  std::string line = result.dump(-1, ' ', false, Json::error_handler_t::replace);
  line.pop_back();
  line += ",\"document\":";
  line += *doc;
  line += "}\n";
  std::cout << line;
  std::cout.flush();
  return kExitOk;
}

}  // namespace recap_cli
