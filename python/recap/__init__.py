"""recap keeps an LLM agent's conversation inside its model's context window.

A Python agent host calls it once per turn::

    import recap

    compactor = recap.Compactor(store="sqlite:sessions.db", summarizer=my_summarize)
    compactor.append("session-42", {"role": "user", "content": "Fix the failing test."})
    prepared = compactor.prepare("session-42", instructions_chars=len(system_prompt))
    body = b'{"model": "gpt-4.1", "messages": ' + prepared.messages_bytes + b"}"

The module is pure Python over recap's C API (include/recap/c/recap.h), loaded with ctypes
from the shared library ``_recap_c`` next to this file (or the file named by the environment
variable ``RECAP_C_LIBRARY``). Every call into recap releases the GIL while recap works; the
summarizer and event callables take it back when recap calls them. docs/python.md says more.
"""

import atexit
import ctypes
import itertools
import json
import logging
import os
import re
import sys
import threading

__all__ = [
    "Compactor", "Prepared", "Summarizer", "HttpProvider", "cancelled", "FORMATS",
    "Error", "InvalidArgument", "NotFound", "Conflict", "Corruption", "IoError",
    "Unavailable", "DeadlineExceeded", "Cancelled", "ContextBudgetExceeded",
    "FailedPrecondition", "ResourceExhausted", "Internal", "library_path",
]

_log = logging.getLogger("recap")

#: The message formats recap reads and writes (the ``format`` argument).
FORMATS = ("openai-chat", "anthropic", "openai-responses", "recap")

# --- errors ---------------------------------------------------------------------------------


class Error(Exception):
    """A failure recap reported: ``code`` is its name (``"invalid_argument"``, …), ``number``
    the C API's code, and ``str(error)`` recap's message, which says what was wrong and what to
    do. Raised by recap, each code is the subclass of that name; a summarizer may raise one
    (or ``Error(message, code="unavailable")``) to fail with that code."""

    code = "unknown"
    number = None

    def __init__(self, message="", code=None):
        super().__init__(message)
        self.message = message
        if code is not None:
            if code not in _CODE_NUMBERS:
                raise ValueError("recap.Error: unknown code %r; the codes are %s"
                                 % (code, ", ".join(_CODE_NUMBERS)))
            self.code = code
            self.number = _CODE_NUMBERS[code]

    def __repr__(self):
        return "%s(%r, code=%r)" % (type(self).__name__, self.message, self.code)


class InvalidArgument(Error, ValueError):
    """Bad input: JSON that does not decode, an unknown format, role or configuration key, a
    value of the wrong type."""
    code, number = "invalid_argument", 1


class NotFound(Error, LookupError):
    """What was asked for does not exist."""
    code, number = "not_found", 2


class Conflict(Error):
    """Another writer changed the session first."""
    code, number = "conflict", 3


class Corruption(Error):
    """Stored data that does not read back."""
    code, number = "corruption", 4


class IoError(Error):
    """The store could not read or write."""
    code, number = "io_error", 5


class Unavailable(Error):
    """A service (the summarizer, a database) did not answer; it may pass."""
    code, number = "unavailable", 6


class DeadlineExceeded(Error):
    """A call ran out of time."""
    code, number = "deadline_exceeded", 7


class Cancelled(Error):
    """The work was cancelled (the Compactor is being closed)."""
    code, number = "cancelled", 8


class ContextBudgetExceeded(Error):
    """The conversation cannot be made to fit the window; the message says what the host can
    do."""
    code, number = "context_budget_exceeded", 9


class FailedPrecondition(Error):
    """The call cannot be made in this state (a closed Compactor, tool calls without results
    to recover, a component this build of recap lacks)."""
    code, number = "failed_precondition", 10


class ResourceExhausted(Error):
    """Out of memory, or a request too long for the summarizer's model."""
    code, number = "resource_exhausted", 11


class Internal(Error):
    """A bug in recap (please report it)."""
    code, number = "internal", 12


_ERRORS = {cls.number: cls for cls in (
    InvalidArgument, NotFound, Conflict, Corruption, IoError, Unavailable, DeadlineExceeded,
    Cancelled, ContextBudgetExceeded, FailedPrecondition, ResourceExhausted, Internal)}
