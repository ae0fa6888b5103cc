"""Backup and restore pods and Velero's node-agents (docs/placement.md#node-agents-for-backup-and-restore-pods),
table-driven from tests/data/loadaffinity/nodeagents.yaml."""

from __future__ import annotations

from typing import Any

import pytest

from rules.annotations import NODE_AGENT_RESTRICTED
from rules.loadaffinity.nodeagents import node_agent_ready
from rules.model import Json
from testkit import velero
from tests.support import DATA, dig, load_yaml, mutate_checked, policy, table_cases, view_from

NODEAGENTS_KEYS = {"agent_namespace", "agents", "cluster", "expect", "name", "other_agents", "pod", "policy", "source"}

TABLE = load_yaml(DATA / "loadaffinity" / "nodeagents.yaml")
CLUSTER = load_yaml(DATA / "loadaffinity" / "cluster.yaml")
REQUIRED = ("affinity", "nodeAffinity", "requiredDuringSchedulingIgnoredDuringExecution")
RESTRICTED = NODE_AGENT_RESTRICTED


def exposer_pod(spec: Json) -> Json:
    """The table's `pod`: a data mover pod (testkit/velero.py) of `role`, for `os`, mounting `claims`."""
    return velero.exposer_pod(
        spec.get("role", "backup"),
        windows=spec.get("os") == "windows",
        claims=spec.get("claims", ["data-kibishii"]),
        node_name=spec.get("nodeName") or "",
    )


def agent_pod(node: str, state: str, namespace: str = "velero") -> Json:
    """The table's node-agent on `node` in `state`; the one on n3, a Windows node, is the Windows DaemonSet's."""
    return velero.node_agent_pod(node, state, namespace=namespace, windows=node == "n3")


def agents(case: Json) -> list[Json]:
    namespace = case.get("agent_namespace", "velero")
    pods = [agent_pod(node, state, namespace) for node, state in (case.get("agents") or {}).items()]
    pods += [agent_pod(node, state) for node, state in (case.get("other_agents") or {}).items()]
    return pods


@pytest.mark.parametrize(
    "case", table_cases(DATA / "loadaffinity" / "nodeagents.yaml", NODEAGENTS_KEYS, section="cases")
)
def test_node_agents(case: Json) -> None:
    pod = exposer_pod(case.get("pod") or {})
    view = view_from(*CLUSTER, *TABLE["nodes"], *TABLE["claims"], *(case.get("cluster") or ()), *agents(case))
    decision, result = mutate_checked(pod, view, policy(case.get("policy") or {}))
    expect = case["expect"]
    assert decision.failure is None
    assert decision.warnings == expect.get("warnings", [])
    terms = dig(result["spec"], *REQUIRED, "nodeSelectorTerms")
    assert terms == expect.get("terms", dig(pod["spec"], *REQUIRED, "nodeSelectorTerms"))
    assert dig(result, "metadata", "annotations", RESTRICTED) == expect.get("restricted")


def test_every_state_of_the_table_is_exercised() -> None:
    states = {state for case in TABLE["cases"] for state in (case.get("agents") or {}).values()}
    assert states == {"ready", "unready", "pending", "evicting", "unscheduled"}


def test_node_agent_ready_for_the_stuck_pod_causes() -> None:
    view = view_from(*CLUSTER, agent_pod("n1", "ready"), agent_pod("n2", "unready"))
    assert node_agent_ready(view, "velero", "n1") is True
    assert node_agent_ready(view, "velero", "n2") is False
    assert node_agent_ready(view, "velero", "n4") is False
    assert node_agent_ready(view, "other", "n1") is None


# --- validation of the ConfigMaps and the audit --------------------------------------------------------------

ENTRIES = [
    {
        "nodeSelector": {"matchLabels": {"beta.kubernetes.io/instance-type": "Standard_B8ms"}},
        "storageClass": "standard",
    },
    {"nodeSelector": {"matchLabels": {"beta.kubernetes.io/instance-type": "Standard_B4ms"}}},
]


def _view(*extra: Json) -> Any:
    return view_from(*CLUSTER, *TABLE["nodes"], *TABLE["claims"], *extra)


B4MS_STANDARD = {
    "nodeSelector": {"matchLabels": {"beta.kubernetes.io/instance-type": "Standard_B4ms"}},
    "storageClass": "standard",
}


@pytest.mark.parametrize(
    ("entries", "ready", "counted"),
    [(ENTRIES, "n1", "the 2 nodes"), ([B4MS_STANDARD], "n2", "the 1 node")],  # n2 and n4; n1 alone
)
def test_policy_config_map_entry_without_node_agents_warns_with_class_and_counts(
    entries: Any, ready: str, counted: str
) -> None:
    import yaml

    from rules import pipeline
    from tests.support import subject

    doc = {"loadAffinity": entries, "nodeAgent": {"namespace": "velero"}}
    cm = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": "p", "namespace": "storage-affinity", "labels": {"storage-affinity.io/policy": "true"}},
        "data": {"policy.yaml": yaml.safe_dump(doc)},
    }
    view = _view(*(agent_pod(node, "ready" if node == ready else "unready") for node in ("n1", "n2")))
    decision = pipeline.validate(subject(cm), view, policy())
    assert decision.allowed
    assert decision.warnings == [
        f"data[policy.yaml].loadAffinity[0].nodeSelector: no Ready node-agent on any of {counted} it matches "
        "(StorageClass standard): its data movers would wait"
    ]
    off = {**doc, "nodeAgent": {"mode": "off"}}
    cm["data"] = {"policy.yaml": yaml.safe_dump(off)}
    assert pipeline.validate(subject(cm), view, policy()).warnings == []


