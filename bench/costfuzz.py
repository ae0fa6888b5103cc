"""`python -m bench.costfuzz`: the cost fuzzer of tests/fuzz/test_cost.py in CPU seconds, at 1,000 and 5,000 nodes.

Every case of testkit/costfuzz.py (object kind × base × dimension) at SCALE times its test size n (at most half
what the review budget lets one object hold): both webhooks' answer in process (decode, rules, response, as
bench/handler.py), on an index of the node count, timed by this thread's CPU clock at 0, n and 2n after a warm-up,
the garbage collector off while one runs. The test counts calls, which cannot see a scan inside one C
call (`x in a_list`); here such a scan dominates at these sizes and shows in the ratio
(cost(2n) − cost(0)) ÷ (cost(n) − cost(0)). A measurement past CAP_S is not doubled: the case is reported as over
it. Targets: no case refused (past the review deadline, past the budget, a crashed rule), no ratio past 2.5 among
the cases whose cost at 2n is past NOISE_S (below it the ratio of two small times is noise), no case past the
review deadline's 0.1 s of CPU at 2n.
"""

from __future__ import annotations

import argparse
import gc
import time
from typing import Any

from bench.report import header, save, step, table, target
from testkit import costfuzz
from testkit.costfuzz import Case, Prepared
from webhook.state.index import ClusterIndex

NODE_COUNTS = (1_000, 5_000)
SCALE = 8
CAP_S = 2.0
NOISE_S = 0.02
RATIO_LIMIT = 2.5
DEADLINE_S = 0.1


class Timed:
    """Measurements on one index of `nodes` nodes (building one of 5,000 nodes for each would take most of the
    run): a measurement adds its dimension's objects to it, and takes them out again after."""

    def __init__(self, nodes: int) -> None:
        self.runtime = costfuzz.runtime(costfuzz.state(nodes))

    def __call__(self, case: Case, n: int, salt: str) -> tuple[float, Prepared]:
        obj, _ = costfuzz.build(case, n, salt, 0)
        extra = case.dimension.cluster(n, salt)
        index = self.runtime.view
        assert isinstance(index, ClusterIndex)
        for added in extra:
            index.apply(added)
        run = Prepared(costfuzz.body(obj), self.runtime)
        gc.collect()
        gc.disable()  # a full collection falling in one measurement and not in another is not its cost
        try:
            started = time.thread_time()
            run.run()
            spent = time.thread_time() - started
        finally:
            gc.enable()
        for added in extra:
            index.remove(added)
        return spent, run


def measure_case(case: Case, measure: Timed, nodes: int) -> dict[str, Any]:
    n = case.dimension.scaled(SCALE)
    measure(case, 0, costfuzz.SALTS[0])
    seconds, refused = [], None
    for size, salt in zip((0, n, 2 * n), costfuzz.SALTS[1:], strict=True):
        cost, run = measure(case, size, salt)
        seconds.append(round(cost, 4))
        refused = refused or costfuzz.refusal(run.answers)
        if cost > CAP_S:
            break
    ratio = (seconds[2] - seconds[0]) / max(seconds[1] - seconds[0], 1e-6) if len(seconds) == 3 else None
    return {
        "nodes": nodes,
        "case": case.id,
        "n": n,
        "seconds": seconds,
        "ratio": None if ratio is None else round(ratio, 2),
        "over_cap": len(seconds) < 3,
        "refused": refused,
    }


def measure(node_counts: tuple[int, ...] = NODE_COUNTS) -> dict[str, Any]:
    rows = []
    for nodes in node_counts:
        step(f"cost fuzzer at {nodes:,} nodes: {len(costfuzz.cases())} cases")
        measure = Timed(nodes)
        rows += [measure_case(case, measure, nodes) for case in costfuzz.cases()]
    return {"scale": SCALE, "rows": rows, "targets": targets(rows)}


def _costly(row: dict[str, Any]) -> bool:
    return bool(row["over_cap"] or row["seconds"][-1] > NOISE_S)


def targets(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    out = []
    for nodes in sorted({r["nodes"] for r in rows}):
        mine = [r for r in rows if r["nodes"] == nodes]
        worst = max(
            (float("inf") if r["over_cap"] else r["ratio"] for r in mine if _costly(r)),
            default=0.0,
        )
        out.append(target(f"cost fuzzer, {nodes:,} nodes: worst doubling ratio", worst, RATIO_LIMIT, unit="×"))
        refused = sum(r["refused"] is not None for r in mine)
        out.append(target(f"cost fuzzer, {nodes:,} nodes: cases refused", refused, 0))
        slowest = max((float("inf") if r["over_cap"] else r["seconds"][-1] for r in mine), default=0.0)
        out.append(target(f"cost fuzzer, {nodes:,} nodes: slowest case at 2n", slowest, DEADLINE_S, unit=" s"))
    return out


def rows_table(rows: list[dict[str, Any]]) -> str:
    """The cases worth a look: those past the ratio, the deadline or the cap, or refused."""
    lines = ["| Nodes | Case | n | s at 0 / n / 2n | ratio | refused |", "|---:|---|---:|---|---:|---|"]
    for r in rows:
        flagged = r["over_cap"] or r["refused"] or r["seconds"][-1] > DEADLINE_S
        flagged = flagged or (_costly(r) and (r["ratio"] or 0) > RATIO_LIMIT)
        if flagged:
            shown = " / ".join(str(s) for s in r["seconds"]) + (f" / > {CAP_S:g}" if r["over_cap"] else "")
            lines.append(
                f"| {r['nodes']:,} | {r['case']} | {r['n']:,} | {shown} | {r['ratio'] or '—'} | {r['refused'] or ''} |"
            )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.costfuzz", description=__doc__)
    parser.add_argument("--keep", metavar="NAME", help="also write bench/results/NAME.json")
    parser.add_argument("--nodes", type=int, nargs="+", default=list(NODE_COUNTS))
    args = parser.parse_args(argv)
    result = header(**measure(tuple(args.nodes)))
    save(result, keep=args.keep, latest="costfuzz-latest")
    print(rows_table(result["rows"]))
    print()
    print(table(result["targets"]))
    return 0 if all(t["met"] for t in result["targets"]) else 1


if __name__ == "__main__":
    raise SystemExit(main())
