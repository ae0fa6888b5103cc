"""A server TLS context that serves rotated certificate files without a restart.

`ssl.SSLContext` cannot swap its certificate in place, but the SNI callback may assign another context to the
handshaking socket (`ssl_sock.context = ...`, documented in the `ssl` module). OpenSSL >= 1.1.1 calls that
callback on every server handshake, with or without SNI (server_name is then None; clients connecting to an IP
never send SNI). So the outer context only decides, cheaply, which inner context serves the handshake, and
rebuilds the inner one when the files changed.

Protocol versions, cipher suites and whether a client certificate is requested (`verify_mode`) are fixed when the
connection is created, from the outer context, so both carry the same settings; switching contexts changes the
certificate and key, and the trust store a client certificate is verified against (OpenSSL verifies with the
handshake's current context's store), so a rotated client CA file is trusted from the next handshake on, as a
rotated serving certificate is served.
"""

from __future__ import annotations

import contextlib
import logging
import os
import ssl
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

from cryptography import x509

from certs.issue import load_certs_pem, load_pair

log = logging.getLogger(__name__)

# TLS 1.2 suites: forward secret and AEAD only (what Mozilla's "intermediate" profile allows for ECDSA and RSA
# keys, minus DHE). TLS 1.3 suites are all AEAD and keep OpenSSL's defaults.
TLS12_CIPHERS = "ECDHE+AESGCM:ECDHE+CHACHA20"

FileStamp = tuple[int, int, int, int] | None  # (st_dev, st_ino, st_size, st_mtime_ns); None: missing


def server_context(
    cert_path: Path | None = None, key_path: Path | None = None, client_ca: bytes | None = None
) -> ssl.SSLContext:
    """A hardened server context: TLS >= 1.2, AEAD suites, no renegotiation; client certificates only with
    `client_ca` (PEM).

    Same role as `ssl.create_default_context(Purpose.CLIENT_AUTH)` but without loading the system trust store:
    a client certificate is verified against `client_ca` alone. It is optional (CERT_OPTIONAL): kubelet probes and
    Prometheus present none, and the server refuses reviews to such connections itself (webhook/serving/clientauth.py);
    a certificate that is presented and does not verify fails the handshake. `ssl.SSLContext` is looked up at call
    time so under gevent's monkey-patching the context is gevent's cooperative one.
    """
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.minimum_version = ssl.TLSVersion.TLSv1_2
    ctx.set_ciphers(TLS12_CIPHERS)
    ctx.options |= ssl.OP_NO_COMPRESSION | ssl.OP_CIPHER_SERVER_PREFERENCE | ssl.OP_NO_RENEGOTIATION
    ctx.verify_mode = ssl.CERT_NONE
    if client_ca is not None:
        ctx.load_verify_locations(cadata=client_ca.decode("ascii", "replace"))
        ctx.verify_mode = ssl.CERT_OPTIONAL
        # Every certificate of the file is a trust anchor, an intermediate too: the file names the CAs that sign
        # clients, and the server accepts only a client one of them signed itself (webhook/serving/clientauth.py).
        ctx.verify_flags |= ssl.VERIFY_X509_PARTIAL_CHAIN
    if cert_path is not None:
        ctx.load_cert_chain(cert_path, key_path, password=_no_password)
    return ctx


@dataclass(frozen=True)
class _Loaded:
    context: ssl.SSLContext
    not_after: datetime
    stamp: tuple[FileStamp, ...]
    client_ca: bytes | None  # the client CA the context verifies with, as read
    client_authorities: tuple[x509.Certificate, ...]  # its certificates


