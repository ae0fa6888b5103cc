"""The chart's README.md (what `helm show readme` prints) is generated from values.yaml and kept in step with it:
every value with its default and its comment."""

from __future__ import annotations

import subprocess
import sys
from typing import Any

from testkit import yamldocs
from tests.chart.chart_helpers import CHART, HELM, ROOT
from tests.support import load_script

SCRIPT = ROOT / "scripts" / "chart-readme.py"


def _script() -> Any:
    return load_script(SCRIPT)


def _leaves(value: Any, path: str = "") -> set[str]:
    if isinstance(value, dict) and value:
        return {leaf for key, child in value.items() for leaf in _leaves(child, f"{path}.{key}" if path else key)}
    return {path}


def test_the_readme_is_what_values_yaml_generates() -> None:
    result = subprocess.run([sys.executable, str(SCRIPT), "--check"], capture_output=True, text=True, check=False)
    assert result.returncode == 0, result.stderr


def test_every_value_has_a_row_with_its_default_and_a_description() -> None:
    """Each leaf of values.yaml is a row, or under one (a `-- ` map such as `resources` is one value); each row says
    what the value does."""
    rows = _script().rows((CHART / "values.yaml").read_text())
    values = [(key, default, text) for key, default, text, heading in rows if not heading]
    keys = {key for key, _, _ in values}
    leaves = _leaves(yamldocs.load((CHART / "values.yaml").read_text()))
    assert not {leaf for leaf in leaves if not any(leaf == k or leaf.startswith(f"{k}.") for k in keys)}
    assert [key for key, _, text in values if not text] == []
    assert {key: default for key, default, _ in values}["policy.audit.stuckAfterSeconds"] == 120


def test_a_comment_above_a_key_is_its_description_and_a_marked_map_is_one_value() -> None:
    text = (
        "# A section.\nsection:\n  # -- A leaf.\n  leaf: 1\n  # -- A map as one value.\n  whole:\n    a: 1\n"
        "  flow: {b: 2}\nbare: x\n"
    )
    assert _script().rows(text) == [
        ("section", None, "A section.", True),
        ("section.leaf", 1, "A leaf.", False),
        ("section.whole", {"a": 1}, "A map as one value.", False),
        ("section.flow", {"b": 2}, "", False),
        ("bare", "x", "", False),
    ]


def test_helm_show_readme_prints_it() -> None:
    shown = subprocess.run([str(HELM), "show", "readme", str(CHART)], capture_output=True, text=True, check=True)
    assert shown.stdout.rstrip("\n") == (CHART / "README.md").read_text().rstrip("\n")
