"""Build minimal JSON Patches against an object that is never copied or modified.

Rules write whole values at fixed places (a toleration list, an annotation, the required node affinity); the
builder records them in an overlay, lets later reads see them, and at the end emits one `add` per change at the
shallowest missing ancestor, so a patch never adds under a map that does not exist.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from rules.model import Json

Path = tuple[str, ...]

_MISSING = object()


class PatchBuilder:
    """The changes a rule wants, recorded against the object under review without touching it: a rule that fails
    half-way leaves nothing behind, and `operations()` turns what is left into the smallest JSON Patch."""

    def __init__(self, doc: Mapping[str, Any], prefix: Path = ()) -> None:
        self._doc = doc
        self._prefix = prefix
        self._writes: dict[Path, Any] = {}

    def scoped(self, prefix: Path) -> PatchBuilder:
        """A view of the same builder rooted deeper (a Job's pod template), sharing its writes."""
        child = PatchBuilder.__new__(PatchBuilder)
        child._doc = self._doc
        child._prefix = self._prefix + prefix
        child._writes = self._writes
        return child

    def get(self, *path: str, default: Any = None) -> Any:
        """The current value at `path` (relative to the scope): the latest write, else the original."""
        full = self._prefix + path
        for length in range(len(full), 0, -1):
            if full[:length] in self._writes:
                value = self._writes[full[:length]]
                for part in full[length:]:
                    if not isinstance(value, Mapping) or part not in value:
                        return default
                    value = value[part]
                return value
        value = _lookup(self._doc, full)
        return default if value is _MISSING else value

    def set(self, *path: str, value: Any) -> None:
        full = self._prefix + path
        for existing in [p for p in self._writes if p[: len(full)] == full and p != full]:
            del self._writes[existing]
        self._writes[full] = value

    @property
    def written(self) -> bool:
        """Whether any rule wrote at all: a plain pod, which no rule touches, skips building a patch."""
        return bool(self._writes)

    @property
    def changed(self) -> bool:
        return bool(self.operations())

    def operations(self) -> list[Json]:
        """The JSON Patch: writes equal to the original are dropped, missing parents are created by one add."""
        tree: dict[str, Any] = {}
        for path, value in sorted(self._writes.items()):
            node = tree
            for part in path[:-1]:
                node = node.setdefault(part, {})
                if not isinstance(node, dict):
                    break
            else:
                node[path[-1]] = _Leaf(value)
        ops: list[Json] = []
        _emit(self._doc, tree, (), ops)
        return ops


class _Leaf:
    __slots__ = ("value",)

    def __init__(self, value: Any) -> None:
        self.value = value


def _emit(original: Any, tree: Mapping[str, Any], path: Path, ops: list[Json]) -> None:
    mapping = isinstance(original, (dict, Mapping))  # dict first: the ABC check is far dearer
    for key, node in tree.items():
        here = (*path, key)
        current = original.get(key, _MISSING) if mapping else _MISSING
        if type(node) is _Leaf:
            if current is _MISSING or current != node.value:
                ops.append(
                    {
                        "op": "add" if current is _MISSING else "replace",
                        "path": pointer(here),
                        "value": node.value,
                    }
                )
        elif current is not _MISSING and isinstance(current, (dict, Mapping)):
            _emit(current, node, here, ops)
        else:
            value = _materialise(node)
            if current is _MISSING or current != value:
                ops.append({"op": "add" if current is _MISSING else "replace", "path": pointer(here), "value": value})


def _materialise(tree: Mapping[str, Any]) -> Json:
    return {k: (v.value if type(v) is _Leaf else _materialise(v)) for k, v in tree.items()}


def _lookup(doc: Any, path: Sequence[str]) -> Any:
    for part in path:
        if not isinstance(doc, Mapping) or part not in doc:
            return _MISSING
        doc = doc[part]
    return doc


def pointer(path: Sequence[str]) -> str:
    """RFC 6901 JSON Pointer; '/' in annotation keys becomes '~1'."""
    return "/" + "/".join([part.replace("~", "~0").replace("/", "~1") for part in path]) if path else ""
