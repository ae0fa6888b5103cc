"""A review past the budget over the wire: the AdmissionReview answer names the limit, as a 422 denial or, under
`enforcement: warn`, a warning on an unchanged object; the trivial review beside it is answered as ever."""

from __future__ import annotations

import json

import pytest
from flask.testing import FlaskClient

from rules.model import Json
from rules.policy import default_policy
from testkit import hostile
from testkit.reviews import admission_review
from tests.support import app_client, policy, view_from
from webhook.runtime import Runtime

LIMIT = "has 10,000 node selector terms, over the limit of 1,000"
FIELD = "spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms"


def answer(client: FlaskClient, endpoint: str, pod: Json) -> Json:
    body = json.dumps(admission_review("CREATE", pod)).encode()
    response = client.post(f"/{endpoint}", data=body, content_type="application/json")
    assert response.status_code == 200
    return dict(response.get_json()["response"])


@pytest.mark.parametrize("endpoint", ["mutate", "validate"])
def test_a_pod_of_10_000_terms_is_denied_naming_the_limit(endpoint: str) -> None:
    client = app_client(Runtime(policy=default_policy(), view=view_from(*hostile.nodes(1_000)), namespace="saw"))
    got = answer(client, endpoint, hostile.affinity_pod(10_000))
    assert got["allowed"] is False and "patch" not in got
    status = got["status"]
    assert isinstance(status, dict) and status["code"] == 422
    assert LIMIT in status["message"] and FIELD in status["message"]
    assert answer(client, endpoint, hostile.trivial_pod())["allowed"] is True


@pytest.mark.parametrize("endpoint", ["mutate", "validate"])
def test_under_enforcement_warn_it_is_admitted_unchanged_with_a_warning(endpoint: str) -> None:
    warn = policy({"enforcement": "warn"})
    client = app_client(Runtime(policy=warn, view=view_from(*hostile.nodes(10)), namespace="saw"))
    got = answer(client, endpoint, hostile.affinity_pod(10_000))
    assert got["allowed"] is True and "patch" not in got
    warnings = got["warnings"]
    assert isinstance(warnings, list) and any(LIMIT in w for w in warnings), warnings


@pytest.mark.parametrize("endpoint", ["mutate", "validate"])
def test_a_float_among_match_fields_values_is_a_400_naming_the_field(endpoint: str) -> None:
    """The budget counts before the types are checked, and counts a mistyped `values` as nothing: the type walk
    names it, as for any other mistyped field, never a 500."""
    pod = hostile.affinity_pod(1)
    term = pod["spec"]["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
    term["nodeSelectorTerms"][0]["matchFields"] = [{"key": "metadata.name", "operator": "In", "values": 1.5}]
    client = app_client(Runtime(policy=default_policy(), view=view_from(*hostile.nodes(3)), namespace="saw"))
    body = json.dumps(admission_review("CREATE", pod)).encode()
    response = client.post(f"/{endpoint}", data=body, content_type="application/json")
    assert response.status_code == 400
    assert response.get_data(as_text=True) == (
        f"request.object.{FIELD}[0].matchFields[0].values: must be a list, not number\n"
    )
