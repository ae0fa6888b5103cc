"""bench/instructions.py: the reviews it counts run, and its baseline names every path it counts."""

from __future__ import annotations

import gc
import shutil
from pathlib import Path

import pytest

from bench import instructions


def test_the_baseline_covers_every_counted_review() -> None:
    base = instructions.baseline()
    assert len(base["commit"]) == 40
    names = {f"{path} /{endpoint}" for path in instructions.PATHS for endpoint in instructions.ENDPOINTS}
    assert set(base["counts"]) == names
    assert all(count > 100_000 for count in base["counts"].values())


@pytest.mark.parametrize("endpoint", instructions.ENDPOINTS)
def test_the_counted_reviews_run(endpoint: str) -> None:
    for path in instructions.PATHS:
        answer = instructions.reviews(path, endpoint, 1)["response"]
        assert answer["allowed"] is True, (path, endpoint, answer)
        # The counted mutations do the work they stand for: a mover's and a backup's are patched.
        assert ("patch" in answer) == (endpoint == "mutate" and path != "plain"), (path, endpoint, answer.keys())
    assert gc.isenabled()


@pytest.mark.skipif(shutil.which("valgrind") is None, reason="valgrind is installed by make bench-tools")
def test_a_count_is_a_plausible_number_of_instructions(tmp_path: Path) -> None:
    count = instructions._instructions("plain", "mutate", 1, tmp_path)
    assert count > 1_000_000  # the interpreter's start-up alone is tens of millions
