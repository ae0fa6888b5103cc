"""The review budget: how much one object may ask the rules to evaluate (docs/design.md#6-validation, Limits).

Required node affinity is a disjunction of terms the rules check against every known node and AND with other term
lists as a cross product; a mover's claims are each looked up with every pod that mounts them; annotations, disk
types and unknown keys each get a message. The API server sets no bound on any of these, so a tenant who can
create a pod could make one review cost minutes and stall every review behind it on the same worker. The limits
below are far above what real objects carry (VolSync, Velero, CDI and KubeVirt write one to a handful of terms of
one to three requirements) and above what this webhook itself writes (the node-agent restriction's
`maxNodeNames`, at most 1,000, bounds its terms and name requirements). An object past one is answered at once,
naming the limit: the typed boundary (rules/kube/shapes.py) refuses it before any rule runs, and a cross product
that would pass one is never built.

Every count here reads an object whose types nobody has checked yet (the boundary counts before it walks types):
each function takes any JSON value and counts what is not a list or an object as nothing, so a mistyped field is
left to the type walk, which names it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

#: The finding family of an object past a limit; like a rule error it follows the policy's global `enforcement`.
FAMILY = "budget"
#: Terms in one required node affinity (a pod's, a pod template's, a VM's), and in any AND of two term lists.
MAX_TERMS = 1_000
#: Requirements (matchExpressions and matchFields) over all the terms of one required node affinity; a
#: load-affinity annotation's entries are counted as the terms they become (a matchLabels pair is a requirement).
MAX_REQUIREMENTS = 10_000
#: Values over all the requirements of one required node affinity, or of one load-affinity annotation's entries.
MAX_VALUES = 10_000
#: Entries of a pod's `storage-affinity.io/load-affinity` annotation (each becomes one ORed term).
MAX_LOAD_AFFINITY_ENTRIES = 100
#: VirtualMachines a CDI worker follows (each ANDs its terms into the worker's; a disk has one VM, a shared one a
#: few): tenants create VMs, and each one followed is another product.
MAX_FOLLOWED_VMS = 16
#: Volumes of one pod or pod template, and a StatefulSet's volumeClaimTemplates: each claim is looked up, and a
#: mover's with every pod that mounts it. VolSync movers and Velero's data movers mount one to three, CDI workers
#: two or three, a KubeVirt virt-launcher one a disk plus a handful of its own, StatefulSets a few claim templates;
#: cloud block devices attach at most a few dozen to a node (128 on the most generous), so 1,000 is far past any
#: pod that can run.
MAX_VOLUMES = 1_000
#: Containers of one pod, all kinds together (containers, initContainers, ephemeralContainers): real pods carry a
#: few, a virt-launcher one a hotplugged disk more; the API server bounds none of them.
MAX_CONTAINERS = 1_000
#: Tolerations of one pod: the API server's two defaults, a DaemonSet's dozen, an operator's few more; a
#: mover is given its anchor's on top.
MAX_TOLERATIONS = 1_000
#: Annotation keys of one object: tools write a few dozen (kubectl, Helm, Argo CD, KubeVirt's launcher about 20);
#: the API server bounds only their total size (256 KiB), which holds tens of thousands of short keys.
MAX_ANNOTATIONS = 1_000


class OverBudget(Exception):
    """An object, or what a rule would build from it, is past a limit; `str()` names the limit and the count,
    `field` the field that holds what is past it (when one does)."""

    def __init__(self, message: str, field: str = "") -> None:
        super().__init__(message)
        self.field = field


def size(value: Any) -> int:
    """The length of a JSON list or object, 0 for any other value (what nobody has type-checked yet); a tuple is
    a list the rules built."""
    return len(value) if isinstance(value, (list, dict, tuple)) else 0


def count_excess(value: Any, what: str, limit: int) -> str | None:
    """What a list or map of `what` has past `limit`, or None; any other value counts as nothing."""
    count = size(value)
    return _over(count, what, limit) if count > limit else None


CONTAINER_KINDS = ("containers", "initContainers", "ephemeralContainers")


def containers_excess(spec: Any) -> tuple[str, str] | None:
    """(field, what is past the limit) for a pod spec of more than MAX_CONTAINERS containers of all kinds, naming
    the kind that holds most, or None. Every pod is counted: the three lookups come first, nothing is built."""
    if not isinstance(spec, dict):
        return None
    get = spec.get
    total = size(get("containers")) + size(get("initContainers")) + size(get("ephemeralContainers"))
    if total <= MAX_CONTAINERS:
        return None
    most = max(CONTAINER_KINDS, key=lambda kind: size(get(kind)))
    return most, _over(total, "containers of all kinds", MAX_CONTAINERS)


def selector_excess(selector: Any) -> str | None:
    """What a NodeSelector (`{"nodeSelectorTerms": [...]}`) has past a limit, or None."""
    return terms_excess(selector.get("nodeSelectorTerms")) if isinstance(selector, dict) else None


def terms_excess(terms: Any) -> str | None:
    """What a list of node selector terms has past a limit, or None. Linear in its size, allocation-free."""
    count = _length(terms)
    if count > MAX_TERMS:
        return _over(count, "node selector terms", MAX_TERMS)
    if not count:
        return None
    requirements = values = 0
    for term in terms:
        if not isinstance(term, (dict, Mapping)):  # dict first: the ABC check is far dearer
            continue
        for part in (term.get("matchExpressions"), term.get("matchFields")):
            if isinstance(part, (list, tuple)):
                requirements += len(part)
                values += _values(part)
    if requirements > MAX_REQUIREMENTS:
        return _over(requirements, "node selector requirements", MAX_REQUIREMENTS)
    if values > MAX_VALUES:
        return _over(values, "node selector requirement values", MAX_VALUES)
    return None


def check_product(left: Any, right: Any) -> None:
    """Raise OverBudget before the AND of two ORed term lists is built, if its terms or requirements would pass a
    limit (each of the len(left) × len(right) terms merges one term of each side)."""
    if left is None:
        excess = terms_excess(right)
        if excess is not None:
            raise OverBudget(excess)
        return
    lefts, rights = _length(left), _length(right)
    terms = lefts * rights
    if terms > MAX_TERMS:
        raise OverBudget(
            f"the AND of {lefts:,} × {rights:,} node selector terms would have {terms:,} terms, "
            f"over the limit of {MAX_TERMS:,}"
        )
    requirements = rights * _requirements(left) + lefts * _requirements(right)
    if requirements > MAX_REQUIREMENTS:
        raise OverBudget(
            f"the AND of {lefts:,} × {rights:,} node selector terms would have {requirements:,} "
            f"requirements, over the limit of {MAX_REQUIREMENTS:,}"
        )


def check_terms(terms: Any, field: str) -> None:
    """Raise OverBudget if `terms`, which a mutation would write at `field`, pass a limit: a pod the webhook
    patched must pass the typed boundary when it is reviewed again."""
    excess = terms_excess(terms)
    if excess is not None:
        raise placement_over_budget(excess, field)


def placement_over_budget(excess: str, field: str) -> OverBudget:
    """The error for terms a mutation would write at `field` with `excess` (what `terms_excess` found)."""
    return OverBudget(f"the placement would write {excess}", field)


def check_tolerations(tolerations: Any, field: str) -> None:
    """Raise OverBudget if a mutation would write more than MAX_TOLERATIONS tolerations at `field` (a mover given
    its anchors', a backup pod the policy's): the patched pod must pass the typed boundary when reviewed again."""
    excess = count_excess(tolerations, "tolerations", MAX_TOLERATIONS)
    if excess is not None:
        raise placement_over_budget(excess, field)


def check_entries(entries: Any, field: str) -> None:
    """Raise OverBudget for a load-affinity annotation (parsed, at `field`) of more than MAX_LOAD_AFFINITY_ENTRIES
    entries, or whose entries, counted as the terms they become, have more requirements or values than one
    required node affinity may: before any entry is checked or turned into a term."""
    if not isinstance(entries, list):
        return
    if len(entries) > MAX_LOAD_AFFINITY_ENTRIES:
        raise OverBudget(f"has {_over(len(entries), 'entries', MAX_LOAD_AFFINITY_ENTRIES)}", field)
    requirements = values = 0
    for entry in entries:
        selector = entry.get("nodeSelector") if isinstance(entry, dict) else None
        if not isinstance(selector, dict):
            continue
        labels, expressions = size(selector.get("matchLabels")), selector.get("matchExpressions")
        requirements += labels  # each label is a requirement `key In [value]`
        values += labels
        if isinstance(expressions, list):
            requirements += len(expressions)
            values += _values(expressions)
    if requirements > MAX_REQUIREMENTS:
        raise OverBudget(f"has {_over(requirements, 'node selector requirements', MAX_REQUIREMENTS)}", field)
    if values > MAX_VALUES:
        raise OverBudget(f"has {_over(values, 'node selector requirement values', MAX_VALUES)}", field)


def check_followed(count: int, field: str) -> None:
    """Raise OverBudget before a CDI worker follows more than MAX_FOLLOWED_VMS VirtualMachines."""
    if isinstance(count, int) and count > MAX_FOLLOWED_VMS:
        raise OverBudget(f"its disks are used by {_over(count, 'VirtualMachines', MAX_FOLLOWED_VMS)}", field)


def _length(terms: Any) -> int:
    return len(terms) if isinstance(terms, (list, tuple)) else 0


def _values(requirements: list[Any] | tuple[Any, ...]) -> int:
    """The values of a list of requirements: only a list of values counts (a mistyped one is the type walk's)."""
    count = 0
    for requirement in requirements:
        if isinstance(requirement, (dict, Mapping)):
            values = requirement.get("values")
            if isinstance(values, (list, tuple)):
                count += len(values)
    return count


def _requirements(terms: Any) -> int:
    count = 0
    for term in terms if isinstance(terms, (list, tuple)) else ():
        if isinstance(term, (dict, Mapping)):
            count += size(term.get("matchExpressions")) + size(term.get("matchFields"))
    return count


def _over(count: int, what: str, limit: int) -> str:
    return f"{count:,} {what}, over the limit of {limit:,}"
