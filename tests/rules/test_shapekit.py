"""The typed boundary's two checks agree: `ok` (every review) passes exactly the values `walk` finds no type
problem in, including where a shape's `kind` lets its holder check it inline instead of calling it."""

from __future__ import annotations

from typing import Any

import pytest

from rules.kube.shapekit import Problems, Shape, boolean, int64, list_of, map_of, obj, string

#: One value of each JSON type, and the edges the scalars draw (a bool is an int to Python, not to JSON).
VALUES: list[Any] = [None, "", "x", 0, 1, -(2**63), 2**63, True, False, 1.5, [], ["x"], [1], {}, {"a": "x"}, {"a": 1}]

#: Every way a field's shape is held: inline by `kind` (strings, booleans), by call (integers, objects, lists, maps).
SHAPE = obj(
    {"s": string, "b": boolean, "i": int64, "l": list_of(string), "m": map_of(boolean), "o": obj({"s": string})},
    required=("s",),
)


def _walk_clean(shape: Shape, value: Any) -> bool:
    out = Problems()
    shape.walk(value, "", out)
    return not out.types


@pytest.mark.parametrize("shape", [string, boolean, int64, list_of(string), map_of(boolean), list_of(int64)])
@pytest.mark.parametrize("value", VALUES, ids=repr)
def test_scalar_and_container_checks_agree(shape: Shape, value: Any) -> None:
    assert shape.ok(value) == _walk_clean(shape, value)
    if shape.kind is not None:
        assert shape.ok(value) == isinstance(value, shape.kind)


@pytest.mark.parametrize("field", ["s", "b", "i", "l", "m", "o"])
@pytest.mark.parametrize("value", VALUES, ids=repr)
def test_object_checks_agree_for_each_field(field: str, value: Any) -> None:
    document = {"s": "name", field: value}
    assert SHAPE.ok(document) == _walk_clean(SHAPE, document), document


@pytest.mark.parametrize("shape", [list_of(string, 2, "names"), map_of(string, 2, "names")])
def test_a_counted_list_or_map_past_its_limit_is_refused_unwalked_unless_mistyped(shape: Any) -> None:
    """Past its limit, a list or map is one limit at its field; its items are walked only when one is mistyped
    (a 400 naming it, whatever the size)."""
    wrap: Any = (lambda items: items) if shape.container is list else (lambda items: dict(enumerate(items)))
    assert shape.ok(wrap(["a", "b"]))
    out = Problems()
    shape.walk(wrap(["a", "b", "c"]), "spec.names", out)
    assert not shape.ok(wrap(["a", "b", "c"]))
    assert (out.types, out.limits) == ([], [("spec.names", "has 3 names, over the limit of 2")])
    out = Problems()
    shape.walk(wrap(["a", "b", 7]), "spec.names", out)
    assert out.types == [("spec.names[2]", "must be a string, not number")]
    assert out.limits == [("spec.names", "has 3 names, over the limit of 2")]
