// The `recap` command with an HTTP summarizer (issue 16; SPEC R13.3, R13.4): the program is run
// as a child process (cli/cli_run.h) against servers these tests start on this machine
// (support/http_test_server.h):
//
//  * no part of an echoed API key reaches stderr or --json output, for every protocol;
//  * a key over plain http:// off the loopback is refused (exit 2, naming
//    --allow-insecure-http) before any connection; --allow-insecure-http sends it;
//  * --timeout-ms, --connect-timeout-ms, --ca-path and $CURL_CA_BUNDLE / $SSL_CERT_FILE work,
//    and the command's messages name those flags, never the library's C++ options;
//  * while the command waits on the model, a terminal shows what it waits for and the
//    command's default time-out (120 s).
#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <fstream>
#include <string>
#include <vector>

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include "cli/cli_run.h"
#include "support/build_speed.h"
#include "support/http_test_server.h"
#include "support/temp_dir.h"
#if RECAP_TEST_HAVE_TLS
#include "support/test_tls.h"
#endif

using recap::testing::HttpTestServer;
using recap::testing::ScriptedHttpResponse;
using recap::testing::TempDir;
using recap::testing::cli::Json;
using recap::testing::cli::Ran;
using recap::testing::cli::Run;
using recap::testing::cli::RunOnTerminal;
using Clock = std::chrono::steady_clock;

namespace {

// As long as a real OpenAI project key.
std::string LongKey() {
  std::string key = "sk-proj-";
  const char* alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_-";
  unsigned state = 987654u;
  while (key.size() < 164) {
    state = state * 1103515245u + 12345u;
    key.push_back(alphabet[(state >> 16) % 64]);
  }
  return key;
}
const std::string kKey = LongKey();
const std::string kKeyEnv = "RECAP_TEST_CLI_HTTP_KEY=" + kKey;

std::size_t LongestRun(const std::string& text, const std::string& secret) {
  std::size_t best = 0;
  std::vector<std::size_t> prev(secret.size() + 1, 0), cur(secret.size() + 1, 0);
  for (std::size_t i = 1; i <= text.size(); ++i) {
    for (std::size_t j = 1; j <= secret.size(); ++j) {
      cur[j] = text[i - 1] == secret[j - 1] ? prev[j - 1] + 1 : 0;
      best = std::max(best, cur[j]);
    }
    std::swap(prev, cur);
  }
  return best;
}

std::string Base64(const std::string& in) {
  const char* table = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string out;
  std::size_t i = 0;
  for (; i + 2 < in.size(); i += 3) {
    const unsigned v = (static_cast<unsigned char>(in[i]) << 16) |
                       (static_cast<unsigned char>(in[i + 1]) << 8) |
                       static_cast<unsigned char>(in[i + 2]);
    for (int s = 18; s >= 0; s -= 6) out.push_back(table[(v >> s) & 63]);
  }
  if (i + 1 == in.size()) {
    const unsigned v = static_cast<unsigned char>(in[i]) << 16;
    out += {table[(v >> 18) & 63], table[(v >> 12) & 63], '=', '='};
  } else if (i + 2 == in.size()) {
    const unsigned v =
        (static_cast<unsigned char>(in[i]) << 16) | (static_cast<unsigned char>(in[i + 1]) << 8);
    out += {table[(v >> 18) & 63], table[(v >> 12) & 63], table[(v >> 6) & 63], '='};
  }
  return out;
}

// A database `name` in `dir` with session "s": eight turns of plain text, enough to compact
// with --keep-turns 1 (once: a test that compacts again needs another database).
std::string MakeDb(const TempDir& dir, const std::string& name = "s.db") {
  Json messages = Json::array();
  messages.push_back({{"role", "system"}, {"content", "You are a helpful assistant."}});
  for (int i = 1; i <= 8; ++i) {
    messages.push_back(
        {{"role", "user"},
         {"content", "Question " + std::to_string(i) + ": " + std::string(400, 'q')}});
    messages.push_back({{"role", "assistant"},
                        {"content", "Answer " + std::to_string(i) + ": " + std::string(400, 'a')}});
  }
  const std::string file = dir.File("t.json");
  std::ofstream(file) << messages.dump();
  const std::string db = dir.File(name);
  Ran r = Run(dir, {"import", "--format", "openai-chat", file, "--session", "s", "--db", db});
  INFO(r.err);
  REQUIRE(r.exit == 0);
  return db;
}

const char* ProviderFlag(int protocol) {
  return protocol == 0 ? "openai" : protocol == 1 ? "anthropic" : "openai-responses";
}

std::string BaseUrlFor(const std::string& server_url, int protocol) {
  return protocol == 1 ? server_url : server_url + "/v1";
}

std::vector<std::string> Compact(const std::string& db, int protocol, const std::string& base,
                                 std::vector<std::string> more = {}) {
  std::vector<std::string> a = {"compact",    "--session",  "s",
                                "--db",       db,           "--keep-turns",
                                "1",          "--provider", ProviderFlag(protocol),
                                "--base-url", base,         "--model",
                                "test-model"};
  a.insert(a.end(), more.begin(), more.end());
  return a;
}

std::string ErrorBody(int protocol, const std::string& message) {
  if (protocol == 1) {
    return Json{{"type", "error"},
                {"error", {{"type", "authentication_error"}, {"message", message}}}}
        .dump();
  }
  return Json{{"error", {{"message", message}, {"type", "invalid_request_error"}}}}.dump();
}

std::string OkReply(const std::string& text) {
  return Json{
      {"choices",
       {{{"message", {{"role", "assistant"}, {"content", text}}}, {"finish_reason", "stop"}}}}}
      .dump();
}

// The two CA variables the command reads, set as given ("" is unset for the command): the
// machine running the tests may have set either for its own tools.
std::vector<std::string> CaEnv(const std::string& curl_ca_bundle,
                               const std::string& ssl_cert_file) {
  return {"CURL_CA_BUNDLE=" + curl_ca_bundle, "SSL_CERT_FILE=" + ssl_cert_file};
}

// No C++ option of the library in a message of the command.
void CheckCommandWords(const std::string& text) {
  INFO(text);
  CHECK(text.find("HttpProviderOptions") == std::string::npos);
  for (const char* option : {"timeout_ms", "ca_path", "base_url", "api_key_env", "api_key",
                             "allow_insecure_http", "max_retries", "max_retry_delay_ms"}) {
    CHECK(text.find(option) == std::string::npos);
  }
}

}  // namespace

