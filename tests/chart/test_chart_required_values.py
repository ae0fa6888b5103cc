"""A value another one makes required fails `helm template` with sentences that say what to set, every missing
value at once, whichever template Helm renders first; never the schema's JSON paths."""

from __future__ import annotations

from typing import Any

import pytest

from tests.chart.chart_helpers import CA_BUNDLE, FULLNAME, NAMESPACE, render, render_error

SECRET = (
    "certificates.mode is provided: set certificates.provided.secretName to an existing kubernetes.io/tls Secret "
    f"(tls.crt, tls.key) in namespace {NAMESPACE}, valid for {FULLNAME}.{NAMESPACE}.svc."
)
CA = (
    "certificates.mode is provided: set certificates.provided.caBundle to the base64-encoded PEM of the CA that "
    'signed that certificate (--set certificates.provided.caBundle="$(base64 -w0 ca.crt)").'
)
RUNBOOKS = (
    "monitoring.prometheusRule.enabled is true: set monitoring.prometheusRule.runbookBaseUrl to the URL where your "
    "team reads docs/runbooks.md (each alert's runbook_url is it plus #<alert name in lower case>)."
)
ISSUER = (
    "certificates.certManager.issuerRef is set: set certificates.certManager.issuerRef.name to the Issuer or "
    "ClusterIssuer to issue from (or leave issuerRef empty for the chart's own CA)."
)
ACCOUNT = "serviceAccount.create is false: set serviceAccount.name to the existing ServiceAccount the server runs as."
PROVIDED = {"mode": "provided"}


@pytest.mark.parametrize(
    ("values", "sentences"),
    [
        ({"certificates": PROVIDED}, [SECRET, CA]),
        ({"certificates": {**PROVIDED, "provided": {"caBundle": CA_BUNDLE}}}, [SECRET]),
        ({"certificates": {**PROVIDED, "provided": {"secretName": "my-tls"}}}, [CA]),
        ({"certificates": {**PROVIDED, "provided": {"secretName": "", "caBundle": ""}}}, [SECRET, CA]),
        ({"monitoring": {"prometheusRule": {"enabled": True}}}, [RUNBOOKS]),
        ({"monitoring": {"prometheusRule": {"enabled": True, "runbookBaseUrl": ""}}}, [RUNBOOKS]),
        ({"certificates": {"mode": "certManager", "certManager": {"issuerRef": {"kind": "ClusterIssuer"}}}}, [ISSUER]),
        ({"serviceAccount": {"create": False}}, [ACCOUNT]),
        (
            {"certificates": PROVIDED, "monitoring": {"prometheusRule": {"enabled": True}}},
            [SECRET, CA, RUNBOOKS],
        ),
    ],
)
def test_a_missing_value_names_what_to_set(values: dict[str, Any], sentences: list[str]) -> None:
    message = render_error(values)
    listed = [line for line in message.splitlines() if line.endswith(".") and ": set " in line]
    assert listed == sentences, message
    assert "don't meet the specifications of the schema" not in message


@pytest.mark.parametrize(
    "values",
    [
        {"certificates": {**PROVIDED, "provided": {"secretName": "my-tls", "caBundle": CA_BUNDLE}}},
        {"monitoring": {"prometheusRule": {"enabled": True, "runbookBaseUrl": "https://runbooks.example/r.md"}}},
        {"certificates": {"mode": "certManager", "certManager": {"issuerRef": {"name": "corp-ca"}}}},
        {"serviceAccount": {"create": False, "name": "existing"}},
        # values only another mode or a disabled object needs are not required
        {"certificates": {"mode": "self", "provided": {"secretName": ""}}},
        {"monitoring": {"prometheusRule": {"enabled": False, "runbookBaseUrl": ""}}},
    ],
)
def test_given_values_render(values: dict[str, Any]) -> None:
    assert render(values)


def test_a_malformed_value_is_still_refused_by_the_schema() -> None:
    message = render_error({"certificates": {**PROVIDED, "provided": {"secretName": "my-tls", "caBundle": "%%"}}})
    assert "/certificates/provided/caBundle" in message
