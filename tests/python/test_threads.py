"""The GIL is released while recap works, and a Compactor serves several Python threads."""

import ctypes
import threading
import time

import recap
from conftest import chat_turns


def big_session(compactor, session):
    """A session of 12,000 messages (6 MB) that fits the window below: each prepare encodes all
    of it, which takes recap over 50 ms (the offline summarizer compacts even 10 MB in less)."""
    for chunk in range(60):
        compactor.append(session, chat_turns(100, chars=500, tag="b%d-" % chunk))


CONFIG = {"provider": {"contextWindow": 10000000}, "limits": {"maxContextChars": 100000000}}


def ticks_during(call):
    """Runs call() while another thread records the time as often as it can; returns the
    ticks that fell strictly inside the call, how long it took, and the longest time inside
    it without a tick."""
    ticks = []
    stop = threading.Event()

    def tick():
        while not stop.is_set():
            ticks.append(time.perf_counter())
            time.sleep(0.0005)

    ticker = threading.Thread(target=tick)
    ticker.start()
    time.sleep(0.02)  # the ticker runs
    start = time.perf_counter()
    call()
    end = time.perf_counter()
    stop.set()
    ticker.join()
    inside = [t for t in ticks if start < t < end]
    bounds = [start] + inside + [end]
    silence = max(b - a for a, b in zip(bounds, bounds[1:]))
    return inside, end - start, silence


def test_the_gil_is_released_while_recap_works():
    with recap.Compactor(config=CONFIG, summarizer="offline") as c:
        big_session(c, "s")
        result = []
        inside, took, silence = ticks_during(lambda: result.append(c.prepare("s")))
        assert len(result[0].messages) == 12000
        assert took >= 0.05, "the prepare took %.3f s, too short to tell" % took
        assert len(inside) >= 10, "%d ticks in %.3f s" % (len(inside), took)
        assert silence < took / 2

        # The control: the same call made holding the GIL (ctypes.PyDLL) lets no tick in
        # while recap works, which is what the figures above would be if the module held it:
        # a silence of most of the call (a few ticks may still fall in the Python just
        # before or after the foreign call).
        held = ctypes.PyDLL(recap.library_path)
        held.recap_prepare.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_char_p,
                                       ctypes.c_void_p, ctypes.POINTER(ctypes.c_void_p),
                                       ctypes.POINTER(ctypes.c_void_p)]
        out, error = ctypes.c_void_p(), ctypes.c_void_p()
        codes = []
        inside, took, silence = ticks_during(lambda: codes.append(held.recap_prepare(
            c._state.handle, b"s", b"openai-chat", None, ctypes.byref(out),
            ctypes.byref(error))))
        assert codes == [0]
        recap._free(out)
        assert took >= 0.02 and silence >= took * 0.75, \
            "%d ticks in %.3f s, longest silence %.3f s" % (len(inside), took, silence)


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
