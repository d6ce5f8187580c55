"""recap proxy under faults and hostile use (SPEC R19.4, R19.5, R13.3, R13.4): upstream errors,
an upstream down, slow or cut mid-stream, a client that goes away, a proxy killed mid-request and
restarted, two proxies on one database, what it listens on, and keys never kept or shown."""
import json
import re
import os
import signal
import socket
import subprocess
import threading
import time

import pytest

from proxy_harness import (KEY_A, RECAP, Proxy, Standin, alternate, chat, history, post,
                           post_stream, sessions, texts, tmp)  # noqa: F401


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


@pytest.mark.parametrize("path,fmt", [("/v1/chat/completions", "openai-chat"),
                                      ("/v1/messages", "anthropic"),
                                      ("/v1/responses", "openai-responses")])
def test_R19_4_upstream_errors_reach_the_client_as_the_upstream_sent_them(tmp, path, fmt):
    up = Standin(tmp)
    proxy = Proxy(tmp, up.url)
    try:
        body = {"model": "m", "max_tokens": 50}
        body["input" if fmt == "openai-responses" else "messages"] = [
            {"role": "user", "content": "hi"}]
        for status in (400, 429, 503):
            got, headers, err = post(proxy.url, path, body,
                                     headers={"x-standin-fault": f"status:{status}"})
            assert got == status
            direct, _, expected = post(up.url, path, body,
                                       headers={"x-standin-fault": f"status:{status}"})
            assert err == expected
            # With its headers: the client's backoff reads them.
            lower = {k.lower(): v for k, v in headers.items()}
            assert lower["request-id"].startswith("req_standin_")
            if status != 400:
                assert lower["retry-after"] == "7"
        # A streamed answer's headers come before its events.
        body["stream"] = True
        status, headers, _ = post(proxy.url, path, body)
        lower = {k.lower(): v for k, v in headers.items()}
        assert status == 200 and lower["request-id"].startswith("req_standin_")
        assert lower["content-type"].startswith("text/event-stream")
    finally:
        proxy.stop()
        up.stop()


@pytest.mark.parametrize("path,fmt", [("/v1/chat/completions", "openai-chat"),
                                      ("/v1/messages", "anthropic")])
def test_R19_4_an_upstream_that_is_down_is_an_error_in_the_format_s_shape(tmp, path, fmt):
    proxy = Proxy(tmp, f"http://127.0.0.1:{free_port()}")
    try:
        status, _, err = post(proxy.url, path, {"model": "m", "max_tokens": 10,
                                                "messages": [{"role": "user", "content": "hi"}]})
        assert status == 502
        if fmt == "anthropic":
            assert err["type"] == "error" and "could not reach the upstream" in err["error"]["message"]
        else:
            assert "could not reach the upstream" in err["error"]["message"]
            assert "--upstream" in err["error"]["message"]
        assert KEY_A not in proxy.log() and KEY_A[-8:] not in proxy.log()
    finally:
        proxy.stop()


def test_R19_4_a_request_recap_cannot_read_is_a_400_that_says_what_to_send(tmp):
    up = Standin(tmp)
    proxy = Proxy(tmp, up.url)
    try:
        status, _, err = post(proxy.url, "/v1/chat/completions", {"model": "m", "messages": "hi"})
        assert status == 400 and "messages" in err["error"]["message"]
        status, _, err = post(proxy.url, "/v1/messages", None, raw="{not json")
        assert status == 400 and err["type"] == "error"
        assert up.entries("model") == []
    finally:
        proxy.stop()
        up.stop()


def test_R19_4_a_stream_cut_upstream_is_cut_for_the_client_and_not_kept_as_a_reply(tmp):
    up = Standin(tmp)
    proxy = Proxy(tmp, up.url)
    try:
        status, events, complete = post_stream(
            proxy.url, "/v1/chat/completions",
            chat([{"role": "user", "content": "cut me off"}], stream=True),
            headers={"x-standin-fault": "cut"})
        assert status == 200 and not complete
        (sid, active), = sessions(proxy.db).items()
        assert [m["role"] for m in active] == ["user"]  # the half reply was not appended
    finally:
        proxy.stop()
        up.stop()


def test_R19_4_a_client_that_goes_away_mid_stream_leaves_no_reply_and_the_proxy_serves_on(tmp):
    up = Standin(tmp, "slow:200")
    proxy = Proxy(tmp, up.url)
    try:
        status, events, complete = post_stream(
            proxy.url, "/v1/messages",
            {"model": "m", "max_tokens": 50, "stream": True,
             "messages": [{"role": "user", "content": "I will leave"}]},
            stop_after=1)
        assert status == 200 and len(events) == 1
        time.sleep(1.5)  # the upstream's stream would have ended by now
        (sid, active), = sessions(proxy.db).items()
        assert [m["role"] for m in active] == ["user"]
        status, _, reply = post(proxy.url, "/v1/chat/completions",
                                chat([{"role": "user", "content": "still there?"}]))
        assert status == 200
    finally:
        proxy.stop()
        up.stop()


