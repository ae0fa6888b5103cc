"""The Deployment and what keeps it available and safe: probes, shutdown, security, spread, PDB, HPA, arguments."""

from __future__ import annotations

from typing import Any

import pytest

from tests.chart.chart_helpers import (
    FULLNAME,
    NAMESPACE,
    SCENARIOS,
    Manifest,
    args,
    container,
    kinds,
    one,
    render,
    render_error,
)

SELECTOR = {
    "app.kubernetes.io/name": "storage-affinity-webhook",
    "app.kubernetes.io/instance": "saw",
    "app.kubernetes.io/component": "webhook",
}


def _port_number(c: dict[str, Any], port: int | str) -> int:
    if isinstance(port, int):
        return port
    (match,) = [p for p in c["ports"] if p["name"] == port]
    number: int = match["containerPort"]
    return number


def test_probes_use_https_on_the_container_port(rendered: list[Manifest]) -> None:
    c = container(rendered)
    bind_port = int(args(rendered)["--bind"].rsplit(":", 1)[1])
    for probe, path in (("livenessProbe", "/livez"), ("readinessProbe", "/readyz")):
        get = c[probe]["httpGet"]
        assert get["path"] == path
        assert get["scheme"] == "HTTPS"
        assert _port_number(c, get["port"]) == bind_port


def test_security_context() -> None:
    spec = one(render(), "Deployment")["spec"]["template"]["spec"]
    assert spec["securityContext"]["runAsNonRoot"] is True
    assert spec["securityContext"]["runAsUser"] == 65532
    assert spec["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}
    sc = spec["containers"][0]["securityContext"]
    assert sc["runAsNonRoot"] is True
    assert sc["runAsUser"] == 65532
    assert sc["readOnlyRootFilesystem"] is True
    assert sc["allowPrivilegeEscalation"] is False
    assert sc["capabilities"] == {"drop": ["ALL"]}
    assert sc["seccompProfile"] == {"type": "RuntimeDefault"}
    assert spec["automountServiceAccountToken"] is True  # the server reads the cluster state
    assert spec["serviceAccountName"] == FULLNAME


def test_tmp_is_a_writable_empty_dir(rendered: list[Manifest]) -> None:
    spec = one(rendered, "Deployment")["spec"]["template"]["spec"]
    (tmp,) = [v for v in spec["volumes"] if v["name"] == "tmp"]
    assert tmp["emptyDir"]["sizeLimit"] == "64Mi"
    mounts = {m["mountPath"]: m for m in spec["containers"][0]["volumeMounts"]}
    assert mounts["/tmp"]["name"] == "tmp"
    assert not mounts["/tmp"].get("readOnly", False)


def test_resources_are_bounded() -> None:
    resources = container(render())["resources"]
    assert resources["requests"] == {"cpu": "100m", "memory": "128Mi"}
    assert resources["limits"]["memory"] == "512Mi"


def test_graceful_shutdown_fits_in_the_grace_period(rendered: list[Manifest]) -> None:
    spec = one(rendered, "Deployment")["spec"]["template"]["spec"]
    c = spec["containers"][0]
    graceful = int(args(rendered)["--graceful-timeout"])
    sleep = c.get("lifecycle", {}).get("preStop", {}).get("sleep", {}).get("seconds", 0)
    assert spec["terminationGracePeriodSeconds"] > sleep + graceful


def test_default_shutdown_values() -> None:
    docs = render()
    spec = one(docs, "Deployment")["spec"]["template"]["spec"]
    assert spec["terminationGracePeriodSeconds"] == 30
    assert spec["containers"][0]["lifecycle"] == {"preStop": {"sleep": {"seconds": 5}}}
    assert args(docs)["--graceful-timeout"] == "20"


def test_grace_period_too_short_does_not_render() -> None:
    message = render_error({"terminationGracePeriodSeconds": 25})
    assert "terminationGracePeriodSeconds (25) must be larger than" in message


def test_start_timeout_fits_in_the_liveness_window(rendered: list[Manifest]) -> None:
    probe = container(rendered)["livenessProbe"]
    window = probe["initialDelaySeconds"] + probe["periodSeconds"] * (probe["failureThreshold"] - 1)
    assert int(args(rendered)["--start-timeout"]) < window


def test_start_timeout_beyond_the_liveness_window_does_not_render() -> None:
    message = render_error({"server": {"startTimeoutSeconds": 55}})
    assert "server.startTimeoutSeconds (55) must be smaller than the liveness probe's window (55 s)" in message
    render({"server": {"startTimeoutSeconds": 90}, "livenessProbe": {"failureThreshold": 10}})


def test_spread_across_nodes() -> None:
    spec = one(render(), "Deployment")["spec"]["template"]["spec"]
    (spread,) = spec["topologySpreadConstraints"]
    assert spread["topologyKey"] == "kubernetes.io/hostname"
    assert spread["whenUnsatisfiable"] == "ScheduleAnyway"
    assert spread["maxSkew"] == 1
    assert spread["labelSelector"] == {"matchLabels": SELECTOR}
    (term,) = spec["affinity"]["podAntiAffinity"]["preferredDuringSchedulingIgnoredDuringExecution"]
    assert term["podAffinityTerm"]["topologyKey"] == "kubernetes.io/hostname"
    assert term["podAffinityTerm"]["labelSelector"] == {"matchLabels": SELECTOR}
    assert "requiredDuringSchedulingIgnoredDuringExecution" not in spec["affinity"]["podAntiAffinity"]


def test_custom_affinity_replaces_the_default_anti_affinity() -> None:
    affinity: dict[str, Any] = {"nodeAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": []}}
    spec = one(render({"affinity": affinity}), "Deployment")["spec"]["template"]["spec"]
    assert spec["affinity"] == affinity


