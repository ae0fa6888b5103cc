"""The list+watch engine: one resource listed into a sink, then watched from the list's resourceVersion.

One background thread per resource (greenlets under gunicorn's gevent worker, so none blocks the worker). A watch
resumes from its last resourceVersion when the server ends it normally; when it expires (410 Gone) or breaks, the
resource is listed again and replaces its kind wholesale, so an event missed while disconnected is never lost.
Retries back off exponentially (capped, jittered).
"""

from __future__ import annotations

import json
import logging
import random
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import Any, Protocol

from kubernetes import watch
from kubernetes.client import ApiException

from rules import deadline
from rules.model import Json
from webhook import metrics
from webhook.state.apierrors import describe
from webhook.state.bounded import RequestLimits, RequestRefused, bounded_request
from webhook.state.index import ClusterIndex, bulk_ingest

log = logging.getLogger(__name__)


class Sink(Protocol):
    """Where a resource watch delivers: a full re-list, or one event."""

    def replace(self, objects: Iterable[Json]) -> None:
        """A full list, streamed page by page: the sink consumes it once, and nothing changes if it raises."""
        ...

    def apply(self, obj: Json) -> None: ...

    def remove(self, obj: Json) -> None: ...


@dataclass(frozen=True)
class LiveOptions:
    namespace: str
    policy_configmap: str = "storage-affinity-policy"
    lookup_timeout: float = 1.0
    connect_timeout: float = 5.0
    list_timeout: float = 60.0
    watch_timeout: int = 300  # the server ends a watch after this (jittered up to 2x, like client-go)
    page_size: int = 500
    backoff_base: float = 0.5
    backoff_cap: float = 30.0
    stale_after: float = 120.0  # a synced resource cut off from the API this long makes /readyz fail
    rediscover_every: float = 60.0  # how often the optional API groups (snapshots, KubeVirt) are looked for again


@dataclass(frozen=True)
class Resource:
    """One list+watch: `name` labels metrics and readiness."""

    name: str
    kind: str
    list_call: Callable[..., Any]
    args: tuple[str, ...] = ()
    selectors: tuple[tuple[str, str], ...] = ()


def _cooperative(objects: Iterable[Json]) -> Iterator[Json]:
    """Hand control back now and then while ingesting a big list, so a gevent worker keeps answering."""
    for i, obj in enumerate(objects):
        if i % 256 == 255:
            time.sleep(0)
        yield obj


class RecentDeletions:
    """When each object was deleted, for the last `keep` seconds, so that a GET answered after a deletion cannot
    resurrect the object. Kept in the order of deletion and pruned from the oldest: each deletion costs the same
    however many came before it (a namespace of 50,000 pods deleted at once is 50,000 of them). Shared by the
    watch threads."""

    def __init__(self, keep: float = 60.0) -> None:
        self.keep = keep
        self._when: OrderedDict[tuple[str, str, str], float] = OrderedDict()
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return len(self._when)

    def add(self, key: tuple[str, str, str], now: float) -> None:
        with self._lock:
            self._when[key] = now
            self._when.move_to_end(key)
            while self._when:
                oldest = next(iter(self._when.values()))
                if now - oldest <= self.keep:
                    break
                self._when.popitem(last=False)

    def deleted_at(self, key: tuple[str, str, str]) -> float:
        """When (time.monotonic) the object was deleted; 0.0 when it was not, within `keep` seconds of the latest
        deletion (older ones go when the next is added)."""
        return self._when.get(key, 0.0)


class IndexSink:
    """Feeds one kind of the index; remembers recent deletions so a slow GET cannot resurrect an object."""

    def __init__(self, index: ClusterIndex, kind: str, deleted: RecentDeletions) -> None:
        self.index, self.kind, self.deleted = index, kind, deleted

    def replace(self, objects: Iterable[Json]) -> None:
        self.index.replace_kind(self.kind, _cooperative(objects))  # replace_kind stamps the kind

    def apply(self, obj: Json) -> None:
        self.index.apply({**obj, "kind": self.kind})

    def remove(self, obj: Json) -> None:
        meta = obj.get("metadata") or {}
        key = (self.kind, str(meta.get("namespace") or ""), str(meta.get("name") or ""))
        self.deleted.add(key, time.monotonic())
        self.index.remove({**obj, "kind": self.kind})


