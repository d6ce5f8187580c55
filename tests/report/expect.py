#!/usr/bin/env python3
"""expect.py HISTORY.json [EVENTS.jsonl] [--hostile JSON]: what `recap report` must show for a
session, from `recap export --session ID --format recap --history --json` (HISTORY.json),
independently of the page's own code. Prints one JSON object for browser_test.mjs:
  turns        the distinct turns, in store order: one circle.point each
  compactions  checkpoints stored and not undone: one g.mark[data-kind=compaction] each
  undone       checkpoints an undo took back: g.mark[data-kind=undo]
  active       messages sent now: one `ol#conversation > li.msg` each
  nested       a checkpoint sent now folds an earlier checkpoint
  events       this session's lines in EVENTS.jsonl (li.event), by kind
  hostile      texts the page must show as text (from --hostile, a JSON array)
A turn is counted as the store counts it (SessionStore's HistoryEntry::turn): a user message
that is not a checkpoint and holds text (or an opaque part not linked to a call) starts one; a
reduced copy keeps its original's turn."""
import json
import sys


def turn_start(m):
    if m.get("role") != "user" or m.get("summary"):
        return False
    return any(p.get("type") == "text" or (p.get("type") == "opaque" and not p.get("link"))
               for p in m.get("parts", []))


def main():
    args = sys.argv[1:]
    hostile = []
    if "--hostile" in args:
        i = args.index("--hostile")
        hostile = json.loads(args[i + 1])
        del args[i:i + 2]
    doc = json.load(open(args[0]))
    history = doc["history"]
    turns, count, reduced = [], 0, {}
    compactions = undone = active = 0
    for e in history:
        msgs = e["messages"]["messages"]
        m = msgs[0] if msgs else {}
        if e["id"] in reduced:  # a reduced copy: its original's turn
            t = reduced.pop(e["id"])
        else:
            count = count + 1 if turn_start(m) else count
            t = count
        if (e.get("replaced_by") or "").startswith("reduction:"):
            reduced[e["id"]] = t
        if not turns or turns[-1] != t:
            turns.append(t)
        if e.get("summary"):
            if (e.get("replaced_by") or "").startswith("undo:"):
                undone += 1
            else:
                compactions += 1
        if e["state"] == "active":
            active += 1
    # Nested: an active checkpoint replaced messages among which is an earlier checkpoint.
    retired_checkpoints = sum(1 for e in history
                              if e.get("summary") and e.get("replaced_by", "").startswith("compaction:"))
    events = {}
    if len(args) > 1:
        for line in open(args[1]):
            line = line.strip()
            if not line:
                continue
            ev = json.loads(line)
            if isinstance(ev, dict) and ev.get("session") == doc["session"]:
                events[ev.get("type", "?")] = events.get(ev.get("type", "?"), 0) + 1
    print(json.dumps({"session": doc["session"], "turns": turns, "compactions": compactions,
                      "undone": undone, "active": active, "nested": retired_checkpoints > 0,
                      "events": events, "hostile": hostile}))


if __name__ == "__main__":
    main()
