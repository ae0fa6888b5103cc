"""Questions about the nodes cost the tenant's input, never input × nodes or input²: proved by counting the work
(term parses, requirement evaluations, comparisons), never by timing it, over generated shapes. And the shortcuts
answer exactly what the node-by-node definitions answer."""

from __future__ import annotations

from typing import Any, ClassVar

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rules import pipeline
from rules.checks import placement
from rules.kube import nodeaffinity
from rules.kube.disclosed import EVERY_LABEL
from rules.kube.feasible import Feasibility, on_labels
from rules.kube.intlabels import BLOCK, IntegerLabel
from rules.kube.nodeaffinity import label_selector_term, merge_terms, name_requirement, term_parses, terms_match
from rules.kube.nodeset import NodeSet
from rules.kube.selectors import is_int64, requirement_matches
from rules.loadaffinity import nodeagents
from rules.loadaffinity.entries import entry_cluster_problems
from rules.model import Json
from testkit import hostile
from tests.rules.test_budget import counting
from tests.support import policy, subject, view_from

OS = "kubernetes.io/os"  # every node of testkit.hostile has it, as `linux`


def entries(count: int, requirements: int) -> list[Json]:
    """`count` distinct entries of `requirements` requirements each, matching no node, none of which a label index
    can narrow: the last is `os NotIn [linux, none-i]`, the others `DoesNotExist`, which every node passes."""
    return [
        {
            "nodeSelector": {
                "matchExpressions": [
                    *({"key": f"example.com/e{i}-{j}", "operator": "DoesNotExist"} for j in range(requirements - 1)),
                    {"key": OS, "operator": "NotIn", "values": ["linux", f"none-{i}"]},
                ]
            }
        }
        for i in range(count)
    ]


class Counts:
    """Calls of the work a node question does: parses of a term, requirements evaluated for every node at once,
    and requirements evaluated for one node (which a linear question never does)."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.parses: list[int] = []
        self.bits: list[int] = []
        self.per_node: list[int] = []
        monkeypatch.setattr("rules.kube.nodeset.term_parses", counting(self.parses, term_parses))
        monkeypatch.setattr(NodeSet, "_expression_bits", counting(self.bits, NodeSet._expression_bits))
        monkeypatch.setattr("rules.kube.nodeaffinity.requirement_matches", counting(self.per_node, requirement_matches))

    def take(self) -> tuple[int, int, int]:
        found = (len(self.parses), len(self.bits), len(self.per_node))
        self.parses.clear()
        self.bits.clear()
        self.per_node.clear()
        return found


@settings(max_examples=15, deadline=None)
@given(count=st.integers(1, 6), requirements=st.integers(1, 6), node_count=st.integers(1, 40))
def test_entries_are_checked_once_per_question_whatever_the_node_count(
    count: int, requirements: int, node_count: int
) -> None:
    """Each entry's selector is parsed once and each requirement evaluated once, for all nodes: doubling the nodes
    changes nothing, doubling the entries or their requirements doubles the work."""
    with pytest.MonkeyPatch.context() as patched:
        counts = Counts(patched)

        def asked(entry_count: int, per_entry: int, nodes: int) -> tuple[int, int, int]:
            problems = entry_cluster_problems(entries(entry_count, per_entry), "la", view_from(*hostile.nodes(nodes)))
            assert len(problems) == entry_count  # each matches none of the nodes
            return counts.take()

        base = asked(count, requirements, node_count)
        assert base == (count, count * requirements, 0)
        assert asked(count, requirements, 2 * node_count) == base
        assert asked(2 * count, requirements, node_count) == (2 * count, 2 * count * requirements, 0)
        assert asked(count, 2 * requirements, node_count) == (count, 2 * count * requirements, 0)


@settings(max_examples=10, deadline=None)
@given(count=st.integers(1, 5), requirements=st.integers(1, 4), node_count=st.integers(1, 30))
def test_node_agent_counts_are_linear(count: int, requirements: int, node_count: int) -> None:
    """The node-agent warning's counts per entry: a parse and the requirements per entry, nothing per node."""
    with pytest.MonkeyPatch.context() as patched:
        counts = Counts(patched)

        def asked(nodes: int) -> tuple[int, int, int]:
            view = view_from(*hostile.nodes(nodes))
            assert all(
                found.matching == 0 for found in nodeagents.entry_nodes(entries(count, requirements), view, "velero")
            )
            return counts.take()

        assert asked(node_count) == asked(2 * node_count) == (count, count * requirements, 0)


def _validate_counting(monkeypatch: pytest.MonkeyPatch, pod: Json, nodes: list[Json]) -> tuple[list[str], int]:
    """The validation warnings of `pod`, and how many node questions were asked."""
    asked: list[int] = []
    for name in ("admitting", "answer", "names_matching", "matching"):
        monkeypatch.setattr(NodeSet, name, counting(asked, getattr(NodeSet, name)))
    decision = pipeline.validate(subject(pod), view_from(*nodes), policy())
    return list(decision.warnings), len(asked)


