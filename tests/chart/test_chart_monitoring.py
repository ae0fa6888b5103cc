"""The monitoring objects: opt-in, valid against the Prometheus Operator's CRD schemas, wired to the Service and
its certificate in every certificate mode, the dashboard ConfigMap carrying the chart's dashboard file, and for
every alert a runbook section and a row of docs/operations.md's table of alerts (and neither for another).

Lint and the Kubernetes 1.30 schemas run over the `monitoring*` scenarios with every other one
(test_chart_render.py); the alerts' behaviour is in test_monitoring_promtool.py and test_monitoring_prometheus.py.
"""

from __future__ import annotations

import base64
import json
import re
from functools import cache
from types import ModuleType
from typing import Any

import pydantic
import pytest

from certs.issue import service_dns_names
from tests.chart.chart_helpers import (
    CA_BUNDLE,
    FULLNAME,
    MONITORING,
    NAMESPACE,
    RUNBOOKS,
    SCENARIOS,
    Manifest,
    args,
    kinds,
    notes,
    one,
    render,
    render_error,
)
from tests.chart.monitoring_helpers import (
    OPERATIONS_DOC,
    RUNBOOKS_DOC,
    alerts,
    dashboard,
    fill,
    github_anchor,
    metric_names,
    panels,
    rule_groups,
)
from tests.support import merged

MONITORING_SCENARIOS = sorted(name for name in SCENARIOS if name.startswith("monitoring"))
DASHBOARD_CONFIGMAP = f"{FULLNAME}-dashboard"
SERVER_NAME = f"{FULLNAME}.{NAMESPACE}.svc"


@cache
def _operator_models() -> ModuleType:
    """Models generated from the Prometheus Operator's CRDs (openAPIV3Schema: types, enums, patterns, required);
    slow to import, so only when a test needs them."""
    from cloudcoil.models.prometheus_operator import v1

    return v1


def _check_against_crd(doc: Manifest) -> None:
    """Valid for the CRD, and no field the CRD does not have: the models drop unknown fields, so a round trip that
    changes the object names them."""
    model = getattr(_operator_models(), doc["kind"]).model_validate(doc)
    assert model.model_dump(by_alias=True, exclude_unset=True, mode="json") == doc


def _monitoring_docs(docs: list[Manifest]) -> list[Manifest]:
    return [d for d in docs if d["apiVersion"] == "monitoring.coreos.com/v1"]


@pytest.mark.parametrize("name", MONITORING_SCENARIOS)
def test_operator_objects_are_valid_for_the_crds(name: str) -> None:
    docs = _monitoring_docs(render(SCENARIOS[name]))
    assert sorted(d["kind"] for d in docs) == ["PrometheusRule", "ServiceMonitor"]
    for doc in docs:
        _check_against_crd(doc)


@pytest.mark.parametrize(
    ("kind", "path", "value"),
    [
        ("ServiceMonitor", ("spec", "endpoints", 0, "schem"), "https"),  # unknown field
        ("ServiceMonitor", ("spec", "endpoints", 0, "scheme"), "tls"),  # not in the enum
        ("ServiceMonitor", ("spec", "endpoints", 0, "interval"), "30 seconds"),  # not a duration
        ("PrometheusRule", ("spec", "groups", 0, "rules", 0, "for"), "15 minutes"),
        ("PrometheusRule", ("spec", "groups", 0, "rules", 0, "annotation"), {}),
    ],
)
def test_crd_check_is_real(kind: str, path: tuple[str | int, ...], value: object) -> None:
    doc = one(render(SCENARIOS["monitoring"]), kind)
    node: Any = doc
    for step in path[:-1]:
        node = node[step]
    node[path[-1]] = value
    with pytest.raises((AssertionError, pydantic.ValidationError)):
        _check_against_crd(doc)


