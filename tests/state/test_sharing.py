"""The index's table of shared values (webhook/state/sharing.py) stays within its bounds in entries and in what its
values weigh, whatever values a tenant's objects carry, and still shares the values that repeat."""

from __future__ import annotations

import json
import tracemalloc
from collections.abc import Iterator

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rules.memo import ENTRY_BYTES, json_weight
from rules.model import Json
from webhook.state import sharing
from webhook.state.index import ClusterIndex


@pytest.fixture(autouse=True)
def _empty_table() -> Iterator[None]:
    sharing.forget()
    yield
    sharing.forget()


def test_equal_values_are_one_object() -> None:
    tolerations = [
        {"key": "dedicated", "operator": "Equal", "value": "backup", "effect": "NoSchedule"},
        {"key": "node.kubernetes.io/not-ready", "operator": "Exists", "effect": "NoExecute"},
    ]
    first = sharing.shared(tolerations)
    assert sharing.shared([{**t} for t in tolerations]) is first
    reordered = [dict(reversed(list(t.items()))) for t in tolerations]
    assert sharing.shared(reordered) is first  # equal, whatever the order of their keys


def test_a_value_longer_than_the_largest_shared_is_kept_by_its_object_alone() -> None:
    huge = [{"key": f"k{i}", "operator": "Exists"} for i in range(2_000)]
    assert sharing.shared(huge) is huge
    assert len(sharing.SHARED) == 0


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 40), st.integers(0, 12_000)), max_size=80))
def test_the_table_holds_what_its_values_weigh_and_none_past_the_largest(values: list[tuple[int, int]]) -> None:
    """Values of any length, new or repeated, through the table as the index uses it: an equal value gives the one
    object, a value past the largest is not held, and the table's weight is what its values weigh, within its
    budget and entries."""
    sharing.forget()
    for name, length in values:
        value = {"name": f"v{name}", "pad": "x" * length}
        got = sharing.shared(value)
        if len(json.dumps(value, separators=(",", ":"))) > sharing.LARGEST_SHARED:
            assert got is value
        else:
            assert sharing.shared(dict(value)) is got and got == value
        held = [entry.value for entry in sharing.SHARED._entries.values()]
        assert all(len(json.dumps(v, separators=(",", ":"))) <= sharing.LARGEST_SHARED for v in held)
        assert sharing.SHARED.weight == sum(ENTRY_BYTES + json_weight(v) for v in held) <= sharing.SHARED_BYTES
        assert len(held) <= sharing.SHARED_LIMIT


def _pod(i: int) -> Json:
    tolerations = [{"key": f"tenant-{i}-{j}", "operator": "Exists", "effect": "NoSchedule"} for j in range(100)]
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": f"p{i}", "namespace": "tenant", "uid": f"u{i}"},
        "spec": {
            "containers": [{"name": "c"}],
            "volumes": [{"name": "v", "persistentVolumeClaim": {"claimName": "data"}}],
            "tolerations": tolerations,
        },
    }


def test_pods_created_and_deleted_leave_at_most_the_tables_weight_behind() -> None:
    """A tenant's pods with unique toleration lists just under the largest shared, created and deleted: what stays
    in memory is no more than the table counts its values as (and so within its budget), not a list per pod."""
    assert len(json.dumps(_pod(0)["spec"]["tolerations"])) < sharing.LARGEST_SHARED
    index = ClusterIndex()
    tracemalloc.start()
    try:
        for i in range(400):
            pod = _pod(i)
            index.apply(pod)
            index.remove(pod)
        retained, _ = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert len(sharing.SHARED) > 0 and sharing.SHARED.weight <= sharing.SHARED_BYTES  # shared while they lived
    assert retained < sharing.SHARED.weight + 2**20, (retained, sharing.SHARED.weight)  # what it counts bounds it
