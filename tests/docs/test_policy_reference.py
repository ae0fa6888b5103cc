"""docs/policy.md is generated from the policy schema: it may not drift from what the webhook accepts."""

from __future__ import annotations

import json
from importlib import resources

from tests.support import ROOT
from webhook.policy.doc import render


def test_the_committed_reference_is_the_generated_one() -> None:
    assert (ROOT / "docs" / "policy.md").read_text() == render(), "stale: run `make docs`"


def test_every_top_level_field_of_the_schema_is_described() -> None:
    schema = json.loads(resources.files("rules").joinpath("policy.schema.json").read_text())
    undescribed = [name for name, node in schema["properties"].items() if not node.get("description")]
    assert undescribed == []
    text = render()
    for name in schema["properties"]:
        assert f"| `{name}` |" in text
