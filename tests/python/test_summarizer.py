"""A Python summarizer: what it is given, what it may answer, how it fails, when it is
called from recap's worker threads, and when it is let go."""

import gc
import threading
import time
import weakref

import pytest

import recap
from conftest import SMALL, chat_turns, checkpoint_text


def test_a_python_summarizer_compacts_and_sees_the_request():
    requests = []

    def summarize(request):
        requests.append(request)
        return checkpoint_text(request)

    with recap.Compactor(config=SMALL, summarizer=summarize) as c:
        c.append("s", chat_turns(8))
        prepared = c.prepare("s")
    assert prepared.compactions == ["auto"]
    assert prepared.summarizer_calls == len(requests) >= 1
    assert prepared.after_chars < prepared.before_chars
    request = requests[0]
    assert set(request) == {"system", "messages", "max_output_tokens", "json_schema"}
    assert isinstance(request["system"], str) and request["system"]
    assert request["messages"][0]["role"] == "user"
    assert "Question 0" in request["messages"][0]["content"]
    assert isinstance(request["max_output_tokens"], int) and request["max_output_tokens"] > 0
    assert "goal" in request["json_schema"]["properties"]
    # The checkpoint is the summarizer's: its text is in what prepare returns.
    assert "answer the questions" in prepared.messages_json


def test_a_dict_reply_carries_usage_and_truncation():
    def summarize(request):
        return {"text": checkpoint_text(request), "truncated": False,
                "usage": {"prompt_tokens": 1000, "completion_tokens": 70}}

    with recap.Compactor(config=SMALL, summarizer=recap.Summarizer(summarize, name="mine")) as c:
        c.append("s", chat_turns(8))
        prepared = c.prepare("s")
        assert prepared.summarizer_usage["prompt_tokens"] >= 1000
        assert prepared.summarizer_usage["completion_tokens"] >= 70


def test_summarizer_name_and_window_reach_recap():
    events = []
    summarizer = recap.Summarizer(checkpoint_text, name="my-model", context_window=3000)
    with recap.Compactor(config={"compaction": {"keepTurns": 1}}, summarizer=summarizer,
                         on_event=events.append) as c:
        c.append("s", chat_turns(12))
        prepared = c.prepare("s")
    assert prepared.window_tokens == 3000 and prepared.compactions == ["auto"]
    completed = [e for e in events if e["type"] == "compaction_completed"]
    assert completed and completed[0]["checkpoint"]["writer"] == "my-model"


@pytest.mark.parametrize("failure,code,words", [
    (RuntimeError("model on fire"), "unavailable", "RuntimeError: model on fire"),
    (recap.DeadlineExceeded("took too long"), "deadline_exceeded", "took too long"),
    (recap.Error("rate limited", code="resource_exhausted"), "resource_exhausted",
     "rate limited"),
])
def test_a_summarizer_that_raises_fails_the_compaction_only(failure, code, words):
    events = []

    def summarize(request):
        raise failure

    with recap.Compactor(config=SMALL, summarizer=summarize, on_event=events.append) as c:
        version = c.append("s", chat_turns(8))
        prepared = c.prepare("s")  # still returns: the reducer keeps it inside the window
        failed = [e for e in events if e["type"] == "compaction_failed"]
        assert failed, [e["type"] for e in events]
        assert words in failed[0]["error"]
        assert prepared.version == version  # the session is unchanged
        assert prepared.summarized_messages == 0
        assert c.prepare("s", format="recap").version == version
        # A manual compaction raises the failure, its code kept.
        with pytest.raises(recap.Error) as e:
            c.compact("s")
        assert e.value.code == code and words in str(e.value)


@pytest.mark.parametrize("reply,words", [
    (None, "returned NoneType"),
    (42, "returned int"),
    (b"{}", "returned bytes"),
    ({"text": 5}, "returned int"),
    ({"text": "{}", "usage": {"prompt_tokens": -1}}, "usage.prompt_tokens"),
    ({"text": "{}", "usage": "lots"}, "not a dict"),
    ("half\0way", "NUL"),
])
def test_a_summarizer_that_returns_garbage_fails_with_a_message(reply, words):
    events = []
    with recap.Compactor(config=SMALL, summarizer=lambda request: reply,
                         on_event=events.append) as c:
        version = c.append("s", chat_turns(8))
        prepared = c.prepare("s")
    failed = [e for e in events if e["type"] == "compaction_failed"]
    assert failed and words in failed[0]["error"], failed
    assert prepared.version == version


