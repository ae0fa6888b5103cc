"""Volume classes (docs/design.md#3-volume-classes) and the small helpers other rules build on."""

from __future__ import annotations

from typing import Any

import pytest

from rules.kube.nodeaffinity import and_terms
from rules.kube.volumes import claim_volumes, node_local_terms, storage_class_of
from rules.model import Json
from tests.support import DATA, table_cases, view_from

CLASSES_KEYS = {"expected", "name", "pod", "source", "state"}


@pytest.mark.parametrize("case", table_cases(DATA / "volumes" / "classes.yaml", CLASSES_KEYS))
def test_classes(case: Json) -> None:
    view = view_from(*case.get("state", ()))
    pod = case["pod"]
    volumes = claim_volumes(view, "ns", pod["metadata"], pod["spec"])
    rows = [[v.volume, v.claim, v.access, v.node_local, v.bound] for v in volumes]
    assert rows == case["expected"]
    for v in volumes:
        leaf = "ephemeral" if v.ephemeral else "persistentVolumeClaim.claimName"
        assert v.field == f"spec.volumes[{v.index}].{leaf}"


def _pvc(name: str, **spec: Any) -> Json:
    bound = "volumeName" in spec
    status = {"phase": "Bound", "accessModes": ["ReadWriteOnce"]} if bound else {"phase": "Pending"}
    return {
        "kind": "PersistentVolumeClaim",
        "metadata": {"name": name, "namespace": "ns"},
        "spec": {"accessModes": ["ReadWriteOnce"], **spec},
        "status": status,
    }


def _pv(name: str, terms: list[Json] | None = None, **spec: Any) -> Json:
    """A PV bound to the claim `_pvc` names after it (`pv-x` → claim `x`, `pv` → `c`)."""
    spec["claimRef"] = {"namespace": "ns", "name": name.removeprefix("pv-") if name != "pv" else "c"}
    if terms is not None:
        spec["nodeAffinity"] = {"required": {"nodeSelectorTerms": terms}}
    return {"kind": "PersistentVolume", "metadata": {"name": name}, "spec": spec}


def _pod(*claims: str, ephemeral: Json | None = None) -> tuple[Json, Json]:
    volumes: list[Json] = [{"name": f"v{i}", "persistentVolumeClaim": {"claimName": c}} for i, c in enumerate(claims)]
    if ephemeral is not None:
        volumes.insert(0, {"name": "eph", "ephemeral": {"volumeClaimTemplate": {"spec": ephemeral}}})
    return {"name": "p"}, {"volumes": [{"name": "scratch", "emptyDir": {}}, *volumes]}


ZONE_A = {"matchExpressions": [{"key": "zone", "operator": "In", "values": ["a"]}]}
ZONE_B = {"matchExpressions": [{"key": "zone", "operator": "In", "values": ["b"]}]}
HOST_1 = {"matchExpressions": [{"key": "kubernetes.io/hostname", "operator": "In", "values": ["h1"]}]}


def test_node_local_terms_one_list_per_node_local_volume_and_their_and() -> None:
    view = view_from(
        _pvc("zoned", volumeName="pv-zoned"),
        _pv("pv-zoned", [ZONE_A, ZONE_B]),
        _pvc("local", volumeName="pv-local"),
        _pv("pv-local", [HOST_1]),
        _pvc("free", volumeName="pv-free"),
        _pv("pv-free"),
    )
    metadata, spec = _pod("zoned", "free", "local")
    local = node_local_terms(claim_volumes(view, "ns", metadata, spec))
    assert local == [(ZONE_A, ZONE_B), (HOST_1,)]
    combined: list[Json] | None = None
    for terms in local:  # how load affinity ANDs them (rules/loadaffinity/mutation.py combine_terms)
        combined = and_terms(combined, terms)
    assert combined == [
        {"matchExpressions": [*ZONE_A["matchExpressions"], *HOST_1["matchExpressions"]]},
        {"matchExpressions": [*ZONE_B["matchExpressions"], *HOST_1["matchExpressions"]]},
    ]
    assert node_local_terms(claim_volumes(view, "ns", *_pod("free"))) == []


@pytest.mark.parametrize(
    ("objects", "pod", "expected"),
    [
        ([_pvc("c", storageClassName="gp3")], _pod("c"), "gp3"),
        ([_pvc("c", volumeName="pv"), _pv("pv", storageClassName="from-pv")], _pod("c"), None),
        ([_pvc("c")], _pod("c"), None),
        ([], _pod("missing"), None),
        ([_pvc("c", storageClassName="gp3")], _pod("c", ephemeral={"storageClassName": "eph"}), "eph"),
        ([_pvc("p-eph", storageClassName="made")], _pod(ephemeral={"storageClassName": "eph"}), "made"),
        ([], ({"generateName": "p-"}, _pod(ephemeral={"storageClassName": "eph"})[1]), "eph"),
    ],
    ids=[
        "pvc",
        "never-the-pv",
        "unnamed",
        "missing-pvc",
        "ephemeral-template",
        "ephemeral-made",
        "ephemeral-of-a-pod-not-named-yet",
    ],
)
def test_storage_class_of_a_claim_volume(objects: list[Json], pod: tuple[Json, Json], expected: str | None) -> None:
    """The claim's own class, as Velero reads it (vmware-tanzu/velero pkg/exposer/generic_restore.go: "Data mover
    allows the StorageClass name not set for PVC"), never the class of the PV it is bound to."""
    first = claim_volumes(view_from(*objects), "ns", *pod)[0]
    assert storage_class_of(first, pod[1]) == expected
