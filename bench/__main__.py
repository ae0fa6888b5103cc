"""`python -m bench`: one run of every measurement, results to bench/results/latest.json and a table on stdout.

Every comparison is a ratio taken within this run (our endpoint vs the trivial one on the same server, 100,000
pods vs 100 pods interleaved round by round), because absolute numbers on a shared machine drift.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from bench import audit, handler, load, report, servers, workload
from bench.report import save, step
from testkit.server import issue_certs
from webhook.policyfile import load_policy_file
from webhook.state.index import ClusterIndex, bulk_ingest

SIZES = (100, 10_000, 100_000)
SWEEP_RATE = 250  # requests/s: well below saturation, so latency is service time, not queueing


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench", description=__doc__)
    parser.add_argument("--seconds", type=float, default=3.0, help="length of each short load run")
    parser.add_argument("--keep", metavar="NAME", help="also write bench/results/NAME.json (a run you report)")
    parser.add_argument(
        "--quick", action="store_true", help="short runs, 2 rounds and 10,000 pods at most (a smoke run)"
    )
    args = parser.parse_args(argv)
    load.require("hey"), load.require("wrk")
    if servers.CLIENT_CPUS:
        os.sched_setaffinity(0, servers.CLIENT_CPUS)  # this process, the fake API and hey/wrk: off the server's CPUs
    seconds = 2.0 if args.quick else args.seconds
    sizes = SIZES[:2] if args.quick else SIZES
    started = time.time()
    result: dict[str, Any] = {
        "machine": report.machine(),
        "started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "cpus": {"server": sorted(servers.SERVER_CPUS or ()), "load_generators": sorted(servers.CLIENT_CPUS or ())},
    }
    with tempfile.TemporaryDirectory(prefix="saw-bench-") as tmp_dir:
        tmp = Path(tmp_dir)
        bodies = workload.review_bodies()
        files = {}
        for name, body in bodies.items():
            files[name] = tmp / f"{name}.json"
            files[name].write_bytes(body)
        certs = tmp / "certs"
        issue_certs(certs)
        policy, _ = load_policy_file(workload.POLICY)

        step("handler cost in-process")
        result["handler"] = handler.handler_costs(bodies, handler.runtime_for(workload.base_objects(), policy))

        step(f"generating a cluster of {sizes[-1]:,} pods")
        clusters = {size: workload.base_objects() + workload.bulk_objects(size) for size in sizes}
        result["ingest"] = ingest(clusters[sizes[-1]], sizes[-1])

        step("stack ratios on static state (examples/cluster.yaml)")
        with servers.static_server(tmp / "static", certs, workload.EXAMPLES / "cluster.yaml", workload.POLICY) as srv:
            result["startup"] = {"static_ready_s": round(srv.server.ready_after, 2)}
            result["stack"] = stack_ratios(srv, files, 1.0, rounds=2 if args.quick else 5)
            step("fixed rate 300/s")
            result["fixed_rate"] = fixed_rate(srv, files["mover"], 3 * seconds)
            step("64 keep-alive connections for 30 s")
            endurance = load.hey(srv.url("mutate"), files["mover"], seconds=10 if args.quick else 30, connections=64)
            result["connections_64"] = endurance.json()

        step("cluster size sweep (live state through list+watch)")
        result["sizes"] = size_sweep(tmp, certs, clusters, files, seconds)

        step(f"/mutate while the server audits {sizes[-1]:,} pods")
        result["audit"] = audit.measure(
            tmp, certs, clusters[sizes[-1]], files["mover"], seconds=20 if args.quick else 60, interval=20, rate=200
        )

    result["duration_s"] = round(time.time() - started, 1)
    result["targets"] = targets(result)
    save(result, keep=args.keep, latest="latest")
    print(summary(result))
    return 0 if all(t["met"] for t in result["targets"]) else 1


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
                    before = srv.cpu_seconds()
                    done.append(drive(srv.url(endpoint), body, seconds=seconds, connections=16))
                    cpu[endpoint].append((srv.cpu_seconds() - before) / max(1, done[-1].requests))
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
                        "cpu_us_per_request": round(statistics.median(cpu[endpoint]) * 1e6),
                        "trivial_cpu_us_per_request": round(statistics.median(cpu["allow"]) * 1e6),
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


def fixed_rate(srv: servers.Running, body: Path, seconds: float) -> dict[str, Any]:
    runs = {
        endpoint: load.hey(srv.url(endpoint), body, seconds=seconds, connections=10, rate=300)
        for endpoint in ("allow", "mutate")
    }
    return {
        "rate": 300,
        "mutate": runs["mutate"].json(),
        "trivial": runs["allow"].json(),
        "p99_ratio": round(runs["mutate"].p99_ms / runs["allow"].p99_ms, 3),
    }


def size_sweep(
    tmp: Path, certs: Path, clusters: dict[int, list[dict[str, Any]]], files: dict[str, Path], seconds: float
) -> dict[str, Any]:
    """Servers for every size at once; rounds interleave sizes so drift hits them all alike."""
    from contextlib import ExitStack

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


def targets(r: dict[str, Any]) -> list[dict[str, Any]]:
    t = report.target
    stack = r["stack"]
    sizes = r["sizes"]
    small, large = sizes[str(min(map(int, sizes)))], sizes[str(max(map(int, sizes)))]
    largest = max(map(int, sizes))
    return [
        t(
            "/mutate, /validate throughput vs trivial (worst)",
            min(x["rps_ratio"] for x in stack),
            0.8,
            at_most=False,
            unit="×",
        ),
        t(
            "/mutate, /validate server CPU per request, trivial ÷ ours (worst)",
            min(x["cpu_capacity_ratio"] for x in stack),
            0.8,
            at_most=False,
            unit="×",
        ),
        t("/mutate, /validate p99 vs trivial (worst)", max(x["p99_ratio"] for x in stack), 1.5, unit="×"),
        t(f"p50 at {largest:,} pods vs 100 pods", large["p50_ms"] / small["p50_ms"], 1.15, unit="×"),
        t(f"p99 at {largest:,} pods vs 100 pods", large["p99_ms"] / small["p99_ms"], 1.15, unit="×"),
        t("handler cost vs JSON floor (worst path)", max(x["ratio"] for x in r["handler"]), 5, unit="×"),
        t(f"RSS per worker at {largest:,} pods", max(large["worker_rss_mb"]), 200, unit=" MB"),
        t(f"start to ready at {largest:,} pods (list + ingest)", large["ready_s"], 20, unit=" s"),
        t("start to ready on static state", r["startup"]["static_ready_s"], 3, unit=" s"),
        t(
            "64 connections × 30 s: errors + timeouts",
            r["connections_64"]["errors"] + r["connections_64"]["timeouts"],
            0,
        ),
        t("fixed 300/s: /mutate p99 vs trivial", r["fixed_rate"]["p99_ratio"], 2, unit="×"),
        t(
            f"/mutate p99 during an audit of {largest:,} pods vs idle",
            r["audit"]["p99_ratio"] if r["audit"]["p99_ratio"] is not None else float("inf"),
            1.5,
            unit="×",
        ),
    ]


def summary(r: dict[str, Any]) -> str:
    lines = [
        report.table(r["targets"]),
        "",
        "| Path | Tool | Endpoint | req/s | trivial req/s | CPU µs/req | trivial CPU µs/req | p50 ms | p99 ms "
        "| trivial p99 ms |",
        "|---|---|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for x in r["stack"]:
        lines.append(
            f"| {x['path']} | {x['tool']} | /{x['endpoint']} | {x['rps']} | {x['trivial_rps']} | "
            f"{x['cpu_us_per_request']} | {x['trivial_cpu_us_per_request']} | {x['p50_ms']} | {x['p99_ms']} | "
            f"{x['trivial_p99_ms']} |"
        )
    lines += [
        "",
        "| Pods | ready s | mover p50 ms | mover p99 ms | backup p50 ms | backup p99 ms | RSS per worker MB |",
        "|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for size, x in r["sizes"].items():
        lines.append(
            f"| {int(size):,} | {x['ready_s']} | {x['p50_ms']} | {x['p99_ms']} | {x['backup_p50_ms']} | "
            f"{x['backup_p99_ms']} | {max(x['worker_rss_mb'])} |"
        )
    lines += ["", "| Handler path | µs | JSON floor µs | ratio |", "|---|---:|---:|---:|"]
    for x in r["handler"]:
        lines.append(f"| /{x['endpoint']} {x['path']} | {x['us']} | {x['floor_us']} | {x['ratio']} |")
    lines.append(
        f"\nindex ingest of {r['ingest']['pods']:,} pods: {r['ingest']['seconds']} s; run took {r['duration_s']} s"
    )
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(main())
