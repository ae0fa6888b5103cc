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
        """The current value at `path` (relative to the scope): the latest write, else the original.

        The deepest write at or above `path` answers. Reviews write two or three paths, so the common reads
        (nothing written yet, or a read of the very path written) take one lookup before any prefix is sliced.
        """
        full = self._prefix + path if self._prefix else path
        writes = self._writes
        if writes:
            if full in writes:
                return writes[full]
            for length in range(len(full) - 1, 0, -1):
                value = writes.get(full[:length], _MISSING)
                if value is not _MISSING:
                    for part in full[length:]:
                        if not isinstance(value, (dict, Mapping)) or part not in value:
                            return default
                        value = value[part]
                    return value
        value = _lookup(self._doc, full)
        return default if value is _MISSING else value

    def set(self, *path: str, value: Any) -> None:
        """Write `value` at `path`, dropping every earlier write beneath it (this one replaces them whole)."""
        full = self._prefix + path if self._prefix else path
        writes = self._writes
        if writes:
            depth = len(full)
            for beneath in [p for p in writes if len(p) > depth and p[:depth] == full]:
                del writes[beneath]
        writes[full] = value

    @property
    def written(self) -> bool:
        """Whether any rule wrote at all: a plain pod, which no rule touches, skips building a patch."""
        return bool(self._writes)

    @property
    def changed(self) -> bool:
        return bool(self.operations())

    def operations(self) -> list[Json]:
        """The JSON Patch: writes equal to the original are dropped, missing parents are created by one add.

        One walk down the original per write, in path order: a write whose parent is missing (or not a map) is
        emitted whole at the shallowest such ancestor, together with the writes that follow it under that
        ancestor; a write under a path written whole is shadowed by it. No tree of the writes is built to be
        diffed: reviews write two or three fixed paths, and the walk costs a dictionary lookup per level.
        """
        kept: list[tuple[Path, Any]] = []
        for path, value in sorted(self._writes.items()):
            if kept and path[: len(kept[-1][0])] == kept[-1][0]:
                continue  # under the previous write (paths sort right after their prefix): shadowed by it
            kept.append((path, value))
        ops: list[Json] = []
        at, count = 0, len(kept)
        while at < count:
            path, value = kept[at]
            at += 1
            original: Any = self._doc
            last = len(path) - 1
            for depth, part in enumerate(path):
                # dict first: the ABC check is far dearer
                current = original.get(part, _MISSING) if isinstance(original, (dict, Mapping)) else _MISSING
                if depth == last:
                    if current is _MISSING or current != value:
                        ops.append(_operation(current, path, value))
                    break
                if current is _MISSING or not isinstance(current, (dict, Mapping)):
                    parent = path[: depth + 1]
                    whole: Json = {}
                    _plant(whole, path[depth + 1 :], value)
                    while at < count and kept[at][0][: depth + 1] == parent:
                        _plant(whole, kept[at][0][depth + 1 :], kept[at][1])
                        at += 1
                    if current is _MISSING or current != whole:
                        ops.append(_operation(current, parent, whole))
                    break
                original = current
        return ops


def _plant(tree: Json, path: Path, value: Any) -> None:
    """Put `value` at `path` under `tree`, creating maps on the way (no write of `operations` is shadowed, so
    every step is a map this function made)."""
    for part in path[:-1]:
        tree = tree.setdefault(part, {})
    tree[path[-1]] = value


def _operation(current: Any, path: Path, value: Any) -> Json:
    return {"op": "add" if current is _MISSING else "replace", "path": pointer(path), "value": value}


def _lookup(doc: Any, path: Sequence[str]) -> Any:
    for part in path:
        # dict first: the ABC check is far dearer; `get` with a sentinel reads once where `in` and `[]` read twice
        doc = doc.get(part, _MISSING) if isinstance(doc, (dict, Mapping)) else _MISSING
        if doc is _MISSING:
            return _MISSING
    return doc


def pointer(path: Sequence[str]) -> str:
    """RFC 6901 JSON Pointer; '/' in annotation keys becomes '~1'. Most paths need no escape: joined, they hold
    no '~' and only the separators' '/', which two string scans tell, sparing a replace per part."""
    joined = "/".join(path)
    if "~" not in joined and joined.count("/") == len(path) - 1:
        return "/" + joined if path else ""
    return "/" + "/".join([part.replace("~", "~0").replace("/", "~1") for part in path]) if path else ""
