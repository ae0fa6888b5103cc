"""Enforcement, the denial message and dry runs, through the codec and the Flask app (docs/design.md#6-validation,
#8-interfaces).

`enforcement` and `validation.<family>.enforcement` decide whether a finding denies or warns, like Gatekeeper's
enforcementAction; the policy family is never relaxed. A dry-run request is answered exactly like a real one:
the webhook has no side effects (`sideEffects: None`), so `kubectl apply --dry-run=server` shows the truth.
"""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest
from flask.testing import FlaskClient

from rules import pipeline
from rules.model import Json
from rules.policy import POLICY_LABEL, Policy, validation_families
from testkit import yamldocs
from testkit.reviews import admission_review
from tests.support import EXAMPLES, ROOT, app_client, load_yaml, policy, subject, view_from
from webhook.app.codec import WARNING_ADVISED, WARNING_LIMIT, build_response, clip_warnings, request_from_document
from webhook.runtime import Runtime
from webhook.state.static import load_static_state

CLUSTER = load_static_state([EXAMPLES / "cluster.yaml"])


def pod(annotations: Json | None = None, **spec: Any) -> Json:
    metadata: Json = {"name": "app-0", "namespace": "shop", "labels": {"app": "cache"}}
    if annotations:
        metadata["annotations"] = annotations
    volumes = [{"name": "media", "persistentVolumeClaim": {"claimName": "media"}}]
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": metadata,
        "spec": {"containers": [{"name": "app", "image": "busybox"}], "volumes": volumes, **spec},
    }


DISK = pod({"affinity.volumes.csi-baremetal.dell.com/types": "pod-bound-requried"})
DISK_TEXT = (
    "metadata.annotations[affinity.volumes.csi-baremetal.dell.com/types]: "
    'unknown type "pod-bound-requried" (did you mean "pod-bound-required"?)'
)
OWN = pod({"storage-affinity.io/placment": "nodeName"})
OWN_TEXT = 'metadata.annotations[storage-affinity.io/placment]: unknown annotation (did you mean "placement"?)'
# A pod's own load-affinity list is a load-affinity setting: it follows `validation.loadAffinity`, not `annotations`.
LOAD = pod({"storage-affinity.io/load-affinity": '[{"nodeSelector": {}}]'})
LOAD_TEXT = (
    "metadata.annotations[storage-affinity.io/load-affinity][0].nodeSelector: "
    "must not be empty: an empty node selector term matches no node"
)
PLACEMENT = load_yaml(EXAMPLES / "pinned-away-pod.yaml")
PLACEMENT_TEXT = (
    'spec.nodeName: pins the pod to node "ip-10-0-1-17.ec2.internal", but volume "data" (claim cache-data) is '
    "bound to PV local-pv-cache-0, usable only on nodes with kubernetes.io/hostname In [ip-10-0-2-42]: "
    "the pod could never mount it"
)
POLICY_CM = {
    "apiVersion": "v1",
    "kind": "ConfigMap",
    "metadata": {"name": "storage-affinity-policy", "namespace": "storage-affinity", "labels": {POLICY_LABEL: "true"}},
    "data": {"policy.yaml": "enforcement: warm\n"},
}
POLICY_TEXT = 'data[policy.yaml].enforcement: "warm" is not one of deny, warn'

SUBJECTS = {
    "diskAnnotations": (DISK, DISK_TEXT),
    "annotations": (OWN, OWN_TEXT),
    "loadAffinity": (LOAD, LOAD_TEXT),
    "placement": (PLACEMENT, PLACEMENT_TEXT),
    "policy": (POLICY_CM, POLICY_TEXT),
}

