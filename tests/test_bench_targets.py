"""The target rows `make bench` reports for throughput, latency at a fixed rate and admission during audits: each
review and endpoint held to its own limit, from the figures the steps record (bench/stack.py, bench/audit.py)."""

from __future__ import annotations

from typing import Any

import pytest

from bench import audit, stack


def _stack_rows(ratio: float, *, hey: float | None = None) -> list[dict[str, Any]]:
    """stack_ratios' rows (three rounds) with every median at `ratio`, hey's at `hey` when given."""
    return [
        {"path": path, "tool": tool, "endpoint": endpoint, "rps_ratio": figure, "rps_ratios": [figure] * 3}
        for tool, figure in (("hey", ratio if hey is None else hey), ("wrk", ratio))
        for path in ("mover", "backup", "plain")
        for endpoint in ("mutate", "validate")
    ]


def _met(rows: list[dict[str, Any]]) -> set[str]:
    return {row["target"].split(":")[0].removeprefix("throughput ÷ /allow's, ") for row in rows if row["met"]}


_MUTATIONS = {"mover /mutate", "backup /mutate"}
_VALIDATIONS = {"mover /validate", "backup /validate"}
_PLAIN = {"plain /mutate", "plain /validate"}


@pytest.mark.parametrize(
    ("ratio", "met"),
    [
        # Each limit is met at its figure and missed a hundredth below it.
        (0.79, set()),
        (0.80, {"mover /mutate"}),
        (0.84, {"mover /mutate"}),
        (0.85, _MUTATIONS),
        (0.89, _MUTATIONS),
        (0.90, _MUTATIONS | _VALIDATIONS),
        (0.94, _MUTATIONS | _VALIDATIONS),
        (0.95, _MUTATIONS | _VALIDATIONS | _PLAIN),
    ],
)
def test_each_endpoint_is_held_to_its_own_throughput_limit(ratio: float, met: set[str]) -> None:
    rows = stack.stack_targets(_stack_rows(ratio))
    assert len(rows) == 6
    assert _met(rows) == met
    assert all(not row["at_most"] and row["value"] == ratio for row in rows)


def test_an_endpoint_meets_its_throughput_limit_only_with_both_tools() -> None:
    rows = stack.stack_targets(_stack_rows(0.97, hey=0.84))
    assert _met(rows) == {"mover /mutate"}
    assert rows[0]["value"] == 0.84
    assert "hey 0.84 and wrk 0.97 (medians of 3 rounds)" in rows[0]["target"]


def test_the_long_run_goal_names_the_endpoints_below_it() -> None:
    rows = _stack_rows(0.95)
    rows[0]["rps_ratio"] = 0.82  # hey, mover /mutate
    assert stack.below_goal(rows).endswith("below it: mover /mutate 0.82.")
    assert stack.below_goal(_stack_rows(0.9)).endswith("all meet it.")


def _fixed(*ratios: float) -> dict[str, Any]:
    return {"rate": 300, "rounds": len(ratios)} | {
        path: {"p99_ratio": sorted(ratios)[len(ratios) // 2], "p99_ratios": list(ratios)}
        for path in ("mover", "backup")
    }


def test_fixed_rate_rows_hold_each_path_s_median_to_1_3() -> None:
    rows = stack.fixed_rate_targets(_fixed(1.1, 1.6, 1.3))
    assert [row["met"] for row in rows] == [True, True]
    assert rows[0]["target"] == "fixed 300/s: mover /mutate p99 ÷ /allow's, median of 3 interleaved rounds"
    assert rows[1]["target"].startswith("fixed 300/s: backup /mutate")
    assert [row["met"] for row in stack.fixed_rate_targets(_fixed(1.31, 1.2, 1.4))] == [False, False]


def _audited(ratio: float | None) -> dict[str, Any]:
    return {
        "pods": 100_000,
        "audits": [{"seconds": 2.5, "objects": 20_001}] * 2,
        "during_audit": {"requests": 500, "p50_ms": 7.0, "p99_ms": 14.0},
        "idle": {"requests": 9_000, "p50_ms": 6.0, "p99_ms": 10.0},
        "p99_ratio": ratio,
    }


@pytest.mark.parametrize(("ratio", "met"), [(1.5, True), (1.51, False), (None, False)])
def test_the_audit_row_holds_mutate_p99_during_audits_to_1_5(ratio: float | None, met: bool) -> None:
    [row] = audit.targets(_audited(ratio))
    assert row["met"] is met
    assert (
        row["target"] == "/mutate p99 during an in-server audit of 100,000 pods ÷ idle (14.0 vs 10.0 ms; audits run: 2)"
    )
