"""The gunicorn gevent worker, with a shutdown that answers what was accepted and does not wait for idle connections.

gunicorn's gevent worker, on SIGTERM, stops accepting within a second and then waits until every connection is
gone or `graceful_timeout` has passed. kube-apiserver keeps idle connections open, so every shutdown lasted the
whole graceful timeout and ended with the master's SIGKILL (measured: 10.1 s with `--graceful-timeout 10` and
four idle connections). This worker does what Go's `http.Server.Shutdown` does instead:

- accept the connections waiting in the listening socket's queue, then close it (the master has already stopped
  new handshakes, webhook/serving/arbiter.py: new connections are refused, kube-apiserver dials the other replica, and
  none that the kernel accepted is reset);
- close the connections that wait for their next request and have no bytes pending: at once if they have been
  silent for NEXT_REQUEST_GRACE since their last answer, otherwise when they have; a new connection (TLS
  handshake under way, or no request yet) counts as waiting only after FIRST_REQUEST_GRACE;
- let every request in flight finish; its answer says `Connection: close`;
- exit as soon as no connection is left, and by `graceful_timeout` at the latest (a little before the master's
  SIGKILL, so the worker ends its handlers itself).

A client that sends a request on an idle connection at the very moment it is closed sees the connection closed
(the race every keep-alive server has, left to clients that had been silent for a while; the preStop sleep makes
it unlikely by removing the endpoint first). A client that connects between SIGTERM and the close (about a tenth
of a second) gets no answer to its SYN, and its retransmission a second later is refused.

Under saturation it also serves the connections in turn. gunicorn's keep-alive loop reads a connection's next
request as soon as it has written the answer, and a keep-alive client (kube-apiserver, hey, wrk) on another CPU has
usually sent it by then: the read does not block, so the greenlet does not return to the gevent hub, which polls the
sockets only once the greenlets it woke have blocked. Left so, one connection is served many times in a row while
the others wait, and a new connection, whose accept, TLS handshake round trips and first request each wait for a
poll, waits longest (measured with 16 wrk connections on one CPU: p99 latency 12 to 19 times the median, a new
connection's first answer 0.3 to 0.4 s at p99, seconds with two workers). So after each answer the greenlet sleeps
until the event loop's next iteration (`TURN`), which polls first: each ready connection gets one request per
iteration and the listening socket its accepts. `gevent.sleep(0)` would not do: it runs the greenlets already ready,
without a poll.

Under abuse it bounds what a connection may hold (the read timeout is `Settings.read_timeout`):

- a new connection has the read timeout to complete its TLS handshake and send its first request's headers; a
  kept-alive one has gunicorn's `keepalive` between requests. A connection that never sends a byte, or never
  finishes its ClientHello, is closed when its time is up;
- a request's body must arrive in full within the read timeout of its headers, or the app answers 408; chunk sizes
  that add up past the body limit get 413 before the chunk is read (also sizes beyond 64 bits); invalid chunked
  framing gets 400, and a client that closes the connection mid-body one log line (webhook/serving/requestbody.py,
  webhook/app/body.py). The connection is then closed: where its next request would start is unknown. Each
  kind of broken body, and gunicorn's line for a request it cannot parse, is logged at most once a minute with
  the count it stands for (webhook/logs.py `Throttle`): any client can send them as fast as it likes;
- when the worker runs short of connections (`worker_connections`), each new one closes the idlest one first
  (webhook/serving/connections.py): one that has not sent a request yet before a kept-alive one, never one whose request
  is being answered. Thousands of idle connections and stalled handshakes cannot keep a review out.
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
from gunicorn.http.body import ChunkedReader
from gunicorn.sock import ssl_context
from gunicorn.workers.ggevent import GeventWorker

from rules import deadline
from webhook.logs import ThrottledLines
from webhook.serving.connections import Connections
from webhook.serving.requestbody import BoundedInput, bound_chunks, linger
from webhook.settings import Settings

_original_poll = get_original("select", "poll")
#: How gunicorn's line for a request it cannot parse starts (gunicorn/workers/base.py `handle_error`).
INVALID_REQUEST = "Invalid request from ip="
POLL = 0.1  # seconds between checks while running and while draining
# Seconds a new connection has to start its first request before shutdown counts it idle: Go's net/http
# `Server.Shutdown` waits as long for a connection that has not sent its first request (golang/go#22682).
FIRST_REQUEST_GRACE = 5.0
# Seconds of silence after an answer before shutdown counts a kept-alive connection idle. A busy client sends its
# next request within milliseconds of an answer; closing the connection then would fail that request (Go's HTTP
# client does not retry a POST: "server closed idle connection"). Given the time, it is answered with
# `Connection: close` instead.
NEXT_REQUEST_GRACE = 0.5
# Any positive sleep resumes the greenlet on the event loop's next iteration, after it polled the sockets; a zero
# sleep does not poll.
TURN = 1e-6


def _take_turn() -> None:
    """Let the event loop poll and serve the other connections before this greenlet goes on."""
    gevent.sleep(TURN)


class DrainingGeventWorker(GeventWorker):  # type: ignore[misc]
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._conns = Connections()
        self._first_request: dict[Any, float] = {}  # handler greenlet -> when its first request must have arrived
        self._linger: set[Any] = set()  # connections to drain before they close (requestbody.LINGER)
        settings: Settings = self.app.settings  # webhook.serving.server.WebhookServer's
        self._read_timeout = settings.read_timeout
        self._max_body = settings.max_body
        self._tls: Any = None  # the server SSLContext, built in the worker after gevent's monkey-patching
        self._listener_names: dict[Any, Any] = {}  # listening socket -> its address, also once it is closed

    def patch(self) -> None:
        super().patch()  # the listening sockets become gevent sockets here
        self._listener_names = {listener: listener.getsockname() for listener in self.sockets}

    def run(self) -> None:
        # gunicorn logs a WARNING line for every request it cannot parse: any client could flood the log with them.
        self.log.error_log.addFilter(ThrottledLines({INVALID_REQUEST: "invalid request"}))
        # Stopped while waiting: the servers still start, for the drain to answer what the kernel already queued
        # (closing the listener would reset it); the master's filter lets no new handshake complete meanwhile.
        self._await_loaded()
        deadline.share_worker(_take_turn)  # a long review is answered in slices, others between them
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

    def _await_loaded(self) -> None:
        """Accept nothing until the app's cluster state and policy are loaded, or its start timeout has passed.

        The workers share the listening socket: while this one waits, its siblings accept every connection, so a
        restarted worker never answers from an empty cache or without the policy. The timeout bounds the wait so
        that a server whose API is unreachable still answers /readyz with the reason (and /healthz, before the
        liveness probe gives up). The master hears from the worker meanwhile. Returns early when stopped.
        """
        app = self.app
        if not hasattr(app, "loaded"):
            return
        started = time.monotonic()
        while self.alive and not app.loaded():
            if time.monotonic() - started >= app.start_timeout:
                self.log.warning(
                    "Accepting after the start timeout (%gs), not loaded: %s", app.start_timeout, app.not_ready()
                )
                return
            self.notify()
            gevent.sleep(POLL)
        if self.alive:
            self.log.info("Accepting: cluster state and policy loaded in %.1fs", time.monotonic() - started)

    def _drain(self, servers: list[StreamServer]) -> None:
        self._close_idle()  # first: a worker whose pool is full of idle connections has room for the queued ones
        for server in servers:
            self._accept_queued(server)
            server.close()  # this worker's copy of the listening socket
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

    def _accept_queued(self, server: StreamServer) -> None:
        """Accept the connections waiting in the listening socket's queue, to answer them.

        The kernel completed their handshakes already; their clients may be sending requests. Closing the listening
        socket with them still queued would reset them once the last process holding it has closed it. At a
        whole-server shutdown the master has stopped new handshakes first (webhook/serving/arbiter.py), so the queue
        only empties; when this worker stops alone, its siblings accept whatever arrives after.
        """
        server.stop_accepting()
        for _ in range(self.cfg.backlog):  # at most what the queue holds, whatever keeps arriving
            try:
                accepted = server.do_read()  # None once the queue is empty
            except OSError as exc:
                self.log.debug("Accepting a queued connection failed: %s", exc)
                return
            if accepted is None:
                return
            server.do_handle(*accepted)

    def _close_idle(self) -> None:
        now = time.monotonic()
        for client, since, new in self._conns.waiting():
            grace = FIRST_REQUEST_GRACE if new else NEXT_REQUEST_GRACE
            if since + grace <= now and not _has_bytes_pending(client):
                self._conns.closed(client)
                _shut(client)  # its handler reads EOF and ends

    def _make_room(self) -> None:
        """Close the idlest waiting connection when this one leaves the pool no free place: a full pool stops
        accepting, and new connections would wait for an idle one to time out."""
        if len(self._conns) + 1 < self.worker_connections:
            return
        for client, _, _ in self._conns.waiting():
            if not _has_bytes_pending(client):
                self._conns.closed(client)
                _shut(client)
                self.log.debug("Closed the idlest connection to make room (%d open)", len(self._conns))
                return

    def _handshake_and_handle(self, listener: Any, client: Any, addr: Any) -> None:
        """The TLS handshake here rather than in gevent's StreamServer, which printed a 15-line traceback for
        every connection that failed it (a TCP probe, plain HTTP, a port scan): anyone could flood the log.

        A new connection is not idle: its client connected to send a request. Shutdown closes it only if it has
        not started one within FIRST_REQUEST_GRACE. The handshake and the first request's headers must arrive
        within the read timeout (`timeout_ctx`). The handler gets the listener's address, not the listening
        socket, which may be closed by the time a connection accepted during shutdown is served.
        """
        accepted = time.monotonic()
        self._make_room()
        try:
            if self._tls is not None:
                client = self._tls.wrap_socket(client, server_side=True, do_handshake_on_connect=False)
            self._conns.accepted(client, accepted)  # shutdown can close it mid-handshake
            if self._tls is not None:
                with gevent.Timeout(self._read_timeout, TimeoutError("timed out")):
                    client.do_handshake()
        except (ssl.SSLError, OSError) as exc:
            self.log.debug("TLS handshake with %s failed: %s", addr, exc)
            self._conns.closed(client)
            client.close()
            return
        greenlet = gevent.getcurrent()
        self._first_request[greenlet] = accepted + self._read_timeout
        try:
            self.handle(_Bound(self._listener_names[listener]), client, addr)
        finally:
            self._first_request.pop(greenlet, None)
            self._conns.closed(client)
            self._linger.discard(client)

    def timeout_ctx(self) -> Any:
        """The wait for a request's headers: what is left of the read timeout for a connection's first request,
        gunicorn's `keepalive` for the next ones. When it passes, the connection is closed without an answer."""
        deadline = self._first_request.pop(gevent.getcurrent(), None)
        seconds = self.cfg.keepalive if deadline is None else max(deadline - time.monotonic(), 1e-3)
        return gevent.Timeout(seconds, False)

    def handle_request(self, listener_name: Any, req: Any, sock: Any, addr: Any) -> None:
        self._conns.requested(sock)
        if isinstance(getattr(req.body, "reader", None), ChunkedReader):
            bound_chunks(req.body.reader, self._max_body)
        try:
            super().handle_request(listener_name, req, sock, addr)
        finally:
            if sock in self._linger:
                self._linger.discard(sock)
                linger(sock)
            self._conns.answered(sock, time.monotonic())  # unless the answer closed it
        _take_turn()  # the other connections' turn before this one's next request (module docstring)

    def load_wsgi(self) -> None:
        super().load_wsgi()
        self.wsgi: Any = self._transport(self.wsgi)

    def _transport(self, app: Any) -> Any:
        """What the worker adds around the app for each request.

        The app reads the body within the read timeout, its errors as BodyError. A connection whose body was not
        read to its end, or failed, closes after the answer: gunicorn would otherwise read the rest of the body
        before the next request, for as long as the client sends it.

        Answers started after SIGTERM say `Connection: close`, also for requests that arrived before it. gunicorn
        decides that when a request arrives; a review in flight when SIGTERM comes would otherwise be answered
        keep-alive and its client could reuse a connection that is about to close.
        """

        def wsgi(environ: dict[str, Any], start_response: Any) -> Any:
            body = BoundedInput(environ["wsgi.input"], environ, time.monotonic() + self._read_timeout)
            environ["wsgi.input"] = body

            def start(status: str, headers: list[tuple[str, str]], exc_info: Any = None) -> Any:
                response: Any = getattr(start_response, "__self__", None)  # gunicorn's Response
                if hasattr(response, "force_close"):
                    if not self.alive or not body.complete:
                        response.force_close()
                    if not body.complete and (body.error is None or body.error.status == 413):
                        self._linger.add(environ.get("gunicorn.socket"))  # the client may still be sending it
                return start_response(status, headers, exc_info)

            return app(environ, start)

        return wsgi


class _Bound:
    """A listening socket as gunicorn's handler uses it: for its address only."""

    def __init__(self, name: Any) -> None:
        self._name = name

    def getsockname(self) -> Any:
        return self._name


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
