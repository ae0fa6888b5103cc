"""The index's table of shared values (webhook/state/sharing.py) stays within its bounds in entries and in what its
values weigh, whatever values a tenant's objects carry, and still shares the values that repeat."""

from __future__ import annotations

import json
import tracemalloc
from collections.abc import Iterator

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rules.memo import ENTRY_BYTES, Memo, json_weight
from rules.model import Json
from webhook.state import sharing
from webhook.state.index import ClusterIndex


@pytest.fixture(autouse=True)
def _empty_table() -> Iterator[None]:
    sharing.forget()
    yield
    sharing.forget()


def test_equal_values_are_one_object() -> None:
    tolerations = [{"key": "dedicated", "operator": "Equal", "value": "backup", "effect": "NoSchedule"}]
    first = sharing.shared(tolerations)
    assert sharing.shared([{**t} for t in reversed(tolerations)]) is first
    assert (
        sharing.shared([{"effect": "NoSchedule", "value": "backup", "operator": "Equal", "key": "dedicated"}]) is first
    )


def test_a_value_longer_than_the_largest_shared_is_kept_by_its_object_alone() -> None:
    huge = [{"key": f"k{i}", "operator": "Exists"} for i in range(2_000)]
    assert sharing.shared(huge) is huge
    assert len(sharing.SHARED) == 0


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 40), st.integers(0, 3_000)), max_size=120))
def test_the_table_holds_at_most_its_weight_and_entries(values: list[tuple[int, int]]) -> None:
    """Values of any length, new or repeated: the table never holds more values, nor values that weigh more, than
    its bounds, and `shared` gives back an equal value."""
    table: Memo[Json] = Memo(25, budget=20_000, weigh=json_weight)
    kept, sharing.SHARED = sharing.SHARED, table
    try:
        for name, length in values:
            value = {"name": f"v{name}", "pad": "x" * length}
            assert sharing.shared(value) == value
            held = sum(ENTRY_BYTES + json_weight(entry.value) for entry in table._entries.values())
            assert held == table.weight <= 20_000 and len(table) <= 25
    finally:
        sharing.SHARED = kept


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
