"""End to end over real TLS against a gunicorn server started as the CLI starts it."""

from __future__ import annotations

import json
import socket
import ssl
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest
import requests

from testkit.reviews import admission_review
from testkit.server import Server, running_server
from tests.support import EXAMPLES, fixtures, load_yaml
from tests.webhook.review_checks import check_response

pytestmark = pytest.mark.e2e


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    with running_server(
        tmp_path_factory.mktemp("e2e"), "--cluster", str(EXAMPLES / "cluster.yaml"), "--trivial-endpoint"
    ) as srv:
        yield srv


def mover_review(uid: str = "e2e-1") -> dict[str, Any]:
    return admission_review("CREATE", load_yaml(EXAMPLES / "mover-pod.yaml"), uid=uid)


def test_tls_is_verified_against_the_issued_ca(server: Server) -> None:
    assert server.session().get(server.url + "/healthz", timeout=5).text == "ok\n"
    with pytest.raises(requests.exceptions.SSLError):
        requests.get(server.url + "/healthz", timeout=5)  # system trust store does not know our CA


def test_plain_http_gets_no_admission_answer(server: Server) -> None:
    with pytest.raises(requests.exceptions.ConnectionError):
        requests.post(server.url.replace("https", "http") + "/mutate", json=mover_review(), timeout=5)


@pytest.mark.parametrize("endpoint", ["mutate", "validate"])
def test_foreign_fixtures_over_https(server: Server, endpoint: str) -> None:
    session = server.session()
    for name, review in fixtures():
        answer = session.post(f"{server.url}/{endpoint}", json=review, timeout=10)
        assert answer.status_code == 200, (name, answer.text)
        check_response(review, answer.json(), mutating=endpoint == "mutate")


def test_bad_input_over_https(server: Server) -> None:
    session = server.session()
    answer = session.post(server.url + "/mutate", data=b"nope", timeout=5)
    assert (answer.status_code, answer.text) == (400, "request body is not JSON: Expecting value at line 1, column 1\n")
    answer = session.post(server.url + "/validate", data=b"x" * (4 * 1024 * 1024 + 1), timeout=30)
    assert answer.status_code == 413
    assert "larger than the limit of 4194304 bytes" in answer.text


def test_metrics_add_up_across_workers(server: Server) -> None:
    def scrape() -> float:
        text = server.session().get(server.url + "/metrics", timeout=5).text
        total = 0.0
        for line in text.splitlines():
            if line.startswith('storage_affinity_admission_requests_total{endpoint="validate"'):
                total += float(line.rsplit(" ", 1)[1])
        return total

    before = scrape()

    def one(i: int) -> int:
        with server.session() as session:  # a new connection each time spreads load over both workers
            return session.post(server.url + "/validate", json=mover_review(f"m-{i}"), timeout=10).status_code

    with ThreadPoolExecutor(16) as pool:
        assert set(pool.map(one, range(64))) == {200}
    # Every scrape, whichever worker answers it, sees all 64 (and both workers wrote samples).
    assert [scrape() - before for _ in range(6)] == [64.0] * 6
    assert len(list(server.metrics_dir.glob("counter_*.db"))) >= 2


def test_idle_keepalive_connections_do_not_stall_the_server(server: Server) -> None:
    """kube-apiserver parks idle TLS connections; requests on other connections must still be answered."""
    port = int(server.url.rsplit(":", 1)[1])
    context = ssl.create_default_context(cafile=str(server.ca))
    idle = []
    try:
        for _ in range(64):  # far more than any thread pool a gthread worker would use
            raw = socket.create_connection(("127.0.0.1", port), timeout=5)
            idle.append(context.wrap_socket(raw, server_hostname="localhost"))  # handshake done, no request
        session = server.session()
        body = json.dumps(mover_review()).encode()
        for _ in range(20):
            # A stalled server would leave these unanswered until the idle connections time out (20 s+).
            answer = session.post(server.url + "/mutate", data=body, timeout=3)
            assert answer.status_code == 200
    finally:
        for sock in idle:
            sock.close()


def test_trivial_endpoint_for_benchmarks(server: Server) -> None:
    answer = server.session().post(server.url + "/allow", json=mover_review("t"), timeout=5).json()
    assert answer == {
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "response": {"uid": "t", "allowed": True},
    }
