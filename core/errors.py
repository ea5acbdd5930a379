"""Errors a user can cause. The CLI turns each into one line on stderr and exit code 2."""


class TraceLakeError(Exception):
    """Base class: the message says what went wrong, with which file, and what to do."""


class BadTraceError(TraceLakeError):
    """The trace file cannot be read as a PyTorch profiler trace."""


class WarehouseError(TraceLakeError):
    """The warehouse folder cannot be used (missing, read-only, locked, not built)."""


class NotATraceError(BadTraceError):
    """Valid JSON, but not a Chrome trace (no 'traceEvents'); skipped when found in a folder."""
