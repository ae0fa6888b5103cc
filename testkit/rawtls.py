"""Connections to the real server written by hand: what `requests` cannot send (a short body, a bad chunk) and
what no client library does (a connection that never sends a byte, a TLS handshake that stops after its hello)."""

from __future__ import annotations

import contextlib
import resource
import socket
import ssl
import time
from pathlib import Path

from testkit.server import Server


def port_of(server: Server) -> int:
    return int(server.url.rsplit(":", 1)[1])


def connect(server: Server, timeout: float) -> ssl.SSLSocket:
    """A verified TLS connection to the server, handshake done."""
    context = ssl.create_default_context(cafile=str(server.ca))
    raw = socket.create_connection(("127.0.0.1", port_of(server)), timeout=timeout)
    return context.wrap_socket(raw, server_hostname="localhost")


def stalled_handshake(server: Server, timeout: float = 10.0) -> socket.socket:
    """A TCP connection that has sent a real ClientHello and nothing after it: the server answers its hello and
    waits for the client's Finished, which never comes."""
    context = ssl.create_default_context(cafile=str(server.ca))
    incoming, outgoing = ssl.MemoryBIO(), ssl.MemoryBIO()
    tls = context.wrap_bio(incoming, outgoing, server_hostname="localhost")
    with contextlib.suppress(ssl.SSLWantReadError):
        tls.do_handshake()
    sock = socket.create_connection(("127.0.0.1", port_of(server)), timeout=timeout)
    sock.sendall(outgoing.read())
    return sock


def closed_by_peer(sock: socket.socket) -> bool:
    """True when the server has closed the connection; reads (and drops) what it sent before, without blocking."""
    timeout = sock.gettimeout()
    sock.settimeout(0)
    try:
        while sock.recv(65536):
            pass
    except (BlockingIOError, ssl.SSLWantReadError):
        return False
    except OSError:  # reset, or a TLS connection closed without close_notify
        return True
    finally:
        sock.settimeout(timeout)
    return True


def wait_closed(sock: socket.socket, within: float) -> float | None:
    """Seconds until the server closed the connection, None if it is still open after `within`."""
    started = time.monotonic()
    while time.monotonic() - started < within:
        if closed_by_peer(sock):
            return time.monotonic() - started
        time.sleep(0.05)
    return None


def head(path: str = "/mutate", **headers: str) -> bytes:
    """A POST's request line and headers; `Content_Length="3"` becomes `Content-Length: 3`."""
    lines = [f"POST {path} HTTP/1.1", "Host: localhost", "Content-Type: application/json"]
    lines += [f"{name.replace('_', '-')}: {value}" for name, value in headers.items()]
    return ("\r\n".join(lines) + "\r\n\r\n").encode()


def answer_then_close(tls: ssl.SSLSocket) -> tuple[int, dict[str, str], bytes, float]:
    """Read until the server closes: (status, headers, body, seconds until the answer began). Fails (the socket's
    timeout) if the server does not close the connection."""
    started = time.monotonic()
    data = tls.recv(65536)
    elapsed = time.monotonic() - started
    while chunk := tls.recv(65536):
        data += chunk
    header_block, _, body = data.partition(b"\r\n\r\n")
    status_line, *header_lines = header_block.decode().split("\r\n")
    headers = {k.lower(): v.strip() for k, _, v in (line.partition(":") for line in header_lines)}
    return int(status_line.split()[1]), headers, body, elapsed


def accept_queue(port: int) -> int:
    """Connections waiting in the accept queue of the TCP listening socket on local port `port` (its rx_queue)."""
    waiting = 0
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        for line in Path(table).read_text().splitlines()[1:]:
            cols = line.split()
            if cols[3] == "0A" and int(cols[1].rsplit(":", 1)[1], 16) == port:  # 0A = LISTEN
                waiting += int(cols[4].split(":")[1], 16)
    return waiting


def wait_accepted(port: int, within: float = 30.0) -> None:
    """Wait (`within` seconds at most) until the server has taken every connection waiting on `port`."""
    deadline = time.monotonic() + within
    while accept_queue(port) and time.monotonic() < deadline:
        time.sleep(0.05)


def open_flood(server: Server, idle: int, stalled: int = 0, timeout: float = 10.0) -> list[socket.socket]:
    """A connection flood held open, oldest first: `idle` TCP connections that never send a byte, then `stalled`
    TLS handshakes stopped after their hello; returned once the server has accepted them all. If opening one
    fails, those already open are closed."""
    port = port_of(server)
    held: list[socket.socket] = []
    try:
        for _ in range(idle):
            held.append(socket.create_connection(("127.0.0.1", port), timeout=timeout))
        for _ in range(stalled):
            held.append(stalled_handshake(server, timeout))
    except BaseException:
        for sock in held:
            sock.close()
        raise
    wait_accepted(port)
    return held


def raise_file_limit(connections: int) -> bool:
    """Room in this process for `connections` held sockets and a few hundred descriptors more (the soft limit is
    often 1,024): the soft limit raised as far as needed and the hard limit allows. False when that is too low."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    needed = connections + 512
    if soft == resource.RLIM_INFINITY or soft >= needed:
        return True
    enough = hard == resource.RLIM_INFINITY or hard >= needed
    resource.setrlimit(resource.RLIMIT_NOFILE, (needed if enough else hard, hard))
    return enough
