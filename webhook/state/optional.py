"""API groups the webhook follows only while the cluster serves them: snapshot.storage.k8s.io (VolumeSnapshots and
their contents, for data sources), kubevirt.io (VirtualMachines, for CDI workers), cdi.kubevirt.io (DataVolumes,
named with their phase where a worker or a VM audit speaks of a disk) and gateway.networking.k8s.io
(ReferenceGrants, without which a data source in another namespace is not followed) and velero.io (DataUploads,
for backup pods of Velero's CSI data mover, listed and watched in Velero's namespace alone, as the policy names it,
and not at all while it names none: `follow_namespace`). Discovery runs at start and
then periodically; a group that appears is listed and watched like every other resource, one that is absent (or
goes away) turns its feature off with one log line and a readiness detail that stays "ok" — never an error or a
failed start: the rules then see no snapshot and no VM, which they treat as "unresolved" or "no VM".
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass

from kubernetes import client

from webhook.state.apierrors import describe
from webhook.state.index import ClusterIndex
from webhook.state.kinds import STATE_KINDS, StateKind
from webhook.state.watch import IndexSink, LiveOptions, RecentDeletions, Resource, ResourceWatch

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class OptionalGroup:
    group: str
    version: str
    resources: tuple[tuple[str, str], ...]  # (plural, kind)
    feature: str
    cluster_scoped: frozenset[str] = frozenset()  # the kinds listed cluster-wide even for one namespace
    in_velero_namespace: frozenset[str] = frozenset()  # the kinds listed in Velero's namespace alone


def _optional_groups() -> tuple[OptionalGroup, ...]:
    """The groups of the kinds webhook/state/kinds.py marks with a feature, in the list's order."""
    groups: dict[tuple[str, str], list[StateKind]] = {}
    for entry in STATE_KINDS:
        if entry.feature is not None:
            groups.setdefault((entry.group, entry.version), []).append(entry)
    return tuple(
        OptionalGroup(
            group,
            version,
            tuple((entry.plural, entry.kind) for entry in entries),
            str(entries[0].feature),
            frozenset(entry.kind for entry in entries if entry.all_namespaces),
            frozenset(entry.kind for entry in entries if entry.watched == "velero-namespace"),
        )
        for (group, version), entries in groups.items()
    )


OPTIONAL_GROUPS = _optional_groups()


class OptionalGroups:
    """The watches of the optional groups, started and stopped as discovery finds them served or not."""

    def __init__(
        self,
        api: client.ApiClient,
        index: ClusterIndex,
        deleted: RecentDeletions,
        options: LiveOptions,
    ) -> None:
        self.api, self.index, self.deleted, self.options = api, index, deleted, options
        self.custom = client.CustomObjectsApi(api)
        self._lock = threading.Lock()
        self._served: dict[str, bool | None] = {g.group: None for g in OPTIONAL_GROUPS}  # None: not known yet
        self._watches: dict[str, list[ResourceWatch]] = {}
        self._discovery_error: str | None = None
        self.answered = False  # a discovery has come back, served groups or an error: what loading waits for
        self._started = False
        self._stopped = False  # a discovery answered after stop() must not start watches nobody stops
        self._velero_namespace = ""  # where the kinds read in Velero's namespace alone are listed ("": nowhere)

    def discover(self) -> None:
        """Ask the API which groups it serves; follow the ones that appeared, drop the ones that went away."""
        try:
            answer = client.ApisApi(self.api).get_api_versions(_request_timeout=self.options.connect_timeout)
            served = {(g.name, v.version) for g in answer.groups or () for v in g.versions or ()}
        except Exception as exc:  # an API that cannot answer discovery: keep what we follow, retry later
            with self._lock:
                if self._discovery_error is None:
                    log.warning("API discovery failed, optional groups unchanged: %s", describe(exc))
                self._discovery_error = describe(exc)
                self.answered = True
            return
        with self._lock:
            if self._stopped:
                return
            self._discovery_error = None
            self.answered = True
            for group in OPTIONAL_GROUPS:
                now = (group.group, group.version) in served
                if now == self._served[group.group]:
                    continue
                self._served[group.group] = now
                if now:
                    log.info("API group %s/%s is served: %s on", group.group, group.version, group.feature)
                    self._follow(group)
                else:
                    log.info("API group %s/%s is not served: %s off", group.group, group.version, group.feature)
                    self._drop(group)

    def follow_namespace(self, namespace: str) -> None:
        """Velero's namespace as the policy names it ("": none): the kinds read there alone are listed and watched
        there from now on, what the index held of them from another namespace forgotten."""
        with self._lock:
            if namespace == self._velero_namespace or self._stopped:
                return
            self._velero_namespace = namespace
            for group in OPTIONAL_GROUPS:
                if group.in_velero_namespace and self._served[group.group]:
                    self._drop(group)
                    self._follow(group)

    def _follow(self, group: OptionalGroup) -> None:
        watches = []
        for plural, kind in group.resources:
            if kind in group.in_velero_namespace:
                if not self._velero_namespace:
                    continue
                namespaced = (group.group, group.version, self._velero_namespace, plural)
                resource = Resource(plural, kind, self.custom.list_namespaced_custom_object, namespaced)
            else:
                everywhere = (group.group, group.version, plural)
                resource = Resource(plural, kind, self.custom.list_cluster_custom_object, everywhere)
            watches.append(ResourceWatch(resource, IndexSink(self.index, kind, self.deleted), self.options))
        self._watches[group.group] = watches
        if self._started:
            for resource_watch in watches:
                resource_watch.start()

    def _drop(self, group: OptionalGroup) -> None:
        for resource_watch in self._watches.pop(group.group, ()):
            resource_watch.stop()
        for _, kind in group.resources:
            self.index.replace_kind(kind, ())

    def start(self) -> None:
        with self._lock:
            self._started = True
            for watches in self._watches.values():
                for resource_watch in watches:
                    resource_watch.start()

    def stop(self, timeout: float) -> None:
        with self._lock:
            self._stopped = True
            watches = [w for group in self._watches.values() for w in group]
        for resource_watch in watches:
            resource_watch.stop()
        for resource_watch in watches:
            resource_watch.join(timeout)

    def watches(self) -> list[ResourceWatch]:
        with self._lock:
            return [w for group in self._watches.values() for w in group]

    def check(self, group: OptionalGroup) -> Callable[[], str | None]:
        """The readiness of one group: its watches' state while served; "ok (...)" with why it is off, else."""

        def state() -> str | None:
            with self._lock:
                served, watches, error, namespace = (
                    self._served[group.group],
                    self._watches.get(group.group, []),
                    self._discovery_error,
                    self._velero_namespace,
                )
            if served and group.in_velero_namespace and not namespace:
                return f"ok (the policy names no Velero namespace: {group.feature} off)"
            if served:
                problems = [f"{w.resource.name}: {p}" for w in watches if (p := w.readiness())]
                return "; ".join(problems) or None
            if served is None:
                why = f"discovery failing: {error}" if error else "discovery pending"
                return f"ok ({why}; {group.feature} off until it answers)"
            return f"ok (not served: {group.feature} off)"

        return state
