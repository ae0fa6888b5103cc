"""Live cluster state: list then watch each resource into a ClusterIndex, one direct GET on a cache miss.

One background thread per resource (greenlets under gunicorn's gevent worker, so none blocks the worker). A watch
resumes from its last resourceVersion when the server ends it normally; when it expires (410 Gone) or breaks, the
resource is listed again and replaces its kind wholesale, so an event missed while disconnected is never lost.
Retries back off exponentially (capped, jittered). Each gunicorn worker holds its own state, and accepts no
connection before `loaded()` (webhook/worker.py): its first lists, the policy ConfigMap's among them, have landed.

Lookups never wait for the API except on a miss of a PVC, PV, StorageClass, Node or the Velero ConfigMap: then
one GET with a short timeout (`lookup_timeout`, well under the webhook's `timeoutSeconds`). A 404 is a plain miss;
a timeout, connection error or error status raises `LookupFailed`, and the policy's `onLookupFailure` decides.
`pods_using_claim` and `nodes` never GET: once listed, the index is authoritative; before, they raise.
"""

from __future__ import annotations

import json
import logging
import random
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import urllib3
from kubernetes import client, config, watch
from kubernetes.client import ApiException

from rules.cluster import LookupFailed
from rules.model import Json
from rules.policy import POLICY_LABEL, Policy
from webhook import metrics
from webhook.runtime import Runtime
from webhook.state.apisource import ApiConfigError, api_source
from webhook.state.index import ClusterIndex, bulk_ingest
from webhook.state.lastgood import ReplicaPolicy
from webhook.state.reload import PolicyConfigMapSink, ProblemBoard, Sink, VeleroConfigMapSink

log = logging.getLogger(__name__)


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


def load_configuration(kubeconfig: Path | None = None) -> tuple[client.Configuration, str]:
    """The client's settings from the source `api_source` picks, and a description of it for the log."""
    configuration = client.Configuration()
    kind, path = api_source(kubeconfig)
    try:
        if kind == "in-cluster":
            config.load_incluster_config(client_configuration=configuration)  # type: ignore[no-untyped-call]
        else:  # a file, or $KUBECONFIG (possibly a list of files) left to the client to merge
            config_file = str(path) if path is not None else None
            config.load_kube_config(config_file=config_file, client_configuration=configuration)  # type: ignore[no-untyped-call]
    except (config.ConfigException, OSError, ValueError, TypeError) as exc:
        raise ApiConfigError(f"cannot load the Kubernetes API settings ({kind}): {exc}") from None
    configuration.retries = False  # one attempt per call: the lookup budget and the watch loop decide on retries
    configuration.connection_pool_maxsize = 16
    return configuration, f"{kind} {path}" if path is not None else kind


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


class IndexSink:
    """Feeds one kind of the index; remembers recent deletions so a slow GET cannot resurrect an object."""

    def __init__(self, index: ClusterIndex, kind: str, deleted: dict[tuple[str, str, str], float]) -> None:
        self.index, self.kind, self.deleted = index, kind, deleted

    def replace(self, objects: Iterable[Json]) -> None:
        self.index.replace_kind(self.kind, _cooperative(objects))  # replace_kind stamps the kind

    def apply(self, obj: Json) -> None:
        self.index.apply({**obj, "kind": self.kind})

    def remove(self, obj: Json) -> None:
        meta = obj.get("metadata") or {}
        now = time.monotonic()
        if len(self.deleted) > 1000:
            for key in [k for k, t in self.deleted.items() if now - t > 60]:
                self.deleted.pop(key, None)
        self.deleted[(self.kind, str(meta.get("namespace") or ""), str(meta.get("name") or ""))] = now
        self.index.remove({**obj, "kind": self.kind})


@dataclass
class _Listed:
    """What a paged list reports once consumed."""

    count: int = 0
    version: str = ""


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
        listed = _Listed()
        with bulk_ingest():
            self.sink.replace(self._pages(listed))
        self.synced = True
        self._contact()
        log.info("%s: listed %d", self.resource.name, listed.count)
        return listed.version

    def _pages(self, listed: _Listed) -> Iterator[Json]:
        token: str | None = None
        while True:
            response = self.resource.list_call(
                *self.resource.args,
                limit=self.options.page_size,
                _continue=token,
                _preload_content=False,
                _request_timeout=(self.options.connect_timeout, self.options.list_timeout),
                **self._call_kwargs(),
            )
            page = json.loads(response.data)
            items = page.get("items") or ()
            listed.count += len(items)
            yield from items
            meta = page.get("metadata") or {}
            token = meta.get("continue") or None
            if not token:
                listed.version = str(meta.get("resourceVersion") or "")
                return

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


