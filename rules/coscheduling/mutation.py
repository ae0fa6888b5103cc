"""Co-schedule a data mover with the pod that holds its ReadWriteOnce volume (VolSync's "RWO volume affinity",
docs/design.md#4-co-scheduling-movers), decided afresh for every new mover pod instead of VolSync's periodic
re-scan.

A Job's pod template is always placed with `requiredAffinity`: its `metadata.name` requirement names the node, so
together with the `co-scheduled-with` annotation it marks itself as the webhook's, and the pod-level decision
can replace exactly that when the anchor has moved by the time the Job creates its pod.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from rules.annotations import CO_SCHEDULED_WITH
from rules.context import Context, PodTarget
from rules.coscheduling.anchors import Plan, plan
from rules.coscheduling.claimpods import Hold, name_of, phase_of
from rules.coscheduling.pinning import (
    NODE_NAME,
    NODE_SELECTOR,
    REQUIRED_AFFINITY,
    hostname_selector,
    node_name_unsafe,
    pin_terms,
    placement_mode,
    unpin_terms,
    write_required,
)
from rules.kube.feasible import Feasibility, on_labels
from rules.kube.nodeaffinity import name_requirement, required_terms
from rules.kube.tolerations import merge_tolerations
from rules.kube.volumes import OWNED
from rules.model import Json


def mutate_mover(ctx: Context, target: PodTarget) -> None:
    """The mutating rule for `mover` pods and Job templates."""
    spec = target.spec
    if spec.get("nodeName"):
        ctx.reason(f"co-scheduling: not re-pinned, {target.field('spec.nodeName')} is already {spec['nodeName']}")
        return
    inherited = inherited_pin(target.metadata, spec)
    result = plan(ctx.view, ctx.policy, target)
    for problem in result.problems:
        # The validating webhook reports the others, for Pods and Jobs alike.
        if problem.kind in ("split", "two-nodes"):
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
    if mode == NODE_NAME and (why := node_name_unsafe(result.volumes, spec)):
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
        write_required(target, terms, prepared=original is None)  # a lone pin: fresh, one term
    if node_selector != (spec.get("nodeSelector") or {}):
        target.patch.set("spec", "nodeSelector", value=node_selector)
    if mode == NODE_NAME:
        target.patch.set("spec", "nodeName", value=node)

    anchors = [h.anchor for h in result.holds if h.anchor and h.node == node and h.volume.access == OWNED]
    if ctx.policy.copy_tolerations:
        extra = [t for anchor in anchors for t in (anchor.get("spec") or {}).get("tolerations") or ()]
        own = list(spec.get("tolerations") or ())
        merged = merge_tolerations(own, extra, target.field("spec.tolerations"))
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
    # A pod without terms of its own got the lone pin, which names this very node: only its own terms can exclude it.
    _warn_if_excluded(ctx, target, lead, node=node, node_selector=node_selector, terms=terms if original else None)


def _unpin(target: PodTarget, node: str) -> None:
    """No fresh anchor: take back what the webhook wrote into the template, so the pod schedules freely."""
    write_required(target, unpin_terms(required_terms(target.spec), node))
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
    # Asked of the values directly (no pod spec is built to be read back), on the labels the pod's author may know.
    own = on_labels(ctx.policy.disclosed_node_labels, volumes=False)
    if not Feasibility(ctx.view, own, selector=node_selector, terms=terms or None).fits(obj):
        ctx.warn(
            f"{target.field('spec')}: own nodeSelector or node affinity excludes node {node}, which holds claim "
            f"{lead.claim}: the pod will stay Pending"
        )
