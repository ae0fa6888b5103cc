"""Validation of LoadAffinity lists: the policy's, Velero's node-agent ConfigMap's and a pod annotation's.

Velero silently drops what it does not understand and keeps pods Pending on selectors that match nothing; these
checks say so at admission time instead.

Operators: a LoadAffinity `nodeSelector` is a metav1.LabelSelector, but Velero copies every matchExpressions
operator verbatim into the pod's node selector requirements, so the node-only `Gt`/`Lt` (one integer value) work
there and are accepted (docs/design.md#6-validation); anything else would make the API server reject the data mover pod.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from rules import deadline
from rules.cluster import ClusterView
from rules.kube.disclosed import EVERY_LABEL
from rules.kube.feasible import Feasibility, on_labels
from rules.kube.names import dns1123_subdomain_error
from rules.kube.nodeaffinity import NODE_OPERATORS, label_selector_term, terms_key
from rules.kube.selectors import Problem, selector_problems, type_name
from rules.messages import counted
from rules.model import Json
from rules.suggest import SUGGESTED, more_unknown, unknown_field

ENTRY_FIELDS = ("nodeSelector", "storageClass")
SELECTOR_FIELDS = ("matchLabels", "matchExpressions")
REQUIREMENT_FIELDS = ("key", "operator", "values")


def load_affinity_problems(entries: Any, path: str) -> tuple[list[Problem], list[Problem]]:
    """(errors, unknown-field findings) for a LoadAffinity list; callers decide how grave unknown fields are.

    Unknown fields are judged as Velero reads them: dropped, so `{"nodeSelector": {"matchLabel": ...}}` is both an
    unknown field and an empty selector.
    """
    if not isinstance(entries, list):
        return [(path, f"must be a list of LoadAffinity entries, not {type_name(entries)}")], []
    errors: list[Problem] = []
    unknown: list[_Unknown] = []
    for i, entry in enumerate(entries):
        deadline.check()
        at = f"{path}[{i}]"
        if not isinstance(entry, Mapping):
            errors.append((at, f"must be an object with nodeSelector and storageClass, not {type_name(entry)}"))
            continue
        unknown.extend(_unknown(entry, at, ENTRY_FIELDS))
        selector_errors, selector_unknown = node_selector_problems(entry.get("nodeSelector"), f"{at}.nodeSelector")
        errors.extend(selector_errors)
        unknown.extend(selector_unknown)
        storage_class = entry.get("storageClass")
        if storage_class is not None and storage_class != "":
            if not isinstance(storage_class, str):
                errors.append((f"{at}.storageClass", f"must be a string, not {type_name(storage_class)}"))
            elif (err := dns1123_subdomain_error(storage_class)) is not None:
                errors.append((f"{at}.storageClass", f"{err}: it must name a StorageClass"))
    return errors, _named(unknown, path)


def node_selector_problems(selector: Any, path: str) -> tuple[list[Problem], list[_Unknown]]:
    """(errors, unknown fields) of one LoadAffinity `nodeSelector`."""
    if selector is None:
        return [(path, "required: a label selector for the nodes that may run the pod")], []
    if not isinstance(selector, Mapping):
        return [(path, f"must be a label selector object, not {type_name(selector)}")], []
    # Velero drops unknown fields: report them apart, then check what Velero would see.
    unknown = _unknown(selector, path, SELECTOR_FIELDS)
    seen: dict[str, Any] = {k: v for k, v in selector.items() if k in SELECTOR_FIELDS}
    if isinstance(seen.get("matchExpressions"), list):
        kept = []
        for i, item in enumerate(seen["matchExpressions"]):
            if isinstance(item, Mapping):
                unknown.extend(_unknown(item, f"{path}.matchExpressions[{i}]", REQUIREMENT_FIELDS))
                item = {k: v for k, v in item.items() if k in REQUIREMENT_FIELDS}  # noqa: PLW2901
            kept.append(item)
        seen["matchExpressions"] = kept
    errors = selector_problems(seen, path, NODE_OPERATORS)
    if errors:
        return errors, unknown
    if not selector.get("matchLabels") and not selector.get("matchExpressions"):
        return [(path, "must not be empty: an empty node selector term matches no node")], unknown
    return contradictions(selector, path), unknown


def contradictions(selector: Mapping[str, Any], path: str) -> list[Problem]:
    """Requirements on one key that no label value can satisfy together (the selector is otherwise valid)."""
    allowed: dict[str, set[str]] = {}
    forbidden: dict[str, set[str]] = {}
    present: set[str] = set()
    absent: set[str] = set()
    above: dict[str, int] = {}  # Gt: value > bound
    below: dict[str, int] = {}  # Lt: value < bound
    requirements = [{"key": k, "operator": "In", "values": [v]} for k, v in (selector.get("matchLabels") or {}).items()]
    requirements.extend(selector.get("matchExpressions") or ())
    for expr in requirements:
        key, operator, values = expr["key"], expr["operator"], list(expr.get("values") or ())
        if operator == "In":
            allowed[key] = allowed[key].intersection(values) if key in allowed else set(values)
            present.add(key)
        elif operator == "NotIn":
            forbidden.setdefault(key, set()).update(values)  # in place: a copy per requirement is quadratic
        elif operator == "Exists":
            present.add(key)
        elif operator == "DoesNotExist":
            absent.add(key)
        elif operator == "Gt":
            above[key] = max(above.get(key, int(values[0])), int(values[0]))
            present.add(key)
        elif operator == "Lt":
            below[key] = min(below.get(key, int(values[0])), int(values[0]))
            present.add(key)
    problems: list[Problem] = []
    for key in sorted(present | absent):
        if key in present and key in absent:
            problems.append((path, f"requirements on {key!r} contradict each other: it must both exist and not exist"))
        elif key in above and key in below and above[key] + 1 >= below[key]:
            problems.append((path, f"requirements on {key!r} contradict each other: no integer is in the range"))
        elif key in allowed and not {
            v for v in allowed[key] - forbidden.get(key, set()) if _in_range(v, above.get(key), below.get(key))
        }:
            problems.append((path, f"requirements on {key!r} contradict each other: no value satisfies all of them"))
    return problems


def entry_cluster_problems(
    entries: Iterable[Any], path: str, view: ClusterView, *, against_nodes: bool = True
) -> list[Problem]:
    """Warnings that need the cluster: unknown StorageClasses and selectors that match none of the known Nodes.

    Entries with errors are skipped (they are reported as such). With no Node known (offline review without cluster
    state), or `against_nodes` false (entries whose author may not learn about nodes), the node check is skipped.
    Each selector is one node question (rules/kube/feasible.py), on every label: the operator wrote it.
    """
    problems: list[Problem] = []
    nodes = view.node_set()
    labels_only = on_labels(EVERY_LABEL, volumes=False)
    for i, entry in enumerate(entries):
        deadline.check()
        if load_affinity_problems([entry], "")[0]:
            continue
        at = f"{path}[{i}]"
        storage_class = entry.get("storageClass")
        if isinstance(storage_class, str) and storage_class and view.storage_class(storage_class) is None:
            problems.append((f"{at}.storageClass", f'StorageClass "{storage_class}" does not exist in the cluster'))
        selector = entry.get("nodeSelector")
        if against_nodes and len(nodes) and isinstance(selector, Mapping):
            term = label_selector_term(selector)
            if not Feasibility(nodes, labels_only, terms=[term], key=("term", terms_key([term]))).any():
                problems.append(
                    (
                        f"{at}.nodeSelector",
                        f"matches none of the {counted(len(nodes), 'known node')}: pods stay Pending",
                    )
                )
    return problems


def backup_pvc_cluster_problems(backup_pvc: Any, path: str, view: ClusterView) -> list[Problem]:
    """A `backupPVC` target StorageClass that does not exist: Velero's backup PVC would never bind."""
    if not isinstance(backup_pvc, Mapping):
        return []
    problems: list[Problem] = []
    for source_class, spec in backup_pvc.items():
        deadline.check()
        target = spec.get("storageClass") if isinstance(spec, Mapping) else None
        valid = isinstance(target, str) and dns1123_subdomain_error(target) is None
        if valid and view.storage_class(str(target)) is None:
            problems.append(
                (f"{path}[{source_class}].storageClass", f'StorageClass "{target}" does not exist in the cluster')
            )
    return problems