def test_velero_config_map_entry_without_node_agents_warns_in_its_own_namespace() -> None:
    import json

    from rules import pipeline
    from tests.support import subject

    cm = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": "node-agent-config", "namespace": "velero"},
        "data": {"node-agent-config.json": json.dumps({"loadAffinity": ENTRIES})},
    }
    pol = policy({"loadAffinitySource": {"configMap": {"namespace": "velero", "name": "node-agent-config"}}})
    ready_everywhere = _view(*(agent_pod(n, "ready") for n in ("n1", "n2", "n4")))
    assert pipeline.validate(subject(cm), ready_everywhere, pol).warnings == []
    only_n1 = _view(agent_pod("n1", "ready"))
    assert pipeline.validate(subject(cm), only_n1, pol).warnings == [
        "data[node-agent-config.json].loadAffinity[0].nodeSelector: no Ready node-agent on any of the 2 nodes it "
        "matches (StorageClass standard): its data movers would wait"
    ]


def test_audit_flags_a_pending_data_mover_on_a_node_without_a_node_agent() -> None:
    from rules.audit import audit_objects

    waiting = exposer_pod({"nodeName": "n2"}) | {"status": {"phase": "Pending"}}
    running = exposer_pod({"nodeName": "n1"}) | {"status": {"phase": "Running"}}
    running["metadata"] = {**running["metadata"], "name": "vgdp-running"}
    view = _view(agent_pod("n1", "ready"), agent_pod("n2", "unready"))
    reports = {r.name: r for r in audit_objects([waiting, running], view, policy())}
    assert [f.as_json() for f in reports["vgdp-7hx2q"].findings] == [
        {
            "family": "nodeAgent",
            "field": "spec.nodeName",
            "message": "Pending on node n2, which has no Ready Velero node-agent: the data mover waits for one",
            "severity": "warn",
        }
    ]
    assert reports["vgdp-running"].findings == []
    assert reports["vgdp-7hx2q"].cause is None  # causes are the stuck-pod audit's; node_agent_ready feeds it


def test_audit_flags_a_pending_restore_pinned_to_its_selected_node() -> None:
    from rules.audit import audit_objects

    restore = exposer_pod({"role": "restore", "claims": ["restore-local"]}) | {"status": {"phase": "Pending"}}
    view = _view(agent_pod("n1", "ready"), agent_pod("n2", "unready"))
    (report,) = audit_objects([restore], view, policy())
    assert [(f.family, f.field) for f in report.findings if f.family == "nodeAgent"] == [("nodeAgent", "spec.affinity")]


@pytest.mark.parametrize(
    ("tolerations", "taints", "tolerated"),
    [
        ([], [{"key": "k", "value": "v", "effect": "PreferNoSchedule"}], True),  # only scores
        ([], [{"key": "k", "value": "v", "effect": "NoExecute"}], False),
        ([{"operator": "Exists"}], [{"key": "k", "value": "v", "effect": "NoSchedule"}], True),  # tolerates all
        ([{"key": "k", "operator": "Exists", "effect": "NoExecute"}], [{"key": "k", "effect": "NoSchedule"}], False),
        ([{"key": "k", "value": "v"}], [{"key": "k", "value": "v", "effect": "NoSchedule"}], True),  # Equal
        ([{"key": "k", "value": "w"}], [{"key": "k", "value": "v", "effect": "NoSchedule"}], False),
    ],
    ids=["prefer", "untolerated", "exists-everything", "other-effect", "equal", "other-value"],
)
def test_taints_as_the_scheduler_filters_them(tolerations: list[Json], taints: list[Json], tolerated: bool) -> None:
    """k8s.io/api core/v1 Toleration.ToleratesTaint and the TaintToleration filter (NoSchedule, NoExecute)."""
    from rules.kube.tolerations import node_tolerated

    assert node_tolerated(tolerations, {"spec": {"taints": taints}}) is tolerated


def test_the_restriction_reads_nodes_from_the_node_set_only() -> None:
    """The named terms cross each node with the pod's terms it matches; those nodes come from the snapshot the split
    was made on, never from a one-by-one lookup, which the live state answers with an API GET on a miss."""
    from webhook.state.index import ClusterIndex

    class NodeSetOnly(ClusterIndex):
        def node(self, name: str) -> Json | None:
            raise AssertionError(f"node {name} looked up one by one while a backup pod is admitted")

    view = NodeSetOnly()
    for obj in [*CLUSTER, *TABLE["nodes"], *TABLE["claims"], *(agent_pod(n, "ready") for n in ("n1", "n4"))]:
        view.apply(obj)
    decision, result = mutate_checked(exposer_pod({}), view, policy())
    assert decision.failure is None
    assert dig(result, "metadata", "annotations", RESTRICTED) == "In 2"
