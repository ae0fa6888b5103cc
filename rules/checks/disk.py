"""csi-baremetal disk (anti-)affinity annotations (docs/design.md#6-validation): grammar and contradictions.

csi-baremetal reads these annotations once, when it reserves capacity for a new pod, and ignores what it cannot
parse; a typo or a contradiction only shows up later as a pod stuck Pending or volumes on the wrong disks. Here
they are checked at admission, where the user still sees the message.

Grammar: each value is a comma-separated list, items trimmed of surrounding spaces; empty items (a trailing
comma is one) and duplicates are errors. A labels item is `key=value:namespace`, split on the last `:` and the
first `=`.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from rules import deadline
from rules.context import Context, PodTarget
from rules.kube.names import dns1123_label_error, label_key_error, label_value_error
from rules.model import Severity
from rules.quoting import clip
from rules.suggest import SUGGESTED, more_unknown, unknown_field

FAMILY = "diskAnnotations"
DOMAIN = "volumes.csi-baremetal.dell.com"

AFFINITY_TYPES = "affinity.volumes.csi-baremetal.dell.com/types"
ANTI_TYPES = "antiaffinity.volumes.csi-baremetal.dell.com/types"
ANTI_LABELS = "antiaffinity.volumes.csi-baremetal.dell.com/labels"
DEDICATED = "affinity.volumes.csi-baremetal.dell.com/dedicated"
TOLERATIONS = "affinity.volumes.csi-baremetal.dell.com/tolerations"
KNOWN_KEYS = (AFFINITY_TYPES, ANTI_TYPES, ANTI_LABELS, DEDICATED, TOLERATIONS)
#: Set by csi-baremetal on AvailableCapacity objects; on a pod it does nothing.
TAINT = "affinity.csi-baremetal.dell.com/taint"

AFFINITY_KINDS = ("pod-bound-required", "pod-bound-preferred", "dedicated-required", "dedicated-preferred")
ANTI_KINDS = ("pod-label-required", "pod-label-preferred")
TYPES = {AFFINITY_TYPES: AFFINITY_KINDS, ANTI_TYPES: ANTI_KINDS}

Find = Callable[[str, str], None]  # (annotation key, message): one denial at that annotation
#: Problems named in one annotation's list; the rest are counted.
SHOWN = 10


def is_disk_annotation(key: str) -> bool:
    """Keys under `*.volumes.csi-baremetal.dell.com/`: the five of the design, or typos of them."""
    prefix, slash, _ = key.partition("/")
    return bool(slash) and (prefix == DOMAIN or prefix.endswith("." + DOMAIN))


def split_list(value: str) -> tuple[list[str], list[str]]:
    """The unique, trimmed items of a comma-separated list, and a message per empty or repeated item: the first
    SHOWN of them, then one that counts the rest (a 256 KiB value of commas is one item per byte)."""
    if not value.strip():
        return [], ["must not be empty"]
    raw = value.split(",")
    items: dict[str, None] = {}  # sets, not lists: a 100,000-item value took a minute to check
    repeated: set[str] = set()
    problems: list[str] = []
    bad = 0
    for position, text in enumerate(raw, 1):
        item = text.strip()
        if item and item not in items:
            items[item] = None
            continue
        if item:
            if item in repeated:
                continue
            repeated.add(item)
        bad += 1
        if bad <= SHOWN:
            problems.append(
                f"{_q(item)} is listed more than once"
                if item
                else f"item {position} of {len(raw)} is empty (remove the extra comma)"
            )
    if bad > SHOWN:
        problems.append(f"and {bad - SHOWN:,} more empty or repeated items")
    return list(items), problems


def shown(problems: list[str]) -> list[str]:
    """The first SHOWN of an annotation's problems, then one that counts the rest."""
    if len(problems) <= SHOWN:
        return problems
    return [*problems[:SHOWN], f"and {len(problems) - SHOWN:,} more problems in this list"]


@dataclass(frozen=True)
class PodLabel:
    """One `key=value:namespace` item of the anti-affinity labels: pods whose disks to avoid."""

    item: str
    key: str
    value: str
    namespace: str


