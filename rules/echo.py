"""A user's text inside our messages, clipped: a message names the problem, it never carries a huge input back.

Why: a 1 MB annotation value quoted in a denial made a 1 MB `status.message`, which the API server returns to
the client and records in events and audit logs.
"""

from __future__ import annotations

ECHO_LIMIT = 100


def clip(text: str, limit: int = ECHO_LIMIT) -> str:
    """`text`, or its first `limit` characters and an ellipsis."""
    return text if len(text) <= limit else text[:limit] + "…"