TEST_CASE(
    "R13.3 the command shows no 8 characters of a key the server echoes, on stderr or in --json, "
    "all three protocols",
    "[cli][http]") {
  TempDir dir("recap-cli-http");
  const std::string db = MakeDb(dir);
  for (int protocol = 0; protocol < 3; ++protocol) {
    HttpTestServer server;
    const std::string base = BaseUrlFor(server.BaseUrl(), protocol);
    // The excerpt of the server's text is 300 bytes: these fillers cut the key at offsets
    // across its whole length (the library's tests, http.R13.3, cut it at every one; here the
    // command's own outputs are checked), then the base64 echoes.
    std::vector<std::string> echoes;
    // (Every 11th offset; every 33rd in the sanitizer builds, where each run of the command
    // costs ten times as much.)
    const std::size_t step = recap_test::kSlowBuild ? 33 : 11;
    for (std::size_t filler = 130; filler <= 305; filler += step) {
      echoes.push_back(std::string(filler, 'x') + kKey + " is not a valid key");
    }
    echoes.push_back("your credentials " + Base64(kKey) + " were refused");
    echoes.push_back("Basic " + Base64("user:" + kKey) + " was refused");
    for (const std::string& echo : echoes) {
      // Every request gets the echo: the command asks for the model list before the summary.
      server.SetDefault(ScriptedHttpResponse::Json(401, ErrorBody(protocol, echo)));
      for (bool json : {false, true}) {
        std::vector<std::string> more = {"--api-key-env", "RECAP_TEST_CLI_HTTP_KEY"};
        if (json) more.push_back("--json");
        Ran r = Run(dir, Compact(db, protocol, base, more), {kKeyEnv});
        INFO(ProviderFlag(protocol) << ": " << echo.substr(0, 40) << "…, --json " << json);
        CHECK(r.exit == 1);
        const std::string all = r.out + r.err;
        CHECK(LongestRun(all, kKey) < 8);
        CHECK(LongestRun(all, Base64(kKey)) < 8);
        CHECK(all.find("refused the credentials") != std::string::npos);
        CHECK(all.find("--api-key-env") != std::string::npos);
        CheckCommandWords(all);
      }
    }
  }
}