# (running policy, families whose findings deny under it)
ENFORCEMENT = [
    ({}, {"diskAnnotations", "annotations", "loadAffinity", "placement", "policy"}),
    ({"enforcement": "deny"}, {"diskAnnotations", "annotations", "loadAffinity", "placement", "policy"}),
    ({"enforcement": "warn"}, {"policy"}),
    (
        {"validation": {"diskAnnotations": {"enforcement": "warn"}}},
        {"annotations", "loadAffinity", "placement", "policy"},
    ),
    (
        {"validation": {"placement": {"enforcement": "warn"}}},
        {"diskAnnotations", "annotations", "loadAffinity", "policy"},
    ),
    (
        {"validation": {"annotations": {"enforcement": "warn"}}},
        {"diskAnnotations", "loadAffinity", "placement", "policy"},
    ),
    (
        {"validation": {"loadAffinity": {"enforcement": "warn"}}},
        {"diskAnnotations", "annotations", "placement", "policy"},
    ),
    ({"enforcement": "warn", "validation": {"placement": {"enforcement": "deny"}}}, {"placement", "policy"}),
    (
        {"enforcement": "warn", "validation": {"diskAnnotations": {"enforcement": "deny"}}},
        {"diskAnnotations", "policy"},
    ),
    ({"enforcement": "warn", "validation": {"loadAffinity": {"enforcement": "deny"}}}, {"loadAffinity", "policy"}),
]


def review_document(obj: Json, *, dry_run: bool | None = None, operation: str = "CREATE", uid: str = "u-1") -> Json:
    extra: Json = {} if dry_run is None else {"dryRun": dry_run}
    return admission_review(operation, obj, uid=uid, userInfo={"username": "kubernetes-admin"}, **extra)


def respond(obj: Json, pol: Policy, **kwargs: Any) -> Json:
    request = request_from_document(review_document(obj, **kwargs))
    decision = pipeline.validate(request.subject, CLUSTER, pol)
    response: Json = build_response(request, decision, mutating=False)["response"]
    return response


@pytest.mark.parametrize(("running", "denying"), ENFORCEMENT, ids=[json.dumps(e[0]) for e in ENFORCEMENT])
@pytest.mark.parametrize("family", list(SUBJECTS))
def test_enforcement_per_family(family: str, running: Json, denying: set[str]) -> None:
    obj, text = SUBJECTS[family]
    response = respond(obj, policy(running))
    if family in denying:
        assert response["allowed"] is False
        assert response["status"] == {
            "code": 422,
            "reason": "Invalid",
            "message": f"storage-affinity-webhook denied: 1 problem: (1) {text}",
        }
        assert "warnings" not in response
    else:
        assert response["allowed"] is True
        assert "status" not in response
        assert response["warnings"] == clip_warnings([text])


def gradual_rollout() -> Json:
    """The gradual-rollout policy docs/validation.md shows, read from the page itself."""
    page = (ROOT / "docs" / "validation.md").read_text()
    block = page.split("For a gradual rollout", 1)[1].split("```yaml\n", 1)[1].split("```", 1)[0]
    return yamldocs.load(block)  # type: ignore[no-any-return]


@pytest.mark.parametrize("family", list(SUBJECTS))
def test_the_documented_gradual_rollout_warns_on_every_family_but_placement(family: str) -> None:
    obj, text = SUBJECTS[family]
    response = respond(obj, policy(gradual_rollout()))
    assert response["allowed"] is (family not in ("placement", "policy"))
    if response["allowed"]:
        assert response["warnings"] == clip_warnings([text])


def test_the_gradual_rollout_leaves_no_family_at_the_embedded_default() -> None:
    rollout = policy(gradual_rollout())
    assert {f: rollout.enforcement_for(f) for f in validation_families()} == {
        **dict.fromkeys(validation_families(), "warn"),
        "placement": "deny",
    }


def test_mixed_families_one_message_numbered_and_the_relaxed_family_warns() -> None:
    mixed = copy.deepcopy(PLACEMENT)
    mixed["metadata"]["annotations"] = {
        **DISK["metadata"]["annotations"],
        **OWN["metadata"]["annotations"],
    }
    response = respond(mixed, policy())
    assert response["status"]["message"] == (
        f"storage-affinity-webhook denied: 3 problems: (1) {OWN_TEXT}; (2) {DISK_TEXT}; (3) {PLACEMENT_TEXT}"
    )
    relaxed = respond(mixed, policy({"validation": {"diskAnnotations": {"enforcement": "warn"}}}))
    assert relaxed["allowed"] is False
    assert relaxed["status"]["message"] == (
        f"storage-affinity-webhook denied: 2 problems: (1) {OWN_TEXT}; (2) {PLACEMENT_TEXT}"
    )
    assert relaxed["warnings"] == clip_warnings([DISK_TEXT])


