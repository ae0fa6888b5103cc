"""The policy's tolerations merged with keys computed once per policy list agree with the plain merge."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from rules.kube.tolerations import merge_policy_tolerations, merge_tolerations
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
