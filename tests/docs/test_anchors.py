"""Every section of README.md or docs/ that the chart, the docs, SECURITY.md or the code point to exists.

A pointer is a Markdown link (`[text](page.md#anchor)`, `(#anchor)`), a path with an anchor
(`docs/operations.md#monitoring`) or a path with a quoted heading (`docs/operations.md, "Which pods reach the
webhook"`); anchors are GitHub's: the heading in lower case, punctuation dropped, spaces as '-', `-1`, `-2` ... for
repeats.
"""

from __future__ import annotations

import re
from collections import Counter
from functools import cache
from pathlib import Path

import pytest

from tests.docs.test_commands import PAGES
from tests.support import ROOT

CHART = ROOT / "charts" / "storage-affinity-webhook"
SOURCES = [
    *PAGES,
    ROOT / "SECURITY.md",
    *sorted(p for p in CHART.rglob("*") if p.is_file() and p.suffix in (".yaml", ".txt", ".tpl", ".json")),
    ROOT / "rules" / "policy.schema.json",  # its descriptions become docs/policy.md and the chart's schema
    ROOT / "rules" / "default_policy.yaml",  # its comments point readers to the page of its fields
    *sorted(
        p for top in ("rules", "webhook", "testkit", "scripts", "bench", "tests") for p in (ROOT / top).rglob("*.py")
    ),
]
SOURCES.remove(Path(__file__).resolve())  # its examples point to missing sections on purpose
_FENCE = re.compile(r"^ *```.*?^ *```", re.M | re.S)
_HEADING = re.compile(r"^#{1,6} +(.+?) *#*$", re.M)
_LINK = re.compile(r"\]\((?P<target>[^)\s]+)\)")
_PATH = re.compile(r"(?P<file>README\.md|docs/[\w-]+\.md)(?:#(?P<anchor>[\w-]+)|, \"(?P<heading>[^\"]+)\")?")


def slug(heading: str) -> str:
    """GitHub's anchor of a heading."""
    text = re.sub(r"[`*_]|\[([^\]]*)\]\([^)]*\)", r"\1", heading).strip().lower()
    return re.sub(r"[^\w\- ]", "", text).replace(" ", "-")


@cache
def headings(page: Path) -> tuple[set[str], set[str]]:
    """(anchors, heading texts) of a Markdown page, outside code blocks."""
    texts = [h.strip() for h in _HEADING.findall(_FENCE.sub("", page.read_text()))]
    anchors: set[str] = set()
    seen: Counter[str] = Counter()
    for text in texts:
        base = slug(text)
        anchors.add(base if not seen[base] else f"{base}-{seen[base]}")
        seen[base] += 1
    return anchors, {re.sub(r"[`*]", "", t) for t in texts}


def pointers(source: Path) -> list[tuple[Path, str | None, str | None, str]]:
    """(page, anchor, heading, as written) of every pointer in a file."""
    text = source.read_text()
    found: list[tuple[Path, str | None, str | None, str]] = []
    if source.suffix == ".md":
        for match in _LINK.finditer(_FENCE.sub("", text)):
            target = match["target"]
            if re.match(r"^[a-z]+:", target):
                continue  # a URL
            file, _, anchor = target.partition("#")
            if file and not file.endswith(".md"):
                continue  # a link to a file, not a section
            page = (source.parent / file).resolve() if file else source
            found.append((page, anchor or None, None, target))
    for match in _PATH.finditer(text):
        found.append((ROOT / match["file"], match["anchor"], match["heading"], match[0]))
    return found


@pytest.mark.parametrize("source", SOURCES, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_pointed_to_section_exists(source: Path) -> None:
    broken = []
    for page, anchor, heading, written in pointers(source):
        if not page.is_file():
            broken.append(f"{written}: no such page")
            continue
        anchors, texts = headings(page)
        if anchor is not None and anchor not in anchors:
            broken.append(f"{written}: no such section (sections: {sorted(anchors)})")
        if heading is not None and heading not in texts:
            broken.append(f"{written}: no such heading (headings: {sorted(texts)})")
    assert broken == []


def test_anchors_are_githubs() -> None:
    assert slug("12. Data sources") == "12-data-sources"
    assert slug("`storage-affinity.io/*` annotations") == "storage-affinityio-annotations"
    assert slug("Policy reports and the one writer") == "policy-reports-and-the-one-writer"
    assert headings(ROOT / "docs" / "runbooks.md")[0] >= {"storageaffinitywebhookauditfindings"}


def test_a_missing_section_is_found(tmp_path: Path) -> None:
    values = tmp_path / "values.yaml"
    values.write_text('# see README.md, "Monitoring" and docs/operations.md#monitoring and docs/operations.md#nope\n')
    found = {(a, h) for _, a, h, _ in pointers(values)}
    assert found == {(None, "Monitoring"), ("monitoring", None), ("nope", None)}
    assert "Monitoring" not in headings(ROOT / "README.md")[1]
    assert "nope" not in headings(ROOT / "docs" / "operations.md")[0]
