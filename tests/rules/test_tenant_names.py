"""No lookup follows a cluster-scoped name that a tenant wrote and no controller confirmed
(docs/design.md#13-what-a-review-may-tell): a claim's `spec.volumeName` is looked up only once the binder has
made the claim Bound, and a snapshot's content only by the name the snapshot controller bound
(`status.boundVolumeSnapshotContentName`), never by the one its author wrote in `spec.source`. A lookup the server
makes for a name its index lacks is a GET, whose time tells whether the object exists; a lookup never asked tells
nothing. Checked on every rule at once: the mutation, the validation and the audit of a pod mounting the claim,
with a view that records what it is asked."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from rules import pipeline
from rules.audit import audit_objects
from rules.model import Json
from tests.support import policy, subject, view_from

NAMESPACE = "tenant-a"
PHASES = st.sampled_from(["Bound", "Pending", "Lost", None])
NAMES = st.sampled_from(["pv-bank-ledger", "pv-missing", "pvc-3f1e", "snapcontent-payroll"])


class Recording:
    """A view that records the cluster-scoped names it is asked for (PVs and snapshot contents)."""

    def __init__(self, view: Any) -> None:
        self.view = view
        self.asked: list[tuple[str, str]] = []

    def pv(self, name: str) -> Json | None:
        self.asked.append(("pv", name))
        return self.view.pv(name)  # type: ignore[no-any-return]

    def volume_snapshot_content(self, name: str) -> Json | None:
        self.asked.append(("content", name))
        return self.view.volume_snapshot_content(name)  # type: ignore[no-any-return]

    def __getattr__(self, name: str) -> Any:
        return getattr(self.view, name)


def foreign() -> list[Json]:
    """Another namespace's PV and snapshot content: what a tenant's names may point at."""
    return [
        {
            "apiVersion": "v1",
            "kind": "PersistentVolume",
            "metadata": {"name": "pv-bank-ledger"},
            "spec": {
                "accessModes": ["ReadWriteOnce"],
                "claimRef": {"namespace": "bank", "name": "ledger"},
                "csi": {"driver": "topolvm.io", "volumeHandle": "7c1e-ledger"},
                "nodeAffinity": {
                    "required": {
                        "nodeSelectorTerms": [
                            {
                                "matchExpressions": [
                                    {"key": "kubernetes.io/hostname", "operator": "In", "values": ["n1"]}
                                ]
                            }
                        ]
                    }
                },
            },
        },
        {
            "apiVersion": "snapshot.storage.k8s.io/v1",
            "kind": "VolumeSnapshotContent",
            "metadata": {"name": "snapcontent-payroll"},
            "spec": {
                "driver": "topolvm.io",
                "source": {"volumeHandle": "7c1e-ledger"},
                "volumeSnapshotRef": {"kind": "VolumeSnapshot", "namespace": "bank", "name": "payroll"},
            },
        },
    ]


def claim(name: str, phase: str | None, volume_name: str | None, source: str | None) -> Json:
    spec: Json = {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}}
    if volume_name:
        spec["volumeName"] = volume_name
    if source:
        spec["dataSource"] = {"apiGroup": "snapshot.storage.k8s.io", "kind": "VolumeSnapshot", "name": source}
    out: Json = {
        "apiVersion": "v1",
        "kind": "PersistentVolumeClaim",
        "metadata": {"name": name, "namespace": NAMESPACE},
    }
    out["spec"] = spec
    if phase:
        out["status"] = {"phase": phase}
    return out


def snapshot(name: str, spec_content: str, bound_content: str | None) -> Json:
    status: Json = {"readyToUse": True}
    if bound_content:
        status["boundVolumeSnapshotContentName"] = bound_content
    return {
        "apiVersion": "snapshot.storage.k8s.io/v1",
        "kind": "VolumeSnapshot",
        "metadata": {"name": name, "namespace": NAMESPACE},
        "spec": {"source": {"volumeSnapshotContentName": spec_content}},
        "status": status,
    }


def pod(claims: list[str]) -> Json:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "p", "namespace": NAMESPACE, "annotations": {"storage-affinity.io/role": "mover"}},
        "spec": {
            "containers": [{"name": "c", "image": "busybox:1.36"}],
            "volumes": [{"name": f"v{i}", "persistentVolumeClaim": {"claimName": c}} for i, c in enumerate(claims)],
        },
    }


@settings(max_examples=60, deadline=None)
@given(
    claims=st.lists(st.tuples(PHASES, st.none() | NAMES, st.booleans()), min_size=1, max_size=4),
    spec_content=NAMES,
    bound_content=st.none() | NAMES,
)
def test_no_lookup_of_a_name_no_controller_confirmed(
    claims: list[tuple[str | None, str | None, bool]], spec_content: str, bound_content: str | None
) -> None:
    objects = [*foreign(), snapshot("snap", spec_content, bound_content)]
    names = []
    for i, (phase, volume_name, restored) in enumerate(claims):
        objects.append(claim(f"c{i}", phase, volume_name, "snap" if restored else None))
        names.append(f"c{i}")
    view = Recording(view_from(*objects))
    reviewed = pod(names)
    pipeline.mutate_then_validate(subject(reviewed), view, policy())
    audit_objects([reviewed], view, policy(), now=datetime(2026, 11, 28, tzinfo=UTC))
    bound = {volume_name for phase, volume_name, _ in claims if phase == "Bound" and volume_name}
    confirmed = {bound_content} if bound_content else set()
    for what, name in view.asked:
        assert name in (bound if what == "pv" else confirmed), (what, name, claims, spec_content, bound_content)
