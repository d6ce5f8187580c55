"""R16.2 (issue 39): prepare writes into buffers the Compactor keeps (recap_prepare_to), and
Prepared.messages_bytes is a read-only view of the bytes there: no scan, no copy, no new memory
per turn. A buffer is written again only once nothing references its bytes."""

import ctypes
import gc
import json
import threading

import pytest

import recap
from recap._library import _free, _prepare, _Sizes, _vp

from conftest import chat_turns


def raw_prepare(compactor, session, format="openai-chat"):
    """recap_prepare's whole text for `session`, called on the Compactor's own handle."""
    out, error = _vp(), _vp()
    code = _prepare(compactor._state.handle, session.encode(), format.encode(),
                    ctypes.byref(_Sizes()), ctypes.byref(out), ctypes.byref(error))
    assert code == 0
    try:
        return ctypes.string_at(out.value)
    finally:
        _free(out)


def test_the_bytes_are_those_recap_prepare_writes(compactor):
    compactor.append("s", [{"role": "system", "content": "Be \"brief\" \u2603"}]
                     + chat_turns(3) + [{"role": "user", "content": "h\u00e9llo \U0001F600"}])
    compactor.append("r", [{"type": "message", "role": "user",
                            "content": [{"type": "input_text", "text": "hi"}]}],
                     format="openai-responses")
    for session, format in [("s", "openai-chat"), ("s", "anthropic"), ("s", "recap"),
                            ("r", "openai-responses")]:
        prepared = compactor.prepare(session, format=format)
        raw = raw_prepare(compactor, session, format)
        whole = json.loads(raw)
        assert raw[:12] == b'{"messages":'
        assert bytes(prepared.messages_bytes) == raw[12:12 + len(prepared.messages_bytes)]
        assert json.loads(bytes(prepared.messages_bytes)) == whole.pop("messages")
        assert prepared.system == whole.pop("system", None)
        assert prepared.figures == whole
        assert prepared.messages_json == bytes(prepared.messages_bytes).decode("utf-8")
    assert compactor.prepare("s", format="anthropic").system == "Be \"brief\" \u2603"


def test_messages_bytes_is_a_read_only_bytes_like_view(compactor):
    compactor.append("s", chat_turns(2))
    view = compactor.prepare("s").messages_bytes
    assert isinstance(view, memoryview) and view.readonly and view.format == "B"
    assert view[:1] == b"[" and view[-1:] == b"]"
    with pytest.raises(TypeError):
        view[0] = 0x20
    assert not hasattr(view, "decode")
    assert str(view, "utf-8") == bytes(view).decode("utf-8")
    assert b'{"messages": %s}' % view == b'{"messages": ' + view + b"}"


def test_a_view_kept_from_an_earlier_turn_keeps_that_turns_bytes(compactor):
    compactor.append("s", chat_turns(3, tag="a"))
    first = compactor.prepare("s").messages_bytes  # the Prepared itself is gone at once
    first_bytes = bytes(first)
    slice_of_first = first[1:-1]
    compactor.append("s", chat_turns(1, tag="b"))
    second = compactor.prepare("s")
    compactor.append("s", chat_turns(1, tag="c"))
    third = compactor.prepare("s")
    gc.collect()
    assert bytes(first) == first_bytes
    assert bytes(slice_of_first) == first_bytes[1:-1]
    assert len(second.messages) == 8 and len(third.messages) == 10
    assert len(json.loads(first_bytes)) == 6
    # Three buffers, one for each: none was written while a view of it lived.
    handles = {first.obj._recap_lent.handle, second._lent.handle, third._lent.handle}
    assert len(handles) == 3
    assert compactor._state.buffers.lent == 3


def test_a_dropped_prepared_gives_its_buffer_back_for_the_next_turn(compactor):
    buffers = compactor._state.buffers
    compactor.append("s", chat_turns(2))
    prepared = compactor.prepare("s")
    handle = prepared._lent.handle
    assert buffers.lent == 1 and buffers.free == []
    del prepared
    assert buffers.lent == 0 and buffers.free == [handle]
    # The next turn writes into it.
    compactor.append("s", chat_turns(1, tag="n"))
    again = compactor.prepare("s")
    assert again._lent.handle == handle and buffers.free == []
    assert len(again.messages) == 6
    # A view made from the Prepared keeps the buffer lent after the Prepared is gone.
    view = memoryview(again.messages_bytes)[10:20]
    kept = bytes(view)
    del again
    assert buffers.lent == 1 and buffers.free == []
    assert compactor.prepare("s")._lent.handle != handle
    assert bytes(view) == kept
    del view
    assert buffers.lent == 0 and handle in buffers.free


def test_at_most_a_few_buffers_wait(compactor):
    buffers = compactor._state.buffers
    compactor.append("s", chat_turns(1))
    held = [compactor.prepare("s") for _ in range(buffers.keep + 3)]
    assert buffers.lent == buffers.keep + 3
    del held
    assert buffers.lent == 0 and len(buffers.free) == buffers.keep


def test_a_failed_prepare_gives_the_buffer_back(compactor):
    buffers = compactor._state.buffers
    with pytest.raises(recap.InvalidArgument) as raised:
        compactor.prepare("s", format="gemini")
    assert "prepare" in str(raised.value) and "recap_prepare_to" not in str(raised.value)
    with pytest.raises(recap.NotFound):
        compactor.prepare("never appended")
    assert buffers.lent == 0 and len(buffers.free) == 1


@pytest.mark.parametrize("how", ["close", "del"])
def test_a_view_outlives_its_compactor_safely(how):
    compactor = recap.Compactor()
    buffers = compactor._state.buffers
    compactor.append("s", chat_turns(4))
    prepared = compactor.prepare("s")
    view = prepared.messages_bytes
    want = bytes(view)
    spare = compactor.prepare("s")
    del spare  # waits in the pool
    assert len(buffers.free) == 1
    if how == "close":
        compactor.close()
    else:
        del compactor
    gc.collect()
    assert buffers.closed and buffers.free == []  # the waiting one is freed
    assert bytes(view) == want and prepared.messages == json.loads(want)
    del prepared
    gc.collect()
    assert bytes(view) == want
    del view
    gc.collect()
    assert buffers.lent == 0 and buffers.free == []  # freed, not kept


def test_prepares_from_several_threads_each_read_their_own_bytes():
    with recap.Compactor() as compactor:
        for k in range(4):
            compactor.append("s%d" % k, chat_turns(k + 1, tag="s%d-" % k))
        failures = []

        def run(k):
            try:
                for turn in range(25):
                    prepared = compactor.prepare("s%d" % k)
                    if len(json.loads(bytes(prepared.messages_bytes))) != 2 * (k + 1):
                        failures.append((k, turn))
            except Exception as e:  # pragma: no cover - reported below
                failures.append(e)

        threads = [threading.Thread(target=run, args=(k,)) for k in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert failures == []
        assert compactor._state.buffers.lent == 0
