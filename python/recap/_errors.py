"""recap's errors: Error, and one subclass for each code of the C API (include/recap/c/recap.h)
with its name and number."""

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
