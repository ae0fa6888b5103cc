"""Where may this pod run: the one answer every rule asks for (docs/development.md, the toolbox).

The scheduler's filters that read only the pod, its claims and the Nodes: NodeName, NodeAffinity (nodeSelector and
required node affinity, `matchFields` included), the node affinity of the PVs its claims are bound to
(VolumeBinding), NodeUnschedulable (cordon) and TaintToleration (NoSchedule and NoExecute). Resources, ports and
inter-pod affinity are not counted: they change from minute to minute, and a rule asks where a pod *may* land.

Which filters count is the question's (`Filters`): placement consistency asks on labels alone, the suites' `nodes`
as the scheduler does, a data mover's node-agent split with its taints. So is which labels a tenant's constraints
are judged on: the disclosed keys wherever the answer reaches the pod's author (rules/kube/disclosed.py), every key
where only the operator reads it.

Behind one `Feasibility`: the NodeSet's bit sets (rules/kube/nodeset.py) evaluate the label, affinity, nodeName and
PV filters against every node at once, so a pod pinned by `matchFields`, a hostname label or `nodeName` costs its
requirements, not the node count; only the nodes they admit are asked about taints and cordon. One node is judged
node by node, without the snapshot (`fits`): a question about one named node makes no list of Nodes.
"""

from __future__ import annotations

from collections.abc import Hashable, Iterator, Mapping, Sequence
from typing import Any, NamedTuple

from rules.cluster import ClusterView
from rules.kube.disclosed import EVERY_LABEL, disclosed_selector, disclosed_terms
from rules.kube.nodeaffinity import node_selector_matches, required_terms, terms_match, volume_terms_match
from rules.kube.nodeset import NodeSet
from rules.kube.tolerations import Tolerated, node_tolerated, tolerates, toleration_key
from rules.kube.workloads import TEMPLATE_PATHS, template_of, template_spec
from rules.memo import digest
from rules.model import Json

#: The taint the NodeUnschedulable filter checks a cordoned node's pods against (what `kubectl cordon` means).
UNSCHEDULABLE_TAINT = {"key": "node.kubernetes.io/unschedulable", "effect": "NoSchedule"}

Terms = Sequence[Mapping[str, Any]]


class Filters(NamedTuple):
    """Which filters a question counts; nodeName, nodeSelector and required node affinity always do. Given by
    keyword, every one but `tolerations` (a tuple: it is built on the hot paths).

    - `taints`: a node with a NoSchedule or NoExecute taint the pod does not tolerate is out.
    - `cordon`: a cordoned node (`spec.unschedulable`) is out, unless the pod tolerates the unschedulable taint.
    - `volumes`: the node affinity of the PVs bound to the pod's claims (`volume_terms`) counts, on labels only.
    - `labels`: the label keys the pod's own nodeSelector and required terms are judged on: a requirement on any
      other key holds on every node. `policy.disclosed_node_labels` wherever the answer reaches the pod's author
      (a warning, a finding, a cause), `EVERY_LABEL` (readable) where it does not. PV terms are the cluster's:
      always read whole.
    - `tolerations`: counted as the pod's own (Velero's, which it puts on its data movers); with `taints` or
      `cordon` only.
    """

    taints: bool
    cordon: bool
    volumes: bool
    labels: frozenset[str]
    tolerations: Sequence[Mapping[str, Any]] = ()


