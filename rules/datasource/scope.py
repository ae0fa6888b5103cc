"""Which pods the data-source rules look at, decided from labels before any lookup, so that a plain pod pays
two dictionary lookups and nothing more.

CDI's worker pods are recognised as CDI builds them (kubevirt/containerized-data-importer
pkg/controller/import-controller.go, upload-controller.go, clone-controller.go): label
`app: containerized-data-importer` and `cdi.kubevirt.io: importer | cdi-upload-server | cdi-clone-source`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from rules.context import PodTarget
from rules.policy import Policy

CDI_APP = ("app", "containerized-data-importer")
CDI_COMPONENT = "cdi.kubevirt.io"
#: The component label values of the pods that write a disk: they are the first consumer of its claim.
CDI_WORKERS = frozenset({"importer", "cdi-upload-server", "cdi-clone-source"})


def cdi_worker(metadata: Mapping[str, Any]) -> str | None:
    """The CDI component of a worker pod (`importer`, `cdi-upload-server`, `cdi-clone-source`), else None."""
    labels = metadata.get("labels") or {}
    if labels.get(CDI_APP[0]) != CDI_APP[1]:
        return None
    component = labels.get(CDI_COMPONENT)
    return component if component in CDI_WORKERS else None


def in_scope(policy: Policy, target: PodTarget) -> bool:
    """Policy `dataSource.scope`: `roles` (movers, backup and restore pods, CDI workers), `all` or `off`."""
    scope = policy.data_source_scope
    if scope == "off" or target.role.exempt:
        return False
    if target.role.role is not None:
        return True
    if scope == "roles":
        return cdi_worker(target.metadata) is not None and not target.role.unplaced
    return not target.role.unplaced