def test_monitoring_is_opt_in() -> None:
    default = render()
    assert not _monitoring_docs(default)
    assert [d["metadata"]["name"] for d in kinds(default, "ConfigMap")] == ["storage-affinity-policy"]
    for key, expected in [
        ("serviceMonitor", {("ServiceMonitor", FULLNAME)}),
        ("prometheusRule", {("PrometheusRule", FULLNAME)}),
        ("dashboard", {("ConfigMap", DASHBOARD_CONFIGMAP)}),
    ]:
        docs = render({"monitoring": {key: MONITORING[key]}})
        added = {(d["kind"], d["metadata"]["name"]) for d in docs} - {
            (d["kind"], d["metadata"]["name"]) for d in default
        }
        assert added == expected, key


@pytest.mark.parametrize("name", MONITORING_SCENARIOS)
def test_service_monitor_scrapes_the_service_port_over_https(name: str) -> None:
    docs = render(SCENARIOS[name])
    monitor, service = one(docs, "ServiceMonitor"), one(docs, "Service")
    assert monitor["metadata"]["namespace"] == NAMESPACE
    assert monitor["spec"]["namespaceSelector"] == {"matchNames": [NAMESPACE]}
    assert monitor["spec"]["selector"]["matchLabels"].items() <= service["metadata"]["labels"].items()
    (endpoint,) = monitor["spec"]["endpoints"]
    assert endpoint["port"] in {p["name"] for p in service["spec"]["ports"]}
    assert (endpoint["scheme"], endpoint["path"]) == ("https", "/metrics")
    # the webhook's `endpoint` and audit `namespace` labels must survive the target labels of the same name
    assert endpoint["honorLabels"] is True
    assert "insecureSkipVerify" not in endpoint["tlsConfig"]


@pytest.mark.parametrize("name", MONITORING_SCENARIOS)
def test_service_monitor_verifies_the_certificate_by_the_service_name(name: str) -> None:
    docs = render(SCENARIOS[name])
    tls = one(docs, "ServiceMonitor")["spec"]["endpoints"][0]["tlsConfig"]
    assert tls["serverName"] == SERVER_NAME
    mode = SCENARIOS[name].get("certificates", {}).get("mode", "self")
    if mode == "self":  # the server issues its certificate for --service in --namespace and keeps it in the Secret
        flags = args(docs)
        assert SERVER_NAME in service_dns_names(flags["--service"], flags["--namespace"])
        assert tls["ca"] == {"secret": {"name": flags["--cert-secret"], "key": "ca.crt"}}
    elif mode == "certManager":
        certificate = one(docs, "Certificate", f"{FULLNAME}-tls")
        assert SERVER_NAME in certificate["spec"]["dnsNames"]
        assert tls["ca"] == {"secret": {"name": certificate["spec"]["secretName"], "key": "ca.crt"}}
    else:
        assert tls["ca"] == {"configMap": {"name": f"{FULLNAME}-metrics-ca", "key": "ca.crt"}}
        ca = one(docs, "ConfigMap", f"{FULLNAME}-metrics-ca")
        assert ca["data"]["ca.crt"].strip() == base64.b64decode(CA_BUNDLE).decode().strip()


def test_service_monitor_values() -> None:
    values = {
        "certificates": SCENARIOS["monitoring-provided"]["certificates"],
        "monitoring": {
            "serviceMonitor": {
                "enabled": True,
                "labels": {"release": "kube-prometheus-stack"},
                "interval": "15s",
                "scrapeTimeout": "5s",
                "tlsConfig": {"ca": {"secret": {"name": "corp-ca", "key": "bundle.pem"}}, "serverName": "x.y.svc"},
                "relabelings": [{"action": "replace", "targetLabel": "cluster", "replacement": "east"}],
                "metricRelabelings": [{"action": "labeldrop", "regex": "operation"}],
            }
        },
    }
    docs = render(values)
    monitor = one(docs, "ServiceMonitor")
    _check_against_crd(monitor)
    assert monitor["metadata"]["labels"]["release"] == "kube-prometheus-stack"
    (endpoint,) = monitor["spec"]["endpoints"]
    assert (endpoint["interval"], endpoint["scrapeTimeout"]) == ("15s", "5s")
    assert endpoint["tlsConfig"] == values["monitoring"]["serviceMonitor"]["tlsConfig"]  # replaced whole
    assert endpoint["relabelings"] == values["monitoring"]["serviceMonitor"]["relabelings"]
    assert endpoint["metricRelabelings"] == values["monitoring"]["serviceMonitor"]["metricRelabelings"]
    assert not [d for d in kinds(docs, "ConfigMap") if d["metadata"]["name"].endswith("-metrics-ca")]


