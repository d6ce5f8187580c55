"""What recap proxy's pytest files share: a stand-in model (standin.py) and `recap proxy` started
on 127.0.0.1 with port 0, requests sent with http.client (streamed ones read event by event),
and the `recap` command run on the proxy's database.

RECAP_CLI names the `recap` binary (ctest sets it). Everything a test starts is stopped by the
fixtures, bounded in time.
"""
import http.client
import json
import os
import re
import signal
import subprocess
import sys
import time
import urllib.parse

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
RECAP = os.environ.get("RECAP_CLI", "recap")
KEY_A = "sk-test-client-A-0123456789abcdef"
KEY_B = "sk-test-client-B-fedcba9876543210"


def _wait_for_line(proc, stream_path, pattern, seconds=20):
    """Waits until the file `stream_path` (a process's output) holds a line matching `pattern`."""
    deadline = time.time() + seconds
    while time.time() < deadline:
        if os.path.exists(stream_path):
            with open(stream_path, encoding="utf-8", errors="replace") as f:
                m = re.search(pattern, f.read())
            if m:
                return m
        if proc.poll() is not None:
            with open(stream_path, encoding="utf-8", errors="replace") as f:
                raise AssertionError(f"the process ended (exit {proc.returncode}): {f.read()}")
        time.sleep(0.02)
    raise AssertionError(f"no line matching {pattern!r} after {seconds} s")


class Process:
    def __init__(self, args, out_path, env=None):
        self.out_path = out_path
        self.out = open(out_path, "w")
        self.proc = subprocess.Popen(args, stdout=self.out, stderr=subprocess.STDOUT, env=env,
                                     stdin=subprocess.DEVNULL)

    def wait_for(self, pattern, seconds=20):
        return _wait_for_line(self.proc, self.out_path, pattern, seconds)

    def output(self):
        with open(self.out_path, encoding="utf-8", errors="replace") as f:
            return f.read()

    def stop(self, sig=signal.SIGTERM):
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.out.close()


class Standin:
    def __init__(self, tmp, *faults, name="standin", tls=None):
        self.log = os.path.join(tmp, name + ".jsonl")
        args = [sys.executable, os.path.join(HERE, "standin.py"), "--log", self.log, "--port", "0"]
        for f in faults:
            args += ["--fault", f]
        if tls:
            args += ["--tls", *tls]
        self.process = Process(args, os.path.join(tmp, name + ".out"))
        m = self.process.wait_for(r"listening on (https?://127\.0\.0\.1:\d+)")
        self.url = m.group(1)

    def entries(self, kind=None):
        if not os.path.exists(self.log):
            return []
        out = []
        with open(self.log, encoding="utf-8") as f:
            for line in f:
                e = json.loads(line)
                if kind is None or e.get("kind") == kind:
                    out.append(e)
        return out

    def stop(self):
        self.process.stop()


class Proxy:
    def __init__(self, tmp, upstream, db=None, args=(), env=None, name="proxy", config=None):
        self.db = db or os.path.join(tmp, "proxy.db")
        cmd = [RECAP, "proxy", "--upstream", upstream, "--listen", "127.0.0.1:0", "--db", self.db]
        if config is not None:
            path = os.path.join(tmp, name + "-config.json")
            with open(path, "w") as f:
                json.dump(config, f)
            cmd += ["--config", path]
        cmd += list(args)
        full_env = dict(os.environ)
        full_env.update(env or {})
        self.process = Process(cmd, os.path.join(tmp, name + ".out"), env=full_env)
        m = self.process.wait_for(r"listening on (http://127\.0\.0\.1:\d+)")
        self.url = m.group(1)

    def stop(self, sig=signal.SIGTERM):
        """Stops the proxy; stopped by SIGTERM it must exit 0, having said so (a sanitizer's
        report, a crash on the way out fail the test)."""
        already = self.process.proc.poll() is not None
        self.process.stop(sig)
        if sig == signal.SIGTERM and not already:
            code = self.process.proc.returncode
            if code != 0 or "recap proxy: stopped" not in self.log():
                raise AssertionError(f"recap proxy exited {code} on SIGTERM:\n{self.log()[-4000:]}")

    def log(self):
        return self.process.output()


