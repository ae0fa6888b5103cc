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
from webhook.state.index import ClusterIndex, bulk_ingest

NODE_COUNTS = (1_000, 10_000)  # the backup path against this many Nodes: its cost must not grow with them
SWEEP_RATE = 250  # requests/s: well below saturation, so latency is service time, not queueing
FIXED_RATE = 300  # requests/s from 10 connections, as in production: p99 is service time plus a little queueing


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


def fixed_rate(srv: servers.Running, files: dict[str, Path], seconds: float, rounds: int) -> dict[str, Any]:
    """hey at FIXED_RATE from 10 connections: /allow, then /mutate, round by round; p99 ratio per round."""
    out: dict[str, Any] = {"rate": FIXED_RATE}
    for path in ("mover", "backup"):
        runs: dict[str, list[load.Run]] = {"allow": [], "mutate": []}
        for _ in range(rounds):
            for endpoint, done in runs.items():
                done.append(load.hey(srv.url(endpoint), files[path], seconds=seconds, connections=10, rate=FIXED_RATE))
        pairs = list(zip(runs["allow"], runs["mutate"], strict=True))
        out[path] = {
            "mutate": _pooled(runs["mutate"]),
            "trivial": _pooled(runs["allow"]),
            "p99_ratio": round(statistics.median(b.p99_ms / a.p99_ms for a, b in pairs), 3),
            "p99_ratios": [round(b.p99_ms / a.p99_ms, 3) for a, b in pairs],
        }
    return out


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
