"""What the Python calls take, made what recap's C API reads (UTF-8 text, JSON text, sizes),
and a failed call's code and message raised as the Error of that code."""

import json
import re

from ._errors import _ERRORS, Error, InvalidArgument
from ._library import _Sizes, _code_name, _taken

#: The message formats recap reads and writes (the ``format`` argument).
FORMATS = ("openai-chat", "anthropic", "openai-responses", "recap")


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
