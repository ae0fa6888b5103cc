from __future__ import annotations

import json
import re
from collections.abc import Callable
from typing import Any

import pytest
from flask.testing import FlaskClient

from testkit.reviews import admission_review
from tests.support import EXAMPLES, SMALL_BODY, app_client, example_runtime, fixtures, load_yaml
from tests.webhook.review_checks import check_response


def post(client: FlaskClient, endpoint: str, body: Any) -> Any:
    data = body if isinstance(body, bytes) else json.dumps(body).encode()
    return client.post(f"/{endpoint}", data=data, content_type="application/json")


@pytest.mark.parametrize("endpoint", ["mutate", "validate"])
@pytest.mark.parametrize(("name", "review"), fixtures(), ids=[n for n, _ in fixtures()])
def test_foreign_fixtures_are_answered_as_the_api_server_requires(
    client: FlaskClient, endpoint: str, name: str, review: dict[str, Any]
) -> None:
    answer = post(client, endpoint, review)
    assert answer.status_code == 200, answer.text
    assert answer.content_type == "application/json"
    check_response(review, answer.get_json(), mutating=endpoint == "mutate")


def test_fixture_coverage_includes_every_shape() -> None:
    names = [n for n, _ in fixtures()]
    assert len(names) == 24
    versions = {review["apiVersion"] for _, review in fixtures()}
    assert versions == {"admission.k8s.io/v1", "admission.k8s.io/v1beta1"}


def _mover_review() -> dict[str, Any]:
    return admission_review("CREATE", load_yaml(EXAMPLES / "mover-pod.yaml"), uid="abc")


