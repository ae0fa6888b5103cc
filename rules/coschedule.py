"""Co-schedule a data mover with the pod that holds its ReadWriteOnce volume (DESIGN §4, VolSync "RWO volume
affinity"), decided afresh for every new mover pod instead of VolSync's periodic re-scan.

A Job's pod template is always placed with `requiredAffinity`: its `metadata.name` requirement names the node, so
together with the `co-scheduled-with` annotation it marks itself as the webhook's, and the pod-level decision
can replace exactly that when the anchor has moved by the time the Job creates its pod.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from rules.anchors import Hold, Plan, name_of, phase_of, plan
from rules.annotations import CO_SCHEDULED_WITH, PLACEMENT, PLACEMENTS
from rules.context import Context, PodTarget
from rules.model import Json
from rules.nodeaffinity import HOSTNAME_LABEL, merge_terms, name_requirement, pod_fits_node, required_terms
from rules.tolerations import merge_tolerations
from rules.volumes import OWNED

REQUIRED_KEY = "requiredDuringSchedulingIgnoredDuringExecution"
REQUIRED_PATH = ("spec", "affinity", "nodeAffinity", REQUIRED_KEY)
REQUIRED_AFFINITY, NODE_SELECTOR, NODE_NAME = "requiredAffinity", "nodeSelector", "nodeName"


def mutate_mover(ctx: Context, target: PodTarget) -> None:
    """The mutating rule for `mover` pods and Job templates."""
    spec = target.spec
    if spec.get("nodeName"):
        ctx.reason(f"co-scheduling: not re-pinned, {target.field('spec.nodeName')} is already {spec['nodeName']}")
        return
    inherited = inherited_pin(target.metadata, spec)
    result = plan(ctx.view, ctx.policy, target)
    for problem in result.problems:
        # The validating webhook reports these for Pods; a Job template gets no other word about them.
        if target.is_template or problem.kind in ("split", "two-nodes"):
            ctx.warn(f"{problem.field}: {problem.message}")
        ctx.reason(f"co-scheduling: no placement: {problem.message}")
        ctx.audit("co-scheduling", f"not placed: {problem.kind} ({problem.field})")
    node = result.node
    if node is None or result.lead is None:
        if not result.problems:
            ctx.reason(f"co-scheduling: nothing to do: {result.idle}")
        if inherited:
            _unpin(target, inherited)
            ctx.reason(f"co-scheduling: removed the placement on {inherited} copied from the Job template")
            ctx.audit("co-scheduling", f"unpinned from {inherited}" + ("" if result.problems else ": claims not held"))
        return
    _place(ctx, target, result, node=node, lead=result.lead, inherited=inherited)


def placement_mode(ctx: Context, target: PodTarget) -> str:
    """The annotation `storage-affinity.io/placement` when valid (a bad value is denied by validation), else
    the policy's `coScheduling.placement`."""
    wanted = (target.metadata.get("annotations") or {}).get(PLACEMENT)
    return str(wanted) if wanted in PLACEMENTS else ctx.policy.placement


def inherited_pin(metadata: Mapping[str, Any], spec: Mapping[str, Any]) -> str | None:
    """The node of a placement the webhook wrote (into this object or the Job template it was made from): the
    `co-scheduled-with` annotation names the node and every required term holds `metadata.name In [node]`."""
    value = (metadata.get("annotations") or {}).get(CO_SCHEDULED_WITH)
    if not isinstance(value, str) or "/" not in value:
        return None
    node = value.rpartition("/")[2]
    terms = required_terms(spec)
    requirement = name_requirement(node)
    if node and terms and all(requirement in (t.get("matchFields") or ()) for t in terms):
        return node
    return None


