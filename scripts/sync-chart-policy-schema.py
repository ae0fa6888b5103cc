#!/usr/bin/env python3
"""Copy the policy schema (rules/policy.schema.json) into the chart's values.schema.json, so that `helm install`
rejects an invalid `policy` value with the same rules the server applies.

The policy schema is draft 2020-12 with `#/$defs/X` references; the chart schema is draft-07 (what every Helm 3
and Helm 4 understands), with the policy's definitions under `$defs` as `policy` (the document) and `policy.X`.
Usage: sync-chart-policy-schema.py          rewrite values.schema.json
       sync-chart-policy-schema.py --check  exit 1 when values.schema.json is out of date
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
POLICY_SCHEMA = ROOT / "rules" / "policy.schema.json"
VALUES_SCHEMA = ROOT / "charts" / "storage-affinity-webhook" / "values.schema.json"
PREFIX = "policy."


#: Keywords draft 2020-12 (or 2019-09) added: a draft-07 validator, Helm's among them, ignores them silently, so the
#: chart would accept what the server refuses.
NEWER_KEYWORDS = frozenset(
    {
        "dependentRequired",
        "dependentSchemas",
        "prefixItems",
        "unevaluatedProperties",
        "unevaluatedItems",
        "minContains",
        "maxContains",
        "$anchor",
        "$dynamicRef",
        "$dynamicAnchor",
        "$recursiveRef",
        "$recursiveAnchor",
        "$vocabulary",
    }
)
#: Keywords whose value maps names to schemas, and keywords whose value is data rather than a schema.
_NAMED_SCHEMAS = frozenset({"properties", "patternProperties", "$defs", "definitions"})
_DATA = frozenset({"enum", "const", "default", "examples", "required", "description", "title", "$comment"})


def _rewrite(node: Any) -> Any:
    """A schema, rewritten for draft-07; SystemExit on what draft-07 cannot say."""
    if isinstance(node, list):
        return [_rewrite(item) for item in node]
    if not isinstance(node, dict):
        return node
    newer = sorted(NEWER_KEYWORDS & set(node))
    if newer:
        raise SystemExit(f"the policy schema uses {', '.join(newer)}, which the chart's draft-07 schema would ignore")
    out: dict[str, Any] = {}
    for key, value in node.items():
        if key == "$ref":
            if not (isinstance(value, str) and value.startswith("#/$defs/")):
                raise SystemExit(f"unsupported $ref in the policy schema: {value!r}")
            if set(node) - {"$ref", "description"}:  # a description is documentation, harmless when ignored
                raise SystemExit(f"$ref {value!r} has siblings, which draft-07 ignores")
            out[key] = "#/$defs/" + PREFIX + value.removeprefix("#/$defs/")
        elif key in _NAMED_SCHEMAS and isinstance(value, dict):
            out[key] = {name: _rewrite(sub) for name, sub in value.items()}
        elif key in _DATA:
            out[key] = value
        else:
            out[key] = _rewrite(value)
    return out


def chart_defs(policy_schema: dict[str, Any]) -> dict[str, Any]:
    """The `$defs` entries the chart schema needs for the policy, rewritten for draft-07."""
    document = {k: v for k, v in policy_schema.items() if k not in ("$schema", "$defs", "$id")}
    document["description"] = "The webhook policy (docs/policy.md); synced from rules/policy.schema.json."
    defs = {"policy": _rewrite(document)}
    for name, sub in (policy_schema.get("$defs") or {}).items():
        defs[PREFIX + name] = _rewrite(sub)
    return defs


def synced(values_schema: dict[str, Any], policy_schema: dict[str, Any]) -> dict[str, Any]:
    result = dict(values_schema)
    result["$defs"] = chart_defs(policy_schema)
    return result


def main(argv: list[str]) -> int:
    policy_schema = json.loads(POLICY_SCHEMA.read_text())
    current = json.loads(VALUES_SCHEMA.read_text())
    wanted = synced(current, policy_schema)
    if "--check" in argv:
        if current != wanted:
            print(f"{VALUES_SCHEMA.relative_to(ROOT)} is out of date: run scripts/sync-chart-policy-schema.py")
            return 1
        return 0
    VALUES_SCHEMA.write_text(json.dumps(wanted, indent=2, ensure_ascii=False) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