guesses = st.lists(st.sampled_from(("acme", "globex", "initech", "x")), min_size=1, max_size=4)


@settings(max_examples=20, deadline=None)
@given(guessed=guesses, customers=st.lists(st.sampled_from(("acme", "globex", "initech")), min_size=1, max_size=4))
def test_an_untrusted_role_learns_nothing_of_the_nodes(guessed: list[str], customers: list[str]) -> None:
    """A tenant's pod claiming the backup role, guessing a label value of each node in its load-affinity entries:
    no entry is evaluated against the nodes, so its answer is the same whatever the nodes' labels are."""
    annotation = [
        {"nodeSelector": {"matchLabels": {"kubernetes.io/hostname": f"node-{i:05d}", "customer": guess}}}
        for i, guess in enumerate(guessed)
    ]
    import json

    pod = hostile.pod(
        "claims-backup",
        annotations={"storage-affinity.io/role": "backup", "storage-affinity.io/load-affinity": json.dumps(annotation)},
    )
    nodes = hostile.nodes(len(customers))
    labelled = hostile.nodes(len(customers))
    for node, customer in zip(labelled, customers, strict=True):
        node["metadata"]["labels"]["customer"] = customer
    with pytest.MonkeyPatch.context() as patched:
        plain, asked = _validate_counting(patched, pod, nodes)
        told, asked_too = _validate_counting(patched, pod, labelled)
    assert plain == told
    assert asked == asked_too == 0
    assert plain[-1].endswith("not checked against the nodes: role backup is not trusted in this namespace")
    # the same pod where the policy trusts the role is checked against the nodes
    pod["metadata"]["namespace"] = hostile.VELERO_NAMESPACE
    with pytest.MonkeyPatch.context() as patched:
        _, trusted_asked = _validate_counting(patched, pod, labelled)
    assert trusted_asked > 0


# --- Gt and Lt ------------------------------------------------------------------------------------------------

label_values = st.one_of(
    st.integers(-(2**64), 2**64).map(str),
    st.sampled_from(("+5", "-0", "007", "9223372036854775807", "-9223372036854775808", "9223372036854775808", "x")),
    st.integers(0, 300).map(str),
)


@settings(max_examples=200, deadline=None)
@given(values=st.lists(label_values, max_size=3 * BLOCK + 5), bound=st.integers(-(2**63), 2**63 - 1))
def test_integer_label_is_the_comparison_of_every_value(values: list[str], bound: int) -> None:
    """`greater` and `less` are the nodes whose value, a 64-bit integer, is above or below the bound, across
    block boundaries; a value that is not an int64 never matches."""
    by_value: dict[str, list[int]] = {}
    for index, value in enumerate(values):
        by_value.setdefault(value, []).append(index)
    label = IntegerLabel(by_value, len(values))
    above = sum(1 << i for i, v in enumerate(values) if is_int64(v) and int(v) > bound)
    below = sum(1 << i for i, v in enumerate(values) if is_int64(v) and int(v) < bound)
    assert label.greater(bound) == above
    assert label.less(bound) == below
    for i, value in enumerate(values):  # bounds equal to the values themselves, where bisection may slip
        if is_int64(value):
            exact = int(value)
            assert label.greater(exact) == sum(1 << j for j, v in enumerate(values) if is_int64(v) and int(v) > exact)
            assert label.less(exact) == sum(1 << j for j, v in enumerate(values) if is_int64(v) and int(v) < exact)
        if i > 5:
            break


@settings(max_examples=10, deadline=None)
@given(terms=st.integers(1, 50), node_count=st.integers(1, 60))
def test_gt_parses_each_label_value_once_per_snapshot(terms: int, node_count: int) -> None:
    """`Gt` terms on a per-node label: each value of the label is read as an integer once per snapshot, not once
    per term; doubling the terms doubles nothing but the bisections."""
    parsed: list[int] = []
    nodes = hostile.nodes(node_count)
    for i, node in enumerate(nodes):
        node["metadata"]["labels"]["example.com/rank"] = str(i)

    def gt(count: int) -> list[Json]:
        return [
            {"matchExpressions": [{"key": "example.com/rank", "operator": "Gt", "values": [str(i)]}]}
            for i in range(count)
        ]

    for count in (terms, 2 * terms):
        parsed.clear()
        cluster = NodeSet(nodes)
        with pytest.MonkeyPatch.context() as patched:
            patched.setattr("rules.kube.intlabels.is_int64", counting(parsed, is_int64))
            admitted = cluster.admitting(gt(count))
        assert cluster.names(admitted) == [n["metadata"]["name"] for n in nodes if terms_match(gt(count), n)]
        assert len(parsed) == node_count  # each distinct value once, whatever the number of terms


