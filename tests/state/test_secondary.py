"""The index's secondary indexes (webhook/state/secondary.py, declared per kind in webhook/state/kinds.py): after any
sequence of adds, updates, deletes and re-lists each equals the one rebuilt from the objects the index holds, a key
holds only strings of the kept object, and an update costs the keys of that one object, counted, whatever else the
index holds."""

from __future__ import annotations

import itertools
import sys
from collections.abc import Callable, Iterator
from types import FrameType
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from rules.model import Json, namespaced_name
from webhook.state import sharing
from webhook.state.index import ClusterIndex, trim
from webhook.state.kinds import STATE_KINDS
from webhook.state.secondary import CLAIM_USERS, CSI_HANDLES, GRANTS, VM_USERS, Key, SecondaryIndex

DECLARED = {entry.kind: entry.indexes for entry in STATE_KINDS if entry.indexes}
NAMES = ("a", "b", "c")
NAMESPACES = ("apps", "hr")
CLAIMS = ("data", "logs", "root")
#: What no kept object holds: written into the fields trimming drops.
DROPPED = "dropped-field-value"


def _meta(name: str, namespace: str | None) -> Json:
    meta: Json = {"name": name, "annotations": {"example.com/note": DROPPED}, "managedFields": [{"manager": DROPPED}]}
    if namespace is not None:
        meta["namespace"] = namespace
    return meta


