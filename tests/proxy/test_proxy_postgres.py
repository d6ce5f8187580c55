"""Two recap proxies on one PostgreSQL database serve one conversation alternately, and a proxy
started afterwards finds it (SPEC R19.2, R19.3 with the shared store of R8). A real server: the
`postgresql` package's initdb and pg_ctl, in a scratch folder, on a free port of 127.0.0.1 (as the
postgres user when the tests run as root, since the server refuses root)."""
import glob
import os
import shutil
import socket
import subprocess
import tempfile

import pytest

from proxy_harness import (Proxy, Standin, alternate, chat, post, sessions, texts,  # noqa: F401
                           tmp)


def bindir():
    if os.environ.get("RECAP_PG_BINDIR"):
        return os.environ["RECAP_PG_BINDIR"]
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"))
    return os.path.dirname(found[-1]) if found else None


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


@pytest.fixture
def pg(tmp):
    bin_dir = bindir()
    if bin_dir is None:
        pytest.fail("PostgreSQL's server is not installed: apt-get install postgresql "
                    "(scripts/test.sh installs it)")
    # A folder the server's user can reach (pytest's own are private to the test's user).
    base = tempfile.mkdtemp(prefix="recap-proxy-pg-")
    as_user = []
    if os.geteuid() == 0:
        shutil.chown(base, "postgres")
        as_user = ["runuser", "-u", "postgres", "--"]
    data = os.path.join(base, "data")
    port = free_port()

    def run(*args):
        r = subprocess.run(as_user + list(args), capture_output=True, text=True, timeout=120)
        assert r.returncode == 0, r.stdout + r.stderr
    run(os.path.join(bin_dir, "initdb"), "-D", data, "-U", "recap", "-A", "trust",
        "--no-sync", "-E", "UTF8")
    run(os.path.join(bin_dir, "pg_ctl"), "-D", data, "-l", os.path.join(base, "log"), "-w",
        "-o", f"-p {port} -h 127.0.0.1 -k {base} -F", "start")
    yield f"postgresql://recap@127.0.0.1:{port}/postgres"
    subprocess.run(as_user + [os.path.join(bin_dir, "pg_ctl"), "-D", data, "-m", "immediate",
                              "stop"], capture_output=True, timeout=60)
    shutil.rmtree(base, ignore_errors=True)


def test_R19_3_two_proxies_on_one_postgresql_database_serve_one_conversation_alternately(tmp, pg):
    up = Standin(tmp)
    p1 = Proxy(tmp, up.url, db=pg, name="p1")
    p2 = Proxy(tmp, up.url, db=pg, name="p2")
    try:
        messages = [{"role": "user", "content": "turn 0"}]
        alternate([p1, p2], messages, 6)
        p1.stop()
        p2.stop()
        # A third, started afterwards, goes on with it too.
        p3 = Proxy(tmp, up.url, db=pg, name="p3")
        status, _, reply = post(p3.url, "/v1/chat/completions", chat(messages))
        assert status == 200, reply
        p3.stop()
        held = sessions(pg)
        assert len(held) == 1, list(held)
        (sid, active), = held.items()
        assert [texts([m]) for m in active if m["role"] == "user"] == [f"turn {i}" for i in range(7)]
        assert [m["role"] for m in active] == ["user", "assistant"] * 7
        # Every request reached the upstream whole: the second proxy never sent half a story.
        assert [e["n_messages"] for e in up.entries("model")] == list(range(1, 14, 2))
    finally:
        p1.stop()
        p2.stop()
        up.stop()
