"""The GIL is released while recap works, and a Compactor serves several Python threads."""

import ctypes
import json
import threading

import pytest

import recap
from conftest import SMALL, chat_turns, checkpoint_text


class PythonServedSummarizer:
    """An OpenAI-chat summarizer served over HTTP on 127.0.0.1 by a thread of this very process.
    Its handler is Python: it can answer only while the thread that waits for it, inside recap,
    does not hold the GIL. `requests` counts the requests its handler read (before it answers
    them)."""

    def __init__(self):
        import http.server

        served = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_POST(self):
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                served.requests += 1
                reply = json.dumps({
                    "id": "x", "object": "chat.completion", "model": body["model"],
                    "choices": [{"index": 0, "finish_reason": "stop", "message": {
                        "role": "assistant", "content": checkpoint_text(
                            {"messages": [{"content": body["messages"][-1]["content"]}]})}}],
                    "usage": {"prompt_tokens": 900, "completion_tokens": 60}}).encode()
                try:
                    self.send_response(200)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(reply)))
                    self.end_headers()
                    self.wfile.write(reply)
                except OSError:  # recap gave up and closed the connection
                    pass

            def log_message(self, *args):
                pass

        class Server(http.server.ThreadingHTTPServer):
            daemon_threads = True

            def handle_error(self, request, client_address):
                pass  # a request recap abandoned

        self.requests = 0
        self.server = Server(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def provider(self, timeout_ms):
        try:
            return recap.HttpProvider(
                "openai_chat", "http://127.0.0.1:%d/v1" % self.server.server_port, "m",
                api_key="sk-local", timeout_ms=timeout_ms, max_retries=0)
        except recap.FailedPrecondition:
            pytest.skip("this recap has no HTTP component")

    def close(self):
        self.server.shutdown()
        self.server.server_close()


def test_the_gil_is_released_while_recap_works():
    # Decided by who can answer, not by how long anything takes: prepare compacts through a
    # summarizer whose server is Python on another thread of this process. recap waits for
    # its reply inside the call; the reply can come only if the GIL was let go.
    served = PythonServedSummarizer()
    try:
        # Through the module: the summarizer answers and the compaction uses its checkpoint.
        # (The time-out is only a guard against a hang: the reply takes milliseconds.)
        with recap.Compactor(config=SMALL, summarizer=served.provider(30000)) as c:
            c.append("s", chat_turns(8))
            prepared = c.prepare("s")
        assert prepared.compactions == ["auto"]
        assert prepared.summarizer_usage == {"prompt_tokens": 900, "completion_tokens": 60}
        assert served.requests == 1

        # The control: the same call made holding the GIL (ctypes.PyDLL) cannot be answered,
        # however fast or slow the machine: no Python runs until it returns, so the summarizer
        # times out (after 1 s) and the compaction fails, changing nothing. This is what the
        # module would do if it held the GIL.
        with recap.Compactor(config=SMALL, summarizer=served.provider(1000)) as c:
            c.append("s", chat_turns(8))
            held = ctypes.PyDLL(recap.library_path)
            held.recap_prepare.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_char_p,
                                           ctypes.c_void_p, ctypes.POINTER(ctypes.c_void_p),
                                           ctypes.POINTER(ctypes.c_void_p)]
            out, error = ctypes.c_void_p(), ctypes.c_void_p()
            code = held.recap_prepare(c._state.handle, b"s", b"openai-chat", None,
                                      ctypes.byref(out), ctypes.byref(error))
            assert code == 0
            result = json.loads(ctypes.string_at(out.value).decode())
            recap._free(out)
            assert result["compactions"] == [] and result["summarized_messages"] == 0, \
                {k: v for k, v in result.items() if k != "messages"}
    finally:
        served.close()


def test_several_threads_prepare_different_sessions_at_once():
    summarizer_threads = set()

    def summarize(request):
        summarizer_threads.add(threading.get_ident())
        return ('{"goal": "g", "instructions": [], "discoveries": [], "accomplished": [], '
                '"currentState": "%d chars", "nextSteps": [], "relevantFiles": []}'
                % len(request["messages"][0]["content"]))

    config = {"provider": {"contextWindow": 3000}, "compaction": {"keepTurns": 1}}
    errors, results = [], {}
    with recap.Compactor(config=config, summarizer=summarize) as c:
        start = threading.Barrier(6)

        def host(n):
            try:
                session = "session-%d" % n
                start.wait()
                compactions = 0
                for turn in range(10):
                    c.append(session, chat_turns(1, tag="h%d-%d-" % (n, turn)))
                    prepared = c.prepare(session)
                    compactions += len(prepared.compactions)
                    # Each session sees its own turns and no other's.
                    for other in range(6):
                        if other != n:
                            assert "h%d-" % other not in prepared.messages_json
                    assert "h%d-%d-" % (n, turn) in prepared.messages_json
                results[n] = (compactions, prepared)
            except Exception as e:  # reported below, with the thread
                errors.append((n, repr(e)))

        threads = [threading.Thread(target=host, args=(n,)) for n in range(6)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    assert errors == []
    assert sorted(results) == list(range(6))
    assert all(compactions > 0 for compactions, _ in results.values())
    assert all(p.after_tokens <= 3000 for _, p in results.values())
    assert len(summarizer_threads) >= 2  # summarized on the hosts' own threads
