"""Only the API server asks: with `serve --client-ca`, a review is answered only on a connection whose client
presented a certificate that names kube-apiserver and that a CA of that file signed itself.

The TLS context requests a client certificate without requiring one (certs/reload.py): a certificate that does not
verify fails the handshake, and a connection without one is served, because kubelet probes (`/healthz`,
`/readyz`) and the Prometheus scrape (`/metrics`) present none. OpenSSL's verification says only that some chain
leads from the certificate to the file: it accepts a leaf without any extended key usage, one of any name, and
one issued by an intermediate the client sends along. With a CA that signs for others too (a cert-manager
ClusterIssuer tenants may use, a company CA), any of those holders would be "the API server". So this layer
refuses the admission paths with 403, before the app reads the body, to a connection whose certificate:

- is missing;
- lacks the clientAuth extended key usage, or is itself a CA;
- was not signed by a certificate of the `--client-ca` file itself (an intermediate that should sign clients is
  listed in the file; the server trusts it as an anchor);
- names none of the `--client-name` identities, in its common name or a DNS subject alternative name.

A client that reaches the Service port without the API server's certificate learns no decision, and so nothing
about the cluster.
"""

from __future__ import annotations

import contextlib
import logging
import weakref
from collections.abc import Callable, Collection, Iterable, Sequence
from typing import Any

from cryptography import x509
from cryptography.exceptions import InvalidSignature
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from webhook import metrics
from webhook.logs import Throttle

log = logging.getLogger(__name__)

WSGIApp = Callable[[dict[str, Any], Callable[..., Any]], Iterable[bytes]]
#: The CA certificates of the `--client-ca` file as the TLS context holds them now (it reloads the file).
Authorities = Callable[[], Sequence[x509.Certificate]]

REFUSAL = b"a client certificate signed by the webhook's --client-ca is required for admission reviews\n"
NO_CERTIFICATE = "the client presented no certificate signed by the --client-ca"
NOT_CLIENT = "the client certificate lacks the clientAuth extended key usage, or is a CA"
NOT_DIRECT = "the client certificate was not signed by a CA of the webhook's --client-ca itself"
NOT_NAMED = "the client certificate names none of the webhook's --client-name identities (CN or DNS SAN)"
#: Why a certificate was refused, for the log: the line of each kind says how to fix it.
_HINTS = {
    NO_CERTIFICATE: "is kube-apiserver configured to present one?",
    NOT_CLIENT: "issue kube-apiserver's with extendedKeyUsage clientAuth",
    NOT_DIRECT: "list the CA that signs kube-apiserver's certificate in the --client-ca file",
    NOT_NAMED: "give --client-name (chart clientCA.names) the name kube-apiserver's certificate carries",
}


def certificate_refusal(der: bytes, authorities: Sequence[x509.Certificate], names: Collection[str]) -> str | None:
    """Why a client certificate (DER, already verified by OpenSSL against `authorities`) may not ask for reviews,
    or None when it may. Pure: the server's check, and what the generative test checks against its model."""
    try:
        leaf = x509.load_der_x509_certificate(der)
        usage = leaf.extensions.get_extension_for_class(x509.ExtendedKeyUsage).value
    except (ValueError, x509.ExtensionNotFound):
        return NOT_CLIENT
    if ExtendedKeyUsageOID.CLIENT_AUTH not in usage or _is_ca(leaf):
        return NOT_CLIENT
    if not any(_signed_by(leaf, authority) for authority in authorities):
        return NOT_DIRECT
    if not names or not any(name in names for name in presented_names(leaf)):
        return NOT_NAMED
    return None


def presented_names(leaf: x509.Certificate) -> list[str]:
    """The identities a certificate presents: its common names and DNS subject alternative names."""
    found = [str(a.value) for a in leaf.subject.get_attributes_for_oid(NameOID.COMMON_NAME)]
    with contextlib.suppress(x509.ExtensionNotFound):
        san = leaf.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
        found += san.get_values_for_type(x509.DNSName)
    return found


def _is_ca(cert: x509.Certificate) -> bool:
    try:
        return bool(cert.extensions.get_extension_for_class(x509.BasicConstraints).value.ca)
    except x509.ExtensionNotFound:
        return False


def _signed_by(leaf: x509.Certificate, authority: x509.Certificate) -> bool:
    if leaf.issuer != authority.subject:
        return False
    try:
        leaf.verify_directly_issued_by(authority)
    except (ValueError, TypeError, InvalidSignature):
        return False
    return True


def require_client_certificate(
    app: WSGIApp, paths: Collection[str], names: Collection[str], authorities: Authorities
) -> WSGIApp:
    """`app`, with `paths` answered 403 on connections whose client certificate is missing or refused
    (`certificate_refusal`); each refusal is counted (`storage_affinity_client_certificate_refused_total`), and
    each kind of refusal logged at most once a minute with how many it stands for (`Throttle`), so that a
    kube-apiserver left without a fitting certificate shows, and a client cannot flood the log."""
    allowed = frozenset(names)
    throttle = Throttle()
    # The verdict of each open connection: its certificate was verified once, at its handshake (no renegotiation),
    # and kube-apiserver sends many reviews on each of its kept-alive connections.
    verdicts: weakref.WeakKeyDictionary[Any, str] = weakref.WeakKeyDictionary()

    def verdict(environ: dict[str, Any]) -> str:
        """Why this connection may not ask ("" when it may)."""
        sock = environ.get("gunicorn.socket")
        with contextlib.suppress(KeyError, TypeError):  # TypeError: no socket, or one without weak references
            return verdicts[sock]
        der = _peer_certificate(sock)
        why = NO_CERTIFICATE if der is None else certificate_refusal(der, tuple(authorities()), allowed) or ""
        with contextlib.suppress(TypeError):
            verdicts[sock] = why
        return why

    def refused(path: str, why: str) -> None:
        metrics.CLIENT_REFUSED.labels(path.lstrip("/")).inc()
        if (count := throttle.due(why)) is not None:
            log.warning(
                "refused %d review(s): %s (%s docs/operations.md#only-the-api-server-asks)", count, why, _HINTS[why]
            )

    def guarded(environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
        path = str(environ.get("PATH_INFO", ""))
        if path in paths and (why := verdict(environ)):
            body = REFUSAL if why == NO_CERTIFICATE else f"{why}\n".encode()
            refused(path, why)
            start_response(
                "403 Forbidden",
                [("Content-Type", "text/plain; charset=utf-8"), ("Content-Length", str(len(body)))],
            )
            return [body]
        return app(environ, start_response)

    return guarded


def _peer_certificate(sock: Any) -> bytes | None:
    """The connection's client certificate (DER), verified by OpenSSL (with CERT_OPTIONAL, it ends the handshake
    of one that does not verify), or None when it presented none."""
    getpeercert = getattr(sock, "getpeercert", None)
    if getpeercert is None:  # not a TLS connection: no certificate
        return None
    try:
        der = getpeercert(binary_form=True)
    except (OSError, ValueError):
        return None
    return bytes(der) if der else None
