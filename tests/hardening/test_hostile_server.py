"""Hostile requests against the real server over TLS: every one answered, the workers all survive."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from testkit.server import Server, running_server
from tests.hardening.answers import RecordProperty, judge
from tests.hardening.hostile import CASES, MB, Case, encode, mover, review
from tests.hardening.procs import wait_for_workers
from tests.support import EXAMPLES

pytestmark = pytest.mark.e2e

CLIENT_TIMEOUT = 30.0


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    args = ("--cluster", str(EXAMPLES / "cluster.yaml"), "--policy", str(EXAMPLES / "policy-velero-source.yaml"))
    with running_server(tmp_path_factory.mktemp("hostile"), *args, workers=2) as srv:
        yield srv


@pytest.fixture(scope="module")
def workers(server: Server) -> set[int]:
    return wait_for_workers(server.process.pid, 2)


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_hostile_request_over_tls(
    server: Server, workers: set[int], case: Case, record_property: RecordProperty
) -> None:
    body = case.body()
    with server.session() as session:
        started = time.perf_counter()
        answer = session.post(
            f"{server.url}/{case.endpoint}",
            data=body,
            headers={"Content-Type": "application/json"},
            timeout=CLIENT_TIMEOUT,
        )
        record_property("answer_ms", round((time.perf_counter() - started) * 1000, 1))
    judge(case, answer.status_code, answer.headers.get("Content-Type", ""), answer.content, body)
    assert wait_for_workers(server.process.pid, 2) == workers, "a worker died or was replaced"


def test_chunked_10mb_body_is_refused_with_413(
    server: Server, workers: set[int], record_property: RecordProperty
) -> None:
    """No Content-Length: the limit must hold while the body streams in."""

    def chunks() -> Iterator[bytes]:
        for _ in range(10):
            yield b" " * MB

    with server.session() as session:
        started = time.perf_counter()
        answer = session.post(f"{server.url}/mutate", data=chunks(), timeout=CLIENT_TIMEOUT)
        record_property("answer_ms", round((time.perf_counter() - started) * 1000, 1))
    assert answer.status_code == 413
    assert "request body is larger than the limit of 4194304 bytes" in answer.text
    assert wait_for_workers(server.process.pid, 2) == workers


def test_chunked_review_within_the_limit_is_answered(server: Server) -> None:
    sent = encode(review(mover()))
    with server.session() as session:
        answer = session.post(f"{server.url}/mutate", data=iter([sent[:100], sent[100:]]), timeout=CLIENT_TIMEOUT)
    judge(Case("chunked", "mutate", lambda: sent, 200, allowed=True, patched=True), 200, "", answer.content, sent)


def test_server_still_answers_after_the_hostile_requests(server: Server, workers: set[int], tmp_path: Path) -> None:
    with server.session() as session:
        assert session.get(server.url + "/readyz", timeout=10).status_code == 200
    assert wait_for_workers(server.process.pid, 2) == workers
    assert "Traceback" not in server.log.read_text()
