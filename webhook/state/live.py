"""Live cluster state: list then watch each resource into a ClusterIndex, a bounded direct GET on a cache miss.

The list+watch engine is webhook/state/watch.py; this module is the view over its index and what it follows: the
policy ConfigMap and the Velero ConfigMap the policy names, each watched in its namespace with a field selector
on its name, so that namespaced Roles naming those two ConfigMaps are all the server needs to read them. Each
gunicorn worker holds its own state, and accepts no connection before `loaded()` (webhook/serving/worker.py): its
first lists, the policy ConfigMap's among them, have landed, and so has the first API discovery with the lists of
the optional groups it found served.

Lookups never wait for the API except on a miss of a PVC, PV, StorageClass, Node or the Velero ConfigMap: then
one GET with a short timeout (`lookup_timeout`, well under the webhook's `timeoutSeconds`), for an object created
a moment ago whose watch event has not arrived. A 404 is a plain miss, remembered for MISS_TTL seconds; a timeout,
connection error or error status raises `LookupFailed`, and the policy's `onLookupFailure` decides.
`pods_using_claim` and `nodes` never GET: once listed, the index is authoritative; before, they raise.

The GETs are bounded, whatever names an object carries: a review (webhook/state/lookups.py `review_lookups()`,
entered by the endpoints) makes at most REVIEW_GETS; past them, or outside a review (the audit), a synced index is
the answer, and an unsynced one raises `LookupFailed` within a review.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from kubernetes import client
from kubernetes.client import ApiException

from rules import deadline
from rules.cluster import LookupFailed
from rules.datasource.exposer import data_mover_namespace
from rules.kube.nodeset import NodeSet
from rules.loadaffinity.agents import NodeAgents
from rules.model import Json
from rules.policy import POLICY_LABEL, Policy
from webhook import metrics
from webhook.policy.lastgood import ReplicaPolicy
from webhook.policy.reload import PolicyConfigMapSink, ProblemBoard, VeleroConfigMapSink
from webhook.runtime import Runtime
from webhook.state.apierrors import describe
from webhook.state.index import ClusterIndex
from webhook.state.kinds import BY_KIND, STATE_KINDS, StateKind
from webhook.state.lookups import Misses, current_review, review_lookups
from webhook.state.optional import OPTIONAL_GROUPS, OptionalGroups
from webhook.state.watch import IndexSink, LiveOptions, RecentDeletions, Resource, ResourceWatch, Sink

log = logging.getLogger(__name__)


#: The kinds listed and watched cluster-wide through the typed clients (the optional groups' are in optional.py).
_WATCHED = tuple(entry for entry in STATE_KINDS if entry.watched == "cluster" and entry.feature is None)
#: kind → the watch whose index answers its misses once synced (the Velero ConfigMap has its own, followed)
_WATCH_OF = {entry.kind: entry.plural for entry in _WATCHED if entry.getter}


@dataclass(frozen=True)
class FollowedConfigMap:
    """The Velero ConfigMap the policy names: where it is, the sink that indexes it, the watch that feeds it."""

    source: tuple[str, str]  # (namespace, name)
    sink: VeleroConfigMapSink
    watch: ResourceWatch


class LiveClusterState:
    """The ClusterView of a running webhook, fed by the API; `start()` begins listing and watching."""

    def __init__(self, configuration: client.Configuration, options: LiveOptions) -> None:
        self.options = options
        self.index = ClusterIndex()
        self.api = client.ApiClient(configuration)
        self.core = client.CoreV1Api(self.api)
        self._clients: dict[str, Any] = {"CoreV1Api": self.core}
        self._deleted = RecentDeletions()
        self._misses = Misses()
        self._lock = threading.Lock()
        self._started = False
        self._stopped = threading.Event()
        self.watches: dict[str, ResourceWatch] = {}
        for resource in self._resources():
            self.watches[resource.name] = ResourceWatch(
                resource, IndexSink(self.index, resource.kind, self._deleted), options
            )
        self.optional = OptionalGroups(self.api, self.index, self._deleted, options)
        self._board: ProblemBoard | None = None
        self._velero: FollowedConfigMap | None = None

    def _resources(self) -> list[Resource]:
        return [
            Resource(entry.plural, entry.kind, getattr(self._client(entry), str(entry.lister))) for entry in _WATCHED
        ]

    def _client(self, entry: StateKind) -> Any:
        """The typed client of a kind's group (kinds.py names it), one per class."""
        if entry.client not in self._clients:
            self._clients[entry.client] = getattr(client, entry.client)(self.api)
        return self._clients[entry.client]

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
            # By name in its namespace: what a Role limited to that one ConfigMap allows (RBAC authorizes a list or
            # watch by resourceNames only with this field selector).
            resource = Resource(
                "policy-configmap",
                "ConfigMap",
                self.core.list_namespaced_config_map,
                (options.namespace,),
                (
                    ("label_selector", f"{POLICY_LABEL}=true"),
                    ("field_selector", f"metadata.name={options.policy_configmap}"),
                ),
            )
            self.watches[resource.name] = ResourceWatch(resource, sink, options)
        else:
            log.warning("no namespace or policy ConfigMap name: the policy is not reloaded from the cluster")
        for name in self.watches:
            runtime.checks[name] = self._check(name)
        runtime.checks["velero-configmap"] = self._velero_readiness
        for group in OPTIONAL_GROUPS:
            runtime.checks[group.group] = self.optional.check(group)
        runtime.loaded_check = self.loaded
        runtime.review_scope = review_lookups
        if runtime.policy_missing is None:
            self._follow_policy(runtime.policy)

    def start(self) -> LiveClusterState:
        with self._lock:
            self._started = True
            for resource_watch in self.watches.values():
                resource_watch.start()
            if self._velero is not None:
                self._velero.watch.start()
        self.optional.start()  # its watches start as discovery (in the tick thread) finds their groups
        threading.Thread(target=self._tick, name="cache-age", daemon=True).start()
        return self

    def stop(self, timeout: float = 2.0) -> None:
        self._stopped.set()
        watches = self._core_watches()
        for resource_watch in watches:
            resource_watch.stop()
        for resource_watch in watches:
            resource_watch.join(timeout)
        self.optional.stop(timeout)
        self.api.close()  # type: ignore[no-untyped-call]

    def loaded(self) -> bool:
        """Every resource, the policy ConfigMap and the Velero ConfigMap it names included, has been listed once,
        and discovery has answered once (an error counts: the optional groups then stay off, readiness says why),
        so a served group's objects are listed before the first review that would place a pod from them."""
        if not self.optional.answered:
            return False
        return all(resource_watch.synced for resource_watch in self._core_watches() + self.optional.watches())

    def _core_watches(self) -> list[ResourceWatch]:
        """The watches every server holds: its resources and the Velero ConfigMap the policy names."""
        with self._lock:
            return list(self.watches.values()) + ([self._velero.watch] if self._velero else [])

    def _check(self, name: str) -> Callable[[], str | None]:
        return lambda: self.watches[name].readiness()  # noqa: PLW0108 — the watch may be replaced

    def _velero_readiness(self) -> str | None:
        current = self._velero
        return current.watch.readiness() if current is not None else None

    def _tick(self) -> None:
        self.optional.discover()
        discovered = time.monotonic()
        while not self._stopped.wait(min(5.0, self.options.rediscover_every)):
            if time.monotonic() - discovered >= self.options.rediscover_every:
                self.optional.discover()
                discovered = time.monotonic()
            for resource_watch in self._core_watches() + self.optional.watches():
                if resource_watch.last_contact:
                    metrics.CACHE_AGE.labels(resource_watch.resource.name).set(resource_watch.age())

    def _follow_policy(self, policy: Policy) -> None:
        """Watch the Velero ConfigMap the policy names (and only it); switch when the policy names another. The
        kinds read in Velero's namespace alone follow the namespace the policy names."""
        self.optional.follow_namespace(data_mover_namespace(policy))
        target = policy.load_affinity_source
        with self._lock:
            current = self._velero
            if current is not None and current.source == target:
                return
            if current is not None:
                current.watch.stop()
                current.sink.forget()
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
            self._velero = FollowedConfigMap(target, sink, resource_watch)
            if self._started:
                resource_watch.start()
        log.info("following Velero's node-agent ConfigMap %s/%s", namespace, name)

    def objects(self, kind: str) -> list[Json]:
        """What the index holds of a kind (the audit reads it; no API call)."""
        return self.index.objects(kind)

    # -- ClusterView ---------------------------------------------------------------------------------------

    def pvc(self, namespace: str, name: str) -> Json | None:
        return self.index.pvc(namespace, name) or self._miss("PersistentVolumeClaim", namespace, name)

    def pods_using_claim(self, namespace: str, claim: str) -> list[Json]:
        self._require("pods")
        return self.index.pods_using_claim(namespace, claim)

    def pv(self, name: str) -> Json | None:
        return self.index.pv(name) or self._miss("PersistentVolume", "", name)

    def storage_class(self, name: str) -> Json | None:
        return self.index.storage_class(name) or self._miss("StorageClass", "", name)

    def node(self, name: str) -> Json | None:
        return self.index.node(name) or self._miss("Node", "", name)

    def nodes(self) -> Iterable[Json]:
        self._require("nodes")
        return self.index.nodes()

    def node_set(self) -> NodeSet:
        self._require("nodes")
        return self.index.node_set()

    def node_agents(self, namespace: str) -> NodeAgents:
        self._require("pods")  # node-agent pods come from the same pod list and watch as every other pod
        return self.index.node_agents(namespace)

    def config_map(self, namespace: str, name: str) -> Json | None:
        hit = self.index.config_map(namespace, name)
        current = self._velero
        if hit is not None or current is None or current.source != (namespace, name):
            return hit
        return self._miss("ConfigMap", namespace, name, sink=current.sink)

    def _require(self, name: str) -> None:
        state = self.watches[name]
        if not state.synced:
            raise LookupFailed(f"{name}: {state.readiness()}")

    def _miss(self, kind: str, namespace: str, name: str, sink: Sink | None = None) -> Json | None:
        """An object the index lacks: absent if a GET said so lately; else fetched while the review has GETs
        left (and always before the kind's first list, outside a review); else the synced index is the answer."""
        key = (kind, namespace, name)
        if self._misses.known(key):
            return None
        gets = current_review()
        if gets is not None and gets.take():
            return self._fetch(kind, namespace, name, sink)
        if self._synced(kind):
            return None
        if gets is None:
            return self._fetch(kind, namespace, name, sink)
        raise LookupFailed(
            f"{_what(kind, namespace, name)}: not listed yet, and this review has made its {gets.limit} GETs"
        )

    def _synced(self, kind: str) -> bool:
        followed = self._velero
        watch = (
            followed.watch
            if kind == "ConfigMap" and followed is not None
            else self.watches.get(_WATCH_OF.get(kind, ""))
        )
        return watch is not None and watch.synced

    def _fetch(self, kind: str, namespace: str, name: str, sink: Sink | None = None) -> Json | None:
        """One GET with the lookup timeout; the answer is cached (unless the watch knows better by now)."""
        entry = BY_KIND[kind]
        what = _what(kind, namespace, name)
        started = time.monotonic()
        call = getattr(self._client(entry), str(entry.getter))
        args = (name, namespace) if entry.namespaced else (name,)
        try:
            with deadline.paused():  # the review's deadline is for its rules, not for the API server
                data = call(*args, _preload_content=False, _request_timeout=self.options.lookup_timeout).data
            obj = json.loads(data)
        except ApiException as exc:
            if exc.status == 404:
                self._misses.add((kind, namespace, name))
                return None
            raise LookupFailed(f"GET {what}: {describe(exc)}") from None
        except Exception as exc:  # a timeout, a refused connection, a garbled answer
            raise LookupFailed(f"GET {what} failed within {self.options.lookup_timeout:g}s: {describe(exc)}") from None
        cached = self.index.get(kind, namespace, name)
        if cached is not None:
            return cached  # a watch event landed meanwhile: it is at least as new
        if self._deleted.deleted_at((kind, namespace, name)) >= started:
            return None  # deleted while the GET was in flight
        (sink or IndexSink(self.index, kind, self._deleted)).apply({**obj, "kind": kind})
        return self.index.get(kind, namespace, name)

    # -- data sources and VMs: from the index only (no GET on a miss: a source not seen yet is "unresolved") ----

    def volume_snapshot(self, namespace: str, name: str) -> Json | None:
        return self.index.volume_snapshot(namespace, name)

    def volume_snapshot_content(self, name: str) -> Json | None:
        return self.index.volume_snapshot_content(name)

    def pv_for_handle(self, driver: str, handle: str) -> Json | None:
        return self.index.pv_for_handle(driver, handle)

    def virtual_machines_using(self, namespace: str, claim: str) -> list[Json]:
        return self.index.virtual_machines_using(namespace, claim)

    def data_volume(self, namespace: str, name: str) -> Json | None:
        return self.index.data_volume(namespace, name)

    def reference_grants(self, namespace: str) -> list[Json]:
        return self.index.reference_grants(namespace)

    def replication_destination(self, namespace: str, name: str) -> Json | None:
        return self.index.replication_destination(namespace, name)

    def data_upload(self, namespace: str, name: str) -> Json | None:
        return self.index.data_upload(namespace, name)


def _what(kind: str, namespace: str, name: str) -> str:
    return f"{kind} {namespace}/{name}" if BY_KIND[kind].namespaced else f"{kind} {name}"
