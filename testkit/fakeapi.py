"""A small Kubernetes API server over real HTTP for the live-state tests (and the lead's end-to-end test).

Why not kmock alone: kmock 0.8's emulator gives lists the resourceVersion '...', stamps no resourceVersion on
objects, ignores labelSelector/fieldSelector and the watch's resourceVersion (it replays every object as ADDED),
sends no bookmarks and never answers 410. The behaviours under test — resume from a resourceVersion, expiry with
410, a stream cut mid-chunk, selector-scoped watches — need those semantics, so this server implements them:

- list (with `limit`/`continue`), watch from a resourceVersion (history replay, `ERROR 410` when compacted,
  `BOOKMARK` events when allowed, `timeoutSeconds`), get, create (POST), replace (PUT), delete;
- labelSelector (`k=v`, `k!=v`, `k`, `!k`) and fieldSelector (`metadata.name`, `metadata.namespace`), with the
  real server's ADDED/DELETED translation when an update moves an object in or out of a watch's selector;
- the CRD groups (snapshot.storage.k8s.io, kubevirt.io, cdi.kubevirt.io, gateway.networking.k8s.io,
  openreports.io, wgpolicyk8s.io) while
  they are installed (`served_groups`), with discovery (`/apis` and each group's resource list), and
  coordination.k8s.io Leases; a replace naming a stale resourceVersion, and a delete whose preconditions (uid,
  resourceVersion) the object does not meet, get 409 Conflict;
- RBAC, when given `grants` (testkit/rbac.py `chart_grants()`: what the chart grants the server's
  ServiceAccount): a request they do not allow gets 403 Forbidden, as from a real API server;
- faults: `expire_watches()` (410), `break_watches()` (connection cut without the final chunk),
  `silently()` (changes no watch sees, only a re-list), `fail(status)` and `delay(seconds)` for requests,
  `holding()` (requests unanswered until the test lets them go), `stop()`/`start()` (API down and back on the
  same port).

Start one with `running_fake_api()` (a context manager) or the pytest fixture `fake_api` in conftest.py.
"""

from __future__ import annotations

import collections
import contextlib
import copy
import itertools
import json
import logging
import queue
import re
import socket
import threading
import time
import uuid
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

from testkit.rbac import ANY, Grant, allowed, request_grant
from webhook.state.kinds import STATE_KINDS

Json = dict[str, Any]
log = logging.getLogger(__name__)

#: plural → (kind, namespaced, API prefix): the cluster-state kinds (webhook/state/kinds.py) and what the server
#: writes (Leases, policy reports).
RESOURCES: dict[str, tuple[str, bool, str]] = {
    **{entry.plural: (entry.kind, entry.namespaced, entry.prefix) for entry in STATE_KINDS},
    "deployments": ("Deployment", True, "/apis/apps/v1"),
    "statefulsets": ("StatefulSet", True, "/apis/apps/v1"),
    "daemonsets": ("DaemonSet", True, "/apis/apps/v1"),
    "replicasets": ("ReplicaSet", True, "/apis/apps/v1"),
    "jobs": ("Job", True, "/apis/batch/v1"),
    "cronjobs": ("CronJob", True, "/apis/batch/v1"),
    "leases": ("Lease", True, "/apis/coordination.k8s.io/v1"),
    "reports": ("Report", True, "/apis/openreports.io/v1alpha1"),
    "policyreports": ("PolicyReport", True, "/apis/wgpolicyk8s.io/v1alpha2"),
}
#: The API groups a cluster may or may not serve (CRDs): discovery lists those in `FakeKubeAPI.served_groups`,
#: and their resources answer 404 while they are not served.
OPTIONAL_GROUPS = frozenset(
    {entry.group for entry in STATE_KINDS if entry.feature is not None} | {"openreports.io", "wgpolicyk8s.io"}
)
#: The policy report groups, one of which the webhook writes.
REPORT_GROUPS = frozenset({"openreports.io", "wgpolicyk8s.io"})
PLURAL_OF = {kind: plural for plural, (kind, _, _) in RESOURCES.items()}
_PATH = re.compile(
    r"^(?P<prefix>/api/v1|/apis/(?P<group>[a-z0-9.-]+)/v[0-9a-z]+)(?:/namespaces/(?P<ns>[^/]+))?/(?P<plural>[a-z]+)"
    r"(?:/(?P<name>[^/]+))?$"
)
_EXPIRE, _BREAK, _END = object(), object(), object()


