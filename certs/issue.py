"""Issue a private CA and a serving certificate the kube-apiserver accepts for a webhook Service.

The apiserver verifies webhook certificates by SAN only (Go ignores the CN since 1.15), so every serving
certificate carries the Service's DNS names; the CN is set only as a label for humans.
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

# Five years: rotating the CA means rewriting every webhook configuration's caBundle, which the rotator does with
# an overlap, but it is the riskier step, so it should be rare; short enough that a forgotten CA key still expires.
CA_VALIDITY = timedelta(days=5 * 365)
# One year: the serving key lives in a Secret and on disk, so its exposure is bounded; the rotator renews it at
# two thirds of its lifetime, leaving months to notice a failing renewal via the expiry metric.
LEAF_VALIDITY = timedelta(days=365)
# Nodes, the apiserver and the issuer disagree on the time by seconds to minutes; an hour covers that with margin.
BACKDATE = timedelta(hours=1)
CLUSTER_DOMAIN = "cluster.local"

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
PrivateKey = ec.EllipticCurvePrivateKey | rsa.RSAPrivateKey

_DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$")
_DNS_NAME = re.compile(
    r"^(\*\.)?([A-Za-z0-9]([-A-Za-z0-9]{0,61}[A-Za-z0-9])?\.)*[A-Za-z0-9]([-A-Za-z0-9]{0,61}[A-Za-z0-9])?$"
)
_CN_MAX = 64  # X.520 ub-common-name


@dataclass(frozen=True)
class CertKeyPair:
    """A certificate with its private key; the unit the CA, the files and the Secret store."""

    cert: x509.Certificate
    key: PrivateKey

    @property
    def not_after(self) -> datetime:
        return self.cert.not_valid_after_utc

    @property
    def not_before(self) -> datetime:
        return self.cert.not_valid_before_utc

    def cert_pem(self) -> bytes:
        return cert_to_pem(self.cert)

    def key_pem(self) -> bytes:
        return key_to_pem(self.key)


def new_key() -> ec.EllipticCurvePrivateKey:
    """ECDSA P-256: accepted by every TLS stack the apiserver uses, and faster and smaller than RSA 2048."""
    return ec.generate_private_key(ec.SECP256R1())


def _key_usage(
    *, digital_signature: bool = False, key_cert_sign: bool = False, crl_sign: bool = False
) -> x509.KeyUsage:
    """KeyUsage with only the named bits set (the other six are never used here)."""
    return x509.KeyUsage(
        digital_signature=digital_signature,
        content_commitment=False,
        key_encipherment=False,
        data_encipherment=False,
        key_agreement=False,
        key_cert_sign=key_cert_sign,
        crl_sign=crl_sign,
        encipher_only=False,
        decipher_only=False,
    )


def issue_ca(
    common_name: str = "storage-affinity-webhook-ca",
    *,
    validity: timedelta = CA_VALIDITY,
    now: datetime | None = None,
) -> CertKeyPair:
    """A self-signed CA that can sign serving certificates only (pathLen 0: no intermediates).

    The issue time is appended to the CN so an old and a new CA trusted side by side during a rotation are
    distinguishable in logs and `openssl` output (chain building itself uses the key identifiers).
    """
    now = _utc(now)
    key = new_key()
    stamp = f" {now:%Y%m%dT%H%M%SZ}"
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name[: _CN_MAX - len(stamp)] + stamp)])
    ski = x509.SubjectKeyIdentifier.from_public_key(key.public_key())
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - BACKDATE)
        .not_valid_after(now + validity)
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(
            _key_usage(key_cert_sign=True, crl_sign=True),
            critical=True,
        )
        .add_extension(ski, critical=False)
        .add_extension(x509.AuthorityKeyIdentifier.from_issuer_subject_key_identifier(ski), critical=False)
        .sign(key, hashes.SHA256())
    )
    return CertKeyPair(cert, key)


def service_dns_names(service: str, namespace: str, cluster_domain: str = CLUSTER_DOMAIN) -> list[str]:
    """The names the apiserver and in-cluster clients may use for the Service, shortest first."""
    for what, value in (("service", service), ("namespace", namespace)):
        if not _DNS_LABEL.match(value):
            raise ValueError(f"{what} {value!r} is not a valid DNS label (RFC 1123: a-z, 0-9, '-', at most 63)")
    return [
        service,
        f"{service}.{namespace}",
        f"{service}.{namespace}.svc",
        f"{service}.{namespace}.svc.{cluster_domain}",
    ]


def serving_sans(
    service: str,
    namespace: str,
    *,
    extra_dns: Iterable[str] = (),
    extra_ips: Iterable[str | IPAddress] = (),
    local: bool = True,
    cluster_domain: str = CLUSTER_DOMAIN,
) -> list[x509.GeneralName]:
    """The exact SAN list of a serving certificate, in order and without duplicates.

    `local` adds `localhost`, 127.0.0.1 and ::1 so `make run` and the end-to-end tests verify hostnames too.
    """
    dns = service_dns_names(service, namespace, cluster_domain)
    if local:
        dns.append("localhost")
    for name in extra_dns:
        if not _DNS_NAME.match(name) or len(name) > 253:
            raise ValueError(f"extra DNS name {name!r} is not a valid DNS name")
        dns.append(name.lower())
    ips: list[IPAddress] = [ipaddress.ip_address("127.0.0.1"), ipaddress.ip_address("::1")] if local else []
    for ip in extra_ips:
        try:
            ips.append(ipaddress.ip_address(ip))
        except ValueError:
            raise ValueError(f"extra IP address {ip!r} is not an IPv4 or IPv6 address") from None
    names: list[x509.GeneralName] = [x509.DNSName(n) for n in dict.fromkeys(dns)]
    names += [x509.IPAddress(ip) for ip in dict.fromkeys(ips)]
    return names


def issue_serving(
    ca: CertKeyPair,
    service: str,
    namespace: str,
    *,
    extra_dns: Iterable[str] = (),
    extra_ips: Iterable[str | IPAddress] = (),
    local: bool = True,
    cluster_domain: str = CLUSTER_DOMAIN,
    validity: timedelta = LEAF_VALIDITY,
    now: datetime | None = None,
) -> CertKeyPair:
    """A serving certificate for `<service>.<namespace>` signed by `ca`.

    Its end is clamped to the CA's: a leaf that outlives its CA would look valid to the rotator but fail
    verification at the apiserver.
    """
    now = _utc(now)
    sans = serving_sans(
        service, namespace, extra_dns=extra_dns, extra_ips=extra_ips, local=local, cluster_domain=cluster_domain
    )
    key = new_key()
    cn = f"{service}.{namespace}.svc"
    subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, cn)] if len(cn) <= _CN_MAX else [])
    cert = (
        _leaf_builder(ca, key, subject, now, validity)
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
        .add_extension(x509.SubjectAlternativeName(sans), critical=not subject)  # RFC 5280: critical if no subject
        .sign(ca.key, hashes.SHA256())
    )
    return CertKeyPair(cert, key)


def issue_client(
    ca: CertKeyPair, common_name: str, *, validity: timedelta = LEAF_VALIDITY, now: datetime | None = None
) -> CertKeyPair:
    """A client certificate signed by `ca`, for kube-apiserver to present to the webhook (`serve --client-ca`).

    Extended key usage clientAuth only: OpenSSL checks a client certificate's purpose, so this one cannot serve,
    and the serving certificate (serverAuth only) is refused as a client. Its end is clamped to the CA's.
    """
    if not common_name or len(common_name) > _CN_MAX:
        raise ValueError(f"client certificate name {common_name!r}: 1 to {_CN_MAX} characters")
    now = _utc(now)
    key = new_key()
    cert = (
        _leaf_builder(ca, key, x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)]), now, validity)
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.CLIENT_AUTH]), critical=False)
        .sign(ca.key, hashes.SHA256())
    )
    return CertKeyPair(cert, key)


def _leaf_builder(
    ca: CertKeyPair, key: PrivateKey, subject: x509.Name, now: datetime, validity: timedelta
) -> x509.CertificateBuilder:
    """What every leaf `ca` signs carries: validity (clamped to the CA's), no CA rights, a signing-only key, and
    the key identifiers chain building uses."""
    try:
        ca_ski = ca.cert.extensions.get_extension_for_class(x509.SubjectKeyIdentifier).value
        aki = x509.AuthorityKeyIdentifier.from_issuer_subject_key_identifier(ca_ski)
    except x509.ExtensionNotFound:
        aki = x509.AuthorityKeyIdentifier.from_issuer_public_key(ca.key.public_key())
    return (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(ca.cert.subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - BACKDATE)
        .not_valid_after(min(now + validity, ca.not_after))
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        # ECDHE with an EC key: the key signs, it never encrypts (no keyEncipherment)
        .add_extension(_key_usage(digital_signature=True), critical=True)
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
        .add_extension(aki, critical=False)
    )


def cert_to_pem(cert: x509.Certificate) -> bytes:
    return cert.public_bytes(serialization.Encoding.PEM)


def certs_to_pem(certs: Iterable[x509.Certificate]) -> bytes:
    """A PEM bundle, the format of `ca.crt` and of a webhook's caBundle (before base64)."""
    return b"".join(cert_to_pem(c) for c in certs)


def key_to_pem(key: PrivateKey) -> bytes:
    """Unencrypted PKCS#8: what Secrets of type kubernetes.io/tls and `ssl.load_cert_chain` expect."""
    return key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )


