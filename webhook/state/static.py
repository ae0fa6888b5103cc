"""Static cluster state from manifest files: the CLI, the tests and the offline demo use it."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable
from pathlib import Path

from rules.kube.shapes import object_problems
from rules.model import Json
from rules.safeload import DocumentError, iter_objects, load_documents, unreadable
from webhook import metrics
from webhook.files import read_text
from webhook.state.index import KINDS, ClusterIndex, bulk_ingest
from webhook.state.kinds import BY_KIND

#: Seconds between two updates of a static server's cache age (the live server's tick is as often).
AGE_EVERY = 5.0


def load_static_state(paths: Iterable[str | Path], *, root: Path | None = None) -> ClusterIndex:
    """An index of every object in the files of a kind webhook/state/kinds.py lists (other kinds ignored)."""
    return state_of(read_manifests(paths, root=root))


def read_manifests(paths: Iterable[str | Path], *, root: Path | None = None) -> list[tuple[str, Json]]:
    """Every object of the files, with the file it came from. Read as a list is ingested (`bulk_ingest`): the
    parsers allocate millions of long-lived objects, and the collector's full passes over them cost four times
    the parse of a 31 MB dump."""
    manifests: list[tuple[str, Json]] = []
    with bulk_ingest():
        for path in paths:
            source = str(path)
            try:
                text = read_text(path, root=root)  # a regular file of bounded size (under `root`)
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


def resource_name(kind: str) -> str:
    """The API's resource name of a kind, which labels the live watches' cache series."""
    return BY_KIND[kind].plural


class StaticCacheGauges:
    """The cache series of a server on static state, the ones the live watches set: every kind the index holds is
    synced from the start (the files are read whole before the first connection), and its age is the time since
    they were read, for an alert, a panel or an operator's query reads them alike in both modes."""

    def __init__(self, read_at: float, clock: Callable[[], float] = time.monotonic) -> None:
        self.read_at, self.clock = read_at, clock
        self.resources = tuple(resource_name(kind) for kind in KINDS)

    def publish(self) -> None:
        age = self.clock() - self.read_at
        for resource in self.resources:
            metrics.CACHE_SYNCED.labels(resource).set(1)
            metrics.CACHE_AGE.labels(resource).set(age)

    def start(self) -> None:
        """Publish now, then keep the age current in this worker until it exits."""
        self.publish()
        threading.Thread(target=self._tick, name="cache-age", daemon=True).start()

    def _tick(self) -> None:
        while True:
            time.sleep(AGE_EVERY)
            self.publish()
