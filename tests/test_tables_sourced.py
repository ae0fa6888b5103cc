"""Every case table under tests/data names what each case reproduces, whichever loader reads it: a table read
without `tests.support.table_cases` (a hand-written parametrize) cannot skip its `source:` either."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from testkit import yamldocs
from tests.support import DATA, ROOT

#: Case lists that are not rule tables, with why.
NOT_TABLES = {
    "suites": "policy test suites in the format `storage-affinity-webhook test` reads, which has no `source` key",
}


def _documents(path: Path) -> list[Any]:
    try:
        return yamldocs.load_all(path.read_text(encoding="utf-8"))
    except yaml.YAMLError:
        return []  # a fixture that is broken on purpose


def case_lists(path: Path) -> Iterator[tuple[str, list[dict[str, Any]]]]:
    """(where, cases) of each list of named mappings in a file: the file itself, or a top-level key's value."""
    for doc in _documents(path):
        lists = [("", doc)] if isinstance(doc, list) else list(doc.items()) if isinstance(doc, dict) else []
        for key, value in lists:
            if isinstance(value, list) and value and all(isinstance(c, dict) and "name" in c for c in value):
                yield str(key), value


TABLES = sorted(
    p for p in DATA.rglob("*.yaml") if p.relative_to(DATA).parts[0] not in NOT_TABLES and any(case_lists(p))
)


@pytest.mark.parametrize("table", TABLES, ids=lambda p: p.relative_to(DATA).as_posix())
def test_every_case_of_a_table_names_its_source(table: Path) -> None:
    unsourced = [
        f"{where}: {case['name']}" for where, cases in case_lists(table) for case in cases if not case.get("source")
    ]
    assert unsourced == [], f"{table.relative_to(ROOT)}: name the upstream each case reproduces (source:)"


def test_the_finder_sees_the_tables_of_every_shape(tmp_path: Path) -> None:
    flat = tmp_path / "flat.yaml"
    flat.write_text("- {name: a, source: x}\n- {name: b}\n")
    sectioned = tmp_path / "sectioned.yaml"
    sectioned.write_text("shared: {a: 1}\ncases:\n  - {name: c}\n")
    assert [(w, [c["name"] for c in cs]) for w, cs in case_lists(flat)] == [("", ["a", "b"])]
    assert [(w, [c["name"] for c in cs]) for w, cs in case_lists(sectioned)] == [("cases", ["c"])]
    found = {p.relative_to(DATA).as_posix() for p in TABLES}
    assert {
        "selectors.yaml",
        "placement/node_affinity.yaml",
        "chart_policy/corpus.yaml",
        "audit/tolerations.yaml",
    } <= found
