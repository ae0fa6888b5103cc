"""One API request of the command line under a total deadline and a cap on its bytes, and a list's page count.

The client's own timeout applies to each socket read: an API server (or anything posing as one behind a
kubeconfig) that trickles a body one byte every few seconds keeps a request open for ever, and one that sends a
page of any size is read whole before anything looks at it. `review --live` and the live `audit` are meant to end,
with an error naming the call, within their timeout whatever the server does: the request runs in a daemon thread
that reads the body in chunks and stops past `max_bytes`, and the caller waits for it at most `timeout` seconds from
the start (connection, headers and body together). A request given up on is shut down; its thread ends with it, or
with the process.

Only for the command line's one-shot reads: the server's list and watch keep their own timing (webhook/state/live.py).
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

#: The bytes of one answer: a page of 500 objects of 64 KiB each. More is no page a review or an audit asked for.
MAX_BYTES = 32 << 20
#: Bytes read at a time: the byte cap is checked between reads.
CHUNK = 64 << 10


class RequestRefused(Exception):
    """The API's answer did not come whole within the deadline, or was larger than asked for."""


@dataclass(frozen=True)
class RequestLimits:
    """Bounds of each request (`timeout` seconds from its start to its last byte, `max_bytes`) and of a paged
    list (`max_pages`, None for no bound; `max_empty_pages` in a row: kube-apiserver fills a page up to its limit
    unless the list ends, so a run of empty pages that each ask for another is no list at all)."""

    timeout: float
    max_bytes: int = MAX_BYTES
    max_pages: int | None = None
    max_empty_pages: int = 8


def bounded_request(call: Callable[..., Any], *args: Any, limits: RequestLimits, **kwargs: Any) -> bytes:
    """The body of `call(*args, **kwargs)` made with `_preload_content=False`, whole, within `limits`; an
    ApiException or connection error of the call propagates, RequestRefused when the limits are passed."""
    outcome: dict[str, Any] = {}
    done = threading.Event()

    def run() -> None:
        try:
            response = call(*args, _preload_content=False, _request_timeout=limits.timeout, **kwargs)
            outcome["response"] = response
            outcome["body"] = _read_capped(response, limits.max_bytes)
        except BaseException as exc:  # handed to the caller, whatever it is
            outcome["error"] = exc
        finally:
            done.set()

    threading.Thread(target=run, name="bounded-api-request", daemon=True).start()
    if not done.wait(limits.timeout):
        _abandon(outcome.get("response"))
        raise RequestRefused(f"no complete answer within {limits.timeout:g} s")
    if "error" in outcome:
        raise outcome["error"]
    body: bytes = outcome["body"]
    return body


def _read_capped(response: Any, max_bytes: int) -> bytes:
    chunks: list[bytes] = []
    size = 0
    while chunk := response.read(CHUNK):
        size += len(chunk)
        if size > max_bytes:
            _abandon(response)
            raise RequestRefused(f"answer larger than {max_bytes >> 20} MiB")
        chunks.append(chunk)
    return b"".join(chunks)


def _abandon(response: Any) -> None:
    """Close a response being read elsewhere: shut its socket down so the reading thread's read ends now."""
    if response is None:
        return
    with contextlib.suppress(Exception):
        response.shutdown()  # urllib3 2.3+: unblocks a read in progress; the pool drops the dead connection