def plural_of(kind_or_plural: str) -> str:
    return PLURAL_OF.get(kind_or_plural, kind_or_plural)


@dataclass
class Request:
    method: str
    path: str
    query: dict[str, str]
    agent: str = ""  # the User-Agent: which of several clients sent it (a fault can hit one replica only)

    @property
    def watch(self) -> bool:
        return self.query.get("watch") in ("true", "1")


@dataclass
class _Watcher:
    plural: str
    namespace: str | None
    matches: Callable[[Json], bool]
    events: queue.Queue[Any] = field(default_factory=queue.Queue)


class _Server(ThreadingHTTPServer):
    """A client that goes away mid-answer (a watch cut, a server under test stopped) is normal here. The
    standard handler prints a banner and a traceback to stderr, from a thread that may outlive the test, so the
    text landed in whichever test's captured stderr was current; logged instead."""

    def handle_error(self, request: Any, client_address: Any) -> None:
        log.debug("fake API: request from %s ended early", client_address, exc_info=True)


class FakeKubeAPI:
    """The store, the watch fan-out and the fault switches; `url` is what a kubeconfig points at."""

    def __init__(self, *, bookmark_interval: float = 0.2, grants: Iterable[Grant] | None = None) -> None:
        self.bookmark_interval = bookmark_interval
        #: what the client may do (None: everything); change it to take a permission away
        self.grants: frozenset[Grant] | None = None if grants is None else frozenset(grants)
        self.served_groups: set[str] = set(OPTIONAL_GROUPS)  # take one out: a cluster without that CRD
        self.requests: list[Request] = []
        self.listed: collections.Counter[str] = collections.Counter()  # objects answered by lists, per plural
        self._lock = threading.RLock()
        self._rv = itertools.count(100)
        self._last_rv = 99
        self._objects: dict[tuple[str, str, str], Json] = {}
        self._history: list[tuple[int, str, Json | None, Json | None, Json | None]] = []  # rv, plural, old, new, last
        self._compacted = 0
        self._watchers: list[_Watcher] = []
        self._pages: dict[str, list[Json]] = {}
        self._failure: tuple[int, Callable[[Request], bool]] | None = None
        self._delay: tuple[float, Callable[[Request], bool]] | None = None
        self._hold: tuple[threading.Event, Callable[[Request], bool]] | None = None
        self._held = 0
        self._silent = False
        self._server: ThreadingHTTPServer | None = None
        self._connections: set[socket.socket] = set()
        self.port = 0

    # -- lifecycle -----------------------------------------------------------------------------------------

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> FakeKubeAPI:
        """Listen (again, on the same port after `stop()`)."""
        api = self

        class Handler(_Handler):
            fake = api

        server = _Server(("127.0.0.1", self.port), Handler)
        server.daemon_threads = True
        self.port = server.server_address[1]
        self._server = server
        threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
        return self

    def stop(self) -> None:
        """The API goes down: refuse new connections and cut every open one."""
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None
        self.break_watches()
        with self._lock:
            connections = list(self._connections)
        for conn in connections:
            with contextlib.suppress(OSError):
                conn.shutdown(socket.SHUT_RDWR)

    def write_kubeconfig(self, path: Path) -> Path:
        config = {
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [{"name": "fake", "cluster": {"server": self.url}}],
            "users": [{"name": "fake", "user": {"token": "fake-token"}}],
            "contexts": [{"name": "fake", "context": {"cluster": "fake", "user": "fake"}}],
            "current-context": "fake",
        }
        path.write_text(json.dumps(config))
        return path

    # -- the store (what tests call) -----------------------------------------------------------------------

    def create(self, obj: Json) -> Json:
        plural, ns, name = self._key(obj)
        with self._lock:
            if (plural, ns, name) in self._objects:
                raise KeyError(f"{plural} {ns}/{name} already exists")
            stored = copy.deepcopy(obj)
            meta = stored.setdefault("metadata", {})
            meta.setdefault("uid", str(uuid.uuid4()))
            meta.setdefault("creationTimestamp", time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()))
            self._commit(plural, (plural, ns, name), None, stored)
            return copy.deepcopy(stored)

    def update(self, obj: Json) -> Json:
        plural, ns, name = self._key(obj)
        with self._lock:
            old = self._objects.get((plural, ns, name))
            if old is None:
                raise KeyError(f"{plural} {ns}/{name} not found")
            stored = copy.deepcopy(obj)
            meta = stored.setdefault("metadata", {})
            for key in ("uid", "creationTimestamp"):
                meta[key] = old["metadata"].get(key)
            self._commit(plural, (plural, ns, name), old, stored)
            return copy.deepcopy(stored)

    def seed(self, objects: Iterable[Json]) -> None:
        """Store many objects at one resourceVersion, without copies or history (benchmarks: 100,000 pods).

        The objects become the store's: the caller must not change them afterwards.
        """
        with self._lock:
            rv = str(next(self._rv))
            for obj in objects:
                obj["metadata"]["resourceVersion"] = rv
                self._objects[self._key(obj)] = obj
            self._last_rv = int(rv)

    def apply(self, obj: Json) -> Json:
        """Create or replace."""
        with self._lock:
            return self.update(obj) if self.get(*self._key(obj)) is not None else self.create(obj)

    def delete(self, kind: str, namespace: str, name: str) -> None:
        plural = plural_of(kind)
        with self._lock:
            old = self._objects.get((plural, namespace, name))
            if old is None:
                raise KeyError(f"{plural} {namespace}/{name} not found")
            self._commit(plural, (plural, namespace, name), old, None)

    def get(self, kind: str, namespace: str, name: str) -> Json | None:
        with self._lock:
            obj = self._objects.get((plural_of(kind), namespace, name))
            return copy.deepcopy(obj) if obj is not None else None

    # -- faults --------------------------------------------------------------------------------------------

    @contextlib.contextmanager
    def silently(self) -> Iterator[None]:
        """Changes made inside reach no watch and leave no history: only a re-list can see them."""
        with self._lock:
            self._silent = True
            try:
                yield
            finally:
                self._silent = False
                self._compacted = self._last_rv

    def expire_watches(self, kind: str | None = None) -> None:
        """Compact history and end open watches with `ERROR 410 Gone`, as etcd compaction does."""
        with self._lock:
            self._compacted = self._last_rv
            for watcher in self._select(kind):
                watcher.events.put(_EXPIRE)

    def break_watches(self, kind: str | None = None) -> None:
        """Cut open watch connections mid-stream (no terminating chunk)."""
        with self._lock:
            for watcher in self._select(kind):
                watcher.events.put(_BREAK)

    def end_watches(self, kind: str | None = None) -> None:
        """End open watches cleanly, as the server's watch timeout does."""
        with self._lock:
            for watcher in self._select(kind):
                watcher.events.put(_END)

    def fail(self, status: int | None, when: Callable[[Request], bool] = lambda r: True) -> None:
        """Answer matching requests with `status` (a Status body) until `fail(None)`."""
        self._failure = None if status is None else (status, when)

    def delay(self, seconds: float | None, when: Callable[[Request], bool] = lambda r: True) -> None:
        """Hold matching requests for `seconds` before answering, until `delay(None)`."""
        self._delay = None if seconds is None else (seconds, when)

    @contextlib.contextmanager
    def holding(self, when: Callable[[Request], bool] = lambda r: True) -> Iterator[None]:
        """Matching requests wait unanswered until the block ends: a list that takes as long as the test needs."""
        gate = threading.Event()
        self._hold = (gate, when)
        try:
            yield
        finally:
            self._hold = None
            gate.set()

    def held(self) -> int:
        """How many requests `holding` keeps waiting now."""
        with self._lock:
            return self._held

    def watching(self, kind: str | None = None) -> int:
        with self._lock:
            return len(self._select(kind))

    def count(self, method: str, kind: str, *, watch: bool | None = None, name: bool | None = None) -> int:
        """How many requests of a method hit a resource (optionally only watches, or only single objects)."""
        plural = plural_of(kind)
        out = 0
        for req in list(self.requests):
            match = _PATH.match(req.path)
            if req.method != method or not match or match["plural"] != plural:
                continue
            if watch is not None and req.watch != watch:
                continue
            if name is not None and bool(match["name"]) != name:
                continue
            out += 1
        return out

    # -- internals -----------------------------------------------------------------------------------------

    def _select(self, kind: str | None) -> list[_Watcher]:
        return [w for w in self._watchers if kind is None or w.plural == plural_of(kind)]

    @staticmethod
    def _key(obj: Json) -> tuple[str, str, str]:
        plural = plural_of(str(obj["kind"]))
        meta = obj.get("metadata") or {}
        namespaced = RESOURCES[plural][1]
        return plural, str(meta.get("namespace") or "") if namespaced else "", str(meta["name"])

    def _commit(self, plural: str, key: tuple[str, str, str], old: Json | None, new: Json | None) -> None:
        rv = next(self._rv)
        self._last_rv = rv
        last = None  # a deleted object's final state, stamped with the deletion's resourceVersion
        if new is None:
            del self._objects[key]
            last = copy.deepcopy(old)
            assert last is not None
            last["metadata"]["resourceVersion"] = str(rv)
        else:
            new["metadata"]["resourceVersion"] = str(rv)
            if key[1]:
                new["metadata"]["namespace"] = key[1]
            self._objects[key] = new
        if self._silent:
            return
        self._history.append((rv, plural, old, new, last))
        for watcher in self._watchers:
            if watcher.plural == plural and (event := _event_for(watcher, old, new, last)) is not None:
                watcher.events.put(event)

    def _list(self, plural: str, namespace: str | None, matches: Callable[[Json], bool]) -> tuple[int, list[Json]]:
        # Stored objects are never changed in place (a change stores a new copy), so a list shares them.
        with self._lock:
            selected = [
                (key, obj)
                for key, obj in self._objects.items()
                if key[0] == plural and (namespace is None or key[1] == namespace) and matches(obj)
            ]
            selected.sort(key=lambda item: item[0])
            return self._last_rv, [obj for _, obj in selected]

    def _subscribe(self, watcher: _Watcher, since: int) -> bool:
        """Register a watch from resourceVersion `since`; False when that version is compacted away (410)."""
        with self._lock:
            if since < self._compacted:
                return False
            for rv, plural, old, new, last in self._history:
                if rv > since and plural == watcher.plural:
                    event = _event_for(watcher, old, new, last)
                    if event is not None:
                        watcher.events.put(event)
            self._watchers.append(watcher)
            return True

    def _unsubscribe(self, watcher: _Watcher) -> None:
        with self._lock:
            if watcher in self._watchers:
                self._watchers.remove(watcher)

    def _rv_now(self) -> int:
        with self._lock:
            return self._last_rv


