"""API failures in the words an operator reads in /readyz, warnings and logs: what happened, not a traceback."""

from __future__ import annotations

import urllib3
from kubernetes.client import ApiException


def describe(exc: BaseException) -> str:
    """A short, operator-readable reason for an API failure."""
    if isinstance(exc, ApiException):
        return f"the API server answered {exc.status} {exc.reason or ''}".rstrip()
    if isinstance(exc, urllib3.exceptions.MaxRetryError) and exc.reason is not None:
        exc = exc.reason
    if isinstance(exc, urllib3.exceptions.NewConnectionError):  # before timeouts: urllib3 derives it from one
        return "cannot connect to the API server"
    if isinstance(exc, (urllib3.exceptions.TimeoutError, TimeoutError)):
        return "timed out"
    if isinstance(exc, urllib3.exceptions.ProtocolError):
        return "the connection broke"
    return f"{type(exc).__name__}: {exc}"[:200]
