"""The read-only view of cluster state that rules consult.

Two implementations live in `webhook.state`: static manifests and the live API cache. Rules see only this
protocol, so they stay pure and are tested with plain dictionaries.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Protocol

from rules.kube.nodeset import NodeSet
from rules.loadaffinity.agents import NodeAgents
from rules.model import Json


class LookupFailed(Exception):
    """State needed for a decision could not be read; the policy's `onLookupFailure` decides what happens."""


class ClusterView(Protocol):
    """The cluster state rules may read, and nothing else: rules stay pure and testable with dictionaries, and the
    server can answer every lookup from an in-memory index (a miss may raise LookupFailed)."""

    def pvc(self, namespace: str, name: str) -> Json | None: ...

    def pods_using_claim(self, namespace: str, claim: str) -> list[Json]:
        """Pods in `namespace` that mount `claim`, directly or as a generic ephemeral volume."""
        ...

    def pv(self, name: str) -> Json | None: ...

    def storage_class(self, name: str) -> Json | None: ...

    def node(self, name: str) -> Json | None: ...

    def nodes(self) -> Iterable[Json]: ...

    def node_set(self) -> NodeSet:
        """The nodes as one snapshot with a label index: "does any node fit?" without walking them all."""
        ...

    def config_map(self, namespace: str, name: str) -> Json | None: ...

    def node_agents(self, namespace: str) -> NodeAgents:
        """Where Velero's node-agent pods in `namespace` are Ready (rules/loadaffinity/agents.py)."""
        ...

    def volume_snapshot(self, namespace: str, name: str) -> Json | None:
        """A VolumeSnapshot (snapshot.storage.k8s.io); None when unknown or its API is not served."""
        ...

    def volume_snapshot_content(self, name: str) -> Json | None: ...

    def pv_for_handle(self, driver: str, handle: str) -> Json | None:
        """The PV of a CSI volume, by driver and volume handle (how a VolumeSnapshotContent names its source)."""
        ...

    def virtual_machines_using(self, namespace: str, claim: str) -> list[Json]:
        """KubeVirt VirtualMachines in `namespace` that name `claim` as a DataVolume (template) or a claim."""
        ...

    def data_volume(self, namespace: str, name: str) -> Json | None:
        """A CDI DataVolume (cdi.kubevirt.io); None when unknown or its API is not served."""
        ...

    def replication_destination(self, namespace: str, name: str) -> Json | None:
        """A VolSync ReplicationDestination (volsync.backube); None when unknown or its API is not served."""
        ...

    def reference_grants(self, namespace: str) -> list[Json]:
        """The ReferenceGrants (gateway.networking.k8s.io) of `namespace`; none when unknown or its API is not
        served (rules/kube/referencegrants.py)."""
        ...

    def data_upload(self, namespace: str, name: str) -> Json | None:
        """A Velero DataUpload (velero.io/v2alpha1) of Velero's namespace (rules/datasource/exposer.py); None when
        unknown, its API is not served or the policy names no Velero namespace."""
        ...