def describe(exc: BaseException) -> str:
    """A short, operator-readable reason for an API failure."""
    if isinstance(exc, ApiException):
        return f"the API server answered {exc.status} {exc.reason or ''}".rstrip()
    if isinstance(exc, urllib3.exceptions.MaxRetryError) and exc.reason is not None:
        exc = exc.reason
    if isinstance(exc, urllib3.exceptions.NewConnectionError):  # before timeouts: urllib3 derives it from one
        return "cannot connect to the API server"
    if isinstance(exc, (urllib3.exceptions.TimeoutError, TimeoutError)):
        return "timed out"
    if isinstance(exc, urllib3.exceptions.ProtocolError):
        return "the connection broke"
    return f"{type(exc).__name__}: {exc}"[:200]


#: kind → (index lookup name, the GET call's name on its API, namespaced)
_GETTERS = {
    "PersistentVolumeClaim": ("core", "read_namespaced_persistent_volume_claim", True),
    "PersistentVolume": ("core", "read_persistent_volume", False),
    "StorageClass": ("storage", "read_storage_class", False),
    "Node": ("core", "read_node", False),
    "ConfigMap": ("core", "read_namespaced_config_map", True),
}


class LiveClusterState:
    """The ClusterView of a running webhook, fed by the API; `start()` begins listing and watching."""

    def __init__(self, configuration: client.Configuration, options: LiveOptions) -> None:
        self.options = options
        self.index = ClusterIndex()
        self.api = client.ApiClient(configuration)
        self.core = client.CoreV1Api(self.api)
        self.storage = client.StorageV1Api(self.api)
        self._deleted: dict[tuple[str, str, str], float] = {}
        self._lock = threading.Lock()
        self._started = False
        self._stopped = threading.Event()
        self.watches: dict[str, ResourceWatch] = {}
        for resource in self._resources():
            self.watches[resource.name] = ResourceWatch(
                resource, IndexSink(self.index, resource.kind, self._deleted), options
            )
        self._board: ProblemBoard | None = None
        self._velero: tuple[tuple[str, str], VeleroConfigMapSink, ResourceWatch] | None = None

    def _resources(self) -> list[Resource]:
        core, storage = self.core, self.storage
        return [
            Resource("pods", "Pod", core.list_pod_for_all_namespaces),
            Resource(
                "persistentvolumeclaims", "PersistentVolumeClaim", core.list_persistent_volume_claim_for_all_namespaces
            ),
            Resource("persistentvolumes", "PersistentVolume", core.list_persistent_volume),
            Resource("storageclasses", "StorageClass", storage.list_storage_class),
            Resource("nodes", "Node", core.list_node),
        ]

    # -- lifecycle -----------------------------------------------------------------------------------------

    def attach(self, runtime: Runtime, base: tuple[Policy, str], replica: ReplicaPolicy | None = None) -> None:
        """Reload the runtime's policy from the policy ConfigMap; register the readiness checks.

        Until the ConfigMap is read, the policy is what `replica` records as in effect in the other workers of
        this replica, or none (reviews get 503): the base policy applies only once the ConfigMap is known absent.
        """
        self._board = ProblemBoard(runtime)
        options = self.options
        if options.namespace and options.policy_configmap:
            sink = PolicyConfigMapSink(
                runtime,
                self._board,
                namespace=options.namespace,
                name=options.policy_configmap,
                base=base,
                on_policy=self._follow_policy,
                replica=replica,
            )
            sink.adopt()
            resource = Resource(
                "policy-configmap",
                "ConfigMap",
                self.core.list_namespaced_config_map,
                (options.namespace,),
                (("label_selector", f"{POLICY_LABEL}=true"),),
            )
            self.watches[resource.name] = ResourceWatch(resource, sink, options)
        else:
            log.warning("no namespace or policy ConfigMap name: the policy is not reloaded from the cluster")
        for name in self.watches:
            runtime.checks[name] = self._check(name)
        runtime.checks["velero-configmap"] = self._velero_readiness
        runtime.loaded_check = self.loaded
        if runtime.policy_missing is None:
            self._follow_policy(runtime.policy)

    def start(self) -> LiveClusterState:
        with self._lock:
            self._started = True
            for resource_watch in self.watches.values():
                resource_watch.start()
            if self._velero is not None:
                self._velero[2].start()
        threading.Thread(target=self._tick, name="cache-age", daemon=True).start()
        return self

    def stop(self, timeout: float = 2.0) -> None:
        self._stopped.set()
        with self._lock:
            watches = list(self.watches.values()) + ([self._velero[2]] if self._velero else [])
        for resource_watch in watches:
            resource_watch.stop()
        for resource_watch in watches:
            resource_watch.join(timeout)
        self.api.close()  # type: ignore[no-untyped-call]

    def loaded(self) -> bool:
        """Every resource, the policy ConfigMap and the Velero ConfigMap it names included, has been listed once."""
        with self._lock:
            watches = list(self.watches.values()) + ([self._velero[2]] if self._velero else [])
        return all(resource_watch.synced for resource_watch in watches)

    def readiness(self) -> dict[str, str | None]:
        states = {name: self._check(name)() for name in self.watches}
        states["velero-configmap"] = self._velero_readiness()
        return states

    def _check(self, name: str) -> Callable[[], str | None]:
        return lambda: self.watches[name].readiness()  # noqa: PLW0108 — the watch may be replaced

    def _velero_readiness(self) -> str | None:
        current = self._velero
        return current[2].readiness() if current is not None else None

    def _tick(self) -> None:
        while not self._stopped.wait(5.0):
            with self._lock:
                watches = list(self.watches.values()) + ([self._velero[2]] if self._velero else [])
            for resource_watch in watches:
                if resource_watch.last_contact:
                    metrics.CACHE_AGE.labels(resource_watch.resource.name).set(resource_watch.age())

    def _follow_policy(self, policy: Policy) -> None:
        """Watch the Velero ConfigMap the policy names (and only it); switch when the policy names another."""
        target = policy.load_affinity_source
        with self._lock:
            current = self._velero
            if current is not None and current[0] == target:
                return
            if current is not None:
                current[2].stop()
                current[1].forget()
                self._velero = None
            if target is None or self._board is None:
                return
            namespace, name = target
            sink = VeleroConfigMapSink(self.index, self._board, namespace, name)
            resource = Resource(
                "velero-configmap",
                "ConfigMap",
                self.core.list_namespaced_config_map,
                (namespace,),
                (("field_selector", f"metadata.name={name}"),),
            )
            resource_watch = ResourceWatch(resource, sink, self.options)
            self._velero = (target, sink, resource_watch)
            if self._started:
                resource_watch.start()
        log.info("following Velero's node-agent ConfigMap %s/%s", namespace, name)

    # -- ClusterView ---------------------------------------------------------------------------------------

    def pvc(self, namespace: str, name: str) -> Json | None:
        return self.index.pvc(namespace, name) or self._fetch("PersistentVolumeClaim", namespace, name)

    def pods_using_claim(self, namespace: str, claim: str) -> list[Json]:
        self._require("pods")
        return self.index.pods_using_claim(namespace, claim)

    def pv(self, name: str) -> Json | None:
        return self.index.pv(name) or self._fetch("PersistentVolume", "", name)

    def storage_class(self, name: str) -> Json | None:
        return self.index.storage_class(name) or self._fetch("StorageClass", "", name)

    def node(self, name: str) -> Json | None:
        return self.index.node(name) or self._fetch("Node", "", name)

    def nodes(self) -> Iterable[Json]:
        self._require("nodes")
        return self.index.nodes()

    def config_map(self, namespace: str, name: str) -> Json | None:
        hit = self.index.config_map(namespace, name)
        current = self._velero
        if hit is not None or current is None or current[0] != (namespace, name):
            return hit
        return self._fetch("ConfigMap", namespace, name, sink=current[1])

    def _require(self, name: str) -> None:
        state = self.watches[name]
        if not state.synced:
            raise LookupFailed(f"{name}: {state.readiness()}")

    def _fetch(self, kind: str, namespace: str, name: str, sink: Sink | None = None) -> Json | None:
        """One GET with the lookup timeout; the answer is cached (unless the watch knows better by now)."""
        api_name, method, namespaced = _GETTERS[kind]
        what = f"{kind} {namespace}/{name}" if namespaced else f"{kind} {name}"
        started = time.monotonic()
        call = getattr(self.core if api_name == "core" else self.storage, method)
        args = (name, namespace) if namespaced else (name,)
        try:
            response = call(*args, _preload_content=False, _request_timeout=self.options.lookup_timeout)
            obj = json.loads(response.data)
        except ApiException as exc:
            if exc.status == 404:
                return None
            raise LookupFailed(f"GET {what}: {describe(exc)}") from None
        except Exception as exc:  # a timeout, a refused connection, a garbled answer
            raise LookupFailed(f"GET {what} failed within {self.options.lookup_timeout:g}s: {describe(exc)}") from None
        cached = self._cached(kind, namespace, name)
        if cached is not None:
            return cached  # a watch event landed meanwhile: it is at least as new
        if self._deleted.get((kind, namespace, name), 0.0) >= started:
            return None  # deleted while the GET was in flight
        (sink or IndexSink(self.index, kind, self._deleted)).apply({**obj, "kind": kind})
        return self._cached(kind, namespace, name)

    def _cached(self, kind: str, namespace: str, name: str) -> Json | None:
        if kind == "PersistentVolumeClaim":
            return self.index.pvc(namespace, name)
        if kind == "ConfigMap":
            return self.index.config_map(namespace, name)
        lookup: Callable[[str], Json | None] = {
            "PersistentVolume": self.index.pv,
            "StorageClass": self.index.storage_class,
            "Node": self.index.node,
        }[kind]
        return lookup(name)
