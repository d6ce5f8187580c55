"""What the Python calls take, made what recap's C API reads (UTF-8 text, JSON text, sizes),
and a failed call's code and message raised as the Error of that code."""

import json
import re

from ._errors import _ERRORS, Error, InvalidArgument
from ._library import _Sizes, _code_name, _last_error_remedies, _taken, _taken_bytes

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
    "recap_prepare_to": "prepare",
    "recap_plan": "plan",
    "recap_compact": "compact",
    "recap_recover": "recover",
    "recap_report_overflow": "report_overflow",
    "recap_report_prompt_tokens": "report_prompt_tokens",
    "recap_answer_recall": "answer_recall",
    "recap_recall_tool": "recall_tool",
    # recap_recall is also the recall tool's name, which messages quote: only the function's
    # own prefix is said in Python's words.
    "recap_recall:": "recall:",
    "recap_uncompact": "uncompact",
    "`query_json`": "the query",
    "`call_json`": "call",
    "`messages_json`": "messages",
    "`options_json`": "the options",
    "`config_json`": "config",
}
_C_WORDS = re.compile("|".join(re.escape(k) for k in sorted(_PYTHON_WORDS, key=len, reverse=True)))


def _in_python_words(message):
    """recap's message with the C API's names (recap_append, `messages_json`) as Python says
    them (append, messages)."""
    return _C_WORDS.sub(lambda m: _PYTHON_WORDS[m.group(0)], message)


def _remedy_in_python_words(remedy):
    """What a remedy of recap's message (docs/errors.md) says in the words of this module: the
    arguments of HttpProvider and Compactor, or None for the C API's words."""
    rid, value = remedy["id"], remedy["value"]
    option = "HttpProviderOptions."
    if rid == option + "max_retries":
        return "; max_retries=" + value
    if rid == option + "max_retry_delay_ms":
        return "max_retry_delay_ms=" + value
    if rid.startswith(option):
        return rid[len(option):]
    if rid == "http.allow_insecure_http":
        return "allow_insecure_http=True"
    if rid == "http.api_key":
        return "(api_key=, or the variable named by api_key_env=)"
    if rid == "postgres.credentials" or rid == "postgres.dbname":
        return "in the URL given as store="
    if rid == "postgres.other_schema":
        return 'give store= another database (recap keeps its tables in schema "recap")'
    return None


def _in_own_words(message):
    """recap's message (bytes, as the C API wrote it) with each remedy it names said in this
    module's words: the C API lists where its message says them (recap_last_error_remedies), so
    no sentence is matched as text."""
    pointer = _last_error_remedies()
    if not pointer:
        return message
    try:
        remedies = json.loads(_taken(pointer))
    except ValueError:
        return message
    out, at = [], 0
    for remedy in sorted(remedies, key=lambda r: r["offset"]):
        said = _remedy_in_python_words(remedy)
        start, end = remedy["offset"], remedy["offset"] + remedy["size"]
        if said is None or start < at or end > len(message):
            continue
        out.append(message[at:start])
        out.append(said.encode("utf-8"))
        at = end
    out.append(message[at:])
    return b"".join(out)


def _raise(code, error):
    """Raises the Error of a failed call, with recap's message in the words of this module."""
    message = ""
    if error.value:
        text = _in_own_words(_taken_bytes(error.value)).decode("utf-8", "replace")
        message = _in_python_words(text)
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
