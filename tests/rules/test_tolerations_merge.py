"""The policy's tolerations merged with keys computed once per policy list agree with the plain merge; indexed
tolerations judge taints as the list does; no merge writes more tolerations than the review budget allows."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rules.budget import MAX_TOLERATIONS, OverBudget
from rules.kube.tolerations import (
    Tolerated,
    merge_policy_tolerations,
    merge_tolerations,
    node_tolerated,
    tolerates,
    untolerated_taint,
)
from rules.model import Json

# few values per field, so pod and policy tolerations often share a key, and some are equal on all five fields
_TOLERATION = st.fixed_dictionaries(
    {},
    optional={
        "key": st.sampled_from(["", "a", "node.kubernetes.io/not-ready"]),
        "operator": st.sampled_from(["Equal", "Exists"]),
        "value": st.sampled_from(["", "v"]),
        "effect": st.sampled_from(["NoSchedule", "NoExecute"]),
        "tolerationSeconds": st.sampled_from([300, 0]),
    },
)


@settings(max_examples=300, deadline=None)
@given(own=st.lists(_TOLERATION, max_size=4), policy=st.lists(_TOLERATION, max_size=4).map(tuple))
def test_the_policy_merge_is_the_plain_merge(own: list[Json], policy: tuple[Json, ...]) -> None:
    """Same tolerations, same order, duplicates within the policy's list dropped alike; asked twice (the second
    time from the memo) the answer is the same, and the added tolerations are copies, not the policy's."""
    expected = merge_tolerations(own, policy)
    assert merge_policy_tolerations(own, policy) == expected
    again = merge_policy_tolerations(own, policy)
    assert again == expected
    assert not any(added is t for added in again[len(own) :] for t in policy)


def test_a_pod_toleration_equal_to_the_policys_is_not_added_again() -> None:
    default = {"key": "node.kubernetes.io/not-ready", "operator": "Exists", "effect": "NoExecute"}
    policy = ({"key": "node.kubernetes.io/not-ready", "operator": "Exists", "effect": "NoExecute"}, {"key": "b"})
    assert merge_policy_tolerations([default], policy) == [default, {"key": "b"}]


_TAINT = st.fixed_dictionaries(
    {},
    optional={
        "key": st.sampled_from(["", "a", "node.kubernetes.io/not-ready"]),
        "value": st.sampled_from(["", "v"]),
        "effect": st.sampled_from(["", "NoSchedule", "NoExecute", "PreferNoSchedule"]),
    },
)
_ANY_TOLERATION = st.fixed_dictionaries(
    {},
    optional={
        "key": st.sampled_from(["", "a", "node.kubernetes.io/not-ready"]),
        "operator": st.sampled_from(["", "Equal", "Exists", "Gt"]),
        "value": st.sampled_from(["", "v"]),
        "effect": st.sampled_from(["", "NoSchedule", "NoExecute"]),
    },
)


@settings(max_examples=500, deadline=None)
@given(tolerations=st.lists(_ANY_TOLERATION, max_size=5), taints=st.lists(_TAINT, max_size=4))
def test_indexed_tolerations_judge_as_the_list_does(tolerations: list[Json], taints: list[Json]) -> None:
    indexed = Tolerated(tolerations)
    for taint in taints:
        assert tolerates(indexed, taint) is tolerates(tolerations, taint)
    node = {"spec": {"taints": taints}}
    assert untolerated_taint(indexed, node) == untolerated_taint(tolerations, node)
    assert node_tolerated(indexed, node) is node_tolerated(tolerations, node)


class _Read(dict[str, Any]):
    """A toleration that counts the reads of its fields."""

    reads = 0

    def get(self, key: str, default: Any = None) -> Any:
        _Read.reads += 1
        return super().get(key, default)


def test_indexed_tolerations_read_each_toleration_once_whatever_the_nodes() -> None:
    """A pod of 1,000 tolerations against 1,000 tainted nodes: the list is read once, not once a node."""
    tolerations = [_Read(key=f"k{i}", operator="Equal", value="v", effect="NoSchedule") for i in range(1_000)]
    nodes = [{"spec": {"taints": [{"key": f"t{i}", "value": "x", "effect": "NoSchedule"}]}} for i in range(1_000)]
    _Read.reads = 0
    indexed = Tolerated(tolerations)
    built = _Read.reads
    assert not any(node_tolerated(indexed, node) for node in nodes)
    assert _Read.reads == built <= 5 * len(tolerations)


def test_a_merge_past_the_limit_is_refused_naming_the_field() -> None:
    own = [{"key": f"own{i}", "operator": "Exists"} for i in range(600)]
    extra = [{"key": f"anchor{i}", "operator": "Exists"} for i in range(401)]
    assert len(merge_tolerations(own, extra[:400])) == MAX_TOLERATIONS
    with pytest.raises(
        OverBudget, match="the placement would write 1,001 tolerations, over the limit of 1,000"
    ) as raised:
        merge_tolerations(own, extra, "spec.template.spec.tolerations")
    assert raised.value.field == "spec.template.spec.tolerations"
    with pytest.raises(OverBudget, match="1,001 tolerations"):
        merge_policy_tolerations(own, tuple(extra))
