"""`python -m bench.deadline`: what the review deadline leaves to the reviews and probes beside a slow one.

On the real server (one gunicorn gevent worker, TLS), served with testkit/slowrule.py's rule, which spends the CPU
time a pod's label asks for in each webhook, checking the deadline as every rule's loops do:

- `beside_slow_reviews`: one connection sends reviews that would run forever (the deadline stops each webhook's
  rules at 100 ms of CPU time) back to back; meanwhile `/healthz`, `/readyz` and a trivial `/mutate` are sent on
  their own connections every 50 ms. Targets: probes within 1 s, the trivial review within 0.5 s;
- `during_audits`: the server audits every second 20 stored storage pods that each cost 90 ms in each webhook (under
  the deadline: audited every run, never refused), and the same probes run meanwhile;
- `workload_lists`: 100 Deployments of 1.25 MiB listed from the fake API as the audit lists them, in a child
  process each way: pages of 500 whole objects against pages of PAGE_SIZE trimmed ones (peak RSS, and the longest
  step between two yields: one page's decode).
"""

from __future__ import annotations

import argparse
import copy
import json
import resource
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from rules.model import Json
from testkit import slowrule, yamldocs
from testkit.reviews import admission_review
from testkit.server import Server, running_server

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = ROOT / "examples"
PROBE_EVERY_S = 0.05
SLOW_SENDERS = 1


def _pod(name: str, spin: str | None) -> Json:

    pod: Json = copy.deepcopy(yamldocs.load((EXAMPLES / "stuck-mover-pod.yaml").read_text()))
    pod["metadata"]["name"] = name
    if spin is not None:
        pod["metadata"]["labels"][slowrule.SPIN_LABEL] = spin
    return pod


def _cluster(tmp: Path, stored: list[Json]) -> Path:

    objects = [obj for doc in yamldocs.load_all((EXAMPLES / "cluster.yaml").read_text()) for obj in doc["items"]]
    path = tmp / "cluster.json"
    path.write_text(json.dumps({"apiVersion": "v1", "kind": "List", "items": [*objects, *stored]}))
    return path


def _probes(server: Server, seconds: float) -> dict[str, list[float]]:
    """Each probe's latencies, one every PROBE_EVERY_S on its own connection, for `seconds`."""
    trivial = json.dumps(admission_review("CREATE", _pod("trivial", None))).encode()
    found: dict[str, list[float]] = {"healthz": [], "readyz": [], "trivial_mutate": []}

    def probe(name: str) -> None:
        with server.session() as session:
            session.get(f"{server.url}/healthz", timeout=30)  # the handshake is not counted
            ends = time.monotonic() + seconds
            while time.monotonic() < ends:
                started = time.perf_counter()
                if name == "trivial_mutate":
                    response = session.post(
                        f"{server.url}/mutate", data=trivial, headers={"Content-Type": "application/json"}, timeout=30
                    )
                else:
                    response = session.get(f"{server.url}/{name}", timeout=30)
                found[name].append(time.perf_counter() - started)
                response.raise_for_status()
                time.sleep(PROBE_EVERY_S)

    threads = [threading.Thread(target=probe, args=(name,)) for name in found]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return found


