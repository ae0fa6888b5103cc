"""What the benchmark sends and the cluster it runs against.

Reviews are shaped like kube-apiserver's: the pod arrives after defaulting and after the built-in mutating
admission plugins (service-account token volume, default tolerations), with the managedFields kubectl apply
writes. A bare example manifest would make every handler look cheaper than it is in production.
"""

from __future__ import annotations

import copy
import json
import uuid
from pathlib import Path
from typing import Any

from rules.model import Json
from rules.safeload import iter_objects, load_documents
from testkit.reviews import admission_review

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = ROOT / "examples"
POLICY = EXAMPLES / "policy-load-affinity.yaml"

#: The rule paths measured: name → example manifest.
PATHS = {
    "mover": "mover-pod.yaml",
    "backup": "backup-pod.yaml",
    "plain": "plain-pod.yaml",
}

_TOKEN_VOLUME = {
    "name": "kube-api-access-7x2kq",
    "projected": {
        "defaultMode": 420,
        "sources": [
            {"serviceAccountToken": {"expirationSeconds": 3607, "path": "token"}},
            {"configMap": {"name": "kube-root-ca.crt", "items": [{"key": "ca.crt", "path": "ca.crt"}]}},
            {
                "downwardAPI": {
                    "items": [
                        {"path": "namespace", "fieldRef": {"apiVersion": "v1", "fieldPath": "metadata.namespace"}}
                    ]
                }
            },
        ],
    },
}


def example(name: str) -> Json:
    text = (EXAMPLES / name).read_text(encoding="utf-8")
    (obj,) = iter_objects(load_documents(text, name), name)
    return obj


def admitted(pod: Json) -> Json:
    """The pod as a webhook receives it: defaulted, token volume mounted, default tolerations added."""
    pod = copy.deepcopy(pod)
    meta, spec = pod["metadata"], pod["spec"]
    meta.setdefault("uid", str(uuid.UUID(int=7)))
    meta["creationTimestamp"] = None
    meta["managedFields"] = [
        {
            "apiVersion": "v1",
            "fieldsType": "FieldsV1",
            "fieldsV1": {
                "f:spec": {"f:containers": {f'k:{{"name":"{c["name"]}"}}': {".": {}} for c in spec["containers"]}}
            },
            "manager": "kubectl-client-side-apply",
            "operation": "Update",
            "time": "2026-11-21T08:00:00Z",
        }
    ]
    spec.setdefault("restartPolicy", "Always")
    spec.update(
        dnsPolicy="ClusterFirst",
        enableServiceLinks=True,
        preemptionPolicy="PreemptLowerPriority",
        priority=0,
        schedulerName="default-scheduler",
        securityContext={},
        serviceAccount="default",
        serviceAccountName="default",
        terminationGracePeriodSeconds=30,
    )
    spec.setdefault("volumes", []).append(copy.deepcopy(_TOKEN_VOLUME))
    spec.setdefault("tolerations", []).extend(
        {"key": f"node.kubernetes.io/{taint}", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300}
        for taint in ("not-ready", "unreachable")
    )
    for container in spec["containers"]:
        container.update(
            imagePullPolicy="IfNotPresent",
            resources={},
            terminationMessagePath="/dev/termination-log",
            terminationMessagePolicy="File",
        )
        container.setdefault("volumeMounts", []).append(
            {
                "name": _TOKEN_VOLUME["name"],
                "mountPath": "/var/run/secrets/kubernetes.io/serviceaccount",
                "readOnly": True,
            }
        )
    return pod


def review(pod: Json, operation: str = "CREATE") -> Json:
    return admission_review(
        operation,
        pod,
        requestKind={"group": "", "version": "v1", "kind": "Pod"},
        requestResource={"group": "", "version": "v1", "resource": "pods"},
        userInfo={
            "username": "system:serviceaccount:volsync-system:volsync",
            "uid": "2f5e8a47-1c3b-4d0e-9f6a-5b7c8d9e0a1b",
            "groups": ["system:serviceaccounts", "system:serviceaccounts:volsync-system", "system:authenticated"],
        },
        dryRun=False,
        options={"apiVersion": "meta.k8s.io/v1", "kind": "CreateOptions"},
    )


def review_bodies() -> dict[str, bytes]:
    """Each rule path's review, serialized once, as the API server would send it."""
    return {name: json.dumps(review(admitted(example(file)))).encode() for name, file in PATHS.items()}


def review_file(tmp: Path, path: str = "mover") -> Path:
    """The review of rule path `path` written to `tmp/<path>.json`, for hey and wrk to post."""
    file = tmp / f"{path}.json"
    file.write_bytes(review_bodies()[path])
    return file


# -- the cluster --------------------------------------------------------------------------------------------


def base_objects() -> list[Json]:
    """examples/cluster.yaml: the anchor of the mover, the backup PVC and their nodes and classes."""
    text = (EXAMPLES / "cluster.yaml").read_text(encoding="utf-8")
    return list(iter_objects(load_documents(text, "cluster.yaml"), "cluster.yaml"))