def _event_for(watcher: _Watcher, old: Json | None, new: Json | None, deleted: Json | None) -> Json | None:
    """The event a selector-scoped watch sees, as kube-apiserver translates it."""

    def visible(obj: Json | None) -> bool:
        if obj is None:
            return False
        ns = (obj.get("metadata") or {}).get("namespace") or ""
        return (watcher.namespace is None or ns == watcher.namespace) and watcher.matches(obj)

    kind = RESOURCES[watcher.plural][0]
    if new is None:
        return {"type": "DELETED", "object": _with_kind(deleted, kind)} if visible(old) else None
    was, now = visible(old), visible(new)
    if now:
        return {"type": "MODIFIED" if was else "ADDED", "object": _with_kind(new, kind)}
    if was:
        return {"type": "DELETED", "object": _with_kind(new, kind)}
    return None


def _with_kind(obj: Json | None, kind: str) -> Json:
    assert obj is not None
    prefix = RESOURCES[PLURAL_OF[kind]][2]
    api_version = prefix.removeprefix("/apis/").removeprefix("/api/")
    return {"kind": kind, "apiVersion": api_version, **copy.deepcopy(obj)}


def selector_matcher(label_selector: str, field_selector: str) -> Callable[[Json], bool]:
    """The subset of label and field selector syntax the webhook uses (and a little more)."""
    label_tests = [_label_test(term.strip()) for term in label_selector.split(",") if term.strip()]
    field_tests = [_field_test(term.strip()) for term in field_selector.split(",") if term.strip()]

    def matches(obj: Json) -> bool:
        meta = obj.get("metadata") or {}
        labels = meta.get("labels") or {}
        return all(t(labels) for t in label_tests) and all(t(meta) for t in field_tests)

    return matches