def post(base, path, body, key=KEY_A, headers=None, timeout=30, raw=None):
    """POSTs `body` (JSON) and returns (status, headers, parsed JSON or text)."""
    u = urllib.parse.urlparse(base)
    conn = http.client.HTTPConnection(u.hostname, u.port, timeout=timeout)
    h = {"content-type": "application/json"}
    if key:
        h["authorization"] = "Bearer " + key
    h.update(headers or {})
    conn.request("POST", (u.path or "") + path, body=raw if raw is not None else json.dumps(body),
                 headers=h)
    r = conn.getresponse()
    data = r.read().decode("utf-8", "replace")
    conn.close()
    try:
        parsed = json.loads(data)
    except ValueError:
        parsed = data
    return r.status, dict(r.getheaders()), parsed


def post_stream(base, path, body, key=KEY_A, headers=None, timeout=30, stop_after=None):
    """POSTs a streamed request; returns (status, [(seconds since sent, event, data)], complete)
    where complete says whether the stream ended cleanly with its format's last event. `stop_after`: close the connection
    after that many events (a client that goes away)."""
    u = urllib.parse.urlparse(base)
    conn = http.client.HTTPConnection(u.hostname, u.port, timeout=timeout)
    h = {"content-type": "application/json"}
    if key:
        h["authorization"] = "Bearer " + key
    h.update(headers or {})
    started = time.time()
    conn.request("POST", (u.path or "") + path, body=json.dumps(body), headers=h)
    r = conn.getresponse()
    events, event, data = [], "", []
    complete = True
    try:
        while True:
            line = r.readline()
            if not line:
                break
            line = line.decode("utf-8").rstrip("\r\n")
            if line == "":
                if data:
                    events.append((time.time() - started, event, "\n".join(data)))
                    if stop_after is not None and len(events) >= stop_after:
                        conn.sock.close()
                        conn.close()
                        return r.status, events, False
                event, data = "", []
            elif line.startswith("event:"):
                event = line[6:].strip()
            elif line.startswith("data:"):
                data.append(line[5:].lstrip())
    except (http.client.IncompleteRead, ConnectionError, OSError):
        complete = False
    conn.close()
    # Whole only with the format's end: a cut connection may look like a clean close.
    ends = ("[DONE]", "message_stop", "response.completed")
    last = events[-1] if events else (0, "", "")
    complete = complete and (last[2] == "[DONE]" or last[1] in ends or
                             '"type": "response.completed"' in last[2] or
                             '"type":"response.completed"' in last[2])
    return r.status, events, complete


def recap(*args, check=True):
    r = subprocess.run([RECAP, *args], capture_output=True, text=True, timeout=60)
    if check and r.returncode != 0:
        raise AssertionError(f"recap {' '.join(args)} failed ({r.returncode}): {r.stderr}")
    return r


def sessions(db):
    """The proxy's sessions in `db`: {id: [messages as recap's JSON]}."""
    listed = json.loads(recap("sessions", "list", "--db", db, "--json").stdout)
    rows = listed if isinstance(listed, list) else listed.get("sessions", [])
    out = {}
    for row in rows:
        sid = row["session"]
        doc = json.loads(recap("export", "--session", sid, "--db", db, "--format", "recap").stdout)
        out[sid] = doc["messages"] if isinstance(doc, dict) else doc
    return out


def history(db, session):
    """Every message the session ever held (compacted or not), in store order, as recap's JSON."""
    doc = json.loads(recap("export", "--session", session, "--db", db, "--format", "recap",
                           "--history").stdout)
    out = []
    for entry in doc["history"]:
        m = entry["messages"]
        out.extend(m["messages"] if isinstance(m, dict) else m)
    return out


def texts(messages):
    """The texts of recap-format messages, joined."""
    out = []
    for m in messages:
        for p in m.get("content") or m.get("parts") or []:
            if isinstance(p, dict) and isinstance(p.get("text"), str):
                out.append(p["text"])
        if isinstance(m.get("content"), str):
            out.append(m["content"])
    return "\n".join(out)


def alternate(proxies, messages, turns):
    """Sends `turns` turns of a chat conversation, each through the next of `proxies` in turn,
    the whole history every time as a client does; `messages` grows with each reply and the
    next user message ("turn N")."""
    first = sum(1 for m in messages if m["role"] == "user")
    for i in range(turns):
        proxy = proxies[i % len(proxies)]
        status, _, reply = post(proxy.url, "/v1/chat/completions", chat(messages))
        assert status == 200, reply
        messages += [reply["choices"][0]["message"],
                     {"role": "user", "content": f"turn {first + i}"}]


def chat(messages, **extra):
    body = {"model": "m", "messages": messages}
    body.update(extra)
    return body


@pytest.fixture
def tmp(tmp_path):
    return str(tmp_path)
