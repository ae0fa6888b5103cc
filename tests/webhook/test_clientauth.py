"""Who may ask with `--client-ca`: the check every client certificate that OpenSSL verified still passes
(webhook/serving/clientauth.py), against its model over generated certificates; and the throttle that keeps a
client from flooding the log with refusals (webhook/logs.py), on a fake clock. Over the real server:
tests/e2e/test_client_ca.py."""

from __future__ import annotations

from cryptography.hazmat.primitives.serialization import Encoding
from cryptography.x509.oid import ExtendedKeyUsageOID
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.webhook.clientcerts import CLIENT_AUTH, SERVER_AUTH, authority, leaf
from webhook.logs import Throttle
from webhook.serving.clientauth import NOT_CLIENT, NOT_DIRECT, NOT_NAMED, certificate_refusal

ROOT = authority("shared root CA")  # listed in the --client-ca file
LISTED = authority("intermediate for kube-apiserver", ROOT)  # listed too
UNLISTED = authority("intermediate for tenants", ROOT)  # a ClusterIssuer's CA: not listed
OTHER = authority("another CA")  # a CA the file does not hold (OpenSSL would fail the handshake)
FILE = (ROOT.cert, LISTED.cert)
NAMES = frozenset({"kube-apiserver", "apiserver.example.internal"})
ISSUERS = {"root": ROOT, "listed": LISTED, "unlisted": UNLISTED, "other": OTHER}
USAGES = [None, [], [CLIENT_AUTH], [SERVER_AUTH], [SERVER_AUTH, CLIENT_AUTH], [ExtendedKeyUsageOID.CODE_SIGNING]]
SOME_NAMES = st.sampled_from(["kube-apiserver", "apiserver.example.internal", "tenant-bob", "KUBE-APISERVER", ""])


@settings(max_examples=120, deadline=None)
@given(
    issuer=st.sampled_from(sorted(ISSUERS)),
    usages=st.sampled_from(USAGES),
    common_name=SOME_NAMES,
    dns=st.lists(SOME_NAMES.filter(bool), max_size=2),
    ca=st.booleans(),
)
def test_a_certificate_asks_only_with_client_auth_from_a_listed_ca_under_a_configured_name(
    issuer: str, usages: list[object] | None, common_name: str, dns: list[str], ca: bool
) -> None:
    cert = leaf(ISSUERS[issuer], common_name, usages=usages, dns=dns, ca=ca)  # type: ignore[arg-type]
    refusal = certificate_refusal(cert.cert.public_bytes(Encoding.DER), FILE, NAMES)
    if usages is None or CLIENT_AUTH not in usages or ca:
        assert refusal == NOT_CLIENT
    elif issuer not in ("root", "listed"):
        assert refusal == NOT_DIRECT
    elif not ({common_name, *dns} & NAMES):
        assert refusal == NOT_NAMED
    else:
        assert refusal is None


def test_no_configured_name_admits_no_certificate() -> None:
    cert = leaf(ROOT, "kube-apiserver")
    assert certificate_refusal(cert.cert.public_bytes(Encoding.DER), FILE, frozenset()) == NOT_NAMED


def test_bytes_that_are_no_certificate_are_refused() -> None:
    assert certificate_refusal(b"\x30\x03\x02\x01\x00", FILE, NAMES) == NOT_CLIENT


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_the_throttle_logs_each_kind_once_a_minute_with_the_count() -> None:
    clock = Clock()
    throttle = Throttle(60.0, clock)
    assert throttle.due("framing") == 1  # the first of a kind is logged at once
    assert [throttle.due("framing") for _ in range(299)] == [None] * 299  # 300 broken requests: one line
    assert throttle.due("gone") == 1  # another kind has its own minute
    clock.now += 59.9
    assert throttle.due("framing") is None
    clock.now += 0.1
    assert throttle.due("framing") == 301  # the next line counts every event since the last one
    assert throttle.due("framing") is None
