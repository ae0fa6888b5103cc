"""Cross-namespace references another namespace allowed: Gateway API's ReferenceGrant
(gateway.networking.k8s.io/v1beta1), which the CrossNamespaceVolumeDataSource feature uses for a claim's
`dataSourceRef.namespace` (kubernetes/enhancements keps/sig-storage/3294-provision-volumes-from-cross-namespace-
snapshots).

A grant lives in the namespace of the object referred to, and is half of a handshake: its author, who may read
that namespace, lets objects of the kinds and namespaces under `from` refer to the kinds (and names) under `to`.
Without one the CSI external-provisioner does not provision from the source, and the webhook follows it no further
either: the pod learns nothing of another namespace that its own namespace was not granted.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from rules import deadline


def reference_granted(
    grants: Iterable[Mapping[str, Any]], from_namespace: str, from_kind: str, ref: Mapping[str, Any]
) -> bool:
    """Whether one of `grants` (those of the referred-to namespace) lets a `from_kind` (core group) object of
    `from_namespace` refer to `ref` ({apiGroup, kind, name}), as the CSI external-provisioner decides it: a `from`
    entry of the core group, that kind and namespace; a `to` entry of the reference's group and kind, naming it or
    no name at all (kubernetes-csi/external-provisioner pkg/controller/controller.go IsGranted)."""
    group, kind, name = str(ref.get("apiGroup") or ""), ref.get("kind"), ref.get("name")
    for grant in grants:  # another namespace's author decides how many: each counts against the review's deadline
        deadline.check()
        spec = grant.get("spec") or {}
        froms = [f for f in spec.get("from") or () if isinstance(f, Mapping)]
        if not any(
            (f.get("group") or "") == "" and f.get("kind") == from_kind and f.get("namespace") == from_namespace
            for f in froms
        ):
            continue
        for to in spec.get("to") or ():
            if not isinstance(to, Mapping) or (to.get("group") or "") != group or to.get("kind") != kind:
                continue
            if not to.get("name") or to.get("name") == name:
                return True
    return False