def bulk_objects(pods: int) -> list[Json]:
    """`pods` pods, a fifth of them mounting their own RWO claim (with its PV), on pods/100 nodes.

    Pods are full objects as a watch delivers them (labels, owner, containers, status); the index trims them.
    """
    nodes = max(1, pods // 100)
    objects: list[Json] = [node(i) for i in range(nodes)]
    for i in range(pods):
        namespace = f"team-{i % 50:02d}"
        name = f"app-{i:06d}"
        on = f"node-{i % nodes:05d}"
        claim = f"data-{name}" if i % 5 == 0 else None
        if claim:
            objects.append(_pvc(namespace, claim, f"pv-{i:06d}"))
            objects.append(_pv(f"pv-{i:06d}", namespace, claim, on))
        objects.append(bulk_pod(namespace, name, on, claim))
    return objects


def node(i: int) -> Json:
    """Node `node-0000i`: one of three zones and three instance types, as a cloud cluster has them."""
    name = f"node-{i:05d}"
    zone = f"eu-west-1{'abc'[i % 3]}"
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": name,
            "labels": {
                "kubernetes.io/hostname": name,
                "kubernetes.io/os": "linux",
                "node.kubernetes.io/instance-type": ("m5.large", "m5.xlarge", "c5.2xlarge")[i % 3],
                "topology.kubernetes.io/zone": zone,
            },
        },
        "spec": {"providerID": f"aws:///{zone}/i-{i:017x}"},
        "status": {"conditions": [{"type": "Ready", "status": "True"}]},
    }


def _pvc(namespace: str, name: str, volume: str) -> Json:
    return {
        "apiVersion": "v1",
        "kind": "PersistentVolumeClaim",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {
            "accessModes": ["ReadWriteOnce"],
            "storageClassName": "gp3",
            "volumeName": volume,
            "resources": {"requests": {"storage": "10Gi"}},
        },
        "status": {"phase": "Bound", "accessModes": ["ReadWriteOnce"]},
    }


def _pv(name: str, namespace: str, claim: str, node: str) -> Json:
    return {
        "apiVersion": "v1",
        "kind": "PersistentVolume",
        "metadata": {"name": name},
        "spec": {
            "accessModes": ["ReadWriteOnce"],
            "capacity": {"storage": "10Gi"},
            "storageClassName": "gp3",
            "claimRef": {"namespace": namespace, "name": claim},
            "csi": {"driver": "ebs.csi.aws.com", "volumeHandle": f"vol-{name}"},
            "nodeAffinity": {
                "required": {
                    "nodeSelectorTerms": [
                        {"matchExpressions": [{"key": "kubernetes.io/hostname", "operator": "In", "values": [node]}]}
                    ]
                }
            },
        },
        "status": {"phase": "Bound"},
    }


def bulk_pod(namespace: str, name: str, node: str, claim: str | None) -> Json:
    volumes: list[Any] = [_TOKEN_VOLUME]  # shared: the objects are only serialized, never changed
    mounts: list[Any] = [{"name": _TOKEN_VOLUME["name"], "mountPath": "/var/run/secrets/kubernetes.io/serviceaccount"}]
    if claim:
        volumes.append({"name": "data", "persistentVolumeClaim": {"claimName": claim}})
        mounts.append({"name": "data", "mountPath": "/data"})
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "namespace": namespace,
            "uid": f"00000000-0000-4000-8000-{name[-6:]:0>12}",
            "labels": {"app": name[:-3], "pod-template-hash": "7d9c5b"},
            "annotations": {"kubectl.kubernetes.io/restartedAt": "2026-11-20T10:00:00Z"},
            "ownerReferences": [
                {
                    "apiVersion": "apps/v1",
                    "kind": "ReplicaSet",
                    "name": f"{name[:-3]}-7d9c5b",
                    "uid": "0",
                    "controller": True,
                }
            ],
        },
        "spec": {
            "nodeName": node,
            "containers": [
                {
                    "name": "app",
                    "image": "registry.example.com/app:1.4.2",
                    "env": [{"name": "LOG_LEVEL", "value": "info"}],
                    "resources": {"requests": {"cpu": "100m", "memory": "128Mi"}},
                    "volumeMounts": mounts,
                }
            ],
            "volumes": volumes,
            "tolerations": [
                {
                    "key": "node.kubernetes.io/not-ready",
                    "operator": "Exists",
                    "effect": "NoExecute",
                    "tolerationSeconds": 300,
                }
            ],
        },
        "status": {
            "phase": "Running",
            "podIP": "10.0.0.1",
            "conditions": [{"type": "Ready", "status": "True"}],
            "containerStatuses": [
                {"name": "app", "ready": True, "restartCount": 0, "image": "registry.example.com/app:1.4.2"}
            ],
        },
    }