def parse_label_item(item: str) -> tuple[PodLabel | None, list[str]]:
    """One labels item, or the reasons it is malformed (key and value as label syntax, namespace DNS-1123)."""
    rest, colon, namespace = item.rpartition(":")
    if not colon:
        return None, [f'{_q(item)} is not key=value:namespace (no ":namespace")']
    key, equals, value = rest.partition("=")
    if not equals:
        return None, [f'{_q(item)} is not key=value:namespace (no "=value")']
    problems = []
    if (err := label_key_error(key)) is not None:
        problems.append(f"{_q(item)}: {err}")
    if (err := label_value_error(value)) is not None:
        problems.append(f"{_q(item)}: {err}")
    if (err := dns1123_label_error(namespace)) is not None:
        problems.append(f"{_q(item)}: namespace {err}")
    return (None if problems else PodLabel(item, key, value, namespace)), problems


@dataclass
class _Parsed:
    """What the annotations say once their grammar is checked; invalid items are left out."""

    affinity: list[str] = field(default_factory=list)
    anti: list[str] = field(default_factory=list)
    labels: list[PodLabel] = field(default_factory=list)


def disk_annotations(ctx: Context, target: PodTarget) -> None:
    """The validating rule: grammar and contradictions on CREATE, immutability on Pod UPDATE."""
    annotations: Mapping[str, Any] = target.metadata.get("annotations") or {}
    if ctx.subject.operation == "UPDATE":
        _changes_on_update(ctx, target, annotations)
        return
    if ctx.subject.operation != "CREATE" or not _mentions_disks(annotations):
        return

    def find(key: str, message: str, severity: Severity = Severity.DENY) -> None:
        ctx.report(target.field(f"metadata.annotations[{key}]"), message, FAMILY, severity)

    parsed = _Parsed()
    parsed.affinity = _types(annotations, AFFINITY_TYPES, find)
    parsed.anti = _types(annotations, ANTI_TYPES, find)
    if ANTI_LABELS in annotations:
        items, problems = split_list(str(annotations[ANTI_LABELS]))
        for item in items:
            deadline.check()
            label, item_problems = parse_label_item(item)
            problems.extend(item_problems)
            if label is not None:
                parsed.labels.append(label)
        for message in shown(problems):
            find(ANTI_LABELS, message)
    dedicated = annotations.get(DEDICATED)
    if dedicated is not None and dedicated not in ("true", "false"):
        find(DEDICATED, f'must be "true" or "false", not {_q(dedicated)}')
    if TOLERATIONS in annotations:
        for message in split_list(str(annotations[TOLERATIONS]))[1]:
            find(TOLERATIONS, message)

    _contradictions(ctx, target, annotations, parsed, find)
    unknown = 0
    for key in annotations:
        if is_disk_annotation(key) and key not in KNOWN_KEYS:
            unknown += 1
            if unknown <= SUGGESTED:
                find(key, unknown_field(key, KNOWN_KEYS).replace("unknown field", "unknown annotation", 1))
    if unknown > SUGGESTED:
        message = more_unknown(unknown - SUGGESTED, f"annotations under {DOMAIN}")
        ctx.report(target.field("metadata.annotations"), message, FAMILY)
    _warnings(ctx, target, annotations)


def _mentions_disks(annotations: Mapping[str, Any]) -> bool:
    """Whether any annotation is one this rule reads: a disk annotation or the misplaced taint. Most pods have
    none, and for them every check below would find nothing; a substring test rules out a key before
    `is_disk_annotation` splits it."""
    return TAINT in annotations or any(DOMAIN in key and is_disk_annotation(key) for key in annotations)


def _types(annotations: Mapping[str, Any], key: str, find: Find) -> list[str]:
    """The valid types of one types annotation; reports unknown types and required+preferred pairs."""
    if key not in annotations:
        return []
    allowed = TYPES[key]
    other_key = ANTI_TYPES if key == AFFINITY_TYPES else AFFINITY_TYPES
    other_kinds = TYPES[other_key]
    items, problems = split_list(str(annotations[key]))
    valid = []
    unknown = 0
    for item in items:
        if item in allowed:
            valid.append(item)
        elif item in other_kinds:
            problems.append(f"{_q(item)} is not allowed here: it belongs in {other_key}")
        else:
            unknown += 1
            if unknown <= SUGGESTED:
                problems.append(unknown_field(item, allowed).replace("unknown field", f"unknown type {_q(item)}", 1))
    if unknown > SUGGESTED:
        problems.append(more_unknown(unknown - SUGGESTED, "types"))
    for family in dict.fromkeys(kind.rpartition("-")[0] for kind in valid):
        if f"{family}-required" in valid and f"{family}-preferred" in valid:
            problems.append(f"{family}-required and {family}-preferred together: keep one of them")
    for message in problems:  # at most SHOWN + 1 of the list's own, a few more, SUGGESTED + 1 unknown types
        find(key, message)
    return valid


