"""Toleration identity and merging, shared by every rule that adds tolerations.

Duplicate tolerations are legal in a pod but break later updates in some tooling; comparing all five fields
(operator defaulting to Equal) is what makes "add what is missing" idempotent.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from rules.budget import check_tolerations
from rules.kube.names import label_key_error, label_value_error
from rules.memo import Memo
from rules.model import Json

TolerationKey = tuple[str, str, str, str, Any]


def toleration_key(toleration: Mapping[str, Any]) -> TolerationKey:
    """Tolerations are the same when key, operator (default Equal), value, effect and tolerationSeconds are."""
    get = toleration.get  # once, not five times: every toleration of every placed pod is keyed
    return (
        str(get("key") or ""),
        str(get("operator") or "Equal"),
        str(get("value") or ""),
        str(get("effect") or ""),
        get("tolerationSeconds"),
    )


def merge_tolerations(own: Sequence[Json], extra: Sequence[Json], field: str = "spec.tolerations") -> list[Json]:
    """`own` unchanged, then each toleration of `extra` that is not already there. Raises OverBudget when the
    result, which the caller writes at `field`, would pass the review budget's MAX_TOLERATIONS."""
    out = list(own)
    seen = {toleration_key(t) for t in own}
    for toleration in extra:
        key = toleration_key(toleration)
        if key not in seen:
            seen.add(key)
            out.append(dict(toleration))
    check_tolerations(out, field)
    return out


def merge_policy_tolerations(
    own: Sequence[Json], policy_tolerations: Sequence[Json], field: str = "spec.tolerations"
) -> list[Json]:
    """`merge_tolerations` with the policy's own list, whose keys are computed once per policy (the policy is
    replaced on reload, never changed, so its list's identity says everything the keys depend on). Only the
    pod's tolerations whose `key` field one of the policy's has can equal one of them, so only those are keyed:
    a pod's own are most often the API server's two defaults, which no policy repeats. Raises OverBudget as
    `merge_tolerations` does."""
    out = list(own)
    distinct, names = _POLICY_KEYS.by_identity((policy_tolerations,), None, lambda: _distinct(policy_tolerations))
    if not distinct:
        return out
    present = set()
    for toleration in own:
        if str(toleration.get("key") or "") in names:
            present.add(toleration_key(toleration))
    for key, toleration in distinct:
        if key not in present:
            out.append(dict(toleration))
    check_tolerations(out, field)
    return out


#: Per policy list: each toleration first of its key, with its key; and the `key` fields among them.
_Distinct = tuple[tuple[tuple[TolerationKey, Json], ...], frozenset[str]]
_POLICY_KEYS: Memo[_Distinct] = Memo(64)


def _distinct(tolerations: Sequence[Json]) -> _Distinct:
    keyed: dict[TolerationKey, Json] = {}
    for toleration in tolerations:
        keyed.setdefault(toleration_key(toleration), toleration)
    return tuple(keyed.items()), frozenset(key[0] for key in keyed)


#: Taint effects the scheduler filters on; PreferNoSchedule only scores.
FILTERING_EFFECTS = ("NoSchedule", "NoExecute")


