"""Controller references the index keeps: whom a CDI worker's trust and the audit's Events (rules/auditevents.py)
name, and nothing of the others (a ReplicaSet's, StatefulSet's or DaemonSet's pods keep none)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from rules.kube.owners import controller_reference as controller_of
from rules.model import Json

#: What of a controller reference is kept: whom a CDI worker's trust and the audit's Events name.
_OWNER_FIELDS = ("apiVersion", "kind", "name", "uid", "controller")
#: The controllers of a pod that rules read (a CDI worker's claim; a mover's Job, a Velero pod's DataUpload or
#: DataDownload: rules/auditevents.py); a ReplicaSet's, StatefulSet's or DaemonSet's pods keep none.
READ_OWNERS = frozenset({"PersistentVolumeClaim", "Job", "DataUpload", "DataDownload"})


def controller_reference(meta: Mapping[str, Any], kinds: frozenset[str] | None = None) -> Json | None:
    """The object's controller reference (rules/kube/owners.py), trimmed, if its kind is one of `kinds` (any when
    None); None otherwise. What a CDI worker's trust and an audit Event's owner (rules/auditevents.py) read."""
    owner = controller_of(meta)
    if owner is None or (kinds is not None and owner.get("kind") not in kinds):
        return None
    return {k: owner[k] for k in _OWNER_FIELDS if k in owner}
