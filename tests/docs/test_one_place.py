"""Each fact has one place: docs/design.md's map names it, the other pages link to it, and a restatement that
creeps back fails here. Where a copy must stay (the policy as shipped in design.md section 7), it is checked
against its source."""

from __future__ import annotations

import re

import pytest

from rules.policy import default_policy
from testkit import yamldocs
from tests.docs.test_paths import DIRS, FILES, named_paths
from tests.support import ROOT

DESIGN = ROOT / "docs" / "design.md"
#: Where a fact may be restated: every page a reader or the chart shows.
PAGES = [ROOT / "README.md", ROOT / "SECURITY.md", *sorted((ROOT / "docs").glob("*.md"))]
VALUES = ROOT / "charts" / "storage-affinity-webhook" / "values.yaml"

#: (fact, words only its one place says, that place). Each says a number or a row that other pages link to instead.
ONE_PLACE = [
    ("a stuck cause's row", "| `MultiAttach` |", "docs/runbooks.md"),
    ("an ended cause's row", "| `EvictedByAPI` |", "docs/runbooks.md"),
    ("the review budget's requirement limit", "10,000 requirements and 10,000 values", "docs/design.md"),
    ("the VMs a CDI worker follows", "follows at most 16 VirtualMachines", "docs/design.md"),
    ("the lookup GETs per review", "at most 4 GETs per review", "docs/operations.md"),
    ("the Events' writes per run", "100 writes per run", "docs/design.md"),
    ("a report's results per object", "20 results per object", "docs/design.md"),
    ("the families the policy may relax", "`validation.annotations`", "docs/policy.md"),
    ("the characters every message escapes", "embeddings and overrides U+202A–U+202E", "docs/design.md"),
    ("the kinds `--cluster` reads", "VolSync ReplicationDestinations and Velero DataUploads", "docs/cli.md"),
    ("the RBAC table", "| API group | Resource | Scope | Verbs |", "docs/operations.md"),
    ("the disclosed topology labels", "(hostname, zone, region, os, arch, instance type", "docs/design.md"),
]


def _map() -> str:
    text = DESIGN.read_text(encoding="utf-8")
    return text.split("\n## Map\n", 1)[1].split("\n## ", 1)[0]


def _said(path: str) -> str:
    return (ROOT / path).read_text(encoding="utf-8")


@pytest.mark.parametrize(("fact", "words", "home"), ONE_PLACE, ids=[f for f, _, _ in ONE_PLACE])
def test_a_fact_is_said_in_its_one_place_only(fact: str, words: str, home: str) -> None:
    flat = " ".join(words.split())
    where = [
        page.relative_to(ROOT).as_posix()
        for page in [*PAGES, VALUES]
        if flat in " ".join(page.read_text(encoding="utf-8").split())
    ]
    assert where == [home], f"{fact}: say it in {home} alone and link to it there (said in {where})"


def test_the_policy_as_shipped_in_design_md_is_the_embedded_default() -> None:
    """Section 7 shows the default policy with its comments; its values are rules/default_policy.yaml's."""
    section = DESIGN.read_text(encoding="utf-8").split("## 7. Policy", 1)[1]
    shown = yamldocs.load(section.split("```yaml\n", 1)[1].split("```", 1)[0])
    assert shown == default_policy().document


def test_design_md_opens_with_a_map_of_existing_modules() -> None:
    text = DESIGN.read_text(encoding="utf-8")
    assert text.index("\n## Map\n") < text.index("\n## 1. Layout\n"), "the map comes first"
    page = _map()
    for question in ("Where a review goes", "Where state comes from", "Where to add", "Where the audit and Events run"):
        assert f"**{question}.**" in page, f"the map answers {question!r}"
    paths = named_paths(page)
    assert [p for p in paths if p.rstrip("/") not in FILES | DIRS] == []
    # every layer of the transport and every package of the rules a newcomer looks for is on the map
    named = {p.rstrip("/") for p in paths} | {"/".join(p.split("/")[:2]) for p in paths}
    layers = {"webhook/serving", "webhook/app", "webhook/state", "webhook/audit", "webhook/cli", "webhook/policy"}
    assert layers - named == set()
    for module in ("rules/pipeline.py", "rules/registry.py", "webhook/state/kinds.py", "rules/cluster.py"):
        assert module in paths


def test_each_fact_of_the_map_links_to_its_place() -> None:
    rows = [line for line in _map().splitlines() if line.startswith("| ") and not line.startswith("| Fact")]
    assert len(rows) >= 10
    for row in rows:
        place = row.split("|")[2]
        assert re.search(r"\]\([^)]+\)|`[\w./-]+`", place), f"no link or path: {row}"