def load_certs_pem(data: bytes) -> list[x509.Certificate]:
    """Every certificate of a PEM bundle; raises ValueError when there is none."""
    certs = x509.load_pem_x509_certificates(data)
    if not certs:
        raise ValueError("no PEM certificate found")
    return certs


def load_key_pem(data: bytes) -> PrivateKey:
    key = serialization.load_pem_private_key(data, password=None)
    if not isinstance(key, ec.EllipticCurvePrivateKey | rsa.RSAPrivateKey):
        raise ValueError(f"unsupported private key type {type(key).__name__} (expected EC or RSA)")
    return key


def load_pair(cert_pem: bytes, key_pem: bytes) -> CertKeyPair:
    """The first certificate of `cert_pem` with its key; raises ValueError when the key does not belong to it."""
    cert = load_certs_pem(cert_pem)[0]
    key = load_key_pem(key_pem)
    if cert.public_key() != key.public_key():
        raise ValueError("the private key does not match the certificate")
    return CertKeyPair(cert, key)


def san_strings(cert: x509.Certificate) -> list[str]:
    """The SANs as printable strings, in certificate order (for the CLI and logs)."""
    try:
        sans: Sequence[x509.GeneralName] = list(
            cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
        )
    except x509.ExtensionNotFound:
        return []
    return [str(n.value) for n in sans]


def _utc(now: datetime | None) -> datetime:
    if now is None:
        return datetime.now(UTC)
    if now.tzinfo is None:
        raise ValueError("now must be timezone-aware")
    return now.astimezone(UTC)
