"""The guarantees of SECURITY.md that need the real server: TLS settings, no plain HTTP, nothing secret in logs."""

from __future__ import annotations

import contextlib
import copy
import json
import socket
import ssl
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from certs.reload import server_context
from testkit.fakeapi import Request, running_fake_api
from testkit.server import Server, running_server
from tests.e2e.test_server import mover_review
from tests.support import EXAMPLES
from tests.webhook.review_checks import check_response

pytestmark = pytest.mark.e2e

# Values that must never reach the log: object contents, the API token, the serving key.
SECRET_ANNOTATION = "s3cr3t-annotation-7f9c2e41"
SECRET_ENV = "hunter2-env-value-4b1d8a93"
SECRET_ROLE = "role-value-0c5e7d21"  # an invalid value of our own annotation: denied, echoed to the user only
API_TOKEN = "fake-token"  # what testkit/fakeapi/store.py writes into the kubeconfig


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    with running_server(tmp_path_factory.mktemp("security"), "--cluster", str(EXAMPLES / "cluster.yaml")) as srv:
        yield srv


def handshake(server: Server, context: ssl.SSLContext) -> tuple[str | None, str]:
    port = int(server.url.rsplit(":", 1)[1])
    with (
        socket.create_connection(("127.0.0.1", port), timeout=5) as raw,
        context.wrap_socket(raw, server_hostname="localhost") as tls,
    ):
        cipher = tls.cipher()
        return tls.version(), cipher[0] if cipher else ""


def client_context(server: Server, version: ssl.TLSVersion, ciphers: str = "ALL") -> ssl.SSLContext:
    """A verifying client that really offers `version` and `ciphers`: OpenSSL's security level 0 lets it send
    what the default level refuses client-side (TLS 1.1, CBC suites), so a refusal can only come from the server."""
    context = ssl.create_default_context(cafile=str(server.ca))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)  # TLSv1_1 itself is deprecated in the ssl module
        context.minimum_version = version
        context.maximum_version = version
    context.set_ciphers(f"{ciphers}:@SECLEVEL=0")
    return context


@pytest.mark.parametrize("version", [ssl.TLSVersion.TLSv1, ssl.TLSVersion.TLSv1_1])
def test_tls_before_1_2_is_refused_by_the_server(server: Server, version: ssl.TLSVersion) -> None:
    with pytest.raises(ssl.SSLError, match=r"PROTOCOL_VERSION|UNSUPPORTED_PROTOCOL|VERSION_TOO_LOW"):
        handshake(server, client_context(server, version))


def test_tls_1_2_and_1_3_are_served_with_forward_secret_aead_suites(server: Server) -> None:
    assert handshake(server, client_context(server, ssl.TLSVersion.TLSv1_2)) == (
        "TLSv1.2",
        "ECDHE-ECDSA-AES256-GCM-SHA384",
    )
    version, _ = handshake(server, client_context(server, ssl.TLSVersion.TLSv1_3))
    assert version == "TLSv1.3"


@pytest.mark.parametrize(
    "ciphers",
    [
        "ECDHE-ECDSA-AES128-SHA:ECDHE-ECDSA-AES256-SHA",  # CBC, SHA-1 MAC
        "ECDHE-ECDSA-AES128-SHA256:ECDHE-ECDSA-AES256-SHA384",  # CBC
        "ECDHE-ECDSA-AES128-CCM8:ECDHE-ECDSA-AES256-CCM8",  # AEAD with a truncated tag, not in the profile
    ],
)
def test_tls_1_2_suites_without_ecdhe_and_gcm_or_chacha_are_refused(server: Server, ciphers: str) -> None:
    context = client_context(server, ssl.TLSVersion.TLSv1_2, ciphers)
    assert context.get_ciphers(), "the client offers these suites"
    with pytest.raises(ssl.SSLError, match=r"HANDSHAKE_FAILURE|NO_SHARED_CIPHER"):
        handshake(server, context)


def test_every_tls_1_2_suite_of_the_server_context_is_ecdhe_and_aead() -> None:
    """Whatever the key type (the server's ECDSA key already rules out RSA key exchange): the configured list."""
    context = server_context()
    assert context.minimum_version == ssl.TLSVersion.TLSv1_2
    suites = [c for c in context.get_ciphers() if c["protocol"] == "TLSv1.2"]
    assert suites
    for suite in suites:
        assert (suite["kea"], suite["aead"]) == ("kx-ecdhe", True), suite["name"]


