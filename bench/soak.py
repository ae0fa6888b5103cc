"""`make soak`: a fixed request rate for minutes while the cluster churns; memory and latency must stay flat.

The server runs on live state (list+watch from an API server holding 10,000 pods) while pods that mount claims
are created and deleted and the mover's anchor is modified, so every watch path and index update runs under
load. Load comes in windows; after each, worker RSS and the window's latency are recorded. Growth compares the
last window with the first after warm-up; drift compares the median p99 of the last three windows with the first
three (medians, because a single window's p99 on a shared machine is noisy).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import threading
from pathlib import Path
from typing import Any

from bench import load, report, servers, workload
from bench.report import RESULTS, step
from testkit.fakeapi import FakeKubeAPI
from testkit.server import issue_certs

RATE = 200  # requests/s
CHURN = 40  # pod creations (and as many deletions) per second
LIVE_CHURN_PODS = 400


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.soak", description=__doc__)
    parser.add_argument("--seconds", type=int, default=300, help="total load time")
    parser.add_argument("--window", type=int, default=30, help="seconds per measurement window")
    args = parser.parse_args(argv)
    load.require("hey")
    servers.off_server_cpus()
    windows = max(4, args.seconds // args.window)
    result = report.header(rate=RATE, churn_per_s=CHURN, windows=[])
    with tempfile.TemporaryDirectory(prefix="saw-soak-") as tmp_dir:
        tmp = Path(tmp_dir)
        body = workload.review_file(tmp)
        certs = tmp / "certs"
        issue_certs(certs)
        objects = workload.base_objects() + workload.bulk_objects(10_000)
        with servers.live_server(tmp / "live", certs, objects, workload.POLICY, "soak") as srv:
            assert srv.api is not None
            churn = Churn(srv.api)
            churn.start()
            workers = servers.worker_pids(srv.server.process.pid)
            try:
                for i in range(windows):
                    run = load.hey(srv.url("mutate"), body, seconds=args.window, connections=8, rate=RATE)
                    window = {"window": i, **run.json(), "worker_rss_mb": srv.worker_rss_mb(), "churned": churn.done}
                    result["windows"].append(window)
                    step(
                        f"window {i + 1}/{windows}: p99 {run.p99_ms:.1f} ms, RSS {window['worker_rss_mb']} MB, "
                        f"{run.errors} errors, {churn.done} pod changes"
                    )
            finally:
                churn.stop()
            result["workers_replaced"] = servers.worker_pids(srv.server.process.pid) != workers
            result["still_placing"] = still_placing(srv, body)
    result["targets"] = targets(result)
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "soak-latest.json").write_text(json.dumps(result, indent=2) + "\n")
    print(report.table(result["targets"]))
    return 0 if all(t["met"] for t in result["targets"]) else 1


class Churn:
    """Creates and deletes pods that mount claims, and modifies the mover's anchor, at a steady pace."""

    def __init__(self, api: FakeKubeAPI) -> None:
        self.api, self.done = api, 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join()

    def _run(self) -> None:
        i = 0
        while not self._stop.wait(1 / CHURN):
            name = f"churn-{i:07d}"
            claim = f"data-{i % 50}"  # claims shared by several churn pods: their claim → pods entries change often
            self.api.create(workload.bulk_pod("team-00", name, "node-00001", claim))
            if i >= LIVE_CHURN_PODS:
                self.api.delete("Pod", "team-00", f"churn-{i - LIVE_CHURN_PODS:07d}")
            if i % 20 == 0:
                anchor = self.api.get("Pod", "shop", "db-0")
                assert anchor is not None
                anchor["metadata"].setdefault("labels", {})["churn"] = str(i)
                self.api.update(anchor)
            i += 1
            self.done += 1


def still_placing(srv: servers.Running, body: Path) -> bool:
    """After the churn, the mover is still placed next to its anchor (the state followed every change)."""
    with srv.server.session() as session:
        answer = session.post(srv.url("mutate"), data=body.read_bytes(), timeout=10).json()
    return bool(answer["response"].get("patch"))


def targets(r: dict[str, Any]) -> list[dict[str, Any]]:
    t = report.target
    windows = r["windows"][1:]  # the first is warm-up
    first, last = windows[0], windows[-1]
    growth = max((b - a) / a for a, b in zip(first["worker_rss_mb"], last["worker_rss_mb"], strict=True))
    early = statistics.median(w["p99_ms"] for w in windows[:3])
    late = statistics.median(w["p99_ms"] for w in windows[-3:])
    return [
        t("RSS growth per worker (worst)", 100 * growth, 5, unit=" %"),
        t("p99 drift (last 3 windows vs first 3)", 100 * (late - early) / early, 10, unit=" %"),
        t("errors + timeouts", sum(w["errors"] + w["timeouts"] for w in r["windows"]), 0),
        t("workers replaced", int(r["workers_replaced"]), 0),
        t("mover still placed after the churn", int(r["still_placing"]), 1, at_most=False),
    ]


if __name__ == "__main__":
    sys.exit(main())