TEST_CASE(
    "R13.4 --base-url http:// to a host that is not loopback, with a key, is a usage error naming "
    "--allow-insecure-http, and nothing is sent",
    "[cli][http]") {
  TempDir dir("recap-cli-http");
  const std::string db = MakeDb(dir);
  Ran r =
      Run(dir, Compact(db, 0, "http://10.9.8.7/v1", {"--api-key-env", "RECAP_TEST_CLI_HTTP_KEY"}),
          {kKeyEnv});
  INFO(r.err);
  CHECK(r.exit == 2);
  CHECK(r.err.find("--allow-insecure-http") != std::string::npos);
  CHECK(r.err.find("cleartext") != std::string::npos);
  CHECK(r.err.find("--base-url") != std::string::npos);
  CheckCommandWords(r.err);

  const std::string address = recap::testing::LocalNonLoopbackAddress();
  if (address.empty()) {
    WARN("no non-loopback IPv4 address here: the no-connection check is skipped");
    return;
  }
  HttpTestServer server(address);
  server.SetDefault(
      ScriptedHttpResponse::Json(200, OkReply("Checkpoint: the user asked eight questions.")));
  const std::string base = server.BaseUrl() + "/v1";
  r = Run(dir, Compact(db, 0, base, {"--api-key-env", "RECAP_TEST_CLI_HTTP_KEY", "--json"}),
          {kKeyEnv});
  CHECK(r.exit == 2);
  CHECK(r.out.find("--allow-insecure-http") != std::string::npos);
  CHECK(server.connection_count() == 0);
  // With the flag, the key goes (the user said the network is theirs).
  r = Run(
      dir,
      Compact(db, 0, base, {"--api-key-env", "RECAP_TEST_CLI_HTTP_KEY", "--allow-insecure-http"}),
      {kKeyEnv});
  INFO(r.err);
  CHECK(r.exit == 0);
  REQUIRE(server.request_count() >= 1);
  CHECK(server.Requests().back().Header("authorization") == "Bearer " + kKey);
}

TEST_CASE(
    "R13.4 --timeout-ms ends the wait for a server that never answers, and the message names the "
    "flag",
    "[cli][http]") {
  TempDir dir("recap-cli-http");
  const std::string db = MakeDb(dir);
  HttpTestServer server;
  ScriptedHttpResponse never = ScriptedHttpResponse::Json(200, OkReply("late"));
  never.delay = std::chrono::milliseconds(60000);
  server.SetDefault(never);
  const auto start = Clock::now();
  Ran r = Run(dir, Compact(db, 0, server.BaseUrl() + "/v1", {"--timeout-ms", "500"}));
  const auto took = std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - start);
  INFO(r.err);
  CHECK(r.exit == 1);
  CHECK(took.count() < 10000);  // the default would be 120 s per attempt
  CHECK(r.err.find("--timeout-ms = 500 ms") != std::string::npos);
  CheckCommandWords(r.err);
}

