"""Velero's node-agent pods as the rules see them: which nodes run a Ready one, per Velero namespace.

A backup or restore data-mover pod does nothing by itself: the node-agent on its node picks it up, so a data mover
on a node without one waits for the prepare timeout and fails. Velero finds its node-agents by the label its
DaemonSets put on their pods (`role: node-agent`, on both `node-agent` and `node-agent-windows`; its install code
pkg/install/daemonset.go and its Helm chart charts/velero/templates/node-agent-daemonset.yaml) in its own namespace
(pkg/nodeagent/node_agent.go, `isRunningInNode`). Ready here is stricter than Velero's "Running": phase Running and
the Ready condition True, and not being deleted (an evicted pod keeps running through its grace period).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from rules.kube.conditions import condition

NODE_AGENT_LABEL = ("role", "node-agent")


@dataclass(frozen=True)
class NodeAgents:
    """The node-agents of one namespace at one moment: `ready` names the nodes with a Ready one; `pods` counts the
    node-agent pods known there, Ready or not (none known: the webhook cannot tell where they run)."""

    ready: frozenset[str] = frozenset()
    pods: int = 0

    @property
    def known(self) -> bool:
        return self.pods > 0


NO_AGENTS = NodeAgents()


@dataclass(frozen=True, slots=True)
class AgentState:
    """One node-agent pod: its node (empty while it is not scheduled) and whether it is Ready there."""

    node: str
    ready: bool


def is_node_agent(pod: Mapping[str, Any]) -> bool:
    labels = (pod.get("metadata") or {}).get("labels") or {}
    return isinstance(labels, Mapping) and labels.get(NODE_AGENT_LABEL[0]) == NODE_AGENT_LABEL[1]


def agent_state(pod: Mapping[str, Any]) -> AgentState:
    """Where a node-agent pod runs, and whether it is Ready there."""
    metadata = pod.get("metadata") or {}
    spec = pod.get("spec") or {}
    ready = (
        (pod.get("status") or {}).get("phase") == "Running"
        and not metadata.get("deletionTimestamp")
        and (condition(pod, "Ready") or {}).get("status") == "True"
    )
    return AgentState(str(spec.get("nodeName") or ""), bool(ready and spec.get("nodeName")))
