"""Why a request body could not be read: the one error the worker's transport and the app share.

The worker (webhook/serving/requestbody.py) raises it while the app reads `wsgi.input`: a body that did not
arrive in time (408), chunk sizes that add up past the limit (413, before the chunk is read), invalid chunked
framing (400) or a client that closed the connection mid-body (400, with nobody left to read it). The app answers
it like every other bad body, and the worker closes the connection after the answer: where the next request would
start is unknown.
"""

from __future__ import annotations

#: What went wrong with a body, one word each: the log says each kind at most once a minute (webhook/logs.py).
TIMEOUT, TOO_LARGE, FRAMING, GONE = "timeout", "too-large", "framing", "gone"


class BodyError(Exception):
    """An unreadable request body: the answer's status, a reason that quotes nothing from the request, and its
    kind (one of the constants above)."""

    def __init__(self, status: int, message: str, kind: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.kind = kind


def too_large(limit: int) -> BodyError:
    return BodyError(413, f"request body is larger than the limit of {limit} bytes", TOO_LARGE)
