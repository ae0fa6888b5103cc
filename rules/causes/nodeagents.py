"""Stuck-pod causes of the node-agent tier: whether a Ready Velero node-agent runs on the pod's node."""

from __future__ import annotations

from rules.causes.stuck import Cause, Stuck
from rules.loadaffinity.nodeagents import pending_pod_problem

NO_NODE_AGENT = "NoNodeAgent"


def _no_node_agent(stuck: Stuck) -> str | None:
    if stuck.target.role.role not in ("backup", "restore"):
        return None
    problem = pending_pod_problem(stuck.view, stuck.policy, stuck.target.namespace, stuck.spec)
    return None if problem is None else problem[1]


#: Whether a Ready Velero node-agent runs on the pod's node.
NODE_AGENT_CAUSES: tuple[Cause, ...] = (
    Cause(
        NO_NODE_AGENT,
        "A backup or restore pod is on, or pinned to, a node where no Velero node-agent is Ready: its DataUpload or "
        "DataDownload waits for one until Velero's prepare timeout (vmware-tanzu/velero#9735).",
        "Get the node-agent Ready on that node (its DaemonSet's tolerations and nodeSelector), or delete the pod so "
        "the webhook places the next one where a node-agent runs.",
        _no_node_agent,
    ),
)
