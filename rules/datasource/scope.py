"""Which pods the data-source rules look at, decided from labels before any lookup, so that a plain pod pays
two dictionary lookups and nothing more.

CDI's worker pods are recognised as CDI builds them (kubevirt/containerized-data-importer
pkg/controller/import-controller.go, upload-controller.go, clone-controller.go): label
`app: containerized-data-importer` and `cdi.kubevirt.io: importer | cdi-upload-server | cdi-clone-source`.

Labels are anyone's to write, so they only claim the role. A worker is trusted with a VM's constraints when it is
what CDI alone creates: a Pod controlled (owner reference, `controller: true`) by the claim it fills, as
makeImporterPodSpec and the upload controller build it, and, where the API server says who asks, created by CDI's
controller service account (policy `cdi.requesters`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from rules.context import PodTarget
from rules.kube.owners import controller_reference
from rules.policy import Policy
from rules.quoting import clip

CDI_APP = ("app", "containerized-data-importer")
CDI_COMPONENT = "cdi.kubevirt.io"
#: The component label values of the pods that write a disk: they are the first consumer of its claim.
CDI_WORKERS = frozenset({"importer", "cdi-upload-server", "cdi-clone-source"})
#: The workers that fill the claim they mount, so the only ones that follow a VM. A clone source pod reads a bound
#: source in the source's namespace, where CDI can give it no owner reference (it names its owner in an annotation).
FILLING_WORKERS = frozenset({"importer", "cdi-upload-server"})
#: Why a pod labelled as a filling worker is not one: CDI creates its workers as Pods controlled by their claim, so a
#: workload's template (whose pods its controller owns) never is one either, and a Job gets what its pod would.
NOT_OWNED = "it is not controlled by a claim it mounts, as CDI's workers are"


def cdi_worker(metadata: Mapping[str, Any]) -> str | None:
    """The CDI component of a worker pod (`importer`, `cdi-upload-server`, `cdi-clone-source`), else None."""
    labels = metadata.get("labels") or {}
    if labels.get(CDI_APP[0]) != CDI_APP[1]:
        return None
    component = labels.get(CDI_COMPONENT)
    return component if component in CDI_WORKERS else None


def filling_worker(target: PodTarget) -> str | None:
    """The component of a pod labelled as a CDI worker that fills a claim (importer, upload server) and may be
    placed, which is what could follow a VM; None for any other pod."""
    component = cdi_worker(target.metadata)
    return component if component in FILLING_WORKERS and not target.role.unplaced else None


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


def cdi_trust_problem(policy: Policy, target: PodTarget, requester: str | None) -> str:
    """Why a pod labelled as a CDI worker that fills a claim is not trusted as one ("" when it is)."""
    if target.is_template:  # the workload's controller owns the pods it makes: no claim does
        return NOT_OWNED
    claims = {
        str((volume.get("persistentVolumeClaim") or {}).get("claimName") or "")
        for volume in target.spec.get("volumes") or ()
        if isinstance(volume, Mapping)
    }
    owner = controller_reference(target.metadata)
    if (
        owner is None
        or owner.get("kind") != "PersistentVolumeClaim"
        or owner.get("apiVersion") != "v1"
        or owner.get("name") not in claims
    ):
        return NOT_OWNED
    if requester is not None and requester not in policy.cdi_requesters:
        return f"requester {clip(requester)} is not one of the policy's cdi.requesters"
    return ""


def untrusted_cdi_worker(component: str, why: str) -> str:
    """The warning and finding for a pod labelled as a CDI worker that is not trusted as one."""
    return f"labels claim a CDI {component} pod, not trusted: {why}; no VM's tolerations or placement applied"
