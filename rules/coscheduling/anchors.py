"""Who holds a mover's claims, and on which node: the analysis shared by the mutating rule and the validating
rule, so both always reach the same verdict from the same state (docs/design.md#4-co-scheduling-movers).
"""

from __future__ import annotations

import functools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from rules.annotations import CO_SCHEDULE_WITH
from rules.cluster import ClusterView
from rules.context import PodTarget
from rules.kube.volumes import OWNED, SINGLE_POD, ClaimVolume
from rules.memo import Memo
from rules.model import Json, Severity
from rules.policy import Policy
from rules.roles import classify
from rules.suggest import unknown_field

FINISHED = ("Succeeded", "Failed")
_LAST = datetime.max.replace(tzinfo=UTC)
COPY_METHOD_HINT = "copy it from a snapshot or a clone instead (copyMethod: Snapshot or Clone in the ReplicationSource)"


@dataclass(frozen=True)
class Hold:
    """One owned or single-pod claim of the mover and the other pods that mount it."""

    volume: ClaimVolume
    users: tuple[
        Json, ...
    ]  # docs/design.md#4-co-scheduling-movers users: not the mover itself, not movers, not finished, not terminating
    holders: tuple[Json, ...]  # any other live pod with the volume mounted or about to be (Running or on a node)
    anchor: Json | None
    running_nodes: tuple[str, ...]  # distinct nodes of Running users, sorted

    @property
    def claim(self) -> str:
        return self.volume.claim or ""

    @property
    def node(self) -> str | None:
        return node_of(self.anchor) if self.anchor else None

    @property
    def split(self) -> bool:
        return len(self.running_nodes) > 1


@dataclass(frozen=True)
class Problem:
    """Why the mover cannot be co-scheduled; the validating rule reports it, the mutating rule warns."""

    field: str
    message: str
    severity: Severity
    kind: str  # single-pod | split | two-nodes | annotation


@dataclass
class Plan:
    volumes: list[ClaimVolume] = field(default_factory=list)  # every claim volume of the pod
    holds: list[Hold] = field(default_factory=list)
    problems: list[Problem] = field(default_factory=list)
    #: The hold whose anchor names the decision (the first anchored claim in volume order), if any.
    lead: Hold | None = None
    #: Why nothing is to be done, when there is no anchor and no problem.
    idle: str = ""

    @property
    def node(self) -> str | None:
        return None if self.problems or self.lead is None else self.lead.node

    @property
    def anchored(self) -> list[Hold]:
        return [h for h in self.holds if h.anchor is not None]


def name_of(pod: Mapping[str, Any]) -> str:
    return str((pod.get("metadata") or {}).get("name") or "")


def node_of(pod: Mapping[str, Any]) -> str | None:
    node = (pod.get("spec") or {}).get("nodeName")
    return str(node) if node else None


def phase_of(pod: Mapping[str, Any]) -> str:
    """A pod just created has no status yet: it is Pending."""
    return str((pod.get("status") or {}).get("phase") or "Pending")


def live(pod: Mapping[str, Any]) -> bool:
    return phase_of(pod) not in FINISHED and not (pod.get("metadata") or {}).get("deletionTimestamp")


def age_key(pod: Mapping[str, Any]) -> tuple[bool, datetime, str]:
    """Oldest first, then by name; pods without a readable creationTimestamp sort last."""
    stamp = (pod.get("metadata") or {}).get("creationTimestamp")
    when = _parsed(str(stamp)) if stamp else None
    return (when is None, when or _LAST, name_of(pod))


def parse_time(stamp: object) -> datetime | None:
    """A Kubernetes timestamp (RFC 3339) as an aware datetime; None when missing or unreadable."""
    return _parsed(str(stamp)) if stamp else None


@functools.lru_cache(maxsize=4096)  # a claim's holders are compared again for every mover of the claim
def _parsed(stamp: str) -> datetime | None:
    try:
        when = datetime.fromisoformat(stamp)
    except ValueError:
        return None
    return when.replace(tzinfo=UTC) if when.tzinfo is None else when


def choose_anchor(users: Sequence[Json]) -> Json | None:
    """A Running user; if none, a Pending user that already has a node; oldest first, then by name."""
    running = [u for u in users if phase_of(u) == "Running" and node_of(u)]
    pending = [u for u in users if phase_of(u) == "Pending" and node_of(u)]
    for group in (running, pending):
        if group:
            return min(group, key=age_key)
    return None


