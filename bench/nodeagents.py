"""`python -m bench.nodeagents`: what following Velero's node-agents costs, by node count (one node-agent per node).

- readiness: a LiveClusterState lists every kind from the fake API (real HTTP, the real client) until `loaded()`,
  with a pod on every node labelled as Velero's node-agent or as another DaemonSet's (the same list, so the
  difference is the indexing alone);
- memory: what the index holds (tracemalloc) in both cases, per node-agent pod;
- reviews: a backup pod without a claim (Velero's exposer shape, testkit/velero.py) through the mutating pipeline,
  when every node has a Ready node-agent (the common case: no patch) and after one became unready (the restriction
  is written), first review after the change (snapshots and memos rebuilt) and the ones after;
- patch size: the restriction's JSON Patch in both representations, naming every node with a node-agent (`In`, one
  term per node) or excluding the few without (`NotIn`), so the `nodeAgent.maxNodeNames` default can be judged.

Run it small in development (`--nodes 100 1000`); `--nodes 100 1000 10000` is the claim's scale.
"""

from __future__ import annotations

import argparse
import gc
import statistics
import sys
import tempfile
import time
import tracemalloc
from collections.abc import Callable
from pathlib import Path
from typing import Any

import orjson

from bench import workload
from bench.report import header, save, step
from rules import pipeline
from rules.loadaffinity.nodeagents import restriction
from rules.model import Json, Subject
from rules.policy import default_policy
from testkit.fakeapi import running_fake_api
from testkit.velero import NAMESPACE, exposer_pod, node_agent_pod
from webhook.state.apisource import load_configuration
from webhook.state.index import ClusterIndex, bulk_ingest
from webhook.state.live import LiveClusterState
from webhook.state.watch import LiveOptions


def cluster(nodes: int, agents: bool) -> list[Json]:
    """`nodes` nodes and a pod on each: Velero's node-agents, or (agents False) the same pods under another role,
    which the index does not keep: the difference is what following node-agents costs, the list being the same."""
    names = [workload.node(i) for i in range(nodes)]
    role = "node-agent" if agents else "other-daemon"
    return names + [node_agent_pod(n["metadata"]["name"], role=role) for n in names]


def readiness(tmp: Path, objects: list[Json]) -> float:
    """Seconds from start() to every resource listed once, against a fake API holding `objects`."""
    with running_fake_api(*objects) as api:
        configuration, _ = load_configuration(api.write_kubeconfig(tmp / "kubeconfig"))
        state = LiveClusterState(configuration, LiveOptions(namespace="webhook-system", policy_configmap=""))
        started = time.monotonic()
        state.start()
        try:
            while not state.loaded():
                time.sleep(0.005)
            return time.monotonic() - started
        finally:
            state.stop()


def index_bytes(objects: list[Json]) -> int:
    gc.collect()
    tracemalloc.start()
    before = tracemalloc.get_traced_memory()[0]
    index = ClusterIndex()
    with bulk_ingest():
        for obj in objects:
            index.apply(obj)
    index.node_agents(NAMESPACE)
    index.node_set()
    held = tracemalloc.get_traced_memory()[0] - before
    tracemalloc.stop()
    del index
    return held


def timed(call: Callable[[], Any], repeat: int) -> list[float]:
    out = []
    for _ in range(repeat):
        started = time.perf_counter()
        call()
        out.append((time.perf_counter() - started) * 1000)
    return out


def reviews(nodes: int) -> dict[str, Any]:
    index = ClusterIndex()
    with bulk_ingest():
        for obj in cluster(nodes, agents=True):
            index.apply(obj)
    policy = default_policy()
    pod = exposer_pod(claims=())

    def review() -> Any:
        return pipeline.mutate(
            Subject(kind="Pod", operation="CREATE", namespace=NAMESPACE, name="p", obj=pod), index, policy
        )

    first_ready = timed(review, 1)
    ready = timed(review, 200)
    assert review().patch == []
    index.apply(node_agent_pod("node-00000", "unready"))
    first_restricted = timed(review, 1)
    restricted = timed(review, 200)
    patch = review().patch
    return {
        "all_ready_first_ms": round(first_ready[0], 3),
        "all_ready_p50_ms": round(statistics.median(ready), 3),
        "one_missing_first_ms": round(first_restricted[0], 3),
        "one_missing_p50_ms": round(statistics.median(restricted), 3),
        "one_missing_patch_bytes": len(orjson.dumps(patch)),
    }


def patch_sizes(nodes: int) -> dict[str, int]:
    """Bytes of the restriction's terms in each representation, a tenth of the nodes without a node-agent."""
    index = ClusterIndex()
    for obj in cluster(nodes, agents=False):
        index.apply(obj)
    names = [f"node-{i:05d}" for i in range(nodes)]
    without = frozenset(names[: max(1, nodes // 10)])
    with_agent = frozenset(names) - without
    terms = [{"matchExpressions": [{"key": "kubernetes.io/os", "operator": "NotIn", "values": ["windows"]}]}]
    node_set = index.node_set()
    named = restriction(node_set, terms, with_agent, without, cap=len(with_agent))
    excluded = restriction(node_set, terms, with_agent, without, cap=len(without))  # too small for the named form
    assert named is not None and named[0] == "In" and excluded is not None and excluded[0] == "NotIn"
    return {
        "named_nodes": len(with_agent),
        "named_bytes": len(orjson.dumps(named[1])),
        "excluded_nodes": len(without),
        "excluded_bytes": len(orjson.dumps(excluded[1])),
    }


def measure(tmp: Path, nodes: int) -> dict[str, Any]:
    """Readiness, index memory, review cost and patch sizes at `nodes` nodes, one node-agent each."""
    without, with_agents = cluster(nodes, agents=False), cluster(nodes, agents=True)
    index_bytes(
        with_agents
    )  # warm-up: caches filled on the first ingest (compiled patterns, memos) are not the index's
    bare, full = index_bytes(without), index_bytes(with_agents)
    return {
        "ready_s_other_daemon": round(readiness(tmp, without), 3),
        "ready_s_with_agents": round(readiness(tmp, with_agents), 3),
        "index_bytes_other_daemon": bare,
        "index_bytes_with_agents": full,
        "bytes_per_agent_pod": round((full - bare) / nodes),
        "reviews": reviews(nodes),
        "patch": patch_sizes(nodes),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.nodeagents", description=__doc__)
    parser.add_argument("--nodes", type=int, nargs="+", default=[100, 1_000, 10_000])
    parser.add_argument("--keep", metavar="NAME", help="also write bench/results/NAME.json")
    args = parser.parse_args(argv)
    result = header()
    with tempfile.TemporaryDirectory(prefix="saw-nodeagents-") as tmp_dir:
        for nodes in args.nodes:
            step(f"{nodes:,} nodes, one node-agent each")
            result[f"nodes_{nodes}"] = measure(Path(tmp_dir), nodes)
    print(save(result, keep=args.keep))
    return 0


if __name__ == "__main__":
    sys.exit(main())