# --- placement's failing requirement ----------------------------------------------------------------------------


class Compared(dict[str, Any]):
    """A requirement that counts how often it is compared for equality (scanning a list compares each item)."""

    compared: ClassVar[list[int]] = []

    def __eq__(self, other: object) -> bool:
        Compared.compared.append(1)
        return dict.__eq__(self, other)

    __hash__ = None


@settings(max_examples=10, deadline=None)
@given(size=st.integers(1, 200))
def test_the_failing_requirement_is_found_in_one_pass(size: int) -> None:
    """A term of `size` field requirements whose last one the node fails: each requirement is checked once and
    none is compared with the others (a scan of the term's list for each of them was size² comparisons)."""
    node = hostile.nodes(2)[1]

    def term(count: int) -> Json:
        fields = [Compared(key="metadata.name", operator="NotIn", values=[f"other-{j}"]) for j in range(count - 1)]
        fields.append(Compared(key="metadata.name", operator="NotIn", values=[node["metadata"]["name"]]))
        return {"matchFields": fields}

    for count in (size, 2 * size):
        Compared.compared.clear()
        assert placement._failing(term(count), node) == f"metadata.name NotIn [{node['metadata']['name']}] fails"
        assert len(Compared.compared) == 0


# --- the restriction to nodes with a node-agent -----------------------------------------------------------------


def _named_by_walking(nodes: NodeSet, base: list[Json] | None, with_agent: frozenset[str], cap: int) -> Any:
    """The definition: each node with a node-agent, in name order, crossed with the terms it matches."""
    named: list[Json] = []
    for name in sorted(with_agent):
        pin = {"matchFields": [name_requirement(name)]}
        node = nodes.get(name) or {"metadata": {"name": name}}
        named.extend([pin] if base is None else [merge_terms(t, pin) for t in base if terms_match([t], node)])
    return named if len(named) <= cap else None


zones = st.sampled_from(("zone-a", "zone-b", "zone-c", "zone-d"))


@settings(max_examples=60, deadline=None)
@given(
    node_count=st.integers(1, 12),
    picked=st.lists(st.integers(0, 14), max_size=8),
    term_zones=st.none() | st.lists(st.lists(zones, min_size=1, max_size=2), min_size=1, max_size=4),
    cap=st.integers(0, 12),
)
def test_named_nodes_are_the_walk_over_each_node(
    node_count: int, picked: list[int], term_zones: list[list[str]] | None, cap: int
) -> None:
    """Naming nodes term by term gives the node-by-node answer, evaluating each term once."""
    cluster = NodeSet(hostile.nodes(node_count))
    with_agent = frozenset(f"node-{i:05d}" for i in picked)
    base = (
        None
        if term_zones is None
        else [
            label_selector_term(
                {"matchExpressions": [{"key": "topology.kubernetes.io/zone", "operator": "In", "values": z}]}
            )
            for z in term_zones
        ]
    )
    expected = _named_by_walking(cluster, base, with_agent, cap)
    asked: list[int] = []
    with pytest.MonkeyPatch.context() as patched:
        patched.setattr(NodeSet, "admitting", counting(asked, NodeSet.admitting))
        assert nodeagents._named(cluster, base, with_agent, cap) == expected
    assert len(asked) <= len(base or ())


# --- what the bit sets answer equals the definitions ------------------------------------------------------------


@settings(max_examples=60, deadline=None)
@given(node_count=st.integers(0, 20), zone=zones, pinned=st.integers(0, 25))
def test_volume_nodes_and_within_are_the_walk(node_count: int, zone: str, pinned: int) -> None:
    nodes = hostile.nodes(node_count)
    cluster = NodeSet(nodes)
    pv_terms: list[Json] = [
        {"matchExpressions": [{"key": "topology.kubernetes.io/zone", "operator": "In", "values": [zone]}]},
        {"matchFields": [{"key": "metadata.name", "operator": "In", "values": [f"node-{pinned:05d}"]}]},
    ]
    pv_only = on_labels(EVERY_LABEL, volumes=True)
    assert Feasibility(cluster, pv_only, volume_terms=[pv_terms]).names() == {
        n["metadata"]["name"] for n in nodes if nodeaffinity.volume_terms_match(pv_terms, n)
    }
    admitted = cluster.admitting(pv_terms)
    walked = [n for n in nodes if terms_match(pv_terms, n)]
    assert list(cluster.matching(lambda _: True, within=admitted)) == walked
    assert cluster.names(admitted) == [n["metadata"]["name"] for n in walked]
    assert cluster.mask_of([*cluster.names(admitted), "not-a-node"]) == admitted
