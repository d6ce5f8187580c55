// R19.2 and R19.3: which session a proxied request belongs to (src/proxy/chain.h). A request
// extends the session whose latest request it holds whole; anything else — an edit, a
// regeneration, a client that compacted by itself, another conversation with the same opening,
// another client — starts a new session, and nothing is mixed. Also over generated
// conversations that share clients, openings and replies (seed printed on failure): a session
// only ever holds one client's conversation, message for message.
#include <algorithm>
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include "chain.h"

namespace {

using recap_proxy::ChainIndex;
using recap_proxy::Link;
using recap_proxy::Match;
using Json = nlohmann::json;

const std::string kSalt = "salt-of-this-proxy";

std::vector<Link> Chain(const std::vector<std::string>& messages,
                        const std::string& client = "sk-client-a",
                        const std::string& format = "anthropic") {
  std::vector<std::string_view> views(messages.begin(), messages.end());
  recap::Result<std::vector<Link>> links = recap_proxy::ChainOf(kSalt, client, format, views);
  REQUIRE(links.ok());
  return *links;
}

// The test's fingerprint of a reply: an assistant message's text as the client sent it.
std::function<std::optional<std::string>(std::size_t)> Replies(
    const std::vector<std::string>& messages) {
  return [&messages](std::size_t i) -> std::optional<std::string> {
    if (i >= messages.size()) return std::nullopt;
    const Json m = Json::parse(messages[i]);
    if (m.at("role") != "assistant") return std::nullopt;
    return m.at("content").get<std::string>();
  };
}

std::string User(const std::string& text) {
  return Json{{"role", "user"}, {"content", text}}.dump();
}
std::string Assistant(const std::string& text) {
  return Json{{"role", "assistant"}, {"content", text}}.dump();
}

// A conversation served turn by turn: each request is the one before, the reply, and a new
// user message; each request is recorded, then answered.
struct Served {
  ChainIndex index;
  std::vector<std::string> sent;  // the client's messages so far
  std::string session;

  Match Turn(const std::string& user, const std::string& reply) {
    sent.push_back(User(user));
    const std::vector<Link> links = Chain(sent);
    Match m = index.Find(links, Replies(sent));
    if (m.session.empty()) m.session = "s" + std::to_string(index.size() + 1);
    index.Record(m.session, links);
    index.Answered(m.session, reply);
    sent.push_back(Assistant(reply));
    return m;
  }
};

}  // namespace

TEST_CASE("R19.2 a request that holds a session's latest request whole extends it", "[proxy]") {
  Served s;
  const Match first = s.Turn("hello", "hi");
  CHECK(first.why == "new");
  const Match second = s.Turn("read a.txt", "it says 1");
  CHECK(second.session == first.session);
  CHECK(second.known == 1);  // the first request's one message; then the reply and the user
  CHECK(second.answered);
  const Match third = s.Turn("thanks", "welcome");
  CHECK(third.session == first.session);
  CHECK(third.known == 3);
  CHECK(s.index.size() == 1);
}

TEST_CASE("R19.2 whitespace, key order and moved cache_control breakpoints are the same message",
          "[proxy]") {
  const std::string a =
      R"({"role":"user","content":[{"type":"text","text":"hi","cache_control":{"type":"ephemeral"}}]})";
  const std::string b = R"({ "content": [ { "text": "hi", "type": "text" } ], "role": "user" })";
  CHECK(Chain({a}) == Chain({b}));
  // A changed text is another message.
  const std::string c = R"({"role":"user","content":[{"type":"text","text":"hi!"}]})";
  CHECK(Chain({a}) != Chain({c}));
  // A message that is not JSON is refused, named by its place.
  recap::Result<std::vector<Link>> bad =
      recap_proxy::ChainOf(kSalt, "k", "anthropic", {User("x"), "{\"role\":"});
  REQUIRE(!bad.ok());
  CHECK(bad.status().message().find("messages[1]") != std::string::npos);
}

TEST_CASE("R19.3 an edited message, a regeneration or a self-compacted history starts a session",
          "[proxy]") {
  Served s;
  const std::string first = s.Turn("hello", "hi").session;
  s.Turn("read a.txt", "it says 1");
  const std::vector<std::string> history = s.sent;  // u, a, u, a

  SECTION("an edit of an earlier message: a fork") {
    std::vector<std::string> edited = history;
    edited[2] = User("read b.txt");
    edited.push_back(User("and?"));
    const Match m = s.index.Find(Chain(edited), Replies(edited));
    CHECK(m.session.empty());
    CHECK(m.why == "fork");
  }
  SECTION("a regeneration: the same request again after its reply was kept") {
    const std::vector<std::string> again(history.begin(), history.end() - 1);  // without reply
    const Match m = s.index.Find(Chain(again), Replies(again));
    CHECK(m.session.empty());
    CHECK(m.why == "fork");
  }
  SECTION("a retry before the reply was kept: the same session, nothing new") {
    std::vector<std::string> next = history;
    next.push_back(User("one more"));
    const std::vector<Link> links = Chain(next);
    const Match m = s.index.Find(links, Replies(next));
    REQUIRE(m.session == first);
    s.index.Record(m.session, links);  // the upstream then failed: no Answered
    const Match retry = s.index.Find(links, Replies(next));
    CHECK(retry.session == first);
    CHECK(retry.known == next.size());
    CHECK(!retry.answered);
  }
  SECTION("a client that compacted its own history: a new session") {
    std::vector<std::string> compacted = {User("Summary: we read a.txt, it says 1"),
                                          User("and now?")};
    const Match m = s.index.Find(Chain(compacted), Replies(compacted));
    CHECK(m.session.empty());
    CHECK(m.why == "new");
  }
  SECTION("another conversation with the same opening: a new session") {
    const std::vector<std::string> opening = {User("hello")};
    const Match m = s.index.Find(Chain(opening), Replies(opening));
    CHECK(m.session.empty());
    CHECK(m.why == "fork");
  }
  SECTION("the same conversation from another client, or in another format: a new session") {
    std::vector<std::string> next = history;
    next.push_back(User("one more"));
    CHECK(s.index.Find(Chain(next, "sk-client-b"), Replies(next)).why == "new");
    CHECK(s.index.Find(Chain(next, "sk-client-a", "openai-chat"), Replies(next)).why == "new");
    CHECK(s.index.Find(Chain(next), Replies(next)).session == first);
  }
}

