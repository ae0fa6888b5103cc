"""Velero's pods as its controllers create them: one builder each for the tests, the fuzzers and the benchmark."""

from __future__ import annotations

from collections.abc import Iterable

from rules.model import Json

NAMESPACE = "velero"
IMAGE = "velero/velero:v1.17.0"
#: The `velero.io/exposer-pod-group` label of each data mover role (pkg/exposer/csi_snapshot.go, generic_restore.go).
EXPOSER_GROUPS = {"backup": "snapshot-exposer", "restore": "generic-restore-exposer"}
#: What `node_agent_pod` can build: Ready, Running but not Ready, scheduled but not started, not yet scheduled,
#: drained (still Ready, deletionTimestamp set).
AGENT_STATES = ("ready", "unready", "pending", "unscheduled", "evicting")


def node_agent_pod(
    node: str, state: str = "ready", *, namespace: str = NAMESPACE, role: str = "node-agent", windows: bool = False
) -> Json:
    """A node-agent DaemonSet pod on `node` in `state`, as a watch delivers it (vmware-tanzu/velero
    pkg/install/daemonset.go; the Windows DaemonSet is `node-agent-windows`). `role` other than `node-agent` makes
    the same pod another DaemonSet's."""
    if state not in AGENT_STATES:
        raise ValueError(f"node-agent state {state!r} is not one of {', '.join(AGENT_STATES)}")
    daemonset = "node-agent-windows" if windows else "node-agent"
    metadata: Json = {
        "name": f"{daemonset}-{node}",
        "namespace": namespace,
        "uid": f"uid-{namespace}-{daemonset}-{node}",
        "labels": {"name": daemonset, "role": role, "controller-revision-hash": "7d9f8c6b5"},
        "ownerReferences": [{"apiVersion": "apps/v1", "kind": "DaemonSet", "name": daemonset, "uid": "ds"}],
    }
    if state == "evicting":
        metadata["deletionTimestamp"] = "2026-11-23T10:00:00Z"
    spec: Json = {
        "serviceAccountName": "velero",
        "containers": [
            {
                "name": "node-agent",
                "image": IMAGE,
                "command": ["/velero"],
                "args": ["node-agent", "server"],
                "volumeMounts": [{"name": "host-pods", "mountPath": "/host_pods"}],
            }
        ],
        "volumes": [{"name": "host-pods", "hostPath": {"path": "/var/lib/kubelet/pods"}}],
    }
    if state != "unscheduled":
        spec["nodeName"] = node
    ready = "True" if state in ("ready", "evicting") else "False"
    status = {
        "phase": "Pending" if state in ("pending", "unscheduled") else "Running",
        "conditions": [{"type": t, "status": ready} for t in ("Ready", "ContainersReady")],
    }
    return {"apiVersion": "v1", "kind": "Pod", "metadata": metadata, "spec": spec, "status": status}


def exposer_pod(
    role: str = "backup", *, windows: bool = False, claims: Iterable[str] = ("data-kibishii",), node_name: str = ""
) -> Json:
    """A data mover pod as Velero's exposers create it (pkg/exposer/csi_snapshot.go createBackupPod), for a backup
    or a restore, on Linux or Windows nodes, mounting `claims`, bound to `node_name` when given."""
    group = EXPOSER_GROUPS[role]
    pod_spec: Json = {
        "topologySpreadConstraints": [
            {
                "maxSkew": 1,
                "topologyKey": "kubernetes.io/hostname",
                "whenUnsatisfiable": "ScheduleAnyway",
                "labelSelector": {"matchLabels": {"velero.io/exposer-pod-group": group}},
            }
        ],
        "os": {"name": "windows" if windows else "linux"},
        "affinity": {
            "nodeAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": {
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
        "containers": [{"name": "vgdp-7hx2q", "image": IMAGE, "command": ["/velero", "data-mover", role]}],
        "restartPolicy": "Never",
        "volumes": [{"name": c, "persistentVolumeClaim": {"claimName": c}} for c in claims],
    }
    if node_name:
        pod_spec["nodeName"] = node_name
    metadata = {"name": "vgdp-7hx2q", "namespace": NAMESPACE, "labels": {"velero.io/exposer-pod-group": group}}
    return {"apiVersion": "v1", "kind": "Pod", "metadata": metadata, "spec": pod_spec}
