"""recap proxy: which session a request goes to, what is appended, what goes upstream (SPEC R19.2,
R19.3). A stand-in model (standin.py) and the proxy run on 127.0.0.1; requests are sent over HTTP
as a client sends them, resending the whole conversation each turn."""
import json
import os

import pytest

from proxy_harness import (KEY_A, KEY_B, Proxy, Standin, chat, history, post, post_stream, recap,
                           sessions, texts, tmp)  # noqa: F401


def reply_message(fmt, reply):
    """The assistant's message as the client keeps it, from the upstream's answer."""
    if fmt == "openai-chat":
        return reply["choices"][0]["message"]
    if fmt == "anthropic":
        return {"role": "assistant", "content": reply["content"]}
    raise ValueError(fmt)


def turn(proxy, messages, key=KEY_A, fmt="openai-chat", **extra):
    if fmt == "openai-chat":
        status, _, reply = post(proxy.url, "/v1/chat/completions", chat(messages, **extra), key=key)
    else:
        body = {"model": "m", "max_tokens": 100, "messages": messages}
        body.update(extra)
        status, _, reply = post(proxy.url, "/v1/messages", body, key=key,
                                headers={"x-api-key": key})
    assert status == 200, reply
    messages.append(reply_message(fmt, reply))
    return reply


@pytest.fixture
def pair(tmp):
    up = Standin(tmp)
    proxy = Proxy(tmp, up.url)
    yield up, proxy
    proxy.stop()
    up.stop()


@pytest.mark.parametrize("fmt", ["openai-chat", "anthropic"])
def test_R19_2_a_conversation_stays_one_session_and_its_history_is_whole(pair, fmt):
    up, proxy = pair
    messages = [{"role": "user", "content": "first question"}]
    for i in range(5):
        turn(proxy, messages, fmt=fmt)
        messages.append({"role": "user", "content": f"question {i + 2}"})
    turn(proxy, messages, fmt=fmt)
    held = sessions(proxy.db)
    assert len(held) == 1, held.keys()
    (sid, active), = held.items()
    # Every message once: the client's six questions and the six replies, no copy of a reply.
    assert len(active) == 12, [m["role"] for m in active]
    asked = [texts([m]) for m in history(proxy.db, sid) if m["role"] == "user"]
    assert asked == ["first question"] + [f"question {i}" for i in range(2, 7)]
    # The upstream got the whole conversation each turn (nothing compacted at this size).
    model = up.entries("model")
    assert [e["n_messages"] for e in model] == [1, 3, 5, 7, 9, 11]


def test_R19_2_the_leading_system_message_and_tools_go_upstream_as_sent(pair):
    up, proxy = pair
    tools = [{"type": "function", "function": {"name": "read", "description": "reads a file",
                                               "parameters": {"type": "object", "properties": {
                                                   "path": {"type": "string"}},
                                                   "required": ["path"]}}}]
    messages = [{"role": "system", "content": "You are terse."},
                {"role": "user", "content": "read hello.txt"}]
    reply = turn(proxy, messages, tools=tools, temperature=0.25)
    call = reply["choices"][0]["message"]["tool_calls"][0]
    messages.append({"role": "tool", "tool_call_id": call["id"], "content": "hello world"})
    turn(proxy, messages, tools=tools, temperature=0.25)
    body = up.entries("model")[-1]["body"]
    assert body["messages"][0] == {"role": "system", "content": "You are terse."}
    assert body["tools"] == tools and body["temperature"] == 0.25
    assert [m["role"] for m in body["messages"]] == ["system", "user", "assistant", "tool"]
    (sid, active), = sessions(proxy.db).items()
    # The system message is the request's, not the session's.
    assert [m["role"] for m in active][:1] == ["user"]


def test_R19_2_a_streamed_answer_passes_event_by_event(tmp):
    up = Standin(tmp, "slow:150")
    proxy = Proxy(tmp, up.url)
    try:
        status, events, complete = post_stream(
            proxy.url, "/v1/chat/completions",
            chat([{"role": "user", "content": "stream please"}], stream=True))
        assert status == 200 and complete
        assert events[-1][2] == "[DONE]"
        # The first event reached the client well before the last was sent: not buffered.
        assert len(events) >= 4
        assert events[-1][0] - events[0][0] >= 0.3, events
        (sid, active), = sessions(proxy.db).items()
        assert [m["role"] for m in active] == ["user", "assistant"]
    finally:
        proxy.stop()
        up.stop()


