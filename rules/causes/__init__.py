"""Why a storage pod is stuck: one cause per pod, with a stable code and a one-line remedy.

The audit names the most specific cause it can prove from cluster state; the code is what reports, metrics and
scripts key on, so codes never change meaning once shipped.

The table is read in tiers, one module each: who else holds the pod's claims (claims.py), Velero's node-agents
(nodeagents.py), its data sources (datasources.py), its volumes' topology (topology.py), its nodes (nodes.py), and
what the pod and the scheduler say (scheduler.py); stuck.py holds the pod and the facts the tiers share. A storage
pod that ended Failed gets its cause from a table of its own (ended.py): who disrupted it, or what killed it.
"""

from __future__ import annotations

from rules.causes.claims import CLAIM_CAUSES, MULTI_ATTACH
from rules.causes.datasources import DATA_SOURCE_CAUSES
from rules.causes.ended import ENDED_CAUSES, ENDED_CODES, ended_cause, ended_seconds
from rules.causes.nodeagents import NO_NODE_AGENT, NODE_AGENT_CAUSES
from rules.causes.nodes import NODE_CAUSES
from rules.causes.scheduler import SCHEDULER_CAUSES
from rules.causes.stuck import (
    CDI_WORKER,
    Cause,
    Stuck,
    StuckCause,
    duration,
    first_cause,
    storage_role,
    stuck_seconds,
)
from rules.causes.topology import TOPOLOGY_CAUSES

__all__ = [
    "CAUSES",
    "CDI_WORKER",
    "CODES",
    "ENDED_CAUSES",
    "ENDED_CODES",
    "MULTI_ATTACH",
    "NO_NODE_AGENT",
    "Cause",
    "Stuck",
    "StuckCause",
    "duration",
    "ended_cause",
    "ended_seconds",
    "storage_role",
    "stuck_cause",
    "stuck_seconds",
]

#: Most specific first: the first cause that holds is the pod's.
CAUSES: tuple[Cause, ...] = (
    *CLAIM_CAUSES,
    *NODE_AGENT_CAUSES,
    *DATA_SOURCE_CAUSES,
    *TOPOLOGY_CAUSES,
    *NODE_CAUSES,
    *SCHEDULER_CAUSES,
)
CODES: tuple[str, ...] = tuple(c.code for c in CAUSES)


def stuck_cause(stuck: Stuck) -> StuckCause:
    """The first cause of the stuck-pod table that holds; the last one always does."""
    return first_cause(CAUSES, stuck)