def test_R19_4_a_proxy_killed_mid_request_and_restarted_continues_the_session(tmp):
    up = Standin(tmp, "slow:300")
    db = os.path.join(tmp, "proxy.db")
    proxy = Proxy(tmp, up.url, db=db, name="first")
    messages = [{"role": "user", "content": "turn one"}]
    status, _, reply = post(proxy.url, "/v1/chat/completions", chat(messages))
    assert status == 200
    messages += [reply["choices"][0]["message"], {"role": "user", "content": "turn two"}]
    result = {}

    def streamed():
        result["r"] = post_stream(proxy.url, "/v1/chat/completions", chat(messages, stream=True))

    t = threading.Thread(target=streamed)
    t.start()
    time.sleep(0.5)  # the request is in, its answer streaming
    proxy.process.proc.send_signal(signal.SIGKILL)
    proxy.process.proc.wait()
    t.join(30)
    assert not result["r"][2]  # the client saw the cut
    again = Proxy(tmp, up.url, db=db, name="second")
    try:
        status, _, reply = post(again.url, "/v1/chat/completions", chat(messages))  # its retry
        assert status == 200
        messages += [reply["choices"][0]["message"], {"role": "user", "content": "turn three"}]
        status, _, reply = post(again.url, "/v1/chat/completions", chat(messages))
        assert status == 200
        held = sessions(db)
        assert len(held) == 1, list(held)
        (sid, active), = held.items()
        assert [texts([m]) for m in active if m["role"] == "user"] == [
            "turn one", "turn two", "turn three"]
        assert [m["role"] for m in active] == ["user", "assistant"] * 3
    finally:
        again.stop()
        up.stop()


def test_R19_4_two_proxies_on_one_sqlite_file_serve_one_conversation_alternately(tmp):
    up = Standin(tmp)
    db = os.path.join(tmp, "shared.db")
    p1 = Proxy(tmp, up.url, db=db, name="p1")
    p2 = Proxy(tmp, up.url, db=db, name="p2")
    try:
        messages = [{"role": "user", "content": "turn 0"}]
        alternate([p1, p2], messages, 6)
        held = sessions(db)
        assert len(held) == 1, list(held)
        (sid, active), = held.items()
        assert [texts([m]) for m in active if m["role"] == "user"] == [f"turn {i}" for i in range(6)]
    finally:
        p1.stop()
        p2.stop()
        up.stop()


def test_R19_5_a_long_conversation_is_compacted_upstream_and_kept_whole(tmp):
    up = Standin(tmp)
    config = {"limits": {"maxContextChars": 6000}, "compaction": {"keepTurns": 1}}
    events = os.path.join(tmp, "events.jsonl")
    proxy = Proxy(tmp, up.url, config=config, args=["--events", events])
    try:
        messages = [{"role": "system", "content": "You are a careful assistant."},
                    {"role": "user", "content": "start " + "x" * 400}]
        sent = []
        for i in range(30):
            status, _, reply = post(proxy.url, "/v1/chat/completions", chat(messages))
            assert status == 200, reply
            sent.append(up.entries("model")[-1]["n_messages"])
            messages += [reply["choices"][0]["message"],
                         {"role": "user", "content": f"step {i} " + "y" * 400}]
        # The upstream got fewer messages than the client sent, once compaction ran.
        assert min(sent[10:]) < len(messages) - 20, sent
        summarizer = up.entries("summarizer")
        assert summarizer, "the upstream wrote no checkpoint"
        assert all(e["has_credential"] for e in summarizer)  # the client's own key
        held = sessions(proxy.db)
        assert len(held) == 1
        (sid, active), = held.items()
        everything = history(proxy.db, sid)
        asked = [texts([m]) for m in everything if m["role"] == "user" and not m.get("summary")]
        for i in range(29):
            assert any(t.startswith(f"step {i} ") for t in asked), i
        # The compactions were reported, as events and in the log, without the key.
        with open(events) as f:
            kinds = [json.loads(line)["type"] for line in f]
        assert "compaction_completed" in kinds, kinds
        assert "compaction_completed" in proxy.log()
        with open(events) as f:
            assert KEY_A not in f.read() and KEY_A not in proxy.log()
        # Between two compactions what is sent grows at its end only: the checkpoint and the
        # kept turns are a stable prefix, which a provider's prompt cache reads again.
        bodies = [e["body"]["messages"] for e in up.entries("model")]
        grown = [(a, b) for a, b in zip(bodies, bodies[1:]) if len(b) == len(a) + 2]
        assert grown
        for a, b in grown:
            assert b[:len(a)] == a
        # Every request the upstream received was valid (calls paired, roles in order).
        checked = subprocess.run(
            ["python3", os.path.join(os.path.dirname(__file__), "check_log.py"), up.log,
             "--expect-summarizer", "--expect-shrink"], capture_output=True, text=True)
        assert checked.returncode == 0, checked.stdout + checked.stderr
    finally:
        proxy.stop()
        up.stop()