def _contradictions(
    ctx: Context, target: PodTarget, annotations: Mapping[str, Any], parsed: _Parsed, find: Find
) -> None:
    """Settings that are each well-formed but cannot work together."""
    pod_label_types = [t for t in parsed.anti if t.startswith("pod-label-")]
    if pod_label_types and ANTI_LABELS not in annotations:
        find(ANTI_TYPES, f"{pod_label_types[0]} needs {ANTI_LABELS} (key=value:namespace,...) naming the pods to avoid")
    if ANTI_LABELS in annotations and ANTI_TYPES not in annotations:
        find(ANTI_LABELS, f"has no effect without {ANTI_TYPES}: pod-label-required or pod-label-preferred")
    dedicated_types = [t for t in parsed.affinity if t.startswith("dedicated-")]
    dedicated = annotations.get(DEDICATED)
    if dedicated_types and dedicated != "true" and TOLERATIONS not in annotations:
        find(
            AFFINITY_TYPES,
            f'{dedicated_types[0]} needs {DEDICATED}: "true" (disks dedicated automatically) '
            f"or {TOLERATIONS} (disks tainted by hand)",
        )
    if dedicated == "true" and TOLERATIONS in annotations:
        find(DEDICATED, f'"true" and {TOLERATIONS} are the two alternative ways to dedicate disks: use one')
    if "pod-label-required" in parsed.anti and "pod-bound-required" in parsed.affinity:
        labels = target.metadata.get("labels") or {}
        for label in parsed.labels:
            if label.namespace == target.namespace and label.key in labels and labels[label.key] == label.value:
                find(
                    ANTI_LABELS,
                    f"{_q(label.item)} matches this pod itself: with pod-label-required its volumes must avoid "
                    "the disk pod-bound-required puts them on; drop the item or use pod-label-preferred",
                )


def _warnings(ctx: Context, target: PodTarget, annotations: Mapping[str, Any]) -> None:
    """Settings that are harmless but do nothing: worth telling, not worth refusing."""
    if any(is_disk_annotation(key) for key in annotations) and not _has_disk_volume(target.spec):
        ctx.report(
            target.field("spec.volumes"),
            "no PVC or ephemeral volume: the csi-baremetal disk annotations have no effect",
            FAMILY,
            Severity.WARN,
        )
    if TAINT in annotations:
        ctx.report(
            target.field(f"metadata.annotations[{TAINT}]"),
            "set it on an AvailableCapacity, not on a pod",
            FAMILY,
            Severity.WARN,
        )


def _has_disk_volume(spec: Mapping[str, Any]) -> bool:
    return any("persistentVolumeClaim" in v or "ephemeral" in v for v in spec.get("volumes") or ())


def _changes_on_update(ctx: Context, target: PodTarget, annotations: Mapping[str, Any]) -> None:
    """csi-baremetal reads the annotations only when it reserves the pod's disks: a later change would lie."""
    if ctx.subject.old is None:
        return
    old = (ctx.subject.old.get("metadata") or {}).get("annotations") or {}
    keys = [k for k in dict.fromkeys([*old, *annotations]) if is_disk_annotation(k)]
    for key in keys:
        if old.get(key) == annotations.get(key):
            continue
        verb = "added to" if key not in old else "removed from" if key not in annotations else "changed on"
        ctx.report(
            target.field(f"metadata.annotations[{key}]"),
            f"cannot be {verb} an existing pod: disk annotations take effect only at creation (recreate the pod)",
            FAMILY,
        )


def _q(text: str) -> str:
    """A user's text quoted for a message, control characters escaped so one finding stays one line."""
    return json.dumps(clip(text), ensure_ascii=False)
