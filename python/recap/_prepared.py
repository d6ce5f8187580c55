"""What Compactor.prepare returns: recap_prepare_to's text in a buffer the Compactor lends, its
messages read in place (a read-only memoryview, neither copied nor parsed), its system text
and figures parsed, as a Prepared."""

import ctypes
import json
import sys
import threading

from ._library import _buffer_data, _buffer_free, _buffer_messages, _buffer_new, _buffer_size


class _Buffers:
    """A Compactor's recap_buffers (recap_prepare_to writes into them). prepare takes one that
    no Prepared reads (or makes one) and lends it; it comes back when nothing references the
    bytes in it any more, the Prepared and every view of them, so that the next turn writes
    into memory already mapped. At most ``keep`` wait here; the rest, and every one once the
    Compactor is closed, are freed."""

    def __init__(self, keep=2):
        self.keep = keep
        self.free = []  # handles no Prepared reads
        self.lent = 0  # handles Prepared objects read
        self.closed = False
        # Reentrant: a buffer may come back (a _Lent collected) on a thread that holds it.
        self.lock = threading.RLock()

    def take(self):
        with self.lock:
            handle = self.free.pop() if self.free else None
            self.lent += 1
        if handle is None:
            handle = _buffer_new()
            if not handle:
                with self.lock:
                    self.lent -= 1
                raise MemoryError("recap: out of memory for a buffer")
        return handle

    def give_back(self, handle):
        with self.lock:
            self.lent -= 1
            if not self.closed and len(self.free) < self.keep:
                self.free.append(handle)
                return
        _buffer_free(handle)

    def close(self):
        with self.lock:
            self.closed = True
            free, self.free = self.free, []
        for handle in free:
            _buffer_free(handle)


class _Lent:
    """A buffer lent to one Prepared: referenced by the view of its bytes (and so by every
    view made from that), it gives the buffer back when the last of them goes."""

    __slots__ = ("handle", "buffers")

    def __init__(self, handle, buffers):
        self.handle = handle
        self.buffers = buffers

    def __del__(self):
        if sys.is_finalizing():
            return  # the process is ending: its memory goes with it
        self.buffers.give_back(self.handle)


def _lent_prepared(handle, buffers):
    """(messages_bytes, system, figures, lent) of the text recap_prepare_to wrote into the
    buffer ``handle``, which ``buffers`` lent: the messages a read-only memoryview of the
    buffer's bytes that keeps it lent while it (or a view made from it) lives; after them,
    ',"system":' STRING (anthropic) and the figures, parsed. recap_buffer_messages says where
    the messages are, so nothing is scanned."""
    lent = _Lent(handle, buffers)
    data = _buffer_data(handle)
    size = _buffer_size(handle)
    at, length = ctypes.c_size_t(), ctypes.c_size_t()
    _buffer_messages(handle, ctypes.byref(at), ctypes.byref(length))
    end = at.value + length.value
    rest = json.loads(b"{" + ctypes.string_at(data + end + 1, size - end - 1))
    system = rest.pop("system", None)
    array = (ctypes.c_char * length.value).from_address(data + at.value)
    array._recap_lent = lent  # the bytes' lender lives as long as they may be read
    view = memoryview(array).cast("B").toreadonly()
    return view, system, rest, lent


class Prepared:
    """What :meth:`Compactor.prepare` returns: what to send, and what recap did.

    ``messages_bytes``: the transcript as JSON in the format asked for, UTF-8, as a read-only
    memoryview of the bytes recap wrote (a bytes-like object: ``b"..." + messages_bytes``,
    ``b"%s" % messages_bytes``, ``bytes(messages_bytes)``, a socket's ``sendall`` and a file's
    ``write`` take it; it has no ``.decode``: use ``messages_json``) — put it in the request
    body as it is (the fast path: nothing is parsed, decoded or copied). The bytes stay as they
    are while this Prepared or any view of them lives; their memory is reused by a later
    prepare only after the last goes. ``messages_json``: the same as a str (decoded on first
    use; decoding is what costs in Python, about 10 ms a MB of text that is not ASCII).
    ``messages``: the same as Python objects (parsed on first use). ``system``: for
    ``"anthropic"``, the text of the session's leading system messages, which Anthropic
    carries outside ``messages`` (else None).

    The figures, as attributes: ``version``, ``before_chars``, ``after_chars``,
    ``before_tokens``, ``after_tokens``, ``compactions`` (e.g. ``["auto"]``),
    ``reduced_messages``, ``summarized_messages``, ``summarizer_calls``, ``summarizer_usage``
    (a dict), ``cleared_tool_result_messages``, ``provider_retired_messages``,
    ``background_started``, ``background_swapped``, ``background_discarded``,
    ``background_in_flight``, ``background_wait_ms``, ``waited_for_summarizer``,
    ``window_tokens`` (None when unknown), ``window_source``, ``fallback_window_tokens``,
    ``trigger_rule``, ``over_window`` (True when the request exceeds the known window: the
    model will likely refuse it; shorten the instructions or tool catalog), ``orphan_results``
    (the call ids of tool results sent without their call before them: the model API will
    refuse the request); and all of them as the dict ``figures``."""

    def __init__(self, messages_bytes, system, figures, format, lent=None):
        self.messages_bytes = messages_bytes
        self._lent = lent  # the buffer the bytes are in (None: they are not in one)
        self._messages_json = None
        self.system = system
        self.format = format
        self.figures = figures
        self._messages = None
        for name, value in figures.items():
            if not hasattr(Prepared, name):
                setattr(self, name, value)

    @property
    def messages_json(self):
        """The messages as JSON text (messages_bytes decoded, once)."""
        if self._messages_json is None:
            self._messages_json = str(self.messages_bytes, "utf-8", "replace")
        return self._messages_json

    @property
    def messages(self):
        """The messages as Python objects (json.loads of messages_bytes, once)."""
        if self._messages is None:
            self._messages = json.loads(self._messages_json if self._messages_json is not None
                                        else str(self.messages_bytes, "utf-8", "replace"))
        return self._messages

    def __repr__(self):
        return ("<recap.Prepared version=%s after_chars=%s after_tokens=%s compactions=%s>"
                % (self.figures.get("version"), self.figures.get("after_chars"),
                   self.figures.get("after_tokens"), self.figures.get("compactions")))
