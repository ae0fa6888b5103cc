"""Slow and malformed requests over TLS against the real server: a connection that never completes its handshake or
sends no request is closed after the read timeout; a body that stalls, lies about its size or is not valid chunked
framing gets a clear 4xx (408, 413, 400) at once or within the read timeout, and its connection is closed; nothing
is answered 5xx and nothing logs a traceback.

Each request is written by hand on a verified TLS connection: `requests` cannot send a short body or a bad chunk.
"""

from __future__ import annotations

import http.client
import socket
import time
from collections.abc import Iterator

import pytest

from testkit.rawtls import answer_then_close, connect, head, port_of, stalled_handshake, wait_closed
from testkit.server import Server, running_server
from tests.hardening.answers import RecordProperty
from tests.hardening.hostile import encode, mover, review
from tests.hardening.procs import wait_for_workers
from tests.support import EXAMPLES

pytestmark = pytest.mark.e2e

READ_TIMEOUT = 1.0  # --read-timeout of this server
ANSWER_WITHIN = READ_TIMEOUT + 3.0  # generous: the point is an answer at all, not its speed
REVIEW = encode(review(mover()))


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    args = ("--cluster", str(EXAMPLES / "cluster.yaml"), "--read-timeout", str(READ_TIMEOUT))
    with running_server(tmp_path_factory.mktemp("framing"), *args, workers=2) as srv:
        yield srv


@pytest.fixture(scope="module", autouse=True)
def workers(server: Server) -> set[int]:
    """The server's workers before any attack (taken before the module's first test): the same ones must be alive
    after all of them."""
    return wait_for_workers(server.process.pid, 2)


def exchange(server: Server, raw: bytes) -> tuple[int, dict[str, str], bytes, float]:
    with connect(server, ANSWER_WITHIN) as tls:
        tls.sendall(raw)
        return answer_then_close(tls)


def test_a_connection_that_never_sends_a_byte_is_closed_after_the_read_timeout(
    server: Server, record_property: RecordProperty
) -> None:
    with socket.create_connection(("127.0.0.1", port_of(server)), timeout=ANSWER_WITHIN) as silent:
        closed_after = wait_closed(silent, ANSWER_WITHIN)
    record_property("closed_after_s", closed_after)
    assert closed_after is not None and closed_after >= READ_TIMEOUT * 0.9


def test_a_handshake_that_stops_after_its_hello_is_closed_after_the_read_timeout(server: Server) -> None:
    with stalled_handshake(server) as stalled:
        closed_after = wait_closed(stalled, ANSWER_WITHIN)
    assert closed_after is not None and closed_after >= READ_TIMEOUT * 0.9


def test_a_connection_that_sends_no_request_is_closed_after_the_read_timeout(server: Server) -> None:
    """Handshake done, no request: the read timeout counts from the accept, handshake included."""
    with connect(server, ANSWER_WITHIN) as tls:
        closed_after = wait_closed(tls, ANSWER_WITHIN)
    # not at once: it waited for a request until the read timeout (less what the handshake took)
    assert closed_after is not None and READ_TIMEOUT * 0.5 <= closed_after < ANSWER_WITHIN


def test_a_body_shorter_than_its_content_length_gets_408_and_is_closed(
    server: Server, record_property: RecordProperty
) -> None:
    status, headers, body, elapsed = exchange(server, head(Content_Length=str(len(REVIEW))) + REVIEW[:100])
    record_property("answered_after_s", round(elapsed, 2))
    assert status == 408, body
    assert body == f"request body did not arrive in full within {READ_TIMEOUT:g}s\n".encode()
    assert headers["connection"] == "close"
    assert READ_TIMEOUT * 0.9 <= elapsed < ANSWER_WITHIN


def test_a_chunked_body_that_stalls_gets_408(server: Server) -> None:
    status, _, body, _ = exchange(server, head(Transfer_Encoding="chunked") + b"400\r\n" + REVIEW[:100])
    assert status == 408, body


@pytest.mark.parametrize(
    "chunk_size",
    ["400001", "ffffffffffffffff", "1" + "0" * 16, "f" * 40],  # just past 4 MiB, 2^64 - 1, 2^64, 2^160 - 1
    ids=["4MiB+1", "2^64-1", "2^64", "160-bit"],
)
def test_a_chunk_size_over_the_limit_gets_413_at_once(
    server: Server, chunk_size: str, record_property: RecordProperty
) -> None:
    status, headers, body, elapsed = exchange(server, head(Transfer_Encoding="chunked") + f"{chunk_size}\r\n".encode())
    record_property("answer_s", round(elapsed, 3))
    assert status == 413, body
    assert body == b"request body is larger than the limit of 4194304 bytes\n"
    assert headers["connection"] == "close"
    assert elapsed < READ_TIMEOUT  # before any of the chunk is read: no wait for the read timeout


