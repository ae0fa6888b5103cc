"""docs/policy.md is generated from the policy schema: it may not drift from what the webhook accepts."""

from __future__ import annotations

import json
from importlib import resources
from typing import Any

from testkit import yamldocs
from tests.docs.test_anchors import pointers
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


def _field_paths(policy: dict[str, Any]) -> list[str]:
    """A policy's top-level fields and their own fields, dotted as docs/policy.md writes them."""
    paths = list(policy)
    paths.extend(f"{name}.{child}" for name, value in policy.items() if isinstance(value, dict) for child in value)
    return paths


def test_the_page_the_default_policy_points_to_documents_its_fields() -> None:
    """A pointer to a page that names no section still names a page: the one that documents every field."""
    default = ROOT / "rules" / "default_policy.yaml"
    pages = {page for page, _, _, _ in pointers(default)}
    assert pages, "rules/default_policy.yaml no longer says where its fields are documented"
    fields = _field_paths(yamldocs.load(default.read_text()))
    for page in pages:
        text = page.read_text()
        missing = [field for field in fields if f"`{field}`" not in text]
        assert missing == [], f"{page.relative_to(ROOT)} does not document {missing}"
