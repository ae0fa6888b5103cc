"""`python -m bench.staticfiles`: static files and review bodies at the sizes an operator (or a tenant) reaches.

Measured, each in a fresh process of the code tree `--root` (this one by default: give an older checkout to
compare), one run:

- reading a JSON List of `--list-mb` MB (`load_documents`), and the same objects as YAML;
- refusing a deeply nested document: 1 MB in a file (flow and block YAML, JSON), and 100 KB as the policy of a
  policy ConfigMap (`policy_from_config_map`, as a review of it reads it);
- decoding a 2.7 MiB review body whose annotation holds a run of digits (`load_json`), against one without;
- `serve --cluster` of a JSON dump of `--serve-mb` MB and of `--list-mb` MB: seconds from start to `/readyz`;
- `audit --cluster` of `--audit-pods` pods with their nodes, claims and PVs: wall seconds and peak RSS
  (`/usr/bin/time -v`).

The cluster is bench/workload.py's `bulk_objects`: full pods as a watch delivers them, a fifth with a claim and
its PV, a node per 100 pods, written as one compact `kind: List`.
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import requests
import yaml

from bench.servers import cpu_seconds, worker_pids
from bench.workload import bulk_objects
from testkit.server import free_port, issue_certs

ROOT = Path(__file__).resolve().parent.parent
MB = 1_000_000

_IN_PROCESS = r"""
import json, sys, time
from pathlib import Path
from rules.safeload import load_documents, load_json
from rules.policy import PolicyError, policy_from_config_map
tmp = Path(sys.argv[1])
out = {}
def timed(name, call, repeat=1):
    best = None
    for _ in range(repeat):
        start, cpu = time.perf_counter(), time.process_time()
        try:
            call()
            result = "read"
        except Exception as exc:
            result = type(exc).__name__ + ": " + str(exc)[-60:]
        took = (time.perf_counter() - start, time.process_time() - cpu)
        best = took if best is None else min(best, took)
    out[name] = {"seconds": round(best[0], 4), "cpu": round(best[1], 4), "result": result}
for name in ("list.json", "list.yaml", "deep-flow.yaml", "deep-block.yaml", "deep.json"):
    text = (tmp / name).read_text()
    timed(name, lambda: load_documents(text, name))
config_map = json.loads((tmp / "deep-policy-configmap.json").read_text())
timed("deep policy ConfigMap", lambda: policy_from_config_map(config_map))
for name in ("body-digits.json", "body-plain.json"):
    body = (tmp / name).read_bytes()
    timed(name, lambda: load_json(body), repeat=5)
