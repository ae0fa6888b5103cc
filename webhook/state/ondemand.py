"""A ClusterView that reads from the API only what one review asks for, when it asks: `review --live`.

The server lists and watches the whole cluster (live.py); one review from a laptop must not. Each lookup is a GET
of the object named (a claim, its PV and StorageClass, a Node, a snapshot, a DataVolume) or the list of exactly what
the rule needs: the Nodes, the pods of the reviewed pod's namespace when a rule asks who holds a claim (never the
pods of every namespace), the Velero node-agent pods by their label, the VirtualMachines of one namespace, the PVs
when a snapshot names its source by CSI handle. Each answer lands in a ClusterIndex, trimmed exactly as the server's
watch trims it, and the rules read that: the same objects give the same answer as the server.

Every list is paged and bounded (`max_pages`, counted as pages, not objects: a server may send empty pages with a
`continue` token for ever), so a review costs a bounded number of calls whatever the cluster's size, and every
request is bounded in time from its start to its last byte (`timeout`) and in bytes (webhook/state/bounded.py), so
a server that trickles or floods its answers ends the review too. A failed call raises `LookupFailed` as the
server's lookups do, and is kept in `failures`: the command says the API failed, naming the call, rather than print
the fail-open answer a server would give.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable
from typing import Any

from kubernetes import client
from kubernetes.client import ApiException

from rules import deadline
from rules.cluster import LookupFailed
from rules.kube.nodeset import NodeSet
from rules.loadaffinity.agents import NODE_AGENT_LABEL, NodeAgents
from rules.loadaffinity.velero import config_problems
from rules.model import Json
from webhook.settings import CLI_REQUEST_TIMEOUT
from webhook.state.apierrors import describe
from webhook.state.bounded import RequestLimits, RequestRefused, bounded_request
from webhook.state.index import ClusterIndex
from webhook.state.kinds import STATE_KINDS
from webhook.state.watch import list_pages

USER_AGENT = "storage-affinity-webhook-review"
#: (group, version, plural) of the optional kinds, read as custom objects; a group the cluster does not serve is 404.
_CUSTOM = {e.kind: (e.group, e.version, e.plural) for e in STATE_KINDS if e.lister is None}


class OnDemandView:
    """`rules.cluster.ClusterView` over GETs and narrow lists, each made at most once per view."""

    def __init__(
        self, configuration: Any, *, timeout: float = CLI_REQUEST_TIMEOUT, page_size: int = 500, max_pages: int = 40
    ) -> None:
        self.api = client.ApiClient(configuration)
        self.api.user_agent = USER_AGENT
        self.core = client.CoreV1Api(self.api)
        self.storage = client.StorageV1Api(self.api)
        self.custom = client.CustomObjectsApi(self.api)
        self.timeout, self.page_size, self.max_pages = timeout, page_size, max_pages
        # one page more than the objects' bound: the one that shows there are more
        self.limits = RequestLimits(timeout, max_pages=max_pages + 1)
        self.index = ClusterIndex()
        self.failures: list[str] = []
        self._done: set[tuple[str, ...]] = set()

    def close(self) -> None:
        self.api.close()  # type: ignore[no-untyped-call]

    def read_config_map(self, namespace: str, name: str) -> Json | None:
        """A ConfigMap whole (labels and all, not trimmed): the policy ConfigMap, read as the server reads it."""
        try:
            return self._get(self.core.read_namespaced_config_map, name, namespace)[0]
        except ApiException as exc:
            if exc.status == 404:
                return None
            raise LookupFailed(f"GET ConfigMap {namespace}/{name}: {describe(exc)}") from None
        except RequestRefused as exc:
            raise LookupFailed(f"GET ConfigMap {namespace}/{name}: {exc}") from None
        except Exception as exc:
            raise LookupFailed(f"GET ConfigMap {namespace}/{name}: {describe(exc)}") from None

    # -- what is read, and how -------------------------------------------------------------------------------

    def _once(self, key: tuple[str, ...], what: str, read: Callable[[], Iterable[Json]], kind: str) -> None:
        """Read once under `key` and index what came (a 404 is nothing); a failure is LookupFailed."""
        if key in self._done:
            return
        try:
            objects = list(read())
        except ApiException as exc:
            if exc.status != 404:
                self._fail(f"{what}: {describe(exc)}")
            objects = []
        except LookupFailed as exc:
            self._fail(str(exc))
        except RequestRefused as exc:
            self._fail(f"{what}: {exc}")
        except Exception as exc:  # a timeout, a refused connection, a garbled answer
            self._fail(f"{what}: {describe(exc)}")
        self._done.add(key)
        for obj in objects:
            self.index.apply({**obj, "kind": kind})

    def _fail(self, why: str) -> None:
        self.failures.append(why)
        raise LookupFailed(why)

    def _get(self, call: Callable[..., Any], *args: str) -> list[Json]:
        with deadline.paused():  # the review's deadline is for its rules, not for the API server
            data = bounded_request(call, *args, limits=self.limits)
        return [json.loads(data)]

    def _list(self, what: str, call: Callable[..., Any], *args: str, label_selector: str = "") -> list[Json]:
        """Every page of a list, up to `max_pages` pages and their objects: more is LookupFailed (the review's cost
        stays bounded)."""
        out: list[Json] = []
        selectors: dict[str, Any] = {"label_selector": label_selector} if label_selector else {}
        pages = list_pages(call, *args, page_size=self.page_size, timeout=self.timeout, limits=self.limits, **selectors)
        for obj in pages:
            if len(out) >= self.page_size * self.max_pages:
                raise LookupFailed(f"{what}: more than {len(out)} objects, more than one review reads")
            out.append(obj)
        return out

    def _object(self, kind: str, call: Callable[..., Any], name: str, namespace: str | None = None) -> None:
        args = (name,) if namespace is None else (name, namespace)
        where = f"{namespace}/{name}" if namespace is not None else name
        self._once((kind, namespace or "", name), f"GET {kind} {where}", lambda: self._get(call, *args), kind)

    def _custom(self, kind: str, namespace: str | None, name: str | None) -> None:
        group, version, plural = _CUSTOM[kind]
        if name is None:
            assert namespace is not None
            what = f"list {plural} in {namespace}"
            call: Callable[[], list[Json]] = lambda: self._list(  # noqa: E731
                what, self.custom.list_namespaced_custom_object, group, version, namespace, plural
            )
        elif namespace is None:
            what = f"GET {kind} {name}"
            call = lambda: self._get(self.custom.get_cluster_custom_object, group, version, plural, name)  # noqa: E731
        else:
            what = f"GET {kind} {namespace}/{name}"
            call = lambda: self._get(  # noqa: E731
                self.custom.get_namespaced_custom_object, group, version, namespace, plural, name
            )
        self._once((kind, namespace or "", name or "*"), what, call, kind)

    # -- ClusterView -----------------------------------------------------------------------------------------

    def pvc(self, namespace: str, name: str) -> Json | None:
        self._object("PersistentVolumeClaim", self.core.read_namespaced_persistent_volume_claim, name, namespace)
        return self.index.pvc(namespace, name)

    def pods_using_claim(self, namespace: str, claim: str) -> list[Json]:
        what = f"list pods in {namespace}"
        self._once(("Pod", namespace), what, lambda: self._list(what, self.core.list_namespaced_pod, namespace), "Pod")
        return self.index.pods_using_claim(namespace, claim)

    def pv(self, name: str) -> Json | None:
        if ("PersistentVolume", "*") not in self._done:
            self._object("PersistentVolume", self.core.read_persistent_volume, name)
        return self.index.pv(name)

    def storage_class(self, name: str) -> Json | None:
        self._object("StorageClass", self.storage.read_storage_class, name)
        return self.index.storage_class(name)

    def node(self, name: str) -> Json | None:
        if ("Node", "*") not in self._done:
            self._object("Node", self.core.read_node, name)
        return self.index.node(name)

    def nodes(self) -> Iterable[Json]:
        self._once(("Node", "*"), "list nodes", lambda: self._list("list nodes", self.core.list_node), "Node")
        return self.index.nodes()

    def node_set(self) -> NodeSet:
        self.nodes()
        return self.index.node_set()

    def node_agents(self, namespace: str) -> NodeAgents:
        label = "=".join(NODE_AGENT_LABEL)
        what = f"list pods labelled {label} in {namespace}"
        self._once(
            ("node-agents", namespace),
            what,
            lambda: self._list(what, self.core.list_namespaced_pod, namespace, label_selector=label),
            "Pod",
        )
        return self.index.node_agents(namespace)

    def config_map(self, namespace: str, name: str) -> Json | None:
        """A ConfigMap as the server holds Velero's: only while it is valid (the server refuses a broken one)."""
        self._object("ConfigMap", self.core.read_namespaced_config_map, name, namespace)
        found = self.index.config_map(namespace, name)
        return found if found is not None and not config_problems(found)[0] else None

    def volume_snapshot(self, namespace: str, name: str) -> Json | None:
        self._custom("VolumeSnapshot", namespace, name)
        return self.index.volume_snapshot(namespace, name)

    def volume_snapshot_content(self, name: str) -> Json | None:
        self._custom("VolumeSnapshotContent", None, name)
        return self.index.volume_snapshot_content(name)

    def pv_for_handle(self, driver: str, handle: str) -> Json | None:
        what = "list persistentvolumes"
        self._once(
            ("PersistentVolume", "*"),
            what,
            lambda: self._list(what, self.core.list_persistent_volume),
            "PersistentVolume",
        )
        return self.index.pv_for_handle(driver, handle)

    def virtual_machines_using(self, namespace: str, claim: str) -> list[Json]:
        self._custom("VirtualMachine", namespace, None)
        return self.index.virtual_machines_using(namespace, claim)

    def data_volume(self, namespace: str, name: str) -> Json | None:
        self._custom("DataVolume", namespace, name)
        return self.index.data_volume(namespace, name)

    def reference_grants(self, namespace: str) -> list[Json]:
        self._custom("ReferenceGrant", namespace, None)
        return self.index.reference_grants(namespace)

    def replication_destination(self, namespace: str, name: str) -> Json | None:
        self._custom("ReplicationDestination", namespace, name)
        return self.index.replication_destination(namespace, name)

    def data_upload(self, namespace: str, name: str) -> Json | None:
        self._custom("DataUpload", namespace, name)
        return self.index.data_upload(namespace, name)
