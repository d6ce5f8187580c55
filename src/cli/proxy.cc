// recap CLI — `recap proxy`: recap in front of a model API, for agents that cannot link it
// (SPEC R19, docs/proxy.md). The server is proxy_server.{h,cc}; this file is the command: its
// options, the checks on them, and running until SIGINT or SIGTERM.
#include <signal.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "recap/events.h"

#include "cli.h"

#if defined(RECAP_CLI_HAVE_PROXY)
#include "proxy_server.h"
#endif

namespace recap_cli {
namespace proxy_command {

const char* const kHelp =
    "usage: recap proxy --upstream URL [--listen HOST:PORT] [--db PATH] [options]\n"
    "\n"
    "An HTTP server for agents that cannot link recap: point the agent's base URL at it.\n"
    "It accepts the OpenAI chat completions, Anthropic Messages and OpenAI Responses\n"
    "requests on their usual paths (/v1/chat/completions, /v1/messages, /v1/responses),\n"
    "keeps each conversation as a recap session in --db, and sends the upstream what recap\n"
    "prepares instead of the whole history: compacted when it grows too big. Every other\n"
    "path is passed through unchanged. The client's own key goes upstream with each request\n"
    "and is never stored or logged. docs/proxy.md shows the set-up of each agent.\n"
    "\n"
    "  --upstream URL            the model API: https://api.anthropic.com,\n"
    "                            https://api.openai.com, or a server of yours (http:// only\n"
    "                            on this machine: keys never cross a network in cleartext)\n"
    "  --listen HOST:PORT        where to listen (default 127.0.0.1:8787; port 0: any free\n"
    "                            port, printed on start)\n"
    "  --allow-remote            listen on an address other than loopback; needs a token\n"
    "  --token-env NAME          the environment variable holding the proxy's own token\n"
    "                            (default RECAP_PROXY_TOKEN); when set, clients must send it\n"
    "                            as X-Recap-Token or end their base URL with /t/TOKEN\n"
    "  --db PATH                 the sessions: a SQLite file (created when missing; default\n"
    "                            ./recap.db) or a postgresql:// URL\n"
    "  --summarizer-model M      the model that writes checkpoints (default: the model of\n"
    "                            the request that needed one), asked at the upstream with\n"
    "                            the client's key\n"
    "  --ca-path PATH            CA bundle file or folder to verify the upstream's TLS with\n"
    "  --events FILE             append every compaction event (docs/events.md) to FILE,\n"
    "                            one JSON line each\n";

bool Loopback(const std::string& host) {
  return host == "localhost" || host == "::1" || host.rfind("127.", 0) == 0;
}

// "HOST:PORT", "[v6]:PORT", ":PORT" or "PORT".
bool ParseListen(const std::string& text, std::string* host, int* port) {
  std::string h = "127.0.0.1";
  std::string p = text;
  if (!text.empty() && text[0] == '[') {
    const std::size_t close = text.find(']');
    if (close == std::string::npos || close + 1 >= text.size() || text[close + 1] != ':') {
      return false;
    }
    h = text.substr(1, close - 1);
    p = text.substr(close + 2);
  } else if (const std::size_t colon = text.rfind(':'); colon != std::string::npos) {
    if (colon > 0) h = text.substr(0, colon);
    p = text.substr(colon + 1);
  }
  if (p.empty() || p.size() > 5 || p.find_first_not_of("0123456789") != std::string::npos) {
    return false;
  }
  const int n = std::stoi(p);
  if (n > 65535) return false;
  *host = h;
  *port = n;
  return true;
}

// The upstream's scheme and host, checked: http(s), a host, no query.
bool CheckUpstream(const std::string& url, std::string* error) {
  const bool https = url.rfind("https://", 0) == 0;
  const bool plain = url.rfind("http://", 0) == 0;
  if (!https && !plain) {
    *error = "--upstream must be an http:// or https:// URL, e.g. https://api.anthropic.com";
    return false;
  }
  const std::size_t start = https ? 8 : 7;
  std::size_t end = url.find_first_of("/?#", start);
  if (end == std::string::npos) end = url.size();
  std::string authority = url.substr(start, end - start);
  if (const std::size_t at = authority.rfind('@'); at != std::string::npos) {
    *error = "--upstream must not hold a user or password: the client's own key is sent";
    return false;
  }
  if (authority.empty()) {
    *error = "--upstream names no host";
    return false;
  }
  if (url.find_first_of("?#", start) != std::string::npos) {
    *error = "--upstream must not have a query or fragment";
    return false;
  }
  std::string host = authority;
  if (!host.empty() && host[0] == '[') {
    host = host.substr(1, host.find(']') == std::string::npos ? 0 : host.find(']') - 1);
  } else if (const std::size_t colon = host.rfind(':'); colon != std::string::npos) {
    host = host.substr(0, colon);
  }
  if (plain && !Loopback(host)) {
    *error = "--upstream " + url +
             " is plain http:// to another machine: the clients' keys would cross the network "
             "in cleartext. Use https://";
    return false;
  }
  return true;
}

// Whether the configuration's text names compaction.background (the proxy turns it on
// otherwise).
bool NamesBackground(const std::string& source) {
  const nlohmann::json j = nlohmann::json::parse(source, nullptr, false);
  return j.is_object() && j.contains("compaction") && j["compaction"].is_object() &&
         j["compaction"].contains("background");
}

}  // namespace proxy_command

int RunProxy(const std::vector<std::string>& words) {
  namespace pc = proxy_command;
  std::vector<OptionSpec> specs = {
      {"upstream", true}, {"listen", true},           {"allow-remote", false}, {"token-env", true},
      {"db", true},       {"summarizer-model", true}, {"ca-path", true},       {"events", true}};
  for (const OptionSpec& s : ConfigOptions()) specs.push_back(s);
  Args args;
  args.command = "proxy";
  std::string error;
  if (!ParseArgs(words, specs, &args, &error)) return UsageError(args, error);
  if (args.Has("help")) {
    std::cout << pc::kHelp << "\n" << kConfigHelp;
    return kExitOk;
  }
  if (!args.positional.empty()) {
    return UsageError(args, "unexpected argument '" + Shown(args.positional[0]) + "'");
  }
#if !defined(RECAP_CLI_HAVE_PROXY)
  return Failure(args,
                 "this recap was built without the proxy (it needs the http component, built "
                 "static, and Debian's libcpp-httplib-dev); build recap with scripts/test.sh's "
                 "packages and -DRECAP_BUILD_HTTP=ON");
#else
  if (!args.Has("upstream")) {
    return UsageError(args,
                      "name the model API with --upstream URL, e.g. --upstream "
                      "https://api.anthropic.com");
  }
  std::string upstream = args.Get("upstream");
  while (!upstream.empty() && upstream.back() == '/') upstream.pop_back();
  if (!pc::CheckUpstream(upstream, &error)) return UsageError(args, error);

  ProxyOptions options;
  options.upstream = upstream;
  if (args.Has("listen") && !pc::ParseListen(args.Get("listen"), &options.host, &options.port)) {
    return UsageError(args, "--listen takes HOST:PORT, e.g. --listen 127.0.0.1:8787");
  }
  const std::string token_env = args.Get("token-env", "RECAP_PROXY_TOKEN");
  if (const char* t = std::getenv(token_env.c_str()); t != nullptr) options.token = t;
  if (args.Has("token-env") && options.token.empty()) {
    return UsageError(args, "--token-env " + token_env + ": that variable is not set or empty");
  }
  if (!pc::Loopback(options.host)) {
    if (!args.Has("allow-remote")) {
      return UsageError(args, "--listen " + options.host +
                                  " is not this machine's loopback: add --allow-remote to serve "
                                  "other machines, with a token in $" +
                                  token_env);
    }
    if (options.token.size() < 16) {
      return UsageError(args,
                        "--allow-remote needs the proxy's own token, at least 16 "
                        "characters, in $" +
                            token_env +
                            " (or the variable --token-env "
                            "names)");
    }
  }
  options.ca_path = args.Get("ca-path");
  if (!options.ca_path.empty() && ::access(options.ca_path.c_str(), R_OK) != 0) {
    return UsageError(args, "--ca-path " + Shown(options.ca_path) +
                                ": no such file or folder can be read; give the PEM bundle (or "
                                "the folder of hashed certificates) of the upstream's CA");
  }
  options.summarizer_model = args.Get("summarizer-model");

  bool usage = false;
  std::string source;
  recap::Result<recap::Config> config = BuildConfig(args, &usage, &source);
  if (!config.ok())
    return usage ? UsageError(args, config.status().message()) : Failure(args, config.status());
  options.config = *config;
  if (!pc::NamesBackground(source)) options.config.compaction.background.enabled = true;

  if (args.Has("events")) {
    recap::Result<std::shared_ptr<recap::EventSink>> sink =
        recap::NewJsonlFileSink(args.Get("events"));
    if (!sink.ok()) {
      return UsageError(args,
                        "--events " + Shown(args.Get("events")) + ": " + sink.status().message());
    }
    options.sinks.push_back(*sink);
  }
  const std::string db = args.Get("db", kDefaultDb);
  if (!CheckDb(db, &error)) return UsageError(args, error);
  recap::Result<std::shared_ptr<recap::SessionStore>> store = OpenStore(db, Access::kCreate);
  if (!store.ok()) return Failure(args, store.status());
  options.store = *store;

  std::mutex log_mu;
  options.log = [&log_mu](const std::string& line) {
    std::lock_guard<std::mutex> lock(log_mu);
    std::cerr << "recap proxy: " << Shown(line) << std::endl;
  };

  // SIGINT and SIGTERM stop the server from a thread of its own.
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGINT);
  sigaddset(&stop_signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);
  signal(SIGPIPE, SIG_IGN);

  const std::string options_host = options.host;
  recap::Result<std::unique_ptr<ProxyServer>> server = ProxyServer::Start(std::move(options));
  if (!server.ok()) return Failure(args, server.status());
  ProxyServer& s = **server;
  const std::string shown_host =
      options_host.find(':') != std::string::npos ? "[" + options_host + "]" : options_host;
  std::cerr << "recap proxy: listening on http://" << shown_host << ":" << s.port() << " (upstream "
            << upstream << ", sessions in " << ShownDb(db) << ")" << std::endl;
  std::thread stopper([&s, &stop_signals] {
    int received = 0;
    sigwait(&stop_signals, &received);
    s.Stop();
  });
  s.Run();
  // Run() returned: a signal stopped it, or the server failed. Wake the waiting thread.
  pthread_kill(stopper.native_handle(), SIGTERM);
  stopper.join();
  std::cerr << "recap proxy: stopped" << std::endl;
  return kExitOk;
#endif
}

}  // namespace recap_cli