def test_prometheus_rule_values() -> None:
    values = {
        "webhook": {"timeoutSeconds": 10},
        "monitoring": {
            "prometheusRule": {
                "labels": {"release": "kube-prometheus-stack"},
                "alertLabels": {"team": "storage"},
                "certificateExpiryDays": 3,
                "latencyTimeoutRatio": 0.5,
            }
        },
    }
    docs = render(merged({"monitoring": MONITORING}, values))
    rule = one(docs, "PrometheusRule")
    assert rule["metadata"]["labels"]["release"] == "kube-prometheus-stack"
    rules = alerts(rule["spec"]["groups"])
    assert all(r["labels"]["team"] == "storage" and r["labels"]["severity"] for r in rules.values())
    assert rules["StorageAffinityWebhookCertificateExpiring"]["expr"].endswith("< 3 * 86400")
    assert rules["StorageAffinityWebhookLatencyNearTimeout"]["expr"].endswith("> 0.5 * 10")


@pytest.mark.parametrize(
    ("values", "where"),
    [
        ({"serviceMonitor": {"interval": "30 seconds"}}, "/monitoring/serviceMonitor/interval"),
        ({"serviceMonitor": {"intervall": "30s"}}, "additional properties 'intervall' not allowed"),
        ({"prometheusRule": {"latencyTimeoutRatio": 1.5}}, "/monitoring/prometheusRule/latencyTimeoutRatio"),
        ({"prometheusRule": {"certificateExpiryDays": 0}}, "/monitoring/prometheusRule/certificateExpiryDays"),
        ({"prometheusRule": {"runbookBaseUrl": "runbooks.md"}}, "/monitoring/prometheusRule/runbookBaseUrl"),
        ({"dashboard": {"namespace": "Grafana_NS"}}, "/monitoring/dashboard/namespace"),
        ({"dashboard": {"labels": {"grafana_dashboard": 1}}}, "/monitoring/dashboard/labels/grafana_dashboard"),
    ],
)
def test_schema_rejects(values: dict[str, Any], where: str) -> None:
    assert where in render_error({"monitoring": values})


def _runbook_sections() -> dict[str, str]:
    """Level-2 sections of docs/runbooks.md by GitHub anchor."""
    sections: dict[str, str] = {}
    for block in re.split(r"^## ", RUNBOOKS_DOC.read_text(), flags=re.M)[1:]:
        heading, _, body = block.partition("\n")
        sections[github_anchor(heading)] = body
    return sections


#: Sections of docs/runbooks.md that several alerts' runbooks share: not an alert's, and linked from each of them.
SHARED_RUNBOOKS = {"the-webhook-is-down-or-failing-open": ("StorageAffinityWebhookDown",
                   "StorageAffinityWebhookFailingOpen", "StorageAffinityWebhookClientCertificateRefused")}  # fmt: skip


def test_every_alert_links_its_runbook_section() -> None:
    sections = _runbook_sections()
    rules = alerts(rule_groups())
    assert sorted({github_anchor(name) for name in rules} - set(sections)) == [], "alerts without a runbook"
    for name, rule in rules.items():
        base, _, anchor = rule["annotations"]["runbook_url"].partition("#")
        assert base == RUNBOOKS
        assert anchor == github_anchor(name), name
        parts = re.findall(r"^### (.+)$", sections[anchor], flags=re.M)
        assert parts == ["What it means", "How to check", "What to do"], name
    assert set(sections) - set(SHARED_RUNBOOKS) == {github_anchor(name) for name in rules}, (
        "a runbook for an alert that does not exist"
    )
    for shared, names in SHARED_RUNBOOKS.items():
        assert sections[shared].strip(), shared
        for name in names:
            assert f"(#{shared})" in sections[github_anchor(name)], f"{name} does not point to {shared}"


