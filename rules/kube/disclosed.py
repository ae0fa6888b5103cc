"""What a tenant may know of the nodes' labels, and a pod's node constraints read on that alone
(docs/design.md#13-what-a-review-may-tell).

Whether some node fits a pod's nodeSelector or required node affinity is an oracle on the labels those name: a
pod pinned to one node by `matchFields` with `Gt` on a label learns the label's value in a bisection of dry-run
reviews. So wherever an answer reaches a pod's author (a warning, a denial, a patch decision, an audit finding),
the constraints the author wrote are judged on the labels a tenant may know: the well-known topology labels that
kubelet and the cloud providers set (any tenant reads them in the scheduler's own events and in the topology
spread it may ask for) and the keys the policy itself names. A requirement on any other key is left out, as if
it held on every node: it can neither make a node fail nor make one fit. A requirement the API could not parse
stays: its term matches no node whatever the labels are. A rule asks rules/kube/feasible.py with
`Filters(labels=policy.disclosed_node_labels)`, which reads the pod's constraints so.

The kubelet and the scheduler still apply the whole pod, so a pod whose undisclosed requirements fail stays
Pending, and the scheduler says so to its author with counts alone.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from rules import deadline
from rules.kube.nodeaffinity import REQUIRED_KEY, required_node_affinity, selector_terms, term_parses

#: The node labels kubelet and the cloud providers set, with their deprecated beta forms
#: (kubernetes/kubernetes staging/src/k8s.io/api/core/v1/well_known_labels.go).
WELL_KNOWN_NODE_LABELS = frozenset(
    {
        "kubernetes.io/hostname",
        "topology.kubernetes.io/zone",
        "topology.kubernetes.io/region",
        "failure-domain.beta.kubernetes.io/zone",
        "failure-domain.beta.kubernetes.io/region",
        "kubernetes.io/os",
        "kubernetes.io/arch",
        "beta.kubernetes.io/os",
        "beta.kubernetes.io/arch",
        "node.kubernetes.io/instance-type",
        "beta.kubernetes.io/instance-type",
    }
)


class _EveryLabel(frozenset[str]):
    """The keys of a reader who may read the Nodes: every key is in it."""

    def __contains__(self, key: object) -> bool:
        return True


#: Every label key: the Nodes' reader's.
EVERY_LABEL: frozenset[str] = _EveryLabel()


def policy_label_keys(selectors: Iterable[Mapping[str, Any]]) -> frozenset[str]:
    """The node label keys named by LabelSelectors the operator wrote (the policy's load affinity entries'
    `nodeSelector`), in `matchLabels` or `matchExpressions`."""
    keys: set[str] = set()
    for selector in selectors:
        if not isinstance(selector, Mapping):
            continue
        keys.update(str(key) for key in selector.get("matchLabels") or {})
        keys.update(
            str(expr.get("key")) for expr in selector.get("matchExpressions") or () if isinstance(expr, Mapping)
        )
    return frozenset(keys)


def disclosed_keys(load_affinity: Iterable[Mapping[str, Any]], *, every: bool = False) -> frozenset[str]:
    """The keys a policy discloses: the well-known topology labels and those its load affinity entries' node
    selectors name; `every` label for a reader who may read the Nodes."""
    if every:
        return EVERY_LABEL
    return WELL_KNOWN_NODE_LABELS | policy_label_keys(entry.get("nodeSelector") or {} for entry in load_affinity)


def disclosed_selector(selector: Mapping[str, str], keys: frozenset[str]) -> Mapping[str, str]:
    """A nodeSelector without its pairs on undisclosed keys (the same mapping when it has none)."""
    if all(key in keys for key in selector):
        return selector
    return {key: value for key, value in selector.items() if key in keys}


def disclosed_terms(
    terms: Sequence[Mapping[str, Any]] | None, keys: frozenset[str]
) -> Sequence[Mapping[str, Any]] | None:
    """Required node selector terms without their parsed requirements on undisclosed keys; None (no constraint)
    when a term held only such requirements, as that term may hold on any node. The same list when nothing is
    left out."""
    if terms is None:
        return None
    out: list[Mapping[str, Any]] | None = None
    for index, term in enumerate(terms):
        deadline.check()
        expressions = term.get("matchExpressions") or ()
        if all(expr.get("key") in keys for expr in expressions) or not term_parses(term):  # the cheap test first
            if out is not None:
                out.append(term)
            continue
        kept = [expr for expr in expressions if expr.get("key") in keys]
        if not kept and not term.get("matchFields"):
            return None
        if out is None:
            out = list(terms[:index])
        out.append({**term, "matchExpressions": kept})
    return terms if out is None else out


def disclosed_spec(spec: Mapping[str, Any], keys: frozenset[str]) -> Mapping[str, Any]:
    """A pod spec whose nodeSelector and required node affinity are read as `disclosed_selector` and
    `disclosed_terms` read them, for what a cause reads of the spec besides where it may run (which
    rules/kube/feasible.py judges with `Filters.labels`); the same spec when it names no undisclosed key. Never a
    patch's base: the pod keeps all it asked for."""
    selector = spec.get("nodeSelector") or {}
    shown_selector = disclosed_selector(selector, keys)
    required = required_node_affinity(spec)
    terms = selector_terms(required)
    shown_terms = disclosed_terms(terms, keys)
    if shown_selector is selector and shown_terms is terms:
        return spec
    out = {**spec, "nodeSelector": shown_selector}
    affinity = dict(spec.get("affinity") or {})
    node_affinity = dict(affinity.get("nodeAffinity") or {})
    if shown_terms is None:
        node_affinity.pop(REQUIRED_KEY, None)
    else:
        node_affinity[REQUIRED_KEY] = {**required, "nodeSelectorTerms": shown_terms}
    out["affinity"] = {**affinity, "nodeAffinity": node_affinity}
    return out
