"""The summarizers a Compactor takes besides recap's offline one: Summarizer (a function of the
host's own) and HttpProvider (one of recap's HTTP summarizers)."""

import ctypes

from ._convert import _count, _json_text, _raise
from ._errors import InvalidArgument
from ._library import _provider_free, _provider_new_http, _vp


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
