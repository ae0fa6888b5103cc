from __future__ import annotations

import copy

import jsonpatch
from hypothesis import example, given, settings
from hypothesis import strategies as st

from rules.model import Json
from rules.patch import PatchBuilder, pointer


def test_add_under_missing_maps_creates_the_shallowest_missing_parent() -> None:
    doc = {"metadata": {"name": "p"}, "spec": {}}
    builder = PatchBuilder(doc)
    builder.set("metadata", "annotations", "storage-affinity.io/x", value="1")
    builder.set("metadata", "annotations", "a/b~c", value="2")
    builder.set("spec", "affinity", "nodeAffinity", "required", value={"t": 1})
    ops = builder.operations()
    assert ops == [
        {"op": "add", "path": "/metadata/annotations", "value": {"storage-affinity.io/x": "1", "a/b~c": "2"}},
        {"op": "add", "path": "/spec/affinity", "value": {"nodeAffinity": {"required": {"t": 1}}}},
    ]
    assert doc == {"metadata": {"name": "p"}, "spec": {}}, "the original must never be modified"
    result = jsonpatch.apply_patch(copy.deepcopy(doc), ops)
    assert result["metadata"]["annotations"]["a/b~c"] == "2"


def test_existing_keys_are_escaped_and_replaced() -> None:
    doc = {"metadata": {"annotations": {"a/b": "old"}}, "spec": {"tolerations": [{"key": "x"}]}}
    builder = PatchBuilder(doc)
    builder.set("metadata", "annotations", "a/b", value="new")
    builder.set("spec", "tolerations", value=[{"key": "x"}, {"key": "y"}])
    assert builder.operations() == [
        {"op": "replace", "path": "/metadata/annotations/a~1b", "value": "new"},
        {"op": "replace", "path": "/spec/tolerations", "value": [{"key": "x"}, {"key": "y"}]},
    ]


def test_no_op_writes_produce_no_patch() -> None:
    doc = {"spec": {"nodeName": "n1"}}
    builder = PatchBuilder(doc)
    builder.set("spec", "nodeName", value="n1")
    assert builder.operations() == []
    assert not builder.changed


def test_reads_see_earlier_writes_and_scopes_share_them() -> None:
    doc: Json = {"spec": {"template": {"spec": {}}}}
    root = PatchBuilder(doc)
    template = root.scoped(("spec", "template"))
    template.set("spec", "nodeSelector", value={"a": "b"})
    assert template.get("spec", "nodeSelector", "a") == "b"
    assert root.get("spec", "template", "spec", "nodeSelector") == {"a": "b"}
    assert root.operations() == [{"op": "add", "path": "/spec/template/spec/nodeSelector", "value": {"a": "b"}}]


def test_null_parent_is_replaced() -> None:
    doc = {"spec": {"affinity": None}}
    builder = PatchBuilder(doc)
    builder.set("spec", "affinity", "nodeAffinity", value={})
    assert builder.operations() == [{"op": "replace", "path": "/spec/affinity", "value": {"nodeAffinity": {}}}]


# --- the direct walk of `operations` against the tree diff it replaced -------------------------------------------


class _Leaf:
    def __init__(self, value: object) -> None:
        self.value = value


_GONE = object()


def _tree_diff(doc: Json, writes: dict[tuple[str, ...], object]) -> list[Json]:
    """The builder's former `operations`: a tree of the writes in path order, diffed against the original."""
    tree: dict[str, object] = {}
    for path, value in sorted(writes.items()):
        node: object = tree
        for part in path[:-1]:
            assert isinstance(node, dict)
            node = node.setdefault(part, {})
            if not isinstance(node, dict):
                break
        else:
            assert isinstance(node, dict)
            node[path[-1]] = _Leaf(value)
    ops: list[Json] = []
    _diff(doc, tree, (), ops)
    return ops


def _diff(original: object, tree: dict[str, object], path: tuple[str, ...], ops: list[Json]) -> None:
    for key, node in tree.items():
        here = (*path, key)
        current = original.get(key, _GONE) if isinstance(original, dict) else _GONE
        if isinstance(node, _Leaf):
            if current is _GONE or current != node.value:
                op = "add" if current is _GONE else "replace"
                ops.append({"op": op, "path": pointer(here), "value": node.value})
        elif current is not _GONE and isinstance(current, dict):
            assert isinstance(node, dict)
            _diff(current, node, here, ops)
        else:
            assert isinstance(node, dict)
            value = _whole(node)
            if current is _GONE or current != value:
                op = "add" if current is _GONE else "replace"
                ops.append({"op": op, "path": pointer(here), "value": value})