TEST_CASE("R13.4 --connect-timeout-ms ends the wait for a connection that is never accepted",
          "[cli][http]") {
  TempDir dir("recap-cli-http");
  const std::string db = MakeDb(dir);
  recap::testing::UnansweredLoopbackPort port;
  const auto start = Clock::now();
  Ran r = Run(dir, Compact(db, 0, "http://127.0.0.1:" + std::to_string(port.port()) + "/v1",
                           {"--connect-timeout-ms", "300"}));
  const auto took = std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - start);
  INFO(r.err);
  CHECK(r.exit == 1);
  // Three attempts of 300 ms and the backoff between them (the command keeps the library's
  // two retries; no flag turns them off): about 2.4 s. With the default connect time-out
  // (10 s an attempt) it would be over 30 s; the bound sits between, far from either. The
  // message is what shows the flag was applied.
  CHECK(took.count() < 25000);
  CHECK(r.err.find("--connect-timeout-ms = 300 ms") != std::string::npos);
  CheckCommandWords(r.err);
}

TEST_CASE("R13.4 bad provider flags are usage errors in the command's words", "[cli][http]") {
  TempDir dir("recap-cli-http");
  const std::string db = MakeDb(dir);
  struct Case {
    std::vector<std::string> args;
    const char* expected;
  };
  const std::string ok_base = "http://127.0.0.1:9/v1";
  const Case cases[] = {
      {Compact(db, 0, "ftp://example.com/v1"), "--base-url"},
      {Compact(db, 0, "http://127.0.0.1/v1?x=1"), "--base-url"},
      {Compact(db, 0, "127.0.0.1:8080"), "must start with http:// or https://"},
      {Compact(db, 0, ok_base, {"--timeout-ms", "0"}),
       "--timeout-ms wants a number of milliseconds"},
      {Compact(db, 0, ok_base, {"--timeout-ms", "ten"}), "--timeout-ms wants"},
      {Compact(db, 0, ok_base, {"--timeout-ms", "3600001"}), "from 1 to 3600000"},
      {Compact(db, 0, ok_base, {"--connect-timeout-ms", "-5"}), "--connect-timeout-ms wants"},
      {Compact(db, 0, ok_base, {"--ca-path", dir.File("no-such-ca.pem")}), "--ca-path"},
      {{"compact", "--session", "s", "--db", db, "--timeout-ms", "100"},
       "--timeout-ms is for --provider openai"},
      {{"compact", "--session", "s", "--db", db, "--allow-insecure-http"},
       "--allow-insecure-http is for --provider"},
  };
  for (const Case& c : cases) {
    Ran r = Run(dir, c.args);
    INFO(r.err);
    CHECK(r.exit == 2);
    CHECK(r.err.find(c.expected) != std::string::npos);
    CheckCommandWords(r.err);
  }
  // A CA file named by the environment that does not exist names the variable.
  const std::string missing = dir.File("missing-bundle.pem");
  for (const char* variable : {"SSL_CERT_FILE", "CURL_CA_BUNDLE"}) {
    const bool curl = std::string(variable) == "CURL_CA_BUNDLE";
    Ran r = Run(dir, Compact(db, 0, ok_base), CaEnv(curl ? missing : "", curl ? "" : missing));
    INFO(r.err);
    CHECK(r.exit == 2);
    CHECK(r.err.find(std::string("$") + variable) != std::string::npos);
    CheckCommandWords(r.err);
  }
}

