"""Velero node-agents followed live from the pod list+watch, and what admission makes of them, on the fake API:
an autoscaler adding a node whose node-agent comes up step by step, and a node-agent evicted then deleted."""

from __future__ import annotations

from typing import Any

from rules import pipeline
from rules.loadaffinity.agents import NodeAgents
from testkit.fakeapi import FakeKubeAPI
from tests.rules.test_nodeagents import RESTRICTED, agent_pod, exposer_pod
from tests.state.conftest import Live, eventually
from tests.state.objects import node
from tests.support import subject


def linux(name: str) -> dict[str, Any]:
    return node(name, **{"kubernetes.io/os": "linux"})


def mutate(state: Any, runtime: Any) -> list[str] | None:
    """The restriction a new backup pod gets now: the patch's annotation value, or None (no restriction)."""
    decision = pipeline.mutate(subject(exposer_pod({"claims": []})), state, runtime.policy)
    assert decision.failure is None
    values = [op["value"] for op in decision.patch if op["path"].startswith("/metadata/annotations")]
    for value in values:
        if isinstance(value, dict) and RESTRICTED in value:
            return [value[RESTRICTED], *decision.warnings]
    return [*decision.warnings] or None


def ready(state: Any) -> frozenset[str]:
    agents: NodeAgents = state.node_agents("velero")
    return agents.ready


def test_autoscaled_node_is_left_out_until_its_node_agent_is_ready(fake_api: FakeKubeAPI, live: Live) -> None:
    for name in ("n1", "n2"):
        fake_api.create(linux(name))
        fake_api.create(agent_pod(name, "ready"))
    state, runtime = live()
    eventually(runtime.ready)
    assert ready(state) == {"n1", "n2"}
    assert mutate(state, runtime) is None  # every node has one: no patch at all

    fake_api.create(linux("n3"))  # the autoscaler adds a node: its node-agent pod is not even created yet
    eventually(lambda: state.index.node("n3") is not None)
    assert mutate(state, runtime) == ["In 2"]

    fake_api.create(agent_pod("n3", "unscheduled"))  # the DaemonSet controller creates it
    eventually(lambda: state.node_agents("velero").pods == 3)
    assert mutate(state, runtime) == ["In 2"]
    for step in ("pending", "unready"):  # scheduled, then running but not Ready
        fake_api.update(agent_pod("n3", step))
        eventually(lambda: state.index.node_agents("velero").pods == 3)
        assert mutate(state, runtime) == ["In 2"]
    fake_api.update(agent_pod("n3", "ready"))
    eventually(lambda: ready(state) == {"n1", "n2", "n3"})
    assert mutate(state, runtime) is None


def test_evicted_node_agent_drops_its_node_then_the_last_one_leaves_a_warning(
    fake_api: FakeKubeAPI, live: Live
) -> None:
    for name in ("n1", "n2"):
        fake_api.create(linux(name))
        fake_api.create(agent_pod(name, "ready"))
    state, runtime = live()
    eventually(runtime.ready)

    fake_api.update(agent_pod("n2", "evicting"))  # drained: deletionTimestamp set, still Running for a while
    eventually(lambda: ready(state) == {"n1"})
    assert mutate(state, runtime) == ["In 1"]
    fake_api.delete("Pod", "velero", "node-agent-n2")
    eventually(lambda: state.node_agents("velero").pods == 1)
    assert mutate(state, runtime) == ["In 1"]

    fake_api.update(agent_pod("n1", "unready"))
    eventually(lambda: not ready(state))
    assert mutate(state, runtime) == [
        "no Ready node-agent on any of 2 nodes matching its own constraints: the data mover would wait"
    ]
    fake_api.delete("Pod", "velero", "node-agent-n1")
    eventually(lambda: not state.node_agents("velero").known)
    assert mutate(state, runtime) is None  # none known at all: nothing is claimed


def test_a_relist_after_the_watch_expired_keeps_the_node_agents(fake_api: FakeKubeAPI, live: Live) -> None:
    fake_api.create(linux("n1"))
    fake_api.create(agent_pod("n1", "ready"))
    state, runtime = live()
    eventually(runtime.ready)
    with fake_api.silently():  # missed while the watch was down: only the re-list can tell
        fake_api.update(agent_pod("n1", "unready"))
    fake_api.expire_watches("Pod")
    eventually(lambda: not ready(state))
    assert state.node_agents("velero").pods == 1


def test_the_node_agent_bench_runs_at_a_small_scale(capsys: Any) -> None:
    import json

    from bench import nodeagents

    assert nodeagents.main(["--nodes", "20"]) == 0
    result = json.loads(capsys.readouterr().out)["nodes_20"]
    assert result["reviews"]["one_missing_patch_bytes"] > 0
    assert result["patch"]["named_nodes"] == 18 and result["patch"]["excluded_nodes"] == 2
    assert result["index_bytes_with_agents"] > result["index_bytes_other_daemon"]


def test_a_tainted_or_cordoned_node_is_seen_at_once(fake_api: FakeKubeAPI, live: Live) -> None:
    """The node set rules read is rebuilt when a node's taints or cordon change, not only its labels: a node the
    backup pod does not tolerate is no place for it, so it no longer counts as one without a node-agent."""
    for name in ("n1", "n2", "n3"):
        fake_api.create(linux(name))
    for name in ("n1", "n2"):
        fake_api.create(agent_pod(name, "ready"))
    state, runtime = live()
    eventually(runtime.ready)
    assert mutate(state, runtime) == ["In 2"]

    tainted = {**linux("n3"), "spec": {"taints": [{"key": "gpu", "value": "true", "effect": "NoSchedule"}]}}
    fake_api.update(tainted)
    eventually(lambda: (state.index.node("n3") or {}).get("spec", {}).get("taints"))
    assert mutate(state, runtime) is None  # n1 and n2 are all it may use, and both have one

    fake_api.update({**linux("n3"), "spec": {"unschedulable": True}})  # the taint removed, the node cordoned
    eventually(lambda: (state.index.node("n3") or {}).get("spec") == {"unschedulable": True})
    assert mutate(state, runtime) == ["In 2"]
    (n3,) = [n for n in state.node_set() if n["metadata"]["name"] == "n3"]
    assert n3["spec"] == {"unschedulable": True}  # what the audit's NodeCordoned cause reads
