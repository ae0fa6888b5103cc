"""Static cluster state from manifest files: the CLI, the tests and the offline demo use it."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

from rules.kube.shapes import object_problems
from rules.safeload import DocumentError, iter_objects, load_documents
from webhook.state.index import KINDS, ClusterIndex, bulk_ingest


def load_static_state(paths: Iterable[str | Path]) -> ClusterIndex:
    """An index of every Pod, PVC, PV, StorageClass, Node and ConfigMap in the files (other kinds ignored)."""
    index = ClusterIndex()
    with bulk_ingest():
        _load_into(index, paths)
    return index


def _load_into(index: ClusterIndex, paths: Iterable[str | Path]) -> None:
    for path in paths:
        source = str(path)
        try:
            text = Path(path).read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            raise DocumentError(f"{source}: cannot read: {exc}") from None
        for obj in iter_objects(load_documents(text, source), source):
            if obj.get("kind") in KINDS:
                meta = obj.get("metadata")
                if not isinstance(meta, dict) or not isinstance(meta.get("name"), str):
                    raise DocumentError(f"{source}: a {obj.get('kind')} has no metadata.name")
                # The rules read these objects too: the same typed boundary as a review's object.
                if problems := object_problems(str(obj["kind"]), obj).types:
                    where = "/".join(filter(None, (meta.get("namespace"), meta["name"])))
                    field, message = problems[0]
                    raise DocumentError(f"{source}: {obj['kind']} {where}: {field}: {message}")
                index.apply(obj)
