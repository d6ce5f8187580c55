// Configuration from JSON (SPEC R1): keys, defaults, ranges and the error messages people read.
#include <cstddef>
#include <limits>
#include <string>

#include <catch2/catch.hpp>

#include "recap/config.h"

using recap::Config;
using recap::Fallback;
using recap::Result;
using recap::Status;
using recap::StatusCode;

namespace {

// The message of a config that must be rejected (fails the test if it was accepted).
std::string Rejected(const std::string& json) {
  Result<Config> r = Config::FromJson(json);
  INFO("config: " << json);
  REQUIRE_FALSE(r.ok());
  CHECK(r.status().code() == StatusCode::kInvalidArgument);
  return r.status().message();
}

Config Accepted(const std::string& json) {
  Result<Config> r = Config::FromJson(json);
  INFO("config: " << json);
  INFO("status: " << r.status());
  REQUIRE(r.ok());
  CHECK(r->Validate().ok());
  return *r;
}

// `{"<section>": {"<key>": <value>}}`.
std::string One(const std::string& section, const std::string& key, const std::string& value) {
  return "{\"" + section + "\": {\"" + key + "\": " + value + "}}";
}

}  // namespace

TEST_CASE("R1 defaults: an empty object gives the defaults of SPEC §2") {
  const Config c = Accepted("{}");
  CHECK(c.compaction.auto_compact == true);
  CHECK(c.compaction.threshold == 0.85);
  CHECK(c.compaction.keep_turns == 2);
  CHECK(c.compaction.max_output_tokens == 16000);
  CHECK(c.compaction.calibrate == false);
  CHECK(c.compaction.fallback == Fallback::kNone);
  CHECK(c.limits.max_context_chars == 800000);
  CHECK(c.plugin_hooks.timeout_ms == 5000);
  CHECK_FALSE(c.provider.context_window.has_value());

  // The C++ defaults are the same, and valid.
  const Config d;
  CHECK(d.Validate().ok());
  CHECK(d.ToJson() == c.ToJson());

  // Empty sections change nothing; whitespace around the document is fine.
  CHECK(Accepted(" \n{\"compaction\": {}, \"limits\": {}, \"pluginHooks\": {}, \"provider\": {}}\n")
            .ToJson() == d.ToJson());
}

TEST_CASE("R1 every key is read") {
  const Config c = Accepted(R"({
    "compaction": { "auto": false, "threshold": 0.5, "keepTurns": 7, "maxOutputTokens": 1234,
                    "calibrate": true, "fallback": "offline" },
    "limits": { "maxContextChars": 123456 },
    "pluginHooks": { "timeoutMs": 250 },
    "provider": { "contextWindow": 128000 }
  })");
  CHECK(c.compaction.auto_compact == false);
  CHECK(c.compaction.threshold == 0.5);
  CHECK(c.compaction.keep_turns == 7);
  CHECK(c.compaction.max_output_tokens == 1234);
  CHECK(c.compaction.calibrate == true);
  CHECK(c.compaction.fallback == Fallback::kOffline);
  CHECK(c.limits.max_context_chars == 123456);
  CHECK(c.plugin_hooks.timeout_ms == 250);
  REQUIRE(c.provider.context_window.has_value());
  CHECK(*c.provider.context_window == 128000);

  // Keys not given keep their defaults; "fallback": "none" and "contextWindow": null are
  // accepted spellings of the defaults.
  const Config d =
      Accepted(R"({"compaction": {"fallback": "none"}, "provider": {"contextWindow": null}})");
  CHECK(d.compaction.fallback == Fallback::kNone);
  CHECK_FALSE(d.provider.context_window.has_value());
  CHECK(d.compaction.threshold == 0.85);
}