def test_R19_4_a_request_over_a_known_window_is_never_sent_uncompacted(tmp):
    up = Standin(tmp, "summarizer:status:500")
    limit = 4000
    config = {"limits": {"maxContextChars": limit}, "compaction": {"auto": False}}
    proxy = Proxy(tmp, up.url, config=config)
    try:
        # One message over the limit: clipped (R6), never sent whole.
        status, _, reply = post(proxy.url, "/v1/chat/completions",
                                chat([{"role": "user", "content": "z" * 9000}]))
        assert status == 200, reply
        assert len(json.dumps(up.entries("model")[-1]["body"]["messages"])) < limit
        # Many messages over it, and a summarizer that fails: an error, nothing sent.
        before = len(up.entries("model"))
        messages = []
        for i in range(40):
            messages += [{"role": "user", "content": f"question {i} " + "q" * 150},
                         {"role": "assistant", "content": f"answer {i} " + "a" * 150}]
        messages.append({"role": "user", "content": "and now?"})
        status, _, err = post(proxy.url, "/v1/chat/completions", chat(messages))
        assert status >= 400, err
        assert "did not send the request" in err["error"]["message"]
        assert len(up.entries("model")) == before
    finally:
        proxy.stop()
        up.stop()


def run_proxy(*args, env=None):
    full = dict(os.environ)
    full.pop("RECAP_PROXY_TOKEN", None)
    full.update(env or {})
    return subprocess.run([RECAP, "proxy", *args], capture_output=True, text=True, timeout=20,
                          env=full)


def test_R19_4_it_listens_on_loopback_unless_told_and_then_needs_a_token(tmp):
    db = os.path.join(tmp, "p.db")
    r = run_proxy("--upstream", "http://127.0.0.1:9", "--listen", "0.0.0.0:0", "--db", db)
    assert r.returncode == 2 and "--allow-remote" in r.stderr
    r = run_proxy("--upstream", "http://127.0.0.1:9", "--listen", "0.0.0.0:0", "--allow-remote",
                  "--db", db)
    assert r.returncode == 2 and "RECAP_PROXY_TOKEN" in r.stderr
    r = run_proxy("--upstream", "http://api.example.com", "--db", db)
    assert r.returncode == 2 and "cleartext" in r.stderr and "https://" in r.stderr
    r = run_proxy("--db", db)
    assert r.returncode == 2 and "--upstream" in r.stderr


def test_R19_4_with_a_token_every_request_must_carry_it(tmp):
    up = Standin(tmp)
    token = "proxy-token-0123456789"
    proxy = Proxy(tmp, up.url, env={"RECAP_PROXY_TOKEN": token})
    try:
        body = chat([{"role": "user", "content": "hi"}])
        status, _, err = post(proxy.url, "/v1/chat/completions", body)
        assert status == 401 and "token" in err["error"]["message"]
        status, _, _ = post(proxy.url, "/v1/chat/completions", body,
                            headers={"x-recap-token": token})
        assert status == 200
        status, _, _ = post(proxy.url + "/t/" + token, "/v1/chat/completions", body)
        assert status == 200
        status, _, _ = post(proxy.url + "/t/wrong", "/v1/chat/completions", body)
        assert status == 401
        # The token never went upstream.
        for e in up.entries():
            assert token not in json.dumps(e)
        assert token not in proxy.log()
    finally:
        proxy.stop()
        up.stop()


def make_certificate(tmp):
    """A self-signed certificate for 127.0.0.1 (its own CA), made with the openssl command."""
    cert, key = os.path.join(tmp, "cert.pem"), os.path.join(tmp, "key.pem")
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2",
                    "-subj", "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1",
                    "-keyout", key, "-out", cert], check=True, capture_output=True, timeout=60)
    return cert, key


