"""Whether Velero's node-agent runs with the ConfigMap the webhook reads (rules/loadaffinity/loaded.py): its
`--node-agent-configmap` argument (vmware-tanzu/velero pkg/cmd/cli/nodeagent/server.go, pkg/install/daemonset.go;
the Helm chart passes it only when told, vmware-tanzu/helm-charts#733) and its start against the ConfigMap's last
change, in the audit of that ConfigMap."""

from __future__ import annotations

import json
from datetime import datetime

import pytest

from rules.audit import audit_objects
from rules.loadaffinity.agents import agent_state, last_changed
from rules.loadaffinity.loaded import config_not_loaded
from rules.model import Json
from testkit import velero
from tests.support import DATA, load_yaml, policy, view_from

CLUSTER = load_yaml(DATA / "loadaffinity" / "cluster.yaml")
SOURCE = {"loadAffinitySource": {"configMap": {"namespace": "velero", "name": "node-agent-config"}}}
CHANGED = "2026-11-20T10:00:00Z"


def config_map(changed: str = CHANGED) -> Json:
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {
            "name": "node-agent-config",
            "namespace": "velero",
            "creationTimestamp": "2026-11-01T09:00:00Z",
            "managedFields": [
                {"manager": "kubectl-create", "operation": "Update", "time": "2026-11-01T09:00:00Z"},
                {"manager": "helm", "operation": "Update", "time": changed},
            ],
        },
        "data": {"node-agent-config.json": json.dumps({"podLabels": {"team": "backup"}})},
    }


def agent(node: str, args: list[str], started: str | None = "2026-11-20T11:00:00Z") -> Json:
    """A node-agent pod of `velero install` or the Helm chart with these container args, its container started
    at `started` (None: no container status, only the pod's startTime)."""
    pod = velero.node_agent_pod(node)
    pod["spec"]["containers"][0]["args"] = ["node-agent", "server", *args]
    pod["status"]["startTime"] = "2026-11-19T08:00:00Z"
    if started is not None:
        pod["status"]["containerStatuses"] = [
            {"name": "node-agent", "ready": True, "restartCount": 1, "state": {"running": {"startedAt": started}}}
        ]
    return pod


FLAG = "--node-agent-configmap=node-agent-config"


@pytest.mark.parametrize(
    ("args", "named"),
    [
        ([FLAG], "node-agent-config"),
        (["--node-agent-configmap", "node-agent-config"], "node-agent-config"),
        (["--node-agent-configmap=old", "--features=EnableCSI", FLAG], "node-agent-config"),  # pflag: the last wins
        (["--node-agent-configmap"], ""),  # no value: pflag refuses to start; nothing named
        ([], ""),
    ],
)
def test_the_flag_is_read_as_pflag_reads_it(args: list[str], named: str) -> None:
    assert agent_state(agent("n1", args)).config_map == named


def test_the_start_is_the_container_s_else_the_pod_s() -> None:
    assert agent_state(agent("n1", [FLAG])).started == "2026-11-20T11:00:00Z"
    assert agent_state(agent("n1", [FLAG], started=None)).started == "2026-11-19T08:00:00Z"


def test_last_changed_is_the_latest_managed_fields_time_else_creation() -> None:
    assert last_changed(config_map()) == CHANGED
    created = config_map()
    del created["metadata"]["managedFields"]
    assert last_changed(created) == "2026-11-01T09:00:00Z"
    assert last_changed({"metadata": {}}) == ""


def not_loaded(*agents: Json, changed: str = CHANGED, doc: Json | None = None) -> str | None:
    view = view_from(*CLUSTER, config_map(changed), *agents)
    found = config_not_loaded(view, policy(SOURCE if doc is None else doc))
    return None if found is None else f"{found.message}; remedy: {found.remedy}"


def test_a_node_agent_without_the_flag_applies_none_of_it() -> None:
    said = not_loaded(agent("n1", []), agent("n2", []))
    assert said is not None
    assert "node-agent pods run without --node-agent-configmap (vmware-tanzu/helm-charts#733)" in said
    assert "pass --node-agent-configmap=node-agent-config to the node-agent DaemonSet" in said


def test_a_node_agent_naming_another_config_map() -> None:
    said = not_loaded(agent("n1", ["--node-agent-configmap=velero-node-agent"]))
    assert said is not None and "node-agent pods name velero-node-agent" in said


def test_some_node_agents_with_it_and_some_without_during_a_rollout() -> None:
    said = not_loaded(agent("n1", [FLAG]), agent("n2", []))
    assert said is not None and "some node-agent pods run without --node-agent-configmap" in said


def test_node_agents_started_before_the_last_change_are_told_to_restart() -> None:
    said = not_loaded(agent("n1", [FLAG], started="2026-11-20T09:00:00Z"), agent("n2", [FLAG]))
    assert said == (
        "1 of 2 node-agent pods started before ConfigMap velero/node-agent-config last changed "
        f"({CHANGED}): Velero reads it only at start; restart node-agent to apply; remedy: "
        "kubectl -n velero rollout restart daemonset/node-agent"
    )


def test_nothing_when_all_is_loaded_or_nothing_can_be_compared() -> None:
    assert not_loaded(agent("n1", [FLAG]), agent("n2", [FLAG])) is None
    assert not_loaded(agent("n1", [FLAG], started=None), changed="2026-11-19T07:00:00Z") is None
    assert not_loaded() is None  # no node-agent pod known
    assert not_loaded(agent("n1", []), doc={}) is None  # no loadAffinitySource
    unknown_start = agent("n1", [FLAG], started=None)
    del unknown_start["status"]["startTime"]
    assert not_loaded(unknown_start) is None  # a start not known is not "before"


def test_the_audit_of_the_config_map_reports_it_with_its_remedy() -> None:
    cm = config_map()
    view = view_from(*CLUSTER, cm, agent("n1", []))
    (report,) = audit_objects([cm], view, policy(SOURCE), now=datetime.fromisoformat("2026-11-20T12:00:00+00:00"))
    found = [f for f in report.findings if "--node-agent-configmap" in f.message]
    assert [(f.family, f.severity) for f in found] == [("loadAffinity", "warn")]
    other = {**cm, "metadata": {**cm["metadata"], "name": "unrelated"}}
    (report,) = audit_objects([other], view, policy(SOURCE))
    assert not [f for f in report.findings if "--node-agent-configmap" in f.message]