def _whole(tree: dict[str, object]) -> Json:
    return {k: (v.value if isinstance(v, _Leaf) else _whole(v)) for k, v in tree.items()}  # type: ignore[arg-type]


_KEYS = st.sampled_from(["spec", "metadata", "affinity", "a/b", "x~y", "tolerations", "n"])
_VALUES = st.recursive(
    st.none() | st.integers(0, 2) | st.sampled_from(["v", "w"]),
    lambda inner: st.lists(inner, max_size=2) | st.dictionaries(_KEYS, inner, max_size=3),
    max_leaves=8,
)


@settings(max_examples=400, deadline=None)
@given(
    doc=st.dictionaries(_KEYS, _VALUES, max_size=4),
    writes=st.lists(st.tuples(st.lists(_KEYS, min_size=1, max_size=4).map(tuple), _VALUES), max_size=6),
)
def test_operations_agree_with_the_tree_diff(doc: Json, writes: list[tuple[tuple[str, ...], object]]) -> None:
    """Same operations, same order, for any original and any writes, shadowed and nested ones included (a write
    after one under it, or under a value written whole)."""
    builder = PatchBuilder(doc)
    recorded: dict[tuple[str, ...], object] = {}
    for path, value in writes:
        builder.set(*path, value=value)
        for existing in [p for p in recorded if p[: len(path)] == path and p != path]:
            del recorded[existing]
        recorded[path] = value
    before = copy.deepcopy(doc)
    assert builder.operations() == _tree_diff(doc, recorded)
    assert doc == before


def test_pointer_escapes_only_what_needs_it() -> None:
    assert pointer(()) == ""
    assert pointer(("spec", "nodeName")) == "/spec/nodeName"
    assert pointer(("metadata", "annotations", "a/b~c")) == "/metadata/annotations/a~1b~0c"
    assert pointer(("m", "~")) == "/m/~0"


class _Overlay:
    """The builder's read/write contract, written the plain way: a read is answered by the deepest write at or
    above its path (then walked down), else by the original; a write drops every earlier write beneath it."""

    def __init__(self, doc: Json) -> None:
        self.doc = doc
        self.writes: dict[tuple[str, ...], object] = {}

    def get(self, path: tuple[str, ...]) -> object:
        for length in range(len(path), 0, -1):
            if path[:length] in self.writes:
                value = self.writes[path[:length]]
                break
        else:
            length, value = 0, self.doc
        for part in path[length:]:
            if not isinstance(value, dict) or part not in value:
                return _GONE
            value = value[part]
        return value

    def set(self, path: tuple[str, ...], value: object) -> None:
        for existing in [p for p in self.writes if p[: len(path)] == path and p != path]:
            del self.writes[existing]
        self.writes[path] = value


_FEW = st.sampled_from(["spec", "a/b", "n"])  # few keys, so reads and writes often meet at, above or beneath
_FEW_VALUES = st.recursive(
    st.none() | st.integers(0, 2),
    lambda inner: st.lists(inner, max_size=2) | st.dictionaries(_FEW, inner, max_size=2),
    max_leaves=6,
)


@settings(max_examples=400, deadline=None)
@given(
    doc=st.dictionaries(_FEW, _FEW_VALUES, max_size=3),
    prefix=st.lists(_FEW, max_size=1).map(tuple),
    steps=st.lists(
        st.tuples(st.booleans(), st.lists(_FEW, min_size=1, max_size=3).map(tuple), _FEW_VALUES), max_size=10
    ),
)
@example(  # read beneath a write, a write beneath a write, then one above both
    doc={"spec": {"n": 0}},
    prefix=(),
    steps=[
        (True, ("spec",), {"n": {"a/b": 1}}),
        (False, ("spec", "n", "a/b"), None),
        (True, ("spec", "n", "a/b"), 2),
        (False, ("spec", "n"), None),
        (True, ("spec", "n"), 0),
        (False, ("spec", "n", "a/b"), None),
    ],
)
def test_reads_and_writes_agree_with_the_plain_overlay(
    doc: Json, prefix: tuple[str, ...], steps: list[tuple[bool, tuple[str, ...], object]]
) -> None:
    """Every read sees the latest write at or above it (exact, deeper, shallower, or none), through a scope too;
    a write drops the writes beneath it, so the patch is the plain overlay's."""
    builder = PatchBuilder(doc).scoped(prefix) if prefix else PatchBuilder(doc)
    overlay = _Overlay(doc)
    for is_write, path, value in steps:
        if is_write:
            builder.set(*path, value=value)
            overlay.set(prefix + path, value)
        else:
            assert builder.get(*path, default=_GONE) == overlay.get(prefix + path)
    assert builder.operations() == _tree_diff(doc, overlay.writes)
