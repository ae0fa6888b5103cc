"""Certificate contents, checked field by field and by two independent verifiers (cryptography's and OpenSSL's)."""

from __future__ import annotations

import ipaddress
import ssl
from datetime import UTC, datetime, timedelta

import pytest
from cryptography import x509
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID
from cryptography.x509.verification import PolicyBuilder, Store, VerificationError

from certs.issue import (
    BACKDATE,
    CA_VALIDITY,
    LEAF_VALIDITY,
    CertKeyPair,
    issue_ca,
    issue_serving,
    load_certs_pem,
    load_pair,
    san_strings,
)
from tests.certs.support import NAMESPACE, SERVICE, client_context, der, handshake, running

NOW = datetime(2030, 6, 1, 12, 0, 0, tzinfo=UTC)
EXPECTED_SANS = [
    "webhook",
    "webhook.storage",
    "webhook.storage.svc",
    "webhook.storage.svc.cluster.local",
    "localhost",
    "127.0.0.1",
    "::1",
]


def ext(cert: x509.Certificate, kind: type[x509.ExtensionType]) -> x509.Extension[x509.ExtensionType]:
    return cert.extensions.get_extension_for_class(kind)


def test_ca_is_a_p256_signing_only_ca_with_backdated_start() -> None:
    ca = issue_ca(now=NOW)
    assert isinstance(ca.key, ec.EllipticCurvePrivateKey)
    assert isinstance(ca.key.curve, ec.SECP256R1)
    assert ca.cert.not_valid_before_utc == NOW - timedelta(hours=1)
    assert ca.cert.not_valid_after_utc == NOW + CA_VALIDITY
    constraints = ext(ca.cert, x509.BasicConstraints)
    assert constraints.critical
    assert constraints.value == x509.BasicConstraints(ca=True, path_length=0)
    usage = ext(ca.cert, x509.KeyUsage)
    assert usage.critical
    assert isinstance(usage.value, x509.KeyUsage)
    assert usage.value.key_cert_sign and usage.value.crl_sign
    assert not usage.value.digital_signature and not usage.value.key_encipherment
    assert ext(ca.cert, x509.SubjectKeyIdentifier).value == x509.SubjectKeyIdentifier.from_public_key(
        ca.key.public_key()
    )
    assert ca.cert.issuer == ca.cert.subject
    ca.cert.verify_directly_issued_by(ca.cert)


def test_two_cas_have_different_names_and_keys() -> None:
    first, second = issue_ca(now=NOW), issue_ca(now=NOW + timedelta(seconds=1))
    assert first.cert.subject != second.cert.subject
    assert first.key.public_key() != second.key.public_key()


def test_serving_certificate_has_exactly_the_service_names_and_local_addresses(ca: CertKeyPair) -> None:
    leaf = issue_serving(ca, SERVICE, NAMESPACE)
    sans = ext(leaf.cert, x509.SubjectAlternativeName).value
    assert isinstance(sans, x509.SubjectAlternativeName)
    assert sans.get_values_for_type(x509.DNSName) == EXPECTED_SANS[:5]
    assert sans.get_values_for_type(x509.IPAddress) == [ipaddress.ip_address("127.0.0.1"), ipaddress.ip_address("::1")]
    assert san_strings(leaf.cert) == EXPECTED_SANS


