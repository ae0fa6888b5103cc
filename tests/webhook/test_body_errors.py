"""A body the server's transport cannot read (webhook/app/body.py) is answered like any bad body: its status, a plain
reason, one log line, a counted bad request; never a 500 or a traceback."""

from __future__ import annotations

import io
import logging

import pytest
from flask.testing import FlaskClient

from webhook.app.body import FRAMING, GONE, TIMEOUT, BodyError, too_large


class Unreadable(io.RawIOBase):
    """`wsgi.input` as webhook/serving/requestbody.py hands it over when the body cannot be read."""

    def __init__(self, error: BodyError) -> None:
        self.error = error

    def read(self, size: int = -1) -> bytes:
        raise self.error


@pytest.mark.parametrize(
    "error",
    [
        BodyError(408, "request body did not arrive in full within 10s", TIMEOUT),
        too_large(4 * 1024 * 1024),
        BodyError(400, "request body has invalid chunked framing (InvalidChunkSize)", FRAMING),
        BodyError(400, "the client closed the connection before the request body ended", GONE),
    ],
    ids=["408", "413-chunk", "400-framing", "400-gone"],
)
def test_an_unreadable_body_is_answered_with_its_status_and_one_log_line(
    client: FlaskClient, error: BodyError, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.INFO, logger="webhook.app.endpoints"):
        answer = client.post(
            "/mutate",
            environ_overrides={"wsgi.input": Unreadable(error)},
            headers={"Transfer-Encoding": "chunked", "Content-Type": "application/json"},
        )
    assert answer.status_code == error.status
    assert answer.get_data() == (error.message + "\n").encode()
    logged = f"review mutate: {error.message} (1 body like it; at most one line a minute)"
    assert [r.getMessage() for r in caplog.records] == [logged]
    assert not any(r.exc_info for r in caplog.records)


def test_a_flood_of_unreadable_bodies_logs_one_line_a_kind(
    client: FlaskClient, caplog: pytest.LogCaptureFixture
) -> None:
    """Any client can send broken bodies as fast as it likes: each is answered and counted, and each kind logged
    at most once a minute (the next line of a kind gives the count since the last; tests/webhook/test_clientauth.py)."""
    kinds = [BodyError(400, "request body has invalid chunked framing (InvalidChunkSize)", FRAMING), too_large(1)]
    with caplog.at_level(logging.INFO, logger="webhook.app.endpoints"):
        for _ in range(300):
            for error in kinds:
                answer = client.post(
                    "/mutate",
                    environ_overrides={"wsgi.input": Unreadable(error)},
                    headers={"Transfer-Encoding": "chunked", "Content-Type": "application/json"},
                )
                assert answer.status_code == error.status
    assert [r.getMessage() for r in caplog.records] == [
        f"review mutate: {error.message} (1 body like it; at most one line a minute)" for error in kinds
    ]
