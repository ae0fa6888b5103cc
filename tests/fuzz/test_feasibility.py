"""The one answer to "where may this pod run" (rules/kube/feasible.py) is the node-by-node definition, whatever the
filters: for random nodes (labels, taints, cordon) and pods (nodeName, nodeSelector, required terms with
`matchFields` and hostname pins, tolerations, bound PVs' terms), every way of asking `Feasibility` (any, names,
nodes, the bit set, one node) gives what `pod_fits_node`, `volume_terms_match` and the tolerations helper say of
each node. The bit sets, the nodeName and `matchFields` pins and the memo behind it are what this checks: a fast
path that drifts from the definition, or two option sets that share a remembered answer, fails it.
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping, Sequence
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from rules.kube.disclosed import EVERY_LABEL, disclosed_keys, disclosed_spec
from rules.kube.feasible import UNSCHEDULABLE_TAINT, Filters, feasibility
from rules.kube.nodeaffinity import pod_fits_node, volume_terms_match
from rules.kube.nodeset import NodeSet
from rules.kube.tolerations import node_tolerated, tolerates
from rules.model import Json
from tests.fuzz.profiles import examples

HOSTNAME, ZONE = "kubernetes.io/hostname", "topology.kubernetes.io/zone"
#: Two disclosed keys (well-known) and two a tenant may not read.
KEYS = (HOSTNAME, ZONE, "customer", "rank")
VALUES = ("n0", "n1", "a", "b", "1", "7")
NAMES = ("n0", "n1", "n2", "n3")
DISCLOSED = disclosed_keys(())
TAINT_KEYS = ("dedicated", "gpu", UNSCHEDULABLE_TAINT["key"])
EFFECTS = ("NoSchedule", "NoExecute", "PreferNoSchedule")


@st.composite
def nodes(draw: st.DrawFn) -> list[Json]:
    out = []
    for name in NAMES[: draw(st.integers(0, len(NAMES)))]:
        labels = draw(st.dictionaries(st.sampled_from(KEYS), st.sampled_from(VALUES), max_size=3))
        spec: Json = {}
        if draw(st.booleans()):
            spec["unschedulable"] = True
        if taints := draw(st.lists(taint(), max_size=2)):
            spec["taints"] = taints
        out.append({"kind": "Node", "apiVersion": "v1", "metadata": {"name": name, "labels": labels}, "spec": spec})
    return out


@st.composite
def taint(draw: st.DrawFn) -> Json:
    found: Json = {"key": draw(st.sampled_from(TAINT_KEYS)), "effect": draw(st.sampled_from(EFFECTS))}
    if draw(st.booleans()):
        found["value"] = draw(st.sampled_from(("true", "x")))
    return found


@st.composite
def toleration(draw: st.DrawFn) -> Json:
    found: Json = {"operator": draw(st.sampled_from(("Exists", "Equal")))}
    if draw(st.booleans()) or found["operator"] == "Equal":
        found["key"] = draw(st.sampled_from(TAINT_KEYS))
    if found["operator"] == "Equal":
        found["value"] = draw(st.sampled_from(("true", "x")))
    if draw(st.booleans()):
        found["effect"] = draw(st.sampled_from(EFFECTS[:2]))
    return found


@st.composite
def requirement(draw: st.DrawFn) -> Json:
    operator = draw(st.sampled_from(("In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt")))
    key = draw(st.sampled_from(KEYS))
    if operator in ("Exists", "DoesNotExist"):
        values: list[str] = []
    elif operator in ("Gt", "Lt"):
        values = [draw(st.sampled_from(("0", "5")))]
    else:
        values = draw(st.lists(st.sampled_from(VALUES), min_size=1, max_size=2))
    return {"key": key, "operator": operator, "values": values}


@st.composite
def term(draw: st.DrawFn) -> Json:
    """A node selector term: label requirements, a `metadata.name` pin (In or NotIn), a hostname pin, or none."""
    out: Json = {}
    expressions = draw(st.lists(requirement(), max_size=2))
    if draw(st.booleans()):
        expressions.append({"key": HOSTNAME, "operator": "In", "values": [draw(st.sampled_from(NAMES))]})
    if expressions:
        out["matchExpressions"] = expressions
    if draw(st.booleans()):
        operator = draw(st.sampled_from(("In", "NotIn")))
        out["matchFields"] = [{"key": "metadata.name", "operator": operator, "values": [draw(st.sampled_from(NAMES))]}]
    return out


@st.composite
def pods(draw: st.DrawFn) -> Json:
    spec: Json = {}
    if draw(st.integers(0, 3)) == 0:
        spec["nodeName"] = draw(st.sampled_from((*NAMES, "gone")))
    if selector := draw(st.dictionaries(st.sampled_from(KEYS), st.sampled_from(VALUES), max_size=2)):
        spec["nodeSelector"] = selector
    if terms := draw(st.none() | st.lists(term(), max_size=3)):
        spec["affinity"] = {
            "nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": terms}}
        }
    if tolerations := draw(st.lists(toleration(), max_size=2)):
        spec["tolerations"] = tolerations
    return spec


def naive(spec: Mapping[str, Any], pv_terms: Sequence[Sequence[Json]], filters: Filters, node: Json) -> bool:
    """The definition, one node at a time: the NodeName filter, `pod_fits_node` on the labels judged, the PVs'
    terms on labels only, then cordon and taints with the pod's and the extra tolerations."""
    name, node_spec = node["metadata"]["name"], node.get("spec") or {}
    if spec.get("nodeName") and spec["nodeName"] != name:
        return False
    if not pod_fits_node(disclosed_spec(spec, filters.labels), node):
        return False
    if filters.volumes and not all(volume_terms_match(terms, node) for terms in pv_terms):
        return False
    tolerations = [*(spec.get("tolerations") or ()), *filters.tolerations]
    if filters.cordon and node_spec.get("unschedulable") and not tolerates(tolerations, UNSCHEDULABLE_TAINT):
        return False
    return not filters.taints or node_tolerated(tolerations, node)


