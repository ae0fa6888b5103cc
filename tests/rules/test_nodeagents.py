"""Backup and restore pods and Velero's node-agents (docs/placement.md#node-agents), table-driven from
tests/data/loadaffinity/nodeagents.yaml."""

from __future__ import annotations

from typing import Any

import pytest

from rules.loadaffinity.nodeagents import node_agent_ready
from rules.model import Json
from tests.support import DATA, load_yaml, mutate_checked, policy, view_from

TABLE = load_yaml(DATA / "loadaffinity" / "nodeagents.yaml")
CLUSTER = load_yaml(DATA / "loadaffinity" / "cluster.yaml")
ROLE_LABELS = {"backup": "snapshot-exposer", "restore": "generic-restore-exposer"}
REQUIRED = ("affinity", "nodeAffinity", "requiredDuringSchedulingIgnoredDuringExecution")
RESTRICTED = "storage-affinity.io/node-agent-restricted"


def exposer_pod(spec: Json) -> Json:
    """A data mover pod as Velero's exposers create it (pkg/exposer/csi_snapshot.go createBackupPod)."""
    role = spec.get("role", "backup")
    windows = spec.get("os") == "windows"
    pod_spec: Json = {
        "topologySpreadConstraints": [
            {
                "maxSkew": 1,
                "topologyKey": "kubernetes.io/hostname",
                "whenUnsatisfiable": "ScheduleAnyway",
                "labelSelector": {"matchLabels": {"velero.io/exposer-pod-group": ROLE_LABELS[role]}},
            }
        ],
        "os": {"name": "windows" if windows else "linux"},
        "affinity": {
            "nodeAffinity": {
                REQUIRED[-1]: {
                    "nodeSelectorTerms": [
                        {
                            "matchExpressions": [
                                {
                                    "key": "kubernetes.io/os",
                                    "operator": "In" if windows else "NotIn",
                                    "values": ["windows"],
                                }
                            ]
                        }
                    ]
                }
            }
        },
        "containers": [
            {"name": "vgdp-7hx2q", "image": "velero/velero:v1.17.0", "command": ["/velero", "data-mover", role]}
        ],
        "restartPolicy": "Never",
        "volumes": [
            {"name": c, "persistentVolumeClaim": {"claimName": c}} for c in spec.get("claims", ["data-kibishii"])
        ],
    }
    if spec.get("nodeName"):
        pod_spec["nodeName"] = spec["nodeName"]
    labels = {"velero.io/exposer-pod-group": ROLE_LABELS[role]}
    metadata = {"name": "vgdp-7hx2q", "namespace": "velero", "labels": labels}
    return {"apiVersion": "v1", "kind": "Pod", "metadata": metadata, "spec": pod_spec}


def agent_pod(node: str, state: str, namespace: str = "velero") -> Json:
    """A node-agent DaemonSet pod (vmware-tanzu/velero pkg/install/daemonset.go) on `node`, in `state`."""
    windows = node == "n3"
    meta: Json = {
        "name": f"node-agent{'-windows' if windows else ''}-{node}",
        "namespace": namespace,
        "labels": {"name": "node-agent-windows" if windows else "node-agent", "role": "node-agent"},
    }
    spec: Json = {
        "containers": [
            {"name": "node-agent", "image": "velero/velero:v1.17.0", "command": ["/velero"], "args": ["node-agent"]}
        ],
        "volumes": [{"name": "host-pods", "hostPath": {"path": "/var/lib/kubelet/pods"}}],
    }
    if state != "unscheduled":
        spec["nodeName"] = node
    phase = "Pending" if state in ("pending", "unscheduled") else "Running"
    ready = "True" if state in ("ready", "evicting") else "False"
    if state == "evicting":
        meta["deletionTimestamp"] = "2026-11-23T10:00:00Z"
    status = {"phase": phase, "conditions": [{"type": "Ready", "status": ready}]}
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": spec, "status": status}


def agents(case: Json) -> list[Json]:
    namespace = case.get("agent_namespace", "velero")
    pods = [agent_pod(node, state, namespace) for node, state in (case.get("agents") or {}).items()]
    pods += [agent_pod(node, state) for node, state in (case.get("other_agents") or {}).items()]
    return pods


def dig(obj: Any, *path: str) -> Any:
    for part in path:
        if not isinstance(obj, dict) or part not in obj:
            return None
        obj = obj[part]
    return obj


@pytest.mark.parametrize("case", TABLE["cases"], ids=[c["name"] for c in TABLE["cases"]])
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