_CODE_NUMBERS = {cls.code: number for number, cls in _ERRORS.items()}

_UNAVAILABLE = 6
_CANCELLED = 8
_INVALID_ARGUMENT = 1
_INTERNAL = 12

# --- the library ----------------------------------------------------------------------------


def _find_library():
    here = os.path.dirname(os.path.abspath(__file__))
    for name in ("_recap_c.so", "_recap_c.dylib", "_recap_c.dll"):
        candidate = os.path.join(here, name)
        if os.path.exists(candidate):
            return candidate
    named = os.environ.get("RECAP_C_LIBRARY")
    if named:
        return named
    raise ImportError(
        "recap: the shared library _recap_c is not next to %s and RECAP_C_LIBRARY is not set; "
        "build recap with CMake (-DRECAP_BUILD_PYTHON=ON) and put <build>/python on "
        "PYTHONPATH, or install it (docs/python.md)" % __file__)


#: The path of the shared library this module calls.
library_path = _find_library()
_lib = ctypes.CDLL(library_path)

_vp = ctypes.c_void_p
_out = ctypes.POINTER(ctypes.c_void_p)
_SUMMARIZE_FN = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_char_p, ctypes.c_void_p)
_FREE_FN = ctypes.CFUNCTYPE(None, ctypes.c_void_p)
_EVENT_FN = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_char_p)


class _Sizes(ctypes.Structure):
    _fields_ = [("instructions_chars", ctypes.c_size_t),
                ("tool_catalog_chars", ctypes.c_size_t),
                ("profile_context_window", ctypes.c_size_t)]


def _declare(name, restype, *argtypes):
    function = getattr(_lib, name)
    function.restype = restype
    function.argtypes = list(argtypes)
    return function


_c_int, _c_char_p, _c_size_t = ctypes.c_int, ctypes.c_char_p, ctypes.c_size_t
_code_name = _declare("recap_code_name", _c_char_p, _c_int)
_version = _declare("recap_version", _c_char_p)
_free = _declare("recap_free", None, _vp)
_store_open = _declare("recap_store_open", _c_int, _c_char_p, _out, _out)
_store_free = _declare("recap_store_free", None, _vp)
_provider_new_offline = _declare("recap_provider_new_offline", _c_int, _out, _out)
_provider_new_http = _declare("recap_provider_new_http", _c_int, _c_char_p, _out, _out)
_provider_new_callback = _declare("recap_provider_new_callback", _c_int, _c_char_p, _c_size_t,
                                  _SUMMARIZE_FN, _vp, _FREE_FN, _out, _out)
_reply_text = _declare("recap_reply_text", _c_int, _vp, _c_char_p, _c_int, ctypes.c_uint64,
                       ctypes.c_uint64)
_reply_fail = _declare("recap_reply_fail", _c_int, _vp, _c_int, _c_char_p)
_reply_cancelled = _declare("recap_reply_cancelled", _c_int, _vp)
_provider_free = _declare("recap_provider_free", None, _vp)
_compactor_new = _declare("recap_compactor_new", _c_int, _c_char_p, _vp, _vp, _EVENT_FN, _vp,
                          _out, _out)
_compactor_free = _declare("recap_compactor_free", None, _vp)
_append = _declare("recap_append", _c_int, _vp, _c_char_p, _c_char_p, _c_char_p,
                   ctypes.POINTER(ctypes.c_uint64), _out)
_prepare = _declare("recap_prepare", _c_int, _vp, _c_char_p, _c_char_p,
                    ctypes.POINTER(_Sizes), _out, _out)
_plan = _declare("recap_plan", _c_int, _vp, _c_char_p, ctypes.POINTER(_Sizes), _out, _out)
_compact = _declare("recap_compact", _c_int, _vp, _c_char_p, _c_char_p, ctypes.POINTER(_Sizes),
                    _out, _out)
