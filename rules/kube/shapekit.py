"""Shapes of JSON values: the combinators the typed boundary (rules/kube/shapes.py) declares its table with.

Each shape checks a value twice over: `ok` answers yes or no without building a path or a message (every review
passes it), `walk` names each problem with its path (run only for a value `ok` refused).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from rules.budget import count_excess
from rules.kube.selectors import type_name

Problem = tuple[str, str]

INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1


@dataclass
class Problems:
    """What the walk found: `types` make the body unusable (400), `values` are findings about a valid object,
    `limits` name what is past the review budget (rules/budget.py)."""

    types: list[Problem] = field(default_factory=list)
    values: list[Problem] = field(default_factory=list)
    limits: list[Problem] = field(default_factory=list)


def join(path: str, key: str) -> str:
    return f"{path}.{key}" if path else key


class Shape:
    """The shape of one value, checked twice over: `ok` answers yes or no without building a path or a message
    (every review passes it), `walk` names each problem with its path (run only for a value `ok` refused).

    `kind` is set on a shape that is exactly `isinstance(value, kind)`: the shapes holding it check it inline
    rather than calling its `ok`, a call per field on the path every review takes."""

    kind: type | None = None

    def ok(self, value: Any) -> bool:
        raise NotImplementedError

    def walk(self, value: Any, path: str, out: Problems) -> None:
        raise NotImplementedError


class _String(Shape):
    kind = str

    def ok(self, value: Any) -> bool:
        return isinstance(value, str)

    def walk(self, value: Any, path: str, out: Problems) -> None:
        if not isinstance(value, str):
            out.types.append((path, f"must be a string, not {type_name(value)}"))


class _Int64(Shape):
    def ok(self, value: Any) -> bool:
        return type(value) is int and INT64_MIN <= value <= INT64_MAX

    def walk(self, value: Any, path: str, out: Problems) -> None:
        if isinstance(value, bool) or not isinstance(value, int):
            out.types.append((path, f"must be an integer, not {type_name(value)}"))
        elif not INT64_MIN <= value <= INT64_MAX:
            out.types.append((path, "must be a 64-bit integer (out of range)"))


class _Boolean(Shape):
    kind = bool

    def ok(self, value: Any) -> bool:
        return isinstance(value, bool)

    def walk(self, value: Any, path: str, out: Problems) -> None:
        if not isinstance(value, bool):
            out.types.append((path, f"must be a boolean, not {type_name(value)}"))


string: Shape = _String()
int64: Shape = _Int64()
boolean: Shape = _Boolean()


class obj(Shape):
    """An object whose listed fields have the given shapes (absent or null is fine unless required); `extra`
    checks the whole object after its fields (a finding about its values, not its types)."""

    def __init__(self, fields: Mapping[str, Shape], required: tuple[str, ...] = (), extra: Shape | None = None):
        self.by_name = dict(fields)
        self.required = required
        self.extra = extra
        self._typed = tuple((key, shape.kind) for key, shape in fields.items() if shape.kind is not None)
        self._nested = tuple((key, shape.ok) for key, shape in fields.items() if shape.kind is None)

    def ok(self, value: Any) -> bool:
        # `value.get(key)` each time, not a bound `get`: the interpreter calls a dict method in place, and
        # binding one cost more than it saved. Most shapes require nothing: the test skips an empty loop.
        if not isinstance(value, dict):
            return False
        if self.required:
            for key in self.required:
                if value.get(key) is None:
                    return False
        for key, kind in self._typed:
            item = value.get(key)
            if item is not None and not isinstance(item, kind):
                return False
        for key, check in self._nested:
            item = value.get(key)
            if item is not None and not check(item):
                return False
        return self.extra is None or self.extra.ok(value)

    def walk(self, value: Any, path: str, out: Problems) -> None:
        if not isinstance(value, dict):
            out.types.append((path, f"must be an object, not {type_name(value)}"))
            return
        for key in self.required:
            if value.get(key) is None:
                out.types.append((join(path, key), "is required"))
        for key, item in value.items():
            shape = self.by_name.get(key)
            if item is not None and shape is not None:
                shape.walk(item, join(path, key), out)
        if self.extra is not None:
            self.extra.walk(value, path, out)


class _Items(Shape):
    """A list's items, or a map's values, all of one shape. Their check is in `ok` itself, not in a helper
    both call: a call per list and map of every review.

    With a `limit` (rules/budget.py), what has more items is refused before they are looked at; its walk names
    the limit (`what`), and names its items' types only when they are wrong, so a mistyped item is still a 400."""

    container: type

    def __init__(self, item: Shape, limit: int = 0, what: str = "") -> None:
        self.item = item
        self._kind = item.kind
        self._check = item.ok
        self.limit, self.what = limit, what

    def ok(self, value: Any) -> bool:
        if not isinstance(value, self.container):
            return False
        items: Any = value  # the test above leaves `value` a bare object to the type checker
        limit = self.limit
        if limit and len(items) > limit:
            return False
        if self.container is dict:
            items = items.values()
        kind = self._kind
        if kind is not None:
            for element in items:  # noqa: SIM110 (plain loops: a generator per list cost more than its checks)
                if not isinstance(element, kind):
                    return False
            return True
        check = self._check
        for element in items:  # noqa: SIM110
            if not check(element):
                return False
        return True

    def _past_limit(self, items: Any, path: str, out: Problems) -> bool:
        """Whether the walk may stop here: past the limit (named) with items of the right shape."""
        excess = count_excess(items, self.what, self.limit) if self.limit else None
        if excess is None:
            return False
        out.limits.append((path, f"has {excess}"))
        return all(map(self._check, items.values() if isinstance(items, dict) else items))


class list_of(_Items):
    container = list

    def walk(self, value: Any, path: str, out: Problems) -> None:
        if not isinstance(value, list):
            out.types.append((path, f"must be a list, not {type_name(value)}"))
            return
        if self._past_limit(value, path, out):
            return
        for i, element in enumerate(value):
            self.item.walk(element, f"{path}[{i}]", out)


class map_of(_Items):
    container = dict

    def walk(self, value: Any, path: str, out: Problems) -> None:
        if not isinstance(value, dict):
            out.types.append((path, f"must be a map, not {type_name(value)}"))
            return
        if self._past_limit(value, path, out):
            return
        for key, element in value.items():
            self.item.walk(element, f"{path}[{key}]", out)
