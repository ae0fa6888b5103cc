"""Real client certificates for the `--client-ca` tests (the `cryptography` library, as certs/issue.py makes its
own): CAs and intermediates without a path length limit, and leaves with any extended key usage, name and CA flag,
as a CA that signs for others too (a cert-manager ClusterIssuer, a company PKI) may issue them."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from certs.issue import CertKeyPair

CLIENT_AUTH = ExtendedKeyUsageOID.CLIENT_AUTH
SERVER_AUTH = ExtendedKeyUsageOID.SERVER_AUTH
#: One key for every certificate a test makes: generating keys is not what is tested, and signing stays real.
KEY = ec.generate_private_key(ec.SECP256R1())


def _builder(subject: str, issuer: CertKeyPair | None) -> x509.CertificateBuilder:
    now = datetime.now(UTC)
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, subject)]) if subject else x509.Name([])
    return (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(issuer.cert.subject if issuer is not None else name)
        .public_key(KEY.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - timedelta(hours=1))
        .not_valid_after(now + timedelta(days=1))
    )


def authority(name: str, issuer: CertKeyPair | None = None) -> CertKeyPair:
    """A CA, self-signed or an intermediate of `issuer`, that may sign further CAs."""
    cert = (
        _builder(name, issuer)
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(issuer.key if issuer is not None else KEY, hashes.SHA256())
    )
    return CertKeyPair(cert, KEY)


def leaf(
    issuer: CertKeyPair,
    common_name: str,
    *,
    usages: Sequence[x509.ObjectIdentifier] | None = (CLIENT_AUTH,),
    dns: Sequence[str] = (),
    ca: bool = False,
) -> CertKeyPair:
    """A certificate `issuer` signs: `usages` its extended key usages (None: no such extension), `dns` its DNS
    subject alternative names, `ca` whether it claims to be a CA."""
    builder = _builder(common_name, issuer).add_extension(x509.BasicConstraints(ca=ca, path_length=None), critical=True)
    if usages is not None:
        builder = builder.add_extension(x509.ExtendedKeyUsage(list(usages)), critical=False)
    if dns:
        builder = builder.add_extension(x509.SubjectAlternativeName([x509.DNSName(d) for d in dns]), critical=False)
    return CertKeyPair(builder.sign(issuer.key, hashes.SHA256()), KEY)


def write_client(pair: CertKeyPair, out: Path, *chain: CertKeyPair) -> tuple[str, str]:
    """The certificate (followed by `chain`, as a client sends its intermediates) and key files for `requests`."""
    out.mkdir(parents=True, exist_ok=True)
    cert, key = out / "client.crt", out / "client.key"
    cert.write_bytes(pair.cert_pem() + b"".join(c.cert_pem() for c in chain))
    key.write_bytes(pair.key_pem())
    return str(cert), str(key)
