"""What the mutating webhook may change in a user's object, and a checker that lists every other change.

The owned fields (docs/design.md sections 4 and 5; rules/coscheduling/mutation.py and
rules/loadaffinity/mutation.py write exactly these):
- `spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution`: replaced whole; the result may
  only narrow the nodes the pod admits (checked separately by `loosened_on`), except when the webhook takes back
  its own pin copied from a Job template (`co-scheduled-with` already present);
- `spec.tolerations`: appended to, existing entries kept in place;
- `spec.nodeSelector[kubernetes.io/hostname]`: added, never changed;
- `spec.nodeName`: set when empty, never re-pinned;
- `metadata.annotations[storage-affinity.io/co-scheduled-with]`, `[.../load-affinity-applied]` and
  `[.../node-agent-restricted]` (rules/loadaffinity/nodeagents.py): the records (and `[.../data-source-placed]`,
  `[.../follows-vm]` of rules/datasource);
- `spec.nodeSelector[<key>]` for every key, added never changed, when the patched pod records `follows-vm`: a CDI
  worker following a VM gets the VM's nodeSelector (rules/datasource/vm.py).
For a Job the same fields under `spec.template`. Parents of owned fields may be created to hold them.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from rules.annotations import (
    CO_SCHEDULED_WITH,
    DATA_SOURCE_PLACED,
    FOLLOWS_VM,
    LOAD_AFFINITY_APPLIED,
    NODE_AGENT_RESTRICTED,
)
from rules.kube.nodeaffinity import HOSTNAME_LABEL, pod_fits_node

Path = tuple[str, ...]

ANY = "replaced"  # added, replaced or removed
APPEND = "appended"  # a list whose existing items stay first and unchanged
ADD = "set when empty"  # added where missing or empty, never changed otherwise

REQUIRED: Path = ("spec", "affinity", "nodeAffinity", "requiredDuringSchedulingIgnoredDuringExecution")
POD_OWNED: Mapping[Path, str] = {
    REQUIRED: ANY,
    ("spec", "tolerations"): APPEND,
    ("spec", "nodeSelector", HOSTNAME_LABEL): ADD,
    ("spec", "nodeName"): ADD,
    ("metadata", "annotations", CO_SCHEDULED_WITH): ANY,
    ("metadata", "annotations", LOAD_AFFINITY_APPLIED): ANY,
    ("metadata", "annotations", NODE_AGENT_RESTRICTED): ANY,
    ("metadata", "annotations", DATA_SOURCE_PLACED): ANY,
    ("metadata", "annotations", FOLLOWS_VM): ANY,
}

_MISSING = object()


def owned_paths(kind: str, patched: Mapping[str, Any] | None = None) -> dict[Path, str]:
    """The owned paths of a Pod or Job; with the `patched` object, also the nodeSelector keys a VM gave it."""
    prefix: Path = ("spec", "template") if kind == "Job" else ()
    owned = {prefix + path: rule for path, rule in POD_OWNED.items()}
    pod: Any = patched or {}
    for part in prefix:
        pod = (pod.get(part) if isinstance(pod, Mapping) else None) or {}
    annotations = (pod.get("metadata") or {}).get("annotations") or {}
    if FOLLOWS_VM in annotations:
        for key in (pod.get("spec") or {}).get("nodeSelector") or {}:
            owned[(*prefix, "spec", "nodeSelector", str(key))] = ADD
    return owned


def foreign_changes(original: Any, patched: Any, owned: Mapping[Path, str]) -> list[str]:
    """Every change outside the owned paths, and every owned path changed beyond its rule; empty when clean."""
    out: list[str] = []
    _diff(original, patched, (), owned, out)
    return out


def _diff(a: Any, b: Any, path: Path, owned: Mapping[Path, str], out: list[str]) -> None:
    rule = owned.get(path)
    if rule is not None:
        if not _follows(rule, a, b):
            out.append(f"{_show(path)}: owned field not {rule}: {_brief(a)} -> {_brief(b)}")
        return
    if a is not _MISSING and b is not _MISSING and a == b:
        return
    parent_of_owned = any(len(p) > len(path) and p[: len(path)] == path for p in owned)
    a_map = isinstance(a, Mapping) or (a is _MISSING and parent_of_owned)
    b_map = isinstance(b, Mapping) or (b is _MISSING and parent_of_owned)
    if a_map and b_map and not (a is _MISSING and b == {}) and not (b is _MISSING and a == {}):
        left = a if isinstance(a, Mapping) else {}
        right = b if isinstance(b, Mapping) else {}
        for key in dict.fromkeys([*left, *right]):
            _diff(left.get(key, _MISSING), right.get(key, _MISSING), (*path, str(key)), owned, out)
        return
    what = "added" if a is _MISSING else "removed" if b is _MISSING else "changed"
    out.append(f"{_show(path)}: {what}: {_brief(a)} -> {_brief(b)}")


def _follows(rule: str, a: Any, b: Any) -> bool:
    if rule == ANY:
        return True
    if rule == ADD:
        return a in (_MISSING, None, "") or a == b
    if rule == APPEND:
        before = [] if a in (_MISSING, None) else a
        after = [] if b in (_MISSING, None) else b
        return isinstance(after, list) and isinstance(before, list) and after[: len(before)] == before
    raise ValueError(rule)


def loosened_on(
    original: Mapping[str, Any], patched: Mapping[str, Any], nodes: Sequence[Mapping[str, Any]]
) -> list[str]:
    """Nodes the patched pod (spec) admits by nodeSelector and required node affinity that the original did not."""
    return [
        str((node.get("metadata") or {}).get("name"))
        for node in nodes
        if pod_fits_node(patched, node) and not pod_fits_node(original, node)
    ]


def _show(path: Path) -> str:
    return ".".join(path) or "(root)"


def _brief(value: Any) -> str:
    return "(missing)" if value is _MISSING else repr(value)[:120]