def test_R19_2_previous_response_id_is_resolved_and_the_upstream_gets_the_whole_input(pair):
    up, proxy = pair
    status, _, first = post(proxy.url, "/v1/responses",
                            {"model": "m", "input": "remember the word walnut"})
    assert status == 200, first
    status, _, second = post(proxy.url, "/v1/responses",
                             {"model": "m", "input": "what was the word?",
                              "previous_response_id": first["id"]})
    assert status == 200, second
    body = up.entries("model")[-1]["body"]
    assert "previous_response_id" not in body
    sent = json.dumps(body["input"])
    assert "walnut" in sent and "what was the word?" in sent
    held = sessions(proxy.db)
    assert len(held) == 1
    assert "walnut" in texts(next(iter(held.values())))


def test_R19_2_an_explicit_session_header_names_the_session(pair):
    up, proxy = pair
    messages = [{"role": "user", "content": "hello"}]
    status, _, reply = post(proxy.url, "/v1/chat/completions", chat(messages),
                            headers={"x-recap-session": "my-task"})
    assert status == 200
    messages += [reply["choices"][0]["message"], {"role": "user", "content": "more"}]
    status, _, reply = post(proxy.url, "/v1/chat/completions", chat(messages),
                            headers={"x-recap-session": "my-task"})
    assert status == 200
    held = sessions(proxy.db)
    assert list(held) == ["my-task"] and len(held["my-task"]) == 4
    # A request that does not continue it is refused, in the format's error shape.
    status, _, err = post(proxy.url, "/v1/chat/completions",
                          chat([{"role": "user", "content": "something else"}]),
                          headers={"x-recap-session": "my-task"})
    assert status == 409 and "does not continue session" in err["error"]["message"]


def test_R19_3_edits_regenerations_self_compaction_and_new_conversations_start_new_sessions(pair):
    up, proxy = pair
    base = [{"role": "user", "content": "plan the trip"}]
    turn(proxy, base)
    base.append({"role": "user", "content": "add a day in Lyon"})
    turn(proxy, base)
    assert len(sessions(proxy.db)) == 1

    # An edited earlier message: the chain leaves the session.
    edited = json.loads(json.dumps(base[:3]))
    edited[2]["content"] = "add a day in Nice"
    turn(proxy, edited)
    assert len(sessions(proxy.db)) == 2

    # A regenerated reply: the same request as the session's latest, after its reply was kept.
    regen = json.loads(json.dumps(base[:3]))
    turn(proxy, regen)
    assert len(sessions(proxy.db)) == 3

    # A client that compacted by itself: a summary in place of the first turns.
    compacted = [{"role": "user", "content": "Summary: a trip with a day in Lyon."},
                 {"role": "user", "content": "now book it"}]
    turn(proxy, compacted)
    assert len(sessions(proxy.db)) == 4

    # A new conversation with the same opening.
    again = [{"role": "user", "content": "plan the trip"}]
    turn(proxy, again)
    assert len(sessions(proxy.db)) == 5

    # Nothing was mixed: each session holds one line of the conversation only.
    held = {sid: texts(msgs) for sid, msgs in sessions(proxy.db).items()}
    assert sum("add a day in Lyon" in t for t in held.values()) == 2  # the original, the regen
    assert not any("Lyon" in t and "Nice" in t for t in held.values())
    assert not any("plan the trip" in t and "now book it" in t for t in held.values())


def test_R19_3_two_clients_with_different_keys_never_share_a_session(pair):
    up, proxy = pair
    a = [{"role": "user", "content": "the same words"}]
    b = [{"role": "user", "content": "the same words"}]
    turn(proxy, a, key=KEY_A)
    turn(proxy, b, key=KEY_B)
    a.append({"role": "user", "content": "A goes on"})
    b.append({"role": "user", "content": "B goes on"})
    turn(proxy, a, key=KEY_A)
    turn(proxy, b, key=KEY_B)
    held = sessions(proxy.db)
    assert len(held) == 2
    for msgs in held.values():
        t = texts(msgs)
        assert ("A goes on" in t) != ("B goes on" in t)
    # The keys reached the upstream, and were never kept.
    with open(proxy.db, "rb") as f:
        stored = f.read()
    for key in (KEY_A, KEY_B):
        assert key.encode() not in stored
        assert key[-12:].encode() not in stored
        assert key not in proxy.log()


