"""CDI workers follow the VM (docs/design.md#12-data-sources): an importer or upload pod that is the first consumer
of a WaitForFirstConsumer disk binds it wherever it lands; if the KubeVirt VirtualMachine that will use the disk
may only run on some nodes, the VM can never start there (kubevirt/containerized-data-importer#4275, #1695,
#2192). So the worker gets the VM's template constraints: its `nodeSelector` and required node affinity (ANDed with
the worker's own) and its tolerations, recorded by `storage-affinity.io/follows-vm: <vm>[,<vm>...]`.

The worker mounts the target claim itself, or CDI's populator claim `prime-<target uid>`, owned by the target
claim (pkg/controller/populators/populator-base.go createPVCPrime); the target claim has the DataVolume's name,
which the VM names in `spec.dataVolumeTemplates` or a `dataVolume` volume (or the claim in a
`persistentVolumeClaim` volume). When the DataVolume itself is known (cdi.kubevirt.io served), reasons and audit
findings name it with its phase.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from rules import deadline
from rules.annotations import FOLLOWS_VM
from rules.budget import check_followed
from rules.cluster import ClusterView
from rules.context import Context, PodTarget
from rules.coscheduling.claimpods import name_of
from rules.coscheduling.pinning import current_terms, write_required
from rules.datasource.scope import cdi_trust_problem, filling_worker, untrusted_cdi_worker
from rules.datasource.sources import pv_node
from rules.kube.feasible import Feasibility, on_labels
from rules.kube.nodeaffinity import and_terms, required_terms
from rules.kube.tolerations import merge_tolerations
from rules.kube.volumes import ClaimVolume, claim_pv, waits_for_first_consumer
from rules.model import Json
from rules.quoting import clip, field_path

PRIME_PREFIX = "prime-"


def target_claim(view: ClusterView, namespace: str, volume: ClaimVolume) -> Json | None:
    """The claim CDI fills through this volume: the prime claim's owner, else the mounted claim itself."""
    pvc = volume.pvc or {}
    name = str(volume.claim or "")
    if not name.startswith(PRIME_PREFIX):
        return volume.pvc
    for owner in (pvc.get("metadata") or {}).get("ownerReferences") or ():
        if isinstance(owner, Mapping) and owner.get("kind") == "PersistentVolumeClaim" and owner.get("name"):
            return view.pvc(namespace, str(owner["name"]))
    return None


def data_volume_of(view: ClusterView, namespace: str, claim: str) -> Json | None:
    """The DataVolume whose claim `claim` is: CDI names a DataVolume's claim after it, in its namespace
    (pkg/controller/datavolume/controller-base.go createPvcForDatavolume) and reports it in `status.claimName`."""
    dv = view.data_volume(namespace, claim)
    if dv is None:
        return None
    named = (dv.get("status") or {}).get("claimName")
    return dv if named in (None, "", claim) else None


def disk_label(view: ClusterView, namespace: str, claim: str, unknown: str) -> str:
    """How reasons and findings name a disk: its DataVolume with its phase when known, else `unknown <claim>`."""
    dv = data_volume_of(view, namespace, claim)
    if dv is None:
        return f"{unknown} {claim}"
    phase = (dv.get("status") or {}).get("phase") or "no phase yet"
    return f"DataVolume {claim} ({phase})"


@dataclass(frozen=True)
class Follow:
    claim: str
    vms: list[Json]


def vms_to_follow(view: ClusterView, namespace: str, volumes: Sequence[ClaimVolume]) -> list[Follow]:
    """For each unbound WaitForFirstConsumer disk the worker fills, the VMs that will use it."""
    out = []
    for volume in volumes:
        deadline.check()
        if volume.pvc is None or volume.bound:
            continue
        target = target_claim(view, namespace, volume)
        if target is None or not waits_for_first_consumer(view, target):
            continue
        claim = str((target.get("metadata") or {}).get("name") or "")
        vms = view.virtual_machines_using(namespace, claim)
        if vms:
            out.append(Follow(claim, vms))
    return out


def vm_spec(vm: Mapping[str, Any]) -> Mapping[str, Any]:
    """The pod spec of a VM's template (where its nodeSelector, affinity and tolerations live)."""
    return ((vm.get("spec") or {}).get("template") or {}).get("spec") or {}


def vm_nodes(view: ClusterView, vm: Mapping[str, Any], keys: frozenset[str]) -> Feasibility:
    """Where the VM's pods may run by its own nodeSelector and required node affinity, judged on the label keys
    `keys` (what the VM's author may know). A VM's template names no node, and its taints and disks are asked
    apart."""
    spec = vm_spec(vm)
    own = on_labels(keys, volumes=False)
    return Feasibility(view, own, selector=spec.get("nodeSelector"), terms=required_terms(spec))


