"""A real TLS server on 127.0.0.1 and a real client, so the tests exercise OpenSSL, not a model of it."""

from __future__ import annotations

import contextlib
import socket
import ssl
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field

from cryptography.hazmat.primitives.serialization import Encoding

from certs.issue import CertKeyPair, certs_to_pem

SERVICE = "webhook"
NAMESPACE = "storage"


@dataclass
class Handshake:
    der: bytes
    version: str
    cipher: str


@dataclass
class TLSServer:
    """Accepts connections one at a time, completes the handshake, answers b"ok" and records server-side errors."""

    context: ssl.SSLContext
    sock: socket.socket = field(default_factory=lambda: socket.create_server(("127.0.0.1", 0)))
    errors: list[BaseException] = field(default_factory=list)
    handled: int = 0
    _stop: threading.Event = field(default_factory=threading.Event)
    _done: threading.Condition = field(default_factory=threading.Condition)

    @property
    def port(self) -> int:
        return int(self.sock.getsockname()[1])

    def serve(self) -> None:
        self.sock.settimeout(0.05)
        while not self._stop.is_set():
            try:
                raw, _ = self.sock.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            raw.settimeout(5)
            try:
                with self.context.wrap_socket(raw, server_side=True) as tls:
                    tls.sendall(b"ok")
            except (OSError, ssl.SSLError) as exc:
                self.errors.append(exc)
            finally:
                raw.close()
                with self._done:
                    self.handled += 1
                    self._done.notify_all()

    def wait_handled(self, count: int) -> None:
        """Wait until the server side of `count` connections is over (the client may finish first)."""
        with self._done:
            assert self._done.wait_for(lambda: self.handled >= count, timeout=5), self.handled

    def stop(self) -> None:
        self._stop.set()
        self.sock.close()


@contextlib.contextmanager
def running(context: ssl.SSLContext) -> Iterator[TLSServer]:
    server = TLSServer(context)
    thread = threading.Thread(target=server.serve, daemon=True)
    thread.start()
    try:
        yield server
    finally:
        server.stop()
        thread.join(5)


def client_context(*cas: CertKeyPair, check_hostname: bool = True) -> ssl.SSLContext:
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.check_hostname = check_hostname
    ctx.verify_mode = ssl.CERT_REQUIRED
    ctx.load_verify_locations(cadata=certs_to_pem(ca.cert for ca in cas).decode())
    return ctx


def handshake(port: int, ctx: ssl.SSLContext, server_hostname: str | None) -> Handshake:
    """Connect, verify, and return what the server presented."""
    with (
        socket.create_connection(("127.0.0.1", port), timeout=5) as raw,
        ctx.wrap_socket(raw, server_hostname=server_hostname) as tls,
    ):
        assert tls.recv(2) == b"ok"
        der = tls.getpeercert(binary_form=True)
        assert der is not None
        cipher = tls.cipher()
        assert cipher is not None
        return Handshake(der=der, version=str(tls.version()), cipher=cipher[0])


def der(pair: CertKeyPair) -> bytes:
    return pair.cert.public_bytes(Encoding.DER)
