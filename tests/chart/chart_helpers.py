"""Render and lint the chart with the real helm that scripts/install-helm.sh puts in .tools/ (never one on PATH)."""

from __future__ import annotations

import base64
import json
import subprocess
import tempfile
from functools import cache
from pathlib import Path
from typing import Any

import pytest

from testkit import yamldocs

ROOT = Path(__file__).resolve().parents[2]
CHART = ROOT / "charts" / "storage-affinity-webhook"
HELM = ROOT / ".tools" / "bin" / "helm"
RELEASE = "saw"
NAMESPACE = "storage-affinity"
FULLNAME = f"{RELEASE}-storage-affinity-webhook"

Manifest = dict[str, Any]


class HelmError(Exception):
    pass


def _helm(*args: str) -> subprocess.CompletedProcess[str]:
    if not HELM.exists():
        pytest.fail(f"helm is not installed at {HELM}: run scripts/install-helm.sh (make chart-test does)")
    return subprocess.run([str(HELM), *args], capture_output=True, text=True, timeout=120, check=False)


def _values_file(values: dict[str, Any]) -> str:
    handle = tempfile.NamedTemporaryFile("w", suffix=".yaml", prefix="values-", delete=False)  # noqa: SIM115
    with handle:
        json.dump(values, handle)
    return handle.name


@cache
def _render(values_json: str, namespace: str, release: str) -> tuple[Manifest, ...]:
    path = _values_file(json.loads(values_json))
    try:
        result = _helm("template", release, str(CHART), "--namespace", namespace, "-f", path)
    finally:
        Path(path).unlink()
    if result.returncode != 0:
        raise HelmError(result.stderr.strip())
    return tuple(doc for doc in yamldocs.load_all(result.stdout) if doc)


def render(values: dict[str, Any] | None = None, namespace: str = NAMESPACE, release: str = RELEASE) -> list[Manifest]:
    """The rendered manifests (fresh copies: tests may change them)."""
    docs = _render(json.dumps(values or {}, sort_keys=True), namespace, release)
    copies: list[Manifest] = json.loads(json.dumps(docs))
    return copies


def render_error(values: dict[str, Any], namespace: str = NAMESPACE) -> str:
    """The error helm reports for values that must not render."""
    with pytest.raises(HelmError) as info:
        _render(json.dumps(values, sort_keys=True), namespace, RELEASE)
    return str(info.value)


def notes(values: dict[str, Any]) -> str:
    """NOTES.txt as `helm install` prints it (a client-side dry run: no cluster)."""
    path = _values_file(values)
    try:
        result = _helm("install", RELEASE, str(CHART), "--namespace", NAMESPACE, "-f", path, "--dry-run=client")
    finally:
        Path(path).unlink()
    if result.returncode != 0:
        raise HelmError(result.stderr.strip())
    return result.stdout.partition("\nNOTES:\n")[2]


def lint(values: dict[str, Any]) -> subprocess.CompletedProcess[str]:
    path = _values_file(values)
    try:
        return _helm("lint", "--strict", str(CHART), "--namespace", NAMESPACE, "-f", path)
    finally:
        Path(path).unlink()


def one(docs: list[Manifest], kind: str, name: str | None = None) -> Manifest:
    found = [d for d in docs if d["kind"] == kind and (name is None or d["metadata"]["name"] == name)]
    assert len(found) == 1, f"expected one {kind} {name or ''}, found {[d['metadata']['name'] for d in found]}"
    return found[0]


def kinds(docs: list[Manifest], kind: str) -> list[Manifest]:
    return [d for d in docs if d["kind"] == kind]


def webhooks(docs: list[Manifest]) -> dict[str, dict[str, Any]]:
    """Every webhook of both configurations by name."""
    result: dict[str, dict[str, Any]] = {}
    for kind in ("MutatingWebhookConfiguration", "ValidatingWebhookConfiguration"):
        for hook in one(docs, kind)["webhooks"]:
            assert hook["name"] not in result
            result[hook["name"]] = hook
    return result


def container(docs: list[Manifest]) -> dict[str, Any]:
    (c,) = one(docs, "Deployment")["spec"]["template"]["spec"]["containers"]
    found: dict[str, Any] = c
    return found


