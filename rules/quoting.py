"""A user's text inside our messages, clipped and escaped: a message names the problem, it never carries a huge
input or raw control characters back.

Why: a 1 MB annotation value quoted in a denial made a 1 MB `status.message`, which the API server returns to
the client and records in events and audit logs; and kube-apiserver drops a warning with a control character in
it, while bidirectional-text controls (U+202E) can make a message read differently from what it says.
"""

from __future__ import annotations

ECHO_LIMIT = 100


def clip(text: str, limit: int = ECHO_LIMIT) -> str:
    """`text`, or its first `limit` characters and an ellipsis."""
    return text if len(text) <= limit else text[:limit] + "…"


def escaped(text: str) -> str:
    """`text` with every character Python does not consider printable (controls, format characters such as the
    bidi overrides, separators other than the space) written as its escape: `\\x00`, `\\u202e`."""
    if text.isprintable():
        return text
    return "".join(c if c.isprintable() else c.encode("unicode_escape").decode("ascii") for c in text)
