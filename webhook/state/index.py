"""In-memory indexes of the cluster objects the rules read, fed by static manifests or by watch events.

Lookups are dictionary hits (claim → pods, name → object), so their cost does not grow with the cluster.
Objects are trimmed on ingest to the fields rules read; pods that mount no claim are not kept at all.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable, Mapping
from typing import Any

from rules.model import PREFIX, Json

#: The kinds the index keeps, by `kind`.
KINDS = ("Pod", "PersistentVolumeClaim", "PersistentVolume", "StorageClass", "Node", "ConfigMap")

_KEEP_ANNOTATION_PREFIXES = (PREFIX, "volume.kubernetes.io/", "kubevirt.io/", "kubernetes.io/config.mirror")


def claims_of(pod: Mapping[str, Any]) -> list[str]:
    """The claims a pod mounts: `persistentVolumeClaim.claimName`, or `<pod>-<volume>` for ephemeral volumes."""
    name = (pod.get("metadata") or {}).get("name") or ""
    claims = []
    for volume in (pod.get("spec") or {}).get("volumes") or ():
        if not isinstance(volume, Mapping):
            continue
        claim = volume.get("persistentVolumeClaim")
        if isinstance(claim, Mapping) and claim.get("claimName"):
            claims.append(str(claim["claimName"]))
        elif volume.get("ephemeral") and name:
            claims.append(f"{name}-{volume.get('name')}")
    return claims


def trim(obj: Mapping[str, Any]) -> Json:
    """Only what rules read: keeps memory flat in big clusters and drops managedFields and friends."""
    kind = obj.get("kind")
    meta = obj.get("metadata") or {}
    annotations = {k: v for k, v in (meta.get("annotations") or {}).items() if k.startswith(_KEEP_ANNOTATION_PREFIXES)}
    metadata: Json = {
        k: meta[k]
        for k in ("name", "namespace", "uid", "resourceVersion", "creationTimestamp", "deletionTimestamp", "labels")
        if meta.get(k) is not None
    }
    if annotations:
        metadata["annotations"] = annotations
    out: Json = {"kind": kind, "metadata": metadata}
    spec = obj.get("spec") or {}
    if kind == "Pod":
        volumes = [v for v in spec.get("volumes") or () if "persistentVolumeClaim" in v or "ephemeral" in v]
        out["spec"] = {k: spec[k] for k in ("nodeName", "tolerations", "schedulingGates") if spec.get(k)}
        out["spec"]["volumes"] = [
            {k: v[k] for k in ("name", "persistentVolumeClaim") if k in v}
            | ({"ephemeral": {}} if "ephemeral" in v else {})
            for v in volumes
        ]
        out["status"] = {"phase": (obj.get("status") or {}).get("phase")}
    elif kind in ("PersistentVolumeClaim", "PersistentVolume"):
        out["spec"] = {
            k: spec[k]
            for k in ("accessModes", "storageClassName", "volumeName", "nodeAffinity", "claimRef", "volumeMode")
            if k in spec
        }
        status = obj.get("status") or {}
        out["status"] = {k: status[k] for k in ("phase", "accessModes") if k in status}
    elif kind == "StorageClass":
        out.update({k: obj[k] for k in ("provisioner", "volumeBindingMode") if k in obj})
    elif kind == "Node":
        out["spec"] = {k: spec[k] for k in ("taints", "unschedulable") if k in spec}
    elif kind == "ConfigMap":
        out["data"] = dict(obj.get("data") or {})
    return out


def _identity(obj: Mapping[str, Any]) -> tuple[str, tuple[str, str]]:
    """(kind, (namespace, name)): how the index files an object."""
    meta = obj.get("metadata") or {}
    return str(obj.get("kind")), (str(meta.get("namespace") or ""), str(meta.get("name") or ""))


class ClusterIndex:
    """A `rules.cluster.ClusterView` over indexed objects; `apply` and `remove` are what a watch calls."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._objects: dict[str, dict[tuple[str, str], Json]] = {kind: {} for kind in KINDS}
        self._claim_users: dict[tuple[str, str], dict[str, Json]] = {}
        self._pod_claims: dict[tuple[str, str], list[str]] = {}

    # -- ingest ---------------------------------------------------------------------------------------------

    def apply(self, obj: Mapping[str, Any]) -> None:
        """Add or replace one object (an ADDED or MODIFIED event)."""
        kind, key = _identity(obj)
        if kind not in self._objects:
            return
        if kind == "Pod":
            claims = claims_of(obj)
            with self._lock:
                self._unlink_pod(key)
                if not claims:
                    self._objects["Pod"].pop(key, None)
                    return
                pod = trim(obj)
                self._objects["Pod"][key] = pod
                self._pod_claims[key] = claims
                for claim in claims:
                    self._claim_users.setdefault((key[0], claim), {})[key[1]] = pod
            return
        trimmed = trim(obj)
        with self._lock:
            self._objects[kind][key] = trimmed

    def remove(self, obj: Mapping[str, Any]) -> None:
        """Forget one object (a DELETED event)."""
        kind, key = _identity(obj)
        if kind not in self._objects:
            return
        with self._lock:
            if kind == "Pod":
                self._unlink_pod(key)
            self._objects[kind].pop(key, None)

    def replace_kind(self, kind: str, objects: Iterable[Mapping[str, Any]]) -> None:
        """Swap in a full list of one kind (a re-list), dropping what is gone."""
        fresh = ClusterIndex()
        for obj in objects:
            fresh.apply({**obj, "kind": kind})
        with self._lock:
            self._objects[kind] = fresh._objects[kind]
            if kind == "Pod":
                self._claim_users = fresh._claim_users
                self._pod_claims = fresh._pod_claims

    def count(self, kind: str) -> int:
        return len(self._objects.get(kind, {}))

    def _unlink_pod(self, key: tuple[str, str]) -> None:
        for claim in self._pod_claims.pop(key, ()):
            users = self._claim_users.get((key[0], claim))
            if users is not None:
                users.pop(key[1], None)
                if not users:
                    del self._claim_users[(key[0], claim)]

    # -- ClusterView ----------------------------------------------------------------------------------------

    def pvc(self, namespace: str, name: str) -> Json | None:
        return self._objects["PersistentVolumeClaim"].get((namespace, name))

    def pods_using_claim(self, namespace: str, claim: str) -> list[Json]:
        return list((self._claim_users.get((namespace, claim)) or {}).values())

    def pv(self, name: str) -> Json | None:
        return self._objects["PersistentVolume"].get(("", name))

    def storage_class(self, name: str) -> Json | None:
        return self._objects["StorageClass"].get(("", name))

    def node(self, name: str) -> Json | None:
        return self._objects["Node"].get(("", name))

    def nodes(self) -> Iterable[Json]:
        return list(self._objects["Node"].values())

    def config_map(self, namespace: str, name: str) -> Json | None:
        return self._objects["ConfigMap"].get((namespace, name))