_recover = _declare("recap_recover", _c_int, _vp, _c_char_p, _c_int, _out, _out)
_report_overflow = _declare("recap_report_overflow", _c_int, _vp, _c_char_p, _c_size_t, _out)
_report_prompt_tokens = _declare("recap_report_prompt_tokens", _c_int, _vp, _c_char_p, _c_size_t,
                                 _out)

#: The version of the recap library, e.g. "0.1.0".
__version__ = _version().decode("ascii")


def _taken(pointer):
    """The text of a string recap returned, which is then freed."""
    try:
        return ctypes.string_at(pointer).decode("utf-8", "replace")
    finally:
        _free(pointer)


def _taken_bytes(pointer):
    """The bytes of a string recap returned, which is then freed."""
    try:
        return ctypes.string_at(pointer)
    finally:
        _free(pointer)


# The C functions' names in recap's messages, in the words of this module.
_PYTHON_WORDS = {
    "recap_store_open": "the store",
    "recap_provider_new_http": "HttpProvider",
    "recap_provider_new_callback": "Summarizer",
    "recap_compactor_new": "Compactor()",
    "recap_append": "append",
    "recap_prepare": "prepare",
    "recap_plan": "plan",
    "recap_compact": "compact",
    "recap_recover": "recover",
    "recap_report_overflow": "report_overflow",
    "recap_report_prompt_tokens": "report_prompt_tokens",
    "`messages_json`": "messages",
    "`options_json`": "the options",
    "`config_json`": "config",
}
_C_WORDS = re.compile("|".join(re.escape(k) for k in sorted(_PYTHON_WORDS, key=len, reverse=True)))


def _in_python_words(message):
    """recap's message with the C API's names (recap_append, `messages_json`) as Python says
    them (append, messages)."""
    return _C_WORDS.sub(lambda m: _PYTHON_WORDS[m.group(0)], message)


def _raise(code, error):
    """Raises the Error of a failed call, with recap's message."""
    message = _in_python_words(_taken(error.value)) if error.value else ""
    cls = _ERRORS.get(code)
    if cls is None:
        raise Error("recap returned code %d (%s): %s"
                    % (code, _code_name(code).decode("ascii"), message))
    raise cls(message)


def _utf8(value, what):
    """`value` as the NUL-terminated UTF-8 recap reads; a str holding NUL would be cut short
    there without a word, so it is refused."""
    if isinstance(value, str):
        try:
            data = value.encode("utf-8")
        except UnicodeEncodeError as e:
            raise InvalidArgument("recap: %s is not valid Unicode text (%s)" % (what, e)) from None
    elif isinstance(value, (bytes, bytearray)):
        data = bytes(value)
    else:
        raise InvalidArgument("recap: %s must be a str, not %s" % (what, type(value).__name__))
    if b"\0" in data:
        raise InvalidArgument("recap: %s holds a NUL character, which recap cannot take" % what)
    return data


def _count(value, what):
    """A size recap takes as size_t: a whole number of at least 0."""
    if value is None:
        return 0
    if isinstance(value, bool) or not isinstance(value, int):
        raise InvalidArgument("recap: %s must be a whole number, not %s"
                              % (what, type(value).__name__))
    if value < 0 or value >= 1 << 63:
        raise InvalidArgument("recap: %s must be a whole number from 0, not %d" % (what, value))
    return value


def _sizes(instructions_chars, tool_catalog_chars, context_window):
    return _Sizes(_count(instructions_chars, "instructions_chars"),
                  _count(tool_catalog_chars, "tool_catalog_chars"),
                  _count(context_window, "context_window"))


def _json_text(value, what):
    """A message, list of messages or configuration as JSON text: a str or bytes as it is,
    anything else through json.dumps."""
    if isinstance(value, (str, bytes, bytearray)):
        return _utf8(value, what)
    try:
        text = json.dumps(value, ensure_ascii=False, allow_nan=False)
    except (TypeError, ValueError) as e:
        raise InvalidArgument("recap: %s is not JSON-serializable: %s" % (what, e)) from None
    return _utf8(text, what)


