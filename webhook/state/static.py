"""Static cluster state from manifest files: the CLI, the tests and the offline demo use it."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

from rules.kube.shapes import object_problems
from rules.model import Json
from rules.safeload import DocumentError, iter_objects, load_documents, unreadable
from webhook.state.index import KINDS, ClusterIndex, bulk_ingest


def load_static_state(paths: Iterable[str | Path]) -> ClusterIndex:
    """An index of every Pod, PVC, PV, StorageClass, Node, ConfigMap, VolumeSnapshot, VolumeSnapshotContent,
    VirtualMachine, DataVolume and ReferenceGrant in the files (other kinds ignored)."""
    return state_of(read_manifests(paths))


def read_manifests(paths: Iterable[str | Path]) -> list[tuple[str, Json]]:
    """Every object of the files, with the file it came from."""
    manifests: list[tuple[str, Json]] = []
    for path in paths:
        source = str(path)
        try:
            text = Path(path).read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            raise DocumentError(unreadable(source, exc)) from None
        manifests.extend((source, obj) for obj in iter_objects(load_documents(text, source), source))
    return manifests


def state_of(manifests: Iterable[tuple[str, Json]]) -> ClusterIndex:
    """The index of the objects the rules read, each checked at the same typed boundary as a review's object."""
    index = ClusterIndex()
    problems: list[str] = []  # every object's every problem, each naming its file; none is indexed if any
    with bulk_ingest():
        for source, obj in manifests:
            if obj.get("kind") not in KINDS:
                continue
            meta = obj.get("metadata")
            if not isinstance(meta, dict) or not isinstance(meta.get("name"), str):
                problems.append(f"{source}: a {obj.get('kind')} has no metadata.name")
                continue
            if found := object_problems(str(obj["kind"]), obj).types:
                where = "/".join(filter(None, (meta.get("namespace"), meta["name"])))
                problems += [f"{source}: {obj['kind']} {where}: {field}: {message}" for field, message in found]
                continue
            if not problems:
                index.apply(obj)
    if problems:
        raise DocumentError("; ".join(problems))
    return index
