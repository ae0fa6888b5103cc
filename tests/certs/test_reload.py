"""The reloading server context against a real TLS server: rotation, broken pairs, throttling, protocol floor."""

from __future__ import annotations

import logging
import ssl
from collections.abc import Iterator
from pathlib import Path

import pytest

from certs.files import BundlePaths, write_bundle
from certs.issue import CertKeyPair, issue_ca, issue_client, issue_serving
from certs.reload import ReloadingServerContext
from tests.certs.support import NAMESPACE, SERVICE, TLSServer, client_context, der, handshake, running


class FakeClock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def second() -> tuple[CertKeyPair, CertKeyPair]:
    """A pair under a different CA, as after a CA rotation."""
    ca2 = issue_ca()
    return ca2, issue_serving(ca2, SERVICE, NAMESPACE)


@pytest.fixture
def bundle(out_dir: Path, ca: CertKeyPair, leaf: CertKeyPair) -> BundlePaths:
    return write_bundle(out_dir, ca, leaf)


def reloading(paths: BundlePaths, **kwargs: object) -> tuple[ReloadingServerContext, list[str | None]]:
    """A reloading context whose SNI callback also records the server name each handshake announced."""
    rc = ReloadingServerContext(paths.cert, paths.key, **kwargs)  # type: ignore[arg-type]
    seen: list[str | None] = []
    original = rc.context.sni_callback
    assert original is not None

    def recording(sock: ssl.SSLObject | ssl.SSLSocket, name: str | None, ctx: ssl.SSLContext) -> None:
        seen.append(name)
        original(sock, name, ctx)  # type: ignore[arg-type]

    rc.context.sni_callback = recording
    return rc, seen


@pytest.fixture
def server(bundle: BundlePaths) -> Iterator[tuple[ReloadingServerContext, list[str | None], TLSServer]]:
    rc, seen = reloading(bundle, check_interval=0)
    with running(rc.context) as srv:
        yield rc, seen, srv


Served = tuple[ReloadingServerContext, list[str | None], TLSServer]


def test_rotated_files_are_served_with_and_without_sni(
    server: Served, out_dir: Path, ca: CertKeyPair, leaf: CertKeyPair, second: tuple[CertKeyPair, CertKeyPair]
) -> None:
    rc, seen, srv = server
    ca2, leaf2 = second
    trusting_both = client_context(ca, ca2)
    no_verify_name = client_context(ca, ca2, check_hostname=False)
    assert handshake(srv.port, trusting_both, "localhost").der == der(leaf)
    assert rc.not_after == leaf.not_after

    write_bundle(out_dir, ca2, leaf2)
    # First handshake after the rotation sends no SNI at all: only a callback that runs without SNI can switch.
    assert handshake(srv.port, no_verify_name, None).der == der(leaf2)
    assert handshake(srv.port, trusting_both, "127.0.0.1").der == der(leaf2)  # IP: verified, no SNI sent
    assert handshake(srv.port, trusting_both, "webhook.storage.svc").der == der(leaf2)
    assert handshake(srv.port, client_context(ca2), "localhost").der == der(leaf2)
    assert seen == ["localhost", None, None, "webhook.storage.svc", "localhost"]
    assert rc.not_after == leaf2.not_after
    assert srv.errors == []