def test_serving_certificate_extensions(ca: CertKeyPair) -> None:
    leaf = issue_serving(ca, SERVICE, NAMESPACE, now=NOW)
    assert isinstance(leaf.key, ec.EllipticCurvePrivateKey)
    assert isinstance(leaf.key.curve, ec.SECP256R1)
    assert leaf.cert.not_valid_before_utc == NOW - BACKDATE
    assert leaf.cert.not_valid_after_utc == NOW + LEAF_VALIDITY
    assert ext(leaf.cert, x509.BasicConstraints).value == x509.BasicConstraints(ca=False, path_length=None)
    usage = ext(leaf.cert, x509.KeyUsage).value
    assert isinstance(usage, x509.KeyUsage)
    assert usage.digital_signature and not usage.key_cert_sign and not usage.key_encipherment
    assert list(ext(leaf.cert, x509.ExtendedKeyUsage).value) == [ExtendedKeyUsageOID.SERVER_AUTH]  # type: ignore[call-overload]
    aki = ext(leaf.cert, x509.AuthorityKeyIdentifier).value
    assert isinstance(aki, x509.AuthorityKeyIdentifier)
    assert aki.key_identifier == x509.SubjectKeyIdentifier.from_public_key(ca.key.public_key()).digest
    assert leaf.cert.subject.get_attributes_for_oid(NameOID.COMMON_NAME)[0].value == "webhook.storage.svc"
    assert not ext(leaf.cert, x509.SubjectAlternativeName).critical
    assert leaf.cert.issuer == ca.cert.subject
    leaf.cert.verify_directly_issued_by(ca.cert)
    assert leaf.key.public_key() != ca.key.public_key()


def test_default_start_is_an_hour_before_now(ca: CertKeyPair) -> None:
    before = datetime.now(UTC).replace(microsecond=0)
    leaf = issue_serving(ca, SERVICE, NAMESPACE)
    after = datetime.now(UTC)
    assert before - BACKDATE <= leaf.cert.not_valid_before_utc <= after - BACKDATE


def test_extra_names_are_appended_once_and_local_names_can_be_left_out(ca: CertKeyPair) -> None:
    leaf = issue_serving(
        ca,
        SERVICE,
        NAMESPACE,
        extra_dns=["webhook.example.com", "Webhook.Storage", "webhook.example.com"],
        extra_ips=["10.0.0.7", "::1"],
        local=False,
        cluster_domain="corp.internal",
    )
    assert san_strings(leaf.cert) == [
        "webhook",
        "webhook.storage",
        "webhook.storage.svc",
        "webhook.storage.svc.corp.internal",
        "webhook.example.com",
        "10.0.0.7",
        "::1",
    ]


def test_names_too_long_for_a_common_name_give_an_empty_subject_and_critical_sans(ca: CertKeyPair) -> None:
    service, namespace = "s" * 40, "n" * 40
    leaf = issue_serving(ca, service, namespace)
    assert leaf.cert.subject == x509.Name([])
    sans = ext(leaf.cert, x509.SubjectAlternativeName)
    assert sans.critical
    assert f"{service}.{namespace}.svc" in san_strings(leaf.cert)


@pytest.mark.parametrize(
    ("service", "namespace", "extra_dns", "extra_ips"),
    [
        ("Webhook", "ns", [], []),
        ("webhook", "ns.sub", [], []),
        ("", "ns", [], []),
        ("webhook", "-ns", [], []),
        ("webhook", "ns", ["bad name"], []),
        ("webhook", "ns", ["bücher.example"], []),
        ("webhook", "ns", [], ["300.1.1.1"]),
        ("webhook", "ns", [], ["localhost"]),
    ],
)
def test_invalid_names_are_rejected(
    ca: CertKeyPair, service: str, namespace: str, extra_dns: list[str], extra_ips: list[str]
) -> None:
    with pytest.raises(ValueError, match=r"not a valid|not an IPv4"):
        issue_serving(ca, service, namespace, extra_dns=extra_dns, extra_ips=extra_ips)


def test_serving_certificate_never_outlives_its_ca() -> None:
    ca = issue_ca(now=NOW, validity=timedelta(days=30))
    leaf = issue_serving(ca, SERVICE, NAMESPACE, now=NOW)
    assert leaf.not_after == ca.not_after == NOW + timedelta(days=30)


def test_naive_time_is_refused() -> None:
    with pytest.raises(ValueError, match="timezone-aware"):
        issue_ca(now=datetime(2030, 1, 1))


