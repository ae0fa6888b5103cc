"""The known Nodes as rules/kube/feasible.py asks about them: "which nodes fit these constraints?", at a cost that
does not grow with the node count. Rules ask through `Feasibility` there, never here: this is its engine.

A review asks it for every pod it sees (a backup pod's load affinity, a pod's nodeSelector and required affinity
against its local PVs, a loadAffinity entry against the cluster). Walking every Node made a backup review cost
more at 10,000 nodes than at 100. A NodeSet is an immutable snapshot of the nodes' names and labels with an index
from each label to the nodes that carry it: a question costs its requirements, not its requirements × the nodes,
and the answer is remembered until the snapshot is replaced (the cluster index builds a new one only when a node
is added, removed, relabelled, tainted or cordoned, not on every status update).

`NotIn` and `DoesNotExist` match the nodes *without* a label, which a label index cannot narrow: a pod of 1,000
such terms made every check of 1,000 nodes a million term evaluations. So terms are evaluated against all nodes at
once (`admitting`): each node is a bit of an integer, each label value the set of bits of the nodes that carry it,
and a requirement is a few integer operations whatever the node count (`Gt`/`Lt` a bisection,
rules/kube/intlabels.py). A term is parsed once per question, never once per node; the semantics (unparsable
requirements, matchFields, NotIn on a missing label) are those of rules/kube/nodeaffinity.py, which property
tests compare node by node.

A question with its own check of each node (`matching`: taints, cordon) hands its predicate only the nodes of a
bit set from `admitting`.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Hashable, Iterable, Iterator, Mapping, Sequence
from typing import Any

from rules import deadline
from rules.kube.intlabels import IntegerLabel, bits_of
from rules.kube.nodeaffinity import term_parses, terms_key
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
        self._names, self._list = list(self._nodes), list(self._nodes.values())  # by bit index
        self._integers: dict[str, IntegerLabel] = {}  # Gt/Lt: a label's integer values, built on first use
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

    def answer(self, key: Hashable, compute: Callable[[], bool]) -> bool:
        """A yes/no answer remembered under `key` (which must identify the question exactly) for the snapshot's
        lifetime: a question asked again costs one lookup."""
        return self._memo.get(key, compute)

    def matching(self, fits: Predicate, *, within: int | None = None) -> Iterator[Json]:
        """The nodes of `within` (a bit set from `admitting`; None: every node) that pass `fits`, lazily, in the
        snapshot's order. Not memoised: the audit asks it for the few pods that are stuck."""
        return (node for node in self._within(within) if fits(node))

    def names_matching(self, key: Hashable, fits: Predicate, *, within: int | None = None) -> frozenset[str]:
        """The names of the nodes `matching` yields, remembered under `key` like `answer`: for questions that need
        the nodes themselves (which of them run a node-agent), not only whether one fits."""
        return self._sets.get(
            key,
            lambda: frozenset(
                str((node.get("metadata") or {}).get("name") or "") for node in self.matching(fits, within=within)
            ),
        )

    def names(self, mask: int) -> list[str]:
        """The names of the nodes of a bit set from `admitting`, in the snapshot's order."""
        return [self._names[index] for index in _indices(mask)]

    def mask_of(self, names: Iterable[str]) -> int:
        """The bit set of the named nodes of this snapshot (names it does not hold are left out)."""
        index = self._index
        return bits_of((index[name] for name in names if name in index), len(self._nodes))

    def _within(self, within: int | None) -> Iterator[Json]:
        """The nodes of a bit set, one deadline check each."""
        mask = self._all if within is None else within & self._all
        if mask == self._all:
            for node in self._list:
                deadline.check()
                yield node
            return
        for index in _indices(mask):
            deadline.check()
            yield self._list[index]

    def admitting(
        self,
        terms: Sequence[Mapping[str, Any]] | None = None,
        *,
        selector: Mapping[str, str] | None = None,
        volume_terms: Iterable[Sequence[Mapping[str, Any]]] = (),
    ) -> int:
        """The nodes (a bit set) that pass required terms (None: no constraint) as `terms_match`
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

    def _terms_bits(self, terms: Sequence[Mapping[str, Any]], *, by_name: bool) -> int:
        """The nodes some term matches; `by_name=False` reads them as a PV's terms are read: without a name."""

        def compute() -> int:
            mask = 0
            for term in terms:
                deadline.check()
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
        integers = self._integer_label(key)  # Gt or Lt: one 64-bit integer value
        if integers is None:
            return 0
        bound = int(values[0])
        return integers.greater(bound) if operator == "Gt" else integers.less(bound)

    def _integer_label(self, key: str) -> IntegerLabel | None:
        """The integer values of label `key`, sorted, built on the first `Gt`/`Lt` on it (kept only for labels
        some node carries)."""
        found = self._integers.get(key)
        if found is None:
            values = self._by_label.get(key)
            if not values:
                return None
            index = self._index
            nodes = {value: [index[name] for name in names] for value, names in values.items()}
            found = self._integers[key] = IntegerLabel(nodes, len(self._nodes))
        return found

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
            index = self._index
            found = self._label_bits[(key, value)] = bits_of((index[name] for name in names), len(self._nodes))
        return found


def _indices(mask: int) -> Iterator[int]:
    """The set bits of a bit set, lowest first: a scan of its binary digits in C, a step a node found."""
    digits = bin(mask)[:1:-1]  # bit i at digits[i]
    found = digits.find("1")
    while found >= 0:
        yield found
        found = digits.find("1", found + 1)
