"""Load affinity for `backup` and `restore` pods: Velero's VGDP design, implemented in full
(docs/design.md#5-load-affinity).

Velero's own code reads only the first LoadAffinity entry and stacks its requirements onto the pod again on every
re-expose (vmware-tanzu/velero#10341). Here every selected entry becomes one ORed term, the result is ANDed
with what already constrains the pod as a cross product, and a pod that already satisfies the load terms is left
untouched.
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from rules import deadline
from rules.annotations import LOAD_AFFINITY, LOAD_AFFINITY_APPLIED, STORAGE_CLASS
from rules.budget import check_entries, placement_over_budget, terms_excess
from rules.cluster import ClusterView
from rules.context import Context, PodTarget
from rules.coscheduling.pinning import (
    NODE_NAME,
    NODE_SELECTOR,
    REQUIRED_AFFINITY,
    current_terms,
    hostname_selector,
    node_name_unsafe,
    pin_terms,
    placement_mode,
    write_required,
)
from rules.kube.disclosed import EVERY_LABEL
from rules.kube.feasible import Feasibility, on_labels
from rules.kube.names import dns1123_subdomain_error
from rules.kube.nodeaffinity import (
    REQUIRED,
    and_terms,
    label_selector_term,
    simplify,
    terms_imply,
    terms_key,
)
from rules.kube.tolerations import merge_policy_tolerations
from rules.kube.volumes import SELECTED_NODE, WAIT_FOR_FIRST_CONSUMER, ClaimVolume, node_local_terms, storage_class_of
from rules.loadaffinity.entries import load_affinity_problems
from rules.loadaffinity.nodeagents import restrict_to_node_agents, warn_selected_node
from rules.loadaffinity.source import and_source_terms
from rules.loadaffinity.velero import VeleroConfigError, read_config
from rules.memo import Memo, digest, json_weight
from rules.messages import counted
from rules.model import Json
from rules.policy import Policy
from rules.roles import untrusted_role
from rules.safeload import JsonError, copy_json, load_json

GLOBAL = "*"
#: What chose a pod's nodes when no loadAffinity entry did (the node-agent step names it in warnings).
OWN_CONSTRAINTS = "its own constraints"


@dataclass(frozen=True)
class LoadSettings:
    """The lists in force for one pod, and where they came from (for reasons and warnings)."""

    load_affinity: tuple[Json, ...]
    backup_pvc: Mapping[str, Json] = field(default_factory=dict)
    restore_pvc: Mapping[str, Any] = field(default_factory=dict)
    source: str = "policy"
    #: The ConfigMap's `tolerations`, which Velero puts on its data movers itself.
    tolerations: tuple[Json, ...] = ()


def mutate_backup(ctx: Context, target: PodTarget) -> None:
    _mutate(ctx, target, "backup")


def mutate_restore(ctx: Context, target: PodTarget) -> None:
    _mutate(ctx, target, "restore")


def _mutate(ctx: Context, target: PodTarget, role: str) -> None:
    if not target.role.trusted:  # the operator's tolerations and nodes go only where its `trust` says
        ctx.warn(untrusted_role(target.role, target.namespace, ctx.subject.user, kind=target.kind, policy=ctx.policy))
        ctx.reason(f"load affinity: not applied, role {role} is not trusted in namespace {target.namespace}")
        return
    scope = _place(ctx, target, role)
    if scope is not None:
        restrict_to_node_agents(ctx, target, scope, source_settings(ctx.view, ctx.policy)[0].tolerations)


def _place(ctx: Context, target: PodTarget, role: str) -> str | None:
    """Load affinity; what chose the pod's nodes, for the node-agent step (None: it was pinned and warned)."""
    add_tolerations(target, ctx.policy.tolerations)
    if role == "backup":
        and_source_terms(ctx, target)
    settings = settings_for(ctx, target)
    if settings is None:
        return OWN_CONSTRAINTS
    claim = first_claim(ctx, target)
    storage_class = resolve_storage_class(ctx, target, claim, settings, role)
    if role == "restore" and _delayed_binding(ctx, storage_class, settings):
        return _restore_without_affinity(ctx, target, storage_class or "", claim)
    load = load_terms_for(settings, storage_class)
    if not load.count:
        ctx.reason(f"load affinity: no {settings.source} loadAffinity entry for class {storage_class or 'unknown'}")
        return OWN_CONSTRAINTS
    apply_terms(ctx, target, load, target.volumes(ctx.view))
    target.patch.set("metadata", "annotations", LOAD_AFFINITY_APPLIED, value=load.applied)
    ctx.audit("load-affinity-applied", load.applied)
    ctx.reason(load.reason)
    return load.scope


