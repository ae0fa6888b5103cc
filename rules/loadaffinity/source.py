"""A backup pod of Velero's CSI data mover kept to where its snapshot can be restored
(docs/placement.md#velero-csi-data-mover-backup-pods).

The backup claim of Velero's exposer is restored from a snapshot that names no volume any more
(rules/datasource/exposer.py), so a node-local driver (TopoLVM, OpenEBS LocalPV) can provision it only on the
node of the volume the DataUpload backs up, and a policy whose load affinity admits other nodes would send the pod
where it never starts (vmware-tanzu/velero#7044). The source PV's required terms are ANDed into the pod's required
affinity first, so load affinity and the node-agent restriction narrow what the volume allows. Velero 1.18.1 and
later write those terms itself (vmware-tanzu/velero#9532, #9594, `ToSystemAffinity`): a pod whose terms already
imply them gets no second copy.
"""

from __future__ import annotations

from collections.abc import Mapping

from rules.context import Context, PodTarget
from rules.coscheduling.pinning import current_terms, write_required
from rules.datasource.exposer import upload_source
from rules.datasource.sources import pv_node
from rules.kube.nodeaffinity import and_terms, terms_imply
from rules.kube.volumes import pv_required_terms


def and_source_terms(ctx: Context, target: PodTarget) -> None:
    """The step before load affinity for a trusted backup pod that names its DataUpload; nothing for any other."""
    upload = upload_source(ctx.view, ctx.policy, target)
    if upload is None:
        return
    if upload.pv is None:
        ctx.reason(f"data mover: not placed by its source volume: {upload.why}")
        return
    pv = upload.pv
    name = str((pv.get("metadata") or {}).get("name") or "")
    terms = pv_required_terms(pv)
    csi = (pv.get("spec") or {}).get("csi")
    driver = str(csi.get("driver") or "") if isinstance(csi, Mapping) else ""
    policy = ctx.policy
    followed = driver in policy.node_local_drivers or driver in policy.zone_following_drivers
    if terms is None or not (followed or pv_node(ctx.view, pv)):
        ctx.reason(f"data mover: {upload.upload} backs up claim {upload.claim}, PV {name} is not node-local")
        return
    if target.spec.get("nodeName"):
        ctx.reason(f"data mover: not placed by PV {name}, {target.field('spec.nodeName')} is already set")
        return
    current = current_terms(target)
    if current is not None and terms_imply(current, terms):
        ctx.reason(f"data mover: the pod's required affinity already holds PV {name}'s node affinity")
        return
    write_required(target, and_terms(current, terms))
    ctx.reason(
        f"data mover: {upload.upload} backs up claim {upload.claim}: PV {name}'s node affinity ANDed into the pod's"
    )
    ctx.audit("data-mover-source", f"{upload.claim}=pv/{name}")
