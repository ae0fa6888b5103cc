"""Workload templates over real TLS: /validate answers a Deployment's and a CronJob's AdmissionReview as
kube-apiserver sends them, on CREATE and on UPDATE with the old object (docs/validation.md, "Workload templates")."""

from __future__ import annotations

import copy
from collections.abc import Iterator
from typing import Any

import pytest

from testkit.reviews import admission_review
from testkit.server import Server, running_server
from tests.support import EXAMPLES, load_yaml
from tests.webhook.review_checks import check_response

pytestmark = pytest.mark.e2e

DEPLOYMENT = load_yaml(EXAMPLES / "bad-annotations-deployment.yaml")
TYPO = "spec.template.metadata.annotations[storage-affinity.io/rol]"


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    with running_server(tmp_path_factory.mktemp("e2e"), "--cluster", str(EXAMPLES / "cluster.yaml")) as srv:
        yield srv


def validate(server: Server, review: dict[str, Any]) -> dict[str, Any]:
    answer = server.session().post(f"{server.url}/validate", json=review, timeout=10)
    assert answer.status_code == 200, answer.text
    document: dict[str, Any] = answer.json()
    check_response(review, document, mutating=False)
    response: dict[str, Any] = document["response"]
    return response


def test_a_deployment_is_denied_at_its_template_fields(server: Server) -> None:
    review = admission_review("CREATE", DEPLOYMENT, dryRun=True)
    assert review["request"]["kind"] == {"group": "apps", "version": "v1", "kind": "Deployment"}
    response = validate(server, review)
    assert response["allowed"] is False
    assert response["status"]["code"] == 422
    message = response["status"]["message"]
    assert message.startswith(f"storage-affinity-webhook denied: 2 problems: (1) {TYPO}: unknown annotation")
    assert "(2) spec.template.metadata.annotations[affinity.volumes.csi-baremetal.dell.com/types]: " in message


def test_scaling_a_deployment_with_that_template_is_allowed(server: Server) -> None:
    scaled = copy.deepcopy(DEPLOYMENT)
    scaled["spec"]["replicas"] = 5
    response = validate(server, admission_review("UPDATE", scaled, DEPLOYMENT))
    assert response["allowed"] is True
    assert "warnings" not in response


def test_changing_the_template_is_checked_whole(server: Server) -> None:
    fixed = copy.deepcopy(DEPLOYMENT)
    del fixed["spec"]["template"]["metadata"]["annotations"]["affinity.volumes.csi-baremetal.dell.com/types"]
    response = validate(server, admission_review("UPDATE", fixed, DEPLOYMENT))
    assert response["allowed"] is False
    assert response["status"]["message"] == (
        f'storage-affinity-webhook denied: 1 problem: (1) {TYPO}: unknown annotation (did you mean "role"?)'
    )
    del fixed["spec"]["template"]["metadata"]["annotations"]["storage-affinity.io/rol"]
    assert validate(server, admission_review("UPDATE", fixed, DEPLOYMENT))["allowed"] is True


def test_a_cronjob_is_denied_at_its_job_template_fields(server: Server) -> None:
    template = DEPLOYMENT["spec"]["template"]
    cronjob = {
        "apiVersion": "batch/v1",
        "kind": "CronJob",
        "metadata": {"name": "reports", "namespace": "shop"},
        "spec": {"schedule": "0 3 * * *", "jobTemplate": {"spec": {"template": template}}},
    }
    response = validate(server, admission_review("CREATE", cronjob))
    assert response["allowed"] is False
    assert (
        "(1) spec.jobTemplate.spec.template.metadata.annotations[storage-affinity.io/rol]: "
        in (response["status"]["message"])
    )


def test_workload_reviews_are_counted_by_kind(server: Server) -> None:
    validate(server, admission_review("CREATE", DEPLOYMENT))
    metrics = server.session().get(server.url + "/metrics", timeout=5).text
    assert 'kind="Deployment",operation="CREATE",outcome="denied"' in metrics