@dataclass
class Listed:
    """What a paged list reports once consumed."""

    count: int = 0
    version: str = ""


class PageSizes:
    """Page sizes that keep a page near `budget` bytes: a page is decoded at once, without yielding, so its size
    bounds both the longest stretch a gevent worker spends on it and the memory it holds meanwhile. The first page
    asks for `first` objects; each next one for as many objects of the last page's average size as fit, from 1 to
    `most`."""

    def __init__(self, budget: int, first: int, most: int) -> None:
        self.budget, self.most = budget, most
        self.limit = first

    def saw(self, size: int, items: int) -> None:
        if items:
            self.limit = max(1, min(self.most, self.budget * items // max(size, 1)))


def list_pages(
    call: Callable[..., Any],
    *args: str,
    page_size: int | PageSizes,
    timeout: Any,
    listed: Listed | None = None,
    limits: RequestLimits | None = None,
    **kwargs: Any,
) -> Iterator[Json]:
    """The objects of a paged list as plain JSON (not the client's model classes), page by page, so a big list is
    never held whole; `listed` receives the count and the list's resourceVersion once it is consumed. `timeout` is
    each page's request timeout, or a function asked for it before each page (it may raise to stop the list);
    `page_size` a number of objects, or `PageSizes` that follow the bytes of each page. With `limits` (the command
    line's), each page is a `bounded_request` and the pages are counted: past `limits.max_pages`, RequestRefused."""
    token: str | None = None
    pages = empty = 0
    while True:
        page_timeout = timeout() if callable(timeout) else timeout
        limit = page_size.limit if isinstance(page_size, PageSizes) else page_size
        pages += 1
        if limits is not None and limits.max_pages is not None and pages > limits.max_pages:
            raise RequestRefused(f"more than {limits.max_pages} pages, more than was asked for")
        with deadline.paused():  # a review's or an audited object's wait on the API is not charged to it
            if limits is not None:
                data = bounded_request(call, *args, limits=limits, limit=limit, _continue=token, **kwargs)
            else:
                response = call(
                    *args, limit=limit, _continue=token, _preload_content=False, _request_timeout=page_timeout, **kwargs
                )
                data = response.data
        page = json.loads(data)
        items = page.get("items") or ()
        empty = 0 if items else empty + 1
        if limits is not None and empty > limits.max_empty_pages:
            raise RequestRefused(f"{empty} empty pages in a row, each asking for another")
        if isinstance(page_size, PageSizes):
            page_size.saw(len(data), len(items))
        if listed is not None:
            listed.count += len(items)
        yield from items
        meta = page.get("metadata") or {}
        token = meta.get("continue") or None
        if not token:
            if listed is not None:
                listed.version = str(meta.get("resourceVersion") or "")
            return


class _Gone(Exception):
    """The watch's resourceVersion is too old (410): list again."""


class ResourceWatch:
    """List, then watch from the list's resourceVersion; re-list on expiry or a broken stream, with backoff."""

    def __init__(self, resource: Resource, sink: Sink, options: LiveOptions) -> None:
        self.resource, self.sink, self.options = resource, sink, options
        self.synced = False  # the first list has landed
        self.connected = False
        self.last_error: str | None = None
        self.last_contact = 0.0
        self._down_since = time.monotonic()
        self._stop = threading.Event()
        self._progressed = False
        self._watch: watch.Watch | None = None
        self._thread = threading.Thread(target=self._run, name=f"watch-{resource.name}", daemon=True)
        metrics.CACHE_SYNCED.labels(resource.name).set(0)
        metrics.CACHE_AGE.labels(resource.name)  # the series exists before the first contact sets it

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        current = self._watch
        if current is not None:
            current.stop()  # type: ignore[no-untyped-call]

    def join(self, timeout: float) -> None:
        self._thread.join(timeout)

    def readiness(self) -> str | None:
        if not self.synced:
            if self.last_error:
                return f"not synced (initial list failing: {self.last_error})"
            return "not synced (initial list pending)"
        down = time.monotonic() - self._down_since
        if not self.connected and down > self.options.stale_after:
            return f"stale: cut off from the API for {down:.0f}s ({self.last_error})"
        return None

    def age(self) -> float:
        return time.monotonic() - self.last_contact if self.last_contact else float("inf")

    # -- the loop ------------------------------------------------------------------------------------------

    def _run(self) -> None:
        failures = 0
        while not self._stop.is_set():
            self._progressed = False
            try:
                self._watch_from(self._list())
                continue  # returns only when stopped
            except _Gone:
                reason, expired = "watch expired (410 Gone)", True
                log.info("%s: %s, listing again", self.resource.name, reason)
            except Exception as exc:  # whatever broke, the cure is a fresh list after a pause
                reason, expired = describe(exc), False
                if not self._stop.is_set():
                    log.warning("%s: %s, listing again", self.resource.name, reason)
            finally:
                self._watch = None
            self._disconnected(reason)
            # An expiry after a working watch is routine: list at once. Anything else backs off, growing
            # while nothing gets through.
            failures = 0 if expired and self._progressed else 1 if self._progressed else failures + 1
            if failures:
                self._stop.wait(self._backoff(failures))

    def _backoff(self, failures: int) -> float:
        ceiling: float = min(self.options.backoff_cap, self.options.backoff_base * 2 ** (failures - 1))
        return ceiling * random.uniform(0.5, 1.0)

    def _call_kwargs(self) -> dict[str, Any]:
        return dict(self.resource.selectors)

    def _list(self) -> str:
        """List page by page into the sink, so a big list is never held whole: only the trimmed index grows."""
        listed = Listed()
        with bulk_ingest():
            self.sink.replace(self._pages(listed))
        self.synced = True
        self._contact()
        log.info("%s: listed %d", self.resource.name, listed.count)
        return listed.version

    def _pages(self, listed: Listed) -> Iterator[Json]:
        yield from list_pages(
            self.resource.list_call,
            *self.resource.args,
            page_size=self.options.page_size,
            timeout=(self.options.connect_timeout, self.options.list_timeout),
            listed=listed,
            **self._call_kwargs(),
        )

    def _watch_from(self, version: str) -> None:
        """Watch until stopped (returns) or until expiry or breakage (raises)."""
        while not self._stop.is_set():
            timeout = int(self.options.watch_timeout * random.uniform(1.0, 2.0))
            self._watch = watch.Watch(return_type=object)  # type: ignore[no-untyped-call]
            stream = self._watch.stream(  # type: ignore[no-untyped-call]
                self.resource.list_call,
                *self.resource.args,
                resource_version=version,
                allow_watch_bookmarks=True,
                timeout_seconds=timeout,
                _request_timeout=(self.options.connect_timeout, timeout + 15),
                **self._call_kwargs(),
            )
            try:
                for event in stream:
                    version = self._deliver(event) or version
                    self._progressed = True
            except ApiException as exc:
                if exc.status == 410:
                    raise _Gone() from None
                raise
            # the server ended the watch normally: resume from the last version seen

    def _deliver(self, event: Json) -> str | None:
        kind, obj = event.get("type"), event.get("raw_object") or {}
        version = (obj.get("metadata") or {}).get("resourceVersion")
        if kind in ("ADDED", "MODIFIED"):
            self.sink.apply(obj)
        elif kind == "DELETED":
            self.sink.remove(obj)
        self._contact()
        return str(version) if version else None

    def _contact(self) -> None:
        self.last_contact = time.monotonic()
        if not self.connected:
            self.connected = True
            self.last_error = None
            metrics.CACHE_SYNCED.labels(self.resource.name).set(1)
        metrics.CACHE_AGE.labels(self.resource.name).set(0)

    def _disconnected(self, reason: str) -> None:
        if self.connected:
            self._down_since = time.monotonic()
        self.connected = False
        self.last_error = reason
        metrics.CACHE_SYNCED.labels(self.resource.name).set(0)
