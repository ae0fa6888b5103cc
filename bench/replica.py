"""`python -m bench.replica`: what one replica costs in memory and API list load, by worker count.

Every worker lists and watches the whole cluster for itself, so both grow with the worker count. The run starts
the server as `serve` does against a fake API holding the benchmark's cluster, measures the API requests and the
memory once ready, then expires every watch at once (as an etcd compaction does) and measures again: each
worker lists everything a second time, while its previous index is still alive.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from bench import servers, workload
from bench.report import header, save, step
from testkit.fakeapi import FakeKubeAPI
from testkit.server import issue_certs


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.replica", description=__doc__)
    parser.add_argument("--pods", type=int, default=100_000)
    parser.add_argument("--workers", type=int, nargs="+", default=[1, 2])
    parser.add_argument("--keep", metavar="NAME", help="also write bench/results/NAME.json")
    args = parser.parse_args(argv)
    servers.off_server_cpus()
    result = header(
        pods=args.pods,
        cpus={"server": sorted(servers.SERVER_CPUS or ()), "load_generators": sorted(servers.CLIENT_CPUS or ())},
    )
    with tempfile.TemporaryDirectory(prefix="saw-replica-") as tmp_dir:
        tmp = Path(tmp_dir)
        certs = tmp / "certs"
        issue_certs(certs)
        for workers in args.workers:
            step(f"{workers} worker(s), {args.pods:,} pods")
            objects = workload.base_objects() + workload.bulk_objects(args.pods)
            result[f"workers_{workers}"] = measure(tmp / f"w{workers}", certs, objects, workers)
            del objects
    print(save(result, keep=args.keep))
    return 0


def measure(tmp: Path, certs: Path, objects: list[dict[str, Any]], workers: int) -> dict[str, Any]:
    per_worker = sum(1 for obj in objects if obj["kind"] in LISTED)
    with servers.live_server(tmp, certs, objects, workload.POLICY, str(workers), workers=workers) as srv:
        out = loaded(srv, LISTED, workers * per_worker, workers)
        assert srv.api is not None
        srv.api.expire_watches()  # as after an etcd compaction: every watch ends with 410 and its resource is listed
        wait_listed(srv.api, LISTED, 2 * workers * per_worker, workers)
        out["after_relist"] = memory(srv)
        return out


LISTED = ("Pod", "PersistentVolumeClaim", "PersistentVolume", "StorageClass", "Node")


def loaded(srv: servers.Running, kinds: tuple[str, ...], total: int, workers: int = 1) -> dict[str, Any]:
    """The replica once every worker has listed and watches `kinds` (`total` objects listed in all): the seconds to
    the first ready worker and to all loaded (/readyz answers 200 from the first worker that is ready), the API's
    list load and the memory."""
    api = srv.api
    assert api is not None
    entered = time.monotonic()
    watches = wait_listed(api, kinds, total, workers)
    return {
        "first_ready_s": round(srv.server.ready_after, 1),
        "all_loaded_s": round(srv.server.ready_after + time.monotonic() - entered, 1),
        "start": api_load(api) | {"watches_open": watches},
        "loaded": memory(srv),
    }


def wait_listed(api: FakeKubeAPI, kinds: tuple[str, ...], total: int, workers: int = 1) -> int:
    """Wait until the lists have answered `total` objects and each of `workers` watches every kind; the watches
    open."""
    deadline = time.monotonic() + 600
    while True:
        listed = sum(count for plural, count in api.listed.items() if plural != "configmaps")
        if listed >= total and all(api.watching(kind) == workers for kind in kinds):
            time.sleep(1)  # the last page ingested
            return api.watching()
        if time.monotonic() > deadline:
            raise RuntimeError(f"not listed: {dict(api.listed)}, {total} expected")
        time.sleep(0.2)


def api_load(api: FakeKubeAPI) -> dict[str, Any]:
    lists = [r for r in api.requests if r.method == "GET" and not r.watch]
    return {"list_requests": len(lists), "objects_listed": dict(api.listed), "total_listed": sum(api.listed.values())}


def memory(srv: servers.Running) -> dict[str, Any]:
    master = srv.server.process.pid
    workers = servers.worker_pids(master)
    own = servers.rss_mb(master)
    rss = [round(servers.rss_mb(p), 1) for p in workers]
    peak = [round(servers.rss_mb(p, "VmHWM"), 1) for p in workers]
    return {
        "rss_mb": {"master": round(own, 1), "workers": rss},
        "replica_rss_mb": round(own + sum(rss), 1),
        "worker_peak_rss_mb": peak,
        "replica_peak_rss_mb": round(own + sum(peak), 1),
    }


if __name__ == "__main__":
    sys.exit(main())