def test_warnings_fit_the_api_server_limit() -> None:
    response = respond(PLACEMENT, policy({"enforcement": "warn"}))
    (warning,) = response["warnings"]
    assert len(PLACEMENT_TEXT) > WARNING_ADVISED
    path, message = PLACEMENT_TEXT.split(": ", 1)
    assert warning == f"{message} (at {path})"
    assert clip_warnings(["short  one\n"]) == ["short one"]
    many = clip_warnings(["x" * 200] * 100)
    assert all(len(w) <= WARNING_LIMIT for w in many)
    assert sum(len(w) for w in many) <= 4096


def test_warning_only_findings_never_deny() -> None:
    no_volume = pod({"affinity.volumes.csi-baremetal.dell.com/types": "pod-bound-required"}, volumes=[])
    response = respond(no_volume, policy())
    assert response["allowed"] is True
    assert response["warnings"] == [
        "spec.volumes: no PVC or ephemeral volume: the csi-baremetal disk annotations have no effect"
    ]


# --- dry run ---------------------------------------------------------------------------------------------


def post(client: FlaskClient, path: str, document: Json) -> Json:
    answer = client.post(path, data=json.dumps(document), content_type="application/json")
    assert answer.status_code == 200, answer.get_data(as_text=True)
    review: Json = answer.get_json()
    return review


@pytest.fixture
def client() -> FlaskClient:
    runtime = Runtime(policy=policy({"validation": {"diskAnnotations": {"enforcement": "warn"}}}), view=CLUSTER)
    return app_client(runtime)


DRY_RUN_CASES = {
    "denied": PLACEMENT,
    "warned": DISK,
    "allowed": pod(),
    "policy ConfigMap": POLICY_CM,
    "mover": load_yaml(EXAMPLES / "mover-pod.yaml"),
}


@pytest.mark.parametrize("endpoint", ["/validate", "/mutate"])
@pytest.mark.parametrize("name", list(DRY_RUN_CASES))
def test_dry_run_is_answered_exactly_like_a_real_request(client: Any, endpoint: str, name: str) -> None:
    obj = DRY_RUN_CASES[name]
    real = post(client, endpoint, review_document(obj))
    dry = post(client, endpoint, review_document(obj, dry_run=True))
    explicit = post(client, endpoint, review_document(obj, dry_run=False))
    assert dry == real == explicit
    assert real["response"]["uid"] == "u-1"


def test_dry_run_over_the_app_gives_the_denial_kubectl_prints(client: Any) -> None:
    answer = post(client, "/validate", review_document(PLACEMENT, dry_run=True))
    response = answer["response"]
    assert answer["apiVersion"] == "admission.k8s.io/v1" and answer["kind"] == "AdmissionReview"
    assert response["allowed"] is False
    assert response["status"]["code"] == 422
    assert response["status"]["message"] == f"storage-affinity-webhook denied: 1 problem: (1) {PLACEMENT_TEXT}"
    warned = post(client, "/validate", review_document(DISK, dry_run=True))["response"]
    assert warned["allowed"] is True and warned["warnings"] == clip_warnings([DISK_TEXT])


def test_the_offline_review_agrees_with_the_server(client: Any) -> None:
    """`review` and the server give the same decision for the same pod (README: dry run vs review)."""
    from webhook.cli.review import as_request, review

    for obj in DRY_RUN_CASES.values():
        offline = review(as_request(copy.deepcopy(obj)), client.application.extensions["runtime"].policy, CLUSTER)
        served = post(client, "/validate", review_document(obj, dry_run=True))["response"]
        assert offline.allowed is served["allowed"]
        if not offline.allowed:
            assert offline.status_message == served["status"]["message"]


def test_subject_carries_dry_run_but_no_rule_reads_it() -> None:
    request = request_from_document(review_document(DISK, dry_run=True))
    assert request.subject.dry_run is True
    real = pipeline.validate(subject(DISK), view_from(), policy())
    dry = pipeline.validate(request.subject, view_from(), policy())
    assert real == dry