#: The flags `serve` takes more than once (test_chart_transport.py reads them in order), and those without a value.
REPEATABLE = frozenset({"--client-name"})
SWITCHES = frozenset({"--metrics-namespaces"})


def args(docs: list[Manifest]) -> dict[str, str]:
    """The container's `--flag=value` arguments as a dict, but for the REPEATABLE ones; the first argument must be
    the `serve` command."""
    arguments = container(docs)["args"]
    assert arguments[0] == "serve"
    parsed = {}
    for arg in arguments[1:]:
        flag, sep, value = arg.partition("=")
        assert (sep or flag in SWITCHES) and flag.startswith("--"), arg
        if flag in REPEATABLE:
            continue
        assert flag not in parsed, f"{flag} given twice"
        parsed[flag] = value
    return parsed


CA_BUNDLE = base64.b64encode(b"-----BEGIN CERTIFICATE-----\nMIIBtest\n-----END CERTIFICATE-----\n").decode()
RUNBOOKS = "https://runbooks.example/storage-affinity-webhook/docs/runbooks.md"

#: Values that turn every monitoring object on (ServiceMonitor, PrometheusRule, dashboard ConfigMap).
MONITORING: dict[str, Any] = {
    "serviceMonitor": {"enabled": True},
    "prometheusRule": {"enabled": True, "runbookBaseUrl": RUNBOOKS},
    "dashboard": {"enabled": True},
}

# Every values combination the chart must render, lint and validate cleanly.
SCENARIOS: dict[str, dict[str, Any]] = {
    "default": {},
    "cert-manager": {"certificates": {"mode": "certManager"}},
    "cert-manager-issuer": {
        "certificates": {
            "mode": "certManager",
            "certManager": {"issuerRef": {"name": "corp-ca", "kind": "ClusterIssuer"}},
        }
    },
    "provided": {"certificates": {"mode": "provided", "provided": {"secretName": "my-tls", "caBundle": CA_BUNDLE}}},
    "service-ca": {"certificates": {"mode": "serviceCA"}, "openshift": True},
    "replicas-1": {"replicaCount": 1},
    "replicas-3": {"replicaCount": 3},
    "excluded-namespaces": {
        "webhook": {"excludedNamespaces": ["velero", "volsync-system"]},
        "policy": {"excludedNamespaces": ["team-a"]},
    },
    "hpa": {"autoscaling": {"enabled": True, "minReplicas": 3, "maxReplicas": 6}},
    "velero-source": {
        "policy": {"loadAffinitySource": {"configMap": {"namespace": "velero", "name": "node-agent-config"}}}
    },
    "custom-port": {"server": {"port": 9443}, "preStopSleepSeconds": 0},
    # Only the API server asks: its client CA, and the NetworkPolicy (the Kubernetes schema checks it).
    "client-ca": {"clientCA": {"configMap": "apiserver-client-ca", "names": ["kube-apiserver"]}},
    "client-ca-secret": {
        "clientCA": {
            "secret": "apiserver-client-ca",
            "key": "tls-ca.pem",
            "names": ["kube-apiserver", "apiserver.internal"],
        }
    },
    "network-policy": {
        "networkPolicy": {
            "enabled": True,
            "webhookFrom": [
                {"ipBlock": {"cidr": "10.0.0.0/24"}},
                {
                    "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "kube-system"}},
                    "podSelector": {"matchLabels": {"component": "kube-apiserver"}},
                },
            ],
            "metrics": {
                "namespace": "monitoring",
                "podSelector": {"matchLabels": {"app.kubernetes.io/name": "prometheus"}},
            },
        }
    },
    # The monitoring objects in every certificate mode: the ServiceMonitor's CA comes from a different place in each.
    "monitoring": {"monitoring": MONITORING},
    "monitoring-cert-manager": {"certificates": {"mode": "certManager"}, "monitoring": MONITORING},
    "monitoring-provided": {
        "certificates": {"mode": "provided", "provided": {"secretName": "my-tls", "caBundle": CA_BUNDLE}},
        "monitoring": MONITORING,
    },
}