@pytest.mark.parametrize("breakage", ["mismatched", "truncated", "new-key-only", "missing-key", "garbage"])
def test_a_broken_pair_keeps_the_last_good_one_until_the_files_are_fixed(
    *,
    server: Served,
    bundle: BundlePaths,
    ca: CertKeyPair,
    leaf: CertKeyPair,
    second: tuple[CertKeyPair, CertKeyPair],
    caplog: pytest.LogCaptureFixture,
    breakage: str,
) -> None:
    rc, _, srv = server
    ca2, leaf2 = second
    client = client_context(ca, ca2)
    if breakage == "mismatched":
        bundle.cert.write_bytes(leaf2.cert_pem())  # certificate of another key
    elif breakage == "truncated":
        bundle.cert.write_bytes(leaf2.cert_pem()[:300])
        bundle.key.write_bytes(leaf2.key_pem())
    elif breakage == "new-key-only":  # a writer caught between tls.key and tls.crt
        bundle.key.write_bytes(leaf2.key_pem())
    elif breakage == "missing-key":
        bundle.key.unlink()
    else:
        bundle.cert.write_bytes(b"-----BEGIN CERTIFICATE-----\nbm90IGEgY2VydA==\n-----END CERTIFICATE-----\n")

    with caplog.at_level(logging.WARNING, logger="certs.reload"):
        for _ in range(3):
            assert handshake(srv.port, client, "localhost").der == der(leaf)
    warnings = [r for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1  # once per broken state, not once per handshake
    assert "keeping the current TLS certificate" in warnings[0].getMessage()
    assert rc.not_after == leaf.not_after

    write_bundle(bundle.cert.parent, ca2, leaf2)
    assert handshake(srv.port, client, "localhost").der == der(leaf2)
    assert rc.not_after == leaf2.not_after


def test_files_are_checked_at_most_once_per_interval(
    bundle: BundlePaths, ca: CertKeyPair, leaf: CertKeyPair, second: tuple[CertKeyPair, CertKeyPair]
) -> None:
    ca2, leaf2 = second
    clock = FakeClock()
    rc, seen = reloading(bundle, check_interval=1.0, clock=clock)
    client = client_context(ca, ca2)
    with running(rc.context) as srv:
        write_bundle(bundle.cert.parent, ca2, leaf2)
        clock.now += 0.9
        assert handshake(srv.port, client, "localhost").der == der(leaf)
        clock.now += 0.1
        assert handshake(srv.port, client, "localhost").der == der(leaf2)
    assert len(seen) == 2


def test_reload_if_changed_reports_whether_a_new_pair_serves(
    bundle: BundlePaths, second: tuple[CertKeyPair, CertKeyPair]
) -> None:
    rc = ReloadingServerContext(bundle.cert, bundle.key)
    assert not rc.reload_if_changed()
    first_context = rc.serving_context
    ca2, leaf2 = second
    write_bundle(bundle.cert.parent, ca2, leaf2)
    assert rc.reload_if_changed()
    assert rc.serving_context is not first_context
    assert not rc.reload_if_changed()
    assert rc.reload_if_changed(force=True)


def test_a_server_does_not_start_without_a_valid_pair(
    out_dir: Path, bundle: BundlePaths, second: tuple[CertKeyPair, CertKeyPair]
) -> None:
    bundle.cert.write_bytes(second[1].cert_pem())
    with pytest.raises(ValueError, match="does not match"):
        ReloadingServerContext(bundle.cert, bundle.key)
    with pytest.raises(FileNotFoundError):
        ReloadingServerContext(out_dir / "absent.crt", bundle.key)


def test_tls_1_3_and_1_2_with_aead_suites_only(server: Served, ca: CertKeyPair) -> None:
    _, _, srv = server
    assert handshake(srv.port, client_context(ca), "localhost").version == "TLSv1.3"
    tls12 = client_context(ca)
    tls12.maximum_version = ssl.TLSVersion.TLSv1_2
    result = handshake(srv.port, tls12, "localhost")
    assert result.version == "TLSv1.2"
    assert result.cipher.startswith("ECDHE-ECDSA-") and ("GCM" in result.cipher or "CHACHA20" in result.cipher)


def legacy_client(ca: CertKeyPair, version: ssl.TLSVersion, ciphers: str) -> ssl.SSLContext:
    ctx = client_context(ca)
    ctx.minimum_version = ctx.maximum_version = version
    ctx.set_ciphers(ciphers)
    return ctx


def permissive_server(bundle: BundlePaths) -> ssl.SSLContext:
    """The control: a server that would accept the legacy client, proving the client really offers it."""
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.minimum_version = ssl.TLSVersion.MINIMUM_SUPPORTED
    ctx.set_ciphers("ALL:@SECLEVEL=0")
    ctx.load_cert_chain(bundle.cert, bundle.key)
    return ctx


@pytest.mark.filterwarnings("ignore:ssl.TLSVersion.TLSv1_1 is deprecated:DeprecationWarning")
@pytest.mark.parametrize(
    ("version", "ciphers", "expected"),
    [
        (ssl.TLSVersion.TLSv1_1, "ALL:@SECLEVEL=0", "TLSv1.1"),
        (ssl.TLSVersion.TLSv1_2, "ECDHE-ECDSA-AES128-SHA256:@SECLEVEL=0", "TLSv1.2"),  # CBC, not AEAD
    ],
)
def test_legacy_clients_are_refused(
    *, server: Served, bundle: BundlePaths, ca: CertKeyPair, version: ssl.TLSVersion, ciphers: str, expected: str
) -> None:
    _, _, srv = server
    try:
        legacy = legacy_client(ca, version, ciphers)
        with running(permissive_server(bundle)) as control:
            assert handshake(control.port, legacy, "localhost").version == expected
    except (ssl.SSLError, ValueError) as exc:
        pytest.skip(f"this OpenSSL cannot speak {expected} with {ciphers}: {exc}")

    with pytest.raises((ssl.SSLError, ConnectionResetError, BrokenPipeError)):
        handshake(srv.port, legacy, "localhost")
    srv.wait_handled(1)
    assert len(srv.errors) == 1
    assert isinstance(srv.errors[0], ssl.SSLError)
    assert srv.errors[0].reason in ("UNSUPPORTED_PROTOCOL", "NO_SHARED_CIPHER"), srv.errors[0]


GEVENT_SCRIPT = """
from gevent import monkey; monkey.patch_all()
import socket, ssl, sys
from pathlib import Path
import gevent.ssl
from gevent.server import StreamServer
from cryptography.hazmat.primitives.serialization import Encoding
from certs.files import write_bundle
from certs.issue import certs_to_pem, issue_ca, issue_serving
from certs.reload import ReloadingServerContext

out = Path(sys.argv[1])
ca1 = issue_ca(); leaf1 = issue_serving(ca1, "w", "n"); write_bundle(out, ca1, leaf1)
rc = ReloadingServerContext(out / "tls.crt", out / "tls.key", check_interval=0)
assert isinstance(rc.context, gevent.ssl.SSLContext) and isinstance(rc.serving_context, gevent.ssl.SSLContext)
server = StreamServer(("127.0.0.1", 0), lambda sock, _: (sock.sendall(b"ok"), sock.close()), ssl_context=rc.context)
server.start()
ca2 = issue_ca(); leaf2 = issue_serving(ca2, "w", "n")
client = ssl.create_default_context(cadata=certs_to_pem([ca1.cert, ca2.cert]).decode())
def peer(host):
    with socket.create_connection(("127.0.0.1", server.server_port)) as raw:
        with client.wrap_socket(raw, server_hostname=host) as tls:
            assert tls.recv(2) == b"ok"
            return tls.getpeercert(True)
assert peer("localhost") == leaf1.cert.public_bytes(Encoding.DER)
write_bundle(out, ca2, leaf2)
assert peer("127.0.0.1") == leaf2.cert.public_bytes(Encoding.DER)
server.stop()
print("rotated under gevent")
"""


def test_rotation_works_under_gevent_monkey_patching(tmp_path: Path) -> None:
    """gunicorn's gevent worker patches `ssl`: contexts must be gevent's, and the SNI switch must still work."""
    import subprocess
    import sys

    pytest.importorskip("gevent")
    root = Path(__file__).resolve().parents[2]
    result = subprocess.run(
        [sys.executable, "-c", GEVENT_SCRIPT, str(tmp_path / "tls")],
        cwd=root,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "rotated under gevent"


def client_with(ca: CertKeyPair, client: CertKeyPair, directory: Path) -> ssl.SSLContext:
    """A verifying client that presents `client`."""
    directory.mkdir(exist_ok=True)
    (directory / "client.crt").write_bytes(client.cert_pem())
    (directory / "client.key").write_bytes(client.key_pem())
    context = client_context(ca)
    context.load_cert_chain(directory / "client.crt", directory / "client.key")
    return context


def test_a_broken_client_ca_file_keeps_the_last_good_ca_until_a_valid_one_replaces_it(
    bundle: BundlePaths, tmp_path: Path, ca: CertKeyPair, caplog: pytest.LogCaptureFixture
) -> None:
    other = issue_ca()
    trusted, refused = issue_client(ca, "kube-apiserver"), issue_client(other, "kube-apiserver")
    client_ca = tmp_path / "client-ca.crt"
    client_ca.write_bytes(ca.cert_pem())
    rc = ReloadingServerContext(bundle.cert, bundle.key, check_interval=0, client_ca=client_ca)
    ours, theirs = client_with(ca, trusted, tmp_path / "ours"), client_with(ca, refused, tmp_path / "theirs")
    with running(rc.context) as srv:
        handshake(srv.port, ours, "localhost")
        srv.wait_handled(1)
        with pytest.raises((ssl.SSLError, OSError)):
            handshake(srv.port, theirs, "localhost")
        srv.wait_handled(2)

        client_ca.write_text("-----BEGIN CERTIFICATE-----\ngarbage\n-----END CERTIFICATE-----\n")
        with caplog.at_level(logging.WARNING, logger="certs.reload"):
            handshake(srv.port, ours, "localhost")  # the last good CA still verifies
        assert str(client_ca) in caplog.text
        srv.wait_handled(3)

        client_ca.write_bytes(other.cert_pem())
        handshake(srv.port, theirs, "localhost")
        srv.wait_handled(4)
        with pytest.raises((ssl.SSLError, OSError)):
            handshake(srv.port, ours, "localhost")
        srv.wait_handled(5)
    assert all(isinstance(error, ssl.SSLError) for error in srv.errors) and len(srv.errors) == 2
