"""Stuck-pod causes of the node-agent tier: whether Velero's node-agent runs with the ConfigMap the pod was placed
from, and whether a Ready one runs on the pod's node."""

from __future__ import annotations

from rules.annotations import LOAD_AFFINITY, LOAD_AFFINITY_APPLIED
from rules.causes.stuck import Cause, Stuck
from rules.loadaffinity.loaded import config_not_loaded
from rules.loadaffinity.mutation import source_settings
from rules.loadaffinity.nodeagents import pending_pod_problem

NO_NODE_AGENT = "NoNodeAgent"
CONFIG_NOT_LOADED = "VeleroConfigNotLoaded"


def _config_not_loaded(stuck: Stuck) -> str | None:
    """A backup or restore pod the webhook placed from Velero's ConfigMap (`load-affinity-applied`, no list of its
    own) while the node-agents do not run with that ConfigMap: Velero made the pod for other settings."""
    if stuck.target.role.role not in ("backup", "restore"):
        return None
    annotations = stuck.target.metadata.get("annotations") or {}
    applied = annotations.get(LOAD_AFFINITY_APPLIED)
    if applied is None or LOAD_AFFINITY in annotations:
        return None
    settings, fallback = source_settings(stuck.view, stuck.policy)
    if fallback or settings.source == "policy":
        return None  # placed from the policy's own lists: no ConfigMap of Velero's involved
    unloaded = config_not_loaded(stuck.view, stuck.policy)
    if unloaded is None:
        return None
    return f"its load affinity (class {applied}) came from ConfigMap {unloaded.config_map}; {unloaded.message}"


def _no_node_agent(stuck: Stuck) -> str | None:
    if stuck.target.role.role not in ("backup", "restore"):
        return None
    problem = pending_pod_problem(stuck.view, stuck.policy, stuck.target.namespace, stuck.spec)
    return None if problem is None else problem[1]


#: Whether Velero runs with the ConfigMap the pod was placed from, and a Ready node-agent on its node.
NODE_AGENT_CAUSES: tuple[Cause, ...] = (
    Cause(
        CONFIG_NOT_LOADED,
        "A backup or restore pod was placed from Velero's node-agent ConfigMap (the policy's loadAffinitySource) "
        "that the node-agent has not loaded: its arguments name no or another ConfigMap "
        "(vmware-tanzu/helm-charts#733), or it started before the ConfigMap's last change and Velero reads it only "
        "at start.",
        "Pass --node-agent-configmap=<name> to the node-agent DaemonSet (Helm: nodeAgent.extraArgs), or restart "
        "node-agent to apply (kubectl -n velero rollout restart daemonset/node-agent); then delete the pod.",
        _config_not_loaded,
    ),
    Cause(
        NO_NODE_AGENT,
        "A backup or restore pod is on, or pinned to, a node where no Velero node-agent is Ready: its DataUpload or "
        "DataDownload waits for one until Velero's prepare timeout (vmware-tanzu/velero#9735).",
        "Get the node-agent Ready on that node (its DaemonSet's tolerations and nodeSelector), or delete the pod so "
        "the webhook places the next one where a node-agent runs.",
        _no_node_agent,
    ),
)
