"""Answers of an API server that does not play fair, for `FakeKubeAPI.hostile(answer, when)`: what a kubeconfig
pointing at a hostile or broken server (or a proxy in front of one) can send a command-line client.

- `endless_empty_pages`: a list page without objects whose `continue` token asks for another, for ever;
- `trickle(every)`: a body of a plausible size sent one byte every `every` seconds;
- `flood(megabytes)`: one list page of that many megabytes, sent as fast as the client reads it.

Each stops writing when the client goes away. The requests are still counted in `requests`.
"""

from __future__ import annotations

import contextlib
import itertools
import json
import time
from collections.abc import Callable
from typing import Any

from testkit.fakeapi.resources import Request

Answer = Callable[[Any, Request], None]
_TOKENS = itertools.count(1)


def _head(handler: Any, length: int) -> None:
    handler.send_response(200)
    handler.send_header("Content-Type", "application/json")
    handler.send_header("Content-Length", str(length))
    handler.end_headers()


def endless_empty_pages(handler: Any, request: Request) -> None:
    """A page with no items and a fresh `continue` token: a list that never ends and never grows."""
    page = {"kind": "List", "apiVersion": "v1", "metadata": {"continue": f"more-{next(_TOKENS)}"}, "items": []}
    data = json.dumps(page).encode()
    _head(handler, len(data))
    handler.wfile.write(data)


def trickle(every: float, body: bytes = b'{"kind": "List", "apiVersion": "v1", "items": []}') -> Answer:
    """The headers at once, then the body one byte every `every` seconds: each socket read gets a byte before its
    timeout, so only a deadline on the whole request ends it."""

    def answer(handler: Any, request: Request) -> None:
        _head(handler, len(body))
        handler.wfile.flush()
        with contextlib.suppress(OSError):
            for byte in body:
                handler.wfile.write(bytes([byte]))
                handler.wfile.flush()
                time.sleep(every)

    return answer


class flood:
    """One list page of `megabytes` MB (a Node with a 1 MB annotation per megabyte), written in 1 MB pieces;
    `sent` counts the bytes the client took before it went away."""

    def __init__(self, megabytes: int) -> None:
        self.megabytes, self.sent = megabytes, 0

    def __call__(self, handler: Any, request: Request) -> None:
        item = json.dumps({"metadata": {"name": "n", "annotations": {"padding": "x" * (1 << 20)}}}).encode()
        head, tail = b'{"kind": "List", "apiVersion": "v1", "metadata": {}, "items": [', b"]}"
        _head(handler, len(head) + self.megabytes * (len(item) + 1) - 1 + len(tail))
        with contextlib.suppress(OSError):
            for piece in (head, *(item if i == 0 else b"," + item for i in range(self.megabytes)), tail):
                handler.wfile.write(piece)
                self.sent += len(piece)
