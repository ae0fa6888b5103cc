"""Whether Velero's node-agent runs with the ConfigMap the webhook reads (the policy's `loadAffinitySource`).

The webhook reads that ConfigMap live; Velero's node-agent reads the one its `--node-agent-configmap` flag names,
once, when it starts (vmware-tanzu/velero pkg/cmd/cli/nodeagent/server.go), and its Helm chart passes the flag only
when told to (vmware-tanzu/helm-charts#733). The two can silently disagree: backup and restore pods then carry
load affinity, tolerations and labels Velero does not apply or expects otherwise. The node-agent pods are in the
cluster state already (rules/loadaffinity/agents.py keeps their flag and start time), so this costs no lookup.
"""

from __future__ import annotations

from bisect import bisect_left
from dataclasses import dataclass

from rules.cluster import ClusterView
from rules.loadaffinity.agents import CONFIG_FLAG, last_changed
from rules.loadaffinity.nodeagents import velero_namespace
from rules.messages import counted
from rules.policy import Policy
from rules.quoting import clip

#: How an operator restarts the node-agents (the DaemonSet of `velero install` and of the Helm chart).
RESTART = "kubectl -n {namespace} rollout restart daemonset/node-agent"


@dataclass(frozen=True)
class NotLoaded:
    """Why Velero's node-agents do not run with the policy's `loadAffinitySource` ConfigMap, and what to do."""

    config_map: str  # namespace/name
    message: str
    remedy: str


def config_not_loaded(view: ClusterView, policy: Policy) -> NotLoaded | None:
    """None while every known node-agent of Velero's namespace names the policy's ConfigMap and started after its
    last change, or when there is nothing to compare: no `loadAffinitySource`, the ConfigMap not known, or no
    node-agent pod known (the webhook cannot tell how Velero runs)."""
    source = policy.load_affinity_source
    if source is None:
        return None
    namespace, name = source
    config_map = view.config_map(namespace, name)
    agents = view.node_agents(velero_namespace(policy, namespace))
    if config_map is None or not agents.known:
        return None
    shown = f"{namespace}/{name}"
    others = sorted(agents.config_maps - {name})
    if others:
        named = ", ".join(clip(other) for other in others if other)
        flagless = "" in others
        what = (
            f"node-agent pods run without {CONFIG_FLAG}"
            if flagless and not named
            else f"node-agent pods name {named}{' (some no ConfigMap at all)' if flagless else ''}"
        )
        if name in agents.config_maps:
            what = f"some {what}"
        return NotLoaded(
            shown,
            f"ConfigMap {shown} is the policy's loadAffinitySource, but {what} "
            f"(vmware-tanzu/helm-charts#733): Velero does not apply it where the webhook does",
            f"pass {CONFIG_FLAG}={name} to the node-agent DaemonSet (Helm chart: nodeAgent.extraArgs), or point "
            "loadAffinitySource at the ConfigMap it names",
        )
    changed = last_changed(config_map)
    before = bisect_left(agents.starts, changed) if changed else 0  # "" (not known) sorts first: never counted
    unknown = bisect_left(agents.starts, "\x01")
    stale = before - unknown
    if stale <= 0:
        return None
    restart = RESTART.format(namespace=velero_namespace(policy, namespace))
    return NotLoaded(
        shown,
        f"{stale} of {counted(agents.pods, 'node-agent pod')} started before ConfigMap {shown} last changed "
        f"({changed}): Velero reads it only at start; restart node-agent to apply",
        restart,
    )