def _label_test(term: str) -> Callable[[dict[str, str]], bool]:
    if "!=" in term:
        key, value = term.split("!=", 1)
        return lambda labels: labels.get(key) != value
    if "=" in term:
        key, value = term.replace("==", "=").split("=", 1)
        return lambda labels: labels.get(key) == value
    if term.startswith("!"):
        return lambda labels: term[1:] not in labels
    return lambda labels: term in labels


def _field_test(term: str) -> Callable[[dict[str, Any]], bool]:
    negate = "!=" in term
    path, value = term.replace("!=", "=").replace("==", "=").split("=", 1)
    attribute = {"metadata.name": "name", "metadata.namespace": "namespace"}.get(path)
    if attribute is None:
        raise ValueError(f"field selector {path!r} is not supported by the fake API")
    return lambda meta: (str(meta.get(attribute) or "") == value) != negate


def _group_of(prefix: str) -> str:
    return prefix.removeprefix("/apis/").split("/")[0] if prefix.startswith("/apis/") else ""


def _served(plural: str, prefix: str, served: set[str]) -> bool:
    """A resource of a served group, asked for under its own API prefix."""
    if plural not in RESOURCES or RESOURCES[plural][2] != prefix:
        return False
    group = _group_of(prefix)
    return group not in OPTIONAL_GROUPS or group in served


