"""The summarizer and event callbacks recap calls: one C function pointer for each kind, the
host's callables behind them, the answers they give recap, and which Compactor calls each
thread is inside (cancelled() among them)."""

import itertools
import json
import logging
import threading

from ._errors import _CANCELLED, _INTERNAL, _INVALID_ARGUMENT, _UNAVAILABLE, Error
from ._library import (_EVENT_FN, _FREE_FN, _SUMMARIZE_FN, _reply_cancelled, _reply_fail,
                       _reply_text)

_log = logging.getLogger("recap")

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
