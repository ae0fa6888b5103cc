"""Small manifests for live-state tests."""

from __future__ import annotations

import json
from typing import Any

import yaml

from rules.model import Json


def pod(
    name: str, claim: str | None = "data", *, namespace: str = "apps", node: str = "", phase: str = "Running"
) -> Json:
    volumes = [{"name": "data", "persistentVolumeClaim": {"claimName": claim}}] if claim else []
    spec: Json = {"containers": [{"name": "app", "image": "busybox"}], "volumes": volumes}
    if node:
        spec["nodeName"] = node
    return {
        "kind": "Pod",
        "apiVersion": "v1",
        "metadata": {"name": name, "namespace": namespace},
        "spec": spec,
        "status": {"phase": phase},
    }


def pvc(name: str, *, namespace: str = "apps", modes: tuple[str, ...] = ("ReadWriteOnce",)) -> Json:
    return {
        "kind": "PersistentVolumeClaim",
        "apiVersion": "v1",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"accessModes": list(modes), "storageClassName": "fast", "volumeName": f"pv-{name}"},
        "status": {"phase": "Bound", "accessModes": list(modes)},
    }


def pv(name: str) -> Json:
    return {
        "kind": "PersistentVolume",
        "apiVersion": "v1",
        "metadata": {"name": name},
        "spec": {"accessModes": ["ReadWriteOnce"]},
    }


def storage_class(name: str, mode: str = "Immediate") -> Json:
    return {
        "kind": "StorageClass",
        "apiVersion": "storage.k8s.io/v1",
        "metadata": {"name": name},
        "provisioner": "csi.example.com",
        "volumeBindingMode": mode,
    }


def node(name: str, **labels: str) -> Json:
    return {"kind": "Node", "apiVersion": "v1", "metadata": {"name": name, "labels": labels}}


def policy_map(
    doc: Any, *, name: str = "storage-affinity-policy", namespace: str = "webhook-system", labelled: bool = True
) -> Json:
    labels = {"storage-affinity.io/policy": "true"} if labelled else {}
    text = doc if isinstance(doc, str) else yaml.safe_dump(doc)
    return {
        "kind": "ConfigMap",
        "apiVersion": "v1",
        "metadata": {"name": name, "namespace": namespace, "labels": labels},
        "data": {"policy.yaml": text},
    }


def velero_map(config: Any, *, name: str = "node-agent-config", namespace: str = "velero") -> Json:
    text = config if isinstance(config, str) else json.dumps(config)
    return {
        "kind": "ConfigMap",
        "apiVersion": "v1",
        "metadata": {"name": name, "namespace": namespace},
        "data": {"node-agent.json": text},
    }
