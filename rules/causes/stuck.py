"""A stuck storage pod and the facts its causes are read from: the cause a pod gets, the table's entries, and the
facts several tiers share (its claims' holders, its node-local sources, why each candidate node is unusable)."""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from rules import deadline
from rules.cluster import ClusterView, LookupFailed
from rules.context import PodTarget
from rules.coscheduling.claimpods import Hold, claim_hold, name_of, parse_time
from rules.datasource.exposer import upload_source
from rules.datasource.scope import cdi_worker
from rules.datasource.sources import NODE, SourcePlace, source_places
from rules.kube.conditions import condition
from rules.kube.disclosed import disclosed_spec
from rules.kube.feasible import Feasibility, on_labels
from rules.kube.nodeaffinity import required_terms
from rules.kube.tolerations import untolerated_taint
from rules.kube.volumes import OWNED, SINGLE_POD, ClaimVolume, node_local_terms
from rules.model import Json
from rules.policy import ROLES, Policy
from rules.quoting import ShownText


@dataclass(frozen=True)
class StuckCause(ShownText):
    """`code` is stable (CamelCase, e.g. `MultiAttach`); `message` says what holds the pod, naming objects and
    nodes; `remedy` says what an operator does about it, in one line. Escaped when made (`ShownText`): the
    message quotes names and what the scheduler or the kubelet wrote."""

    code: str
    message: str
    remedy: str

    def as_json(self) -> Json:
        return {"code": self.code, "message": self.message, "remedy": self.remedy}


#: The role the audit gives CDI's importer, upload and clone-source pods, which have no policy role.
CDI_WORKER = "cdi-worker"


def storage_role(target: PodTarget) -> str:
    """The role under which the audit explains this pod when it is stuck: its policy role (mover, backup,
    restore), or `cdi-worker` for a CDI worker pod not left alone; "" for any other pod. The one test of
    "storage pod" every caller uses."""
    role = target.role.role
    if role is not None and role in ROLES:
        return role
    if target.role.exempt or target.role.unplaced or cdi_worker(target.metadata) is None:
        return ""
    return CDI_WORKER


def stuck_seconds(pod: Mapping[str, Any], now: datetime) -> float | None:
    """How long the pod has been Pending, or Running without being Ready; None when it is neither or when no
    timestamp tells since when (a pod without one cannot be proved stuck)."""
    status = pod.get("status") or {}
    phase = status.get("phase") or "Pending"
    created = parse_time((pod.get("metadata") or {}).get("creationTimestamp"))
    if phase == "Pending":
        since = created
    elif phase == "Running":
        ready = condition(pod, "Ready")
        if ready is None or ready.get("status") == "True":
            return None
        since = parse_time(ready.get("lastTransitionTime")) or created
    else:
        return None
    return None if since is None else max(0.0, (now - since).total_seconds())


