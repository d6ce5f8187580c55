"""What Compactor.prepare returns: recap_prepare's result cut into the messages' bytes, the
system text and the figures (without parsing the messages), as a Prepared."""

import ctypes
import json

from ._library import _free, _strlen


def _string_start(data, end):
    """The index of the quote that opens the JSON string whose closing quote is data[end]."""
    i = end
    while True:
        i = data.rfind(b'"', 0, i)
        if i <= 0:
            return -1
        slashes = 0
        while data[i - 1 - slashes] == 0x5C:  # backslash
            slashes += 1
        if slashes % 2 == 0:
            return i


def _split(data):
    """(messages_bytes, system, figures) of recap_prepare's result (UTF-8 bytes) without
    parsing the messages: it is '{"messages":' ARRAY [',"system":' STRING] ',"version":' …
    '}', the figures last, and they never hold the text ',"version":'. (UTF-8 never holds an
    ASCII byte inside another character, so the search is safe in bytes.)"""
    cut = data.rfind(b',"version":')
    if cut > 0 and data.startswith(b'{"messages":'):
        try:
            figures = json.loads(b"{" + data[cut + 1:])
        except ValueError:
            figures = None
        if isinstance(figures, dict):
            if data[cut - 1] == 0x5D:  # ]
                return data[12:cut], None, figures
            if data[cut - 1] == 0x22:  # "
                start = _string_start(data, cut - 1)
                if start > 0 and data.endswith(b'],"system":', 0, start):
                    return data[12:start - 10], json.loads(data[start:cut]), figures
    # Not the shape above (it never happens): parse it all.
    whole = json.loads(data)
    messages = whole.pop("messages")
    system = whole.pop("system", None)
    return json.dumps(messages, ensure_ascii=False).encode("utf-8"), system, whole


def _taken_prepared(pointer):
    """_split of recap_prepare's result read in place in recap's memory, which is then freed:
    the messages' bytes are copied once, straight into the bytes object a host sends (a whole
    copy of the result first would double the cost on a long session). A result with a
    "system" member, or of another shape, goes through _split on a copy."""
    view = None
    try:
        n = _strlen(pointer)
        view = memoryview((ctypes.c_char * n).from_address(pointer)).cast("B")
        tail_start = max(0, n - 65536)  # the figures are a few hundred bytes
        tail = bytes(view[tail_start:])
        cut = tail.rfind(b',"version":')
        if cut > 0 and bytes(view[:12]) == b'{"messages":' and tail[cut - 1] == 0x5D:  # ]
            try:
                figures = json.loads(b"{" + tail[cut + 1:])
            except ValueError:
                figures = None
            if isinstance(figures, dict):
                return bytes(view[12:tail_start + cut]), None, figures
        return _split(bytes(view))
    finally:
        if view is not None:
            view.release()
        _free(pointer)


class Prepared:
    """What :meth:`Compactor.prepare` returns: what to send, and what recap did.

    ``messages_bytes``: the transcript as JSON in the format asked for, UTF-8 bytes — put it
    in the request body as it is (the fast path: nothing is parsed or decoded; one copy of the
    bytes). ``messages_json``: the same as a str (decoded on first use; decoding is what costs
    in Python, about 10 ms a MB of text that is not ASCII). ``messages``: the same as Python
    objects (parsed on first use). ``system``: for ``"anthropic"``, the text of the session's
    leading system messages, which Anthropic carries outside ``messages`` (else None).

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

    def __init__(self, messages_bytes, system, figures, format):
        self.messages_bytes = messages_bytes
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
            self._messages_json = self.messages_bytes.decode("utf-8", "replace")
        return self._messages_json

    @property
    def messages(self):
        """The messages as Python objects (json.loads of messages_bytes, once)."""
        if self._messages is None:
            self._messages = json.loads(self.messages_bytes)
        return self._messages

    def __repr__(self):
        return ("<recap.Prepared version=%s after_chars=%s after_tokens=%s compactions=%s>"
                % (self.figures.get("version"), self.figures.get("after_chars"),
                   self.figures.get("after_tokens"), self.figures.get("compactions")))