@dataclass(frozen=True)
class LoadTerms:
    """The ORed terms of the entries selected for one class, with their memo key, and what the review says of
    them (the reason, and what chose the pod's nodes for the node-agent step)."""

    count: int
    applied: str
    terms: list[Json]
    key: Hashable
    reason: str = ""
    scope: str = ""


#: Load terms depend only on the entry list (the policy's or the ConfigMap's, never modified), its source and the
#: class.
_LOAD_TERMS: Memo[LoadTerms] = Memo(256, budget=2 << 20, weigh=lambda load: json_weight(load.terms))


def load_terms_for(settings: LoadSettings, storage_class: str | None) -> LoadTerms:
    def compute() -> LoadTerms:
        selected, applied = select_entries(settings.load_affinity, storage_class)
        parts = []
        for entry in selected:
            deadline.check()
            parts.append(label_selector_term(entry["nodeSelector"]))
        terms = simplify(parts)
        scope = "class " + applied if applied != GLOBAL else "every class"
        reason = f"load affinity: {counted(len(selected), f'{settings.source} entry')} for {scope} (ORed)"
        return LoadTerms(len(selected), applied, terms, digest(terms_key(terms)), reason, f"loadAffinity for {scope}")

    if settings.source == "annotation":  # the pod's own list: a new object every review
        return compute()
    return _LOAD_TERMS.by_identity((settings.load_affinity,), (storage_class, settings.source), compute)


# --- configuration ------------------------------------------------------------------------------------------


def settings_for(ctx: Context, target: PodTarget) -> LoadSettings | None:
    """The pod annotation's list, else Velero's ConfigMap, else the policy's; None when the annotation is bad.

    A missing or invalid source ConfigMap falls back to the policy's own lists with a warning: the pod is still
    placed as the operator last configured it here, and the validating webhook has already refused a broken
    ConfigMap where it could.
    """
    settings = _source_settings(ctx)
    raw = (target.metadata.get("annotations") or {}).get(LOAD_AFFINITY)
    if raw is None:
        return settings
    at = target.field(f"metadata.annotations[{LOAD_AFFINITY}]")
    try:
        entries = load_json(raw)
    except JsonError:
        ctx.warn(f"{at} is not valid JSON: load affinity not applied")
        return None
    check_entries(entries, at)
    errors, unknown = load_affinity_problems(entries, "")
    if errors or unknown:
        ctx.warn(f"{at} is invalid: load affinity not applied")
        return None
    return LoadSettings(tuple(entries), settings.backup_pvc, settings.restore_pvc, "annotation", settings.tolerations)


def _source_settings(ctx: Context) -> LoadSettings:
    settings, problem = source_settings(ctx.view, ctx.policy)
    if problem:
        ctx.warn(problem)
    return settings


def source_settings(view: ClusterView, policy: Policy) -> tuple[LoadSettings, str]:
    """The lists in force for every pod without its own annotation, and why the policy's own are used if the
    source ConfigMap's are not (empty when all is well); the audit reads it too."""
    source = policy.load_affinity_source
    config_map = None if source is None else view.config_map(*source)
    return _SETTINGS.by_identity((policy, config_map), None, lambda: _settings_of(policy, config_map))


#: The settings in force, made once per policy and version of Velero's ConfigMap: the cluster state replaces a
#: changed ConfigMap rather than changing it, and a new policy is a new object. Reading the ConfigMap per review
#: parsed and checked its JSON for every backup pod, and gave the load terms memo a new entry list (so a miss)
#: every time.
_SETTINGS: Memo[tuple[LoadSettings, str]] = Memo(16)


