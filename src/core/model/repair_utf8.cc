#include <string>

#include "recap/measure.h"

#include "model/transcript_access.h"

namespace recap {
inline namespace v0 {

namespace {

// Calls f on every string of the message (a Message or a const Message).
template <typename M, typename F>
void ForEachString(M& m, F&& f) {
  f(m.id);
  f(m.extra);
  for (auto& part : m.parts) {
    if (auto* t = std::get_if<Text>(&part)) {
      f(t->text);
      f(t->extra);
    } else if (auto* c = std::get_if<ToolCall>(&part)) {
      f(c->id);
      f(c->name);
      f(c->arguments);
      f(c->extra);
    } else if (auto* r = std::get_if<ToolResult>(&part)) {
      f(r->call_id);
      f(r->extra);
      for (auto& item : r->content) {
        if (auto* it = std::get_if<Text>(&item)) {
          f(it->text);
          f(it->extra);
        } else {
          auto& o = std::get<Opaque>(item);
          f(o.kind);
          f(o.payload);
          f(o.link_id);
        }
      }
    } else {
      auto& o = std::get<Opaque>(part);
      f(o.kind);
      f(o.payload);
      f(o.link_id);
    }
  }
}

}  // namespace

namespace internal {

// Makes every string of the message valid UTF-8 in place (SPEC: never crash on bad bytes;
// a session must stay usable after one binary tool output).
void RepairUtf8(Message& m) {
  ForEachString(m, [](std::string& s) {
    if (!IsValidUtf8(s)) s = ToValidUtf8(s);
  });
}

bool AllValidUtf8(const Message& m) {
  bool valid = true;
  ForEachString(m, [&valid](const std::string& s) { valid = valid && IsValidUtf8(s); });
  return valid;
}

}  // namespace internal

}  // namespace v0
}  // namespace recap