def follow_vm(ctx: Context, target: PodTarget) -> None:
    """The mutating rule for CDI workers; policy `cdi.followVM` turns it off."""
    component = filling_worker(target)
    if not ctx.policy.cdi_follow_vm or component is None:
        return
    if why := cdi_trust_problem(ctx.policy, target, ctx.subject.user):  # a VM's tolerations go to CDI's own pods
        ctx.warn(untrusted_cdi_worker(component, why))
        ctx.reason(f"cdi: the VM is not followed: {why}")
        return
    follows = vms_to_follow(ctx.view, target.namespace, target.volumes(ctx.view))
    if not follows:
        return
    check_followed(sum(len(follow.vms) for follow in follows), target.field("spec.volumes"))
    original_terms = current_terms(target)
    terms = original_terms
    before = dict(target.patch.get("spec", "nodeSelector", default=None) or {})
    selector = dict(before)
    own = list(target.patch.get("spec", "tolerations", default=None) or ())
    tolerations = own
    followed: list[str] = []
    for follow in follows:
        for vm in follow.vms:
            deadline.check()
            spec, name = vm_spec(vm), name_of(vm)
            clash = {k: v for k, v in (spec.get("nodeSelector") or {}).items() if selector.get(k, v) != v}
            if clash:
                key = sorted(clash)[0]
                ctx.warn(
                    f"{field_path([key], target.field('spec.nodeSelector'))}: kept {clip(repr(selector[key]))}, "
                    f"VM {name} wants {clip(repr(clash[key]))}: not placed where the VM may run"
                )
                continue
            vm_terms = required_terms(spec)
            if not spec.get("nodeSelector") and vm_terms is None and not spec.get("tolerations"):
                ctx.reason(f"cdi: VM {name} using claim {follow.claim} has no node constraints: nothing to follow")
                continue
            selector.update(spec.get("nodeSelector") or {})
            if vm_terms is not None:
                terms = and_terms(terms, vm_terms)
            tolerations = merge_tolerations(
                tolerations, list(spec.get("tolerations") or ()), target.field("spec.tolerations")
            )
            followed.append(name)
            disk = disk_label(ctx.view, target.namespace, follow.claim, "claim")
            ctx.reason(f"cdi: {disk} will be used by VM {name}: the worker follows its constraints")
    if not followed:
        return
    if terms != original_terms:
        write_required(target, terms)
    if selector != before:
        target.patch.set("spec", "nodeSelector", value=selector)
    if tolerations != own:
        target.patch.set("spec", "tolerations", value=tolerations)
    record = ",".join(dict.fromkeys(followed))
    target.patch.set("metadata", "annotations", FOLLOWS_VM, value=record)
    ctx.audit("follows-vm", record)


# --- audit -----------------------------------------------------------------------------------------------------


def vm_disk_problems(vm: Mapping[str, Any], view: ClusterView, keys: frozenset[str]) -> list[tuple[str, str]]:
    """(field, message) for each disk of a VM already bound on a node the VM's constraints exclude: the VM can
    never start there, whoever bound it."""
    namespace = str((vm.get("metadata") or {}).get("namespace") or "")
    where, name = vm_nodes(view, vm, keys), name_of(vm)
    selector = where.selector
    if not selector and where.terms is None:
        return []
    problems = []
    for claim in vm_claims(vm):
        deadline.check()
        pvc = view.pvc(namespace, claim)
        if pvc is None or (pvc.get("status") or {}).get("phase") != "Bound":
            continue
        node_name = _bound_node(view, pvc)
        node = view.node(node_name) if node_name else None
        if node is None:
            continue
        if where.fits(node):
            continue
        labels = (node.get("metadata") or {}).get("labels") or {}
        key = next((k for k, v in selector.items() if labels.get(k) != v), None)
        failed = "required node affinity" if key is None else f'nodeSelector {key}="{selector[key]}"'
        problems.append(
            (
                "spec.template.spec",
                f"VM {name}: {disk_label(view, namespace, claim, 'DataVolume/claim')} is bound on node {node_name}, "
                f"which fails the VM's {failed}: the VM can never start",
            )
        )
    return problems


def vm_claims(vm: Mapping[str, Any]) -> list[str]:
    """The DataVolumes and claims a VirtualMachine will use: its `dataVolumeTemplates` and the `dataVolume` and
    `persistentVolumeClaim` volumes of its template (a DataVolume's claim has the DataVolume's name)."""
    spec = vm.get("spec") or {}
    names = [str((t.get("metadata") or {}).get("name") or "") for t in spec.get("dataVolumeTemplates") or ()]
    for volume in vm_spec(vm).get("volumes") or ():
        names.append(str((volume.get("dataVolume") or {}).get("name") or ""))
        names.append(str((volume.get("persistentVolumeClaim") or {}).get("claimName") or ""))
    return list(dict.fromkeys(n for n in names if n))


def _bound_node(view: ClusterView, pvc: Mapping[str, Any]) -> str:
    """The one node a bound claim's PV admits ("" for a volume other nodes can use too: a VM may run there)."""
    return pv_node(view, claim_pv(view, str((pvc.get("metadata") or {}).get("namespace") or ""), pvc))