def _discovery(path: str, served: set[str]) -> Json | None:
    """What the client's discovery reads: `GET /apis` (the APIGroupList of the groups served) and
    `GET /apis/<group>/<version>` (the APIResourceList of a served group)."""
    prefixes = sorted({prefix for plural, (_, _, prefix) in RESOURCES.items() if _served(plural, prefix, served)})
    if path in ("/apis", "/apis/"):
        versions = [prefix.removeprefix("/apis/") for prefix in prefixes if prefix.startswith("/apis/")]
        return {
            "kind": "APIGroupList",
            "apiVersion": "v1",
            "groups": [
                {
                    "name": gv.split("/")[0],
                    "versions": [{"groupVersion": gv, "version": gv.split("/")[1]}],
                    "preferredVersion": {"groupVersion": gv, "version": gv.split("/")[1]},
                }
                for gv in versions
            ],
        }
    if path not in prefixes or not path.startswith("/apis/"):
        return None
    resources = [
        {"name": p, "singularName": "", "namespaced": namespaced, "kind": kind, "verbs": _VERBS}
        for p, (kind, namespaced, prefix) in RESOURCES.items()
        if prefix == path
    ]
    return {
        "kind": "APIResourceList",
        "apiVersion": "v1",
        "groupVersion": path[len("/apis/") :],
        "resources": resources,
    }


_VERBS = ["create", "delete", "get", "list", "update", "watch"]


def _forbidden(req: Request, grants: frozenset[Grant] | None) -> str | None:
    """What the API server says when RBAC refuses the request (None: allowed)."""
    needed = request_grant(req.method, req.path, req.query)
    if grants is None or needed is None or allowed(needed, grants):
        return None
    where = "at the cluster scope" if needed.namespace == ANY else f'in the namespace "{needed.namespace}"'
    return (
        f'{needed.resource} is forbidden: User "system:serviceaccount:fake:server" cannot {needed.verb} resource '
        f'"{needed.resource}" in API group "{needed.group}" {where}'
    )


def _stale(stored: Json | None, body: Json) -> str | None:
    """Why a replace must be refused as the real server does: it names a resourceVersion that is not current."""
    wanted = (body.get("metadata") or {}).get("resourceVersion")
    current = (stored or {}).get("metadata", {}).get("resourceVersion")
    if wanted and stored is not None and wanted != current:
        return "the object has been modified; please apply your changes to the latest version and try again"
    return None


def _unmet_preconditions(stored: Json | None, body: Json | None) -> str | None:
    """Why a delete must be refused as the real server does: its DeleteOptions name a UID or resourceVersion the
    stored object does not have."""
    wanted = (body or {}).get("preconditions") or {}
    meta = (stored or {}).get("metadata") or {}
    for field_name in ("uid", "resourceVersion"):
        if stored is not None and wanted.get(field_name) and wanted[field_name] != meta.get(field_name):
            got = meta.get(field_name)
            return f"Precondition failed: {field_name} in precondition: {wanted[field_name]}, in object meta: {got}"
    return None


def _status(code: int, reason: str, message: str) -> Json:
    return {
        "kind": "Status",
        "apiVersion": "v1",
        "status": "Failure",
        "code": code,
        "reason": reason,
        "message": message,
    }