class Feasibility:
    """The nodes one pod may run on among one snapshot's, by `filters`; the snapshot is read on first use.

    `terms` are the pod's required node selector terms: None for none (no constraint), `[]` for no node. `key`,
    when given, identifies the pod's constraints exactly (selector, terms, node name, own tolerations, volume
    terms): `any` and `names` are then remembered per snapshot (the filters are added to it here).
    """

    __slots__ = (
        "_admitted_bits",
        "_key",
        "_nodeset",
        "_source",
        "_tolerated",
        "_tolerations",
        "filters",
        "node_name",
        "selector",
        "terms",
        "volume_terms",
    )

    def __init__(
        self,
        nodes: ClusterView | NodeSet,
        filters: Filters,
        *,
        selector: Mapping[str, str] | None = None,
        terms: Terms | None = None,
        node_name: str = "",
        tolerations: Sequence[Mapping[str, Any]] = (),
        volume_terms: Sequence[Terms] = (),
        key: Hashable | None = None,
    ) -> None:
        self._source = nodes
        self.filters = filters
        labels = filters.labels
        #: The pod's nodeSelector and required terms as judged: on the keys of `filters.labels` (None: no terms
        #: constrain the pod).
        self.selector: Mapping[str, str] = selector or {}
        self.terms: Terms | None = terms
        if labels is not EVERY_LABEL:
            if selector:
                self.selector = disclosed_selector(selector, labels)
            if terms is not None:
                self.terms = disclosed_terms(terms, labels)
        self.node_name = node_name
        self._tolerations = tolerations
        self.volume_terms = volume_terms if filters.volumes else ()
        self._key = key
        self._nodeset: NodeSet | None = None
        self._tolerated: Tolerated | None = None
        self._admitted_bits = -1

    @property
    def nodeset(self) -> NodeSet:
        """The snapshot asked (the view's, read on first use)."""
        if self._nodeset is None:
            source = self._source
            self._nodeset = source if isinstance(source, NodeSet) else source.node_set()
        return self._nodeset

    @property
    def _admitted(self) -> int:
        """The nodes the nodeName, nodeSelector, required terms and PV terms admit, as a bit set: every node at
        once (rules/kube/nodeset.py)."""
        if self._admitted_bits < 0:
            nodes = self.nodeset
            mask = nodes.admitting(self.terms, selector=self.selector or None, volume_terms=self.volume_terms)
            if self.node_name:
                mask &= nodes.mask_of([self.node_name])
            self._admitted_bits = mask
        return self._admitted_bits

    def _tolerations_of(self) -> Tolerated:
        """The pod's and the extra tolerations, indexed: judged against many nodes' taints."""
        if self._tolerated is None:
            self._tolerated = Tolerated([*self._tolerations, *self.filters.tolerations])
        return self._tolerated

    def _usable(self, node: Mapping[str, Any]) -> bool:
        """The cordon and taint filters, as counted."""
        filters = self.filters
        if (
            filters.cordon
            and (node.get("spec") or {}).get("unschedulable")
            and not tolerates(self._tolerations_of(), UNSCHEDULABLE_TAINT)
        ):
            return False
        return not filters.taints or node_tolerated(self._tolerations_of(), node)

    @property
    def _per_node(self) -> bool:
        return self.filters.taints or self.filters.cordon

    def fits(self, node: Mapping[str, Any]) -> bool:
        """Whether this one node passes every counted filter: judged node by node, no snapshot read."""
        if self.node_name and _name(node) != self.node_name:
            return False
        selector = self.selector
        if selector and not node_selector_matches(selector, node):
            return False
        terms = self.terms
        if terms is not None and not terms_match(terms, node):
            return False
        for pv_terms in self.volume_terms:
            if not volume_terms_match(pv_terms, node):
                return False
        filters = self.filters
        return not (filters.taints or filters.cordon) or self._usable(node)

    def nodes(self) -> Iterator[Json]:
        """The nodes that pass, lazily, in the snapshot's order (not remembered)."""
        within = self._admitted
        if not self._per_node:
            return self.nodeset.matching(_every, within=within)
        return self.nodeset.matching(self._usable, within=within)

    def any(self) -> bool:
        """Whether some node passes (remembered under `key`)."""
        if self._key is None:
            return self._any()
        return self.nodeset.answer(self._memo_key(), self._any)

    def _any(self) -> bool:
        return bool(self._admitted) if not self._per_node else next(self.nodes(), None) is not None

    def names(self) -> frozenset[str]:
        """The names of the nodes that pass (remembered under `key`)."""
        if self._key is None:
            if not self._per_node:
                return frozenset(self.nodeset.names(self._admitted))  # read off the bit set, no node visited
            return frozenset(_name(node) for node in self.nodes())
        fits = _every if not self._per_node else self._usable
        return self.nodeset.names_matching(self._memo_key(), fits, within=self._admitted)

    @property
    def mask(self) -> int:
        """The nodes that pass as a bit set of the snapshot (`NodeSet.names`, `mask_of`, `bit_count`)."""
        if not self._per_node:
            return self._admitted
        return self.nodeset.mask_of(_name(node) for node in self.nodes())

    def _memo_key(self) -> Hashable:
        """`key` with what the filters add to the question: which count, the labels judged, extra tolerations. Short:
        a memo key whose encoding passes 64 bytes is hashed, which costs more than the rest of a remembered answer."""
        filters = self.filters
        counted = filters.taints + 2 * filters.cordon + 4 * filters.volumes
        if filters.labels is EVERY_LABEL:
            key: tuple[Hashable, ...] = (self._key, counted)
        else:
            key = (self._key, counted, _labels_key(filters.labels))
        if (filters.taints or filters.cordon) and filters.tolerations:
            return (*key, tuple(sorted({toleration_key(t) for t in filters.tolerations}, key=repr)))
        return key