TEST_CASE("R1.1 threshold: 0.1 and 0.99 are accepted, values just outside are rejected") {
  CHECK(Accepted(One("compaction", "threshold", "0.1")).compaction.threshold == 0.1);
  CHECK(Accepted(One("compaction", "threshold", "0.99")).compaction.threshold == 0.99);
  CHECK(Accepted(One("compaction", "threshold", "1e-1")).compaction.threshold == 0.1);
  CHECK(Rejected(One("compaction", "threshold", "1.5")) ==
        "compaction.threshold is 1.5; it must be a number from 0.1 to 0.99.");
  CHECK(Rejected(One("compaction", "threshold", "0.09")) ==
        "compaction.threshold is 0.09; it must be a number from 0.1 to 0.99.");
  CHECK(Rejected(One("compaction", "threshold", "0.991")) ==
        "compaction.threshold is 0.991; it must be a number from 0.1 to 0.99.");
  CHECK(Rejected(One("compaction", "threshold", "1")) ==
        "compaction.threshold is 1; it must be a number from 0.1 to 0.99.");
  CHECK(Rejected(One("compaction", "threshold", "-0.5")) ==
        "compaction.threshold is -0.5; it must be a number from 0.1 to 0.99.");
  CHECK(Rejected(One("compaction", "threshold", "\"0.8\"")) ==
        "compaction.threshold is \"0.8\"; it must be a number from 0.1 to 0.99.");
  // Too large for a double: a number out of range like any other, shown as written (R13.2).
  CHECK(Rejected(One("compaction", "threshold", "1e999")) ==
        "compaction.threshold is 1e999; it must be a number from 0.1 to 0.99.");
  CHECK(Rejected(One("compaction", "threshold", "1.50")) ==
        "compaction.threshold is 1.50; it must be a number from 0.1 to 0.99.");
  CHECK(Accepted(One("compaction", "threshold", "0.850")).compaction.threshold == 0.85);
}

TEST_CASE("R1.1 keepTurns: integers 0 to 20") {
  CHECK(Accepted(One("compaction", "keepTurns", "0")).compaction.keep_turns == 0);
  CHECK(Accepted(One("compaction", "keepTurns", "20")).compaction.keep_turns == 20);
  CHECK(Accepted(One("compaction", "keepTurns", "3.0")).compaction.keep_turns == 3);
  CHECK(Rejected(One("compaction", "keepTurns", "21")) ==
        "compaction.keepTurns is 21; it must be an integer from 0 to 20.");
  CHECK(Rejected(One("compaction", "keepTurns", "-1")) ==
        "compaction.keepTurns is -1; it must be an integer from 0 to 20.");
  CHECK(Rejected(One("compaction", "keepTurns", "2.5")) ==
        "compaction.keepTurns is 2.5; it must be an integer from 0 to 20.");
  CHECK(Rejected(One("compaction", "keepTurns", "true")) ==
        "compaction.keepTurns is true; it must be an integer from 0 to 20.");
  CHECK(Rejected(One("compaction", "keepTurns", "null")) ==
        "compaction.keepTurns is null; it must be an integer from 0 to 20.");
}

TEST_CASE("R1.1 maxOutputTokens: integers of at least 1") {
  CHECK(Accepted(One("compaction", "maxOutputTokens", "1")).compaction.max_output_tokens == 1);
  CHECK(Accepted(One("compaction", "maxOutputTokens", "16000.0")).compaction.max_output_tokens ==
        16000);
  CHECK(Accepted(One("compaction", "maxOutputTokens", "9007199254740991"))
            .compaction.max_output_tokens == 9007199254740991u);
  CHECK(Rejected(One("compaction", "maxOutputTokens", "0")) ==
        "compaction.maxOutputTokens is 0; it must be an integer of at least 1.");
  CHECK(Rejected(One("compaction", "maxOutputTokens", "100.5")) ==
        "compaction.maxOutputTokens is 100.5; it must be an integer of at least 1.");
  CHECK(Rejected(One("compaction", "maxOutputTokens", "[16000]")) ==
        "compaction.maxOutputTokens is [16000]; it must be an integer of at least 1.");
  // Beyond what JSON carries exactly: refused rather than silently rounded.
  CHECK(Rejected(One("compaction", "maxOutputTokens", "9007199254740992")) ==
        "compaction.maxOutputTokens is 9007199254740992; it must be an integer from 1 to "
        "9007199254740991.");
  CHECK(Rejected(One("limits", "maxContextChars", "1e30")) ==
        "limits.maxContextChars is 1e30; it must be an integer from 4000 to 9007199254740991.");
  CHECK(Rejected(One("limits", "maxContextChars",
                     "4.0E3"
                     "1")) ==
        "limits.maxContextChars is 4.0E31; it must be an integer from 4000 to 9007199254740991.");
  CHECK(Rejected(One("compaction", "maxOutputTokens", "18446744073709551615"))
            .find("compaction.maxOutputTokens is 18446744073709551615;") == 0);
  // Ten thousand digits: beyond a double's range, still "too big", shown cut.
  CHECK(Rejected(One("compaction", "maxOutputTokens", std::string(10000, '9'))) ==
        "compaction.maxOutputTokens is " + std::string(57, '9') +
            "...; it must be an integer from 1 to 9007199254740991.");
}