class ReloadingServerContext:
    """`context` is the SSLContext to hand to the server; it serves whatever pair the files hold now.

    The files are checked at most once per `check_interval` seconds (by device, inode, size and mtime, which an
    atomic replace or a Kubernetes Secret volume update always changes), from the first handshake after the
    interval. A pair that fails to load (half written, key and certificate not matching, missing) is logged once
    and the last good one keeps serving; it is retried when the files change again. With `client_ca`, that file
    (PEM, one or more CAs) is one more of them: client certificates are requested and verified against what it
    holds now.

    The first load happens in the constructor and raises: a server must not start without a certificate. Under
    gevent, build the instance after monkey-patching (e.g. lazily in gunicorn's `ssl_context` hook, once per
    worker, not once per connection: gunicorn calls that hook for every connection of the sync worker).
    """

    def __init__(
        self,
        cert_path: Path | str,
        key_path: Path | str,
        *,
        check_interval: float = 1.0,
        clock: Callable[[], float] = time.monotonic,
        client_ca: Path | str | None = None,
    ) -> None:
        self.cert_path = Path(cert_path)
        self.key_path = Path(key_path)
        self.client_ca = Path(client_ca) if client_ca is not None else None
        self.check_interval = check_interval
        self._clock = clock
        self._lock = threading.Lock()
        self._current = self._load()
        self._failed_stamp: tuple[FileStamp, ...] | None = None
        self._next_check = clock() + check_interval
        self.context = server_context(self.cert_path, self.key_path, self._current.client_ca)
        self.context.sni_callback = self._on_handshake

    @property
    def not_after(self) -> datetime:
        """Expiry (UTC) of the certificate new handshakes are served, for an expiry metric and readiness."""
        return self._current.not_after

    @property
    def client_authorities(self) -> tuple[x509.Certificate, ...]:
        """The certificates of the client CA file that new handshakes verify client certificates against."""
        return self._current.client_authorities

    @property
    def serving_context(self) -> ssl.SSLContext:
        """The inner context new handshakes switch to (holds the current certificate)."""
        return self._current.context

    def reload_if_changed(self, *, force: bool = False) -> bool:
        """Reload when the files changed since the last attempt (or always with `force`); True if a new pair serves.

        Never raises: a failure is logged and the previous pair stays.
        """
        if not self._lock.acquire(blocking=False):
            return False  # another handshake is checking right now; this one uses the current pair
        try:
            self._next_check = self._clock() + self.check_interval
            stamp = self._stamps()
            if not force and stamp in (self._current.stamp, self._failed_stamp):
                return False
            try:
                loaded = self._load()
            except Exception as exc:
                self._failed_stamp = stamp
                log.warning(
                    "keeping the current TLS certificate (valid until %s): cannot load %s: %s",
                    self._current.not_after.isoformat(),
                    " and ".join(str(path) for path in self._paths()),
                    exc,
                )
                return False
            self._failed_stamp = None
            self._current = loaded
            log.info(
                "serving the TLS certificate from %s, valid until %s", self.cert_path, loaded.not_after.isoformat()
            )
            return True
        finally:
            self._lock.release()

    def _on_handshake(self, sock: ssl.SSLObject | ssl.SSLSocket, server_name: str | None, _ctx: ssl.SSLContext) -> None:
        # Runs inside OpenSSL's ClientHello processing: it must not raise, or the handshake fails.
        with contextlib.suppress(Exception):
            if self._clock() >= self._next_check:
                self.reload_if_changed()
        with contextlib.suppress(Exception):
            sock.context = self._current.context

    def _paths(self) -> list[Path]:
        return [self.cert_path, self.key_path, *([self.client_ca] if self.client_ca is not None else [])]

    def _stamps(self) -> tuple[FileStamp, ...]:
        return tuple(_stamp(path) for path in self._paths())

    def _read_client_ca(self) -> tuple[bytes | None, tuple[x509.Certificate, ...]]:
        """The client CA file's bytes and certificates (ValueError names the file when it holds none)."""
        if self.client_ca is None:
            return None, ()
        data = self.client_ca.read_bytes()
        try:
            return data, tuple(load_certs_pem(data))
        except ValueError as exc:
            raise ValueError(f"{self.client_ca}: {exc}") from None

    def _load(self) -> _Loaded:
        """Build a context from the files, consistently: the bytes parsed are the bytes OpenSSL loaded."""
        stamp = self._stamps()
        before = (self.cert_path.read_bytes(), self.key_path.read_bytes())
        pair = load_pair(*before)  # clear errors for a mismatched or truncated pair
        client_ca, authorities = self._read_client_ca()
        context = server_context(self.cert_path, self.key_path, client_ca)
        after = (self.cert_path.read_bytes(), self.key_path.read_bytes())
        if after != before:
            raise RuntimeError("the files changed while loading them")
        return _Loaded(context, pair.not_after, stamp, client_ca, authorities)


def _stamp(path: Path) -> FileStamp:
    try:
        st = os.stat(path)  # follows symlinks: a Secret volume swaps its `..data` link
    except OSError:
        return None
    return (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns)


def _no_password() -> bytes:
    # Without a callback, OpenSSL would prompt on the terminal for an encrypted key and hang the server.
    raise ValueError("encrypted private keys are not supported")
