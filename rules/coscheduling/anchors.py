"""Who holds a mover's claims, and on which node: the analysis shared by the mutating rule and the validating
rule, so both always reach the same verdict from the same state (docs/design.md#4-co-scheduling-movers).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from rules import deadline
from rules.annotations import CO_SCHEDULE_WITH
from rules.cluster import ClusterView
from rules.context import PodTarget
from rules.coscheduling.claimpods import Hold, claim_hold, name_of, node_of
from rules.kube.volumes import OWNED, SINGLE_POD, ClaimVolume
from rules.model import Severity
from rules.policy import Policy
from rules.quoting import LISTED, listed
from rules.suggest import unknown_field

COPY_METHOD_HINT = "copy it from a snapshot or a clone instead (copyMethod: Snapshot or Clone in the ReplicationSource)"


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
        if hold.volume.access == SINGLE_POD and (holder := hold.oldest_holder()) is not None:
            where = f" (node {node_of(holder)})" if node_of(holder) else ""
            message = (
                f"ReadWriteOncePod claim {hold.claim} is in use by pod {name_of(holder)}{where} and a second pod "
                f"can never mount it: {COPY_METHOD_HINT}"
            )
            severity = Severity.WARN if policy.read_write_once_pod == "warn" else Severity.DENY
            result.problems.append(Problem(target.field(hold.volume.field), message, severity, "single-pod"))
        elif hold.split:
            pods = listed(hold.pods.running_users(hold.own), lambda u: f"{name_of(u)} on {node_of(u)}")
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
