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
    node-agent pods known there, Ready or not (none known: the webhook cannot tell where they run). `config_maps`
    are the ConfigMaps their `--node-agent-configmap` names ("" for a pod without the flag), `starts` when each
    pod's node-agent process last started ("" unknown), sorted: Velero reads the ConfigMap then, once."""

    ready: frozenset[str] = frozenset()
    pods: int = 0
    config_maps: frozenset[str] = frozenset()
    starts: tuple[str, ...] = ()

    @property
    def known(self) -> bool:
        return self.pods > 0


NO_AGENTS = NodeAgents()


@dataclass(frozen=True, slots=True)
class AgentState:
    """One node-agent pod: its node (empty while it is not scheduled), whether it is Ready there, the ConfigMap its
    arguments name ("" none) and when its node-agent container last started ("" not known)."""

    node: str
    ready: bool
    config_map: str = ""
    started: str = ""


#: The node-agent server's flag naming its ConfigMap (vmware-tanzu/velero pkg/cmd/cli/nodeagent/server.go).
CONFIG_FLAG = "--node-agent-configmap"


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
    config_map, container = _config_flag(spec)
    return AgentState(
        str(spec.get("nodeName") or ""), bool(ready and spec.get("nodeName")), config_map, _started(pod, container)
    )


def _config_flag(spec: Mapping[str, Any]) -> tuple[str, str]:
    """(the ConfigMap `--node-agent-configmap` names, the container that carries it) as Go's pflag reads the
    flag: `--flag=value` or `--flag value`, the last one winning; ("", the first container) without it."""
    found, where = "", ""
    containers = spec.get("containers") or ()
    for container in containers if isinstance(containers, list) else ():
        if not isinstance(container, Mapping):
            continue
        words = [w for key in ("command", "args") for w in container.get(key) or () if isinstance(w, str)]
        for i, word in enumerate(words):
            if word.startswith(CONFIG_FLAG + "="):
                found, where = word[len(CONFIG_FLAG) + 1 :], str(container.get("name") or "")
            elif word == CONFIG_FLAG and i + 1 < len(words):
                found, where = words[i + 1], str(container.get("name") or "")
    if not where and containers and isinstance(containers, list) and isinstance(containers[0], Mapping):
        where = str(containers[0].get("name") or "")
    return found, where


def _started(pod: Mapping[str, Any], container: str) -> str:
    """When the node-agent process last started: its container's `state.running.startedAt` (a restarted container
    reads the ConfigMap again), else the pod's `status.startTime`; "" when neither is known."""
    status = pod.get("status") or {}
    for entry in status.get("containerStatuses") or ():
        if isinstance(entry, Mapping) and entry.get("name") == container:
            running = (entry.get("state") or {}).get("running") or {}
            if isinstance(running, Mapping) and isinstance(running.get("startedAt"), str):
                return str(running["startedAt"])
    start = status.get("startTime")
    return start if isinstance(start, str) else ""


def last_changed(obj: Mapping[str, Any]) -> str:
    """When an object last changed, as far as its metadata tells: the latest `managedFields` time (every write
    through the API records one), else its `creationTimestamp`; "" when neither is there. RFC 3339 times in UTC,
    as the API server writes them, compare as strings."""
    metadata = obj.get("metadata") or {}
    times = [
        entry["time"]
        for entry in metadata.get("managedFields") or ()
        if isinstance(entry, Mapping) and isinstance(entry.get("time"), str)
    ]
    created = metadata.get("creationTimestamp")
    return max(times) if times else created if isinstance(created, str) else ""
