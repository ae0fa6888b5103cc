"""Secondary indexes: a kind's objects found by a key other than their name (a claim → the pods that mount it, a CSI
volume handle → its PV, a namespace → its ReferenceGrants). Each kind declares its own in webhook/state/kinds.py;
the index keeps every one in step with each add, update, delete and re-list, and answers them through
`ClusterIndex.find`, a dictionary hit.

A key is computed from the object as the index keeps it (trimmed), never from the object as it came: a key holds
only strings of the kept object (or made of them, as a generic ephemeral volume's claim name), and an update costs
the keys of that one object, whatever else the index holds.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from rules.datasource.vm import vm_claims
from rules.kube.volumes import claim_references
from rules.model import Json, namespaced_name

#: A key: a tuple of the kept object's strings.
Key = tuple[str, ...]
#: How the index files an object of a kind: (namespace, name).
Ident = tuple[str, str]


@dataclass(frozen=True, eq=False)
class SecondaryIndex:
    """One way to find a kind's objects: `keys` gives the keys of an object as the index keeps it; an object is
    found under each of them (none: under none)."""

    name: str
    keys: Callable[[Json], Iterable[Key]]


def claims_of(pod: Mapping[str, Any]) -> list[str]:
    """The claims a pod mounts: `persistentVolumeClaim.claimName`, or `<pod>-<volume>` for ephemeral volumes."""
    references = claim_references(pod.get("metadata") or {}, pod.get("spec") or {})
    return [claim for _, _, claim, _ in references if claim]


def _pod_claims(pod: Json) -> list[Key]:
    namespace = namespaced_name(pod)[0]
    return [(namespace, claim) for claim in claims_of(pod)]


def _csi_handle(pv: Json) -> list[Key]:
    csi = (pv.get("spec") or {}).get("csi") or {}
    driver, handle = csi.get("driver"), csi.get("volumeHandle")
    return [(str(driver), str(handle))] if driver and handle else []


def _vm_claims(vm: Json) -> list[Key]:
    namespace = namespaced_name(vm)[0]
    return [(namespace, claim) for claim in vm_claims(vm)]


def _grant_namespace(grant: Json) -> list[Key]:
    return [(namespaced_name(grant)[0],)]


#: (namespace, claim) → the pods that mount it.
CLAIM_USERS = SecondaryIndex("pods by claim", _pod_claims)
#: (CSI driver, volume handle) → the PV of that volume: where a snapshot's source volume is.
CSI_HANDLES = SecondaryIndex("volumes by CSI handle", _csi_handle)
#: (namespace, claim or DataVolume) → the VirtualMachines that will use it.
VM_USERS = SecondaryIndex("virtual machines by claim", _vm_claims)
#: (namespace,) → the ReferenceGrants there: who may read that namespace's data sources.
GRANTS = SecondaryIndex("reference grants by namespace", _grant_namespace)


class Tables:
    """Every secondary index of the kinds that declare one: index → key → (namespace, name) → kept object. The
    index calls `file` under its lock on every change and reads them in `ClusterIndex.find`."""

    def __init__(self, declared: Mapping[str, tuple[SecondaryIndex, ...]]) -> None:
        self.declared = {kind: indexes for kind, indexes in declared.items() if indexes}
        self.tables: dict[SecondaryIndex, dict[Key, dict[Ident, Json]]] = {
            index: {} for indexes in self.declared.values() for index in indexes
        }

    def file(self, kind: str, ident: Ident, previous: Json | None, current: Json | None) -> None:
        """An object of `kind` changed from `previous` to `current` (None: absent): unfile the one, file the other."""
        for index in self.declared.get(kind, ()):
            table = self.tables[index]
            gone = list(index.keys(previous)) if previous is not None else []
            kept = set(index.keys(current)) if current is not None else set()
            for key in gone:
                if key in kept:  # most changes (a pod's status) keep the keys: the object is replaced in place
                    continue
                bucket = table.get(key)
                if bucket is not None and bucket.pop(ident, None) is not None and not bucket:
                    del table[key]
            if current is not None:
                for key in kept:
                    table.setdefault(key, {})[ident] = current

    def take(self, kind: str, fresh: Tables) -> None:
        """After a re-list of `kind`: its indexes are the fresh ones."""
        for index in self.declared.get(kind, ()):
            self.tables[index] = fresh.tables[index]
