"""The review budget: how much one object may ask the rules to evaluate (docs/design.md#6-validation, Limits).

Required node affinity is a disjunction of terms the rules check against every known node and AND with other term
lists as a cross product. The API server sets no bound on either, so a tenant who can create a pod could make one
review cost minutes and stall every review behind it on the same worker. The limits below are far above what real
objects carry (VolSync, Velero, CDI and KubeVirt write one to a handful of terms of one to three requirements) and
above what this webhook itself writes (the node-agent restriction's `maxNodeNames`, at most 1,000, bounds its
terms and name requirements). An object past one is answered at once, naming the limit: the typed boundary
(rules/kube/shapes.py) refuses it before any rule runs, and a cross product that would pass one is never built.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

#: The finding family of an object past a limit; like a rule error it follows the policy's global `enforcement`.
FAMILY = "budget"
#: Terms in one required node affinity (a pod's, a pod template's, a VM's), and in any AND of two term lists.
MAX_TERMS = 1_000
#: Requirements (matchExpressions and matchFields) over all the terms of one required node affinity.
MAX_REQUIREMENTS = 10_000
#: Values over all the requirements of one required node affinity.
MAX_VALUES = 10_000
#: Entries of a pod's `storage-affinity.io/load-affinity` annotation (each becomes one ORed term).
MAX_LOAD_AFFINITY_ENTRIES = 100
#: VirtualMachines a CDI worker follows (each ANDs its terms into the worker's; a disk has one VM, a shared one a
#: few): tenants create VMs, and each one followed is another product.
MAX_FOLLOWED_VMS = 16


class OverBudget(Exception):
    """An object, or what a rule would build from it, is past a limit; `str()` names the limit and the count,
    `field` the field that holds what is past it (when one does)."""

    def __init__(self, message: str, field: str = "") -> None:
        super().__init__(message)
        self.field = field


def selector_excess(selector: Any) -> str | None:
    """What a NodeSelector (`{"nodeSelectorTerms": [...]}`) has past a limit, or None; counted before its types
    are checked, so what is not a list or an object counts as nothing."""
    terms = selector.get("nodeSelectorTerms") if isinstance(selector, dict) else None
    return terms_excess(terms) if isinstance(terms, list) else None


def terms_excess(terms: Sequence[Any]) -> str | None:
    """What a list of node selector terms has past a limit, or None. Linear in its size, allocation-free."""
    if len(terms) > MAX_TERMS:
        return _over(len(terms), "node selector terms", MAX_TERMS)
    requirements = values = 0
    for term in terms:
        if not isinstance(term, (dict, Mapping)):  # dict first: the ABC check is far dearer
            continue
        for part in (term.get("matchExpressions"), term.get("matchFields")):
            if isinstance(part, list):
                requirements += len(part)
                values += sum(len(r.get("values") or ()) for r in part if isinstance(r, (dict, Mapping)))
    if requirements > MAX_REQUIREMENTS:
        return _over(requirements, "node selector requirements", MAX_REQUIREMENTS)
    if values > MAX_VALUES:
        return _over(values, "node selector requirement values", MAX_VALUES)
    return None


def check_product(left: Sequence[Mapping[str, Any]] | None, right: Sequence[Mapping[str, Any]]) -> None:
    """Raise OverBudget before the AND of two ORed term lists is built, if its terms or requirements would pass a
    limit (each of the len(left) × len(right) terms merges one term of each side)."""
    if left is None:
        excess = terms_excess(right)
        if excess is not None:
            raise OverBudget(excess)
        return
    terms = len(left) * len(right)
    if terms > MAX_TERMS:
        raise OverBudget(
            f"the AND of {len(left):,} × {len(right):,} node selector terms would have {terms:,} terms, "
            f"over the limit of {MAX_TERMS:,}"
        )
    requirements = len(right) * _requirements(left) + len(left) * _requirements(right)
    if requirements > MAX_REQUIREMENTS:
        raise OverBudget(
            f"the AND of {len(left):,} × {len(right):,} node selector terms would have {requirements:,} "
            f"requirements, over the limit of {MAX_REQUIREMENTS:,}"
        )


def check_terms(terms: Sequence[Mapping[str, Any]], field: str) -> None:
    """Raise OverBudget if `terms`, which a mutation would write at `field`, pass a limit: a pod the webhook
    patched must pass the typed boundary when it is reviewed again."""
    excess = terms_excess(terms)
    if excess is not None:
        raise placement_over_budget(excess, field)


def placement_over_budget(excess: str, field: str) -> OverBudget:
    """The error for terms a mutation would write at `field` with `excess` (what `terms_excess` found)."""
    return OverBudget(f"the placement would write {excess}", field)


def check_entries(entries: Any, field: str) -> None:
    """Raise OverBudget for a load-affinity annotation (parsed, at `field`) of more than MAX_LOAD_AFFINITY_ENTRIES
    entries, before any entry is checked or turned into a term."""
    if isinstance(entries, list) and len(entries) > MAX_LOAD_AFFINITY_ENTRIES:
        raise OverBudget(f"has {_over(len(entries), 'entries', MAX_LOAD_AFFINITY_ENTRIES)}", field)


def check_followed(count: int, field: str) -> None:
    """Raise OverBudget before a CDI worker follows more than MAX_FOLLOWED_VMS VirtualMachines."""
    if count > MAX_FOLLOWED_VMS:
        raise OverBudget(f"its disks are used by {_over(count, 'VirtualMachines', MAX_FOLLOWED_VMS)}", field)


def _requirements(terms: Sequence[Mapping[str, Any]]) -> int:
    return sum(len(term.get("matchExpressions") or ()) + len(term.get("matchFields") or ()) for term in terms)


def _over(count: int, what: str, limit: int) -> str:
    return f"{count:,} {what}, over the limit of {limit:,}"