@settings(max_examples=examples(150))
@given(
    cluster=nodes(),
    spec=pods(),
    pv_terms=st.lists(st.lists(term(), max_size=2), max_size=2),
    extra=st.lists(toleration(), max_size=2),
)
def test_every_option_set_is_the_node_by_node_definition(
    cluster: list[Json], spec: Json, pv_terms: list[list[Json]], extra: list[Json]
) -> None:
    snapshot = NodeSet(cluster)  # one snapshot for every option set: their remembered answers must not meet
    for taints, cordon, volumes, labels, tolerations in itertools.product(
        (False, True), (False, True), (False, True), (EVERY_LABEL, DISCLOSED), ((), tuple(extra))
    ):
        filters = Filters(taints=taints, cordon=cordon, volumes=volumes, labels=labels, tolerations=tolerations)
        expected = [node["metadata"]["name"] for node in cluster if naive(spec, pv_terms, filters, node)]
        asked = f"{filters} for {spec} with PV terms {pv_terms}"
        fresh = feasibility(NodeSet(cluster), spec, filters, volume_terms=pv_terms)
        assert [node["metadata"]["name"] for node in fresh.nodes()] == expected, asked
        assert fresh.names() == set(expected), asked
        assert fresh.any() is bool(expected), asked
        assert snapshot.names(feasibility(snapshot, spec, filters, volume_terms=pv_terms).mask) == expected, asked
        assert [fresh.fits(node) for node in cluster] == [node["metadata"]["name"] in expected for node in cluster]
        for _ in range(2):  # remembered under the pod's key, with the filters added to it
            remembered = feasibility(
                snapshot, spec, filters, volume_terms=pv_terms, key=("pod", repr(spec), repr(pv_terms))
            )
            assert remembered.any() is bool(expected), asked
            assert remembered.names() == set(expected), asked
