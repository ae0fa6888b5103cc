"""Another namespace's ReferenceGrants are walked under the review's deadline: their author, not the pod's,
decides how many there are."""

from __future__ import annotations

import pytest

from rules import deadline
from rules.kube.referencegrants import reference_granted
from rules.model import Json
from tests.support import counted_deadline_checks

SNAPSHOT = {"apiGroup": "snapshot.storage.k8s.io", "kind": "VolumeSnapshot", "name": "daily"}


def grant(from_namespace: str) -> Json:
    """A grant of the referred-to namespace (gateway-api apis/v1beta1/referencegrant_types.go)."""
    return {
        "apiVersion": "gateway.networking.k8s.io/v1beta1",
        "kind": "ReferenceGrant",
        "spec": {
            "from": [{"group": "", "kind": "PersistentVolumeClaim", "namespace": from_namespace}],
            "to": [{"group": "snapshot.storage.k8s.io", "kind": "VolumeSnapshot"}],
        },
    }


@pytest.mark.parametrize("count", [1, 500])
def test_each_grant_counts_against_the_deadline(count: int, monkeypatch: pytest.MonkeyPatch) -> None:
    checks = counted_deadline_checks(monkeypatch)
    grants = [grant(f"other-{i}") for i in range(count)]
    assert not reference_granted(grants, "tenant", "PersistentVolumeClaim", SNAPSHOT)
    assert len(checks) == count
    assert reference_granted([*grants, grant("tenant")], "tenant", "PersistentVolumeClaim", SNAPSHOT)


def test_past_the_deadline_the_walk_stops() -> None:
    with deadline.running(0), pytest.raises(deadline.PastDeadline):
        reference_granted([grant("other")] * 10, "tenant", "PersistentVolumeClaim", SNAPSHOT)