@pytest.mark.parametrize(
    ("body", "status", "text"),
    [
        (b"{", 400, "request body is not JSON"),
        ({"apiVersion": "v1", "kind": "Pod"}, 400, 'request body is not an AdmissionReview: kind is "Pod"'),
        ({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview"}, 400, "AdmissionReview has no request"),
        (b"x" * (SMALL_BODY + 1), 413, f"request body is larger than the limit of {SMALL_BODY} bytes"),
    ],
)
@pytest.mark.parametrize("endpoint", ["mutate", "validate"])
def test_bad_bodies_get_a_clear_plain_text_error(
    client: FlaskClient, endpoint: str, body: Any, status: int, text: str
) -> None:
    answer = post(client, endpoint, body)
    assert answer.status_code == status
    assert answer.content_type.startswith("text/plain")
    assert text in answer.text


def test_wrong_types_in_the_object_name_the_field(client: FlaskClient) -> None:
    review = _mover_review()
    review["request"]["object"]["spec"]["volumes"] = "data-db-0"
    answer = post(client, "mutate", review)
    assert answer.status_code == 400
    assert answer.text == "request.object.spec.volumes: must be a list, not string\n"
    review = _mover_review()
    review["request"]["object"]["metadata"]["annotations"] = {"storage-affinity.io/role": 1}
    answer = post(client, "validate", review)
    assert answer.status_code == 400
    assert (
        answer.text == "request.object.metadata.annotations[storage-affinity.io/role]: must be a string, not number\n"
    )


def test_dry_run_is_answered_like_a_real_request(client: FlaskClient) -> None:
    review = _mover_review()
    real = post(client, "mutate", review).get_json()
    review["request"]["dryRun"] = True
    assert post(client, "mutate", review).get_json() == real


def test_a_failing_mutator_is_discarded_whole_and_counted(client: FlaskClient, monkeypatch: pytest.MonkeyPatch) -> None:
    from rules import registry

    def broken(ctx: Any, target: Any) -> None:
        target.patch.set("spec", "nodeName", value="half-applied")
        raise KeyError("boom")

    monkeypatch.setitem(registry.MUTATORS, "mover", broken)
    answer = post(client, "mutate", _mover_review())
    assert answer.status_code == 200
    response = answer.get_json()["response"]
    assert response["allowed"] is True
    assert "patch" not in response
    why = "internal error in tests.webhook.test_app.broken: KeyError"
    assert response["warnings"] == [f"storage-affinity-webhook admitted this unchanged: {why}"]
    assert response["auditAnnotations"] == {"rule-error": why}
    metrics = client.get("/metrics").text
    assert 'storage_affinity_rule_errors_total{endpoint="mutate",rule="tests.webhook.test_app.broken"} 1.0' in metrics
    assert 'storage_affinity_lookup_failures_total{endpoint="mutate"' not in metrics


@pytest.mark.parametrize(("enforcement", "allowed"), [("deny", False), ("warn", True)])
def test_a_failing_validator_fails_closed_unless_enforcement_is_warn(
    monkeypatch: pytest.MonkeyPatch, enforcement: str, allowed: bool
) -> None:
    """A check that could not be computed is not a pass: the policy's global enforcement decides."""
    from rules import registry
    from rules.policy import policy_from_document

    def broken(ctx: Any, target: Any) -> None:
        raise ValueError("boom")

    monkeypatch.setattr(registry, "POD_VALIDATORS", [broken])
    answer = post(
        app_client(example_runtime(policy_from_document({"enforcement": enforcement}))), "validate", _mover_review()
    )
    assert answer.status_code == 200
    response = answer.get_json()["response"]
    assert response["allowed"] is allowed
    text = "internal error in tests.webhook.test_app.broken: ValueError: the object could not be checked"
    if allowed:
        assert response["warnings"] == [text]
    else:
        assert response["status"]["message"] == f"storage-affinity-webhook denied: 1 problem: (1) {text}"


def test_health_readiness_and_metrics(client: FlaskClient) -> None:
    assert client.get("/healthz").text == "ok\n"
    assert client.get("/livez").text == "ok\n"
    ready = client.get("/readyz")
    assert ready.status_code == 200
    assert "[+] policy: ok (embedded default)" in ready.text
    post(client, "validate", _mover_review())
    metrics = client.get("/metrics").text
    assert (
        'storage_affinity_admission_requests_total{endpoint="validate",kind="Pod",operation="CREATE",outcome="allowed"}'
        in metrics
    )


def test_trivial_endpoint_allows_everything(client: FlaskClient) -> None:
    answer = post(client, "allow", _mover_review()).get_json()
    assert answer["response"] == {"uid": "abc", "allowed": True}


@pytest.mark.parametrize("endpoint", ["mutate", "validate", "allow"])
def test_other_methods_on_a_review_endpoint_are_flasks_405(client: FlaskClient, endpoint: str) -> None:
    answer = client.get(f"/{endpoint}")
    assert answer.status_code == 405
    assert sorted(answer.headers["Allow"].split(", ")) == ["OPTIONS", "POST"]  # a set: any order


def test_a_fault_in_the_review_transport_is_a_plain_500_logged_once(
    client: FlaskClient, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    def broken(body: bytes) -> None:
        raise RuntimeError("secret value from the body")

    monkeypatch.setattr("webhook.app.endpoints.decode_review", broken)
    answer = post(client, "mutate", _mover_review())
    assert (answer.status_code, answer.content_type, answer.text) == (
        500,
        "text/plain; charset=utf-8",
        "internal error\n",
    )
    assert [r.message for r in caplog.records if r.levelname == "ERROR"] == ["review mutate failed"]


def test_a_review_answer_carries_its_length_and_type(client: FlaskClient) -> None:
    answer = post(client, "mutate", _mover_review())
    assert answer.status_code == 200 and answer.content_type == "application/json"
    assert int(answer.headers["Content-Length"]) == len(answer.data)
    assert json.loads(answer.data)["response"]["uid"] == "abc"


def _logging_client(log_reviews: bool) -> FlaskClient:
    return app_client(log_reviews=log_reviews)


def _review_lines(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name == "webhook.app.endpoints" and r.levelname == "INFO"]


def _generated(obj: dict[str, Any]) -> dict[str, Any]:
    """The object as a controller creates it: a generateName and no name yet."""
    meta = {k: v for k, v in obj["metadata"].items() if k != "name"}
    return {**obj, "metadata": {**meta, "generateName": "volsync-rsync-tls-src-"}}


REVIEW_LINES = [
    (
        "mutate",
        load_yaml(EXAMPLES / "mover-pod.yaml"),
        r"review mutate Pod shop/volsync-rsync-tls-src-db CREATE: allowed, 3 patch ops, 0 warnings, \d+\.\d ms",
    ),
    (
        "mutate",
        _generated(load_yaml(EXAMPLES / "mover-pod.yaml")),
        r"review mutate Pod shop/volsync-rsync-tls-src-\* CREATE: allowed, 3 patch ops, 0 warnings, \d+\.\d ms",
    ),
    (
        "validate",
        load_yaml(EXAMPLES / "disk-contradiction-pod.yaml"),
        r"review validate Pod shop/cache-1 CREATE: denied, 0 patch ops, 0 warnings, \d+\.\d ms",
    ),
]


@pytest.mark.parametrize(("endpoint", "obj", "line"), REVIEW_LINES)
def test_a_review_is_logged_in_one_line_with_log_reviews(
    caplog: pytest.LogCaptureFixture, endpoint: str, obj: dict[str, Any], line: str
) -> None:
    review = admission_review("CREATE", obj, uid="abc")
    with caplog.at_level("INFO", logger="webhook.app.endpoints"):
        assert post(_logging_client(True), endpoint, review).status_code == 200
    (logged,) = _review_lines(caplog)
    assert re.fullmatch(line, logged), logged


def test_no_review_line_without_log_reviews(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level("INFO", logger="webhook.app.endpoints"):
        assert post(_logging_client(False), "mutate", _mover_review()).status_code == 200
    assert _review_lines(caplog) == []


def test_a_review_line_escapes_what_the_body_says(caplog: pytest.LogCaptureFixture) -> None:
    obj = load_yaml(EXAMPLES / "mover-pod.yaml")
    review = admission_review("CREATE", obj, uid="abc")
    review["request"]["name"] = "evil\n[INFO] forged"
    with caplog.at_level("INFO", logger="webhook.app.endpoints"):
        post(_logging_client(True), "validate", review)
    (logged,) = _review_lines(caplog)
    assert "\n" not in logged and "evil\\n[INFO] forged" in logged


def test_a_review_line_clips_what_the_body_says(caplog: pytest.LogCaptureFixture) -> None:
    """A 200,000-character generateName made a 200,073-character line: each name is clipped as every echo is."""
    obj = _generated(load_yaml(EXAMPLES / "mover-pod.yaml"))
    obj["metadata"]["generateName"] = "g" * 200_000
    review = admission_review("CREATE", obj, uid="abc")
    review["request"]["namespace"] = obj["metadata"]["namespace"] = "n" * 200_000
    with caplog.at_level("INFO", logger="webhook.app.endpoints"):
        post(_logging_client(True), "mutate", review)
    (logged,) = _review_lines(caplog)
    assert re.fullmatch(r"review mutate Pod n{100}…/g{100}…\* CREATE: .+ ms", logged), logged[:300]


def _unavailable_client() -> FlaskClient:
    runtime = example_runtime()
    runtime.lack_policy("the policy ConfigMap was not read yet")
    return app_client(runtime, log_reviews=True, max_body=SMALL_BODY)


def _bad_object_review() -> dict[str, Any]:
    review = _mover_review()
    review["request"]["object"]["spec"]["volumes"] = "data-db-0"
    return review


@pytest.mark.parametrize(
    ("client_of", "body", "line"),
    [
        (
            lambda: app_client(log_reviews=True),
            {"apiVersion": "v1", "kind": "Pod"},
            'review validate: 400 request body is not an AdmissionReview: kind is "Pod"',
        ),
        (
            lambda: app_client(log_reviews=True),
            _bad_object_review(),
            "review validate: 400 request.object.spec.volumes: must be a list, not string",
        ),
        (
            lambda: app_client(log_reviews=True, max_body=SMALL_BODY),
            b"x" * (SMALL_BODY + 1),
            f"review validate: 413 request body is larger than the limit of {SMALL_BODY} bytes",
        ),
        (
            _unavailable_client,
            _mover_review(),
            "review validate: 503 storage-affinity-webhook has no valid policy: the policy ConfigMap was not read yet",
        ),
    ],
    ids=["not an AdmissionReview", "a bad object", "too large", "no policy"],
)
def test_a_review_answered_with_an_error_is_logged_in_one_line_too(
    caplog: pytest.LogCaptureFixture, client_of: Callable[[], FlaskClient], body: Any, line: str
) -> None:
    with caplog.at_level("INFO", logger="webhook.app.endpoints"):
        status = post(client_of(), "validate", body).status_code
    assert status == int(line.split()[2])
    assert _review_lines(caplog) == [line]