#if RECAP_TEST_HAVE_TLS
TEST_CASE(
    "R13.4 --ca-path, $CURL_CA_BUNDLE and $SSL_CERT_FILE verify a server with a private CA, and a "
    "wrong CA fails naming --ca-path",
    "[cli][http]") {
  TempDir dir("recap-cli-http");
  const std::string db = MakeDb(dir);
  const recap::testing::TestPki pki = recap::testing::MakeTestPki(dir.path());
  HttpTestServer server(pki.server);
  server.SetDefault(ScriptedHttpResponse::Json(200, OkReply("Checkpoint: eight questions.")));
  const std::string base = server.BaseUrl() + "/v1";

  // The system's CAs do not know the private one.
  Ran r = Run(dir, Compact(db, 0, base), CaEnv("", ""));
  INFO(r.err);
  CHECK(r.exit == 1);
  CHECK(r.err.find("TLS failed") != std::string::npos);
  CHECK(r.err.find("--ca-path") != std::string::npos);
  CheckCommandWords(r.err);

  r = Run(dir, Compact(db, 0, base, {"--ca-path", pki.other_ca_file}), CaEnv("", ""));
  CHECK(r.exit == 1);
  CHECK(r.err.find("TLS failed") != std::string::npos);
  CHECK(r.err.find("--ca-path") != std::string::npos);
  const std::size_t refused = server.tls_failures();
  CHECK(refused >= 2);
  CHECK(server.request_count() == 0);

  // Each run that gets through compacts a database of its own (a compacted session has
  // nothing more to send).
  int next = 0;
  auto fresh = [&] { return MakeDb(dir, "ok" + std::to_string(++next) + ".db"); };
  r = Run(dir, Compact(fresh(), 0, base, {"--ca-path", pki.ca_file}), CaEnv("", ""));
  INFO(r.err);
  CHECK(r.exit == 0);
  CHECK(server.request_count() >= 1);
  // --ca-path wins over the environment.
  r = Run(dir, Compact(fresh(), 0, base, {"--ca-path", pki.ca_file}),
          CaEnv(pki.other_ca_file, pki.other_ca_file));
  CHECK(r.exit == 0);
  for (const char* variable : {"CURL_CA_BUNDLE", "SSL_CERT_FILE"}) {
    const bool curl = std::string(variable) == "CURL_CA_BUNDLE";
    r = Run(dir, Compact(fresh(), 0, base),
            CaEnv(curl ? pki.ca_file : "", curl ? "" : pki.ca_file));
    INFO(variable << ": " << r.err);
    CHECK(r.exit == 0);
    r = Run(dir, Compact(db, 0, base),
            CaEnv(curl ? pki.other_ca_file : "", curl ? "" : pki.other_ca_file));
    CHECK(r.exit == 1);
    CHECK(r.err.find(std::string("$") + variable) != std::string::npos);
  }
  // CURL_CA_BUNDLE comes first, as in curl's own tool.
  r = Run(dir, Compact(fresh(), 0, base), CaEnv(pki.ca_file, pki.other_ca_file));
  CHECK(r.exit == 0);
}
#endif

TEST_CASE(
    "R13.4 while the command waits on the model a terminal shows what it waits for and the default "
    "time-out, a pipe shows nothing",
    "[cli][http]") {
  TempDir dir("recap-cli-http");
  const std::string db = MakeDb(dir);
  HttpTestServer server;
  ScriptedHttpResponse slow =
      ScriptedHttpResponse::Json(200, OkReply("Checkpoint: the user asked eight questions."));
  slow.delay = std::chrono::milliseconds(1200);
  server.SetDefault(slow);
  Ran r = RunOnTerminal(dir, Compact(db, 0, server.BaseUrl() + "/v1"));
  INFO(r.err);
  CHECK(r.exit == 0);
  CHECK(r.err.find("waiting for openai (up to 120 s a request; --timeout-ms)") !=
        std::string::npos);
  r = RunOnTerminal(
      dir, Compact(MakeDb(dir, "t2.db"), 0, server.BaseUrl() + "/v1", {"--timeout-ms", "30000"}));
  CHECK(r.exit == 0);
  CHECK(r.err.find("waiting for openai (up to 30 s a request") != std::string::npos);
  r = Run(dir, Compact(MakeDb(dir, "t3.db"), 0, server.BaseUrl() + "/v1"));
  CHECK(r.exit == 0);
  CHECK(r.out.find("summarized by the openai summarizer") != std::string::npos);
  CHECK(r.err.find("waiting for") == std::string::npos);
}