# --- callbacks ------------------------------------------------------------------------------
# One C function pointer for each kind of callback, for the life of the module: the Python
# callables are found through the user_data number recap hands back, so no ctypes thunk is
# ever freed while recap may call it. _summarizers loses its entry when recap calls
# free_user_data (the provider's last holder went); _events when the Compactor is freed.

_ids = itertools.count(1)
_summarizers = {}
_events = {}
_local = threading.local()


def _inside():
    """How deep this thread is in calls and callbacks of each Compactor (by token)."""
    inside = getattr(_local, "inside", None)
    if inside is None:
        inside = _local.inside = {}
    return inside


def _enter(token):
    inside = _inside()
    inside[token] = inside.get(token, 0) + 1


def _leave(token):
    inside = _inside()
    depth = inside.get(token, 0) - 1
    if depth > 0:
        inside[token] = depth
    else:
        inside.pop(token, None)


def cancelled():
    """True once the summarizer call this thread is answering should stop: its Compactor is
    being closed (recap cancelled a background compaction, or close() waits for this call).
    A long summarizer polls it and returns soon when it turns True (raising recap.Cancelled,
    say); the compaction then fails and changes nothing. False outside a summarizer call."""
    answering = getattr(_local, "reply", None)
    if answering is None:
        return False
    reply, state = answering
    return state.handle is None or _reply_cancelled(reply) != 0


def _failure(code, message, reply):
    _reply_fail(reply, code, message.encode("utf-8", "replace").replace(b"\0", b" "))


def _answer(entry, request, reply):
    """Calls the host's summarizer with the request and answers recap with what it gives."""
    try:
        parsed = json.loads(request.decode("utf-8"))
        result = entry.function(parsed)
    except Error as e:
        _failure(e.number or _UNAVAILABLE, str(e) or e.code, reply)
        return
    except Exception as e:
        _log.warning("recap: the summarizer %s raised %s", entry.name, type(e).__name__,
                     exc_info=True)
        _failure(_UNAVAILABLE, "%s: %s" % (type(e).__name__, e), reply)
        return
    except BaseException as e:  # KeyboardInterrupt, SystemExit: nothing to hand them to here
        _failure(_CANCELLED, "%s: %s" % (type(e).__name__, e), reply)
        return
    truncated, prompt_tokens, completion_tokens = False, 0, 0
    if isinstance(result, dict):
        text = result.get("text")
        truncated = result.get("truncated", False)
        usage = result.get("usage") or {}
        if not isinstance(usage, dict):
            return _failure(_INVALID_ARGUMENT, "the summarizer '%s' returned a `usage` that is %s, "
                            "not a dict" % (entry.name, type(usage).__name__), reply)
        prompt_tokens = usage.get("prompt_tokens") or 0
        completion_tokens = usage.get("completion_tokens") or 0
        for name, value in (("usage.prompt_tokens", prompt_tokens),
                            ("usage.completion_tokens", completion_tokens)):
            if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value < 1 << 64:
                return _failure(_INVALID_ARGUMENT, "the summarizer '%s' returned `%s` %r; it must "
                                "be a whole number from 0" % (entry.name, name, value), reply)
    else:
        text = result
    if not isinstance(text, str):
        return _failure(_INVALID_ARGUMENT, "the summarizer '%s' returned %s; it must return the "
                        "model's text as a str, or a dict {\"text\": str, \"truncated\": bool, "
                        "\"usage\": {...}}" % (entry.name, type(text).__name__), reply)
    try:
        data = text.encode("utf-8")
    except UnicodeEncodeError as e:
        return _failure(_INVALID_ARGUMENT, "the summarizer '%s' returned text that is not valid "
                        "Unicode (%s)" % (entry.name, e), reply)
    if b"\0" in data:
        return _failure(_INVALID_ARGUMENT, "the summarizer '%s' returned text holding a NUL "
                        "character" % entry.name, reply)
    _reply_text(reply, data, 1 if truncated else 0, prompt_tokens, completion_tokens)