TEST_CASE("R1.1 maxContextChars: integers of at least 4000") {
  CHECK(Accepted(One("limits", "maxContextChars", "4000")).limits.max_context_chars == 4000);
  CHECK(Accepted(One("limits", "maxContextChars", "4e6")).limits.max_context_chars == 4000000);
  CHECK(Rejected(One("limits", "maxContextChars", "3999")) ==
        "limits.maxContextChars is 3999; it must be an integer of at least 4000.");
  CHECK(Rejected(One("limits", "maxContextChars", "\"lots\"")) ==
        "limits.maxContextChars is \"lots\"; it must be an integer of at least 4000.");
  CHECK(Rejected(One("limits", "maxContextChars", "4000.5")) ==
        "limits.maxContextChars is 4000.5; it must be an integer of at least 4000.");
}

TEST_CASE("R1.1 timeoutMs: integers of at least 1") {
  CHECK(Accepted(One("pluginHooks", "timeoutMs", "1")).plugin_hooks.timeout_ms == 1);
  CHECK(Rejected(One("pluginHooks", "timeoutMs", "0")) ==
        "pluginHooks.timeoutMs is 0; it must be an integer of at least 1.");
  CHECK(Rejected(One("pluginHooks", "timeoutMs", "{}")) ==
        "pluginHooks.timeoutMs is {}; it must be an integer of at least 1.");
}

TEST_CASE("R1.2 contextWindow: null or an integer of at least 1, and huge windows load") {
  CHECK(*Accepted(One("provider", "contextWindow", "1")).provider.context_window == 1);
  // Above kMaxTrustedContextWindow: accepted here, treated as unknown by the Compactor (R1.2).
  CHECK(*Accepted(One("provider", "contextWindow", "10000000")).provider.context_window ==
        10000000);
  CHECK(Rejected(One("provider", "contextWindow", "0")) ==
        "provider.contextWindow is 0; it must be null or an integer of at least 1.");
  CHECK(Rejected(One("provider", "contextWindow", "\"128k\"")) ==
        "provider.contextWindow is \"128k\"; it must be null or an integer of at least 1.");
  CHECK(Rejected(One("provider", "contextWindow", "1.5")) ==
        "provider.contextWindow is 1.5; it must be null or an integer of at least 1.");
}

TEST_CASE("R1.1 booleans and the fallback choice are strict") {
  CHECK(Rejected(One("compaction", "auto", "\"yes\"")) ==
        "compaction.auto is \"yes\"; it must be true or false.");
  CHECK(Rejected(One("compaction", "auto", "1")) ==
        "compaction.auto is 1; it must be true or false.");
  CHECK(Rejected(One("compaction", "calibrate", "null")) ==
        "compaction.calibrate is null; it must be true or false.");
  CHECK(Rejected(One("compaction", "fallback", "\"model\"")) ==
        "compaction.fallback is \"model\"; it must be one of \"none\", \"offline\".");
  CHECK(Rejected(One("compaction", "fallback", "\"Offline\"")) ==
        "compaction.fallback is \"Offline\"; it must be one of \"none\", \"offline\" (did you "
        "mean \"offline\"?).");
  CHECK(Rejected(One("compaction", "fallback", "false")) ==
        "compaction.fallback is false; it must be one of \"none\", \"offline\".");
}