def _summary(latencies: dict[str, list[float]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for name, values in latencies.items():
        ordered = sorted(values)
        out[name] = {
            "count": len(values),
            "p50_ms": round(ordered[len(ordered) // 2] * 1000, 1),
            "max_ms": round(ordered[-1] * 1000, 1),
        }
    return out


def beside_slow_reviews(tmp: Path, seconds: float) -> dict[str, Any]:
    cluster = _cluster(tmp, [])
    slow = json.dumps(admission_review("CREATE", _pod("slow", slowrule.FOREVER))).encode()
    answered: list[tuple[float, str]] = []
    stop = threading.Event()
    with running_server(tmp, "--cluster", str(cluster), workers=1, program="testkit.slowrule") as server:

        def send(endpoint: str) -> None:
            with server.session() as session:
                while not stop.is_set():
                    started = time.perf_counter()
                    response = session.post(
                        f"{server.url}/{endpoint}", data=slow, headers={"Content-Type": "application/json"}, timeout=60
                    )
                    message = response.json()["response"]["status"]["message"]
                    answered.append((time.perf_counter() - started, message))

        senders = [
            threading.Thread(target=send, args=("mutate" if i % 2 == 0 else "validate",)) for i in range(SLOW_SENDERS)
        ]
        for sender in senders:
            sender.start()
        time.sleep(0.5)
        probes = _probes(server, seconds)
        stop.set()
        for sender in senders:
            sender.join()
    return {
        "slow_reviews": len(answered),
        "slow_review_max_ms": round(max(t for t, _ in answered) * 1000, 1),
        "slow_review_p50_ms": round(sorted(t for t, _ in answered)[len(answered) // 2] * 1000, 1),
        "refused_naming_the_deadline": sum("past the review deadline" in m for _, m in answered),
        **_summary(probes),
    }


def during_audits(tmp: Path, seconds: float, stored: int = 20, spin_ms: int = 90) -> dict[str, Any]:
    cluster = _cluster(tmp, [_pod(f"costly-{i}", str(spin_ms)) for i in range(stored)])
    args = ("--cluster", str(cluster), "--audit-interval", "1")
    with running_server(tmp, *args, workers=1, program="testkit.slowrule") as server:
        time.sleep(1.5)
        probes = _probes(server, seconds)
        log = server.log.read_text()
    return {
        "stored_pods": stored,
        "each_webhook_ms": spin_ms,
        "audits": log.count("webhook.audit.loop: audit: "),
        "refused": log.count("not audited again until it changes"),
        **_summary(probes),
    }


_LISTER = """
import json, sys, time
from pathlib import Path
from kubernetes import client
from webhook.state.apisource import load_configuration
from webhook.state.watch import list_pages
from webhook.audit import workloads
configuration, _ = load_configuration(Path(sys.argv[1]))
api = client.ApiClient(configuration)
steps = []
real = json.loads
def timed(data, *a, **k):
    started = time.perf_counter()
    try:
        return real(data, *a, **k)
    finally:
        steps.append(time.perf_counter() - started)
json.loads = timed
if sys.argv[2] == "whole":
    call = client.AppsV1Api(api).list_deployment_for_all_namespaces
    held = list(list_pages(call, page_size=500, timeout=60))
else:
    held = list(workloads.list_workloads(api))
# VmHWM, not ru_maxrss: the latter keeps the parent's peak across fork and exec
peak = next(int(line.split()[1]) for line in open("/proc/self/status") if line.startswith("VmHWM:"))
print(json.dumps({"objects": len(held), "peak_rss_mb": round(peak / 1024, 1),
                  "longest_decode_ms": round(max(steps) * 1000, 1)}))
"""


def workload_lists(tmp: Path, count: int = 100, mib: float = 1.25) -> dict[str, Any]:
    from testkit.fakeapi import running_fake_api

    filler = "x" * int(mib * 1024 * 1024 / 10)
    out: dict[str, Any] = {"deployments": count, "each_mib": mib}
    with running_fake_api() as api:
        for i in range(count):
            env = [{"name": f"V{j}", "value": filler} for j in range(10)]
            api.create(
                {
                    "apiVersion": "apps/v1",
                    "kind": "Deployment",
                    "metadata": {"name": f"big-{i}", "namespace": "shop"},
                    "spec": {
                        "selector": {"matchLabels": {"app": "big"}},
                        "template": {
                            "metadata": {"labels": {"app": "big"}},
                            "spec": {"containers": [{"name": "c", "image": "nginx", "env": env}]},
                        },
                    },
                }
            )
        kubeconfig = api.write_kubeconfig(tmp / "kubeconfig")
        for way in ("whole", "trimmed"):
            done = subprocess.run(
                [sys.executable, "-c", _LISTER, str(kubeconfig), way],
                cwd=ROOT,
                check=False,
                capture_output=True,
                text=True,
            )
            if done.returncode:
                raise RuntimeError(done.stderr[-3000:])
            out[way] = json.loads(done.stdout)
    return out


def main() -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.deadline")
    parser.add_argument("--seconds", type=float, default=10.0)
    args = parser.parse_args()
    result: dict[str, Any] = {}
    with tempfile.TemporaryDirectory() as tmp:
        base = Path(tmp)
        for name, run in (
            ("beside_slow_reviews", lambda d: beside_slow_reviews(d, args.seconds)),
            ("during_audits", lambda d: during_audits(d, args.seconds)),
            ("workload_lists", workload_lists),
        ):
            where = base / name
            where.mkdir()
            result[name] = run(where)
            print(name, json.dumps(result[name]), file=sys.stderr, flush=True)
    result["max_rss_mb_bench"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