def duration(seconds: float) -> str:
    """A wait as people say it: minutes up to two hours, hours up to two days, then days."""
    minutes = int(seconds // 60)
    if minutes < 120:
        return f"{minutes} min"
    return f"{minutes // 60} h" if minutes < 48 * 60 else f"{minutes // (24 * 60)} d"


@dataclass
class Stuck:
    """A stuck storage pod and the cluster state its cause is read from; the facts several causes share are
    computed once, on first use."""

    pod: Json
    target: PodTarget
    view: ClusterView
    policy: Policy
    seconds: float

    @functools.cached_property
    def spec(self) -> Mapping[str, Any]:
        """The pod's spec, its node constraints read on the labels its author may know (a cause reaches the
        namespace's policy report)."""
        return disclosed_spec(self.pod.get("spec") or {}, self.policy.disclosed_node_labels)

    @property
    def node_name(self) -> str:
        return str(self.spec.get("nodeName") or "")

    @functools.cached_property
    def volumes(self) -> list[ClaimVolume]:
        return self.target.volumes(self.view)

    @functools.cached_property
    def holds(self) -> list[Hold]:
        """Who else mounts each ReadWriteOnce and ReadWriteOncePod claim of the pod."""
        holds = []
        for volume in self.volumes:
            deadline.check()
            if volume.access in (OWNED, SINGLE_POD) and volume.claim:
                holds.append(claim_hold(self.view, self.policy, self.target, volume))
        return holds

    @functools.cached_property
    def source_nodes(self) -> list[SourcePlace]:
        """The pod's claims whose node-local snapshot or clone source ties them to one node
        (rules/datasource/sources.py)."""
        upload = upload_source(self.view, self.policy, self.target)
        places = source_places(self.view, self.policy, self.target.namespace, self.volumes, upload)
        return [p for p in places if p.kind == NODE]

    def where(self, *, volumes: bool) -> Feasibility:
        """The nodes the pod's own nodeSelector and required node affinity allow, with its node-local PVs'
        (`volumes`) or without, on the labels its author may know; taints and cordon are the causes' to tell
        (`unusable`), so they are not counted. Its node, when it has one, is asked apart."""
        filters = on_labels(self.policy.disclosed_node_labels, volumes=volumes)
        own = self.pod.get("spec") or {}  # as written: Feasibility reads it on `filters.labels` itself
        return Feasibility(
            self.view,
            filters,
            selector=own.get("nodeSelector"),
            terms=required_terms(own),
            volume_terms=node_local_terms(self.volumes) if volumes else (),
        )

    @functools.cached_property
    def own(self) -> Feasibility:
        """`where` without the PVs: the pod's own constraints alone."""
        return self.where(volumes=False)

    def candidates(self) -> Iterator[Json]:
        """The nodes the pod could run on by its own constraints and its volumes' topology: its node when it has
        one, else every node that passes its nodeSelector, required node affinity and node-local PVs."""
        if self.node_name:
            node = self.view.node(self.node_name)
            return iter([node] if node is not None else [])
        return self.where(volumes=True).nodes()

    @functools.cached_property
    def unusable(self) -> dict[str, tuple[str, str]] | None:
        """Why each candidate node cannot take the pod, by node name: (cause code, what is wrong); None when
        there is no candidate or one of them can."""
        found: dict[str, tuple[str, str]] = {}
        for node in self.candidates():
            deadline.check()
            why = unusable(node, self.spec, scheduled=bool(self.node_name))
            if why is None:
                return None  # the first usable node settles it
            found[name_of(node)] = why
        return dict(sorted(found.items())) or None


@dataclass(frozen=True)
class Cause:
    """One entry of the cause table: `detect` says what holds the pod, or None when this is not why."""

    code: str
    meaning: str
    remedy: str
    detect: Callable[[Stuck], str | None]

    def judge(self, stuck: Stuck) -> StuckCause | None:
        message = self.detect(stuck)
        return None if message is None else StuckCause(self.code, message, self.remedy)


def first_cause(table: Sequence[Cause], stuck: Stuck) -> StuckCause:
    """The first cause of a table that holds; a table ends with one that always does. A cause whose state cannot
    be read (`LookupFailed`) is not proved, and the next one is tried."""
    for cause in table:
        deadline.check()
        try:
            found = cause.judge(stuck)
        except LookupFailed:
            continue
        if found is not None:
            return found
    raise AssertionError("a cause table ends with a cause that always holds")


NODE_NOT_READY, NODE_CORDONED, NODE_TAINTED = "NodeNotReady", "NodeCordoned", "NodeTainted"


def unusable(node: Mapping[str, Any], spec: Mapping[str, Any], *, scheduled: bool) -> tuple[str, str] | None:
    """Why the node cannot run the pod, or None. A pod with a node already bypasses the scheduler: only a
    NotReady node (no kubelet to start it) keeps it then."""
    ready = condition(node, "Ready")
    if ready is not None and ready.get("status") != "True":
        return NODE_NOT_READY, f"is NotReady ({ready.get('reason') or 'status ' + str(ready.get('status'))})"
    if scheduled:
        return None
    if (node.get("spec") or {}).get("unschedulable"):
        return NODE_CORDONED, "is cordoned"
    taint = untolerated_taint(spec.get("tolerations") or (), node)
    if taint is not None:
        shown = f"{taint.get('key')}={taint['value']}" if taint.get("value") else str(taint.get("key"))
        return NODE_TAINTED, f"has taint {shown}:{taint.get('effect')}, which the pod does not tolerate"
    return None