def on_labels(labels: frozenset[str], *, volumes: bool) -> Filters:
    """`Filters(taints=False, cordon=False, volumes=volumes, labels=labels)`: the question on labels alone, which
    placement consistency and the mover ask on every review; the same object for the same label set (a policy's),
    not a new one each time."""
    made = _ON_LABELS[volumes]
    found = made.get(labels)  # a set's hash is computed once; `is` below keeps an equal set's entry apart
    if found is not None and found.labels is labels:
        return found
    if len(made) >= 64:
        made.clear()
    found = made[labels] = Filters(taints=False, cordon=False, volumes=volumes, labels=labels)
    return found


#: `on_labels`' filters by their label set, without and with the PVs.
_ON_LABELS: tuple[dict[frozenset[str], Filters], dict[frozenset[str], Filters]] = ({}, {})


def feasibility(
    nodes: ClusterView | NodeSet,
    spec: Mapping[str, Any],
    filters: Filters,
    *,
    volume_terms: Sequence[Terms] = (),
    key: Hashable | None = None,
) -> Feasibility:
    """The entry point for a pod spec: its nodeName, nodeSelector, required node affinity (none when it has no
    terms, as the API reads it: rules/kube/nodeaffinity.py `required_node_affinity`) and tolerations."""
    return Feasibility(
        nodes,
        filters,
        selector=spec.get("nodeSelector") or None,
        terms=required_terms(spec),
        node_name=str(spec.get("nodeName") or ""),
        tolerations=spec.get("tolerations") or (),
        volume_terms=volume_terms,
        key=key,
    )


def pod_of(kind: str, obj: Json) -> tuple[Json, Json] | None:
    """(metadata, spec) of the pods an object makes: a Pod itself, a workload's pods from its template; None for
    a kind that runs no pod (a ConfigMap)."""
    if kind == "Pod":
        return obj.get("metadata") or {}, obj.get("spec") or {}
    path = TEMPLATE_PATHS.get(kind)
    if path is None:
        return None
    template = template_of(obj, path)
    return template.get("metadata") or {}, template_spec(kind, obj, template)


def _every(_: Json) -> bool:
    return True


def _name(node: Mapping[str, Any]) -> str:
    return str((node.get("metadata") or {}).get("name") or "")


#: A policy's disclosed keys as a memo key part, by their set (derived once per policy; the set is held).
_LABEL_KEYS: dict[frozenset[str], tuple[frozenset[str], str]] = {}


def _labels_key(labels: frozenset[str]) -> str:
    """A disclosed label set as a string, which a memo key encodes natively (bytes take a callback)."""
    found = _LABEL_KEYS.get(labels)  # a set's hash is computed once
    if found is not None and found[0] is labels:
        return found[1]
    if len(_LABEL_KEYS) >= 64:
        _LABEL_KEYS.clear()
    key = digest(tuple(sorted(labels))).hex()
    _LABEL_KEYS[labels] = (labels, key)
    return key
