// The conformance checks' shared helpers (conformance_helpers.h).
#include "conformance_helpers.h"

#include <string>
#include <vector>

#include "recap/codec.h"

namespace recap {
namespace testing {
namespace conformance {

namespace {

const char* StateName(HistoryState s) {
  return s == HistoryState::kActive ? "active" : "compacted";
}

}  // namespace

std::string Print(const Message& m) {
  Result<std::string> s = native::EncodeMessage(m);
  INFO("status: " << s.status().ToString());
  REQUIRE(s.ok());
  return *s;
}

Message User(const std::string& text, const std::string& id) {
  Message m = Message::UserText(text);
  m.id = id;
  return m;
}

Message Assistant(const std::string& text, const std::string& id) {
  Message m = Message::AssistantText(text);
  m.id = id;
  return m;
}

Message Summary(const std::string& text, const std::string& id) {
  Message m = Message::UserText(text);
  m.summary = true;
  m.id = id;
  return m;
}

std::vector<std::string> Ids(const Transcript& t) {
  std::vector<std::string> out;
  for (const Message& m : t) out.push_back(m.id);
  return out;
}

std::vector<std::string> Ids(const std::vector<Message>& v) {
  std::vector<std::string> out;
  out.reserve(v.size());
  for (const Message& m : v) out.push_back(m.id);
  return out;
}

std::vector<std::string> Printed(const Transcript& t) {
  std::vector<std::string> out;
  for (const Message& m : t) out.push_back(Print(m));
  return out;
}

Snapshot Take(SessionStore& store, const std::string& session) {
  Snapshot s;
  SessionState state = Ok(store.Load(session));
  s.version = state.version;
  s.active = Printed(state.transcript);
  for (const HistoryEntry& e : Ok(store.History(session))) {
    s.history.push_back(std::to_string(e.seq) + " " + StateName(e.state) + " " + e.replaced_by +
                        " " + Print(e.message));
  }
  return s;
}

void RequireSame(const Snapshot& before, const Snapshot& after) {
  CHECK(after.version == before.version);
  CHECK(after.active == before.active);
  CHECK(after.history == before.history);
}

std::uint64_t Fill(SessionStore& store, const std::string& session, int count,
                   const std::string& prefix) {
  std::uint64_t v = 0;
  for (int i = 0; i < count; ++i) {
    const std::string id = prefix + std::to_string(i);
    v = Ok(store.Append(session,
                        i % 2 == 0 ? User("text of " + id, id) : Assistant("text of " + id, id)));
  }
  return v;
}

const HistoryEntry* FindEntry(const std::vector<HistoryEntry>& h, const std::string& id,
                              HistoryState state) {
  for (const HistoryEntry& e : h) {
    if (e.message.id == id && e.state == state) return &e;
  }
  return nullptr;
}

void RequireIncreasingSeq(const std::vector<HistoryEntry>& h) {
  for (std::size_t i = 1; i < h.size(); ++i) {
    INFO("history entry " << i);
    REQUIRE(h[i].seq > h[i - 1].seq);
  }
}

Message TwoCallsOneId() {
  return Message::AssistantCalls(
      {ToolCall{"call_x", "read", "{}", {}}, ToolCall{"call_x", "read", "{\"path\":\"b\"}", {}}});
}

}  // namespace conformance
}  // namespace testing
}  // namespace recap