@pytest.mark.parametrize(
    ("name", "replicas", "pdb"), [("default", 2, True), ("replicas-1", 1, False), ("replicas-3", 3, True)]
)
def test_replicas_and_pod_disruption_budget(name: str, replicas: int, pdb: bool) -> None:
    docs = render(SCENARIOS[name])
    assert one(docs, "Deployment")["spec"]["replicas"] == replicas
    assert not kinds(docs, "HorizontalPodAutoscaler")
    budgets = kinds(docs, "PodDisruptionBudget")
    if pdb:
        (budget,) = budgets
        assert budget["spec"]["minAvailable"] == 1
        assert budget["spec"]["selector"] == {"matchLabels": SELECTOR}
    else:
        assert budgets == []


def test_autoscaler() -> None:
    docs = render(SCENARIOS["hpa"])
    deployment = one(docs, "Deployment")
    assert "replicas" not in deployment["spec"]  # the HPA owns it
    hpa = one(docs, "HorizontalPodAutoscaler")
    assert hpa["spec"]["scaleTargetRef"] == {"apiVersion": "apps/v1", "kind": "Deployment", "name": FULLNAME}
    assert (hpa["spec"]["minReplicas"], hpa["spec"]["maxReplicas"]) == (3, 6)
    one(docs, "PodDisruptionBudget")
    assert not kinds(render({"autoscaling": {"enabled": True, "minReplicas": 1}}), "PodDisruptionBudget")


def test_server_arguments_self_mode() -> None:
    docs = render()
    assert args(docs) == {
        "--bind": "0.0.0.0:8443",
        "--cert": "/tmp/certs/tls.crt",
        "--key": "/tmp/certs/tls.key",
        "--namespace": NAMESPACE,
        "--policy-configmap": "storage-affinity-policy",
        "--workers": "1",
        "--graceful-timeout": "20",
        "--start-timeout": "30",
        "--read-timeout": "10",
        "--audit-interval": "300",
        "--lookup-timeout": "1",
        "--log-level": "info",
        "--reports": "auto",
        "--events": "on",
        "--lease-name": FULLNAME,
        "--lease-duration": "15",
        "--lease-renew-deadline": "10",
        "--lease-retry-period": "2",
        "--cert-mode": "self",
        "--cert-dir": "/tmp/certs",
        "--cert-secret": f"{FULLNAME}-tls",
        "--mutating-webhook": FULLNAME,
        "--validating-webhook": FULLNAME,
        "--service": FULLNAME,
    }
    # The names the server is given are the objects the chart renders.
    assert args(docs)["--mutating-webhook"] == one(docs, "MutatingWebhookConfiguration")["metadata"]["name"]
    assert args(docs)["--validating-webhook"] == one(docs, "ValidatingWebhookConfiguration")["metadata"]["name"]
    assert args(docs)["--service"] == one(docs, "Service")["metadata"]["name"]
    one(docs, "ConfigMap", args(docs)["--policy-configmap"])


def test_review_lines_are_off_unless_asked_for() -> None:
    """One log line per review suits `make run`, not a cluster's log: the chart passes `--log-reviews` only when
    `server.logReviews` asks for it (docs/operations.md)."""
    assert "--log-reviews" not in container(render())["args"]
    assert "--log-reviews" in container(render({"server": {"logReviews": True}}))["args"]


