"""Volume classes (docs/design.md#3-volume-classes) and the small helpers other rules build on."""

from __future__ import annotations

from typing import Any

import pytest

from rules.kube.volumes import claim_volumes, first_claim_storage_class, node_local_required_terms
from rules.model import Json
from tests.support import DATA, table_cases, view_from

CLASSES_KEYS = {"expected", "name", "pod", "state"}


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


def test_node_local_required_terms_and_every_node_local_volume() -> None:
    view = view_from(
        _pvc("zoned", volumeName="pv-zoned"),
        _pv("pv-zoned", [ZONE_A, ZONE_B]),
        _pvc("local", volumeName="pv-local"),
        _pv("pv-local", [HOST_1]),
        _pvc("free", volumeName="pv-free"),
        _pv("pv-free"),
    )
    metadata, spec = _pod("zoned", "free", "local")
    terms = node_local_required_terms(view, "ns", metadata, spec)
    assert terms == [
        {"matchExpressions": [*ZONE_A["matchExpressions"], *HOST_1["matchExpressions"]]},
        {"matchExpressions": [*ZONE_B["matchExpressions"], *HOST_1["matchExpressions"]]},
    ]
    assert node_local_required_terms(view, "ns", *_pod("free")) is None


@pytest.mark.parametrize(
    ("objects", "pod", "expected"),
    [
        ([_pvc("c", storageClassName="gp3")], _pod("c"), "gp3"),
        ([_pvc("c", storageClassName="gp3"), _pvc("d", storageClassName="io2")], _pod("d", "c"), "io2"),
        ([_pvc("c", volumeName="pv"), _pv("pv", storageClassName="from-pv")], _pod("c"), "from-pv"),
        ([_pvc("c")], _pod("c"), None),
        ([], _pod("missing"), None),
        ([], _pod(), None),
        ([_pvc("c", storageClassName="gp3")], _pod("c", ephemeral={"storageClassName": "eph"}), "eph"),
        ([_pvc("p-eph", storageClassName="made")], _pod(ephemeral={"storageClassName": "eph"}), "made"),
    ],
    ids=[
        "pvc",
        "first-wins",
        "pv-fallback",
        "unnamed",
        "missing-pvc",
        "no-claims",
        "ephemeral-template",
        "ephemeral-made",
    ],
)
def test_first_claim_storage_class(objects: list[Json], pod: tuple[Json, Json], expected: str | None) -> None:
    assert first_claim_storage_class(view_from(*objects), "ns", *pod) == expected