def _on_summarize(user_data, request, reply):
    entry = _summarizers.get(user_data)
    if entry is None:  # cannot happen while the provider lives; answered all the same
        _failure(_INTERNAL, "recap (Python): the summarizer is gone", reply)
        return
    previous = getattr(_local, "reply", None)
    _local.reply = (reply, entry.state)
    _enter(entry.state.token)
    try:
        _answer(entry, request, reply)
    except BaseException as e:  # a bug here must not leave recap without an answer
        _failure(_INTERNAL, "recap (Python): %s: %s" % (type(e).__name__, e), reply)
    finally:
        _leave(entry.state.token)
        _local.reply = previous


def _on_free(user_data):
    _summarizers.pop(user_data, None)


def _on_event(user_data, event_json):
    entry = _events.get(user_data)
    if entry is None:
        return
    _enter(entry.state.token)
    try:
        entry.function(json.loads(event_json.decode("utf-8", "replace")))
    except BaseException:
        # recap's rule for event sinks: one that fails never disturbs the work it reports.
        _log.exception("recap: the event callable raised; the event was dropped")
    finally:
        _leave(entry.state.token)


_SUMMARIZE_THUNK = _SUMMARIZE_FN(_on_summarize)
_FREE_THUNK = _FREE_FN(_on_free)
_EVENT_THUNK = _EVENT_FN(_on_event)
_NO_EVENTS = _EVENT_FN()  # NULL


class _Entry:
    __slots__ = ("function", "name", "state")

    def __init__(self, function, name, state):
        self.function = function
        self.name = name
        self.state = state


# --- summarizers ----------------------------------------------------------------------------


class Summarizer:
    """A summarizer of the host's own: ``function(request)`` is called with the request as a
    dict ``{"system": str, "messages": [{"role": "user", "content": str}],
    "max_output_tokens": int, "json_schema": dict or None}`` (``messages`` in OpenAI chat
    form) and returns the model's text as a str, or a dict ``{"text": str, "truncated": bool,
    "usage": {"prompt_tokens": int, "completion_tokens": int}}``. An exception it raises fails
    the compaction (which then changes nothing): a recap.Error with its code, any other as
    ``unavailable`` with ``"TypeName: message"``.

    ``name`` is the summarizer's name in events; ``context_window`` its model's window in
    tokens (None: the configuration says it). A plain callable given as ``summarizer`` is
    wrapped in one with the defaults."""

    def __init__(self, function, name="python", context_window=None):
        if not callable(function):
            raise InvalidArgument("recap.Summarizer: %r is not callable" % (function,))
        self.function = function
        self.name = name
        self.context_window = _count(context_window, "context_window")

    def __repr__(self):
        return "recap.Summarizer(%r, name=%r, context_window=%r)" % (
            self.function, self.name, self.context_window or None)


_HTTP_OPTIONS = (
    ("api_key", "apiKey"), ("api_key_env", "apiKeyEnv"), ("extra_headers", "extraHeaders"),
    ("connect_timeout_ms", "connectTimeoutMs"), ("timeout_ms", "timeoutMs"),
    ("max_retries", "maxRetries"), ("retry_base_delay_ms", "retryBaseDelayMs"),
    ("max_retry_delay_ms", "maxRetryDelayMs"), ("allow_insecure_http", "allowInsecureHttp"),
    ("verify_tls", "verifyTls"), ("ca_path", "caPath"), ("structured_output", "structuredOutput"),
    ("anthropic_version", "anthropicVersion"), ("max_tokens_field", "maxTokensField"),
    ("stream", "stream"), ("context_window", "contextWindow"), ("name", "name"))


