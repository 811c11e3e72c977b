"""The exceptions attnjit raises. Every one derives from AttnjitError and from the
builtin a caller would expect (ValueError for bad input, TypeError for unsupported code
in a traced function, RuntimeError for the environment and for attnjit's own bugs)."""
from __future__ import annotations

# attnjit_status values of capi/include/attnjit/attnjit_c.h.
STATUS_OK = 0
STATUS_INVALID_ARGUMENT = 1
STATUS_PARSE = 2
STATUS_ENVIRONMENT = 3
STATUS_INTERNAL = 4

_STATUS_NAMES = {
    STATUS_OK: "ATTNJIT_OK",
    STATUS_INVALID_ARGUMENT: "ATTNJIT_ERROR_INVALID_ARGUMENT",
    STATUS_PARSE: "ATTNJIT_ERROR_PARSE",
    STATUS_ENVIRONMENT: "ATTNJIT_ERROR_ENVIRONMENT",
    STATUS_INTERNAL: "ATTNJIT_ERROR_INTERNAL",
}


class AttnjitError(Exception):
    """Base class. `status` is the C API status (None when Python raised it itself) and
    `message` the text without the status prefix."""

    def __init__(self, message: str, status: int | None = None):
        super().__init__(message)
        self.message = message
        self.status = status

    @property
    def status_name(self) -> str | None:
        return None if self.status is None else _STATUS_NAMES.get(self.status, str(self.status))


class SpecError(AttnjitError, ValueError):
    """The spec is invalid: a score_mod/mask that does not type-check, a head dim or dtype
    the kernels do not support, a JSON spec that does not parse (the C message has the
    line and column)."""


class ArgumentError(AttnjitError, ValueError):
    """A call's tensors do not fit the spec (device, dtype, rank, shapes, strides,
    alignment, captured tensors); nothing was launched."""


class UnsupportedTraceError(AttnjitError, TypeError):
    """A score_mod or mask does something attnjit cannot turn into an expression (Python
    control flow on a traced value, an unsupported function, indexing an object that is not
    a captured tensor, ...). The message names the function, the line, and what to write
    instead."""


class RuntimeEnvironmentError(AttnjitError, RuntimeError):
    """Something outside attnjit is missing or failed: the shared library, a GPU, the CUDA
    driver, NVRTC, the disk cache."""


class LibraryNotFoundError(RuntimeEnvironmentError):
    """libattnjit_c.so was not found; the message lists every place looked at."""


class InternalError(AttnjitError, RuntimeError):
    """A bug in attnjit (including NVRTC rejecting generated code); please report it."""


def error_for_status(status: int, message: str, *, launching: bool = False) -> AttnjitError:
    """The exception for a failed C API call. An invalid argument while launching is about
    the tensors (ArgumentError); before that it is about the spec (SpecError)."""
    if status == STATUS_PARSE:
        return SpecError(message, status)
    if status == STATUS_INVALID_ARGUMENT:
        return ArgumentError(message, status) if launching else SpecError(message, status)
    if status == STATUS_ENVIRONMENT:
        return RuntimeEnvironmentError(message, status)
    return InternalError(message, status)
