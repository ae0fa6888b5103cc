"""Every repository path the docs name exists, every relative link resolves, and docs/design.md's layout lists
today's top-level folders and rules/ modules: a file moved or renamed fails here, not in a reader's hands."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

from tests.support import ROOT

PAGES = [ROOT / "README.md", ROOT / "SECURITY.md", *sorted((ROOT / "docs").glob("*.md"))]

#: Paths the docs name that are not in the repository on purpose: what the tools write.
GENERATED = {
    ".tools/": "scripts/install-helm.sh installs helm there (git-ignored)",
    "dev-certs/": "make certs writes the development certificates there (git-ignored)",
    "bench/results/latest.json": "make bench writes its results there (git-ignored)",
    "bench/results/NAME.json": "the name a kept bench run is given",
}

_TICKED = re.compile(r"`([^`\n]+)`")
_PATH = re.compile(r"\.?[A-Za-z0-9_][\w.-]*(?:/[\w.-]+)*/?")
_FILE = re.compile(r"\.(?:py|ya?ml|json|md|sh|cfg|toml|txt|tpl)$")
_LINK = re.compile(r"\]\(([^)\s#]+)(?:#[^)]*)?\)")


def _tracked() -> tuple[set[str], set[str]]:
    """The work tree's files that git tracks or would (new files not ignored count: a doc naming a module written
    but not added yet passes, as it will once committed)."""
    listed = ["git", "ls-files", "--cached", "--others", "--exclude-standard"]
    files = subprocess.run(listed, cwd=ROOT, capture_output=True, text=True, check=True).stdout.split()
    dirs = {"/".join(f.split("/")[:i]) for f in files for i in range(1, f.count("/") + 1)}
    return set(files), dirs


FILES, DIRS = _tracked()
TOP = {path.split("/")[0] for path in FILES}


def unreleased() -> str:
    """The CHANGELOG's Unreleased section: released entries may name what was true then."""
    text = (ROOT / "CHANGELOG.md").read_text()
    return text.split("## [Unreleased]", 1)[1].split("\n## ", 1)[0]


def named_paths(text: str) -> list[str]:
    """What `backticks` name that looks like a path in this repository: a word with a slash whose first part is a
    top-level entry, a dot-folder, or that ends in a file type. API groups (`storage-affinity.io/role`), label
    keys, `In/NotIn` and URLs are not paths."""
    found = []
    for ticked in _TICKED.findall(text):
        for raw in ticked.split():
            word = raw.rstrip(",;:)")
            if "/" not in word or not _PATH.fullmatch(word) or "://" in word:
                continue
            first = word.split("/")[0]
            if "." in first and not first.startswith("."):
                continue  # a domain: an API group or a label key
            if first in TOP or first.startswith(".") or _FILE.search(word):
                found.append(word)
    return found


SOURCES = {page.relative_to(ROOT).as_posix(): page.read_text() for page in PAGES}
SOURCES["CHANGELOG.md [Unreleased]"] = unreleased()


@pytest.mark.parametrize("page", list(SOURCES))
def test_every_path_a_page_names_exists(page: str) -> None:
    paths = named_paths(SOURCES[page])
    missing = [p for p in paths if p not in GENERATED and p.rstrip("/") not in FILES | DIRS]
    assert missing == [], f"{page} names paths that do not exist: {missing}"


@pytest.mark.parametrize("page", PAGES, ids=[p.relative_to(ROOT).as_posix() for p in PAGES])
def test_every_relative_link_resolves(page: Path) -> None:
    targets = [t for t in _LINK.findall(page.read_text()) if "://" not in t and not t.startswith("mailto:")]
    broken = [t for t in targets if not (page.parent / t).exists()]
    assert broken == [], f"{page.name} links to what does not exist: {broken}"


def test_the_checker_finds_paths_and_leaves_other_slashes_alone() -> None:
    text = (
        "`rules/kube/volumes.py`, `webhook/state/`, `.ci/run`, `coscheduling/pinning.py`, "
        "`storage-affinity.io/role`, `In/NotIn`, `app.kubernetes.io/created-by: volsync`, `https://x/y.md`"
    )
    assert named_paths(text) == ["rules/kube/volumes.py", "webhook/state/", ".ci/run", "coscheduling/pinning.py"]
    assert "rules/volumes.py" in named_paths("in `rules/volumes.py`")  # the path this CHANGELOG once named


def test_the_design_layout_lists_the_top_level_folders_and_every_rules_module() -> None:
    design = (ROOT / "docs" / "design.md").read_text()
    layout = design.split("## 1. Layout", 1)[1].split("```", 2)[1]
    words = set(re.findall(r"[\w.-]+/?", layout))
    folders = {f"{d}/" for d in DIRS if "/" not in d and not d.startswith(".")}
    assert folders - words == set()
    rules = {p.split("/", 1)[1] for p in FILES if p.startswith("rules/") and p.count("/") == 1}
    modules = {name for name in rules if name != "__init__.py"}
    packages = {f"{p.split('/')[1]}/" for p in FILES if p.startswith("rules/") and p.count("/") == 2}
    assert modules - words == set()
    assert packages - words == set()
