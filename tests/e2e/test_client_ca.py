"""Only the API server asks: `serve --client-ca` answers reviews only to clients holding a certificate that a CA
of that file signed itself, with the clientAuth extended key usage and a `--client-name`, over the real server
(gunicorn, gevent worker, TLS), while probes and the metrics scrape need none."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
import requests

from certs.files import CERT_MODE, atomic_write
from certs.issue import CertKeyPair
from testkit.server import Server, issue_certs, running_server
from tests.e2e.test_server import mover_review
from tests.support import EXAMPLES
from tests.webhook.clientcerts import SERVER_AUTH, authority, leaf, write_client
from tests.webhook.review_checks import check_response
from webhook.serving.clientauth import NO_CERTIFICATE, NOT_CLIENT, NOT_DIRECT, NOT_NAMED, REFUSAL

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


#: A CA that signs for others too (a cert-manager ClusterIssuer tenants may use): the file lists it, and the
#: intermediate that signs kube-apiserver's certificate; another intermediate of it signs for tenants.
SHARED = authority("shared CA")
LISTED = authority("intermediate for kube-apiserver", SHARED)
UNLISTED = authority("intermediate for tenants", SHARED)
NAMES = ("kube-apiserver", "apiserver.example.internal")


@dataclass(frozen=True)
class Setup:
    server: Server
    ours: Issued  # the CA the server trusts for clients (and its serving CA)
    other: Issued  # another CA, with a client certificate of its own
    client_ca: Path  # the file given to --client-ca
    tmp: Path


@pytest.fixture(scope="module")
def setup(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Setup]:
    tmp = tmp_path_factory.mktemp("client-ca")
    ours, other = issue(tmp / "ours"), issue(tmp / "other")
    client_ca = tmp / "client-ca.crt"
    client_ca.write_bytes(ours.ca.read_bytes() + SHARED.cert_pem() + LISTED.cert_pem())
    names = [arg for name in NAMES for arg in ("--client-name", name)]
    args = ("--cluster", str(EXAMPLES / "cluster.yaml"), "--client-ca", str(client_ca), *names)
    # running_server waits for /readyz without a client certificate: the kubelet's probe.
    with running_server(tmp, *args, certs=ours.out) as server:
        yield Setup(server, ours, other, client_ca, tmp)


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
    assert f"review(s): {NO_CERTIFICATE}" in setup.server.log.read_text()


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


def status_with(setup: Setup, name: str, pair: CertKeyPair, *chain: CertKeyPair) -> tuple[int | str, bytes]:
    """The answer to a review from a client presenting `pair` (and sending `chain` along), or the handshake's
    failure."""
    try:
        answer = post(setup, "validate", write_client(pair, setup.tmp / "clients" / name, *chain))
    except requests.exceptions.ConnectionError:
        return "handshake failed", b""
    return answer.status_code, answer.content


#: Certificates the shared CA (or an intermediate of it) signed: who gets a review answered. Each refusal is a 403
#: saying why; a certificate OpenSSL refuses fails the handshake.
CERTIFICATES: dict[str, tuple[Callable[[], tuple[CertKeyPair, ...]], int | str]] = {
    "clientAuth, named kube-apiserver": (lambda: (leaf(SHARED, "kube-apiserver"),), 200),
    "clientAuth, the name in a DNS SAN": (
        lambda: (leaf(SHARED, "tenant-bob", dns=["apiserver.example.internal"]),),
        200,
    ),
    "from the intermediate the file lists": (lambda: (leaf(LISTED, "kube-apiserver"),), 200),
    "no extended key usage": (lambda: (leaf(SHARED, "kube-apiserver", usages=None),), NOT_CLIENT),
    "another name": (lambda: (leaf(SHARED, "tenant-bob"),), NOT_NAMED),
    "the name in another case": (lambda: (leaf(SHARED, "Kube-APIServer"),), NOT_NAMED),
    "from an intermediate the file does not list, sent along": (
        lambda: (leaf(UNLISTED, "kube-apiserver"), UNLISTED),
        NOT_DIRECT,
    ),
    "a CA's own certificate": (lambda: (leaf(SHARED, "kube-apiserver", ca=True),), NOT_CLIENT),
    "serverAuth only": (lambda: (leaf(SHARED, "kube-apiserver", usages=[SERVER_AUTH]),), "handshake failed"),
}


@pytest.mark.parametrize("case", sorted(CERTIFICATES))
def test_only_a_client_certificate_naming_kube_apiserver_from_a_listed_ca_is_answered(setup: Setup, case: str) -> None:
    make, expected = CERTIFICATES[case]
    pair, *chain = make()
    status, body = status_with(setup, case.replace(" ", "-").replace(",", ""), pair, *chain)
    if expected in {200, "handshake failed"}:
        assert status == expected, body
    else:
        assert (status, body) == (403, f"{expected}\n".encode())


def test_a_rotated_client_ca_file_is_trusted_without_a_restart(setup: Setup) -> None:
    """The CA file is watched as the serving certificate is: the other CA's client is answered once the file
    names that CA, and the former CA's is refused."""
    original = setup.client_ca.read_bytes()
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
        atomic_write(setup.client_ca, original, CERT_MODE)