class _Handler(BaseHTTPRequestHandler):
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
        if fake._failure is not None and fake._failure[1](req):
            status = fake._failure[0]
            return self._json(status, _status(status, "InternalError", f"injected failure {status}"))
        if (refused := _forbidden(req, fake.grants)) is not None:
            return self._json(403, _status(403, "Forbidden", refused))
        if method == "GET" and (discovered := _discovery(url.path, fake.served_groups)) is not None:
            return self._json(200, discovered)
        match = _PATH.match(url.path)
        if not match or not _served(match["plural"], match["prefix"], fake.served_groups):
            return self._json(404, _status(404, "NotFound", f"the server could not find {url.path}"))
        plural, ns, name = match["plural"], match["ns"], match["name"]
        kind, namespaced, _ = RESOURCES[plural]
        try:
            matches = selector_matcher(query.get("labelSelector", ""), query.get("fieldSelector", ""))
        except ValueError as exc:
            return self._json(400, _status(400, "BadRequest", str(exc)))
        if method == "GET" and name is None and req.watch:
            return self._watch(plural, ns, matches, query)
        if method == "GET" and name is None:
            return self._list(plural, ns, matches, query)
        if method == "POST" and name is None and body is not None:
            body.setdefault("kind", kind)
            if namespaced:
                body.setdefault("metadata", {})["namespace"] = ns or ""
            try:
                return self._json(201, fake.create(body))
            except KeyError as exc:
                return self._json(409, _status(409, "AlreadyExists", str(exc)))
        key_ns = ns or "" if namespaced else ""
        if method == "GET" and name is not None:
            obj = fake.get(plural, key_ns, name)
            if obj is None:
                return self._json(404, _status(404, "NotFound", f'{plural} "{name}" not found'))
            return self._json(200, _with_kind(obj, kind))
        if method == "PUT" and name is not None and body is not None:
            body.setdefault("kind", kind)
            if namespaced:
                body.setdefault("metadata", {})["namespace"] = key_ns
            with fake._lock:  # compare and swap, as etcd does: two replaces of one version, one wins
                if conflict := _stale(fake.get(plural, key_ns, name), body):
                    return self._json(409, _status(409, "Conflict", conflict))
                try:
                    stored = fake.update(body)
                except KeyError as exc:
                    return self._json(404, _status(404, "NotFound", str(exc)))
            return self._json(200, stored)
        if method == "DELETE" and name is not None:
            with fake._lock:  # preconditions are checked and the object deleted in one step, as etcd does
                if unmet := _unmet_preconditions(fake.get(plural, key_ns, name), body):
                    return self._json(409, _status(409, "Conflict", unmet))
                try:
                    fake.delete(plural, key_ns, name)
                except KeyError as exc:
                    return self._json(404, _status(404, "NotFound", str(exc)))
            return self._json(200, {"kind": "Status", "apiVersion": "v1", "status": "Success"})
        return self._json(405, _status(405, "MethodNotAllowed", f"{method} {url.path}"))

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
                return self._json(410, _status(410, "Expired", "the continue token has expired"))
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
        watcher = _Watcher(plural, ns, matches)
        since = int(query.get("resourceVersion") or fake._rv_now())
        bookmarks = query.get("allowWatchBookmarks") in ("true", "1")
        deadline = time.monotonic() + float(query.get("timeoutSeconds") or 3600)
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        if not fake._subscribe(watcher, since):
            gone = _status(410, "Expired", f"too old resource version: {since} ({fake._compacted})")
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
                if event is _EXPIRE:
                    self._chunk({"type": "ERROR", "object": _status(410, "Expired", "watch expired (compacted)")})
                    self._end()
                    return
                if event is _END:
                    self._end()
                    return
                if event is _BREAK:
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


@contextlib.contextmanager
def running_fake_api(
    *objects: Json, bookmark_interval: float = 0.2, grants: Iterable[Grant] | None = None
) -> Iterator[FakeKubeAPI]:
    """A started FakeKubeAPI holding `objects` (allowing only `grants`, when given); stopped on exit."""
    api = FakeKubeAPI(bookmark_interval=bookmark_interval, grants=grants)
    for obj in objects:
        api.create(obj)
    api.start()
    try:
        yield api
    finally:
        api.stop()
