"""The tolerations a backup or restore pod has once Velero made it: its own and those of Velero's node-agent
ConfigMap (`tolerations`, velero-io/velero#9575), which Velero puts on every data mover it creates. Wherever the
webhook judges which nodes such a pod fits, both count: a node tainted for backups is one it fits.

Only for a role the policy trusts: the ConfigMap is the operator's, and an untrusted pod gets none of its grants.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from rules.cluster import ClusterView
from rules.loadaffinity.mutation import source_settings
from rules.model import Json
from rules.policy import Policy
from rules.roles import GRANTING_ROLES, classify


def velero_tolerations(view: ClusterView, policy: Policy) -> tuple[Json, ...]:
    """The tolerations of the policy's `loadAffinitySource` ConfigMap; none when it is unset, missing or invalid."""
    return source_settings(view, policy)[0].tolerations


def data_mover_tolerations(
    view: ClusterView,
    policy: Policy,
    namespace: str,
    metadata: Mapping[str, Any],
    requester: str | None = None,
    *,
    kind: str = "Pod",
) -> tuple[Json, ...]:
    """Velero's tolerations for a trusted backup or restore pod, or the pods a workload of `kind` makes (trusted by
    its namespace alone: its controller creates them, not the requester); none for any other."""
    role = classify(metadata, namespace, policy, requester=requester, kind=kind)
    if role.role not in GRANTING_ROLES or not role.trusted:
        return ()
    return velero_tolerations(view, policy)
