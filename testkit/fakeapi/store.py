"""The fake API's state: the store, its resourceVersions and history, the watch fan-out and the fault switches."""

from __future__ import annotations

import collections
import contextlib
import copy
import itertools
import json
import socket
import threading
import time
import uuid
from collections.abc import Callable, Iterable, Iterator
from http.server import ThreadingHTTPServer
from pathlib import Path
from typing import Any

from rules.model import Json
from testkit.fakeapi.handler import Handler, Server
from testkit.fakeapi.resources import OPTIONAL_GROUPS, PATH, RESOURCES, Request, plural_of
from testkit.fakeapi.watch import BREAK, END, EXPIRE, Watcher, event_for
from testkit.rbac import Grant


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
        self._watchers: list[Watcher] = []
        self._pages: dict[str, list[Json]] = {}
        self._failure: tuple[int, Callable[[Request], bool]] | None = None
        self._delay: tuple[float, Callable[[Request], bool]] | None = None
        self._hold: tuple[threading.Event, Callable[[Request], bool]] | None = None
        #: an answer of testkit/fakeapi/hostile.py given instead of the real one, and to which requests
        self._hostile: tuple[Callable[[Any, Request], None], Callable[[Request], bool]] | None = None
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

        class Bound(Handler):
            fake = api

        server = Server(("127.0.0.1", self.port), Bound)
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

    def objects(self, kind: str) -> list[Json]:
        """Copies of the stored objects of a kind, in every namespace."""
        plural = plural_of(kind)
        with self._lock:
            return [copy.deepcopy(obj) for (p, _, _), obj in self._objects.items() if p == plural]

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
                watcher.events.put(EXPIRE)

    def break_watches(self, kind: str | None = None) -> None:
        """Cut open watch connections mid-stream (no terminating chunk)."""
        with self._lock:
            for watcher in self._select(kind):
                watcher.events.put(BREAK)

    def end_watches(self, kind: str | None = None) -> None:
        """End open watches cleanly, as the server's watch timeout does."""
        with self._lock:
            for watcher in self._select(kind):
                watcher.events.put(END)

    def fail(self, status: int | None, when: Callable[[Request], bool] = lambda r: True) -> None:
        """Answer matching requests with `status` (a Status body) until `fail(None)`."""
        self._failure = None if status is None else (status, when)

    def delay(self, seconds: float | None, when: Callable[[Request], bool] = lambda r: True) -> None:
        """Hold matching requests for `seconds` before answering, until `delay(None)`."""
        self._delay = None if seconds is None else (seconds, when)

    @contextlib.contextmanager
    def hostile(
        self, answer: Callable[[Any, Request], None], when: Callable[[Request], bool] = lambda r: True
    ) -> Iterator[None]:
        """Matching requests get `answer` (testkit/fakeapi/hostile.py: endless pages, a trickle, a flood) while
        the block runs."""
        self._hostile = (answer, when)
        try:
            yield
        finally:
            self._hostile = None

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
            match = PATH.match(req.path)
            if req.method != method or not match or match["plural"] != plural:
                continue
            if watch is not None and req.watch != watch:
                continue
            if name is not None and bool(match["name"]) != name:
                continue
            out += 1
        return out

    # -- internals -----------------------------------------------------------------------------------------

    def _select(self, kind: str | None) -> list[Watcher]:
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
            if watcher.plural == plural and (event := event_for(watcher, old, new, last)) is not None:
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

    def _subscribe(self, watcher: Watcher, since: int) -> bool:
        """Register a watch from resourceVersion `since`; False when that version is compacted away (410)."""
        with self._lock:
            if since < self._compacted:
                return False
            for rv, plural, old, new, last in self._history:
                if rv > since and plural == watcher.plural:
                    event = event_for(watcher, old, new, last)
                    if event is not None:
                        watcher.events.put(event)
            self._watchers.append(watcher)
            return True

    def _unsubscribe(self, watcher: Watcher) -> None:
        with self._lock:
            if watcher in self._watchers:
                self._watchers.remove(watcher)

    def _rv_now(self) -> int:
        with self._lock:
            return self._last_rv


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
