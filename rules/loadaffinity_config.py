"""Validation of LoadAffinity lists: the policy's, Velero's node-agent ConfigMap's and a pod annotation's.

Velero silently drops what it does not understand and keeps pods Pending on selectors that match nothing; these
checks say so at admission time instead.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from rules.names import dns1123_subdomain_error
from rules.selectors import Problem, selector_problems, type_name
from rules.suggest import unknown_field

ENTRY_FIELDS = ("nodeSelector", "storageClass")


def load_affinity_problems(entries: Any, path: str) -> tuple[list[Problem], list[Problem]]:
    """(errors, unknown-field findings) for a LoadAffinity list; callers decide how grave unknown fields are."""
    if not isinstance(entries, list):
        return [(path, f"must be a list of LoadAffinity entries, not {type_name(entries)}")], []
    errors: list[Problem] = []
    unknown: list[Problem] = []
    for i, entry in enumerate(entries):
        at = f"{path}[{i}]"
        if not isinstance(entry, Mapping):
            errors.append((at, f"must be an object with nodeSelector and storageClass, not {type_name(entry)}"))
            continue
        for key in entry:
            if key not in ENTRY_FIELDS:
                unknown.append((f"{at}.{key}", unknown_field(str(key), ENTRY_FIELDS)))
        errors.extend(_node_selector_problems(entry.get("nodeSelector"), f"{at}.nodeSelector"))
        storage_class = entry.get("storageClass")
        if storage_class is not None and storage_class != "":
            if not isinstance(storage_class, str):
                errors.append((f"{at}.storageClass", f"must be a string, not {type_name(storage_class)}"))
            elif (err := dns1123_subdomain_error(storage_class)) is not None:
                errors.append((f"{at}.storageClass", err))
    return errors, unknown


def _node_selector_problems(selector: Any, path: str) -> list[Problem]:
    if selector is None:
        return [(path, "required: a label selector for the nodes that may run the pod")]
    problems = selector_problems(selector, path)
    if problems:
        return problems
    if not selector.get("matchLabels") and not selector.get("matchExpressions"):
        return [(path, "must not be empty: an empty node selector term matches no node")]
    return contradictions(selector, path)


def contradictions(selector: Mapping[str, Any], path: str) -> list[Problem]:
    """Requirements on one key that no label value can satisfy together."""
    allowed: dict[str, set[str]] = {}
    forbidden: dict[str, set[str]] = {}
    present: set[str] = set()
    absent: set[str] = set()
    requirements = [{"key": k, "operator": "In", "values": [v]} for k, v in (selector.get("matchLabels") or {}).items()]
    requirements.extend(selector.get("matchExpressions") or ())
    for expr in requirements:
        key, operator, values = expr["key"], expr["operator"], set(expr.get("values") or ())
        if operator == "In":
            allowed[key] = allowed[key] & values if key in allowed else values
            present.add(key)
        elif operator == "NotIn":
            forbidden[key] = forbidden.get(key, set()) | values
        elif operator == "Exists":
            present.add(key)
        elif operator == "DoesNotExist":
            absent.add(key)
    problems: list[Problem] = []
    for key in sorted(present | absent):
        if key in present and key in absent:
            problems.append((path, f"requirements on {key!r} contradict each other: it must both exist and not exist"))
        elif key in allowed and not allowed[key] - forbidden.get(key, set()):
            problems.append((path, f"requirements on {key!r} contradict each other: no value satisfies all of them"))
    return problems
