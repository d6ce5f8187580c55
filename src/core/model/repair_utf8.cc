#include <string>

#include "recap/measure.h"

#include "model/transcript_access.h"

namespace recap {
inline namespace v0 {

namespace {

void Repair(std::string& s) {
  if (!IsValidUtf8(s)) s = ToValidUtf8(s);
}

}  // namespace

namespace internal {

// Makes every string of the message valid UTF-8 in place (SPEC: never crash on bad bytes;
// a session must stay usable after one binary tool output).
void RepairUtf8(Message& m) {
  Repair(m.id);
  Repair(m.extra);
  for (auto& part : m.parts) {
    if (auto* t = std::get_if<Text>(&part)) {
      Repair(t->text);
      Repair(t->extra);
    } else if (auto* c = std::get_if<ToolCall>(&part)) {
      Repair(c->id);
      Repair(c->name);
      Repair(c->arguments);
      Repair(c->extra);
    } else if (auto* r = std::get_if<ToolResult>(&part)) {
      Repair(r->call_id);
      Repair(r->extra);
      for (auto& item : r->content) {
        if (auto* it = std::get_if<Text>(&item)) {
          Repair(it->text);
          Repair(it->extra);
        } else {
          auto& o = std::get<Opaque>(item);
          Repair(o.kind);
          Repair(o.payload);
          Repair(o.link_id);
        }
      }
    } else {
      auto& o = std::get<Opaque>(part);
      Repair(o.kind);
      Repair(o.payload);
      Repair(o.link_id);
    }
  }
}

}  // namespace internal

}  // namespace v0
}  // namespace recap
