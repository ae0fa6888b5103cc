"""No module of the shipped packages, the test kit or the benchmarks over MAX_LINES: a module past it holds more
than one concern (docs/development.md, "Layout"), and is split where a concern separates, not by line count."""

from __future__ import annotations

from tests.support import ROOT

PACKAGES = ("rules", "webhook", "certs", "testkit", "bench")
MAX_LINES = 400


def line_counts() -> dict[str, int]:
    return {
        path.relative_to(ROOT).as_posix(): len(path.read_text(encoding="utf-8").splitlines())
        for package in PACKAGES
        for path in sorted((ROOT / package).rglob("*.py"))
    }


def oversized(counts: dict[str, int]) -> dict[str, int]:
    return {path: lines for path, lines in counts.items() if lines > MAX_LINES}


def test_no_module_is_over_the_limit() -> None:
    assert oversized(line_counts()) == {}


def test_a_module_past_the_limit_is_found() -> None:
    assert oversized({"rules/big.py": MAX_LINES + 1, "rules/small.py": MAX_LINES}) == {"rules/big.py": MAX_LINES + 1}
