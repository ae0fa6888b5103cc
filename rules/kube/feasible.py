"""The Nodes a pod may be scheduled on, by the scheduler's filters that read only the pod, its claims and the
Nodes: NodeName, NodeUnschedulable, NodeAffinity (nodeSelector and required node affinity, `matchFields`
included), TaintToleration (NoSchedule and NoExecute) and the node affinity of the PVs its claims are bound to
(VolumeBinding). Resources, ports and inter-pod affinity are not counted: they change from minute to minute, and
a policy test asks where a pod *may* land.

It only composes the one evaluator of each filter (the NodeSet's bit sets for node affinity, as placement uses them;
rules/kube/tolerations.py), so a pod pinned by `matchFields` or a hostname label checks a few nodes, not all.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from rules.cluster import ClusterView
from rules.kube.nodeaffinity import required_terms
from rules.kube.tolerations import Tolerated, node_tolerated, tolerates
from rules.kube.volumes import claim_volumes, node_local_terms
from rules.kube.workloads import TEMPLATE_PATHS, template_of, template_spec
from rules.model import Json

#: The taint the NodeUnschedulable filter checks a cordoned node's pods against (what `kubectl cordon` means).
UNSCHEDULABLE_TAINT = {"key": "node.kubernetes.io/unschedulable", "effect": "NoSchedule"}


def pod_of(kind: str, obj: Json) -> tuple[Json, Json] | None:
    """(metadata, spec) of the pods an object makes: a Pod itself, a workload's pods from its template; None for
    a kind that runs no pod (a ConfigMap)."""
    if kind == "Pod":
        return obj.get("metadata") or {}, obj.get("spec") or {}
    path = TEMPLATE_PATHS.get(kind)
    if path is None:
        return None
    template = template_of(obj, path)
    return template.get("metadata") or {}, template_spec(kind, obj, template)


def feasible_nodes(
    view: ClusterView,
    namespace: str,
    metadata: Mapping[str, Any],
    spec: Mapping[str, Any],
    also_tolerated: Sequence[Mapping[str, Any]] = (),
) -> list[str]:
    """The names of the known Nodes that pass the filters above for this pod, sorted. Reads its claims and their
    PVs; `LookupFailed` propagates. `also_tolerated` counts as the pod's own tolerations (Velero's, which it puts
    on its data movers: rules/loadaffinity/movertolerations.py)."""
    local = node_local_terms(claim_volumes(view, namespace, metadata, spec))
    tolerations = Tolerated([*(spec.get("tolerations") or ()), *also_tolerated])  # judged against many nodes' taints
    pinned = spec.get("nodeName") or ""
    own = required_terms(spec)
    nodes = view.node_set()
    # NodeAffinity and the PVs' node affinity, evaluated against every node at once.
    admitted = nodes.admitting(own, selector=spec.get("nodeSelector"), volume_terms=local)
    if pinned:
        admitted &= nodes.mask_of([str(pinned)])

    def fits(node: Json) -> bool:  # only the admitted nodes (the pinned one alone, with a nodeName) are asked
        if (node.get("spec") or {}).get("unschedulable") and not tolerates(tolerations, UNSCHEDULABLE_TAINT):
            return False
        return node_tolerated(tolerations, node)

    return sorted(str((node.get("metadata") or {}).get("name") or "") for node in nodes.matching(fits, within=admitted))