def test_manual_compact_raises_the_summarizers_error():
    def summarize(request):
        raise recap.Unavailable("the model is down")

    with recap.Compactor(config=SMALL, summarizer=summarize) as c:
        c.append("s", chat_turns(8))
        with pytest.raises(recap.Error) as e:
            c.compact("s")
        assert "the model is down" in str(e.value)


def test_the_callable_is_released_when_the_compactor_closes():
    class Summarize:
        def __call__(self, request):
            return checkpoint_text(request)

    summarize = Summarize()
    gone = weakref.ref(summarize)
    c = recap.Compactor(config=SMALL, summarizer=summarize)
    del summarize
    gc.collect()
    assert gone() is not None  # recap may still call it
    c.append("s", chat_turns(8))
    assert c.prepare("s").compactions == ["auto"]
    c.close()
    gc.collect()
    assert gone() is None  # free_user_data let it go


def test_an_unclosed_compactor_is_closed_when_collected():
    class Summarize:
        def __call__(self, request):
            return checkpoint_text(request)

    summarize = Summarize()
    gone = weakref.ref(summarize)
    c = recap.Compactor(config=SMALL, summarizer=summarize)
    del summarize, c
    gc.collect()
    assert gone() is None


BACKGROUND = {"provider": {"contextWindow": 2000},
              "compaction": {"keepTurns": 1, "background": True}}


def test_a_summarizer_called_from_a_recap_worker_thread():
    called = threading.Event()
    threads = []

    def summarize(request):
        threads.append(threading.get_ident())
        time.sleep(0.05)  # Python runs here on recap's thread, with the GIL
        called.set()
        return checkpoint_text(request)

    with recap.Compactor(config=BACKGROUND, summarizer=summarize) as c:
        swapped = False
        for turn in range(12):
            c.append("s", chat_turns(1, tag="r%d-" % turn))
            prepared = c.prepare("s")
            swapped = swapped or prepared.background_swapped
            if swapped:
                break
            time.sleep(0.1)
        assert called.wait(10)
        assert swapped
    assert threads and threading.get_ident() not in threads


def test_close_cancels_a_background_summarizer_that_waits():
    started = threading.Event()
    saw = []

    def summarize(request):
        started.set()
        deadline = time.monotonic() + 20
        while not recap.cancelled() and time.monotonic() < deadline:
            time.sleep(0.01)
        saw.append(recap.cancelled())
        raise recap.Cancelled("gave up")

    c = recap.Compactor(config=BACKGROUND, summarizer=summarize)
    for turn in range(12):
        c.append("s", chat_turns(1, tag="c%d-" % turn))
        if c.prepare("s").background_started or started.is_set():
            break
    assert started.wait(10)
    t0 = time.monotonic()
    c.close()
    assert time.monotonic() - t0 < 10
    assert saw == [True]
    assert not recap.cancelled()  # outside a summarizer call


def test_close_from_inside_a_callback_is_refused():
    holder = {}
    errors = []

    def summarize(request):
        try:
            holder["c"].close()
        except recap.FailedPrecondition as e:
            errors.append(str(e))
        return checkpoint_text(request)

    with recap.Compactor(config=SMALL, summarizer=summarize) as c:
        holder["c"] = c
        c.append("s", chat_turns(8))
        assert c.prepare("s").compactions == ["auto"]
    assert errors and "inside a call" in errors[0]
    holder.clear()


@pytest.mark.parametrize("where", ["summarizer", "on_event"])
def test_a_call_from_inside_a_callback_is_refused_not_a_hang(where):
    # Issue 35 (2): prepare or plan from a callback of the same Compactor waited forever for
    # the session its own call held.
    holder = {}
    errors = []

    def call_back():
        c = holder["c"]
        for call in (lambda: c.prepare("s"), lambda: c.plan("s"), lambda: c.compact("s"),
                     lambda: c.recover("other", acknowledge=True)):
            try:
                call()
                errors.append(None)
            except recap.FailedPrecondition as e:
                errors.append(str(e))

    def summarize(request):
        if where == "summarizer":
            call_back()
        return checkpoint_text(request)

    def on_event(event):
        if where == "on_event" and event["type"] == "compaction_completed":
            call_back()

    with recap.Compactor(config=SMALL, summarizer=summarize, on_event=on_event) as c:
        holder["c"] = c
        c.append("s", chat_turns(8))
        assert c.prepare("s").compactions == ["auto"]
        assert c.plan("s") is not None  # outside the callback, it works
    assert len(errors) == 4
    for e in errors:
        assert e is not None and "from inside a callback" in e
    holder.clear()


