"""NodeSet answers "does any node fit?" exactly as walking every node does, and the index renews it only when a
node's name or labels change."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from rules.kube.nodeaffinity import pod_fits_node, required_terms, terms_key, terms_match, volume_terms_match
from rules.kube.nodeset import NodeSet
from rules.memo import Memo
from rules.model import Json
from tests.support import dig
from webhook.state.index import ClusterIndex

KEYS = ("zone", "disk", "kubernetes.io/hostname", "rank")
VALUES = ("a", "b", "c", "1", "7", "bad value")  # "bad value" is no valid label value: its term never parses


def node(name: str, **labels: str) -> Json:
    return {"kind": "Node", "apiVersion": "v1", "metadata": {"name": name, "labels": labels}}


@st.composite
def nodes(draw: st.DrawFn) -> list[Json]:
    count = draw(st.integers(0, 12))
    return [
        node(f"n{i}", **draw(st.dictionaries(st.sampled_from(KEYS), st.sampled_from(VALUES[:5]), max_size=3)))
        for i in range(count)
    ]


@st.composite
def requirement(draw: st.DrawFn) -> Json:
    operator = draw(st.sampled_from(("In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt", "Bogus")))
    key = draw(st.sampled_from(KEYS))
    if operator in ("Exists", "DoesNotExist"):
        values: list[str] = draw(st.sampled_from(([], ["a"])))
    elif operator in ("Gt", "Lt"):
        values = [draw(st.sampled_from(("0", "5", "x")))]
    else:
        values = draw(st.lists(st.sampled_from(VALUES), max_size=3))
    return {"key": key, "operator": operator, "values": values}


@st.composite
def field(draw: st.DrawFn) -> Json:
    return {
        "key": draw(st.sampled_from(("metadata.name", "metadata.uid"))),
        "operator": draw(st.sampled_from(("In", "NotIn"))),
        "values": draw(st.lists(st.sampled_from(("n0", "n3", "n99")), min_size=1, max_size=2)),
    }


@st.composite
def term(draw: st.DrawFn) -> Json:
    out: Json = {}
    if expressions := draw(st.lists(requirement(), max_size=3)):
        out["matchExpressions"] = expressions
    if fields := draw(st.lists(field(), max_size=1)):
        out["matchFields"] = fields
    return out


terms = st.lists(term(), max_size=3)


@settings(max_examples=400, deadline=None)
@given(
    cluster=nodes(),
    required=st.none() | terms,
    pv_terms=st.lists(terms, max_size=2),
    selector=st.dictionaries(st.sampled_from(KEYS), st.sampled_from(VALUES[:4]), max_size=2),
)
def test_the_bit_sets_are_the_walk_over_every_node(
    cluster: list[Json], required: list[Json] | None, pv_terms: list[list[Json]], selector: dict[str, str]
) -> None:
    spec: Json = {"nodeSelector": selector}
    if required is not None:
        spec["affinity"] = {
            "nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": required}}
        }

    def fits(candidate: Json) -> bool:
        return pod_fits_node(spec, candidate) and all(volume_terms_match(t, candidate) for t in pv_terms)

    own = required_terms(spec)  # no terms: no required node affinity
    expected = any(fits(n) for n in cluster)
    nodeset = NodeSet(cluster)
    # every node at once, as a bit set: what `fits` says of each node (unparsable terms, matchFields that a PV's
    # terms never see, NotIn on a missing label, Gt/Lt)
    admitted = nodeset.admitting(own, selector=selector, volume_terms=pv_terms)
    assert nodeset.names(admitted) == [n["metadata"]["name"] for n in cluster if fits(n)]
    assert nodeset.mask_of(["not-in-the-snapshot"]) == 0
    # the nodes themselves, for the audit's stuck pods: every match, in order
    assert [id(n) for n in nodeset.matching(fits, within=admitted)] == [id(n) for n in cluster if fits(n)]
    assert nodeset.answer("question", lambda: bool(admitted)) is expected
    assert nodeset.answer("question", lambda: not expected) is expected  # remembered
    if required is not None:
        assert bool(NodeSet(cluster).admitting(required)) is any(terms_match(required, n) for n in cluster)


def test_admitting_evaluates_each_term_once_whatever_the_node_count(monkeypatch: Any) -> None:
    """1,000 `NotIn` + `DoesNotExist` terms that match no node (the label index cannot narrow them) against 1,000
    nodes: each requirement is evaluated once for all nodes, not once per node (a million evaluations before)."""
    from testkit import hostile
    from tests.rules.test_budget import counting

    calls: list[int] = []
    monkeypatch.setattr(NodeSet, "_expression_bits", counting(calls, NodeSet._expression_bits))
    cluster = NodeSet(hostile.nodes(1000))
    many = hostile.unnarrowable_terms(1000)
    assert cluster.admitting(many) == 0
    assert len(calls) == 2000  # two requirements a term
    assert cluster.admitting(many) == 0 and len(calls) == 2000  # remembered for the snapshot


def test_an_answer_is_remembered_per_key_for_the_snapshot() -> None:
    nodeset = NodeSet([node("n1", zone="a"), node("n2", zone="b")])
    asked: list[str] = []

    def fits(candidate: Json) -> bool:
        asked.append(candidate["metadata"]["name"])
        return bool(candidate["metadata"]["labels"]["zone"] == "b")

    zone_b = [{"matchExpressions": [{"key": "zone", "operator": "In", "values": ["b"]}]}]
    within = nodeset.admitting(zone_b)
    assert nodeset.names_matching(("zone", "b"), fits, within=within) == {"n2"}
    assert asked == ["n2"]  # only the node the bit set admits is checked
    assert nodeset.names_matching(("zone", "b"), fits, within=within) == {"n2"}
    assert asked == ["n2"]  # the second answer is the first


def _index(*objects: Json) -> ClusterIndex:
    index = ClusterIndex()
    for obj in objects:
        index.apply(obj)
    return index


def test_the_index_renews_its_snapshot_only_when_names_labels_taints_or_readiness_change() -> None:
    index = _index(node("n1", zone="a"), node("n2", zone="b"))
    first = index.node_set()
    assert index.node_set() is first
    index.apply({**node("n1", zone="a"), "status": {"conditions": [{"type": "MemoryPressure", "status": "False"}]}})
    assert index.node_set() is first  # a status update that says nothing of readiness
    unready = {"conditions": [{"type": "Ready", "status": "Unknown"}]}
    index.apply({**node("n1", zone="a"), "status": unready})
    assert index.node_set() is not first and dig(index.node_set().get("n1"), "status") == unready  # causes read it
    first = index.node_set()
    index.apply({**node("n1", zone="a"), "spec": {"unschedulable": True}})
    cordoned = index.node_set()
    assert cordoned is not first and cordoned.get("n1") == index.node("n1")
    first = cordoned
    index.apply({**node("n1", zone="c"), "spec": {"unschedulable": True}})  # the same cordon, a new label
    relabelled = index.node_set()
    assert relabelled is not first
    zone_c = [{"matchExpressions": [{"key": "zone", "operator": "In", "values": ["c"]}]}]
    assert relabelled.names(relabelled.admitting(zone_c)) == ["n1"]
    index.remove(node("n1"))
    assert index.node_set().admitting(zone_c) == 0
    index.apply({"kind": "Node", "apiVersion": "v1", "metadata": {"name": "bare"}})  # a new node without labels
    assert "bare" in {n["metadata"]["name"] for n in index.node_set()}
    index.replace_kind("Node", [node("n3", zone="c")])
    assert [n["metadata"]["name"] for n in index.node_set()] == ["n3"]


def test_terms_key_tells_apart_what_json_tells_apart() -> None:
    empty: list[Any] = []
    assert terms_key([{}]) != terms_key([{"matchExpressions": empty}])
    assert terms_key([{"matchExpressions": [{"key": "a", "operator": "In", "values": ["1"]}]}]) != terms_key(
        [{"matchExpressions": [{"key": "a", "operator": "In", "values": [1]}]}]
    )
    with_extra = {"matchExpressions": [{"key": "a", "operator": "Exists", "values": []}], "x": 1}
    assert terms_key([with_extra]) != terms_key([{k: v for k, v in with_extra.items() if k != "x"}])


def test_an_identity_memo_answers_for_the_very_objects_only() -> None:
    memo: Memo[int] = Memo(maxsize=3)
    first = ["a"]
    assert memo.by_identity((first,), "k", lambda: 1) == 1
    assert memo.by_identity((first,), "k", lambda: 2) == 1  # the same object: remembered
    assert memo.by_identity((["a"],), "k", lambda: 3) == 3  # an equal object is another input
    assert memo.by_identity((first,), "other", lambda: 4) == 4  # the structural part of the key counts too
    del first  # the memo still holds it, so no new object can take its id while its entry lives
    assert memo.by_identity((["b"],), "k", lambda: 5) == 5
    assert len(memo) <= 3  # bounded: emptied when full
