"""The in-server audit publishes, per loadAffinity entry in force, its matching nodes with and without a Ready
Velero node-agent (`storage_affinity_load_affinity_nodes`)."""

from __future__ import annotations

from prometheus_client import REGISTRY

from rules.model import Json
from tests.rules.test_nodeagents import CLUSTER, ENTRIES, TABLE, agent_pod
from tests.support import policy, view_from
from webhook.audit.loop import AuditLoop
from webhook.runtime import Runtime


def nodes(entry: str, storage_class: str, node_agent: str) -> float | None:
    labels = {"entry": entry, "storage_class": storage_class, "node_agent": node_agent}
    return REGISTRY.get_sample_value("storage_affinity_load_affinity_nodes", labels)


def runtime(doc: Json, *agents: Json) -> Runtime:
    view = view_from(*CLUSTER, *TABLE["nodes"], *agents)
    return Runtime(policy=policy(doc), view=view, namespace="saw", policy_source="test")


def test_entries_are_published_with_and_without_node_agents_and_vanish_with_their_entry() -> None:
    rt = runtime({"loadAffinity": ENTRIES}, agent_pod("n1", "ready"), agent_pod("n2", "unready"))
    loop = AuditLoop(rt, interval=60)
    loop.run_once()
    assert (nodes("0", "standard", "ready"), nodes("0", "standard", "missing")) == (0, 2)  # n2 and n4
    assert (nodes("1", "*", "ready"), nodes("1", "*", "missing")) == (1, 0)

    rt.policy = policy({"loadAffinity": ENTRIES[1:]})
    loop.run_once()
    assert nodes("0", "standard", "missing") is None
    assert (nodes("0", "*", "ready"), nodes("0", "*", "missing")) == (1, 0)