def test_close_from_another_thread_stops_a_foreground_summarizer_that_waits():
    started = threading.Event()
    outcome = []

    def summarize(request):
        started.set()
        deadline = time.monotonic() + 20
        while not recap.cancelled() and time.monotonic() < deadline:
            time.sleep(0.01)
        raise recap.Cancelled("the host is closing")

    c = recap.Compactor(config=SMALL, summarizer=summarize)
    c.append("s", chat_turns(8))

    def host():
        try:
            outcome.append(c.prepare("s"))
        except recap.Error as e:
            outcome.append(e)

    thread = threading.Thread(target=host)
    thread.start()
    assert started.wait(10)
    t0 = time.monotonic()
    c.close()  # waits for the prepare, whose summarizer sees cancelled() and gives up
    thread.join()
    assert time.monotonic() - t0 < 10
    # The compaction failed and changed nothing; the prepare still returned what to send.
    assert isinstance(outcome[0], recap.Prepared), outcome
    assert outcome[0].compactions == [] and outcome[0].summarized_messages == 0


def test_an_http_summarizer_served_by_python_in_this_process():
    # recap's HTTP summarizer asks a server that runs on a Python thread of this very
    # process: it answers only because recap does not hold the GIL while it waits.
    import http.server
    import json as json_module

    seen = []

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_POST(self):
            body = json_module.loads(self.rfile.read(int(self.headers["Content-Length"])))
            seen.append((self.path, body, self.headers.get("Authorization")))
            reply = json_module.dumps({
                "id": "x", "object": "chat.completion", "model": body["model"],
                "choices": [{"index": 0, "finish_reason": "stop", "message": {
                    "role": "assistant", "content": checkpoint_text(
                        {"messages": [{"content": body["messages"][-1]["content"]}]})}}],
                "usage": {"prompt_tokens": 900, "completion_tokens": 60}}).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(reply)))
            self.end_headers()
            self.wfile.write(reply)

        def log_message(self, *args):
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        try:
            provider = recap.HttpProvider(
                "openai_chat", "http://127.0.0.1:%d/v1" % server.server_port, "test-model",
                api_key="sk-test-key-42", timeout_ms=20000, max_retries=0)
        except recap.FailedPrecondition:
            pytest.skip("this recap has no HTTP component")
        with recap.Compactor(config=SMALL, summarizer=provider) as c:
            c.append("s", chat_turns(8))
            prepared = c.prepare("s")
        assert prepared.compactions == ["auto"], seen
        assert prepared.summarizer_usage == {"prompt_tokens": 900, "completion_tokens": 60}
        path, body, authorization = seen[0]
        assert path == "/v1/chat/completions" and body["model"] == "test-model"
        assert authorization == "Bearer sk-test-key-42"
        assert "sk-test-key-42" not in repr(provider)
    finally:
        server.shutdown()
        server.server_close()


def test_an_http_option_error_names_the_python_arguments():
    # R16: recap says what to change in the words of this module (HttpProvider's arguments),
    # from the remedies the C API lists as data, not by matching its sentences.
    try:
        recap.HttpProvider("openai_chat", "http://127.0.0.1:9/v1", "m", api_key="k")
    except recap.FailedPrecondition:
        pytest.skip("this recap has no HTTP component")
    with pytest.raises(recap.InvalidArgument) as raised:
        recap.HttpProvider("openai_chat", "http://10.1.2.3/v1", "m", api_key="sk-secret-77")
    message = str(raised.value)
    assert 'base_url "http://10.1.2.3/v1" is plain http://' in message, message
    assert "api_key would be sent over it in cleartext" in message, message
    assert "or set allow_insecure_http=True if the network is yours" in message, message
    for other_words in ("HttpProviderOptions", "allowInsecureHttp", "baseUrl", "apiKey"):
        assert other_words not in message, message
    assert "secret" not in message
    with pytest.raises(recap.InvalidArgument) as raised:
        recap.HttpProvider("openai_chat", "https://x/v1", "m", api_key="k", timeout_ms=0)
    assert "timeout_ms" in str(raised.value) and "timeoutMs" not in str(raised.value)
