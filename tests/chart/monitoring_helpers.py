"""The chart's monitoring objects as the tests read them: the rendered alert rules, the dashboard file, and the
metric names and selectors in their PromQL (parsed by promql-parser, never by a regular expression)."""

from __future__ import annotations

import json
import re
import shutil
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

import promql_parser
import pytest
import yaml

from tests.chart.chart_helpers import CHART, MONITORING, ROOT, one, render
from tests.support import merged

RUNBOOKS_DOC = ROOT / "docs" / "runbooks.md"
OPERATIONS_DOC = ROOT / "docs" / "operations.md"
DASHBOARD_FILE = CHART / "dashboards" / "storage-affinity-webhook.json"

#: What Grafana puts in place of the dashboard's variables, for a Prometheus scraping every second: the job the
#: test's scrape config gives the webhook (the Service name, as the Prometheus Operator does) and a rate window
#: that always holds several samples.
RATE_INTERVAL = "10s"
#: Metrics an alert or a panel reads that the webhook does not export, by who does: an outage is seen from outside.
EXTERNAL_METRICS = {
    "up": "Prometheus, one series per scrape target",
    "apiserver_admission_webhook_fail_open_count": "kube-apiserver (kubernetes/kubernetes#107171, Kubernetes 1.24+)",
}


def tool(name: str) -> str:
    """promtool or prometheus from Debian's `prometheus` package (`make monitoring-tools` installs it)."""
    path = shutil.which(name)
    if path is None:
        pytest.fail(f"{name} is not installed: run `make monitoring-tools` (Debian package prometheus)")
    return path


def rule_groups(values: dict[str, Any] | None = None, **render_args: str) -> list[dict[str, Any]]:
    """The PrometheusRule's groups, rendered with the monitoring objects on plus `values`."""
    docs = render(merged({"monitoring": MONITORING}, values or {}), **render_args)
    groups: list[dict[str, Any]] = one(docs, "PrometheusRule")["spec"]["groups"]
    return groups


def write_rules(path: Path, groups: list[dict[str, Any]]) -> Path:
    """A Prometheus rules file holding the PrometheusRule's groups (what the Prometheus Operator hands Prometheus)."""
    path.write_text(yaml.safe_dump({"groups": groups}, sort_keys=False))
    return path


def alerts(groups: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    return {rule["alert"]: rule for group in groups for rule in group["rules"] if "alert" in rule}


@cache
def _dashboard_text() -> str:
    return DASHBOARD_FILE.read_text()


def dashboard() -> dict[str, Any]:
    board: dict[str, Any] = json.loads(_dashboard_text())
    return board


def panels(board: dict[str, Any]) -> list[dict[str, Any]]:
    """Every panel, including those inside collapsed rows."""
    out = []
    for panel in board["panels"]:
        out.append(panel)
        out.extend(panel.get("panels", []))
    return out


@dataclass(frozen=True)
class Query:
    """One PromQL expression of the dashboard or of an alert, with the name a test reports it by."""

    where: str
    expr: str
    dashboard: bool


def dashboard_queries(board: dict[str, Any], job: str) -> list[Query]:
    """Every panel target's expression, with the variables as Grafana would fill them for `job`."""
    out = []
    for panel in panels(board):
        for target in panel.get("targets", []):
            out.append(Query(f"panel '{panel['title']}' {target['refId']}", fill(target["expr"], job), True))
    return out


def variable_queries(board: dict[str, Any]) -> list[Query]:
    """The selector inside each `label_values(selector, label)` variable query, as a PromQL expression."""
    out = []
    for variable in board["templating"]["list"]:
        if variable["type"] != "query":
            continue
        match = re.fullmatch(r"label_values\((?P<selector>.+),\s*(?P<label>\w+)\)", variable["query"]["query"])
        assert match, f"variable {variable['name']}: not a label_values() query"
        out.append(Query(f"variable ${variable['name']}", match["selector"], True))
    return out


def alert_queries(groups: list[dict[str, Any]]) -> list[Query]:
    return [Query(f"alert {name}", rule["expr"], False) for name, rule in alerts(groups).items()]


def fill(expr: str, job: str) -> str:
    filled = expr.replace("$__rate_interval", RATE_INTERVAL).replace("${job}", job).replace("$job", job)
    assert "$" not in filled, f"a dashboard variable the tests do not fill: {expr}"
    return filled


def selectors(expr: str) -> list[str]:
    """Every vector selector of the expression, printed back as PromQL (offsets and ranges dropped)."""
    found: list[str] = []

    def visit(node: object) -> None:
        if isinstance(node, promql_parser.VectorSelector):
            matchers = [f"{m.name}{_OPS[str(m.op)]}{json.dumps(m.value)}" for m in node.matchers.matchers]
            found.append(f"{node.name or ''}{{{', '.join(matchers)}}}")

    promql_parser.walk(promql_parser.parse(expr), visit)
    return found


_OPS = {"MatchOp.Equal": "=", "MatchOp.NotEqual": "!=", "MatchOp.Re": "=~", "MatchOp.NotRe": "!~"}


def metric_names(expr: str) -> set[str]:
    """The metric names the expression selects; a selector without a literal name is an error here."""
    names: set[str] = set()

    def visit(node: object) -> None:
        if isinstance(node, promql_parser.VectorSelector):
            assert node.name, f"a selector without a metric name in {expr!r}: the check needs literal names"
            names.add(node.name)

    promql_parser.walk(promql_parser.parse(expr), visit)
    return names


def github_anchor(heading: str) -> str:
    """The anchor GitHub gives a Markdown heading: lower case, punctuation dropped, spaces as hyphens."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")
