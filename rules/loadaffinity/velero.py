"""Velero's node-agent ConfigMap (`--node-agent-configmap`): read and checked as Velero reads it.

Velero takes the value of the ConfigMap's only data key and unmarshals it as JSON into its node-agent `Configs`
(Go `encoding/json`: unknown fields dropped, a wrong type fails the whole document, which node-agent then ignores).
Two keys are refused here: Velero would read whichever one Go's map iteration yields first.

The fields Velero copies onto its data-mover pods (`podLabels`, `podAnnotations`: vmware-tanzu/velero#9452;
`tolerations`: velero-io/velero#9575) are checked as the API server would check them on those pods too: a label or
toleration it refuses fails the creation of every data mover, not the node-agent's start.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from rules import deadline
from rules.kube.names import dns1123_subdomain_error, label_key_error, label_value_error
from rules.kube.selectors import Problem, type_name
from rules.kube.tolerations import toleration_problems
from rules.loadaffinity.entries import known_fields, load_affinity_problems
from rules.model import Json
from rules.safeload import JsonError, load_json
from rules.suggest import unknown_field

#: Top-level fields of Velero's node-agent configuration (pkg/types NodeAgentConfigs, docs v1.18) and their JSON
#: types; `object` fields other than ours are not looked into.
CONFIG_FIELDS: Mapping[str, type] = {
    "loadConcurrency": dict,
    "loadAffinity": list,
    "backupPVC": dict,
    "restorePVC": dict,
    "podResources": dict,
    "priorityClassName": str,
    "privilegedFsBackup": bool,
    "cachePVC": dict,
    "podAnnotations": dict,
    "podLabels": dict,
    "tolerations": list,
}
BACKUP_PVC_FIELDS: Mapping[str, type] = {
    "storageClass": str,
    "readOnly": bool,
    "spcNoRelabeling": bool,
    "annotations": dict,
}
RESTORE_PVC_FIELDS: Mapping[str, type] = {"ignoreDelayBinding": bool}
CACHE_PVC_FIELDS: Mapping[str, type] = {"storageClass": str, "residentThresholdInMB": int}
#: A toleration as Go decodes a `corev1.Toleration`.
TOLERATION_FIELDS: Mapping[str, type] = {
    "key": str,
    "operator": str,
    "value": str,
    "effect": str,
    "tolerationSeconds": int,
}
TOLERATION_OPERATORS = ("Exists", "Equal")
TAINT_EFFECTS = ("NoSchedule", "PreferNoSchedule", "NoExecute")
_INT64 = (-(2**63), 2**63 - 1)

_TYPE_WORDS = {
    dict: "an object",
    list: "a list",
    str: "a string",
    bool: "true or false",
    int: "a 64-bit integer",
}


class VeleroConfigError(ValueError):
    """The ConfigMap cannot be read as Velero's node-agent configuration; `problems` name each field."""

    def __init__(self, problems: list[Problem]) -> None:
        self.problems = problems
        super().__init__("; ".join(f"{p}: {m}" if p else m for p, m in problems))


@dataclass(frozen=True)
class NodeAgentConfig:
    """The parts of the node-agent configuration that place backup and restore pods."""

    key: str
    load_affinity: tuple[Json, ...] = ()
    backup_pvc: Mapping[str, Json] = field(default_factory=dict)
    restore_pvc: Mapping[str, Any] = field(default_factory=dict)
    #: What Velero puts on every data-mover pod it creates: counted as the pod's own where its nodes are judged.
    tolerations: tuple[Json, ...] = ()
    cache_pvc: Mapping[str, Any] = field(default_factory=dict)


def config_document(config_map: Mapping[str, Any]) -> tuple[str, Any]:
    """(data key, parsed JSON) of the ConfigMap's only data key; raises VeleroConfigError."""
    data = config_map.get("data")
    if data is not None and not isinstance(data, Mapping):
        raise VeleroConfigError([("data", f"must be a map of strings, not {type_name(data)}")])
    keys = sorted(str(k) for k in (data or {}))
    if len(keys) != 1:
        found = f"found {len(keys)}: {', '.join(keys)}" if keys else "found none"
        raise VeleroConfigError(
            [("data", f"must hold exactly one key with the node-agent configuration as JSON ({found})")]
        )
    key = keys[0]
    assert data is not None
    text = data[key]
    if not isinstance(text, str):
        raise VeleroConfigError([(f"data[{key}]", f"must be a string holding JSON, not {type_name(text)}")])
    try:
        doc = load_json(text)
    except JsonError as exc:
        raise VeleroConfigError([(f"data[{key}]", f"is not valid JSON: {exc}")]) from None
    if not isinstance(doc, Mapping):
        raise VeleroConfigError([(f"data[{key}]", f"must hold a JSON object, not {type_name(doc)}")])
    return key, doc


def config_problems(config_map: Mapping[str, Any]) -> tuple[list[Problem], list[Problem]]:
    """(errors, unknown-field warnings) of a node-agent ConfigMap, paths rooted at `data[<key>]`."""
    try:
        key, doc = config_document(config_map)
    except VeleroConfigError as exc:
        return exc.problems, []
    return _document_problems(key, doc)


