"""A real Prometheus (Debian's `prometheus`) scrapes the real server over TLS the way the chart's ServiceMonitor
tells the Prometheus Operator to, with the chart's alert rules loaded; then every dashboard and alert expression
is run against what it scraped.

The server runs in live mode against the fake API server (testkit/fakeapi/) and is driven so that every
metric a panel or an alert uses has samples, and every alert that can be provoked is: reviews with each outcome, a
refused body, lookups the API answers with 500, a refused policy ConfigMap, a serving certificate that expires in
3 days, and at the end the API going away (watches cut: cache not synced). A stand-in for kube-apiserver's metrics
endpoint, scraped as kube-prometheus scrapes the real one (job `apiserver`), counts this chart's mutating webhook
failing open, one more each scrape. The latency alert is left to the
promtool unit tests: it would need reviews slower than 4 s.
"""

from __future__ import annotations

import contextlib
import http.server
import itertools
import math
import subprocess
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any, TypeVar

import promql_parser
import pytest
import requests
import yaml

from certs.files import write_bundle
from certs.issue import issue_ca, issue_serving
from testkit.fakeapi import FakeKubeAPI, Request, running_fake_api
from testkit.server import Server, free_port, running_server
from tests.chart.chart_helpers import MONITORING, one, render
from tests.chart.monitoring_helpers import (
    EXTERNAL_METRICS,
    Query,
    alert_queries,
    alerts,
    dashboard,
    dashboard_queries,
    metric_names,
    selectors,
    tool,
    variable_queries,
    write_rules,
)
from tests.hardening.hostile import encode, review
from tests.state.objects import node, pod, policy_map, pv, pvc, storage_class
from tests.support import EXAMPLES, load_yaml

pytestmark = pytest.mark.e2e

T = TypeVar("T")

# The names `running_server` serves under: the chart rendered with them gives the ServiceMonitor the TLS server name
# saw.saw-system.svc, which the test's certificate carries as the chart's certificate modes do.
SERVICE, NAMESPACE = "saw", "saw-system"
JOB = SERVICE  # the Prometheus Operator's job label: the Service name
#: With the audit's findings labelled by namespace, so that the findings alert names the namespace it found them in
#: (the default, one series per family, is tests/webhook/test_auditloop.py's).
VALUES: dict[str, Any] = {"fullnameOverride": SERVICE, "monitoring": {**MONITORING, "namespaceLabels": True}}
AUDIT_FINDINGS = "storage_affinity_audit_findings"
LATENCY_ALERT = "StorageAffinityWebhookLatencyNearTimeout"
DEADLINE = 45.0  # seconds for any one thing Prometheus must see; it scrapes and evaluates every second
_names = itertools.count()


def _latency_threshold(groups: list[dict[str, Any]]) -> float:
    """The seconds of `... > 0.8 * 5` ending the latency alert's expression."""
    ratio, _, timeout = alerts(groups)[LATENCY_ALERT]["expr"].rpartition(" > ")[2].partition(" * ")
    return float(ratio) * float(timeout)


GROUPS = one(render(VALUES, namespace=NAMESPACE), "PrometheusRule")["spec"]["groups"]
_BOARD = dashboard()
ALL_QUERIES = [*dashboard_queries(_BOARD, JOB), *variable_queries(_BOARD), *alert_queries(GROUPS)]
NAMED = [pytest.param(q, id=q.where) for q in ALL_QUERIES]
PANELS = [pytest.param(q, id=q.where) for q in dashboard_queries(_BOARD, JOB)]
ALERTS = [pytest.param(q, id=q.where) for q in alert_queries(GROUPS)]


