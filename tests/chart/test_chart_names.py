"""Object names follow Helm's `fullname` convention (what `helm create` generates), so a release named after the
chart gets the short names docs/operations.md and docs/runbooks.md use."""

from __future__ import annotations

from typing import Any

import pytest

from tests.chart.chart_helpers import Manifest, one, render

CHART_NAME = "storage-affinity-webhook"
#: Objects whose names do not follow the release: the policy ConfigMap the server and the docs refer to.
FIXED = {("ConfigMap", "storage-affinity-policy")}


def _named(docs: list[Manifest]) -> dict[tuple[str, str], Manifest]:
    return {(d["kind"], d["metadata"]["name"]): d for d in docs if (d["kind"], d["metadata"]["name"]) not in FIXED}


@pytest.mark.parametrize(
    ("release", "values", "fullname", "name_label"),
    [
        ("storage-affinity-webhook", {}, "storage-affinity-webhook", CHART_NAME),
        ("prod-storage-affinity-webhook", {}, "prod-storage-affinity-webhook", CHART_NAME),
        ("storage-affinity", {}, "storage-affinity-storage-affinity-webhook", CHART_NAME),
        ("storage-affinity", {"nameOverride": "affinity"}, "storage-affinity", "affinity"),
        ("saw", {"nameOverride": "affinity"}, "saw-affinity", "affinity"),
        ("storage-affinity", {"fullnameOverride": "placement-webhook"}, "placement-webhook", CHART_NAME),
    ],
)
def test_every_object_is_named_after_the_full_name(
    release: str, values: dict[str, Any], fullname: str, name_label: str
) -> None:
    docs = render({**values, "monitoring": {"serviceMonitor": {"enabled": True}}}, release=release)
    named = _named(docs)
    assert ("Deployment", fullname) in named
    assert ("Service", fullname) in named
    assert ("ServiceAccount", fullname) in named
    assert ("MutatingWebhookConfiguration", fullname) in named
    assert ("ValidatingWebhookConfiguration", fullname) in named
    for kind, name in named:
        assert name == fullname or name.startswith(f"{fullname}-"), f"{kind} {name} is not named after {fullname}"
    deployment = one(docs, "Deployment", fullname)
    assert deployment["spec"]["template"]["metadata"]["labels"]["app.kubernetes.io/name"] == name_label
    assert f"--cert-secret={fullname}-tls" in deployment["spec"]["template"]["spec"]["containers"][0]["args"]