def claim_hold(view: ClusterView, policy: Policy, target: PodTarget, volume: ClaimVolume) -> Hold:
    others = [
        pod
        for pod in view.pods_using_claim(target.namespace, volume.claim or "")
        if live(pod) and not _is_self(pod, target)
    ]
    users = tuple(p for p in others if not _is_mover(p, target.namespace, policy))
    holders = tuple(p for p in others if phase_of(p) == "Running" or node_of(p))
    running_nodes = tuple(sorted({n for u in users if phase_of(u) == "Running" and (n := node_of(u))}))
    return Hold(volume, users, holders, choose_anchor(users), running_nodes)


def plan(view: ClusterView, policy: Policy, target: PodTarget) -> Plan:
    """Holds of every owned or single-pod claim (only the annotated one when `co-schedule-with` is set), the
    anchor, and every reason placement is impossible."""
    result = Plan()
    volumes = result.volumes = target.volumes(view)
    wanted = (target.metadata.get("annotations") or {}).get(CO_SCHEDULE_WITH)
    if wanted is not None:
        chosen = [v for v in volumes if v.claim == wanted]
        if not chosen:
            known = sorted({v.claim for v in volumes if v.claim})
            hint = unknown_field(str(wanted), known).removeprefix("unknown field ") if known else "(it mounts none)"
            at = target.field(f"metadata.annotations[{CO_SCHEDULE_WITH}]")
            message = f'names claim "{wanted}", which this pod does not mount {hint}'
            result.problems.append(Problem(at, message, Severity.DENY, "annotation"))
            return result
        volumes = chosen
    considered = [v for v in volumes if v.access in (OWNED, SINGLE_POD) and v.claim]
    if not considered:
        result.idle = "no ReadWriteOnce or ReadWriteOncePod claim" + (f" {wanted}" if wanted else "")
        return result
    result.holds = [claim_hold(view, policy, target, v) for v in considered]
    for hold in result.holds:
        at = target.field(hold.volume.field)
        if hold.volume.access == SINGLE_POD and hold.holders:
            holder = min(hold.holders, key=age_key)
            where = f" (node {node_of(holder)})" if node_of(holder) else ""
            message = (
                f"ReadWriteOncePod claim {hold.claim} is in use by pod {name_of(holder)}{where} and a second pod "
                f"can never mount it: {COPY_METHOD_HINT}"
            )
            severity = Severity.WARN if policy.read_write_once_pod == "warn" else Severity.DENY
            result.problems.append(Problem(at, message, severity, "single-pod"))
        elif hold.split:
            pods = ", ".join(
                f"{name_of(u)} on {node_of(u)}" for u in sorted(hold.users, key=age_key) if phase_of(u) == "Running"
            )
            message = (
                f"ReadWriteOnce claim {hold.claim} is in use on different nodes ({pods}); "
                "not co-scheduled: check which pod really has it mounted"
            )
            result.problems.append(Problem(at, message, Severity.WARN, "split"))
    anchored = [h for h in result.holds if h.anchor is not None and not h.split and h.volume.access == OWNED]
    if anchored:
        result.lead = anchored[0]
        for hold in anchored[1:]:
            if hold.node != result.lead.node:
                lead = result.lead
                message = (
                    f"claims {lead.claim} and {hold.claim} are in use on different nodes "
                    f"({name_of(lead.anchor or {})} on {lead.node}, {name_of(hold.anchor or {})} on {hold.node}) "
                    f"and one pod cannot mount both: {COPY_METHOD_HINT}"
                )
                result.problems.append(Problem(target.field(hold.volume.field), message, Severity.DENY, "two-nodes"))
    elif not result.problems:
        claims = ", ".join(h.claim for h in result.holds)
        result.idle = f"no other pod holds claim {claims}"
    return result


def _is_self(pod: Mapping[str, Any], target: PodTarget) -> bool:
    name = target.metadata.get("name")
    uid = target.metadata.get("uid")
    meta = pod.get("metadata") or {}
    return bool((uid and meta.get("uid") == uid) or (name and not target.is_template and meta.get("name") == name))


#: The role of a pod of the index, which the index replaces rather than changes: asked again for every mover of
#: the claim that pod holds.
_ROLES: Memo[bool] = Memo(4096)


def _is_mover(pod: Mapping[str, Any], namespace: str, policy: Policy) -> bool:
    metadata = pod.get("metadata") or {}
    return _ROLES.by_identity(
        (metadata, policy), namespace, lambda: classify(metadata, namespace, policy).role == "mover"
    )