print(json.dumps(out))
"""


def write_files(tmp: Path, list_mb: float, serve_mb: float, audit_pods: int) -> dict[str, Path]:
    """The inputs, each written once."""
    files: dict[str, Path] = {}
    per_pod = len(json.dumps({"items": bulk_objects(1_000)}, separators=(",", ":"))) / 1_000  # and its share
    for name, pods in (
        ("list", int(list_mb * MB / per_pod)),
        ("serve", int(serve_mb * MB / per_pod)),
        ("audit", audit_pods),
    ):
        doc = {"apiVersion": "v1", "kind": "List", "items": json.loads(json.dumps(bulk_objects(pods)))}
        files[name] = tmp / f"{name}.json"
        files[name].write_text(json.dumps(doc, separators=(",", ":")))
        if name == "list":
            (tmp / "list.yaml").write_text(yaml.safe_dump(doc, sort_keys=False))
            (tmp / "list.json").write_text(files[name].read_text())
    depth = MB // 2
    (tmp / "deep-flow.yaml").write_text("a: " + "[" * depth + "]" * depth + "\n")
    (tmp / "deep.json").write_text('{"a":' * (MB // 6) + "1" + "}" * (MB // 6))
    block, size, level = [], 0, 0
    while size < MB:  # `- ` nests a list per two columns: a block document as deep as a megabyte allows
        line = "  " * level + "-\n"
        block.append(line)
        size, level = size + len(line), level + 1
    (tmp / "deep-block.yaml").write_text("".join(block))
    deep_policy = "excludedNamespaces: " + "[" * 50_000 + "]" * 50_000 + "\n"
    meta = {"name": "storage-affinity-policy", "namespace": "saw-system"}
    policy_map = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": meta, "data": {"policy.yaml": deep_policy}}
    (tmp / "deep-policy-configmap.json").write_text(json.dumps(policy_map))
    for name, digits in (("body-digits.json", "1" * 19), ("body-plain.json", "")):
        pod = {"metadata": {"name": "p", "annotations": {f"k{i}": f"v{digits}{'x' * 40}" for i in range(40_000)}}}
        review = {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": {"object": pod}}
        (tmp / name).write_text(json.dumps(review))
    return files


def in_process(root: Path, tmp: Path) -> dict[str, Any]:
    done = subprocess.run(
        [sys.executable, "-c", _IN_PROCESS, str(tmp)], cwd=root, capture_output=True, text=True, check=True
    )
    result: dict[str, Any] = json.loads(done.stdout)
    return result


def serve_ready(root: Path, tmp: Path, cluster: Path, timeout: float) -> tuple[float, float]:
    """Seconds from `serve --cluster` starting to its first 200 from /readyz, and the CPU seconds its master and
    worker had spent by then (on a shared machine, the figure that does not depend on the neighbours)."""
    certs = tmp / "certs"
    if not certs.exists():
        issue_certs(certs)
    port = free_port()
    metrics = tmp / f"metrics-{port}"
    metrics.mkdir()
    command = [sys.executable, "-m", "webhook", "serve", "--bind", f"127.0.0.1:{port}", "--workers", "1"]
    command += ["--cert", str(certs / "tls.crt"), "--key", str(certs / "tls.key"), "--cluster", str(cluster)]
    command += ["--namespace", "saw-system", "--audit-interval", "0"]
    env = {"PROMETHEUS_MULTIPROC_DIR": str(metrics), "PATH": "/usr/bin:/bin"}
    started = time.monotonic()
    process = subprocess.Popen(command, cwd=root, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        while time.monotonic() - started < timeout:
            if process.poll() is not None:
                raise RuntimeError(f"serve exited with {process.returncode}")
            try:
                url = f"https://localhost:{port}/readyz"
                if requests.get(url, verify=str(certs / "ca.crt"), timeout=1).status_code == 200:
                    ready = time.monotonic() - started
                    pids = [process.pid, *worker_pids(process.pid)]
                    return ready, sum(cpu_seconds(pid) for pid in pids)
            except requests.RequestException:
                pass
            time.sleep(0.05)
        return float("inf"), float("inf")
    finally:
        process.terminate()
        process.wait(timeout=30)


def audit_cost(root: Path, cluster: Path) -> tuple[float, float, float]:
    """(wall seconds, CPU seconds, peak RSS in MB) of `audit --cluster`."""
    command = ["/usr/bin/time", "-v", sys.executable, "-m", "webhook", "audit", "--cluster", str(cluster)]
    done = subprocess.run([*command, "-o", "json"], cwd=root, capture_output=True, text=True, check=False)
    if done.returncode not in (0, 1):
        raise RuntimeError(done.stderr[-2000:])
    wall = re.search(r"Elapsed \(wall clock\) time.*: (?:(\d+):)?(\d+):([\d.]+)", done.stderr)
    rss = re.search(r"Maximum resident set size \(kbytes\): (\d+)", done.stderr)
    cpu = re.findall(r"(?:User|System) time \(seconds\): ([\d.]+)", done.stderr)
    assert wall and rss and cpu, done.stderr[-2000:]
    hours, minutes, seconds = int(wall[1] or 0), int(wall[2]), float(wall[3])
    return hours * 3600 + minutes * 60 + seconds, sum(map(float, cpu)), int(rss[1]) / 1024


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.staticfiles", description=__doc__.split("\n\n")[0])
    parser.add_argument("--root", type=Path, default=ROOT, help="the code tree measured (default: this one)")
    parser.add_argument("--list-mb", type=float, default=5.8, help="size of the JSON List read (default 5.8)")
    parser.add_argument("--serve-mb", type=float, default=20.0, help="size of the dump served (default 20)")
    parser.add_argument("--audit-pods", type=int, default=20_000, help="pods of the audited dump (default 20,000)")
    parser.add_argument("--timeout", type=float, default=600.0, help="longest wait for serve to be ready")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="staticfiles-") as name:
        tmp = Path(name)
        files = write_files(tmp, args.list_mb, args.serve_mb, args.audit_pods)
        sizes = {key: round(path.stat().st_size / MB, 1) for key, path in files.items()}
        print(f"code: {args.root}; files (MB): {sizes}", flush=True)
        print("wall and CPU seconds", flush=True)
        for key, measured in in_process(args.root, tmp).items():
            print(f"{key:28} {measured['seconds']:>9.3f} {measured['cpu']:>9.3f}  {measured['result']}", flush=True)
        for key in ("list", "serve"):
            ready, cpu = serve_ready(args.root, tmp, files[key], args.timeout)
            print(f"serve --cluster {sizes[key]:>5} MB    {ready:>9.2f} {cpu:>9.2f}  to /readyz", flush=True)
        wall, cpu, rss = audit_cost(args.root, files["audit"])
        audited = f"audit --cluster {args.audit_pods} pods"
        print(f"{audited:28} {wall:>9.1f} {cpu:>9.1f}  {rss:.0f} MB peak RSS ({sizes['audit']} MB)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
