"""Node affinity algebra: evaluate required node affinity against Nodes, and combine term lists.

Required node affinity is a disjunction of terms, each a conjunction of requirements. ANDing two such lists is
their cross product with requirements merged pairwise; keeping the result free of duplicate requirements and of
terms implied by others is what makes mutation idempotent (Velero bug #10341 is the counter-example).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from rules.model import Json
from rules.selectors import requirement_matches

NODE_OPERATORS = ("In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt")
HOSTNAME_LABEL = "kubernetes.io/hostname"

REQUIRED = ("affinity", "nodeAffinity", "requiredDuringSchedulingIgnoredDuringExecution")


def required_terms(spec: Mapping[str, Any]) -> list[Json] | None:
    """The pod spec's required node selector terms, or None when it has no required node affinity."""
    node = spec.get("affinity") or {}
    node = node.get("nodeAffinity") or {}
    required = node.get("requiredDuringSchedulingIgnoredDuringExecution")
    if not required:
        return None
    return list(required.get("nodeSelectorTerms") or [])


def term_matches(term: Mapping[str, Any], node: Mapping[str, Any]) -> bool:
    """A term matches when all of its requirements hold; an empty term matches no node (API semantics)."""
    expressions = term.get("matchExpressions") or []
    fields = term.get("matchFields") or []
    if not expressions and not fields:
        return False
    metadata = node.get("metadata") or {}
    labels = metadata.get("labels") or {}
    if not all(requirement_matches(expr, labels) for expr in expressions):
        return False
    field_values = {"metadata.name": metadata.get("name", "")}
    return all(expr.get("key") in field_values and requirement_matches(expr, field_values) for expr in fields)


def terms_match(terms: Sequence[Mapping[str, Any]], node: Mapping[str, Any]) -> bool:
    return any(term_matches(term, node) for term in terms)


def node_selector_matches(selector: Mapping[str, str], node: Mapping[str, Any]) -> bool:
    labels = (node.get("metadata") or {}).get("labels") or {}
    return all(labels.get(key) == value for key, value in selector.items())


def pod_fits_node(spec: Mapping[str, Any], node: Mapping[str, Any]) -> bool:
    """Whether the node passes the pod's `nodeSelector` and required node affinity (kubelet's NodeAffinity)."""
    if not node_selector_matches(spec.get("nodeSelector") or {}, node):
        return False
    terms = required_terms(spec)
    return terms is None or terms_match(terms, node)


def label_selector_term(selector: Mapping[str, Any]) -> Json:
    """A LabelSelector as a node selector term: matchLabels as `In [v]` sorted by key, then matchExpressions."""
    expressions: list[Json] = [
        {"key": key, "operator": "In", "values": [value]}
        for key, value in sorted((selector.get("matchLabels") or {}).items())
    ]
    expressions.extend(dict(expr) for expr in selector.get("matchExpressions") or ())
    return {"matchExpressions": expressions}


def merge_terms(a: Mapping[str, Any], b: Mapping[str, Any]) -> Json:
    """The conjunction of two terms, without duplicate requirements, in first-seen order."""
    merged: Json = {}
    for part in ("matchExpressions", "matchFields"):
        requirements = _unique([*(a.get(part) or ()), *(b.get(part) or ())])
        if requirements:
            merged[part] = requirements
    return merged


def and_terms(left: Sequence[Mapping[str, Any]] | None, right: Sequence[Mapping[str, Any]]) -> list[Json]:
    """AND of two ORed term lists (None on the left means unconstrained); redundant terms are dropped."""
    if left is None:
        return simplify([dict(t) for t in right])
    return simplify([merge_terms(a, b) for a in left for b in right])


def term_implies(stricter: Mapping[str, Any], looser: Mapping[str, Any]) -> bool:
    """True when every requirement of `looser` appears in `stricter`, so `stricter` ⊆ `looser` as node sets."""
    for part in ("matchExpressions", "matchFields"):
        have = {_key(r) for r in stricter.get(part) or ()}
        if any(_key(r) not in have for r in looser.get(part) or ()):
            return False
    return True


def terms_imply(stricter: Sequence[Mapping[str, Any]], looser: Sequence[Mapping[str, Any]]) -> bool:
    """Whether every term on the left already implies some term on the right (syntactically)."""
    return all(any(term_implies(t, u) for u in looser) for t in stricter)


def simplify(terms: Iterable[Json]) -> list[Json]:
    """Drop duplicate terms and terms that imply another term (in an OR, the looser one already admits them)."""
    unique = _unique(list(terms))
    kept: list[Json] = []
    for i, term in enumerate(unique):
        if any(
            j != i and term_implies(term, other) and not term_implies(other, term) for j, other in enumerate(unique)
        ):
            continue
        kept.append(term)
    return kept


def name_requirement(node_name: str) -> Json:
    """The DaemonSet controller's way to pin a pod: `metadata.name In [node]`, independent of labels."""
    return {"key": "metadata.name", "operator": "In", "values": [node_name]}


def pinned_node(terms: Sequence[Mapping[str, Any]] | None) -> str | None:
    """The node a pod is pinned to by a `metadata.name In [x]` field requirement present in every term."""
    if not terms:
        return None
    found: set[str] = set()
    for term in terms:
        names = [
            r["values"][0]
            for r in term.get("matchFields") or ()
            if r.get("key") == "metadata.name" and r.get("operator") == "In" and len(r.get("values") or ()) == 1
        ]
        if not names:
            return None
        found.update(names)
    return found.pop() if len(found) == 1 else None


def _key(value: Any) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"))


def _unique(items: list[Any]) -> list[Any]:
    seen: set[str] = set()
    out = []
    for item in items:
        key = _key(item)
        if key not in seen:
            seen.add(key)
            out.append(item)
    return out