class HttpProvider:
    """One of recap's HTTP summarizers (docs/http-provider.md): ``protocol`` is
    ``"openai_chat"``, ``"anthropic"``, ``"openai_responses"``, ``"openai_compact"`` or
    ``"anthropic_compact"``; the options are those of the C API's recap_provider_new_http in
    snake_case (``api_key_env="OPENAI_API_KEY"``, ``timeout_ms=…``, ``extra_headers={…}``).
    The options are checked here (recap.InvalidArgument names a bad one). recap makes the
    requests itself, with the GIL released. The key never shows in repr or in any message."""

    def __init__(self, protocol, base_url, model, **options):
        known = dict(_HTTP_OPTIONS)
        unknown = sorted(set(options) - set(known))
        if unknown:
            raise InvalidArgument("recap.HttpProvider: unknown option %s; the options are %s"
                                  % (", ".join(unknown), ", ".join(known)))
        self.protocol, self.base_url, self.model = protocol, base_url, model
        self._options = {"protocol": protocol, "baseUrl": base_url, "model": model}
        for name, value in options.items():
            if value is not None:
                self._options[known[name]] = value
        self._handle = None
        self._handle = self._new()

    def _new(self):
        text = _json_text(self._options, "the HttpProvider's options")
        handle, error = _vp(), _vp()
        code = _provider_new_http(text, ctypes.byref(handle), ctypes.byref(error))
        if code != 0:
            _raise(code, error)
        return handle

    def __repr__(self):
        shown = []
        for key, value in self._options.items():
            if key == "apiKey":
                value = "<hidden>"
            elif key == "extraHeaders" and isinstance(value, dict):
                value = {name: "<hidden>" for name in value}
            shown.append("%s=%r" % (key, value))
        return "recap.HttpProvider(%s)" % ", ".join(shown)

    def __del__(self):
        handle, self._handle = getattr(self, "_handle", None), None
        if handle is not None and _provider_free is not None:
            _provider_free(handle)


# --- what prepare returns -------------------------------------------------------------------


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


# strlen from the C library, to view a result in recap's memory without copying it first.
_strlen = ctypes.CDLL(None).strlen
_strlen.restype = ctypes.c_size_t
_strlen.argtypes = [_vp]


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


# --- the compactor --------------------------------------------------------------------------


class _State:
    """A Compactor's handle and the calls in flight on it, apart from the Compactor object so
    that it can be closed after that object is gone."""

    def __init__(self):
        self.handle = None
        self.calls = 0
        self.cond = threading.Condition(threading.Lock())
        self.token = object()
        self.event_id = None

    def begin(self):
        with self.cond:
            handle = self.handle
            if handle is None:
                raise FailedPrecondition("recap: this Compactor is closed; create another")
            self.calls += 1
        _enter(self.token)
        return handle

    def end(self):
        _leave(self.token)
        with self.cond:
            self.calls -= 1
            if self.calls == 0:
                self.cond.notify_all()

    def close(self):
        if _inside().get(self.token):
            raise FailedPrecondition(
                "recap: Compactor.close() was called from inside a call or a callback of the "
                "same Compactor; close it after that call returns")
        with self.cond:
            handle, self.handle = self.handle, None
            if handle is None:
                return
            # Calls that began before run to their end; new ones are refused.
            while self.calls:
                self.cond.wait()
        # Cancels and joins background compactions (their summarizer sees cancelled()), then
        # frees the provider, whose free_user_data drops the summarizer's entry.
        _compactor_free(handle)
        if self.event_id is not None:
            _events.pop(self.event_id, None)
        _open.discard(self)


_open = set()


@atexit.register
def _close_all():
    # Before the interpreter goes away: recap's worker threads must not call into it after.
    for state in list(_open):
        try:
            state.close()
        except Exception:
            pass


