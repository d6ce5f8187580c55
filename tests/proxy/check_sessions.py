#!/usr/bin/env python3
"""Checks that recap proxy stored the conversations clients.mjs had through it.

Usage: check_sessions.py RECAP DB MANIFEST [--allow-split]

Reads every session of DB (`recap sessions list --json`, then `recap export --session ID
--format recap --history --json`: the full history, compacted messages included) and the
manifest clients.mjs wrote (--manifest). Fails (exit 1) when
  - a user message a client sent is in no session;
  - a reply a client received (a tool call id, "answer N") is in no session: the proxy must
    append the upstream's reply to the session;
  - one session holds messages of two conversations (user texts or replies that only one
    conversation has): sessions of different conversations or clients were mixed;
  - a conversation's user texts are not all in one session, in order (a request that did not
    find its session) — only reported for previous_response_id conversations, and for all
    with --allow-split.
"""
import json
import re
import subprocess
import sys


def recap_json(recap, *args):
    p = subprocess.run([recap, *args, "--json"], capture_output=True, text=True, timeout=60)
    if p.returncode != 0:
        sys.exit(f"check_sessions: `recap {' '.join(args)}` failed ({p.returncode}): {p.stderr.strip()[:400]}")
    return json.loads(p.stdout)


def session_contents(recap, db, sid):
    """(user texts in order, reply markers) of a session's full history; checkpoints left out."""
    doc = recap_json(recap, "export", "--session", sid, "--format", "recap", "--history", "--db", db)
    texts, replies = [], set()
    for entry in doc.get("history") or []:
        if entry.get("summary"):
            continue
        for m in (entry.get("messages") or {}).get("messages") or []:
            for part in m.get("parts") or []:
                if m.get("role") == "user" and part.get("type") == "text":
                    texts.append(part.get("text", ""))
                elif m.get("role") == "assistant" and part.get("type") == "tool_call":
                    replies.add(part.get("id"))
                elif m.get("role") == "assistant" and part.get("type") == "text":
                    hit = re.match(r"answer (\d+) \(", part.get("text", ""))
                    if hit:
                        replies.add(f"answer {hit[1]}")
    return texts, replies


def in_order(needles, hay):
    it = iter(hay)
    return all(any(n == h for h in it) for n in needles)


def main():
    args = [a for a in sys.argv[1:] if not a.startswith("--")]
    allow_split = "--allow-split" in sys.argv
    if len(args) != 3:
        sys.exit(__doc__)
    recap, db, manifest = args
    convs = json.load(open(manifest))["conversations"]
    ids = [s["session"] for s in recap_json(recap, "sessions", "list", "--db", db).get("sessions") or []]
    sessions = {sid: session_contents(recap, db, sid) for sid in ids}
    owners = {}  # a text or reply -> the conversations that have it
    for c in convs:
        for x in c["texts"] + c["replies"]:
            owners.setdefault(x, set()).add(c["name"])
    failures, notes = [], []
    for sid, (texts, replies) in sessions.items():
        mine = {n for x in list(texts) + list(replies) if len(owners.get(x, ())) == 1 for n in owners[x]}
        if len(mine) > 1:
            failures.append(f"session {sid!r} mixes conversations {sorted(mine)}")
    for c in convs:
        lost = [t for t in c["texts"] if not any(t in texts for texts, _ in sessions.values())]
        if lost:
            failures.append(f"{c['name']}: {len(lost)} of its {len(c['texts'])} user texts are in no session (first: {lost[0]!r})")
        lost = [r for r in c["replies"] if not any(r in replies for _, replies in sessions.values())]
        if lost:
            failures.append(f"{c['name']}: {len(lost)} of its {len(c['replies'])} replies are in no session (first: {lost[0]!r})")
        whole = [sid for sid, (texts, _) in sessions.items() if in_order(c["texts"], texts)]
        if not whole:
            msg = f"{c['name']}: its {len(c['texts'])} user texts are not all in one session"
            (notes if c.get("prev") or allow_split else failures).append(msg)
    for n in notes:
        print(f"check_sessions: note: {n}")
    for f in failures:
        print(f"check_sessions: FAIL: {f}")
    print(f"check_sessions: {len(sessions)} sessions, {len(convs)} conversations, {len(failures)} failures")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
