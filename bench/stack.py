"""The stack's own measurements for `python -m bench`: our endpoints against /allow on the same server (throughput,
CPU per request, latency at a fixed rate), latency across cluster sizes and node counts, and the index's ingest.

Every comparison is a ratio taken within one run, round by round, because absolute numbers on a shared machine
drift.
"""

from __future__ import annotations

import statistics
import time
from contextlib import ExitStack
from functools import partial
from pathlib import Path
from typing import Any

from bench import load, servers, workload
from bench.report import target
from webhook.state.index import ClusterIndex, bulk_ingest

NODE_COUNTS = (1_000, 10_000)  # the backup path against this many Nodes: its cost must not grow with them
SWEEP_RATE = 250  # requests/s: well below saturation, so latency is service time, not queueing
FIXED_RATE = 300  # requests/s from 10 connections, as in production: p99 is service time plus a little queueing
#: The least share of /allow's requests/s on the same server each review's endpoint must keep, with wrk and hey
#: alike: the costliest mutations a little less than the rest, the plain pod's reviews, which do next to nothing,
#: nearly all of it.
THROUGHPUT_LIMITS = {
    ("mover", "mutate"): 0.80,
    ("backup", "mutate"): 0.85,
    ("mover", "validate"): 0.90,
    ("backup", "validate"): 0.90,
    ("plain", "mutate"): 0.95,
    ("plain", "validate"): 0.95,
}
#: Where every endpoint's share of /allow should end up in time; reported beside the targets, not as one.
THROUGHPUT_GOAL = 0.90
#: At FIXED_RATE, the most these reviews' /mutate p99 may be as a multiple of /allow's.
FIXED_RATE_PATHS = ("mover", "backup")
FIXED_RATE_P99_LIMIT = 1.3


def ingest(objects: list[dict[str, Any]], size: int) -> dict[str, Any]:
    """The index's own ingest of the whole cluster (no HTTP, no JSON), as a list ingests: what a re-list costs."""
    index = ClusterIndex()
    t0 = time.perf_counter()
    with bulk_ingest():
        for obj in objects:
            index.apply(obj)
    return {
        "pods": size,
        "objects": len(objects),
        "seconds": round(time.perf_counter() - t0, 2),
        "pods_kept": index.count("Pod"),
    }


def stack_ratios(srv: servers.Running, files: dict[str, Path], seconds: float, rounds: int = 5) -> list[dict[str, Any]]:
    """For each review and tool, `rounds` rounds of /allow, /mutate, /validate back to back; ratios per round.

    The machine's speed drifts by a quarter between runs seconds apart (a shared VM; the load generator's core
    slows the server's), so each ratio compares runs of the same round and the median over rounds is reported.
    Server CPU time per request (from /proc) is reported beside requests/s.
    """
    rows = []
    for tool in ("hey", "wrk"):
        drive = load.hey if tool == "hey" else load.wrk
        for path, body in files.items():
            runs: dict[str, list[load.Run]] = {"allow": [], "mutate": [], "validate": []}
            cpu: dict[str, list[float]] = {endpoint: [] for endpoint in runs}
            for _ in range(rounds):
                for endpoint, done in runs.items():
                    done_run, cost = srv.measured(
                        partial(drive, srv.url(endpoint), body, seconds=seconds, connections=16)
                    )
                    done.append(done_run)
                    cpu[endpoint].append(cost)
            floor = _pooled(runs["allow"])
            for endpoint in ("mutate", "validate"):
                run = _pooled(runs[endpoint])
                pairs = list(zip(runs["allow"], runs[endpoint], strict=True))
                cpu_pairs = list(zip(cpu["allow"], cpu[endpoint], strict=True))
                rows.append(
                    {
                        "path": path,
                        "tool": tool,
                        "endpoint": endpoint,
                        "rps": round(run["rps"]),
                        "trivial_rps": round(floor["rps"]),
                        "rps_ratio": round(statistics.median(b.rps / a.rps for a, b in pairs), 3),
                        "rps_ratios": [round(b.rps / a.rps, 3) for a, b in pairs],
                        "cpu_us_per_request": round(statistics.median(cpu[endpoint])),
                        "trivial_cpu_us_per_request": round(statistics.median(cpu["allow"])),
                        "cpu_capacity_ratio": round(statistics.median(a / b for a, b in cpu_pairs), 3),
                        "p50_ms": run["p50_ms"],
                        "p99_ms": run["p99_ms"],
                        "trivial_p50_ms": floor["p50_ms"],
                        "trivial_p99_ms": floor["p99_ms"],
                        "p99_ratio": round(statistics.median(b.p99_ms / a.p99_ms for a, b in pairs), 3),
                        "requests": run["requests"] + floor["requests"],
                        "errors": run["errors"] + floor["errors"],
                    }
                )
    return rows


