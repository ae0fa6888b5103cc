"""The known Nodes as rules ask about them: "does any node fit these constraints?", at a cost that does not grow
with the node count.

Three rules ask it for every pod they see (a backup pod's load affinity, a pod's nodeSelector and required
affinity against its local PVs, a loadAffinity entry against the cluster). Walking every Node made a backup review
cost more at 10,000 nodes than at 100. A NodeSet is an immutable snapshot of the nodes' names and labels with an
index from each label to the nodes that carry it: a question is answered by checking only the nodes that could
match its most selective requirement, and the answer is remembered until the snapshot is replaced (the cluster
index builds a new one only when a node is added, removed, relabelled, tainted or cordoned, not on every status
update).

The index only narrows the candidates; each candidate is checked with the matching functions of
rules/kube/nodeaffinity.py, so the semantics (unparsable requirements, matchFields, NotIn on a missing label) are
exactly theirs.

`NotIn` and `DoesNotExist` match the nodes *without* a label, which the index cannot narrow: a pod of 1,000 such
terms made every check of 1,000 nodes a million term evaluations. So a list of terms is also evaluated against
all nodes at once (`admitting`): each node is a bit of an integer, each label value the set of bits of the nodes
that carry it, and a requirement is a few integer operations whatever the node count. The checks then test a bit.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Collection, Hashable, Iterable, Iterator, Mapping, Sequence
from typing import Any

from rules.kube.nodeaffinity import term_parses, terms_key, volume_terms_match
from rules.kube.selectors import is_int64
from rules.memo import Memo
from rules.model import Json

#: The full check of one node (nodeSelector, required terms, PV terms...).
Predicate = Callable[[Json], bool]

MEMO_SIZE = 4096
#: Node-name sets are bigger than yes/no answers: fewer are kept, and they are weighed.
SETS_MEMO_SIZE = 256
#: Bytes of node-name sets (a set of all 10,000 nodes is 0.5 MiB) and of node bit masks a snapshot keeps.
SETS_BUDGET = 8 << 20
MASKS_BUDGET = 4 << 20


class NodeSet:
    """The nodes of one moment; answers are memoised per question key for the snapshot's lifetime."""

    def __init__(self, nodes: Iterable[Json]) -> None:
        self._nodes: dict[str, Json] = {}
        self._by_label: dict[str, dict[str, set[str]]] = {}
        for node in nodes:
            metadata = node.get("metadata") or {}
            name = str(metadata.get("name") or "")
            self._nodes[name] = node
            for key, value in (metadata.get("labels") or {}).items():
                self._by_label.setdefault(str(key), {}).setdefault(str(value), set()).add(name)
        self._with_label = {key: frozenset().union(*values.values()) for key, values in self._by_label.items()}
        self._memo: Memo[bool] = Memo(MEMO_SIZE)
        self._sets: Memo[frozenset[str]] = Memo(SETS_MEMO_SIZE, budget=SETS_BUDGET, weigh=sys.getsizeof)
        self._index = {name: i for i, name in enumerate(self._nodes)}
        self._all = (1 << len(self._nodes)) - 1
        self._label_bits: dict[tuple[str, str | None], int] = {}  # (key, value or None for "has the key") → bits
        self._masks: Memo[int] = Memo(SETS_MEMO_SIZE, budget=MASKS_BUDGET, weigh=sys.getsizeof)  # a bit per node

    def __len__(self) -> int:
        return len(self._nodes)

    def __iter__(self) -> Iterator[Json]:
        return iter(self._nodes.values())

    def get(self, name: str) -> Json | None:
        """The node of that name in this snapshot (no lookup beyond it)."""
        return self._nodes.get(name)

    def any_fits(
        self,
        key: Hashable,
        fits: Predicate,
        groups: Sequence[Sequence[Mapping[str, Any]]] = (),
        labels: Mapping[str, str] | None = None,
    ) -> bool:
        """Whether some node passes `fits`, remembered under `key` (which must identify the question exactly).

        `groups` (ORed term lists that must each hold) and `labels` (a nodeSelector) are requirements `fits` also
        checks: they only narrow the nodes checked, so they may leave out what `fits` checks, never add to it.
        """
        return self._memo.get(key, lambda: any(fits(node) for node in self._narrowed(groups, labels)))

    def matching(
        self,
        fits: Predicate,
        groups: Sequence[Sequence[Mapping[str, Any]]] = (),
        labels: Mapping[str, str] | None = None,
    ) -> Iterator[Json]:
        """The nodes that pass `fits`, lazily and in no order; `groups` and `labels` narrow the nodes checked as
        in `any_fits`. Not memoised: the audit asks it for the few pods that are stuck."""
        return (node for node in self._narrowed(groups, labels) if fits(node))

    def names_matching(
        self,
        key: Hashable,
        fits: Predicate,
        groups: Sequence[Sequence[Mapping[str, Any]]] = (),
        labels: Mapping[str, str] | None = None,
    ) -> frozenset[str]:
        """The names of the nodes that pass `fits`, remembered under `key` like `any_fits` (same narrowing).

        For questions that need the nodes themselves (which of them run a node-agent), not only whether one fits.
        """
        return self._sets.get(
            key,
            lambda: frozenset(
                str((node.get("metadata") or {}).get("name") or "") for node in self.matching(fits, groups, labels)
            ),
        )

    def _narrowed(
        self, groups: Sequence[Sequence[Mapping[str, Any]]], labels: Mapping[str, str] | None
    ) -> Iterable[Json]:
        """The nodes that may satisfy the groups and the nodeSelector `labels` (a superset of those that do)."""
        candidates = self._candidates(groups)
        for label, value in (labels or {}).items():
            exact = (self._by_label.get(label) or {}).get(value, ())
            if candidates is None or len(exact) < len(candidates):
                candidates = exact
        return self._nodes.values() if candidates is None else (self._nodes[name] for name in candidates)

    def _candidates(self, groups: Sequence[Sequence[Mapping[str, Any]]]) -> Collection[str] | None:
        """The smallest superset of the nodes that satisfy one of the groups (None: every node may)."""
        best: Collection[str] | None = None
        for terms in groups:
            union: set[str] = set()
            for term in terms:
                narrowed = self._term_candidates(term)
                if narrowed is None:
                    break
                union.update(narrowed)
            else:
                if best is None or len(union) < len(best):
                    best = union
        return best

    def _term_candidates(self, term: Mapping[str, Any]) -> Collection[str] | None:
        """A superset of the nodes the term matches, from its most selective positive requirement."""
        if not term_parses(term):
            return ()  # a term the API cannot parse matches no node
        best: Collection[str] | None = None
        size = len(self._nodes) + 1
        for requirement in term.get("matchExpressions") or ():
            found = self._requirement_candidates(requirement)
            if found is not None and len(found) < size:
                best, size = found, len(found)
        for requirement in term.get("matchFields") or ():
            values = requirement.get("values") or ()
            if requirement.get("key") == "metadata.name" and requirement.get("operator") == "In":
                names = {str(v) for v in values if v in self._nodes}
                if len(names) < size:
                    best, size = names, len(names)
        return best

    def _requirement_candidates(self, requirement: Mapping[str, Any]) -> frozenset[str] | set[str] | None:
        operator, key = requirement.get("operator"), str(requirement.get("key"))
        if operator == "In":
            values = self._by_label.get(key) or {}
            return set().union(*(values.get(str(v), ()) for v in requirement.get("values") or ()))
        if operator in ("Exists", "Gt", "Lt"):  # Gt and Lt need the label too
            return self._with_label.get(key, frozenset())
        return None  # NotIn and DoesNotExist match nodes without the label: no narrowing

    def admitting(
        self,
        terms: Sequence[Mapping[str, Any]] | None = None,
        *,
        selector: Mapping[str, str] | None = None,
        volume_terms: Iterable[Sequence[Mapping[str, Any]]] = (),
    ) -> int:
        """The nodes (a bit set for `contains`) that pass required terms (None: no constraint) as `terms_match`
        checks them, a nodeSelector, and PV terms as `volume_terms_match` checks them (on labels only).

        What `pod_fits_node` and `volume_terms_match` answer node by node, at a cost linear in the terms and not
        in terms × nodes; a list of terms is evaluated once per snapshot.
        """
        mask = self._all if terms is None else self._terms_bits(terms, by_name=True)
        for key, value in (selector or {}).items():
            mask &= self._label(str(key), str(value))
        for pv_terms in volume_terms:
            mask &= self._terms_bits(pv_terms, by_name=False)
        return mask

    def admits_any(
        self,
        key: Hashable,
        terms: Sequence[Mapping[str, Any]] | None = None,
        *,
        selector: Mapping[str, str] | None = None,
        volume_terms: Sequence[Sequence[Mapping[str, Any]]] = (),
    ) -> bool:
        """Whether some node passes what `admitting` checks, remembered under `key` (which must identify the
        question exactly): a question asked again costs one lookup."""
        return self._memo.get(key, lambda: bool(self.admitting(terms, selector=selector, volume_terms=volume_terms)))

    def contains(self, mask: int, node: Mapping[str, Any]) -> bool:
        """Whether the node (one of this snapshot's) is in a bit set from `admitting`."""
        index = self._index.get(str((node.get("metadata") or {}).get("name") or ""))
        return index is not None and bool(mask >> index & 1)

    def _terms_bits(self, terms: Sequence[Mapping[str, Any]], *, by_name: bool) -> int:
        """The nodes some term matches; `by_name=False` reads them as a PV's terms are read: without a name."""

        def compute() -> int:
            mask = 0
            for term in terms:
                mask |= self._term_bits(term, by_name)
            return mask

        return self._masks.get((by_name, terms_key(terms)), compute)

    def _term_bits(self, term: Mapping[str, Any], by_name: bool) -> int:
        if not term_parses(term):
            return 0  # a term the API cannot parse matches no node
        mask = self._all
        for requirement in term.get("matchExpressions") or ():
            mask &= self._expression_bits(requirement)
            if not mask:
                return 0
        for requirement in term.get("matchFields") or ():
            mask &= self._field_bits(requirement, by_name)
        return mask

    def _expression_bits(self, requirement: Mapping[str, Any]) -> int:
        """`requirement_matches` over every node: a requirement that parsed (`term_parses`)."""
        key, operator = str(requirement["key"]), requirement["operator"]
        values: Sequence[str] = requirement.get("values") or ()
        if operator in ("In", "NotIn"):
            mask = 0
            for value in values:
                mask |= self._label(key, value)
            return mask if operator == "In" else self._all & ~mask
        if operator == "Exists":
            return self._label(key, None)
        if operator == "DoesNotExist":
            return self._all & ~self._label(key, None)
        bound, mask = int(values[0]), 0  # Gt or Lt: one 64-bit integer value
        for value in self._by_label.get(key) or {}:
            if is_int64(value) and (int(value) > bound if operator == "Gt" else int(value) < bound):
                mask |= self._label(key, value)
        return mask

    def _field_bits(self, requirement: Mapping[str, Any], by_name: bool) -> int:
        """`_field_matches` over every node: only `In`/`NotIn` with one value; a node's only field is its name
        (which a PV's terms never see)."""
        operator, values = requirement.get("operator"), requirement.get("values") or []
        if operator not in ("In", "NotIn") or len(values) != 1:
            return 0
        if by_name and requirement.get("key") == "metadata.name":
            index = self._index.get(values[0])
            equal = 0 if index is None else 1 << index
        else:
            equal = self._all if values[0] == "" else 0  # the field is missing: it reads as ""
        return equal if operator == "In" else self._all & ~equal

    def _label(self, key: str, value: str | None) -> int:
        """The nodes carrying label `key` with `value` (None: with any value), built on first use (kept only for
        labels some node carries: what a pod asks for cannot grow the snapshot)."""
        found = self._label_bits.get((key, value))
        if found is None:
            names = self._with_label.get(key, ()) if value is None else (self._by_label.get(key) or {}).get(value, ())
            if not names:
                return 0
            bits = bytearray((len(self._nodes) + 7) // 8)
            for name in names:
                index = self._index[name]
                bits[index >> 3] |= 1 << (index & 7)
            found = self._label_bits[(key, value)] = int.from_bytes(bits, "little")
        return found

    def volume_nodes(self, terms: Sequence[Mapping[str, Any]]) -> list[str]:
        """The names of the nodes a PV's required terms admit, checked on labels only as the scheduler checks a
        PV; narrowed through the label index first, so a PV pinned by hostname costs a few lookups."""
        candidates = self._candidates([terms])
        names = self._nodes if candidates is None else candidates
        return sorted(name for name in names if volume_terms_match(terms, self._nodes[name]))
