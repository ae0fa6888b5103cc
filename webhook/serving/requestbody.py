"""What a request's body may cost the worker: it must arrive in full within the read timeout of its headers (408),
chunk sizes that add up past the body limit are refused before the chunk is read (413), invalid chunked framing
is a 400, and a client that closes the connection mid-body one (webhook/app/body.py). After an answer to a body
left unread, what the client still sends is read and discarded for a while (`linger`) before the connection
closes."""

from __future__ import annotations

import contextlib
import time
from typing import Any

import gevent
from gunicorn.http.body import ChunkedReader
from gunicorn.http.errors import ParseException

from webhook.app.body import FRAMING, GONE, TIMEOUT, BodyError, too_large

# After answering a request whose body it did not read to the end (413 on its declared size, for one), the worker
# reads and discards what the client still sends for this long, up to LINGER_BYTES, before it closes: closing with
# unread bytes would reset the connection and the client, still sending, might never read the answer.
LINGER = 1.0
LINGER_BYTES = 16 * 1024 * 1024


class BoundedInput:
    """`wsgi.input` read within a deadline, with gunicorn's errors turned into BodyError; knows whether the body
    was read to its end."""

    def __init__(self, stream: Any, environ: dict[str, Any], deadline: float) -> None:
        self._stream = stream
        self._deadline = deadline
        self._timeout = round(deadline - time.monotonic(), 1)
        length = environ.get("CONTENT_LENGTH")
        chunked = "chunked" in environ.get("HTTP_TRANSFER_ENCODING", "").lower()
        self._left: int | None = None if chunked else int(length or 0)  # None: chunked, until a short read
        self.error: BodyError | None = None

    @property
    def complete(self) -> bool:
        return self.error is None and self._left == 0

    def read(self, size: int | None = -1) -> bytes:
        whole = size is None or size < 0
        return self._guarded(lambda: self._stream.read(size), None if whole else size)

    def readline(self, size: int | None = -1) -> bytes:
        return self._guarded(lambda: self._stream.readline(size), 0)

    def _guarded(self, read: Any, size: int | None) -> bytes:
        """`read()` within the deadline. `size`: what a read returns unless the body ends first (None: all of it;
        0: a line, whose length says nothing about the end)."""
        if self.error is not None:
            raise self.error
        expired = BodyError(408, f"request body did not arrive in full within {self._timeout:g}s", TIMEOUT)
        try:
            with gevent.Timeout(max(self._deadline - time.monotonic(), 1e-3), expired):
                data: bytes = read()
        except BodyError as exc:
            self.error = exc
            raise
        except ParseException as exc:
            self.error = BodyError(400, f"request body has invalid chunked framing ({type(exc).__name__})", FRAMING)
            raise self.error from None
        except (OSError, ValueError):  # gunicorn's NoMoreData is an OSError; ssl errors are too
            self.error = _gone()
            raise self.error from None
        if self._left is not None:  # Content-Length: gunicorn returns what arrived before the stream ended
            if len(data) < (self._left if size is None else min(size, self._left)):
                self.error = _gone()
                raise self.error
            self._left -= len(data)
        elif size is None or not data or len(data) < size:
            self._left = 0  # a chunked body ends with a short read
        return data


def _gone() -> BodyError:
    return BodyError(400, "the client closed the connection before the request body ended", GONE)


def bound_chunks(reader: ChunkedReader, limit: int) -> None:
    """Refuse a chunked body as soon as its declared chunk sizes add up past `limit`, before reading the chunk: a
    client must not hold the connection by announcing a chunk it never sends."""
    parse = reader.parse_chunk_size
    declared = 0

    def bounded(unreader: Any, data: Any = None) -> Any:
        nonlocal declared
        size, rest = parse(unreader, data)
        declared += size
        if declared > limit:
            raise too_large(limit)
        return size, rest

    reader.parse_chunk_size = bounded


def linger(sock: Any) -> None:
    """Read and discard what the client still sends, for LINGER at most (see LINGER)."""
    received = 0
    with contextlib.suppress(OSError, ValueError), gevent.Timeout(LINGER, False):
        while received < LINGER_BYTES:
            data = sock.recv(65536)
            if not data:
                return
            received += len(data)
