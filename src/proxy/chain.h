// recap proxy — which session a request belongs to (SPEC R19.2, R19.3), from the messages as
// the client sent them.
//
// A client of a model API sends its whole conversation with every request. The proxy keeps
// each conversation as a recap session and must find it again in the next request, which it
// can do only from what the client sends: the messages. ChainIndex keeps, for each session, a
// hash chain over the client's messages as they came in its latest request,
//
//   start   = H(salt, client, format)
//   link[i] = H(link[i - 1], D(Canonical(message i)))     (link[-1] = start)
//
// where D is the message's 128-bit digest (so that a message seen before costs a lookup by its
// bytes, DigestCache, not a parse)
//
// and a request extends a session when its own chain passes through that session's latest
// link: the client sent everything it sent last time, in the same order, and more after it (the
// model's reply, the next user message). The chain is over what the client sent, never over
// what recap sent upstream, so that recap's own compactions do not break the match.
//
// What a request that extends nothing starts is a new session (R19.3): an edited or removed
// message (the chain leaves every stored one), a regenerated reply (the chain passes through a
// session's link, but not its latest), a client that compacted its own history, a new
// conversation with the same opening as another (the same first links, not a latest one).
// Nothing is mixed across sessions: a request never lands in a session whose latest request
// it does not contain whole.
//
// `client` is what tells clients apart: a credential (an API key, a bearer token). It enters
// the chain only through H(salt, client): the index stores no credential, and two clients
// with different credentials never share a session even when they send the same messages.
// The salt is the proxy's own secret (kept with its sessions), so that a stored link reveals
// nothing about a credential or a message by a dictionary of guesses.
//
// Canonical(message) is the message's JSON with object keys sorted and no whitespace, without
// the members a client moves or adds between requests without changing the conversation:
// `cache_control` (Anthropic prompt-caching breakpoints, which clients move to the newest
// messages every turn). Strings are kept as written, numbers by their value.
//
// H is two independent 64-bit hashes (128 bits): a collision between two conversations is not a
// practical concern, and the links are not secret beyond the salt's protection.
#ifndef RECAP_PROXY_CHAIN_H_
#define RECAP_PROXY_CHAIN_H_

#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "recap/status.h"

namespace recap_proxy {

// A link of a chain: 128 bits.
struct Link {
  std::uint64_t a = 0, b = 0;
  bool operator==(const Link& o) const { return a == o.a && b == o.b; }
  bool operator!=(const Link& o) const { return !(*this == o); }
  bool operator<(const Link& o) const { return a != o.a ? a < o.a : b < o.b; }
};

// The first link of a client's chains in a format.
Link ChainStart(std::string_view salt, std::string_view client, std::string_view format);
// The next link: `previous` followed by one message, given as its JSON text (any whitespace,
// any key order). A text that is not a JSON value is refused (kInvalidArgument, naming
// `where`).
recap::Result<Link> ChainNext(const Link& previous, std::string_view message_json,
                              const std::string& where);
// The message's canonical text (see above), or kInvalidArgument.
recap::Result<std::string> Canonical(std::string_view message_json, const std::string& where);

struct LinkHash {
  std::size_t operator()(const Link& l) const noexcept {
    return static_cast<std::size_t>(l.a ^ (l.b * 0x9e3779b97f4a7c15ULL));
  }
};

// The digests of messages seen before, by a 128-bit hash of their exact bytes: a client resends
// its whole history with every request, so each message is parsed and made canonical once, and
// a turn costs one hash over the request's bytes. Bounded: past `max_entries` it starts empty
// again. Safe to share between threads.
class DigestCache {
 public:
  explicit DigestCache(std::size_t max_entries = std::size_t{1} << 20);
  std::size_t size() const;

