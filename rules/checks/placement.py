"""Placement consistency (docs/design.md#6-validation): a new pod's node constraints must agree with each other,
with its Node and with the node-local volumes it mounts.

Checked on Pod and Job CREATE (a Job's template is the pod its controller creates at once; the finding names the
field under `spec.template`) on the object as it reaches the validating webhook, after every mutating webhook. A pod
whose `spec.nodeName` fails its own node affinity is rejected by the kubelet (`NodeAffinity`) after it was
admitted; a pod pinned away from its local PV never starts (the KubeVirt failure: the VM on one node, its disk on
another). Both are cheaper to refuse here, with a message that names the node, the volume and the PV.
"""

from __future__ import annotations

from collections.abc import Hashable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from rules import deadline
from rules.context import Context, PodTarget
from rules.kube.feasible import Feasibility, on_labels
from rules.kube.nodeaffinity import (
    REQUIRED,
    node_selector_matches,
    pinned_node,
    required_terms,
    term_matches,
    terms_key,
    terms_match,
    volume_terms_match,
)
from rules.kube.volumes import ClaimVolume, node_local_terms
from rules.kube.workloads import POD_KINDS
from rules.memo import Memo, digest
from rules.model import Json, Severity
from rules.quoting import clip, escaped

FAMILY = "placement"
REQUIRED_PATH = "spec." + ".".join(REQUIRED)
KUBELET = "the kubelet would reject the pod (NodeAffinity)"


@dataclass(frozen=True)
class LocalVolume:
    """A pod volume whose claim is bound to a PV with `nodeAffinity.required`: it can only be used there."""

    volume: str
    claim: str
    pv: str
    terms: list[Json]


def local_volumes(volumes: Sequence[ClaimVolume]) -> list[LocalVolume]:
    """The node-local volumes of a pod (rules.kube.volumes' classification): PVs bound to its claims that carry
    `nodeAffinity.required`. An unbound claim's PV is still the scheduler's choice, made with the pod in mind."""
    return [
        LocalVolume(v.volume, str(v.claim), str((v.pv or {}).get("metadata", {}).get("name")), list(v.pv_terms))
        for v in volumes
        if v.pv_terms is not None
    ]


def placement_consistency(ctx: Context, target: PodTarget) -> None:
    """The validating rule; Pods and Jobs on CREATE only (other workloads' pods come later, on other nodes)."""
    if target.kind not in POD_KINDS or ctx.subject.operation != "CREATE":
        return
    spec = target.spec
    volumes = target.volumes(ctx.view)
    node_name = spec.get("nodeName")
    if node_name:
        _check_named_node(ctx, target, str(node_name), local_volumes(volumes))
        return
    terms = required_terms(spec)
    pinned = pinned_node(terms)
    node = ctx.view.node(pinned) if pinned else None
    if node is not None:
        away = [lv for lv in local_volumes(volumes) if not volume_terms_match(lv.terms, node)]
        for lv in away:
            message = f'pins the pod to node "{pinned}" (matchFields), but {_away(lv)}'
            ctx.report(target.field(REQUIRED_PATH), message, FAMILY)
        if away:
            return
    _check_satisfiable(ctx, target, terms, volumes)


def _own(
    ctx: Context,
    target: PodTarget,
    terms: list[Json] | None,
    volume_terms: Sequence[Sequence[Json]] = (),
    key: Hashable | None = None,
) -> Feasibility:
    """The pod's constraints on the labels its author may know (what it may be told) and its PVs' terms: taints
    and cordon change by the minute, so they are not counted."""
    filters = on_labels(ctx.policy.disclosed_node_labels, volumes=True)
    selector = target.spec.get("nodeSelector")
    return Feasibility(ctx.view, filters, selector=selector, terms=terms, volume_terms=volume_terms, key=key)