def known_fields(entry: Mapping[str, Any]) -> Json:
    """A valid entry as Velero sees it: unknown fields dropped, so none of them reaches a pod spec."""
    out: Json = {}
    selector = entry.get("nodeSelector") or {}
    clean: Json = {}
    if selector.get("matchLabels"):
        clean["matchLabels"] = dict(selector["matchLabels"])
    if selector.get("matchExpressions"):
        clean["matchExpressions"] = [
            {k: v for k, v in expr.items() if k in REQUIREMENT_FIELDS} for expr in selector["matchExpressions"]
        ]
    out["nodeSelector"] = clean
    if entry.get("storageClass"):
        out["storageClass"] = entry["storageClass"]
    return out


#: An unknown field: where, its name, and the names known there.
_Unknown = tuple[str, str, tuple[str, ...]]


def _unknown(obj: Mapping[str, Any], path: str, known: tuple[str, ...]) -> list[_Unknown]:
    return [(f"{path}.{key}", str(key), known) for key in obj if key not in known]


def _named(found: list[_Unknown], path: str) -> list[Problem]:
    """The unknown fields of a list as findings: the first SUGGESTED with a did-you-mean, the rest counted in one
    (a suggestion compares names: thousands of requirements with an unknown field each must not cost a second)."""
    named = [(at, unknown_field(key, known)) for at, key, known in found[:SUGGESTED]]
    if len(found) > SUGGESTED:
        named.append((path, more_unknown(len(found) - SUGGESTED, "fields")))
    return named


def _in_range(value: str, lower: int | None, upper: int | None) -> bool:
    if lower is None and upper is None:
        return True
    try:
        number = int(value, 10)
    except ValueError:
        return False
    return (lower is None or number > lower) and (upper is None or number < upper)
