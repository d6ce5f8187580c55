#!/usr/bin/env python3
"""Checks what the upstream received, from the stand-in's request log (standin.py --log).

Usage: check_log.py LOG.jsonl [--expect-summarizer] [--expect-shrink] [--no-credential-check]

Every model and summarizer request must be one the real API would accept:
  anthropic  messages start with a user message and alternate user/assistant (a `system`
             message only with the mid-conversation-system beta); no empty content; every
             tool_use answered by a tool_result in the next (user) message, tool_results first
             there, and no tool_result without its tool_use; tool_use ids unique;
  chat       every assistant tool_call answered by a `tool` message right after it, and no
             `tool` message that answers nothing;
  responses  every function_call (custom_tool_call, ...) answered by its *_output with the same
             call_id, and no output without its call; the items a previous_response_id names
             (earlier requests' input and reply, from this log) count as sent.
It must also carry a credential (x-api-key or Authorization). Prints a summary; exits 1 at
the first invalid request, naming it.
--expect-summarizer  at least one summarizer request (recap's checkpoint prompt)
--expect-shrink      some model request carried fewer messages than the one before it in the
                     same conversation (the client's x-standin-conv header, else its format,
                     credential, system prompt and tools): a compaction happened.
standin.py imports request_problem() to refuse invalid requests with a 400, as the APIs do.
"""
import argparse
import hashlib
import json
import sys
from collections import Counter

PAIRED_CALLS = {"function_call", "custom_tool_call", "local_shell_call", "computer_call",
                "shell_call", "apply_patch_call"}


def blocks_of(content):
    if isinstance(content, str):
        return [{"type": "text", "text": content}]
    return content if isinstance(content, list) else None


def anthropic_problem(body, headers):
    msgs = body.get("messages")
    if not isinstance(msgs, list) or not msgs:
        return "`messages` must be a non-empty list"
    if not isinstance(body.get("max_tokens"), int):
        return "`max_tokens` (an integer) is required"
    system_ok = "mid-conversation-system" in (headers or {}).get("anthropic-beta", "")
    prev, pending, seen = None, set(), set()
    for i, m in enumerate(msgs):
        role = m.get("role") if isinstance(m, dict) else None
        if role == "system" and system_ok and prev is not None:
            continue
        if role not in ("user", "assistant"):
            return f"messages[{i}]: role {role!r} (only user and assistant alternate here)"
        if prev is None and role != "user":
            return f"messages[{i}]: the first message must be a user message, not {role}"
        if role == prev and (pending or role == "assistant"):
            # The API joins consecutive user turns into one (a checkpoint and the next user
            # message), but a tool_use's results must come in the very next turn.
            return f"messages[{i}]: two {role} messages in a row (roles must alternate)"
        blocks = blocks_of(m.get("content"))
        if blocks is None:
            return f"messages[{i}]: content must be a string or a list of blocks"
        if not blocks and not (role == "assistant" and i == len(msgs) - 1):
            return f"messages[{i}]: empty content"
        for b in blocks:
            if not isinstance(b, dict) or "type" not in b:
                return f"messages[{i}]: a content block without a type"
            if b["type"] == "text" and not b.get("text"):
                return f"messages[{i}]: an empty text block"
        if role == "assistant":
            ids = [b.get("id") for b in blocks if b["type"] == "tool_use"]
            for tid in ids:
                if not tid or tid in seen:
                    return f"messages[{i}]: tool_use id {tid!r} missing or used twice"
                seen.add(tid)
            pending = set(ids)
        else:
            kinds = [b["type"] for b in blocks]
            results = [b.get("tool_use_id") for b in blocks if b["type"] == "tool_result"]
            missing = pending - set(results)
            if missing:
                return (f"messages[{i}]: tool_use {sorted(missing)} of messages[{i - 1}] has no "
                        f"tool_result in this next message")
            extra = set(results) - pending
            if extra:
                return f"messages[{i}]: tool_result for {sorted(extra)}, which no tool_use of the previous message made"
            if len(results) != len(set(results)):
                return f"messages[{i}]: two tool_results for one tool_use"
            if results and "tool_result" in kinds[len(results):]:
                return f"messages[{i}]: tool_result blocks must come first in the user message"
            pending = set()
        prev = role
    if pending:
        return f"the last message's tool_use {sorted(pending)} has no tool_result"
    return None


def chat_problem(body):
    msgs = body.get("messages")
    if not isinstance(msgs, list) or not msgs:
        return "`messages` must be a non-empty list"
    pending, seen = None, set()
    for i, m in enumerate(msgs):
        role = m.get("role") if isinstance(m, dict) else None
        if role not in ("system", "developer", "user", "assistant", "tool"):
            return f"messages[{i}]: role {role!r}"
        if role == "tool":
            tid = m.get("tool_call_id")
            if pending is None or tid not in pending:
                return f"messages[{i}]: tool message for {tid!r} answers no open tool_call of the assistant message before it"
            pending.discard(tid)
            continue
        if pending:
            return f"messages[{i}]: tool_calls {sorted(pending)} have no tool message before this {role} message"
        pending = None
        if role == "assistant":
            calls = m.get("tool_calls") or []
            if not calls and m.get("content") is None:
                return f"messages[{i}]: an assistant message needs content or tool_calls"
            for c in calls:
                f = c.get("function") if isinstance(c, dict) else None
                if not isinstance(f, dict) or not f.get("name") or not isinstance(f.get("arguments"), str):
                    return f"messages[{i}]: a tool_call without function name and arguments string"
                if not c.get("id") or c["id"] in seen:
                    return f"messages[{i}]: tool_call id {c.get('id')!r} missing or used twice"
                seen.add(c["id"])
            pending = {c["id"] for c in calls} or None
        elif m.get("content") is None:
            return f"messages[{i}]: {role} message without content"
    if pending:
        return f"tool_calls {sorted(pending)} of the last assistant message have no tool message"
    return None


