"""Memos answer exactly what computing again answers, keep nothing of a review's keys, and stay within their byte
budget whatever sequence of keys and values they see."""

from __future__ import annotations

import gc
import weakref
from collections.abc import Callable, Hashable, Iterator
from typing import Any, TypeVar

import pytest
from hypothesis import given
from hypothesis import strategies as st

from bench.memory import large_pod
from rules import pipeline
from rules.checks import placement
from rules.coscheduling import claimpods
from rules.kube import tolerations
from rules.kube.names import label_key_error
from rules.kube.nodeaffinity import required_terms
from rules.loadaffinity import mutation, nodeagents
from rules.memo import ENTRY_BYTES, Memo, digest, json_weight
from rules.model import Subject
from rules.policy import default_policy
from testkit import hostile
from webhook.state.index import ClusterIndex

T = TypeVar("T")

scalars = (
    st.none()
    | st.booleans()
    | st.integers(-(2**70), 2**70)  # past 64 bits too: JSON cannot say them
    | st.floats(allow_nan=False, allow_infinity=False)  # a decoded review holds no non-finite number
    | st.text(max_size=12)
    | st.text(st.characters(categories=["Cs"]), min_size=1, max_size=2)  # lone surrogates
    | st.binary(max_size=20)
)
keys = st.recursive(scalars, lambda parts: st.lists(parts, max_size=4).map(tuple), max_leaves=12)


def constant(value: T) -> Callable[[], T]:
    return lambda: value


def shape(key: Any) -> Any:
    """What tells keys apart: their values with their types (`1`, `1.0`, `True` and `"1"` differ, as in JSON)."""
    if isinstance(key, tuple):
        return ("tuple", *map(shape, key))
    return (type(key).__name__, repr(key))


@given(st.lists(keys, max_size=30))
def test_a_memo_answers_what_computing_again_answers(sequence: list[Hashable]) -> None:
    memo: Memo[Any] = Memo(8)
    for key in sequence:
        assert memo.get(key, constant(shape(key))) == shape(key)


@given(keys, keys)
def test_a_digest_is_small_and_tells_keys_apart(one: Hashable, other: Hashable) -> None:
    assert len(digest(one)) <= 65
    assert (digest(one) == digest(other)) == (shape(one) == shape(other))


def test_a_digest_refuses_what_has_no_faithful_encoding() -> None:
    with pytest.raises(TypeError, match="not a memo key part"):
        digest(("a", object()))
    with pytest.raises(TypeError, match="not a memo key part"):
        digest((2**70, object()))


values = st.lists(st.text(max_size=40), max_size=60)


@given(
    st.integers(1, 16),
    st.integers(ENTRY_BYTES, 20 * ENTRY_BYTES),
    st.dictionaries(st.integers(0, 40), values),
    st.lists(st.integers(0, 40), max_size=60),
)
def test_a_memo_never_weighs_more_than_its_budget(
    maxsize: int, budget: int, table: dict[int, list[str]], sequence: list[int]
) -> None:
    memo: Memo[list[str]] = Memo(maxsize, budget=budget, weigh=json_weight)
    for key in sequence:
        value = table.get(key, [])
        assert memo.get(key, constant(value)) == value
        kept = memo._entries.values()
        assert memo.weight == sum(ENTRY_BYTES + json_weight(entry.value) for entry in kept) <= budget
        assert len(memo) <= maxsize


def test_a_value_heavier_than_the_budget_is_computed_and_not_kept() -> None:
    memo: Memo[list[str]] = Memo(budget=2 * ENTRY_BYTES, weigh=json_weight)
    big = ["x" * 1000]
    assert memo.get("k", lambda: big) is big
    assert len(memo) == 0 and memo.weight == 0


def _reachable(roots: list[object]) -> Iterator[object]:
    """Every object reachable from `roots`, through containers only (not through functions or classes)."""
    seen: set[int] = set()
    todo = list(roots)
    while todo:
        obj = todo.pop()
        if id(obj) in seen or isinstance(obj, type):
            continue
        seen.add(id(obj))
        yield obj
        todo.extend(gc.get_referents(obj))


