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

# The package's modules, each holding one part: _errors (Error and a subclass for each code),
# _library (the C library loaded with ctypes, its functions declared), _convert (arguments made
# what the C API reads; a failure raised as its Error), _callbacks (the summarizer and event
# callbacks recap calls; cancelled()), _summarizers (Summarizer, HttpProvider), _prepared
# (Prepared, recap_prepare_to's result read in place; the buffers it is written into) and
# _compactor (Compactor, recall_tool). Importing this package loads the library; every public
# name is here, as recap.X.
from ._errors import (Cancelled, Conflict, ContextBudgetExceeded, Corruption, DeadlineExceeded,
                      Error, FailedPrecondition, Internal, InvalidArgument, IoError, NotFound,
                      ResourceExhausted, Unavailable)
from ._library import _free, _version, library_path
from ._convert import FORMATS
from ._callbacks import cancelled
from ._summarizers import HttpProvider, Summarizer
from ._prepared import Prepared
from ._compactor import Compactor, recall_tool

__all__ = [
    "Compactor", "Prepared", "Summarizer", "HttpProvider", "cancelled", "recall_tool",
    "FORMATS",
    "Error", "InvalidArgument", "NotFound", "Conflict", "Corruption", "IoError",
    "Unavailable", "DeadlineExceeded", "Cancelled", "ContextBudgetExceeded",
    "FailedPrecondition", "ResourceExhausted", "Internal", "library_path",
]

#: The version of the recap library, e.g. "0.1.0".
__version__ = _version().decode("ascii")

# The public classes and cancelled() say they are recap's, as when they were defined in this
# file: in reprs, tracebacks ("recap.InvalidArgument: ...") and pickles.
for _public in (Compactor, Prepared, Summarizer, HttpProvider, cancelled, recall_tool, Error,
                InvalidArgument, NotFound, Conflict, Corruption, IoError, Unavailable,
                DeadlineExceeded, Cancelled, ContextBudgetExceeded, FailedPrecondition,
                ResourceExhausted, Internal):
    _public.__module__ = __name__
del _public
