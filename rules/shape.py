"""Type checks of the fields rules read, so malformed input gets a message naming the field, not a traceback.

The API server only sends well-typed objects; this guards the other callers (`review`, curl, fuzzers).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from rules.selectors import type_name

_MAPS_OF_STRINGS = (("metadata", "labels"), ("metadata", "annotations"))
_REQUIRED = ("spec", "affinity", "nodeAffinity", "requiredDuringSchedulingIgnoredDuringExecution")
_PARSED_PREFIXES = (
    "storage-affinity.io/",
    "affinity.volumes.csi-baremetal.dell.com/",
    "antiaffinity.volumes.csi-baremetal.dell.com/",
)


def pod_shape_problems(pod: Any, base: str = "") -> list[tuple[str, str]]:
    """Problems with the types of a pod (or pod template) in the fields the rules read."""
    if not isinstance(pod, Mapping):
        return [(base or "object", f"must be an object, not {type_name(pod)}")]
    problems: list[tuple[str, str]] = []

    def at(*parts: str) -> str:
        return ".".join(p for p in (base, *parts) if p)

    def expect(value: Any, kind: type, parts: tuple[str, ...], what: str) -> bool:
        """Paths are only rendered for a problem: this runs on every admitted pod."""
        if value is None:
            return False
        if not isinstance(value, kind):
            problems.append((at(*parts), f"must be {what}, not {type_name(value)}"))
            return False
        return True

    metadata = pod.get("metadata")
    if expect(metadata, dict, ("metadata",), "an object"):
        assert isinstance(metadata, dict)
        for parts in _MAPS_OF_STRINGS:
            value = metadata.get(parts[1])
            if expect(value, dict, parts, "a map of strings") and isinstance(value, dict):
                for key, item in value.items():
                    # Only the values rules parse are checked: a foreign tool's odd value is not ours to refuse.
                    if not isinstance(item, str) and str(key).startswith(_PARSED_PREFIXES):
                        problems.append((f"{at(*parts)}[{key}]", f"must be a string, not {type_name(item)}"))
        for key in ("name", "namespace", "generateName", "creationTimestamp", "deletionTimestamp"):
            expect(metadata.get(key), str, ("metadata", key), "a string")
    spec = pod.get("spec")
    if not expect(spec, dict, ("spec",), "an object") or not isinstance(spec, dict):
        return problems
    expect(spec.get("nodeName"), str, ("spec", "nodeName"), "a string")
    if expect(spec.get("nodeSelector"), dict, ("spec", "nodeSelector"), "a map of strings"):
        for key, item in spec["nodeSelector"].items():
            if not isinstance(item, str):
                problems.append((at("spec", "nodeSelector", key), f"must be a string, not {type_name(item)}"))
    for name in ("volumes", "tolerations", "schedulingGates"):
        items = spec.get(name)
        if expect(items, list, ("spec", name), "a list") and isinstance(items, list):
            for i, item in enumerate(items):
                if not isinstance(item, dict):
                    problems.append((f"{at('spec', name)}[{i}]", f"must be an object, not {type_name(item)}"))
    for i, volume in enumerate(spec.get("volumes") or ()):
        if isinstance(volume, dict):
            if not isinstance(volume.get("name"), str):
                problems.append((f"{at('spec', 'volumes')}[{i}].name", "required string"))
            claim = volume.get("persistentVolumeClaim")
            if claim is not None and not (isinstance(claim, dict) and isinstance(claim.get("claimName"), str)):
                problems.append((f"{at('spec', 'volumes')}[{i}].persistentVolumeClaim.claimName", "required string"))
    affinity = spec.get("affinity")
    if expect(affinity, dict, ("spec", "affinity"), "an object") and isinstance(affinity, dict):
        node = affinity.get("nodeAffinity")
        if expect(node, dict, ("spec", "affinity", "nodeAffinity"), "an object") and isinstance(node, dict):
            required = node.get("requiredDuringSchedulingIgnoredDuringExecution")
            if expect(required, dict, _REQUIRED, "an object") and isinstance(required, dict):
                terms = required.get("nodeSelectorTerms")
                if expect(terms, list, (*_REQUIRED, "nodeSelectorTerms"), "a list") and isinstance(terms, list):
                    for i, term in enumerate(terms):

                        def where(i: int = i) -> str:
                            return f"{at(*_REQUIRED)}.nodeSelectorTerms[{i}]"

                        problems.extend(_term_problems(term, where))
    return problems


def _term_problems(term: Any, where: Callable[[], str]) -> list[tuple[str, str]]:
    if not isinstance(term, dict):
        return [(where(), f"must be an object, not {type_name(term)}")]
    problems = []
    for part in ("matchExpressions", "matchFields"):
        items = term.get(part)
        if items is None:
            continue
        if not isinstance(items, list):
            problems.append((f"{where()}.{part}", f"must be a list, not {type_name(items)}"))
            continue
        for i, req in enumerate(items):
            if problem := _requirement_problem(req):
                suffix, message = problem
                problems.append((f"{where()}.{part}[{i}]{suffix}", message))
    return problems


def _requirement_problem(req: Any) -> tuple[str, str] | None:
    """(path suffix, message) of a mistyped requirement, or None."""
    if not isinstance(req, dict):
        return "", f"must be an object, not {type_name(req)}"
    if not isinstance(req.get("key"), str) or not isinstance(req.get("operator"), str):
        return "", "key and operator are required strings"
    values = req.get("values")
    if values is not None and not (isinstance(values, list) and all(isinstance(v, str) for v in values)):
        return ".values", "must be a list of strings"
    return None