def _pooled(runs: list[load.Run]) -> dict[str, Any]:
    """Rounds of one measurement: mean throughput, median percentiles, all requests and errors."""
    return {
        "rps": statistics.fmean(r.rps for r in runs),
        "p50_ms": round(statistics.median(r.p50_ms for r in runs), 2),
        "p99_ms": round(statistics.median(r.p99_ms for r in runs), 2),
        "requests": sum(r.requests for r in runs),
        "errors": sum(r.errors + r.timeouts for r in runs),
    }


def stack_targets(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """A target row per review and endpoint of THROUGHPUT_LIMITS: the lower of wrk's and hey's medians of the
    per-round ratios (stack_ratios), so that a row is met only when both tools meet it."""
    out = []
    for (path, endpoint), runs in _by_endpoint(rows).items():
        each = " and ".join(f"{x['tool']} {x['rps_ratio']:.2f}" for x in runs)
        what = f"throughput ÷ /allow's, {path} /{endpoint}: the lower of {each} (medians of "
        what += f"{len(runs[0]['rps_ratios'])} rounds)"
        limit = THROUGHPUT_LIMITS[(path, endpoint)]
        out.append(target(what, _lower(runs), limit, at_most=False, unit="×"))
    return out


def below_goal(rows: list[dict[str, Any]]) -> str:
    """A line naming the endpoints whose share of /allow (the lower of the tools') is still under THROUGHPUT_GOAL."""
    short = [
        f"{path} /{endpoint} {_lower(runs):.2f}"
        for (path, endpoint), runs in _by_endpoint(rows).items()
        if _lower(runs) < THROUGHPUT_GOAL
    ]
    return f"Long-run goal, not a target of this run: every endpoint ≥ {THROUGHPUT_GOAL} of /allow; " + (
        f"below it: {', '.join(short)}." if short else "all meet it."
    )


def _by_endpoint(rows: list[dict[str, Any]]) -> dict[tuple[str, str], list[dict[str, Any]]]:
    """stack_ratios' rows (one per tool) grouped by review and endpoint, in THROUGHPUT_LIMITS' order."""
    return {key: [x for x in rows if (x["path"], x["endpoint"]) == key] for key in THROUGHPUT_LIMITS}


def _lower(runs: list[dict[str, Any]]) -> float:
    return min(float(x["rps_ratio"]) for x in runs)


def fixed_rate(srv: servers.Running, files: dict[str, Path], seconds: float, rounds: int) -> dict[str, Any]:
    """hey at FIXED_RATE from 10 connections; each round runs /allow then /mutate for every one of FIXED_RATE_PATHS,
    so the machine's drift hits both paths and both endpoints alike; the p99 ratio is taken per round."""
    out: dict[str, Any] = {"rate": FIXED_RATE, "rounds": rounds}
    runs: dict[tuple[str, str], list[load.Run]] = {
        (path, endpoint): [] for path in FIXED_RATE_PATHS for endpoint in ("allow", "mutate")
    }
    for _ in range(rounds):
        for (path, endpoint), done in runs.items():
            done.append(load.hey(srv.url(endpoint), files[path], seconds=seconds, connections=10, rate=FIXED_RATE))
    for path in FIXED_RATE_PATHS:
        allow, mutate = runs[(path, "allow")], runs[(path, "mutate")]
        pairs = list(zip(allow, mutate, strict=True))
        out[path] = {
            "mutate": _pooled(mutate),
            "trivial": _pooled(allow),
            "p99_ratio": round(statistics.median(b.p99_ms / a.p99_ms for a, b in pairs), 3),
            "p99_ratios": [round(b.p99_ms / a.p99_ms, 3) for a, b in pairs],
        }
    return out


def fixed_rate_targets(fixed: dict[str, Any]) -> list[dict[str, Any]]:
    """A target row per path of fixed_rate: the median over its interleaved rounds of /mutate's p99 ÷ /allow's."""
    return [
        target(
            f"fixed {fixed['rate']}/s: {path} /mutate p99 ÷ /allow's, median of {len(fixed[path]['p99_ratios'])} "
            "interleaved rounds",
            fixed[path]["p99_ratio"],
            FIXED_RATE_P99_LIMIT,
            unit="×",
        )
        for path in FIXED_RATE_PATHS
    ]


def size_sweep(
    tmp: Path, certs: Path, clusters: dict[int, list[dict[str, Any]]], files: dict[str, Path], seconds: float
) -> dict[str, Any]:
    """Servers for every size at once; rounds interleave sizes so drift hits them all alike."""

    out: dict[str, Any] = {}
    with ExitStack() as stack:
        running = {}
        for size, objects in clusters.items():
            srv = stack.enter_context(
                servers.live_server(tmp / f"live-{size}", certs, objects, workload.POLICY, str(size))
            )
            running[size] = srv
            out[str(size)] = {"ready_s": round(srv.server.ready_after, 2)}
        reviews = {"mover": files["mover"], "backup": files["backup"]}
        runs: dict[tuple[int, str], list[load.Run]] = {(size, name): [] for size in running for name in reviews}
        for _ in range(3):
            for size, srv in running.items():
                for name, body in reviews.items():
                    run = load.hey(srv.url("mutate"), body, seconds=seconds, connections=8, rate=SWEEP_RATE)
                    runs[(size, name)].append(run)
        for size, srv in running.items():
            mover, backup = _pooled(runs[(size, "mover")]), _pooled(runs[(size, "backup")])
            out[str(size)].update(
                {
                    "p50_ms": mover["p50_ms"],
                    "p99_ms": mover["p99_ms"],
                    "backup_p50_ms": backup["p50_ms"],
                    "backup_p99_ms": backup["p99_ms"],
                    "requests": mover["requests"] + backup["requests"],
                    "errors": mover["errors"] + backup["errors"],
                    "worker_rss_mb": srv.worker_rss_mb(),
                }
            )
    return out


def node_sweep(tmp: Path, certs: Path, body: Path, seconds: float) -> dict[str, Any]:
    """A backup review's /mutate and /validate against clusters of NODE_COUNTS nodes (live state, one worker
    each), rounds interleaved; latency at SWEEP_RATE and server CPU per request."""

    out: dict[str, Any] = {}
    with ExitStack() as stack:
        running = {
            count: stack.enter_context(
                servers.live_server(
                    tmp / f"nodes-{count}",
                    certs,
                    workload.base_objects() + [workload.node(i) for i in range(count)],
                    workload.POLICY,
                    f"{count} nodes",
                    workers=1,
                )
            )
            for count in NODE_COUNTS
        }
        runs: dict[tuple[int, str], list[load.Run]] = {(n, e): [] for n in running for e in ("mutate", "validate")}
        cpu: dict[tuple[int, str], list[float]] = {key: [] for key in runs}
        for _ in range(3):
            for count, srv in running.items():
                for endpoint in ("mutate", "validate"):
                    run, cost = srv.measured(
                        partial(load.hey, srv.url(endpoint), body, seconds=seconds, connections=8, rate=SWEEP_RATE)
                    )
                    cpu[(count, endpoint)].append(cost)
                    runs[(count, endpoint)].append(run)
        for count, srv in running.items():
            out[str(count)] = {"ready_s": round(srv.server.ready_after, 2), "worker_rss_mb": srv.worker_rss_mb()}
            for endpoint in ("mutate", "validate"):
                pooled = _pooled(runs[(count, endpoint)])
                out[str(count)][endpoint] = pooled | {
                    "cpu_us_per_request": round(statistics.median(cpu[(count, endpoint)]))
                }
    return out