TEST_CASE("R1.1 unknown keys are rejected with the known ones listed") {
  CHECK(Rejected(One("compaction", "keepturns", "2")) ==
        "unknown key \"compaction.keepturns\"; known keys in \"compaction\" are: auto, "
        "threshold, keepTurns, maxOutputTokens, calibrate, fallback, "
        "instructionsForSummarizerChars, maxSummarizerInputTokens, clearToolResults, background, "
        "ledger, recallTool. "
        "Did you mean "
        "\"compaction.keepTurns\"?");
  CHECK(Rejected(One("compaction", "max_output_tokens", "2"))
            .find("Did you mean \"compaction.maxOutputTokens\"?") != std::string::npos);
  CHECK(Rejected(One("compaction", "ratio", "0.5")) ==
        "unknown key \"compaction.ratio\"; known keys in \"compaction\" are: auto, threshold, "
        "keepTurns, maxOutputTokens, calibrate, fallback, instructionsForSummarizerChars, "
        "maxSummarizerInputTokens, clearToolResults, background, ledger, recallTool.");
  // A key under the wrong section points to the right one.
  CHECK(Rejected(One("compaction", "maxContextChars", "9000")) ==
        "unknown key \"compaction.maxContextChars\"; known keys in \"compaction\" are: auto, "
        "threshold, keepTurns, maxOutputTokens, calibrate, fallback, "
        "instructionsForSummarizerChars, maxSummarizerInputTokens, clearToolResults, background, "
        "ledger, recallTool. "
        "Did you mean "
        "\"limits.maxContextChars\"?");
  CHECK(Rejected(One("limits", "x", "1")) ==
        "unknown key \"limits.x\"; known keys in \"limits\" are: maxContextChars.");
  CHECK(Rejected(One("pluginHooks", "timeout", "1")) ==
        "unknown key \"pluginHooks.timeout\"; known keys in \"pluginHooks\" are: timeoutMs.");
  CHECK(Rejected(One("provider", "baseUrl", "\"http://x\"")) ==
        "unknown key \"provider.baseUrl\"; known keys in \"provider\" are: contextWindow.");

  // Top level.
  CHECK(Rejected(R"({"limit": {}})") ==
        "unknown key \"limit\"; known top-level keys are: compaction, limits, pluginHooks, "
        "provider, cache.");
  CHECK(Rejected(R"({"plugin_hooks": {}})") ==
        "unknown key \"plugin_hooks\"; known top-level keys are: compaction, limits, "
        "pluginHooks, provider, cache. Did you mean \"pluginHooks\"?");
  CHECK(Rejected(R"({"threshold": 0.5})") ==
        "unknown key \"threshold\"; known top-level keys are: compaction, limits, pluginHooks, "
        "provider, cache. Did you mean \"compaction.threshold\"?");
  CHECK(Rejected(R"({"$schema": "https://example.com/recap.json"})")
            .find("unknown key \"$schema\"") == 0);
  // Keys with control bytes are shown escaped.
  CHECK(Rejected("{\"compaction\": {\"a\\nb\": 1}}").find("\"compaction.a\\x0Ab\"") !=
        std::string::npos);
}

TEST_CASE("R1.1 the first problem in document order is reported") {
  CHECK(Rejected(R"({"limits": {"maxContextChars": 10}, "compaction": {"threshold": 5}})") ==
        "limits.maxContextChars is 10; it must be an integer of at least 4000.");
}

TEST_CASE("R1.1 sections must be objects, and keys appear once") {
  CHECK(Rejected(R"({"compaction": 5})") ==
        "compaction is 5; it must be an object with some of the keys auto, threshold, keepTurns, "
        "maxOutputTokens, calibrate, fallback, instructionsForSummarizerChars, "
        "maxSummarizerInputTokens, clearToolResults, background, ledger, recallTool.");
  CHECK(Rejected(R"({"limits": null})") ==
        "limits is null; it must be an object with some of the keys maxContextChars.");
  CHECK(Rejected(R"({"compaction": {"threshold": 0.5, "threshold": 0.6}})") ==
        "the configuration has the key \"compaction.threshold\" twice; write each key once.");
  CHECK(Rejected(R"({"limits": {}, "limits": {}})") ==
        "the configuration has the key \"limits\" twice; write each key once.");
  CHECK(Rejected(R"({"": 1, "": 2})") ==
        "the configuration has the key \"\" twice; write each key once.");
}

TEST_CASE("R1.1 the top level must be a JSON object") {
  CHECK(Rejected("[]") ==
        "the configuration is []; it must be a JSON object such as {\"compaction\": "
        "{\"threshold\": 0.8}} (an empty object {} gives the defaults).");
  CHECK(Rejected("null").find("the configuration is null; it must be a JSON object") == 0);
  CHECK(Rejected("\"compaction\"").find("the configuration is \"compaction\";") == 0);
}

TEST_CASE("R1.1 malformed JSON: the byte offset and what was expected") {
  const std::string m = Rejected(R"({"compaction": {"threshold": 0.5,}})");
  CHECK(m.find("the configuration is not valid JSON") == 0);
  CHECK(m.find("byte offset 33") != std::string::npos);
  CHECK(m.find("line 1, column 34") != std::string::npos);
  CHECK(m.find("unexpected '}'; expected a string in double quotes (a key)") != std::string::npos);

  const std::string cut = Rejected(R"({"compaction": {"threshold": 0.5)");
  CHECK(cut.find("the configuration is not valid JSON") == 0);
  CHECK(cut.find("The text ends early") != std::string::npos);

  CHECK(Rejected("").find("the configuration is not valid JSON: error at byte offset 0") == 0);
  CHECK(Rejected("{} {}").find("the configuration is not valid JSON") == 0);
  CHECK(Rejected("{\"compaction\": {\"auto\": tru}}").find("byte offset") != std::string::npos);
  // Not a C++ extension: comments are not JSON.
  CHECK(Rejected("{ // defaults\n}").find("the configuration is not valid JSON") == 0);
}

TEST_CASE("R1.1 Validate checks configs built in C++ with the same messages") {
  Config c;
  CHECK(c.Validate().ok());

  c.compaction.threshold = 1.5;
  CHECK(c.Validate() == Status::InvalidArgument(
                            "compaction.threshold is 1.5; it must be a number from 0.1 to 0.99."));
  c.compaction.threshold = std::numeric_limits<double>::quiet_NaN();
  CHECK(c.Validate().message() ==
        "compaction.threshold is nan; it must be a number from 0.1 to 0.99.");
  c.compaction.threshold = 0.1;
  CHECK(c.Validate().ok());

  c.compaction.keep_turns = -1;
  CHECK(c.Validate().message() ==
        "compaction.keepTurns is -1; it must be an integer from 0 to 20.");
  c.compaction.keep_turns = 21;
  CHECK(c.Validate().message() ==
        "compaction.keepTurns is 21; it must be an integer from 0 to 20.");
  c.compaction.keep_turns = 20;

  c.compaction.max_output_tokens = 0;
  CHECK(c.Validate().message() ==
        "compaction.maxOutputTokens is 0; it must be an integer of at least 1.");
  c.compaction.max_output_tokens = 1;

  c.compaction.fallback = static_cast<Fallback>(7);
  CHECK(c.Validate().message() ==
        "compaction.fallback is 7; it must be one of \"none\", \"offline\".");
  c.compaction.fallback = Fallback::kOffline;

  c.limits.max_context_chars = 3999;
  CHECK(c.Validate().message() ==
        "limits.maxContextChars is 3999; it must be an integer of at least 4000.");
  c.limits.max_context_chars = 4000;

  c.plugin_hooks.timeout_ms = 0;
  CHECK(c.Validate().message() ==
        "pluginHooks.timeoutMs is 0; it must be an integer of at least 1.");
  c.plugin_hooks.timeout_ms = 1;

  c.provider.context_window = 0;
  CHECK(c.Validate().message() ==
        "provider.contextWindow is 0; it must be null or an integer of at least 1.");
  c.provider.context_window = 5000000;  // untrusted later (R1.2), but a valid config
  CHECK(c.Validate().ok());
  c.provider.context_window = std::size_t{1} << 60;  // would not survive a JSON round trip
  CHECK(c.Validate().message() ==
        "provider.contextWindow is 1152921504606846976; it must be null or an integer from 1 to "
        "9007199254740991.");
  c.provider.context_window.reset();
  CHECK(c.Validate().ok());
}

TEST_CASE("R1 ToJson writes every key, and FromJson reads it back") {
  const std::string defaults = Config().ToJson();
  CHECK(defaults ==
        "{\n"
        "  \"compaction\": {\n"
        "    \"auto\": true,\n"
        "    \"threshold\": 0.85,\n"
        "    \"keepTurns\": 2,\n"
        "    \"maxOutputTokens\": 16000,\n"
        "    \"calibrate\": false,\n"
        "    \"fallback\": \"none\",\n"
        "    \"instructionsForSummarizerChars\": 8000,\n"
        "    \"maxSummarizerInputTokens\": null,\n"
        "    \"clearToolResults\": {\n"
        "      \"enabled\": false,\n"
        "      \"keepRecent\": 3,\n"
        "      \"excludeTools\": [],\n"
        "      \"minFreeChars\": 20000\n"
        "    },\n"
        "    \"background\": {\n"
        "      \"enabled\": false,\n"
        "      \"startAt\": 0.7,\n"
        "      \"maxWaitMs\": 600000,\n"
        "      \"workers\": 4\n"
        "    },\n"
        "    \"ledger\": {\n"
        "      \"enabled\": true,\n"
        "      \"maxChars\": 8000\n"
        "    },\n"
        "    \"recallTool\": false\n"
        "  },\n"
        "  \"limits\": {\n"
        "    \"maxContextChars\": 800000\n"
        "  },\n"
        "  \"pluginHooks\": {\n"
        "    \"timeoutMs\": 5000\n"
        "  },\n"
        "  \"provider\": {\n"
        "    \"contextWindow\": null\n"
        "  },\n"
        "  \"cache\": {\n"
        "    \"maxBytes\": 536870912\n"
        "  }\n"
        "}");

  Config c;
  c.compaction.auto_compact = false;
  c.compaction.threshold = 0.123456789;
  c.compaction.keep_turns = 0;
  c.compaction.max_output_tokens = 1;
  c.compaction.calibrate = true;
  c.compaction.fallback = Fallback::kOffline;
  c.compaction.instructions_for_summarizer_chars = 0;
  c.limits.max_context_chars = 4000;
  c.plugin_hooks.timeout_ms = 77;
  c.provider.context_window = 2000001;
  c.cache.max_bytes = 0;
  c.compaction.clear_tool_results = {true, 0, {"memory", "todo"}, 0};
  const Config back = Accepted(c.ToJson());
  CHECK(back.compaction.clear_tool_results.enabled);
  CHECK(back.compaction.clear_tool_results.keep_recent == 0);
  CHECK(back.compaction.clear_tool_results.exclude_tools ==
        std::vector<std::string>{"memory", "todo"});
  CHECK(back.compaction.clear_tool_results.min_free_chars == 0);
  CHECK(back.compaction.auto_compact == c.compaction.auto_compact);
  CHECK(back.compaction.threshold == c.compaction.threshold);
  CHECK(back.compaction.keep_turns == c.compaction.keep_turns);
  CHECK(back.compaction.max_output_tokens == c.compaction.max_output_tokens);
  CHECK(back.compaction.calibrate == c.compaction.calibrate);
  CHECK(back.compaction.fallback == c.compaction.fallback);
  CHECK(back.compaction.instructions_for_summarizer_chars ==
        c.compaction.instructions_for_summarizer_chars);
  CHECK(back.limits.max_context_chars == c.limits.max_context_chars);
  CHECK(back.plugin_hooks.timeout_ms == c.plugin_hooks.timeout_ms);
  CHECK(back.provider.context_window == c.provider.context_window);
  CHECK(back.cache.max_bytes == c.cache.max_bytes);
  CHECK(back.ToJson() == c.ToJson());
  CHECK(Accepted(defaults).ToJson() == defaults);
}

TEST_CASE("R14.3 compaction.clearToolResults: true, false, or an object of its own keys") {
  CHECK_FALSE(Accepted("{}").compaction.clear_tool_results.enabled);
  const Config on = Accepted(R"({"compaction": {"clearToolResults": true}})");
  CHECK(on.compaction.clear_tool_results.enabled);
  CHECK(on.compaction.clear_tool_results.keep_recent == 3);
  CHECK(on.compaction.clear_tool_results.min_free_chars == 20000);
  CHECK_FALSE(Accepted(R"({"compaction": {"clearToolResults": false}})")
                  .compaction.clear_tool_results.enabled);
  const Config object = Accepted(
      R"({"compaction": {"clearToolResults": {"keepRecent": 5, "excludeTools": ["memory"],)"
      R"( "minFreeChars": 1000}}})");
  CHECK(object.compaction.clear_tool_results.enabled);  // an object turns it on
  CHECK(object.compaction.clear_tool_results.keep_recent == 5);
  CHECK(object.compaction.clear_tool_results.exclude_tools == std::vector<std::string>{"memory"});
  CHECK(object.compaction.clear_tool_results.min_free_chars == 1000);
  CHECK_FALSE(Accepted(R"({"compaction": {"clearToolResults": {"enabled": false}}})")
                  .compaction.clear_tool_results.enabled);

  CHECK(Rejected(R"({"compaction": {"clearToolResults": "yes"}})") ==
        "compaction.clearToolResults is \"yes\"; it must be true, false or an object with some "
        "of the keys enabled, keepRecent, excludeTools, minFreeChars (e.g. {\"keepRecent\": 3, "
        "\"excludeTools\": [\"read_file\"], \"minFreeChars\": 20000}).");
  CHECK(Rejected(R"({"compaction": {"clearToolResults": {"keepRecent": -1}}})") ==
        "compaction.clearToolResults.keepRecent is -1; it must be an integer from 0 to 100000.");
  CHECK(Rejected(R"({"compaction": {"clearToolResults": {"keepRecent": 2.5}}})") ==
        "compaction.clearToolResults.keepRecent is 2.5; it must be an integer from 0 to 100000.");
  CHECK(Rejected(R"({"compaction": {"clearToolResults": {"minFreeChars": -5}}})") ==
        "compaction.clearToolResults.minFreeChars is -5; it must be an integer of at least 0.");
  CHECK(Rejected(R"({"compaction": {"clearToolResults": {"excludeTools": "memory"}}})") ==
        "compaction.clearToolResults.excludeTools is \"memory\"; it must be an array of tool "
        "names (strings).");
  CHECK(Rejected(R"({"compaction": {"clearToolResults": {"excludeTools": ["a", ""]}}})") ==
        "compaction.clearToolResults.excludeTools[1] is \"\"; it must be a tool name: a "
        "non-empty string.");
  CHECK(Rejected(R"({"compaction": {"clearToolResults": {"keep_recent": 2}}})") ==
        "unknown key \"compaction.clearToolResults.keep_recent\"; known keys in "
        "\"compaction.clearToolResults\" are: enabled, keepRecent, excludeTools, minFreeChars. "
        "Did you mean \"compaction.clearToolResults.keepRecent\"?");

  Config bad;
  bad.compaction.clear_tool_results.keep_recent = -2;
  CHECK(bad.Validate().message() ==
        "compaction.clearToolResults.keepRecent is -2; it must be an integer from 0 to 100000.");
}

TEST_CASE("issue 19 compaction.maxSummarizerInputTokens: null (no limit) or at least 1000") {
  CHECK_FALSE(Accepted("{}").compaction.max_summarizer_input_tokens.has_value());
  CHECK(Accepted(R"({"compaction": {"maxSummarizerInputTokens": 50000}})")
            .compaction.max_summarizer_input_tokens == std::optional<std::size_t>(50000));
  CHECK_FALSE(Accepted(R"({"compaction": {"maxSummarizerInputTokens": null}})")
                  .compaction.max_summarizer_input_tokens.has_value());
  CHECK(Rejected(R"({"compaction": {"maxSummarizerInputTokens": 999}})") ==
        "compaction.maxSummarizerInputTokens is 999; it must be null or an integer of at least "
        "1000.");
}

TEST_CASE("R15.1 compaction.background: true, false, or an object of its own keys") {
  const Config defaults = Accepted("{}");
  CHECK_FALSE(defaults.compaction.background.enabled);
  CHECK(defaults.compaction.background.start_at == 0.7);
  CHECK(defaults.compaction.background.max_wait_ms == 600000);
  CHECK(Accepted(R"({"compaction": {"background": true}})").compaction.background.enabled);
  const Config object =
      Accepted(R"({"compaction": {"background": {"startAt": 0.5, "maxWaitMs": 2000}}})");
  CHECK(object.compaction.background.enabled);  // an object turns it on
  CHECK(object.compaction.background.start_at == 0.5);
  CHECK(object.compaction.background.max_wait_ms == 2000);
  CHECK_FALSE(Accepted(R"({"compaction": {"background": {"enabled": false}}})")
                  .compaction.background.enabled);
  // What ToJson writes, FromJson reads back.
  CHECK(Accepted(object.ToJson()).compaction.background.start_at == 0.5);

  CHECK(Rejected(R"({"compaction": {"background": "on"}})") ==
        "compaction.background is \"on\"; it must be true, false or an object with some of the "
        "keys enabled, startAt, maxWaitMs, workers (e.g. {\"startAt\": 0.7, \"maxWaitMs\": "
        "600000}).");
  CHECK(Rejected(R"({"compaction": {"background": {"startAt": 0}}})") ==
        "compaction.background.startAt is 0; it must be a number from 0.1 to 1 (a fraction of "
        "the trigger).");
  CHECK(Rejected(R"({"compaction": {"background": {"startAt": 1.5}}})") ==
        "compaction.background.startAt is 1.5; it must be a number from 0.1 to 1 (a fraction of "
        "the trigger).");
  CHECK(Accepted(R"({"compaction": {"background": {"workers": 16}}})")
            .compaction.background.workers == 16);
  CHECK(Rejected(R"({"compaction": {"background": {"workers": 0}}})") ==
        "compaction.background.workers is 0; it must be an integer from 1 to 64.");
  CHECK(Rejected(R"({"compaction": {"background": {"maxWaitMs": 0}}})") ==
        "compaction.background.maxWaitMs is 0; it must be an integer of at least 1.");
  CHECK(Rejected(R"({"compaction": {"background": {"start_at": 0.5}}})") ==
        "unknown key \"compaction.background.start_at\"; known keys in "
        "\"compaction.background\" are: enabled, startAt, maxWaitMs, workers. Did you mean "
        "\"compaction.background.startAt\"?");

  Config bad;
  bad.compaction.background.start_at = 0.05;
  CHECK(bad.Validate().message().rfind("compaction.background.startAt is 0.05", 0) == 0);
}

TEST_CASE("R18.2 compaction.recallTool: off by default, true or false") {
  CHECK_FALSE(Config{}.compaction.recall_tool);
  const Config on = Accepted(R"({"compaction": {"recallTool": true}})");
  CHECK(on.compaction.recall_tool);
  CHECK(Accepted(on.ToJson()).compaction.recall_tool);
  CHECK(Rejected(R"({"compaction": {"recallTool": "yes"}})") ==
        "compaction.recallTool is \"yes\"; it must be true or false.");
}

TEST_CASE("R17.2 compaction.ledger: on by default, true, false, or {enabled, maxChars}") {
  const Config defaults = Accepted("{}");
  CHECK(defaults.compaction.ledger.enabled);
  CHECK(defaults.compaction.ledger.max_chars == 8000);
  CHECK_FALSE(Accepted(R"({"compaction": {"ledger": false}})").compaction.ledger.enabled);
  const Config object = Accepted(R"({"compaction": {"ledger": {"maxChars": 3000}}})");
  CHECK(object.compaction.ledger.enabled);
  CHECK(object.compaction.ledger.max_chars == 3000);
  CHECK_FALSE(Accepted(R"({"compaction": {"ledger": {"enabled": false, "maxChars": 3000}}})")
                  .compaction.ledger.enabled);
  CHECK(Accepted(object.ToJson()).compaction.ledger.max_chars == 3000);
  CHECK(Rejected(R"({"compaction": {"ledger": {"maxChars": 10}}})") ==
        "compaction.ledger.maxChars is 10; it must be an integer of at least 200.");
  CHECK(Rejected(R"({"compaction": {"ledger": "yes"}})") ==
        "compaction.ledger is \"yes\"; it must be true, false or an object with some of the keys "
        "enabled, maxChars (e.g. {\"maxChars\": 8000}).");
  CHECK(Rejected(R"({"compaction": {"ledger": {"max_chars": 100}}})") ==
        "unknown key \"compaction.ledger.max_chars\"; known keys in \"compaction.ledger\" are: "
        "enabled, maxChars. Did you mean \"compaction.ledger.maxChars\"?");
  Config bad;
  bad.compaction.ledger.max_chars = 0;
  CHECK(bad.Validate().message() ==
        "compaction.ledger.maxChars is 0; it must be an integer of at least 200.");
}