def _check_named_node(ctx: Context, target: PodTarget, node_name: str, local: list[LocalVolume]) -> None:
    own = _own(ctx, target, required_terms(target.spec))
    node = ctx.view.node(node_name)
    if node is None:
        if len(ctx.view.node_set()):
            ctx.report(
                target.field("spec.nodeName"),
                f'node "{node_name}" is not known: if it does not exist the pod never starts',
                FAMILY,
                Severity.WARN,
            )
        return
    selector = own.selector
    if not node_selector_matches(selector, node):
        # the pod's own requirements that fail, never the node's labels: its author may not read Nodes
        misses = [
            f'{escaped(clip(str(key)))}="{escaped(clip(str(value)))}"'
            for key, value in selector.items()
            if not node_selector_matches({key: value}, node)
        ]
        ctx.report(
            target.field("spec.nodeSelector"),
            f'node "{node_name}" (spec.nodeName) fails nodeSelector {", ".join(misses)}; {KUBELET}',
            FAMILY,
        )
    terms = own.terms
    if terms is not None and not terms_match(terms, node):
        why = "; ".join(f"term {i}: {_failing(term, node)}" for i, term in enumerate(_checked(terms)))
        ctx.report(
            target.field(REQUIRED_PATH),
            f'node "{node_name}" (spec.nodeName) matches none of the required terms ({why}); {KUBELET}',
            FAMILY,
        )
    for lv in local:
        if not volume_terms_match(lv.terms, node):
            ctx.report(target.field("spec.nodeName"), f'pins the pod to node "{node_name}", but {_away(lv)}', FAMILY)


def _check_satisfiable(
    ctx: Context, target: PodTarget, terms: list[Json] | None, volumes: Sequence[ClaimVolume]
) -> None:
    """Warn when no known Node passes nodeSelector, required affinity (`terms`) and the PVs' terms together, judged
    on the labels the pod's author may know."""
    selector = target.spec.get("nodeSelector") or {}
    volume_terms = node_local_terms(volumes)
    if not selector and terms is None and not volume_terms:
        return  # nothing constrains the pod: every node fits
    key = (
        "pod",
        tuple(sorted(selector.items())) if selector else (),
        None if terms is None else terms_key(terms),
        tuple(_pv_terms_key(v) for v in volumes if v.pv_terms is not None),
    )
    own = _own(ctx, target, terms, volume_terms=volume_terms, key=key)
    if own.any() or not len(own.nodeset):
        return  # some node fits, or no node is known: nothing to tell
    parts = []
    if own.selector:
        parts.append("nodeSelector")
    if own.terms is not None:
        parts.append("required node affinity")
    parts.extend(f'volume "{lv.volume}" (PV {lv.pv})' for lv in local_volumes(volumes))
    ctx.report(
        target.field("spec"),
        f"no known node fits {' + '.join(parts)}: the pod would stay Pending",
        FAMILY,
        Severity.WARN,
    )


#: The `digest` of `terms_key` of a node-local PV's required terms, by the identity of the PV (a cluster index
#: object, replaced and never changed): the PVs a pod mounts repeat from review to review, and keying their terms
#: is most of what asking "does some node fit?" costs once the node set has answered it.
_PV_TERMS_KEYS: Memo[Hashable] = Memo(4096)


def _pv_terms_key(volume: ClaimVolume) -> Hashable:
    terms = volume.pv_terms or ()
    return _PV_TERMS_KEYS.by_identity((volume.pv,), None, lambda: digest(terms_key(terms)))


def _away(lv: LocalVolume) -> str:
    return (
        f'volume "{lv.volume}" (claim {lv.claim}) is bound to PV {lv.pv}, usable only on nodes with '
        f"{describe_terms(lv.terms)}: the pod could never mount it"
    )


def describe_terms(terms: Sequence[Mapping[str, Any]]) -> str:
    """Terms as people write them: requirements joined by `and`, terms by `or`."""
    shown = [" and ".join(_requirement(r) for r in _requirements(t)) or "(empty term)" for t in terms]
    return " or ".join(shown) or "(no terms: no node)"


def _checked(terms: Sequence[Mapping[str, Any]]) -> Iterator[Mapping[str, Any]]:
    """The terms, one deadline check each."""
    for term in terms:
        deadline.check()
        yield term


def _failing(term: Mapping[str, Any], node: Mapping[str, Any]) -> str:
    """The first requirement of a term that the node fails (or why the whole term fails): each requirement checked
    alone, once, in its own part."""
    if not _requirements(term):
        return "empty (matches no node)"
    for part in ("matchExpressions", "matchFields"):
        for requirement in term.get(part) or ():
            if not term_matches({part: [requirement]}, node):
                return f"{_requirement(requirement)} fails"
    return "fails"


def _requirements(term: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    return [*(term.get("matchExpressions") or ()), *(term.get("matchFields") or ())]


def _requirement(req: Mapping[str, Any]) -> str:
    operator = str(req.get("operator"))
    values = req.get("values") or []
    if operator in ("Exists", "DoesNotExist"):
        return f"{req.get('key')} {operator}"
    if operator in ("Gt", "Lt") and len(values) == 1:
        return f"{req.get('key')} {operator} {values[0]}"
    return f"{req.get('key')} {operator} [{', '.join(str(v) for v in values)}]"