def test_the_server_settings_operators_tune_are_values() -> None:
    """The audit interval, the lookup timeout and the log level are values, not only `server.extraArgs`; the
    defaults are the server's own."""
    assert args(render()).items() >= {"--audit-interval": "300", "--lookup-timeout": "1", "--log-level": "info"}.items()
    tuned = {"server": {"auditIntervalSeconds": 60, "lookupTimeoutSeconds": 0.5, "logLevel": "debug"}}
    expected = {"--audit-interval": "60", "--lookup-timeout": "0.5", "--log-level": "debug"}
    assert args(render(tuned)).items() >= expected.items()


def test_namespace_from_the_downward_api() -> None:
    env = {e["name"]: e for e in container(render())["env"]}
    assert env["POD_NAMESPACE"]["valueFrom"] == {"fieldRef": {"fieldPath": "metadata.namespace"}}


@pytest.mark.parametrize(("name", "secret"), [("cert-manager", f"{FULLNAME}-tls"), ("provided", "my-tls")])
def test_mounted_certificate_modes(name: str, secret: str) -> None:
    docs = render(SCENARIOS[name])
    flags = args(docs)
    assert not {"--cert-mode", "--cert-dir", "--cert-secret", "--mutating-webhook", "--service"} & set(flags)
    spec = one(docs, "Deployment")["spec"]["template"]["spec"]
    (tls,) = [v for v in spec["volumes"] if v["name"] == "tls"]
    assert tls["secret"]["secretName"] == secret
    (mount,) = [m for m in spec["containers"][0]["volumeMounts"] if m["name"] == "tls"]
    assert mount["readOnly"] is True
    assert flags["--cert"] == f"{mount['mountPath']}/tls.crt"
    assert flags["--key"] == f"{mount['mountPath']}/tls.key"


def test_cert_manager_chain() -> None:
    docs = render(SCENARIOS["cert-manager"])
    selfsigned = one(docs, "Issuer", f"{FULLNAME}-selfsigned")
    assert selfsigned["spec"] == {"selfSigned": {}}
    ca = one(docs, "Certificate", f"{FULLNAME}-ca")
    assert ca["spec"]["isCA"] is True
    assert ca["spec"]["issuerRef"]["name"] == f"{FULLNAME}-selfsigned"
    ca_issuer = one(docs, "Issuer", f"{FULLNAME}-ca")
    assert ca_issuer["spec"] == {"ca": {"secretName": ca["spec"]["secretName"]}}
    serving = one(docs, "Certificate", f"{FULLNAME}-tls")
    assert serving["spec"]["issuerRef"] == {"group": "cert-manager.io", "kind": "Issuer", "name": f"{FULLNAME}-ca"}
    assert serving["spec"]["dnsNames"] == [
        FULLNAME,
        f"{FULLNAME}.{NAMESPACE}",
        f"{FULLNAME}.{NAMESPACE}.svc",
        f"{FULLNAME}.{NAMESPACE}.svc.cluster.local",
    ]
    assert "isCA" not in serving["spec"]
    for doc in (selfsigned, ca, ca_issuer, serving):
        assert doc["metadata"]["namespace"] == NAMESPACE


def test_cert_manager_with_an_existing_issuer() -> None:
    docs = render(SCENARIOS["cert-manager-issuer"])
    assert not kinds(docs, "Issuer")
    serving = one(docs, "Certificate")
    assert serving["spec"]["issuerRef"] == {"group": "cert-manager.io", "kind": "ClusterIssuer", "name": "corp-ca"}


def test_image_tag_defaults_to_app_version() -> None:
    assert container(render())["image"] == "storage-affinity-webhook:0.1.0"
    digest = "sha256:" + "a" * 64
    assert (
        container(render({"image": {"repository": "r.example/saw", "digest": digest}}))["image"]
        == f"r.example/saw@{digest}"
    )


def test_openshift_leaves_the_ids_to_the_platform() -> None:
    """restricted-v2 refuses a pod that names a UID outside its namespace's range: `openshift: true` names no user,
    group or fsGroup, and keeps the rest of both security contexts (non-root, no escalation, no capabilities)."""
    docs = render({"openshift": True})
    pod = one(docs, "Deployment")["spec"]["template"]["spec"]
    assert not {"runAsUser", "runAsGroup", "fsGroup"} & set(pod["securityContext"])
    assert pod["securityContext"]["runAsNonRoot"] is True
    context = container(docs)["securityContext"]
    assert not {"runAsUser", "runAsGroup"} & set(context)
    assert context["readOnlyRootFilesystem"] is True and context["capabilities"] == {"drop": ["ALL"]}
    default = one(render(), "Deployment")["spec"]["template"]["spec"]
    assert default["securityContext"]["runAsUser"] == container(render())["securityContext"]["runAsUser"] == 65532
