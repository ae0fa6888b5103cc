"""`Gt` and `Lt` over one label of a node snapshot: the nodes whose value, read as a 64-bit integer, is above or
below a bound, as a bit set (one bit a node, as rules/kube/nodeset.py keeps them).

Testing every value of the label for every requirement made a pod of 1,000 `kubernetes.io/hostname Gt <n>` terms
cost 1,000 × nodes integer parses. Here the label's integer values are parsed once and sorted, so a requirement is
a bisection and a few ORs of precomputed masks. The masks are kept at block boundaries only (every `BLOCK` values,
ORed from either end): a mask per value would hold values × nodes bits, 12 MB for a label unique to each of 10,000
nodes; blocks keep it to 2 × values ÷ 64 masks, and a range's ends are filled in from the nodes of at most
`BLOCK` values. Values that are not 64-bit integers never match (`strconv.ParseInt`, as the API server reads them).
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from collections.abc import Iterable, Mapping, Sequence

from rules.kube.selectors import is_int64

BLOCK = 64


def bits_of(indices: Iterable[int], size: int) -> int:
    """The bit set of these node indices among `size` nodes (built in a byte array: one big-integer allocation)."""
    bits = bytearray((size + 7) // 8)
    for index in indices:
        bits[index >> 3] |= 1 << (index & 7)
    return int.from_bytes(bits, "little")


class IntegerLabel:
    """One label's integer values over a snapshot's nodes, sorted, with ORed masks at every `BLOCK`-th value."""

    __slots__ = ("_above", "_below", "_nodes", "_size", "_values")

    def __init__(self, values: Mapping[str, Sequence[int]], size: int) -> None:
        """`values`: each value of the label and the indices of the nodes carrying it; `size`: the node count."""
        pairs = sorted(((int(value), nodes) for value, nodes in values.items() if is_int64(value)), key=_first)
        self._size = size
        self._values = [number for number, _ in pairs]
        self._nodes = [nodes for _, nodes in pairs]
        count = len(pairs)
        # _below[k]: the nodes of values [0, k·BLOCK); _above[k]: of values [k·BLOCK, count)
        self._below = [0]
        for start in range(0, count, BLOCK):
            self._below.append(self._below[-1] | self._span(start, min(start + BLOCK, count)))
        above = [0]
        for start in reversed(range(0, count, BLOCK)):
            above.append(above[-1] | self._span(start, min(start + BLOCK, count)))
        self._above = above[::-1]

    def greater(self, bound: int) -> int:
        """The nodes whose value is greater than `bound`."""
        first = bisect_right(self._values, bound)
        block = -(-first // BLOCK)  # the first block boundary at or after `first`
        return self._above[block] | self._span(first, min(block * BLOCK, len(self._values)))

    def less(self, bound: int) -> int:
        """The nodes whose value is less than `bound`."""
        end = bisect_left(self._values, bound)
        block = end // BLOCK
        return self._below[block] | self._span(block * BLOCK, end)

    def _span(self, start: int, end: int) -> int:
        """The nodes of values [start, end): at most `BLOCK` values' nodes, set in one byte array."""
        if start >= end:
            return 0
        return bits_of((index for nodes in self._nodes[start:end] for index in nodes), self._size)


def _first(pair: tuple[int, Sequence[int]]) -> int:
    return pair[0]
