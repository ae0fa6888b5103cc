"""Every scenario lints cleanly, renders the expected objects, and every object is valid Kubernetes."""

from __future__ import annotations

from typing import Any

import kubernetes_validate
import pytest

from tests.chart.chart_helpers import FULLNAME, NAMESPACE, SCENARIOS, Manifest, kinds, lint, one, render

# The oldest Kubernetes the chart supports (Chart.yaml kubeVersion) and a recent one.
KUBERNETES_VERSIONS = ("1.30.0", "1.35.0")

# Custom resources: kubernetes-validate has no schema for them. cert-manager's are checked by
# test_cert_manager_chain, the Prometheus Operator's against its CRD schemas by test_chart_monitoring.
NOT_IN_KUBERNETES_SCHEMA = {
    ("cert-manager.io/v1", "Issuer"),
    ("cert-manager.io/v1", "Certificate"),
    ("monitoring.coreos.com/v1", "ServiceMonitor"),
    ("monitoring.coreos.com/v1", "PrometheusRule"),
}
CERT_MANAGER_KINDS = {k for k in NOT_IN_KUBERNETES_SCHEMA if k[0] == "cert-manager.io/v1"}

BASE_KINDS = [
    "ClusterRole",
    "ClusterRoleBinding",
    "ConfigMap",
    "Deployment",
    "MutatingWebhookConfiguration",
    "Role",  # the policy ConfigMap, by name
    "RoleBinding",
    "Service",
    "ServiceAccount",
    "ValidatingWebhookConfiguration",
]
SELF_KINDS = ["ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding"]
REPORT_KINDS = ["ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding"]  # the reports and their Lease
EVENT_KINDS = ["ClusterRole", "ClusterRoleBinding"]  # the audit's Events (the Lease is the reports')


def test_lint_strict(scenario: tuple[str, dict[str, Any]]) -> None:
    result = lint(scenario[1])
    assert result.returncode == 0, result.stdout + result.stderr
    assert "0 chart(s) failed" in result.stdout
    assert "[WARNING]" not in result.stdout
    assert "[ERROR]" not in result.stdout


@pytest.mark.parametrize("version", KUBERNETES_VERSIONS)
def test_every_manifest_is_valid_kubernetes(rendered: list[Manifest], version: str) -> None:
    validated = 0
    for doc in rendered:
        if (doc["apiVersion"], doc["kind"]) in NOT_IN_KUBERNETES_SCHEMA:
            continue
        try:
            kubernetes_validate.validate(doc, version, strict=True)
        except kubernetes_validate.ValidationError as exc:  # pragma: no cover - the message is the point
            pytest.fail(f"{doc['kind']}/{doc['metadata']['name']} is not valid for Kubernetes {version}: {exc}")
        validated += 1
    assert validated >= len(BASE_KINDS)


def test_kubernetes_schema_versions_are_shipped() -> None:
    # The validation above is only as good as the schema it uses: a typo in a field name must fail it.
    bad = render()[0] | {"spek": {}}
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(bad, KUBERNETES_VERSIONS[-1], strict=True)


def test_default_objects() -> None:
    docs = render()
    kinds = [*BASE_KINDS, *SELF_KINDS, *REPORT_KINDS, *EVENT_KINDS, "PodDisruptionBudget"]
    assert sorted(d["kind"] for d in docs) == sorted(kinds)
    for doc in docs:
        cluster_scoped = doc["kind"].startswith("Cluster") or doc["kind"].endswith("WebhookConfiguration")
        assert ("namespace" in doc["metadata"]) != cluster_scoped, doc["kind"]
        if not cluster_scoped:
            assert doc["metadata"]["namespace"] == NAMESPACE
        assert doc["metadata"]["labels"]["app.kubernetes.io/instance"] == "saw"
        assert doc["metadata"]["labels"]["app.kubernetes.io/managed-by"] == "Helm"


@pytest.mark.parametrize("name", ["cert-manager", "cert-manager-issuer"])
def test_cert_manager_kinds_only_in_cert_manager_mode(name: str) -> None:
    for values in SCENARIOS.values():
        if values.get("certificates", {}).get("mode") != "certManager":
            assert not [d for d in render(values) if d["apiVersion"].startswith("cert-manager.io/")]
    found = {(d["apiVersion"], d["kind"]) for d in render(SCENARIOS[name]) if d["apiVersion"].startswith("cert-")}
    assert found <= CERT_MANAGER_KINDS
    assert ("cert-manager.io/v1", "Certificate") in found


def test_service_forwards_443_to_the_container_port(rendered: list[Manifest]) -> None:
    service = one(rendered, "Service", FULLNAME)
    (port,) = service["spec"]["ports"]
    assert port["port"] == 443
    deployment = one(rendered, "Deployment", FULLNAME)
    (c,) = deployment["spec"]["template"]["spec"]["containers"]
    (container_port,) = c["ports"]
    assert port["targetPort"] == container_port["name"]
    assert service["spec"]["selector"] == deployment["spec"]["selector"]["matchLabels"]
    assert deployment["spec"]["template"]["metadata"]["labels"].items() >= service["spec"]["selector"].items()


def test_custom_port_reaches_bind_probes_and_service() -> None:
    docs = render(SCENARIOS["custom-port"])
    (c,) = one(docs, "Deployment")["spec"]["template"]["spec"]["containers"]
    assert c["ports"] == [{"name": "https", "containerPort": 9443, "protocol": "TCP"}]
    assert "--bind=0.0.0.0:9443" in c["args"]
    assert "lifecycle" not in c  # preStopSleepSeconds: 0 disables the hook


def test_only_the_self_mode_rbac_objects_depend_on_the_mode() -> None:
    for name in ("cert-manager", "provided"):
        # the reports' and Events' RBAC is the same in every mode
        docs = render({**SCENARIOS[name], "reports": {"api": "off"}, "events": {"enabled": False}})
        assert [d["metadata"]["name"] for d in kinds(docs, "Role")] == [f"{FULLNAME}-configmaps"]
        assert [d["metadata"]["name"] for d in kinds(docs, "RoleBinding")] == [f"{FULLNAME}-configmaps"]
        assert [d["metadata"]["name"] for d in kinds(docs, "ClusterRole")] == [FULLNAME]