def test_R19_4_the_upstream_s_certificate_is_verified_and_ca_path_names_its_ca(tmp):
    cert, key = make_certificate(tmp)
    up = Standin(tmp, tls=(cert, key))
    assert up.url.startswith("https://")
    body = chat([{"role": "user", "content": "hello over TLS"}])
    unverified = Proxy(tmp, up.url, name="system-cas")
    try:
        status, _, err = post(unverified.url, "/v1/chat/completions", body)
        assert status == 502
        assert "certificate" in err["error"]["message"] and "--ca-path" in err["error"]["message"]
        assert up.entries("model") == []
    finally:
        unverified.stop()
    trusted = Proxy(tmp, up.url, args=["--ca-path", cert], name="own-ca")
    try:
        status, _, reply = post(trusted.url, "/v1/chat/completions", body)
        assert status == 200, reply
        assert up.entries("model")[-1]["has_credential"]
    finally:
        trusted.stop()
        up.stop()
    r = run_proxy("--upstream", up.url, "--ca-path", os.path.join(tmp, "missing.pem"),
                  "--db", os.path.join(tmp, "x.db"))
    assert r.returncode == 2 and "--ca-path" in r.stderr


def test_R19_4_a_slow_upstream_is_waited_for_and_its_stream_passed_on_as_it_comes(tmp):
    up = Standin(tmp, "model:slow:400")
    proxy = Proxy(tmp, up.url)
    try:
        started = time.time()
        status, _, reply = post(proxy.url, "/v1/messages",
                                {"model": "m", "max_tokens": 10,
                                 "messages": [{"role": "user", "content": "take your time"}]})
        assert status == 200 and time.time() - started >= 0.4
        status, events, complete = post_stream(
            proxy.url, "/v1/messages",
            {"model": "m", "max_tokens": 10, "stream": True,
             "messages": [{"role": "user", "content": "slowly, streamed"}]})
        assert status == 200 and complete
        # The first event came one delay in, long before the whole stream's end.
        assert events[0][0] < events[-1][0] - 1.0, [round(e[0], 2) for e in events]
        assert len(sessions(proxy.db)) == 2
    finally:
        proxy.stop()
        up.stop()


def test_R19_4_hostile_requests_get_a_400_and_the_proxy_serves_on(tmp):
    up = Standin(tmp)
    proxy = Proxy(tmp, up.url)
    try:
        hostile = [
            # nesting deep enough to exhaust a recursive parser's stack
            '{"model":"m","messages":[{"role":"user","content":' + "[" * 200000 + "]" * 200000
            + "}]}",
            '{"model":"m","messages":[' + "[" * 5000 + "]" * 5000 + "]}",
            # bytes that are not UTF-8
            b'{"model":"m","messages":[{"role":"user","content":"\xff\xfe bad"}]}',
            # not the shape of a message
            '{"model":"m","messages":[{"role":"robot","content":"beep"}]}',
            '{"model":"m","messages":[1,2,3]}',
            '{"model":"m","messages":[]}',
        ]
        for raw in hostile:
            status, _, err = post(proxy.url, "/v1/chat/completions", None, raw=raw)
            assert 400 <= status < 500, (raw[:80], status, err)
            assert isinstance(err, dict) and err["error"]["message"]
        status, _, reply = post(proxy.url, "/v1/chat/completions",
                                chat([{"role": "user", "content": "still fine?"}]))
        assert status == 200, reply
        assert up.entries("model")[-1]["n_messages"] == 1
    finally:
        proxy.stop()
        up.stop()


def test_R19_4_a_full_disk_is_a_503_that_says_so_and_loses_nothing(tmp):
    import resource
    up = Standin(tmp)
    db = os.path.join(tmp, "full.db")

    def small_disk():  # files may not grow past 300 kB: a disk that fills up
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (300_000, 300_000))

    out_path = os.path.join(tmp, "full.out")
    with open(out_path, "w") as out:
        proc = subprocess.Popen([RECAP, "proxy", "--upstream", up.url, "--listen", "127.0.0.1:0",
                                 "--db", db], stdout=out, stderr=subprocess.STDOUT,
                                preexec_fn=small_disk)
    try:
        deadline = time.time() + 20
        url = None
        while url is None and time.time() < deadline:
            m = re.search(r"listening on (http://\S+)", open(out_path).read())
            url = m.group(1) if m else time.sleep(0.05)
        assert url, open(out_path).read()
        messages = [{"role": "user", "content": "x" * 20000}]
        replies = 0
        for _ in range(30):
            status, _, reply = post(url, "/v1/chat/completions", chat(messages))
            if status != 200:
                break
            replies += 1
            messages += [reply["choices"][0]["message"], {"role": "user", "content": "y" * 20000}]
        assert status == 503 and "check the disk" in reply["error"]["message"], reply
        assert len(up.entries("model")) == replies  # the failed request was not sent
    finally:
        proc.terminate()
        assert proc.wait(timeout=20) == 0
        up.stop()
    # What was kept before the disk filled is whole.
    held = sessions(db)
    (sid, active), = held.items()
    assert [m["role"] for m in active] == ["user", "assistant"] * replies
