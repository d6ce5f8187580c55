"""The Compactor: recap for one agent host, over a handle of the C API, closed once the calls in
flight on it are done (and at exit)."""

import atexit
import ctypes
import json
import sys
import threading

from ._callbacks import (_EVENT_THUNK, _FREE_THUNK, _NO_EVENTS, _SUMMARIZE_THUNK, _Entry, _enter,
                         _events, _ids, _inside, _leave, _summarizers)
from ._convert import _count, _json_text, _raise, _sizes, _utf8
from ._errors import FailedPrecondition, InvalidArgument
from ._library import (_answer_recall, _append, _compact, _compactor_free, _compactor_new,
                       _plan, _prepare_to, _provider_free, _provider_new_callback,
                       _provider_new_offline, _recall, _recall_tool, _recover,
                       _report_overflow, _report_prompt_tokens, _store_free, _store_open,
                       _taken, _uncompact, _vp)
from ._prepared import Prepared, _Buffers, _lent_prepared
from ._summarizers import HttpProvider, Summarizer


class _State:
    """A Compactor's handle and the calls in flight on it, apart from the Compactor object so
    that it can be closed after that object is gone."""

    def __init__(self):
        self.handle = None
        self.calls = 0
        self.cond = threading.Condition(threading.Lock())
        self.token = object()
        self.event_id = None
        self.buffers = _Buffers()  # what prepare writes into

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
        # The buffers no Prepared reads; the others are freed as their last reader goes.
        self.buffers.close()
        if self.event_id is not None:
            _events.pop(self.event_id, None)
        _open.discard(self)


_open = set()


def _turns(turns):
    """recall's ``turns`` (one turn, or (first, last)) as the range the C API takes."""
    def whole(n):
        return isinstance(n, int) and not isinstance(n, bool) and 0 <= n < 1 << 63
    if whole(turns):
        first = last = turns
    elif isinstance(turns, (tuple, list)) and len(turns) == 2 and all(whole(t) for t in turns):
        first, last = turns
    else:
        raise InvalidArgument("recap: recall's turns must be a turn (an int) or (first, last), "
                              "not %r" % (turns,))
    if last < 1 or first > last:
        raise InvalidArgument("recap: recall's turns %r name no turn: give (first, last) with "
                              "first <= last, the person's first turn being 1" % (turns,))
    return first, last


def recall_tool(format="openai-chat"):
    """The recall tool's definition (named ``recap_recall``) as a dict of ``format``'s tool
    catalog, for the host's request: an OpenAI chat ``{"type": "function", "function":
    {...}}``, an Anthropic ``{"name", "description", "input_schema"}`` or an OpenAI Responses
    ``{"type": "function", "name", ...}``. ``format`` is "openai-chat", "anthropic" or
    "openai-responses". Set ``compaction.recallTool`` in the configuration too, so that
    checkpoints tell the model what it can ask for; answer its calls with
    :meth:`Compactor.answer_recall`."""
    format_b = _utf8(format, "format")
    out, error = _vp(), _vp()
    code = _recall_tool(format_b, ctypes.byref(out), ctypes.byref(error))
    if code != 0:
        _raise(code, error)
    return json.loads(_taken(out.value))


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
        error = _vp()
        buffers = self._state.buffers
        handle = self._state.begin()
        try:
            buffer = buffers.take()
            try:
                code = _prepare_to(handle, session_b, format_b, ctypes.byref(sizes), buffer,
                                   ctypes.byref(error))
            except BaseException:
                buffers.give_back(buffer)
                raise
        finally:
            self._state.end()
        if code != 0:
            buffers.give_back(buffer)
            _raise(code, error)
        messages_bytes, system, figures, lent = _lent_prepared(buffer, buffers)
        return Prepared(messages_bytes, system, figures, format, lent)

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

    # -- getting it back (SPEC R18)

    def recall(self, session, query=None, ids=None, turns=None, max_chars=8000,
               include_active=False, max_messages=20):
        """The originals in the history of ``session`` that a compaction summarized, a clearing
        cleared or the reducer clipped, found by words (``query``: each word or run of words,
        such as ``parse_config`` or ``src/app.py``), by message id (``ids``: one id or a list)
        or by the person's turns (``turns``: one turn, or ``(first, last)`` inclusive, the
        first turn being 1; with ``query``, only these turns are searched). At least one of
        them. ``max_chars`` is the answer's size, ``max_messages`` the most messages it holds;
        ``include_active`` searches the messages still in the transcript too. Changes no message
        (the SQLite store may first write its recall index). Returns ``{"text", "messages": [{"id", "seq", "turn", "role", "state",
        "replaced_by", "text", "clipped", "score"}], "left_out", "left_out_ids"}``: ``text``
        is the answer as the model reads it from the recall tool, the messages come best
        first."""
        session_b = _utf8(session, "session")
        q = {}
        if query is not None:
            if not isinstance(query, str):
                raise InvalidArgument("recap: recall's query must be a str, not %s"
                                      % type(query).__name__)
            q["query"] = query
        if ids is not None:
            if isinstance(ids, str):
                ids = [ids]
            try:
                ids = list(ids)
            except TypeError:
                raise InvalidArgument("recap: recall's ids must be a message id (str) or a "
                                      "list of them, not %s" % type(ids).__name__) from None
            for i in ids:
                if not isinstance(i, str):
                    raise InvalidArgument("recap: recall's ids must be strs, not %s"
                                          % type(i).__name__)
            q["ids"] = ids
        if turns is not None:
            q["first_turn"], q["last_turn"] = _turns(turns)
        q["max_chars"] = max_chars
        q["max_messages"] = max_messages
        q["include_active"] = include_active
        if not q.get("query", "").strip() and not q.get("ids") and turns is None:
            raise InvalidArgument("recap: recall asks for nothing: give query= (words to look "
                                  "for), ids= (message ids) or turns= (a turn, or (first, "
                                  "last))")
        return self._json_call(_recall, session_b, _json_text(q, "the query"))

    def answer_recall(self, session, call, format="openai-chat"):
        """Answers the model's call of the recall tool (see :func:`recall_tool`): returns the
        tool result as one message (a dict) in ``format``, to append to ``session`` with
        :meth:`append` (same format) like any tool result. ``call`` is the call as the model's
        reply holds it in ``format`` (an OpenAI chat ``tool_calls`` element, an Anthropic
        ``tool_use`` block, an OpenAI Responses ``function_call`` item), or simply
        ``{"id": ..., "name": "recap_recall", "arguments": "{...}"}`` (``arguments`` the JSON
        text or a dict); a dict or JSON text. Arguments the model got wrong are answered with
        an error result that tells it how to call the tool; a call to another tool raises
        InvalidArgument."""
        session_b = _utf8(session, "session")
        format_b = _utf8(format, "format")
        return self._json_call(_answer_recall, session_b, format_b, _json_text(call, "call"))

    def uncompact(self, session):
        """Undoes the newest compaction, clearing or reduction of ``session`` in one
        transaction: the originals are active again in their places, the checkpoint (or the
        reduced copies) goes to the history, messages appended since stay after them; a second
        call undoes the one before. Returns ``{"undone", "commit", "reason",
        "restored_messages", "retired_messages", "before_chars", "after_chars", "version"}``;
        ``undone`` is False, and nothing changed, when nothing is left to undo. The next
        prepare compacts again if the restored transcript is over the trigger."""
        session_b = _utf8(session, "session")
        return self._json_call(_uncompact, session_b)

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
