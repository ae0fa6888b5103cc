"""The HTTP side of the fake API: each request, after the fault switches and RBAC, answered from the store, and
watches streamed as chunked JSON lines."""

from __future__ import annotations

import contextlib
import json
import logging
import queue
import socket
import time
import uuid
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import TYPE_CHECKING, Any
from urllib.parse import parse_qs, urlsplit

from rules.model import Json
from testkit.fakeapi.patches import PatchRefused, invalid_object, patch_object
from testkit.fakeapi.refusals import failure, forbidden, stale, unmet_preconditions
from testkit.fakeapi.resources import PATH, RESOURCES, Request, discovery, is_served, with_kind
from testkit.fakeapi.selectors import selector_matcher
from testkit.fakeapi.watch import BREAK, END, EXPIRE, Watcher

if TYPE_CHECKING:
    from testkit.fakeapi.store import FakeKubeAPI

log = logging.getLogger(__name__)


class Server(ThreadingHTTPServer):
    """A client that goes away mid-answer (a watch cut, a server under test stopped) is normal here. The
    standard handler prints a banner and a traceback to stderr, from a thread that may outlive the test, so the
    text landed in whichever test's captured stderr was current; logged instead."""

    def handle_error(self, request: Any, client_address: Any) -> None:
        log.debug("fake API: request from %s ended early", client_address, exc_info=True)


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    fake: FakeKubeAPI

    def log_message(self, format: str, *args: Any) -> None:  # quiet
        pass

    def setup(self) -> None:
        super().setup()
        with self.fake._lock:
            self.fake._connections.add(self.connection)

    def finish(self) -> None:
        with contextlib.suppress(OSError):
            super().finish()
        with self.fake._lock:
            self.fake._connections.discard(self.connection)

    def do_GET(self) -> None:
        self._serve("GET")

    def do_POST(self) -> None:
        self._serve("POST")

    def do_PUT(self) -> None:
        self._serve("PUT")

    def do_DELETE(self) -> None:
        self._serve("DELETE")

    def do_PATCH(self) -> None:
        self._serve("PATCH")

    def _serve(self, method: str) -> None:
        url = urlsplit(self.path)
        query = {k: v[-1] for k, v in parse_qs(url.query).items()}
        req = Request(method, url.path, query, self.headers.get("User-Agent") or "")
        fake = self.fake
        fake.requests.append(req)
        length = int(self.headers.get("Content-Length") or 0)
        body = json.loads(self.rfile.read(length)) if length else None
        if fake._delay is not None and fake._delay[1](req):
            time.sleep(fake._delay[0])
        if (hold := fake._hold) is not None and hold[1](req):
            with fake._lock:
                fake._held += 1
            hold[0].wait()
            with fake._lock:
                fake._held -= 1
        if (hostile := fake._hostile) is not None and hostile[1](req):
            return hostile[0](self, req)
        if fake._failure is not None and fake._failure[1](req):
            status = fake._failure[0]
            return self._json(status, failure(status, "InternalError", f"injected failure {status}"))
        if (refused := forbidden(req, fake.grants)) is not None:
            return self._json(403, failure(403, "Forbidden", refused))
        if method == "GET" and (discovered := discovery(url.path, fake.served_groups)) is not None:
            return self._json(200, discovered)
        match = PATH.match(url.path)
        if not match or not is_served(match["plural"], match["prefix"], fake.served_groups):
            return self._json(404, failure(404, "NotFound", f"the server could not find {url.path}"))
        plural, ns, name = match["plural"], match["ns"], match["name"]
        kind, namespaced, _ = RESOURCES[plural]
        try:
            matches = selector_matcher(query.get("labelSelector", ""), query.get("fieldSelector", ""))
        except ValueError as exc:
            return self._json(400, failure(400, "BadRequest", str(exc)))
        if method == "GET" and name is None and req.watch:
            return self._watch(plural, ns, matches, query)
        if method == "GET" and name is None:
            return self._list(plural, ns, matches, query)
        if method == "POST" and name is None and body is not None:
            body.setdefault("kind", kind)
            if namespaced:
                body.setdefault("metadata", {})["namespace"] = ns or ""
            if invalid := invalid_object(body, None):
                return self._json(422, failure(422, "Invalid", invalid))
            try:
                return self._json(201, fake.create(body))
            except KeyError as exc:
                return self._json(409, failure(409, "AlreadyExists", str(exc)))
        key_ns = ns or "" if namespaced else ""
        if method == "GET" and name is not None:
            obj = fake.get(plural, key_ns, name)
            if obj is None:
                return self._json(404, failure(404, "NotFound", f'{plural} "{name}" not found'))
            return self._json(200, with_kind(obj, kind))
        if method == "PUT" and name is not None and body is not None:
            body.setdefault("kind", kind)
            if namespaced:
                body.setdefault("metadata", {})["namespace"] = key_ns
            with fake._lock:  # compare and swap, as etcd does: two replaces of one version, one wins
                if conflict := stale(fake.get(plural, key_ns, name), body):
                    return self._json(409, failure(409, "Conflict", conflict))
                try:
                    stored = fake.update(body)
                except KeyError as exc:
                    return self._json(404, failure(404, "NotFound", str(exc)))
            return self._json(200, stored)
        if method == "PATCH" and name is not None and body is not None:
            with fake._lock:  # read, patch and store in one step, as the API server retries on a conflict
                current = fake.get(plural, key_ns, name)
                if current is None:
                    return self._json(404, failure(404, "NotFound", f'{plural} "{name}" not found'))
                try:
                    patched = patch_object(with_kind(current, kind), body, self.headers.get("Content-Type") or "")
                except PatchRefused as bad:
                    return self._json(bad.status, failure(bad.status, bad.reason, str(bad)))
                if invalid := invalid_object(patched, current):
                    return self._json(422, failure(422, "Invalid", invalid))
                return self._json(200, fake.update(patched))
        if method == "DELETE" and name is not None:
            with fake._lock:  # preconditions are checked and the object deleted in one step, as etcd does
                if unmet := unmet_preconditions(fake.get(plural, key_ns, name), body):
                    return self._json(409, failure(409, "Conflict", unmet))
                try:
                    fake.delete(plural, key_ns, name)
                except KeyError as exc:
                    return self._json(404, failure(404, "NotFound", str(exc)))
            return self._json(200, {"kind": "Status", "apiVersion": "v1", "status": "Success"})
        return self._json(405, failure(405, "MethodNotAllowed", f"{method} {url.path}"))

    def _json(self, status: int, doc: Json) -> None:
        data = json.dumps(doc).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _list(self, plural: str, ns: str | None, matches: Callable[[Json], bool], query: dict[str, str]) -> None:
        fake = self.fake
        token = query.get("continue")
        if token:
            rv_text, _, page_id = token.partition(":")
            items = fake._pages.pop(page_id, None)
            if items is None:
                return self._json(410, failure(410, "Expired", "the continue token has expired"))
            rv = int(rv_text)
        else:
            rv, items = fake._list(plural, ns, matches)
        limit = int(query.get("limit") or 0)
        metadata: Json = {"resourceVersion": str(rv)}
        if limit and len(items) > limit:
            page_id = uuid.uuid4().hex
            fake._pages[page_id] = items[limit:]
            items = items[:limit]
            metadata["continue"] = f"{rv}:{page_id}"
        fake.listed[plural] += len(items)
        kind = RESOURCES[plural][0]
        self._json(200, {"kind": f"{kind}List", "apiVersion": "v1", "metadata": metadata, "items": items})

    def _watch(self, plural: str, ns: str | None, matches: Callable[[Json], bool], query: dict[str, str]) -> None:
        fake = self.fake
        watcher = Watcher(plural, ns, matches)
        since = int(query.get("resourceVersion") or fake._rv_now())
        bookmarks = query.get("allowWatchBookmarks") in ("true", "1")
        deadline = time.monotonic() + float(query.get("timeoutSeconds") or 3600)
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        if not fake._subscribe(watcher, since):
            gone = failure(410, "Expired", f"too old resource version: {since} ({fake._compacted})")
            self._chunk({"type": "ERROR", "object": gone})
            self._end()
            return
        try:
            while True:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    self._end()
                    return
                try:
                    event = watcher.events.get(timeout=min(fake.bookmark_interval, remaining))
                except queue.Empty:
                    if bookmarks:
                        rv = str(fake._rv_now())
                        kind = RESOURCES[plural][0]
                        self._chunk({"type": "BOOKMARK", "object": {"kind": kind, "metadata": {"resourceVersion": rv}}})
                    continue
                if event is EXPIRE:
                    self._chunk({"type": "ERROR", "object": failure(410, "Expired", "watch expired (compacted)")})
                    self._end()
                    return
                if event is END:
                    self._end()
                    return
                if event is BREAK:
                    self.close_connection = True
                    with contextlib.suppress(OSError):
                        self.wfile.flush()
                        self.connection.shutdown(socket.SHUT_RDWR)
                    return
                self._chunk(event)
        except OSError:
            self.close_connection = True
        finally:
            fake._unsubscribe(watcher)

    def _chunk(self, event: Json) -> None:
        data = json.dumps(event).encode() + b"\n"
        self.wfile.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
        self.wfile.flush()

    def _end(self) -> None:
        self.wfile.write(b"0\r\n\r\n")
        self.wfile.flush()
