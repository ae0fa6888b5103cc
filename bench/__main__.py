"""`python -m bench`: one run of every measurement, results to bench/results/latest.json and a table on stdout.

Every comparison is a ratio taken within this run (our endpoint vs the trivial one on the same server, 100,000
pods vs 100 pods interleaved round by round), because absolute numbers on a shared machine drift.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from bench import (
    apicost,
    audit,
    cost,
    costfuzz,
    datasources,
    flood,
    floor,
    handler,
    hostile,
    instructions,
    load,
    nodeagents,
    report,
    saturation,
    servers,
    workload,
)
from bench.report import save, step
from bench.stack import (
    FIXED_RATE,
    FIXED_RATE_PATHS,
    NODE_COUNTS,
    below_goal,
    fixed_rate,
    fixed_rate_targets,
    ingest,
    node_sweep,
    size_sweep,
    stack_ratios,
    stack_targets,
)
from testkit.server import issue_certs
from webhook.policy.file import load_policy_file

SIZES = (100, 10_000, 100_000)
#: What saturates the server in the fairness step: the floor, and the two costliest review paths.
SATURATED = (("allow", "mover"), ("mutate", "mover"), ("mutate", "backup"))
#: The cluster the data-source step adds to the largest one: VolumeSnapshots (with contents) and VirtualMachines.
SNAPSHOTS, VMS = 10_000, 1_000


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench", description=__doc__)
    parser.add_argument("--seconds", type=float, default=3.0, help="length of each short load run")
    parser.add_argument("--keep", metavar="NAME", help="also write bench/results/NAME.json (a run you report)")
    parser.add_argument(
        "--quick", action="store_true", help="short runs, 2 rounds and 10,000 pods at most (a smoke run)"
    )
    args = parser.parse_args(argv)
    load.require("hey"), load.require("wrk")
    servers.off_server_cpus()
    seconds = 2.0 if args.quick else args.seconds
    sizes = SIZES[:2] if args.quick else SIZES
    started = time.time()
    result = report.header(
        cpus={"server": sorted(servers.SERVER_CPUS or ()), "load_generators": sorted(servers.CLIENT_CPUS or ())}
    )
    with tempfile.TemporaryDirectory(prefix="saw-bench-") as tmp_dir:
        tmp = Path(tmp_dir)
        bodies = workload.review_bodies()
        files = {name: workload.review_file(tmp, name) for name in bodies}
        certs = tmp / "certs"
        issue_certs(certs)
        policy, _ = load_policy_file(workload.POLICY)

        step("instructions per review (callgrind), against the baseline commit")
        result["instructions"] = {"counts": instructions.measure(), "baseline": instructions.baseline()}

        step("handler cost in-process")
        result["handler"] = handler.handler_costs(bodies, handler.runtime_for(workload.base_objects(), policy))

        step("the floor: a bare WSGI app on the same gunicorn, gevent and TLS, against /allow")
        result["floor"] = floor.measure(
            tmp / "floor", certs, files["mover"], seconds=2.0, rounds=2 if args.quick else 3
        )

        step(f"generating a cluster of {sizes[-1]:,} pods")
        clusters = {size: workload.base_objects() + workload.bulk_objects(size) for size in sizes}
        result["ingest"] = ingest(clusters[sizes[-1]], sizes[-1])

        step("stack ratios on static state (examples/cluster.yaml)")
        with servers.static_server(tmp / "static", certs, workload.EXAMPLES / "cluster.yaml", workload.POLICY) as srv:
            result["startup"] = {"static_ready_s": round(srv.server.ready_after, 2)}
            result["stack"] = stack_ratios(srv, files, 1.0, rounds=2 if args.quick else 5)
            step(f"fixed rate {FIXED_RATE}/s")
            result["fixed_rate"] = fixed_rate(srv, files, 2 * seconds, rounds=2 if args.quick else 3)
            step("saturated by 16 kept-alive connections, new connections probed meanwhile")
            result["saturation"] = [
                saturation.measure(srv.server.url, files[path], ca=srv.server.ca, seconds=2 * seconds, endpoint=ep)
                | {"path": path}
                for ep, path in SATURATED
            ]
            step("64 keep-alive connections for 30 s")
            endurance = load.hey(srv.url("mutate"), files["mover"], seconds=10 if args.quick else 30, connections=64)
            result["connections_64"] = endurance.json()

        step("cluster size sweep (live state through list+watch)")
        result["sizes"] = size_sweep(tmp, certs, clusters, files, seconds)

        step(f"the backup path at {' and '.join(f'{n:,}' for n in NODE_COUNTS)} nodes")
        result["nodes"] = node_sweep(tmp, certs, files["backup"], seconds)

        step(f"/mutate while the server audits {sizes[-1]:,} pods")
        result["audit"] = audit.measure(
            tmp, certs, clusters[sizes[-1]], files["mover"], seconds=20 if args.quick else 60, interval=20, rate=200
        )

        step(f"Velero node-agents at {' and '.join(f'{n:,}' for n in NODE_COUNTS)} nodes")
        (tmp / "nodeagents").mkdir()
        result["node_agents"] = {str(n): nodeagents.measure(tmp / "nodeagents", n) for n in NODE_COUNTS}

        snapshots, vms = (SNAPSHOTS // 10, VMS // 10) if args.quick else (SNAPSHOTS, VMS)
        step(f"data sources: {sizes[-1]:,} pods with {snapshots:,} snapshots and {vms:,} VMs")
        result["data_sources"] = datasources.both(tmp / "datasources", certs, clusters[sizes[-1]], snapshots, vms)

        (tmp / "hostile").mkdir()
        result["hostile"] = hostile.measure(tmp / "hostile", certs, audit_seconds=5 if args.quick else 10)
        (tmp / "apicost").mkdir()
        result["apicost"] = apicost.measure(tmp / "apicost", certs)
        (tmp / "cost").mkdir()
        result["cost"] = cost.measure(tmp / "cost", certs, cost.NODE_COUNTS[:1] if args.quick else cost.NODE_COUNTS)
        result["costfuzz"] = costfuzz.measure(costfuzz.NODE_COUNTS[:1] if args.quick else costfuzz.NODE_COUNTS)

        step(f"new connections during a flood of {flood.IDLE_TCP:,} idle and {flood.STALLED_TLS} stalled connections")
        result["flood"] = flood.runs(flood.SAMPLES, flood.IDLE_TCP, flood.STALLED_TLS, tmp / "flood")

    result["duration_s"] = round(time.time() - started, 1)
    result["targets"] = targets(result)
    save(result, keep=args.keep, latest="latest")
    print(summary(result))
    return 0 if all(t["met"] for t in result["targets"]) else 1


def targets(r: dict[str, Any]) -> list[dict[str, Any]]:
    t = report.target
    wrk = [x for x in r["stack"] if x["tool"] == "wrk"]
    sizes = r["sizes"]
    small, large = sizes[str(min(map(int, sizes)))], sizes[str(max(map(int, sizes)))]
    largest = max(map(int, sizes))
    fewer, more = (r["nodes"][str(n)] for n in NODE_COUNTS)
    saturated = r["saturation"]
    out = [
        *instructions.targets(r["instructions"]["counts"], r["instructions"]["baseline"]),
        *stack_targets(r["stack"]),
        t(
            "server CPU per request, /allow ÷ ours (worst, wrk)",
            min(x["cpu_capacity_ratio"] for x in wrk),
            0.9,
            at_most=False,
            unit="×",
        ),
        *fixed_rate_targets(r["fixed_rate"]),
        *audit.targets(r["audit"]),
        t(
            "saturated, 16 connections: requests over 1 s (all runs)",
            sum(x["saturated"]["over_1s"] + x["saturated"]["errors"] for x in saturated),
            0,
        ),
        t(
            "saturated: p99 ÷ p50 (worst)",
            max(x["saturated"]["p99_ms"] / x["saturated"]["p50_ms"] for x in saturated),
            10,
            unit="×",
        ),
        t(
            "saturated: a new connection's first answer, p99 (worst)",
            max(_new_connection_p99(x) for x in saturated),
            100,
            unit=" ms",
        ),
        t(
            f"backup /mutate CPU per request at {NODE_COUNTS[1]:,} vs {NODE_COUNTS[0]:,} nodes",
            more["mutate"]["cpu_us_per_request"] / fewer["mutate"]["cpu_us_per_request"],
            1.15,
            unit="×",
        ),
        t(
            f"backup /mutate p99 at {NODE_COUNTS[1]:,} vs {NODE_COUNTS[0]:,} nodes",
            more["mutate"]["p99_ms"] / fewer["mutate"]["p99_ms"],
            1.15,
            unit="×",
        ),
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
    ]
    out += _later_targets(r)
    return out


def _later_targets(r: dict[str, Any]) -> list[dict[str, Any]]:
    """Node-agents, data sources, the connection flood, hostile objects and what they cost the API server."""
    t = report.target
    agents = [r["node_agents"][str(n)] for n in NODE_COUNTS]
    sources = r["data_sources"]
    out = [
        t(
            f"node-agents: start to ready at {NODE_COUNTS[1]:,} nodes, node-agent pods ÷ another DaemonSet's",
            agents[1]["ready_s_with_agents"] / agents[1]["ready_s_other_daemon"],
            1.25,
            unit="×",
        ),
        # Bytes per pod step between about 110 and 320 as the index's hash tables double (1,000: 108, 5,000: 182,
        # 10,000: 322, 20,000: 182), so the bound is on the size, not a ratio between two counts.
        t(
            f"node-agents: index bytes per node-agent pod at {NODE_COUNTS[1]:,} nodes",
            agents[1]["bytes_per_agent_pod"],
            512,
            unit=" B",
        ),
        t(
            f"node-agents: backup review p50 at {NODE_COUNTS[1]:,} vs {NODE_COUNTS[0]:,} nodes",
            agents[1]["reviews"]["all_ready_p50_ms"] / agents[0]["reviews"]["all_ready_p50_ms"],
            1.5,
            unit="×",
        ),
        t(
            "data sources: replica RSS with snapshots and VMs followed ÷ without the groups",
            sources["with_groups"]["loaded"]["replica_rss_mb"] / sources["without_groups"]["loaded"]["replica_rss_mb"],
            1.25,
            unit="×",
        ),
        t(
            "data sources: start to every list loaded, with the groups ÷ without",
            sources["with_groups"]["all_loaded_s"] / sources["without_groups"]["all_loaded_s"],
            1.5,
            unit="×",
        ),
        *flood.targets(r["flood"]),
    ]
    out += r["hostile"]["targets"]  # the review budget: hostile objects and the reviews beside them (bench/hostile.py)
    out += r["apicost"]["targets"]  # what hostile objects cost the API server and the report writer (bench/apicost.py)
    out += r["cost"][
        "targets"
    ]  # the issue's crafted objects on the real server, beside them and audited (bench/cost.py)
    out += r["costfuzz"]["targets"]  # every shape grown one dimension at a time, timed (bench/costfuzz.py)
    return out


def _new_connection_p99(run: dict[str, Any]) -> float:
    new = run["new_connection"]
    return float("inf") if new["failures"] or not new["count"] else float(new["p99_ms"])


def summary(r: dict[str, Any]) -> str:
    lines = [
        report.table(r["targets"]),
        "",
        "| Path | Tool | Endpoint | req/s | /allow req/s | ratio (median, rounds) | CPU µs/req | /allow CPU µs/req "
        "| p50 ms | p99 ms | /allow p99 ms |",
        "|---|---|---|---:|---:|---|---:|---:|---:|---:|---:|",
    ]
    for x in r["stack"]:
        rounds = ", ".join(f"{v:.2f}" for v in x["rps_ratios"])
        lines.append(
            f"| {x['path']} | {x['tool']} | /{x['endpoint']} | {x['rps']} | {x['trivial_rps']} | "
            f"{x['rps_ratio']:.2f} ({rounds}) | {x['cpu_us_per_request']} | {x['trivial_cpu_us_per_request']} | "
            f"{x['p50_ms']} | {x['p99_ms']} | {x['trivial_p99_ms']} |"
        )
    fixed = r["fixed_rate"]
    lines += ["", below_goal(r["stack"])]
    lines += ["", f"| Fixed {fixed['rate']}/s | /mutate p50 ms | /mutate p99 ms | /allow p99 ms | p99 ratio (rounds) |"]
    lines.append("|---|---:|---:|---:|---|")
    for path in FIXED_RATE_PATHS:
        x = fixed[path]
        lines.append(
            f"| {path} | {x['mutate']['p50_ms']} | {x['mutate']['p99_ms']} | {x['trivial']['p99_ms']} | "
            f"{x['p99_ratio']:.2f} ({', '.join(f'{v:.2f}' for v in x['p99_ratios'])}) |"
        )
    lines += [
        "",
        "| Saturated (16 kept-alive wrk connections) | req/s | p50 ms | p99 ms | max ms | > 1 s | new connections "
        "| new p50 ms | new p99 ms | new max ms |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for x in r["saturation"]:
        sat, new = x["saturated"], x["new_connection"]
        lines.append(
            f"| {x['path']} /{x['endpoint']} | {sat['rps']} | {sat['p50_ms']} | {sat['p99_ms']} | {sat['max_ms']} | "
            f"{sat['over_1s']} | {new['count']} ({new['failures']} failed) | {new['p50_ms']} | {new['p99_ms']} | "
            f"{new['max_ms']} |"
        )
    floor_server = r["floor"]["server"]
    lines += ["", "| Floor (server CPU µs per request, median of rounds) | µs | req/s |", "|---|---:|---:|"]
    for name, x in floor_server.items():
        lines.append(f"| {name} | {x['cpu_us_per_request']} | {x['rps']} |")
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
    lines += [
        "",
        "| Nodes | backup /mutate p50 ms | p99 ms | CPU µs/req | backup /validate p50 ms | p99 ms | CPU µs/req |",
        "|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for count, x in r["nodes"].items():
        m, v = x["mutate"], x["validate"]
        lines.append(
            f"| {int(count):,} | {m['p50_ms']} | {m['p99_ms']} | {m['cpu_us_per_request']} | {v['p50_ms']} | "
            f"{v['p99_ms']} | {v['cpu_us_per_request']} |"
        )
    lines += ["", "| Handler path | µs | JSON floor µs | ratio |", "|---|---:|---:|---:|"]
    for x in r["handler"]:
        lines.append(f"| /{x['endpoint']} {x['path']} | {x['us']} | {x['floor_us']} | {x['ratio']} |")
    lines += [
        "",
        "| Nodes | ready s, node-agents | ready s, other DaemonSet | bytes per node-agent | backup review p50 ms "
        "| first review after one went unready ms |",
        "|---:|---:|---:|---:|---:|---:|",
    ]
    for count, x in r["node_agents"].items():
        lines.append(
            f"| {int(count):,} | {x['ready_s_with_agents']} | {x['ready_s_other_daemon']} | "
            f"{x['bytes_per_agent_pod']} | {x['reviews']['all_ready_p50_ms']} | "
            f"{x['reviews']['one_missing_first_ms']} |"
        )
    lines += ["", "| Data sources | first ready s | all loaded s | replica RSS MB |", "|---|---:|---:|---:|"]
    for name, x in r["data_sources"].items():
        lines.append(f"| {name} | {x['first_ready_s']} | {x['all_loaded_s']} | {x['loaded']['replica_rss_mb']} |")
    lines += ["", flood.runs_table(r["flood"])]
    lines.append(
        f"\nindex ingest of {r['ingest']['pods']:,} pods: {r['ingest']['seconds']} s; run took {r['duration_s']} s"
    )
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(main())
