"""The worker's `wsgi.input` (webhook/serving/requestbody.py `BoundedInput`): when a body counts as read to its
end, and a Content-Length body cut short as a client gone. The deadline and gunicorn's framing errors are proven
against the real server (tests/hardening/test_framing.py)."""

from __future__ import annotations

import io

import pytest

from webhook.app.body import BodyError
from webhook.serving.requestbody import BoundedInput

BODY = b'{"a": 1}\n{"b": 2}\n'


def bounded(data: bytes, **environ: str) -> BoundedInput:
    return BoundedInput(io.BytesIO(data), environ, deadline=float("inf"))


def test_a_content_length_body_is_complete_once_read_to_its_length() -> None:
    body = bounded(BODY, CONTENT_LENGTH=str(len(BODY)))
    assert body.readline() == b'{"a": 1}\n' and not body.complete  # a line says nothing about the end
    assert body.read(len(BODY)) == b'{"b": 2}\n' and body.complete


def test_no_body_is_complete_unread() -> None:
    assert bounded(b"").complete
    assert not bounded(BODY, CONTENT_LENGTH=str(len(BODY))).complete


def test_a_content_length_body_cut_short_is_a_client_gone() -> None:
    body = bounded(BODY[:5], CONTENT_LENGTH=str(len(BODY)))
    with pytest.raises(BodyError) as raised:
        body.read(len(BODY))
    assert (raised.value.status, raised.value.message) == (
        400,
        "the client closed the connection before the request body ended",
    )
    assert not body.complete
    with pytest.raises(BodyError):  # and stays failed
        body.read(1)


def test_a_chunked_body_is_complete_after_a_short_read() -> None:
    body = bounded(BODY, HTTP_TRANSFER_ENCODING="chunked")
    assert body.read(4) == BODY[:4] and not body.complete
    assert body.read(1024) == BODY[4:] and body.complete
