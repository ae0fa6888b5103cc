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


def _counted_at(share: float) -> dict[str, int]:
    """Every counted review at `share` of the baseline's count of it (rounded down: at the limit, not above it)."""
    return {name: int(count * share) for name, count in instructions.baseline()["counts"].items()}


def test_every_counted_review_has_a_limit() -> None:
    names = {f"{path} /{endpoint}" for path in instructions.PATHS for endpoint in instructions.ENDPOINTS}
    assert set(instructions.LIMITS) == names


@pytest.mark.parametrize(
    ("share", "met"),
    [
        # Half the baseline meets every limit; a shade more misses only the mover's and the backup's mutations.
        (0.5, set(instructions.LIMITS)),
        (0.51, {"mover /validate", "backup /validate", "plain /mutate", "plain /validate"}),
        # At 0.7 the costly validations still pass, a shade more only the plain pod's reviews do.
        (0.7, {"mover /validate", "backup /validate", "plain /mutate", "plain /validate"}),
        (0.71, {"plain /mutate", "plain /validate"}),
        # The plain pod's reviews may cost what they did at the baseline, not more.
        (1.0, {"plain /mutate", "plain /validate"}),
        (1.01, set()),
    ],
)
def test_each_review_is_held_to_its_own_limit(share: float, met: set[str]) -> None:
    counts = _counted_at(share)
    rows = instructions.targets(counts, instructions.baseline())
    assert [name in row["target"] for name, row in zip(counts, rows, strict=True)] == [True] * len(counts)
    assert {name for name, row in zip(counts, rows, strict=True) if row["met"]} == met
    assert all(row["value"] == pytest.approx(share, abs=1e-3) and row["unit"] == "×" for row in rows)


def test_the_command_exits_1_when_a_limit_is_missed(monkeypatch: pytest.MonkeyPatch) -> None:
    counts = _counted_at(0.5)
    monkeypatch.setattr(instructions, "measure", lambda: counts)
    assert instructions.main([]) == 0
    counts["plain /validate"] = _counted_at(1.01)["plain /validate"]
    assert instructions.main([]) == 1
