"""What `review` prints: for one object the decision (json), the object as admitted (yaml) or the JSON Patch; for
several, the same per object, each named by its source; on a terminal, by default, a short summary a person reads
(allowed or denied, decisions, warnings, violations, and the patch as a diff)."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, TextIO

import yaml

from webhook.cli.review import ReviewResult


@dataclass(frozen=True)
class Reviewed:
    """One object's review: where it came from (`FILE`, or `FILE#N` for the Nth of several) and its result."""

    source: str
    result: ReviewResult


def default_output(stream: TextIO) -> str:
    return "summary" if stream.isatty() else "json"


def rendered(reviewed: Sequence[Reviewed], output: str, *, several: bool) -> str:
    """The results as `output`; one object given keeps the single-object form tools already read, several (even if
    only one could be reviewed) the list form."""
    if output == "summary":
        return "\n\n".join(_summary(r) for r in reviewed)
    if not several:
        return _one(reviewed[0].result, output)
    if output == "json":
        return json.dumps([{"source": r.source, **r.result.as_json()} for r in reviewed], indent=2)
    if output == "patch":
        return json.dumps([{"source": r.source, "patch": r.result.patch} for r in reviewed], indent=2)
    return "\n---\n".join(_one(r.result, "yaml") for r in reviewed)


def _one(result: ReviewResult, output: str) -> str:
    if output == "json":
        return json.dumps(result.as_json(), indent=2)
    if output == "patch":
        return json.dumps(result.patch, indent=2)
    return yaml.dump(result.object, Dumper=_PlainDumper, sort_keys=False).rstrip()


def _summary(reviewed: Reviewed) -> str:
    result = reviewed.result
    meta = (result.object or {}).get("metadata") or {}
    kind = str((result.object or {}).get("kind") or "object")
    name = f"{kind} {meta.get('namespace', '')}/{meta.get('name') or meta.get('generateName') or ''}".replace(" /", " ")
    verdict = "allowed" if result.allowed else "denied"
    lines = [f"{reviewed.source}: {name}: {verdict}"]
    lines += [f"  decision: {d}" for d in result.decisions]
    lines += [f"  warning: {w}" for w in result.warnings]
    lines += [f"  violation: {v['family']} {v['field'] or '-'}: {v['message']}" for v in result.violations]
    if result.patch:
        lines.append("  patch:")
        lines += [f"    {line}" for op in result.patch for line in _diff(op)]
    else:
        lines.append("  patch: none")
    return "\n".join(lines)


def _diff(op: dict[str, Any]) -> list[str]:
    """A JSON Patch operation as diff lines: `+ path: value` added, `- path` removed, `~ path: value` replaced."""
    value = json.dumps(op.get("value"), separators=(", ", ": "), ensure_ascii=False)
    if op["op"] == "add":
        return [f"+ {op['path']}: {value}"]
    if op["op"] == "remove":
        return [f"- {op['path']}"]
    if op["op"] == "replace":
        return [f"~ {op['path']}: {value}"]
    return [f"  {json.dumps(op, ensure_ascii=False)}"]


class _PlainDumper(yaml.SafeDumper):
    """Never emits anchors/aliases: a shared object in a patch must not come out as `&id001` (our loader refuses
    aliases)."""

    def ignore_aliases(self, data: Any) -> bool:
        return True
