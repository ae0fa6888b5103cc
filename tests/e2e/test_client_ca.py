"""Only the API server asks: `serve --client-ca` answers reviews only to clients holding a certificate that CA
signed, over the real server (gunicorn, gevent worker, TLS), while probes and the metrics scrape need none."""

from __future__ import annotations

import shutil
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
import requests

from certs.files import CERT_MODE, atomic_write
from testkit.server import Server, issue_certs, running_server
from tests.e2e.test_server import mover_review
from tests.support import EXAMPLES
from tests.webhook.review_checks import check_response
from webhook.serving.clientauth import REFUSAL

pytestmark = pytest.mark.e2e

ADMISSION = ["mutate", "validate"]


@dataclass(frozen=True)
class Issued:
    """A CA (its key discarded), a serving certificate and a client certificate it signed."""

    out: Path

    @property
    def ca(self) -> Path:
        return self.out / "ca.crt"

    @property
    def client(self) -> tuple[str, str]:
        return str(self.out / "client.crt"), str(self.out / "client.key")


def issue(out: Path) -> Issued:
    """Through the project's own `certs --client-cert`, as docs/operations.md tells operators to."""
    issue_certs(out, "--client-cert", "kube-apiserver")
    return Issued(out)


@dataclass(frozen=True)
class Setup:
    server: Server
    ours: Issued  # the CA the server trusts for clients (and its serving CA)
    other: Issued  # another CA, with a client certificate of its own
    client_ca: Path  # the file given to --client-ca


@pytest.fixture(scope="module")
def setup(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Setup]:
    tmp = tmp_path_factory.mktemp("client-ca")
    ours, other = issue(tmp / "ours"), issue(tmp / "other")
    client_ca = tmp / "client-ca.crt"
    shutil.copy(ours.ca, client_ca)
    args = ("--cluster", str(EXAMPLES / "cluster.yaml"), "--client-ca", str(client_ca))
    # running_server waits for /readyz without a client certificate: the kubelet's probe.
    with running_server(tmp, *args, certs=ours.out) as server:
        yield Setup(server, ours, other, client_ca)


def post(setup: Setup, endpoint: str, client: tuple[str, str] | None) -> requests.Response:
    with setup.server.session() as session:
        session.cert = client
        return session.post(f"{setup.server.url}/{endpoint}", json=mover_review(f"ca-{endpoint}"), timeout=10)


@pytest.mark.parametrize("endpoint", ADMISSION)
def test_a_client_without_a_certificate_gets_no_review_answer(setup: Setup, endpoint: str) -> None:
    answer = post(setup, endpoint, None)
    assert answer.status_code == 403
    assert answer.content == REFUSAL  # what to fix, and no review answer


def refused_count(setup: Setup, endpoint: str) -> float:
    with setup.server.session() as session:
        text = session.get(setup.server.url + "/metrics", timeout=10).text
    series = f'storage_affinity_client_certificate_refused_total{{endpoint="{endpoint}"}} '
    (value,) = [line.removeprefix(series) for line in text.splitlines() if line.startswith(series)]
    return float(value)


@pytest.mark.parametrize("endpoint", ADMISSION)
def test_each_refusal_is_counted_and_logged(setup: Setup, endpoint: str) -> None:
    """A kube-apiserver left without its certificate shows: the webhooks' failurePolicy hides it otherwise."""
    before = refused_count(setup, endpoint)
    assert post(setup, endpoint, None).status_code == 403
    assert refused_count(setup, endpoint) == before + 1
    assert "without a certificate signed by the --client-ca" in setup.server.log.read_text()


@pytest.mark.parametrize("endpoint", ADMISSION)
def test_a_certificate_from_another_ca_fails_the_handshake(setup: Setup, endpoint: str) -> None:
    with pytest.raises(requests.exceptions.ConnectionError):  # SSLError is one; TLS 1.3 may show a reset instead
        post(setup, endpoint, setup.other.client)


def test_the_serving_certificate_is_no_client_certificate(setup: Setup) -> None:
    """Same CA, but the extended key usage is serverAuth: OpenSSL checks a client certificate's purpose."""
    serving = (str(setup.ours.out / "tls.crt"), str(setup.ours.out / "tls.key"))
    with pytest.raises(requests.exceptions.ConnectionError):
        post(setup, "validate", serving)


@pytest.mark.parametrize("endpoint", ADMISSION)
def test_a_certificate_from_the_ca_gets_the_review_answered(setup: Setup, endpoint: str) -> None:
    answer = post(setup, endpoint, setup.ours.client)
    assert answer.status_code == 200
    patch = check_response(mover_review(f"ca-{endpoint}"), answer.json(), mutating=endpoint == "mutate")
    assert bool(patch) == (endpoint == "mutate")  # the mover pod is placed: the real review ran


@pytest.mark.parametrize("path", ["/livez", "/healthz", "/readyz", "/metrics"])
def test_probes_and_the_scrape_need_no_certificate(setup: Setup, path: str) -> None:
    with setup.server.session() as session:
        answer = session.get(setup.server.url + path, timeout=10)
    assert answer.status_code == 200, answer.text


def test_a_rotated_client_ca_file_is_trusted_without_a_restart(setup: Setup) -> None:
    """The CA file is watched as the serving certificate is: the other CA's client is answered once the file
    names that CA, and the former CA's is refused."""
    try:
        atomic_write(setup.client_ca, setup.other.ca.read_bytes(), CERT_MODE)
        deadline = time.monotonic() + 15
        while True:
            try:
                if post(setup, "validate", setup.other.client).status_code == 200:
                    break
            except requests.exceptions.ConnectionError:
                pass
            assert time.monotonic() < deadline, "the rotated client CA was never trusted"
            time.sleep(0.2)
        time.sleep(1.2)  # past every worker's check interval: none still trusts the former CA
        with pytest.raises(requests.exceptions.ConnectionError):
            post(setup, "validate", setup.ours.client)
    finally:
        atomic_write(setup.client_ca, setup.ours.ca.read_bytes(), CERT_MODE)