ALERTS_TABLE_HEADER = ["Alert", "Fires when", "For", "Severity"]


def alerts_table(text: str) -> dict[str, dict[str, str]]:
    """The rows of the Markdown table of alerts (the one headed ALERTS_TABLE_HEADER), by the alert they name."""
    lines = iter(line.strip() for line in text.splitlines())
    for line in lines:
        if _cells(line) == ALERTS_TABLE_HEADER:
            break
    else:
        pytest.fail(f"no table headed {ALERTS_TABLE_HEADER}")
    rows: dict[str, dict[str, str]] = {}
    for line in lines:
        if not line.startswith("|"):
            break
        cells = dict(zip(ALERTS_TABLE_HEADER, _cells(line), strict=True))
        if set(cells["Alert"]) <= set("-:"):
            continue  # the alignment row
        name = cells["Alert"].strip("`")
        assert name not in rows, f"{name} twice in the table of alerts"
        rows[name] = cells
    return rows


def _cells(line: str) -> list[str]:
    """A table row's cells (a pipe escaped as `\\|` stays in its cell)."""
    return [cell.strip() for cell in re.split(r"(?<!\\)\|", line.strip().removeprefix("|").removesuffix("|"))]


def test_the_operations_table_lists_every_alert_and_no_other() -> None:
    """docs/operations.md's table and the PrometheusRule name the same alerts, each with its `for` and severity
    (the runbooks, the same way: test_every_alert_links_its_runbook_section)."""
    rows = alerts_table(OPERATIONS_DOC.read_text())
    rules = alerts(rule_groups())
    assert sorted(set(rules) - set(rows)) == [], "alerts missing from docs/operations.md's table"
    assert sorted(set(rows) - set(rules)) == [], "docs/operations.md's table lists alerts the PrometheusRule lacks"
    for name, rule in rules.items():
        assert (rows[name]["For"], rows[name]["Severity"]) == (rule["for"], rule["labels"]["severity"]), name


def test_the_table_reader_takes_the_rows_under_the_header_only() -> None:
    header = "| Alert | Fires when | For | Severity |\n|---|---|---|---|\n"
    text = (
        "| Other | table |\n\n  "
        + header
        + "  | `A` | x \\| y | 5m | warning |\n| `B` | z | 1m | info |\n\nOr | not |\n"
    )
    assert alerts_table(text) == {
        "A": {"Alert": "`A`", "Fires when": "x \\| y", "For": "5m", "Severity": "warning"},
        "B": {"Alert": "`B`", "Fires when": "z", "For": "1m", "Severity": "info"},
    }


def test_alerts_carry_summary_and_description() -> None:
    for name, rule in alerts(rule_groups()).items():
        assert set(rule["annotations"]) == {"summary", "description", "runbook_url"}, name
        assert rule["labels"]["severity"] in {"critical", "warning", "info"}, name
        assert rule["for"], name


def test_dashboard_configmap_carries_the_dashboard_file() -> None:
    config_map = one(render(SCENARIOS["monitoring"]), "ConfigMap", DASHBOARD_CONFIGMAP)
    assert config_map["metadata"]["namespace"] == NAMESPACE
    assert config_map["metadata"]["labels"]["grafana_dashboard"] == "1"
    assert list(config_map["data"]) == ["storage-affinity-webhook.json"]
    assert json.loads(config_map["data"]["storage-affinity-webhook.json"]) == dashboard()


def test_dashboard_configmap_values() -> None:
    values = {
        "monitoring": {
            "dashboard": {
                "enabled": True,
                "namespace": "grafana",
                "labels": {"dashboards": "storage", "grafana_dashboard": None},
                "annotations": {"grafana_folder": "Storage"},
            }
        }
    }
    config_map = one(render(values), "ConfigMap", DASHBOARD_CONFIGMAP)
    assert config_map["metadata"]["namespace"] == "grafana"
    assert config_map["metadata"]["labels"]["dashboards"] == "storage"
    assert "grafana_dashboard" not in config_map["metadata"]["labels"]  # Helm drops a default set to null
    assert config_map["metadata"]["annotations"] == {"grafana_folder": "Storage"}