class Tolerated:
    """A pod's tolerations indexed for judging many taints (one pod against every node): each taint costs a few set
    lookups, where `tolerates` on the list scans every toleration; a pod of 1,000 tolerations checked against
    5,000 nodes would otherwise make millions of comparisons. Judges exactly as `tolerates` does; build it once per
    pod and pass it wherever a list of tolerations is asked for."""

    __slots__ = ("_any_key", "_any_key_equal", "_equal", "_exists")

    def __init__(self, tolerations: Sequence[Mapping[str, Any]]) -> None:
        self._exists: set[tuple[Any, Any]] = set()  # (key, effect) of `Exists` with a key
        self._any_key: set[Any] = set()  # effects of `Exists` without a key: every key
        self._equal: set[tuple[Any, Any, Any]] = set()  # (key, value, effect) of `Equal` with a key
        self._any_key_equal: set[tuple[Any, Any]] = set()  # (value, effect) of `Equal` without a key
        for toleration in tolerations:
            key, effect = toleration.get("key") or "", toleration.get("effect") or ""
            operator = toleration.get("operator") or "Equal"
            if operator == "Exists":
                if key:
                    self._exists.add((key, effect))
                else:
                    self._any_key.add(effect)
            elif operator == "Equal":
                value = toleration.get("value") or ""
                if key:
                    self._equal.add((key, value, effect))
                else:
                    self._any_key_equal.add((value, effect))

    def tolerates(self, taint: Mapping[str, Any]) -> bool:
        key, value = taint.get("key") or "", taint.get("value") or ""
        for effect in (taint.get("effect") or "", ""):  # a toleration without an effect tolerates every effect
            if (
                effect in self._any_key
                or (key, effect) in self._exists
                or (key, value, effect) in self._equal
                or (value, effect) in self._any_key_equal
            ):
                return True
        return False


Tolerations = Sequence[Mapping[str, Any]] | Tolerated


def tolerates(tolerations: Tolerations, taint: Mapping[str, Any]) -> bool:
    """Whether some toleration tolerates the taint, as the API's `Toleration.ToleratesTaint` decides: an empty
    effect tolerates every effect, an empty key with `Exists` every key, `Exists` any value, `Equal` (the
    default) the same value."""
    if isinstance(tolerations, Tolerated):
        return tolerations.tolerates(taint)
    for toleration in tolerations:
        effect = toleration.get("effect") or ""
        if effect and effect != (taint.get("effect") or ""):
            continue
        key = toleration.get("key") or ""
        if key and key != (taint.get("key") or ""):
            continue
        operator = toleration.get("operator") or "Equal"
        if operator == "Exists" or (
            operator == "Equal" and (toleration.get("value") or "") == (taint.get("value") or "")
        ):
            return True
    return False


def untolerated_taint(tolerations: Tolerations, node: Mapping[str, Any]) -> Mapping[str, Any] | None:
    """The first of the node's taints that keeps a pod with these tolerations from being scheduled there, or None."""
    for taint in (node.get("spec") or {}).get("taints") or ():
        if (
            isinstance(taint, Mapping)
            and taint.get("effect") in FILTERING_EFFECTS
            and not tolerates(tolerations, taint)
        ):
            return taint
    return None


def node_tolerated(tolerations: Tolerations, node: Mapping[str, Any]) -> bool:
    """Whether a pod with these tolerations may be scheduled on the node, as far as its taints go."""
    return untolerated_taint(tolerations, node) is None


_NOT_NO_EXECUTE = ("", "NoSchedule", "PreferNoSchedule")  # the effects but NoExecute


def toleration_problems(toleration: Mapping[str, Any], path: str) -> list[tuple[str, str]]:
    """What the API server's ValidateTolerations refuses in a toleration, each with its path. An operator or effect
    outside its enum is left to the caller's schema, and so are the checks that depend on it."""
    problems: list[tuple[str, str]] = []
    key, operator, value = toleration.get("key") or "", toleration.get("operator"), toleration.get("value")
    if isinstance(key, str) and key and (err := label_key_error(key)) is not None:
        problems.append((f"{path}.key", err))
    if key == "" and operator in (None, "Equal", ""):
        problems.append((f"{path}.operator", "must be Exists when key is empty (a toleration of every taint)"))
    if "tolerationSeconds" in toleration and toleration.get("effect", "") in _NOT_NO_EXECUTE:
        problems.append((f"{path}.effect", "must be NoExecute when tolerationSeconds is set"))
    if operator == "Exists" and isinstance(value, str) and value:
        problems.append((f"{path}.value", "must be empty when operator is Exists"))
    elif operator in (None, "Equal", "") and isinstance(value, str) and (err := label_value_error(value)) is not None:
        problems.append((f"{path}.value", err))
    return problems
