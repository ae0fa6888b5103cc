"""Who holds a mover's claims, and on which node: the analysis shared by the mutating rule and the validating
rule, so both always reach the same verdict from the same state (docs/design.md#4-co-scheduling-movers).
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from rules import deadline
from rules.annotations import CO_SCHEDULE_WITH
from rules.cluster import ClusterView
from rules.context import PodTarget
from rules.kube.volumes import OWNED, SINGLE_POD, ClaimVolume
from rules.memo import Memo
from rules.model import Json, Severity
from rules.policy import Policy
from rules.quoting import LISTED, listed
from rules.roles import classify
from rules.suggest import unknown_field

FINISHED = ("Succeeded", "Failed")
_LAST = datetime.max.replace(tzinfo=UTC)
COPY_METHOD_HINT = "copy it from a snapshot or a clone instead (copyMethod: Snapshot or Clone in the ReplicationSource)"


@dataclass
class Hold:
    """One owned or single-pod claim of the mover and the other pods that mount it. Read-only by convention, not
    frozen: a frozen dataclass sets each field through `object.__setattr__`, which made building one (for every
    claim of every mover review) about four times dearer."""

    volume: ClaimVolume
    users: tuple[
        Json, ...
    ]  # docs/design.md#4-co-scheduling-movers users: not the mover itself, not movers, not finished, not terminating
    holders: tuple[Json, ...]  # any other live pod with the volume mounted or about to be (Running or on a node)
    anchor: Json | None
    running_nodes: tuple[str, ...]  # distinct nodes of Running users, sorted
    node: str | None  # the anchor's node (every anchor has one)

    @property
    def claim(self) -> str:
        return self.volume.claim or ""

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


def claim_hold(view: ClusterView, policy: Policy, target: PodTarget, volume: ClaimVolume) -> Hold:
    """The pods that mount the claim, sorted into users and holders, with the anchor: in one pass that reads each
    pod's phase, node and metadata once (every mover review walks every pod of its claims, and the validating
    review walks them again).

    Users: live, not the pod under review, not a mover (docs/design.md#4-co-scheduling-movers); holders: any
    live other pod that is Running or has a node. The anchor is a Running user with a node; if none, a Pending
    user with a node; oldest first, then by name.
    """
    name = None if target.is_template else target.metadata.get("name")
    uid = target.metadata.get("uid")
    users: list[Json] = []
    holders: list[Json] = []
    running: list[Json] = []  # users that could anchor, by preference
    pending: list[Json] = []
    nodes: set[str] = set()
    for pod in view.pods_using_claim(target.namespace, volume.claim or ""):
        deadline.check()
        metadata = pod.get("metadata") or {}
        phase = (pod.get("status") or {}).get("phase") or "Pending"
        if phase in FINISHED or metadata.get("deletionTimestamp"):
            continue
        if (uid and metadata.get("uid") == uid) or (name and metadata.get("name") == name):
            continue  # the pod under review itself
        node = (pod.get("spec") or {}).get("nodeName")
        if phase == "Running" or node:
            holders.append(pod)
        if _is_mover(metadata, target.namespace, policy):
            continue
        users.append(pod)
        if node and phase == "Running":
            running.append(pod)
            nodes.add(str(node))
        elif node and phase == "Pending":
            pending.append(pod)
    candidates = running or pending
    anchor = (candidates[0] if len(candidates) == 1 else min(candidates, key=age_key)) if candidates else None
    node = node_of(anchor) if anchor else None
    return Hold(volume, tuple(users), tuple(holders), anchor, tuple(sorted(nodes)), node)


def plan(view: ClusterView, policy: Policy, target: PodTarget) -> Plan:
    """Holds of every owned or single-pod claim (only the annotated one when `co-schedule-with` is set), the
    anchor, and every reason placement is impossible. One hold per distinct claim, of its first volume: the pods
    of a claim are walked once however many volumes mount it."""
    result = Plan()
    volumes = result.volumes = target.volumes(view)
    wanted = (target.metadata.get("annotations") or {}).get(CO_SCHEDULE_WITH)
    if wanted is not None:
        chosen = [v for v in volumes if v.claim == wanted]
        if not chosen:
            known = sorted({v.claim for v in volumes if v.claim})
            hint = (
                unknown_field(str(wanted), known, LISTED).removeprefix("unknown field ")
                if known
                else "(it mounts none)"
            )
            at = target.field(f"metadata.annotations[{CO_SCHEDULE_WITH}]")
            message = f'names claim "{wanted}", which this pod does not mount {hint}'
            result.problems.append(Problem(at, message, Severity.DENY, "annotation"))
            return result
        volumes = chosen
    considered: dict[str, ClaimVolume] = {}
    for v in volumes:
        if v.access in (OWNED, SINGLE_POD) and v.claim:
            considered.setdefault(v.claim, v)
    if not considered:
        result.idle = "no ReadWriteOnce or ReadWriteOncePod claim" + (f" {wanted}" if wanted else "")
        return result
    for v in considered.values():
        deadline.check()
        result.holds.append(claim_hold(view, policy, target, v))
    for hold in result.holds:
        if hold.volume.access == SINGLE_POD and hold.holders:
            holder = min(hold.holders, key=age_key)
            where = f" (node {node_of(holder)})" if node_of(holder) else ""
            message = (
                f"ReadWriteOncePod claim {hold.claim} is in use by pod {name_of(holder)}{where} and a second pod "
                f"can never mount it: {COPY_METHOD_HINT}"
            )
            severity = Severity.WARN if policy.read_write_once_pod == "warn" else Severity.DENY
            result.problems.append(Problem(target.field(hold.volume.field), message, severity, "single-pod"))
        elif hold.split:
            running = sorted((u for u in hold.users if phase_of(u) == "Running"), key=age_key)
            pods = listed(running, lambda u: f"{name_of(u)} on {node_of(u)}")
            message = (
                f"ReadWriteOnce claim {hold.claim} is in use on different nodes ({pods}); "
                "not co-scheduled: check which pod really has it mounted"
            )
            result.problems.append(Problem(target.field(hold.volume.field), message, Severity.WARN, "split"))
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
        claims = listed([h.claim for h in result.holds])
        result.idle = f"no other pod holds claim {claims}"
    return result


#: The role of a pod of the index, which the index replaces rather than changes: asked again for every mover of
#: the claim that pod holds.
_ROLES: Memo[bool] = Memo(4096)


def _is_mover(metadata: Mapping[str, Any], namespace: str, policy: Policy) -> bool:
    return _ROLES.by_identity(
        (metadata, policy), namespace, lambda: classify(metadata, namespace, policy).role == "mover"
    )