def responses_items(body):
    inp = body.get("input")
    if isinstance(inp, str):
        return [{"type": "message", "role": "user", "content": inp}]
    return inp if isinstance(inp, list) else None


def responses_problem(items):
    """`items`: what the request's context holds (a previous response's chain, then input)."""
    calls, answered = {}, set()
    for i, it in enumerate(items):
        t = it.get("type") or ("message" if "role" in it else None) if isinstance(it, dict) else None
        if t is None:
            return f"item {i}: neither a type nor a role"
        if t == "message":
            if it.get("role") not in ("user", "assistant", "system", "developer"):
                return f"item {i}: message role {it.get('role')!r}"
        elif t in PAIRED_CALLS:
            cid = it.get("call_id")
            if not cid or cid in calls:
                return f"item {i}: {t} call_id {cid!r} missing or used twice"
            calls[cid] = t
        elif t.endswith("_output") and t[:-7] in PAIRED_CALLS:
            cid = it.get("call_id")
            if calls.get(cid) != t[:-7]:
                return f"item {i}: {t} for call_id {cid!r}, which no earlier {t[:-7]} made"
            if cid in answered:
                return f"item {i}: a second {t} for call_id {cid!r}"
            answered.add(cid)
    missing = [c for c in calls if c not in answered]
    if missing:
        return f"No tool output found for {calls[missing[0]]} {missing[0]!r}"
    return None


def request_problem(fmt, body, headers=None, context=None):
    """Why the real API would refuse this request body, or None. `context`: for responses, the
    resolved items (previous_response_id's chain followed by this input)."""
    if not isinstance(body, dict):
        return "the body is not a JSON object"
    if not isinstance(body.get("model"), str) or not body["model"]:
        return "`model` is required"
    if fmt == "anthropic":
        return anthropic_problem(body, headers)
    if fmt == "chat":
        return chat_problem(body)
    if fmt == "responses":
        if context is None:
            context = responses_items(body)
        if context is None:
            return "`input` must be a string or a list of items"
        return responses_problem(context)
    return None


def conversation_key(rec):
    if rec.get("conv"):
        return rec["conv"]
    b = rec.get("body") or {}
    system = b.get("system") or b.get("instructions") or [
        m for m in b.get("messages") or [] if isinstance(m, dict) and m.get("role") in ("system", "developer")]
    tools = [t.get("name") or (t.get("function") or {}).get("name") for t in b.get("tools") or [] if isinstance(t, dict)]
    digest = hashlib.sha256(json.dumps([system, tools], sort_keys=True).encode()).hexdigest()[:12]
    return f"{rec.get('format')}/{rec.get('credential')}/{digest}"


def main():
    ap = argparse.ArgumentParser(description="check the stand-in's request log")
    ap.add_argument("log")
    ap.add_argument("--expect-summarizer", action="store_true")
    ap.add_argument("--expect-shrink", action="store_true")
    ap.add_argument("--no-credential-check", action="store_true")
    a = ap.parse_args()
    try:
        with open(a.log) as f:
            recs = [json.loads(line) for line in f if line.strip()]
    except (OSError, ValueError) as e:
        print(f"check_log: cannot read {a.log}: {e}", file=sys.stderr)
        return 1
    kinds, formats, statuses = Counter(), Counter(), Counter()
    chains, last_n, shrinks, max_n = {}, {}, [], 0
    for n, rec in enumerate(recs, 1):
        kind, fmt = rec.get("kind"), rec.get("format")
        kinds[kind] += 1
        statuses[rec.get("status")] += 1
        if kind not in ("model", "summarizer"):
            continue
        formats[fmt] += 1
        body = rec.get("body")
        where = (f"{a.log}:{n}: {kind} request {rec.get('method')} {rec.get('path')}"
                 f" (conv {conversation_key(rec)}, answered {rec.get('status')})")
        context = None
        if fmt == "responses" and isinstance(body, dict):
            items = responses_items(body) or []
            prev = body.get("previous_response_id")
            if prev and prev not in chains:
                print(f"INVALID {where}: previous_response_id {prev!r} names no stored response before it")
                return 1
            context = (chains[prev] if prev else []) + items
            if rec.get("reply_id") and body.get("store") is not False:
                chains[rec["reply_id"]] = context + (rec.get("reply_output") or [])
        problem = request_problem(fmt, body, rec.get("headers") or {}, context)
        if not problem and not a.no_credential_check and not rec.get("has_credential"):
            problem = "no credential (x-api-key or Authorization) reached the upstream"
        if problem:
            print(f"INVALID {where}: {problem}")
            return 1
        count = len(context) if context is not None else len((body or {}).get("messages") or [])
        max_n = max(max_n, count)
        if kind == "model":
            key = conversation_key(rec)
            if key in last_n and count < last_n[key]:
                shrinks.append(f"{key}: {last_n[key]} -> {count}")
            last_n[key] = count
    print(f"check_log: {len(recs)} requests; kinds {dict(kinds)}; formats {dict(formats)}; "
          f"statuses {dict(statuses)}; {len(last_n)} conversations; max messages in one request {max_n}; "
          f"shrinks {len(shrinks)}" + (f" (first: {shrinks[0]})" if shrinks else ""))
    if a.expect_summarizer and not kinds["summarizer"]:
        print("check_log: FAIL: expected a summarizer request, saw none")
        return 1
    if a.expect_shrink and not shrinks:
        print("check_log: FAIL: expected some conversation's request to shrink (a compaction), saw none")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
