"""`make help`: every target with a description, one column for the descriptions however long the names."""

from __future__ import annotations

import re
import subprocess

from tests.support import ROOT


def test_make_help_lists_every_target_in_aligned_columns() -> None:
    makefile = (ROOT / "Makefile").read_text()
    described = re.findall(r"^([a-z-]+):.*## ", makefile, re.M)
    (phony,) = re.findall(r"^\.PHONY: (.*)$", makefile, re.M)
    assert set(described) == set(phony.split())  # every task has a target and a line in the help
    out = subprocess.run(["make", "-s", "help"], cwd=ROOT, capture_output=True, text=True, check=True).stdout
    rows = [re.fullmatch(r"  (\S+)( +)(\S.*)", line) for line in out.splitlines()]
    assert all(rows), out
    assert [row[1] for row in rows if row] == described
    starts = {len(row[1]) + len(row[2]) for row in rows if row}
    assert len(starts) == 1, out  # one column for every description
    assert min(len(row[2]) for row in rows if row) == 2  # two spaces after the longest name
