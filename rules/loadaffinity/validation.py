"""Validating rules for load affinity settings (docs/design.md#6-validation, LoadAffinity): Velero's node-agent
ConfigMap, the cluster-dependent warnings on the policy ConfigMap, and a backup/restore pod's own
`load-affinity` annotation.

Shape errors deny (family `loadAffinity`, relaxable by policy); what depends on the cluster only warns, because the
missing StorageClass or Node may simply not exist yet.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from rules.annotations import LOAD_AFFINITY, STORAGE_CLASS
from rules.budget import check_entries
from rules.checks.policy import loaded_policy
from rules.cluster import ClusterView
from rules.context import Context, PodTarget
from rules.kube.names import dns1123_subdomain_error
from rules.kube.selectors import Problem
from rules.kube.volumes import WAIT_FOR_FIRST_CONSUMER
from rules.loadaffinity.entries import backup_pvc_cluster_problems, entry_cluster_problems
from rules.loadaffinity.nodeagents import entry_node_agent_problems, velero_namespace
from rules.loadaffinity.velero import config_document, config_problems
from rules.model import Json, Severity
from rules.policy import POLICY_KEY, POLICY_LABEL, Policy, PolicyError
from rules.safeload import JsonError, load_json

FAMILY = "loadAffinity"


def velero_config_map(ctx: Context, config_map: Json) -> None:
    """The node-agent ConfigMap the policy reads (`loadAffinitySource.configMap`), checked as Velero reads it."""
    source = ctx.policy.load_affinity_source
    meta = config_map.get("metadata") or {}
    namespace = ctx.subject.namespace or str(meta.get("namespace") or "")
    if source is None or (namespace, meta.get("name")) != source:
        return
    ctx.reason("Velero node-agent ConfigMap (the policy's loadAffinitySource): checked as Velero reads it")
    errors, unknown = config_problems(config_map)
    for path, message in errors:
        ctx.report(path, message, FAMILY)
    _warn(ctx, unknown)
    try:
        key, doc = config_document(config_map)
    except ValueError:
        return
    base = f"data[{key}]"
    entries = doc.get("loadAffinity")
    if isinstance(entries, list):
        _warn(ctx, entry_cluster_problems(entries, f"{base}.loadAffinity", ctx.view))
    _warn(ctx, backup_pvc_cluster_problems(doc.get("backupPVC"), f"{base}.backupPVC", ctx.view))
    _warn(ctx, _cache_class_problems(doc.get("cachePVC"), f"{base}.cachePVC.storageClass", ctx.view, ctx.policy))
    if isinstance(entries, list):
        # The node-agent ConfigMap lives in Velero's namespace, with its node-agents.
        agents_in = velero_namespace(ctx.policy, namespace)
        _warn(ctx, entry_node_agent_problems(entries, f"{base}.loadAffinity", ctx.view, ctx.policy, agents_in))


def _cache_class_problems(cache: Any, path: str, view: ClusterView, policy: Policy) -> list[Problem]:
    """A `cachePVC` StorageClass that does not exist (every restore's cache claim would stay Pending), or one of a
    node-local driver that binds at once: Velero creates the cache claim before its restore pod, so its volume
    lands on a node chosen without the restore's target, and the pod, which needs both, may fit nowhere."""
    target = cache.get("storageClass") if isinstance(cache, Mapping) else None
    if not isinstance(target, str) or not target or dns1123_subdomain_error(target) is not None:
        return []
    sc = view.storage_class(target)
    if sc is None:
        return [(path, f'StorageClass "{target}" does not exist in the cluster')]
    if sc.get("provisioner") in policy.node_local_drivers and sc.get("volumeBindingMode") != WAIT_FOR_FIRST_CONSUMER:
        return [
            (
                path,
                f"StorageClass {target} is node-local ({sc.get('provisioner')}) and binds at once: a cache volume "
                f"would be made before its restore pod, on any node; use {WAIT_FOR_FIRST_CONSUMER}",
            )
        ]
    return []


def policy_config_map_cluster(ctx: Context, config_map: Json) -> None:
    """The policy's own lists against the cluster; shape errors are the policy rule's business."""
    labels = (config_map.get("metadata") or {}).get("labels") or {}
    if not isinstance(labels, Mapping) or labels.get(POLICY_LABEL) != "true":
        return
    policy = loaded_policy(ctx, config_map)
    if isinstance(policy, PolicyError):
        return
    base = f"data[{POLICY_KEY}]"
    _warn(ctx, entry_cluster_problems(policy.load_affinity, f"{base}.loadAffinity", ctx.view))
    _warn(ctx, backup_pvc_cluster_problems(policy.backup_pvc, f"{base}.backupPVC", ctx.view))
    agents_in = policy.velero_namespace
    _warn(ctx, entry_node_agent_problems(policy.load_affinity, f"{base}.loadAffinity", ctx.view, policy, agents_in))


def load_affinity_annotations(ctx: Context, target: PodTarget) -> None:
    """A backup/restore pod's `load-affinity` and `storage-class` annotations against the cluster.

    The entries of a role the policy does not trust are never evaluated against the nodes: none of them is applied,
    and whether a selector the pod's author wrote matches a node would tell that author about the nodes' labels
    (docs/design.md#13-what-a-review-may-tell). They are still counted and checked in shape.
    """
    role = target.role
    if role.role not in ("backup", "restore"):
        return
    annotations = target.metadata.get("annotations") or {}
    old = _old_annotations(ctx, target)
    raw = annotations.get(LOAD_AFFINITY)
    if isinstance(raw, str) and old.get(LOAD_AFFINITY) != raw:
        try:
            entries: Any = load_json(raw)
        except JsonError:
            entries = None  # reported by the annotation rule
        if isinstance(entries, list):
            at = target.field(f"metadata.annotations[{LOAD_AFFINITY}]")
            check_entries(entries, at)
            _warn(ctx, entry_cluster_problems(entries, at, ctx.view, against_nodes=role.trusted))
            if entries and not role.trusted:
                _warn(ctx, [(at, f"not checked against the nodes: role {role.role} is not trusted in this namespace")])
    storage_class = annotations.get(STORAGE_CLASS)
    changed = isinstance(storage_class, str) and storage_class and old.get(STORAGE_CLASS) != storage_class
    if changed and ctx.view.storage_class(str(storage_class)) is None:
        at = target.field(f"metadata.annotations[{STORAGE_CLASS}]")
        _warn(ctx, [(at, f'StorageClass "{storage_class}" does not exist in the cluster')])


def _old_annotations(ctx: Context, target: PodTarget) -> Mapping[str, Any]:
    if ctx.subject.operation != "UPDATE" or target.is_template:
        return {}
    return ((ctx.subject.old or {}).get("metadata") or {}).get("annotations") or {}


def _warn(ctx: Context, problems: list[Problem]) -> None:
    for path, message in problems:
        ctx.report(path, message, FAMILY, Severity.WARN)
