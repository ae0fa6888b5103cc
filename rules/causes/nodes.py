"""Stuck-pod causes of the node tier: whether the node the pod has, or could have, exists and can run it."""

from __future__ import annotations

from collections.abc import Callable

from rules import deadline
from rules.causes.stuck import NODE_CORDONED, NODE_NOT_READY, NODE_TAINTED, Cause, Stuck
from rules.kube.feasible import Feasibility, on_labels
from rules.kube.nodeaffinity import HOSTNAME_LABEL, pinned_node, required_terms
from rules.quoting import listed


def _node_gone(stuck: Stuck) -> str | None:
    if stuck.node_name and stuck.view.node(stuck.node_name) is None:
        return f"its node {stuck.node_name} does not exist"
    pinned = pinned_node(required_terms(stuck.spec))
    if not stuck.node_name and pinned and stuck.view.node(pinned) is None:
        return f"it is pinned to node {pinned} (metadata.name In [{pinned}]), which does not exist"
    return None


def _unusable_as(code: str) -> Callable[[Stuck], str | None]:
    """A detector for one kind of unusable node: it holds when no candidate node can take the pod and at least
    one of them fails for this reason; the message names every candidate's reason."""

    def detect(stuck: Stuck) -> str | None:
        reasons = stuck.unusable
        if reasons is None or code not in {c for c, _ in reasons.values()}:
            return None
        shown = listed(list(reasons.items()), lambda item: f"{item[0]} {item[1][1]}", sep="; ")
        if stuck.node_name:
            return f"its node {shown}"
        return f"every node its affinity and volumes allow is unusable: {shown}"

    return detect


def _hostname_label(stuck: Stuck) -> str | None:
    if stuck.node_name:
        return None
    wanted: list[tuple[str, str]] = []
    if selected := (stuck.spec.get("nodeSelector") or {}).get(HOSTNAME_LABEL):
        wanted.append(("nodeSelector", str(selected)))
    for term in required_terms(stuck.spec) or ():
        deadline.check()
        for requirement in term.get("matchExpressions") or ():
            values = list(requirement.get("values") or [])
            if requirement.get("key") == HOSTNAME_LABEL and requirement.get("operator") == "In" and len(values) == 1:
                wanted.append(("required node affinity", str(values[0])))
    labelled = on_labels(stuck.policy.disclosed_node_labels, volumes=False)
    for where, hostname in wanted:
        deadline.check()
        if Feasibility(stuck.view, labelled, selector={HOSTNAME_LABEL: hostname}).any():
            continue
        if stuck.view.node(hostname) is not None:
            # the node is named, its label is not: reports reach the pod's namespace, whose tenants may not read Nodes
            asked = f"its {where} asks for {HOSTNAME_LABEL}={hostname}, which no node carries"
            return f"{asked}; a node named {hostname} exists, with another {HOSTNAME_LABEL} label or none"
    return None


#: Whether the node the pod has, or could have, can run it.
NODE_CAUSES: tuple[Cause, ...] = (
    Cause(
        "NodeGone",
        "The node the pod is bound or pinned to does not exist.",
        "Delete the pod: its controller recreates it and the webhook places it from the current state.",
        _node_gone,
    ),
    Cause(
        NODE_NOT_READY,
        "Its node, or every node it may use, is NotReady.",
        "Bring the node back (kubelet, network), or drain it so the pod is recreated elsewhere.",
        _unusable_as(NODE_NOT_READY),
    ),
    Cause(
        NODE_CORDONED,
        "Every node the pod may use is cordoned (or otherwise unusable).",
        "Uncordon the node, or widen the pod's node affinity to usable nodes.",
        _unusable_as(NODE_CORDONED),
    ),
    Cause(
        NODE_TAINTED,
        "Every node the pod may use has a NoSchedule or NoExecute taint the pod does not tolerate.",
        "Add a matching toleration (policy tolerations, Velero's node-agent ConfigMap), or remove the taint.",
        _unusable_as(NODE_TAINTED),
    ),
    Cause(
        "HostnameLabelMismatch",
        f"The pod asks for a {HOSTNAME_LABEL} label no node carries, while a node of that name exists.",
        "Pin by node name (coScheduling.placement: requiredAffinity), or fix the node's hostname label.",
        _hostname_label,
    ),
)
