"""Only the API server asks: with `serve --client-ca`, a review is answered only on a connection whose client
presented a certificate that CA signed.

The TLS context requests a client certificate without requiring one (certs/reload.py): a certificate that does not
verify fails the handshake, and a connection without one is served, because kubelet probes (`/healthz`,
`/readyz`) and the Prometheus scrape (`/metrics`) present none. This layer refuses the admission paths to such a
connection with 403 before the app reads the body: a client that reaches the Service port without the API
server's certificate learns no decision, and so nothing about the cluster.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Collection, Iterable
from typing import Any

from webhook import metrics

log = logging.getLogger(__name__)

WSGIApp = Callable[[dict[str, Any], Callable[..., Any]], Iterable[bytes]]

REFUSAL = b"a client certificate signed by the webhook's --client-ca is required for admission reviews\n"
LOG_EVERY = 60.0  # seconds: refusals are counted always, logged at most this often (any client can cause them)


def require_client_certificate(app: WSGIApp, paths: Collection[str]) -> WSGIApp:
    """`app`, with `paths` answered 403 on connections that presented no verified client certificate; each
    refusal is counted (`storage_affinity_client_certificate_refused_total`), and logged at most every LOG_EVERY
    seconds, so that a kube-apiserver left without its certificate shows."""
    unlogged = 0
    next_log = 0.0

    def refused(path: str) -> None:
        nonlocal unlogged, next_log
        metrics.CLIENT_REFUSED.labels(path.lstrip("/")).inc()
        unlogged += 1
        if time.monotonic() >= next_log:
            log.warning(
                "refused %d review(s) from clients without a certificate signed by the --client-ca (is kube-apiserver "
                "configured to present one? docs/operations.md#only-the-api-server-asks)",
                unlogged,
            )
            unlogged, next_log = 0, time.monotonic() + LOG_EVERY

    def guarded(environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
        path = str(environ.get("PATH_INFO", ""))
        if path in paths and not _verified_peer(environ):
            refused(path)
            start_response(
                "403 Forbidden",
                [("Content-Type", "text/plain; charset=utf-8"), ("Content-Length", str(len(REFUSAL)))],
            )
            return [REFUSAL]
        return app(environ, start_response)

    return guarded


def _verified_peer(environ: dict[str, Any]) -> bool:
    """The connection's client presented a certificate that verified (with CERT_OPTIONAL, OpenSSL ends the
    handshake of one that does not, so a certificate here is a verified one)."""
    sock = environ.get("gunicorn.socket")
    getpeercert = getattr(sock, "getpeercert", None)
    if getpeercert is None:  # not a TLS connection: no certificate
        return False
    try:
        return bool(getpeercert(binary_form=True))
    except (OSError, ValueError):
        return False