def _settings_of(policy: Policy, config_map: Json | None) -> tuple[LoadSettings, str]:
    own = LoadSettings(policy.load_affinity, policy.backup_pvc, policy.restore_pvc, "policy")
    if policy.load_affinity_source is None:
        return own, ""
    namespace, name = policy.load_affinity_source
    if config_map is None:
        return own, f"loadAffinitySource ConfigMap {namespace}/{name} not found: using the policy's own lists"
    try:
        config = read_config(config_map)
    except VeleroConfigError:
        return own, f"loadAffinitySource ConfigMap {namespace}/{name} is invalid: using the policy's own lists"
    found = LoadSettings(
        config.load_affinity, config.backup_pvc, config.restore_pvc, f"{namespace}/{name}", config.tolerations
    )
    return found, ""


# --- storage class ------------------------------------------------------------------------------------------


def first_claim(ctx: Context, target: PodTarget) -> ClaimVolume | None:
    """The pod's first claim volume (a generic ephemeral volume counts): its class is the pod's (design step 1)."""
    volumes = target.volumes(ctx.view)
    return volumes[0] if volumes else None


def resolve_storage_class(
    ctx: Context, target: PodTarget, claim: ClaimVolume | None, settings: LoadSettings, role: str
) -> str | None:
    """The annotation, else the first claim's class (never its PV's, as in Velero); for backups the backupPVC
    class wins (design step 1)."""
    annotated = (target.metadata.get("annotations") or {}).get(STORAGE_CLASS)
    if isinstance(annotated, str) and dns1123_subdomain_error(annotated) is None:
        storage_class: str | None = annotated
    elif claim is None:
        storage_class = None
    elif claim.pvc is None and not claim.ephemeral:
        ctx.warn(f"claim {claim.claim} not found: its StorageClass is unknown, only global loadAffinity entries apply")
        storage_class = None
    else:
        storage_class = storage_class_of(claim, target.spec)
    if role == "backup" and storage_class is not None:
        override = (settings.backup_pvc.get(storage_class) or {}).get("storageClass")
        if override:
            ctx.reason(f"load affinity: backupPVC[{storage_class}] makes the backup PVC's class {override}")
            storage_class = str(override)
    return storage_class


def select_entries(entries: Sequence[Json], storage_class: str | None) -> tuple[list[Json], str]:
    """Every entry for the class, else every global entry (design step 3); with the annotation value."""
    if storage_class:
        own = [entry for entry in entries if entry.get("storageClass") == storage_class]
        if own:
            return own, storage_class
    return [entry for entry in entries if not entry.get("storageClass")], GLOBAL


# --- restore with delayed binding ---------------------------------------------------------------------------


def _delayed_binding(ctx: Context, storage_class: str | None, settings: LoadSettings) -> bool:
    """Whether the restore PVC waits for its first consumer, so Velero uses the selected node instead."""
    if not storage_class:
        return False
    sc = ctx.view.storage_class(storage_class)
    if sc is None:
        ctx.warn(f"StorageClass {storage_class} not found: its binding mode is unknown, load affinity applies")
        return False
    return (
        sc.get("volumeBindingMode") == WAIT_FOR_FIRST_CONSUMER
        and settings.restore_pvc.get("ignoreDelayBinding") is not True
    )


def _restore_without_affinity(
    ctx: Context, target: PodTarget, storage_class: str, claim: ClaimVolume | None
) -> str | None:
    ctx.warn(
        f"load affinity skipped: StorageClass {storage_class} is {WAIT_FOR_FIRST_CONSUMER} and "
        "restorePVC.ignoreDelayBinding is not true"
    )
    annotations = ((claim.pvc if claim else None) or {}).get("metadata", {}).get("annotations") or {}
    node = annotations.get(SELECTED_NODE)
    if not node or claim is None:
        ctx.reason("load affinity: restore claim has no selected node yet; the pod is left to the scheduler")
        return OWN_CONSTRAINTS
    mode = pin_restore_pod_to_node(ctx, target, str(node))
    ctx.reason(f"load affinity: pinned to node {node} selected for claim {claim.claim} ({mode})")
    warn_selected_node(ctx, target, str(node))
    return None


