"""An object's controller is read in one place (rules/kube/owners.py): the first owner reference marked
`controller: true`, as k8s.io/apimachinery's `GetControllerOf` reads it. Its three readers agree with it whatever
the references hold: the index's trimmed reference (webhook/state/owners.py), a CDI worker's trust
(rules/datasource/scope.py) and the owner an audit Event goes to (rules/auditevents.py)."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from rules.audit import ObjectAudit
from rules.auditevents import owner_of
from rules.context import PodTarget
from rules.datasource.scope import NOT_OWNED, cdi_trust_problem
from rules.kube.owners import controller_reference
from rules.patch import PatchBuilder
from rules.policy import default_policy
from rules.roles import RoleDecision
from tests.support import view_from
from webhook.state.owners import READ_OWNERS
from webhook.state.owners import controller_reference as kept_reference

POLICY = default_policy()
CLAIM = "prime-0c9b"
REFERENCE = st.fixed_dictionaries(
    {
        "apiVersion": st.sampled_from(["v1", "batch/v1", "velero.io/v2alpha1", "apps/v1"]),
        "kind": st.sampled_from(["PersistentVolumeClaim", "Job", "DataUpload", "ReplicaSet"]),
        "name": st.sampled_from([CLAIM, "nightly-x", "other"]),
        "uid": st.sampled_from(["u1", "u2"]),
    },
    optional={"controller": st.sampled_from([True, False, "true", 1, None])},
)
REFERENCES = st.one_of(
    st.lists(st.one_of(REFERENCE, st.none(), st.just("not a reference")), max_size=4),
    st.none(),
    st.just({"controller": True}),
)


def test_the_first_reference_marked_controller_is_the_controller() -> None:
    first = {"apiVersion": "v1", "kind": "PersistentVolumeClaim", "name": "a", "controller": True}
    second = {**first, "name": "b"}
    assert controller_reference({"ownerReferences": [{"kind": "X", "controller": False}, first, second]}) is first
    assert controller_reference({"ownerReferences": [{"kind": "X", "controller": "true"}]}) is None  # not a bool
    assert controller_reference({"ownerReferences": ["x", None]}) is None
    assert controller_reference({"ownerReferences": {"controller": True}}) is None
    assert controller_reference({}) is None


@settings(max_examples=200, deadline=None)
@given(references=REFERENCES)
def test_every_reader_of_the_controller_reads_the_one_function(references: Any) -> None:
    metadata: dict[str, Any] = {"name": "p", "namespace": "velero", "ownerReferences": references}
    controller = controller_reference(metadata)
    # the index keeps it trimmed, of the kinds rules read
    kept = kept_reference(metadata, READ_OWNERS)
    if controller is None or controller["kind"] not in READ_OWNERS:
        assert kept is None
    else:
        assert kept == {k: controller[k] for k in ("apiVersion", "kind", "name", "uid", "controller")}
    assert kept_reference(metadata) == (None if controller is None else {**controller})
    # a CDI worker is trusted only when its controller is the claim it mounts
    spec = {"volumes": [{"name": "data", "persistentVolumeClaim": {"claimName": CLAIM}}]}
    target = PodTarget("Pod", "vms", metadata, spec, PatchBuilder({}), RoleDecision(None, "test"))
    owned = controller is not None and (controller["apiVersion"], controller["kind"], controller["name"]) == (
        "v1", "PersistentVolumeClaim", CLAIM)  # fmt: skip
    assert (cdi_trust_problem(POLICY, target, None) == NOT_OWNED) is not owned
    # a backup pod's Event goes to the DataUpload only when that is its controller
    metadata["labels"] = {"velero.io/data-upload": "nightly-x"}
    owner = owner_of(ObjectAudit("Pod", "velero", "p", role="backup"), {"metadata": metadata}, {}, view_from(), POLICY)
    expected = controller is not None and (controller["apiVersion"], controller["kind"]) == (
        "velero.io/v2alpha1", "DataUpload")  # fmt: skip
    assert (owner is not None) is expected
    if owner is not None and controller is not None:
        assert (owner.kind, owner.name, owner.uid) == (controller["kind"], controller["name"], controller["uid"])
