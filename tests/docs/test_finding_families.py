"""docs/development.md says which finding goes in which family: its table names every family a finding can
carry, and no other."""

from __future__ import annotations

import re

from rules.audit import finding_families
from tests.support import ROOT


def test_the_family_table_names_every_family() -> None:
    text = (ROOT / "docs" / "development.md").read_text(encoding="utf-8")
    rows = set(re.findall(r"^\s*\| `(\w+)` \|", text, flags=re.M))
    # nodeAgent: the audit's warning about node-agents, which finding_families() does not list
    assert rows == set(finding_families()) | {"nodeAgent"}
