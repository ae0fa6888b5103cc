"""Node affinity algebra: evaluate required node affinity against Nodes, and combine term lists.

Required node affinity is a disjunction of terms, each a conjunction of requirements. ANDing two such lists is
their cross product with requirements merged pairwise; keeping the result free of duplicate requirements and of
terms implied by others is what makes mutation idempotent (vmware-tanzu/velero#10341 is the counter-example).
"""

from __future__ import annotations

from collections.abc import Hashable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from rules import deadline
from rules.budget import check_product
from rules.kube.names import label_key_error, label_value_error
from rules.kube.selectors import is_int64, requirement_matches
from rules.model import Json

NODE_OPERATORS = ("In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt")
HOSTNAME_LABEL = "kubernetes.io/hostname"

REQUIRED_KEY = "requiredDuringSchedulingIgnoredDuringExecution"
#: The path of a pod spec's required node affinity (a NodeSelector), under `spec`.
REQUIRED = ("affinity", "nodeAffinity", REQUIRED_KEY)


def required_node_affinity(spec: Mapping[str, Any]) -> Any:
    """The pod spec's required node affinity (a NodeSelector) when it has terms, else None.

    The one notion of "no required node affinity" every rule shares: none at all, `{}`, `nodeSelectorTerms:
    null` (what kube-apiserver sends for `{}`) or `[]`. The API server refuses a pod whose required node affinity
    has no terms unless a mutation gives it some, so such a pod is placed like one without affinity: any other
    reading makes the answer change when the patched pod is reviewed again.
    """
    required = ((spec.get("affinity") or {}).get("nodeAffinity") or {}).get(REQUIRED_KEY)
    # `is not None` first: the ABC check of a pod without one costs more than the rest of this function
    if required is not None and isinstance(required, (dict, Mapping)) and required.get("nodeSelectorTerms"):
        return required
    return None


def required_terms(spec: Mapping[str, Any]) -> list[Json] | None:
    """The pod spec's required node selector terms, or None when it has no required node affinity."""
    return selector_terms(required_node_affinity(spec))


def selector_terms(selector: Any) -> list[Json] | None:
    """A NodeSelector's terms, or None when it has none (see `required_node_affinity`)."""
    mapping = selector is not None and isinstance(selector, (dict, Mapping))  # see required_node_affinity
    terms = selector.get("nodeSelectorTerms") if mapping else None
    return [dict(term) for term in terms] if terms else None


def term_matches(term: Mapping[str, Any], node: Mapping[str, Any]) -> bool:
    """A term matches when all of its requirements hold; an empty term matches no node (API semantics).

    As in component-helpers' LazyErrorNodeSelector, a requirement the API could not parse (unknown operator,
    `In` without values, `Exists` with values, `Gt` with a non-integer) makes its whole term match nothing.
    """
    return term_parses(term) and _term_holds(term, node)


def terms_key(terms: Sequence[Mapping[str, Any]]) -> Hashable:
    """A term list as a key, equal exactly when the JSON values are (a memo key for what is derived from it)."""
    return tuple([_term_identity(term, _ordered_requirements(term)) for term in terms])


def term_parses(term: Mapping[str, Any]) -> bool:
    """Whether the API could parse every requirement of the term (one it could not makes the term match nothing)."""
    expressions = term.get("matchExpressions") or []
    return bool(expressions or term.get("matchFields")) and all(_expression_parses(expr) for expr in expressions)


def _term_holds(term: Mapping[str, Any], node: Mapping[str, Any]) -> bool:
    metadata = node.get("metadata") or {}
    labels = metadata.get("labels") or {}
    if not all(requirement_matches(expr, labels) for expr in term.get("matchExpressions") or ()):
        return False
    return all(_field_matches(expr, str(metadata.get("name") or "")) for expr in term.get("matchFields") or ())


def _expression_parses(expr: Mapping[str, Any]) -> bool:
    """What `labels.NewRequirement` accepts: a valid key, and the values each operator needs."""
    key, operator, values = expr.get("key"), expr.get("operator"), expr.get("values") or []
    if not isinstance(key, str) or label_key_error(key) is not None:
        return False
    if operator in ("In", "NotIn"):
        return bool(values) and all(isinstance(v, str) and label_value_error(v) is None for v in values)
    if operator in ("Exists", "DoesNotExist"):
        return not values
    if operator in ("Gt", "Lt"):
        return len(values) == 1 and is_int64(values[0])
    return False


def _field_matches(expr: Mapping[str, Any], node_name: str) -> bool:
    """A node field requirement: only In/NotIn with exactly one value; the node's only field is metadata.name."""
    operator, values = expr.get("operator"), expr.get("values") or []
    if operator not in ("In", "NotIn") or len(values) != 1:
        return False
    actual = node_name if expr.get("key") == "metadata.name" else ""  # fields.Set.Get of a missing field
    equal: bool = actual == values[0]
    return equal if operator == "In" else not equal


