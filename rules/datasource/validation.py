"""Deny a pod that could never start because of where its claims' data comes from (docs/design.md#12-data-sources):
claims whose node-local sources sit on different nodes, or a source node the pod's own constraints exclude.

Checked on Pod and Job CREATE (a Job's template is the pod its controller creates at once) on the final object,
after the mutating webhook placed what it could, so the message names what is really in the way: each claim, its
source and that source's node.
"""

from __future__ import annotations

from rules.context import Context, PodTarget
from rules.datasource.exposer import upload_source
from rules.datasource.mutation import conflict
from rules.datasource.scope import in_scope
from rules.datasource.sources import NODE, source_places
from rules.kube.feasible import feasibility, on_labels
from rules.kube.workloads import POD_KINDS

FAMILY = "dataSource"


def check_data_source(ctx: Context, target: PodTarget) -> None:
    if target.kind not in POD_KINDS or ctx.subject.operation != "CREATE" or not in_scope(ctx.policy, target):
        return
    upload = upload_source(ctx.view, ctx.policy, target)
    places = source_places(ctx.view, ctx.policy, target.namespace, target.volumes(ctx.view), upload)
    nodes = [p for p in places if p.kind == NODE]
    if not nodes:
        return
    if problem := conflict(nodes):
        ctx.report(target.field(nodes[-1].volume.field), f"{problem}: the pod could never start", FAMILY)
        return
    place = nodes[0]
    spec = target.spec
    node_name = spec.get("nodeName")
    if node_name and node_name != place.node:
        ctx.report(
            target.field("spec.nodeName"),
            f'pins the pod to node "{node_name}", but claim {place.claim} is restored from {place.source}, which '
            f"lives on node {place.node}: the pod could never start",
            FAMILY,
        )
        return
    node = ctx.view.node(place.node)
    own = on_labels(ctx.policy.disclosed_node_labels, volumes=False)
    if node is not None and not feasibility(ctx.view, spec, own).fits(node):
        ctx.report(
            target.field("spec"),
            f"nodeSelector or required node affinity excludes node {place.node}, where claim {place.claim} "
            f"must be provisioned (restored from {place.source}, {place.holder}): the pod could never start",
            FAMILY,
        )
