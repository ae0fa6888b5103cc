"""The one list of the cluster-state kinds: every kind of object the rules read from the cluster.

Everything that names these kinds is derived from `STATE_KINDS` or checked against it by a test: the index
(webhook/state/index.py), the static loader and its cache series (webhook/state/static.py), the live watches and
GETs (webhook/state/live.py), the optional groups (webhook/state/optional.py), the audit's lists
(webhook/audit/command.py), the fake API's served kinds (testkit/fakeapi/resources.py), and, by
tests/state/test_kinds.py, the chart's ClusterRole, tests/data/rbac/server-calls.yaml and the docs' lists of kinds.
Each entry also says what the index keeps of the kind's objects (its trimmer, webhook/state/trimmers.py) and by
which keys besides its name the index finds them (its secondary indexes, webhook/state/secondary.py).
Adding a kind is one entry here and the steps of docs/development.md, "Adding a cluster-state kind".
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from webhook.state import trimmers
from webhook.state.secondary import CLAIM_USERS, CSI_HANDLES, GRANTS, VM_USERS, SecondaryIndex

#: How the live server reads a kind: `cluster` lists and watches it across all namespaces; `by-name` watches only
#: the ConfigMaps it is told of, each in its namespace with a field selector on its name (webhook/state/live.py);
#: `velero-namespace` lists and watches it in Velero's namespace as the policy names it, and nowhere while it
#: names none (rules/datasource/exposer.py `data_mover_namespace`), under the chart's Role there
#: (webhook/state/optional.py).
Watched = Literal["cluster", "by-name", "velero-namespace"]


@dataclass(frozen=True)
class StateKind:
    """One kind the rules read, and how the server reads it."""

    kind: str
    plural: str  # the API's resource name: RBAC rules, request paths and the cache series' `resource` label
    group: str  # "" for the core API
    version: str
    namespaced: bool
    watched: Watched = "cluster"
    #: the typed client's GET on an index miss (`read_…` of CoreV1Api or StorageV1Api), or None: never fetched
    getter: str | None = None
    #: the typed client's list across all namespaces (`list_…`); None for a CRD, listed by CustomObjectsApi
    lister: str | None = None
    #: for a kind of a CRD group the cluster may not serve: what the rules lose while it is not served
    feature: str | None = None
    #: listed in every namespace even by an audit of one namespace (a cluster-scoped kind, or one whose objects
    #: live in another namespace than the pods that need them)
    all_namespaces: bool = False
    #: what the index keeps of an object besides its name, namespace and the annotations rules read (None: nothing)
    trimmer: trimmers.Trimmer | None = None
    #: the keys besides its name the index finds its objects by, each a function of the kept object
    #: (`ClusterIndex.find`)
    indexes: tuple[SecondaryIndex, ...] = ()

    @property
    def client(self) -> str:
        """The `kubernetes.client` class of its typed calls (`CoreV1Api`, `StorageV1Api`, …), named after its group
        and version as the client names them; a CRD's kinds have none and are read as custom objects."""
        if self.lister is None:
            return "CustomObjectsApi"
        return f"{(self.group.split('.')[0] or 'core').capitalize()}{self.version.capitalize()}Api"

    @property
    def prefix(self) -> str:
        """The API path its resources live under."""
        return f"/api/{self.version}" if self.group == "" else f"/apis/{self.group}/{self.version}"

    @property
    def verbs(self) -> tuple[str, ...]:
        """The RBAC verbs the server needs on it cluster-wide (none for a kind read by name, or in one namespace)."""
        if self.watched != "cluster":
            return ()
        return ("get", "list", "watch") if self.getter else ("list", "watch")

    @property
    def namespace_verbs(self) -> tuple[str, ...]:
        """The RBAC verbs the server needs on it in Velero's namespace (a Role there), for a kind read there alone."""
        return ("list", "watch") if self.watched == "velero-namespace" else ()


STATE_KINDS: tuple[StateKind, ...] = (
    StateKind(
        "Pod",
        "pods",
        "",
        "v1",
        True,
        lister="list_pod_for_all_namespaces",
        trimmer=trimmers.pod,
        indexes=(CLAIM_USERS,),
    ),
    StateKind(
        "PersistentVolumeClaim",
        "persistentvolumeclaims",
        "",
        "v1",
        True,
        getter="read_namespaced_persistent_volume_claim",
        lister="list_persistent_volume_claim_for_all_namespaces",
        trimmer=trimmers.claim,
    ),
    StateKind(
        "PersistentVolume",
        "persistentvolumes",
        "",
        "v1",
        False,
        getter="read_persistent_volume",
        lister="list_persistent_volume",
        all_namespaces=True,
        trimmer=trimmers.volume,
        indexes=(CSI_HANDLES,),
    ),
    StateKind(
        "StorageClass",
        "storageclasses",
        "storage.k8s.io",
        "v1",
        False,
        getter="read_storage_class",
        lister="list_storage_class",
        all_namespaces=True,
        trimmer=trimmers.storage_class,
    ),
    StateKind(
        "Node",
        "nodes",
        "",
        "v1",
        False,
        getter="read_node",
        lister="list_node",
        all_namespaces=True,
        trimmer=trimmers.node,
    ),
    StateKind(
        "ConfigMap",
        "configmaps",
        "",
        "v1",
        True,
        watched="by-name",
        getter="read_namespaced_config_map",
        lister="list_config_map_for_all_namespaces",
        trimmer=trimmers.config_map,
    ),
    StateKind(
        "VolumeSnapshot",
        "volumesnapshots",
        "snapshot.storage.k8s.io",
        "v1",
        True,
        feature="placement from snapshot sources",
        trimmer=trimmers.volume_snapshot,
    ),
    StateKind(
        "VolumeSnapshotContent",
        "volumesnapshotcontents",
        "snapshot.storage.k8s.io",
        "v1",
        False,
        feature="placement from snapshot sources",
        all_namespaces=True,
        trimmer=trimmers.volume_snapshot_content,
    ),
    StateKind(
        "VirtualMachine",
        "virtualmachines",
        "kubevirt.io",
        "v1",
        True,
        feature="CDI workers following their VM",
        trimmer=trimmers.virtual_machine,
        indexes=(VM_USERS,),
    ),
    StateKind(
        "DataVolume",
        "datavolumes",
        "cdi.kubevirt.io",
        "v1beta1",
        True,
        feature="DataVolumes named in CDI reasons and VM audits",
        trimmer=trimmers.data_volume,
    ),
    StateKind(
        "ReferenceGrant",
        "referencegrants",
        "gateway.networking.k8s.io",
        "v1beta1",
        True,
        feature="cross-namespace data sources",
        all_namespaces=True,  # a grant lives in the source's namespace, not the pod's
        trimmer=trimmers.reference_grant,
        indexes=(GRANTS,),
    ),
    StateKind(
        "ReplicationDestination",
        "replicationdestinations",
        "volsync.backube",
        "v1alpha1",
        True,
        feature="claims filled by VolSync's volume populator",
        trimmer=trimmers.replication_destination,
    ),
    StateKind(
        "DataUpload",
        "datauploads",
        "velero.io",
        "v2alpha1",
        True,
        watched="velero-namespace",
        feature="backup pods of Velero's CSI data mover placed by their source volume",
        trimmer=trimmers.data_upload,
    ),
)

#: The kinds by name.
BY_KIND: dict[str, StateKind] = {entry.kind: entry for entry in STATE_KINDS}