def terms_match(terms: Sequence[Mapping[str, Any]], node: Mapping[str, Any]) -> bool:
    return any(term_matches(term, node) for term in terms)


def node_selector_matches(selector: Mapping[str, str], node: Mapping[str, Any]) -> bool:
    labels = (node.get("metadata") or {}).get("labels") or {}
    return all(labels.get(key) == value for key, value in selector.items())


def pod_fits_node(spec: Mapping[str, Any], node: Mapping[str, Any]) -> bool:
    """Whether the node passes the pod's `nodeSelector` and required node affinity (kubelet's NodeAffinity).

    A term without requirements matches no node, as in the API; a required node affinity without terms is none.
    """
    if not node_selector_matches(spec.get("nodeSelector") or {}, node):
        return False
    required = required_node_affinity(spec)
    return required is None or terms_match(required.get("nodeSelectorTerms") or [], node)


def volume_terms_match(terms: Sequence[Mapping[str, Any]], node: Mapping[str, Any]) -> bool:
    """A PV's `nodeAffinity.required` against a node, as the scheduler and kubelet check it: on the node's labels
    only (`CheckNodeAffinity` builds a Node with labels and no name, so `matchFields` never match a PV)."""
    labels = (node.get("metadata") or {}).get("labels") or {}
    return terms_match(terms, {"metadata": {"labels": labels}})


def label_selector_term(selector: Mapping[str, Any]) -> Json:
    """A LabelSelector as a node selector term: matchLabels as `In [v]` sorted by key, then matchExpressions."""
    expressions: list[Json] = [
        {"key": key, "operator": "In", "values": [value]}
        for key, value in sorted((selector.get("matchLabels") or {}).items())
    ]
    expressions.extend(dict(expr) for expr in selector.get("matchExpressions") or ())
    return {"matchExpressions": expressions}


def merge_terms(a: Mapping[str, Any], b: Mapping[str, Any]) -> Json:
    """The conjunction of two terms, without duplicate requirements, in first-seen order.

    An empty term matches no node, so neither does its conjunction: merging into it would turn "nothing" into
    "the other term" and widen the pod.
    """
    if is_empty_term(a) or is_empty_term(b):
        return {}
    merged: Json = {}
    for part in ("matchExpressions", "matchFields"):
        requirements = _unique_requirements([*(a.get(part) or ()), *(b.get(part) or ())])
        if requirements:
            merged[part] = requirements
    return merged


def and_terms(left: Sequence[Mapping[str, Any]] | None, right: Sequence[Mapping[str, Any]]) -> list[Json]:
    """AND of two ORed term lists (None on the left means unconstrained); redundant terms are dropped.

    Raises OverBudget (rules/budget.py) before building a product past the review budget's limits."""
    check_product(left, right)
    if left is None:
        return simplify([dict(t) for t in right])
    return simplify([merge_terms(a, b) for a in left for b in right])


def is_empty_term(term: Mapping[str, Any]) -> bool:
    """A term without requirements: it matches no node (API semantics), not every node."""
    return not term.get("matchExpressions") and not term.get("matchFields")


def terms_imply(stricter: Sequence[Mapping[str, Any]], looser: Sequence[Mapping[str, Any]]) -> bool:
    """Whether every term on the left already implies some term on the right (syntactically): every requirement
    of the right-hand term appears in the left-hand one. An empty term's node set is empty: it implies every term
    and only an empty term implies it."""
    index = _SubsetIndex([_requirements(u) for u in looser])
    return all(index.implied_by(_requirements(t), strictly=False) for t in stricter)


def simplify(terms: Iterable[Json]) -> list[Json]:
    """Drop duplicate terms and terms that imply another term (in an OR, the looser one already admits them)."""
    unique: dict[Hashable, tuple[Json, _Requirements]] = {}
    for term in terms:
        deadline.check()
        ordered = _ordered_requirements(term)
        expressions, fields = ordered
        unique.setdefault(
            _term_identity(term, ordered), (term, _Requirements(frozenset(expressions), frozenset(fields)))
        )
    index = _SubsetIndex([requirements for _, requirements in unique.values()])
    return [term for term, mine in unique.values() if not index.implied_by(mine, strictly=True)]


@dataclass(frozen=True, slots=True)
class _Requirements:
    """A term's matchExpressions and matchFields as sets of requirement keys: built once per term, compared often."""

    expressions: frozenset[Hashable]
    fields: frozenset[Hashable]


def _term_identity(term: Mapping[str, Any], ordered: tuple[tuple[Hashable, ...], tuple[Hashable, ...]]) -> Hashable:
    """The term's requirements; a term with other fields or empty parts is keyed whole, so that equal keys
    always mean equal JSON."""
    expressions, fields = ordered
    # Every field a non-empty part: the parts are its only fields, and each is non-empty exactly when its
    # requirements are (a JSON value is truthy exactly when it iterates to something).
    if len(term) == bool(expressions) + bool(fields):
        return ordered
    return ("term", _key(term))


