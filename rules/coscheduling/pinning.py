"""Pinning a pod to one node, shared by co-scheduling (movers) and load affinity (restore pods on a selected node).

Three placement modes: `requiredAffinity` adds `metadata.name In [node]` to every required term (how the
DaemonSet controller pins pods: exact, kept by the scheduler, independent of labels); `nodeSelector` sets the
node's `kubernetes.io/hostname` label (VolSync's way); `nodeName` bypasses the scheduler, so it is used only when
that is safe, else `requiredAffinity` with a warning.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from rules.annotations import PLACEMENT, PLACEMENTS
from rules.budget import check_terms
from rules.context import Context, PodTarget
from rules.kube.nodeaffinity import (
    HOSTNAME_LABEL,
    REQUIRED,
    REQUIRED_KEY,
    merge_terms,
    name_requirement,
    selector_terms,
)
from rules.kube.volumes import ClaimVolume
from rules.model import Json
from rules.quoting import listed
from rules.safeload import copy_json

REQUIRED_AFFINITY, NODE_SELECTOR, NODE_NAME = PLACEMENTS


def placement_mode(ctx: Context, target: PodTarget) -> str:
    """The annotation `storage-affinity.io/placement` when valid (a bad value is denied by validation), else
    the policy's `coScheduling.placement`."""
    wanted = (target.metadata.get("annotations") or {}).get(PLACEMENT)
    return str(wanted) if wanted in PLACEMENTS else ctx.policy.placement


def hostname_selector(
    ctx: Context, target: PodTarget, node: str, current: dict[str, str]
) -> tuple[str, dict[str, str]]:
    """VolSync's way: the Node's hostname label, which may differ from its name; requiredAffinity when unknown, or
    when it differs and only the pod's annotation asked for this mode (a node's label values are not told to pods
    the operator did not say so for)."""
    obj = ctx.view.node(node)
    label = ((obj or {}).get("metadata") or {}).get("labels", {}).get(HOSTNAME_LABEL) if obj else None
    at = target.field("spec.nodeSelector")
    if obj is None:
        ctx.warn(f"{at}: Node {node} is unknown, so is its {HOSTNAME_LABEL} label; used requiredAffinity")
        return REQUIRED_AFFINITY, current
    if not label:
        ctx.warn(f"{at}: Node {node} has no {HOSTNAME_LABEL} label; used requiredAffinity")
        return REQUIRED_AFFINITY, current
    if label != node and ctx.policy.placement != NODE_SELECTOR:
        # asked by the pod's annotation alone: the label is the node's, not the pod author's to read
        ctx.warn(
            f"{at}: Node {node}'s {HOSTNAME_LABEL} label is not its name, and only the policy's "
            f"coScheduling.placement may write it into a pod; used requiredAffinity"
        )
        return REQUIRED_AFFINITY, current
    if current.get(HOSTNAME_LABEL, label) != label:
        # the pod's value, not the node's label: its author may not read Nodes
        ctx.warn(
            f'{at}[{HOSTNAME_LABEL}]: kept "{current[HOSTNAME_LABEL]}", not Node {node}\'s {HOSTNAME_LABEL} label; '
            "used requiredAffinity"
        )
        return REQUIRED_AFFINITY, current
    return NODE_SELECTOR, {**current, HOSTNAME_LABEL: str(label)}


def node_name_unsafe(volumes: Sequence[ClaimVolume], spec: Mapping[str, Any]) -> str:
    """Why `nodeName` must not be used ("" when it may): it bypasses the scheduler, so a WaitForFirstConsumer
    claim is never provisioned and scheduling gates are ignored (VolSync learned this)."""
    unbound = list(dict.fromkeys(v.claim or v.volume for v in volumes if not v.bound))
    if unbound:
        return f"claim {listed(unbound)} is not bound yet (nodeName would block its provisioning)"
    if spec.get("schedulingGates"):
        return "the pod has schedulingGates (nodeName would bypass them)"
    return ""


def pin_terms(terms: Sequence[Mapping[str, Any]] | None, node: str) -> list[Json]:
    """Add `metadata.name In [node]` to every term (terms are ORed: a new term would loosen the pod).

    Only a pod without required node affinity (None: no terms at all, see `required_node_affinity`) gets a new term.
    """
    pin = {"matchFields": [name_requirement(node)]}
    return [merge_terms(term, pin) for term in terms] if terms is not None else [pin]


def unpin_terms(terms: Sequence[Mapping[str, Any]] | None, node: str) -> list[Json] | None:
    """Remove exactly the requirement `pin_terms` added; a term left empty was the webhook's own and goes."""
    requirement = name_requirement(node)
    out: list[Json] = []
    for term in terms or ():
        fields = [r for r in term.get("matchFields") or () if r != requirement]
        kept: Json = {k: v for k, v in term.items() if k != "matchFields"}
        if fields:
            kept["matchFields"] = fields
        if kept.get("matchExpressions") or kept.get("matchFields"):
            out.append(kept)
    return out or None


def current_terms(target: PodTarget) -> list[Json] | None:
    """The required terms as patched so far; None when the pod has no required node affinity."""
    return selector_terms(target.patch.get("spec", *REQUIRED, default=None))


def write_required(target: PodTarget, terms: Sequence[Mapping[str, Any]] | None, *, prepared: bool = False) -> None:
    """Write the required terms whole; when none remain, drop the key from its parent (never an empty list).

    Written as fresh copies: a cross product shares requirement objects between terms, and a shared object in
    the patch value would surface as a YAML alias in `review -o yaml` (which our own loader refuses). Terms past
    the review budget raise OverBudget instead: the patched pod would be refused when reviewed again.
    `prepared`: the caller made the terms alias-free and within the budget already (a mover's lone pin, which
    shares nothing and fits every budget; load affinity's remembered AND, copied and counted once), so they are
    written as they are.
    """
    if terms and prepared:
        target.patch.set("spec", *REQUIRED, value={"nodeSelectorTerms": list(terms)})
        return
    if terms:
        check_terms(terms, target.field("spec." + ".".join(REQUIRED)))
        target.patch.set("spec", *REQUIRED, value={"nodeSelectorTerms": copy_json(list(terms))})
        return
    affinity = target.patch.get("spec", "affinity", default=None) or {}
    node_affinity = {k: v for k, v in (affinity.get("nodeAffinity") or {}).items() if k != REQUIRED_KEY}
    if node_affinity:
        target.patch.set("spec", "affinity", "nodeAffinity", value=node_affinity)
    else:
        target.patch.set("spec", "affinity", value={k: v for k, v in affinity.items() if k != "nodeAffinity"})