def test_chunks_adding_up_past_the_limit_get_413_before_the_last_is_read(server: Server) -> None:
    chunk = b"100000\r\n" + b" " * 0x100000 + b"\r\n"  # 1 MiB each: the fifth takes the body past 4 MiB
    status, _, body, elapsed = exchange(server, head(Transfer_Encoding="chunked") + chunk * 4 + b"100000\r\n")
    assert status == 413, body
    assert elapsed < READ_TIMEOUT


def test_a_declared_content_length_beyond_64_bits_gets_413_at_once(server: Server) -> None:
    status, headers, body, elapsed = exchange(server, head(Content_Length=str(2**70)) + REVIEW[:10])
    assert status == 413, body
    assert headers["connection"] == "close"
    assert elapsed < READ_TIMEOUT


@pytest.mark.parametrize("chunk_size", ["zz", "-1", "0x10", " 10"])
def test_an_invalid_chunk_size_gets_400_and_no_traceback(server: Server, chunk_size: str) -> None:
    status, headers, body, _ = exchange(
        server, head(Transfer_Encoding="chunked") + f"{chunk_size}\r\n".encode() + REVIEW[:16] + b"\r\n0\r\n\r\n"
    )
    assert status == 400, body
    assert body == b"request body has invalid chunked framing (InvalidChunkSize)\n"
    assert headers["connection"] == "close"


def test_a_client_gone_mid_body_logs_one_line_and_no_traceback(server: Server) -> None:
    before = server.log.read_text()
    with connect(server, ANSWER_WITHIN) as tls:
        tls.sendall(head(Content_Length=str(len(REVIEW))) + REVIEW[:100])
    time.sleep(0.5)
    with server.session() as session:  # and the server goes on answering
        assert session.post(f"{server.url}/mutate", data=REVIEW, timeout=10).status_code == 200
    new = server.log.read_text()[len(before) :]
    assert "Traceback" not in new, new
    gone = [line for line in new.splitlines() if "closed the connection before the request body ended" in line]
    assert len(gone) == 1, new


FLOOD = 300  # requests of each kind, as fast as one client sends them


@pytest.mark.parametrize(
    ("raw", "status", "line"),
    [
        (head(Transfer_Encoding="chunked") + b"zz\r\n", 400, "request body has invalid chunked framing"),
        (b"GARBAGE\r\n\r\n", 400, "Invalid request from ip="),
    ],
    ids=["chunked framing", "request line"],
)
def test_a_flood_of_broken_requests_logs_one_line_a_kind(
    server: Server, raw: bytes, status: int, line: str, record_property: RecordProperty
) -> None:
    """Any client can send broken requests as fast as it likes: each is answered, and each kind is logged at most
    once a minute per worker, the line saying how many it stands for (webhook/logs.py `Throttle`)."""
    before = len(server.log.read_text())
    for _ in range(FLOOD):
        with connect(server, ANSWER_WITHIN) as tls:
            tls.sendall(raw)
            assert answer_then_close(tls)[0] == status
    time.sleep(0.2)  # the last lines written
    log = server.log.read_text()
    assert line in log  # the kind is logged (in this flood, or earlier in the module within the minute)
    new = log[before:]
    lines = [text for text in new.splitlines() if line in text]
    record_property("lines", len(lines))
    assert len(lines) <= 2, new[-3000:]  # one a worker at most, if its minute had passed
    assert all("like it; at most one line a minute)" in text for text in lines), lines


def test_a_kept_alive_connection_is_served_after_a_complete_body(server: Server) -> None:
    """The bounds do not close a connection whose body was read in full: the next request is served on it."""
    conn = http.client.HTTPSConnection("localhost", timeout=ANSWER_WITHIN)
    conn.sock = connect(server, ANSWER_WITHIN)
    try:
        for _ in range(3):
            conn.request("POST", "/mutate", body=REVIEW, headers={"Content-Type": "application/json"})
            response = conn.getresponse()
            response.read()
            assert (response.status, response.getheader("Connection")) == (200, "keep-alive")
    finally:
        conn.close()


def test_no_traceback_and_every_worker_alive_after_the_framing_attacks(server: Server, workers: set[int]) -> None:
    assert wait_for_workers(server.process.pid, 2) == workers  # none was killed and replaced
    log = server.log.read_text()
    assert "Traceback" not in log, log[-3000:]