@dataclass
class Scraped:
    """The running Prometheus and what the test sent the server."""

    url: str
    server: Server
    exposition: str = ""

    def get(self, path: str, **params: Any) -> Any:
        answer = requests.get(self.url + path, params=params, timeout=10)
        body = answer.json()
        assert answer.status_code == 200 and body["status"] == "success", f"{path} {params}: {body}"
        return body["data"]

    def query(self, expr: str) -> list[dict[str, Any]]:
        result = self.get("/api/v1/query", query=expr)["result"]
        return result if isinstance(result, list) else [result]

    def series(self, selector: str) -> list[dict[str, str]]:
        found: list[dict[str, str]] = self.get("/api/v1/series", **{"match[]": selector})
        return found

    def active_alerts(self, name: str) -> list[dict[str, Any]]:
        return [a for a in self.get("/api/v1/alerts")["alerts"] if a["labels"]["alertname"] == name]


def until(check: Callable[[], T], what: str, deadline: float = DEADLINE) -> T:
    """The first truthy result of `check`, polled until `deadline` seconds have passed."""
    end = time.monotonic() + deadline
    while True:
        result = check()
        if result:
            return result
        assert time.monotonic() < end, f"not within {deadline:g} s: {what}"
        time.sleep(0.25)


def _certificates(out: Path) -> Path:
    """The project's CA and a serving certificate for the Service, expiring in 3 days."""
    ca = issue_ca()
    write_bundle(out, ca, issue_serving(ca, SERVICE, NAMESPACE, validity=timedelta(days=3)))
    return out


def _scrape_config(monitor: dict[str, Any], target: str, ca: Path, job: str, server_name: str) -> dict[str, Any]:
    """The scrape job the Prometheus Operator makes of the ServiceMonitor's endpoint, with the target labels it
    adds (namespace, service, pod, container, and endpoint = the port name), scraping every second."""
    (endpoint,) = monitor["spec"]["endpoints"]
    return {
        "job_name": job,
        "scheme": endpoint["scheme"],
        "metrics_path": endpoint["path"],
        "honor_labels": endpoint["honorLabels"],
        "scrape_interval": "1s",
        "scrape_timeout": "1s",
        "tls_config": {"ca_file": str(ca), "server_name": server_name},
        "static_configs": [
            {
                "targets": [target],
                "labels": {
                    "namespace": NAMESPACE,
                    "service": SERVICE,
                    "pod": f"{SERVICE}-0",
                    "container": "webhook",
                    "endpoint": endpoint["port"],
                },
            }
        ],
    }


FAIL_OPEN = "apiserver_admission_webhook_fail_open_count"


@contextlib.contextmanager
def fake_apiserver_metrics() -> Iterator[str]:
    """kube-apiserver's /metrics as far as the alerts read it: the fail-open count of this chart's mutating webhook,
    one more at each scrape; its host:port."""
    scrapes = itertools.count(1)

    class Metrics(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            body = (
                f"# HELP {FAIL_OPEN} Admission webhook fail open count.\n# TYPE {FAIL_OPEN} counter\n"
                f'{FAIL_OPEN}{{name="mutate.storage-affinity.io",type="admit"}} {next(scrapes)}\n'
            ).encode()
            self.send_response(200)
            self.send_header("Content-Type", "text/plain; version=0.0.4")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: Any) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Metrics)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