def test_dashboard_is_well_formed() -> None:
    board = dashboard()
    assert board["uid"] == "storage-affinity-webhook"
    variables = {v["name"]: v for v in board["templating"]["list"]}
    assert variables["datasource"]["type"] == "datasource"
    assert variables["datasource"]["query"] == "prometheus"
    all_panels = panels(board)
    ids = [p["id"] for p in all_panels]
    assert len(ids) == len(set(ids))
    cells: set[tuple[int, int]] = set()
    for panel in all_panels:
        grid = panel["gridPos"]
        assert grid["x"] + grid["w"] <= 24, panel["title"]
        area = {
            (x, y) for x in range(grid["x"], grid["x"] + grid["w"]) for y in range(grid["y"], grid["y"] + grid["h"])
        }
        assert not area & cells, f"panel '{panel['title']}' overlaps another"
        cells |= area
        if panel["type"] == "row":
            continue
        assert panel["datasource"] == {"type": "prometheus", "uid": "${datasource}"}
        assert panel["targets"], panel["title"]
        refs = [t["refId"] for t in panel["targets"]]
        assert len(refs) == len(set(refs)), panel["title"]
        for target in panel["targets"]:
            assert target["datasource"] == panel["datasource"]
            metric_names(fill(target["expr"], "saw"))  # parses, with literal metric names


def test_dashboard_shows_what_operators_watch() -> None:
    used = {
        name
        for panel in panels(dashboard())
        for t in panel.get("targets", [])
        for name in metric_names(fill(t["expr"], "saw"))
    }
    assert used >= {
        "storage_affinity_admission_requests_total",  # admission rate and outcomes per endpoint
        "storage_affinity_admission_duration_seconds_bucket",  # latency percentiles
        "storage_affinity_lookup_failures_total",
        "storage_affinity_cache_age_seconds",
        "storage_affinity_certificate_expiry_timestamp_seconds",
        "storage_affinity_audit_findings",
        "storage_affinity_audit_stuck_pods",  # stuck storage pods by cause
        "storage_affinity_audit_failed_pods",  # storage pods that ended Failed, by cause
        "storage_affinity_admission_decisions_total",  # what admission decided, per rule family
        "up",  # an outage: no replica up
        "apiserver_admission_webhook_fail_open_count",  # an outage seen by kube-apiserver
        "storage_affinity_client_certificate_refused_total",  # every review failing open on a 403
    }


def test_notes_name_the_monitoring_objects() -> None:
    text = notes(SCENARIOS["monitoring"])
    assert f"ServiceMonitor {NAMESPACE}/{FULLNAME} scrapes /metrics over HTTPS" in text
    assert f"{RUNBOOKS}\n" in text
    assert f"ConfigMap {NAMESPACE}/{DASHBOARD_CONFIGMAP}" in text
    assert "5. Monitoring: /metrics is served over HTTPS" in notes({})


@pytest.mark.parametrize("on", [False, True])
def test_namespace_labels_on_the_findings_only_when_asked(on: bool) -> None:
    """/metrics needs no certificate: the audit's findings name namespaces only with `monitoring.namespaceLabels`
    (serve --metrics-namespaces), and the findings alert speaks of a namespace only then."""
    values = {"monitoring": {"namespaceLabels": on}}
    (server,) = one(render(values), "Deployment", FULLNAME)["spec"]["template"]["spec"]["containers"]
    assert ("--metrics-namespaces" in server["args"]) is on
    (rule,) = [
        r for g in rule_groups(values) for r in g["rules"] if r.get("alert") == "StorageAffinityWebhookAuditFindings"
    ]
    assert ("in namespace {{ $labels.namespace }}" in rule["annotations"]["description"]) is on