@given(st.lists(st.text(min_size=1, max_size=30), min_size=1, max_size=8))
def test_a_memo_keeps_no_object_of_a_structural_key(parts: list[str]) -> None:
    fresh = ["".join(["<", part, ">"]) for part in parts]  # new string objects, as a review's are
    memo: Memo[bool] = Memo()
    memo.get(("question", tuple(fresh)), lambda: True)
    memo.by_identity((memo,), tuple(fresh), lambda: False)
    held = {id(obj) for obj in _reachable([memo._entries])}
    assert not held & {id(part) for part in fresh}


class _Snapshot:
    """A stand-in for a node set: replaced whole, never changed."""


def test_a_snapshot_entry_does_not_keep_its_snapshot_alive() -> None:
    memo: Memo[int] = Memo()
    first = _Snapshot()
    assert memo.by_snapshot((first,), "k", lambda: 1) == 1
    assert memo.by_snapshot((first,), "k", lambda: 2) == 1  # the same snapshot: remembered
    gone = weakref.ref(first)
    del first
    gc.collect()
    assert gone() is None
    for i in range(50):  # a new snapshot, perhaps at the freed one's address, is another input
        assert memo.by_snapshot((_Snapshot(),), "k", constant(10 + i)) == 10 + i


MEMOS: dict[str, Memo[Any]] = {
    "_LOAD_TERMS": mutation._LOAD_TERMS,
    "_COMBINED": mutation._COMBINED,
    "_SETTINGS": mutation._SETTINGS,
    "_SPLITS": nodeagents._SPLITS,
    "_PV_TERMS_KEYS": placement._PV_TERMS_KEYS,
    "_ROLES": claimpods._ROLES,
    "_POLICY_KEYS": tolerations._POLICY_KEYS,
}


def test_reviews_leave_none_of_their_strings_in_the_memos_keys_nor_in_unweighed_values() -> None:
    """A pod's required terms (the node-set memos), and a backup pod's load affinity and terms (load affinity's):
    their strings are in no key of any memo, nor in a value of a memo that does not weigh its values (those that
    do keep terms built for the pod, and are bounded in bytes)."""
    index = ClusterIndex()
    for node in hostile.nodes(30):
        index.apply(node)
    policy = default_policy()
    strings: set[int] = set()
    pods = [hostile.affinity_pod(40), hostile.backup_pod(5, 20)]  # alive to the end: their strings' ids stay theirs
    for pod in pods:
        subject = Subject(kind="Pod", operation="CREATE", namespace=pod["metadata"]["namespace"], name="p", obj=pod)
        pipeline.mutate(subject, index, policy)
        pipeline.validate(subject, index, policy)
        strings |= {id(obj) for obj in _reachable([pod]) if isinstance(obj, str)}
    nodes = index.node_set()
    memos: dict[str, Memo[Any]] = {
        **MEMOS,
        "NodeSet._memo": nodes._memo,
        "NodeSet._sets": nodes._sets,
        "NodeSet._masks": nodes._masks,
    }
    assert len(nodes._memo) and len(nodes._masks)  # the node-set memos were asked
    for name, memo in memos.items():
        roots: list[object] = list(memo._entries)
        if memo._weigh is None:
            roots += [entry.value for entry in memo._entries.values()]
        held = {id(obj) for obj in _reachable(roots)}
        assert not held & strings, name
        assert memo.weight <= memo._budget, name


def test_the_memory_bench_sends_distinct_reviews_within_the_budget() -> None:
    """What `python -m bench.memory` sends: valid label keys, new to each review, and no limit of the budget
    passed (else it would measure refusals, not what reviews leave behind)."""
    pods = [large_pod(1), large_pod(2)]
    requirements = [[r for term in required_terms(pod["spec"]) or [] for r in term["matchExpressions"]] for pod in pods]
    assert len(requirements[0]) == 8_000
    assert all(label_key_error(r["key"]) is None and len(r["key"]) == 317 for r in requirements[0])
    assert not {r["key"] for r in requirements[0]} & {r["key"] for r in requirements[1]}
    index = ClusterIndex()
    for node in hostile.nodes(3):
        index.apply(node)
    subject = Subject(kind="Pod", operation="CREATE", namespace=hostile.NAMESPACE, name="large", obj=pods[0])
    assert pipeline.validate(subject, index, default_policy()).over_budget is None
