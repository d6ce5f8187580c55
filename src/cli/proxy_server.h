// recap CLI — the server of `recap proxy` (SPEC R19, docs/proxy.md).
//
// An HTTP server (cpp-httplib, Debian's libcpp-httplib-dev; docs/proxy.md says why) that
// accepts the three wire formats on their usual paths, keeps each conversation as a recap
// session, and sends upstream what Prepare returns instead of the client's whole history.
// Every other path passes through to the upstream unchanged. The upstream side is recap's own
// curl transport and SSE parser (src/http).
//
// Per request (proxy_server.cc): parse (proxy_request.h); find the session — X-Recap-Session,
// a Responses previous_response_id, or the session whose chain the request extends
// (src/proxy/chain.h); append what is new; Prepare; send upstream with the client's headers;
// pass the answer back as it arrives, event by event; append the reply (src/proxy/reply.h).
//
// What the proxy needs to find a conversation again is kept in the messages it appends, as
// their ids, so it is written in the same transaction as the messages and is read back from any
// store (SQLite or PostgreSQL) by a restarted proxy or by a second proxy on the same database:
//
//   pc-<count>-<link>          the last message appended from a request whose first <count>
//                              messages end at chain link <link> (32 hex digits)
//   pc-<count>-<link>-<k>      the other messages of that append
//   pr-<count>-<link>-<fp>[-<response id>]
//                              the last message of the reply to that request: <fp> the reply's
//                              fingerprint (32 hex digits), then the Responses id it came with
//   pr-<count>-<link>-r<k>     the reply's other messages
//
// The chain's salt is the proxy's own secret, kept in the reserved session
// `recap-cli.proxy-salt` of the same database (created by the first proxy that opens it).
#ifndef RECAP_CLI_PROXY_SERVER_H_
#define RECAP_CLI_PROXY_SERVER_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "recap/config.h"
#include "recap/events.h"
#include "recap/session_store.h"
#include "recap/status.h"

namespace recap_cli {

struct ProxyOptions {
  // Where the model API lives: scheme://host[:port], optionally with a path prefix, without a
  // trailing slash. A request's path and query are appended to it as the client sent them.
  std::string upstream;
  std::string host = "127.0.0.1";
  int port = 8787;  // 0: any free port (ProxyServer::port() says which)
  // The proxy's own token. When set, every request must carry it, as `X-Recap-Token: TOKEN`
  // or as the path prefix `/t/TOKEN` of the client's base URL.
  std::string token;
  std::string ca_path;     // upstream TLS: a CA bundle file or folder instead of the system's
  bool verify_tls = true;  // upstream TLS verification
  recap::Config config;    // the Compactor's configuration
  std::shared_ptr<recap::SessionStore> store;
  // The summarizer's model when set; else the client's own model of that request.
  std::string summarizer_model;
  // One line per request and per event worth a person's attention; never a credential.
  std::function<void(const std::string&)> log;
  // Where every Compactor's events go besides the log (e.g. --events FILE).
  std::vector<std::shared_ptr<recap::EventSink>> sinks;
  int threads = 128;  // connections served at once
};

class ProxyServer {
 public:
  // Opens the store's proxy state (the salt, the sessions' chains) and binds the address.
  static recap::Result<std::unique_ptr<ProxyServer>> Start(ProxyOptions options);
  ~ProxyServer();
  ProxyServer(const ProxyServer&) = delete;
  ProxyServer& operator=(const ProxyServer&) = delete;

  int port() const;
  // Serves until Stop() (from another thread or a signal handler's thread).
  void Run();
  void Stop();

  struct Impl;

 private:
  explicit ProxyServer(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace recap_cli

#endif  // RECAP_CLI_PROXY_SERVER_H_