def verifier(ca: CertKeyPair, name: x509.DNSName | x509.IPAddress, at: datetime | None = None) -> object:
    builder = PolicyBuilder().store(Store([ca.cert]))
    if at is not None:
        builder = builder.time(at)
    return builder.build_server_verifier(name)


@pytest.mark.parametrize("name", EXPECTED_SANS)
def test_webpki_verifier_accepts_every_san(ca: CertKeyPair, leaf: CertKeyPair, name: str) -> None:
    subject: x509.DNSName | x509.IPAddress
    try:
        subject = x509.IPAddress(ipaddress.ip_address(name))
    except ValueError:
        subject = x509.DNSName(name)
    builder = PolicyBuilder().store(Store([ca.cert])).build_server_verifier(subject)
    chain = builder.verify(leaf.cert, [])
    assert chain == [leaf.cert, ca.cert]


def test_webpki_verifier_rejects_other_names_other_cas_and_expired_certificates(
    ca: CertKeyPair, leaf: CertKeyPair
) -> None:
    trusted = PolicyBuilder().store(Store([ca.cert]))
    with pytest.raises(VerificationError):
        trusted.build_server_verifier(x509.DNSName("webhook.other.svc")).verify(leaf.cert, [])
    with pytest.raises(VerificationError):
        trusted.build_server_verifier(x509.IPAddress(ipaddress.ip_address("10.0.0.1"))).verify(leaf.cert, [])
    stranger = PolicyBuilder().store(Store([issue_ca().cert]))
    with pytest.raises(VerificationError):
        stranger.build_server_verifier(x509.DNSName("localhost")).verify(leaf.cert, [])
    late = trusted.time(leaf.not_after + timedelta(seconds=1))
    with pytest.raises(VerificationError):
        late.build_server_verifier(x509.DNSName("localhost")).verify(leaf.cert, [])


def test_pem_round_trip_and_mismatched_key(ca: CertKeyPair, leaf: CertKeyPair) -> None:
    again = load_pair(leaf.cert_pem(), leaf.key_pem())
    assert again.cert == leaf.cert
    assert again.key.public_key() == leaf.key.public_key()
    assert load_certs_pem(ca.cert_pem() + leaf.cert_pem()) == [ca.cert, leaf.cert]
    with pytest.raises(ValueError, match="does not match"):
        load_pair(leaf.cert_pem(), ca.key_pem())
    with pytest.raises(ValueError):
        load_pair(leaf.cert_pem()[:200], leaf.key_pem())


@pytest.fixture
def served(tmp_path_factory: pytest.TempPathFactory, leaf: CertKeyPair) -> ssl.SSLContext:
    directory = tmp_path_factory.mktemp("served")
    (directory / "tls.crt").write_bytes(leaf.cert_pem())
    (directory / "tls.key").write_bytes(leaf.key_pem())
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)  # OpenSSL defaults: the certificate alone is under test
    context.load_cert_chain(directory / "tls.crt", directory / "tls.key")
    return context


@pytest.mark.parametrize(
    "hostname", ["localhost", "webhook.storage.svc", "webhook.storage.svc.cluster.local", "127.0.0.1"]
)
def test_openssl_client_verifies_the_served_certificate(
    ca: CertKeyPair, leaf: CertKeyPair, served: ssl.SSLContext, hostname: str
) -> None:
    with running(served) as server:
        result = handshake(server.port, client_context(ca), hostname)
    assert result.der == der(leaf)


def test_openssl_client_rejects_a_wrong_name_and_an_untrusted_ca(
    ca: CertKeyPair, leaf: CertKeyPair, served: ssl.SSLContext
) -> None:
    with running(served) as server:
        handshake(server.port, client_context(ca), "localhost")  # the server works...
        with pytest.raises(ssl.SSLCertVerificationError, match="Hostname mismatch"):
            handshake(server.port, client_context(ca), "webhook.other.svc")
        with pytest.raises(ssl.SSLCertVerificationError, match="unable to get local issuer"):
            handshake(server.port, client_context(issue_ca()), "localhost")
