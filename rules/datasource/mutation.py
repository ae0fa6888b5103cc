"""Place a pod where the sources of its snapshot- and clone-restored claims can be provisioned
(docs/design.md#12-data-sources): the source's node, in the configured placement mode, ANDed with what the pod
already has; or, for a zone-following driver, the source PV's required terms.

The placement is idempotent and marked like co-scheduling's: `metadata.name In [node]` (or the hostname label)
and the annotation `storage-affinity.io/data-source-placed: <claim>=<node>` (`<claim>=pv/<PV>` for a zone, or
`<claim>=vsc/<content>` for a snapshot content's own topology).
A Job's pod template gets `requiredAffinity`, as co-scheduling's does: a source's node does not move.
"""

from __future__ import annotations

from collections.abc import Sequence

from rules import deadline
from rules.annotations import DATA_SOURCE_PLACED
from rules.context import Context, PodTarget
from rules.coscheduling.pinning import (
    NODE_NAME,
    NODE_SELECTOR,
    REQUIRED_AFFINITY,
    current_terms,
    hostname_selector,
    pin_terms,
    placement_mode,
    write_required,
)
from rules.datasource.exposer import upload_source
from rules.datasource.scope import in_scope
from rules.datasource.sources import FREE, NODE, UNRESOLVED, ZONE, SourcePlace, source_places
from rules.kube.nodeaffinity import and_terms, terms_imply
from rules.quoting import listed


def mutate_data_source(ctx: Context, target: PodTarget) -> None:
    """The mutating rule; runs after the role's own rule, for every pod the policy's `dataSource.scope` covers."""
    if not in_scope(ctx.policy, target):
        return
    upload = upload_source(ctx.view, ctx.policy, target)
    places = source_places(ctx.view, ctx.policy, target.namespace, target.volumes(ctx.view), upload)
    if not places:
        return
    held: set[int] = set()  # the places the pod already holds, by identity: a membership test per place, not a scan
    for place in places:
        deadline.check()
        if held_by_pod(target, place):
            held.add(id(place))
            ctx.reason(f"data source: claim {place.claim} from {place.source}: the pod holds {place.holder}'s terms")
        elif place.kind == UNRESOLVED:
            ctx.warn(f"claim {place.claim} not placed by its data source: {place.why}")  # fits 120 characters
            ctx.reason(f"data source: claim {place.claim} from {place.source}: unresolved, {place.why}")
        elif place.kind == FREE:
            ctx.reason(f"data source: claim {place.claim} from {place.source} (PV {place.pv}) is not node-local")
    nodes = [p for p in places if p.kind == NODE]
    if problem := conflict(nodes):
        ctx.reason(f"data source: no placement: {problem}")
        ctx.audit("data-source", "not placed: sources on different nodes")
        return
    nodes = [p for p in nodes if id(p) not in held]
    zones = [p for p in places if p.kind == ZONE and id(p) not in held]
    if not nodes and not zones:
        return
    if target.spec.get("nodeName"):
        ctx.reason(f"data source: not re-pinned, {target.field('spec.nodeName')} is already {target.spec['nodeName']}")
        return
    _place(ctx, target, nodes, zones)


def held_by_pod(target: PodTarget, place: SourcePlace) -> bool:
    """Whether a backup pod of Velero's exposer already holds its source PV's required terms (Velero 1.18.1 writes
    them, load affinity ANDs them in before this rule): the PV decides, a pin on top would be a second copy."""
    if not place.upload or not place.terms or place.kind not in (NODE, ZONE):
        return False
    current = current_terms(target)
    return current is not None and terms_imply(current, place.terms)


def conflict(nodes: Sequence[SourcePlace]) -> str:
    """Why claims whose sources sit on different nodes can never be provisioned for one pod ("" when they can)."""
    if len({p.node for p in nodes}) < 2:
        return ""
    shown = listed(nodes, lambda p: f"claim {p.claim} from {p.source} on node {p.node}", sep="; ")
    return f"claims restored from sources on different nodes, one pod can never provision them all: {shown}"


def _place(ctx: Context, target: PodTarget, nodes: list[SourcePlace], zones: list[SourcePlace]) -> None:
    original = current_terms(target)
    terms = original
    before = dict(target.patch.get("spec", "nodeSelector", default=None) or {})
    node_selector = dict(before)
    records: list[str] = []
    mode = ""
    if nodes:
        node = nodes[0].node
        mode = REQUIRED_AFFINITY if target.is_template else placement_mode(ctx, target)
        if mode == NODE_SELECTOR:
            mode, node_selector = hostname_selector(ctx, target, node, node_selector)
        if mode == NODE_NAME:  # the claim is unbound by definition: nodeName would block its provisioning
            ctx.warn(
                f"{target.field('spec.nodeName')}: not used, claim {nodes[0].claim} is not bound yet (nodeName would "
                "block its provisioning); used requiredAffinity"
            )
            mode = REQUIRED_AFFINITY
        if mode == REQUIRED_AFFINITY:
            terms = pin_terms(terms, node)
        records.extend(f"{p.claim}={node}" for p in nodes)
        for p in nodes:
            where = f"({p.holder}) lives on node {node}"
            ctx.reason(f"data source: claim {p.claim} from {p.source} {where}: placed there by {mode}")
    for zone in zones:
        deadline.check()
        terms = and_terms(terms, zone.terms)
        records.append(f"{zone.claim}=pv/{zone.pv}" if zone.pv else f"{zone.claim}=vsc/{zone.content}")
        ctx.reason(f"data source: claim {zone.claim} from {zone.source}: the pod follows {zone.holder}'s topology")
    if terms != original:
        write_required(target, terms)
    if node_selector != before:
        target.patch.set("spec", "nodeSelector", value=node_selector)
    record = ",".join(records)
    target.patch.set("metadata", "annotations", DATA_SOURCE_PLACED, value=record)
    ctx.audit("data-source-placed", f"{record}" + (f" by {mode}" if mode else ""))
