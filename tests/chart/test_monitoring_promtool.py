"""The chart's alert rules through promtool (Debian's `prometheus` package): `check rules`, then the unit tests of
alerts.promtool.yaml, which hold a firing and a quiet case for every alert."""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from testkit import yamldocs
from tests.chart.chart_helpers import RUNBOOKS
from tests.chart.monitoring_helpers import alerts, rule_groups, tool, write_rules
from tests.support import merged

TESTS = Path(__file__).with_name("alerts.promtool.yaml")

#: The unit tests' values: their series are written for a latency threshold of 0.8 x 2 = 1.6 s, and with the audit's
#: findings labelled by namespace. The default threshold against the webhook's histogram is the business of
#: test_monitoring_prometheus.py::test_latency_threshold_is_inside_the_histogram.
PROMTOOL_VALUES: dict[str, Any] = {"webhook": {"timeoutSeconds": 2}, "monitoring": {"namespaceLabels": True}}


def _promtool(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([tool("promtool"), *args], capture_output=True, text=True, cwd=cwd, timeout=120, check=False)


def _unit_tests(tmp_path: Path, values: dict[str, Any]) -> subprocess.CompletedProcess[str]:
    rules = write_rules(tmp_path / "rules.yaml", rule_groups(values))
    tests = yamldocs.load(TESTS.read_text())
    tests["rule_files"] = [rules.name]
    (tmp_path / "tests.yaml").write_text(yaml.safe_dump(tests, sort_keys=False))
    return _promtool("test", "rules", "tests.yaml", cwd=tmp_path)


def test_check_rules(tmp_path: Path) -> None:
    rules = write_rules(tmp_path / "rules.yaml", rule_groups())
    result = _promtool("check", "rules", rules.name, cwd=tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr
    assert f"SUCCESS: {len(alerts(rule_groups()))} rules found" in result.stdout


def test_unit_tests_pass(tmp_path: Path) -> None:
    result = _unit_tests(tmp_path, PROMTOOL_VALUES)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "SUCCESS" in result.stdout


def test_every_alert_has_a_firing_and_a_quiet_case() -> None:
    cases: dict[str, dict[str, int]] = {}
    for test in yamldocs.load(TESTS.read_text())["tests"]:
        for case in test.get("alert_rule_test", []):
            counts = cases.setdefault(case["alertname"], {"firing": 0, "quiet": 0})
            counts["firing" if case["exp_alerts"] else "quiet"] += 1
    assert set(cases) == set(alerts(rule_groups(PROMTOOL_VALUES)))
    assert all(c["firing"] and c["quiet"] for c in cases.values()), cases


def test_every_firing_case_checks_labels_and_every_annotation() -> None:
    rules = alerts(rule_groups(PROMTOOL_VALUES))
    for test in yamldocs.load(TESTS.read_text())["tests"]:
        for case in test.get("alert_rule_test", []):
            for alert in case["exp_alerts"]:
                assert set(alert["exp_annotations"]) == set(rules[case["alertname"]]["annotations"])
                assert alert["exp_labels"]["severity"] == rules[case["alertname"]]["labels"]["severity"]
                assert alert["exp_annotations"]["runbook_url"].startswith(RUNBOOKS + "#")


@pytest.mark.parametrize(
    ("values", "broken"),
    [
        ({"monitoring": {"prometheusRule": {"certificateExpiryDays": 4}}}, "StorageAffinityWebhookCertificateExpiring"),
        ({"webhook": {"timeoutSeconds": 4}}, "StorageAffinityWebhookLatencyNearTimeout"),
    ],
)
def test_unit_tests_follow_the_thresholds(tmp_path: Path, values: dict[str, Any], broken: str) -> None:
    # The cases are written for the thresholds of PROMTOOL_VALUES: other thresholds must fail them, so the unit
    # tests really run the rendered rules.
    result = _unit_tests(tmp_path, merged(PROMTOOL_VALUES, values))
    assert result.returncode != 0
    assert f"alertname: {broken}" in result.stdout + result.stderr