def test_plain_http_to_the_tls_port_gets_no_admission_answer(server: Server) -> None:
    port = int(server.url.rsplit(":", 1)[1])
    body = json.dumps(mover_review("plain")).encode()
    head = f"POST /mutate HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\nContent-Length: {len(body)}"
    received = b""
    with socket.create_connection(("127.0.0.1", port), timeout=5) as plain:
        plain.sendall(head.encode() + b"\r\n\r\n" + body)
        try:
            while chunk := plain.recv(65536):
                received += chunk
        except ConnectionResetError:
            pass
    assert b"AdmissionReview" not in received and b"HTTP/" not in received, received[:200]


def secret_pod() -> dict[str, Any]:
    review = mover_review("secret-1")
    pod = review["request"]["object"]
    pod["metadata"]["annotations"] = {"example.com/api-key": SECRET_ANNOTATION}
    pod["spec"]["containers"][0]["env"] = [{"name": "DB_PASSWORD", "value": SECRET_ENV}]
    return review


def test_no_object_contents_tokens_or_keys_in_the_log_at_the_default_level(tmp_path: Path) -> None:
    def pvc_get(req: Request) -> bool:
        return req.method == "GET" and not req.watch and "/persistentvolumeclaims/" in req.path

    with running_fake_api() as api:
        kubeconfig = api.write_kubeconfig(tmp_path / "kubeconfig")
        assert API_TOKEN in kubeconfig.read_text()
        with running_server(tmp_path, "--kubeconfig", str(kubeconfig)) as server, server.session() as session:
            for endpoint in ("mutate", "validate"):
                review = secret_pod()
                check_response(
                    review,
                    session.post(f"{server.url}/{endpoint}", json=review, timeout=10).json(),
                    mutating=endpoint == "mutate",
                )
            # A denial that names our annotation's invalid value (to the user, in the response).
            denied = secret_pod()
            denied["request"]["object"]["metadata"]["annotations"]["storage-affinity.io/role"] = SECRET_ROLE
            answer = session.post(f"{server.url}/validate", json=denied, timeout=10).json()
            check_response(denied, answer, mutating=False)
            assert answer["response"]["allowed"] is False
            # The lookup a review needs fails: the review is admitted with a warning saying why.
            api.fail(500, pvc_get)
            review = secret_pod()
            # A claim no review asked for yet: the 404 of data-db-0 above is remembered for a few seconds.
            review["request"]["object"]["spec"]["volumes"][0]["persistentVolumeClaim"]["claimName"] = "data-db-1"
            answer = session.post(f"{server.url}/mutate", json=review, timeout=10).json()
            check_response(review, answer, mutating=True)
            assert any("cluster state unavailable" in w for w in answer["response"]["warnings"]), answer
            api.fail(None)
            # Bodies that are not reviews: 400 and 413, each carrying the secrets.
            text = json.dumps(secret_pod())
            for bad in (text[: len(text) // 2], json.dumps(secret_pod()["request"]), "x" + text):
                assert session.post(f"{server.url}/mutate", data=bad.encode(), timeout=10).status_code == 400
            broken = copy.deepcopy(secret_pod())
            broken["request"]["object"]["spec"] = SECRET_ENV
            assert session.post(f"{server.url}/validate", json=broken, timeout=10).status_code in (200, 400)
            huge = text.encode() + b" " * (4 * 1024 * 1024)
            assert session.post(f"{server.url}/mutate", data=huge, timeout=30).status_code == 413
            key = (tmp_path / "certs" / "tls.key").read_text().splitlines()[1]
        log = server.log.read_text()

    assert "Booting worker" in log and "using the base policy" in log  # gunicorn's and the app's messages
    for secret in (SECRET_ANNOTATION, SECRET_ENV, SECRET_ROLE, API_TOKEN, key):
        assert secret not in log, f"{secret!r} is in the server log"


def test_failed_handshakes_do_not_flood_the_log(server: Server) -> None:
    """Anyone who reaches the port can fail a handshake; gevent used to print a 15-line traceback for each."""
    port = int(server.url.rsplit(":", 1)[1])
    before = server.log.stat().st_size
    for attempt in range(20):
        with socket.create_connection(("127.0.0.1", port), timeout=5) as plain:
            if attempt % 2:
                plain.sendall(b"GET /healthz HTTP/1.1\r\nHost: localhost\r\n\r\n")
                with contextlib.suppress(ConnectionResetError):
                    plain.recv(100)
    with server.session() as session:  # served after the failed ones: they were all handled by now
        for _ in range(4):
            assert session.get(server.url + "/healthz", timeout=5).status_code == 200
    grown = server.log.read_bytes()[before:]
    assert b"Traceback" not in grown and len(grown) < 200, grown[:500]