@st.composite
def pods(draw: st.DrawFn) -> Json:
    volumes = []
    for i, how in enumerate(draw(st.lists(st.sampled_from(("claim", "ephemeral", "emptyDir")), max_size=3))):
        if how == "claim":
            volumes.append({"name": f"v{i}", "persistentVolumeClaim": {"claimName": draw(st.sampled_from(CLAIMS))}})
        elif how == "ephemeral":  # its claim is <pod>-<volume>
            template = {"spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}}}
            volumes.append({"name": draw(st.sampled_from(CLAIMS)), "ephemeral": {"volumeClaimTemplate": template}})
        else:
            volumes.append({"name": f"v{i}", "emptyDir": {}})
    return {
        "kind": "Pod",
        "metadata": _meta(draw(st.sampled_from(NAMES)), draw(st.sampled_from(NAMESPACES))),
        "spec": {"containers": [{"name": "app", "image": DROPPED}], "volumes": volumes},
        "status": {"phase": "Running"},
    }


@st.composite
def volumes(draw: st.DrawFn) -> Json:
    spec: Json = {"accessModes": ["ReadWriteOnce"], "mountOptions": [DROPPED]}
    if draw(st.booleans()):  # handles repeat across volumes: a table's key may file several
        handle = {"driver": draw(st.sampled_from(("ebs.csi.aws.com", "pd.csi.storage.gke.io")))}
        handle["volumeHandle"] = draw(st.sampled_from(("vol-1", "vol-2")))
        spec["csi"] = handle | {"fsType": DROPPED}
    return {"kind": "PersistentVolume", "metadata": _meta(draw(st.sampled_from(NAMES)), None), "spec": spec}


@st.composite
def virtual_machines(draw: st.DrawFn) -> Json:
    disks = [
        {"metadata": {"name": name}, "spec": {"source": {"blank": {}}}}
        for name in draw(st.sets(st.sampled_from(CLAIMS)))
    ]
    volumes = [
        {"name": f"v{i}", how: {"name" if how == "dataVolume" else "claimName": claim}}
        for i, (how, claim) in enumerate(
            draw(st.lists(st.tuples(st.sampled_from(("dataVolume", "persistentVolumeClaim")), st.sampled_from(CLAIMS))))
        )
    ]
    template = {"spec": {"domain": {"cpu": {"model": DROPPED}}, "volumes": volumes}}
    return {
        "kind": "VirtualMachine",
        "metadata": _meta(draw(st.sampled_from(NAMES)), draw(st.sampled_from(NAMESPACES))),
        "spec": {"dataVolumeTemplates": disks, "template": template, "runStrategy": "Always"},
    }


@st.composite
def grants(draw: st.DrawFn) -> Json:
    to = [{"group": "", "kind": "PersistentVolumeClaim", "name": draw(st.sampled_from(CLAIMS))}]
    return {
        "kind": "ReferenceGrant",
        "metadata": _meta(draw(st.sampled_from(NAMES)), draw(st.sampled_from(NAMESPACES))),
        "spec": {"from": [{"group": "", "kind": "PersistentVolumeClaim", "namespace": "apps"}], "to": to},
    }


OBJECTS = st.one_of(pods(), volumes(), virtual_machines(), grants())
EVENTS = st.lists(
    st.one_of(
        st.tuples(st.just("apply"), OBJECTS),
        st.tuples(st.just("remove"), OBJECTS),
        st.tuples(st.just("relist"), st.lists(OBJECTS, max_size=4)),
    ),
    max_size=30,
)


def rebuilt(index: ClusterIndex, by: SecondaryIndex, kind: str) -> dict[Key, dict[tuple[str, str], Json]]:
    """The secondary index rebuilt from scratch over the objects the index holds."""
    table: dict[Key, dict[tuple[str, str], Json]] = {}
    for obj in index.objects(kind):
        for key in by.keys(obj):
            table.setdefault(key, {})[namespaced_name(obj)] = obj
    return table


@given(EVENTS)
def test_every_secondary_index_is_the_one_rebuilt_from_the_objects_held(events: list[tuple[str, Any]]) -> None:
    index = ClusterIndex()
    held: dict[tuple[str, tuple[str, str]], Json] = {}  # what the cluster holds now, as it came
    for event, what in events:
        if event == "apply":
            index.apply(what)
            held[(what["kind"], namespaced_name(what))] = what
        elif event == "remove":
            index.remove(what)
            held.pop((what["kind"], namespaced_name(what)), None)
        else:  # a re-list of one kind: what it lists replaces the kind
            kind = what[0]["kind"] if what else "Pod"
            listed = {namespaced_name(o): o for o in what if o["kind"] == kind}
            index.replace_kind(kind, listed.values())
            held = {k: v for k, v in held.items() if k[0] != kind} | {(kind, n): o for n, o in listed.items()}
        for kind, indexes in DECLARED.items():
            for by in indexes:
                assert index._tables.tables[by] == rebuilt(index, by, kind), (by.name, events)
    fresh = ClusterIndex()  # and the objects are those of an index fed only what the cluster holds now
    for obj in held.values():
        fresh.apply(obj)
    assert {kind: index.objects(kind) for kind in DECLARED} == {kind: fresh.objects(kind) for kind in DECLARED}


def _strings(value: Any) -> Iterator[str]:
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for k, v in value.items():
            yield k
            yield from _strings(v)
    elif isinstance(value, list):
        for item in value:
            yield from _strings(item)


@given(st.lists(OBJECTS, max_size=8))
def test_a_key_holds_only_strings_of_the_kept_object(objects: list[Json]) -> None:
    """Each string of a key is one the kept object holds, or a generic ephemeral volume's claim name made of two of
    them (`<pod>-<volume>`); keys read only what trimming keeps, so the kept object's keys are the object's."""
    index = ClusterIndex()
    for obj in objects:
        index.apply(obj)
    for kind, indexes in DECLARED.items():
        for kept in index.objects(kind):
            held = set(_strings(kept))
            made = {f"{a}-{b}" for a, b in itertools.product(held, repeat=2)}
            for by in indexes:
                for key in by.keys(kept):
                    assert all(part in held or part in made for part in key), (key, kept)
                    assert DROPPED not in "".join(key)
                    assert any(found is kept for found in index.find(by, key))  # the kept object, no copy
    for obj in objects:
        for by in DECLARED.get(obj["kind"], ()):
            assert list(by.keys(trim(obj))) == list(by.keys(obj)), by.name


class Steps:
    """What runs while counting: Python lines (`sys.settrace`) and calls, Python or C (`sys.setprofile`)."""

    def __init__(self) -> None:
        self.lines = self.calls = 0

    def _trace(self, frame: FrameType, event: str, arg: object) -> Callable[..., Any]:
        if event == "line":
            self.lines += 1
        return self._trace

    def _profile(self, frame: FrameType, event: str, arg: object) -> None:
        if event in ("call", "c_call"):
            self.calls += 1

    def run(self, action: Callable[[], None]) -> tuple[int, int]:
        sys.settrace(self._trace)
        sys.setprofile(self._profile)
        try:
            action()
        finally:
            sys.setprofile(None)
            sys.settrace(None)
        return self.lines, self.calls


def _pod(name: str, claims: int, first: int = 0) -> Json:
    volumes = [
        {"name": f"v{i}", "persistentVolumeClaim": {"claimName": f"data-{i}"}} for i in range(first, first + claims)
    ]
    return {"kind": "Pod", "metadata": {"name": name, "namespace": "apps"}, "spec": {"volumes": volumes}}


def _vm(name: str, claims: int, first: int = 0) -> Json:
    volumes = [{"name": f"v{i}", "dataVolume": {"name": f"data-{i}"}} for i in range(first, first + claims)]
    return {
        "kind": "VirtualMachine",
        "metadata": {"name": name, "namespace": "apps"},
        "spec": {"template": {"spec": {"volumes": volumes}}},
    }


def _pv(name: str, handle: str) -> Json:
    csi = {"driver": "ebs.csi.aws.com", "volumeHandle": handle}
    return {"kind": "PersistentVolume", "metadata": {"name": name}, "spec": {"csi": csi}}


def _grant(name: str, to: str) -> Json:
    spec = {"from": [], "to": [{"group": "", "kind": "PersistentVolumeClaim", "name": to}]}
    return {"kind": "ReferenceGrant", "metadata": {"name": name, "namespace": "apps"}, "spec": spec}


#: Per kind with a secondary index: an object with k keys (its variant `first` files them under other keys), and
#: the objects that crowd the index: under the same keys as the one updated, and under others.
BUILDERS: dict[str, Callable[[str, int, int], Json]] = {
    "Pod": _pod,
    "VirtualMachine": _vm,
    "PersistentVolume": lambda name, k, first: _pv(name, f"vol-{first}"),
    "ReferenceGrant": lambda name, k, first: _grant(name, f"claim-{first}"),
}


def _costs(kind: str, crowd: int, keys: int) -> dict[str, tuple[int, int]]:
    """The steps of an add, an update that moves the object to other keys, and a delete, with `crowd` objects under
    the same keys and `crowd` under others already held."""
    build = BUILDERS[kind]
    index = ClusterIndex()
    for i in range(crowd):
        index.apply(build(f"same-{i:05d}", keys, 0))
        index.apply(build(f"other-{i:05d}", keys, 1000 + i))
    first, moved = build("counted", keys, 0), build("counted", keys, 50)
    for obj in (first, moved, first):  # every value trimming shares is in the sharing table already
        index.apply(obj)
    index.remove(first)
    costs = {
        "add": Steps().run(lambda: index.apply(first)),
        "update": Steps().run(lambda: index.apply(moved)),
        "delete": Steps().run(lambda: index.remove(moved)),
    }
    return costs


def test_an_update_costs_the_keys_of_its_object_whatever_else_the_index_holds() -> None:
    for kind in BUILDERS:
        assert _costs(kind, 10, 2) == _costs(kind, 1000, 2), kind
    for kind in ("Pod", "VirtualMachine"):  # the kinds whose objects have many keys: each costs the same
        steps = [_costs(kind, 10, keys) for keys in (1, 2, 3, 4)]
        for what in ("add", "update", "delete"):
            lines = [s[what][0] for s in steps]
            assert lines[1] - lines[0] == lines[2] - lines[1] == lines[3] - lines[2] > 0, (kind, what, lines)


def test_a_controller_reference_is_kept_without_a_sharing_slot() -> None:
    """A CDI worker's, a Job's or a DataUpload's pod is its controller's one pod: its reference shares with none."""
    index = ClusterIndex()
    sharing.forget()
    for i in range(200):
        pod = _pod(f"importer-{i:03d}", 1, i)
        owner = {
            "apiVersion": "v1",
            "kind": "PersistentVolumeClaim",
            "name": f"data-{i}",
            "uid": f"u{i}",
            "controller": True,
        }
        pod["metadata"]["ownerReferences"] = [owner]
        index.apply(pod)
    assert index.get("Pod", "apps", "importer-007")["metadata"]["ownerReferences"] == [  # type: ignore[index]
        {"apiVersion": "v1", "kind": "PersistentVolumeClaim", "name": "data-7", "uid": "u7", "controller": True}
    ]
    assert len(sharing.SHARED) < 10


def test_each_secondary_index_is_declared_by_one_kind_and_found_by_its_key() -> None:
    declared = [by for indexes in DECLARED.values() for by in indexes]
    assert len(declared) == len(set(declared))
    assert set(declared) == {CLAIM_USERS, CSI_HANDLES, VM_USERS, GRANTS}
    index = ClusterIndex()
    for obj in (_pod("db-0", 1), _pv("pv-a", "vol-7"), _vm("fedora", 1), _grant("open", "data-0")):
        index.apply(obj)
    assert [p["metadata"]["name"] for p in index.pods_using_claim("apps", "data-0")] == ["db-0"]
    assert (index.pv_for_handle("ebs.csi.aws.com", "vol-7") or {}).get("metadata") == {"name": "pv-a"}
    assert [v["metadata"]["name"] for v in index.virtual_machines_using("apps", "data-0")] == ["fedora"]
    assert [g["metadata"]["name"] for g in index.reference_grants("apps")] == ["open"]
    assert index.find(CLAIM_USERS, ("apps", "data-1")) == []