def _document_problems(key: str, doc: Mapping[str, Any]) -> tuple[list[Problem], list[Problem]]:
    base = f"data[{key}]"
    errors: list[Problem] = []
    unknown: list[Problem] = []
    _struct_problems(doc, base, CONFIG_FIELDS, errors, unknown)
    if isinstance(doc.get("loadAffinity"), list):
        entry_errors, entry_unknown = load_affinity_problems(doc["loadAffinity"], f"{base}.loadAffinity")
        errors.extend(entry_errors)
        unknown.extend(entry_unknown)
    backup = doc.get("backupPVC")
    if isinstance(backup, Mapping):
        for source_class, spec in backup.items():
            deadline.check()
            at = f"{base}.backupPVC[{source_class}]"
            if (err := dns1123_subdomain_error(str(source_class))) is not None:
                errors.append((at, f"{err}: the key must name the source StorageClass"))
            _struct_problems(spec, at, BACKUP_PVC_FIELDS, errors, unknown)
            target = spec.get("storageClass") if isinstance(spec, Mapping) else None
            if isinstance(target, str) and target and (err := dns1123_subdomain_error(target)) is not None:
                errors.append((f"{at}.storageClass", err))
    if isinstance(doc.get("restorePVC"), Mapping):
        _struct_problems(doc["restorePVC"], f"{base}.restorePVC", RESTORE_PVC_FIELDS, errors, unknown)
    cache = doc.get("cachePVC")
    if isinstance(cache, Mapping):
        _struct_problems(cache, f"{base}.cachePVC", CACHE_PVC_FIELDS, errors, unknown)
        target = cache.get("storageClass")
        if isinstance(target, str) and target and (err := dns1123_subdomain_error(target)) is not None:
            errors.append((f"{base}.cachePVC.storageClass", err))
    _pod_metadata_problems(doc, base, errors)
    if isinstance(doc.get("tolerations"), list):
        _toleration_problems(doc["tolerations"], f"{base}.tolerations", errors, unknown)
    return errors, unknown


def _pod_metadata_problems(doc: Mapping[str, Any], base: str, errors: list[Problem]) -> None:
    """`podLabels` and `podAnnotations`: Go's map[string]string (a value of another type fails the document), with
    keys and label values the API server accepts on the pods Velero creates."""
    for name, values_are_labels in (("podLabels", True), ("podAnnotations", False)):
        found = doc.get(name)
        if not isinstance(found, Mapping):
            continue
        for key, value in found.items():
            deadline.check()
            at = f"{base}.{name}[{key}]"
            if (err := label_key_error(str(key))) is not None:
                errors.append((at, f"{err}: the API server refuses it on every data-mover pod"))
            if value is None:
                continue
            if not isinstance(value, str):
                errors.append((at, f"must be a string, not {type_name(value)}"))
            elif values_are_labels and (err := label_value_error(value)) is not None:
                errors.append((at, f"{err}: the API server refuses it on every data-mover pod"))


def _toleration_problems(tolerations: list[Any], path: str, errors: list[Problem], unknown: list[Problem]) -> None:
    """Each toleration as Go decodes it, then as the API server's ValidateTolerations checks it on the pod."""
    for i, toleration in enumerate(tolerations):
        deadline.check()
        at = f"{path}[{i}]"
        if toleration is None:
            continue
        shape_errors = len(errors)
        _struct_problems(toleration, at, TOLERATION_FIELDS, errors, unknown)
        if len(errors) > shape_errors or not isinstance(toleration, Mapping):
            continue
        operator, effect = toleration.get("operator"), toleration.get("effect")
        if operator not in (None, "", *TOLERATION_OPERATORS):
            errors.append((f"{at}.operator", f"{operator!r} is not one of {', '.join(TOLERATION_OPERATORS)}"))
        if effect not in (None, "", *TAINT_EFFECTS):
            errors.append((f"{at}.effect", f"{effect!r} is not one of {', '.join(TAINT_EFFECTS)}"))
        errors.extend(toleration_problems(toleration, at))


def read_config(config_map: Mapping[str, Any]) -> NodeAgentConfig:
    """The placement settings of a valid node-agent ConfigMap; raises VeleroConfigError listing every error."""
    key, doc = config_document(config_map)
    errors, _ = _document_problems(key, doc)
    if errors:
        raise VeleroConfigError(errors)
    return NodeAgentConfig(
        key=key,
        load_affinity=tuple(known_fields(e) for e in doc.get("loadAffinity") or ()),
        backup_pvc={str(k): dict(v or {}) for k, v in (doc.get("backupPVC") or {}).items()},
        restore_pvc=dict(doc.get("restorePVC") or {}),
        tolerations=tuple(_known(t, TOLERATION_FIELDS) for t in doc.get("tolerations") or () if t is not None),
        cache_pvc=_known(doc.get("cachePVC") or {}, CACHE_PVC_FIELDS),
    )


def _known(obj: Mapping[str, Any], fields: Mapping[str, type]) -> Json:
    """What Go keeps of an object: its known fields, nulls dropped."""
    return {k: v for k, v in obj.items() if k in fields and v is not None}


def _struct_problems(
    value: Any, path: str, fields: Mapping[str, type], errors: list[Problem], unknown: list[Problem]
) -> None:
    if value is None:
        return
    if not isinstance(value, Mapping):
        errors.append((path, f"must be an object, not {type_name(value)}"))
        return
    for name, item in value.items():
        expected = fields.get(name)
        if expected is None:
            unknown.append((f"{path}.{name}", unknown_field(str(name), fields)))
        elif item is not None and not _is(item, expected):
            errors.append((f"{path}.{name}", f"must be {_TYPE_WORDS[expected]}, not {type_name(item)}"))


def _is(value: Any, expected: type) -> bool:
    if expected is not bool and isinstance(value, bool):
        return False
    if expected is int:
        return isinstance(value, int) and _INT64[0] <= value <= _INT64[1]
    return isinstance(value, expected)
