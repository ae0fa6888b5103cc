"""What admission decided, per rule family: the fixed vocabulary the `storage_affinity_admission_decisions_total`
counter is labelled with, so that a dashboard shows what the webhook does and not only how many reviews it answered.

A mutating review of a storage pod gives one outcome per family that had a say: a mover is `pinned` to its claim's
holder node or `left_alone` and why; a backup or restore pod is `placed` by load affinity and `restricted` to nodes
with a Ready Velero node-agent; a pod restored or cloned from a node-local source is `pinned` to it; a CDI worker is
`placed` by the VM it follows. A validating review gives `refused` once per family that denied it. Outcomes are read
from what the rules already record (the decision's audit annotations, which kube-apiserver writes to its audit log),
so no rule knows of metrics; every label value comes from the fixed sets below, never from the object.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from rules.model import Decision, Severity
from rules.roles import RoleDecision

CO_SCHEDULING, LOAD_AFFINITY, NODE_AGENT, DATA_SOURCE, CDI = (
    "coScheduling",
    "loadAffinity",
    "nodeAgent",
    "dataSource",
    "cdi",
)
#: The families a mutation is counted under.
MUTATING_FAMILIES = (CO_SCHEDULING, LOAD_AFFINITY, NODE_AGENT, DATA_SOURCE, CDI)
PLACED, PINNED, RESTRICTED, LEFT_ALONE, REFUSED = "placed", "pinned", "restricted", "left_alone", "refused"
DECISIONS = (PLACED, PINNED, RESTRICTED, LEFT_ALONE, REFUSED)
#: Why a storage pod was left alone: its rule found nothing to do (`nothing_to_do`: no holder of its claims, no
#: loadAffinity entry for its class, a pod already bound by nodeName), a conflict it will not guess through (the
#: co-scheduling problem kinds, `sources_apart`), a role the policy does not trust, or the review could not decide
#: (`lookup_failed`, `over_budget`, `past_deadline`, `rule_error`: onLookupFailure and the budget apply).
WHYS = (
    "nothing_to_do",
    "single-pod",
    "split",
    "two-nodes",
    "annotation",
    "claims_not_held",
    "sources_apart",
    "untrusted",
    "lookup_failed",
    "over_budget",
    "past_deadline",
    "rule_error",
)
#: Audit annotations (rules/pipeline.py) that say the review stopped short, and the `why` each gives.
_STOPPED = (
    ("past-deadline", "past_deadline"),
    ("over-budget", "over_budget"),
    ("rule-error", "rule_error"),
    ("lookup-failure", "lookup_failed"),
)

#: The series created at zero when a worker starts (webhook/metrics.py `start_series`): what the dashboard's panel
#: reads, so that it shows 0 rather than "No data" before the first storage pod.
STARTED: tuple[tuple[str, str, str], ...] = (
    (CO_SCHEDULING, PINNED, ""),
    (CO_SCHEDULING, LEFT_ALONE, "nothing_to_do"),
    (LOAD_AFFINITY, PLACED, ""),
    (NODE_AGENT, RESTRICTED, ""),
    (DATA_SOURCE, PINNED, ""),
    (CDI, PLACED, ""),
)
#: The family a role's own mutating rule is counted under.
_ROLE_FAMILIES = {"mover": CO_SCHEDULING, "backup": LOAD_AFFINITY, "restore": LOAD_AFFINITY}

Outcome = tuple[str, str, str]  # (family, decision, why); why is "" unless the decision is left_alone


def mutation_outcomes(role: RoleDecision, decision: Decision) -> list[Outcome]:
    """What the mutating webhook decided for a pod of this role, by family; nothing for a pod no rule of these
    families concerns (a plain pod, an exempt or unplaced one)."""
    audit = decision.audit
    if not audit and role.role not in _ROLE_FAMILIES:
        return []  # a plain pod, as most are: no rule of these families had a say
    stopped = None
    for key, why in _STOPPED:
        if key in audit:
            stopped = why
            break
    if stopped is not None and not decision.patch:  # nothing was applied, whatever a rule before had recorded
        family = _ROLE_FAMILIES.get(role.role or "")
        return [(family, LEFT_ALONE, stopped)] if family else []
    out: list[Outcome] = []
    if role.role == "mover":
        out.append(_mover(audit, stopped))
    elif role.role in ("backup", "restore"):
        out += _velero(role, audit, stopped)
    if "data-source-placed" in audit:
        out.append((DATA_SOURCE, PINNED, ""))
    elif "data-source" in audit:
        out.append((DATA_SOURCE, LEFT_ALONE, "sources_apart"))
    if "follows-vm" in audit:
        out.append((CDI, PLACED, ""))
    return out


def _mover(audit: Mapping[str, str], stopped: str | None) -> Outcome:
    if "co-scheduled-with" in audit:
        return CO_SCHEDULING, PINNED, ""
    said = audit.get("co-scheduling", "")
    if said.startswith("not placed: "):
        kind = said.removeprefix("not placed: ").partition(" ")[0]
        return CO_SCHEDULING, LEFT_ALONE, kind if kind in WHYS else "nothing_to_do"
    if said.startswith("unpinned from"):
        return CO_SCHEDULING, LEFT_ALONE, "claims_not_held"
    return CO_SCHEDULING, LEFT_ALONE, stopped or "nothing_to_do"


def _velero(role: RoleDecision, audit: Mapping[str, str], stopped: str | None) -> list[Outcome]:
    if not role.trusted:
        return [(LOAD_AFFINITY, LEFT_ALONE, "untrusted")]
    out: list[Outcome] = [
        (LOAD_AFFINITY, PLACED, "")
        if "load-affinity-applied" in audit
        else (LOAD_AFFINITY, LEFT_ALONE, stopped or "nothing_to_do")
    ]
    if "node-agent-restricted" in audit:
        out.append((NODE_AGENT, RESTRICTED, ""))
    return out


def validation_outcomes(decision: Decision) -> list[Outcome]:
    """`refused` once per family whose finding denied the review (after enforcement)."""
    families: dict[str, None] = {}
    for finding in decision.findings:
        if finding.severity is Severity.DENY:
            families[finding.family] = None
    return [(family, REFUSED, "") for family in families]


def shown(outcome: Outcome, families: Any) -> Outcome:
    """The outcome with a family outside `families` counted as `other`: a label value never comes from input."""
    family, decided, why = outcome
    return (family if family in families else "other", decided, why if why in WHYS else "")