 private:
  friend recap::Result<std::vector<Link>> ChainOf(std::string_view, std::string_view,
                                                  std::string_view,
                                                  const std::vector<std::string_view>&,
                                                  DigestCache*);
  mutable std::mutex mu_;
  std::unordered_map<Link, Link, LinkHash> map_;
  std::size_t max_;
};

// The links of a request's messages: links[i] follows messages [0, i] (links.size() ==
// messages.size()). With a cache, a message whose exact bytes were seen before is not parsed
// again (a message is then not checked again either: it was valid when first seen).
recap::Result<std::vector<Link>> ChainOf(std::string_view salt, std::string_view client,
                                         std::string_view format,
                                         const std::vector<std::string_view>& messages,
                                         DigestCache* cache = nullptr);

// Where a request goes.
struct Match {
  // The session the request extends, or empty when it starts a new one.
  std::string session;
  // How many of the request's messages were the session's latest request (0 for a new
  // session). What follows them is new to the chain; when the reply to that request was
  // appended (`answered`), it begins with the client's copy of that reply (the assistant's
  // message or items), which the session already holds.
  std::size_t known = 0;
  bool answered = false;
  // Why a new session (for logs and tests): "new" (no message of it in any session), "fork"
  // (it shares an opening with a session's requests but leaves them: an edit, a client that
  // compacted by itself, a new conversation with the same first messages, or a regenerated
  // reply: the same request as a session's latest again after its reply was kept). Empty when
  // it goes to `session`.
  std::string why;
};

// The fingerprint of a reply: what the proxy appended from the upstream's answer, and what the
// client sends back as that answer in its next request, reduced to what both must agree on
// (the caller's choice, e.g. the reply's text and its calls' ids). It tells apart two sessions
// whose requests were the same but whose replies were not.
using Fingerprint = std::string;

// The sessions' chains, in memory. (The proxy persists them with its sessions; this is the
// rule, and its state.) The proxy records a request when it has appended its messages, and
// says when the reply to it was appended: the same request again before that is a retry and
// goes to the same session with nothing new; after it, a regeneration, which starts a new one.
class ChainIndex {
 public:
  // Where a request whose chain is `links` goes. `reply_at(i)` is the fingerprint of the
  // request's message i as a reply (none when it is not one, e.g. a user message): a request
  // extends an answered session only when the message after that session's latest request is
  // the reply the session holds. (A client that sends a reply other than the one it was given
  // forks.)
  Match Find(const std::vector<Link>& links,
             const std::function<std::optional<Fingerprint>(std::size_t)>& reply_at) const;
  // Records that `session`'s latest request is the one of `links` (not yet answered). Its
  // earlier links are kept as passed through, to tell a fork from a new conversation.
  void Record(const std::string& session, const std::vector<Link>& links);
  // The reply to `session`'s latest request was appended to it.
  void Answered(const std::string& session, Fingerprint reply);
  // Sets `session`'s latest request as read back from the store (a restarted proxy, or another
  // proxy's write): its last link, its message count and its reply's fingerprint if answered.
  void Restore(const std::string& session, const Link& latest, std::size_t count,
               std::optional<Fingerprint> reply);
  // What the index holds as `session`'s latest request, if anything.
  struct Latest {
    Link link;
    std::size_t count = 0;
    std::optional<Fingerprint> reply;
  };
  std::optional<Latest> LatestOf(const std::string& session) const;
  bool Knows(const std::string& session) const { return latest_.count(session) != 0; }
  std::size_t size() const { return latest_.size(); }

 private:
  using Latest_ = Latest;  // `reply` is set once answered
  // Removes `session` from by_latest_ (its latest request is about to change).
  void Unlatest(const std::string& session);
  std::multimap<Link, std::string> by_latest_;  // latest link -> the sessions at it
  std::map<std::string, Latest_> latest_;       // session -> its latest request
  std::map<Link, std::string> passed_;          // every recorded link -> a session
};

}  // namespace recap_proxy

#endif  // RECAP_PROXY_CHAIN_H_