TEST_CASE("issue 19 R14.2 recap compact --provider openai-compact and anthropic-compact",
          "[cli][http]") {
  TempDir dir("recap-cli-http");
  for (const std::string provider : {"openai-compact", "anthropic-compact"}) {
    DYNAMIC_SECTION(provider) {
      const std::string db = MakeDb(dir, provider + ".db");
      HttpTestServer server;
      const bool anthropic = provider == "anthropic-compact";
      const std::string base = anthropic ? server.BaseUrl() : server.BaseUrl() + "/v1";
      server.Route("GET", "/v1/models",
                   ScriptedHttpResponse::Json(200, R"({"data":[{"id":"test-model",)"
                                                   R"("context_length":100000}]})"));
      const std::string reply =
          anthropic ? R"({"type":"message","role":"assistant","content":[{"type":"compaction",)"
                      R"("content":"Questions 0 to 8 were answered."}],"stop_reason":"compaction",)"
                      R"("usage":{"input_tokens":700,"output_tokens":60}})"
                    : R"({"object":"response.compaction","output":[{"type":"compaction",)"
                      R"("id":"cmp_cli","encrypted_content":"gAAAAABcli"}],)"
                      R"("usage":{"input_tokens":700,"output_tokens":60}})";
      server.Route("POST", anthropic ? "/v1/messages" : "/v1/responses/compact",
                   ScriptedHttpResponse::Json(200, reply));
      std::vector<std::string> args = {
          "compact",    "--session", "s",          "--db", db,        "--keep-turns", "1",
          "--provider", provider,    "--base-url", base,   "--model", "test-model",   "--json"};
      Ran r = Run(dir, args);
      INFO(r.err);
      REQUIRE(r.exit == 0);
      const Json result = recap::testing::cli::LastJsonLine(r.out);
      CHECK(result.at("compacted") == true);
      CHECK(result.at("writer") == provider);
      CHECK(r.out.find("\"compaction_completed\"") != std::string::npos);
      // The artifact is stored as the checkpoint and exported as it came.
      r = Run(dir, {"export", "--session", "s", "--db", db, "--format",
                    anthropic ? "anthropic" : "openai-responses", "--json"});
      REQUIRE(r.exit == 0);
      CHECK(r.out.find(anthropic ? "Questions 0 to 8 were answered." : "gAAAAABcli") !=
            std::string::npos);
    }
  }
}

TEST_CASE(
    "issue 19 R14.1 a compaction that fails after a provider's checkpoint was adopted says "
    "so",
    "[cli][http]") {
  TempDir dir("recap-cli-http");
  const std::string db = dir.File("p.db");
  Ran r =
      Run(dir, {"import", "--format", "anthropic",
                std::string(RECAP_TEST_DATA_DIR) + "/claude-code-sample.compaction.anthropic.json",
                "--session", "s", "--db", db});
  INFO(r.err);
  REQUIRE(r.exit == 0);
  HttpTestServer server;
  server.Route("GET", "/v1/models",
               ScriptedHttpResponse::Json(
                   200, R"({"data":[{"id":"test-model","max_input_tokens":200000}]})"));
  server.SetDefault(ScriptedHttpResponse::Json(
      400, R"({"type":"error","error":{"type":"invalid_request_error","message":"refused"}})"));
  r = Run(dir, {"compact", "--session", "s", "--db", db, "--keep-turns", "1", "--provider",
                "anthropic-compact", "--base-url", server.BaseUrl(), "--model", "test-model"});
  CHECK(r.exit == 1);
  CHECK(r.err.find("were retired first, and that stays") != std::string::npos);
  CHECK(r.err.find("changed nothing") == std::string::npos);
  // Again: nothing is left to retire, so this time nothing changed.
  r = Run(dir, {"compact", "--session", "s", "--db", db, "--keep-turns", "1", "--provider",
                "anthropic-compact", "--base-url", server.BaseUrl(), "--model", "test-model"});
  CHECK(r.exit == 1);
  CHECK(r.err.find("the compaction failed and changed nothing") != std::string::npos);
}
