"""`issue_to_dir`, the work behind `storage-affinity-webhook certs`."""

from __future__ import annotations

import io
import stat
from pathlib import Path

import pytest
from cryptography import x509
from cryptography.x509.oid import ExtendedKeyUsageOID
from cryptography.x509.verification import PolicyBuilder, Store

from certs.cli import issue_to_dir
from certs.issue import load_certs_pem, load_pair, san_strings


def test_issues_a_verifiable_bundle_and_says_what_it_wrote(tmp_path: Path) -> None:
    out = io.StringIO()
    paths = issue_to_dir("webhook", "storage", tmp_path / "dev-certs", extra_dns=["webhook.example"], stdout=out)
    ca = load_certs_pem(paths.ca.read_bytes())
    leaf = load_pair(paths.cert.read_bytes(), paths.key.read_bytes())
    assert stat.S_IMODE(paths.key.stat().st_mode) == 0o600
    verifier = PolicyBuilder().store(Store(ca)).build_server_verifier(x509.DNSName("webhook.example"))
    assert verifier.verify(leaf.cert, [])[-1] == ca[0]
    text = out.getvalue()
    for path in (paths.ca, paths.cert, paths.key):
        assert f"wrote {path} " in text
    assert f"SANs: {', '.join(san_strings(leaf.cert))}\n" in text
    assert "webhook.storage.svc.cluster.local, localhost, webhook.example, 127.0.0.1, ::1" in text
    assert sorted(p.name for p in paths.ca.parent.iterdir()) == ["ca.crt", "tls.crt", "tls.key"]  # no CA key


def test_a_client_certificate_from_the_same_ca_serves_clients_only(tmp_path: Path) -> None:
    out = io.StringIO()
    paths = issue_to_dir("webhook", "storage", tmp_path, client="kube-apiserver", stdout=out)
    ca = load_certs_pem(paths.ca.read_bytes())
    client = load_pair((tmp_path / "client.crt").read_bytes(), (tmp_path / "client.key").read_bytes())
    assert stat.S_IMODE((tmp_path / "client.key").stat().st_mode) == 0o600
    client.cert.verify_directly_issued_by(ca[0])  # OpenSSL's verification of it: tests/e2e/test_client_ca.py
    usage = client.cert.extensions.get_extension_for_class(x509.ExtendedKeyUsage).value
    assert list(usage) == [ExtendedKeyUsageOID.CLIENT_AUTH]
    assert client.cert.subject.rfc4514_string() == "CN=kube-apiserver"
    assert "client certificate 'kube-apiserver'" in out.getvalue()


def test_each_run_issues_a_new_ca(tmp_path: Path) -> None:
    first = issue_to_dir("webhook", "storage", tmp_path, stdout=io.StringIO()).ca.read_bytes()
    second = issue_to_dir("webhook", "storage", tmp_path, stdout=io.StringIO()).ca.read_bytes()
    assert first != second


def test_invalid_input_writes_nothing(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="not a valid DNS label"):
        issue_to_dir("Web_Hook", "storage", tmp_path / "out", stdout=io.StringIO())
    with pytest.raises(ValueError, match="not an IPv4"):
        issue_to_dir("webhook", "storage", tmp_path / "out", extra_ips=["nope"], stdout=io.StringIO())
    assert not (tmp_path / "out").exists()
