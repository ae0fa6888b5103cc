"""`python -m bench.distinct`: worker memory under a stream of distinct reviews must stay flat.

Anything the webhook remembers per distinct input (a memo, an intern table, a metric's label set) grows with
hostile or merely varied traffic unless it is bounded. This drives the real Flask app in-process, with metrics in
multiprocess mode as `serve` runs them, through N reviews that are all different: new names, namespaces, labels,
annotations, node affinity values, kinds and operations, broken and sound. It reports the process RSS after the
first 1,000 reviews and then every 10 % of the run, and the size of every bounded table at the end.

RSS of one in-process app is what one gunicorn worker holds: the worker runs the same app.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import random
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = ROOT / "examples"
WARM_UP = 1_000


def rss_mb() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise RuntimeError("no VmRSS in /proc/self/status")


def _word(rng: random.Random, i: int) -> str:
    return f"{rng.choice('abcdefghijklmnopqrstuvwxyz')}{i:x}{rng.randrange(1 << 20):x}"


def _namespace(rng: random.Random, w: str, role_labels: dict[str, str]) -> str:
    """A backup or restore pod lives in Velero's namespace (where the policy trusts it) half the time, so the
    load-affinity path is measured too; elsewhere it claims a role it is not trusted with."""
    if "velero.io/exposer-pod-group" in role_labels and rng.random() < 0.5:
        return "velero"
    return f"ns-{w}" if rng.random() < 0.5 else "shop"


def _pod(rng: random.Random, i: int, role_labels: dict[str, str]) -> dict[str, Any]:
    w = _word(rng, i)
    labels = {f"{w}.example.com/k{j}": f"v{w}{j}" for j in range(rng.randrange(1, 4))} | role_labels
    term = {"matchExpressions": [{"key": f"zone-{w}", "operator": "In", "values": [f"z{w}", f"y{w}"]}]}
    pod: dict[str, Any] = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": f"p-{w}",
            "namespace": _namespace(rng, w, role_labels),
            "labels": labels,
            "annotations": {f"note.example.com/{w}": w * 3},
        },
        "spec": {
            "containers": [{"name": "c", "image": f"registry.example/{w}:1"}],
            "volumes": [{"name": "d", "persistentVolumeClaim": {"claimName": rng.choice(("data-db-0", f"c-{w}"))}}],
            "affinity": {
                "nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [term]}}
            },
            "tolerations": [{"key": f"t-{w}", "operator": "Exists", "effect": "NoSchedule"}],
        },
    }
    if rng.random() < 0.3:
        pod["metadata"]["annotations"]["storage-affinity.io/load-affinity"] = json.dumps(
            [{"nodeSelector": {"matchLabels": {f"disk-{w}": "ssd"}}, "storageClass": "gp3"}]
        )
    if rng.random() < 0.2:
        pod["metadata"]["annotations"]["antiaffinity.volumes.csi-baremetal.dell.com/labels"] = f"app={w}:shop"
    return pod


def _config_map(rng: random.Random, i: int) -> dict[str, Any]:
    w = _word(rng, i)
    if rng.random() < 0.5:
        data = {"policy.yaml": f"enforcement: warn\nexcludedNamespaces: [ns-{w}]\n"}
        metadata = {
            "name": "storage-affinity-policy",
            "namespace": "saw",
            "labels": {"storage-affinity.io/policy": "true"},
        }
    else:
        config = {"loadAffinity": [{"nodeSelector": {"matchLabels": {f"k-{w}": w}}, "storageClass": f"sc-{w}"}]}
        data = {"node-agent-config.json": json.dumps(config)}
        metadata = {"name": "node-agent-config", "namespace": "velero"}
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": metadata, "data": data}


ROLES: tuple[dict[str, str], ...] = (
    {},
    {"app.kubernetes.io/created-by": "volsync"},
    {"velero.io/exposer-pod-group": "snapshot-exposer"},
    {"velero.io/exposer-pod-group": "generic-restore-exposer"},
)


def reviews(count: int, seed: int = 1) -> Iterator[bytes]:
    """`count` distinct AdmissionReview bodies: pods of every role, Jobs, ConfigMaps, and one in ten with a kind
    or an operation no real API server sends."""
    rng = random.Random(seed)
    for i in range(count):
        roll = rng.random()
        if roll < 0.15:
            obj = _config_map(rng, i)
        elif roll < 0.3:
            template = _pod(rng, i, rng.choice(ROLES))
            obj = {
                "apiVersion": "batch/v1",
                "kind": "Job",
                "metadata": {"name": f"j-{i}", "namespace": "shop"},
                "spec": {"template": {"metadata": template["metadata"], "spec": template["spec"]}},
            }
        else:
            obj = _pod(rng, i, rng.choice(ROLES))
        group, _, version = obj["apiVersion"].rpartition("/")
        kind = obj["kind"] if rng.random() < 0.9 else f"Kind{i}"
        operation = rng.choice(("CREATE", "CREATE", "UPDATE")) if rng.random() < 0.9 else f"OP{i}"
        request = {
            "uid": f"uid-{i}",
            "kind": {"group": group, "version": version, "kind": kind},
            "operation": operation,
            "namespace": obj["metadata"]["namespace"],
            "name": obj["metadata"]["name"],
            "object": obj,
            "oldObject": obj if operation == "UPDATE" else None,
            "userInfo": {"username": f"user-{i}"},
        }
        yield json.dumps({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": request}).encode()


def table_sizes() -> dict[str, int]:
    """The size of every table the webhook keeps across requests."""
    from rules.kube import names
    from webhook import metrics
    from webhook.state import sharing

    return {
        "names: label key memo": names._cached_label_key_error.cache_info().currsize,
        "names: label value memo": names._cached_label_value_error.cache_info().currsize,
        "index: shared values": len(sharing.SHARED),
        "metrics: request series": metrics.render()[0].count(b"\nstorage_affinity_admission_requests_total{"),
    }


def run(count: int) -> dict[str, Any]:
    from rules.policy import parse_policy_text
    from webhook.app.endpoints import create_app
    from webhook.runtime import Runtime
    from webhook.state.static import load_static_state

    policy = parse_policy_text((EXAMPLES / "policy-load-affinity.yaml").read_text())
    runtime = Runtime(policy=policy, view=load_static_state([EXAMPLES / "cluster.yaml"]), namespace="saw")
    client = create_app(runtime).test_client()
    marks = sorted({WARM_UP, *(count * k // 10 for k in range(1, 11))})
    points: list[dict[str, Any]] = []
    statuses: dict[int, int] = {}
    for i, body in enumerate(reviews(count), 1):
        endpoint = "/mutate" if i % 2 else "/validate"
        answer = client.post(endpoint, data=body, content_type="application/json")
        statuses[answer.status_code] = statuses.get(answer.status_code, 0) + 1
        if i in marks:
            gc.collect()
            points.append({"reviews": i, "rss_mb": round(rss_mb(), 1)})
            print(f"{i:>8} reviews: RSS {points[-1]['rss_mb']} MB", flush=True)
    first = next(p["rss_mb"] for p in points if p["reviews"] == WARM_UP)
    growth = points[-1]["rss_mb"] / first - 1
    return {"points": points, "growth": growth, "statuses": statuses, "tables": table_sizes()}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.distinct", description=__doc__)
    parser.add_argument("--reviews", type=int, default=100_000)
    parser.add_argument("--max-growth", type=float, default=0.10, help="allowed RSS growth after the warm-up")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="distinct-metrics-") as metrics_dir:
        os.environ["PROMETHEUS_MULTIPROC_DIR"] = metrics_dir  # before the app imports prometheus_client
        result = run(max(args.reviews, WARM_UP))
    print(json.dumps({k: v for k, v in result.items() if k != "points"}, indent=1))
    print(f"RSS growth after the first {WARM_UP:,} reviews: {100 * result['growth']:+.1f} %")
    return 0 if result["growth"] <= args.max_growth else 1


if __name__ == "__main__":
    sys.exit(main())
