"""The gunicorn gevent worker, with a shutdown that does not wait for idle keep-alive connections.

gunicorn's gevent worker, on SIGTERM, stops accepting within a second and then waits until every connection is
gone or `graceful_timeout` has passed. kube-apiserver keeps idle connections open, so every shutdown lasted the
whole graceful timeout and ended with the master's SIGKILL (measured: 10.1 s with `--graceful-timeout 10` and
four idle connections). This worker does what Go's `http.Server.Shutdown` does instead:

- close the listening socket at once (new connections are refused, kube-apiserver dials the other replica);
- close the connections that wait for their next request and have no bytes pending;
- let every request in flight finish; its answer says `Connection: close`;
- exit as soon as no connection is left, and by `graceful_timeout` at the latest (a little before the master's
  SIGKILL, so the worker ends its handlers itself).

A client that sends a request on an idle connection at the very moment it is closed sees the connection closed
(the race every keep-alive server has; the preStop sleep makes it unlikely by removing the endpoint first).
"""

from __future__ import annotations

import contextlib
import os
import select
import socket
import ssl
import time
from typing import Any

import gevent
from gevent.monkey import get_original
from gevent.pool import Pool
from gevent.server import StreamServer
from gunicorn.sock import ssl_context
from gunicorn.workers.ggevent import GeventWorker

_original_poll = get_original("select", "poll")
POLL = 0.1  # seconds between checks while running and while draining


class DrainingGeventWorker(GeventWorker):  # type: ignore[misc]
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._idle: set[Any] = set()  # connections waiting for their next request
        self._tls: Any = None  # the server SSLContext, built in the worker after gevent's monkey-patching

    def run(self) -> None:
        self._tls = ssl_context(self.cfg) if self.cfg.is_ssl else None
        servers = []
        for listener in self.sockets:
            listener.setblocking(1)
            server = StreamServer(
                listener,
                handle=lambda client, addr, s=listener: self._handshake_and_handle(s, client, addr),
                spawn=Pool(self.worker_connections),
            )
            if self.cfg.workers > 1:
                server.max_accept = 1
            server.start()
            servers.append(server)

        last_notify = 0.0
        while self.alive:
            if time.monotonic() - last_notify >= 1.0:
                self.notify()
                last_notify = time.monotonic()
            gevent.sleep(POLL)
        self._drain(servers)

    def _drain(self, servers: list[StreamServer]) -> None:
        for server in servers:
            server.close()  # the listening socket: new connections are refused from now on
        deadline = time.monotonic() + max(self.cfg.graceful_timeout - 1.0, 0.5)
        while time.monotonic() < deadline:
            self._close_idle()
            if all(server.pool.free_count() == server.pool.size for server in servers):
                return
            self.notify()
            gevent.sleep(POLL)
        self.log.warning("Worker graceful timeout (pid:%s)", self.pid)
        for server in servers:
            server.stop(timeout=0.5)

    def _close_idle(self) -> None:
        for client in list(self._idle):
            if not _has_bytes_pending(client):
                self._idle.discard(client)
                _shut(client)  # its handler reads EOF and ends

    def _handshake_and_handle(self, listener: Any, client: Any, addr: Any) -> None:
        """The TLS handshake here rather than in gevent's StreamServer, which printed a 15-line traceback for
        every connection that failed it (a TCP probe, plain HTTP, a port scan): anyone could flood the log."""
        if self._tls is not None:
            try:
                client = self._tls.wrap_socket(client, server_side=True)
            except (ssl.SSLError, OSError) as exc:
                self.log.debug("TLS handshake with %s failed: %s", addr, exc)
                client.close()
                return
        self.handle(listener, client, addr)

    def handle(self, listener: Any, client: Any, addr: Any) -> None:
        self._idle.add(client)
        try:
            super().handle(listener, client, addr)
        finally:
            self._idle.discard(client)

    def handle_request(self, listener_name: Any, req: Any, sock: Any, addr: Any) -> None:
        self._idle.discard(sock)
        try:
            super().handle_request(listener_name, req, sock, addr)
        finally:
            self._idle.add(sock)  # waiting for the next request (unless the answer closed it: handle() forgets it)

    def load_wsgi(self) -> None:
        super().load_wsgi()
        self.wsgi: Any = self._close_when_stopping(self.wsgi)

    def _close_when_stopping(self, app: Any) -> Any:
        """Answers started after SIGTERM say `Connection: close`, also for requests that arrived before it.

        gunicorn decides that when a request arrives; a review in flight when SIGTERM comes would otherwise be
        answered keep-alive and its client could reuse a connection that is about to close.
        """

        def wsgi(environ: dict[str, Any], start_response: Any) -> Any:
            def start(status: str, headers: list[tuple[str, str]], exc_info: Any = None) -> Any:
                response: Any = getattr(start_response, "__self__", None)  # gunicorn's Response
                if not self.alive and hasattr(response, "force_close"):
                    response.force_close()
                return start_response(status, headers, exc_info)

            return app(environ, start)

        return wsgi


def _has_bytes_pending(client: Any) -> bool:
    """True when a request has started to arrive (decrypted bytes buffered, or bytes on the socket).

    The check must not yield to other greenlets: a connection found idle could start a request meanwhile and
    be shut under it. gevent's poll and select yield to the hub even with a zero timeout; the originals do not
    (and poll, unlike select, takes descriptors past 1023).
    """
    try:
        if hasattr(client, "pending") and client.pending():
            return True
        poll = _original_poll()
        poll.register(client.fileno(), select.POLLIN)
        return bool(poll.poll(0))
    except (OSError, ValueError):
        return False


def _shut(client: Any) -> None:
    """Shut the connection down under its handler: the handler's read returns EOF and the handler closes it."""
    with contextlib.suppress(OSError, ValueError):
        duplicate = socket.socket(fileno=os.dup(client.fileno()))
        try:
            duplicate.shutdown(socket.SHUT_RDWR)
        finally:
            duplicate.close()