TEST_CASE("R19.3 two conversations alike to the letter but given other replies stay apart",
          "[proxy]") {
  ChainIndex index;
  const std::vector<std::string> request = {User("hello")};
  const std::vector<Link> links = Chain(request);
  index.Record("s1", links);
  index.Answered("s1", "hi from one");
  REQUIRE(index.Find(links, Replies(request)).why == "fork");  // the same request again
  index.Record("s2", links);
  index.Answered("s2", "hi from two");
  const std::vector<std::string> next_one = {User("hello"), Assistant("hi from one"), User("a")};
  const std::vector<std::string> next_two = {User("hello"), Assistant("hi from two"), User("a")};
  CHECK(index.Find(Chain(next_one), Replies(next_one)).session == "s1");
  CHECK(index.Find(Chain(next_two), Replies(next_two)).session == "s2");
  // A reply neither was given (the client edited it): a fork.
  const std::vector<std::string> edited = {User("hello"), Assistant("hi, edited"), User("a")};
  CHECK(index.Find(Chain(edited), Replies(edited)).why == "fork");
}

TEST_CASE("R19.3 a fork is a session of its own, and both go on", "[proxy]") {
  Served a;
  a.Turn("hello", "hi");
  a.Turn("plan a trip", "where to?");
  // The client edits its second message: a new session, which then goes on by itself.
  std::vector<std::string> b_sent = {a.sent[0], a.sent[1], User("plan a dinner")};
  const Match fork = a.index.Find(Chain(b_sent), Replies(b_sent));
  REQUIRE(fork.session.empty());
  a.index.Record("s2", Chain(b_sent));
  a.index.Answered("s2", "for how many?");
  b_sent.push_back(Assistant("for how many?"));
  b_sent.push_back(User("four"));
  CHECK(a.index.Find(Chain(b_sent), Replies(b_sent)).session == "s2");
  // The first conversation still goes to its own session.
  std::vector<std::string> a_next = a.sent;
  a_next.push_back(User("Lisbon"));
  CHECK(a.index.Find(Chain(a_next), Replies(a_next)).session == "s1");
}

TEST_CASE("R19.3 property: generated conversations, interleaved, never mix in a session",
          "[proxy]") {
  const std::uint64_t seed = std::random_device{}();
  INFO("seed " << seed << " (the conversations, their clients and replies follow from it)");
  std::mt19937_64 rng(seed);
  // The proxy's rule, simulated: a request goes where Find says; a new session gets all of its
  // messages, an extended one what follows its latest request (after the reply it holds); the
  // upstream's reply is appended. Then each session's messages are exactly the conversation of
  // the client whose request it served last, message for message: nothing of another.
  ChainIndex index;
  std::map<std::string, std::vector<std::string>> sessions;
  struct Conversation {
    std::string client;
    std::vector<std::string> sent;
  };
  // Few clients, openings and replies: conversations share clients, first messages, and at
  // times whole histories.
  std::vector<Conversation> conversations(40);
  for (Conversation& c : conversations) c.client = "key-" + std::to_string(rng() % 3);
  int extended = 0;
  for (int step = 0; step < 3000; ++step) {
    Conversation& c = conversations[rng() % conversations.size()];
    c.sent.push_back(User(c.sent.empty() ? "opening " + std::to_string(rng() % 3)
                                         : "turn " + std::to_string(rng() % 4)));
    const std::vector<Link> links = Chain(c.sent, c.client);
    const Match m = index.Find(links, Replies(c.sent));
    std::string session = m.session;
    if (session.empty()) {
      session = "s" + std::to_string(sessions.size());
      sessions[session] = c.sent;
    } else {
      std::vector<std::string>& held = sessions[session];
      // What it holds is the request up to its latest one, and the reply the client re-sent.
      const std::size_t holds = m.known + (m.answered ? 1 : 0);
      REQUIRE(held.size() == holds);
      REQUIRE(std::equal(held.begin(), held.end(), c.sent.begin()));
      held.insert(held.end(), c.sent.begin() + static_cast<std::ptrdiff_t>(holds), c.sent.end());
      ++extended;
    }
    REQUIRE(sessions[session] == c.sent);
    index.Record(session, links);
    const std::string reply = "reply " + std::to_string(rng() % 3);
    index.Answered(session, reply);
    sessions[session].push_back(Assistant(reply));
    c.sent.push_back(Assistant(reply));
  }
  // Most turns went on in a session (the others started one, or forked from a twin).
  CHECK(extended > 2000);
}