class Compactor:
    """recap for one agent host: sessions in a store, summarized by a summarizer, events to
    a callable. Thread-safe: its methods may be called from several threads; calls for one
    session are serialized, calls for different sessions run in parallel, and none holds the
    GIL while recap works.

    ``config``: recap's configuration as a dict or JSON text (docs/configuration.md), e.g.
    ``{"provider": {"contextWindow": 128000}, "compaction": {"keepTurns": 2}}``; None for the
    defaults. ``store``: None or ``"memory"`` for a new in-memory store, ``"sqlite:PATH"`` for
    a SQLite file (created when missing), or a ``postgresql://`` URL. ``summarizer``: None or
    ``"offline"`` for recap's offline summarizer (no model), a callable or
    :class:`Summarizer` (the host's own model client), or an :class:`HttpProvider`.
    ``on_event``: a callable given each event (docs/events.md) as a dict, on the thread that
    caused it; an exception it raises is logged and dropped.

    Use it as a context manager, or call :meth:`close`.
    """

    def __init__(self, config=None, store=None, summarizer=None, on_event=None):
        self._state = state = _State()
        config_text = None if config is None else _json_text(config, "config")
        if on_event is not None and not callable(on_event):
            raise InvalidArgument("recap.Compactor: on_event must be callable, not %s"
                                  % type(on_event).__name__)
        store_handle, provider_handle, error = _vp(), _vp(), _vp()
        owned_provider = True
        try:
            if store is not None:
                where = _utf8(store, "store")
                code = _store_open(where, ctypes.byref(store_handle), ctypes.byref(error))
                if code != 0:
                    _raise(code, error)
            if summarizer is None:
                pass
            elif isinstance(summarizer, str):
                if summarizer != "offline":
                    raise InvalidArgument("recap.Compactor: summarizer %r is no summarizer; "
                                          "give None or \"offline\", a callable, a "
                                          "recap.Summarizer or a recap.HttpProvider"
                                          % summarizer)
                code = _provider_new_offline(ctypes.byref(provider_handle), ctypes.byref(error))
                if code != 0:
                    _raise(code, error)
            elif isinstance(summarizer, HttpProvider):
                provider_handle = summarizer._handle
                owned_provider = False
            else:
                if not isinstance(summarizer, Summarizer):
                    summarizer = Summarizer(summarizer)
                name = _utf8(str(summarizer.name), "the summarizer's name")
                entry_id = next(_ids)
                _summarizers[entry_id] = _Entry(summarizer.function, summarizer.name, state)
                code = _provider_new_callback(name, summarizer.context_window, _SUMMARIZE_THUNK,
                                              entry_id, _FREE_THUNK,
                                              ctypes.byref(provider_handle), ctypes.byref(error))
                if code != 0:
                    _summarizers.pop(entry_id, None)
                    _raise(code, error)
            event_fn = _NO_EVENTS
            if on_event is not None:
                state.event_id = next(_ids)
                _events[state.event_id] = _Entry(on_event, "on_event", state)
                event_fn = _EVENT_THUNK
            handle = _vp()
            code = _compactor_new(config_text, provider_handle, store_handle, event_fn,
                                  state.event_id, ctypes.byref(handle), ctypes.byref(error))
            if code != 0:
                _raise(code, error)
            state.handle = handle.value
            _open.add(state)
        except BaseException:
            if state.event_id is not None:
                _events.pop(state.event_id, None)
            raise
        finally:
            # The compactor keeps its store and provider: the handles go now.
            if store_handle.value:
                _store_free(store_handle)
            if owned_provider and provider_handle.value:
                _provider_free(provider_handle)

    # -- the per-turn calls

    def append(self, session, message, format="openai-chat"):
        """Appends a message (a dict), a list of messages or JSON text of either, in
        ``format``, at the end of ``session`` (created when new), and returns the session's
        new version. All or nothing: a message that does not decode appends nothing, and the
        error names it by its JSON path."""
        session_b = _utf8(session, "session")
        format_b = _utf8(format, "format")
        text = _json_text(message, "the message")
        version, error = ctypes.c_uint64(), _vp()
        handle = self._state.begin()
        try:
            code = _append(handle, session_b, format_b, text, ctypes.byref(version),
                           ctypes.byref(error))
        finally:
            self._state.end()
        if code != 0:
            _raise(code, error)
        return version.value

    def prepare(self, session, format="openai-chat", instructions_chars=0, tool_catalog_chars=0,
                context_window=None):
        """The per-turn call, right before each model request: compacts when a trigger fires,
        clips what is over the hard limit, and returns a :class:`Prepared` with the messages
        to send after the host's instructions, in ``format``. ``instructions_chars`` and
        ``tool_catalog_chars`` are the sizes of what the host sends beside them;
        ``context_window`` a window in tokens the host knows from its model's profile.
        Raises ContextBudgetExceeded when the conversation cannot be made to fit."""
        session_b = _utf8(session, "session")
        format_b = _utf8(format, "format")
        sizes = _sizes(instructions_chars, tool_catalog_chars, context_window)
        result, error = _vp(), _vp()
        handle = self._state.begin()
        try:
            code = _prepare(handle, session_b, format_b, ctypes.byref(sizes),
                            ctypes.byref(result), ctypes.byref(error))
        finally:
            self._state.end()
        if code != 0:
            _raise(code, error)
        messages_bytes, system, figures = _taken_prepared(result.value)
        return Prepared(messages_bytes, system, figures, format)

    def plan(self, session, instructions_chars=0, tool_catalog_chars=0, context_window=None):
        """What prepare would do now, without calling the model or writing, as a dict (the
        members of the C++ Plan; ``cut`` a dict)."""
        session_b = _utf8(session, "session")
        sizes = _sizes(instructions_chars, tool_catalog_chars, context_window)
        return self._json_call(_plan, session_b, ctypes.byref(sizes))

    def compact(self, session, focus=None, instructions_chars=0, tool_catalog_chars=0,
                context_window=None):
        """A manual compaction, ``focus`` added to the summarizer's instructions. Returns a
        dict: ``compacted``, ``skipped`` (why not, when it did not), ``summarized_messages``,
        ``before_chars``, ``after_chars``, ``checkpoint`` (its sections, or None),
        ``partial``, ``writer``, ``version``, ``provider_retired_messages``."""
        session_b = _utf8(session, "session")
        focus_b = None if focus is None else _utf8(focus, "focus")
        sizes = _sizes(instructions_chars, tool_catalog_chars, context_window)
        return self._json_call(_compact, session_b, focus_b, ctypes.byref(sizes))

    def recover(self, session, acknowledge=False):
        """Records, for each tool call without a result, that its outcome is unknown and it
        was not repeated (SPEC R8.3). Refused with FailedPrecondition naming the calls unless
        ``acknowledge`` is true. Returns ``{"recovered": [{"message", "call_id", "name"}],
        "version"}``."""
        session_b = _utf8(session, "session")
        return self._json_call(_recover, session_b, 1 if acknowledge else 0)

    def report_overflow(self, session, rejected_tokens=None):
        """The model rejected the last request of ``session`` as too long: the next prepare
        compacts, and the window is taken as at most ``rejected_tokens`` from now on (None:
        the estimate of the last request prepare returned)."""
        self._report(_report_overflow, session, _count(rejected_tokens, "rejected_tokens"))

    def report_prompt_tokens(self, session, prompt_tokens):
        """The provider's count of prompt tokens for the last request of ``session``, used by
        the window rule when compaction.calibrate is on."""
        self._report(_report_prompt_tokens, session, _count(prompt_tokens, "prompt_tokens"))

    # -- life

    def close(self):
        """Cancels and joins background compactions (a summarizer sees :func:`cancelled`),
        waits for calls other threads are making, and frees the compactor. Later calls raise
        FailedPrecondition; closing twice is fine."""
        self._state.close()

    @property
    def closed(self):
        """True once :meth:`close` was called."""
        return self._state.handle is None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
        return False

    def __del__(self):
        state = getattr(self, "_state", None)
        if state is None or state.handle is None or sys.is_finalizing():
            return
        try:
            if _inside().get(state.token):
                # Collected inside one of its own callbacks (on a recap worker thread, which
                # the close joins): closed from another thread instead.
                threading.Thread(target=state.close, daemon=True).start()
            else:
                state.close()
        except Exception:
            pass

    def __repr__(self):
        return "<recap.Compactor %s>" % ("closed" if self.closed else "open")

    # -- helpers

    def _json_call(self, function, *args):
        out, error = _vp(), _vp()
        handle = self._state.begin()
        try:
            code = function(handle, *args, ctypes.byref(out), ctypes.byref(error))
        finally:
            self._state.end()
        if code != 0:
            _raise(code, error)
        return json.loads(_taken(out.value))

    def _report(self, function, session, n):
        session_b = _utf8(session, "session")
        error = _vp()
        handle = self._state.begin()
        try:
            code = function(handle, session_b, n, ctypes.byref(error))
        finally:
            self._state.end()
        if code != 0:
            _raise(code, error)

