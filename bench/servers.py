"""The servers under test: started by the e2e launcher (`serve` exactly as users run it), inspected via /proc."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

from bench.load import Run
from rules.model import Json
from testkit.fakeapi import FakeKubeAPI
from testkit.server import Server, running_server


def split_cpus() -> tuple[set[int] | None, set[int] | None]:
    """(server CPUs, load generator CPUs): halves of the machine, so the client never takes CPU from the server
    unevenly between the endpoints compared. None on a single CPU."""
    cpus = sorted(os.sched_getaffinity(0))
    if len(cpus) < 2:
        return None, None
    half = len(cpus) // 2
    return set(cpus[:half]), set(cpus[half:])


SERVER_CPUS, CLIENT_CPUS = split_cpus()


def off_server_cpus() -> None:
    """Run this process, and what it starts (the fake API, hey, wrk), on the load generators' half only."""
    if CLIENT_CPUS:
        os.sched_setaffinity(0, CLIENT_CPUS)


def worker_pids(master: int) -> list[int]:
    """gunicorn's workers: the master's children."""
    return [int(pid) for pid in Path(f"/proc/{master}/task/{master}/children").read_text().split()]


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")  # utime, stime


def rss_mb(pid: int, field: str = "VmRSS") -> float:
    """Resident memory now (VmRSS) or at its peak so far (VmHWM)."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(f"{field}:"):
            return int(line.split()[1]) / 1024
    raise RuntimeError(f"no {field} for {pid}")


@dataclass
class Running:
    server: Server
    name: str
    api: FakeKubeAPI | None = None

    def url(self, endpoint: str) -> str:
        return f"{self.server.url}/{endpoint}"

    def cpu_seconds(self) -> float:
        """User + system CPU of the master and its workers so far."""
        pids = [self.server.process.pid, *worker_pids(self.server.process.pid)]
        return sum(cpu_seconds(pid) for pid in pids)

    def measured(self, drive: Callable[[], Run]) -> tuple[Run, float]:
        """A load run and the server CPU µs it cost per request (master and workers, from /proc)."""
        before = self.cpu_seconds()
        run = drive()
        return run, (self.cpu_seconds() - before) / max(1, run.requests) * 1e6

    def worker_rss_mb(self) -> list[float]:
        return [round(rss_mb(pid), 1) for pid in worker_pids(self.server.process.pid)]


@contextlib.contextmanager
def static_server(
    tmp: Path, certs: Path, cluster: Path, policy: Path, *, workers: int = 1, extra: tuple[str, ...] = ()
) -> Iterator[Running]:
    """State from a manifest file, as `make run` serves; `extra` arguments to `serve`."""
    tmp.mkdir(parents=True)
    args = ("--cluster", str(cluster), "--policy", str(policy), "--trivial-endpoint", *extra)
    with running_server(tmp, *args, workers=workers, certs=certs, cpus=SERVER_CPUS) as server:
        yield Running(server, "static")


@contextlib.contextmanager
def live_server(
    tmp: Path,
    certs: Path,
    objects: list[Json],
    policy: Path,
    name: str,
    *,
    workers: int = 1,
    extra: tuple[str, ...] = (),
    served_groups: bool = True,
) -> Iterator[Running]:
    """State listed and watched from an API server holding `objects` (the same ingest path as production);
    `served_groups=False`: a cluster without the snapshot, KubeVirt and CDI CRDs."""
    tmp.mkdir(parents=True)
    api = FakeKubeAPI(bookmark_interval=30.0)  # the default 0.2 s would put bookmark traffic into the latencies
    if not served_groups:
        api.served_groups.clear()
    api.seed(objects)
    api.start()
    try:
        kubeconfig = api.write_kubeconfig(tmp / "kubeconfig")
        args = ("--kubeconfig", str(kubeconfig), "--policy", str(policy), "--trivial-endpoint", *extra)
        with running_server(tmp, *args, workers=workers, certs=certs, ready_timeout=180, cpus=SERVER_CPUS) as server:
            yield Running(server, name, api)
    finally:
        api.stop()
