"""The chart refuses the policies the server refuses: a differential test over tests/data/chart_policy/corpus.yaml.

`helm template` with the policy as the `policy` value against the loader `review --policy` uses on the same policy
as a file. The chart's values schema is generated from the server's policy schema, so the two may differ only in
the corpus's `serverOnly` checks, which JSON Schema cannot express.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from rules.policy import PolicyError, policy_from_config_map
from tests.chart.chart_helpers import HelmError, one, render
from tests.support import DATA, ROOT, load_yaml, table_cases
from webhook.policy.file import load_policy_file

CORPUS = load_yaml(DATA / "chart_policy" / "corpus.yaml")
SCHEMA = json.loads((ROOT / "rules" / "policy.schema.json").read_text())


def _cases(kind: str) -> list[Any]:
    return table_cases(DATA / "chart_policy" / "corpus.yaml", {"name", "policy", "reason"}, section=kind)


def _server_problems(policy: dict[str, Any], tmp_path: Path) -> list[tuple[str, str]]:
    """What the server's loader says about the policy as a file; [] when it loads."""
    path = tmp_path / "policy.yaml"
    path.write_text(yaml.safe_dump(policy))
    try:
        load_policy_file(path)
    except PolicyError as exc:
        return exc.problems
    return []


def _chart_error(policy: dict[str, Any]) -> str | None:
    try:
        render({"policy": policy})
    except HelmError as exc:
        return str(exc)
    return None


@pytest.mark.parametrize("case", _cases("broken"))
def test_both_refuse_a_broken_policy(case: dict[str, Any], tmp_path: Path) -> None:
    assert _server_problems(case["policy"], tmp_path), "the server loads it: not a broken policy"
    error = _chart_error(case["policy"])
    assert error is not None, "helm template renders a policy the server refuses"
    assert "don't meet the specifications of the schema" in error, error
    # helm names the value it refused (a map key it refused, at the map: its validator reports those at '')
    assert "/policy/" in error or "invalid propertyName" in error, error


@pytest.mark.parametrize("case", _cases("serverOnly"))
def test_only_the_server_refuses_what_json_schema_cannot_express(case: dict[str, Any], tmp_path: Path) -> None:
    assert case["reason"]
    assert _server_problems(case["policy"], tmp_path)
    assert _chart_error(case["policy"]) is None, "the chart refuses it: move the case to `broken`"


@pytest.mark.parametrize("case", _cases("valid"))
def test_both_accept_a_valid_policy(case: dict[str, Any], tmp_path: Path) -> None:
    assert _server_problems(case["policy"], tmp_path) == []
    config_map = one(render({"policy": case["policy"]}), "ConfigMap", "storage-affinity-policy")
    policy_from_config_map(config_map)  # what the chart rendered loads too


def test_the_corpus_breaks_every_policy_section() -> None:
    broken = {key for case in CORPUS["broken"] for key in case["policy"]}
    assert broken == set(SCHEMA["properties"])


def test_the_server_only_checks_are_documented() -> None:
    operations = (ROOT / "docs" / "operations.md").read_text()
    for case in CORPUS["serverOnly"]:
        assert case["name"] in operations, f"docs/operations.md does not list the server-only check {case['name']!r}"
