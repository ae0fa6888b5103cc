"""The index's table of shared values (webhook/state/sharing.py) stays within its bounds in entries and in bytes,
whatever values a tenant's objects carry, and still shares the values that repeat."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from webhook.state import sharing


@pytest.fixture(autouse=True)
def _empty_table() -> Iterator[None]:
    sharing.forget()
    yield
    sharing.forget()


def test_equal_values_are_one_object() -> None:
    tolerations = [{"key": "dedicated", "operator": "Equal", "value": "backup", "effect": "NoSchedule"}]
    first = sharing.shared(tolerations)
    assert sharing.shared([dict(t) for t in tolerations]) is first


def test_a_value_longer_than_the_largest_shared_is_kept_by_its_object_alone() -> None:
    huge = [{"key": f"k{i}", "operator": "Exists"} for i in range(2_000)]
    assert sharing.shared(huge) is huge
    assert sharing.SHARED == {}


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 40), st.integers(0, 3_000)), max_size=120))
def test_the_table_holds_at_most_its_bytes_and_entries(values: list[tuple[int, int]]) -> None:
    """Values of any length, new or repeated: the table never holds more keys, nor more characters of them, than
    its bounds, and `shared` gives back an equal value."""
    bytes_before, limit_before = sharing.SHARED_BYTES, sharing.SHARED_LIMIT
    sharing.SHARED_BYTES, sharing.SHARED_LIMIT = 20_000, 25
    try:
        sharing.forget()
        for name, length in values:
            value = {"name": f"v{name}", "pad": "x" * length}
            assert sharing.shared(value) == value
            held = sum(len(key) for key in sharing.SHARED)
            assert held <= sharing.SHARED_BYTES and len(sharing.SHARED) <= sharing.SHARED_LIMIT
            assert held == sharing._held[0]
    finally:
        sharing.SHARED_BYTES, sharing.SHARED_LIMIT = bytes_before, limit_before