def pin_terms(terms: Sequence[Mapping[str, Any]] | None, node: str) -> list[Json]:
    """Add `metadata.name In [node]` to every term (terms are ORed: a new term would loosen the pod).

    Only a pod without required node affinity gets a new term: an empty `nodeSelectorTerms` admits no node (the
    API server refuses it), and a pin in it would make the pod valid and schedulable.
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


# --- writing ---------------------------------------------------------------------------------------------------


def _place(ctx: Context, target: PodTarget, result: Plan, *, node: str, lead: Hold, inherited: str | None) -> None:
    spec = target.spec
    configured = placement_mode(ctx, target)
    mode = REQUIRED_AFFINITY if target.is_template else configured
    if target.is_template and configured != REQUIRED_AFFINITY:
        ctx.reason(f"co-scheduling: the Job template gets requiredAffinity; its pods get {configured} when created")
    node_selector = dict(spec.get("nodeSelector") or {})
    if mode == NODE_SELECTOR:
        mode, node_selector = hostname_selector(ctx, target, node, node_selector)
    if mode == NODE_NAME and (why := _node_name_unsafe(result, spec)):
        ctx.warn(f"{target.field('spec.nodeName')}: not used, {why}; used requiredAffinity")
        mode = REQUIRED_AFFINITY

    original = required_terms(spec)
    # The same node by requiredAffinity: the pin is already in every term, and taking it out and putting it back
    # would rewrite the user's own terms (duplicates collapsed) on every re-review.
    keep = inherited == node and mode == REQUIRED_AFFINITY
    terms = unpin_terms(original, inherited) if inherited and not keep else original
    if mode == REQUIRED_AFFINITY:
        terms = pin_terms(terms, node)
    if terms != original:
        _write_required(target, terms)
    if node_selector != (spec.get("nodeSelector") or {}):
        target.patch.set("spec", "nodeSelector", value=node_selector)
    if mode == NODE_NAME:
        target.patch.set("spec", "nodeName", value=node)

    anchors = [h.anchor for h in result.anchored if h.node == node and h.volume.access == OWNED and h.anchor]
    if ctx.policy.copy_tolerations:
        extra = [t for anchor in anchors for t in (anchor.get("spec") or {}).get("tolerations") or ()]
        own = list(spec.get("tolerations") or ())
        merged = merge_tolerations(own, extra)
        if merged != own:
            target.patch.set("spec", "tolerations", value=merged)

    anchor = name_of(lead.anchor or {})
    target.patch.set("metadata", "annotations", CO_SCHEDULED_WITH, value=f"{anchor}/{node}")
    moved = f" (moved from {inherited})" if inherited and inherited != node else ""
    ctx.reason(
        f"co-scheduled with pod {anchor} on node {node}{moved} by {mode}: claim {lead.claim} is ReadWriteOnce "
        f"and {anchor} is {phase_of(lead.anchor or {})} there"
    )
    ctx.audit("co-scheduled-with", f"{anchor}/{node} by {mode} for claim {lead.claim}")
    _warn_if_excluded(ctx, target, lead, node=node, node_selector=node_selector, terms=terms)


def hostname_selector(
    ctx: Context, target: PodTarget, node: str, current: dict[str, str]
) -> tuple[str, dict[str, str]]:
    """VolSync's way: the Node's hostname label, which may differ from its name; requiredAffinity when unknown."""
    obj = ctx.view.node(node)
    label = ((obj or {}).get("metadata") or {}).get("labels", {}).get(HOSTNAME_LABEL) if obj else None
    at = target.field("spec.nodeSelector")
    if obj is None:
        ctx.warn(f"{at}: Node {node} is unknown, so is its {HOSTNAME_LABEL} label; used requiredAffinity")
        return REQUIRED_AFFINITY, current
    if not label:
        ctx.warn(f"{at}: Node {node} has no {HOSTNAME_LABEL} label; used requiredAffinity")
        return REQUIRED_AFFINITY, current
    if current.get(HOSTNAME_LABEL, label) != label:
        ctx.warn(
            f'{at}[{HOSTNAME_LABEL}]: kept "{current[HOSTNAME_LABEL]}" (Node {node} is {label}); used requiredAffinity'
        )
        return REQUIRED_AFFINITY, current
    return NODE_SELECTOR, {**current, HOSTNAME_LABEL: str(label)}


def _node_name_unsafe(result: Plan, spec: Mapping[str, Any]) -> str:
    """nodeName bypasses the scheduler: no WaitForFirstConsumer provisioning, no scheduling gates."""
    unbound = [v.claim or v.volume for v in result.volumes if not v.bound]
    if unbound:
        return f"claim {', '.join(unbound)} is not bound yet (nodeName would block its provisioning)"
    if spec.get("schedulingGates"):
        return "the pod has schedulingGates (nodeName would bypass them)"
    return ""


def _write_required(target: PodTarget, terms: list[Json] | None) -> None:
    """Write the required terms whole; when none remain, drop the key from its parent (never an empty list)."""
    if terms:
        target.patch.set(*REQUIRED_PATH, value={"nodeSelectorTerms": terms})
        return
    affinity = target.spec.get("affinity") or {}
    node_affinity = {k: v for k, v in (affinity.get("nodeAffinity") or {}).items() if k != REQUIRED_KEY}
    if node_affinity:
        target.patch.set("spec", "affinity", "nodeAffinity", value=node_affinity)
    else:
        target.patch.set("spec", "affinity", value={k: v for k, v in affinity.items() if k != "nodeAffinity"})


def _unpin(target: PodTarget, node: str) -> None:
    """No fresh anchor: take back what the webhook wrote into the template, so the pod schedules freely."""
    _write_required(target, unpin_terms(required_terms(target.spec), node))
    annotations = {k: v for k, v in (target.metadata.get("annotations") or {}).items() if k != CO_SCHEDULED_WITH}
    target.patch.set("metadata", "annotations", value=annotations)


def _warn_if_excluded(
    ctx: Context,
    target: PodTarget,
    lead: Hold,
    *,
    node: str,
    node_selector: Mapping[str, str],
    terms: list[Json] | None,
) -> None:
    """The pod's own constraints are never removed; say so when they keep it off the only node it can use."""
    obj = ctx.view.node(node)
    if obj is None:
        return
    spec: Json = {"nodeSelector": dict(node_selector)}
    if terms:
        spec["affinity"] = {"nodeAffinity": {REQUIRED_KEY: {"nodeSelectorTerms": terms}}}
    if not pod_fits_node(spec, obj):
        ctx.warn(
            f"{target.field('spec')}: own nodeSelector or node affinity excludes node {node}, which holds claim "
            f"{lead.claim}: the pod will stay Pending"
        )