def _ordered_requirements(term: Mapping[str, Any]) -> tuple[tuple[Hashable, ...], tuple[Hashable, ...]]:
    """A term's expressions and fields as keys, in order: equal exactly when the JSON parts are equal."""
    expressions = term.get("matchExpressions")
    fields = term.get("matchFields")
    return (
        tuple([_requirement_key(r) for r in expressions]) if expressions else (),
        tuple([_requirement_key(r) for r in fields]) if fields else (),
    )


_REQUIREMENT_FIELDS = {"key", "operator", "values"}


def _requirement_key(requirement: Any) -> Hashable:
    """`_key` of the usual requirement shape without the generic walk (tagged so the two never collide)."""
    if isinstance(requirement, dict) and requirement.keys() == _REQUIREMENT_FIELDS:
        key, operator, values = requirement["key"], requirement["operator"], requirement["values"]
        if isinstance(values, list) and isinstance(key, str) and isinstance(operator, str):
            for value in values:  # a loop, not all(generator): this runs for every requirement of a review
                if not isinstance(value, str):
                    break
            else:
                return ("requirement", key, operator, *values)
    return _key(requirement)


def _requirements(term: Mapping[str, Any]) -> _Requirements:
    """A term's expressions and fields as sets: computed once per term, compared many times."""
    expressions, fields = _ordered_requirements(term)
    return _Requirements(frozenset(expressions), frozenset(fields))


class _SubsetIndex:
    """Terms (as requirement sets) indexed so that "does this term imply one of them?" looks only at terms that
    could be implied: each is filed under its requirement rarest among them, which a term must contain to imply
    it. Comparing every pair made a simplified product of n terms cost n² set comparisons."""

    def __init__(self, looser: list[_Requirements]) -> None:
        self.count = len(looser)
        self.filed: dict[Hashable, list[_Requirements]] = {}
        seen: dict[Hashable, int] = {}
        tagged = [(u, _tagged(u)) for u in looser]
        for _, requirements in tagged:
            for r in requirements:
                seen[r] = seen.get(r, 0) + 1
        for u, requirements in tagged:
            if requirements:
                self.filed.setdefault(min(requirements, key=seen.__getitem__), []).append(u)

    def implied_by(self, stricter: _Requirements, *, strictly: bool) -> bool:
        """Whether `stricter` implies one of the terms (`strictly`: one it is not also implied by, itself
        excluded)."""
        deadline.check()  # once a term of the caller's loop
        if not stricter.expressions and not stricter.fields:  # an empty term matches no node: it implies anything
            return bool(self.filed) if strictly else self.count > 0
        for r in _tagged(stricter):
            for u in self.filed.get(r, ()):
                if _implies(stricter, u) and not (strictly and _implies(u, stricter)):
                    return True
        return False


def _tagged(requirements: _Requirements) -> list[tuple[str, Hashable]]:
    """A term's requirements, expressions and fields kept apart."""
    return [("e", r) for r in requirements.expressions] + [("f", r) for r in requirements.fields]


def _implies(stricter: _Requirements, looser: _Requirements) -> bool:
    if not stricter.expressions and not stricter.fields:  # an empty term matches no node: it implies anything
        return True
    if not looser.expressions and not looser.fields:
        return False
    return looser.expressions <= stricter.expressions and looser.fields <= stricter.fields


def name_requirement(node_name: str) -> Json:
    """The DaemonSet controller's way to pin a pod: `metadata.name In [node]`, independent of labels."""
    return {"key": "metadata.name", "operator": "In", "values": [node_name]}


def pinned_node(terms: Sequence[Mapping[str, Any]] | None) -> str | None:
    """The node a pod is pinned to by a `metadata.name In [x]` field requirement present in every term."""
    if not terms:
        return None
    found: set[str] = set()
    for term in terms:
        deadline.check()
        names = [
            r["values"][0]
            for r in term.get("matchFields") or ()
            if r.get("key") == "metadata.name" and r.get("operator") == "In" and len(r.get("values") or ()) == 1
        ]
        if not names:
            return None
        found.update(names)
    return found.pop() if len(found) == 1 else None


def _key(value: Any) -> Hashable:
    """A hashable value equal exactly when the JSON values are equal (map order ignored, list order kept).

    Scalars other than strings carry their type, so `1`, `1.0`, `True` and `"1"` stay apart as JSON keeps them.
    Built by hand because this runs for every requirement of every admitted pod: json.dumps was 20 % of a review.
    """
    if isinstance(value, str):
        return value
    if isinstance(value, dict | Mapping):  # dict first: the concrete check is far cheaper than the ABC's
        return tuple(sorted((k, v if isinstance(v, str) else _key(v)) for k, v in value.items()))
    if isinstance(value, list | tuple):
        return ("[", *[v if isinstance(v, str) else _key(v) for v in value])
    return (type(value).__name__, value)


def _unique_requirements(items: list[Any]) -> list[Any]:
    seen: set[Hashable] = set()
    out = []
    for item in items:
        key = _requirement_key(item)
        if key not in seen:
            seen.add(key)
            out.append(item)
    return out