def test_R19_3_a_retry_before_the_reply_goes_to_the_same_session_with_nothing_new(tmp):
    up = Standin(tmp, "once-status:500")
    proxy = Proxy(tmp, up.url)
    try:
        messages = [{"role": "user", "content": "try me"}]
        status, _, err = post(proxy.url, "/v1/chat/completions", chat(messages))
        assert status == 500, err  # the upstream's own error, passed through
        status, _, reply = post(proxy.url, "/v1/chat/completions", chat(messages))
        assert status == 200
        (sid, active), = sessions(proxy.db).items()
        assert [m["role"] for m in active] == ["user", "assistant"]
    finally:
        proxy.stop()
        up.stop()


def test_R19_5_the_client_s_cache_control_breakpoints_stay_where_it_put_them(pair):
    up, proxy = pair
    system = [{"type": "text", "text": "sys", "cache_control": {"type": "ephemeral"}}]
    messages = [{"role": "user", "content": [
        {"type": "text", "text": "q1", "cache_control": {"type": "ephemeral"}}]}]
    for i in range(6):
        status, _, reply = post(proxy.url, "/v1/messages",
                                {"model": "m", "max_tokens": 10, "system": system,
                                 "messages": messages}, headers={"x-api-key": KEY_A})
        assert status == 200, reply
        sent = up.entries("model")[-1]["body"]
        # Exactly the client's breakpoints of this request: on its newest message, and on the
        # system prompt; none left behind on messages it has moved them away from (the API
        # refuses more than four).
        assert sent["system"] == system
        marked = [j for j, m in enumerate(sent["messages"])
                  for b in m["content"] if isinstance(b, dict) and "cache_control" in b]
        assert marked == [len(sent["messages"]) - 1], (i, marked)
        # The client moves its breakpoint to the newest message, as Claude Code does.
        messages.append({"role": "assistant", "content": reply["content"]})
        for m in messages:
            for b in m["content"]:
                b.pop("cache_control", None)
        messages.append({"role": "user", "content": [
            {"type": "text", "text": f"q{i + 2}", "cache_control": {"type": "ephemeral"}}]})
    # The session keeps no breakpoint: they belong to each request.
    (sid, active), = sessions(proxy.db).items()
    assert "cache_control" not in json.dumps(active)


def test_R19_3_a_retried_previous_response_id_request_adds_nothing_twice(tmp):
    up = Standin(tmp, "model:once-status:500")
    proxy = Proxy(tmp, up.url)
    try:
        status, _, err = post(proxy.url, "/v1/responses", {"model": "m", "input": "first"})
        assert status == 500  # the upstream's error, passed through
        status, _, first = post(proxy.url, "/v1/responses", {"model": "m", "input": "first"})
        assert status == 200, first
        follow = {"model": "m", "input": "second", "previous_response_id": first["id"]}
        status, _, err = post(proxy.url, "/v1/responses", follow,
                              headers={"x-standin-fault": "status:503"})
        assert status == 503
        status, _, second = post(proxy.url, "/v1/responses", follow)  # the client's retry
        assert status == 200, second
        (sid, active), = sessions(proxy.db).items()
        asked = [texts([m]) for m in active if m["role"] == "user"]
        assert asked == ["first", "second"], asked
        sent = json.dumps(up.entries("model")[-1]["body"]["input"])
        assert sent.count('"second"') == 1
    finally:
        proxy.stop()
        up.stop()


def test_R19_3_an_explicit_session_the_proxy_did_not_write_is_refused_not_doubled(tmp):
    up = Standin(tmp)
    proxy = Proxy(tmp, up.url)
    try:
        turn_file = os.path.join(tmp, "turn.json")
        with open(turn_file, "w") as f:
            json.dump([{"role": "user", "content": "imported"}], f)
        recap("append", "--session", "imported-task", "--format", "openai-chat", turn_file,
              "--db", proxy.db)
        status, _, err = post(proxy.url, "/v1/chat/completions",
                              chat([{"role": "user", "content": "imported"},
                                    {"role": "user", "content": "and more"}]),
                              headers={"x-recap-session": "imported-task"})
        assert status == 409, err
        assert "not written by recap proxy" in err["error"]["message"]
        assert len(sessions(proxy.db)["imported-task"]) == 1  # nothing added
        assert up.entries("model") == []
    finally:
        proxy.stop()
        up.stop()