@contextlib.contextmanager
def running_prometheus(tmp: Path, config: dict[str, Any]) -> Iterator[str]:
    """Prometheus on a free loopback port with its own storage; its URL."""
    tmp.mkdir()
    (tmp / "prometheus.yml").write_text(yaml.safe_dump(config, sort_keys=False))
    port = free_port()
    log = tmp / "prometheus.log"
    command = [
        tool("prometheus"),
        f"--config.file={tmp / 'prometheus.yml'}",
        f"--storage.tsdb.path={tmp / 'data'}",
        f"--web.listen-address=127.0.0.1:{port}",
        "--log.level=warn",
    ]
    with log.open("wb") as out:
        process = subprocess.Popen(command, cwd=tmp, stdout=out, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"

    def ready() -> bool:
        assert process.poll() is None, f"prometheus exited: {log.read_text()[-3000:]}"
        with contextlib.suppress(requests.RequestException):
            return requests.get(url + "/-/ready", timeout=1).status_code == 200
        return False

    try:
        until(ready, "Prometheus ready")
        yield url
    finally:
        process.terminate()
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            process.kill()


def _mover(claim: str) -> dict[str, Any]:
    obj = pod(f"mover-{next(_names)}", claim, phase="Pending")
    obj["metadata"]["labels"] = {"app.kubernetes.io/created-by": "volsync"}
    del obj["status"]
    return obj


def _contradiction(namespace: str) -> dict[str, Any]:
    """A pod whose csi-baremetal disk annotations contradict each other: denied by /validate, found by the audit."""
    obj: dict[str, Any] = load_yaml(EXAMPLES / "disk-contradiction-pod.yaml")
    obj["metadata"]["namespace"] = namespace
    return obj


def _named_pvc_get(r: Request) -> bool:
    return r.method == "GET" and not r.watch and "/persistentvolumeclaims/" in r.path


def _drive(scraped: Scraped, api: FakeKubeAPI, session: requests.Session) -> None:
    """Send what makes every metric of the dashboard and the alerts move, checking each answer."""
    server = scraped.server

    def ask(path: str, obj: dict[str, Any]) -> dict[str, Any]:
        answer = session.post(server.url + path, data=encode(review(obj)), timeout=10)
        assert answer.status_code == 200, answer.text
        response: dict[str, Any] = answer.json()["response"]
        return response

    ask("/mutate", _mover("data"))
    ask("/mutate", pod(f"plain-{next(_names)}", None, phase="Pending"))
    assert ask("/validate", pod(f"plain-{next(_names)}", None, phase="Pending"))["allowed"] is True
    assert ask("/validate", _contradiction("shop"))["allowed"] is False
    assert session.post(server.url + "/validate", data=b"{not json", timeout=10).status_code == 400

    api.fail(500, _named_pvc_get)  # a claim the cache has not seen must be read, and that read fails
    try:
        for round_ in range(2):  # a counter's first sample is no increase: fail again once Prometheus has it
            for _ in range(3):
                answer = ask("/mutate", _mover(f"unseen-{next(_names)}"))
                assert "lookup-failure" in answer["auditAnnotations"], answer
            if round_ == 0:
                until(lambda: scraped.query("storage_affinity_lookup_failures_total"), "the lookup failures scraped")
    finally:
        api.fail(None)
    until(lambda: scraped.query("sum(rate(storage_affinity_lookup_failures_total[1m])) > 0"), "lookup failures rising")
    until(lambda: scraped.query('storage_affinity_admission_requests_total{outcome="denied"}'), "a denial scraped")
    until(lambda: scraped.query("storage_affinity_bad_requests_total"), "a refused body scraped")
    until(lambda: scraped.query("storage_affinity_certificate_expiry_timestamp_seconds > 0"), "the certificate read")
    until(lambda: scraped.query(f"{AUDIT_FINDINGS} > 0"), "the audit's findings scraped")
    scraped.exposition = session.get(server.url + "/metrics", timeout=10).text

    api.stop()  # every watch is cut and cannot reconnect
    until(lambda: scraped.query("storage_affinity_cache_synced == 0"), "a watch cut scraped")


@pytest.fixture(scope="module")
def scraped(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Scraped]:
    tmp = tmp_path_factory.mktemp("prometheus")
    certs = _certificates(tmp / "certs")
    docs = render(VALUES, namespace=NAMESPACE)
    monitor = one(docs, "ServiceMonitor")
    tls = monitor["spec"]["endpoints"][0]["tlsConfig"]
    # the CA is key ca.crt of the certificate Secret: the ca.crt written beside tls.crt here
    assert tls["ca"] == {"secret": {"name": f"{SERVICE}-tls", "key": "ca.crt"}}
    rules = write_rules(tmp / "rules.yaml", one(docs, "PrometheusRule")["spec"]["groups"])
    seed = [
        node("n1"),
        node("n2"),
        storage_class("fast"),
        pvc("data"),
        pv("pv-data"),
        pod("db-0", node="n1"),
        # a loadAffinity entry on nodes without a Velero node-agent: the audit publishes its node counts
        policy_map(
            "coScheduling: {placement: nodeName}\n"
            "loadAffinity: [{nodeSelector: {matchExpressions: [{key: kubernetes.io/os, operator: DoesNotExist}]}}]\n",
            namespace=NAMESPACE,
        ),
        _contradiction("team-a"),  # for the audit
    ]
    (server_container,) = one(docs, "Deployment")["spec"]["template"]["spec"]["containers"]
    audit = ("--audit-interval", "1", *(a for a in server_container["args"] if a == "--metrics-namespaces"))
    with running_fake_api(*seed) as api:
        kubeconfig = api.write_kubeconfig(tmp / "kubeconfig")
        args = ("--kubeconfig", str(kubeconfig), "--lookup-timeout", "0.5", *audit)
        with (
            running_server(tmp, *args, certs=certs) as server,
            server.session() as session,
            fake_apiserver_metrics() as apiserver,
        ):
            # a policy change refused (not a placement): the last good policy stays in effect
            api.update(policy_map("coScheduling: {placement: somewhere}\n", namespace=NAMESPACE))
            target = server.url.removeprefix("https://").replace("localhost", "127.0.0.1")
            config = {
                "global": {"scrape_interval": "1s", "evaluation_interval": "1s"},
                "rule_files": [str(rules)],
                "scrape_configs": [
                    _scrape_config(monitor, target, certs / "ca.crt", JOB, tls["serverName"]),
                    {"job_name": "apiserver", "scrape_interval": "1s", "static_configs": [{"targets": [apiserver]}]},
                    # the same target under a name its certificate does not carry: must not be scraped
                    _scrape_config(monitor, target, certs / "ca.crt", "wrong-name", f"other.{NAMESPACE}.svc"),
                ],
            }
            with running_prometheus(tmp / "prometheus", config) as url:
                result = Scraped(url, server)
                until(lambda: result.query(f'up{{job="{JOB}"}} == 1'), "the first scrape of the webhook")
                _drive(result, api, session)
                yield result


def _exported(exposition: str) -> set[str]:
    """The sample names of every metric family the exposition declares (its TYPE lines)."""
    names: set[str] = set()
    for line in exposition.splitlines():
        if line.startswith("# TYPE "):
            _, _, name, kind = line.split()
            suffixes = {"histogram": ("_bucket", "_sum", "_count"), "summary": ("", "_sum", "_count")}
            names.update(name + s for s in suffixes.get(kind, ("",)))
    return names


def test_scrape_verifies_the_certificate_by_the_service_name(scraped: Scraped) -> None:
    def targets() -> dict[str, dict[str, Any]]:
        found = {t["labels"]["job"]: t for t in scraped.get("/api/v1/targets")["activeTargets"]}
        return found if found["wrong-name"]["health"] != "unknown" else {}

    found = until(targets, "a scrape of the wrong-name job")
    assert found[JOB]["health"] == "up", found[JOB]["lastError"]
    assert found["wrong-name"]["health"] == "down"
    assert "certificate is valid for" in found["wrong-name"]["lastError"]


@pytest.mark.parametrize("query", NAMED)
def test_expression_names_only_metrics_the_webhook_exports(scraped: Scraped, query: Query) -> None:
    assert metric_names(query.expr) - {"up"} <= _exported(scraped.exposition) | {FAIL_OPEN}, query.expr
    assert metric_names(query.expr) - _exported(scraped.exposition) <= set(EXTERNAL_METRICS), query.expr


@pytest.mark.parametrize("query", NAMED)
def test_every_selector_matches_scraped_series(scraped: Scraped, query: Query) -> None:
    for selector in selectors(query.expr):
        assert scraped.series(selector), f"{selector} matches nothing in {query.expr}"


@pytest.mark.parametrize("query", PANELS)
def test_dashboard_query_returns_data(scraped: Scraped, query: Query) -> None:
    assert scraped.query(query.expr), query.expr


@pytest.mark.parametrize("query", ALERTS)
def test_alert_watches_series_that_exist(scraped: Scraped, query: Query) -> None:
    # Without its threshold the expression must return something: the alert is looking at live series.
    expr = promql_parser.parse(query.expr)
    assert isinstance(expr, promql_parser.BinaryExpr) and str(expr.op) in {">", "<", "=="}, query.expr
    assert scraped.query(str(expr.lhs)), str(expr.lhs)


def test_rules_load_and_evaluate_without_errors(scraped: Scraped) -> None:
    def evaluated() -> list[dict[str, Any]]:
        rules = [r for g in scraped.get("/api/v1/rules")["groups"] for r in g["rules"]]
        return rules if all(r["health"] != "unknown" for r in rules) else []

    rules = until(evaluated, "every rule evaluated")
    assert {r["name"] for r in rules} == set(alerts(GROUPS))
    assert [(r["name"], r["lastError"]) for r in rules if r["health"] != "ok"] == []


@pytest.mark.parametrize(
    ("name", "check"),
    [
        (
            "StorageAffinityWebhookCertificateExpiring",
            lambda a: 2 * 86400 < float(a["value"]) <= 3 * 86400 and a["labels"]["pod"] == f"{SERVICE}-0",
        ),
        (
            "StorageAffinityWebhookLookupFailures",
            lambda a: a["labels"]["endpoint"] == "mutate" and a["labels"]["namespace"] == NAMESPACE,
        ),
        ("StorageAffinityWebhookPolicyRefused", lambda a: float(a["value"]) >= 1),
        (
            "StorageAffinityWebhookFailingOpen",
            lambda a: (a["labels"]["name"], a["labels"]["type"]) == ("mutate.storage-affinity.io", "admit"),
        ),
        ("StorageAffinityWebhookCacheNotSynced", lambda a: a["labels"]["resource"]),
        (
            "StorageAffinityWebhookAuditFindings",
            lambda a: a["labels"]["namespace"] == "team-a" and float(a["value"]) >= 1,
        ),
    ],
)
def test_provoked_alert_is_active(scraped: Scraped, name: str, check: Callable[[dict[str, Any]], object]) -> None:
    rule = alerts(GROUPS)[name]
    # fail at once, not after the deadline, when the alert's metrics have no samples at all
    for selector in selectors(rule["expr"]):
        assert scraped.series(selector), f"{selector} matches nothing"
    active = until(lambda: scraped.active_alerts(name), f"{name} pending or firing")
    assert [a for a in active if a["state"] in {"pending", "firing"} and check(a)], active


def test_admission_series_keep_the_webhook_endpoint_label(scraped: Scraped) -> None:
    # The target's own `endpoint` label (the port name) must not replace the webhook's: honorLabels.
    found = {
        r["metric"]["endpoint"]
        for r in scraped.query("count by (endpoint) (storage_affinity_admission_requests_total)")
    }
    assert found == {"mutate", "validate"}


def test_latency_threshold_is_inside_the_histogram(scraped: Scraped) -> None:
    bounds = {float(s["le"]) for s in scraped.series("storage_affinity_admission_duration_seconds_bucket")}
    top = max(b for b in bounds if not math.isinf(b))
    threshold = _latency_threshold(GROUPS)
    # histogram_quantile never answers more than the top finite bucket: below the threshold, the alert cannot fire
    assert top > threshold, f"top finite bucket {top} s, latency alert at {threshold} s"