def pin_restore_pod_to_node(ctx: Context, target: PodTarget, node_name: str) -> str:
    """Place the pod on `node_name` with the placement modes shared with co-scheduling (coscheduling/pinning.py)."""
    existing = target.patch.get("spec", "nodeName")
    if existing:
        if existing != node_name:
            ctx.warn(f"spec.nodeName {existing} differs from the selected node {node_name}; left unchanged")
        return "nodeName already set"
    mode = placement_mode(ctx, target)
    if mode == NODE_SELECTOR:
        current = dict(target.patch.get("spec", "nodeSelector", default=None) or {})
        mode, selector = hostname_selector(ctx, target, node_name, current)
        if mode == NODE_SELECTOR:
            target.patch.set("spec", "nodeSelector", value=selector)
            return mode
    elif mode == NODE_NAME:
        volumes = target.volumes(ctx.view)
        if not (why := node_name_unsafe(volumes, target.spec)):
            target.patch.set("spec", "nodeName", value=node_name)
            return mode
        ctx.warn(f"{target.field('spec.nodeName')}: not used, {why}; pinned by requiredAffinity")
    write_required(target, pin_terms(current_terms(target), node_name))
    return REQUIRED_AFFINITY


# --- terms and tolerations ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Combined:
    """The pod's required terms after step 5, and whether they differ from what it has.

    Changed terms are built once per set of inputs as an alias-free tree (a cross product shares requirement
    objects between terms, and a shared object in a patch value surfaces as a YAML alias in `review -o yaml`) and
    are written into each review's patch as they are: a patch value is never modified (applying a patch copies
    its values), so the copy `write_required` makes per review, the budget count and the key are made here once.
    """

    terms: list[Json]
    key: Hashable
    changed: bool
    #: What the changed terms have past the review budget (rules/budget.py), or None.
    excess: str | None = None


#: Backup pods of one class and zone (or node, for local PVs) get the same terms: the AND is computed once.
_COMBINED: Memo[Combined] = Memo(1024, budget=4 << 20, weigh=lambda combined: json_weight(combined.terms))


def combine_terms(current: list[Json] | None, load: LoadTerms, volumes: Sequence[ClaimVolume]) -> Combined:
    """AND the load terms with the pod's required terms and those of its node-local PVs (design step 5);
    unchanged when implied.

    Remembered by the identity of the PVs (index objects, replaced when they change: their terms are a function
    of them) and the structural keys of the pod's terms and of the load terms."""
    local = [volume for volume in volumes if volume.pv_terms is not None]

    def compute() -> Combined:
        pv_terms = node_local_terms(local)
        if current is not None and all(terms_imply(current, terms) for terms in [load.terms, *pv_terms]):
            return Combined(current, digest(terms_key(current)), changed=False)
        result = current
        for terms in [*pv_terms, load.terms]:
            deadline.check()
            result = and_terms(result, terms)
        assert result is not None
        return Combined(copy_json(result), digest(terms_key(result)), changed=True, excess=terms_excess(result))

    current_key = None if current is None else terms_key(current)
    return _COMBINED.by_identity(tuple(volume.pv for volume in local), (current_key, load.key), compute)


#: Whether the terms load affinity writes leave a node: on labels, every key (the terms are the policy's and the
#: PVs', the pod's own only where they imply them).
_LABELS = on_labels(EVERY_LABEL, volumes=False)


def apply_terms(ctx: Context, target: PodTarget, load: LoadTerms, volumes: Sequence[ClaimVolume]) -> None:
    combined = combine_terms(current_terms(target), load, volumes)
    if combined.changed:
        if combined.excess is not None:
            raise placement_over_budget(combined.excess, target.field("spec." + ".".join(REQUIRED)))
        write_required(target, combined.terms, prepared=True)
    nodes = ctx.view.node_set()
    if len(nodes) and not Feasibility(nodes, _LABELS, terms=combined.terms, key=("terms", combined.key)).any():
        ctx.warn(
            f"load affinity leaves none of the {counted(len(nodes), 'known node')} for this pod: it would stay Pending"
        )


def add_tolerations(target: PodTarget, tolerations: Sequence[Json]) -> None:
    """docs/design.md#5-load-affinity, step 6: the policy's tolerations the pod lacks, compared on all five fields."""
    current = list(target.patch.get("spec", "tolerations", default=None) or [])
    merged = merge_policy_tolerations(current, tolerations, target.field("spec.tolerations"))
    if merged:
        target.patch.set("spec", "tolerations", value=merged)
